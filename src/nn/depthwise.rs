//! The depthwise convolution `A = f(dwconv(X, W) + b)`: each input channel convolved with its
//! own filters, forward and backward side by side, for every storage.
//!
//! Derivation: `docs/backprop.md`, section "Depthwise convolution". For one sample with `C`
//! input channels of `H x W` and `OC = C·M` filters of `K x K` (`M` per input channel), stride
//! `S` and zero padding `P`, output channel `o` reads input channel `c = o / M` only:
//!
//! ```text
//! forward                                        backward
//! Z[o][i][j] = b[o] + Σ_(kh,kw) W[o][kh][kw] ·   dZ = dA ⊙ f'(Z)
//!              X[c][i·S + kh - P][j·S + kw - P]   db[o] = Σ_batch Σ_(i,j) dZ[o][i][j]
//! A = f(Z)                                       dW[o][kh][kw] = Σ_batch Σ_(i,j) dZ[o][i][j] ·
//!                                                                X[c][i·S + kh - P][j·S + kw - P]
//!                                                dX[c][y][x] = Σ over o of c, and (i, j, kh, kw)
//!                                                  with i·S + kh - P = y, j·S + kw - P = x, of
//!                                                  dZ[o][i][j] · W[o][kh][kw]
//! ```
//!
//! With `K·K` multiply-adds per output instead of `C·K·K`, the layer is bound by memory, not
//! arithmetic: its kernels (`kernels/depthwise.rs`) are loops over rows of outputs, for any
//! kernel, stride and padding, with no scratch and no unrolled patches.

use num_traits::Float;

#[cfg(feature = "rand")]
use super::Init;
use super::shape::{Window, check_depthwise_channels, check_nonzero, check_output_size};
use super::{
    Activation, Bake, Heap, Identity, Inline, Layer, Parameters, SafetensorsFile, Sample, Store,
};
use crate::format::decode::{self, Source};
use crate::format::{Element, NetSpec, TensorSpec};
use crate::kernels;

/// A depthwise 2-D convolution: `C` input channels, each convolved with `OC / C` filters of
/// `K x K` of its own (so `OC` output channels, a multiple of `C`), stride `STRIDE`, zero
/// padding `PAD`, on `H x W` images giving `OH x OW` ones, then the activation `A`; its
/// parameters kept in the storage `S` ([`Heap`] unless said otherwise). PyTorch's
/// `nn.Conv2d(C, OC, K, stride=STRIDE, padding=PAD, groups=C)`, TensorFlow's
/// `DepthwiseConv2D` (depth multiplier `OC / C`), with the activation fused: the layer of
/// MobileNet and of the DS-CNN of MLPerf Tiny, usually followed by a 1 x 1
/// [`Conv2d`](super::Conv2d).
///
/// Output channel `o` reads input channel `o / (OC / C)` (PyTorch's grouping). The weight is
/// stored `[OC][1][K][K]`, PyTorch's layout, so weights move between the two as they are.
///
/// [`net!`](crate::net) computes `OH` and `OW` (as for `Conv2d`); written by hand, a wrong
/// size, or output channels that are not a multiple of the input channels, is a build error
/// naming the numbers.
///
/// ```
/// use constmat::nn::{DepthwiseConv2d, Identity, Inline, Layer};
///
/// // Two channels, one 3x3 filter each (the first sums its window, the second doubles the
/// // centre), stride 1, padding 1, on 3x3 images.
/// static LAYER: DepthwiseConv2d<f32, 2, 2, 3, 1, 1, 3, 3, 3, 3, Identity, Inline> =
///     DepthwiseConv2d::new(
///         [[[[1.0; 3]; 3]], [[[0.0; 3], [0.0, 2.0, 0.0], [0.0; 3]]]],
///         [0.0, 0.5],
///     );
/// let image = [[[1.0; 3]; 3], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]];
/// let mut out = [[[0.0; 3]; 3]; 2];
/// LAYER.forward_one(&image, &mut out);
/// assert_eq!(out[0], [[4.0, 6.0, 4.0], [6.0, 9.0, 6.0], [4.0, 6.0, 4.0]]);
/// assert_eq!(out[1][1], [8.5, 10.5, 12.5]);
/// ```
///
/// Output channels that are not a multiple of the input channels do not build:
///
/// ```compile_fail,E0080
/// use constmat::nn::{DepthwiseConv2d, Parameters};
/// let _ = DepthwiseConv2d::<f32, 4, 6, 3, 1, 1, 8, 8, 8, 8>::zeros();
/// ```
#[derive(Debug, Clone, PartialEq)]
#[repr(C, align(64))]
pub struct DepthwiseConv2d<
    T: Sample,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A = Identity,
    S: Store = Heap,
> {
    /// `[OC][1][K][K]`: filter `o`, a `K x K` kernel on input channel `o / (OC / C)`.
    pub weight: S::Matrix<[[T; K]; K], OC, 1>,
    /// One bias per output channel.
    pub bias: S::Vector<T, OC>,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<
    T: Sample,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A: Activation,
    S: Store,
> DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
{
    /// The shape rules, evaluated when the layer's code is generated: `OC` is a multiple of
    /// `C`, neither 0, and `OH` and `OW` are the output sizes of `H` and `W`.
    const SHAPE: () = {
        check_nonzero("DepthwiseConv2d", "input channels", C);
        check_nonzero("DepthwiseConv2d", "output channels", OC);
        check_depthwise_channels(C, OC);
        check_output_size(
            "DepthwiseConv2d",
            "height",
            Window::Kernel,
            (H, K, STRIDE, PAD),
            OH,
        );
        check_output_size(
            "DepthwiseConv2d",
            "width",
            Window::Kernel,
            (W, K, STRIDE, PAD),
            OW,
        );
    };

    /// The sizes the kernels take.
    const SIZES: kernels::Depthwise = kernels::Depthwise {
        channels: C,
        multiplier: match OC.checked_div(C) {
            Some(multiplier) => multiplier,
            None => 0,
        },
        kernel: (K, K),
        stride: (STRIDE, STRIDE),
        padding: (PAD, PAD),
        input: (H, W),
        output: (OH, OW),
    };

    /// A layer with the given parameters; a `const fn`, so an [`Inline`] layer can initialize
    /// a `static`.
    #[must_use]
    pub const fn new(weight: S::Matrix<[[T; K]; K], OC, 1>, bias: S::Vector<T, OC>) -> Self {
        // The shape rules, checked where the layer is made (so the error's last note points at
        // the caller), and again in the forward pass for layers built field by field.
        let () = Self::SHAPE;
        Self {
            weight,
            bias,
            activation: A::VALUE,
        }
    }

    /// A layer with weights drawn by `init` (fan-in `K·K`, fan-out `OC·K·K`, as PyTorch counts
    /// them for a weight of `[OC, 1, K, K]`) and zero biases.
    #[cfg(feature = "rand")]
    #[must_use]
    pub fn with_init<R: rand::Rng + ?Sized>(init: Init, rng: &mut R) -> Self
    where
        T: Float,
    {
        let () = Self::SHAPE; // checked here too, so that the error points at the caller
        let mut weight = S::matrix_filled([[T::ZERO; K]; K]);
        let flat = S::matrix_mut(&mut weight)
            .as_flattened_mut()
            .as_flattened_mut()
            .as_flattened_mut();
        init.fill(flat, K * K, OC * K * K, rng);
        Self::new(weight, S::vector_filled(T::ZERO))
    }
}

impl<
    T,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A,
    S,
> DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    /// The weight as `OC · K·K` values (row-major, no copy).
    fn weight_values(&self) -> &[T] {
        S::matrix(&self.weight)
            .as_flattened()
            .as_flattened()
            .as_flattened()
    }

    /// The forward pass of a batch, every sample in one call: `A = f(dwconv(X, W) + b)`; a
    /// training pass's (`training`) on the kernels for a batch
    /// (`kernels::depthwise_conv2d_training`).
    fn forward_batch(&self, x: &[[[[T; W]; H]; C]], y: &mut [[[[T; OW]; OH]; OC]], training: bool) {
        let () = Self::SHAPE;
        let batch = x.len().min(y.len());
        let (x, y) = (&x[..batch], &mut y[..batch]);
        let x = x.as_flattened().as_flattened().as_flattened();
        let z = y.as_flattened_mut().as_flattened_mut().as_flattened_mut();
        let (weight, bias) = (self.weight_values(), S::vector(&self.bias));
        #[cfg(feature = "alloc")]
        if training {
            kernels::depthwise_conv2d_training(&Self::SIZES, batch, x, weight, bias, z);
        } else {
            kernels::depthwise_conv2d(&Self::SIZES, batch, x, weight, bias, z);
        }
        #[cfg(not(feature = "alloc"))]
        {
            let _ = training;
            kernels::depthwise_conv2d(&Self::SIZES, batch, x, weight, bias, z);
        }
        if !super::activation::is_identity::<A>() {
            kernels::with_wide_vectors(
                #[inline(always)]
                || {
                    for a in z {
                        *a = A::apply(*a);
                    }
                },
            );
        }
    }
}

impl<
    T,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A,
    S,
> Layer for DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    type In = [[[T; W]; H]; C];
    type Out = [[[T; OW]; OH]; OC];

    /// `Conv2d(C, OC, K, groups=C)`, then the activation's module unless it is [`Identity`]:
    /// tensors `0.weight` `[OC, 1, K, K]` and `0.bias` `[OC]`.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &[
            TensorSpec {
                module: 0,
                field: "weight",
                dtype: T::DTYPE,
                shape: &[OC, 1, K, K],
                range: None,
                scale: false,
                buffer: false,
            },
            TensorSpec {
                module: 0,
                field: "bias",
                dtype: T::DTYPE,
                shape: &[OC],
                range: None,
                scale: false,
                buffer: false,
            },
        ],
    };

    type WithStore<S2: Store> = DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S2>;

    /// The kernels' column masks where they run over whole planes (stride 1, outputs as wide
    /// as the inputs, on x86-64), else 0.
    const WORKING_BYTES: usize = Self::SIZES.stack_bytes();

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        self.forward_batch(x, y, false);
    }

    fn to_store<S2: Store>(&self) -> Self::WithStore<S2> {
        DepthwiseConv2d::new(
            S2::matrix_copied(S::matrix(&self.weight)),
            S2::vector_copied(S::vector(&self.bias)),
        )
    }
}

#[cfg(feature = "rand")]
impl<
    T,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A,
    S,
> super::RandomInit for DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    /// Weights drawn by the activation's [`Init`] (He for ReLU, Xavier otherwise), zero biases.
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        Self::with_init(A::INIT, rng)
    }
}

impl<
    T,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A,
    S,
> Parameters<T> for DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    fn tensor(&self, k: usize) -> &[T] {
        match k {
            0 => self.weight_values(),
            1 => S::vector(&self.bias),
            _ => {
                panic!("a depthwise convolution has 2 tensors (weight, bias); asked for tensor {k}")
            }
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        match k {
            0 => S::matrix_mut(&mut self.weight)
                .as_flattened_mut()
                .as_flattened_mut()
                .as_flattened_mut(),
            1 => S::vector_mut(&mut self.bias),
            _ => {
                panic!("a depthwise convolution has 2 tensors (weight, bias); asked for tensor {k}")
            }
        }
    }

    fn zeros() -> Self {
        let () = Self::SHAPE; // checked here too, so that the error points at the caller
        Self::new(
            S::matrix_filled([[T::ZERO; K]; K]),
            S::vector_filled(T::ZERO),
        )
    }
}

#[cfg(feature = "alloc")]
impl<
    T,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A,
    S,
> super::Weights for DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        super::write_parameters::<T, _>(self, k, out);
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        super::read_parameters::<T, _>(tensor)
    }
}

/// A baked depthwise convolution's weight, bias and first problem, decoded from the file `F`
/// in one pass (see `dense.rs`).
struct Decoded<F, T, const OC: usize, const K: usize>(core::marker::PhantomData<fn() -> (F, T)>);

macro_rules! bake {
    ($t:ty, $tensor4:ident, $vector:ident) => {
        impl<F: SafetensorsFile, const OC: usize, const K: usize> Decoded<F, $t, OC, K> {
            #[allow(clippy::type_complexity)]
            const PARTS: (
                [[[[$t; K]; K]; 1]; OC],
                [$t; OC],
                Option<crate::format::Error>,
            ) = match decode::$tensor4(Source::Index(&F::INDEX), F::FIRST_MODULE, "weight") {
                Err(e) => ([[[[0.0; K]; K]; 1]; OC], [0.0; OC], Some(e)),
                Ok(weight) => {
                    match decode::$vector(Source::Index(&F::INDEX), F::FIRST_MODULE, "bias") {
                        Err(e) => (weight, [0.0; OC], Some(e)),
                        Ok(bias) => (weight, bias, None),
                    }
                }
            };
        }

        impl<
            F: SafetensorsFile,
            const C: usize,
            const OC: usize,
            const K: usize,
            const STRIDE: usize,
            const PAD: usize,
            const H: usize,
            const W: usize,
            const OH: usize,
            const OW: usize,
            A: Activation,
        > Bake<F> for DepthwiseConv2d<$t, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, Inline>
        {
            const BAKED: Self = Self::new(
                Decoded::<F, $t, OC, K>::PARTS.0,
                Decoded::<F, $t, OC, K>::PARTS.1,
            );
            const ERROR: Option<crate::format::Error> = Decoded::<F, $t, OC, K>::PARTS.2;
        }
    };
}
bake!(f32, f32_tensor4_from, f32_vector_from);
bake!(f64, f64_tensor4_from, f64_vector_from);

#[cfg(feature = "alloc")]
pub use train::DepthwiseConv2dWorkspace;

#[cfg(feature = "alloc")]
mod train {
    use alloc::boxed::Box;

    use num_traits::Float;

    use super::DepthwiseConv2d;
    use crate::format::Element;
    use crate::kernels;
    use crate::nn::train::zeroed_samples;
    use crate::nn::{Activation, Sample, Store, Train};

    /// The buffers of one [`DepthwiseConv2d`] layer for a batch of `B`.
    #[derive(Debug, Clone)]
    pub struct DepthwiseConv2dWorkspace<Out, const B: usize> {
        /// `A = f(Z)` of each sample, written by the forward pass.
        pub output: Box<[Out; B]>,
        /// `dZ = dA ⊙ f'(Z)` of each sample, written by the backward pass unless the layer
        /// has no activation (`Identity`: `dZ` is `dA`, read where it lies).
        pub d_pre_activation: Box<[Out; B]>,
    }

    impl<
        T,
        const B: usize,
        const C: usize,
        const OC: usize,
        const K: usize,
        const STRIDE: usize,
        const PAD: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
        A,
        S,
    > Train<T, B> for DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
    where
        T: Element + Sample + Float,
        A: Activation,
        S: Store,
    {
        type Workspace = DepthwiseConv2dWorkspace<[[[T; OW]; OH]; OC], B>;

        fn workspace(&self) -> Self::Workspace {
            DepthwiseConv2dWorkspace {
                output: zeroed_samples(),
                d_pre_activation: zeroed_samples(),
            }
        }

        fn forward_train<'w>(
            &self,
            x: &[[[[T; W]; H]; C]; B],
            ws: &'w mut Self::Workspace,
        ) -> &'w [[[[T; OW]; OH]; OC]; B] {
            self.forward_batch(x, &mut *ws.output, true);
            &ws.output
        }

        fn output(ws: &Self::Workspace) -> &[[[[T; OW]; OH]; OC]; B] {
            &ws.output
        }

        fn backward(
            &self,
            x: &[[[[T; W]; H]; C]; B],
            ws: &mut Self::Workspace,
            d_output: &[[[[T; OW]; OH]; OC]; B],
            d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
            gradients: &mut Self,
        ) {
            let positions = (OH * OW).max(1);
            let d_bias = S::vector_mut(&mut gradients.bias);
            d_bias.fill(T::zero());
            // dZ = dA ⊙ f'(Z), with f'(Z) computed from A         OC x OH·OW per sample
            // db[o] += Σ over positions of dZ[o]                  OC
            // Without an activation (before batch normalization) dZ is dA, read where it
            // lies: no batch-sized copy through the caches.
            let identity = crate::nn::activation::is_identity::<A>();
            let dz_all = ws
                .d_pre_activation
                .as_flattened_mut()
                .as_flattened_mut()
                .as_flattened_mut();
            let a_all = ws.output.as_flattened().as_flattened().as_flattened();
            let da_all = d_output.as_flattened().as_flattened().as_flattened();
            kernels::with_wide_vectors(
                #[inline(always)]
                || {
                    // The planes are [sample][filter]: plane `i` is filter `i % OC`'s.
                    if identity {
                        for (i, da) in da_all.chunks_exact(positions).enumerate() {
                            d_bias[i % OC] += da.iter().fold(T::zero(), |s, &d| s + d);
                        }
                        return;
                    }
                    let planes = dz_all
                        .chunks_exact_mut(positions)
                        .zip(a_all.chunks_exact(positions))
                        .zip(da_all.chunks_exact(positions));
                    for (i, ((dz, a), da)) in planes.enumerate() {
                        let mut sum = T::zero();
                        for ((dz, &a), &da) in dz.iter_mut().zip(a).zip(da) {
                            *dz = da * A::derivative_from_output(a);
                            sum += *dz;
                        }
                        d_bias[i % OC] += sum;
                    }
                },
            );
            let dz = if identity {
                da_all
            } else {
                ws.d_pre_activation
                    .as_flattened()
                    .as_flattened()
                    .as_flattened()
            };
            // dW[o][kh][kw] = Σ_batch Σ_(i,j) dZ[o][i][j] · X[c][i·S + kh - P][j·S + kw - P]
            kernels::depthwise_conv2d_weight_gradient(
                &Self::SIZES,
                B,
                x.as_flattened().as_flattened().as_flattened(),
                dz,
                S::matrix_mut(&mut gradients.weight)
                    .as_flattened_mut()
                    .as_flattened_mut()
                    .as_flattened_mut(),
            );
            // dX: each dZ[o][i][j] · W[o][kh][kw] added where the forward pass read X
            if let Some(dx) = d_input {
                kernels::depthwise_conv2d_input_gradient(
                    &Self::SIZES,
                    B,
                    self.weight_values(),
                    dz,
                    dx.as_flattened_mut().as_flattened_mut().as_flattened_mut(),
                );
            }
        }
    }
}
