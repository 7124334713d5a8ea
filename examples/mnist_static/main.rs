//! Trains the statically typed 784-128-64-10 MLP on MNIST and reports its test accuracy.
//!
//! ```text
//! cargo run --release --example mnist_static [-- --epochs 10 --lr 0.03 --optimizer momentum ...]
//! ```
//!
//! Run with `--help` for every option. The data is read from `--data DIR`, else `$MNIST_DIR`,
//! else `data/mnist/` (downloaded there, checksums verified, if missing; `$MNIST_MIRROR` replaces
//! the download mirrors). The last line printed is always `test accuracy: NN.NN%`, for scripts.

mod fetch;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use constmat::Matrix;
use constmat::data::mnist::{self, CLASSES, Mnist, PIXELS, Split};
use constmat::nn::{
    Adam, Dense, Identity, Momentum, Optimizer, RandomInit, Relu, Schedule, Sgd,
    SoftmaxCrossEntropy, Train, Trainer, argmax,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};

/// The network: its type is its architecture.
type Net = constmat::net![
    Dense<f32, PIXELS, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, CLASSES, Identity>,
];

/// Samples per training step. A compile-time constant: every buffer of a step has it in its type.
const BATCH: usize = 64;
/// Samples per forward pass when evaluating.
const EVAL_BATCH: usize = 1000;
/// The mean and standard deviation of MNIST's training pixels (scaled to [0, 1]). Inputs are
/// standardized with them, the usual preprocessing for MNIST: centred inputs make the first
/// layer's gradients better conditioned.
const PIXEL_MEAN: f32 = 0.1307;
const PIXEL_STD: f32 = 0.3081;

/// Copies the images at `indices` into `x`, standardized, and their labels into `labels`, in one
/// pass with no allocation. `(p / 255 - mean) / std` is written as `p * scale + offset`, which
/// the compiler vectorizes. (A lookup table measured slower: a gather cannot be vectorized; and
/// `f32::mul_add` compiles to a call to a software `fmaf` unless the build targets FMA.)
fn fill_standardized<const B: usize>(
    split: &Split,
    indices: &[usize; B],
    x: &mut Matrix<f32, B, PIXELS>,
    labels: &mut [u8; B],
) {
    let scale = 1.0 / (255.0 * PIXEL_STD);
    let offset = -PIXEL_MEAN / PIXEL_STD;
    for ((row, label), &index) in x.rows_mut().zip(labels.iter_mut()).zip(indices) {
        for (dst, &p) in row.iter_mut().zip(split.image(index)) {
            *dst = f32::from(p) * scale + offset;
        }
        *label = split.label(index);
    }
}

const USAGE: &str = "\
Trains a 784-128-64-10 ReLU MLP (softmax cross-entropy, batch 64) on MNIST.

Usage: cargo run --release --example mnist_static -- [OPTIONS]

Options:
  --data DIR          MNIST directory (default: $MNIST_DIR, else data/mnist/, downloaded if missing)
  --epochs N          passes over the training set (default 10)
  --lr RATE           base learning rate (default 0.03; try 0.001 with adam)
  --optimizer NAME    sgd | momentum | adam (default momentum, 0.9)
  --schedule NAME     cosine | step | constant (default cosine decay to 0 over the run;
                      step halves the rate every 3 epochs)
  --seed N            seed of initialization and shuffling (default 42)
  --threads N         threads for the matrix products (default 1; needs `--features threads`;
                      results are identical for any N)
  --save PATH         write the trained weights (safetensors) to PATH
  --plot PATH         write the loss and accuracy curves as an SVG to PATH
  -h, --help          print this help
";

#[derive(Debug, Clone)]
struct Options {
    data: Option<PathBuf>,
    epochs: usize,
    lr: f64,
    optimizer: String,
    schedule: String,
    seed: u64,
    threads: usize,
    save: Option<PathBuf>,
    plot: Option<PathBuf>,
}

fn parse_options() -> Result<Option<Options>, String> {
    let mut o = Options {
        data: None,
        epochs: 10,
        lr: 0.03,
        optimizer: "momentum".into(),
        schedule: "cosine".into(),
        seed: 42,
        threads: 1,
        save: None,
        plot: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String, what: &str| format!("{flag}: expected {what}, found `{v}`");
        match flag.as_str() {
            "--data" => o.data = Some(value()?.into()),
            "--epochs" => {
                let v = value()?;
                o.epochs = v.parse().map_err(|_| number(v, "a whole number"))?;
            }
            "--lr" => {
                let v = value()?;
                o.lr = v.parse().map_err(|_| number(v, "a number"))?;
                if !(o.lr.is_finite() && o.lr > 0.0) {
                    return Err(format!("--lr: expected a positive number, found {}", o.lr));
                }
            }
            "--optimizer" => o.optimizer = value()?,
            "--schedule" => o.schedule = value()?,
            "--seed" => {
                let v = value()?;
                o.seed = v.parse().map_err(|_| number(v, "a whole number"))?;
            }
            "--threads" => {
                let v = value()?;
                o.threads = v
                    .parse()
                    .ok()
                    .filter(|&t| t > 0)
                    .ok_or_else(|| number(v, "a positive whole number"))?;
            }
            "--save" => o.save = Some(value()?.into()),
            "--plot" => o.plot = Some(value()?.into()),
            other => return Err(format!("unknown option `{other}` (see --help)")),
        }
    }
    if !["sgd", "momentum", "adam"].contains(&o.optimizer.as_str()) {
        return Err(format!(
            "--optimizer: expected sgd, momentum or adam, found `{}`",
            o.optimizer
        ));
    }
    if !["cosine", "step", "constant"].contains(&o.schedule.as_str()) {
        return Err(format!(
            "--schedule: expected cosine, step or constant, found `{}`",
            o.schedule
        ));
    }
    Ok(Some(o))
}

/// The optimizer chosen on the command line.
enum AnyOptimizer {
    Sgd(Sgd),
    Momentum(Momentum<f32, Net>),
    Adam(Adam<f32, Net>),
}

impl Optimizer<f32, Net> for AnyOptimizer {
    fn update(&mut self, net: &mut Net, gradients: &Net, learning_rate: f32) {
        match self {
            AnyOptimizer::Sgd(o) => o.update(net, gradients, learning_rate),
            AnyOptimizer::Momentum(o) => o.update(net, gradients, learning_rate),
            AnyOptimizer::Adam(o) => o.update(net, gradients, learning_rate),
        }
    }
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(o: &Options) -> Result<(), String> {
    let start = Instant::now();
    #[cfg(feature = "threads")]
    constmat::kernels::use_threads(o.threads).map_err(|e| format!("--threads: {e}"))?;
    #[cfg(not(feature = "threads"))]
    if o.threads > 1 {
        return Err(format!(
            "--threads {}: this build is single-threaded; add `--features threads` to cargo run",
            o.threads
        ));
    }
    let dir = fetch::mnist_dir(o.data.as_deref()).map_err(|e| e.to_string())?;
    let data = Mnist::load(&dir).map_err(|e| e.to_string())?;
    println!(
        "MNIST from {}: {} training, {} test images (loaded in {:.2} s)",
        dir.display(),
        data.train.len(),
        data.test.len(),
        start.elapsed().as_secs_f64()
    );
    if data.train.len() < BATCH || data.test.is_empty() {
        return Err(format!(
            "need at least {BATCH} training images and one test image, found {} and {}",
            data.train.len(),
            data.test.len()
        ));
    }

    let mut rng = StdRng::seed_from_u64(o.seed);
    let mut net = Net::random(&mut rng);
    let mut trainer = Trainer::<f32, Net, BATCH>::new(&net);
    let mut optimizer = match o.optimizer.as_str() {
        "sgd" => AnyOptimizer::Sgd(Sgd::new()),
        "adam" => AnyOptimizer::Adam(Adam::new(&net)),
        _ => AnyOptimizer::Momentum(Momentum::new(&net, 0.9)),
    };
    let batches_per_epoch = data.train.len() / BATCH;
    let schedule = match o.schedule.as_str() {
        "constant" => Schedule::Constant,
        "step" => Schedule::StepDecay {
            every: 3 * batches_per_epoch,
            factor: 0.5,
        },
        _ => Schedule::Cosine {
            total: batches_per_epoch * o.epochs,
            floor: 0.0,
        },
    };
    println!(
        "training 784-128-64-10 ReLU, batch {BATCH}, {} epochs, {} lr {} ({} schedule), seed {}, {} thread(s)",
        o.epochs, o.optimizer, o.lr, o.schedule, o.seed, o.threads
    );

    let mut x = Matrix::<f32, BATCH, PIXELS>::zeros();
    let mut y = Matrix::<f32, BATCH, CLASSES>::zeros();
    let mut labels = [0u8; BATCH];
    let mut order: Vec<usize> = (0..data.train.len()).collect();
    let mut eval = Evaluator::new(&net);
    let mut history = report::History::default();
    let mut step = 0;

    for epoch in 1..=o.epochs {
        let epoch_start = Instant::now();
        // A fresh order every epoch; the last partial batch is left out (it changes each epoch).
        order.shuffle(&mut rng);
        let progress = progress_bar(batches_per_epoch, epoch, o.epochs);
        let mut loss_sum = 0.0_f64;
        let (batches, _) = order.as_chunks::<BATCH>();
        for (b, indices) in batches.iter().enumerate() {
            fill_standardized(&data.train, indices, &mut x, &mut labels);
            mnist::one_hot(&labels, y.as_array_mut());
            let lr = schedule.learning_rate(o.lr, step) as f32;
            let loss = trainer
                .step(&mut net, &mut optimizer, lr, &SoftmaxCrossEntropy, &x, &y)
                .map_err(|diverged| {
                    progress.abandon();
                    format!(
                        "training diverged in epoch {epoch}, batch {}/{batches_per_epoch}: {diverged} \
                         (--lr {} with {}; try a smaller --lr)",
                        b + 1,
                        o.lr,
                        o.optimizer
                    )
                })?;
            loss_sum += f64::from(loss);
            step += 1;
            if b % 32 == 0 {
                progress.set_message(format!("loss {:.4}", loss_sum / (b + 1) as f64));
            }
            progress.inc(1);
        }
        progress.finish_and_clear();
        let train_seconds = epoch_start.elapsed().as_secs_f64();
        let train_loss = loss_sum / batches_per_epoch as f64;
        let accuracy = eval.accuracy(&net, &data.test);
        history.push(train_loss, accuracy);
        println!(
            "epoch {epoch:>2}/{}  train loss {train_loss:.4}  test accuracy {:.2}%  {:>7.0} samples/s  {:.2} s",
            o.epochs,
            100.0 * accuracy,
            (batches_per_epoch * BATCH) as f64 / train_seconds,
            epoch_start.elapsed().as_secs_f64(),
        );
    }

    let predictions = eval.predict_all(&net, &data.test);
    println!();
    print!(
        "{}",
        report::confusion_matrix(data.test.labels(), &predictions)
    );
    println!();
    print!("{}", report::misclassified(&data.test, &predictions, 4));
    if let Some(path) = &o.plot {
        std::fs::write(path, report::svg(&history))
            .map_err(|e| format!("cannot write the plot to {}: {e}", path.display()))?;
        println!("curves written to {}", path.display());
    }
    if let Some(path) = &o.save {
        save(&net, path)?;
        println!("weights written to {}", path.display());
    }
    println!("total time {:.2} s", start.elapsed().as_secs_f64());
    println!(
        "test accuracy: {:.2}%",
        100.0 * accuracy_of(&predictions, data.test.labels())
    );
    Ok(())
}

fn accuracy_of(predictions: &[u8], labels: &[u8]) -> f64 {
    let correct = predictions
        .iter()
        .zip(labels)
        .filter(|(p, l)| p == l)
        .count();
    correct as f64 / labels.len().max(1) as f64
}

/// Writes the net as safetensors, ready for pixels scaled to [0, 1].
///
/// The net was trained on standardized pixels `(x - m) / s`. The standardization is folded into
/// the first layer, `W·((x - m)/s) + b = (W/s)·x + (b - (m/s)·Σ_i W_i)`, so that users of the file
/// need no preprocessing beyond scaling pixels to [0, 1].
fn save(net: &Net, path: &std::path::Path) -> Result<(), String> {
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

fn progress_bar(len: usize, epoch: usize, epochs: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "epoch {epoch:>2}/{epochs} [{{bar:30}}] {{pos}}/{{len}} {{msg}} {{per_sec}} eta {{eta}}"
        ))
        .expect("a valid progress template")
        .progress_chars("=> "),
    );
    bar
}

/// Forward passes over a whole split in batches of [`EVAL_BATCH`], reusing one workspace.
struct Evaluator {
    workspace: <Net as Train<f32, EVAL_BATCH>>::Workspace,
    x: Matrix<f32, EVAL_BATCH, PIXELS>,
    labels: [u8; EVAL_BATCH],
}

impl Evaluator {
    fn new(net: &Net) -> Self {
        Self {
            workspace: Train::<f32, EVAL_BATCH>::workspace(net),
            x: Matrix::zeros(),
            labels: [0; EVAL_BATCH],
        }
    }

    /// The predicted class of every image of `split`, in order.
    fn predict_all(&mut self, net: &Net, split: &Split) -> Vec<u8> {
        let mut predictions = Vec::with_capacity(split.len());
        let mut indices = [0usize; EVAL_BATCH];
        for start in (0..split.len()).step_by(EVAL_BATCH) {
            let real = (split.len() - start).min(EVAL_BATCH);
            // A short last batch is padded by repeating its last image; the padding is ignored.
            for (k, index) in indices.iter_mut().enumerate() {
                *index = start + k.min(real - 1);
            }
            fill_standardized(split, &indices, &mut self.x, &mut self.labels);
            let logits = net.forward_train(&self.x, &mut self.workspace);
            predictions.extend(logits.iter().take(real).map(|row| argmax(row) as u8));
        }
        predictions
    }

    fn accuracy(&mut self, net: &Net, split: &Split) -> f64 {
        let predictions = self.predict_all(net, split);
        accuracy_of(&predictions, split.labels())
    }
}
