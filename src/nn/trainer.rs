//! One training step, forward to update, with every buffer allocated once.

use core::fmt;

use num_traits::Float;

use alloc::boxed::Box;

use super::train::zeroed_samples;
use super::{Layer, Loss, Optimizer, Train};

/// The buffers of training a net `N` on batches of `B`: its workspace, its gradients and the
/// loss gradient. Built once; [`step`](Trainer::step) then allocates nothing.
///
/// See the [module documentation](super) for a full example.
pub struct Trainer<T, N: Train<T, B>, const B: usize> {
    workspace: N::Workspace,
    gradients: N,
    d_output: Box<[N::Out; B]>,
}

impl<T: Float + 'static, N: Train<T, B>, const B: usize> Trainer<T, N, B> {
    /// Allocates the buffers for training `net` on batches of `B`; a `B` of 0 is a compile
    /// error (a batch of no samples has no mean loss).
    ///
    /// ```compile_fail,E0080
    /// use constmat::nn::{Dense, Parameters, Trainer};
    /// type Net = constmat::net![Dense<f32, 4, 2>];
    /// let _ = Trainer::<f32, Net, 0>::new(&Net::zeros());
    /// ```
    #[must_use]
    pub fn new(net: &N) -> Self {
        const { super::train::check_batch(B) };
        Self {
            workspace: net.workspace(),
            gradients: net.zeros_like(),
            d_output: zeroed_samples(),
        }
    }

    /// One step: forward pass, loss, backward pass, optimizer update. Returns the batch's mean
    /// loss (before the update).
    ///
    /// # Errors
    ///
    /// A [`StepError`] when the step cannot be taken: a learning rate that is not a positive,
    /// finite number (checked first: nothing is computed), a loss that is NaN or infinite
    /// (training has diverged), a gradient with a NaN or infinite value, or an update that would
    /// make a parameter NaN or infinite. The parameters and the optimizer's state are then left
    /// as they were (the update is skipped), so the caller can report it and stop with the net it
    /// had, all finite.
    ///
    /// One exception: an optimizer whose [`Optimizer::CHECKS_OVERFLOW`] is `false` (the
    /// default, so an optimizer of your own unless it implements
    /// [`Optimizer::overflowing_tensor`]) cannot be asked before it updates. An update of its
    /// that overflows is found after it, and [`StepError::Update`] then comes with the update
    /// applied: the net holds a NaN or an infinity (in the tensor named, and perhaps in later
    /// ones) and the optimizer's state has moved. To go back, keep a copy of the net (and of
    /// the optimizer) from before the step; `step` makes none itself, since it allocates
    /// nothing. [`Sgd`](super::Sgd), [`Momentum`](super::Momentum) and [`Adam`](super::Adam)
    /// check first.
    ///
    /// `x` and `target` are arrays of `B` samples; a [`Matrix`](crate::Matrix) of `B` rows
    /// derefs to one, so `&x` works for either.
    ///
    /// ```
    /// use constmat::Matrix;
    /// use constmat::nn::{Dense, Parameters, Relu, Sgd, SoftmaxCrossEntropy, StepError, Trainer};
    ///
    /// type Net = constmat::net![Dense<f32, 2, 3, Relu>, Dense<f32, 3, 2>];
    /// let mut net = Net::zeros();
    /// let mut trainer = Trainer::<f32, Net, 1>::new(&net);
    /// let (x, y) = (Matrix::<f32, 1, 2>::ones(), Matrix::<f32, 1, 2>::from_rows([[1.0, 0.0]]));
    /// let err = trainer
    ///     .step(&mut net, &mut Sgd::new(), f32::INFINITY, &SoftmaxCrossEntropy, &x, &y)
    ///     .unwrap_err();
    /// assert_eq!(err, StepError::LearningRate(f32::INFINITY));
    /// assert_eq!(net, Net::zeros()); // untouched
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn step<const C: usize, L, O>(
        &mut self,
        net: &mut N,
        optimizer: &mut O,
        learning_rate: T,
        loss: &L,
        x: &[N::In; B],
        target: &[[T; C]; B],
    ) -> Result<T, StepError<T>>
    where
        N: Layer<Out = [T; C]>,
        L: Loss<T, B, C>,
        O: Optimizer<T, N>,
    {
        if !(learning_rate.is_finite() && learning_rate > T::zero()) {
            return Err(StepError::LearningRate(learning_rate));
        }
        let output = net.forward_train(x, &mut self.workspace);
        let value = loss.loss_and_gradient(output, target, &mut self.d_output);
        if !value.is_finite() {
            return Err(StepError::Diverged(Diverged { loss: value }));
        }
        net.backward(
            x,
            &mut self.workspace,
            &self.d_output,
            None,
            &mut self.gradients,
        );
        if let Some(tensor) = first_non_finite(&self.gradients) {
            return Err(StepError::Gradient {
                tensor,
                loss: value,
            });
        }
        if O::CHECKS_OVERFLOW {
            if let Some(tensor) = optimizer.overflowing_tensor(net, &self.gradients, learning_rate)
            {
                return Err(StepError::Update { tensor });
            }
            optimizer.update(net, &self.gradients, learning_rate);
        } else {
            optimizer.update(net, &self.gradients, learning_rate);
            if let Some(tensor) = first_non_finite(net) {
                return Err(StepError::Update { tensor });
            }
        }
        // Batch normalization's running statistics, from this batch.
        net.update_statistics(&self.workspace);
        Ok(value)
    }

    /// The gradients of the last [`step`](Trainer::step), shaped like the net.
    #[must_use]
    pub fn gradients(&self) -> &N {
        &self.gradients
    }

    /// The net's output in the last [`step`](Trainer::step) (before its update).
    #[must_use]
    pub fn output(&self) -> &[N::Out; B] {
        N::output(&self.workspace)
    }
}

/// The index of the first tensor of `p` holding a NaN or an infinity.
fn first_non_finite<T: Float + 'static, P: super::Parameters<T>>(p: &P) -> Option<usize> {
    (0..p.tensor_count()).find(|&k| !crate::kernels::all_finite(p.tensor(k)))
}

/// Why [`Trainer::step`] did not train.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum StepError<T> {
    /// The learning rate is NaN, infinite, zero or negative. Nothing was computed.
    LearningRate(T),
    /// The loss is NaN or infinite: training has diverged. The parameters are as they were.
    Diverged(Diverged<T>),
    /// The loss is finite (`loss`) but the gradient of tensor `tensor` (in
    /// [`Parameters`](super::Parameters) order) has a NaN or an infinity. The parameters are
    /// as they were.
    Gradient {
        /// The tensor whose gradient is not finite.
        tensor: usize,
        /// The batch's loss.
        loss: T,
    },
    /// The optimizer's update would make a value of tensor `tensor` NaN or infinite: the
    /// learning rate times the gradient (or the optimizer's state) goes beyond the
    /// floating-point range. With [`Sgd`](super::Sgd), [`Momentum`](super::Momentum),
    /// [`Adam`](super::Adam) (and any optimizer with
    /// [`CHECKS_OVERFLOW`](super::Optimizer::CHECKS_OVERFLOW)) the update was refused, and the
    /// net and the optimizer are as they were. With an optimizer without it, the overflow is
    /// found after the update, which stays applied: tensor `tensor` holds a NaN or an infinity
    /// (later tensors may too) and the optimizer's state has moved (see
    /// [`Trainer::step`](super::Trainer::step)).
    Update {
        /// The first tensor with a non-finite parameter.
        tensor: usize,
    },
}

impl<T: fmt::Display> fmt::Display for StepError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LearningRate(lr) => write!(
                f,
                "the learning rate is {lr}: expected a positive, finite number"
            ),
            Self::Diverged(d) => d.fmt(f),
            Self::Gradient { tensor, loss } => write!(
                f,
                "the gradient of tensor {tensor} has a NaN or infinite value although the loss is {loss}"
            ),
            Self::Update { tensor } => write!(
                f,
                "the update would make tensor {tensor} NaN or infinite: the learning rate times \
                 the gradient is beyond the floating-point range"
            ),
        }
    }
}

impl<T: fmt::Debug + fmt::Display> core::error::Error for StepError<T> {}

/// The loss of a training step was NaN or infinite: training has diverged.
///
/// The usual cause is a learning rate too high for the net and data; data that is itself not
/// finite (a NaN pixel) is another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diverged<T> {
    /// The loss that was computed (NaN or ±infinity).
    pub loss: T,
}

impl<T: fmt::Display> fmt::Display for Diverged<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the loss is {} (not finite): training has diverged",
            self.loss
        )
    }
}

impl<T: fmt::Debug + fmt::Display> core::error::Error for Diverged<T> {}
