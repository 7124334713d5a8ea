//! The examples' training session (`examples/mnist_common`, included by path) stopped by its
//! interrupt (issue 42), in this process: what the run keeps and reports. (The signals
//! themselves, sent to the built examples, and their exit codes are tested in the root
//! package's `tests/exit_codes.rs`.)
#![cfg(all(feature = "data", feature = "rand", feature = "safetensors"))]
#![allow(dead_code)] // the examples' session, of which these tests use a part

#[path = "../mnist_common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::interrupt::Interrupt;
use common::training::{self, BATCH, Ending, Model, Options};
use constmat::data::mnist::{CLASSES, FILES, PIXELS, Split};
use constmat::io::safetensors as st;
use constmat::nn::Dense;

type Net = constmat::net![Dense<f32, PIXELS, CLASSES>];

/// One interrupt and one count of training images per test (the tests run in parallel).
static STOPS: [LazyLock<Interrupt>; 2] = [
    LazyLock::new(Interrupt::on_request),
    LazyLock::new(Interrupt::on_request),
];
static FILLED: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Training images per epoch: 4 steps.
const TRAIN: usize = 4 * BATCH;

/// A one-layer net whose run is interrupted as it fills the first image of epoch 2's third
/// batch: the run stops after that step.
struct Stopping<const TEST: usize>;

impl<const TEST: usize> Model for Stopping<TEST> {
    type Net = Net;
    const DESCRIPTION: &'static str = "one dense layer, interrupted";

    fn fill(split: &Split, index: usize, x: &mut [f32; PIXELS]) {
        for (dst, &p) in x.iter_mut().zip(split.image(index)) {
            *dst = f32::from(p) / 255.0;
        }
    }

    fn fill_training(
        split: &Split,
        index: usize,
        x: &mut [f32; PIXELS],
        _: &mut rand::rngs::StdRng,
    ) {
        if FILLED[TEST].fetch_add(1, Ordering::SeqCst) == TRAIN + 2 * BATCH {
            STOPS[TEST].request();
        }
        Self::fill(split, index, x);
    }

    fn save(net: &Net, path: &Path) -> Result<(), String> {
        st::save(net, path, &[]).map_err(|e| e.to_string())
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interrupt");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A synthetic MNIST: `TRAIN` training and 10 test images, each a pattern of its label.
fn tiny_mnist(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let images = |n: usize| {
        let mut b = vec![0, 0, 8, 3];
        for d in [n, 28, 28] {
            b.extend((d as u32).to_be_bytes());
        }
        b.extend((0..n * PIXELS).map(|i| {
            if (i % PIXELS) % 10 == (i / PIXELS) % 10 {
                255
            } else {
                0
            }
        }));
        b
    };
    let labels = |n: usize| {
        let mut b = vec![0, 0, 8, 1];
        b.extend((n as u32).to_be_bytes());
        b.extend((0..n).map(|i| (i % 10) as u8));
        b
    };
    for (name, bytes) in FILES
        .iter()
        .zip([images(TRAIN), labels(TRAIN), images(10), labels(10)])
    {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    dir
}

fn options(data: PathBuf, save: PathBuf, plot: PathBuf) -> Options {
    Options {
        data: Some(data),
        epochs: 5,
        lr: 0.03,
        optimizer: "momentum".into(),
        schedule: "cosine".into(),
        seed: 42,
        threads: 1,
        save: Some(save),
        plot: Some(plot),
        weight_decay: 0.0,
        usual_lr: 0.03,
    }
}

/// Interrupted in epoch 2 of 5, the run ends without an error, as interrupted, and writes a
/// net that loads (the best by test accuracy of epoch 1 and the stopped net) and the curves,
/// each replacing the file that was there.
#[test]
fn an_interrupted_run_ends_as_interrupted_with_its_files_written() {
    let (save, plot) = (scratch("stopped.safetensors"), scratch("stopped.svg"));
    std::fs::write(&save, "an older net").unwrap();
    std::fs::write(&plot, "older curves").unwrap();
    let o = options(tiny_mnist("tiny-mnist-0"), save.clone(), plot.clone());
    assert_eq!(
        training::run::<Stopping<0>, 10>(&o, &STOPS[0]),
        Ok(Ending::Interrupted)
    );
    // Stopped after the step of the request: 4 steps of epoch 1, 3 of epoch 2.
    assert_eq!(FILLED[0].load(Ordering::SeqCst), TRAIN + 3 * BATCH);
    st::load::<Net>(&save).unwrap();
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("epoch 2<"), "{svg}");
}

/// Interrupted, with `--save` and `--plot` no longer writable (their directory is gone): the
/// run is an error naming both fallback files, with the net and the curves in them, as a
/// finished run's would be (exit 1, not 3: not every file is where it was asked for).
#[test]
fn an_interrupted_run_whose_files_cannot_be_written_is_an_error_naming_the_fallbacks() {
    let save = scratch("vanished/stopped.safetensors");
    let plot = scratch("vanished/stopped.svg");
    let fallbacks = [&save, &plot].map(|p| training::fallback_path(p));
    let o = options(tiny_mnist("tiny-mnist-1"), save, plot);
    let err = training::run::<Stopping<1>, 10>(&o, &STOPS[1]).unwrap_err();
    assert!(STOPS[1].requested());
    for fallback in fallbacks {
        assert!(
            err.contains(&format!("{} instead", fallback.display())),
            "{err}"
        );
        std::fs::remove_file(fallback).unwrap();
    }
}
