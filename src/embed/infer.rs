//! Inference without a heap: the [`Infer`] trait, for static nets and for `nn`'s heap nets.

use num_traits::Float;

use super::layer::{Activation, StaticChain, StaticDense};
use crate::{Scalar, kernels};

/// The data flowing into and out of a layer: an `[T; N]` array.
///
/// ```
/// use constmat::embed::Vector;
/// let mut v = <[f32; 3] as Vector<f32>>::zeros();
/// v.as_mut_slice()[1] = 2.0;
/// assert_eq!(v.as_slice(), &[0.0, 2.0, 0.0]);
/// ```
pub trait Vector<T>: Copy {
    /// All zeros.
    fn zeros() -> Self;
    /// The elements.
    fn as_slice(&self) -> &[T];
    /// The elements, mutable.
    fn as_mut_slice(&mut self) -> &mut [T];
}

impl<T: Scalar, const N: usize> Vector<T> for [T; N] {
    #[inline]
    fn zeros() -> Self {
        [T::zero(); N]
    }

    #[inline]
    fn as_slice(&self) -> &[T] {
        self
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }
}

/// Running a net on one sample or a batch, with no heap: every buffer is a fixed-size array on
/// the stack or the caller's.
///
/// Implemented by the static nets ([`StaticDense`], [`StaticChain`]) and, with the `alloc`
/// feature, by `nn`'s heap nets ([`nn::Dense`](crate::nn::Dense), [`nn::Chain`](crate::nn::Chain)),
/// so a net loaded at run time with [`io::safetensors::load`](crate::io::safetensors::load) gets
/// the same single-sample path. (A heap net also has [`Layer::forward`](crate::nn::Layer::forward);
/// with both traits in scope, call this one as `Infer::forward(&net, ..)`.)
///
/// Products go through [`kernels`]: [`kernels::matvec_into`] for one sample,
/// [`kernels::matmul_transpose_rhs_into`] for a batch.
///
/// ```
/// use constmat::embed::{Identity, Infer, Relu, StaticDense};
///
/// type Net = constmat::static_net![StaticDense<f32, 2, 2, Relu>, StaticDense<f32, 2, 3, Identity>];
/// static NET: Net = constmat::embed::StaticChain::new(
///     StaticDense::new([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]),
///     StaticDense::new([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], [0.0, 0.0, 0.0]),
/// );
///
/// let mut logits = [0.0; 3];
/// NET.forward(&[2.0, -1.0], &mut logits);
/// assert_eq!(logits, [2.0, 0.0, 0.0]);
/// assert_eq!(NET.predict(&[2.0, -1.0]), 0);
/// let p = NET.predict_proba(&[2.0, -1.0]);
/// assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
///
/// let mut classes = [0; 2];
/// NET.predict_batch(&[[2.0, -1.0], [0.0, 5.0]], &mut classes);
/// assert_eq!(classes, [0, 1]);
/// ```
pub trait Infer<T: Scalar + Float> {
    /// One sample in: `[T; I]`.
    type Input: Vector<T>;
    /// One sample out: `[T; O]`.
    type Output: Vector<T>;

    /// The output for the sample `x`, written into `out`.
    ///
    /// Intermediate results live on the stack (the widths of the hidden layers, `T` each).
    fn forward(&self, x: &Self::Input, out: &mut Self::Output);

    /// The outputs for a batch of `B` samples, `out[k]` for `x[k]`.
    ///
    /// Intermediate results live on the stack: `B` times the widths of the hidden layers, so
    /// keep `B` moderate (for the 784-128-64-10 net, `B = 64` takes about 50 KiB).
    fn forward_batch<const B: usize>(&self, x: &[Self::Input; B], out: &mut [Self::Output; B]);

    /// The predicted class of `x`: the index of its largest output (see [`argmax`]).
    fn predict(&self, x: &Self::Input) -> usize {
        let mut out = Self::Output::zeros();
        self.forward(x, &mut out);
        argmax(out.as_slice())
    }

    /// The class probabilities of `x`: the softmax of its outputs (see [`softmax_in_place`]).
    fn predict_proba(&self, x: &Self::Input) -> Self::Output {
        let mut out = Self::Output::zeros();
        self.forward(x, &mut out);
        softmax_in_place(out.as_mut_slice());
        out
    }

    /// The predicted class of each sample of a batch.
    fn predict_batch<const B: usize>(&self, x: &[Self::Input; B], classes: &mut [usize; B]) {
        let mut out = [Self::Output::zeros(); B];
        self.forward_batch(x, &mut out);
        for (class, row) in classes.iter_mut().zip(&out) {
            *class = argmax(row.as_slice());
        }
    }
}

/// The index of the largest element: the first one among equals, the first NaN if there is one
/// (as [`Matrix::row_argmax_into`](crate::Matrix::row_argmax_into)), 0 for an empty slice.
///
/// ```
/// use constmat::embed::argmax;
/// assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
/// assert_eq!(argmax(&[1.0, f32::NAN, 3.0]), 1);
/// ```
#[must_use]
pub fn argmax<T: PartialOrd>(values: &[T]) -> usize {
    let mut best = 0;
    for (i, x) in values.iter().enumerate() {
        #[allow(clippy::eq_op)] // x != x is the NaN test for a generic PartialOrd type
        if x != x {
            return i;
        }
        if *x > values[best] {
            best = i;
        }
    }
    best
}

/// Replaces logits by their softmax, `p_j = e^(z_j - m) / Σ_k e^(z_k - m)` with `m = max_k z_k`.
///
/// Subtracting the maximum changes nothing mathematically but keeps every `exp` in `(0, 1]`, so
/// large logits cannot overflow (the same formula as
/// [`nn::softmax_rows_into`](crate::nn::softmax_rows_into)).
///
/// ```
/// use constmat::embed::softmax_in_place;
/// let mut z = [1000.0_f32, 1000.0, 0.0];
/// softmax_in_place(&mut z);
/// assert_eq!(z, [0.5, 0.5, 0.0]);
/// ```
pub fn softmax_in_place<T: Float>(logits: &mut [T]) {
    let max = logits.iter().copied().fold(T::neg_infinity(), T::max);
    let sum = logits.iter().fold(T::zero(), |s, &z| s + (z - max).exp());
    let log_sum = sum.ln();
    for z in logits.iter_mut() {
        *z = (*z - max - log_sum).exp();
    }
}

/// `out = f(out + bias)`, element-wise: a dense layer's work after its product.
#[inline]
fn add_bias_and_activate<T: Float, const O: usize>(
    out: &mut [T; O],
    bias: &[T; O],
    f: impl Fn(T) -> T,
) {
    for (o, &b) in out.iter_mut().zip(bias) {
        *o = f(*o + b);
    }
}

impl<T, const I: usize, const O: usize, A> Infer<T> for StaticDense<T, I, O, A>
where
    T: Scalar + Float,
    A: Activation,
{
    type Input = [T; I];
    type Output = [T; O];

    #[inline]
    fn forward(&self, x: &[T; I], out: &mut [T; O]) {
        kernels::matvec_into(&self.weight, x, out);
        add_bias_and_activate(out, &self.bias, A::apply);
    }

    fn forward_batch<const B: usize>(&self, x: &[[T; I]; B], out: &mut [[T; O]; B]) {
        // Z = X·Wᵀ, one sample per row, then each row gets the bias and the activation.
        kernels::matmul_transpose_rhs_into(x, &self.weight, out);
        for row in out.iter_mut() {
            add_bias_and_activate(row, &self.bias, A::apply);
        }
    }
}

/// `Infer` for a chain type with `first` and `rest` fields: the static [`StaticChain`] and, with
/// `alloc`, the heap [`Chain`](crate::nn::Chain). The intermediate lives on the stack.
macro_rules! infer_chain {
    ($chain:ident) => {
        impl<T, A, N> Infer<T> for $chain<A, N>
        where
            T: Scalar + Float,
            A: Infer<T>,
            N: Infer<T, Input = A::Output>,
        {
            type Input = A::Input;
            type Output = N::Output;

            #[inline]
            fn forward(&self, x: &A::Input, out: &mut N::Output) {
                let mut middle = A::Output::zeros();
                self.first.forward(x, &mut middle);
                self.rest.forward(&middle, out);
            }

            fn forward_batch<const B: usize>(&self, x: &[A::Input; B], out: &mut [N::Output; B]) {
                let mut middle = [A::Output::zeros(); B];
                self.first.forward_batch(x, &mut middle);
                self.rest.forward_batch(&middle, out);
            }
        }
    };
}

infer_chain!(StaticChain);

#[cfg(feature = "alloc")]
mod heap {
    //! The same single-sample path for `nn`'s heap nets: their weights are `Matrix`es, whose
    //! [`as_array`](crate::Matrix::as_array) is the `&[[T; I]; O]` the kernels take.

    use super::{Infer, Vector, add_bias_and_activate};
    use crate::nn::{Activation, Chain, Dense};
    use crate::{Scalar, kernels};
    use num_traits::Float;

    impl<T, const I: usize, const O: usize, A> Infer<T> for Dense<T, I, O, A>
    where
        T: Scalar + Float,
        A: Activation,
    {
        type Input = [T; I];
        type Output = [T; O];

        #[inline]
        fn forward(&self, x: &[T; I], out: &mut [T; O]) {
            kernels::matvec_into(self.weight.as_array(), x, out);
            add_bias_and_activate(out, &self.bias.as_array()[0], A::apply);
        }

        fn forward_batch<const B: usize>(&self, x: &[[T; I]; B], out: &mut [[T; O]; B]) {
            kernels::matmul_transpose_rhs_into(x, self.weight.as_array(), out);
            for row in out.iter_mut() {
                add_bias_and_activate(row, &self.bias.as_array()[0], A::apply);
            }
        }
    }

    infer_chain!(Chain);
}
