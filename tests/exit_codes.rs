//! The MNIST examples' exit codes, from the programs themselves: 0 for `--help`, 2 for a bad
//! command line (nothing is run), 1 for a failure while running (here, unreadable data), as
//! their `--help` states. And the two teaching examples, which check their hand-written
//! backward passes against `constmat::nn` and finite differences, run to the end: exit 0.
//!
//! The programs are the ones `cargo test` builds beside this test (`target/<profile>/examples`);
//! `cargo test --test exit_codes` alone does not build them, and the test then says so.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The built example `name`, found next to this test's own executable.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/exit_codes-<hash> -> target/<profile>/examples/<name>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a test executable lives in target/<profile>/deps");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is not built: run `cargo test` (which builds the examples) or `cargo build --examples` first",
        path.display()
    );
    path
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("constmat-exit-codes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(example(program))
        .args(args)
        // Never the real data set: these runs must stop before training.
        .env_remove("MNIST_DIR")
        .output()
        .expect("the example starts")
}

/// Runs `program` with `args` and checks its exit code and that the text it printed (stdout for
/// 0, stderr otherwise) contains `says`.
fn expect(program: &str, args: &[&str], code: i32, says: &str) {
    let out = run(program, args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "{program} {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    let text = if code == 0 { &stdout } else { &stderr };
    assert!(
        text.contains(says),
        "{program} {args:?}: expected {says:?} in\n{text}"
    );
}

const PROGRAMS: [&str; 2] = ["mnist_static", "mnist_cnn"];

#[test]
fn help_lists_the_exit_codes_and_exits_0() {
    for program in PROGRAMS {
        expect(program, &["--help"], 0, "Exit codes:");
        expect(program, &["--help"], 0, "2  a bad command line");
    }
}

#[test]
fn bad_command_lines_exit_2_before_anything_runs() {
    let missing_dir = scratch("no-such-dir/weights.safetensors");
    let missing_dir = missing_dir.to_str().unwrap();
    for program in PROGRAMS {
        expect(program, &["--lr", "-1"], 2, "--lr");
        expect(program, &["--lr", "inf"], 2, "--lr");
        expect(program, &["--epochs", "0"], 2, "--epochs");
        expect(program, &["--threads", "100000"], 2, "--threads");
        expect(program, &["--no-such-option"], 2, "--no-such-option");
        expect(program, &["--save", missing_dir], 2, "no-such-dir");
        if !cfg!(feature = "threads") {
            expect(program, &["--threads", "2"], 2, "threads");
        }
    }
}

#[test]
fn unreadable_data_exits_1() {
    let dir = scratch("garbage-mnist");
    std::fs::create_dir_all(&dir).unwrap();
    for name in constmat::data::mnist::FILES {
        std::fs::write(dir.join(name), b"not an IDX file, not gzip either").unwrap();
    }
    let dir = dir.to_str().unwrap();
    for program in PROGRAMS {
        expect(program, &["--data", dir, "--epochs", "1"], 1, "error:");
    }
}

/// `backprop_by_hand` (a dense net learning XOR) and `conv_by_hand` (a strided, padded
/// convolution) assert that every hand-written value equals `constmat::nn`'s and that one
/// derivative or two match finite differences; a mismatch panics, which exits 101.
#[test]
fn the_by_hand_examples_pass_their_checks() {
    for program in ["backprop_by_hand", "conv_by_hand"] {
        expect(program, &[], 0, "All checks passed.");
    }
}

/// With its output piped into a program that exits early (`| head -1`), a run panicked at its
/// next line ("failed printing to stdout: Broken pipe") and never wrote `--save`. It now goes on
/// quietly: exit 0, the net written.
#[test]
fn a_closed_output_does_not_stop_the_run_or_lose_the_net() {
    // 64 training and 10 test images, blank, labelled 0 to 9 in turn: one step of training.
    let dir = scratch("blank-mnist");
    std::fs::create_dir_all(&dir).unwrap();
    let idx = |dims: &[u32], len: usize, value: &dyn Fn(usize) -> u8| {
        let mut bytes = vec![0, 0, 8, dims.len() as u8];
        bytes.extend(dims.iter().flat_map(|d| d.to_be_bytes()));
        bytes.extend((0..len).map(value));
        bytes
    };
    let files = [
        idx(&[64, 28, 28], 64 * 784, &|_| 0),
        idx(&[64], 64, &|i| (i % 10) as u8),
        idx(&[10, 28, 28], 10 * 784, &|_| 0),
        idx(&[10], 10, &|i| (i % 10) as u8),
    ];
    for (name, bytes) in constmat::data::mnist::FILES.iter().zip(files) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    for program in PROGRAMS {
        let save = scratch(&format!("{program}-piped.safetensors"));
        let _ = std::fs::remove_file(&save);
        let mut child = Command::new(example(program))
            .args(["--data", dir.to_str().unwrap(), "--epochs", "1"])
            .args(["--save", save.to_str().unwrap()])
            .env_remove("MNIST_DIR")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the example starts");
        // The reader is gone before the first line is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{program}: {stderr}");
        assert!(!stderr.contains("panicked"), "{program}: {stderr}");
        assert!(save.exists(), "{program}: the net was not written");
    }
}
