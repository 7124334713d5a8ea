//! The files the importer writes, used as a user would: put in the `src/` of a `#![no_std]`
//! library crate with `mod NAME;`, which builds as it is, passes `clippy -D warnings`, and
//! whose `invoke`, given TensorFlow Lite's input tensors, gives TensorFlow Lite Micro's outputs
//! bit for bit (the inputs and outputs of `tests/fixtures/mlperf-*-io.safetensors`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The MLPerf Tiny model `file`, as `tests/mlperf.rs` finds it.
fn model(file: &str) -> Option<Vec<u8>> {
    let dir = match std::env::var_os("MLPERF_TINY_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/mlperf-tiny");
            if !dir.is_dir() {
                eprintln!(
                    "skipped: no MLPerf Tiny models at {} (set MLPERF_TINY_DIR)",
                    dir.display()
                );
                return None;
            }
            dir
        }
    };
    let path = dir.join(file);
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

const MAIN: &str = r#"//! Runs `invoke` on every input of a fixture (NCHW samples, as constmat's tests keep them),
//! given in TensorFlow Lite's NHWC order, and counts the outputs that differ from the fixture's.
use constmat::format;

fn main() {
    let path = std::env::args().nth(1).expect("the fixture's path");
    let bytes = std::fs::read(&path).expect("the fixture");
    let header = format::parse(&bytes).expect("a safetensors file");
    let tensor = |name: &str| -> Vec<i8> {
        header.find(name.as_bytes()).expect("the tensor").data.iter().map(|&b| b as i8).collect()
    };
    let (inputs, outputs) = (tensor("input"), tensor("output"));
    let (c, h, w) = scratch::SIZES;
    let mut differing = 0;
    for (sample, want) in outputs.chunks(scratch::model::OUTPUT_LEN).enumerate() {
        let nchw = &inputs[sample * c * h * w..][..c * h * w];
        let mut input = [0_i8; scratch::model::INPUT_LEN];
        for (i, value) in input.iter_mut().enumerate() {
            let (pixel, channel) = (i / c, i % c);
            *value = nchw[channel * h * w + pixel];
        }
        let mut output = [0_i8; scratch::model::OUTPUT_LEN];
        scratch::model::invoke(&input, &mut output);
        differing += output.iter().zip(want).filter(|(a, b)| a != b).count();
    }
    println!(
        "samples {}, differing {differing}, parameters {} bytes, working memory {} bytes",
        outputs.len() / scratch::model::OUTPUT_LEN,
        scratch::model::PARAMETER_BYTES,
        scratch::model::WORKING_BYTES
    );
    assert_eq!(differing, 0);
}
"#;

/// Writes the scratch crate for `model` (imported as `model`) under the tests' scratch
/// directory, and builds, lints and runs it on the fixture `io`.
fn build_and_run(file: &str, sizes: (usize, usize, usize), io: &str) {
    let Some(bytes) = model(file) else { return };
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
    std::fs::write(
        src.join("lib.rs"),
        format!(
            "//! An imported model in a `no_std` crate without `alloc`.\n#![no_std]\n\n\
             pub mod model;\n\n/// The input's channels, height and width.\n\
             pub const SIZES: (usize, usize, usize) = {sizes:?};\n"
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
    let fixture = root.join("tests/fixtures").join(io);
    let ran = cargo(&["run", "--quiet", "--", fixture.to_str().unwrap()]);
    assert!(ran.contains("differing 0"), "{ran}");
    println!("{file}: {ran}");
}

#[test]
fn the_imported_dscnn_builds_and_matches_tflm() {
    build_and_run(
        "kws_ref_model.tflite",
        (1, 49, 10),
        "mlperf-dscnn-int8-io.safetensors",
    );
}

#[test]
fn the_imported_resnet8_builds_and_matches_tflm() {
    build_and_run(
        "pretrainedResnet_quant.tflite",
        (3, 32, 32),
        "mlperf-resnet8-int8-io.safetensors",
    );
}
