//! A softmax layer: probabilities out, for a net whose caller wants them (TensorFlow Lite's
//! `SOFTMAX` at the end of a model; PyTorch's `nn.Softmax(dim=1)`). Forward and backward side by
//! side.
//!
//! Derivation: `docs/backprop.md`, section "Softmax layer". With `a = softmax(z)`:
//!
//! ```text
//! forward                                     backward
//! a_j = e^(z_j - m) / Σ_k e^(z_k - m)         dZ_j = a_j · (dA_j - Σ_k a_k · dA_k)
//!   m = max_k z_k
//! ```
//!
//! To train a classifier, end the net with its logits and use
//! [`SoftmaxCrossEntropy`](super::SoftmaxCrossEntropy), which fuses the two (a simpler, more
//! accurate gradient); this layer is for nets that must output probabilities.

use num_traits::Float;

use super::{Layer, NetSpec, Sample, Store, softmax_in_place};

/// The softmax of each sample's `N` values: non-negative, summing to 1, in the same order.
/// PyTorch's `nn.Softmax(dim=1)`; in [`net!`](crate::net)'s image form, `Softmax` after a
/// `Dense` layer.
///
/// ```
/// use constmat::nn::{Dense, Layer, Parameters, Softmax};
///
/// let softmax = Softmax::<f32, 3>::new();
/// let mut p = [0.0; 3];
/// softmax.forward_one(&[1000.0, 1000.0, 0.0], &mut p); // no overflow
/// assert_eq!(p, [0.5, 0.5, 0.0]);
///
/// // `nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1))`.
/// type Net = constmat::net![Dense<f32, 4, 3>, Softmax<f32, 3>];
/// let mut p = [0.0; 3];
/// Net::zeros().forward_one(&[1.0, 2.0, 3.0, 4.0], &mut p); // zero weights: equal logits
/// assert!(p.iter().all(|p| (p - 1.0 / 3.0).abs() < 1e-7));
///
/// // In `net!`'s image form, `Softmax` after a `Dense` takes its width.
/// type Image = constmat::net![Input<f32, 1, 4, 4>, Flatten, Dense<16, 3>, Softmax];
/// let mut p = [0.0; 3];
/// Image::zeros().forward_one(&[[[0.5; 4]; 4]], &mut p);
/// assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
/// // nn.Sequential(nn.Flatten(), nn.Linear(16, 3), nn.Softmax(dim=1)): the linear layer is
/// // module 1.
/// assert_eq!(Image::zeros().tensor_info(0).name().as_str(), "1.weight");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Softmax<T, const N: usize>(core::marker::PhantomData<fn() -> T>);

impl<T, const N: usize> Softmax<T, N> {
    /// The layer (it has no parameters); a `const fn`, for `static`s.
    #[must_use]
    pub const fn new() -> Self {
        Self(core::marker::PhantomData)
    }
}

impl<T, const N: usize> Default for Softmax<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Sample + Float, const N: usize> Layer for Softmax<T, N> {
    type In = [T; N];
    type Out = [T; N];

    /// `Softmax(dim=1)`: one module, no tensors.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[],
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[[T; N]; B], y: &mut [[T; N]; B]) {
        for (x, y) in x.iter().zip(y) {
            *y = *x;
            softmax_in_place(y);
        }
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

no_parameters!("a softmax", [T: Sample + Float, const N: usize], Softmax<T, N>);

#[cfg(feature = "alloc")]
mod train {

    use num_traits::Float;

    use super::Softmax;
    use crate::nn::{Sample, Train};

    impl<T: Sample + Float, const B: usize, const N: usize> Train<T, B> for Softmax<T, N> {
        outputs_as_workspace!(B);

        /// `dZ_j = a_j · (dA_j - Σ_k a_k · dA_k)`, sample by sample.
        fn backward(
            &self,
            _x: &[[T; N]; B],
            ws: &mut Self::Workspace,
            d_output: &[[T; N]; B],
            d_input: Option<&mut [[T; N]; B]>,
            _gradients: &mut Self,
        ) {
            let Some(d_input) = d_input else {
                return;
            };
            for ((a, da), dz) in ws.iter().zip(d_output).zip(d_input) {
                let dot = a
                    .iter()
                    .zip(da)
                    .fold(T::zero(), |sum, (&a, &da)| sum + a * da);
                for ((dz, &a), &da) in dz.iter_mut().zip(a).zip(da) {
                    *dz = a * (da - dot);
                }
            }
        }
    }
}
