//! Trains the statically typed 784-128-64-10 MLP on MNIST and reports its test accuracy.
//!
//! ```text
//! cargo run --release --example mnist_static [-- --epochs 10 --lr 0.03 --optimizer momentum ...]
//! ```
//!
//! Run with `--help` for every option. The data is read from `--data DIR`, else `$MNIST_DIR`,
//! else `data/mnist/` (downloaded there, checksums verified, if missing; `$MNIST_MIRROR` replaces
//! the download mirrors). The last line printed is always `test accuracy: NN.NN%`, for scripts.
//! The training session is shared with `mnist_cnn` (`examples/mnist_common`).

#[path = "../mnist_common/mod.rs"]
mod common;

use std::path::Path;
use std::process::ExitCode;

use common::training::{self, Model, Options};
use constmat::data::mnist::{CLASSES, PIXELS, Split};
use constmat::nn::{Dense, Identity, Relu};

/// The network: its type is its architecture.
type Net = constmat::net![
    Dense<f32, PIXELS, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, CLASSES, Identity>,
];

/// Samples per forward pass when evaluating.
const EVAL_BATCH: usize = 1000;
/// The mean and standard deviation of MNIST's training pixels (scaled to [0, 1]). Inputs are
/// standardized with them, the usual preprocessing for MNIST: centred inputs make the first
/// layer's gradients better conditioned.
const PIXEL_MEAN: f32 = 0.1307;
const PIXEL_STD: f32 = 0.3081;

struct Mlp;

impl Model for Mlp {
    type Net = Net;
    const DESCRIPTION: &'static str = "784-128-64-10 ReLU";

    /// The image, standardized. `(p / 255 - mean) / std` is written as `p * scale + offset`,
    /// which the compiler vectorizes. (A lookup table measured slower: a gather cannot be
    /// vectorized; and `f32::mul_add` compiles to a call to a software `fmaf` unless the build
    /// targets FMA.)
    fn fill(split: &Split, index: usize, x: &mut [f32; PIXELS]) {
        let scale = 1.0 / (255.0 * PIXEL_STD);
        let offset = -PIXEL_MEAN / PIXEL_STD;
        for (dst, &p) in x.iter_mut().zip(split.image(index)) {
            *dst = f32::from(p) * scale + offset;
        }
    }

    fn save(net: &Net, path: &Path) -> Result<(), String> {
        save(net, path)
    }
}

const USAGE: &str = "\
Trains a 784-128-64-10 ReLU MLP (softmax cross-entropy, batch 64) on MNIST.

Usage: cargo run --release --example mnist_static -- [OPTIONS]

Options:
  --data DIR          MNIST directory, looked in first (then $MNIST_DIR, then data/mnist/,
                      where it is downloaded if none has it)
  --epochs N          passes over the training set, a whole number from 1 to 100000
                      (default 10)
  --lr RATE           base learning rate, a positive number from 1.2e-38 to 3.4e38 (the
                      net trains in f32; default 0.03; try 0.001 with adam)
  --optimizer NAME    sgd | momentum | adam (default momentum, 0.9)
  --schedule NAME     cosine | step | constant (default cosine decay to 0 over the run;
                      step halves the rate every 3 epochs)
  --weight-decay L    the momentum optimizer's weight decay, from 0 up to 1 (default 0)
  --seed N            seed of initialization and shuffling (default 42)
  --threads N         threads for the matrix products, at most 4 per core of this machine
                      (default 1; more than 1 needs `--features threads`; results are
                      identical for any N)
  --save PATH         write the trained weights (safetensors) to PATH
  --plot PATH         write the loss and accuracy curves as an SVG to PATH
  -h, --help          print this help
";

fn main() -> ExitCode {
    let defaults = Options {
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
    };
    training::main::<Mlp, EVAL_BATCH>(defaults, USAGE)
}

/// Writes the net as safetensors, ready for pixels scaled to [0, 1].
///
/// The net was trained on standardized pixels `(x - m) / s`. The standardization is folded into
/// the first layer, `W·((x - m)/s) + b = (W/s)·x + (b - (m/s)·Σ_i W_i)`, so that users of the file
/// need no preprocessing beyond scaling pixels to [0, 1].
fn save(net: &Net, path: &Path) -> Result<(), String> {
    let mut folded = net.clone();
    let first = &mut folded.first;
    for (row, bias) in first.weight.rows_mut().zip(first.bias.iter_mut()) {
        let row_sum: f32 = row.iter().sum();
        *bias -= PIXEL_MEAN / PIXEL_STD * row_sum;
        for w in row.iter_mut() {
            *w /= PIXEL_STD;
        }
    }
    constmat::io::safetensors::save(
        &folded,
        path,
        &[
            (
                "architecture",
                "Linear(784,128) ReLU Linear(128,64) ReLU Linear(64,10)",
            ),
            (
                "input",
                "28x28 pixels, row-major, scaled to [0, 1] (p / 255)",
            ),
            (
                "output",
                "logits of the digits 0-9 (softmax gives probabilities)",
            ),
            ("producer", "constmat mnist_static"),
        ],
    )
    .map_err(|e| e.to_string())
}
