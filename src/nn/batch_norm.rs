//! Batch normalization, `A = f(γ·(X - μ)/√(σ² + ε) + β)` per channel: PyTorch's
//! `nn.BatchNorm2d` of images and `nn.BatchNorm1d` of vectors (ε = 1e-5, momentum 0.1), with
//! the activation fused; training on the batch's statistics, inference on the running ones.
//!
//! Derivation: `docs/backprop.md`, section "Batch normalization". Per channel `c`, over the
//! `n` values of the batch (`B·H·W` for images of `H x W`, `B` for vectors):
//!
//! ```text
//! forward (training)                        backward
//! μ = Σ X / n,  σ² = Σ (X - μ)² / n         dZ = dA ⊙ f'(Z)
//! X̂ = (X - μ) / √(σ² + ε)                  dγ = Σ dZ ⊙ X̂,  dβ = Σ dZ
//! Z = γ·X̂ + β,  A = f(Z)                   dX = γ/√(σ² + ε) · (dZ - Σ dZ / n - X̂ · Σ (dZ ⊙ X̂) / n)
//! ```
//!
//! After each training step ([`Train::update_statistics`](super::Train::update_statistics)):
//! `running_mean ← 0.9·running_mean + 0.1·μ`, `running_var ← 0.9·running_var + 0.1·σ²·n/(n-1)`
//! (the unbiased variance, as PyTorch keeps it), `num_batches_tracked ← + 1`. A prediction
//! ([`Layer::forward`], a baked net) uses the running statistics.

use core::marker::PhantomData;

use num_traits::Float;

use super::{
    Activation, Bake, Heap, Identity, Inline, Layer, Parameters, SafetensorsFile, Sample, Store,
};
use crate::format::decode::{self, Source};
use crate::format::{Dtype, Element, NetSpec, TensorSpec};
use crate::kernels;

/// `ε`, added to the variance before its square root (PyTorch's default).
pub const BATCH_NORM_EPSILON: f64 = 1e-5;

/// The weight of a batch's statistics in the running ones (PyTorch's default `momentum`).
pub const BATCH_NORM_MOMENTUM: f64 = 0.1;

/// The channels of a sample, each a slice of values: a plane `[[T; W]; H]` of an image, one
/// value of a vector. How [`BatchNorm`] reaches them for either. Not for direct use.
#[doc(hidden)]
pub trait Channels<T>: Sample {
    /// The values of one channel.
    const PER_CHANNEL: usize;
    /// Channel `c`'s values.
    fn channel(&self, c: usize) -> &[T];
    /// Channel `c`'s values, to write.
    fn channel_mut(&mut self, c: usize) -> &mut [T];
}

impl<T: Sample, const C: usize, const H: usize, const W: usize> Channels<T> for [[[T; W]; H]; C] {
    const PER_CHANNEL: usize = H * W;
    #[inline(always)]
    fn channel(&self, c: usize) -> &[T] {
        self[c].as_flattened()
    }
    #[inline(always)]
    fn channel_mut(&mut self, c: usize) -> &mut [T] {
        self[c].as_flattened_mut()
    }
}

impl<T: Sample + Float, const N: usize> Channels<T> for [T; N] {
    const PER_CHANNEL: usize = 1;
    #[inline(always)]
    fn channel(&self, c: usize) -> &[T] {
        core::slice::from_ref(&self[c])
    }
    #[inline(always)]
    fn channel_mut(&mut self, c: usize) -> &mut [T] {
        core::slice::from_mut(&mut self[c])
    }
}

/// Batch normalization of `C` channels of `H x W` (PyTorch's `nn.BatchNorm2d(C)`): see
/// [`BatchNorm`].
pub type BatchNorm2d<T, const C: usize, const H: usize, const W: usize, A = Identity, S = Heap> =
    BatchNorm<T, [[[T; W]; H]; C], C, A, S>;

/// Batch normalization of vectors of `N` values, each its own channel (PyTorch's
/// `nn.BatchNorm1d(N)`, after a [`Dense`](super::Dense)): see [`BatchNorm`].
///
/// ```
/// use constmat::nn::{BatchNorm1d, Layer, Parameters};
///
/// let mut norm = BatchNorm1d::<f64, 2>::zeros();
/// norm.tensor_mut(2).copy_from_slice(&[1.0, -1.0]); // running_mean
/// let mut y = [0.0; 2];
/// norm.forward_one(&[3.0, 1.0], &mut y);
/// assert!((y[0] - 2.0).abs() < 1e-4 && (y[1] - 2.0).abs() < 1e-4);
/// ```
pub type BatchNorm1d<T, const N: usize, A = Identity, S = Heap> = BatchNorm<T, [T; N], N, A, S>;

/// Batch normalization of samples `X` of `C` channels (images: [`BatchNorm2d`]; vectors:
/// [`BatchNorm1d`]), then the activation `A`: PyTorch's
/// `nn.BatchNorm2d(C)` (`eps = 1e-5`, `momentum = 0.1`, affine, tracking running statistics),
/// its parameters kept in the storage `S`. ResNet's and MobileNet's layer between a convolution
/// and its activation: write the convolution without one, `Conv2d<.., Identity>`, and the
/// activation here.
///
/// Training ([`Train::forward_train`](super::Train::forward_train)) normalizes with the batch's
/// mean and variance and learns `weight` (γ) and `bias` (β); after each step the trainer folds
/// the batch's statistics into `running_mean` and `running_var`
/// ([`Train::update_statistics`](super::Train::update_statistics)). A prediction normalizes with
/// the running statistics. Its tensors are PyTorch's: `weight`, `bias`, `running_mean`,
/// `running_var` (`[C]`) and `num_batches_tracked` (`I64`, a scalar), so a state_dict loads
/// with `strict=True` either way.
///
/// In [`net!`](crate::net)'s image form: `BatchNorm2d<C>` or `BatchNorm2d<C, A>`, `C` checked
/// against the channels that reach it.
///
/// ```
/// use constmat::nn::{BatchNorm2d, Identity, Layer, Parameters};
///
/// let mut norm = BatchNorm2d::<f32, 2, 1, 2>::zeros(); // γ = 1, β = 0, mean 0, variance 1
/// norm.tensor_mut(2)[1] = 4.0; // running_mean
/// norm.tensor_mut(3)[1] = 4.0 - 1e-5; // running_var
/// let mut y = [[[0.0; 2]; 1]; 2];
/// norm.forward_one(&[[[1.0, -1.0]], [[6.0, 8.0]]], &mut y);
/// assert_eq!(y[1], [[1.0, 2.0]]); // (x - 4) / 2
/// ```
#[derive(Debug, Clone, PartialEq)]
#[repr(C, align(64))]
pub struct BatchNorm<T: Sample, X, const C: usize, A = Identity, S: Store = Heap> {
    /// γ, one per channel (PyTorch's `weight`).
    pub weight: S::Vector<T, C>,
    /// β, one per channel (PyTorch's `bias`).
    pub bias: S::Vector<T, C>,
    /// The running mean of each channel, what a prediction subtracts.
    pub running_mean: S::Vector<T, C>,
    /// The running (unbiased) variance of each channel.
    pub running_var: S::Vector<T, C>,
    /// The training steps whose statistics the running ones hold.
    pub num_batches_tracked: i64,
    /// The activation (a zero-sized marker).
    pub activation: A,
    /// The samples it normalizes.
    sample: PhantomData<fn() -> X>,
}

impl<T: Sample + Float, X, const C: usize, A: Activation, S: Store> BatchNorm<T, X, C, A, S> {
    /// A layer with the given tensors; a `const fn`, so an [`Inline`] layer can initialize a
    /// `static`.
    #[must_use]
    pub const fn new(
        weight: S::Vector<T, C>,
        bias: S::Vector<T, C>,
        running_mean: S::Vector<T, C>,
        running_var: S::Vector<T, C>,
        num_batches_tracked: i64,
    ) -> Self {
        Self {
            weight,
            bias,
            running_mean,
            running_var,
            num_batches_tracked,
            activation: A::VALUE,
            sample: PhantomData,
        }
    }

    /// `ε` as `T`.
    fn epsilon() -> T {
        T::from(BATCH_NORM_EPSILON).unwrap_or_else(T::zero)
    }

    /// The scale `γ/√(running_var + ε)` and shift `β - running_mean · scale` of each channel:
    /// a prediction is `x·scale + shift`.
    fn inference_affine(&self) -> ([T; C], [T; C]) {
        let (gamma, beta) = (S::vector(&self.weight), S::vector(&self.bias));
        let (mean, var) = (S::vector(&self.running_mean), S::vector(&self.running_var));
        let scale: [T; C] = core::array::from_fn(|c| gamma[c] / (var[c] + Self::epsilon()).sqrt());
        let shift = core::array::from_fn(|c| beta[c] - mean[c] * scale[c]);
        (scale, shift)
    }
}

impl<T, const C: usize, const H: usize, const W: usize, A, S> BatchNorm2d<T, C, H, W, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    /// The convolution that computes `conv` followed by this normalization in prediction
    /// (running statistics), with this layer's activation: each filter scaled by
    /// `γ/√(running_var + ε)`, its bias `(b - running_mean)·γ/√(running_var + ε) + β`. How a
    /// trained net drops its batch normalizations before baking or quantizing, as TensorFlow
    /// Lite's converter does.
    ///
    /// ```
    /// use constmat::nn::{BatchNorm2d, Conv2d, Identity, Layer, Parameters, RandomInit, Relu};
    /// use rand::{SeedableRng, rngs::StdRng};
    ///
    /// let mut rng = StdRng::seed_from_u64(1);
    /// let conv = Conv2d::<f64, 2, 3, 3, 1, 1, 5, 5, 5, 5, Identity>::random(&mut rng);
    /// let mut norm = BatchNorm2d::<f64, 3, 5, 5, Relu>::zeros();
    /// norm.tensor_mut(2).copy_from_slice(&[0.5, -1.0, 0.25]); // running_mean
    /// norm.tensor_mut(3).copy_from_slice(&[2.0, 0.5, 1.0]); // running_var
    /// let folded: Conv2d<f64, 2, 3, 3, 1, 1, 5, 5, 5, 5, Relu> = norm.fold_into(&conv);
    ///
    /// let x = [[[0.3; 5]; 5], [[-0.7; 5]; 5]];
    /// let (mut z, mut a, mut b) = ([[[0.0; 5]; 5]; 3], [[[0.0; 5]; 5]; 3], [[[0.0; 5]; 5]; 3]);
    /// conv.forward_one(&x, &mut z);
    /// norm.forward_one(&z, &mut a);
    /// folded.forward_one(&x, &mut b);
    /// let close = |p: &f64, q: &f64| (p - q).abs() < 1e-12;
    /// assert!(a.as_flattened().as_flattened().iter().zip(b.as_flattened().as_flattened()).all(|(p, q)| close(p, q)));
    /// ```
    #[must_use]
    pub fn fold_into<
        const CI: usize,
        const K: usize,
        const STRIDE: usize,
        const PAD: usize,
        const IH: usize,
        const IW: usize,
        S2: Store,
        const KW: usize,
    >(
        &self,
        conv: &super::Conv2d<T, CI, C, K, STRIDE, PAD, IH, IW, H, W, Identity, S2, KW>,
    ) -> super::Conv2d<T, CI, C, K, STRIDE, PAD, IH, IW, H, W, A, S2, KW> {
        let (scale, shift) = self.inference_affine();
        let mut weight = S2::matrix_copied(S2::matrix(&conv.weight));
        for (filter, &s) in S2::matrix_mut(&mut weight).iter_mut().zip(&scale) {
            for v in filter.as_flattened_mut().as_flattened_mut() {
                *v *= s;
            }
        }
        let bias = S2::vector(&conv.bias);
        let bias: [T; C] = core::array::from_fn(|c| bias[c] * scale[c] + shift[c]);
        super::Conv2d::new(weight, S2::vector_copied(&bias))
    }
}

impl<T, const N: usize, A, S> BatchNorm1d<T, N, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    /// The dense layer that computes `dense` followed by this normalization in prediction,
    /// with this layer's activation: as [`BatchNorm2d::fold_into`] for a convolution, each
    /// row of the weight scaled.
    ///
    /// ```
    /// use constmat::nn::{BatchNorm1d, Dense, Identity, Layer, Parameters, RandomInit, Tanh};
    /// use rand::{SeedableRng, rngs::StdRng};
    ///
    /// let dense = Dense::<f64, 3, 2, Identity>::random(&mut StdRng::seed_from_u64(2));
    /// let mut norm = BatchNorm1d::<f64, 2, Tanh>::zeros();
    /// norm.tensor_mut(2).copy_from_slice(&[0.5, -0.5]); // running_mean
    /// norm.tensor_mut(3).copy_from_slice(&[4.0, 0.25]); // running_var
    /// let folded: Dense<f64, 3, 2, Tanh> = norm.fold_into(&dense);
    /// let (mut z, mut a, mut b) = ([0.0; 2], [0.0; 2], [0.0; 2]);
    /// dense.forward_one(&[1.0, -2.0, 0.5], &mut z);
    /// norm.forward_one(&z, &mut a);
    /// folded.forward_one(&[1.0, -2.0, 0.5], &mut b);
    /// assert!((a[0] - b[0]).abs() < 1e-12 && (a[1] - b[1]).abs() < 1e-12);
    /// ```
    #[must_use]
    pub fn fold_into<const I: usize, S2: Store>(
        &self,
        dense: &super::Dense<T, I, N, Identity, S2>,
    ) -> super::Dense<T, I, N, A, S2> {
        let (scale, shift) = self.inference_affine();
        let mut weight = S2::matrix_copied(S2::matrix(&dense.weight));
        for (row, &s) in S2::matrix_mut(&mut weight).iter_mut().zip(&scale) {
            for v in row {
                *v *= s;
            }
        }
        let bias = S2::vector(&dense.bias);
        let bias: [T; N] = core::array::from_fn(|o| bias[o] * scale[o] + shift[o]);
        super::Dense::new(weight, S2::vector_copied(&bias))
    }
}

impl<T, X, const C: usize, A, S> Layer for BatchNorm<T, X, C, A, S>
where
    T: Element + Sample + Float,
    X: Channels<T>,
    A: Activation,
    S: Store,
{
    type In = X;
    type Out = X;

    /// `BatchNorm2d(C)` or `BatchNorm1d(C)`, then the activation's module unless it is
    /// [`Identity`].
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &[
            vector_spec::<T, C>("weight", false),
            vector_spec::<T, C>("bias", false),
            vector_spec::<T, C>("running_mean", true),
            vector_spec::<T, C>("running_var", true),
            TensorSpec {
                module: 0,
                field: "num_batches_tracked",
                dtype: Dtype::I64,
                shape: &[],
                range: None,
                scale: false,
                buffer: true,
            },
        ],
    };

    type WithStore<S2: Store> = BatchNorm<T, X, C, A, S2>;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        // (x - mean)·scale + β, as PyTorch computes it: folding the mean into the shift
        // (x·scale + (β - mean·scale)) loses the low bits of x where the mean is large.
        let (scale, _) = self.inference_affine();
        let (mean, beta) = (S::vector(&self.running_mean), S::vector(&self.bias));
        kernels::with_wide_vectors(
            #[inline(always)]
            || {
                for (x, y) in x.iter().zip(y.iter_mut()) {
                    for c in 0..C {
                        let (x, y) = (x.channel(c), y.channel_mut(c));
                        for (x, y) in x.iter().zip(y) {
                            *y = A::apply((*x - mean[c]) * scale[c] + beta[c]);
                        }
                    }
                }
            },
        );
    }

    fn to_store<S2: Store>(&self) -> Self::WithStore<S2> {
        BatchNorm::new(
            S2::vector_copied(S::vector(&self.weight)),
            S2::vector_copied(S::vector(&self.bias)),
            S2::vector_copied(S::vector(&self.running_mean)),
            S2::vector_copied(S::vector(&self.running_var)),
            self.num_batches_tracked,
        )
    }
}

/// The spec of a `[C]` tensor of `T`s, learned or a running statistic (`buffer`).
const fn vector_spec<T: Element, const C: usize>(field: &'static str, buffer: bool) -> TensorSpec {
    TensorSpec {
        module: 0,
        field,
        dtype: T::DTYPE,
        shape: &[C],
        range: None,
        scale: false,
        buffer,
    }
}

impl<T, X, const C: usize, A, S> Parameters<T> for BatchNorm<T, X, C, A, S>
where
    T: Element + Sample + Float,
    X: Channels<T>,
    A: Activation,
    S: Store,
{
    /// `weight`, `bias`, `running_mean`, `running_var`; `num_batches_tracked`, an integer, as
    /// no values (an optimizer leaves it alone, and the running statistics too: their
    /// gradients are 0).
    fn tensor(&self, k: usize) -> &[T] {
        match k {
            0 => S::vector(&self.weight),
            1 => S::vector(&self.bias),
            2 => S::vector(&self.running_mean),
            3 => S::vector(&self.running_var),
            4 => &[],
            _ => panic!("a batch normalization has 5 tensors; asked for tensor {k}"),
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        match k {
            0 => S::vector_mut(&mut self.weight),
            1 => S::vector_mut(&mut self.bias),
            2 => S::vector_mut(&mut self.running_mean),
            3 => S::vector_mut(&mut self.running_var),
            4 => &mut [],
            _ => panic!("a batch normalization has 5 tensors; asked for tensor {k}"),
        }
    }

    /// PyTorch's initial state: γ = 1, β = 0, running mean 0, running variance 1, no batch
    /// tracked.
    fn zeros() -> Self {
        Self::new(
            S::vector_filled(T::one()),
            S::vector_filled(T::zero()),
            S::vector_filled(T::zero()),
            S::vector_filled(T::one()),
            0,
        )
    }

    /// All zero, `num_batches_tracked` too: the gradients' shape.
    fn zeros_like(&self) -> Self {
        Self::new(
            S::vector_filled(T::zero()),
            S::vector_filled(T::zero()),
            S::vector_filled(T::zero()),
            S::vector_filled(T::zero()),
            0,
        )
    }
}

#[cfg(feature = "alloc")]
impl<T, X, const C: usize, A, S> super::Weights for BatchNorm<T, X, C, A, S>
where
    T: Element + Sample + Float,
    X: Channels<T>,
    A: Activation,
    S: Store,
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        if k == 4 {
            out.extend_from_slice(&self.num_batches_tracked.to_le_bytes());
        } else {
            super::write_parameters::<T, _>(self, k, out);
        }
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let mut layer: Self = super::read_parameters::<T, _>(&mut |k| {
            if k == 4 { &[] } else { tensor(k) }
        });
        let count = tensor(4);
        let bytes: [u8; 8] = core::array::from_fn(|i| count.get(i).copied().unwrap_or(0));
        layer.num_batches_tracked = i64::from_le_bytes(bytes);
        layer
    }
}

#[cfg(feature = "rand")]
impl<T, X, const C: usize, A, S> super::RandomInit for BatchNorm<T, X, C, A, S>
where
    T: Element + Sample + Float,
    X: Channels<T>,
    A: Activation,
    S: Store,
{
    /// PyTorch's initial state (nothing random): see [`Parameters::zeros`].
    fn random<R: rand::Rng + ?Sized>(_rng: &mut R) -> Self {
        Self::zeros()
    }
}

/// A baked batch normalization's tensors and first problem, decoded from the file `F`.
struct Decoded<F, T, const C: usize>(core::marker::PhantomData<fn() -> (F, T)>);

macro_rules! bake {
    ($t:ty, $vector:ident) => {
        impl<F: SafetensorsFile, const C: usize> Decoded<F, $t, C> {
            /// `[weight, bias, running_mean, running_var]`, `num_batches_tracked`, the error.
            const PARTS: ([[$t; C]; 4], i64, Option<crate::format::Error>) = {
                const FIELDS: [&str; 4] = ["weight", "bias", "running_mean", "running_var"];
                let mut vectors = [[0.0; C]; 4];
                let mut error = None;
                let mut i = 0;
                while i < 4 && error.is_none() {
                    match decode::$vector(Source::Index(&F::INDEX), F::FIRST_MODULE, FIELDS[i]) {
                        Ok(v) => vectors[i] = v,
                        Err(e) => error = Some(e),
                    }
                    i += 1;
                }
                let mut count = 0;
                if error.is_none() {
                    match decode::i64_scalar_from(
                        Source::Index(&F::INDEX),
                        F::FIRST_MODULE,
                        "num_batches_tracked",
                    ) {
                        Ok(n) => count = n,
                        Err(e) => error = Some(e),
                    }
                }
                (vectors, count, error)
            };
        }

        impl<F: SafetensorsFile, X: Channels<$t>, const C: usize, A: Activation> Bake<F>
            for BatchNorm<$t, X, C, A, Inline>
        {
            const BAKED: Self = Self::new(
                Decoded::<F, $t, C>::PARTS.0[0],
                Decoded::<F, $t, C>::PARTS.0[1],
                Decoded::<F, $t, C>::PARTS.0[2],
                Decoded::<F, $t, C>::PARTS.0[3],
                Decoded::<F, $t, C>::PARTS.1,
            );
            const ERROR: Option<crate::format::Error> = Decoded::<F, $t, C>::PARTS.2;
        }
    };
}
bake!(f32, f32_vector_from);
bake!(f64, f64_vector_from);

#[cfg(feature = "alloc")]
pub use train::BatchNormWorkspace;

#[cfg(feature = "alloc")]
mod train {
    use alloc::boxed::Box;

    use num_traits::Float;

    use super::{BATCH_NORM_MOMENTUM, BatchNorm, Channels};
    use crate::format::Element;
    use crate::kernels;
    use crate::nn::train::zeroed_samples;
    use crate::nn::{Activation, Sample, Store, Train};

    /// The buffers of one [`BatchNorm`] layer for a batch of `B`.
    #[derive(Debug, Clone)]
    pub struct BatchNormWorkspace<T, O, const C: usize, const B: usize> {
        /// `A = f(Z)` of each sample.
        pub output: Box<[O; B]>,
        /// One plane's `dZ = dA ⊙ f'(Z)` (`H·W` values; one for vectors), the backward
        /// pass's scratch.
        pub plane: Box<[T]>,
        /// The mean `m_p` of each plane, rounded (sample by sample, `C` each), the forward
        /// pass's scratch.
        pub plane_means: Box<[T]>,
        /// The sum of each plane's deviations from its rounded mean, `Σ (x - m_p)` (as
        /// `plane_means`): what the rounding of `m_p` left out, which the variance adds back.
        pub plane_residuals: Box<[T]>,
        /// The batch's mean of each channel, `μ`.
        pub mean: [T; C],
        /// The batch's (biased) variance of each channel, `σ²`.
        pub variance: [T; C],
    }

    /// `Σ f(a[i], b[i])` in 8 independent partial sums: one running sum would make each
    /// addition wait for the last, and the compiler may not reorder it into vectors. Always
    /// inlined, into the closures compiled for the wide vectors.
    #[inline(always)]
    fn sum_with<T: Float>(a: &[T], b: &[T], f: impl Fn(T, T) -> T) -> T {
        let mut partial = [T::zero(); 8];
        let (chunks_a, chunks_b) = (a.chunks_exact(8), b.chunks_exact(8));
        let tail = chunks_a
            .remainder()
            .iter()
            .zip(chunks_b.remainder())
            .fold(T::zero(), |s, (&a, &b)| s + f(a, b));
        for (a, b) in chunks_a.zip(chunks_b) {
            for ((p, &a), &b) in partial.iter_mut().zip(a).zip(b) {
                *p = *p + f(a, b);
            }
        }
        partial.iter().fold(tail, |s, &p| s + p)
    }

    /// `(Σ (x - m)², Σ (x - m))` over `p`, in one pass and 8 partial sums each (as
    /// [`sum_with`]).
    #[inline(always)]
    fn deviation_sums<T: Float>(p: &[T], m: T) -> (T, T) {
        let (mut squares, mut deviations) = ([T::zero(); 8], [T::zero(); 8]);
        let chunks = p.chunks_exact(8);
        let tail = chunks
            .remainder()
            .iter()
            .fold((T::zero(), T::zero()), |(q, s), &x| {
                let d = x - m;
                (q + d * d, s + d)
            });
        for chunk in chunks {
            for i in 0..8 {
                let d = chunk[i] - m;
                squares[i] = squares[i] + d * d;
                deviations[i] = deviations[i] + d;
            }
        }
        (
            squares.iter().fold(tail.0, |q, &p| q + p),
            deviations.iter().fold(tail.1, |s, &p| s + p),
        )
    }

    /// Nothing, or a compile error when a batch holds fewer than 2 values of each channel
    /// (`BatchNorm1d` at batch 1): their variance is 0, every output would be β and no
    /// gradient would reach the layers before (PyTorch refuses it at run time: "Expected more
    /// than 1 value per channel when training").
    #[track_caller]
    const fn check_values_per_channel(values: usize) {
        if values < 2 {
            crate::format::Message::new()
                .str("batch normalization of ")
                .number(values)
                .str(" value per channel in a batch: training normalizes each channel over the batch, so it needs at least 2 (a batch of 2 or more, or images larger than 1 x 1)")
                .panic()
        }
    }

    impl<T, const B: usize, X, const C: usize, A, S> Train<T, B> for BatchNorm<T, X, C, A, S>
    where
        T: Element + Sample + Float,
        X: Channels<T>,
        A: Activation,
        S: Store,
    {
        type Workspace = BatchNormWorkspace<T, X, C, B>;

        fn workspace(&self) -> Self::Workspace {
            const { check_values_per_channel(B * X::PER_CHANNEL) };
            BatchNormWorkspace {
                output: zeroed_samples(),
                plane: alloc::vec![T::zero(); X::PER_CHANNEL].into_boxed_slice(),
                plane_means: alloc::vec![T::zero(); B * C].into_boxed_slice(),
                plane_residuals: alloc::vec![T::zero(); B * C].into_boxed_slice(),
                mean: [T::zero(); C],
                variance: [T::zero(); C],
            }
        }

        fn forward_train<'w>(&self, x: &[X; B], ws: &'w mut Self::Workspace) -> &'w [X; B] {
            let n = T::from(B * X::PER_CHANNEL).unwrap_or_else(T::nan);
            let (gamma, beta) = (S::vector(&self.weight), S::vector(&self.bias));
            // Sample by sample, each sample's channels in turn, so that every pass streams
            // through memory (a channel's planes lie a whole sample apart: one at a time, the
            // passes waited on a cache miss every few hundred bytes). Each channel's sums still
            // add its planes in the samples' order.
            kernels::with_wide_vectors(
                #[inline(always)]
                || {
                    // μ and σ² in one pass over the batch, each sample read twice while it
                    // is in cache: the sum of each of its planes (one channel `c`, a
                    // contiguous slice), then each plane's deviations from its own rounded
                    // mean m_p, squared and not (the planes' sums are independent of each
                    // other, so they overlap). With n_p values a plane and n in all, for any
                    // m_p and μ:
                    //   n·σ² = Σ_p [Σ (x - m_p)² + (m_p - μ)·(2·Σ (x - m_p) + n_p·(m_p - μ))].
                    // Without the term in Σ (x - m_p), the rounding of m_p would cost a
                    // relative error of about ε·|μ|/σ; with it, about what a two-pass
                    // computation loses.
                    let n_plane = T::from(X::PER_CHANNEL).unwrap_or_else(T::nan);
                    let planes = ws
                        .plane_means
                        .chunks_exact_mut(C.max(1))
                        .zip(ws.plane_residuals.chunks_exact_mut(C.max(1)));
                    ws.mean = [T::zero(); C];
                    ws.variance = [T::zero(); C];
                    for (x, (plane_means, plane_residuals)) in x.iter().zip(planes) {
                        for (c, plane_mean) in plane_means.iter_mut().enumerate() {
                            let p = x.channel(c);
                            let sum = sum_with(p, p, |v, _| v);
                            ws.mean[c] += sum;
                            *plane_mean = sum / n_plane;
                        }
                        for (c, (&m, residual)) in
                            plane_means.iter().zip(plane_residuals).enumerate()
                        {
                            let (squares, deviations) = deviation_sums(x.channel(c), m);
                            ws.variance[c] += squares;
                            *residual = deviations;
                        }
                    }
                    for mean in &mut ws.mean {
                        *mean /= n;
                    }
                    let mut between = [T::zero(); C];
                    let planes = ws
                        .plane_means
                        .chunks_exact(C.max(1))
                        .zip(ws.plane_residuals.chunks_exact(C.max(1)));
                    for (plane_means, plane_residuals) in planes {
                        for (((b, &m), &r), &mean) in between
                            .iter_mut()
                            .zip(plane_means)
                            .zip(plane_residuals)
                            .zip(&ws.mean)
                        {
                            *b += (m - mean) * (r + r + n_plane * (m - mean));
                        }
                    }
                    for (variance, b) in ws.variance.iter_mut().zip(between) {
                        *variance = (*variance + b) / n;
                    }
                    let inv_std: [T; C] =
                        core::array::from_fn(|c| (ws.variance[c] + Self::epsilon()).sqrt().recip());
                    // X̂ is not kept: the backward pass computes it again from X, the same
                    // operations on the same values (a pass that writes one array where it
                    // wrote two; the arrays exceed L2 at a training batch).
                    for (a, x) in ws.output.iter_mut().zip(x) {
                        for c in 0..C {
                            let (mean, inv_std, g, b) = (ws.mean[c], inv_std[c], gamma[c], beta[c]);
                            let xs = x.channel(c);
                            let a = a.channel_mut(c);
                            for (a, &x) in a.iter_mut().zip(xs) {
                                let xh = (x - mean) * inv_std;
                                *a = A::apply(g * xh + b);
                            }
                        }
                    }
                },
            );
            &ws.output
        }

        fn output(ws: &Self::Workspace) -> &[X; B] {
            &ws.output
        }

        fn backward(
            &self,
            x: &[X; B],
            ws: &mut Self::Workspace,
            d_output: &[X; B],
            d_input: Option<&mut [X; B]>,
            gradients: &mut Self,
        ) {
            let n = T::from(B * X::PER_CHANNEL).unwrap_or_else(T::nan);
            let (gamma, beta) = (S::vector(&self.weight), S::vector(&self.bias));
            let mut d_gamma = [T::zero(); C];
            let mut d_beta = [T::zero(); C];
            // X̂ = (X - μ)·(1/√(σ² + ε)), computed as the forward pass did.
            let inv_std: [T; C] =
                core::array::from_fn(|c| (ws.variance[c] + Self::epsilon()).sqrt().recip());
            kernels::with_wide_vectors(
                #[inline(always)]
                || {
                    // dZ = dA ⊙ f'(Z), with Z = γ·X̂ + β computed again from X, as the
                    // forward pass did (the same operations on the same values: the same
                    // bits, and `A::derivative(Z)` equals `derivative_from_output` of the
                    // output the forward pass wrote). A is not read, and no batch-sized dZ is
                    // kept (one plane's at a time): at a training batch the arrays exceed L2,
                    // and each array a pass does not touch is memory traffic saved.
                    let d_pre_activation = |c: usize, da: T, x: T| {
                        let xh = (x - ws.mean[c]) * inv_std[c];
                        let z = gamma[c] * xh + beta[c];
                        (da * A::derivative(z), xh)
                    };
                    // dβ = Σ dZ, dγ = Σ dZ ⊙ X̂ over the batch's positions, a plane at a time:
                    // its dZ into the plane-sized scratch (in L1 or L2, where the whole dZ
                    // would not be), then summed, sample by sample as the forward pass (each
                    // channel's sums add its planes in the samples' order).
                    let dz = &mut ws.plane[..];
                    for (da, x) in d_output.iter().zip(x) {
                        for c in 0..C {
                            let (da, x) = (da.channel(c), x.channel(c));
                            for ((dz, &da), &x) in dz.iter_mut().zip(da).zip(x) {
                                *dz = d_pre_activation(c, da, x).0;
                            }
                            let (dz, x) = (&*dz, x);
                            let (mean, inv_std) = (ws.mean[c], inv_std[c]);
                            d_beta[c] += sum_with(dz, dz, |d, _| d);
                            d_gamma[c] += sum_with(dz, x, |d, x| d * ((x - mean) * inv_std));
                        }
                    }
                    // dX = γ/√(σ² + ε) · (dZ - dβ/n - X̂ · dγ/n)
                    if let Some(dx) = d_input {
                        for ((dx, da), x) in dx.iter_mut().zip(d_output).zip(x) {
                            for c in 0..C {
                                let (mean_dz, mean_dzx) = (d_beta[c] / n, d_gamma[c] / n);
                                let k = gamma[c] * inv_std[c];
                                let (dx, da, x) = (dx.channel_mut(c), da.channel(c), x.channel(c));
                                for ((dx, &da), &x) in dx.iter_mut().zip(da).zip(x) {
                                    let (dz, xh) = d_pre_activation(c, da, x);
                                    *dx = k * (dz - mean_dz - xh * mean_dzx);
                                }
                            }
                        }
                    }
                },
            );
            *S::vector_mut(&mut gradients.weight) = d_gamma;
            *S::vector_mut(&mut gradients.bias) = d_beta;
            // Not learned by gradients: see `update_statistics`.
            S::vector_mut(&mut gradients.running_mean).fill(T::zero());
            S::vector_mut(&mut gradients.running_var).fill(T::zero());
            gradients.num_batches_tracked = 0;
        }

        /// The batch's mean and unbiased variance into the running ones, PyTorch's way.
        fn update_statistics(&mut self, ws: &Self::Workspace) {
            let m = T::from(BATCH_NORM_MOMENTUM).unwrap_or_else(T::zero);
            let count = B * X::PER_CHANNEL;
            let unbiased = if count > 1 {
                T::from(count).unwrap_or_else(T::one) / T::from(count - 1).unwrap_or_else(T::one)
            } else {
                T::one()
            };
            let mean = S::vector_mut(&mut self.running_mean);
            for (r, &b) in mean.iter_mut().zip(&ws.mean) {
                *r = (T::one() - m) * *r + m * b;
            }
            let var = S::vector_mut(&mut self.running_var);
            for (r, &b) in var.iter_mut().zip(&ws.variance) {
                *r = (T::one() - m) * *r + m * b * unbiased;
            }
            self.num_batches_tracked = self.num_batches_tracked.saturating_add(1);
        }
    }
}
