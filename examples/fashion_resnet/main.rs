//! Trains the MLPerf Tiny ResNet-8 (adapted to one input channel) on Fashion-MNIST and reports
//! its test accuracy.
//!
//! ```text
//! sudo apt-get install dataset-fashion-mnist   # the data, into /usr/share/datasets/fashion-mnist
//! cargo run --release --example fashion_resnet [-- --epochs 9 --save resnet8.safetensors ...]
//! ```
//!
//! Run with `--help` for every option. The data is found in `--data DIR`, `$FASHION_MNIST_DIR`
//! or the Debian package's directory; the training session is `mnist_cnn`'s
//! (`examples/mnist_common`), and the last line printed is always `test accuracy: NN.NN%`.
//! `--save PATH` writes the weights with PyTorch's names and layout, so the PyTorch module in
//! the net's documentation loads them with `load_state_dict(strict=True)`.

#[path = "../mnist_common/mod.rs"]
mod common;

use std::path::Path;
use std::process::ExitCode;

use common::data_set::{self, DataSet};
use common::training::{self, Model, Options};
use constmat::data::mnist::{COLS, ROWS, Split};
use constmat::nn::{Chain, Layer, ProjectedResidual, Quantize, Relu, Residual, quantize};
use rand::RngExt;
use rand::rngs::StdRng;

/// The ResNet-8 of MLPerf Tiny's image classification benchmark (16, 32 and 64 filters, three
/// stacks, batch normalization, 1 x 1 strided projections, a global average pool), with one
/// input channel: 28 x 28 -> 16 x 28 x 28 -> 32 x 14 x 14 -> 64 x 7 x 7 -> 64 -> 10. In
/// PyTorch, with `Residual` computing `self.branch(x) + self.shortcut(x)` (the shortcut
/// `nn.Identity()` unless given):
///
/// ```text
/// def stack(c_in, c_out, stride):
///     branch = nn.Sequential(
///         nn.Conv2d(c_in, c_out, 3, stride, 1), nn.BatchNorm2d(c_out), nn.ReLU(),
///         nn.Conv2d(c_out, c_out, 3, 1, 1), nn.BatchNorm2d(c_out))
///     shortcut = None if stride == 1 else nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride))
///     return [Residual(branch, shortcut), nn.ReLU()]
///
/// nn.Sequential(
///     nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(),
///     *stack(16, 16, 1), *stack(16, 32, 2), *stack(32, 64, 2),
///     nn.AvgPool2d(7), nn.Flatten(), nn.Linear(64, 10))
/// ```
type ResNet8 = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 16, 3, 1, 1>,
    BatchNorm2d<16, Relu>,
    Residual<[
        Conv2d<16, 16, 3, 1, 1>, BatchNorm2d<16, Relu>,
        Conv2d<16, 16, 3, 1, 1>, BatchNorm2d<16>,
    ], Relu>,
    Residual<[
        Conv2d<16, 32, 3, 2, 1>, BatchNorm2d<32, Relu>,
        Conv2d<32, 32, 3, 1, 1>, BatchNorm2d<32>,
    ], [Conv2d<16, 32, 1, 2, 0>], Relu>,
    Residual<[
        Conv2d<32, 64, 3, 2, 1>, BatchNorm2d<64, Relu>,
        Conv2d<64, 64, 3, 1, 1>, BatchNorm2d<64>,
    ], [Conv2d<32, 64, 1, 2, 0>], Relu>,
    AvgPool2d<7>,
    Flatten,
    Dense<64, 10>,
];

/// ResNet-8 for prediction, each batch normalization folded into the convolution before it
/// (`BatchNorm2d::fold_into`, as TensorFlow Lite's converter folds them): the net that is
/// quantized to int8.
type Folded = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 16, 3, 1, 1, Relu>,
    Residual<[Conv2d<16, 16, 3, 1, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], Relu>,
    Residual<[Conv2d<16, 32, 3, 2, 1, Relu>, Conv2d<32, 32, 3, 1, 1>], [Conv2d<16, 32, 1, 2, 0>], Relu>,
    Residual<[Conv2d<32, 64, 3, 2, 1, Relu>, Conv2d<64, 64, 3, 1, 1>], [Conv2d<32, 64, 1, 2, 0>], Relu>,
    AvgPool2d<7>,
    Flatten,
    Dense<64, 10>,
];

/// `net` with its batch normalizations folded away: the same predictions (within rounding).
fn fold(net: &ResNet8) -> Folded {
    // A branch `conv, norm, conv, norm` becomes `conv', conv''`.
    macro_rules! fold_branch {
        ($b:expr) => {
            Chain::new(
                $b.rest.first.fold_into(&$b.first),
                $b.rest.rest.rest.fold_into(&$b.rest.rest.first),
            )
        };
    }
    let stem = net.rest.first.fold_into(&net.first);
    let (first, rest) = (&net.rest.rest.first, &net.rest.rest.rest);
    let (second, rest) = (&rest.first, &rest.rest);
    let (third, head) = (&rest.first, &rest.rest);
    Chain::new(
        stem,
        Chain::new(
            Residual::new(fold_branch!(first.branch)),
            Chain::new(
                ProjectedResidual::new(fold_branch!(second.branch), second.shortcut.clone()),
                Chain::new(
                    ProjectedResidual::new(fold_branch!(third.branch), third.shortcut.clone()),
                    head.clone(),
                ),
            ),
        ),
    )
}

/// Training images the int8 quantization calibrates on.
const CALIBRATION_IMAGES: usize = 500;

/// Fashion-MNIST's pixel mean and standard deviation (of `p / 255` over the training set): the
/// inputs are standardized with them.
const MEAN: f32 = 0.2860;
const STD: f32 = 0.3530;

/// Samples per forward pass when evaluating.
const EVAL_BATCH: usize = 100;

struct Resnet;

impl Model for Resnet {
    type Net = ResNet8;
    const DESCRIPTION: &'static str = "ResNet-8 (conv 16, three residual stacks of 16, 32, 64 filters with batch norm, \
         global average pool, 10)";
    const DATA: DataSet = data_set::FASHION_MNIST;

    /// The image, standardized: `(p / 255 - MEAN) / STD`, what the saved net expects.
    fn fill(split: &Split, index: usize, x: &mut [[[f32; COLS]; ROWS]; 1]) {
        for (dst, &p) in x
            .as_flattened_mut()
            .as_flattened_mut()
            .iter_mut()
            .zip(split.image(index))
        {
            *dst = standardize(p);
        }
    }

    /// The image, mirrored left to right half of the time: clothes are (nearly) symmetric, so
    /// the net sees two views of each. (Shifts of up to 2 pixels as well, as `mnist_cnn` does,
    /// slowed the learning: 91.7% after the 9 epochs, against 92.4% without.)
    fn fill_training(
        split: &Split,
        index: usize,
        x: &mut [[[f32; COLS]; ROWS]; 1],
        rng: &mut StdRng,
    ) {
        Self::fill(split, index, x);
        if rng.random_bool(0.5) {
            for row in &mut x[0] {
                row.reverse();
            }
        }
    }

    /// The int8 form of the trained net (batch normalizations folded, calibrated on the first
    /// training images) and its test accuracy, integers only.
    fn after_training(net: &ResNet8, train: &Split, test: &Split) -> Vec<String> {
        let folded = fold(net);
        let image = |split: &Split, index| {
            let mut x = [[[0.0; COLS]; ROWS]; 1];
            Self::fill(split, index, &mut x);
            x
        };
        let calibration: Vec<_> = (0..CALIBRATION_IMAGES.min(train.len()))
            .map(|i| image(train, i))
            .collect();
        let int8 = match quantize(&folded, &calibration) {
            Ok(int8) => int8,
            Err(e) => return vec![format!("int8: not quantized: {e}")],
        };
        let right = (0..test.len())
            .filter(|&i| int8.predict(&image(test, i)) == usize::from(test.label(i)))
            .count();
        let bytes = |n: usize| n.div_ceil(1024);
        vec![format!(
            "int8 (batch norm folded, calibrated on {} training images): test accuracy {:.2}%, \
             parameters {} KiB (f32 {} KiB)",
            calibration.len(),
            100.0 * right as f64 / test.len() as f64,
            bytes(<<Folded as Quantize>::Quantized as Layer>::PARAMETER_BYTES),
            bytes(<Folded as Layer>::PARAMETER_BYTES),
        )]
    }

    fn save(net: &ResNet8, path: &Path) -> Result<(), String> {
        constmat::io::safetensors::save(
            net,
            path,
            &[
                (
                    "architecture",
                    "ResNet-8 (MLPerf Tiny, one input channel): see the PyTorch module in \
                     examples/fashion_resnet/main.rs",
                ),
                (
                    "input",
                    "1x28x28 pixels (channel, row, column), standardized: (p / 255 - 0.2860) / 0.3530",
                ),
                (
                    "output",
                    "logits of the 10 Fashion-MNIST classes (softmax gives probabilities)",
                ),
                ("producer", "constmat fashion_resnet"),
            ],
        )
        .map_err(|e| e.to_string())
    }
}

/// A pixel as the net takes it.
fn standardize(p: u8) -> f32 {
    (f32::from(p) * (1.0 / 255.0) - MEAN) / STD
}

const USAGE: &str = "\
Trains the MLPerf Tiny ResNet-8 (three residual stacks with batch normalization, a global
average pool; softmax cross-entropy, batch 64) on Fashion-MNIST.

Usage: cargo run --release --example fashion_resnet -- [OPTIONS]

Options:
  --data DIR          Fashion-MNIST directory, looked in first (then $FASHION_MNIST_DIR,
                      then /usr/share/datasets/fashion-mnist, where
                      `apt-get install dataset-fashion-mnist` puts it)
  --epochs N          passes over the training set, a whole number from 1 to 100000
                      (default 9)
  --lr RATE           base learning rate, a positive number from 1.2e-38 to 3.4e38 (the
                      net trains in f32; default 0.05; try 0.001 with adam)
  --optimizer NAME    sgd | momentum | adam (default momentum, 0.9)
  --schedule NAME     cosine | step | constant (default cosine decay to 0 over the run;
                      step halves the rate every 3 epochs)
  --weight-decay L    the momentum optimizer's weight decay, from 0 up to 1 (default 5e-4;
                      0 with sgd or adam, which take none)
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
        epochs: 9,
        lr: 0.05,
        optimizer: "momentum".into(),
        schedule: "cosine".into(),
        seed: 42,
        threads: 1,
        save: None,
        plot: None,
        weight_decay: 5e-4,
        usual_lr: 0.05,
    };
    training::main::<Resnet, EVAL_BATCH>(defaults, USAGE)
}
