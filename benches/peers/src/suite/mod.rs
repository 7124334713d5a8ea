//! The suite (`--suite`) and its run: the nets built, checked against PyTorch, then timed in
//! rounds. Seven nets of different shapes, each in constmat and in PyTorch (eager, one thread)
//! from the same weights and data, checked against each other, then timed side by side: a
//! training step, the forward pass of one sample and that of 1,000 samples.
//!
//! Each net is written twice, side by side in [`nets`]: as a constmat `net!` type, and as a list
//! of [`Op`](nets::Op)s from which `peers.py suite` builds the same `nn.Sequential`. Before
//! anything runs, the harness checks that the `Op`s give exactly the tensors of the `net!` type
//! (names as PyTorch numbers them, and shapes), and `peers.py` checks them against its model's
//! `state_dict`, so the two descriptions cannot drift apart.
//!
//! The parts: [`nets`] the nets' definitions, [`runner`] their data and constmat's form of them,
//! [`checks`] the comparison with PyTorch's results, [`report`] the figures and the tables.

mod checks;
mod figure;
mod nets;
mod report;
mod runner;

use std::hint::black_box;
use std::time::Instant;

use serde_json::json;

use crate::Options;
use crate::common::{EVAL, measure};

use checks::{NetReport, compare, constmat_report, python_report};
use figure::FIGURES;
use nets::{NETS, NetDef};
use report::print_tables;
use runner::{SuiteData, SuiteNet};

/// Training steps of the checks: the loss after this many plain-SGD steps (learning rate
/// [`LR`]) on the net's training batch is compared.
const CHECK_STEPS: usize = 5;

/// The learning rate of the training steps (timed and checked). Lower than the harness's
/// `STEP_LR`: at 0.01 the wide convolutional nets' loss jumps up for the first steps (the 7x7
/// stem's from 4.4 to 19 after 5 steps), which amplifies rounding differences in the checks;
/// at 0.001 every net's loss goes down from the first step. The times do not depend on it.
const LR: f32 = 0.001;

/// One round of constmat: every net's figures, in seconds per run.
fn measure_constmat(nets: &mut [Box<dyn SuiteNet>], options: &Options) -> Vec<[f64; 3]> {
    let budget = options.budget.per_workload;
    nets.iter_mut()
        .map(|net| {
            // Repeated steps on one batch, from the initial weights every round.
            net.reset();
            let train = measure(budget, || {
                black_box(net.step(LR));
            });
            net.reset();
            let single = measure(budget, || {
                black_box(net.forward_single());
            });
            let eval = measure(budget, || {
                black_box(net.forward_eval());
            });
            net.release_eval();
            [train, single, eval]
        })
        .collect()
}

/// The nets asked for (`--nets`, else all).
fn selected(options: &Options) -> Result<Vec<&'static NetDef>, String> {
    let all = NETS;
    match &options.nets {
        None => Ok(all.iter().collect()),
        Some(keys) => {
            for key in keys {
                if !all.iter().any(|d| d.key == key) {
                    let known: Vec<&str> = all.iter().map(|d| d.key).collect();
                    return Err(format!(
                        "--nets: no net named `{key}` (the suite's: {})",
                        known.join(", ")
                    ));
                }
            }
            Ok(all
                .iter()
                .filter(|d| keys.iter().any(|k| k == d.key))
                .collect())
        }
    }
}

/// What `peers.py suite` reads on its standard input: a line of JSON (the nets, and what to
/// do), then for each net its weights, its samples (f32, little-endian) and its labels (u8).
fn python_input(
    mode: &str,
    options: &Options,
    defs: &[&NetDef],
    nets: &[Box<dyn SuiteNet>],
    data: &[SuiteData],
) -> Vec<u8> {
    let header = json!({
        "mode": mode,
        "budget": options.budget.per_workload.as_secs_f64(),
        "lr": LR,
        "check_steps": CHECK_STEPS,
        "eval": EVAL,
        "nets": defs.iter().map(|d| d.to_json()).collect::<Vec<_>>(),
    });
    let mut input = header.to_string().into_bytes();
    input.push(b'\n');
    for (net, data) in nets.iter().zip(data) {
        for v in net
            .initial_weights()
            .iter()
            .flat_map(|(_, tensor)| tensor)
            .chain(&data.inputs)
        {
            input.extend_from_slice(&v.to_le_bytes());
        }
        input.extend_from_slice(&data.labels);
    }
    input
}

/// Runs the suite; returns whether every check passed.
pub fn run(options: &Options, torch: Option<(String, String)>) -> Result<bool, String> {
    let start = Instant::now();
    let defs = selected(options)?;

    // constmat's nets, and the checks that the ops describe them.
    let mut data = Vec::new();
    let mut nets: Vec<Box<dyn SuiteNet>> = Vec::new();
    for def in &defs {
        let d = SuiteData::new(def.input_len(), def.seed);
        let net = (def.make)(def.seed, &d);
        if net.tensors() != def.expected_tensors() {
            return Err(format!(
                "suite net `{}`: its ops describe the tensors {:?}, its net! type has {:?}",
                def.key,
                def.expected_tensors(),
                net.tensors()
            ));
        }
        if net.batch() != def.batch {
            return Err(format!(
                "suite net `{}`: batch {} in its definition, {} in its type",
                def.key,
                def.batch,
                net.batch()
            ));
        }
        data.push(d);
        nets.push(net);
    }

    println!(
        "- {} nets, each with the same initial weights (constmat's initialization from a fixed seed, handed to PyTorch) and the same data ({EVAL} random samples, values uniform in [-1, 1), random labels) in constmat and PyTorch",
        defs.len()
    );
    println!(
        "- training step: forward, softmax cross-entropy, backward, plain SGD (learning rate {LR}), repeated on the first samples, from the initial weights every round (constmat: `nn::Trainer`; PyTorch: autograd, `torch.optim.SGD`)"
    );
    println!(
        "- forward, batch 1: the first sample (constmat: `Layer::forward_with_scratch`, its scratch allocated once; PyTorch: under `inference_mode`, the better of oneDNN on and off)"
    );
    println!(
        "- forward, batch {EVAL}: every sample (constmat: `Train::<f32, {EVAL}>::forward_train` into a heap workspace; PyTorch: under `inference_mode`)"
    );
    if torch.is_none() {
        println!("- note: PyTorch is not available, so only constmat's figures are shown");
    }
    println!();

    // The checks.
    println!("## Checks: PyTorch vs constmat, from the same weights and data");
    println!();
    println!("```");
    let mut all_ok = true;
    let mut torch_failed = None;
    let reports: Vec<NetReport> = nets
        .iter_mut()
        .map(|n| constmat_report(n.as_mut()))
        .collect();
    if let Some((python, _)) = &torch {
        let input = python_input("check", options, &defs, &nets, &data);
        match crate::python::suite(python, &input) {
            Ok(value) => {
                for (def, reference) in defs.iter().zip(&reports) {
                    match python_report(&value["nets"][def.key]) {
                        Ok(report) => all_ok &= compare(def.key, &report, reference),
                        Err(e) => {
                            println!("check {:<9} could not run: {e}", def.key);
                            all_ok = false;
                        }
                    }
                }
            }
            Err(e) => {
                println!("check torch could not run: {e}");
                all_ok = false;
                torch_failed = Some(e);
            }
        }
    }
    println!("```");
    println!();

    // The rounds: constmat and PyTorch alternate which goes first.
    let run_input = torch
        .as_ref()
        .filter(|_| torch_failed.is_none())
        .map(|(python, _)| (python, python_input("run", options, &defs, &nets, &data)));
    drop(data);
    // times[implementation][net][figure]: seconds per run, one per round.
    let mut times = vec![vec![[const { Vec::new() }; 3]; defs.len()]; 2];
    let mut torch_capability = None;
    let mut torch_error = None;
    for round in 0..options.rounds {
        let round_start = Instant::now();
        let mut order = vec!["constmat", "torch"];
        if round % 2 == 1 {
            order.reverse();
        }
        for &name in &order {
            if name == "constmat" {
                for (n, figures) in measure_constmat(&mut nets, options).into_iter().enumerate() {
                    for (f, t) in figures.into_iter().enumerate() {
                        times[0][n][f].push(t);
                    }
                }
                continue;
            }
            let Some((python, input)) = &run_input else {
                continue;
            };
            if torch_error.is_some() {
                continue;
            }
            match crate::python::suite(python, input) {
                Ok(value) => {
                    torch_capability = value["cpu_capability"].as_str().map(String::from);
                    for (n, def) in defs.iter().enumerate() {
                        for (f, figure) in FIGURES.iter().enumerate() {
                            match value["nets"][def.key][figure.key()].as_f64() {
                                Some(t) => times[1][n][f].push(t),
                                None => {
                                    torch_error =
                                        Some(format!("no {} for {}", figure.key(), def.key));
                                }
                            }
                        }
                    }
                }
                Err(e) => torch_error = Some(e),
            }
            if let Some(e) = &torch_error {
                eprintln!("torch: {e}; left out from now on");
            }
        }
        eprintln!(
            "round {}/{} ({}) in {:.1} s",
            round + 1,
            options.rounds,
            order.join(", "),
            round_start.elapsed().as_secs_f64()
        );
    }

    print_tables(
        options,
        &defs,
        &times,
        torch.as_ref(),
        torch_capability.as_deref(),
    );
    println!();
    println!("total time {:.0} s", start.elapsed().as_secs_f64());
    Ok(all_ok)
}
