//! Element-wise activations, each with its derivative written in terms of the forward output.
//!
//! Every derivative here can be computed from the activation's **output** `a = f(z)` alone, so a
//! layer's forward pass keeps only `a` and its backward pass need not recompute `f` (batch
//! normalization, which keeps neither, takes `f'` from `z` with [`Activation::derivative`]):
//!
//! | activation | `f(z)` | `f'(z)` from `a = f(z)` |
//! | --- | --- | --- |
//! | [`Identity`] | `z` | `1` |
//! | [`Relu`] | `max(z, 0)` | `1` if `a > 0`, else `0` |
//! | [`Relu6`] | `min(max(z, 0), 6)` | `1` if `0 < a < 6`, else `0` |
//! | [`Sigmoid`] | `1 / (1 + e^-z)` | `a (1 - a)` |
//! | [`Tanh`] | `tanh z` | `1 - a²` |
//!
//! The derivations are in `docs/backprop.md`, section "Activations".

use core::fmt::Debug;

use num_traits::Float;

use super::Init;

/// An element-wise activation function `f` with its derivative: the one definition used by
/// training, by inference and by baked nets.
pub trait Activation: Copy + Default + Debug + PartialEq + Send + Sync + 'static {
    /// The marker value, for building a layer in a `const fn` (where `Default` cannot be
    /// called).
    const VALUE: Self;

    /// The initialization that keeps activations' variance steady through this function.
    const INIT: Init;

    /// The name of the matching PyTorch module (`"ReLU"`), or `None` when PyTorch has no module
    /// for it (the identity). Decides the `nn.Sequential` numbering of tensor names.
    const TORCH_MODULE: Option<&'static str>;

    /// `f(z)`.
    fn apply<T: Float>(z: T) -> T;

    /// `f'(z)`, expressed through the output `a = f(z)`.
    fn derivative_from_output<T: Float>(a: T) -> T;

    /// `f'(z)` from `z`, for a layer that keeps `z`'s inputs rather than `a` (batch
    /// normalization computes `z` again in its backward pass).
    ///
    /// An override must return exactly `derivative_from_output(apply(z))`, bit for bit: batch
    /// normalization's gradients rely on it to equal those through `a`. The piecewise-linear
    /// functions override it with comparisons of `z`, which the compiler keeps in vectors.
    ///
    /// ```
    /// use constmat::nn::{Activation, Relu6, Sigmoid};
    /// assert_eq!(Relu6::derivative(3.0_f32), 1.0);
    /// assert_eq!(Relu6::derivative(7.0_f32), 0.0);
    /// let z = 0.3_f64;
    /// assert_eq!(Sigmoid::derivative(z), Sigmoid::derivative_from_output(Sigmoid::apply(z)));
    /// ```
    #[inline]
    fn derivative<T: Float>(z: T) -> T {
        Self::derivative_from_output(Self::apply(z))
    }
}

/// `f(z) = z`: no activation (the last layer before a loss that applies its own, like softmax).
///
/// ```
/// use constmat::nn::{Activation, Identity};
/// assert_eq!(Identity::apply(-2.0_f32), -2.0);
/// assert_eq!(Identity::derivative_from_output(-2.0_f32), 1.0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Identity;

impl Activation for Identity {
    const VALUE: Self = Identity;
    const TORCH_MODULE: Option<&'static str> = None;
    const INIT: Init = Init::Xavier;

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        z
    }

    #[inline]
    fn derivative_from_output<T: Float>(_a: T) -> T {
        T::one()
    }

    #[inline]
    fn derivative<T: Float>(_z: T) -> T {
        T::one()
    }
}

/// `f(z) = max(z, 0)`. `f'` is taken as 0 at `z = 0` (as PyTorch does).
///
/// ```
/// use constmat::nn::{Activation, Relu};
/// assert_eq!(Relu::apply(-2.0_f32), 0.0);
/// assert_eq!(Relu::apply(3.0_f32), 3.0);
/// assert_eq!(Relu::derivative_from_output(3.0_f32), 1.0);
/// assert_eq!(Relu::derivative_from_output(0.0_f32), 0.0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Relu;

impl Activation for Relu {
    const VALUE: Self = Relu;
    const TORCH_MODULE: Option<&'static str> = Some("ReLU");
    const INIT: Init = Init::He;

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        // `z > 0` rather than `max`, so that a NaN propagates instead of turning into 0.
        if z > T::zero() || z.is_nan() {
            z
        } else {
            T::zero()
        }
    }

    #[inline]
    fn derivative_from_output<T: Float>(a: T) -> T {
        // a > 0 exactly when z > 0.
        if a > T::zero() { T::one() } else { T::zero() }
    }

    #[inline]
    fn derivative<T: Float>(z: T) -> T {
        // f(z) > 0 exactly when z > 0 (a NaN is neither).
        if z > T::zero() { T::one() } else { T::zero() }
    }
}

/// `f(z) = min(max(z, 0), 6)`, PyTorch's `nn.ReLU6` (MobileNet's activation, and TensorFlow
/// Lite's fused `RELU6`). `f'` is 1 strictly between 0 and 6 and 0 elsewhere, at both kinks
/// included (as PyTorch takes it).
///
/// ```
/// use constmat::nn::{Activation, Relu6};
/// assert_eq!(Relu6::apply(-2.0_f32), 0.0);
/// assert_eq!(Relu6::apply(3.0_f32), 3.0);
/// assert_eq!(Relu6::apply(9.0_f32), 6.0);
/// assert_eq!(Relu6::derivative_from_output(3.0_f32), 1.0);
/// assert_eq!(Relu6::derivative_from_output(6.0_f32), 0.0);
/// assert_eq!(Relu6::derivative_from_output(0.0_f32), 0.0);
///
/// // A module of its own, as `nn.ReLU6()` is in `nn.Sequential(nn.Linear(4, 3), nn.ReLU6(),
/// // nn.Linear(3, 2))`: the second linear layer is module 2.
/// use constmat::nn::{Dense, Parameters};
/// type Net = constmat::net![Dense<f32, 4, 3, Relu6>, Dense<f32, 3, 2>];
/// assert_eq!(Net::zeros().tensor_info(2).name().as_str(), "2.weight");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Relu6;

impl Activation for Relu6 {
    const VALUE: Self = Relu6;
    const TORCH_MODULE: Option<&'static str> = Some("ReLU6");
    const INIT: Init = Init::He;

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        let six = six::<T>();
        // Comparisons rather than `max`/`min`, so that a NaN propagates, as in `Relu`.
        if z.is_nan() {
            z
        } else if z <= T::zero() {
            T::zero()
        } else if z >= six {
            six
        } else {
            z
        }
    }

    #[inline]
    fn derivative_from_output<T: Float>(a: T) -> T {
        // 0 < a < 6 exactly when 0 < z < 6.
        if a > T::zero() && a < six::<T>() {
            T::one()
        } else {
            T::zero()
        }
    }

    #[inline]
    fn derivative<T: Float>(z: T) -> T {
        // 0 < f(z) < 6 exactly when 0 < z < 6 (a NaN is neither).
        if z > T::zero() && z < six::<T>() {
            T::one()
        } else {
            T::zero()
        }
    }
}

/// 6, exactly, in any float type.
fn six<T: Float>() -> T {
    let two = T::one() + T::one();
    two * (two + T::one())
}

/// Whether `A` is [`Relu`], which the convolution kernels apply as they store each output (their
/// `Epilogue::Relu`): decided by type, so that no activation can claim to be ReLU and compute
/// something else. The comparison of two constants, folded away in an optimized build.
pub(crate) fn is_relu<A: Activation>() -> bool {
    core::any::TypeId::of::<A>() == core::any::TypeId::of::<Relu>()
}

/// Whether `A` is [`Identity`], so that a layer can skip applying it.
pub(crate) fn is_identity<A: Activation>() -> bool {
    core::any::TypeId::of::<A>() == core::any::TypeId::of::<Identity>()
}

/// `f(z) = 1 / (1 + e^-z)`, with `f' = a (1 - a)`.
///
/// ```
/// use constmat::nn::{Activation, Sigmoid};
/// assert_eq!(Sigmoid::apply(0.0_f64), 0.5);
/// assert_eq!(Sigmoid::derivative_from_output(0.5_f64), 0.25);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sigmoid;

impl Activation for Sigmoid {
    const VALUE: Self = Sigmoid;
    const TORCH_MODULE: Option<&'static str> = Some("Sigmoid");
    const INIT: Init = Init::Xavier;

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        // Two branches so that neither exp overflows: e^-z for z >= 0, e^z for z < 0.
        if z >= T::zero() {
            T::one() / (T::one() + (-z).exp())
        } else {
            let e = z.exp();
            e / (T::one() + e)
        }
    }

    #[inline]
    fn derivative_from_output<T: Float>(a: T) -> T {
        a * (T::one() - a)
    }
}

/// `f(z) = tanh z`, with `f' = 1 - a²`.
///
/// ```
/// use constmat::nn::{Activation, Tanh};
/// assert_eq!(Tanh::apply(0.0_f64), 0.0);
/// assert_eq!(Tanh::derivative_from_output(0.0_f64), 1.0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tanh;

impl Activation for Tanh {
    const VALUE: Self = Tanh;
    const TORCH_MODULE: Option<&'static str> = Some("Tanh");
    const INIT: Init = Init::Xavier;

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        z.tanh()
    }

    #[inline]
    fn derivative_from_output<T: Float>(a: T) -> T {
        T::one() - a * a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `derivative(z)` is `derivative_from_output(apply(z))` bit for bit, at the kinks, the
    /// infinities and NaN too, for every activation (the overrides of the piecewise-linear
    /// ones included).
    #[test]
    fn the_derivative_from_z_is_the_derivative_from_the_output() {
        fn check<A: Activation>(name: &str) {
            let special = [
                0.0,
                -0.0,
                6.0,
                -6.0,
                1e-30,
                -1e-30,
                5.999_999,
                6.000_001,
                0.5,
                -0.5,
                30.0,
                -30.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
            ];
            let values = special
                .into_iter()
                .chain((-80..=80).map(|i| i as f32 * 0.1));
            for z in values {
                let (got, want) = (A::derivative(z), A::derivative_from_output(A::apply(z)));
                assert_eq!(got.to_bits(), want.to_bits(), "{name} at {z} (f32)");
                let z = f64::from(z);
                let (got, want) = (A::derivative(z), A::derivative_from_output(A::apply(z)));
                assert_eq!(got.to_bits(), want.to_bits(), "{name} at {z} (f64)");
            }
        }
        check::<Identity>("Identity");
        check::<Relu>("Relu");
        check::<Relu6>("Relu6");
        check::<Sigmoid>("Sigmoid");
        check::<Tanh>("Tanh");
    }
}
