//! MLPerf Tiny's keyword-spotting DS-CNN (`kws_ref_model.tflite`, int8), imported by
//! constmat-import into `kws.rs` and `kws.safetensors` beside this file, classifies one input
//! of 49 frames of 10 MFCC features and prints the 12 classes' probabilities and the net's
//! memory.
//!
//! ```text
//! cargo run --release --example keyword_spotting [-- FILE]
//! ```
//!
//! `FILE` holds the model's input tensor as TensorFlow Lite takes it: 490 bytes, int8, frame
//! after frame. Without it, the program classifies `mfcc-like.bin`, a synthetic field of
//! MFCC-like features (from `tests/fixtures/tflm_mlperf_dscnn.py`: no speech data ships with
//! constmat). The two module files were written by
//!
//! ```text
//! cargo run --release -p constmat-import -- kws_ref_model.tflite --out examples/keyword_spotting --name kws
//! ```
//!
//! and `import/tests/mlperf.rs` checks that they are what the importer writes today.

mod kws;

use std::process::ExitCode;

/// The classes, in the model's order (MLPerf Tiny's keyword-spotting labels).
const LABELS: [&str; 12] = [
    "down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes", "silence", "unknown",
];

/// The built-in input.
const MFCC_LIKE: &[u8; kws::INPUT_LEN] = include_bytes!("mfcc-like.bin");

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bytes = match &args[..] {
        [] => MFCC_LIKE.to_vec(),
        [flag] if flag == "-h" || flag == "--help" => {
            println!("Usage: cargo run --release --example keyword_spotting [-- FILE]");
            println!(
                "FILE: the model's int8 input, {} bytes (49 frames of 10 MFCCs)",
                kws::INPUT_LEN
            );
            return ExitCode::SUCCESS;
        }
        [path] => match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("error: {path}: {e}");
                return ExitCode::from(1);
            }
        },
        _ => {
            eprintln!("error: one input file at most (see --help)");
            return ExitCode::from(2);
        }
    };
    let Ok(input) = <[u8; kws::INPUT_LEN]>::try_from(&bytes[..]) else {
        eprintln!(
            "error: the input holds {} bytes; the model takes {} (49 frames of 10 int8 MFCCs)",
            bytes.len(),
            kws::INPUT_LEN
        );
        return ExitCode::from(1);
    };
    let input = input.map(|b| b as i8);
    let mut scores = [0_i8; kws::OUTPUT_LEN];
    kws::invoke(&input, &mut scores);

    // The int8 softmax's output: probability (q + 128) / 256.
    let probability = |q: i8| (f32::from(q) + 128.0) / 256.0;
    let best = (0..kws::OUTPUT_LEN).max_by_key(|&k| scores[k]).unwrap_or(0);
    for (label, &q) in LABELS.iter().zip(&scores) {
        println!("{label:>8}  {:5.1}%", 100.0 * probability(q));
    }
    println!("heard: {}", LABELS[best]);
    println!(
        "memory: {} bytes of parameters (the .tflite file: 53,936), {} bytes of working memory",
        kws::PARAMETER_BYTES,
        kws::WORKING_BYTES
    );
    ExitCode::SUCCESS
}
