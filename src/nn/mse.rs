//! Mean squared error: forward and backward side by side.
//!
//! Derivation: `docs/backprop.md`, section "Mean squared error". Over a batch of `B` outputs of
//! width `C`:
//!
//! ```text
//! L = 1/(B·C) Σ_ij (ŷ_ij - y_ij)²          ∂L/∂ŷ_ij = 2 (ŷ_ij - y_ij) / (B·C)
//! ```

use num_traits::Float;

use super::Loss;

/// The mean over every element of the squared difference between output and target.
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Loss, MeanSquaredError};
///
/// let out = Matrix::<f64, 2, 1>::from_rows([[1.0], [3.0]]);
/// let target = Matrix::<f64, 2, 1>::from_rows([[0.0], [1.0]]);
/// let mut grad = Matrix::<f64, 2, 1>::zeros();
/// let loss = MeanSquaredError.loss_and_gradient(&out, &target, &mut grad);
/// assert_eq!(loss, 2.5);                    // (1 + 4) / 2
/// assert_eq!(grad.as_slice(), &[1.0, 2.0]); // 2 (ŷ - y) / 2
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeanSquaredError;

impl<T: Float + core::ops::AddAssign, const B: usize, const C: usize> Loss<T, B, C>
    for MeanSquaredError
{
    fn loss(&self, output: &[[T; C]; B], target: &[[T; C]; B]) -> T {
        let sum = (output.as_flattened().iter())
            .zip(target.as_flattened())
            .fold(T::zero(), |s, (&o, &t)| s + (o - t) * (o - t));
        sum / count::<T>(B * C)
    }

    fn loss_and_gradient(
        &self,
        output: &[[T; C]; B],
        target: &[[T; C]; B],
        gradient: &mut [[T; C]; B],
    ) -> T {
        let n = count::<T>(B * C);
        let two_over_n = (T::one() + T::one()) / n;
        let mut sum = T::zero();
        let (output, target) = (output.as_flattened(), target.as_flattened());
        for ((g, &o), &t) in gradient
            .as_flattened_mut()
            .iter_mut()
            .zip(output)
            .zip(target)
        {
            let diff = o - t;
            sum += diff * diff;
            *g = two_over_n * diff;
        }
        sum / n
    }
}

fn count<T: Float>(n: usize) -> T {
    T::from(n).expect("an element count fits in a float")
}
