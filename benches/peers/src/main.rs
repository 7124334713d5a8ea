//! constmat side by side with nalgebra, matrixmultiply, NumPy and PyTorch, in one run; and the
//! MLPerf Tiny models imported by constmat-import against LiteRT and TensorFlow Lite Micro.
//!
//! ```text
//! cargo run --release --manifest-path benches/peers/Cargo.toml -- [--rounds N] [--quick]
//! cargo run --release --manifest-path benches/peers/Cargo.toml -- --suite [--instruction-set avx2]
//! cargo run --release --manifest-path benches/peers/Cargo.toml -- --imported [--python PATH]
//! ```
//!
//! See `README.md` beside this crate's manifest for what is measured and how to read the table.

mod check;
mod cnn;
mod common;
mod constmat_peer;
mod imported;
mod mm_peer;
mod nalgebra_peer;
mod peer;
mod python;
mod suite;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use constmat::kernels::{self, INSTRUCTION_SET_VARIABLE, InstructionSet};
use constmat::nn::RandomInit;
use rand::{SeedableRng, rngs::StdRng};

use common::{Budget, Context, Data, EPOCH_STEPS, EVAL, Source, Times, Workload};
use peer::RustPeer;
use python::PythonPeer;

const USAGE: &str = "\
Benchmarks constmat side by side with nalgebra, matrixmultiply, NumPy and PyTorch.

Usage: cargo run --release --manifest-path benches/peers/Cargo.toml -- [OPTIONS]

Options:
  --suite          run the suite instead: eight nets (LeNet-5, the MNIST MLP, a CIFAR-style CNN,
                   a strided CNN, a wide MLP, 5x5 filters on 64 channels, a 7x7 stride-2 stem
                   and a 1x1 convolution, MLPerf Tiny's ResNet-8 with batch normalization),
                   each in constmat and PyTorch from the same weights and
                   data, checked, then a training step and forward passes of 1 and 1,000 samples
                   timed side by side against the goals (2x, 4x, 1.3x PyTorch's speed)
  --nets LIST      with --suite, only these nets, comma-separated: lenet, mlp, cifar, strided,
                   wide-mlp, conv5x5, stem7x7, resnet8, dscnn
  --imported       run the imported models instead: MLPerf Tiny's DS-CNN (int8) and ResNet-8
                   (int8, f32), imported by constmat-import at build time ($MLPERF_TINY_DIR),
                   constmat's generated `invoke` against LiteRT (one thread, XNNPACK) and
                   TensorFlow Lite Micro, batch 1, outputs checked, then timed side by side
                   (the Python interpreter needs ai-edge-litert and tflite-micro)
  --instruction-set SET
                   run constmat's kernels on this path: avx512, avx2 or portable (at most what
                   the CPU has; the output says which one ran). Below AVX-512, NumPy and
                   PyTorch are held to the same set (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA
                   and MKL_ENABLE_INSTRUCTIONS, each unless already set)
  --rounds N       rounds; each implementation runs every workload once per round, in an order
                   that rotates from round to round; the table shows medians (default 5)
  --quick          short measurements (0.05 s per workload, 20 epoch steps), for a smoke test
  --budget SECS    seconds spent repeating each workload per round (default 0.4)
  --epoch-steps N  training steps timed per round for the epoch figure (default 100)
  --python PATH    the Python interpreter (default: $PYTHON, else python3)
  --no-python      leave out the Python peers
  --only LIST      measure only these implementations, comma-separated (constmat is always
                   measured: it is the reference), e.g. --only numpy; with --imported, litert
                   or tflm
  --raw            also print every round's figure
  --peak GFLOPS    the machine's one-thread peak, for the CNN's share-of-peak table and the
                   suite's ratio at peak (default 148, the project's first machine; measure
                   yours with the probe in docs/performance.md, section The machine's peak)
  -h, --help       print this help

Environment: MNIST_DIR (the epoch workload and the checks use MNIST's training images from
there; random images otherwise; the suite always uses random data). MLPERF_TINY_DIR, at build
time (the models of --imported; default ../../../shared/mlperf-tiny beside the crate's
manifest; without them --imported skips them). CONSTMAT_INSTRUCTION_SET
(portable, avx2, avx512) limits constmat's kernels too, for the whole process; the lower of it
and --instruction-set wins.
";

struct Options {
    rounds: usize,
    budget: Budget,
    python: Option<String>,
    only: Option<Vec<String>>,
    raw: bool,
    /// The one-thread peak the CNN's rates are compared with, in GFLOP/s.
    peak_gflops: f64,
    /// Run the suite (`suite/`) instead of the default workloads.
    suite: bool,
    /// The suite's nets to run (all when `None`).
    nets: Option<Vec<String>>,
    /// Run the imported models (`imported.rs`) instead of the default workloads.
    imported: bool,
    /// The instruction set constmat's kernels are limited to.
    instruction_set: Option<InstructionSet>,
}

fn parse_options() -> Result<Option<Options>, String> {
    let mut rounds = 5;
    let mut budget = None;
    let mut epoch_steps = None;
    let mut quick = false;
    let mut only = None;
    let mut raw = false;
    let mut peak_gflops = DEFAULT_PEAK_GFLOPS;
    let mut suite = false;
    let mut nets = None;
    let mut imported = false;
    let mut instruction_set = None;
    let mut python = Some(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()));
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--rounds" => {
                let v = value()?;
                rounds =
                    v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("--rounds: expected a positive number, found `{v}`")
                    })?;
            }
            "--quick" => quick = true,
            "--budget" => {
                let v = value()?;
                let seconds: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("--budget: expected positive seconds, found `{v}`"))?;
                budget = Some(Duration::from_secs_f64(seconds));
            }
            "--epoch-steps" => {
                let v = value()?;
                epoch_steps = Some(v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    format!("--epoch-steps: expected a positive number, found `{v}`")
                })?);
            }
            "--python" => python = Some(value()?),
            "--no-python" => python = None,
            "--only" => {
                only = Some(value()?.split(',').map(|s| s.trim().to_string()).collect());
            }
            "--raw" => raw = true,
            "--suite" => suite = true,
            "--imported" => imported = true,
            "--nets" => {
                nets = Some(value()?.split(',').map(|s| s.trim().to_string()).collect());
            }
            "--instruction-set" => {
                let v = value()?;
                instruction_set = Some(InstructionSet::from_name(&v).ok_or_else(|| {
                    format!("--instruction-set: expected avx512, avx2 or portable, found `{v}`")
                })?);
            }
            "--peak" => {
                let v = value()?;
                peak_gflops = v
                    .parse()
                    .ok()
                    .filter(|g: &f64| g.is_finite() && *g > 0.0)
                    .ok_or_else(|| format!("--peak: expected positive GFLOP/s, found `{v}`"))?;
            }
            other => return Err(format!("unknown option `{other}` (see --help)")),
        }
    }
    let (default_budget, default_steps) = if quick {
        (Duration::from_millis(50), 20)
    } else {
        (Duration::from_millis(400), 100)
    };
    Ok(Some(Options {
        rounds,
        budget: Budget {
            per_workload: budget.unwrap_or(default_budget),
            epoch_steps: epoch_steps.unwrap_or(default_steps),
        },
        python,
        only,
        raw,
        peak_gflops,
        suite,
        nets,
        imported,
        instruction_set,
    }))
}

/// An implementation measured in the rounds.
enum Peer {
    Rust(RustPeer),
    Python(PythonPeer),
}

impl Peer {
    fn name(&self) -> &str {
        match self {
            Peer::Rust(p) => p.name,
            Peer::Python(p) => &p.library,
        }
    }

    fn measure(&mut self, ctx: &Context) -> Result<Times, String> {
        match self {
            Peer::Rust(p) => Ok(p.measure(ctx)),
            Peer::Python(p) => p.measure(ctx),
        }
    }
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    // The whole run on the kernels asked for: this thread's limit (the harness runs constmat on
    // this one thread only).
    let result = match options.instruction_set {
        Some(set) => {
            python::hold_to(set);
            kernels::with_instruction_set(set, || run(&options))
        }
        None => run(&options),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!(
                "error: some checks failed (see the `check` lines): the figures compare different computations"
            );
            ExitCode::FAILURE
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs everything; returns whether every check passed.
fn run(options: &Options) -> Result<bool, String> {
    if options.nets.is_some() && !options.suite {
        return Err("--nets goes with --suite".into());
    }
    if options.suite && options.imported {
        return Err("--suite and --imported are two separate runs: give one".into());
    }
    if options.suite {
        return run_suite(options);
    }
    if options.imported {
        if cfg!(debug_assertions) {
            println!("WARNING: a debug build; run with --release for meaningful figures");
        }
        println!("# The imported MLPerf Tiny models: constmat, LiteRT and TensorFlow Lite Micro");
        println!();
        return imported::run(options);
    }
    let start = Instant::now();
    if cfg!(debug_assertions) {
        println!("WARNING: a debug build; run with --release for meaningful figures");
    }
    let data = Data::load()?;
    let weights =
        constmat_peer::weights_of(&constmat_peer::Net::random(&mut StdRng::seed_from_u64(42)));
    let ctx = Context {
        eval_inputs: data.standardized(EVAL),
        data,
        weights,
        cnn_weights: cnn::initial_weights(),
        budget: options.budget,
    };

    println!("# constmat and its peers, side by side");
    println!();
    println!("- machine: {}", machine());
    println!("- constmat's kernels: {}", kernels_used(options));
    println!(
        "- data: {}",
        match &ctx.data.source {
            Source::Mnist(dir) => format!("MNIST training images from {dir} (MNIST_DIR)"),
            Source::Synthetic => "random images (MNIST_DIR is not set)".into(),
        }
    );
    println!(
        "- every implementation single-threaded, f32; {} rounds, each workload repeated for {:.2} s per round (after a warm-up of a tenth of that); the epoch figure times {} steps per round and scales them to {EPOCH_STEPS}",
        options.rounds,
        options.budget.per_workload.as_secs_f64(),
        options.budget.epoch_steps
    );

    let mut peers = vec![
        Peer::Rust(constmat_peer::peer(&ctx.weights)),
        Peer::Rust(nalgebra_peer::peer(&ctx.weights)),
        Peer::Rust(mm_peer::peer(&ctx.weights)),
    ];
    let mut versions = vec![];
    if let Some(python) = &options.python {
        match python::probe(python) {
            Ok(probe) => {
                for note in &probe.notes {
                    println!("- note: {note}");
                }
                for (library, version) in probe.available {
                    versions.push(format!("{library} {version}"));
                    peers.push(Peer::Python(PythonPeer {
                        python: python.clone(),
                        library,
                    }));
                }
            }
            Err(e) => println!("- note: the Python peers are left out: {e}"),
        }
    } else {
        println!("- note: the Python peers are left out (--no-python)");
    }
    if let Some(only) = &options.only {
        for name in only {
            if !peers.iter().any(|p| p.name() == name) {
                return Err(format!("--only: no implementation named `{name}` here"));
            }
        }
        peers.retain(|p| p.name() == "constmat" || only.iter().any(|n| n == p.name()));
    }
    if !versions.is_empty() {
        println!("- Python peers: {}", versions.join(", "));
    }
    println!();

    // The checks.
    println!("## Checks: the same results from the same weights and data (vs constmat)");
    println!();
    println!("```");
    let mut all_ok = true;
    let mut reference = None;
    for peer in &mut peers {
        let report = match peer {
            Peer::Rust(p) => check::rust_report(p, &ctx),
            Peer::Python(p) => match p.check(&ctx) {
                Ok(report) => report,
                Err(e) => {
                    println!("check {:<14} could not run: {e}", p.library);
                    all_ok = false;
                    continue;
                }
            },
        };
        match &reference {
            None => reference = Some(report),
            Some(reference) => all_ok &= check::compare(peer.name(), &report, reference),
        }
    }
    println!("```");
    println!();

    // The rounds.
    let names: Vec<String> = peers.iter().map(|p| p.name().to_string()).collect();
    let workloads = common::workloads();
    // times[peer][workload]: seconds per iteration, one per round.
    let mut times = vec![vec![Vec::new(); workloads.len()]; peers.len()];
    let mut failed = vec![None; peers.len()];
    for round in 0..options.rounds {
        let round_start = Instant::now();
        let count = peers.len();
        let mut order = Vec::new();
        for k in 0..count {
            let p = (round + k) % count;
            if failed[p].is_some() {
                continue;
            }
            order.push(names[p].clone());
            match peers[p].measure(&ctx) {
                Ok(result) => {
                    for (w, seconds) in result {
                        let i = workloads.iter().position(|&x| x == w).expect("a workload");
                        times[p][i].push(seconds);
                    }
                }
                Err(e) => {
                    eprintln!("{}: {e}; left out from now on", names[p]);
                    failed[p] = Some(e);
                }
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

    print_tables(options, &names, &workloads, &times);
    if options.raw {
        print_rounds(options, &names, &workloads, &times);
    }
    println!();
    println!("total time {:.0} s", start.elapsed().as_secs_f64());
    Ok(all_ok)
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// A figure with about 3 significant digits.
fn format_figure(x: f64) -> String {
    if x >= 10_000.0 {
        let digits = format!("{x:.0}");
        // Thousands separators: 123456 -> 123,456.
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn print_tables(
    options: &Options,
    names: &[String],
    workloads: &[Workload],
    times: &[Vec<Vec<f64>>],
) {
    let steps = options.budget.epoch_steps;
    println!("## Results: median of {} rounds", options.rounds);
    println!();
    println!(
        "In parentheses: the implementation's speed relative to constmat's in the same run \
         (its figure over constmat's for throughputs, constmat's time over its time for \
         durations): 2.00x = twice as fast as constmat, 0.50x = half as fast."
    );
    println!();
    let mut header = String::from("| workload | unit |");
    let mut rule = String::from("| --- | --- |");
    for name in names {
        header += &format!(" {name} |");
        rule += " ---: |";
    }
    println!("{header}");
    println!("{rule}");
    for (i, &w) in workloads.iter().enumerate() {
        let arrow = if w.higher_is_better() {
            "higher is better"
        } else {
            "lower is better"
        };
        let mut row = format!("| {} | {} ({arrow}) |", w.label(steps), w.unit());
        let reference = median(&times[0][i]);
        for (p, _) in names.iter().enumerate() {
            match median(&times[p][i]) {
                None => row += " n/a |",
                Some(t) => {
                    let figure = format_figure(w.figure(t));
                    match reference {
                        Some(r) if p > 0 => row += &format!(" {figure} ({:.2}x) |", r / t),
                        _ => row += &format!(" {figure} |"),
                    }
                }
            }
        }
        println!("{row}");
    }
    print_cnn_rates(names, workloads, times, options.peak_gflops);
    println!();
    println!("### Spread across rounds");
    println!();
    println!(
        "Slowest round over fastest round, minus one: how much the machine's noise moved each \
         figure. A ratio above is only meaningful when it is well outside these."
    );
    println!();
    println!("{header}");
    println!("{rule}");
    for (i, &w) in workloads.iter().enumerate() {
        let mut row = format!("| {} | |", w.label(steps));
        for per_peer in times {
            let t = &per_peer[i];
            if t.is_empty() {
                row += " n/a |";
            } else {
                let min = t.iter().copied().fold(f64::INFINITY, f64::min);
                let max = t.iter().copied().fold(0.0, f64::max);
                row += &format!(" {:.0}% |", (max / min - 1.0) * 100.0);
            }
        }
        println!("{row}");
    }
}

/// The one-thread peak of the project's first machine (AVX-512 fused multiply-adds), measured
/// with a register-only FMA loop: the ceiling the CNN's arithmetic rates are compared with,
/// unless `--peak` gives this machine's.
const DEFAULT_PEAK_GFLOPS: f64 = 148.0;

/// The CNN's arithmetic rate per implementation: its multiply-adds (two flops each) over the
/// median times.
fn print_cnn_rates(
    names: &[String],
    workloads: &[Workload],
    times: &[Vec<Vec<f64>>],
    peak_gflops: f64,
) {
    let flops = |w: Workload| -> f64 {
        2.0 * match w {
            Workload::CnnEpoch => (cnn::TRAINING_MACS * common::BATCH * EPOCH_STEPS) as f64,
            Workload::CnnForward1 => cnn::FORWARD_MACS as f64,
            Workload::CnnForward1000 => (cnn::FORWARD_MACS * EVAL) as f64,
            _ => 0.0,
        }
    };
    println!();
    println!("### CNN: GFLOP/s achieved (share of the {peak_gflops:.0} GFLOP/s one-thread peak)");
    println!();
    println!(
        "{:.2} MFLOP per image forward, {:.2} MFLOP per image trained (two per multiply-add).",
        flops(Workload::CnnForward1) / 1e6,
        2.0 * cnn::TRAINING_MACS as f64 / 1e6
    );
    println!();
    let mut header = String::from("| workload |");
    let mut rule = String::from("| --- |");
    for name in names {
        header += &format!(" {name} |");
        rule += " ---: |";
    }
    println!("{header}");
    println!("{rule}");
    for (i, &w) in workloads.iter().enumerate() {
        if !w.is_cnn() {
            continue;
        }
        let mut row = format!("| {} |", w.label(0).split(" (").next().unwrap_or_default());
        for per_peer in times {
            match median(&per_peer[i]) {
                None => row += " n/a |",
                Some(t) => {
                    // The epoch's time per step covers one step of BATCH images.
                    let seconds = if w == Workload::CnnEpoch {
                        t * EPOCH_STEPS as f64
                    } else {
                        t
                    };
                    let rate = flops(w) / seconds / 1e9;
                    row += &format!(" {rate:.1} ({:.0}%) |", rate / peak_gflops * 100.0);
                }
            }
        }
        println!("{row}");
    }
}

/// Every round's figure, in the order of the rounds.
fn print_rounds(
    options: &Options,
    names: &[String],
    workloads: &[Workload],
    times: &[Vec<Vec<f64>>],
) {
    let steps = options.budget.epoch_steps;
    println!();
    println!("### Every round");
    println!();
    let mut header = String::from("| workload | unit |");
    let mut rule = String::from("| --- | --- |");
    for name in names {
        header += &format!(" {name} |");
        rule += " ---: |";
    }
    println!("{header}");
    println!("{rule}");
    for (i, &w) in workloads.iter().enumerate() {
        let mut row = format!("| {} | {} |", w.label(steps), w.unit());
        for per_peer in times {
            let figures: Vec<String> = per_peer[i]
                .iter()
                .map(|&t| format_figure(w.figure(t)))
                .collect();
            row += &format!(" {} |", figures.join(" / "));
        }
        println!("{row}");
    }
}

/// The suite (`--suite`): constmat and PyTorch on eight nets.
fn run_suite(options: &Options) -> Result<bool, String> {
    if cfg!(debug_assertions) {
        println!("WARNING: a debug build; run with --release for meaningful figures");
    }
    println!("# The suite: constmat and PyTorch side by side");
    println!();
    println!("- machine: {}", machine());
    println!("- constmat's kernels: {}", kernels_used(options));
    println!(
        "- one thread, f32; {} rounds, each figure repeated for {:.2} s per round (after a warm-up of a tenth of that); constmat and PyTorch alternate which goes first",
        options.rounds,
        options.budget.per_workload.as_secs_f64(),
    );
    let mut torch = None;
    match &options.python {
        Some(python) => match python::probe(python) {
            Ok(probe) => match probe.available.into_iter().find(|(l, _)| l == "torch") {
                Some((_, version)) => {
                    println!("- PyTorch {version} ({python})");
                    torch = Some((python.clone(), version));
                }
                None => println!(
                    "- note: PyTorch is not installed for {python}: {}",
                    probe.notes.join("; ")
                ),
            },
            Err(e) => println!("- note: PyTorch is left out: {e}"),
        },
        None => println!("- note: PyTorch is left out (--no-python)"),
    }
    if let Some(set) = options.instruction_set
        && !python::isa_variables(set).is_empty()
    {
        let held: Vec<String> = python::isa_variables(set)
            .iter()
            .map(|(var, value)| match std::env::var(var) {
                Ok(own) => format!("{var}={own} (yours)"),
                Err(_) => format!("{var}={value}"),
            })
            .collect();
        println!("- PyTorch held to {set}: {}", held.join(", "));
    }
    if options.only.is_some() {
        println!("- note: --only does not apply to the suite (constmat and PyTorch only)");
    }
    suite::run(options, torch)
}

/// The instruction set constmat's kernels run on (`kernels::instruction_set()`), with what was
/// asked and what the CPU has.
fn kernels_used(options: &Options) -> String {
    let used = kernels::instruction_set();
    let cpu = cpu_best();
    let mut asked = Vec::new();
    if let Some(set) = options.instruction_set {
        asked.push(format!("--instruction-set {set}"));
    }
    if let Ok(v) = std::env::var(INSTRUCTION_SET_VARIABLE) {
        asked.push(format!("{INSTRUCTION_SET_VARIABLE}={v}"));
    }
    let mut line = format!(
        "{used} (kernels::instruction_set(); this CPU's best: {cpu}; {})",
        if asked.is_empty() {
            "nothing asked".to_string()
        } else {
            format!("asked: {}", asked.join(", "))
        }
    );
    if let Some(set) = options.instruction_set
        && set > used
    {
        line += &format!(
            "; NOTE: {set} was asked for, but {}, so the kernels run on {used}",
            if set > cpu {
                format!("this CPU has no {set}")
            } else {
                format!("{INSTRUCTION_SET_VARIABLE} limits them")
            }
        );
    }
    line
}

/// The widest instruction set the CPU has, of those constmat's kernels use.
fn cpu_best() -> InstructionSet {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return InstructionSet::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return InstructionSet::Avx2;
        }
    }
    InstructionSet::Portable
}

/// The processor's name and how many the system shows.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown processor".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cpus} logical CPUs")
}
