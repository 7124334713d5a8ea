//! Misuse and hostile input that used to lose work or pass silently (issue "Hostile input"):
//! each case as the user met it, through the code the examples run (`examples/mnist_common`,
//! included by path: hence a test of the examples' package, which has its dependencies) or
//! through the library's readers and kernels.
#![cfg(all(feature = "data", feature = "rand", feature = "safetensors"))]
#![allow(dead_code)] // the examples' session, of which these tests use a part

#[path = "../mnist_common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use common::interrupt::Interrupt;
use common::training::{self, CHANCE_LOSS, MIN_STEPS_BEFORE_STALL, Options, Trouble};

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
        weight_decay: 0.0,
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
    // The free name in the temporary directory (numbered if a file of that name is there).
    let fallback = training::fallback_path(&target);
    let err = training::write_or_fallback("weights", &target, |p| {
        std::fs::write(p, b"the trained net")
            .map_err(|e| format!("cannot write {}: {e}", p.display()))
    })
    .unwrap_err();
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
    let err = training::check_progress(&adam, 1, 1000, (2.4, 5e3, 0.1135), None).unwrap_err();
    assert!(err.contains("diverged in epoch 1"), "{err}");
    assert!(err.contains("far above the usual 0.001 for adam"), "{err}");
    // Stalled at chance: ln 10 with 11.35% accuracy.
    let err =
        training::check_progress(&adam, 2, 1000, (2.4, CHANCE_LOSS, 0.1135), None).unwrap_err();
    assert!(
        err.contains("stuck at chance level after epoch 2 (1000 steps)"),
        "{err}"
    );
    assert!(err.contains("11.35%"), "{err}");
    // A tiny learning rate is blamed for being tiny, not too large.
    let mut tiny = defaults();
    tiny.lr = 1e-7;
    let err = training::check_progress(&tiny, 3, 1000, (2.3, CHANCE_LOSS - 1e-4, 0.10), None)
        .unwrap_err();
    assert!(
        err.contains("so small that the weights barely move"),
        "{err}"
    );
    // A usual learning rate points at the data.
    let err = training::check_progress(&defaults(), 1, 1000, (2.3, CHANCE_LOSS, 0.098), None)
        .unwrap_err();
    assert!(err.contains("images and labels"), "{err}");
    // Non-finite is divergence too.
    assert!(training::check_progress(&defaults(), 1, 1000, (2.3, f64::NAN, 0.1), None).is_err());
    // A healthy run passes, early and late.
    training::check_progress(&defaults(), 1, 1000, (2.4, 0.25, 0.96), None).unwrap();
    training::check_progress(&defaults(), 10, 1000, (2.4, 0.01, 0.98), None).unwrap();
}

/// A LeNet-5 at 3x its default learning rate reached 89.75% after one epoch, then fell to
/// chance; the error called the rate "in the usual range" and sent the user to check the data.
/// A net that learned and then lost it collapsed: the rate is blamed, whatever its range, and
/// the data is not (at chance level, or diverging).
#[test]
fn a_net_that_learned_and_lost_it_blames_the_learning_rate_not_the_data() {
    let mut o = defaults();
    o.lr = 0.09; // within ten times the usual 0.03
    let err = training::check_progress(&o, 3, 2811, (2.3, 2.3068, 0.1135), Some((1, 0.8975)))
        .unwrap_err();
    assert!(
        err.contains("training collapsed in epoch 3: the test accuracy fell from 89.75% (after epoch 1) to 11.35%"),
        "{err}"
    );
    assert!(
        err.contains("too high for this net (the default is 0.03): try --lr 0.03"),
        "{err}"
    );
    assert!(!err.contains("images and labels"), "{err}");
    // Collapsed before the steps that make a stall: still stopped.
    let err =
        training::check_progress(&o, 2, 20, (2.3, 2.3068, 0.1135), Some((1, 0.8975))).unwrap_err();
    assert!(err.contains("collapsed"), "{err}");
    // At or below the default, a lower rate is proposed.
    let err = training::check_progress(&defaults(), 3, 2811, (2.3, 2.31, 0.1), Some((2, 0.9)))
        .unwrap_err();
    assert!(err.contains("try a lower one, such as --lr 0.01"), "{err}");
    // Diverging after learning: the data is not the cause either.
    let err =
        training::check_progress(&o, 2, 2000, (2.3, 1e4, 0.1), Some((1, 0.8975))).unwrap_err();
    assert!(err.contains("diverged in epoch 2"), "{err}");
    assert!(
        err.contains("the net had learned (test accuracy 89.75% after epoch 1)"),
        "{err}"
    );
    assert!(!err.contains("images and labels"), "{err}");
    // A best epoch that never learned (below 50%) changes nothing: the data may be the cause.
    let err =
        training::check_progress(&o, 9, 2811, (2.3, CHANCE_LOSS, 0.1), Some((1, 0.2))).unwrap_err();
    assert!(err.contains("stuck at chance level"), "{err}");
    // A net still learning passes, and a dip that is not back at chance too.
    training::check_progress(&o, 2, 2000, (2.3, 0.3, 0.95), Some((1, 0.9))).unwrap();
    training::check_progress(&o, 2, 2000, (2.3, 1.7, 0.1), Some((1, 0.9))).unwrap();
}

/// The same for a step that fails mid-epoch (a NaN loss, an overflowing update), the usual way a
/// rate too high for the net ends a run: it was sent to check the data even after the net had
/// learned.
#[test]
fn a_step_that_fails_after_the_net_learned_blames_the_learning_rate() {
    use constmat::nn::StepError;
    let mut o = defaults();
    o.lr = 0.09;
    let overflow = StepError::Update { tensor: 3 };
    let why = training::step_failure_hint(&o, &overflow, Some((2, 0.91)));
    assert_eq!(
        why,
        "the net had learned (test accuracy 91.00% after epoch 2), so the data is not the \
         cause: the learning rate 0.09 is too high for this net (the default is 0.03): try --lr \
         0.03"
    );
    // Before it learned, the usual placement of the rate (here in range: the data is suspect).
    let why = training::step_failure_hint(&o, &overflow, Some((1, 0.2)));
    assert!(why.contains("images and labels"), "{why}");
    let why = training::step_failure_hint(&o, &overflow, None);
    assert!(why.contains("images and labels"), "{why}");
    // A rate the schedule took below f32's range is its own cause, learned or not.
    let why = training::step_failure_hint(&o, &StepError::LearningRate(0.0), Some((2, 0.91)));
    assert!(
        why.starts_with("--lr 0.09 is too small for the cosine schedule"),
        "{why}"
    );
}

/// A run that went wrong returned before `--save`: its trained net was lost, even the 89.75%
/// of its first epoch. The best net of the run, when it learned, is now written there, and the
/// error says so.
#[test]
fn a_run_that_goes_wrong_saves_its_best_net() {
    let path = scratch("best-of-a-failed-run.safetensors");
    let _ = std::fs::remove_file(&path);
    let net = <<Tiny as common::training::Model>::Net as constmat::nn::Parameters<f32>>::zeros();
    let err = training::save_best::<Tiny>(Some(&path), Some((4, 0.93, &net)), "it failed".into());
    assert_eq!(
        err,
        format!(
            "it failed\nthe net of epoch 4 (test accuracy 93.00%), the best of this run, was written to {}",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "net");
    std::fs::remove_file(&path).unwrap();
    // A net that never learned is not worth a file; nor is anything without --save.
    let err = training::save_best::<Tiny>(Some(&path), Some((4, 0.3, &net)), "it failed".into());
    assert_eq!(err, "it failed");
    assert!(!path.exists());
    let err = training::save_best::<Tiny>(None, Some((4, 0.93, &net)), "it failed".into());
    assert_eq!(err, "it failed");
}

/// A failed write fell back to a file of the same name in the temporary directory, overwriting
/// what was there (an earlier run's net, or this run's other output: `--save /dev/full --plot
/// /dev/full` left the weights where the message said the curves were). The fallback now takes
/// a free name.
#[test]
fn a_fallback_never_overwrites_a_file() {
    let name = format!("constmat-fallback-{}.svg", std::process::id());
    let taken = std::env::temp_dir().join(&name);
    std::fs::write(&taken, "precious").unwrap();
    let fallback = training::fallback_path(Path::new("/nowhere").join(&name).as_path());
    assert_ne!(fallback, taken);
    assert_eq!(
        fallback.file_name().unwrap().to_string_lossy(),
        format!("constmat-fallback-{}-2.svg", std::process::id())
    );
    std::fs::write(&fallback, "second").unwrap();
    let third = training::fallback_path(Path::new("/nowhere").join(&name).as_path());
    assert!(
        third.to_string_lossy().ends_with("-3.svg"),
        "{}",
        third.display()
    );
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "precious");
    std::fs::remove_file(taken).unwrap();
    std::fs::remove_file(fallback).unwrap();
}

/// `--lr 0.1 --lr 0.01` took the last, silently (`embed` refused `--net` twice).
#[test]
fn an_option_given_twice_is_refused() {
    assert_eq!(
        parse(&["--lr", "0.1", "--epochs", "2", "--lr", "0.01"]).unwrap_err(),
        "--lr is given twice"
    );
    parse(&["--lr", "0.1", "--epochs", "2"]).unwrap();
}

/// `--save X --plot X` wrote the curves, then the weights over them, and reported both.
/// A pipe as `--save` hung the check before training. Both are refused on the command line.
#[test]
fn one_file_for_both_outputs_and_special_files_are_refused() {
    let path = scratch("both.out");
    let p = path.to_str().unwrap();
    let err = parse(&["--save", p, "--plot", p]).unwrap_err();
    assert!(
        err.contains("--save and --plot name the same file"),
        "{err}"
    );
    // Spelled differently, and not there yet: the same file all the same.
    std::fs::create_dir_all(scratch("sub")).unwrap();
    let other = scratch("sub/../both.out");
    let err = parse(&["--save", p, "--plot", other.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("name the same file"), "{err}");
    parse(&[
        "--save",
        p,
        "--plot",
        scratch("other.out").to_str().unwrap(),
    ])
    .unwrap();
    // A link to the other file.
    #[cfg(unix)]
    {
        let (target, link) = (scratch("linked.out"), scratch("link-to-linked.out"));
        std::fs::write(&target, "").unwrap();
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = parse(&[
            "--save",
            link.to_str().unwrap(),
            "--plot",
            target.to_str().unwrap(),
        ])
        .unwrap_err();
        assert!(err.contains("name the same file"), "{err}");
    }
    #[cfg(unix)]
    {
        let err = parse(&["--save", "/dev/null"]).unwrap_err();
        assert_eq!(err, "--save /dev/null: is not a regular file");
    }
}

/// `--lr 1e-50` became 0 in f32 (and the hint called it "in the usual range"); `--lr 1e39`
/// parsed, then became infinite and failed after loading the data. A rate that is not a
/// positive, normal f32 is now refused with the arguments (exit 2), saying what is accepted.
#[test]
fn learning_rates_that_f32_cannot_hold_are_refused_with_the_arguments() {
    for lr in ["1e-50", "1e-40", "1e39", "0", "-0.1", "NaN", "inf", "fast"] {
        let err = parse(&["--lr", lr]).unwrap_err();
        assert_eq!(
            err,
            format!(
                "--lr: expected a positive number from 1.1754944e-38 to 3.4028235e38 (the net \
                 trains in f32), found `{lr}`"
            )
        );
    }
    for (lr, value) in [("1.2e-38", 1.2e-38), ("3.4e38", 3.4e38), ("0.001", 0.001)] {
        assert_eq!(parse(&["--lr", lr]).unwrap().unwrap().lr, value);
    }
}

/// The hint placed every rate between a hundredth and ten times the usual one "in the usual
/// range". It now says above, below or within the usual range (a tenth to ten times), and blames
/// a low rate only for a run that stalls.
#[test]
fn the_hint_places_the_learning_rate_honestly() {
    let with = |lr: f64| Options { lr, ..defaults() }; // momentum, usual 0.03
    let too_high = training::hint(&with(0.5), Trouble::Diverged);
    assert_eq!(
        too_high,
        "the learning rate 0.5 is far above the usual 0.03 for momentum: try --lr 0.03"
    );
    for lr in [0.004, 0.03, 0.29] {
        for trouble in [Trouble::Diverged, Trouble::Stalled] {
            let usual = training::hint(&with(lr), trouble);
            assert!(
                usual.starts_with(&format!(
                    "the learning rate {lr} is in the usual range for momentum (0.003 to 0.3): \
                     check that the images"
                )),
                "{usual}"
            );
        }
    }
    let low = training::hint(&with(0.001), Trouble::Stalled);
    assert_eq!(
        low,
        "the learning rate 0.001 is below the usual range for momentum (0.003 to 0.3): the \
         weights move too slowly to leave chance level; try --lr 0.03"
    );
    let low = training::hint(&with(0.001), Trouble::Diverged);
    assert!(
        low.starts_with(
            "the learning rate 0.001 is below the usual range for momentum (0.003 to 0.3), so it \
             is an unlikely cause: check that the images and labels"
        ),
        "{low}"
    );
    let tiny = training::hint(&with(1e-7), Trouble::Stalled);
    assert_eq!(
        tiny,
        "the learning rate 1e-7 is so small that the weights barely move: try --lr 0.03"
    );
    // Adam's usual rate is its own.
    let adam = Options {
        optimizer: "adam".into(),
        lr: 0.0005,
        ..defaults()
    };
    assert!(
        training::hint(&adam, Trouble::Stalled).contains("usual range for adam (0.0001 to 0.01)")
    );
}

/// A run on a few hundred images has a handful of steps per epoch: after the first (10 steps on
/// 640 images) a healthy run can still be at chance level, and was called stalled. A stall now
/// needs `MIN_STEPS_BEFORE_STALL` steps; an explosion is still caught at once.
#[test]
fn a_run_is_not_called_stalled_before_enough_steps() {
    let o = defaults();
    training::check_progress(&o, 1, 10, (2.3, CHANCE_LOSS, 0.087), None).unwrap();
    training::check_progress(
        &o,
        49,
        MIN_STEPS_BEFORE_STALL - 1,
        (2.3, CHANCE_LOSS, 0.09),
        None,
    )
    .unwrap();
    let err = training::check_progress(
        &o,
        50,
        MIN_STEPS_BEFORE_STALL,
        (2.3, CHANCE_LOSS, 0.09),
        None,
    )
    .unwrap_err();
    assert!(
        err.contains("stuck at chance level after epoch 50 (500 steps)"),
        "{err}"
    );
    let err = training::check_progress(&o, 1, 10, (2.3, 1e3, 0.09), None).unwrap_err();
    assert!(err.contains("diverged in epoch 1"), "{err}");
    // A run that ends at chance level before that says so, rather than report an accuracy
    // as if it were a verdict.
    let note = training::too_short_note(&o, 20, CHANCE_LOSS, 0.089).unwrap();
    assert_eq!(
        note,
        "the net is still at chance level after 20 steps (mean loss 2.3026, test accuracy \
         8.90%): too few steps to tell a stall from a slow start; train longer (--epochs) or on \
         more images"
    );
    let tiny = Options {
        lr: 1.2e-38,
        ..defaults()
    };
    let note = training::too_short_note(&tiny, 20, CHANCE_LOSS, 0.089).unwrap();
    assert!(
        note.ends_with(
            "; also, the learning rate 1.2e-38 is so small that the weights barely move: try --lr \
             0.03"
        ),
        "{note}"
    );
    assert_eq!(training::too_short_note(&o, 20, 0.5, 0.85), None);
    assert_eq!(
        training::too_short_note(&o, MIN_STEPS_BEFORE_STALL, CHANCE_LOSS, 0.089),
        None
    );
}

/// `--epochs 18446744073709551615` panicked (exit 101) multiplying it by the batches per epoch
/// (and wrapped in a release build). Absurd counts are refused with the arguments (exit 2), and
/// the multiplication is checked.
#[test]
fn absurd_epoch_counts_are_refused() {
    for epochs in ["18446744073709551615", "100001", "0", "-1", "1e3"] {
        let err = parse(&["--epochs", epochs]).unwrap_err();
        assert_eq!(
            err,
            format!(
                "--epochs: expected a positive whole number, at most 100000 (0 would train \
                 nothing; more would run for days), found `{epochs}`"
            )
        );
    }
    assert_eq!(
        parse(&["--epochs", "100000"]).unwrap().unwrap().epochs,
        training::MAX_EPOCHS
    );
    assert_eq!(training::total_steps(937, 10), Ok(9370));
    let err = training::total_steps(937, usize::MAX).unwrap_err();
    assert!(err.contains("too many"), "{err}");
}

/// When both late writes failed, only the weights' error was reported: the curves' fallback
/// file was never named. Both outcomes are now reported, each with where its file went.
#[test]
fn when_both_late_writes_fail_both_fallbacks_are_named() {
    let plot = scratch("gone-too/curves-both.svg");
    let save = scratch("gone-too/weights-both.safetensors");
    let write = |what: &'static str| {
        move |p: &Path| {
            std::fs::write(p, what).map_err(|e| format!("cannot write {}: {e}", p.display()))
        }
    };
    let (curves, weights) = (
        training::fallback_path(&plot),
        training::fallback_path(&save),
    );
    let err =
        training::write_results(Some(&plot), Some(&save), write("svg"), write("net")).unwrap_err();
    assert!(
        err.contains(&format!(
            "the curves were written to {} instead",
            curves.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "the weights were written to {} instead",
            weights.display()
        )),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&curves).unwrap(), "svg");
    assert_eq!(std::fs::read_to_string(&weights).unwrap(), "net");
    std::fs::remove_file(curves).unwrap();
    std::fs::remove_file(weights).unwrap();
    // One failing, one written: the failure alone is an error; both written: fine.
    let fine = scratch("curves-fine.svg");
    let weights = training::fallback_path(&save);
    let err =
        training::write_results(Some(&fine), Some(&save), write("svg"), write("net")).unwrap_err();
    assert!(!err.contains("curves"), "{err}");
    std::fs::remove_file(weights).unwrap();
    training::write_results(Some(&fine), None, write("svg"), write("net")).unwrap();
    assert_eq!(std::fs::read_to_string(&fine).unwrap(), "svg");
}

/// The examples' optimizer did not forward `CHECKS_OVERFLOW`, so `Trainer::step` checked it
/// only after the update: an overflow left the net infinite. It now forwards the check, and
/// each optimizer it wraps refuses the update with the net unchanged.
#[test]
fn the_examples_optimizer_refuses_an_overflowing_update_with_the_net_unchanged() {
    use constmat::Matrix;
    use constmat::nn::{Dense, MeanSquaredError, Optimizer, Parameters, StepError, Trainer};
    use training::AnyOptimizer;

    type Net = constmat::net![Dense<f32, 2, 2>];
    const { assert!(<AnyOptimizer<Net> as Optimizer<f32, Net>>::CHECKS_OVERFLOW) };
    let x = Matrix::<f32, 2, 2>::ones();
    let y = Matrix::<f32, 2, 2>::filled(-100.0);
    for name in ["sgd", "momentum", "adam"] {
        let mut net = Net::zeros();
        net.tensor_mut(0).fill(0.5);
        let before = net.clone();
        let mut optimizer = AnyOptimizer::new(name, 0.0, &net);
        let mut trainer = Trainer::<f32, Net, 2>::new(&net);
        let err = trainer
            .step(
                &mut net,
                &mut optimizer,
                f32::MAX,
                &MeanSquaredError,
                &x,
                &y,
            )
            .unwrap_err();
        assert!(
            matches!(err, StepError::Update { tensor: 0 }),
            "{name}: {err:?}"
        );
        assert_eq!(net, before, "{name}");
        // And it still trains.
        trainer
            .step(&mut net, &mut optimizer, 0.01, &MeanSquaredError, &x, &y)
            .unwrap();
        assert_ne!(net, before, "{name}");
    }
}

/// The whole session on a tiny synthetic data set, as `main` runs it: both output paths turn
/// unwritable during the run (the directory is gone), and the error names both fallback files
/// (exit 1); the parse errors above are the exit-2 cases.
/// A one-layer net for whole runs of `training::run` on tiny synthetic data sets.
struct Tiny;

impl common::training::Model for Tiny {
    type Net = constmat::net![
        constmat::nn::Dense<f32, { constmat::data::mnist::PIXELS }, { constmat::data::mnist::CLASSES }>
    ];
    const DESCRIPTION: &'static str = "one dense layer";
    fn fill(
        split: &constmat::data::mnist::Split,
        index: usize,
        x: &mut [f32; constmat::data::mnist::PIXELS],
    ) {
        for (dst, &p) in x.iter_mut().zip(split.image(index)) {
            *dst = f32::from(p) / 255.0;
        }
    }
    fn save(_: &Self::Net, path: &Path) -> Result<(), String> {
        std::fs::write(path, "net").map_err(|e| format!("cannot save to {}: {e}", path.display()))
    }
}

/// A directory `name` holding a synthetic MNIST of `train` and `test` images, labelled `i % 10`;
/// the pixels follow a pattern that differs from image to image, or are all the same.
fn tiny_mnist(name: &str, train: u32, test: u32, varied: bool) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let images = |n: u32| {
        let mut b = vec![0, 0, 8, 3];
        for d in [n, 28, 28] {
            b.extend(d.to_be_bytes());
        }
        b.extend((0..n as usize * 784).map(|i| if varied { (i % 251) as u8 } else { 128 }));
        b
    };
    let labels = |n: u32| {
        let mut b = vec![0, 0, 8, 1];
        b.extend(n.to_be_bytes());
        b.extend((0..n).map(|i| (i % 10) as u8));
        b
    };
    for (name, bytes) in constmat::data::mnist::FILES.iter().zip([
        images(train),
        labels(train),
        images(test),
        labels(test),
    ]) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    dir
}

#[test]
fn a_run_whose_outputs_cannot_be_written_names_both_fallbacks() {
    let o = Options {
        data: Some(tiny_mnist(
            "tiny-mnist",
            common::training::BATCH as u32,
            2,
            true,
        )),
        epochs: 1,
        save: Some(scratch("vanished/tiny-weights.safetensors")),
        plot: Some(scratch("vanished/tiny-curves.svg")),
        ..defaults()
    };
    let fallbacks = [&o.save, &o.plot].map(|p| training::fallback_path(p.as_ref().unwrap()));
    let err = training::run::<Tiny, 2>(&o, &Interrupt::on_request()).unwrap_err();
    for fallback in fallbacks {
        assert!(
            err.contains(&format!("{} instead", fallback.display())),
            "{err}"
        );
        std::fs::remove_file(fallback).unwrap();
    }
}

/// The case as a whole run: Adam with a learning rate of 100 used to train to chance
/// level and succeed. The run now stops with an error naming the epoch and the learning rate.
#[test]
fn a_whole_run_with_an_absurd_learning_rate_stops_with_an_error() {
    let o = Options {
        data: Some(tiny_mnist(
            "tiny-mnist-diverge",
            4 * common::training::BATCH as u32,
            10,
            true,
        )),
        epochs: 20,
        optimizer: "adam".into(),
        lr: 100.0,
        weight_decay: 0.0,
        usual_lr: 0.001,
        ..defaults()
    };
    let err = training::run::<Tiny, 10>(&o, &Interrupt::on_request()).unwrap_err();
    assert!(err.contains("training diverged in epoch"), "{err}");
    assert!(
        err.contains("the learning rate 100 is far above the usual"),
        "{err}"
    );
}

/// A whole run on data no net can learn from (every image the same) at the usual learning rate:
/// stopped as stalled once enough steps have passed, and the hint points at the data, not the
/// learning rate.
#[test]
fn a_whole_run_stuck_at_chance_stops_and_blames_the_data() {
    let o = Options {
        data: Some(tiny_mnist(
            "tiny-mnist-stall",
            common::training::BATCH as u32,
            10,
            false,
        )),
        epochs: MIN_STEPS_BEFORE_STALL + 100,
        schedule: "constant".into(),
        ..defaults()
    };
    let err = training::run::<Tiny, 10>(&o, &Interrupt::on_request()).unwrap_err();
    assert!(
        err.contains(&format!(
            "training is stuck at chance level after epoch {MIN_STEPS_BEFORE_STALL} ({MIN_STEPS_BEFORE_STALL} steps)"
        )),
        "{err}"
    );
    assert!(err.contains("is in the usual range"), "{err}");
    assert!(
        err.contains("check that the images and labels belong together"),
        "{err}"
    );
}

/// An image file whose header declares 65,536 images of 256 x 256 (4 GiB) was read (and
/// decompressed) whole before the size check failed. The header is now checked against what
/// the caller expects before any pixel is read: the reader below would yield 4 GiB, and only its
/// 16 header bytes are consumed.
#[test]
fn an_image_file_declaring_other_sizes_is_refused_from_its_header() {
    use std::io::Read;

    let mut header = vec![0, 0, 8, 3];
    for d in [65_536_u32, 256, 256] {
        header.extend(d.to_be_bytes());
    }
    let mut bomb = Counting {
        inner: (&header[..]).chain(std::io::repeat(0).take(65_536 * 256 * 256)),
        read: 0,
    };
    let err =
        constmat::data::idx::read_images_expecting(&mut bomb, 28, 28, Some(60_000)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "wrong image size: expected 28x28, found 256x256"
    );
    assert_eq!(bomb.read, 16, "only the header was read");

    // The right size but not as many images as labels: also refused from the header.
    let mut header = vec![0, 0, 8, 3];
    for d in [59_999_u32, 28, 28] {
        header.extend(d.to_be_bytes());
    }
    let mut short = Counting {
        inner: (&header[..]).chain(std::io::repeat(0).take(59_999 * 784)),
        read: 0,
    };
    let err =
        constmat::data::idx::read_images_expecting(&mut short, 28, 28, Some(60_000)).unwrap_err();
    assert!(
        err.to_string().contains("59999 images, 60000 labels"),
        "{err}"
    );
    assert_eq!(short.read, 16);
}

/// The same through `Mnist::load`, with the bomb gzipped in a MNIST directory: the error names
/// the image file and comes before its body is decompressed.
#[test]
fn a_mnist_directory_holding_a_bomb_fails_fast() {
    use std::io::Write;

    use flate2::{Compression, write::GzEncoder};

    let dir = scratch("bomb-mnist");
    std::fs::create_dir_all(&dir).unwrap();
    let gz = |bytes: &[u8]| {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    };
    let labels = |n: u32| {
        let mut b = vec![0, 0, 8, 1];
        b.extend(n.to_be_bytes());
        b.extend(std::iter::repeat_n(3, n as usize));
        b
    };
    let images = |n: u32, side: u32, body: usize| {
        let mut b = vec![0, 0, 8, 3];
        for d in [n, side, side] {
            b.extend(d.to_be_bytes());
        }
        b.extend(std::iter::repeat_n(0, body));
        b
    };
    // The training images declare 65,536 x 256 x 256 and hold 4 MB of zeros (4 KB gzipped).
    std::fs::write(
        dir.join("train-images-idx3-ubyte.gz"),
        gz(&images(65_536, 256, 4 << 20)),
    )
    .unwrap();
    std::fs::write(dir.join("train-labels-idx1-ubyte.gz"), gz(&labels(2))).unwrap();
    std::fs::write(
        dir.join("t10k-images-idx3-ubyte.gz"),
        gz(&images(1, 28, 784)),
    )
    .unwrap();
    std::fs::write(dir.join("t10k-labels-idx1-ubyte.gz"), gz(&labels(1))).unwrap();
    let err = constmat::data::mnist::Mnist::load(&dir).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("train-images-idx3-ubyte.gz"), "{message}");
    assert!(
        message.ends_with("wrong image size: expected 28x28, found 256x256"),
        "{message}"
    );
}

/// The issue's own bomb (65,536 images of 256 x 256: 4 GiB) was exactly `MAX_DATA_BYTES`, so
/// the plain readers accepted its header and decompressed it whole. They now hold headers to
/// `DEFAULT_LIMIT_BYTES` (256 MiB, what MNIST-like sets need) unless told otherwise: of a reader
/// that would yield 4 GiB, only the 16 header bytes are read.
#[test]
fn the_plain_readers_refuse_a_bomb_from_its_header() {
    use std::io::Read;

    use constmat::data::idx::{self, DEFAULT_LIMIT_BYTES, IdxErrorKind};

    let mut header = vec![0, 0, 8, 3];
    for d in [65_536_u32, 256, 256] {
        header.extend(d.to_be_bytes());
    }
    let mut bomb = Counting {
        inner: (&header[..]).chain(std::io::repeat(0).take(1 << 32)),
        read: 0,
    };
    let err = idx::read_images(&mut bomb).unwrap_err();
    assert!(
        matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes, .. } if *limit_bytes == DEFAULT_LIMIT_BYTES),
        "{err:?}"
    );
    assert_eq!(bomb.read, 16, "only the header was read");

    // The same gzipped in a file (4 MB of zeros after the header, 4 KB compressed).
    let path = scratch("bomb-images-idx3-ubyte.gz");
    let mut body = header.clone();
    body.extend(std::iter::repeat_n(0, 4 << 20));
    std::fs::write(&path, gzip(&body)).unwrap();
    let err = idx::read_images_from_path(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: IDX data too large: dimensions 65536 x 256 x 256 exceed the limit of \
             268435456 bytes",
            path.display()
        )
    );

    // A caller's own limit, lower or higher, for each reader.
    let labels = [0, 0, 8, 1, 0x10, 0, 0, 0]; // 268,435,456 labels declared
    let mut counted = Counting {
        inner: (&labels[..]).chain(std::io::repeat(1).take(1 << 28)),
        read: 0,
    };
    let err = idx::read_labels_with_limit(&mut counted, 60_000).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            IdxErrorKind::TooLarge {
                limit_bytes: 60_000,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(counted.read, 8);
    let mut one = vec![0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28];
    one.extend([9; 784]);
    assert!(idx::read_images_with_limit(&one[..], 783).is_err());
    assert_eq!(
        idx::read_images_with_limit(&one[..], 784).unwrap().count(),
        1
    );
}

/// A 261 KB train-labels-idx1-ubyte.gz declaring 268 million labels was decompressed whole
/// (264 MB allocated) before `Mnist::load` found that the image file holds 2 images. All four
/// headers are now read and checked against each other before any data: the labels' body here
/// turns corrupt after 2 MiB, which reading it would report; the error is the count mismatch.
#[test]
fn a_mnist_directory_holding_a_labels_bomb_fails_from_the_headers() {
    use constmat::data::mnist::Mnist;

    let dir = scratch("labels-bomb-mnist");
    std::fs::create_dir_all(&dir).unwrap();
    let images = |n: u32| {
        let mut b = vec![0, 0, 8, 3];
        for d in [n, 28, 28] {
            b.extend(d.to_be_bytes());
        }
        b.extend(std::iter::repeat_n(0, n as usize * 784));
        b
    };
    let labels = |n: u32| {
        let mut b = vec![0, 0, 8, 1];
        b.extend(n.to_be_bytes());
        b.extend(std::iter::repeat_n(3, n as usize));
        b
    };
    let mut bomb = vec![0, 0, 8, 1];
    bomb.extend((1_u32 << 28).to_be_bytes());
    bomb.extend(std::iter::repeat_n(0, 2 << 20));
    let mut bomb = gzip(&bomb);
    bomb.truncate(bomb.len() - 8); // cut inside the stream: a body read to its end is corrupt
    std::fs::write(dir.join("train-images-idx3-ubyte.gz"), gzip(&images(2))).unwrap();
    std::fs::write(dir.join("train-labels-idx1-ubyte.gz"), &bomb).unwrap();
    std::fs::write(dir.join("t10k-images-idx3-ubyte.gz"), gzip(&images(1))).unwrap();
    std::fs::write(dir.join("t10k-labels-idx1-ubyte.gz"), gzip(&labels(1))).unwrap();
    let message = Mnist::load(&dir).unwrap_err().to_string();
    assert!(
        message.ends_with(
            "train-labels-idx1-ubyte.gz: image and label counts differ: 2 images, 268435456 labels"
        ),
        "{message}"
    );

    // A set that fits the limit loads; the same with a smaller limit is refused from the header.
    std::fs::write(dir.join("train-labels-idx1-ubyte.gz"), gzip(&labels(2))).unwrap();
    let mnist = Mnist::load(&dir).unwrap();
    assert_eq!((mnist.train.len(), mnist.test.len()), (2, 1));
    let message = Mnist::load_with_limit(&dir, 784).unwrap_err().to_string();
    assert!(
        message.ends_with(
            "train-images-idx3-ubyte.gz: IDX data too large: dimensions 2 x 28 x 28 exceed the \
             limit of 784 bytes"
        ),
        "{message}"
    );
    // A bomb in the test set is found before the training set's data is read: here that data
    // is corrupt, and the error is the test set's.
    std::fs::write(
        dir.join("train-images-idx3-ubyte.gz"),
        &gzip(&images(2))[..40],
    )
    .unwrap();
    std::fs::write(dir.join("t10k-labels-idx1-ubyte.gz"), gzip(&labels(3))).unwrap();
    let message = Mnist::load(&dir).unwrap_err().to_string();
    assert!(
        message.ends_with(
            "t10k-labels-idx1-ubyte.gz: image and label counts differ: 1 images, 3 labels"
        ),
        "{message}"
    );
}

/// Integer products and sums that overflow: `checked_matmul` and `checked_sum` say so in every
/// build (the operators panic in debug builds and wrap in release builds, as Rust's integers do).
#[test]
fn integer_overflow_has_checked_forms() {
    use constmat::Matrix;
    let big = Matrix::<i32, 2, 2>::filled(50_000);
    assert_eq!(big.checked_matmul(&big), None); // 2 * 50,000² > i32::MAX
    let small = Matrix::<i32, 2, 2>::filled(3);
    assert_eq!(small.checked_matmul(&small), Some(Matrix::filled(18)));
    assert_eq!(small.checked_matmul(&small), Some(&small * &small));
    assert_eq!(Matrix::<u8, 2, 2>::filled(64).checked_sum(), None);
    assert_eq!(Matrix::<u8, 2, 2>::filled(63).checked_sum(), Some(252));
}

/// With the `threads` feature, the first product used to fix rayon's global pool, so that a
/// later `use_threads(n)` failed; now it works whenever it is called.
#[cfg(feature = "threads")]
#[test]
fn threads_can_be_configured_after_products_ran() {
    use constmat::Matrix;
    let a = Matrix::<f32, 256, 256>::filled(0.5);
    let before = &a * &a;
    constmat::kernels::use_threads(2).expect("after a product");
    assert_eq!(&a * &a, before);
    constmat::kernels::use_threads(1).expect("and again");
    assert_eq!(&a * &a, before);
}

/// A reader handing out at most `.1` bytes per call.
struct Trickle<'a>(&'a [u8], usize);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// A reader that counts the bytes it hands out.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: std::io::Read> std::io::Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// Whether the gzip stream `bytes` fails to decompress to its end.
fn corrupt(bytes: &[u8]) -> bool {
    use std::io::Read;
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut Vec::new())
        .is_err()
}

/// Mutations of `gz`: one to three random bytes changed after the gzip magic (a tiny generator,
/// so that the test needs no dependency).
fn mutations(gz: &[u8], cases: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    (0..cases).map(move |_| {
        let mut m = gz.to_vec();
        for _ in 0..1 + next(3) {
            let i = 2 + next(m.len() - 2);
            m[i] = next(256) as u8;
        }
        m
    })
}

/// The kind of an error, from its message (the text before the first colon).
fn kind_of<T>(result: &Result<T, constmat::data::idx::IdxError>) -> Option<String> {
    result
        .as_ref()
        .err()
        .map(|e| e.to_string().split(':').next().unwrap().to_string())
}

/// A corrupt gzip stream read through a reader that returns a few bytes per call was reported
/// as "invalid IDX magic" (the garbage decoded before the corruption) instead of the gzip error:
/// 479 of 40,000 mutated files with 3-byte reads. Every mutated file now gets the same kind of
/// error whatever the reader's pace, and a stream that does not decompress is reported as
/// corrupt gzip data.
#[test]
fn a_corrupt_gzip_stream_is_reported_as_such_whatever_the_reads() {
    use constmat::data::idx;

    let mut plain = vec![0_u8, 0, 8, 1, 0, 0, 0, 200];
    plain.extend((0..200).map(|i| (i % 10) as u8));
    let mut differing = Vec::new();
    for (case, m) in mutations(&gzip(&plain), 3000).enumerate() {
        let whole = kind_of(&idx::read_labels(&m[..]));
        let expected = if corrupt(&m) {
            Some("corrupt gzip data".to_string())
        } else {
            whole.clone()
        };
        let mut kinds = vec![(0, whole)];
        for step in [1, 3, 7] {
            kinds.push((step, kind_of(&idx::read_labels(Trickle(&m, step)))));
        }
        for (step, kind) in kinds {
            if kind != expected {
                differing.push((case, step, kind, expected.clone()));
            }
        }
    }
    assert!(
        differing.is_empty(),
        "{} cases differ, the first: {:?}",
        differing.len(),
        differing[0]
    );
}

/// The same through the reader `Mnist::load` uses, which checks the image size and count from
/// the header: a corrupt stream was reported as "wrong image size" or "image and label counts
/// differ" (the garbage decoded before the corruption) in about a fifth of mutated files.
#[test]
fn a_corrupt_gzip_stream_is_reported_as_such_when_sizes_are_expected() {
    use constmat::data::idx;

    // Three 4 x 4 images.
    let mut plain = vec![0_u8, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4];
    plain.extend((0..48).map(|i| (i * 7 % 256) as u8));
    let gz = gzip(&plain);
    let (mut differing, mut cases) = (Vec::new(), 0);
    for (case, m) in mutations(&gz, 3000).enumerate() {
        if !corrupt(&m) {
            continue;
        }
        cases += 1;
        for step in [0, 1, 3, 7] {
            let result = if step == 0 {
                idx::read_images_expecting(&m[..], 4, 4, Some(3))
            } else {
                idx::read_images_expecting(Trickle(&m, step), 4, 4, Some(3))
            };
            let kind = kind_of(&result);
            if kind.as_deref() != Some("corrupt gzip data") {
                differing.push((case, step, kind));
            }
        }
    }
    assert!(cases > 1000, "only {cases} corrupt streams");
    assert!(
        differing.is_empty(),
        "{} of {} reads differ, the first: {:?}",
        differing.len(),
        4 * cases,
        differing[0]
    );
}

/// Bytes after the declared data used to be read (and decompressed) to their end to count them:
/// a small declared file followed by gigabytes went through whole. They are now counted up to
/// `TRAILING_BYTES_COUNTED`; past it the reader stops, and the error says so.
#[test]
fn trailing_bytes_are_counted_up_to_a_bound() {
    use std::io::Read;

    use constmat::data::idx::{self, IdxErrorKind, TRAILING_BYTES_COUNTED};

    let labels = [0, 0, 8, 1, 0, 0, 0, 2, 7, 9];
    // 4 GiB after two labels: refused after the bound, not after 4 GiB.
    let endless = (&labels[..]).chain(std::io::repeat(1).take(1 << 32));
    let err = idx::read_labels(endless).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::ManyTrailingBytes { expected_bytes: 10, more_than_bytes }
            if *more_than_bytes == 10 + TRAILING_BYTES_COUNTED
    ));
    assert_eq!(
        err.to_string(),
        format!(
            "trailing bytes after IDX data: expected 10 bytes, found more than {} (the rest was not read)",
            10 + TRAILING_BYTES_COUNTED
        )
    );
    // A few trailing bytes are still counted exactly.
    let few = (&labels[..]).chain(&[0_u8; 5][..]);
    assert_eq!(
        idx::read_labels(few).unwrap_err().to_string(),
        "trailing bytes after IDX data: expected 10 bytes, found 15"
    );
}

/// `--weight-decay` takes a number from 0 up to 1, and only with the momentum optimizer; an
/// example's default decay is dropped for another optimizer rather than refused.
#[test]
fn weight_decay_is_checked() {
    for bad in ["-0.1", "1", "abc", "NaN"] {
        let err = parse(&["--weight-decay", bad]).unwrap_err();
        assert!(
            err.starts_with("--weight-decay: expected a number"),
            "{err}"
        );
    }
    let err = parse(&["--weight-decay", "0.001", "--optimizer", "adam"]).unwrap_err();
    assert!(
        err.contains("applies to the momentum optimizer, not to adam"),
        "{err}"
    );
    let o = parse(&["--weight-decay", "0.001"]).unwrap().unwrap();
    assert_eq!(o.weight_decay, 0.001);
    let mut defaults = defaults();
    defaults.weight_decay = 5e-4;
    let o = training::parse_args(defaults, ["--optimizer", "sgd"].map(String::from))
        .unwrap()
        .unwrap();
    assert_eq!(o.weight_decay, 0.0);
}
