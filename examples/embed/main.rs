//! Classifies a handwritten digit with an MNIST model baked into this program at compile time:
//! the 784-128-64-10 MLP, or LeNet-5 (`--net cnn`), in f32 or in int8 (`--net mlp-int8`,
//! `--net cnn-int8`: integer arithmetic only, from the files `examples/quantize` writes).
//!
//! ```text
//! cargo run --release --example embed -- digit.png
//! cargo run --release --example embed -- --net cnn digit.png
//! cargo run --release --example embed -- --net mlp-int8 digit.png
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
//! The weights are not read when the program runs: `include_net!` decoded the four files of
//! `models/` into the `static`s below while the program was compiled, and a prediction allocates
//! nothing.

mod cli;
mod preprocess;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use cli::Which;
use constmat::embed::Baked;
use constmat::nn::{Dense, Layer, Predict, Quantize, Relu, argmax, softmax_in_place};

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

/// The MLP in int8, as `cargo run --release --example quantize` wrote it: `i8` in and out.
static INT8: Baked<<Mnist as Quantize>::Quantized> =
    constmat::include_net!("../../models/mnist-784-128-64-10-int8.safetensors");

/// LeNet-5 in int8.
static INT8_CNN: Baked<<Cnn as Quantize>::Quantized> =
    constmat::include_net!("../../models/mnist-cnn-lenet5-int8.safetensors");

/// A net's input, ready for it: floats, or their int8 quantization (made once, before timing).
enum Input {
    Mlp([f32; 784]),
    Cnn([[[f32; 28]; 28]; 1]),
    MlpInt8([i8; 784]),
    CnnInt8([[[i8; 28]; 28]; 1]),
}

impl Which {
    fn input(self, pixels: &[f32; 784]) -> Input {
        match self {
            Which::Mlp => Input::Mlp(*pixels),
            Which::Cnn => Input::Cnn(image(pixels)),
            Which::MlpInt8 => Input::MlpInt8(pixels.map(|p| INT8.first.input.quantize(p))),
            Which::CnnInt8 => {
                let q = INT8_CNN.first.input;
                Input::CnnInt8(image(pixels).map(|c| c.map(|row| row.map(|p| q.quantize(p)))))
            }
        }
    }
}

impl Input {
    /// The ten probabilities: the softmax of the logits (an int8 net's dequantized first).
    fn probabilities(&self) -> [f32; 10] {
        let mut logits = match self {
            Input::Mlp(x) => return NET.predict_proba(x),
            Input::Cnn(x) => return CNN.predict_proba(x),
            Input::MlpInt8(x) => {
                let q = INT8.rest.rest.output;
                int8_logits(&INT8, x).map(|v| q.dequantize(v))
            }
            Input::CnnInt8(x) => {
                let q = INT8_CNN.rest.rest.rest.rest.rest.rest.rest.output;
                int8_logits(&INT8_CNN, x).map(|v| q.dequantize(v))
            }
        };
        softmax_in_place(&mut logits);
        logits
    }

    fn predict(&self) -> usize {
        match self {
            Input::Mlp(x) => NET.predict(x),
            Input::Cnn(x) => CNN.predict(x),
            Input::MlpInt8(x) => argmax(&int8_logits(&INT8, x)),
            Input::CnnInt8(x) => argmax(&int8_logits(&INT8_CNN, x)),
        }
    }
}

/// An int8 net's logits, integers only.
fn int8_logits<N: Layer<Out = [i8; 10]>>(net: &N, x: &N::In) -> [i8; 10] {
    let mut logits = [0; 10];
    net.forward_one(x, &mut logits);
    logits
}

/// The 784 pixels as the convolutional net's 1x28x28 image.
fn image(pixels: &[f32; 784]) -> [[[f32; 28]; 28]; 1] {
    [core::array::from_fn(|r| {
        core::array::from_fn(|c| pixels[r * 28 + c])
    })]
}

/// Single predictions timed for the median.
const TIMED_CALLS: usize = 10_001;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (which, path) = match cli::parse_args(&args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprint!("error: {message}\n\n{}", cli::USAGE);
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

    let input = which.input(&prepared.pixels);
    let probabilities = input.probabilities();
    let digit = input.predict();
    println!();
    for (d, &p) in probabilities.iter().enumerate() {
        let bar = "#".repeat((p * 40.0).round() as usize);
        let mark = if d == digit { " <-" } else { "" };
        println!("  {d}: {:>6.2}% {bar}{mark}", 100.0 * p);
    }
    println!("digit: {digit}");

    let (median, fastest) = time_one_prediction(&input);
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

/// The median and the fastest of [`TIMED_CALLS`] single predictions, each timed on its own
/// (an int8 net's input is quantized before).
fn time_one_prediction(input: &Input) -> (Duration, Duration) {
    // Warm the caches (the weights come from read-only memory the first time).
    for _ in 0..100 {
        std::hint::black_box(std::hint::black_box(input).predict());
    }
    let mut times: Vec<Duration> = (0..TIMED_CALLS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(std::hint::black_box(input).predict());
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    (times[times.len() / 2], times[0])
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
