//! One training step, forward to update, with every buffer allocated once.

use core::fmt;

use num_traits::Float;

use alloc::boxed::Box;

use super::{Layer, Loss, Optimizer, Train, zeroed_batch};

/// The buffers of training a net `N` on batches of `B`: its workspace, its gradients and the
/// loss gradient. Built once; [`step`](Trainer::step) then allocates nothing.
///
/// See the [module documentation](super) for a full example.
pub struct Trainer<T, N: Train<T, B>, const B: usize> {
    workspace: N::Workspace,
    gradients: N,
    d_output: Box<[N::Out; B]>,
}

impl<T: Float, N: Train<T, B>, const B: usize> Trainer<T, N, B> {
    /// Allocates the buffers for training `net` on batches of `B`.
    #[must_use]
    pub fn new(net: &N) -> Self {
        Self {
            workspace: net.workspace(),
            gradients: net.zeros_like(),
            d_output: zeroed_batch(),
        }
    }

    /// One step: forward pass, loss, backward pass, optimizer update. Returns the batch's mean
    /// loss (before the update).
    ///
    /// # Errors
    ///
    /// [`Diverged`] when the loss is NaN or infinite. The parameters are then left as they were
    /// (the update is skipped), so the caller can report it and stop.
    ///
    /// `x` and `target` are arrays of `B` samples; a [`Matrix`](crate::Matrix) of `B` rows
    /// derefs to one, so `&x` works for either.
    #[allow(clippy::too_many_arguments)]
    pub fn step<const C: usize, L, O>(
        &mut self,
        net: &mut N,
        optimizer: &mut O,
        learning_rate: T,
        loss: &L,
        x: &[N::In; B],
        target: &[[T; C]; B],
    ) -> Result<T, Diverged<T>>
    where
        N: Layer<Out = [T; C]>,
        L: Loss<T, B, C>,
        O: Optimizer<T, N>,
    {
        let output = net.forward_train(x, &mut self.workspace);
        let value = loss.loss_and_gradient(output, target, &mut self.d_output);
        if !value.is_finite() {
            return Err(Diverged { loss: value });
        }
        net.backward(
            x,
            &mut self.workspace,
            &self.d_output,
            None,
            &mut self.gradients,
        );
        optimizer.update(net, &self.gradients, learning_rate);
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

/// The loss of a training step was NaN or infinite: training has diverged.
///
/// The usual cause is a learning rate too high for the net and data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diverged<T> {
    /// The loss that was computed (NaN or ±infinity).
    pub loss: T,
}

impl<T: fmt::Display> fmt::Display for Diverged<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the loss is {} (not finite); the learning rate is likely too high",
            self.loss
        )
    }
}

impl<T: fmt::Debug + fmt::Display> core::error::Error for Diverged<T> {}
