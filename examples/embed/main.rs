//! Classifies a handwritten digit with an MNIST model baked into this program at compile time:
//! the 784-128-64-10 MLP, or LeNet-5 (`--net cnn`).
//!
//! ```text
//! cargo run --release --example embed -- digit.png
//! cargo run --release --example embed -- --net cnn digit.png
//! ```
//!
//! The image can be a PGM (`P2` or `P5`) or a PNG (gray, gray + alpha, RGB, RGBA, palette; any
//! bit depth) of any size, white-on-black or dark-on-light: it is normalized the way MNIST's
//! digits were (`preprocess.rs` says how). The program prints the 28x28 input the net sees, the
//! digit, the ten probabilities, and the time of one prediction (the median of many).
//!
//! `examples/embed/seven.png` is a sample to try: a 7 drawn by a short script (three
//! anti-aliased strokes, dark on light gray, 100x140 pixels), not taken from MNIST.
//!
//! The weights are not read when the program runs: `include_net!` decoded
//! `models/mnist-784-128-64-10.safetensors` and `models/mnist-cnn-lenet5.safetensors` into the
//! `static`s below while the program was compiled, and a prediction allocates nothing.

mod preprocess;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use constmat::embed::Baked;
use constmat::nn::{Dense, Predict, Relu};

/// The shipped model, as it was trained: 28x28 pixels in [0, 1] -> logits of the digits 0-9.
type Mnist = constmat::net![
    Dense<f32, 784, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, 10>,
];

/// The same layers with their weights in arrays, decoded from the file at compile time.
static NET: Baked<Mnist> = constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");

/// The shipped convolutional net (`examples/mnist_cnn`), as it was trained: LeNet-5.
type Cnn = constmat::net![
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

/// Its layers with their weights in arrays, decoded from the file at compile time.
static CNN: Baked<Cnn> = constmat::include_net!("../../models/mnist-cnn-lenet5.safetensors");

/// Which of the two baked nets classifies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Mlp,
    Cnn,
}

impl Which {
    fn probabilities(self, pixels: &[f32; 784]) -> [f32; 10] {
        match self {
            Which::Mlp => NET.predict_proba(pixels),
            Which::Cnn => CNN.predict_proba(&image(pixels)),
        }
    }

    fn predict(self, pixels: &[f32; 784]) -> usize {
        match self {
            Which::Mlp => NET.predict(pixels),
            Which::Cnn => CNN.predict(&image(pixels)),
        }
    }
}

/// The 784 pixels as the convolutional net's 1x28x28 image.
fn image(pixels: &[f32; 784]) -> [[[f32; 28]; 28]; 1] {
    [core::array::from_fn(|r| {
        core::array::from_fn(|c| pixels[r * 28 + c])
    })]
}

/// Single predictions timed for the median.
const TIMED_CALLS: usize = 10_001;

const USAGE: &str = "\
Classifies a handwritten digit with the MNIST model baked into this program.

Usage: cargo run --release --example embed -- [--net mlp|cnn] IMAGE

IMAGE is a PGM (P2 or P5) or PNG file of any size: one digit, white on black or dark on light.
--net chooses the baked net: the 784-128-64-10 MLP (mlp, the default) or LeNet-5 (cnn).
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (which, path) = match args.as_slice() {
        [flag] if flag == "-h" || flag == "--help" => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [path] if !path.starts_with('-') => (Which::Mlp, PathBuf::from(path)),
        [flag, net, path] if flag == "--net" && !path.starts_with('-') => match net.as_str() {
            "mlp" => (Which::Mlp, PathBuf::from(path)),
            "cnn" => (Which::Cnn, PathBuf::from(path)),
            other => {
                eprint!("error: --net: expected mlp or cnn, found `{other}`\n\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprint!("error: expected one image file\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(which, &path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(which: Which, path: &std::path::Path) -> Result<(), preprocess::ImageError> {
    let image = preprocess::load(path)?;
    let prepared = preprocess::to_mnist(&image)?;
    let (x, y, w, h) = prepared.bounding_box;
    println!(
        "{}: {}x{} {}{}",
        path.display(),
        image.width,
        image.height,
        image.format,
        if prepared.inverted {
            ", dark on light (inverted)"
        } else {
            ""
        }
    );
    println!(
        "digit: {w}x{h} pixels at ({x}, {y}), scaled by {:.3} to fit 20x20, centered by mass in 28x28:",
        prepared.scale
    );
    print!("{}", preprocess::terminal_art(&prepared.pixels));

    let probabilities = which.probabilities(&prepared.pixels);
    let digit = which.predict(&prepared.pixels);
    println!();
    for (d, &p) in probabilities.iter().enumerate() {
        let bar = "#".repeat((p * 40.0).round() as usize);
        let mark = if d == digit { " <-" } else { "" };
        println!("  {d}: {:>6.2}% {bar}{mark}", 100.0 * p);
    }
    println!("digit: {digit}");

    let (median, fastest) = time_one_prediction(which, &prepared.pixels);
    println!(
        "one prediction: {:.2} µs (median of {TIMED_CALLS} calls; fastest {:.2} µs){}",
        micros(median),
        micros(fastest),
        if cfg!(debug_assertions) {
            "; this is a debug build, use --release"
        } else {
            ""
        }
    );
    Ok(())
}

/// The median and the fastest of [`TIMED_CALLS`] single predictions, each timed on its own.
fn time_one_prediction(which: Which, x: &[f32; 784]) -> (Duration, Duration) {
    // Warm the caches (the weights come from read-only memory the first time).
    for _ in 0..100 {
        std::hint::black_box(which.predict(std::hint::black_box(x)));
    }
    let mut times: Vec<Duration> = (0..TIMED_CALLS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(which.predict(std::hint::black_box(x)));
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    (times[times.len() / 2], times[0])
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
