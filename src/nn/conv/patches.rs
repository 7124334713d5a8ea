//! A convolution with a stride other than 1, or a kernel whose height and width differ
//! (`Conv2d::UNROLLS`): its forward pass reads the windows in place where the kernel plan takes
//! it (`kernels::conv2d_windows_in_place`), else its patches are unrolled (`im2col`) and
//! multiplied on the matrix kernels, whole (training) or in pieces that fit a stack buffer
//! (predictions). Its backward pass multiplies the training pass's groups of samples again
//! (`backward_unrolled`), and folds the patches' gradients back (`col2im`).

use num_traits::Float;

use super::Conv2d;
use crate::format::Element;
use crate::kernels::{self, Product};
use crate::nn::{Activation, Sample, Store};

/// The most elements of the stack buffer a convolution that unrolls patches unrolls them into
/// in [`Layer::forward`] (each layer takes what it reads, `Conv2d::STACK_SCRATCH`, up to this).
/// Larger convolutions are done in blocks of output positions that fit. 2,048 (8 KiB of `f32`), which a microcontroller can afford; on x86-64, 16,384 (64 KiB), where
/// the products of larger blocks run 2-3x faster (whole output rows, full packed panels: the
/// prediction of a net whose first layer is 32 filters of 3 x 7 x 7, stride 2, on 64 x 64, 500
/// µs with 2,048 against 174 on AVX-512) and the stack is a desktop's or a server's.
pub(super) const SCRATCH: usize = if cfg!(target_arch = "x86_64") {
    16 * 1024
} else {
    2048
};

/// The fewest output positions per block worth a product of whole patches; with fewer, the
/// patches' rows are split too (see `Conv2d::split`).
const MIN_BLOCK: usize = 8;

/// The fewest filters per group worth a product of whole patches (see `Conv2d::split`).
const MIN_GROUP: usize = 16;

/// The fewest columns (output positions) a product of the training pass should have: with
/// fewer, the packed kernel's panels of 16 or 32 columns are partly padding, and the images are
/// multiplied several at a time (`Conv2d::IMAGES_PER_PRODUCT`).
#[cfg(feature = "alloc")]
const MIN_COLUMNS: usize = 256;

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
    /// The forward pass of one sample of a layer of this path: its windows read in place where
    /// the plan takes it and `scratch` holds [`Self::WINDOWS_SCRATCH`]; else patches unrolled
    /// into `scratch`, the whole `C·K·K x OH·OW` matrix when it fits (the training
    /// workspace's does), else in pieces that fit (see [`Self::split`]).
    pub(super) fn forward_sample(
        &self,
        x: &[[[T; W]; H]; C],
        out: &mut [[[T; OW]; OH]; OC],
        scratch: &mut [T],
    ) {
        let () = Self::SHAPE;
        let (ckk, positions) = (C * K * KW, OH * OW);
        let weight = self.weight_matrix();
        let bias = S::vector(&self.bias);
        let z = out.as_flattened_mut().as_flattened_mut();
        if self.forward_windows_in_place(core::slice::from_ref(x), z, scratch) {
            return;
        }
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

    /// The elements of the stack buffer a prediction without the caller's scratch
    /// ([`Layer::forward`]) takes: what its kernel reads, the windows in place
    /// ([`Self::WINDOWS_SCRATCH`]) or the whole patches (`C·K·K x OH·OW`), rounded up to a
    /// multiple of 1,024; at most [`SCRATCH`], in which larger convolutions are done in pieces.
    /// The buffer is zeroed on every call: 64 KiB of zeros for a layer that reads 2 KiB of them
    /// took 14% of a strided net's prediction.
    pub(super) const STACK_SCRATCH: usize = {
        let whole_patches = C * K * KW * OH * OW;
        let needed = if Self::WINDOWS_SCRATCH > whole_patches {
            Self::WINDOWS_SCRATCH
        } else {
            whole_patches
        };
        let rounded = if needed == 0 {
            1024
        } else {
            needed.next_multiple_of(1024)
        };
        if rounded < SCRATCH { rounded } else { SCRATCH }
    };

    /// [`Self::forward_unrolling_layer`] with a zeroed stack buffer of `N` elements
    /// ([`Self::STACK_SCRATCH`]): a function of its own for each size, so that a build without
    /// optimizations reserves only the buffer it takes.
    #[inline(never)]
    pub(super) fn forward_on_stack<const B: usize, const N: usize>(
        &self,
        x: &[[[[T; W]; H]; C]; B],
        y: &mut [[[[T; OW]; OH]; OC]; B],
    ) {
        let mut scratch = [T::ZERO; N];
        self.forward_unrolling_layer(x, y, &mut scratch);
    }

    /// The layer's shape for the kernel that reads its windows in place, on the padded image.
    const PREPADDED: kernels::PrepaddedConv = kernels::PrepaddedConv {
        channels: C,
        filters: OC,
        kernel_height: K,
        kernel_width: KW,
        stride: STRIDE,
        height: H + 2 * PAD,
        width: W + 2 * PAD,
    };

    /// The elements of scratch the kernel that reads the windows in place takes on any
    /// instruction set (`kernels::windows_in_place_scratch_any_isa`: the weights transposed
    /// and an image padded), 0 where it does not take the layer.
    pub(super) const WINDOWS_SCRATCH: usize =
        kernels::windows_in_place_scratch_any_isa(&Self::PREPADDED, PAD, core::mem::size_of::<T>());

    /// The forward pass of the images `x` into `z` (their outputs, flat) by the kernel that
    /// reads the windows in place, with no unrolled patches, where it takes the layer and
    /// `scratch` holds [`Self::WINDOWS_SCRATCH`] elements: returns whether it did.
    fn forward_windows_in_place(
        &self,
        x: &[[[[T; W]; H]; C]],
        z: &mut [T],
        scratch: &mut [T],
    ) -> bool {
        let done = kernels::conv2d_windows_in_place(
            &Self::PREPADDED,
            PAD,
            x.len(),
            x.as_flattened().as_flattened().as_flattened(),
            self.weight_matrix(),
            S::vector(&self.bias),
            z,
            Self::epilogue(),
            scratch,
        );
        if done {
            Self::activate_after_kernel(z);
        }
        done
    }

    /// A prediction of the images `x` of a layer of this path, with `scratch`: the windows
    /// read in place for the whole batch at once (the weights transposed once) where the plan
    /// takes them and `scratch` holds their scratch, else one image at a time
    /// ([`Self::forward_sample`]).
    pub(super) fn forward_unrolling_layer(
        &self,
        x: &[[[[T; W]; H]; C]],
        y: &mut [[[[T; OW]; OH]; OC]],
        scratch: &mut [T],
    ) {
        let batch = x.len().min(y.len());
        let (x, y) = (&x[..batch], &mut y[..batch]);
        let z = y.as_flattened_mut().as_flattened_mut().as_flattened_mut();
        if self.forward_windows_in_place(x, z, scratch) {
            return;
        }
        for (x, y) in x.iter().zip(y) {
            self.forward_sample(x, y, scratch);
        }
    }

    /// Images side by side in one product of the training pass ([`Self::forward_images`]): enough
    /// that it has at least [`MIN_COLUMNS`] columns (one, for outputs of that many positions).
    #[cfg(feature = "alloc")]
    pub(super) const IMAGES_PER_PRODUCT: usize = {
        let positions = OH * OW;
        if positions == 0 || positions >= MIN_COLUMNS {
            1
        } else {
            MIN_COLUMNS.div_ceil(positions)
        }
    };

    /// The elements of scratch [`Self::forward_images`] takes for a batch of `batch`: the patches
    /// of a group of images side by side (`C·K·K x group·OH·OW`) and their products
    /// (`OC x group·OH·OW`).
    #[cfg(feature = "alloc")]
    pub(super) const fn images_scratch(batch: usize) -> usize {
        let group = if batch < Self::IMAGES_PER_PRODUCT {
            batch
        } else {
            Self::IMAGES_PER_PRODUCT
        };
        group * OH * OW * (C * K * KW + OC)
    }

    /// The training pass of a batch of a layer that unrolls patches, its images in groups of
    /// [`Self::IMAGES_PER_PRODUCT`]: each group's patches side by side, one product `Z = W·X̂` for
    /// the group (a product of one image's 49 positions filled two packed panels of 32 to 77%),
    /// then each image's outputs `f(Z + b)` copied out. `scratch` is
    /// [`Self::images_scratch`]`(x.len())` long.
    #[cfg(feature = "alloc")]
    pub(super) fn forward_images(
        &self,
        x: &[[[[T; W]; H]; C]],
        y: &mut [[[[T; OW]; OH]; OC]],
        scratch: &mut [T],
    ) {
        let z = y.as_flattened_mut().as_flattened_mut().as_flattened_mut();
        if self.forward_windows_in_place(x, z, scratch) {
            return;
        }
        if Self::IMAGES_PER_PRODUCT == 1 {
            // Wide enough on its own: straight into the output, no copy.
            for (x, y) in x.iter().zip(y) {
                self.forward_sample(x, y, scratch);
            }
            return;
        }
        let (ckk, positions) = (C * K * KW, OH * OW);
        let group = Self::IMAGES_PER_PRODUCT.min(x.len()).max(1);
        let (patches, z) = scratch.split_at_mut(group * positions * ckk);
        let weight = self.weight_matrix();
        let bias = S::vector(&self.bias);
        for (x, y) in x.chunks(group).zip(y.chunks_mut(group)) {
            let columns = x.len() * positions;
            let patches = &mut patches[..ckk * columns];
            for (i, x) in x.iter().enumerate() {
                Self::im2col_whole_rows(x, 0..ckk, 0..OH, &mut patches[i * positions..], columns);
            }
            let z = &mut z[..OC * columns];
            kernels::gemm_slices(
                Product::Plain,
                (OC, columns, ckk),
                weight,
                patches,
                z,
                false,
            );
            kernels::with_wide_vectors(
                #[inline(always)]
                || {
                    for (i, y) in y.iter_mut().enumerate() {
                        let planes = y
                            .as_flattened_mut()
                            .as_flattened_mut()
                            .chunks_exact_mut(positions);
                        for ((plane, row), &b) in planes.zip(z.chunks_exact(columns)).zip(bias) {
                            let row = &row[i * positions..][..positions];
                            for (a, &v) in plane.iter_mut().zip(row) {
                                *a = A::apply(v + b);
                            }
                        }
                    }
                },
            );
        }
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
        let ckk = C * K * KW;
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

    /// The most stack buffer the products of a prediction that unrolls patches take
    /// (`kernels::gemm_stack_bytes`): over the whole patches' product, or every size of piece
    /// [`Self::forward_in_pieces`] multiplies in a buffer of [`SCRATCH`] (whole or last group of
    /// filters, block of positions and chunk of rows).
    pub(super) const fn product_stack_bytes() -> usize {
        let (ckk, positions, size) = (C * K * KW, OH * OW, core::mem::size_of::<T>());
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
        let (ckk, positions) = (C * K * KW, OH * OW);
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
    pub(super) fn im2col(
        x: &[[[T; W]; H]; C],
        rows: core::ops::Range<usize>,
        start: usize,
        end: usize,
        patches: &mut [T],
    ) {
        let n = end - start;
        if OW > 0 && start.is_multiple_of(OW) && end.is_multiple_of(OW) {
            Self::im2col_whole_rows(x, rows, start / OW..end / OW, patches, n);
            return;
        }
        for (row, patch_row) in rows.zip(patches.chunks_exact_mut(n)) {
            let (c, kh, kw) = (row / (K * KW), row / KW % K, row % KW);
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

    /// [`Self::im2col`] of whole output rows `out_rows`, patch row `i` at `patches[i·row_stride..]`:
    /// the columns of each patch row that read inside the image are the same for every output
    /// row, so they are found once per patch row, and each output row is zeros, a strided copy
    /// and zeros.
    pub(super) fn im2col_whole_rows(
        x: &[[[T; W]; H]; C],
        rows: core::ops::Range<usize>,
        out_rows: core::ops::Range<usize>,
        patches: &mut [T],
        row_stride: usize,
    ) {
        let n = out_rows.len() * OW;
        let patch_rows = patches.chunks_mut(row_stride.max(1)).map(|r| &mut r[..n]);
        for (row, patch_row) in rows.zip(patch_rows) {
            let (c, kh, kw) = (row / (K * KW), row / KW % K, row % KW);
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

    /// `dW` and `dX` of a convolution that unrolls patches (`Conv2d::UNROLLS`), from `dZ` (the
    /// workspace's, or `dA` itself without an activation), with the workspace's buffers: the
    /// samples in groups of [`Self::IMAGES_PER_PRODUCT`], as the forward pass takes them, each group's patches and `dZ` side by side, so that each product has
    /// enough columns to fill the packed kernel's panels (one sample's 49 positions filled two
    /// panels of 32 to 77%):
    ///
    /// ```text
    /// dWᵀ += X̂·dZᵀ     (C·K·K x group·OH·OW)(group·OH·OW x OC)
    /// dX̂ = Wᵀ·dZ       (C·K·K x OC)(OC x group·OH·OW), then col2im per sample
    /// ```
    ///
    /// (this way round the long side, C·K·K, is the rows read in place and only dZ is packed,
    /// as `kernels::weight_grad_patches` does for stride 1).
    #[cfg(feature = "alloc")]
    #[allow(clippy::too_many_arguments)] // the workspace's buffers, each borrowed alone
    pub(super) fn backward_unrolled<const B: usize>(
        &self,
        x: &[[[[T; W]; H]; C]; B],
        dz: &[[[[T; OW]; OH]; OC]; B],
        patches: &mut [T],
        weight_gradient_scratch: &mut [T],
        d_patches: &mut [T],
        mut d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
        d_weight: &mut [T],
    ) {
        let (ckk, positions) = (C * K * KW, OH * OW);
        let group = Self::IMAGES_PER_PRODUCT.min(B).max(1);
        let weight = self.weight_matrix();
        let (patches, side_by_side) = patches.split_at_mut(group * positions * ckk);
        let samples = x.chunks(group).zip(dz.chunks(group));
        for (g, (x, dz)) in samples.enumerate() {
            let columns = x.len() * positions;
            let patches = &mut patches[..ckk * columns];
            for (i, x) in x.iter().enumerate() {
                Self::im2col_whole_rows(x, 0..ckk, 0..OH, &mut patches[i * positions..], columns);
            }
            // The group's dZ side by side, as its patches: OC x group·OH·OW.
            let dz: &[T] = if let [one] = dz {
                one.as_flattened().as_flattened()
            } else {
                let side = &mut side_by_side[..OC * columns];
                for (i, dz) in dz.iter().enumerate() {
                    let planes = dz.as_flattened().as_flattened().chunks_exact(positions);
                    for (row, plane) in side.chunks_exact_mut(columns).zip(planes) {
                        row[i * positions..][..positions].copy_from_slice(plane);
                    }
                }
                side
            };
            kernels::gemm_slices(
                Product::TransposeRhs,
                (ckk, OC, columns),
                patches,
                dz,
                weight_gradient_scratch,
                g > 0,
            );
            if let Some(dx) = d_input.as_deref_mut() {
                let d_patches = &mut d_patches[..ckk * columns];
                kernels::gemm_slices(
                    Product::TransposeLhs,
                    (ckk, columns, OC),
                    weight,
                    dz,
                    d_patches,
                    false,
                );
                for (i, dx) in dx[g * group..][..x.len()].iter_mut().enumerate() {
                    *dx = [[[T::zero(); W]; H]; C];
                    Self::col2im(&d_patches[i * positions..], columns, dx);
                }
            }
        }
        if B == 0 {
            d_weight.fill(T::zero());
        } else {
            kernels::transpose_slice(weight_gradient_scratch, ckk, d_weight);
        }
    }

    /// `dX += col2im(dX̂)`: each entry of `dX̂` (`C·K·K x OH·OW`, row `i` at
    /// `d_patches[i·row_stride..]`: one sample's columns of a group's side by side) added to
    /// the input position it was copied from; padding positions dropped.
    #[cfg(feature = "alloc")]
    pub(super) fn col2im(d_patches: &[T], row_stride: usize, dx: &mut [[[T; W]; H]; C]) {
        let positions = OH * OW;
        let flat = dx.as_flattened_mut().as_flattened_mut();
        if !Self::UNROLLS
            && row_stride == positions
            && kernels::col2im_stride1(&Self::DIRECT, d_patches, flat)
        {
            return;
        }
        let rows = (0..C * K * KW).map(|row| &d_patches[row * row_stride..][..positions]);
        for (row, patch_row) in rows.enumerate() {
            let (c, kh, kw) = (row / (K * KW), row / KW % K, row % KW);
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
