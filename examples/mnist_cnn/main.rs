//! Trains a LeNet-5-sized convolutional net on MNIST and reports its test accuracy.
//!
//! ```text
//! cargo run --release --example mnist_cnn [-- --epochs 12 --lr 0.05 --optimizer momentum ...]
//! ```
//!
//! Run with `--help` for every option. The data is found (or downloaded) as `mnist_static` finds
//! it, and the training session is the same (`examples/mnist_common`); the last line printed is
//! always `test accuracy: NN.NN%`. `--save PATH` writes the weights with PyTorch's names and
//! layout (a convolution's weight `[out, in, kh, kw]`), so the `nn.Sequential` in the net's
//! documentation loads them with `load_state_dict`.

#[path = "../mnist_common/mod.rs"]
mod common;

use std::path::Path;
use std::process::ExitCode;

use common::training::{self, Model, Options};
use constmat::data::mnist::{COLS, ROWS, Split};
use constmat::nn::Relu;
use rand::rngs::StdRng;

/// LeNet-5 with ReLU and max pooling: every image size is computed by `net!`, and a layer
/// written with the wrong channels or width does not compile. In PyTorch:
///
/// ```text
/// nn.Sequential(
///     nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),   # 6 x 28 x 28 -> 6 x 14 x 14
///     nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),             # 16 x 10 x 10 -> 16 x 5 x 5
///     nn.Flatten(),                                                # 400
///     nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
/// ```
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

/// The largest shift, in pixels, of a training image (see `Cnn::fill_training`).
const MAX_SHIFT: i32 = 2;

/// Samples per forward pass when evaluating (each keeps its unrolled patches: 78 KB for the
/// first convolution).
const EVAL_BATCH: usize = 100;

struct Cnn;

impl Model for Cnn {
    type Net = LeNet;
    const DESCRIPTION: &'static str =
        "LeNet-5 (conv 6@5x5, pool, conv 16@5x5, pool, 120, 84, 10; ReLU)";

    /// The image, pixels scaled to [0, 1]: what the saved net expects.
    fn fill(split: &Split, index: usize, x: &mut [[[f32; COLS]; ROWS]; 1]) {
        for (dst, &p) in x
            .as_flattened_mut()
            .as_flattened_mut()
            .iter_mut()
            .zip(split.image(index))
        {
            *dst = f32::from(p) * (1.0 / 255.0);
        }
    }

    /// The image shifted by up to [`MAX_SHIFT`] pixels in each direction (uniformly, zeros
    /// shifted in): the net sees each digit in many places, and learns strokes rather than
    /// positions (without it the net overfits: 99.06% after 12 epochs, training loss 0.001).
    fn fill_training(
        split: &Split,
        index: usize,
        x: &mut [[[f32; COLS]; ROWS]; 1],
        rng: &mut StdRng,
    ) {
        let scale = |p: u8| f32::from(p) * (1.0 / 255.0);
        common::augment::shifted(split.image(index), MAX_SHIFT, rng, scale, &mut x[0]);
    }

    fn save(net: &LeNet, path: &Path) -> Result<(), String> {
        constmat::io::safetensors::save(
            net,
            path,
            &[
                (
                    "architecture",
                    "Conv2d(1,6,5,padding=2) ReLU MaxPool2d(2) Conv2d(6,16,5) ReLU MaxPool2d(2) \
                     Flatten Linear(400,120) ReLU Linear(120,84) ReLU Linear(84,10)",
                ),
                (
                    "input",
                    "1x28x28 pixels (channel, row, column), scaled to [0, 1] (p / 255)",
                ),
                (
                    "output",
                    "logits of the digits 0-9 (softmax gives probabilities)",
                ),
                ("producer", "constmat mnist_cnn"),
            ],
        )
        .map_err(|e| e.to_string())
    }
}

const USAGE: &str = "\
Trains LeNet-5 (two convolutions with max pooling, three dense layers; ReLU; softmax
cross-entropy, batch 64) on MNIST.

Usage: cargo run --release --example mnist_cnn -- [OPTIONS]

Options:
  --data DIR          MNIST directory, looked in first (then $MNIST_DIR, then data/mnist/,
                      where it is downloaded if none has it)
  --epochs N          passes over the training set, a whole number from 1 to 100000
                      (default 12)
  --lr RATE           base learning rate, a positive number from 1.2e-38 to 3.4e38 (the
                      net trains in f32; default 0.05; try 0.001 with adam)
  --optimizer NAME    sgd | momentum | adam (default momentum, 0.9)
  --schedule NAME     cosine | step | constant (default cosine decay to 0 over the run;
                      step halves the rate every 3 epochs)
  --weight-decay L    the momentum optimizer's weight decay, from 0 up to 1 (default 0)
  --seed N            seed of initialization and shuffling (default 42)
  --threads N         threads for the matrix products, at most 4 per core of this machine
                      (default 1; more than 1 needs `--features threads`; results are
                      identical for any N)
  --save PATH         write the trained weights (safetensors, PyTorch's names) to PATH
  --plot PATH         write the loss and accuracy curves as an SVG to PATH
  -h, --help          print this help
";

fn main() -> ExitCode {
    let defaults = Options {
        data: None,
        epochs: 12,
        lr: 0.05,
        optimizer: "momentum".into(),
        schedule: "cosine".into(),
        seed: 42,
        threads: 1,
        save: None,
        plot: None,
        weight_decay: 0.0,
        usual_lr: 0.05,
    };
    training::main::<Cnn, EVAL_BATCH>(defaults, USAGE)
}
