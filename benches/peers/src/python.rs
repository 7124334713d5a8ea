//! The Python peers (NumPy, PyTorch): `peers.py` run as a subprocess, reporting JSON; and how
//! every Python script of the harness is run (`imported.py` too).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use constmat::kernels::InstructionSet;

use serde_json::Value;

use crate::check::{CHECK_STEPS, NetReport, Report};
use crate::common::{BATCH, Context, EVAL, SHUFFLE, Source, Times, workloads};

/// The script beside this crate's manifest.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers.py")
}

/// What `peers.py probe` found.
pub struct Probe {
    /// The Python peers available, with their versions: `("numpy", "2.4.6")`.
    pub available: Vec<(String, String)>,
    /// Lines to show the user (what is missing and how to install it, which BLAS, ...).
    pub notes: Vec<String>,
}

/// A Python peer: one library, measured by one subprocess per round.
pub struct PythonPeer {
    pub python: String,
    /// `numpy` or `torch`.
    pub library: String,
}

/// The instruction set the Python peers are held to, when `--instruction-set` asked for one.
static HELD_TO: OnceLock<InstructionSet> = OnceLock::new();

/// Holds every Python peer started from now on to `set`, as `--instruction-set` holds
/// constmat's kernels, so that both columns of a comparison run on the same instructions.
pub fn hold_to(set: InstructionSet) {
    let _ = HELD_TO.set(set);
}

/// The variables that hold PyTorch to `set`: ATen's own kernels, oneDNN's (convolutions) and
/// MKL's (matrix products; without it MKL keeps AVX-512 where ATen was held to AVX2, 164
/// against 103 GFLOP/s for 1000 x 784 x 512 on a Xeon). None for AVX-512, which PyTorch takes
/// by itself where the CPU has it (and holding oneDNN to it would forbid the extensions it
/// may use beyond). Each one the user set is kept.
pub fn isa_variables(set: InstructionSet) -> &'static [(&'static str, &'static str)] {
    match set {
        InstructionSet::Avx512 => &[],
        InstructionSet::Avx2 => &[
            ("ATEN_CPU_CAPABILITY", "avx2"),
            ("ONEDNN_MAX_CPU_ISA", "AVX2"),
            ("MKL_ENABLE_INSTRUCTIONS", "AVX2"),
        ],
        // The reference loops, and any set a later constmat adds: the oldest x86-64 paths.
        _ => &[
            ("ATEN_CPU_CAPABILITY", "default"),
            ("ONEDNN_MAX_CPU_ISA", "SSE41"),
            ("MKL_ENABLE_INSTRUCTIONS", "SSE4_2"),
        ],
    }
}

/// `peers.py` in the environment of [`command_for`].
fn command(python: &str) -> Command {
    command_for(python, &script())
}

/// The Python script `script` in the environment of every subprocess: one thread for every
/// BLAS and OpenMP runtime, and the instruction set of [`hold_to`].
pub fn command_for(python: &str, script: &Path) -> Command {
    let mut command = Command::new(python);
    command.arg(script);
    for var in [
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    ] {
        command.env(var, "1");
    }
    if let Some(&set) = HELD_TO.get() {
        for &(var, value) in isa_variables(set) {
            if std::env::var_os(var).is_none() {
                command.env(var, value);
            }
        }
    }
    command
}

/// Runs `command` (feeding it `input`), and parses its standard output as JSON.
pub fn run_json(mut command: Command, input: Option<&[u8]>) -> Result<Value, String> {
    // The script's name, for the messages.
    let script = command
        .get_args()
        .next()
        .and_then(|s| Path::new(s).file_name())
        .map_or_else(|| "the script".into(), |s| s.to_string_lossy().into_owned());
    command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
    if let Some(input) = input {
        // Written from another thread so that a child writing a lot to stdout cannot deadlock.
        let mut stdin = child.stdin.take().expect("stdin was piped");
        let input = input.to_vec();
        std::thread::spawn(move || stdin.write_all(&input));
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {script}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{script} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "{script} printed something that is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
                .chars()
                .take(300)
                .collect::<String>()
        )
    })
}

/// Asks `peers.py` which libraries it can use.
pub fn probe(python: &str) -> Result<Probe, String> {
    let mut command = command(python);
    command.arg("probe");
    let value = run_json(command, None)?;
    let mut available = Vec::new();
    for library in ["numpy", "torch"] {
        if let Some(version) = value[library].as_str() {
            available.push((library.to_string(), version.to_string()));
        }
    }
    let notes = notes(&value);
    Ok(Probe { available, notes })
}

impl PythonPeer {
    /// One round: every workload, in a fresh interpreter.
    pub fn measure(&self, ctx: &Context) -> Result<Times, String> {
        let mut command = command(&self.python);
        command.args([
            "run",
            "--impl",
            &self.library,
            "--budget",
            &ctx.budget.per_workload.as_secs_f64().to_string(),
            "--epoch-steps",
            &ctx.budget.epoch_steps.to_string(),
        ]);
        match &ctx.data.source {
            Source::Mnist(dir) => command.args(["--mnist", dir]),
            Source::Synthetic => command.arg("--synthetic"),
        };
        let value = run_json(command, None)?;
        let mut times = Vec::new();
        for w in workloads() {
            match value["results"][w.key()].as_f64() {
                Some(seconds) => times.push((w, seconds)),
                // Only PyTorch has the CNN and an int8 MLP.
                None if w.is_optional() => {}
                None => return Err(format!("{}: no result for {}", self.library, w.key())),
            }
        }
        Ok(times)
    }

    /// The same computations as [`crate::check::rust_report`], from the same weights and data,
    /// sent on the script's standard input.
    pub fn check(&self, ctx: &Context) -> Result<Report, String> {
        let mut input = ctx.weights.to_le_bytes();
        input.extend(ctx.cnn_weights.to_le_bytes());
        let count = (CHECK_STEPS * BATCH).max(EVAL);
        let n = ctx.data.split.len();
        let indices: Vec<usize> = (0..count).map(|p| (p * SHUFFLE) % n).collect();
        for &i in &indices {
            input.extend_from_slice(ctx.data.split.image(i));
        }
        input.extend(indices.iter().map(|&i| ctx.data.split.label(i)));

        let mut command = command(&self.python);
        command.args([
            "check",
            "--impl",
            &self.library,
            "--steps",
            &CHECK_STEPS.to_string(),
            "--count",
            &count.to_string(),
        ]);
        let value = run_json(command, Some(&input))?;
        let library = &self.library;
        let net_report = |net: &Value| -> Result<NetReport, String> {
            let float = |key: &str| {
                net[key]
                    .as_f64()
                    .map(|v| v as f32)
                    .ok_or_else(|| format!("{library}: no {key} in the check report"))
            };
            let floats = |key: &str| {
                net[key]
                    .as_str()
                    .ok_or_else(|| format!("{library}: no {key} in the check report"))
                    .and_then(hex_f32)
            };
            Ok(NetReport {
                loss_first: float("loss_first")?,
                loss_after_step: float("loss_after_step")?,
                mean_loss: float("mean_loss")?,
                logits_single: floats("logits_single")?,
                logits_eval: floats("logits_eval")?,
            })
        };
        let mut gemm = Vec::new();
        for &(m, k, n) in &crate::common::GEMM_SHAPES {
            let key = format!("gemm_{m}x{k}x{n}");
            let c = value["gemm"][&key]
                .as_str()
                .ok_or_else(|| format!("{library}: no {key} in the check report"))
                .and_then(hex_f32)?;
            gemm.push(((m, k, n), c));
        }
        Ok(Report {
            gemm,
            mlp: net_report(&value)?,
            cnn: match &value["cnn"] {
                Value::Null => None,
                cnn => Some(net_report(cnn)?),
            },
        })
    }
}

/// The `notes` a Python script's report gives (lines for the output's header), or none.
pub fn notes(value: &Value) -> Vec<String> {
    value["notes"]
        .as_array()
        .map(|notes| {
            notes
                .iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `peers.py suite` (the suite's checks or one round of its timings, as `input`'s first
/// line says) and returns its JSON report.
pub fn suite(python: &str, input: &[u8]) -> Result<Value, String> {
    let mut command = command(python);
    command.arg("suite");
    run_json(command, Some(input))
}

/// Little-endian `f32`s written as hexadecimal (`numpy`'s `tobytes().hex()`).
pub fn hex_f32(hex: &str) -> Result<Vec<f32>, String> {
    let bytes: Result<Vec<u8>, _> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("?"), 16))
        .collect();
    let bytes = bytes.map_err(|e| format!("bad hexadecimal from peers.py: {e}"))?;
    if bytes.len() % 4 != 0 {
        return Err("peers.py sent a partial float".into());
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}
