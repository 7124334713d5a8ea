//! The MNIST and Fashion-MNIST examples' exit codes, from the programs themselves: 0 for
//! `--help`, 2 for a bad command line (nothing is run), 1 for a failure while running (here,
//! unreadable data), 3 for a run stopped by Ctrl-C (its best net saved) and 130 for one aborted
//! by a second Ctrl-C, as their `--help` states. And the two teaching examples, which check
//! their hand-written backward passes against `constmat::nn` and finite differences, run to the
//! end: exit 0.
//!
//! The programs are the ones `cargo test` builds beside this test (`target/<profile>/examples`);
//! `cargo test --test exit_codes` alone does not build them, and the test then says so.
#![cfg(all(feature = "data", feature = "safetensors"))]

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
        // Never the real data sets: these runs must stop before training.
        .env_remove("MNIST_DIR")
        .env_remove("FASHION_MNIST_DIR")
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

const PROGRAMS: [&str; 3] = ["mnist_static", "mnist_cnn", "fashion_resnet"];

#[test]
fn help_lists_the_exit_codes_and_exits_0() {
    for program in PROGRAMS {
        expect(program, &["--help"], 0, "Exit codes:");
        expect(program, &["--help"], 0, "2  a bad command line");
        expect(program, &["--help"], 0, "3  interrupted by Ctrl-C");
        expect(program, &["--help"], 0, "130  aborted by a second Ctrl-C");
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

/// A directory `name` holding a synthetic MNIST: `train` training and 10 test images, blank,
/// labelled 0 to 9 in turn.
fn blank_mnist(name: &str, train: u32) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let idx = |dims: &[u32], len: usize, value: &dyn Fn(usize) -> u8| {
        let mut bytes = vec![0, 0, 8, dims.len() as u8];
        bytes.extend(dims.iter().flat_map(|d| d.to_be_bytes()));
        bytes.extend((0..len).map(value));
        bytes
    };
    let n = train as usize;
    let files = [
        idx(&[train, 28, 28], n * 784, &|_| 0),
        idx(&[train], n, &|i| (i % 10) as u8),
        idx(&[10, 28, 28], 10 * 784, &|_| 0),
        idx(&[10], 10, &|i| (i % 10) as u8),
    ];
    for (name, bytes) in constmat::data::mnist::FILES.iter().zip(files) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    dir
}

/// With its output piped into a program that exits early (`| head -1`), a run panicked at its
/// next line ("failed printing to stdout: Broken pipe") and never wrote `--save`. It now goes on
/// quietly: exit 0, the net written.
#[test]
fn a_closed_output_does_not_stop_the_run_or_lose_the_net() {
    // One step of training.
    let dir = blank_mnist("blank-mnist", 64);
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

/// Ctrl-C and SIGTERM during training (issue 42), sent to the example as a child process. The
/// signals are caught from just before the `training ...` line on, so the tests send theirs
/// once they have read that line: no sleep, whatever the machine's load. The runs ask for
/// 100,000 epochs of 4 steps; a signal that were lost would end them at the stall check (500
/// steps at chance level, exit 1), not hang the test.
#[cfg(unix)]
mod interrupted {
    use super::{PROGRAMS, blank_mnist, example, scratch};
    use constmat::io::safetensors as st;
    use constmat::nn::{Dense, Identity, Relu};
    use std::io::{BufRead, BufReader, Read};
    use std::path::Path;
    use std::process::{Child, ChildStdout, Command, Stdio};

    type Mlp = constmat::net![
        Dense<f32, 784, 128, Relu>,
        Dense<f32, 128, 64, Relu>,
        Dense<f32, 64, 10, Identity>,
    ];

    type LeNet = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 6, 5, 1, 2, Relu>,
        MaxPool2d<2>,
        Conv2d<6, 16, 5, Relu>,
        MaxPool2d<2>,
        Flatten,
        Dense<400, 120, Relu>,
        Dense<120, 84, Relu>,
        Dense<84, 10>,
    ];

    /// `program` training for "ever" on 256 blank images, saving to `save` and `plot`.
    fn start(program: &str, save: &Path, plot: &Path, hold: bool) -> Child {
        // A directory per run: the tests run in parallel, and would write the same files.
        let name = save.file_stem().unwrap().to_str().unwrap();
        let data = blank_mnist(&format!("{name}-mnist"), 256);
        let mut command = Command::new(example(program));
        command
            .args(["--data", data.to_str().unwrap(), "--epochs", "100000"])
            .args(["--save", save.to_str().unwrap()])
            .args(["--plot", plot.to_str().unwrap()])
            .env_remove("MNIST_DIR")
            .env_remove("CONSTMAT_EXAMPLES_HOLD_ON_INTERRUPT")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if hold {
            command.env("CONSTMAT_EXAMPLES_HOLD_ON_INTERRUPT", "1");
        }
        command.spawn().expect("the example starts")
    }

    /// Reads `out` line by line into `seen` up to a line that starts with `prefix`.
    fn read_until(out: &mut BufReader<ChildStdout>, prefix: &str, seen: &mut String) {
        loop {
            let mut line = String::new();
            let n = out.read_line(&mut line).unwrap();
            assert!(
                n > 0,
                "the program ended before printing {prefix:?}:\n{seen}"
            );
            seen.push_str(&line);
            if line.starts_with(prefix) {
                return;
            }
        }
    }

    fn send(child: &Child, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill(2) takes plain integers and touches no memory of this process; the pid is
        // that of our own child, not yet waited for, so it names no other process.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// The rest of the child's standard output, its standard error and its exit code.
    fn finish(
        mut child: Child,
        mut out: BufReader<ChildStdout>,
        seen: &mut String,
    ) -> (String, Option<i32>) {
        out.read_to_string(seen).unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        (stderr, status.code())
    }

    /// The first Ctrl-C (SIGINT for `mnist_static`, SIGTERM for `mnist_cnn`) stops the run at
    /// the end of the step; the run evaluates, prints its report marked as interrupted, writes
    /// the best net and the curves, and exits 3. The net file loads as the example's net. A
    /// file that was at `--save` before is replaced whole.
    #[test]
    fn a_first_signal_stops_the_run_saves_the_best_net_and_exits_3() {
        for (program, signal) in PROGRAMS.into_iter().zip([libc::SIGINT, libc::SIGTERM]) {
            let save = scratch(&format!("{program}-interrupted.safetensors"));
            let plot = scratch(&format!("{program}-interrupted.svg"));
            std::fs::write(&save, b"an older file").unwrap();
            let _ = std::fs::remove_file(&plot);
            let mut child = start(program, &save, &plot, false);
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut seen = String::new();
            read_until(&mut out, "training ", &mut seen);
            send(&child, signal);
            let (stderr, code) = finish(child, out, &mut seen);
            assert_eq!(code, Some(3), "{program}\nstdout: {seen}\nstderr: {stderr}");
            assert!(!stderr.contains("panicked"), "{program}: {stderr}");
            // In epoch 1, unless the machine kept the test from sending its signal for as long
            // as an epoch takes.
            assert!(seen.contains("interrupted in epoch "), "{program}: {seen}");
            assert!(
                seen.contains("/100000, after batch ") && seen.contains("the report is of the "),
                "{program}: {seen}"
            );
            assert!(seen.contains("confusion matrix"), "{program}: {seen}");
            assert!(
                seen.contains(&format!("weights written to {}", save.display())),
                "{program}: {seen}"
            );
            let last = seen.lines().last().unwrap_or_default();
            assert!(last.starts_with("test accuracy: "), "{program}: {seen}");
            match program {
                "mnist_static" => drop(st::load::<Mlp>(&save).unwrap()),
                _ => drop(st::load::<LeNet>(&save).unwrap()),
            }
            assert!(std::fs::read_to_string(&plot).unwrap().starts_with("<svg"));
            std::fs::remove_file(&save).unwrap();
            std::fs::remove_file(&plot).unwrap();
        }
    }

    /// A second Ctrl-C, while the stopped run is still at work (held there by the test switch
    /// `CONSTMAT_EXAMPLES_HOLD_ON_INTERRUPT`, after it said it stops), ends it at once: exit 130,
    /// no report, and the file at `--save` is the one that was there, untouched.
    #[test]
    fn a_second_signal_aborts_at_once_and_exits_130() {
        let save = scratch("mnist_static-aborted.safetensors");
        let plot = scratch("mnist_static-aborted.svg");
        std::fs::write(&save, b"an older file").unwrap();
        let _ = std::fs::remove_file(&plot);
        let mut child = start("mnist_static", &save, &plot, true);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        read_until(&mut out, "training ", &mut seen);
        send(&child, libc::SIGINT);
        read_until(&mut out, "interrupted in epoch ", &mut seen);
        send(&child, libc::SIGINT);
        let (stderr, code) = finish(child, out, &mut seen);
        assert_eq!(code, Some(130), "stdout: {seen}\nstderr: {stderr}");
        assert!(!seen.contains("test accuracy: "), "{seen}");
        assert_eq!(std::fs::read(&save).unwrap(), b"an older file");
        assert!(!plot.exists());
        std::fs::remove_file(&save).unwrap();
    }
}
