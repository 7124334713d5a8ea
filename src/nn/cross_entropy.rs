//! Softmax followed by cross-entropy, fused: forward and backward side by side.
//!
//! Derivation: `docs/backprop.md`, section "Softmax + cross-entropy". For one sample with logits
//! `z` (the last layer's output, no activation) and a target distribution `y` (one-hot for a
//! class label):
//!
//! ```text
//! p = softmax(z),   p_j = e^(z_j - m) / Σ_k e^(z_k - m)   with m = max_k z_k (for stability)
//! L = -Σ_j y_j log p_j,   log p_j = (z_j - m) - log Σ_k e^(z_k - m)
//! ∂L/∂z_j = p_j Σ_k y_k - y_j  =  p_j - y_j   when y sums to 1
//! ```
//!
//! Subtracting the row maximum changes nothing mathematically (it cancels between numerator and
//! denominator) but keeps every `exp` in `(0, 1]`, so large logits cannot overflow. Computing
//! `log p` as `(z - m) - log Σ` rather than `log(p)` avoids `log(0) = -inf` when a probability
//! underflows.

use num_traits::Float;

use super::Loss;

/// Softmax over each row of the logits, then cross-entropy against target distributions
/// (one-hot rows for class labels), averaged over the batch.
///
/// Use it on the output of a last layer with the [`Identity`](super::Identity) activation: the
/// softmax is applied here, fused with the loss, so that the gradient is the stable `p - y`.
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Loss, SoftmaxCrossEntropy};
///
/// let logits = Matrix::<f64, 1, 2>::from_rows([[0.0, 0.0]]);
/// let target = Matrix::<f64, 1, 2>::from_rows([[1.0, 0.0]]);
/// let mut grad = Matrix::<f64, 1, 2>::zeros();
/// let loss = SoftmaxCrossEntropy.loss_and_gradient(&logits, &target, &mut grad);
/// assert!((loss - 2f64.ln()).abs() < 1e-12);          // -log(1/2)
/// assert_eq!(grad.as_slice(), &[-0.5, 0.5]);           // p - y = [0.5 - 1, 0.5 - 0]
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftmaxCrossEntropy;

impl<T: Float + core::ops::AddAssign, const B: usize, const C: usize> Loss<T, B, C>
    for SoftmaxCrossEntropy
{
    fn loss(&self, logits: &[[T; C]; B], target: &[[T; C]; B]) -> T {
        let mut total = T::zero();
        for (z, y) in logits.iter().zip(target) {
            let (max, log_sum) = max_and_log_sum_exp(z);
            total += row_loss(z, y, max, log_sum);
        }
        total / batch::<T>(B)
    }

    fn loss_and_gradient(
        &self,
        logits: &[[T; C]; B],
        target: &[[T; C]; B],
        gradient: &mut [[T; C]; B],
    ) -> T {
        let inv_batch = T::one() / batch::<T>(B);
        let mut total = T::zero();
        for ((z, y), g) in logits.iter().zip(target).zip(gradient) {
            // Forward: L_row = -Σ y_j log p_j
            let (max, log_sum) = max_and_log_sum_exp(z);
            total += row_loss(z, y, max, log_sum);
            // Backward: ∂L/∂z_j = (p_j Σy - y_j) / B
            let y_sum = y.iter().fold(T::zero(), |s, &v| s + v);
            for ((g_j, &z_j), &y_j) in g.iter_mut().zip(z.iter()).zip(y.iter()) {
                let p_j = (z_j - max - log_sum).exp();
                *g_j = (p_j * y_sum - y_j) * inv_batch;
            }
        }
        total * inv_batch
    }
}

/// `softmax` of each row of `logits`, into `out`: the probabilities a classifier predicts.
///
/// ```
/// use constmat::Matrix;
///
/// let logits = Matrix::<f32, 1, 3>::from_rows([[1000.0, 1000.0, 0.0]]); // no overflow
/// let mut p = Matrix::<f32, 1, 3>::zeros();
/// constmat::nn::softmax_rows_into(&logits, &mut p);
/// assert_eq!(p.as_slice(), &[0.5, 0.5, 0.0]);
/// ```
pub fn softmax_rows_into<T: Float, const B: usize, const C: usize>(
    logits: &[[T; C]; B],
    out: &mut [[T; C]; B],
) {
    for (z, p) in logits.iter().zip(out) {
        *p = *z;
        softmax_in_place(p);
    }
}

/// Replaces logits by their softmax, `p_j = e^(z_j - m) / Σ_k e^(z_k - m)` with `m = max_k z_k`:
/// the one softmax of the crate (of [`softmax_rows_into`] and
/// [`Predict::predict_proba`](super::Predict::predict_proba)).
///
/// Subtracting the maximum changes nothing mathematically but keeps every `exp` in `(0, 1]`, so
/// large logits cannot overflow.
///
/// ```
/// use constmat::nn::softmax_in_place;
/// let mut z = [1000.0_f32, 1000.0, 0.0];
/// softmax_in_place(&mut z);
/// assert_eq!(z, [0.5, 0.5, 0.0]);
/// ```
pub fn softmax_in_place<T: Float>(logits: &mut [T]) {
    let (max, log_sum) = max_and_log_sum_exp(logits);
    for z in logits.iter_mut() {
        *z = (*z - max - log_sum).exp();
    }
}

/// `(m, log Σ_j e^(z_j - m))` with `m = max_j z_j`.
fn max_and_log_sum_exp<T: Float>(z: &[T]) -> (T, T) {
    let max = z.iter().copied().fold(T::neg_infinity(), T::max);
    let sum = z.iter().fold(T::zero(), |s, &z_j| s + (z_j - max).exp());
    (max, sum.ln())
}

/// `-Σ_j y_j log p_j` with `log p_j = z_j - m - log_sum`; terms with `y_j = 0` are skipped so
/// that a `-inf` log-probability of a non-target class cannot turn into `0 · inf = NaN`.
fn row_loss<T: Float>(z: &[T], y: &[T], max: T, log_sum: T) -> T {
    z.iter().zip(y.iter()).fold(T::zero(), |acc, (&z_j, &y_j)| {
        if y_j == T::zero() {
            acc
        } else {
            acc - y_j * (z_j - max - log_sum)
        }
    })
}

fn batch<T: Float>(b: usize) -> T {
    T::from(b).expect("a batch size fits in a float")
}
