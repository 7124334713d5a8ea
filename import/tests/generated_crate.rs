//! The files the importer writes, used as a user would: put in the `src/` of a `#![no_std]`
//! library crate with `mod NAME;`, which builds as it is, passes `clippy -D warnings`, and
//! whose `invoke`, given TensorFlow Lite's input tensors, gives the reference interpreters'
//! outputs: TensorFlow Lite Micro's bit for bit for the int8 models (on the inputs of
//! `tests/fixtures/mlperf-*-io.safetensors` and on `fixtures/reference.py`'s 1,000), LiteRT's
//! for the f32 one.

mod common;

use common::model;
use std::path::Path;
use std::process::Command;

/// The scratch crate's program: `invoke` on inputs in TensorFlow Lite's order, from the
/// fixture `io` (NCHW samples, as constmat's tests keep them) or, for `reference`, made by
/// `fixtures/reference.py`'s generator; prints how many outputs differ from the fixture's and
/// the largest difference relative to the sample's largest output.
const MAIN: &str = r#"//! Runs `invoke` on inputs in TensorFlow Lite's order and compares with the reference outputs.
use constmat::format;
use scratch::model::{INPUT_LEN, OUTPUT_LEN, invoke};

type E = scratch::Element;

fn main() {
    let mut args = std::env::args().skip(1);
    let (kind, path) = (args.next().expect("io or reference"), args.next().expect("the fixture"));
    let bytes = std::fs::read(&path).expect("the fixture");
    let header = format::parse(&bytes).expect("a safetensors file");
    let tensor = |name: &str| header.find(name.as_bytes()).expect("the tensor").data.to_vec();
    let want: Vec<E> = tensor("output").chunks_exact(size_of::<E>()).map(scratch::from_le).collect();
    let (c, h, w) = scratch::SIZES;
    let fixture_inputs = (kind == "io").then(|| tensor("input"));
    let mut state = 0x2545_F491_u32;
    let (mut differing, mut worst) = (0, 0.0_f64);
    for (sample, want) in want.chunks(OUTPUT_LEN).enumerate() {
        let mut input = [scratch::from_byte(0); INPUT_LEN];
        for (i, value) in input.iter_mut().enumerate() {
            *value = match &fixture_inputs {
                // NCHW in the fixture, NHWC here.
                Some(x) => scratch::from_le(&[x[sample * c * h * w + (i % c) * h * w + i / c]]),
                None => {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    scratch::from_byte((state >> 24) as u8)
                }
            };
        }
        let mut output = [scratch::from_byte(0); OUTPUT_LEN];
        invoke(&input, &mut output);
        let largest = want.iter().map(|&v| f64::from(v).abs()).fold(0.0, f64::max);
        for (&a, &b) in output.iter().zip(want) {
            differing += usize::from(a != b);
            worst = worst.max((f64::from(a) - f64::from(b)).abs() / largest.max(f64::MIN_POSITIVE));
        }
    }
    println!(
        "samples {}, differing {differing}, largest relative difference {worst:e}, parameters {} bytes, working memory {} bytes",
        want.len() / OUTPUT_LEN,
        scratch::model::PARAMETER_BYTES,
        scratch::model::WORKING_BYTES
    );
}
"#;

/// Writes the scratch crate for `model` (imported as `model`) under the tests' scratch
/// directory, and builds, lints and runs it on the fixture `io`.
fn build_and_run(
    file: &str,
    int8: bool,
    sizes: (usize, usize, usize),
    runs: &[(&str, &str)],
) -> Vec<String> {
    let Some(bytes) = model(file) else {
        return Vec::new();
    };
    // One scratch build at a time: the crates share a target directory (constmat is built
    // once), where their programs, all named `scratch`, would overwrite each other.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let imported = constmat_import::import(&bytes, file, "model").unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join(file.replace('.', "_"));
    let src = scratch.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        scratch.join("Cargo.toml"),
        format!(
            "[package]\nname = \"scratch\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
             [dependencies]\nconstmat = {{ path = {:?}, default-features = false }}\n\n[workspace]\n",
            root.display().to_string()
        ),
    )
    .unwrap();
    // The workspace's versions of constmat's dependencies, so the build needs no network.
    std::fs::copy(root.join("Cargo.lock"), scratch.join("Cargo.lock")).unwrap();
    let element = if int8 {
        "i8;\n\n/// An `i8` from a fixture's byte, or from the generator's (its value minus 128).\n\
         pub fn from_byte(b: u8) -> Element {\n    (b ^ 0x80) as i8\n}\n\n\
         /// An `i8` from its byte.\npub fn from_le(b: &[u8]) -> Element {\n    b[0] as i8\n}\n"
    } else {
        "f32;\n\n/// The generator's pixel, 0 to 255.\npub fn from_byte(b: u8) -> Element {\n    f32::from(b)\n}\n\n\
         /// An `f32` from its little-endian bytes.\npub fn from_le(b: &[u8]) -> Element {\n    \
         f32::from_le_bytes([b[0], b[1], b[2], b[3]])\n}\n"
    };
    std::fs::write(
        src.join("lib.rs"),
        format!(
            "//! An imported model in a `no_std` crate without `alloc`.\n#![no_std]\n\n\
             pub mod model;\n\n/// The input's channels, height and width.\n\
             pub const SIZES: (usize, usize, usize) = {sizes:?};\n\n\
             /// The model's element type.\npub type Element = {element}"
        ),
    )
    .unwrap();
    std::fs::write(src.join("model.rs"), &imported.source).unwrap();
    std::fs::write(src.join("model.safetensors"), &imported.weights).unwrap();
    std::fs::write(src.join("main.rs"), MAIN).unwrap();

    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scratch-target");
    let cargo = |args: &[&str]| {
        let out = Command::new(env!("CARGO"))
            .arg(args[0])
            .arg("--offline")
            .args(&args[1..])
            .current_dir(&scratch)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "cargo {args:?} in {}:\n{text}",
            scratch.display()
        );
        text
    };
    cargo(&["clippy", "--lib", "--", "-D", "warnings"]);
    // Optimized: 1,000 predictions of the plain int8 loops take minutes in a debug build.
    runs.iter()
        .map(|(kind, fixture)| {
            let ran = cargo(&["run", "--release", "--quiet", "--", kind, fixture]);
            println!("{file}, {kind} {fixture}: {ran}");
            ran
        })
        .collect()
}

fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .to_str()
        .unwrap()
        .to_owned()
}

/// The number after `what` in the program's line.
fn figure(ran: &str, what: &str) -> f64 {
    let rest = &ran[ran.find(what).unwrap_or_else(|| panic!("{what} in {ran}")) + what.len()..];
    rest.split([',', ' '])
        .find(|s| !s.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_imported_dscnn_builds_and_matches_tflm() {
    let ran = build_and_run(
        "kws_ref_model.tflite",
        true,
        (1, 49, 10),
        &[
            (
                "io",
                &fixture("../tests/fixtures/mlperf-dscnn-int8-io.safetensors"),
            ),
            (
                "reference",
                &fixture("tests/fixtures/reference-kws_ref_model.safetensors"),
            ),
        ],
    );
    for ran in &ran {
        assert_eq!(figure(ran, "differing"), 0.0, "{ran}");
        // No more memory than under TensorFlow Lite Micro: its arena for the model, and the
        // `.tflite` file.
        assert!(figure(ran, "working memory") <= 24_272.0, "{ran}");
        assert!(figure(ran, "parameters") <= 53_936.0, "{ran}");
    }
    if let Some(last) = ran.last() {
        assert_eq!(figure(last, "samples"), 1000.0);
    }
}

#[test]
fn the_imported_resnet8_builds_and_matches_tflm() {
    let ran = build_and_run(
        "pretrainedResnet_quant.tflite",
        true,
        (3, 32, 32),
        &[
            (
                "io",
                &fixture("../tests/fixtures/mlperf-resnet8-int8-io.safetensors"),
            ),
            (
                "reference",
                &fixture("tests/fixtures/reference-pretrainedResnet_quant.safetensors"),
            ),
        ],
    );
    for ran in &ran {
        assert_eq!(figure(ran, "differing"), 0.0, "{ran}");
        // No more memory than under TensorFlow Lite Micro: its arena for the model, and the
        // `.tflite` file.
        assert!(figure(ran, "working memory") <= 55_984.0, "{ran}");
        assert!(figure(ran, "parameters") <= 98_496.0, "{ran}");
    }
    if let Some(last) = ran.last() {
        assert_eq!(figure(last, "samples"), 1000.0);
    }
}

/// The f32 outputs against LiteRT's, relative to each sample's largest probability, over the
/// 1,000 inputs: at most 1e-5, the importer's goal (7.7e-6 measured; TensorFlow Lite Micro's
/// own outputs differ from LiteRT's by up to 4.1e-6, `fixtures/reference.py`). The crate has
/// no `std`, so the convolutions run on the portable loops, which sum each channel's products
/// before adding them up (summed in one run, they differed by up to 1.07e-5).
#[test]
fn the_imported_f32_resnet8_builds_and_matches_litert() {
    let ran = build_and_run(
        "pretrainedResnet.tflite",
        false,
        (3, 32, 32),
        &[(
            "reference",
            &fixture("tests/fixtures/reference-pretrainedResnet.safetensors"),
        )],
    );
    for ran in &ran {
        assert_eq!(figure(ran, "samples"), 1000.0);
        assert!(figure(ran, "largest relative difference") <= 1e-5, "{ran}");
    }
}
