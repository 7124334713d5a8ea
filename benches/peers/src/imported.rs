//! The imported models (`--imported`): MLPerf Tiny's DS-CNN (int8) and ResNet-8 (int8 and f32),
//! turned into Rust modules by constmat-import at build time (`build.rs`), their `invoke`
//! timed on one input against LiteRT's interpreter (one thread, XNNPACK) and TensorFlow Lite
//! Micro's (reference kernels), both driven from Python by `imported.py`.
//!
//! Every implementation gets the same input, made by the generator of constmat-import's
//! reference outputs (`import/tests/fixtures/reference.py`), and the outputs are checked before
//! the timing: TensorFlow Lite Micro's int8 outputs bit for bit (its reference kernels are the
//! specification), LiteRT's within one quantum; f32 outputs within 1e-5 of the largest.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Options;
use crate::check::relative_difference;
use crate::common::measure;
use crate::python::{command_for, hex_f32, notes, run_json};

/// The modules `build.rs` wrote, and [`built::models`], the list of the models.
mod built {
    include!(concat!(env!("OUT_DIR"), "/imported.rs"));
}

/// A model, as the build found it.
pub struct Model {
    /// Its module's name.
    pub key: &'static str,
    /// Its row in the table.
    pub label: &'static str,
    /// The `.tflite` file the module was imported from, which the interpreters load.
    pub path: &'static str,
    pub compiled: Result<Box<dyn Compiled>, Skip>,
}

/// Why a model has no module (`build.rs` says so in a warning too).
#[allow(
    dead_code,
    reason = "built only by the list build.rs writes when a model is missing or fails"
)]
pub enum Skip {
    /// The model's file was not found at build time.
    Missing(&'static str),
    /// The file was there but could not be imported: a failure, not a skip.
    Failed(&'static str),
}

/// The first value of the generator's state (`reference.py`'s seed).
#[cfg_attr(no_imported_model, allow(dead_code, reason = "no model was imported"))]
const SEED: u32 = 0x2545_F491;

/// The element types of the models.
#[cfg_attr(no_imported_model, allow(dead_code, reason = "no model was imported"))]
pub trait Element: Copy + Default + 'static {
    /// NumPy's name of it.
    const DTYPE: &'static str;
    /// The input value made from the generator's top byte: an int8 `-128..=127`, an f32 pixel
    /// `0..=255` (the f32 ResNet-8 takes raw pixels: no normalizing operator precedes its first
    /// convolution).
    fn from_top_byte(byte: u8) -> Self;
    fn to_f64(self) -> f64;
    fn extend_le(self, bytes: &mut Vec<u8>);
}

impl Element for i8 {
    const DTYPE: &'static str = "int8";
    fn from_top_byte(byte: u8) -> Self {
        (i16::from(byte) - 128) as i8
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn extend_le(self, bytes: &mut Vec<u8>) {
        bytes.extend(self.to_le_bytes());
    }
}

impl Element for f32 {
    const DTYPE: &'static str = "float32";
    fn from_top_byte(byte: u8) -> Self {
        f32::from(byte)
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn extend_le(self, bytes: &mut Vec<u8>) {
        bytes.extend(self.to_le_bytes());
    }
}

/// A model's generated module, seen through its `invoke`.
pub trait Compiled {
    /// NumPy's name of its element type.
    fn dtype(&self) -> &'static str;
    fn input_len(&self) -> usize;
    fn output_len(&self) -> usize;
    /// The input, little-endian, in TensorFlow Lite's order.
    fn input_bytes(&self) -> Vec<u8>;
    /// One `invoke`; the output.
    fn output(&mut self) -> Vec<f64>;
    /// The mean seconds of one `invoke` under the harness's timing rule.
    fn time(&mut self, budget: Duration) -> f64;
    /// The module's `PARAMETER_BYTES` and `WORKING_BYTES`.
    fn memory(&self) -> (usize, usize);
}

/// A generated module's `invoke`, with its input (the generator's first `I` values) and its
/// output on the heap.
#[cfg_attr(no_imported_model, allow(dead_code, reason = "no model was imported"))]
struct Module<E, const I: usize, const O: usize> {
    invoke: fn(&[E; I], &mut [E; O]),
    input: Box<[E; I]>,
    output: Box<[E; O]>,
    parameter_bytes: usize,
    working_bytes: usize,
}

/// The module of `invoke`, for `built::models`.
#[cfg_attr(no_imported_model, allow(dead_code, reason = "no model was imported"))]
pub fn module<E: Element, const I: usize, const O: usize>(
    invoke: fn(&[E; I], &mut [E; O]),
    parameter_bytes: usize,
    working_bytes: usize,
) -> Box<dyn Compiled> {
    let mut input = Box::new([E::default(); I]);
    // xorshift32, as `reference.py`: TensorFlow Lite's order, the top byte of each state.
    let mut state = SEED;
    for value in input.iter_mut() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        *value = E::from_top_byte((state >> 24) as u8);
    }
    Box::new(Module {
        invoke,
        input,
        output: Box::new([E::default(); O]),
        parameter_bytes,
        working_bytes,
    })
}

impl<E: Element, const I: usize, const O: usize> Compiled for Module<E, I, O> {
    fn dtype(&self) -> &'static str {
        E::DTYPE
    }

    fn input_len(&self) -> usize {
        I
    }

    fn output_len(&self) -> usize {
        O
    }

    fn input_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(I * size_of::<E>());
        for &v in self.input.iter() {
            v.extend_le(&mut bytes);
        }
        bytes
    }

    fn output(&mut self) -> Vec<f64> {
        *self.output = [E::default(); O];
        (self.invoke)(&self.input, &mut self.output);
        self.output.iter().map(|&v| v.to_f64()).collect()
    }

    fn time(&mut self, budget: Duration) -> f64 {
        let invoke = self.invoke;
        measure(budget, || {
            invoke(black_box(&self.input), &mut self.output);
            black_box(&mut self.output);
        })
    }

    fn memory(&self) -> (usize, usize) {
        (self.parameter_bytes, self.working_bytes)
    }
}

/// A TensorFlow Lite interpreter of `imported.py`.
struct Interpreter {
    /// `imported.py`'s name for it.
    key: &'static str,
    /// Its column.
    name: &'static str,
    version: String,
}

/// The interpreters `imported.py` can drive, with notes for what it cannot.
fn probe(python: &str) -> Result<(Vec<Interpreter>, Vec<String>), String> {
    let mut command = command_for(python, &script());
    command.arg("probe");
    let value = run_json(command, None)?;
    let interpreters = [("litert", "LiteRT"), ("tflm", "TFLM")]
        .into_iter()
        .filter_map(|(key, name)| {
            value[key].as_str().map(|version| Interpreter {
                key,
                name,
                version: version.to_string(),
            })
        })
        .collect();
    let notes = notes(&value);
    Ok((interpreters, notes))
}

/// The script beside this crate's manifest.
fn script() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("imported.py")
}

/// What `imported.py run` reads: a line of JSON, then every model's input.
fn python_input(mode: &str, key: &str, budget: Duration, models: &[Model]) -> Vec<u8> {
    let mut specs = Vec::new();
    let mut inputs = Vec::new();
    for model in models {
        if let Ok(compiled) = &model.compiled {
            specs.push(json!({
                "key": model.key,
                "path": model.path,
                "dtype": compiled.dtype(),
                "len": compiled.input_len(),
            }));
            inputs.extend(compiled.input_bytes());
        }
    }
    let header = json!({
        "mode": mode,
        "impl": key,
        "budget": budget.as_secs_f64(),
        "models": specs,
    });
    let mut input = header.to_string().into_bytes();
    input.push(b'\n');
    input.extend(inputs);
    input
}

/// Runs `imported.py run` (the checks, or one round of the timings, as `input` says).
fn run_python(python: &str, input: &[u8]) -> Result<Value, String> {
    let mut command = command_for(python, &script());
    command.arg("run");
    run_json(command, Some(input))
}

/// An interpreter's output of a model from its check report.
fn python_output(value: &Value, dtype: &str) -> Result<Vec<f64>, String> {
    if dtype == "int8" {
        value
            .as_array()
            .ok_or("no output")?
            .iter()
            .map(|v| v.as_f64().ok_or_else(|| format!("not a number: {v}")))
            .collect()
    } else {
        let hex = value.as_str().ok_or("no output")?;
        Ok(hex_f32(hex)?.into_iter().map(f64::from).collect())
    }
}

/// Compares an interpreter's output with constmat's and prints the check's line; whether it
/// passed. int8: the largest difference in quanta, none against TensorFlow Lite Micro (the
/// specification), at most one against LiteRT (its optimized kernels round some
/// requantizations differently); f32: the largest difference relative to constmat's largest
/// output, at most 1e-5 (sums in different orders).
fn compare(label: &str, peer: &Interpreter, int8: bool, theirs: &[f64], ours: &[f64]) -> bool {
    let (detail, diff, tolerance, shown) = if theirs.len() != ours.len() {
        (
            format!("{} outputs, constmat {}", theirs.len(), ours.len()),
            f64::INFINITY,
            0.0,
            String::new(),
        )
    } else if int8 {
        let diff = ours
            .iter()
            .zip(theirs)
            .fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
        let (tolerance, what) = if peer.key == "tflm" {
            (0.0, "bit for bit")
        } else {
            (1.0, "within a quantum")
        };
        (
            format!("{} int8 outputs, {what}", ours.len()),
            diff,
            tolerance,
            format!("max diff {diff:.0} (tol {tolerance:.0})"),
        )
    } else {
        let ours32: Vec<f32> = ours.iter().map(|&v| v as f32).collect();
        let theirs32: Vec<f32> = theirs.iter().map(|&v| v as f32).collect();
        let diff = relative_difference(&theirs32, &ours32);
        (
            format!("{} f32 outputs", ours.len()),
            diff,
            1e-5,
            format!("rel. diff {diff:8.1e} (tol 1e-5)"),
        )
    };
    // NaN never passes.
    let ok = diff <= tolerance;
    println!(
        "check {label:<14} {:<7} {detail:<34} {shown} {}",
        peer.name,
        if ok { "ok" } else { "FAILED" }
    );
    ok
}

/// Runs the set; returns whether every check passed.
pub fn run(options: &Options) -> Result<bool, String> {
    let start = Instant::now();
    let mut models = built::models();
    let budget = options.budget.per_workload;

    println!("- machine: {}", crate::machine());
    println!("- constmat's kernels: {}", crate::kernels_used(options));
    println!(
        "- batch 1, one thread everywhere; {} rounds, each model's call repeated for {:.2} s per round (after a warm-up of a tenth of that); constmat, LiteRT and TFLM take turns going first",
        options.rounds,
        budget.as_secs_f64(),
    );
    let mut all_ok = true;
    for model in &models {
        match &model.compiled {
            Ok(c) => {
                let (parameters, working) = c.memory();
                println!(
                    "- {}: {} ({}, {} inputs, {} outputs); constmat's module: {} B of parameters, {} B of working memory",
                    model.label,
                    model.path,
                    c.dtype(),
                    c.input_len(),
                    c.output_len(),
                    crate::format_figure(parameters as f64),
                    crate::format_figure(working as f64),
                );
            }
            Err(Skip::Missing(why)) => println!("- {}: skipped: {why}", model.label),
            Err(Skip::Failed(why)) => {
                println!("- {}: FAILED to import: {why}", model.label);
                all_ok = false;
            }
        }
    }
    if !models.iter().any(|m| m.compiled.is_ok()) {
        println!();
        println!("Nothing to measure: no model was imported (see above).");
        return Ok(all_ok);
    }
    println!(
        "- the input: the generator of import/tests/fixtures/reference.py (xorshift32 seeded 0x2545F491, the top byte of each state: int8 minus 128, f32 pixels 0..=255), in TensorFlow Lite's order (NHWC)"
    );
    let mut peers = Vec::new();
    match &options.python {
        Some(python) => match probe(python) {
            Ok((found, notes)) => {
                for note in notes {
                    println!("- note: {note}");
                }
                peers = found;
            }
            Err(e) => println!("- note: LiteRT and TFLM are left out: {e}"),
        },
        None => println!("- note: LiteRT and TFLM are left out (--no-python)"),
    }
    if let Some(only) = &options.only {
        for name in only {
            if name != "constmat" && !peers.iter().any(|p| p.key == name) {
                return Err(format!(
                    "--only: no interpreter named `{name}` here (litert, tflm)"
                ));
            }
        }
        peers.retain(|p| only.iter().any(|n| n == p.key));
    }
    for peer in &peers {
        println!(
            "- {}",
            match peer.key {
                "litert" => format!(
                    "LiteRT: ai-edge-litert {}, `Interpreter(num_threads=1)` with its default delegate (XNNPACK); a call is `set_tensor`, `invoke`, `get_tensor`",
                    peer.version
                ),
                _ => format!(
                    "TFLM: tflite-micro {}, TensorFlow Lite Micro's Python interpreter (reference kernels); a call is `set_input`, `invoke`, `get_output`",
                    peer.version
                ),
            }
        );
    }
    if let Some(set) = options.instruction_set
        && !peers.is_empty()
    {
        println!(
            "- note: --instruction-set {set} holds constmat's kernels only: XNNPACK picks its own from the CPU's features, and TFLM's reference kernels are plain C++"
        );
    }
    if let Some(python) = &options.python {
        println!("- Python: {python}");
    }
    println!();

    // The checks.
    println!("## Checks: the interpreters' outputs vs constmat's, on the same input");
    println!();
    println!("```");
    let python = options.python.clone().unwrap_or_default();
    if peers.is_empty() {
        println!("no interpreter to check constmat's outputs against");
    }
    let mut outputs = Vec::new();
    for model in &mut models {
        outputs.push(model.compiled.as_mut().ok().map(|c| c.output()));
    }
    let mut broken = vec![None; peers.len()];
    for (p, peer) in peers.iter().enumerate() {
        let input = python_input("check", peer.key, budget, &models);
        let value = match run_python(&python, &input) {
            Ok(value) => value,
            Err(e) => {
                println!("check {:<14} could not run: {e}", peer.name);
                all_ok = false;
                broken[p] = Some(e);
                continue;
            }
        };
        for (model, ours) in models.iter().zip(&outputs) {
            let (Ok(compiled), Some(ours)) = (&model.compiled, ours) else {
                continue;
            };
            match python_output(&value["models"][model.key], compiled.dtype()) {
                Ok(theirs) => {
                    let int8 = compiled.dtype() == "int8";
                    all_ok &= compare(model.label, peer, int8, &theirs, ours);
                }
                Err(e) => {
                    println!("check {:<14} {:<7} no output: {e}", model.label, peer.name);
                    all_ok = false;
                }
            }
        }
    }
    println!("```");
    println!();

    // The rounds: constmat and the interpreters take turns going first.
    let run_inputs: Vec<Vec<u8>> = peers
        .iter()
        .map(|p| python_input("run", p.key, budget, &models))
        .collect();
    let names: Vec<&str> = std::iter::once("constmat")
        .chain(peers.iter().map(|p| p.name))
        .collect();
    // times[implementation][model]: seconds per call, one per round.
    let mut times = vec![vec![Vec::new(); models.len()]; names.len()];
    for round in 0..options.rounds {
        let round_start = Instant::now();
        let mut order = Vec::new();
        for k in 0..names.len() {
            let i = (round + k) % names.len();
            if i == 0 {
                for (m, model) in models.iter_mut().enumerate() {
                    if let Ok(compiled) = &mut model.compiled {
                        times[0][m].push(compiled.time(budget));
                    }
                }
                order.push(names[0]);
                continue;
            }
            let peer = &peers[i - 1];
            if broken[i - 1].is_some() {
                continue;
            }
            order.push(peer.name);
            let result = run_python(&python, &run_inputs[i - 1]).and_then(|value| {
                models
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.compiled.is_ok())
                    .map(|(m, model)| {
                        value["models"][model.key]
                            .as_f64()
                            .map(|t| (m, t))
                            .ok_or_else(|| format!("no time for {}", model.key))
                    })
                    .collect::<Result<Vec<_>, _>>()
            });
            match result {
                Ok(figures) => {
                    for (m, t) in figures {
                        times[i][m].push(t);
                    }
                }
                Err(e) => {
                    eprintln!("{}: {e}; left out from now on", peer.name);
                    broken[i - 1] = Some(e);
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

    print_table(options, &models, &names, &times);
    if options.raw {
        print_rounds(&models, &names, &times);
    }
    println!();
    println!("total time {:.0} s", start.elapsed().as_secs_f64());
    Ok(all_ok)
}

/// The table: each model's median time per call, and the interpreters' over constmat's.
fn print_table(options: &Options, models: &[Model], names: &[&str], times: &[Vec<Vec<f64>>]) {
    println!(
        "## Results: median of {} rounds, µs per call (lower is better)",
        options.rounds
    );
    println!();
    println!(
        "`X / constmat` is the interpreter's time over constmat's: above 1, constmat is faster. \
         The spread is each column's slowest round over its fastest, minus one."
    );
    println!();
    let peers = &names[1..];
    let mut header = String::from("| model | constmat µs |");
    let mut rule = String::from("| --- | ---: |");
    for name in peers {
        header += &format!(" {name} µs |");
        rule += " ---: |";
    }
    for name in peers {
        header += &format!(" {name} / constmat |");
        rule += " ---: |";
    }
    header += &format!(" spread {} |", names.join(" / "));
    rule += " ---: |";
    println!("{header}");
    println!("{rule}");
    for (m, model) in models.iter().enumerate() {
        if let Err(skip) = &model.compiled {
            let why = match skip {
                Skip::Missing(_) => "skipped (not found)",
                Skip::Failed(_) => "FAILED to import",
            };
            println!(
                "| {} | {why} |{}",
                model.label,
                " |".repeat(2 * peers.len() + 1)
            );
            continue;
        }
        let medians: Vec<Option<f64>> = times.iter().map(|t| crate::median(&t[m])).collect();
        let mut row = format!("| {} |", model.label);
        for t in &medians {
            match t {
                Some(t) => row += &format!(" {} |", crate::format_figure(t * 1e6)),
                None => row += " n/a |",
            }
        }
        for t in &medians[1..] {
            match (t, medians[0]) {
                (Some(t), Some(c)) => row += &format!(" {:.2}x |", t / c),
                _ => row += " n/a |",
            }
        }
        let spreads: Vec<String> = times
            .iter()
            .map(|t| {
                let t = &t[m];
                if t.is_empty() {
                    return "n/a".into();
                }
                let min = t.iter().copied().fold(f64::INFINITY, f64::min);
                let max = t.iter().copied().fold(0.0, f64::max);
                format!("{:.0}%", (max / min - 1.0) * 100.0)
            })
            .collect();
        row += &format!(" {} |", spreads.join(" / "));
        println!("{row}");
    }
}

/// Every round's figure, µs per call, in the order of the rounds.
fn print_rounds(models: &[Model], names: &[&str], times: &[Vec<Vec<f64>>]) {
    println!();
    println!("### Every round (µs per call)");
    println!();
    println!("| model | {} |", names.join(" | "));
    println!("| --- |{}", " ---: |".repeat(names.len()));
    for (m, model) in models.iter().enumerate() {
        let mut row = format!("| {} |", model.label);
        for per_peer in times {
            let figures: Vec<String> = per_peer[m]
                .iter()
                .map(|&t| crate::format_figure(t * 1e6))
                .collect();
            row += &format!(" {} |", figures.join(" / "));
        }
        println!("{row}");
    }
}
