//! The 2-D convolution `A = f(conv(X, W) + b)`: its one definition, forward and backward side by
//! side, for every storage.
//!
//! Derivation: `docs/backprop.md`, section "Convolution". For one sample with `C` input channels
//! of `H x W`, `OC` filters of `C x K x K`, stride `S` and zero padding `P`, the output has `OC`
//! channels of `OH x OW`, `OH = (H + 2P - K) / S + 1`. (A kernel `K` high and `KW` wide is the
//! same with `K·KW` in place of `K·K` and `KW` in the widths.) The convolution is a matrix
//! product on unrolled patches ("im2col"):
//!
//! ```text
//! forward                                             backward
//! X̂ = im2col(X)        (C·K·K) x (OH·OW)              dZ = dA ⊙ f'(Z)             OC x (OH·OW)
//! Z = W·X̂ + b          (OC x C·K·K)(C·K·K x OH·OW)    dW = Σ_batch dZ·X̂ᵀ          OC x (C·K·K)
//! A = f(Z)             OC x (OH·OW) = OC x OH x OW    db = Σ_batch Σ_positions dZ  OC
//!                                                     dX = col2im(Wᵀ·dZ)          C x H x W
//! ```
//!
//! Row `(c, kh, kw)`, column `(oh, ow)` of `X̂` is `X[c][oh·S + kh - P][ow·S + kw - P]`, zero where
//! that falls in the padding. The weight, stored `[OC][C][K][K]` as PyTorch stores it, is `W` with
//! its rows flattened: no copy. `col2im` adds each entry of `Wᵀ·dZ` back to the input position it
//! was copied from.
//!
//! With stride 1 and a square kernel the forward product is computed without unrolling the patches
//! (`kernels::conv2d_stride1`, the whole batch in one call), which is faster and needs no
//! workspace, so a baked net's prediction needs none for it. The kernel puts in its vector lanes
//! whichever fills them better: output positions (each filter step a broadcast weight times a
//! shifted input row, LeNet's first layer) or filters (each step a vector of the transposed
//! weights times a broadcast input, for many filters on narrow images: LeNet's second layer).
//! With the filters in the lanes and a kernel of 3 to 5, it computes the sums by Winograd's
//! minimal filtering along the rows (`6/m` multiplications per output and kernel row instead
//! of `K`; `docs/backprop.md`, "The forward pass by Winograd along the rows"). Training and
//! prediction run the same kernel where the stack buffer holds its scratch, so their outputs
//! agree bit for bit there; where it does not, a training pass, `forward_with_scratch` and an
//! arena take a faster kernel on a scratch of their own (`kernels::plan::scratch_kernel`),
//! whose sums round differently from `forward`'s.
//! Other strides, and kernels that are not square, read their windows in place with the filters
//! in the lanes where the plan takes them (`kernels::conv2d_windows_in_place`: `f32` on x86-64,
//! enough filters and steps; the same bits as the products below), and otherwise unroll
//! patches (when not training, in pieces that fit a stack buffer: blocks of output positions,
//! groups of filters, chunks of large patches' rows; each piece a product on the SIMD
//! kernels). For `dW`, the
//! backward pass of a stride-1 convolution pads the batch's inputs once into the workspace and
//! sums over the whole batch in one call (`kernels::conv2d_weight_gradient_stride1`, no
//! patches); other strides unroll the patches of one sample at a time. For `dX` of a stride-1
//! convolution with a kernel of 3 to 5, Winograd's minimal filtering computes the same sums as
//! `col2im(Wᵀ·dZ)` with 2.8-4 times fewer multiplications (`kernels::conv2d_input_gradient_stride1`:
//! where the padding keeps the size, as the forward pass of the transposed convolution;
//! derivation in `docs/backprop.md`, "dX by Winograd's minimal filtering").

use core::mem::MaybeUninit;

use num_traits::Float;

#[cfg(feature = "rand")]
use super::Init;
use super::shape::{Window, check_nonzero, check_output_size};
use super::{
    Activation, Bake, Heap, Identity, Inline, Layer, Parameters, SafetensorsFile, Sample, Store,
};
use crate::format::decode::{self, Source};
use crate::format::{Element, NetSpec, TensorSpec};
use crate::kernels::{self, Epilogue};

mod patches;
use patches::SCRATCH;

/// The output size of a convolution along one dimension, PyTorch's formula
/// `(input + 2·padding - kernel) / stride + 1`, with a kernel larger than the padded input or a
/// stride of 0 made errors.
///
/// [`net!`](crate::net) computes a convolution's output height and width with it, so they are
/// never written by hand; called in a type (a `const` context), a mistake is a build error that
/// names the sizes.
///
/// # Panics
///
/// (At compile time, as an error, when used in a type.) When the kernel is larger than the
/// padded input, or when `stride` is 0. Rows (columns) left over at the end, in no window, are
/// dropped, as PyTorch and TensorFlow's "VALID" do (ResNet's 1 x 1 stride-2 shortcut on an even
/// size drops the last row): their gradient is 0.
///
/// ```
/// use constmat::nn::conv_output_size;
/// assert_eq!(conv_output_size(28, 5, 1, 2), 28); // LeNet's first layer: "same" padding
/// assert_eq!(conv_output_size(14, 5, 1, 0), 10);
/// assert_eq!(conv_output_size(8, 3, 2, 1), 4); // the bottom padding row is in no window
/// assert_eq!(conv_output_size(8, 1, 2, 0), 4); // 1 x 1, stride 2: the last row is in none
/// let err = std::panic::catch_unwind(|| conv_output_size(3, 5, 1, 0)).unwrap_err();
/// assert_eq!(
///     err.downcast_ref::<String>().unwrap(),
///     "Conv2d: the kernel (5) is larger than the padded input (3 + 2 x 0 = 3)"
/// );
/// ```
#[must_use]
#[track_caller]
pub const fn conv_output_size(input: usize, kernel: usize, stride: usize, padding: usize) -> usize {
    super::shape::output_size(
        "Conv2d",
        "input",
        Window::Kernel,
        (input, kernel, stride, padding),
    )
}

/// A 2-D convolution with `C` input and `OC` output channels, a kernel `K` high and `KW` wide
/// (`K x K` unless said otherwise), stride `STRIDE` and zero padding `PAD`, on `H x W` images
/// giving `OH x OW` ones, then the activation `A`; its parameters kept in the storage `S`
/// ([`Heap`] unless said otherwise). PyTorch's `nn.Conv2d(C, OC, K, stride=STRIDE,
/// padding=PAD)` (`nn.Conv2d(C, OC, (K, KW), ..)`), with the activation fused.
///
/// An image is `[[[T; W]; H]; C]`: channels, then rows (PyTorch's CHW). The weight is stored
/// `[OC][C][K][KW]`, PyTorch's layout, so weights move between the two as they are.
///
/// A square kernel with stride 1 runs on direct kernels that need no unrolled patches; any
/// other stride, or a kernel whose height and width differ (DS-CNN's 10 x 4 first layer),
/// reads its windows in place where the kernel plan takes it, and otherwise multiplies
/// unrolled patches (below). In [`net!`](crate::net), `Conv2d<C, OC, (KH, KW), S, P>`.
///
/// The output size is in the type (`OH`, `OW`): stable Rust cannot compute it from `H`, `K`,
/// `STRIDE` and `PAD` in a type. [`net!`](crate::net) computes it for you (with
/// [`conv_output_size`]); written by hand, a wrong size is reported by `cargo build` (the check
/// runs when the layer's code is generated) with both sizes.
///
/// ```
/// use constmat::nn::{Conv2d, Identity, Inline, Layer};
///
/// // One 3x3 filter that sums its window, on a 4x4 image, stride 1, padding 1: 4x4 out.
/// static SUM: Conv2d<f32, 1, 1, 3, 1, 1, 4, 4, 4, 4, Identity, Inline> =
///     Conv2d::new([[[[1.0; 3]; 3]; 1]; 1], [0.0]);
/// let image = [[[1.0; 4]; 4]; 1];
/// let mut out = [[[0.0; 4]; 4]; 1];
/// SUM.forward_one(&image, &mut out);
/// assert_eq!(out[0][0], [4.0, 6.0, 6.0, 4.0]); // corners see 4 pixels, edges 6, inside 9
/// assert_eq!(out[0][1], [6.0, 9.0, 9.0, 6.0]);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[repr(C, align(64))]
pub struct Conv2d<
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
    const KW: usize = K,
> {
    /// `[OC][C][K][KW]`: filter `o` holds a `K x KW` kernel per input channel.
    pub weight: S::Matrix<[[T; KW]; K], OC, C>,
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
    const KW: usize,
> Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
{
    /// The shape rule, evaluated when the layer's code is generated: no channel count is 0,
    /// and `OH` and `OW` are the output sizes of `H` and `W`.
    const SHAPE: () = {
        check_nonzero("Conv2d", "input channels", C);
        check_nonzero("Conv2d", "output channels", OC);
        check_output_size("Conv2d", "height", Window::Kernel, (H, K, STRIDE, PAD), OH);
        check_output_size("Conv2d", "width", Window::Kernel, (W, KW, STRIDE, PAD), OW);
    };

    /// A layer with the given parameters; a `const fn`, so an [`Inline`] layer can initialize
    /// a `static`.
    #[must_use]
    pub const fn new(weight: S::Matrix<[[T; KW]; K], OC, C>, bias: S::Vector<T, OC>) -> Self {
        // The shape rule, checked where the layer is made (so the error's last note points at
        // the caller), and again in the forward pass for layers built field by field.
        let () = Self::SHAPE;
        Self {
            weight,
            bias,
            activation: A::VALUE,
        }
    }

    /// A layer with weights drawn by `init` (fan-in `C·K·KW`, fan-out `OC·K·KW`, as PyTorch
    /// counts them) and zero biases.
    #[cfg(feature = "rand")]
    #[must_use]
    pub fn with_init<R: rand::Rng + ?Sized>(init: Init, rng: &mut R) -> Self
    where
        T: Float,
    {
        let () = Self::SHAPE; // checked here too, so that the error points at the caller
        let mut weight = S::matrix_filled([[T::ZERO; KW]; K]);
        let flat = S::matrix_mut(&mut weight)
            .as_flattened_mut()
            .as_flattened_mut()
            .as_flattened_mut();
        init.fill(flat, C * K * KW, OC * K * KW, rng);
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
    const KW: usize,
> Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    /// The weight as the `OC x C·K·K` matrix of the product (row-major, no copy).
    fn weight_matrix(&self) -> &[T] {
        S::matrix(&self.weight)
            .as_flattened()
            .as_flattened()
            .as_flattened()
    }

    /// Whether the layer takes the path of `patches.rs` (a stride other than 1, or a kernel
    /// whose height and width differ): its windows read in place where the plan takes them,
    /// else unrolled patches multiplied; rather than the direct kernels of a stride-1
    /// convolution with a square kernel.
    const UNROLLS: bool = STRIDE != 1 || K != KW;

    /// Whether the layer is pointwise: a 1 x 1 kernel with stride 1 and no padding, whose
    /// unrolled patches are the image itself (so the input gradient needs no `col2im`).
    #[cfg(feature = "alloc")]
    const POINTWISE: bool = K == 1 && KW == 1 && STRIDE == 1 && PAD == 0;

    /// The sizes for the direct kernel of a stride-1 convolution with a square kernel.
    const DIRECT: kernels::Conv = kernels::Conv {
        channels: C,
        filters: OC,
        kernel: K,
        padding: PAD,
        height: H,
        width: W,
    };

    /// The sizes of the same convolution on the padded image, without padding: the weight
    /// gradient's kernel reads the image padded by the backward pass.
    #[cfg(feature = "alloc")]
    const PADDED: kernels::Conv = kernels::Conv {
        channels: C,
        filters: OC,
        kernel: K,
        padding: 0,
        height: H + 2 * PAD,
        width: W + 2 * PAD,
    };

    /// The forward pass of a batch with stride 1 (the common case): the direct kernel, which
    /// needs no patches, on every sample at once; ReLU as the kernel stores its outputs, any
    /// other activation in place after. `scratch` is a workspace's (training), which lets a
    /// large convolution take Winograd's method (`kernels::conv2d_stride1_with_scratch`), or
    /// empty (a prediction).
    fn forward_stride1(
        &self,
        x: &[[[[T; W]; H]; C]],
        y: &mut [[[[T; OW]; OH]; OC]],
        scratch: &mut [T],
        purpose: kernels::ScratchFor,
    ) {
        let () = Self::SHAPE;
        let batch = x.len().min(y.len());
        let (x, y) = (&x[..batch], &mut y[..batch]);
        let x = x.as_flattened().as_flattened().as_flattened();
        let z = y.as_flattened_mut().as_flattened_mut().as_flattened_mut();
        let (weight, bias) = (self.weight_matrix(), S::vector(&self.bias));
        let epilogue = Self::epilogue();
        kernels::conv2d_stride1_with_scratch(
            &Self::DIRECT,
            batch,
            x,
            weight,
            bias,
            z,
            epilogue,
            scratch,
            purpose,
        );
        Self::activate_after_kernel(z);
    }

    /// [`Layer::forward_in_arena`] of a layer whose prediction takes scratch: the arena's
    /// bytes between the input and the output are that scratch. Never inlined, as
    /// `arena::forward_one_at_ends`: the kernel's frame is not alive beside the next layer's.
    #[inline(never)]
    fn forward_with_arena_scratch(&self, arena: &mut [u8], input: super::Side) {
        let (x, y, middle) = super::arena::ends_and_middle::<Self>(arena, input);
        let bytes = core::mem::size_of::<T>() * Self::PREDICT_SCRATCH;
        let scratch: &mut [T] = bytemuck::cast_slice_mut(&mut middle[..bytes]);
        self.forward_with_prediction_scratch(
            core::slice::from_ref(x),
            core::slice::from_mut(y),
            scratch,
        );
    }

    /// A prediction of the images `x` with `scratch` of [`Layer::PREDICT_SCRATCH`] elements
    /// (more than 0).
    fn forward_with_prediction_scratch(
        &self,
        x: &[[[[T; W]; H]; C]],
        y: &mut [[[[T; OW]; OH]; OC]],
        scratch: &mut [T],
    ) {
        if Self::UNROLLS {
            self.forward_unrolling_layer(x, y, scratch);
        } else {
            self.forward_stride1(x, y, scratch, kernels::ScratchFor::Prediction);
        }
    }

    /// What the kernel applies as it stores each output `conv(X, W) + b`: ReLU, or nothing
    /// (and [`Self::activate_after_kernel`] applies the activation).
    fn epilogue() -> Epilogue {
        if super::activation::is_relu::<A>() {
            Epilogue::Relu
        } else {
            Epilogue::Identity
        }
    }

    /// `A = f(Z)` in place, after a kernel whose epilogue was [`Self::epilogue`]: nothing left
    /// to do for ReLU.
    fn activate_after_kernel(z: &mut [T]) {
        if Self::epilogue() == Epilogue::Identity {
            kernels::with_wide_vectors(|| {
                for a in z {
                    *a = A::apply(*a);
                }
            });
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
    const KW: usize,
> Layer for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    type In = [[[T; W]; H]; C];
    type Out = [[[T; OW]; OH]; OC];

    /// `Conv2d(C, OC, K)`, then the activation's module unless it is [`Identity`]: tensors
    /// `0.weight` `[OC, C, K, KW]` and `0.bias` `[OC]`.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &[
            TensorSpec {
                module: 0,
                field: "weight",
                dtype: T::DTYPE,
                shape: &[OC, C, K, KW],
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

    type WithStore<S2: Store> = Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S2, KW>;

    /// Stride 1: the stack buffer of the SIMD kernels (x86-64); other strides: the buffer the
    /// patches are unrolled into, and the packed products' buffer where its products take it
    /// (x86-64, see `Conv2d::product_stack_bytes` in `conv/patches.rs`).
    const WORKING_BYTES: usize = if !Self::UNROLLS {
        core::mem::size_of::<T>()
            * kernels::conv_stack_scratch(&Self::DIRECT, core::mem::size_of::<T>())
    } else {
        core::mem::size_of::<T>() * Self::STACK_SCRATCH + Self::product_stack_bytes()
    };

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        if !Self::UNROLLS {
            // The direct kernel needs no patches: no 8 KiB on the stack of a baked net.
            self.forward_stride1(x, y, &mut [], kernels::ScratchFor::Prediction);
            return;
        }
        // The stack buffer the layer's kernel reads, not more: each element is zeroed first.
        // Every size below `SCRATCH` is a multiple of 1,024 that an arm below names.
        const {
            assert!(
                Self::STACK_SCRATCH == SCRATCH
                    || (Self::STACK_SCRATCH <= 15 * 1024
                        && Self::STACK_SCRATCH.is_multiple_of(1024))
            )
        };
        macro_rules! in_kib {
            ($($k:literal)*) => {
                match Self::STACK_SCRATCH {
                    $(n if n == $k * 1024 => self.forward_on_stack::<B, { $k * 1024 }>(x, y),)*
                    _ => self.forward_on_stack::<B, SCRATCH>(x, y), // STACK_SCRATCH == SCRATCH
                }
            };
        }
        in_kib!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    }

    /// In `f32` on x86-64, the scratch of the kernel the plan takes where the stack buffer
    /// would hold too little of it: with stride 1, `kernels::forward_scratch_any_isa`
    /// (Winograd's method down the columns, or a direct kernel on a padded image); otherwise
    /// the windows read in place (`Self::WINDOWS_SCRATCH`) where that is more than the largest
    /// stack buffer (16,384 values, `SCRATCH`). Else 0.
    const PREDICT_SCRATCH: usize = if !Self::UNROLLS {
        kernels::forward_scratch_any_isa(
            &Self::DIRECT,
            core::mem::size_of::<T>(),
            kernels::ScratchFor::Prediction,
        )
    } else if Self::WINDOWS_SCRATCH > SCRATCH {
        Self::WINDOWS_SCRATCH
    } else {
        0
    };

    /// Its input and output, and beside them the [`Layer::PREDICT_SCRATCH`] values its
    /// kernel takes in a prediction: the arena holds them, so that [`Arena::run`](super::Arena::run)
    /// takes the kernel `forward_with_scratch` takes, with no buffer beyond the arena.
    const ARENA_BYTES: usize = super::arena::region_bytes::<Self::In>()
        + super::arena::region_bytes::<Self::Out>()
        + (core::mem::size_of::<T>() * Self::PREDICT_SCRATCH).next_multiple_of(64);

    fn forward_in_arena(&self, arena: &mut [u8], input: super::Side) {
        if Self::PREDICT_SCRATCH == 0 {
            super::arena::forward_one_at_ends(self, arena, input);
        } else {
            self.forward_with_arena_scratch(arena, input);
        }
    }

    fn forward_with_scratch<const B: usize, const LEN: usize>(
        &self,
        x: &[Self::In; B],
        y: &mut [Self::Out; B],
        scratch: &mut [f32; LEN],
    ) {
        const { crate::nn::check_predict_scratch(LEN, Self::PREDICT_SCRATCH) };
        if Self::PREDICT_SCRATCH == 0 {
            self.forward(x, y);
            return;
        }
        // PREDICT_SCRATCH > 0 only for `f32`: the scratch is the kernels' own type.
        let scratch = kernels::cast::same_type_slice_mut::<f32, T>(scratch).unwrap_or_default();
        self.forward_with_prediction_scratch(x, y, scratch);
    }

    /// Stride 1: the direct kernel writes every output, so `y` is not zeroed first.
    fn forward_uninit<'y, const B: usize>(
        &self,
        x: &[Self::In; B],
        y: &'y mut MaybeUninit<[Self::Out; B]>,
    ) -> &'y mut [Self::Out; B] {
        if Self::UNROLLS {
            let y = y.write([Self::Out::ZERO; B]);
            self.forward(x, y);
            return y;
        }
        let () = Self::SHAPE;
        let x = x.as_flattened().as_flattened().as_flattened();
        let (weight, bias) = (self.weight_matrix(), S::vector(&self.bias));
        let y = kernels::conv2d_stride1_images(&Self::DIRECT, x, weight, bias, y, Self::epilogue());
        Self::activate_after_kernel(y.as_flattened_mut().as_flattened_mut().as_flattened_mut());
        y
    }

    fn to_store<S2: Store>(&self) -> Self::WithStore<S2> {
        Conv2d::new(
            S2::matrix_copied(S::matrix(&self.weight)),
            S2::vector_copied(S::vector(&self.bias)),
        )
    }
}

#[cfg(feature = "alloc")]
pub use train::Conv2dWorkspace;

#[cfg(feature = "alloc")]
mod train;

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
    const KW: usize,
> super::RandomInit for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
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
    const KW: usize,
> Parameters<T> for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    fn tensor(&self, k: usize) -> &[T] {
        match k {
            0 => self.weight_matrix(),
            1 => S::vector(&self.bias),
            _ => panic!("a convolution has 2 tensors (weight, bias); asked for tensor {k}"),
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        match k {
            0 => S::matrix_mut(&mut self.weight)
                .as_flattened_mut()
                .as_flattened_mut()
                .as_flattened_mut(),
            1 => S::vector_mut(&mut self.bias),
            _ => panic!("a convolution has 2 tensors (weight, bias); asked for tensor {k}"),
        }
    }

    fn zeros() -> Self {
        let () = Self::SHAPE; // checked here too, so that the error points at the caller
        Self::new(
            S::matrix_filled([[T::ZERO; KW]; K]),
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
    const KW: usize,
> super::Weights for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
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

/// A baked convolution's weight, bias and first problem, decoded from the file `F` in one pass
/// (see `dense.rs`).
struct Decoded<F, T, const C: usize, const OC: usize, const K: usize, const KW: usize>(
    core::marker::PhantomData<fn() -> (F, T)>,
);

macro_rules! bake {
    ($t:ty, $tensor4:ident, $vector:ident) => {
        impl<F: SafetensorsFile, const C: usize, const OC: usize, const K: usize, const KW: usize>
            Decoded<F, $t, C, OC, K, KW>
        {
            #[allow(clippy::type_complexity)]
            const PARTS: (
                [[[[$t; KW]; K]; C]; OC],
                [$t; OC],
                Option<crate::format::Error>,
            ) = match decode::$tensor4(Source::Index(&F::INDEX), F::FIRST_MODULE, "weight") {
                Err(e) => ([[[[0.0; KW]; K]; C]; OC], [0.0; OC], Some(e)),
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
            const KW: usize,
        > Bake<F> for Conv2d<$t, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, Inline, KW>
        {
            const BAKED: Self = Self::new(
                Decoded::<F, $t, C, OC, K, KW>::PARTS.0,
                Decoded::<F, $t, C, OC, K, KW>::PARTS.1,
            );
            const ERROR: Option<crate::format::Error> = Decoded::<F, $t, C, OC, K, KW>::PARTS.2;
        }
    };
}
bake!(f32, f32_tensor4_from, f32_vector_from);
bake!(f64, f64_tensor4_from, f64_vector_from);
