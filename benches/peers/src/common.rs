//! What every implementation shares: the workloads, the weights, the data, and the clock.

use std::time::{Duration, Instant};

use constmat::data::idx;
use constmat::data::mnist::{Mnist, Split};
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// Pixels of an image: the MLP's input width.
pub const PIXELS: usize = 784;
/// First hidden layer.
pub const H1: usize = 128;
/// Second hidden layer.
pub const H2: usize = 64;
/// Classes: the MLP's output width.
pub const CLASSES: usize = 10;
/// Samples per training step.
pub const BATCH: usize = 64;
/// Samples of the large forward pass.
pub const EVAL: usize = 1000;
/// Training steps in an epoch of MNIST: 60,000 / 64, the last partial batch left out.
pub const EPOCH_STEPS: usize = 937;
/// MNIST's pixel mean and standard deviation (pixels scaled to [0, 1]), as `mnist_static` uses.
pub const PIXEL_MEAN: f32 = 0.1307;
pub const PIXEL_STD: f32 = 0.3081;
/// Learning rate of the `train_step` workload (repeated steps on one batch).
pub const STEP_LR: f32 = 0.01;
/// Learning rate of the `epoch` workload and of the checks.
pub const EPOCH_LR: f32 = 0.05;
/// The stride of the pseudo-shuffle: sample `p` of an epoch is image `(p * SHUFFLE) % n`. It is
/// prime and does not divide 60,000, so an epoch visits every image once, in a scattered order
/// that the Python peers reproduce exactly.
pub const SHUFFLE: usize = 7919;

/// A workload, with how its time per iteration turns into the figure reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// `(M x K)·(K x N)`.
    Gemm(usize, usize, usize),
    /// One training step on a fixed batch of 64 (forward, loss, backward, SGD).
    TrainStep,
    /// A training step of the epoch loop: batch assembly (u8 -> f32, standardize, one-hot)
    /// plus the step, on the data set; scaled to 937 steps.
    Epoch,
    /// The forward pass of one sample.
    Forward1,
    /// The forward pass of 1,000 samples.
    Forward1000,
    /// A step of the CNN's epoch loop (batch assembly plus a training step), scaled to 937.
    CnnEpoch,
    /// The CNN's forward pass of one image.
    CnnForward1,
    /// The CNN's forward pass of 1,000 images.
    CnnForward1000,
    /// The MLP quantized to int8 (its weights after the epoch's steps, calibrated on the 1,000
    /// evaluation images), the forward pass of one sample: constmat's `nn::quantize` and
    /// PyTorch's dynamic quantization.
    Int8Forward1,
}

/// A GEMM shape, `(M, K, N)`: `(M x K)·(K x N)`.
pub type Shape = (usize, usize, usize);

/// The GEMM shapes, `M x K x N`: the four of the MLP named in the performance issue, and 256³.
pub const GEMM_SHAPES: [Shape; 5] = [
    (128, 784, 64),
    (64, 128, 64),
    (128, 64, 784),
    (784, 64, 128),
    (256, 256, 256),
];

/// Every workload, in the order of the table.
pub fn workloads() -> Vec<Workload> {
    let mut all: Vec<Workload> = GEMM_SHAPES
        .iter()
        .map(|&(m, k, n)| Workload::Gemm(m, k, n))
        .collect();
    all.extend([
        Workload::TrainStep,
        Workload::Epoch,
        Workload::Forward1,
        Workload::Forward1000,
        Workload::CnnEpoch,
        Workload::CnnForward1,
        Workload::CnnForward1000,
        Workload::Int8Forward1,
    ]);
    all
}

impl Workload {
    /// The key in the Python peers' JSON reports.
    pub fn key(self) -> String {
        match self {
            Workload::Gemm(m, k, n) => format!("gemm_{m}x{k}x{n}"),
            Workload::TrainStep => "train_step".into(),
            Workload::Epoch => "epoch_step".into(),
            Workload::Forward1 => "forward_batch1".into(),
            Workload::Forward1000 => "forward_batch1000".into(),
            Workload::CnnEpoch => "cnn_epoch_step".into(),
            Workload::CnnForward1 => "cnn_forward_batch1".into(),
            Workload::CnnForward1000 => "cnn_forward_batch1000".into(),
            Workload::Int8Forward1 => "int8_forward_batch1".into(),
        }
    }

    /// The row label of the table; `epoch_steps` is how many steps the epoch figure timed.
    pub fn label(self, epoch_steps: usize) -> String {
        match self {
            Workload::Gemm(m, k, n) => format!("GEMM {m}x{k}x{n}"),
            Workload::TrainStep => "training step, batch 64".into(),
            Workload::Epoch => format!("epoch ({EPOCH_STEPS} steps, from {epoch_steps} timed)"),
            Workload::Forward1 => "forward, batch 1".into(),
            Workload::Forward1000 => "forward, batch 1000".into(),
            Workload::CnnEpoch => {
                format!("CNN epoch ({EPOCH_STEPS} steps, from {epoch_steps} timed)")
            }
            Workload::CnnForward1 => "CNN forward, batch 1".into(),
            Workload::CnnForward1000 => "CNN forward, batch 1000".into(),
            Workload::Int8Forward1 => "int8 MLP forward, batch 1".into(),
        }
    }

    /// Whether a larger figure is better (throughputs) rather than a smaller one (times).
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Workload::Gemm(..) | Workload::Forward1000 | Workload::CnnForward1000
        )
    }

    /// Whether only some implementations have the workload (the CNN's and the int8 MLP's).
    pub fn is_optional(self) -> bool {
        self.is_cnn() || self == Workload::Int8Forward1
    }

    /// Whether the workload is one of the CNN's.
    pub fn is_cnn(self) -> bool {
        matches!(
            self,
            Workload::CnnEpoch | Workload::CnnForward1 | Workload::CnnForward1000
        )
    }

    /// The unit of the figure.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Gemm(..) => "GFLOP/s",
            Workload::TrainStep => "ms",
            Workload::Epoch | Workload::CnnEpoch => "s",
            Workload::Forward1 | Workload::CnnForward1 | Workload::Int8Forward1 => "µs",
            Workload::Forward1000 | Workload::CnnForward1000 => "samples/s",
        }
    }

    /// The figure from seconds per iteration (per product, step, or pass).
    pub fn figure(self, seconds: f64) -> f64 {
        match self {
            Workload::Gemm(m, k, n) => (2 * m * k * n) as f64 / seconds / 1e9,
            Workload::TrainStep => seconds * 1e3,
            Workload::Epoch | Workload::CnnEpoch => seconds * EPOCH_STEPS as f64,
            Workload::Forward1 | Workload::CnnForward1 | Workload::Int8Forward1 => seconds * 1e6,
            Workload::Forward1000 | Workload::CnnForward1000 => EVAL as f64 / seconds,
        }
    }
}

/// How long each measurement runs.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Time spent repeating each workload in a round (after a warm-up of a tenth of it).
    pub per_workload: Duration,
    /// Training steps timed for the epoch workload in each round (after 3 warm-up steps).
    pub epoch_steps: usize,
}

/// Runs `f` for a tenth of `budget` to warm up (at least once), then repeatedly for `budget`,
/// and returns the mean seconds per call.
pub fn measure(budget: Duration, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    loop {
        f();
        if start.elapsed() >= budget / 10 {
            break;
        }
    }
    let start = Instant::now();
    let mut calls = 0_u64;
    loop {
        f();
        calls += 1;
        let elapsed = start.elapsed();
        if elapsed >= budget {
            return elapsed.as_secs_f64() / calls as f64;
        }
    }
}

/// The element `(r, c)` of the deterministic GEMM operand `seed`: values in `[-0.5, 0.5)`,
/// reproduced bit for bit by `peers.py`.
pub fn operand(r: usize, c: usize, seed: usize) -> f32 {
    ((r * 31 + c * 17 + seed * 7) % 23) as f32 / 23.0 - 0.5
}

/// The parameters of the MLP, flat and row-major in PyTorch's orientation: `w1` is 128 x 784
/// (`out x in`), `b1` has 128 elements, and so on. Every implementation starts from these.
#[derive(Debug, Clone)]
pub struct Weights {
    /// `w1, b1, w2, b2, w3, b3`.
    pub tensors: [Vec<f32>; 6],
}

impl Weights {
    pub fn w(&self, layer: usize) -> &[f32] {
        &self.tensors[2 * layer]
    }

    pub fn b(&self, layer: usize) -> &[f32] {
        &self.tensors[2 * layer + 1]
    }

    /// Little-endian bytes of all six tensors in order, for the Python peers.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.tensors
            .iter()
            .flatten()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    }
}

/// The training images: MNIST's when `$MNIST_DIR` is set, random ones otherwise.
pub struct Data {
    pub split: Split,
    /// Where the images come from, for the report (and for the Python peers).
    pub source: Source,
}

#[derive(Debug, Clone)]
pub enum Source {
    Mnist(String),
    Synthetic,
}

impl Data {
    /// Loads MNIST's training set from `$MNIST_DIR`, or makes 60,000 random images and labels.
    pub fn load() -> Result<Self, String> {
        match std::env::var("MNIST_DIR") {
            Ok(dir) if !dir.is_empty() => {
                let mnist = Mnist::load(&dir).map_err(|e| format!("MNIST_DIR={dir}: {e}"))?;
                Ok(Self {
                    split: mnist.train,
                    source: Source::Mnist(dir),
                })
            }
            _ => Ok(Self {
                split: synthetic(60_000),
                source: Source::Synthetic,
            }),
        }
    }

    /// The image indices of step `step` of an epoch (see [`SHUFFLE`]).
    pub fn indices(&self, step: usize) -> [usize; BATCH] {
        let n = self.split.len();
        std::array::from_fn(|k| ((step * BATCH + k) * SHUFFLE) % n)
    }

    /// The images of epoch positions `0..count` (in the epoch's order), standardized: the
    /// input of the forward-pass workloads.
    pub fn standardized(&self, count: usize) -> Vec<f32> {
        let n = self.split.len();
        (0..count)
            .flat_map(|p| self.split.image((p * SHUFFLE) % n).iter())
            .map(|&p| standardize(p))
            .collect()
    }
}

/// A pixel scaled to [0, 1] and standardized, with the same operations as `mnist_static`
/// (`p / 255`, then `(v - mean) / std`), so every implementation sees the same floats.
pub fn standardize(pixel: u8) -> f32 {
    (f32::from(pixel) / 255.0 - PIXEL_MEAN) / PIXEL_STD
}

/// `n` random 28x28 images and labels, as a [`Split`].
fn synthetic(n: usize) -> Split {
    let mut rng = StdRng::seed_from_u64(7);
    let mut bytes = vec![0, 0, 8, 3];
    for dim in [n as u32, 28, 28] {
        bytes.extend(dim.to_be_bytes());
    }
    bytes.extend((0..n * PIXELS).map(|_| rng.random::<u8>()));
    let images = idx::read_images(&bytes[..]).expect("a well-formed IDX image file");
    let labels = (0..n).map(|_| rng.random_range(0..10)).collect();
    Split::new(images, labels).expect("28x28 images with labels below 10")
}

/// An MLP implementation, with its own parameters and buffers.
pub trait Mlp {
    /// Replaces the parameters.
    fn set_weights(&mut self, weights: &Weights);
    /// Assembles the training batch of the given images: pixels to standardized floats,
    /// labels to one-hot targets (or whatever the implementation's loss wants).
    fn load_batch(&mut self, data: &Data, indices: &[usize; BATCH]);
    /// One training step (forward, loss, backward, plain SGD) on the loaded batch; returns the
    /// loss before the update.
    fn step(&mut self, lr: f32) -> f32;
    /// The mean loss on the loaded batch, without training.
    fn loss(&mut self) -> f32;
    /// Sets the input of the batch-1 forward pass (784 standardized pixels).
    fn load_single(&mut self, x: &[f32]);
    /// The batch-1 forward pass: the logits.
    fn forward_single(&mut self) -> [f32; CLASSES];
    /// Sets the input of the batch-1000 forward pass (1000 x 784, row-major).
    fn load_eval(&mut self, x: &[f32]);
    /// The batch-1000 forward pass; returns one logit (so that it cannot be skipped).
    fn forward_eval(&mut self) -> f32;
    /// The logits of the last batch-1000 forward pass, 1000 x 10 row-major.
    fn eval_logits(&self) -> Vec<f32>;
    /// Quantizes the current net to int8, calibrated on `calibration` (rows of 784), for
    /// [`Mlp::forward_single_int8`]; `false` when the implementation has no int8 form.
    fn prepare_int8(&mut self, _calibration: &[f32]) -> bool {
        false
    }
    /// The batch-1 forward pass of the int8 net on the input of [`Mlp::load_single`]: its int8
    /// outputs.
    fn forward_single_int8(&mut self) -> [i8; CLASSES] {
        unreachable!("only called after prepare_int8 returned true")
    }
}

/// One product of a GEMM workload, with its operands.
pub trait Gemm {
    /// Computes `C = A·B`.
    fn run(&mut self);
    /// `C`, row-major.
    fn result(&self) -> Vec<f32>;
}

/// The seconds per iteration of each workload, in the order of [`workloads`].
pub type Times = Vec<(Workload, f64)>;

/// The CNN's parameters in PyTorch's order and layout (`0.weight` `[6, 1, 5, 5]`, `0.bias`,
/// `3.weight` `[16, 6, 5, 5]`, ..., `11.bias`), flat (made by [`crate::cnn::initial_weights`]).
#[derive(Debug, Clone)]
pub struct CnnWeights {
    pub tensors: Vec<Vec<f32>>,
}

impl CnnWeights {
    /// Little-endian bytes of every tensor in order, for the Python peers.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.tensors
            .iter()
            .flatten()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    }
}

/// Everything a round needs besides the implementation.
pub struct Context {
    pub data: Data,
    pub weights: Weights,
    pub cnn_weights: CnnWeights,
    /// Epoch positions `0..1000`, standardized: the batch-1000 input; its first row is the
    /// batch-1 input.
    pub eval_inputs: Vec<f32>,
    pub budget: Budget,
}

/// Instantiates a const-generic GEMM type for one of [`GEMM_SHAPES`].
#[macro_export]
macro_rules! gemm_for_shape {
    ($shape:expr, $ty:ident) => {
        match $shape {
            (128, 784, 64) => Box::new($ty::<128, 784, 64>::new()) as Box<dyn $crate::common::Gemm>,
            (64, 128, 64) => Box::new($ty::<64, 128, 64>::new()),
            (128, 64, 784) => Box::new($ty::<128, 64, 784>::new()),
            (784, 64, 128) => Box::new($ty::<784, 64, 128>::new()),
            (256, 256, 256) => Box::new($ty::<256, 256, 256>::new()),
            other => panic!("no GEMM instance for shape {other:?}"),
        }
    };
}
