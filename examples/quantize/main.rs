//! Quantizes the two shipped MNIST nets to int8, writes the int8 files, and compares them with
//! their f32 originals.
//!
//! ```text
//! cargo run --release --example quantize [-- --data DIR --calibration 500 --out DIR]
//! ```
//!
//! The data is found (or downloaded) as `mnist_static` finds it. Each net (the MLP
//! `models/mnist-784-128-64-10.safetensors` and the LeNet-5 `models/mnist-cnn-lenet5.safetensors`)
//! is quantized with `nn::quantize`, calibrated on the first training images, written under
//! its original's name with `-int8` to `target/quantized/` (`--out` picks another directory,
//! created if need be and checked before any work; `--out models` writes the shipped int8 files
//! again, which gives the same bytes on every machine), read back and compared, and both forms
//! are measured on the 10,000 test images. The last lines, one per net, are meant for scripts:
//!
//! ```text
//! mlp: f32 98.10%, int8 98.16%, 427 KiB -> 109 KiB, 4.8 µs -> 1.4 µs
//! cnn: f32 99.42%, int8 99.42%, 241 KiB -> 63 KiB, 13.5 µs -> 24.1 µs
//! ```
//!
//! (accuracy, the parameters' read-only memory baked, one prediction's time). The files' layout:
//! `docs/quantization.md`, "The int8 weights file".

#[path = "../mnist_common/mod.rs"]
#[allow(dead_code)] // the training session is not used here
mod common;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use common::training::{say, say_text};
use constmat::data::mnist::{Mnist, PIXELS, Split};
use constmat::embed::Baked;
use constmat::io::safetensors as st;
use constmat::nn::{Inline, Layer, Quantize, Relu, Train, argmax, quantize};

type Mlp = constmat::net![
    constmat::nn::Dense<f32, 784, 128, Relu>,
    constmat::nn::Dense<f32, 128, 64, Relu>,
    constmat::nn::Dense<f32, 64, 10>,
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

const HELP: &str = "\
Quantizes the shipped MNIST nets to int8 and compares them with their f32 originals.

Usage: cargo run --release --example quantize [-- OPTIONS]

Options:
  --data DIR          where the MNIST files are (else $MNIST_DIR, data/mnist, or downloaded)
  --calibration N     training images the activations' ranges are measured on (default 500)
  --out DIR           where the int8 files are written, created if need be (default:
                      target/quantized/; `--out models` from the repository's root
                      replaces the shipped int8 files)
  -h, --help          this text

Exit codes:
  0  quantized, wrote and measured both nets
  1  failed while running: the data, a model file, an output file, or a net that cannot be
     quantized
  2  a bad command line (nothing was run)
";

struct Options {
    data: Option<PathBuf>,
    calibration: usize,
    out: PathBuf,
}

/// The options, `None` for `--help`.
fn parse_args() -> Result<Option<Options>, String> {
    let mut options = Options {
        data: None,
        calibration: 500,
        out: default_out(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--data" => options.data = Some(PathBuf::from(value("--data")?)),
            "--out" => options.out = PathBuf::from(value("--out")?),
            "--calibration" => {
                let text = value("--calibration")?;
                options.calibration = match text.parse() {
                    Ok(n) if (1..=60_000).contains(&n) => n,
                    _ => {
                        return Err(format!(
                            "--calibration takes a number of images from 1 to 60000, not {text:?}"
                        ));
                    }
                };
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(Some(options))
}

/// A test image as the shipped nets take it: pixels scaled to [0, 1].
fn scaled(image: &[u8; PIXELS]) -> [f32; PIXELS] {
    image.map(|p| f32::from(p) / 255.0)
}

fn image(pixels: &[u8; PIXELS]) -> [[[f32; 28]; 28]; 1] {
    [std::array::from_fn(|r| {
        std::array::from_fn(|c| f32::from(pixels[r * 28 + c]) / 255.0)
    })]
}

/// The fastest of 5 runs of `reps` calls of `f`, in µs per call.
fn time_per_call(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..reps {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / reps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// One line for scripts: accuracies, memory, time per prediction.
fn summary(name: &str, accuracy: (f64, f64), bytes: (usize, usize), micros: (f64, f64)) -> String {
    let kib = |b: usize| (b as f64 / 1024.0).round();
    format!(
        "{name}: f32 {:.2}%, int8 {:.2}%, {} KiB -> {} KiB, {:.1} µs -> {:.1} µs",
        accuracy.0,
        accuracy.1,
        kib(bytes.0),
        kib(bytes.1),
        micros.0,
        micros.1
    )
}

/// `quantized/` in the build's target directory (`$CARGO_TARGET_DIR`, else the repository's
/// `target/`): a directory of its own, so that a run never touches the shipped files unless
/// asked to (`--out models`).
fn default_out() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("the examples' package is a directory of the repository")
                .join("target")
        },
        PathBuf::from,
    );
    target.join("quantized")
}

/// The shipped model `file`, in `models/` at the repository's root (this package is `examples/`).
fn model(file: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    root.parent()
        .expect("the examples' package is a directory of the repository")
        .join("models")
        .join(file)
}

/// Writes `net` to `dir/file` with metadata saying how it was made, reads it back, and checks
/// that the file holds exactly `net`.
fn write_int8<Q: constmat::nn::Weights + PartialEq>(
    net: &Q,
    dir: &Path,
    file: &str,
    (source, calibration): (&str, usize),
) -> Result<(), String> {
    let path = dir.join(file);
    let calibrated =
        format!("the first {calibration} MNIST training images, pixels scaled to [0, 1]");
    let command = format!("cargo run --release --example quantize -- --calibration {calibration}");
    st::save(
        net,
        &path,
        &[
            ("quantized_from", source),
            ("calibration", &calibrated),
            ("made_by", &command),
        ],
    )
    .map_err(|e| e.to_string())?;
    let back: Q = st::load(&path).map_err(|e| e.to_string())?;
    if back != *net {
        return Err(format!(
            "{}: the file read back differs from the net",
            path.display()
        ));
    }
    say!("wrote {}", path.display());
    Ok(())
}

fn mlp(data: &Mnist, calibration: usize, out: &Path) -> Result<String, String> {
    let path = model("mnist-784-128-64-10.safetensors");
    let net: Mlp = st::load(&path).map_err(|e| e.to_string())?;
    let samples: Vec<[f32; PIXELS]> = data.train.images()[..calibration]
        .iter()
        .map(scaled)
        .collect();
    let int8 = quantize(&net, &samples).map_err(|e| format!("the MLP: {e}"))?;
    write_int8(
        &int8.net,
        out,
        "mnist-784-128-64-10-int8.safetensors",
        ("mnist-784-128-64-10.safetensors", calibration),
    )?;
    let baked = Box::new(int8.net.to_store::<Inline>());
    let test: &Split = &data.test;
    let mut ws = Train::<f32, 1>::workspace(&net);
    let (mut f32_correct, mut int8_correct) = (0, 0);
    for (pixels, &label) in test.images().iter().zip(test.labels()) {
        let x = scaled(pixels);
        f32_correct += usize::from(argmax(&net.forward_train(&[x], &mut ws)[0]) == label.into());
        int8_correct += usize::from(int8.predict(&x) == label.into());
    }
    let x = scaled(test.image(0));
    let xq = x.map(|v| int8.input.quantize(v));
    let (mut out, mut out_q) = ([0.0_f32; 10], [0_i8; 10]);
    let micros = (
        time_per_call(20_000, || net.forward_one(black_box(&x), &mut out)),
        time_per_call(20_000, || baked.forward_one(black_box(&xq), &mut out_q)),
    );
    let percent = |c: usize| 100.0 * c as f64 / test.len() as f64;
    Ok(summary(
        "mlp",
        (percent(f32_correct), percent(int8_correct)),
        (
            <Baked<Mlp> as Layer>::PARAMETER_BYTES,
            <<Mlp as Quantize>::Quantized as Layer>::PARAMETER_BYTES,
        ),
        micros,
    ))
}

fn cnn(data: &Mnist, calibration: usize, out: &Path) -> Result<String, String> {
    const BATCH: usize = 100;
    let path = model("mnist-cnn-lenet5.safetensors");
    let net: LeNet = st::load(&path).map_err(|e| e.to_string())?;
    let samples: Vec<_> = data.train.images()[..calibration]
        .iter()
        .map(image)
        .collect();
    let int8 = quantize(&net, &samples).map_err(|e| format!("the CNN: {e}"))?;
    write_int8(
        &int8.net,
        out,
        "mnist-cnn-lenet5-int8.safetensors",
        ("mnist-cnn-lenet5.safetensors", calibration),
    )?;
    let baked = Box::new(int8.net.to_store::<Inline>());
    let test: &Split = &data.test;
    let mut ws = Train::<f32, BATCH>::workspace(&net);
    let mut x = constmat::nn::zeroed_batch::<[[[f32; 28]; 28]; 1], BATCH>();
    let (mut f32_correct, mut int8_correct) = (0, 0);
    for start in (0..test.len()).step_by(BATCH) {
        for (k, x) in x.iter_mut().enumerate() {
            *x = image(test.image(start + k));
        }
        let logits = net.forward_train(&x, &mut ws);
        for (k, (x, logits)) in x.iter().zip(logits.iter()).enumerate() {
            let label = usize::from(test.label(start + k));
            f32_correct += usize::from(argmax(logits) == label);
            int8_correct += usize::from(int8.predict(x) == label);
        }
    }
    let x = image(test.image(0));
    let xq = x.map(|c| c.map(|row| row.map(|v| int8.input.quantize(v))));
    let (mut out, mut out_q) = ([0.0_f32; 10], [0_i8; 10]);
    let micros = (
        time_per_call(5_000, || net.forward_one(black_box(&x), &mut out)),
        time_per_call(500, || baked.forward_one(black_box(&xq), &mut out_q)),
    );
    let percent = |c: usize| 100.0 * c as f64 / test.len() as f64;
    Ok(summary(
        "cnn",
        (percent(f32_correct), percent(int8_correct)),
        (
            <Baked<LeNet> as Layer>::PARAMETER_BYTES,
            <<LeNet as Quantize>::Quantized as Layer>::PARAMETER_BYTES,
        ),
        micros,
    ))
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(Some(options)) => options,
        Ok(None) => {
            say_text(HELP);
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let run = || -> Result<(), String> {
        // The output directory is checked before the work: a file that cannot be written is
        // found now, not after quantizing.
        let probe = options.out.join(".quantize-write-check");
        std::fs::create_dir_all(&options.out)
            .and_then(|()| std::fs::write(&probe, b""))
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| format!("cannot write to --out {}: {e}", options.out.display()))?;
        let dir = common::fetch::mnist_dir(options.data.as_deref()).map_err(|e| e.to_string())?;
        let data = Mnist::load(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        say!(
            "MNIST from {}; calibrating on the first {} training images",
            dir.display(),
            options.calibration
        );
        let lines = [
            mlp(&data, options.calibration, &options.out)?,
            cnn(&data, options.calibration, &options.out)?,
        ];
        for line in lines {
            say!("{line}");
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}
