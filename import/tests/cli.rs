//! The command line: its exit codes, and that a model it cannot import writes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_constmat-import"))
        .args(args)
        .output()
        .unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_and_bad_command_lines() {
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit codes:"));
    for (args, says) in [
        (&[][..], "no model given"),
        (&["m.tflite"][..], "no --out DIR given"),
        (
            &["m.tflite", "--out", "x", "--name", "Not-A-Module"][..],
            "is not a module name",
        ),
        (&["m.tflite", "--verbose"][..], "unknown option --verbose"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_missing_file_is_exit_code_1_and_a_corrupt_one_2_with_nothing_written() {
    let dir = scratch("corrupt");
    let out = run(&["no-such-model.tflite", "--out", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let model = dir.join("corrupt.tflite");
    std::fs::write(&model, b"TFL3 but not really a model").unwrap();
    let written = dir.join("written");
    let out = run(&[model.to_str().unwrap(), "--out", written.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a valid TensorFlow Lite model"),
        "{}",
        stderr(&out)
    );
    assert!(!written.exists(), "nothing is written");
}

#[test]
fn a_model_is_written_as_two_files() {
    let dir = match std::env::var_os("MLPERF_TINY_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/mlperf-tiny"),
    };
    let model = dir.join("kws_ref_model.tflite");
    if !model.exists() {
        eprintln!("skipped: no {} (set MLPERF_TINY_DIR)", model.display());
        return;
    }
    let out_dir = scratch("written");
    let out = run(&[model.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The name defaults to the file's, as a module name.
    let source = std::fs::read_to_string(out_dir.join("kws_ref_model.rs")).unwrap();
    assert!(source.contains("constmat::include_net!(\"kws_ref_model.safetensors\")"));
    assert!(out_dir.join("kws_ref_model.safetensors").exists());
}
