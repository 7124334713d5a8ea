//! The weight gradient of a stride-1 convolution, direct, the output positions in the vector
//! lanes: the images copied once per kernel column, shifted, a few at a time. Applies: any kernel
//! size and padding, `f32`, AVX-512 or AVX2.

use super::conv_direct::tile_rows;
use super::gemm::Element;
use super::isa::{Isa, assert_isa};
use super::simd::{Avx2F32, Avx512F32, Simd, array_from};

use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::Conv;

/// The elements of one image's column-shifted copy for the weight gradient of `shape`: the
/// padded image once per kernel column `kx`, shifted left by `kx` and cut to the output's
/// width, `X_kx[c][row][ow] = X[c][row][ow + kx]`, `C·K·(H + 2P)·OW` elements. In it, the
/// inputs that meet the output positions `q = oh·OW + ow` at a step `(c, ky, kx)` are
/// contiguous, `X_kx[c][ky·OW + q]`, exactly as `dZ`'s positions are: one vector of positions
/// is one load of each, whatever the widths (see [`weight_grad_tile`]).
pub(crate) const fn shifted_image_len(shape: &Conv) -> usize {
    shape.channels * shape.kernel * (shape.height + 2 * shape.padding) * shape.out_width()
}

/// How many images [`weight_grad_run`] shifts and sums at once for `shape`, in a
/// batch of `batch`: as many as keep their shifted copies and gradients within
/// [`WEIGHT_GRAD_PASS_BYTES`], at least one. The scratch it needs is that many
/// [`shifted_image_len`]s.
pub(crate) const fn weight_grad_images_per_pass<E>(shape: &Conv, batch: usize) -> usize {
    let bytes = (shifted_image_len(shape) + shape.output_len()) * size_of::<E>();
    let per_pass = WEIGHT_GRAD_PASS_BYTES / if bytes == 0 { 1 } else { bytes };
    let most = if batch == 0 { 1 } else { batch };
    if per_pass < 1 {
        1
    } else if per_pass > most {
        most
    } else {
        per_pass
    }
}

/// One tile of a stride-1 convolution's weight gradient without padding, summed over a batch:
/// `dW[r][step] (+)= Σ over the images and output positions of dZ[r][position] ·
/// X̂[step][position]` for filters `0..MR` and the `NS` steps `steps` (each `(c·K + ky)·K + kx`),
/// read from the images' column-shifted copies `shifted` (see [`shifted_image_len`]) without
/// unrolling the patches. A vector's lane at output position `q = oh·OW + ow` meets
/// `dz[r][q]` and `shifted[c][kx][ky·OW + q]`: one contiguous vector of each per step, the
/// rows of `dZ` laid end to end as the layer holds them, so every vector is full but the
/// plane's last (masked).
///
/// Per vector of positions, `MR` vectors of `dZ` and, per step, one of inputs meet in `MR · NS`
/// accumulators, kept from one image to the next and summed horizontally once.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `shifted` holds `batch` column-shifted images of
/// [`shifted_image_len`]; `dz` points at the first of the tile's `MR` gradient planes of image
/// 0, each image's `filters` planes of `OH·OW` following each other; `dw` at the tile's first
/// filter's `C·K·K` weight gradients (the `MR` filters' rows following each other); every step
/// is below `C·K·K`; no padding; `OH = H - K + 1` and `OW = W - K + 1` are not 0.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn weight_grad_tile<S: Simd, const MR: usize, const NS: usize>(
    shape: &Conv,
    batch: usize,
    shifted: *const S::E,
    dz: *const S::E,
    dw: *mut S::E,
    steps: [usize; NS],
    accumulate: bool,
) {
    let Conv {
        channels,
        filters,
        kernel,
        height,
        ..
    } = *shape;
    let out_width = shape.out_width();
    let steps_per_filter = channels * kernel * kernel;
    let (image_len, plane) = (shifted_image_len(shape), shape.out_height() * out_width);
    let (whole, rest) = (plane / S::LANES, plane % S::LANES);
    // Where each step's inputs start in a shifted image: (c, ky, kx) -> X_kx[c][ky·OW].
    let offsets: [usize; NS] = array_from(|s| {
        let step = steps[s];
        let (c, ky, kx) = (
            step / (kernel * kernel),
            step / kernel % kernel,
            step % kernel,
        );
        ((c * kernel + kx) * height + ky) * out_width
    });
    // SAFETY (whole body): the instruction set is present (the caller's contract). A lane at
    // position q < OH·OW reads dz[r·OH·OW + q] of its image, r < MR, and shifted[((c·K + kx)·H +
    // ky)·OW + q] <= shifted[((c·K + kx)·H + K - 1)·OW + OH·OW - 1] = shifted[(c·K + kx + 1)·H·OW
    // - 1] (as OH + K - 1 = H), inside the image's copy; lanes at q >= OH·OW are masked off. The
    // gradients written are `dw[r·C·K·K + step]`, r < MR, step < C·K·K.
    unsafe {
        let rest_mask = S::mask(rest);
        let mut acc = [[S::zero(); NS]; MR];
        for b in 0..batch {
            let (x, dz) = (shifted.add(b * image_len), dz.add(b * filters * plane));
            // One vector of positions at `q`: a macro, not a closure, which would not inherit
            // the caller's target features.
            macro_rules! add_vector {
                ($q:expr, $load:expr) => {{
                    let q = $q;
                    let grads: [S::V; MR] = array_from(|r| $load(dz.add(r * plane + q)));
                    for (s, &offset) in offsets.iter().enumerate() {
                        let input = $load(x.add(offset + q));
                        for (acc_row, &g) in acc.iter_mut().zip(grads.iter()) {
                            acc_row[s] = S::fma(g, input, acc_row[s]);
                        }
                    }
                }};
            }
            for v in 0..whole {
                add_vector!(v * S::LANES, |p| S::load(p));
            }
            if rest > 0 {
                add_vector!(whole * S::LANES, |p| S::load_masked(p, rest_mask));
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (&acc_v, &step) in acc_row.iter().zip(steps.iter()) {
                let p = dw.add(r * steps_per_filter + step);
                let sum = S::sum(acc_v);
                *p = if accumulate { *p + sum } else { sum };
            }
        }
    }
}

/// Makes the column-shifted copies (see [`shifted_image_len`]) of `images` at the start of
/// `shifted`: row `r` of channel `c` of a padded image, from column `kx` on, `OW` wide, goes to
/// row `r` of its copy `kx` of that channel. The padding is written here, from the image as it
/// is: its rows are zeros, and its columns are the lanes a load leaves out.
///
/// A copy is written a column of vectors at a time, the last first: which lanes a load keeps
/// depends on the column only, so it is worked out once per column, not once per row (with
/// padding, that work was a quarter of the first layer's weight gradient). Every store is a
/// whole vector: the lanes of a row's last vector past its end land on the first vectors of
/// the rows (and copies) that follow, all written later, or past the last copy, where nothing
/// reads them. Only the stores past the end of `shifted` are masked
/// (a masked store costs several plain ones on some CPUs), and, without padding, the loads
/// past the end of `images`; with padding, every load is masked to the columns inside the
/// image.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the kernel fits the padded image (`OW = W + 2P - K + 1`);
/// `images` holds whole images of `shape` (without their padding), `shifted` at least as many
/// copies.
#[inline(always)]
pub(super) unsafe fn shift_columns<S: Simd>(shape: &Conv, images: &[S::E], shifted: &mut [S::E]) {
    let Conv {
        kernel,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (out_width, rows) = (shape.out_width(), height + 2 * padding);
    let lanes = S::LANES;
    let (source_len, target_len) = (images.len(), shifted.len());
    let (source, target) = (images.as_ptr(), shifted.as_mut_ptr());
    // One plane of an image (a channel) and its `K` copies, in order.
    let planes = source_len.checked_div(height * width).unwrap_or(0);
    // SAFETY (whole body): the instruction set is present (the caller's contract). Row r of
    // the padded plane p, from column kx + v, is row r - P of plane p from column kx + v - P,
    // at `p·H·W + (r - P)·W + kx + v - P` in `images` (before the row's start when kx + v <
    // P: the pointer is formed with wrapping arithmetic and those lanes are never read); its
    // copy at `((p·K + kx)·(H + 2P) + r)·OW + v` in `shifted`, below `planes·K·(H + 2P)·OW <=
    // target_len` (the caller's contract). Without padding, a load at `from` reads `from..from
    // + LANES` when that is inside `images`, else only the lanes the row needs (inside: `kx +
    // OW <= W`); with padding, only the lanes whose column `v + lane + kx - P` is in `0..W`, in
    // row r - P < H. A store writes `to..to + LANES` when that is inside `shifted`, else the
    // lanes of the row.
    unsafe {
        for p in 0..planes {
            for kx in 0..kernel {
                let copy = (p * kernel + kx) * rows * out_width;
                let mut v = out_width.div_ceil(lanes) * lanes;
                while v > 0 {
                    v -= lanes;
                    let needed = S::mask(lanes.min(out_width - v));
                    // With padding, the lanes whose columns v + lane + kx - P are in 0..W.
                    let first = (padding - (kx + v).min(padding)).min(lanes);
                    let last = (width + padding).saturating_sub(kx + v).min(lanes);
                    let inside_columns = S::mask_range(first, last.max(first));
                    for r in 0..rows {
                        let to = copy + r * out_width + v;
                        let value = if r < padding || r >= height + padding {
                            S::zero()
                        } else if padding == 0 {
                            let from = p * height * width + r * width + kx + v;
                            if from + lanes <= source_len {
                                S::load(source.add(from))
                            } else {
                                S::load_masked(source.add(from), needed)
                            }
                        } else if first < last {
                            let row = p * height * width + (r - padding) * width;
                            let from = source.add(row).wrapping_add(kx + v).wrapping_sub(padding);
                            S::load_masked(from, inside_columns)
                        } else {
                            S::zero()
                        };
                        if to + lanes <= target_len {
                            S::store(target.add(to), value);
                        } else {
                            S::store_masked(target.add(to), needed, value);
                        }
                    }
                }
            }
        }
    }
}

/// The weight gradient of a batch, a few images at a time
/// ([`weight_grad_images_per_pass`]): their column-shifted copies made in `shifted`, then the
/// tiles of [`weight_grad_tile`]. For a kernel of 4 or 5 (with [`Simd::COLUMN_TILES`]), a tile
/// is [`COLUMN_TILE_ROWS`] filters by a column of the kernel (the steps `(c, 0..K, kx)`, which
/// read consecutive rows of one shifted copy); otherwise `OUTER_ROWS` filters by two steps.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices and sizes were checked by
/// [`conv2d_weight_gradient_positions`].
#[inline(always)]
pub(super) unsafe fn weight_grad_run<S: Simd>(
    shape: &Conv,
    batch: usize,
    x: &[S::E],
    dz: &[S::E],
    shifted: &mut [S::E],
    dw: &mut [S::E],
    accumulate: bool,
) {
    if shape.out_height() == 0 || shape.out_width() == 0 {
        // No position: the sums are empty.
        if !accumulate {
            dw.fill(S::E::default());
        }
        return;
    }
    let out_width = shape.out_width();
    let steps = shape.channels * shape.kernel * shape.kernel;
    let (image_len, gradients_len) = (shape.image_len(), shape.output_len());
    let per_pass = weight_grad_images_per_pass::<S::E>(shape, batch);
    // The tiles read the shifted copies, which hold the padding: to them the image is padded.
    let padded = shape.padded();
    for first in (0..batch.max(1)).step_by(per_pass) {
        let batch = per_pass.min(batch - first);
        let accumulate = accumulate || first > 0;
        let images = &x[first * image_len..][..batch * image_len];
        // SAFETY: `images` are the pass's `batch` images, and `shifted` holds at least that
        // many copies (checked by the caller).
        unsafe { shift_columns::<S>(shape, images, shifted) };
        let (shifted, dz, dw) = (
            shifted.as_ptr(),
            dz[first * gradients_len..].as_ptr(),
            dw.as_mut_ptr(),
        );
        let kernel = shape.kernel;
        let by_columns = S::COLUMN_TILES && (kernel == 4 || kernel == 5);
        let block = if by_columns {
            COLUMN_TILE_ROWS
        } else {
            S::OUTER_ROWS
        };
        for r0 in (0..shape.filters).step_by(block) {
            let rows = block.min(shape.filters - r0);
            // SAFETY: the pass's `batch` shifted copies were just made; images first..first +
            // batch have gradients; filters r0..r0+rows exist: their gradient planes start at
            // r0·OH·OW in each image, their weight gradients at r0·C·K·K; every step passed is
            // below C·K·K.
            unsafe {
                let plane = shape.out_height() * out_width;
                let (dz, dw) = (dz.add(r0 * plane), dw.add(r0 * steps));
                if by_columns {
                    for column in 0..shape.channels * kernel {
                        // The steps (c, ky, kx), each (c·K + ky)·K + kx, for ky in 0..K.
                        let (c, kx) = (column / kernel, column % kernel);
                        let top_step = c * kernel * kernel + kx;
                        macro_rules! column_tile {
                            ($k:literal) => {{
                                let steps: [usize; $k] = array_from(|ky| top_step + ky * $k);
                                macro_rules! sized {
                                    ($rows:expr) => {
                                        weight_grad_tile::<S, $rows, $k>(
                                            &padded, batch, shifted, dz, dw, steps, accumulate,
                                        )
                                    };
                                }
                                const { assert!(COLUMN_TILE_ROWS == 3) };
                                match rows {
                                    1 => sized!(1),
                                    2 => sized!(2),
                                    3 => sized!(3),
                                    _ => unreachable!("column tiles have at most 3 filters"),
                                }
                            }};
                        }
                        if kernel == 4 {
                            column_tile!(4);
                        } else {
                            column_tile!(5);
                        }
                    }
                    continue;
                }
                let mut step = 0;
                while step + 2 <= steps {
                    tile_rows!(
                        weight_grad_tile,
                        rows,
                        2,
                        &padded,
                        batch,
                        shifted,
                        dz,
                        dw,
                        [step, step + 1],
                        accumulate
                    );
                    step += 2;
                }
                if step < steps {
                    tile_rows!(
                        weight_grad_tile,
                        rows,
                        1,
                        &padded,
                        batch,
                        shifted,
                        dz,
                        dw,
                        [step],
                        accumulate
                    );
                }
            }
        }
    }
}

/// The most bytes of shifted images and gradients one pass of [`weight_grad_run`]'s tiles
/// reads (at least one image): the tiles pass over them once per pair of steps, so they should
/// stay in the L1 cache. LeNet-5's first convolution, 36 KB per image, goes one image per
/// pass; measured with the earlier layout (the images as they are, 23 KB per image), five
/// images per pass made a training step 5% slower than one, the whole batch of 64, read from
/// L3, 12% slower.
pub(super) const WEIGHT_GRAD_PASS_BYTES: usize = 32 * 1024;

/// The filters of [`weight_grad_run`]'s tiles along a kernel column (4 or 5 steps): 3 filters
/// keep at most 15 accumulators, 3 gradient vectors and an input in registers (of AVX-512's
/// 32), and do 15 multiply-adds for 8 loads (12 for 7 with a kernel of 4), where LeNet-5's 6
/// filters by 2 steps did 12 for 8. Measured on LeNet-5's first layer (6 filters, 5 x 5): its
/// backward pass 2-4% faster than with the pairs of steps.
pub(super) const COLUMN_TILE_ROWS: usize = 3;

macro_rules! weight_grad_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_weight_gradient_positions`].
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(
            shape: &Conv,
            batch: usize,
            x: &[$e],
            dz: &[$e],
            shifted: &mut [$e],
            dw: &mut [$e],
            accumulate: bool,
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { weight_grad_run::<$simd>(shape, batch, x, dz, shifted, dw, accumulate) }
        }
    };
}
#[allow(unused_imports)]
pub(super) use weight_grad_entry;

weight_grad_entry!(weight_grad_avx512_f32, Avx512F32, f32, "avx512f");
weight_grad_entry!(weight_grad_avx2_f32, Avx2F32, f32, "avx2,fma");

/// The weight gradient of a stride-1 convolution summed over a batch of `batch` images, `dw
/// (+)= Σ dZ·X̂ᵀ` (see [`Conv`]), with `isa`, without unrolling the patches `X̂`, positions in
/// the lanes: `x` is the images without their padding, `dz` `[image][filter][OH][OW]` as the
/// layer holds it, and `shifted` the scratch for [`weight_grad_images_per_pass`]
/// column-shifted padded images (see [`shifted_image_len`] and [`weight_grad_tile`]), which
/// are made here with their padding.
///
/// # Panics
///
/// When `x` is not `batch` images, `dz` not their gradients, `dw` not the weight's length, or
/// `shifted` not the scratch's length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_weight_gradient_positions<E: Element>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dz: &[E],
    shifted: &mut [E],
    dw: &mut [E],
    accumulate: bool,
) {
    shape.check_batch(batch, x.len(), dw.len(), shape.filters, dz.len());
    assert_eq!(
        shifted.len(),
        weight_grad_images_per_pass::<E>(shape, batch) * shifted_image_len(shape),
        "the scratch of the weight gradient of {batch} images of {shape:?}"
    );
    assert_isa(isa);
    let (Some(x), Some(dz), Some(shifted), Some(dw)) = (
        same_type_slice::<E, f32>(x),
        same_type_slice::<E, f32>(dz),
        same_type_slice_mut::<E, f32>(shifted),
        same_type_slice_mut::<E, f32>(dw),
    ) else {
        unreachable!("the SIMD convolution kernels take f32");
    };
    // SAFETY (both): lengths, sizes and instruction set checked above.
    match isa {
        Isa::Avx512 => unsafe {
            weight_grad_avx512_f32(shape, batch, x, dz, shifted, dw, accumulate)
        },
        Isa::Avx2Fma => unsafe {
            weight_grad_avx2_f32(shape, batch, x, dz, shifted, dw, accumulate)
        },
    }
}
