//! Statically typed nets: one definition of each layer for training, for inference on the heap,
//! and for nets baked into a `static`, with hand-derived backpropagation.
//!
//! Every intermediate of a training step has its shape in its type, and every backward pass is
//! written out by hand next to its forward pass, with the derivation in `docs/backprop.md`.
//!
//! # One layer, two storages
//!
//! A layer's type names its shape, its activation and where its parameters live:
//! `Dense<T, I, O, A, S>`. The storage `S` is [`Heap`] unless said otherwise (weights in
//! [`Matrix`](crate::Matrix) values, for training and for nets loaded at run time) or
//! [`Inline`] (weights in arrays, for a net baked into a `static`, `no_std` without `alloc`).
//! The math is written once, for every storage:
//!
//! | trait | what it gives | storage | needs |
//! | --- | --- | --- | --- |
//! | [`Layer`] | [`forward`](Layer::forward) on caller-owned arrays, the net's [`SPEC`](Layer::SPEC) (tensor names, dtypes, shapes) | any | `core` |
//! | [`Predict`] | [`predict`](Predict::predict), [`predict_proba`](Predict::predict_proba) for classifiers | any | `core` |
//! | [`Parameters`] | the parameter tensors, for optimizers and files | any | `core` |
//! | [`Train`] | [`forward_train`](Train::forward_train) keeping what [`backward`](Train::backward) needs | any | `alloc` |
//! | [`Bake`] | the net read from a file at compile time | [`Inline`] | `core` |
//!
//! # Orientation: one sample per row
//!
//! A batch of `B` samples with `N` features is `[[T; N]; B]` (a `Matrix<T, B, N>` derefs to
//! it): sample `i` is row `i`. This is how data sets are stored (an MNIST image is 784
//! contiguous bytes, so building a batch is copying rows), and it keeps weights in PyTorch's
//! `out x in` orientation, so trained weights move between the two without transposing:
//!
//! | quantity | type | formula |
//! | --- | --- | --- |
//! | input `X` | `[[T; I]; B]` | |
//! | weight `W` | `O x I` | |
//! | bias `b` | `O` | |
//! | output `A` | `[[T; O]; B]` | `A = f(X·Wᵀ + b)` |
//! | `dZ` | `B x O` | `dZ = dA ⊙ f'(Z)`, with `f'(Z)` computed from `A` |
//! | `dW` | `O x I` | `dW = dZᵀ·X` |
//! | `db` | `O` | `db = Σ_rows dZ` |
//! | `dX` | `B x I` | `dX = dZ·W` |
//!
//! # A network's type spells its architecture
//!
//! Layers compose with [`Chain`]; the [`net!`](crate::net) macro writes the nesting for you,
//! and the same type, mapped to [`Inline`] storage by
//! [`Baked`](crate::embed::Baked), is the baked net:
//!
//! ```
//! use constmat::nn::{Dense, Relu};
//!
//! type Mlp = constmat::net![
//!     Dense<f32, 784, 128, Relu>,
//!     Dense<f32, 128, 64, Relu>,
//!     Dense<f32, 64, 10>,
//! ];
//! static BAKED: constmat::embed::Baked<Mlp> =
//!     constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
//! ```
//!
//! A layer whose input width differs from the previous layer's output width does not compile;
//! the message names the layer and the two widths (`` `Dense<f32, 100, 10>` takes 100 inputs,
//! but the layer before it gives 128 ``).
//!
//! # A training step
//!
//! ```
//! use constmat::Matrix;
//! use constmat::nn::{Dense, Identity, RandomInit, Relu, SoftmaxCrossEntropy, Trainer, Sgd};
//! use rand::{SeedableRng, rngs::StdRng};
//!
//! type Net = constmat::net![Dense<f64, 2, 8, Relu>, Dense<f64, 8, 2, Identity>];
//! let mut rng = StdRng::seed_from_u64(1);
//! let mut net = Net::random(&mut rng);
//! let mut trainer = Trainer::<f64, Net, 4>::new(&net);
//! let mut optimizer = Sgd::new();
//! let x = Matrix::<f64, 4, 2>::from_rows([[0., 0.], [0., 1.], [1., 0.], [1., 1.]]);
//! let y = Matrix::<f64, 4, 2>::from_rows([[1., 0.], [0., 1.], [0., 1.], [1., 0.]]);
//! let mut step = || trainer.step(&mut net, &mut optimizer, 0.1, &SoftmaxCrossEntropy, &x, &y);
//! let first = step()?;
//! for _ in 0..500 {
//!     step()?;
//! }
//! let last = step()?;
//! assert!(last < first / 10.0, "XOR is learned: {first} -> {last}");
//! # Ok::<(), constmat::nn::StepError<f64>>(())
//! ```
//!
//! # Training a convolutional net
//!
//! The same [`Trainer`], with images: a sample is `[[[T; W]; H]; C]` (channels, rows, columns,
//! as in PyTorch), and a batch of them comes from [`zeroed_batch`], on the heap (a batch of 64
//! MNIST images is 200 KB). MNIST's [`Split::fill_batch`](crate::data::mnist::Split::fill_batch)
//! fills a batch of `[[[f32; 28]; 28]; 1]`; `examples/mnist_cnn` is a whole recipe (LeNet-5 to
//! 99.4%). Here, 6 x 6 images of a horizontal or a vertical bar:
//!
//! ```
//! use constmat::nn::{Momentum, RandomInit, Relu, SoftmaxCrossEntropy, Trainer, zeroed_batch};
//! use rand::{SeedableRng, rngs::StdRng};
//!
//! type Cnn = constmat::net![
//!     Input<f64, 1, 6, 6>,
//!     Conv2d<1, 2, 3, Relu>, // 2 x 4 x 4
//!     MaxPool2d<2>,          // 2 x 2 x 2
//!     Flatten,               // 8
//!     Dense<8, 2>,
//! ];
//! let mut x = zeroed_batch::<[[[f64; 6]; 6]; 1], 4>();
//! let mut y = [[0.0; 2]; 4];
//! for (k, (image, target)) in x.iter_mut().zip(&mut y).enumerate() {
//!     let at = [1, 4][k % 2];
//!     for i in 0..6 {
//!         if k < 2 {
//!             image[0][at][i] = 1.0; // a horizontal bar: class 0
//!         } else {
//!             image[0][i][at] = 1.0; // a vertical bar: class 1
//!         }
//!     }
//!     target[k / 2] = 1.0;
//! }
//! let mut net = Cnn::random(&mut StdRng::seed_from_u64(1));
//! let mut trainer = Trainer::<f64, Cnn, 4>::new(&net);
//! let mut optimizer = Momentum::new(&net, 0.9);
//! let mut step = || trainer.step(&mut net, &mut optimizer, 0.05, &SoftmaxCrossEntropy, &x, &y);
//! let first = step()?;
//! for _ in 0..200 {
//!     step()?;
//! }
//! let last = step()?;
//! assert!(last < first / 10.0, "the bars are told apart: {first} -> {last}");
//! # Ok::<(), constmat::nn::StepError<f64>>(())
//! ```
//!
//! # Generic code over the sizes
//!
//! `net!` computes sizes from numbers written in the net; in code generic over a size (`H`,
//! `W`) there are no numbers to compute with, and stable Rust cannot compute `H - 2` in a type.
//! So a generic function names its layers' types in full, with the output sizes as parameters
//! of their own, and each layer checks them against its rule where the types become concrete
//! (a mistake fails `cargo build`, not `cargo check`: `docs/shape-errors.md`, "Sizes written by
//! hand"). The caller usually names only the result, and the compiler infers the rest:
//!
//! ```
//! use constmat::nn::{Chain, Conv2d, Layer, MaxPool2d, RandomInit, Relu};
//! use rand::{SeedableRng, rngs::StdRng};
//!
//! /// A 3 x 3 convolution with padding 1 (the size kept), then 2 x 2 pooling (halved), for
//! /// single-channel images of any even size.
//! type Block<const H: usize, const W: usize, const OH: usize, const OW: usize> = Chain<
//!     Conv2d<f32, 1, 4, 3, 1, 1, H, W, H, W, Relu>,
//!     MaxPool2d<f32, 4, 2, 2, H, W, OH, OW>,
//! >;
//!
//! fn block<const H: usize, const W: usize, const OH: usize, const OW: usize>(
//!     rng: &mut StdRng,
//! ) -> Block<H, W, OH, OW> {
//!     Chain::new(Conv2d::random(rng), MaxPool2d::new())
//! }
//!
//! let mut rng = StdRng::seed_from_u64(1);
//! let small: Block<8, 8, 4, 4> = block(&mut rng);
//! let wide: Block<6, 10, 3, 5> = block(&mut rng);
//! let mut out = [[[0.0; 5]; 3]; 4];
//! wide.forward_one(&[[[0.5; 10]; 6]], &mut out);
//! # let _ = small;
//! ```
//!
//! A function that trains any net names what it needs of it: a net that trains in batches of
//! `B` ([`Train`]) with `C` logits, an optimizer for that net, a loss for those batches.
//!
//! ```
//! use constmat::nn::{Dense, Layer, Loss, Optimizer, StepError, Train, Trainer};
//!
//! /// `steps` steps on one batch; the last loss.
//! fn train<N, O, L, const B: usize, const C: usize>(
//!     net: &mut N,
//!     optimizer: &mut O,
//!     loss: &L,
//!     (x, y): (&[N::In; B], &[[f32; C]; B]),
//!     steps: usize,
//! ) -> Result<f32, StepError<f32>>
//! where
//!     N: Train<f32, B> + Layer<Out = [f32; C]>,
//!     O: Optimizer<f32, N>,
//!     L: Loss<f32, B, C>,
//! {
//!     let mut trainer = Trainer::<f32, N, B>::new(net);
//!     let mut last = f32::NAN;
//!     for _ in 0..steps {
//!         last = trainer.step(net, optimizer, 0.1, loss, x, y)?;
//!     }
//!     Ok(last)
//! }
//!
//! type Net = constmat::net![Dense<f32, 2, 2>];
//! let mut net = <Net as constmat::nn::Parameters<f32>>::zeros();
//! let mut sgd = constmat::nn::Sgd::new();
//! let (x, y) = ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]);
//! let loss = train(&mut net, &mut sgd, &constmat::nn::SoftmaxCrossEntropy, (&x, &y), 50)?;
//! assert!(loss < 0.3, "{loss}");
//! # Ok::<(), StepError<f32>>(())
//! ```

/// The traits of a layer without parameters (pooling, `Flatten`, softmax, dropout): no tensor to
/// read, write, bake or initialize; `new()` builds it. `$what` names the layer in the panic of
/// a tensor asked for by index (there is none).
macro_rules! no_parameters {
    ($what:literal, [$($generics:tt)*], $layer:ty) => {
        impl<$($generics)*, E> $crate::nn::Parameters<E> for $layer {
            fn tensor(&self, k: usize) -> &[E] {
                panic!(concat!($what, " has no tensors; asked for tensor {}"), k)
            }

            fn tensor_mut(&mut self, k: usize) -> &mut [E] {
                panic!(concat!($what, " has no tensors; asked for tensor {}"), k)
            }

            fn zeros() -> Self {
                Self::new()
            }
        }

        #[cfg(feature = "alloc")]
        impl<$($generics)*> $crate::nn::Weights for $layer {
            fn write_tensor(&self, k: usize, _out: &mut alloc::vec::Vec<u8>) {
                panic!(concat!($what, " has no tensors; asked for tensor {}"), k)
            }

            fn read_tensors<'a>(_tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
                Self::new()
            }
        }

        impl<F: $crate::nn::SafetensorsFile, $($generics)*> $crate::nn::Bake<F> for $layer {
            const BAKED: Self = Self::new();
            const ERROR: Option<$crate::format::Error> = None;
        }

        #[cfg(feature = "rand")]
        impl<$($generics)*> $crate::nn::RandomInit for $layer {
            fn random<R: ::rand::Rng + ?Sized>(_rng: &mut R) -> Self {
                Self::new()
            }
        }
    };
}

/// The `Train` items of a layer whose workspace is its outputs alone, written by `forward`
/// (pooling, `Flatten`, `Softmax`): the workspace type, its allocation, `forward_train` and
/// `output`. Used inside `impl Train<T, B> for ..`, with the batch's name.
#[cfg(feature = "alloc")]
macro_rules! outputs_as_workspace {
    ($b:ident) => {
        /// The outputs of the last forward pass.
        type Workspace = alloc::boxed::Box<[<Self as $crate::nn::Layer>::Out; $b]>;

        fn workspace(&self) -> Self::Workspace {
            $crate::nn::train::zeroed_samples()
        }

        fn forward_train<'w>(
            &self,
            x: &[<Self as $crate::nn::Layer>::In; $b],
            ws: &'w mut Self::Workspace,
        ) -> &'w [<Self as $crate::nn::Layer>::Out; $b] {
            $crate::nn::Layer::forward(self, x, ws);
            ws
        }

        fn output(ws: &Self::Workspace) -> &[<Self as $crate::nn::Layer>::Out; $b] {
            ws
        }
    };
}

mod activation;
mod arena;
mod avg_pool;
mod bake;
mod batch_norm;
mod chain;
mod conv;
mod cross_entropy;
mod dense;
mod depthwise;
mod dropout;
mod flatten;
mod global_pool;
mod init;
mod mse;
mod net;
mod optim;
mod pad;
mod pool;
mod predict;
mod qconv;
mod qdense;
mod qdepthwise;
mod qresidual;
mod qsoftmax;
#[cfg(feature = "alloc")]
mod quantize;
mod residual;
mod schedule;
mod shape;
mod softmax;
mod store;
#[cfg(feature = "alloc")]
mod train;
#[cfg(feature = "alloc")]
mod trainer;
mod values;

pub use crate::kernels::argmax;
pub use activation::{Activation, Identity, Relu, Relu6, Sigmoid, Tanh};
pub use arena::{Arena, Side, region_bytes as arena_region_bytes};
pub use avg_pool::{Averageable, AvgPool2d};
pub use bake::{Bake, PartName, SafetensorsFile, Skip, Within};
#[cfg(feature = "alloc")]
pub use batch_norm::BatchNormWorkspace;
#[doc(hidden)]
pub use batch_norm::Channels;
pub use batch_norm::{
    BATCH_NORM_EPSILON, BATCH_NORM_MOMENTUM, BatchNorm, BatchNorm1d, BatchNorm2d,
};
pub use chain::Chain;
#[cfg(feature = "alloc")]
pub use chain::ChainWorkspace;
#[cfg(feature = "alloc")]
pub use conv::Conv2dWorkspace;
pub use conv::{Conv2d, conv_output_size};
pub use cross_entropy::{SoftmaxCrossEntropy, softmax_in_place, softmax_rows_into};
pub use dense::Dense;
#[cfg(feature = "alloc")]
pub use dense::DenseWorkspace;
pub use depthwise::DepthwiseConv2d;
#[cfg(feature = "alloc")]
pub use depthwise::DepthwiseConv2dWorkspace;
pub use dropout::Dropout;
#[cfg(feature = "alloc")]
pub use dropout::DropoutWorkspace;
pub use flatten::Flatten;
pub use global_pool::GlobalAvgPool2d;
pub use init::Init;
#[cfg(feature = "rand")]
pub use init::RandomInit;
pub use mse::MeanSquaredError;
pub use optim::{Adam, Momentum, Optimizer, Sgd, flush_subnormal};
pub use pad::{QZeroPad2d, ZeroPad2d};
pub use pool::{MaxPool2d, pool_output_size};
pub use predict::{PREDICT_CHUNK, PREDICT_CHUNK_STACK, Predict};
pub use qconv::QConv2d;
pub use qdense::{QDense, QuantizedActivation};
pub use qdepthwise::QDepthwiseConv2d;
pub use qresidual::{QProjectedResidual, QResidual, QuantizedAdd};
pub use qsoftmax::{QSoftmax, SOFTMAX_OUTPUT};
#[cfg(feature = "alloc")]
pub use quantize::{Quantize, QuantizeError, QuantizeSample, Quantized, quantize};
pub use residual::{BranchPart, ProjectedResidual, Residual, ShortcutPart};
#[cfg(feature = "alloc")]
pub use residual::{ProjectedResidualWorkspace, ResidualWorkspace};
pub use schedule::Schedule;
#[doc(hidden)]
pub use shape::{
    __Checked, __Mistake, __SizeStep, __conv_output_size, __depthwise_filters, __flattened_inputs,
    __input_channels, __inputs, __nonzero, __output_size_unchecked, __pool_output_size,
    __residual_shapes, __size_after,
};
pub use softmax::Softmax;
pub use store::{Heap, Inline, Store};
#[cfg(feature = "alloc")]
pub use train::{Train, zeroed_batch};
#[doc(hidden)]
pub use values::Values;

#[cfg(feature = "alloc")]
pub use trainer::{Diverged, StepError, Trainer};

use core::fmt::Debug;
use core::mem::MaybeUninit;

use crate::format::{Message, NetSpec, TensorName, TensorSpec};

/// Nothing, or a compile error when a caller's scratch of `len` values is shorter than the
/// `needed` of [`Layer::PREDICT_SCRATCH`]: the check of [`Layer::forward_with_scratch`].
#[track_caller]
pub(crate) const fn check_predict_scratch(len: usize, needed: usize) {
    if len < needed {
        Message::new()
            .str("forward_with_scratch: the scratch holds ")
            .number(len)
            .str(" values; this net's `PREDICT_SCRATCH` is ")
            .number(needed)
            .panic()
    }
}

/// One sample flowing into or out of a layer: a number, or an array of samples (`[T; N]` for a
/// dense layer's input).
///
/// Plain data ([`bytemuck::Pod`]): an [`Arena`] keeps samples as bytes and reads them back.
///
/// ```
/// use constmat::nn::Sample;
/// assert_eq!(<[[f32; 2]; 3]>::ZERO, [[0.0; 2]; 3]);
/// ```
pub trait Sample: bytemuck::Pod + Debug + PartialEq + Send + Sync {
    /// The zero sample, the value buffers start with.
    const ZERO: Self;
}

impl Sample for f32 {
    const ZERO: Self = 0.0;
}

impl Sample for f64 {
    const ZERO: Self = 0.0;
}

impl<S: Sample, const N: usize> Sample for [S; N] {
    const ZERO: Self = [S::ZERO; N];
}

/// A layer, or a whole net: what it computes, and what parameters it has.
///
/// Implemented once per layer kind for every [`Store`], so a net trained on the heap and the
/// same net baked into a `static` run the same code. Samples go in and out as arrays, a batch
/// of `B` as `[Self::In; B]`; a [`Matrix`](crate::Matrix) derefs to one.
///
/// ```
/// use constmat::nn::{Chain, Dense, Identity, Inline, Layer, Relu};
///
/// // Hand-written parameters in a `static`; one sample in, one out.
/// static NET: Chain<Dense<f32, 2, 2, Relu, Inline>, Dense<f32, 2, 1, Identity, Inline>> =
///     Chain::new(
///         Dense::new([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]),
///         Dense::new([[1.0, -1.0]], [0.0]),
///     );
/// let mut out = [0.0];
/// NET.forward_one(&[3.0, -5.0], &mut out);
/// assert_eq!(out, [3.0]); // relu leaves 3 and 0; 3 - 0
///
/// // A batch of two samples.
/// let mut outs = [[0.0]; 2];
/// NET.forward(&[[3.0, -5.0], [1.0, 2.0]], &mut outs);
/// assert_eq!(outs, [[3.0], [-1.0]]);
/// ```
pub trait Layer {
    /// One sample in, e.g. `[T; I]`.
    type In: Sample;
    /// One sample out, e.g. `[T; O]`.
    type Out: Sample;

    /// The parameter tensors, named as PyTorch's `nn.Sequential` names them: what saving,
    /// loading and baking read and write.
    const SPEC: NetSpec;

    /// The same layer with its parameters in the storage `S`: `Dense<T, I, O, A, Heap>` becomes
    /// `Dense<T, I, O, A, S>`, and a chain maps each of its layers.
    /// [`Baked<N>`](crate::embed::Baked) is `N::WithStore<Inline>`.
    type WithStore<S: Store>: Layer<In = Self::In, Out = Self::Out>;

    /// The bytes of read-only memory the parameters of this layer (or net) take when baked:
    /// the size of its [`Inline`] form, what a `static` of it occupies (alignment padding
    /// included). See [`embed::check_memory_budget`](crate::embed::check_memory_budget).
    ///
    /// ```
    /// use constmat::embed::Baked;
    /// use constmat::nn::{Dense, Layer, QDense, Relu};
    ///
    /// type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];
    /// // Each layer's weights and biases in f32, each layer aligned to 64 bytes.
    /// assert_eq!(Net::PARAMETER_BYTES, 401_920 + 33_024 + 2_624);
    /// assert_eq!(Baked::<Net>::PARAMETER_BYTES, Net::PARAMETER_BYTES);
    /// // Its int8 form: per layer i8 weights, three i32 per output (bias, multiplier, exponent),
    /// // and the input's and output's quantizations (an f32 scale, an i8 zero point: 8 bytes).
    /// type Int8 = constmat::net![QDense<784, 128, Relu>, QDense<128, 64, Relu>, QDense<64, 10>];
    /// assert_eq!(
    ///     Int8::PARAMETER_BYTES,
    ///     (100_352 + 12 * 128 + 16) + (8_192 + 12 * 64 + 16) + (640 + 12 * 10 + 16)
    /// );
    /// ```
    const PARAMETER_BYTES: usize = core::mem::size_of::<Self::WithStore<Inline>>();

    /// The bytes of working memory (stack) one prediction takes beyond its input and output,
    /// for its buffers: the samples a chain keeps between its layers and the stack buffers of
    /// the layers' kernels (a convolution's, on x86-64; an int8 dense layer's `i32` dot
    /// products), all added (an optimized build may keep any of them alive at once). The
    /// kernels' own frames come on top: measured by painting the stack in optimized builds,
    /// 1-2 KiB for the MNIST MLP (f32 or int8); unoptimized builds take hundreds of KiB. See
    /// [`embed::check_memory_budget`](crate::embed::check_memory_budget).
    ///
    /// ```
    /// use constmat::nn::{Dense, Layer, Relu};
    ///
    /// type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];
    /// assert_eq!(Net::WORKING_BYTES, (128 + 64) * 4);
    /// ```
    const WORKING_BYTES: usize = 0;

    /// The bytes of stack a prediction with the memory plan ([`Arena::run`]) takes beside the
    /// arena: the buffers of this layer's kernels ([`Layer::WORKING_BYTES`] of a layer that is
    /// not made of others), and for a net the largest of its layers', since each layer runs in
    /// a call of its own there, one after another. The kernels' own frames come on top, as for
    /// `WORKING_BYTES`.
    ///
    /// ```
    /// use constmat::nn::{Layer, QDense, Relu};
    ///
    /// type Net = constmat::net![QDense<784, 128, Relu>, QDense<128, 64, Relu>, QDense<64, 10>];
    /// // Each layer's i32 dot products: the first layer's are the most.
    /// assert_eq!(Net::KERNEL_BYTES, 128 * 4);
    /// // `forward` keeps the samples between the layers and adds the three layers' buffers.
    /// assert_eq!(Net::WORKING_BYTES, 128 + 64 + (128 + 64 + 10) * 4);
    /// ```
    const KERNEL_BYTES: usize = Self::WORKING_BYTES;

    /// The bytes of [`Arena`] a prediction with [`Arena::run`] takes: the samples that are
    /// alive at once, at most, input and output included, each rounded up to a multiple of 64
    /// ([`arena_region_bytes`]). A layer's own is its input's and its output's, and the
    /// [`Layer::PREDICT_SCRATCH`] of a convolution that takes some; a chain's the largest of its
    /// layers'; a residual block's adds its input (kept for the shortcut) to its branch's.
    ///
    /// ```
    /// use constmat::nn::{Dense, Layer, Relu};
    ///
    /// type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];
    /// // The first layer's input (784 values) and output (128), rounded to 64 bytes each.
    /// assert_eq!(Net::ARENA_BYTES, 3_136 + 512);
    /// ```
    const ARENA_BYTES: usize =
        arena::region_bytes::<Self::In>() + arena::region_bytes::<Self::Out>();

    /// Whether [`Layer::forward_in_arena`] leaves the output at the other end of the arena from
    /// the input (`true`, a layer's own) or at the same end (a chain of two layers).
    const ARENA_FLIPS: bool = true;

    /// The memory plan's step ([`Arena`]): runs on the input at the `input` end of `arena`
    /// and writes the output at [`input.after(Self::ARENA_FLIPS)`](Side::after), using the
    /// rest of `arena` between them as it likes, the input's bytes included. `arena` is at
    /// least [`Layer::ARENA_BYTES`] long, a multiple of 64, aligned to 64; a sample at the
    /// start end begins at its first byte, one at the end at the last
    /// [`arena_region_bytes`] of its type.
    ///
    /// The default, for a layer that is not made of others, reads the input at one end and
    /// writes the output at the other with [`Layer::forward_one`], in a call that is not
    /// inlined (so that its buffers are not alive beside the next layer's: see
    /// [`Layer::KERNEL_BYTES`]). Call [`Arena::run`] rather than this.
    fn forward_in_arena(&self, arena: &mut [u8], input: Side) {
        arena::forward_one_at_ends(self, arena, input);
    }

    /// The outputs of a batch of `B` samples: `y[k]` for `x[k]`.
    ///
    /// A chain keeps the samples between its layers on the stack (`B` times each hidden
    /// layer's width), so keep `B` moderate here; [`Train::forward_train`] keeps them on the
    /// heap instead.
    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]);

    /// [`Layer::forward`] into `y`, which need not be initialized, returned initialized: what a
    /// [`Chain`] calls for the samples it keeps between its layers, so that they are not zeroed
    /// first (for LeNet-5, 34 KB per prediction, about 3% of its time). The default zeroes `y`,
    /// then calls `forward`; a layer whose kernels write every output (a stride-1 [`Conv2d`], a
    /// 2 x 2 [`MaxPool2d`] in `f32` where the CPU has AVX-512) writes into it directly, and a
    /// [`Chain`] passes it on to its last layer.
    ///
    /// An implementation gives the same values as `forward` (a chain's `forward` takes its
    /// first layer's outputs from this method) and returns `y` itself, written.
    ///
    /// ```
    /// use core::mem::MaybeUninit;
    /// use constmat::nn::{Dense, Identity, Inline, Layer};
    ///
    /// static LAYER: Dense<f32, 2, 1, Identity, Inline> = Dense::new([[1.0, -1.0]], [0.5]);
    /// let mut y = MaybeUninit::uninit();
    /// let y = LAYER.forward_uninit(&[[3.0, 1.0], [0.0, 2.0]], &mut y);
    /// assert_eq!(*y, [[2.5], [-1.5]]);
    /// ```
    #[inline]
    fn forward_uninit<'y, const B: usize>(
        &self,
        x: &[Self::In; B],
        y: &'y mut MaybeUninit<[Self::Out; B]>,
    ) -> &'y mut [Self::Out; B] {
        let y = y.write([Self::Out::ZERO; B]);
        self.forward(x, y);
        y
    }

    /// The output of one sample.
    #[inline]
    fn forward_one(&self, x: &Self::In, y: &mut Self::Out) {
        self.forward(core::array::from_ref(x), core::array::from_mut(y));
    }

    /// The `f32` values of scratch with which a prediction lets a convolution take a faster
    /// kernel than a prediction's stack buffers hold: for stride 1, Winograd's method down the
    /// columns (64 filters of 64 x 5 x 5 on 16 x 16 take 180,224 values), or a direct kernel on
    /// the image padded, or on the weights transposed, in the scratch; for stride 2 (or a
    /// kernel that is not square), its windows read in place, the weights transposed and the
    /// image padded in the scratch (64 filters of 32 x 3 x 3 on 16 x 16, padded by 1: 28,800
    /// values). [`Layer::forward_with_scratch`] takes it from the caller, [`Arena::run`] from
    /// the arena ([`Layer::ARENA_BYTES`] counts it); [`Layer::forward`] runs the stack's direct
    /// kernels, or unrolls the patches, there (1.1-1.8x slower for such a layer). 0 for every
    /// other layer, and everywhere off x86-64. A chain takes the largest of its layers': they
    /// use the scratch one after another. The same on every x86-64 machine: the most either
    /// instruction set's kernels take.
    ///
    /// ```
    /// use constmat::nn::{Conv2d, Dense, Layer};
    ///
    /// type Small = constmat::net![Dense<f32, 784, 10>];
    /// assert_eq!(Small::PREDICT_SCRATCH, 0);
    /// type Wide = constmat::net![Input<f32, 64, 16, 16>, Conv2d<64, 64, 5, 1, 2>];
    /// assert!(cfg!(not(target_arch = "x86_64")) || Wide::PREDICT_SCRATCH > 0);
    /// ```
    const PREDICT_SCRATCH: usize = 0;

    /// [`Layer::forward`] with a caller-provided buffer of at least
    /// [`Layer::PREDICT_SCRATCH`] values (shorter is a compile error, reported by `cargo build`,
    /// not `cargo check`), which the layers that need it use one after another. The outputs
    /// equal `forward`'s up to rounding (the kernels add in other orders), and [`Arena::run`]'s
    /// bit for bit; [`Train::forward_train`]'s too, but with AVX2, where a prediction keeps
    /// the stack plan's direct kernel on some shapes that training gives another kernel
    /// (faster there one image at a time, and without scratch), for 1 x 1 convolutions that a
    /// prediction computes with the filters in the lanes (many filters on narrow images:
    /// training multiplies a batch's matrices), and for depthwise convolutions of 3 x 3 and
    /// 5 x 5 over whole planes (training's SIMD kernel sums in another order).
    ///
    /// The scratch's contents do not matter, before or after; it is working memory the caller
    /// owns, which [`Layer::WORKING_BYTES`] does not count: on the heap for a large net
    /// (`Box<[f32; N]>` derefs to `[f32; N]`), or any `&mut [f32; N]` the program can lend.
    /// Generic code takes the length as a parameter (`const LEN: usize`), which a caller that
    /// knows the net names (`{ Net::PREDICT_SCRATCH }`). The default is [`Layer::forward`], and
    /// a chain whose `PREDICT_SCRATCH` is 0 calls its `forward`.
    ///
    /// ```
    /// use constmat::nn::{Conv2d, Layer, RandomInit};
    /// use rand::{SeedableRng, rngs::StdRng};
    ///
    /// type Net = constmat::net![Input<f32, 64, 16, 16>, Conv2d<64, 64, 5, 1, 2>];
    /// let net = Net::random(&mut StdRng::seed_from_u64(7));
    /// let image = Box::new([[[0.5_f32; 16]; 16]; 64]);
    /// let mut scratch = vec![0.0_f32; Net::PREDICT_SCRATCH].into_boxed_slice();
    /// let scratch: &mut [f32; Net::PREDICT_SCRATCH] = (&mut *scratch).try_into().unwrap();
    ///
    /// let mut fast = Box::new([[[[0.0; 16]; 16]; 64]; 1]);
    /// net.forward_with_scratch(core::array::from_ref(&*image), &mut fast, scratch);
    /// let mut plain = Box::new([[[[0.0; 16]; 16]; 64]; 1]);
    /// net.forward(core::array::from_ref(&*image), &mut plain);
    /// let (fast, plain) = (fast.as_flattened().as_flattened(), plain.as_flattened().as_flattened());
    /// for (a, b) in fast.as_flattened().iter().zip(plain.as_flattened()) {
    ///     assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()));
    /// }
    /// ```
    #[inline]
    fn forward_with_scratch<const B: usize, const LEN: usize>(
        &self,
        x: &[Self::In; B],
        y: &mut [Self::Out; B],
        scratch: &mut [f32; LEN],
    ) {
        const { check_predict_scratch(LEN, Self::PREDICT_SCRATCH) };
        let _ = scratch;
        self.forward(x, y);
    }

    /// A copy of this layer with its parameters in the storage `S`.
    ///
    /// ```
    /// use constmat::embed::Baked;
    /// use constmat::nn::{Dense, Heap, Inline, Layer, Parameters, Relu};
    ///
    /// type Net = constmat::net![Dense<f32, 3, 2, Relu>, Dense<f32, 2, 1>];
    /// let mut trained = Net::zeros();
    /// trained.first.bias[(0, 1)] = 0.5;
    /// let baked: Baked<Net> = trained.to_store::<Inline>(); // arrays, on the stack
    /// assert_eq!(baked.first.bias, [0.0, 0.5]);
    /// let back: Net = baked.to_store::<Heap>();
    /// assert_eq!(back, trained);
    /// ```
    fn to_store<S: Store>(&self) -> Self::WithStore<S>;
}

/// Something made of parameter tensors: a layer, a network, or a gradient or optimizer state of
/// the same shape.
///
/// Tensors are numbered `0..tensor_count()`, first layer first, weight before bias, in the
/// order of the net's [`Layer::SPEC`]; optimizers walk them in that order. Each has a name and
/// shape following PyTorch's `nn.Sequential`: the net `Dense<_, 784, 128, Relu>, Dense<_, 128,
/// 10>` is `Sequential(Linear(784, 128), ReLU(), Linear(128, 10))`, whose tensors are
/// `0.weight` `[128, 784]`, `0.bias` `[128]`, `2.weight` `[10, 128]`, `2.bias` `[10]` (the
/// activation module takes index 1).
///
/// ```
/// use constmat::nn::{Dense, Parameters, Relu};
///
/// type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];
/// let net = Net::zeros();
/// let names: Vec<String> = (0..net.tensor_count()).map(|k| net.tensor_info(k).name().to_string()).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// assert_eq!(net.tensor_info(2).shape(), &[10, 128]);
/// ```
pub trait Parameters<T>: Layer + Sized {
    /// Tensor `k`, flat and row-major. Panics when `k >= tensor_count()`.
    fn tensor(&self, k: usize) -> &[T];
    /// Tensor `k`, mutable. Panics when `k >= tensor_count()`.
    fn tensor_mut(&mut self, k: usize) -> &mut [T];
    /// The same structure with every parameter zero.
    fn zeros() -> Self;

    /// A zero value of the same structure: the shape of gradients and optimizer state.
    fn zeros_like(&self) -> Self {
        Self::zeros()
    }

    /// The number of tensors.
    fn tensor_count(&self) -> usize {
        Self::SPEC.tensor_count()
    }

    /// The name, dtype and shape of tensor `k`. Panics when `k >= tensor_count()`.
    fn tensor_info(&self, k: usize) -> TensorInfo {
        match Self::SPEC.tensor(k) {
            Some(tensor) => TensorInfo {
                module: tensor.module,
                field: tensor.field,
                spec: tensor.spec,
            },
            None => panic!(
                "the net has {} tensors; asked for tensor {k}",
                Self::SPEC.tensor_count()
            ),
        }
    }
}

/// A layer or net that a weights file holds: its tensors written and read as the file's
/// little-endian bytes, whatever their element types (an `f32` net's `F32` tensors; an int8
/// net's `I8` weights, `I32` biases and `F32` scales). What
/// [`io::safetensors`](crate::io::safetensors) saves and loads; implemented by every layer
/// kind, in the order of its [`SPEC`](Layer::SPEC), and by [`Chain`].
///
/// ```
/// use constmat::nn::{Dense, Layer, Parameters, Weights};
///
/// let mut layer = Dense::<f32, 2, 1>::zeros();
/// layer.bias[(0, 0)] = 1.5;
/// let mut bytes = Vec::new();
/// layer.write_tensor(1, &mut bytes); // tensor 1 of the SPEC: the bias
/// assert_eq!(bytes, 1.5_f32.to_le_bytes());
///
/// let weight = [0_u8; 8];
/// let back = Dense::<f32, 2, 1>::read_tensors(&mut |k| if k == 0 { &weight } else { &bytes });
/// assert_eq!(back, layer);
/// ```
#[cfg(feature = "alloc")]
pub trait Weights: Layer + Sized {
    /// Appends the little-endian bytes of tensor `k` (numbered as in [`Layer::SPEC`]) to
    /// `out`. Panics when the net has no tensor `k`.
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>);

    /// The layer whose tensor `k` has the little-endian bytes `tensor(k)`: exactly what the
    /// tensor's dtype and shape take, with values its spec allows, as
    /// [`format::validate`](crate::format::validate) checks a file before a loader calls this.
    ///
    /// # Panics
    ///
    /// When a tensor has fewer bytes than its shape takes.
    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self;
}

/// [`Weights::write_tensor`] for a layer of [`Parameters`] of one element type: what a float
/// layer of your own writes in its `Weights` implementation.
///
/// ```
/// use constmat::nn::{Dense, Parameters, read_parameters, write_parameters};
///
/// let mut layer = Dense::<f64, 2, 1>::zeros();
/// layer.weight[(0, 1)] = -3.0;
/// let tensors: Vec<Vec<u8>> = (0..2)
///     .map(|k| {
///         let mut bytes = Vec::new();
///         write_parameters::<f64, _>(&layer, k, &mut bytes);
///         bytes
///     })
///     .collect();
/// let back: Dense<f64, 2, 1> = read_parameters::<f64, _>(&mut |k| &tensors[k][..]);
/// assert_eq!(back, layer);
/// ```
#[cfg(feature = "alloc")]
pub fn write_parameters<T: crate::format::Element, P: Parameters<T>>(
    layer: &P,
    k: usize,
    out: &mut alloc::vec::Vec<u8>,
) {
    for &x in layer.tensor(k) {
        x.extend_le(out);
    }
}

/// [`Weights::read_tensors`] for a layer of [`Parameters`] of one element type (see
/// [`write_parameters`]).
///
/// # Panics
///
/// When a tensor has fewer bytes than its shape takes.
#[cfg(feature = "alloc")]
pub fn read_parameters<'a, T: crate::format::Element, P: Parameters<T>>(
    tensor: &mut dyn FnMut(usize) -> &'a [u8],
) -> P {
    let mut layer = P::zeros();
    for k in 0..P::SPEC.tensor_count() {
        let bytes = tensor(k);
        let values = layer.tensor_mut(k);
        assert!(
            bytes.len() >= size_of_val(values),
            "tensor {k} needs {} bytes, got {}",
            size_of_val(values),
            bytes.len()
        );
        for (value, bytes) in values.iter_mut().zip(bytes.chunks_exact(size_of::<T>())) {
            *value = T::from_le(bytes);
        }
    }
    layer
}

/// The name, dtype and shape of one parameter tensor (see [`Parameters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorInfo {
    /// The index of the module holding it in PyTorch's `nn.Sequential` numbering.
    pub module: usize,
    /// The rest of its name: its field, or inside a block the path to it
    /// (`branch.0.weight`).
    pub field: crate::format::FieldPath,
    /// Its dtype, shape and value rules (`spec.field` is the last part of `field`).
    pub spec: &'static TensorSpec,
}

impl TensorInfo {
    /// The tensor's name, `"{module}.{field}"`, e.g. `2.weight`.
    #[must_use]
    pub fn name(&self) -> TensorName {
        TensorName::of(self.module, self.field.as_str())
    }

    /// The part of the name after the module: `"weight"` or `"bias"`, or inside a block
    /// the path to it (`"branch.0.weight"`).
    ///
    /// ```
    /// use constmat::format::Dtype;
    /// use constmat::nn::{Dense, Parameters, Relu};
    ///
    /// let net = <constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2>]>::zeros();
    /// let last = net.tensor_info(3);
    /// assert_eq!((last.module, last.field(), last.dtype()), (2, "bias", Dtype::F32));
    /// assert_eq!((last.name().to_string(), last.shape()), ("2.bias".to_string(), &[2][..]));
    /// ```
    #[must_use]
    pub fn field(&self) -> &str {
        self.field.as_str()
    }

    /// The dtype the tensor has in a weights file (`F32` for an `f32` net).
    #[must_use]
    pub fn dtype(&self) -> crate::format::Dtype {
        self.spec.dtype
    }

    /// The shape, PyTorch's way: a weight is `[out, in]`, a bias `[out]`.
    #[must_use]
    pub fn shape(&self) -> &'static [usize] {
        self.spec.shape
    }

    /// The number of elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// Whether the tensor has no elements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A loss over a batch of `B` outputs of width `C`, with its gradient.
///
/// The loss is a **mean** (over the batch for [`SoftmaxCrossEntropy`], over all `B·C` elements
/// for [`MeanSquaredError`], as in PyTorch), so its gradient carries the matching factor
/// (`1/B` or `1/(B·C)`).
pub trait Loss<T, const B: usize, const C: usize> {
    /// The mean loss of `output` against `target`.
    fn loss(&self, output: &[[T; C]; B], target: &[[T; C]; B]) -> T;

    /// The mean loss, and `gradient = ∂L/∂output` (overwritten; no allocation).
    fn loss_and_gradient(
        &self,
        output: &[[T; C]; B],
        target: &[[T; C]; B],
        gradient: &mut [[T; C]; B],
    ) -> T;
}
