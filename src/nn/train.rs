//! Training: a layer's forward pass that keeps what its backward pass needs, and the backward
//! pass itself.

use alloc::boxed::Box;
use alloc::vec;

use super::{Parameters, Sample};

/// A layer (or a whole net) that can be trained on batches of `B` samples.
///
/// [`forward_train`](Train::forward_train) runs the layer's forward pass (the computation of
/// [`Layer::forward`](super::Layer::forward), but for the layers that train otherwise than they
/// predict: batch normalization with the batch's statistics, dropout with its masks) into a
/// [`Workspace`](Train::Workspace) that keeps every intermediate the
/// [`backward`](Train::backward) pass needs. The workspace is allocated once by
/// [`workspace`](Train::workspace), on the heap, so a training step allocates nothing and large
/// batches do not touch the stack.
///
/// A training step is `forward_train`, `backward`, the optimizer's update, then
/// [`update_statistics`](Train::update_statistics), as
/// [`Trainer::step`](crate::nn::Trainer::step) does: a loop written by hand must call it too,
/// or a net with batch normalization predicts with the running statistics it started with. A
/// layer that wraps others and implements `Train` by delegating must forward it to them.
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Dense, Identity, Parameters, Relu, Train};
///
/// type Net = constmat::net![Dense<f64, 2, 3, Relu>, Dense<f64, 3, 1, Identity>];
/// let mut net = Net::zeros();
/// net.rest.bias[(0, 0)] = 1.0;
/// let x = Matrix::<f64, 4, 2>::ones();
/// let mut ws = Train::<f64, 4>::workspace(&net);
/// let y = net.forward_train(&x, &mut ws);
/// assert_eq!(y, &[[1.0]; 4]);
///
/// // ∂L/∂y = 1 for every sample: the last bias's gradient is the batch size.
/// let mut gradients = net.zeros_like();
/// net.backward(&x, &mut ws, &[[1.0]; 4], None, &mut gradients);
/// assert_eq!(gradients.rest.bias[(0, 0)], 4.0);
/// ```
pub trait Train<T, const B: usize>: Parameters<T> {
    /// Buffers the passes write into: outputs, and the gradients between layers.
    type Workspace;

    /// Allocates the buffers for a batch of `B` samples. Done once, before training.
    fn workspace(&self) -> Self::Workspace;

    /// The forward pass: reads `x`, writes every intermediate into `workspace`, and returns the
    /// output (which lives in `workspace`).
    fn forward_train<'w>(
        &self,
        x: &[Self::In; B],
        workspace: &'w mut Self::Workspace,
    ) -> &'w [Self::Out; B];

    /// The output of the last [`forward_train`](Train::forward_train) that wrote to
    /// `workspace`.
    fn output(workspace: &Self::Workspace) -> &[Self::Out; B];

    /// The backward pass.
    ///
    /// Given `x` and the `workspace` of the forward pass on it, and `d_output` = ∂L/∂output,
    /// writes ∂L/∂(each parameter) into `gradients` (overwriting it) and, when `d_input` is
    /// given, ∂L/∂x into it. The first layer of a net passes `None` and skips that product.
    fn backward(
        &self,
        x: &[Self::In; B],
        workspace: &mut Self::Workspace,
        d_output: &[Self::Out; B],
        d_input: Option<&mut [Self::In; B]>,
        gradients: &mut Self,
    );

    /// Updates what the layer learns from the batches it sees other than by its gradients
    /// (batch normalization's running mean and variance), from the last
    /// [`forward_train`](Train::forward_train) that wrote to `workspace`: once per training
    /// step, after the optimizer's update, as [`Trainer::step`](crate::nn::Trainer::step)
    /// does. Nothing, for most layers.
    fn update_statistics(&mut self, workspace: &Self::Workspace) {
        let _ = workspace;
    }
}

/// A zero-filled batch of `B` samples on the heap, built there directly (never on the stack).
/// A `B` of 0 is a compile error.
///
/// ```
/// let batch: Box<[[f32; 784]; 1000]> = constmat::nn::zeroed_batch();
/// assert_eq!(batch[999][783], 0.0);
/// ```
///
/// ```compile_fail,E0080
/// let empty: Box<[[f32; 784]; 0]> = constmat::nn::zeroed_batch();
/// ```
#[must_use]
pub fn zeroed_batch<S: Sample, const B: usize>() -> Box<[S; B]> {
    const { check_batch(B) };
    zeroed_samples()
}

/// [`zeroed_batch`] without its check: the workspaces' buffers, whose batch the trainer checked
/// (one error for a batch of 0, not one per layer).
pub(crate) fn zeroed_samples<S: Sample, const B: usize>() -> Box<[S; B]> {
    match vec![S::ZERO; B].into_boxed_slice().try_into() {
        Ok(batch) => batch,
        Err(_) => unreachable!("a vector of B samples is a batch of B"),
    }
}

/// Nothing, or a compile error when a batch has no samples: a training step's loss is the mean
/// over the batch, and a `step` on 0 samples could only report a NaN loss as divergence.
#[track_caller]
pub(crate) const fn check_batch(batch: usize) {
    if batch == 0 {
        crate::format::Message::new()
            .str("a batch of 0 samples: training takes the mean loss over a batch, so `B` is at least 1")
            .panic()
    }
}
