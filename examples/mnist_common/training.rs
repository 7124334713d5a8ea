//! The training session of the MNIST examples (`mnist_static`, `mnist_cnn`): the options, the
//! data, the training loop with its progress bar and per-epoch line, the evaluation, the report
//! and saving. Each example supplies its net and how a digit becomes its input ([`Model`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use constmat::Matrix;
use constmat::data::mnist::{self, CLASSES, Mnist, Split};
use constmat::nn::{
    Adam, Layer, Momentum, Optimizer, Parameters, RandomInit, Schedule, Sgd, SoftmaxCrossEntropy,
    Train, Trainer, argmax, zeroed_batch,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};

use super::{fetch, report};

/// Samples per training step. A compile-time constant: every buffer of a step has it in its type.
pub const BATCH: usize = 64;

/// What an example trains: its net, and how a digit becomes the net's input.
pub trait Model {
    /// The net. Its type is its architecture.
    type Net: Train<f32, BATCH> + Layer<Out = [f32; CLASSES]> + RandomInit + Parameters<f32> + Clone;
    /// The architecture in words, for the first line.
    const DESCRIPTION: &'static str;
    /// The image at `index` of `split` as the net's input, written into `x`.
    fn fill(split: &Split, index: usize, x: &mut <Self::Net as Layer>::In);
    /// The image at `index` of `split` as a training input: [`fill`](Self::fill) unless the
    /// example varies its training images (with `rng`).
    fn fill_training(
        split: &Split,
        index: usize,
        x: &mut <Self::Net as Layer>::In,
        rng: &mut StdRng,
    ) {
        let _ = rng;
        Self::fill(split, index, x);
    }
    /// Writes the trained net to `path` (safetensors), ready for pixels scaled to [0, 1].
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    fn save(net: &Self::Net, path: &Path) -> Result<(), String>;
}

/// The command line.
#[derive(Debug, Clone)]
pub struct Options {
    pub data: Option<PathBuf>,
    pub epochs: usize,
    pub lr: f64,
    pub optimizer: String,
    pub schedule: String,
    pub seed: u64,
    pub threads: usize,
    pub save: Option<PathBuf>,
    pub plot: Option<PathBuf>,
}

/// The options on the command line, over `defaults`; `None` for `--help`.
pub fn parse_options(defaults: Options) -> Result<Option<Options>, String> {
    let mut o = defaults;
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
enum AnyOptimizer<N> {
    Sgd(Sgd),
    Momentum(Momentum<f32, N>),
    Adam(Adam<f32, N>),
}

impl<N: Parameters<f32>> Optimizer<f32, N> for AnyOptimizer<N> {
    fn update(&mut self, net: &mut N, gradients: &N, learning_rate: f32) {
        match self {
            AnyOptimizer::Sgd(o) => o.update(net, gradients, learning_rate),
            AnyOptimizer::Momentum(o) => o.update(net, gradients, learning_rate),
            AnyOptimizer::Adam(o) => o.update(net, gradients, learning_rate),
        }
    }
}

/// Trains `M`'s net as the options say, evaluating it on the test set in batches of `EVAL`, and
/// prints the report; the last line is `test accuracy: NN.NN%`.
pub fn run<M: Model, const EVAL: usize>(o: &Options) -> Result<(), String>
where
    M::Net: Train<f32, EVAL>,
{
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
    let mut net = M::Net::random(&mut rng);
    let mut trainer = Trainer::<f32, M::Net, BATCH>::new(&net);
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
        "training {}, batch {BATCH}, {} epochs, {} lr {} ({} schedule), seed {}, {} thread(s)",
        M::DESCRIPTION,
        o.epochs,
        o.optimizer,
        o.lr,
        o.schedule,
        o.seed,
        o.threads
    );

    let mut x = zeroed_batch::<<M::Net as Layer>::In, BATCH>();
    let mut y = Matrix::<f32, BATCH, CLASSES>::zeros();
    let mut labels = [0u8; BATCH];
    let mut order: Vec<usize> = (0..data.train.len()).collect();
    let mut eval = Evaluator::<M, EVAL>::new(&net);
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
            for ((x, label), &index) in x.iter_mut().zip(&mut labels).zip(indices) {
                M::fill_training(&data.train, index, x, &mut rng);
                *label = data.train.label(index);
            }
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
        M::save(&net, path)?;
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

/// Forward passes over a whole split in batches of `EVAL`, reusing one workspace.
struct Evaluator<M: Model, const EVAL: usize>
where
    M::Net: Train<f32, EVAL>,
{
    workspace: <M::Net as Train<f32, EVAL>>::Workspace,
    x: Box<[<M::Net as Layer>::In; EVAL]>,
}

impl<M: Model, const EVAL: usize> Evaluator<M, EVAL>
where
    M::Net: Train<f32, EVAL>,
{
    fn new(net: &M::Net) -> Self {
        Self {
            workspace: Train::<f32, EVAL>::workspace(net),
            x: zeroed_batch(),
        }
    }

    /// The predicted class of every image of `split`, in order.
    fn predict_all(&mut self, net: &M::Net, split: &Split) -> Vec<u8> {
        let mut predictions = Vec::with_capacity(split.len());
        for start in (0..split.len()).step_by(EVAL) {
            let real = (split.len() - start).min(EVAL);
            // A short last batch is padded by repeating its last image; the padding is ignored.
            for (k, x) in self.x.iter_mut().enumerate() {
                M::fill(split, start + k.min(real - 1), x);
            }
            let logits = net.forward_train(&self.x, &mut self.workspace);
            predictions.extend(logits.iter().take(real).map(|row| argmax(row) as u8));
        }
        predictions
    }

    fn accuracy(&mut self, net: &M::Net, split: &Split) -> f64 {
        let predictions = self.predict_all(net, split);
        accuracy_of(&predictions, split.labels())
    }
}
