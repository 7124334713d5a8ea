//! The weight gradient of a stride-1 convolution of any kernel size and padding, with at least
//! [`MIN_FILTERS`] filters, as packed matrix products: the general weight-gradient kernel of the
//! plan (`super::plan::WeightGradientKernel::Patches`).
//!
//! For each image `b`, `dWᵀ += X̂_b·dZ_bᵀ`: `X̂_b` is the image's unrolled patches (`C·K·K` rows
//! of the output positions), `dZ_b` its output gradient (`filters x positions`), so each
//! product is `C·K·K x filters x positions`. This orientation puts the long dimension (`C·K·K`)
//! in the rows of `C`, read in place, and packs only the small `dZ_b`; the other one
//! (`dW += dZ_b·X̂_bᵀ`, `filters` rows) packs every patch and measured 1.2-1.3x slower. The
//! patches are unrolled a chunk of rows at a time into a buffer that stays in L2, multiplied
//! at once, and the sums transposed into `dW` at the end. A 1 x 1 kernel without padding
//! multiplies the image's planes where they lie: they are its patches.
//!
//! Each element of `dW` is one chain of fused multiply-adds over the images in order and, in
//! each image, over its output positions in order (the packed product's order,
//! `super::x86::gemm_packed`), so the bits do not depend on the chunk's size.

use core::ops::Range;

use super::shape::{Conv, Product};
use super::x86::{Element, Isa, gemm, transpose};
use crate::Scalar;

/// The fewest filters this kernel takes: with fewer, the packed panels of `dZ_bᵀ` (16 or 32
/// columns wide) are mostly padding, and the kernels that keep the images in registers win
/// (LeNet-5's 6 and 16 filters: 3-4x faster there; 32 filters on 3 x 32 x 32 images about
/// equal, 64 filters on 32 x 16 x 16 1.4-1.7x slower than this).
pub(super) const MIN_FILTERS: usize = 32;

/// The elements of the patch buffer: 64 Ki (256 KiB of `f32`), a chunk of rows that stays in
/// L2 between its unrolling and its product.
const CHUNK_ELEMENTS: usize = 64 * 1024;

/// Whether this kernel takes `shape`: at least [`MIN_FILTERS`] filters and an output.
pub(super) const fn applies(shape: &Conv) -> bool {
    shape.filters >= MIN_FILTERS && shape.out_height() > 0 && shape.out_width() > 0
}

/// Rows of patches unrolled at a time: as many as fit [`CHUNK_ELEMENTS`], at least one, at
/// most all of them.
const fn chunk_rows(shape: &Conv) -> usize {
    let taps = shape.channels * shape.kernel * shape.kernel;
    let positions = shape.out_height() * shape.out_width();
    let rows = match CHUNK_ELEMENTS.checked_div(positions) {
        Some(rows) => rows,
        None => taps,
    };
    if rows == 0 {
        1
    } else if rows > taps {
        taps
    } else {
        rows
    }
}

/// The elements of scratch [`conv2d_weight_gradient`] takes for `shape`: the sums `dWᵀ`
/// (`C·K·K x filters`) and a chunk of patches.
pub(super) const fn scratch_len(shape: &Conv) -> usize {
    let taps = shape.channels * shape.kernel * shape.kernel;
    taps * shape.filters + chunk_rows(shape) * shape.out_height() * shape.out_width()
}

/// `dw (+)= Σ_b dZ_b·X̂_bᵀ` over `batch` images `x` (`batch x channels x height x width`,
/// unpadded: the padding is unrolled as zeros) and their output gradients `dz`
/// (`batch x filters x OH x OW`), with `isa`'s product kernels; `scratch` is
/// [`scratch_len`] long.
///
/// # Panics
///
/// When the lengths do not fit `shape` (a bug in the caller: [`super::conv`] checks them).
#[allow(clippy::too_many_arguments)]
pub(super) fn conv2d_weight_gradient<E: Element + Scalar>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dz: &[E],
    scratch: &mut [E],
    dw: &mut [E],
    accumulate: bool,
) {
    let taps = shape.channels * shape.kernel * shape.kernel;
    let positions = shape.out_height() * shape.out_width();
    let filters = shape.filters;
    assert_eq!(scratch.len(), scratch_len(shape), "{shape:?}'s scratch");
    let (sums, patches) = scratch.split_at_mut(taps * filters);
    let chunk = chunk_rows(shape);
    for b in 0..batch {
        let image = &x[b * shape.image_len()..][..shape.image_len()];
        let dz = &dz[b * shape.output_len()..][..shape.output_len()];
        let mut first = 0;
        while first < taps {
            let rows = first..(first + chunk).min(taps);
            let count = rows.len();
            // A 1 x 1 kernel without padding: the patches are the image's planes as they lie.
            let patches = if shape.kernel == 1 && shape.padding == 0 {
                &image[first * positions..rows.end * positions]
            } else {
                let patches = &mut patches[..count * positions];
                unroll_patches(shape, image, rows.clone(), patches);
                &*patches
            };
            // dWᵀ[rows] (+)= X̂[rows]·dZᵀ       (rows x positions)(positions x filters)
            gemm(
                isa,
                Product::TransposeRhs,
                count,
                filters,
                positions,
                patches,
                dz,
                &mut sums[first * filters..rows.end * filters],
                b > 0,
            );
            first = rows.end;
        }
    }
    if batch == 0 {
        if !accumulate {
            dw.fill(E::default());
        }
        return;
    }
    if accumulate {
        for (f, dw) in dw.chunks_exact_mut(taps).enumerate() {
            for (t, dw) in dw.iter_mut().enumerate() {
                *dw += sums[t * filters + f];
            }
        }
    } else {
        transpose(sums, taps, dw);
    }
}

/// Rows `rows` of the patches `X̂` of one image (`C·K·K x OH·OW`; row `(c, ky, kx)` holds input
/// `(c, oy + ky - padding, ox + kx - padding)` at column `(oy, ox)`, zero in the padding) into
/// `out`, `rows.len()` rows of `OH·OW`.
pub(super) fn unroll_patches<E: Element>(
    shape: &Conv,
    image: &[E],
    rows: Range<usize>,
    out: &mut [E],
) {
    let (k, p) = (shape.kernel, shape.padding);
    let (height, width) = (shape.height, shape.width);
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    for (row, out) in rows.zip(out.chunks_exact_mut(out_height * out_width)) {
        let (c, ky, kx) = (row / (k * k), row / k % k, row % k);
        // The output rows whose input row is inside the image: oy + ky - p in 0..height.
        let top = p.saturating_sub(ky).min(out_height);
        let bottom = (height + p).saturating_sub(ky).min(out_height).max(top);
        // The output columns whose input column is inside: ox + kx - p in 0..width.
        let left = p.saturating_sub(kx).min(out_width);
        let right = (width + p).saturating_sub(kx).min(out_width).max(left);
        out[..top * out_width].fill(E::default());
        out[bottom * out_width..].fill(E::default());
        if bottom > top && right > left {
            for oy in top..bottom {
                let line = &mut out[oy * out_width..][..out_width];
                line[..left].fill(E::default());
                line[right..].fill(E::default());
            }
            let plane = &image[c * height * width..][..height * width];
            let from = &plane[(top + ky - p) * width + left + kx - p..];
            let to = &mut out[top * out_width + left..];
            super::im2col::copy_rows(from, width, to, out_width, (bottom - top, right - left));
        } else {
            out[top * out_width..bottom * out_width].fill(E::default());
        }
    }
}
