//! Classifying: the class of a sample and the probability of each, for any net whose output is
//! a vector of logits.

use num_traits::Float;

use super::{Layer, Sample, argmax, softmax_in_place};

/// A classifier's answers, for every [`Layer`] whose output is `[T; C]` (logits of `C`
/// classes), whatever its storage: a `static` baked net and a heap net loaded at run time
/// alike. Intermediate results live on the stack; nothing is allocated.
///
/// ```
/// use constmat::nn::{Chain, Dense, Identity, Inline, Predict, Relu};
///
/// static NET: constmat::net![Dense<f32, 2, 2, Relu, Inline>, Dense<f32, 2, 3, Identity, Inline>] =
///     Chain::new(
///         Dense::new([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]),
///         Dense::new([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], [0.0, 0.0, 0.0]),
///     );
///
/// assert_eq!(NET.predict(&[2.0, -1.0]), 0);
/// let p = NET.predict_proba(&[2.0, -1.0]);
/// assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
///
/// let mut classes = [0; 2];
/// NET.predict_batch(&[[2.0, -1.0], [0.0, 5.0]], &mut classes);
/// assert_eq!(classes, [0, 1]);
/// ```
pub trait Predict<T, const C: usize>: Layer<Out = [T; C]> {
    /// The predicted class of `x`: the index of its largest output (see [`argmax`]).
    fn predict(&self, x: &Self::In) -> usize;

    /// The class probabilities of `x`: the softmax of its outputs (see
    /// [`softmax_in_place`]).
    fn predict_proba(&self, x: &Self::In) -> [T; C];

    /// The predicted class of each sample of a batch: `classes[k]` for `x[k]`.
    ///
    /// The outputs of the batch, and of each hidden layer, live on the stack (`B` times their
    /// widths): keep `B` moderate (for the 784-128-64-10 net, `B = 64` takes about 52 KB).
    fn predict_batch<const B: usize>(&self, x: &[Self::In; B], classes: &mut [usize; B]);
}

impl<L, T, const C: usize> Predict<T, C> for L
where
    L: Layer<Out = [T; C]>,
    T: Float + Sample,
{
    #[inline]
    fn predict(&self, x: &Self::In) -> usize {
        let mut out = [T::ZERO; C];
        self.forward_one(x, &mut out);
        argmax(&out)
    }

    fn predict_proba(&self, x: &Self::In) -> [T; C] {
        let mut out = [T::ZERO; C];
        self.forward_one(x, &mut out);
        softmax_in_place(&mut out);
        out
    }

    fn predict_batch<const B: usize>(&self, x: &[Self::In; B], classes: &mut [usize; B]) {
        let mut out = [[T::ZERO; C]; B];
        self.forward(x, &mut out);
        for (class, row) in classes.iter_mut().zip(&out) {
            *class = argmax(row);
        }
    }
}
