//! Classifying: the class of a sample and the probability of each, for any net whose output is
//! a vector of logits.

use num_traits::Float;

use super::{Layer, Sample, argmax, softmax_in_place};

/// The samples [`Predict::predict_batch`] passes through a net together when a whole batch's
/// buffers would not fit in [`PREDICT_CHUNK_STACK`].
pub const PREDICT_CHUNK: usize = 8;

/// The most stack bytes [`Predict::predict_batch`] gives the buffers of the samples it passes
/// through a net together.
pub const PREDICT_CHUNK_STACK: usize = 64 * 1024;

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
    ///
    /// `x` is one sample in the net's layout: a vector `[T; I]`, or an image
    /// `[[[T; W]; H]; C]`, channels first (CHW, PyTorch's order). An image stored height, width,
    /// channels (HWC: TensorFlow's and most image decoders' order, `[[[T; C]; W]; H]`) does not
    /// type-check (the sizes are in the other order: `docs/shape-errors.md`); transpose it
    /// first, `chw[c][y][x] = hwc[y][x][c]`.
    fn predict(&self, x: &Self::In) -> usize;

    /// The class probabilities of `x`: the softmax of its outputs (see
    /// [`softmax_in_place`]).
    fn predict_proba(&self, x: &Self::In) -> [T; C];

    /// The predicted class of each sample of a batch: `classes[k]` for `x[k]`.
    ///
    /// The samples go through the net all at once ([`Layer::forward`], whose products are
    /// faster than one sample's) when their buffers and outputs ([`Layer::WORKING_BYTES`] and
    /// `C` values each) take at most [`PREDICT_CHUNK_STACK`] bytes of stack; else
    /// [`PREDICT_CHUNK`] at a time when that many fit; else one at a time (a convolutional
    /// net's): the stack it takes does not grow with `B` (the kernels' frames, and a single
    /// sample's buffers where even those exceed the bound, come on top).
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
        // The whole batch at once while its buffers fit (the fastest), else in chunks, else
        // one sample at a time.
        // A sample's share: its buffers and its outputs.
        let per_sample = Self::WORKING_BYTES + core::mem::size_of::<[T; C]>();
        if per_sample.saturating_mul(B) <= PREDICT_CHUNK_STACK {
            classes_of(self, x, classes);
            return;
        }
        let (chunks, rest) = if per_sample.saturating_mul(PREDICT_CHUNK) <= PREDICT_CHUNK_STACK {
            x.as_chunks::<PREDICT_CHUNK>()
        } else {
            (&[][..], &x[..])
        };
        let (class_chunks, _) = classes.as_chunks_mut::<PREDICT_CHUNK>();
        for (x, classes) in chunks.iter().zip(class_chunks) {
            classes_of(self, x, classes);
        }
        let done = chunks.len() * PREDICT_CHUNK;
        for (x, class) in rest.iter().zip(&mut classes[done..]) {
            *class = self.predict(x);
        }
    }
}

/// The class of each of `x`, from one forward pass of them all.
fn classes_of<L, T, const C: usize, const N: usize>(
    net: &L,
    x: &[L::In; N],
    classes: &mut [usize; N],
) where
    L: Layer<Out = [T; C]>,
    T: Float + Sample,
{
    let mut out = [[T::ZERO; C]; N];
    net.forward(x, &mut out);
    for (class, row) in classes.iter_mut().zip(&out) {
        *class = argmax(row);
    }
}
