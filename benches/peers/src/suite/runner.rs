//! constmat's side of the suite: a net's data ([`SuiteData`]), and its `net!` type with a
//! trainer and batches on the heap, behind [`SuiteNet`].

use constmat::format::Dtype;
use constmat::nn::{
    Layer, Loss, RandomInit, Sample, Sgd, SoftmaxCrossEntropy, Train, Trainer, zeroed_batch,
};
use rand::{RngExt, SeedableRng, rngs::StdRng};

use crate::common::{CLASSES, EVAL};

/// A net's data: [`EVAL`] random samples (values uniform in [-1, 1)) and random labels. The
/// training batch is the first `batch` of them, the batch-1 input the first; the times do not
/// depend on the values.
pub struct SuiteData {
    /// `EVAL` samples, flat.
    pub inputs: Vec<f32>,
    pub labels: Vec<u8>,
}

impl SuiteData {
    pub(super) fn new(input_len: usize, seed: u64) -> Self {
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
    /// The initial weights, flat, in the order of [`SuiteNet::tensors`], each with its index.
    fn initial_weights(&self) -> &[(usize, Vec<f32>)];
    /// Back to the initial weights.
    fn reset(&mut self);
    /// One training step on the training batch (forward, softmax cross-entropy, backward,
    /// plain SGD); the loss before the update.
    fn step(&mut self, lr: f32) -> f32;
    /// The mean loss on the training batch, without training.
    fn loss(&mut self) -> f32;
    /// The forward pass of the first sample (`Layer::forward_with_scratch`, the scratch
    /// allocated once).
    fn forward_single(&mut self) -> &[f32];
    /// The forward pass of all [`EVAL`] samples (`Train::<f32, 1000>::forward_train` into a
    /// heap workspace, allocated on first use); one logit, so that it cannot be skipped.
    fn forward_eval(&mut self) -> f32;
    /// The logits of the last batch-1000 forward pass, 1000 x classes row-major.
    fn eval_logits(&self) -> Vec<f32>;
    /// Frees the batch-1000 workspace (hundreds of MB for the wide convolutions).
    fn release_eval(&mut self);
}

/// constmat's form of a net: `nn::Trainer` + `Sgd` + `SoftmaxCrossEntropy` on its `net!` type,
/// as in `src/cnn.rs`; every batch on the heap.
struct Runner<N, const B: usize, const SCRATCH: usize, const K: usize>
where
    N: Train<f32, B> + Train<f32, EVAL>,
{
    net: N,
    /// The index and initial values of each `f32` tensor.
    initial: Vec<(usize, Vec<f32>)>,
    trainer: Trainer<f32, N, B>,
    optimizer: Sgd,
    x: Box<[N::In; B]>,
    y: Box<[[f32; K]; B]>,
    x1: Box<[N::In; 1]>,
    /// The batch-1 forward pass's logits.
    logits1: [[f32; K]; 1],
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

/// constmat's form of the net `N` of `K` classes (labels are below [`CLASSES`]), training
/// batch `B`, its batch-1 scratch `SCRATCH` values.
pub(super) fn make<N, const B: usize, const SCRATCH: usize, const K: usize>(
    seed: u64,
    data: &SuiteData,
) -> Box<dyn SuiteNet>
where
    N: Layer<Out = [f32; K]> + RandomInit + Train<f32, B> + Train<f32, EVAL> + 'static,
    N::In: Flat,
{
    let net = N::random(&mut StdRng::seed_from_u64(seed));
    // The f32 tensors (batch normalization's `num_batches_tracked`, an integer, is left out:
    // it does not change what the net computes).
    let initial = (0..net.tensor_count())
        .filter(|&k| net.tensor_info(k).dtype() == Dtype::F32)
        .map(|k| (k, net.tensor(k).to_vec()))
        .collect();
    let mut x: Box<[N::In; B]> = zeroed_batch();
    let len = data.inputs.len() / EVAL;
    fill(&mut x[..], &data.inputs[..B * len]);
    const { assert!(K >= CLASSES, "the labels go up to CLASSES") };
    let mut y: Box<[[f32; K]; B]> = zeroed_batch();
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
    Box::new(Runner::<N, B, SCRATCH, K> {
        trainer: Trainer::new(&net),
        optimizer: Sgd::new(),
        net,
        initial,
        x,
        y,
        x1,
        logits1: [[0.0; K]],
        x_eval,
        ws_eval: None,
        scratch,
    })
}

impl<N, const B: usize, const SCRATCH: usize, const K: usize> SuiteNet for Runner<N, B, SCRATCH, K>
where
    N: Layer<Out = [f32; K]> + Train<f32, B> + Train<f32, EVAL>,
{
    fn tensors(&self) -> Vec<(String, Vec<usize>)> {
        self.initial
            .iter()
            .map(|&(k, _)| {
                let info = self.net.tensor_info(k);
                (info.name().to_string(), info.shape().to_vec())
            })
            .collect()
    }

    fn batch(&self) -> usize {
        B
    }

    fn initial_weights(&self) -> &[(usize, Vec<f32>)] {
        &self.initial
    }

    fn reset(&mut self) {
        for (k, tensor) in &self.initial {
            self.net.tensor_mut(*k).copy_from_slice(tensor);
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

    fn forward_single(&mut self) -> &[f32] {
        self.net
            .forward_with_scratch(&self.x1, &mut self.logits1, &mut self.scratch);
        &self.logits1[0]
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
