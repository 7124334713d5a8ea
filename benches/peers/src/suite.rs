//! The suite (`--suite`): seven nets of different shapes, each in constmat and in PyTorch (eager,
//! one thread) from the same weights and data, checked against each other, then timed side by
//! side: a training step, the forward pass of one sample and that of 1,000 samples.
//!
//! Each net is written twice, side by side below: as a constmat `net!` type, and as a list of
//! [`Op`]s from which `peers.py suite` builds the same `nn.Sequential`. Before anything runs,
//! the harness checks that the `Op`s give exactly the tensors of the `net!` type (names as
//! PyTorch numbers them, and shapes), and `peers.py` checks them against its model's
//! `state_dict`, so the two descriptions cannot drift apart.

use std::hint::black_box;
use std::time::Instant;

use constmat::nn::{
    Dense, Layer, Loss, RandomInit, Relu, Sample, Sgd, SoftmaxCrossEntropy, Train, Trainer,
    zeroed_batch,
};
use rand::{RngExt, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};

use crate::check::relative_difference;
use crate::common::{CLASSES, EVAL, measure};
use crate::{Options, format_figure, median};

/// Training steps of the checks: the loss after this many plain-SGD steps (learning rate
/// [`LR`]) on the net's training batch is compared.
const CHECK_STEPS: usize = 5;

/// The learning rate of the training steps (timed and checked). Lower than the harness's
/// `STEP_LR`: at 0.01 the wide convolutional nets' loss jumps up for the first steps (the 7x7
/// stem's from 4.4 to 19 after 5 steps), which amplifies rounding differences in the checks;
/// at 0.001 every net's loss goes down from the first step. The times do not depend on it.
const LR: f32 = 0.001;

// --- the nets ----------------------------------------------------------------------------------

/// 1. The LeNet-5 of `examples/mnist_cnn` (the harness's CNN rows).
type LeNet = crate::cnn::LeNet;

/// 2. The MLP of `examples/mnist_static` (the harness's MLP rows).
type Mlp = crate::constmat_peer::Net;

/// 3. A CIFAR-style CNN.
type Cifar = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 32, 3, 1, 1, Relu>,
    MaxPool2d<2>,
    Conv2d<32, 64, 3, 1, 1, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<4096, 128, Relu>,
    Dense<128, 10>,
];

/// 4. Stride-2 convolutions instead of pooling.
type Strided = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 16, 3, 2, 1, Relu>,
    Conv2d<16, 32, 3, 2, 1, Relu>,
    Flatten,
    Dense<1568, 10>,
];

/// 5. A wide MLP.
type WideMlp = constmat::net![
    Dense<f32, 784, 512, Relu>,
    Dense<f32, 512, 512, Relu>,
    Dense<f32, 512, 10>,
];

/// 6. 5 x 5 filters on 64 channels.
type Wide5x5 = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 64, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Conv2d<64, 64, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<4096, 10>,
];

/// 7. A 7 x 7 stride-2 stem, then a 1 x 1 convolution.
type Stem7x7 = constmat::net![
    Input<f32, 3, 64, 64>,
    Conv2d<3, 32, 7, 2, 3, Relu>,
    MaxPool2d<2>,
    Conv2d<32, 64, 1, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<4096, 10>,
];

/// One layer, as `peers.py` builds it in PyTorch (and as the tables describe it).
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// `Conv2d(input, output, kernel, stride, padding)`, then `ReLU` when `relu`.
    Conv {
        input: usize,
        output: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        relu: bool,
    },
    /// `MaxPool2d(k)`.
    MaxPool(usize),
    Flatten,
    /// `Linear(input, output)`, then `ReLU` when `relu`.
    Dense {
        input: usize,
        output: usize,
        relu: bool,
    },
}

const fn conv(input: usize, output: usize, kernel: usize, stride: usize, padding: usize) -> Op {
    Op::Conv {
        input,
        output,
        kernel,
        stride,
        padding,
        relu: true,
    }
}

const fn dense(input: usize, output: usize, relu: bool) -> Op {
    Op::Dense {
        input,
        output,
        relu,
    }
}

/// A net of the suite.
pub struct NetDef {
    /// Its name on the command line (`--nets`) and in `peers.py`'s JSON.
    pub key: &'static str,
    pub title: &'static str,
    /// The shape of one sample: `[784]` or `[C, H, W]`.
    pub input: &'static [usize],
    pub ops: &'static [Op],
    /// The batch of the training step.
    pub batch: usize,
    /// The seed of the initial weights (constmat's initialization) and of the data.
    pub seed: u64,
    /// constmat's net, from the seed, with the data loaded.
    make: fn(u64, &SuiteData) -> Box<dyn SuiteNet>,
}

/// Every net of the suite, in the order of the tables.
pub const NETS: &[NetDef] = &[
    NetDef {
        key: "lenet",
        title: "LeNet-5",
        input: &[1, 28, 28],
        ops: &[
            conv(1, 6, 5, 1, 2),
            Op::MaxPool(2),
            conv(6, 16, 5, 1, 0),
            Op::MaxPool(2),
            Op::Flatten,
            dense(400, 120, true),
            dense(120, 84, true),
            dense(84, 10, false),
        ],
        batch: 64,
        seed: 101,
        make: make::<LeNet, 64, { LeNet::PREDICT_SCRATCH }>,
    },
    NetDef {
        key: "mlp",
        title: "MNIST MLP 784-128-64-10",
        input: &[784],
        ops: &[
            dense(784, 128, true),
            dense(128, 64, true),
            dense(64, 10, false),
        ],
        batch: 64,
        seed: 102,
        make: make::<Mlp, 64, { Mlp::PREDICT_SCRATCH }>,
    },
    NetDef {
        key: "cifar",
        title: "CIFAR-style CNN",
        input: &[3, 32, 32],
        ops: &[
            conv(3, 32, 3, 1, 1),
            Op::MaxPool(2),
            conv(32, 64, 3, 1, 1),
            Op::MaxPool(2),
            Op::Flatten,
            dense(4096, 128, true),
            dense(128, 10, false),
        ],
        batch: 64,
        seed: 103,
        make: make::<Cifar, 64, { Cifar::PREDICT_SCRATCH }>,
    },
    NetDef {
        key: "strided",
        title: "strided CNN",
        input: &[1, 28, 28],
        ops: &[
            conv(1, 16, 3, 2, 1),
            conv(16, 32, 3, 2, 1),
            Op::Flatten,
            dense(1568, 10, false),
        ],
        batch: 64,
        seed: 104,
        make: make::<Strided, 64, { Strided::PREDICT_SCRATCH }>,
    },
    NetDef {
        key: "wide-mlp",
        title: "wide MLP 784-512-512-10",
        input: &[784],
        ops: &[
            dense(784, 512, true),
            dense(512, 512, true),
            dense(512, 10, false),
        ],
        batch: 128,
        seed: 105,
        make: make::<WideMlp, 128, { WideMlp::PREDICT_SCRATCH }>,
    },
    NetDef {
        key: "conv5x5",
        title: "5x5 filters on 64 channels",
        input: &[3, 32, 32],
        ops: &[
            conv(3, 64, 5, 1, 2),
            Op::MaxPool(2),
            conv(64, 64, 5, 1, 2),
            Op::MaxPool(2),
            Op::Flatten,
            dense(4096, 10, false),
        ],
        batch: 64,
        seed: 106,
        make: make::<Wide5x5, 64, { Wide5x5::PREDICT_SCRATCH }>,
    },
    NetDef {
        key: "stem7x7",
        title: "7x7 stride-2 stem, then 1x1",
        input: &[3, 64, 64],
        ops: &[
            conv(3, 32, 7, 2, 3),
            Op::MaxPool(2),
            conv(32, 64, 1, 1, 0),
            Op::MaxPool(2),
            Op::Flatten,
            dense(4096, 10, false),
        ],
        batch: 64,
        seed: 107,
        make: make::<Stem7x7, 64, { Stem7x7::PREDICT_SCRATCH }>,
    },
];

impl NetDef {
    /// Values of one sample.
    pub fn input_len(&self) -> usize {
        self.input.iter().product()
    }

    /// `3x32x32`, or `784`.
    fn input_shape(&self) -> String {
        let dims: Vec<String> = self.input.iter().map(usize::to_string).collect();
        dims.join("x")
    }

    /// The layers in words: `Conv 3→32 k3 p1 ReLU, MaxPool 2, Flatten, Dense 4096→10`.
    pub fn describe(&self) -> String {
        let ops: Vec<String> = self
            .ops
            .iter()
            .map(|op| match *op {
                Op::Conv {
                    input,
                    output,
                    kernel,
                    stride,
                    padding,
                    relu,
                } => {
                    let mut s = format!("Conv {input}→{output} k{kernel}");
                    if stride != 1 {
                        s += &format!(" s{stride}");
                    }
                    if padding != 0 {
                        s += &format!(" p{padding}");
                    }
                    if relu {
                        s += " ReLU";
                    }
                    s
                }
                Op::MaxPool(k) => format!("MaxPool {k}"),
                Op::Flatten => "Flatten".into(),
                Op::Dense {
                    input,
                    output,
                    relu,
                } => format!("Dense {input}→{output}{}", if relu { " ReLU" } else { "" }),
            })
            .collect();
        format!("input {}: {}", self.input_shape(), ops.join(", "))
    }

    /// The tensors the ops make, as PyTorch names them in `nn.Sequential` (the ReLU after a
    /// layer takes a module index), with their shapes.
    fn expected_tensors(&self) -> Vec<(String, Vec<usize>)> {
        let mut module = 0;
        let mut tensors = Vec::new();
        for op in self.ops {
            match *op {
                Op::Conv {
                    input,
                    output,
                    kernel,
                    relu,
                    ..
                } => {
                    tensors.push((
                        format!("{module}.weight"),
                        vec![output, input, kernel, kernel],
                    ));
                    tensors.push((format!("{module}.bias"), vec![output]));
                    module += 1 + usize::from(relu);
                }
                Op::Dense {
                    input,
                    output,
                    relu,
                } => {
                    tensors.push((format!("{module}.weight"), vec![output, input]));
                    tensors.push((format!("{module}.bias"), vec![output]));
                    module += 1 + usize::from(relu);
                }
                Op::MaxPool(_) | Op::Flatten => module += 1,
            }
        }
        tensors
    }

    /// Multiply-adds of the forward pass of one sample (convolutions and dense layers), and of
    /// the first layer alone.
    fn macs(&self) -> (usize, usize) {
        let (mut c, mut h, mut w) = match *self.input {
            [c, h, w] => (c, h, w),
            _ => (self.input_len(), 1, 1),
        };
        let mut total = 0;
        let mut first = None;
        for op in self.ops {
            let macs = match *op {
                Op::Conv {
                    input,
                    output,
                    kernel,
                    stride,
                    padding,
                    ..
                } => {
                    h = (h + 2 * padding - kernel) / stride + 1;
                    w = (w + 2 * padding - kernel) / stride + 1;
                    c = output;
                    output * h * w * input * kernel * kernel
                }
                Op::MaxPool(k) => {
                    (h, w) = (h / k, w / k);
                    0
                }
                Op::Flatten => {
                    (c, h, w) = (c * h * w, 1, 1);
                    0
                }
                Op::Dense { input, output, .. } => {
                    c = output;
                    input * output
                }
            };
            total += macs;
            if macs > 0 && first.is_none() {
                first = Some(macs);
            }
        }
        (total, first.unwrap_or(0))
    }

    /// Floating-point operations (two per multiply-add) of one run of `figure`: the forward
    /// pass; for training, the forward pass, every weight gradient (as many as the forward
    /// pass) and every input gradient but the first layer's (which nothing needs).
    fn flops(&self, figure: Figure) -> f64 {
        let (forward, first) = self.macs();
        2.0 * match figure {
            Figure::TrainStep => ((3 * forward - first) * self.batch) as f64,
            Figure::Forward1 => forward as f64,
            Figure::Forward1000 => (forward * EVAL) as f64,
        }
    }

    /// The JSON `peers.py suite` builds the net from.
    fn to_json(&self) -> Value {
        let ops: Vec<Value> = self
            .ops
            .iter()
            .map(|op| match *op {
                Op::Conv {
                    input,
                    output,
                    kernel,
                    stride,
                    padding,
                    relu,
                } => json!(["conv", input, output, kernel, stride, padding, relu]),
                Op::MaxPool(k) => json!(["maxpool", k]),
                Op::Flatten => json!(["flatten"]),
                Op::Dense {
                    input,
                    output,
                    relu,
                } => json!(["dense", input, output, relu]),
            })
            .collect();
        json!({
            "key": self.key,
            "input": self.input,
            "ops": ops,
            "batch": self.batch,
            "tensors": self.expected_tensors(),
        })
    }
}

// --- the data ----------------------------------------------------------------------------------

/// A net's data: [`EVAL`] random samples (values uniform in [-1, 1)) and random labels. The
/// training batch is the first `batch` of them, the batch-1 input the first; the times do not
/// depend on the values.
pub struct SuiteData {
    /// `EVAL` samples, flat.
    pub inputs: Vec<f32>,
    pub labels: Vec<u8>,
}

impl SuiteData {
    fn new(input_len: usize, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        Self {
            inputs: (0..EVAL * input_len)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect(),
            labels: (0..EVAL)
                .map(|_| rng.random_range(0..CLASSES as u8))
                .collect(),
        }
    }
}

// --- constmat's side ---------------------------------------------------------------------------

/// A sample of a suite net, seen as its values (row-major, PyTorch's order).
pub trait Flat: Sample {
    fn values_mut(&mut self) -> &mut [f32];
}

impl<const N: usize> Flat for [f32; N] {
    fn values_mut(&mut self) -> &mut [f32] {
        self
    }
}

impl<const C: usize, const H: usize, const W: usize> Flat for [[[f32; W]; H]; C] {
    fn values_mut(&mut self) -> &mut [f32] {
        self.as_flattened_mut().as_flattened_mut()
    }
}

/// What the suite does with constmat's form of a net.
pub trait SuiteNet {
    /// The name and shape of each tensor, as the net's type says.
    fn tensors(&self) -> Vec<(String, Vec<usize>)>;
    /// The batch of its training step.
    fn batch(&self) -> usize;
    /// The initial weights, flat, in the order of [`SuiteNet::tensors`].
    fn initial_weights(&self) -> &[Vec<f32>];
    /// Back to the initial weights.
    fn reset(&mut self);
    /// One training step on the training batch (forward, softmax cross-entropy, backward,
    /// plain SGD); the loss before the update.
    fn step(&mut self, lr: f32) -> f32;
    /// The mean loss on the training batch, without training.
    fn loss(&mut self) -> f32;
    /// The forward pass of the first sample (`Layer::forward_with_scratch`, the scratch
    /// allocated once).
    fn forward_single(&mut self) -> [f32; CLASSES];
    /// The forward pass of all [`EVAL`] samples (`Train::<f32, 1000>::forward_train` into a
    /// heap workspace, allocated on first use); one logit, so that it cannot be skipped.
    fn forward_eval(&mut self) -> f32;
    /// The logits of the last batch-1000 forward pass, 1000 x 10 row-major.
    fn eval_logits(&self) -> Vec<f32>;
    /// Frees the batch-1000 workspace (hundreds of MB for the wide convolutions).
    fn release_eval(&mut self);
}

/// constmat's form of a net: `nn::Trainer` + `Sgd` + `SoftmaxCrossEntropy` on its `net!` type,
/// as in `src/cnn.rs`; every batch on the heap.
struct Runner<N, const B: usize, const SCRATCH: usize>
where
    N: Train<f32, B> + Train<f32, EVAL>,
{
    net: N,
    initial: Vec<Vec<f32>>,
    trainer: Trainer<f32, N, B>,
    optimizer: Sgd,
    x: Box<[N::In; B]>,
    y: Box<[[f32; CLASSES]; B]>,
    x1: Box<[N::In; 1]>,
    x_eval: Box<[N::In; EVAL]>,
    ws_eval: Option<<N as Train<f32, EVAL>>::Workspace>,
    /// The batch-1 forward pass's scratch (`Layer::PREDICT_SCRATCH` values).
    scratch: Box<[f32; SCRATCH]>,
}

/// Copies `values` (whole samples, flat) into `samples`.
fn fill<S: Flat>(samples: &mut [S], values: &[f32]) {
    let len = values.len() / samples.len();
    for (sample, chunk) in samples.iter_mut().zip(values.chunks_exact(len)) {
        sample.values_mut().copy_from_slice(chunk);
    }
}

fn make<N, const B: usize, const SCRATCH: usize>(seed: u64, data: &SuiteData) -> Box<dyn SuiteNet>
where
    N: Layer<Out = [f32; CLASSES]> + RandomInit + Train<f32, B> + Train<f32, EVAL> + 'static,
    N::In: Flat,
{
    let net = N::random(&mut StdRng::seed_from_u64(seed));
    let initial = (0..net.tensor_count())
        .map(|k| net.tensor(k).to_vec())
        .collect();
    let mut x: Box<[N::In; B]> = zeroed_batch();
    let len = data.inputs.len() / EVAL;
    fill(&mut x[..], &data.inputs[..B * len]);
    let mut y: Box<[[f32; CLASSES]; B]> = zeroed_batch();
    for (row, &label) in y.iter_mut().zip(&data.labels) {
        row[usize::from(label)] = 1.0;
    }
    let mut x1: Box<[N::In; 1]> = zeroed_batch();
    fill(&mut x1[..], &data.inputs[..len]);
    let mut x_eval: Box<[N::In; EVAL]> = zeroed_batch();
    fill(&mut x_eval[..], &data.inputs);
    let scratch: Box<[f32; SCRATCH]> = vec![0.0; SCRATCH]
        .into_boxed_slice()
        .try_into()
        .expect("SCRATCH values");
    Box::new(Runner::<N, B, SCRATCH> {
        trainer: Trainer::new(&net),
        optimizer: Sgd::new(),
        net,
        initial,
        x,
        y,
        x1,
        x_eval,
        ws_eval: None,
        scratch,
    })
}

impl<N, const B: usize, const SCRATCH: usize> SuiteNet for Runner<N, B, SCRATCH>
where
    N: Layer<Out = [f32; CLASSES]> + Train<f32, B> + Train<f32, EVAL>,
{
    fn tensors(&self) -> Vec<(String, Vec<usize>)> {
        (0..self.net.tensor_count())
            .map(|k| {
                let info = self.net.tensor_info(k);
                (info.name().to_string(), info.shape().to_vec())
            })
            .collect()
    }

    fn batch(&self) -> usize {
        B
    }

    fn initial_weights(&self) -> &[Vec<f32>] {
        &self.initial
    }

    fn reset(&mut self) {
        for (k, tensor) in self.initial.iter().enumerate() {
            self.net.tensor_mut(k).copy_from_slice(tensor);
        }
    }

    fn step(&mut self, lr: f32) -> f32 {
        self.trainer
            .step(
                &mut self.net,
                &mut self.optimizer,
                lr,
                &SoftmaxCrossEntropy,
                &self.x,
                &self.y,
            )
            .expect("training does not diverge")
    }

    fn loss(&mut self) -> f32 {
        let mut ws = Train::<f32, B>::workspace(&self.net);
        let logits = self.net.forward_train(&self.x, &mut ws);
        SoftmaxCrossEntropy.loss(logits, &self.y)
    }

    fn forward_single(&mut self) -> [f32; CLASSES] {
        let mut logits = [[0.0; CLASSES]];
        self.net
            .forward_with_scratch(&self.x1, &mut logits, &mut self.scratch);
        logits[0]
    }

    fn forward_eval(&mut self) -> f32 {
        let net = &self.net;
        let ws = self
            .ws_eval
            .get_or_insert_with(|| Train::<f32, EVAL>::workspace(net));
        net.forward_train(&self.x_eval, ws)[0][0]
    }

    fn eval_logits(&self) -> Vec<f32> {
        self.ws_eval
            .as_ref()
            .map(|ws| <N as Train<f32, EVAL>>::output(ws).as_flattened().to_vec())
            .unwrap_or_default()
    }

    fn release_eval(&mut self) {
        self.ws_eval = None;
    }
}

// --- the figures -------------------------------------------------------------------------------

/// A figure of a net.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    TrainStep,
    Forward1,
    Forward1000,
}

const FIGURES: [Figure; 3] = [Figure::TrainStep, Figure::Forward1, Figure::Forward1000];

impl Figure {
    /// The key in `peers.py suite`'s JSON.
    fn key(self) -> &'static str {
        match self {
            Figure::TrainStep => "train_step",
            Figure::Forward1 => "forward_batch1",
            Figure::Forward1000 => "forward_batch1000",
        }
    }

    fn label(self, batch: usize) -> String {
        match self {
            Figure::TrainStep => format!("training step, batch {batch}"),
            Figure::Forward1 => "forward, batch 1".into(),
            Figure::Forward1000 => format!("forward, batch {EVAL}"),
        }
    }

    /// The goal for PyTorch's time over constmat's.
    fn goal(self) -> f64 {
        match self {
            Figure::TrainStep => 2.0,
            Figure::Forward1 => 4.0,
            Figure::Forward1000 => 1.3,
        }
    }

    /// A time in this figure's unit: ms per step, µs per pass, ms per pass.
    fn format(self, seconds: f64) -> String {
        match self {
            Figure::TrainStep | Figure::Forward1000 => {
                format!("{} ms", format_figure(seconds * 1e3))
            }
            Figure::Forward1 => format!("{} µs", format_figure(seconds * 1e6)),
        }
    }
}

/// One round of constmat: every net's figures, in seconds per run.
fn measure_constmat(nets: &mut [Box<dyn SuiteNet>], options: &Options) -> Vec<[f64; 3]> {
    let budget = options.budget.per_workload;
    nets.iter_mut()
        .map(|net| {
            // Repeated steps on one batch, from the initial weights every round.
            net.reset();
            let train = measure(budget, || {
                black_box(net.step(LR));
            });
            net.reset();
            let single = measure(budget, || {
                black_box(net.forward_single());
            });
            let eval = measure(budget, || {
                black_box(net.forward_eval());
            });
            net.release_eval();
            [train, single, eval]
        })
        .collect()
}

// --- the checks --------------------------------------------------------------------------------

/// What an implementation computed from a net's initial weights and data.
struct NetReport {
    /// The mean loss of the training batch.
    loss_first: f32,
    /// The same after one SGD step on it.
    loss_after_step: f32,
    /// The same after [`CHECK_STEPS`] SGD steps on it.
    loss_after_steps: f32,
    logits_single: Vec<f32>,
    logits_eval: Vec<f32>,
}

fn constmat_report(net: &mut dyn SuiteNet) -> NetReport {
    net.reset();
    let loss_first = net.loss();
    net.step(LR);
    let loss_after_step = net.loss();
    for _ in 1..CHECK_STEPS {
        net.step(LR);
    }
    let loss_after_steps = net.loss();
    net.reset();
    let logits_single = net.forward_single().to_vec();
    net.forward_eval();
    let logits_eval = net.eval_logits();
    net.release_eval();
    NetReport {
        loss_first,
        loss_after_step,
        loss_after_steps,
        logits_single,
        logits_eval,
    }
}

fn python_report(value: &Value) -> Result<NetReport, String> {
    let float = |key: &str| {
        value[key]
            .as_f64()
            .map(|v| v as f32)
            .ok_or_else(|| format!("no {key} in peers.py's check report"))
    };
    let floats = |key: &str| {
        value[key]
            .as_str()
            .ok_or_else(|| format!("no {key} in peers.py's check report"))
            .and_then(crate::python::hex_f32)
    };
    Ok(NetReport {
        loss_first: float("loss_first")?,
        loss_after_step: float("loss_after_step")?,
        loss_after_steps: float("loss_after_steps")?,
        logits_single: floats("logits_single")?,
        logits_eval: floats("logits_eval")?,
    })
}

/// Compares PyTorch's report with constmat's, one line per result; whether all passed.
///
/// Tolerances as the harness's other checks: f32 sums in different orders agree to about 1e-6
/// relative; training steps amplify that a little.
fn compare(key: &str, torch: &NetReport, constmat: &NetReport) -> bool {
    let mut all = true;
    let mut line = |what: &str, detail: String, diff: f64, tolerance: f64| {
        let ok = diff <= tolerance;
        all &= ok;
        println!(
            "check {key:<9} {what:<32} {detail:<22} rel. diff {diff:8.1e} (tol {tolerance:.0e}) {}",
            if ok { "ok" } else { "FAILED" }
        );
    };
    let scalar = |a: f32, b: f32| relative_difference(&[a], &[b]);
    line(
        "loss of the training batch",
        format!("{:.6} vs {:.6}", torch.loss_first, constmat.loss_first),
        scalar(torch.loss_first, constmat.loss_first),
        1e-5,
    );
    line(
        "loss after 1 SGD step",
        format!(
            "{:.6} vs {:.6}",
            torch.loss_after_step, constmat.loss_after_step
        ),
        scalar(torch.loss_after_step, constmat.loss_after_step),
        1e-4,
    );
    line(
        &format!("loss after {CHECK_STEPS} SGD steps"),
        format!(
            "{:.6} vs {:.6}",
            torch.loss_after_steps, constmat.loss_after_steps
        ),
        scalar(torch.loss_after_steps, constmat.loss_after_steps),
        1e-3,
    );
    line(
        "logits, forward batch 1",
        format!("{} values", torch.logits_single.len()),
        relative_difference(&torch.logits_single, &constmat.logits_single),
        1e-4,
    );
    line(
        &format!("logits, forward batch {EVAL}"),
        format!("{} values", torch.logits_eval.len()),
        relative_difference(&torch.logits_eval, &constmat.logits_eval),
        1e-4,
    );
    all
}

// --- the run -----------------------------------------------------------------------------------

/// The nets asked for (`--nets`, else all).
fn selected(options: &Options) -> Result<Vec<&'static NetDef>, String> {
    let all = NETS;
    match &options.nets {
        None => Ok(all.iter().collect()),
        Some(keys) => {
            for key in keys {
                if !all.iter().any(|d| d.key == key) {
                    let known: Vec<&str> = all.iter().map(|d| d.key).collect();
                    return Err(format!(
                        "--nets: no net named `{key}` (the suite's: {})",
                        known.join(", ")
                    ));
                }
            }
            Ok(all
                .iter()
                .filter(|d| keys.iter().any(|k| k == d.key))
                .collect())
        }
    }
}

/// What `peers.py suite` reads on its standard input: a line of JSON (the nets, and what to
/// do), then for each net its weights, its samples (f32, little-endian) and its labels (u8).
fn python_input(
    mode: &str,
    options: &Options,
    defs: &[&NetDef],
    nets: &[Box<dyn SuiteNet>],
    data: &[SuiteData],
) -> Vec<u8> {
    let header = json!({
        "mode": mode,
        "budget": options.budget.per_workload.as_secs_f64(),
        "lr": LR,
        "check_steps": CHECK_STEPS,
        "eval": EVAL,
        "nets": defs.iter().map(|d| d.to_json()).collect::<Vec<_>>(),
    });
    let mut input = header.to_string().into_bytes();
    input.push(b'\n');
    for (net, data) in nets.iter().zip(data) {
        for v in net.initial_weights().iter().flatten().chain(&data.inputs) {
            input.extend_from_slice(&v.to_le_bytes());
        }
        input.extend_from_slice(&data.labels);
    }
    input
}

/// Runs the suite; returns whether every check passed.
pub fn run(options: &Options, torch: Option<(String, String)>) -> Result<bool, String> {
    let start = Instant::now();
    let defs = selected(options)?;

    // constmat's nets, and the checks that the ops describe them.
    let mut data = Vec::new();
    let mut nets: Vec<Box<dyn SuiteNet>> = Vec::new();
    for def in &defs {
        let d = SuiteData::new(def.input_len(), def.seed);
        let net = (def.make)(def.seed, &d);
        if net.tensors() != def.expected_tensors() {
            return Err(format!(
                "suite net `{}`: its ops describe the tensors {:?}, its net! type has {:?}",
                def.key,
                def.expected_tensors(),
                net.tensors()
            ));
        }
        if net.batch() != def.batch {
            return Err(format!(
                "suite net `{}`: batch {} in its definition, {} in its type",
                def.key,
                def.batch,
                net.batch()
            ));
        }
        data.push(d);
        nets.push(net);
    }

    println!(
        "- {} nets, each with the same initial weights (constmat's initialization from a fixed seed, handed to PyTorch) and the same data ({EVAL} random samples, values uniform in [-1, 1), random labels) in constmat and PyTorch",
        defs.len()
    );
    println!(
        "- training step: forward, softmax cross-entropy, backward, plain SGD (learning rate {LR}), repeated on the first samples, from the initial weights every round (constmat: `nn::Trainer`; PyTorch: autograd, `torch.optim.SGD`)"
    );
    println!(
        "- forward, batch 1: the first sample (constmat: `Layer::forward_with_scratch`, its scratch allocated once; PyTorch: under `inference_mode`, the better of oneDNN on and off)"
    );
    println!(
        "- forward, batch {EVAL}: every sample (constmat: `Train::<f32, {EVAL}>::forward_train` into a heap workspace; PyTorch: under `inference_mode`)"
    );
    if torch.is_none() {
        println!("- note: PyTorch is not available, so only constmat's figures are shown");
    }
    println!();

    // The checks.
    println!("## Checks: PyTorch vs constmat, from the same weights and data");
    println!();
    println!("```");
    let mut all_ok = true;
    let mut torch_failed = None;
    let reports: Vec<NetReport> = nets
        .iter_mut()
        .map(|n| constmat_report(n.as_mut()))
        .collect();
    if let Some((python, _)) = &torch {
        let input = python_input("check", options, &defs, &nets, &data);
        match crate::python::suite(python, &input) {
            Ok(value) => {
                for (def, reference) in defs.iter().zip(&reports) {
                    match python_report(&value["nets"][def.key]) {
                        Ok(report) => all_ok &= compare(def.key, &report, reference),
                        Err(e) => {
                            println!("check {:<9} could not run: {e}", def.key);
                            all_ok = false;
                        }
                    }
                }
            }
            Err(e) => {
                println!("check torch could not run: {e}");
                all_ok = false;
                torch_failed = Some(e);
            }
        }
    }
    println!("```");
    println!();

    // The rounds: constmat and PyTorch alternate which goes first.
    let run_input = torch
        .as_ref()
        .filter(|_| torch_failed.is_none())
        .map(|(python, _)| (python, python_input("run", options, &defs, &nets, &data)));
    drop(data);
    // times[implementation][net][figure]: seconds per run, one per round.
    let mut times = vec![vec![[const { Vec::new() }; 3]; defs.len()]; 2];
    let mut torch_capability = None;
    let mut torch_error = None;
    for round in 0..options.rounds {
        let round_start = Instant::now();
        let mut order = vec!["constmat", "torch"];
        if round % 2 == 1 {
            order.reverse();
        }
        for &name in &order {
            if name == "constmat" {
                for (n, figures) in measure_constmat(&mut nets, options).into_iter().enumerate() {
                    for (f, t) in figures.into_iter().enumerate() {
                        times[0][n][f].push(t);
                    }
                }
                continue;
            }
            let Some((python, input)) = &run_input else {
                continue;
            };
            if torch_error.is_some() {
                continue;
            }
            match crate::python::suite(python, input) {
                Ok(value) => {
                    torch_capability = value["cpu_capability"].as_str().map(String::from);
                    for (n, def) in defs.iter().enumerate() {
                        for (f, figure) in FIGURES.iter().enumerate() {
                            match value["nets"][def.key][figure.key()].as_f64() {
                                Some(t) => times[1][n][f].push(t),
                                None => {
                                    torch_error =
                                        Some(format!("no {} for {}", figure.key(), def.key));
                                }
                            }
                        }
                    }
                }
                Err(e) => torch_error = Some(e),
            }
            if let Some(e) = &torch_error {
                eprintln!("torch: {e}; left out from now on");
            }
        }
        eprintln!(
            "round {}/{} ({}) in {:.1} s",
            round + 1,
            options.rounds,
            order.join(", "),
            round_start.elapsed().as_secs_f64()
        );
    }

    print_tables(
        options,
        &defs,
        &times,
        torch.as_ref(),
        torch_capability.as_deref(),
    );
    println!();
    println!("total time {:.0} s", start.elapsed().as_secs_f64());
    Ok(all_ok)
}

/// `(max / min - 1)` of the rounds, as a percentage.
fn spread(values: &[f64]) -> String {
    if values.is_empty() {
        return "n/a".into();
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    format!("{:.0}%", (max / min - 1.0) * 100.0)
}

fn print_tables(
    options: &Options,
    defs: &[&NetDef],
    times: &[Vec<[Vec<f64>; 3]>],
    torch: Option<&(String, String)>,
    torch_capability: Option<&str>,
) {
    println!("## Results: median of {} rounds", options.rounds);
    println!();
    if let Some((_, version)) = torch {
        println!(
            "PyTorch {version} (eager, one thread{})",
            torch_capability
                .map(|c| format!(", ATen CPU capability {c}"))
                .unwrap_or_default()
        );
        println!();
    }
    println!(
        "The ratio is PyTorch's time over constmat's: above 1, constmat is faster. The goals: a \
         training step at least {}x, a batch-1 forward pass at least {}x, a batch-{EVAL} forward \
         pass at least {}x. GFLOP/s counts two per multiply-add of the convolutions and dense \
         layers. The spread is each side's slowest round over its fastest, minus one: a ratio is \
         only meaningful well outside it.",
        Figure::TrainStep.goal(),
        Figure::Forward1.goal(),
        Figure::Forward1000.goal()
    );
    // summary[net][figure]: the ratio.
    let mut summary = Vec::new();
    for (n, def) in defs.iter().enumerate() {
        println!();
        println!("### {}. {}", n + 1, def.title);
        println!();
        println!("{}", def.describe());
        println!();
        println!(
            "| figure | constmat | PyTorch | PyTorch / constmat | goal | met | GFLOP/s constmat / PyTorch | spread constmat / PyTorch |"
        );
        println!("| --- | ---: | ---: | ---: | ---: | :---: | ---: | ---: |");
        let mut ratios = [None; 3];
        for (f, &figure) in FIGURES.iter().enumerate() {
            let ours = median(&times[0][n][f]);
            let theirs = median(&times[1][n][f]);
            let show = |t: Option<f64>| t.map_or("n/a".into(), |t| figure.format(t));
            let rate = |t: Option<f64>| {
                t.map_or("n/a".into(), |t| {
                    format!("{:.1}", def.flops(figure) / t / 1e9)
                })
            };
            let ratio = ours.zip(theirs).map(|(ours, theirs)| theirs / ours);
            ratios[f] = ratio;
            let (ratio_text, met) = match ratio {
                Some(r) => (
                    format!("{r:.2}x"),
                    if r >= figure.goal() { "met" } else { "not met" },
                ),
                None => ("n/a".into(), "n/a"),
            };
            println!(
                "| {} | {} | {} | {ratio_text} | ≥ {}x | {met} | {} / {} | {} / {} |",
                figure.label(def.batch),
                show(ours),
                show(theirs),
                figure.goal(),
                rate(ours),
                rate(theirs),
                spread(&times[0][n][f]),
                spread(&times[1][n][f]),
            );
        }
        summary.push(ratios);
    }

    println!();
    println!("### Summary: PyTorch's time over constmat's, against the goals");
    println!();
    let mut header = String::from("| net |");
    let mut rule = String::from("| --- |");
    for figure in FIGURES {
        header += &format!(
            " {} (≥ {}x) |",
            figure.label(0).replace(", batch 0", ""),
            figure.goal()
        );
        rule += " ---: |";
    }
    println!("{header}");
    println!("{rule}");
    let (mut met, mut measured) = (0, 0);
    for (def, ratios) in defs.iter().zip(&summary) {
        let mut row = format!("| {} |", def.title);
        for (figure, ratio) in FIGURES.iter().zip(ratios) {
            match ratio {
                Some(r) => {
                    measured += 1;
                    let ok = *r >= figure.goal();
                    met += usize::from(ok);
                    row += &format!(" {r:.2}x {} |", if ok { "met" } else { "not met" });
                }
                None => row += " n/a |",
            }
        }
        println!("{row}");
    }
    println!();
    println!("Goals met: {met} of {measured}.");

    if options.raw {
        println!();
        println!("### Every round (constmat | PyTorch)");
        println!();
        println!("| net | figure | constmat | PyTorch |");
        println!("| --- | --- | ---: | ---: |");
        for (n, def) in defs.iter().enumerate() {
            for (f, &figure) in FIGURES.iter().enumerate() {
                let rounds = |t: &[f64]| {
                    t.iter()
                        .map(|&t| figure.format(t))
                        .collect::<Vec<_>>()
                        .join(" / ")
                };
                println!(
                    "| {} | {} | {} | {} |",
                    def.key,
                    figure.label(def.batch),
                    rounds(&times[0][n][f]),
                    rounds(&times[1][n][f])
                );
            }
        }
    }
}
