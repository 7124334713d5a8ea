//! The 2-D convolution `A = f(conv(X, W) + b)`: its one definition, forward and backward side by
//! side, for every storage.
//!
//! Derivation: `docs/backprop.md`, section "Convolution". For one sample with `C` input channels
//! of `H x W`, `OC` filters of `C x K x K`, stride `S` and zero padding `P`, the output has `OC`
//! channels of `OH x OW`, `OH = (H + 2P - K) / S + 1`. The convolution is a matrix product on
//! unrolled patches ("im2col"):
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
//! With stride 1 the forward product is computed without unrolling the patches
//! (`kernels::conv2d_stride1`, the whole batch in one call), which is faster and needs no
//! workspace, so a baked net's prediction needs none for it. The kernel puts in its vector lanes
//! whichever fills them better: output positions (each filter step a broadcast weight times a
//! shifted input row, LeNet's first layer) or filters (each step a vector of the transposed
//! weights times a broadcast input, for many filters on narrow images: LeNet's second layer).
//! With the filters in the lanes and a kernel of 3 to 5, it computes the sums by Winograd's
//! minimal filtering along the rows (`6/m` multiplications per output and kernel row instead
//! of `K`; `docs/backprop.md`, "The forward pass by Winograd along the rows"). Training and
//! prediction run the same kernel, so their outputs agree bit for bit.
//! Other strides unroll patches (when not training, in pieces that fit a stack buffer: blocks of
//! output positions, groups of filters, chunks of large patches' rows; each piece a product on
//! the SIMD kernels). For `dW`, the
//! backward pass of a stride-1 convolution pads the batch's inputs once into the workspace and
//! sums over the whole batch in one call (`kernels::conv2d_weight_gradient_stride1`, no
//! patches); other strides unroll the patches of one sample at a time. For `dX` of a stride-1
//! convolution with a kernel of 3 to 5, Winograd's minimal filtering computes the same sums as
//! `col2im(Wᵀ·dZ)` with 2.8-4 times fewer multiplications (`kernels::conv2d_input_gradient_stride1`;
//! derivation in `docs/backprop.md`, "dX by Winograd's minimal filtering").

use core::mem::MaybeUninit;

use num_traits::Float;

#[cfg(feature = "rand")]
use super::Init;
use super::shape::{Window, check_output_size};
use super::{
    Activation, Bake, Heap, Identity, Inline, Layer, Parameters, SafetensorsFile, Sample, Store,
};
use crate::format::decode::{self, Source};
use crate::format::{Element, NetSpec, TensorSpec};
use crate::kernels::{self, Epilogue, Product};

/// The output size of a convolution along one dimension: `(input + 2·padding - kernel) / stride
/// + 1`, PyTorch's formula, with its mistakes made errors.
///
/// [`net!`](crate::net) computes a convolution's output height and width with it, so they are
/// never written by hand; called in a type (a `const` context), a mistake is a build error that
/// names the sizes.
///
/// # Panics
///
/// (At compile time, as an error, when used in a type.) When the kernel is larger than the
/// padded input, when `stride` is 0, or when the last rows (columns) of the input are never
/// read: `input + 2·padding - kernel` is not a multiple of `stride`, and what is left over is more
/// than the padding (PyTorch would silently ignore those rows).
///
/// ```
/// use constmat::nn::conv_output_size;
/// assert_eq!(conv_output_size(28, 5, 1, 2), 28); // LeNet's first layer: "same" padding
/// assert_eq!(conv_output_size(14, 5, 1, 0), 10);
/// assert_eq!(conv_output_size(8, 3, 2, 1), 4); // the bottom padding row is never read: fine
/// let err = std::panic::catch_unwind(|| conv_output_size(3, 5, 1, 0)).unwrap_err();
/// assert_eq!(
///     err.downcast_ref::<String>().unwrap(),
///     "Conv2d: the kernel (5) is larger than the padded input (3 + 2 x 0 = 3)"
/// );
/// // Windows of 4 with stride 3 on 10 + 2 x 1 rows: the last two are never read, one of them
/// // input. The nearest sizes that fit are named.
/// let err = std::panic::catch_unwind(|| conv_output_size(10, 4, 3, 1)).unwrap_err();
/// assert_eq!(
///     err.downcast_ref::<String>().unwrap(),
///     "Conv2d: windows of 4 with stride 3 never read the last 1 of the input's 10: \
///      10 + 2 x 1 - 4 = 8 leaves 2 over for the stride 3, more than the padding 1 \
///      (an input of 9 or 11 fits)"
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

/// The elements of the stack buffer a convolution with a stride other than 1 unrolls patches into
/// in [`Layer::forward`]. Larger convolutions are done in blocks of output positions that fit.
/// 2,048 (8 KiB of `f32`), which a microcontroller can afford; on x86-64, 16,384 (64 KiB), where
/// the products of larger blocks run 2-3x faster (whole output rows, full packed panels: the
/// prediction of a net whose first layer is 32 filters of 3 x 7 x 7, stride 2, on 64 x 64, 500
/// µs with 2,048 against 174 on AVX-512) and the stack is a desktop's or a server's.
const SCRATCH: usize = if cfg!(target_arch = "x86_64") {
    16 * 1024
} else {
    2048
};

/// The fewest output positions per block worth a product of whole patches; with fewer, the
/// patches' rows are split too (see `Conv2d::split`).
const MIN_BLOCK: usize = 8;

/// The fewest filters per group worth a product of whole patches (see `Conv2d::split`).
const MIN_GROUP: usize = 16;

/// A 2-D convolution with `C` input and `OC` output channels, a `K x K` kernel, stride `STRIDE`
/// and zero padding `PAD`, on `H x W` images giving `OH x OW` ones, then the activation `A`; its
/// parameters kept in the storage `S` ([`Heap`] unless said otherwise). PyTorch's
/// `nn.Conv2d(C, OC, K, stride=STRIDE, padding=PAD)`, with the activation fused.
///
/// An image is `[[[T; W]; H]; C]`: channels, then rows (PyTorch's CHW). The weight is stored
/// `[OC][C][K][K]`, PyTorch's layout, so weights move between the two as they are.
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
> {
    /// `[OC][C][K][K]`: filter `o` holds a `K x K` kernel per input channel.
    pub weight: S::Matrix<[[T; K]; K], OC, C>,
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
> Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
{
    /// The shape rule, evaluated when the layer's code is generated: `OH` and `OW` are the
    /// output sizes of `H` and `W`.
    const SHAPE: () = {
        check_output_size("Conv2d", "height", Window::Kernel, (H, K, STRIDE, PAD), OH);
        check_output_size("Conv2d", "width", Window::Kernel, (W, K, STRIDE, PAD), OW);
    };

    /// A layer with the given parameters; a `const fn`, so an [`Inline`] layer can initialize
    /// a `static`.
    #[must_use]
    pub const fn new(weight: S::Matrix<[[T; K]; K], OC, C>, bias: S::Vector<T, OC>) -> Self {
        // The shape rule, checked where the layer is made (so the error's last note points at
        // the caller), and again in the forward pass for layers built field by field.
        let () = Self::SHAPE;
        Self {
            weight,
            bias,
            activation: A::VALUE,
        }
    }

    /// A layer with weights drawn by `init` (fan-in `C·K·K`, fan-out `OC·K·K`, as PyTorch
    /// counts them) and zero biases.
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
        init.fill(flat, C * K * K, OC * K * K, rng);
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
> Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
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

    /// The sizes for the direct kernel of a stride-1 convolution.
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
    /// other activation in place after.
    fn forward_stride1(&self, x: &[[[[T; W]; H]; C]], y: &mut [[[[T; OW]; OH]; OC]]) {
        let () = Self::SHAPE;
        let batch = x.len().min(y.len());
        let (x, y) = (&x[..batch], &mut y[..batch]);
        let x = x.as_flattened().as_flattened().as_flattened();
        let z = y.as_flattened_mut().as_flattened_mut().as_flattened_mut();
        let (weight, bias) = (self.weight_matrix(), S::vector(&self.bias));
        kernels::conv2d_stride1(&Self::DIRECT, batch, x, weight, bias, z, Self::epilogue());
        Self::activate_after_kernel(z);
    }

    /// [`Self::forward_stride1`] with a workspace's scratch, which lets a large convolution take
    /// Winograd's method (`kernels::conv2d_stride1_with_scratch`).
    #[cfg(feature = "alloc")]
    fn forward_stride1_with_scratch(
        &self,
        x: &[[[[T; W]; H]; C]],
        y: &mut [[[[T; OW]; OH]; OC]],
        scratch: &mut [T],
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
        );
        Self::activate_after_kernel(z);
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

    /// The forward pass of one sample with a stride other than 1: patches unrolled into
    /// `scratch`, the whole `C·K·K x OH·OW` matrix when it fits (the training workspace's
    /// does), else in pieces that fit (see [`Self::split`]).
    fn forward_sample(
        &self,
        x: &[[[T; W]; H]; C],
        out: &mut [[[T; OW]; OH]; OC],
        scratch: &mut [T],
    ) {
        let () = Self::SHAPE;
        let (ckk, positions) = (C * K * K, OH * OW);
        let weight = self.weight_matrix();
        let bias = S::vector(&self.bias);
        let z = out.as_flattened_mut().as_flattened_mut();
        if scratch.len() >= ckk * positions {
            // Z = W·X̂, straight into the output (its rows are the output channels).
            let patches = &mut scratch[..ckk * positions];
            Self::im2col(x, 0..ckk, 0, positions, patches);
            kernels::gemm_slices(
                Product::Plain,
                (OC, positions, ckk),
                weight,
                patches,
                z,
                false,
            );
        } else if OC > 0 {
            self.forward_in_pieces(x, z, scratch);
        }
        // A = f(Z + b), in place.
        kernels::with_wide_vectors(|| {
            for (channel, &b) in z.chunks_exact_mut(positions).zip(bias) {
                for a in channel {
                    *a = A::apply(*a + b);
                }
            }
        });
    }

    /// How [`Self::forward_in_pieces`] cuts `Z = W·X̂` to fit a buffer of `len` elements:
    /// `(filters, positions, rows)` per product, `filters` rows of `W` and `Z` (a group of
    /// filters), `positions` columns of `X̂` and `Z`, and `rows` rows of `X̂` (steps of the sums).
    ///
    /// Whole patches (`rows = C·K·K`, the weights used where they lie) in blocks of at least
    /// [`MIN_BLOCK`] positions, with as many filters per group as then fit, when that is at
    /// least [`MIN_GROUP`] (or all of them); else, for large patches, chunks of their rows,
    /// each chunk's columns of the weights copied into the buffer, with groups of up to 64
    /// filters and blocks of up to 16 positions. Never 0, for a buffer of [`SCRATCH`].
    const fn split(len: usize) -> (usize, usize, usize) {
        let ckk = C * K * K;
        let most_filters = (len / MIN_BLOCK).saturating_sub(ckk);
        let few = if OC < MIN_GROUP { OC } else { MIN_GROUP };
        if most_filters >= few && most_filters > 0 {
            let filters = if OC < most_filters { OC } else { most_filters };
            let block = len / (ckk + filters);
            // Whole output rows where a block holds one or more: their patches are unrolled
            // row by row (`im2col_whole_rows`).
            let block = if OW > 0 && block >= OW {
                block / OW * OW
            } else {
                block
            };
            return (filters, block, ckk);
        }
        let filters = if OC < 64 { OC } else { 64 };
        let block = if OH * OW < 16 { OH * OW } else { 16 };
        let block = if block == 0 { 1 } else { block };
        let rows = (len - filters * block) / (filters + block);
        (filters, block, if rows < ckk { rows } else { ckk })
    }

    /// The most stack buffer the products of a prediction with a stride other than 1 take
    /// (`kernels::gemm_stack_bytes`): over the whole patches' product, or every size of piece
    /// [`Self::forward_in_pieces`] multiplies in a buffer of [`SCRATCH`] (whole or last group of
    /// filters, block of positions and chunk of rows).
    const fn product_stack_bytes() -> usize {
        let (ckk, positions, size) = (C * K * K, OH * OW, core::mem::size_of::<T>());
        if SCRATCH >= ckk * positions {
            return kernels::gemm_stack_bytes(Product::Plain, (OC, positions, ckk), size);
        }
        if OC == 0 {
            return 0;
        }
        let (group, block, rows) = Self::split(SCRATCH);
        let filters = [group, OC % group];
        let blocks = [block, positions % block];
        let chunks = [rows, ckk % rows];
        let mut most = 0;
        let mut i = 0;
        while i < 8 {
            let piece = (filters[i & 1], blocks[(i >> 1) & 1], chunks[i >> 2]);
            let bytes = kernels::gemm_stack_bytes(Product::Plain, piece, size);
            if bytes > most {
                most = bytes;
            }
            i += 1;
        }
        most
    }

    /// `Z = W·X̂` when `X̂` does not fit in `scratch`, in the pieces of [`Self::split`]: per
    /// group of filters and block of positions, the sums over the patches' rows (in chunks
    /// when the patches are large), added up in a buffer and copied to the output. Each piece
    /// is a product on the SIMD kernels. (Sums written out element by element were up to 50
    /// times slower than the training pass; blocks of a few positions with every filter, 10
    /// times slower for hundreds of filters.)
    fn forward_in_pieces(&self, x: &[[[T; W]; H]; C], z: &mut [T], scratch: &mut [T]) {
        let (ckk, positions) = (C * K * K, OH * OW);
        let (group, block, rows) = Self::split(scratch.len());
        assert!(
            group > 0 && block > 0 && rows > 0,
            "a split into empty pieces"
        );
        let weight = self.weight_matrix();
        let copies = if rows < ckk { group * rows } else { 0 };
        let (weight_chunk, rest) = scratch.split_at_mut(copies);
        let (patches, rest) = rest.split_at_mut(rows * block);
        let sums = &mut rest[..group * block];
        for (g, weights) in weight.chunks(group * ckk).enumerate() {
            let filters = weights.len() / ckk.max(1);
            let outputs = &mut z[g * group * positions..][..filters * positions];
            let mut start = 0;
            while start < positions {
                let n = block.min(positions - start);
                let sums = &mut sums[..filters * n];
                let mut first = 0;
                while first < ckk {
                    let count = rows.min(ckk - first);
                    let w = if count == ckk {
                        weights
                    } else {
                        // The chunk's columns of the group's weights, which are not contiguous.
                        let chunk = &mut weight_chunk[..filters * count];
                        for (to, from) in
                            chunk.chunks_exact_mut(count).zip(weights.chunks_exact(ckk))
                        {
                            to.copy_from_slice(&from[first..first + count]);
                        }
                        &*chunk
                    };
                    let patches = &mut patches[..count * n];
                    Self::im2col(x, first..first + count, start, start + n, patches);
                    // Σ over this chunk's rows, added to the earlier chunks' sums.
                    kernels::gemm_slices(
                        Product::Plain,
                        (filters, n, count),
                        w,
                        patches,
                        sums,
                        first > 0,
                    );
                    first += count;
                }
                for (channel, row) in outputs
                    .chunks_exact_mut(positions)
                    .zip(sums.chunks_exact(n))
                {
                    channel[start..start + n].copy_from_slice(row);
                }
                start += n;
            }
        }
    }

    /// Rows `rows` and columns `start..end` of `X̂` (output positions), into `patches`
    /// (`rows.len()` rows of `end - start`).
    ///
    /// Row `(c, kh, kw)` of `X̂`, restricted to one output row `oh`, is input row
    /// `oh·S + kh - P` of channel `c`, read from column `kw - P` with step `S`: for stride 1 a
    /// slice copy, with zeros where it runs into the padding.
    fn im2col(
        x: &[[[T; W]; H]; C],
        rows: core::ops::Range<usize>,
        start: usize,
        end: usize,
        patches: &mut [T],
    ) {
        let n = end - start;
        if OW > 0 && start.is_multiple_of(OW) && end.is_multiple_of(OW) {
            Self::im2col_whole_rows(x, rows, start / OW..end / OW, patches);
            return;
        }
        for (row, patch_row) in rows.zip(patches.chunks_exact_mut(n)) {
            let (c, kh, kw) = (row / (K * K), row / K % K, row % K);
            let mut column = start;
            while column < end {
                let (oh, ow) = (column / OW, column % OW);
                let count = (OW - ow).min(end - column);
                let segment = &mut patch_row[column - start..column - start + count];
                match (oh * STRIDE + kh).checked_sub(PAD) {
                    Some(ih) if ih < H => Self::read_row(&x[c][ih], kw, ow, segment),
                    _ => segment.fill(T::zero()),
                }
                column += count;
            }
        }
    }

    /// [`Self::im2col`] of whole output rows `out_rows`: the columns of each patch row that
    /// read inside the image are the same for every output row, so they are found once per
    /// patch row, and each output row is zeros, a strided copy and zeros.
    fn im2col_whole_rows(
        x: &[[[T; W]; H]; C],
        rows: core::ops::Range<usize>,
        out_rows: core::ops::Range<usize>,
        patches: &mut [T],
    ) {
        let n = out_rows.len() * OW;
        for (row, patch_row) in rows.zip(patches.chunks_exact_mut(n)) {
            let (c, kh, kw) = (row / (K * K), row / K % K, row % K);
            // The output columns whose input column, ow·S + kw - P, is inside the row.
            let first = PAD.saturating_sub(kw).div_ceil(STRIDE).min(OW);
            let last = (W + PAD)
                .saturating_sub(kw)
                .div_ceil(STRIDE)
                .clamp(first, OW);
            for (oh, out) in out_rows.clone().zip(patch_row.chunks_exact_mut(OW)) {
                let (before, rest) = out.split_at_mut(first);
                let (inside, after) = rest.split_at_mut(last - first);
                match (oh * STRIDE + kh).checked_sub(PAD) {
                    Some(ih) if ih < H && !inside.is_empty() => {
                        for o in before.iter_mut().chain(after.iter_mut()) {
                            *o = T::zero();
                        }
                        let begin = first * STRIDE + kw - PAD;
                        Self::copy_strided(&x[c][ih][begin..], inside);
                    }
                    _ => {
                        for o in out.iter_mut() {
                            *o = T::zero();
                        }
                    }
                }
            }
        }
    }

    /// `out[i] = row[(ow + i)·S + kw - P]` (zero outside the row): the outputs `ow..` of one
    /// output row, for the kernel column `kw`.
    #[inline(always)]
    fn read_row(row: &[T; W], kw: usize, ow: usize, out: &mut [T]) {
        // The outputs whose input column is inside the row: (ow + i)·S + kw >= P and
        // (ow + i)·S + kw - P < W.
        let count = out.len();
        let first = (PAD.saturating_sub(kw))
            .div_ceil(STRIDE)
            .saturating_sub(ow)
            .min(count);
        let last = (W + PAD)
            .saturating_sub(kw)
            .div_ceil(STRIDE)
            .saturating_sub(ow)
            .min(count);
        out[..first].fill(T::zero());
        if first < last {
            let begin = (ow + first) * STRIDE + kw - PAD;
            Self::copy_strided(&row[begin..], &mut out[first..last]);
            out[last..].fill(T::zero());
        } else {
            out[first..].fill(T::zero());
        }
    }

    /// `out[i] = from[i·STRIDE]` (`out` not empty, `from` long enough).
    #[inline(always)]
    fn copy_strided(from: &[T], out: &mut [T]) {
        let count = out.len();
        if STRIDE == 1 {
            out.copy_from_slice(&from[..count]);
        } else {
            // Whole steps of `STRIDE`, the first of each read, then the last value alone: a
            // loop the vectorizer turns into loads and shuffles (`step_by` stayed scalar).
            let steps = &from[..(count - 1) * STRIDE + 1];
            let (whole, tail) = steps.split_at(steps.len() - 1);
            let (out, out_last) = out.split_at_mut(count - 1);
            for (o, step) in out.iter_mut().zip(whole.chunks_exact(STRIDE)) {
                *o = step[0];
            }
            out_last[0] = tail[0];
        }
    }

    /// `dX += col2im(dX̂)`: each entry of `dX̂` (`C·K·K x OH·OW`) added to the input position
    /// it was copied from; padding positions dropped.
    #[cfg(feature = "alloc")]
    fn col2im(d_patches: &[T], dx: &mut [[[T; W]; H]; C]) {
        let flat = dx.as_flattened_mut().as_flattened_mut();
        if STRIDE == 1 && kernels::col2im_stride1(&Self::DIRECT, d_patches, flat) {
            return;
        }
        let positions = OH * OW;
        for (row, patch_row) in d_patches.chunks_exact(positions).enumerate() {
            let (c, kh, kw) = (row / (K * K), row / K % K, row % K);
            // With stride 1, outputs `first..last` of a row meet input columns `first + kw - P..`
            // in order: a plain vectorizable add of two slices.
            let first = PAD.saturating_sub(kw).min(OW);
            let last = (W + PAD).saturating_sub(kw).min(OW).max(first);
            for (oh, segment) in patch_row.chunks_exact(OW).enumerate() {
                let Some(ih) = (oh * STRIDE + kh).checked_sub(PAD).filter(|&ih| ih < H) else {
                    continue;
                };
                let dx_row = &mut dx[c][ih];
                if STRIDE == 1 {
                    if first == last {
                        continue; // the whole kernel column falls in the padding
                    }
                    let start = first + kw - PAD;
                    let inputs = &mut dx_row[start..start + (last - first)];
                    for (dx, &d) in inputs.iter_mut().zip(&segment[first..last]) {
                        *dx += d;
                    }
                    continue;
                }
                for (ow, &d) in segment.iter().enumerate() {
                    if let Some(iw) = (ow * STRIDE + kw).checked_sub(PAD).filter(|&iw| iw < W) {
                        dx_row[iw] += d;
                    }
                }
            }
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
> Layer for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    type In = [[[T; W]; H]; C];
    type Out = [[[T; OW]; OH]; OC];

    /// `Conv2d(C, OC, K)`, then the activation's module unless it is [`Identity`]: tensors
    /// `0.weight` `[OC, C, K, K]` and `0.bias` `[OC]`.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &[
            TensorSpec {
                module: 0,
                field: "weight",
                dtype: T::DTYPE,
                shape: &[OC, C, K, K],
                range: None,
                scale: false,
            },
            TensorSpec {
                module: 0,
                field: "bias",
                dtype: T::DTYPE,
                shape: &[OC],
                range: None,
                scale: false,
            },
        ],
    };

    type WithStore<S2: Store> = Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S2>;

    /// Stride 1: the stack buffer of the SIMD kernels (x86-64); other strides: the buffer the
    /// patches are unrolled into, and the packed products' buffer where its products take it
    /// (x86-64, see [`Conv2d::product_stack_bytes`]).
    const WORKING_BYTES: usize = if STRIDE == 1 {
        core::mem::size_of::<T>()
            * kernels::conv_stack_scratch(&Self::DIRECT, core::mem::size_of::<T>())
    } else {
        core::mem::size_of::<T>() * SCRATCH + Self::product_stack_bytes()
    };

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        if STRIDE == 1 {
            // The direct kernel needs no patches: no 8 KiB on the stack of a baked net.
            self.forward_stride1(x, y);
            return;
        }
        let mut scratch = [T::ZERO; SCRATCH];
        for (x, y) in x.iter().zip(y) {
            self.forward_sample(x, y, &mut scratch);
        }
    }

    /// Stride 1: the direct kernel writes every output, so `y` is not zeroed first.
    fn forward_uninit<'y, const B: usize>(
        &self,
        x: &[Self::In; B],
        y: &'y mut MaybeUninit<[Self::Out; B]>,
    ) -> &'y mut [Self::Out; B] {
        if STRIDE != 1 {
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
mod train {
    use alloc::boxed::Box;
    use alloc::vec;

    use num_traits::Float;

    use super::Conv2d;
    use crate::format::Element;
    use crate::kernels::{self, Product};
    use crate::nn::{Activation, Sample, Store, Train, zeroed_batch};

    /// The buffers of one [`Conv2d`] layer for a batch of `B`.
    #[derive(Debug, Clone)]
    pub struct Conv2dWorkspace<T, Out, const B: usize> {
        /// `A = f(Z)` of each sample, written by the forward pass.
        pub output: Box<[Out; B]>,
        /// `dZ = dA ⊙ f'(Z)` of each sample, written by the backward pass, except where a
        /// ReLU layer asked for no `dX` (a net's first) has a kernel that forms `dZ` as it reads
        /// `dA` and `A` (LeNet-5's first layer, `f32` on AVX-512): then it is left as it was.
        pub d_pre_activation: Box<[Out; B]>,
        /// The unrolled patches `X̂` of one sample (`C·K·K x OH·OW`): built from the input by
        /// the backward pass for the weight gradient (and by the forward pass of a convolution
        /// with a stride other than 1).
        pub patches: Box<[T]>,
        /// `Wᵀ·dZ` of one sample, before `col2im` adds it into `dX`.
        pub d_patches: Box<[T]>,
        /// The batch's inputs with their zero padding (`B x C x (H + 2P) x (W + 2P)`), for the
        /// weight gradient of a padded stride-1 convolution whose kernel does not pad the
        /// images itself (empty where it does: LeNet-5's first layer); the border is never
        /// written.
        pub padded_input: Box<[T]>,
        /// The operands of the weight-gradient kernel of a stride-1 convolution, laid out for
        /// it: `dZ` of the batch position-major (`OH·OW x OC` per sample) where it puts the
        /// filters in the vector lanes; with a kernel of 3 to 5 there, the operands of
        /// Winograd's method instead (a few samples' input transforms and gradients, and the
        /// sums at the tiles' points: 161 KiB for LeNet-5's second layer in `f32` on AVX-512,
        /// where `dZ` position-major would be 400 KiB at batch 64); where it puts the output
        /// positions in the lanes, a few inputs at a time, each copied once per kernel column
        /// `kx`, padded, shifted left by `kx` and cut to the output's width (`C x K x (H + 2P)
        /// x OW` per sample), so that the inputs meeting a vector of `dZ` are one vector too
        /// (`K` times an input per image of a pass: 18 KB for LeNet-5's first layer on AVX2,
        /// several MB for a large image and kernel); for a 5 x 5 kernel on narrow rows with
        /// few filters, `f32` on AVX-512, one image's transforms by Winograd's method with a
        /// row's tiles in the lanes and the sums at their points (34 KiB for LeNet-5's first
        /// layer).
        pub weight_gradient_scratch: Box<[T]>,
        /// The transformed filters and the tiles of the input gradient by Winograd's method,
        /// for a stride-1 convolution with a kernel of 3 to 5 (empty otherwise; then
        /// `d_patches` is used).
        pub winograd: Box<[T]>,
        /// The forward pass's transforms by Winograd's method down the columns, for a
        /// stride-1 convolution whose transforms exceed the stack buffer of a prediction
        /// (`kernels::conv_forward_workspace_scratch`; empty otherwise).
        pub forward_scratch: Box<[T]>,
    }

    /// The sum of `values` in 8 independent partial sums: one running sum would make each
    /// addition wait for the previous one. Always inlined: called inside the closure that
    /// `backward` has compiled for the wide vectors, which a call would leave.
    #[inline(always)]
    fn sum<T: Float>(values: &[T]) -> T {
        let mut partial = [T::zero(); 8];
        let chunks = values.chunks_exact(8);
        let rest = chunks.remainder().iter().fold(T::zero(), |s, &v| s + v);
        for chunk in chunks {
            for (p, &v) in partial.iter_mut().zip(chunk) {
                *p = *p + v;
            }
        }
        partial.iter().fold(rest, |s, &p| s + p)
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
    > Train<T, B> for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
    where
        T: Element + Sample + Float,
        A: Activation,
        S: Store,
    {
        type Workspace = Conv2dWorkspace<T, [[[T; OW]; OH]; OC], B>;

        fn workspace(&self) -> Self::Workspace {
            let patch_len = C * K * K * OH * OW;
            let winograd = if STRIDE == 1 {
                kernels::conv_input_gradient_scratch(&Self::DIRECT)
            } else {
                0
            };
            Conv2dWorkspace {
                output: zeroed_batch(),
                d_pre_activation: zeroed_batch(),
                // Stride 1 needs no patches (see `forward_sample` and `backward`).
                patches: vec![T::ZERO; if STRIDE == 1 { 0 } else { patch_len }].into_boxed_slice(),
                d_patches: vec![T::ZERO; if winograd > 0 { 0 } else { patch_len }]
                    .into_boxed_slice(),
                padded_input: vec![
                    T::ZERO;
                    if STRIDE == 1 && !kernels::conv_weight_gradient_pads::<T>(&Self::DIRECT) {
                        B * C * (H + 2 * PAD) * (W + 2 * PAD)
                    } else {
                        0
                    }
                ]
                .into_boxed_slice(),
                weight_gradient_scratch: vec![
                    T::ZERO;
                    if STRIDE == 1 {
                        kernels::conv_weight_gradient_scratch::<T>(&Self::PADDED, B)
                    } else {
                        // dWᵀ, summed over the batch (see `backward`).
                        C * K * K * OC
                    }
                ]
                .into_boxed_slice(),
                winograd: vec![T::ZERO; winograd].into_boxed_slice(),
                forward_scratch: vec![
                    T::ZERO;
                    if STRIDE == 1 {
                        kernels::conv_forward_workspace_scratch::<T>(&Self::DIRECT)
                    } else {
                        0
                    }
                ]
                .into_boxed_slice(),
            }
        }

        fn forward_train<'w>(
            &self,
            x: &[[[[T; W]; H]; C]; B],
            ws: &'w mut Self::Workspace,
        ) -> &'w [[[[T; OW]; OH]; OC]; B] {
            // The layer's one forward pass, with room for all of a sample's patches.
            if STRIDE == 1 {
                self.forward_stride1_with_scratch(x, &mut *ws.output, &mut ws.forward_scratch);
            } else {
                for (x, y) in x.iter().zip(ws.output.iter_mut()) {
                    self.forward_sample(x, y, &mut ws.patches);
                }
            }
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
            let (ckk, positions) = (C * K * K, OH * OW);
            let d_weight = S::matrix_mut(&mut gradients.weight)
                .as_flattened_mut()
                .as_flattened_mut()
                .as_flattened_mut();
            let d_bias = S::vector_mut(&mut gradients.bias);
            // A first layer (no dX) of ReLU: a kernel that forms dZ as it reads dA and A, and
            // sums db, where there is one; dZ is then never written.
            if STRIDE == 1
                && d_input.is_none()
                && crate::nn::activation::is_relu::<A>()
                && kernels::conv2d_weight_and_bias_gradients_through_relu(
                    &Self::DIRECT,
                    B,
                    x.as_flattened().as_flattened().as_flattened(),
                    ws.output.as_flattened().as_flattened().as_flattened(),
                    d_output.as_flattened().as_flattened().as_flattened(),
                    &mut ws.weight_gradient_scratch,
                    d_weight,
                    d_bias,
                )
            {
                return;
            }
            d_bias.fill(T::zero());
            // dZ = dA ⊙ f'(Z), with f'(Z) computed from A            OC x OH·OW per sample
            // db += Σ over positions of dZ                            OC
            // One plane at a time (flat slices: the compiler vectorizes them, which it did not
            // do for the nested rows of a few values), summed while it is in the L1 cache.
            let planes = ws
                .d_pre_activation
                .as_flattened_mut()
                .as_flattened_mut()
                .as_flattened_mut()
                .chunks_exact_mut(positions.max(1));
            let a_all = ws.output.as_flattened().as_flattened().as_flattened();
            let da_all = d_output.as_flattened().as_flattened().as_flattened();
            // Always inlined: a closure the compiler keeps out of line is compiled for the
            // baseline, and this pass then ran on SSE2's 4 lanes (found in the profile).
            kernels::with_wide_vectors(
                #[inline(always)]
                || {
                    let planes = planes
                        .zip(a_all.chunks_exact(positions.max(1)))
                        .zip(da_all.chunks_exact(positions.max(1)));
                    // The planes are [sample][filter]: plane `i` is filter `i % OC`'s.
                    for (i, ((dz, a), da)) in planes.enumerate() {
                        for ((dz, &a), &da) in dz.iter_mut().zip(a).zip(da) {
                            *dz = da * A::derivative_from_output(a);
                        }
                        d_bias[i % OC] += sum(dz);
                    }
                },
            );
            let weight = self.weight_matrix();
            if STRIDE == 1 {
                // dW = Σ_batch dZ·X̂ᵀ, X̂ read from X where it lies (padded first, unless the
                // kernel pads as it reads): no patches.
                let (shape, images) = if kernels::conv_weight_gradient_pads::<T>(&Self::DIRECT) {
                    (
                        &Self::DIRECT,
                        x.as_flattened().as_flattened().as_flattened(),
                    )
                } else {
                    let padded = &mut ws.padded_input;
                    let len = padded.len() / B.max(1);
                    for (x, padded) in x.iter().zip(padded.chunks_exact_mut(len.max(1))) {
                        let x = x.as_flattened().as_flattened();
                        kernels::pad(&Self::DIRECT, x, padded);
                    }
                    (&Self::PADDED, &ws.padded_input[..])
                };
                kernels::conv2d_weight_gradient_stride1(
                    shape,
                    B,
                    images,
                    ws.d_pre_activation
                        .as_flattened()
                        .as_flattened()
                        .as_flattened(),
                    &mut ws.weight_gradient_scratch,
                    d_weight,
                    false,
                );
            }
            let mut d_input = d_input;
            // dX by Winograd's method, the whole batch at once, where it applies.
            let d_input_done = STRIDE == 1
                && d_input.as_deref_mut().is_some_and(|dx| {
                    kernels::conv2d_input_gradient_stride1(
                        &Self::DIRECT,
                        B,
                        ws.d_pre_activation
                            .as_flattened()
                            .as_flattened()
                            .as_flattened(),
                        weight,
                        dx.as_flattened_mut().as_flattened_mut().as_flattened_mut(),
                        &mut ws.winograd,
                    )
                });
            for (b, (dz, x)) in ws.d_pre_activation.iter().zip(x).enumerate() {
                let dz = dz.as_flattened().as_flattened();
                if STRIDE != 1 {
                    let patches = &mut ws.patches;
                    Self::im2col(x, 0..C * K * K, 0, positions, patches);
                    // dWᵀ += X̂·dZᵀ             (C·K·K x OH·OW)(OH·OW x OC) -> C·K·K x OC
                    // (this way round the long side, C·K·K, is the rows read in place and only
                    // dZ is packed, as `kernels::weight_grad_patches` does for stride 1)
                    kernels::gemm_slices(
                        Product::TransposeRhs,
                        (ckk, OC, positions),
                        patches,
                        dz,
                        &mut ws.weight_gradient_scratch,
                        b > 0,
                    );
                }
                // dX = col2im(Wᵀ·dZ)          (C·K·K x OC)(OC x OH·OW) -> C·K·K x OH·OW
                if let Some(dx) = d_input.as_deref_mut().filter(|_| !d_input_done) {
                    kernels::gemm_slices(
                        Product::TransposeLhs,
                        (ckk, positions, OC),
                        weight,
                        dz,
                        &mut ws.d_patches,
                        false,
                    );
                    let dx = &mut dx[b];
                    *dx = [[[T::zero(); W]; H]; C];
                    Self::col2im(&ws.d_patches, dx);
                }
            }
            if STRIDE != 1 {
                if B == 0 {
                    d_weight.fill(T::zero());
                } else {
                    kernels::transpose_slice(&ws.weight_gradient_scratch, ckk, d_weight);
                }
            }
        }
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
> super::RandomInit for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
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
> Parameters<T> for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
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
> super::Weights for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
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
struct Decoded<F, T, const C: usize, const OC: usize, const K: usize>(
    core::marker::PhantomData<fn() -> (F, T)>,
);

macro_rules! bake {
    ($t:ty, $tensor4:ident, $vector:ident) => {
        impl<F: SafetensorsFile, const C: usize, const OC: usize, const K: usize>
            Decoded<F, $t, C, OC, K>
        {
            #[allow(clippy::type_complexity)]
            const PARTS: (
                [[[[$t; K]; K]; C]; OC],
                [$t; OC],
                Option<crate::format::Error>,
            ) = match decode::$tensor4(Source::Index(&F::INDEX), F::FIRST_MODULE, "weight") {
                Err(e) => ([[[[0.0; K]; K]; C]; OC], [0.0; OC], Some(e)),
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
        > Bake<F> for Conv2d<$t, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, Inline>
        {
            const BAKED: Self = Self::new(
                Decoded::<F, $t, C, OC, K>::PARTS.0,
                Decoded::<F, $t, C, OC, K>::PARTS.1,
            );
            const ERROR: Option<crate::format::Error> = Decoded::<F, $t, C, OC, K>::PARTS.2;
        }
    };
}
bake!(f32, f32_tensor4_from, f32_vector_from);
bake!(f64, f64_tensor4_from, f64_vector_from);
