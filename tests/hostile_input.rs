//! Misuse and hostile input that used to lose work or pass silently (issue "Hostile input"):
//! each case as the user met it, through the code the examples run.
#![cfg(all(feature = "data", feature = "rand", feature = "safetensors"))]
#![allow(dead_code)] // the examples' session, of which these tests use a part

#[path = "../examples/mnist_common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use common::training::{self, CHANCE_LOSS, Options};

fn defaults() -> Options {
    Options {
        data: None,
        epochs: 10,
        lr: 0.03,
        optimizer: "momentum".into(),
        schedule: "cosine".into(),
        seed: 42,
        threads: 1,
        save: None,
        plot: None,
        usual_lr: 0.03,
    }
}

fn parse(args: &[&str]) -> Result<Option<Options>, String> {
    training::parse_args(defaults(), args.iter().map(|a| a.to_string()))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile_input");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `--save` and `--plot` into a directory that does not exist: refused before training, with
/// the path and the reason (the run used to train for minutes and then lose the net).
#[test]
fn output_paths_that_cannot_be_written_are_refused_before_training() {
    let missing = scratch("no-such-dir/net.safetensors");
    let err = parse(&["--save", missing.to_str().unwrap()]).unwrap_err();
    assert!(err.starts_with("--save "), "{err}");
    assert!(
        err.contains("no-such-dir") && err.contains("cannot be written"),
        "{err}"
    );
    let dir = scratch("");
    let err = parse(&["--plot", dir.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("is a directory"), "{err}");
    // A writable path passes and is left as it was: not created, or not truncated.
    let fresh = scratch("fresh.safetensors");
    let _ = std::fs::remove_file(&fresh);
    assert!(
        parse(&["--save", fresh.to_str().unwrap()])
            .unwrap()
            .is_some()
    );
    assert!(!fresh.exists(), "the check left a file behind");
    let existing = scratch("existing.svg");
    std::fs::write(&existing, "keep me").unwrap();
    parse(&["--plot", existing.to_str().unwrap()]).unwrap();
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
}

/// When writing still fails at the end, the work goes to a fallback path that the error names.
#[test]
fn a_failed_write_at_the_end_falls_back_and_says_where() {
    let target = scratch("gone/weights.safetensors");
    let err = training::write_or_fallback("weights", &target, |p| {
        std::fs::write(p, b"the trained net")
            .map_err(|e| format!("cannot write {}: {e}", p.display()))
    })
    .unwrap_err();
    let fallback = std::env::temp_dir().join("weights.safetensors");
    assert!(
        err.contains(&format!("written to {}", fallback.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&fallback).unwrap(), b"the trained net");
    std::fs::remove_file(fallback).unwrap();
}

/// `--epochs 0` trained nothing and reported an accuracy with exit 0; now it is refused.
#[test]
fn zero_epochs_are_refused() {
    let err = parse(&["--epochs", "0"]).unwrap_err();
    assert!(
        err.contains("--epochs") && err.contains("positive"),
        "{err}"
    );
}

/// `--threads 4000` took a minute before training and `--threads 100000` printed nothing for
/// minutes; now anything above 4 per core is refused, naming the limit.
#[test]
fn absurd_thread_counts_are_refused() {
    for threads in ["4000", "100000"] {
        let err = parse(&["--threads", threads]).unwrap_err();
        assert!(err.contains("at most"), "{err}");
    }
    // Within the limit, a single-threaded build says what to do (exit 2, as every argument
    // error: the check is in the parser now).
    if !cfg!(feature = "threads") {
        let err = parse(&["--threads", "2"]).unwrap_err();
        assert!(err.contains("--features threads"), "{err}");
    }
}

/// `--optimizer adam --lr 100` trained to 11.35% (chance) and exited 0: a run whose loss
/// explodes, or stays at chance level, now stops after the epoch that shows it, naming the
/// epoch, the loss and a cause that fits the learning rate.
#[test]
fn runs_that_explode_or_stall_are_stopped_with_an_honest_hint() {
    let mut adam = defaults();
    adam.optimizer = "adam".into();
    adam.lr = 100.0;
    // Exploded: the mean loss far above where it started.
    let err = training::check_progress(&adam, 1, 2.4, 5e3, 0.1135).unwrap_err();
    assert!(err.contains("diverged in epoch 1"), "{err}");
    assert!(err.contains("far above the usual 0.001 for adam"), "{err}");
    // Stalled at chance: ln 10 with 11.35% accuracy.
    let err = training::check_progress(&adam, 2, 2.4, CHANCE_LOSS, 0.1135).unwrap_err();
    assert!(err.contains("stuck at chance level after epoch 2"), "{err}");
    assert!(err.contains("11.35%"), "{err}");
    // A tiny learning rate is blamed for being tiny, not too large.
    let mut tiny = defaults();
    tiny.lr = 1e-7;
    let err = training::check_progress(&tiny, 3, 2.3, CHANCE_LOSS - 1e-4, 0.10).unwrap_err();
    assert!(
        err.contains("so small that the weights barely move"),
        "{err}"
    );
    // A usual learning rate points at the data.
    let err = training::check_progress(&defaults(), 1, 2.3, CHANCE_LOSS, 0.098).unwrap_err();
    assert!(err.contains("images and labels"), "{err}");
    // Non-finite is divergence too.
    assert!(training::check_progress(&defaults(), 1, 2.3, f64::NAN, 0.1).is_err());
    // A healthy run passes, early and late.
    training::check_progress(&defaults(), 1, 2.4, 0.25, 0.96).unwrap();
    training::check_progress(&defaults(), 10, 2.4, 0.01, 0.98).unwrap();
}
