//! The CNN workloads: the LeNet-5 of `examples/mnist_cnn`, in constmat (here) and PyTorch
//! (`peers.py`). The other Rust peers have no convolutions, so their column says `n/a`.

use std::hint::black_box;
use std::time::Instant;

use constmat::data::mnist;
use constmat::nn::{
    Layer, Loss, Parameters, RandomInit, Relu, Sgd, SoftmaxCrossEntropy, Train, Trainer,
};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{
    BATCH, CLASSES, CnnWeights, Context, Data, EPOCH_LR, EVAL, PIXELS, Times, Workload, measure,
    standardize,
};

/// `examples/mnist_cnn`'s net. In PyTorch (`peers.py`):
/// `Sequential(Conv2d(1, 6, 5, padding=2), ReLU, MaxPool2d(2), Conv2d(6, 16, 5), ReLU,
/// MaxPool2d(2), Flatten, Linear(400, 120), ReLU, Linear(120, 84), ReLU, Linear(84, 10))`.
pub type LeNet = constmat::net![
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

/// One image: one channel of 28 x 28.
pub type Image = [[[f32; 28]; 28]; 1];

/// Multiply-adds of the forward pass of one image: the two convolutions (6·784·25 and
/// 16·100·150) and the three dense layers (400·120 + 120·84 + 84·10).
pub const FORWARD_MACS: usize = 6 * 784 * 25 + 16 * 100 * 150 + 400 * 120 + 120 * 84 + 84 * 10;
/// Multiply-adds of training on one image: the forward pass, every weight gradient (as many as
/// the forward pass), and every input gradient except the first layer's (which nothing needs).
pub const TRAINING_MACS: usize = 2 * FORWARD_MACS + (FORWARD_MACS - 6 * 784 * 25);

/// He-initialized weights from a fixed seed (constmat's initialization), in PyTorch's order and
/// layout: what every implementation starts from.
pub fn initial_weights() -> CnnWeights {
    let net = LeNet::random(&mut StdRng::seed_from_u64(43));
    CnnWeights {
        tensors: (0..net.tensor_count())
            .map(|k| net.tensor(k).to_vec())
            .collect(),
    }
}

/// A CNN implementation, with its own parameters and buffers: the methods of [`crate::common::Mlp`]
/// for images.
pub trait Cnn {
    fn set_weights(&mut self, weights: &CnnWeights);
    /// Assembles a training batch: pixels to standardized floats, labels to targets.
    fn load_batch(&mut self, data: &Data, indices: &[usize; BATCH]);
    /// One training step (forward, loss, backward, plain SGD); the loss before the update.
    fn step(&mut self, lr: f32) -> f32;
    /// The mean loss on the loaded batch.
    fn loss(&mut self) -> f32;
    /// Sets the image of the batch-1 forward pass (784 standardized pixels).
    fn load_single(&mut self, x: &[f32]);
    fn forward_single(&mut self) -> [f32; CLASSES];
    /// Sets the 1,000 images of the batch-1000 forward pass.
    fn load_eval(&mut self, x: &[f32]);
    /// The batch-1000 forward pass; one logit, so that it cannot be skipped.
    fn forward_eval(&mut self) -> f32;
    /// The logits of the last batch-1000 forward pass, 1000 x 10 row-major.
    fn eval_logits(&self) -> Vec<f32>;
}

/// Measures the CNN workloads once (one round), as [`crate::peer::RustPeer::measure`] does
/// the MLP's.
pub fn measure_cnn(cnn: &mut dyn Cnn, ctx: &Context, times: &mut Times) {
    let budget = ctx.budget.per_workload;
    // The beginning of an epoch: 3 warm-up steps, then the timed ones from the start again.
    cnn.set_weights(&ctx.cnn_weights);
    for step in 0..3 {
        cnn.load_batch(&ctx.data, &ctx.data.indices(step));
        cnn.step(EPOCH_LR);
    }
    cnn.set_weights(&ctx.cnn_weights);
    let start = Instant::now();
    for step in 0..ctx.budget.epoch_steps {
        cnn.load_batch(&ctx.data, &ctx.data.indices(step));
        black_box(cnn.step(EPOCH_LR));
    }
    let per_step = start.elapsed().as_secs_f64() / ctx.budget.epoch_steps as f64;
    times.push((Workload::CnnEpoch, per_step));

    cnn.load_single(&ctx.eval_inputs[..PIXELS]);
    times.push((
        Workload::CnnForward1,
        measure(budget, || {
            black_box(cnn.forward_single());
        }),
    ));
    cnn.load_eval(&ctx.eval_inputs);
    times.push((
        Workload::CnnForward1000,
        measure(budget, || {
            black_box(cnn.forward_eval());
        }),
    ));
}

/// constmat's CNN: `nn::Trainer` + `Sgd` + `SoftmaxCrossEntropy` on the `net!` type of
/// `examples/mnist_cnn`; one image through `Layer::forward_one` (what a loaded or baked net
/// runs), 1,000 through `Train::<f32, 1000>::forward_train` into a heap workspace.
pub struct ConstmatCnn {
    net: LeNet,
    trainer: Trainer<f32, LeNet, BATCH>,
    optimizer: Sgd,
    x: Box<[Image; BATCH]>,
    y: [[f32; CLASSES]; BATCH],
    labels: [u8; BATCH],
    x1: Image,
    x_eval: Box<[Image; EVAL]>,
    ws_eval: <LeNet as Train<f32, EVAL>>::Workspace,
}

/// `N` zeroed images on the heap.
fn images<const N: usize>() -> Box<[Image; N]> {
    vec![[[[0.0; 28]; 28]; 1]; N]
        .into_boxed_slice()
        .try_into()
        .expect("N images")
}

impl ConstmatCnn {
    pub fn new(weights: &CnnWeights) -> Self {
        let mut net = LeNet::zeros();
        set(&mut net, weights);
        Self {
            trainer: Trainer::new(&net),
            optimizer: Sgd::new(),
            x: images(),
            y: [[0.0; CLASSES]; BATCH],
            labels: [0; BATCH],
            x1: [[[0.0; 28]; 28]; 1],
            x_eval: images(),
            ws_eval: Train::<f32, EVAL>::workspace(&net),
            net,
        }
    }
}

fn set(net: &mut LeNet, weights: &CnnWeights) {
    for (k, tensor) in weights.tensors.iter().enumerate() {
        net.tensor_mut(k).copy_from_slice(tensor);
    }
}

fn copy_image(pixels: &[f32], image: &mut Image) {
    image
        .as_flattened_mut()
        .as_flattened_mut()
        .copy_from_slice(pixels);
}

impl Cnn for ConstmatCnn {
    fn set_weights(&mut self, weights: &CnnWeights) {
        set(&mut self.net, weights);
    }

    fn load_batch(&mut self, data: &Data, indices: &[usize; BATCH]) {
        for ((image, label), &i) in self.x.iter_mut().zip(&mut self.labels).zip(indices) {
            for (dst, &p) in image
                .as_flattened_mut()
                .as_flattened_mut()
                .iter_mut()
                .zip(data.split.image(i))
            {
                *dst = standardize(p);
            }
            *label = data.split.label(i);
        }
        mnist::one_hot(&self.labels, &mut self.y);
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
        let mut ws = Train::<f32, BATCH>::workspace(&self.net);
        let logits = self.net.forward_train(&self.x, &mut ws);
        SoftmaxCrossEntropy.loss(logits, &self.y)
    }

    fn load_single(&mut self, x: &[f32]) {
        copy_image(x, &mut self.x1);
    }

    fn forward_single(&mut self) -> [f32; CLASSES] {
        let mut logits = [0.0; CLASSES];
        self.net.forward_one(&self.x1, &mut logits);
        logits
    }

    fn load_eval(&mut self, x: &[f32]) {
        for (image, pixels) in self.x_eval.iter_mut().zip(x.chunks_exact(PIXELS)) {
            copy_image(pixels, image);
        }
    }

    fn forward_eval(&mut self) -> f32 {
        self.net.forward_train(&self.x_eval, &mut self.ws_eval)[0][0]
    }

    fn eval_logits(&self) -> Vec<f32> {
        <LeNet as Train<f32, EVAL>>::output(&self.ws_eval)
            .as_flattened()
            .to_vec()
    }
}
