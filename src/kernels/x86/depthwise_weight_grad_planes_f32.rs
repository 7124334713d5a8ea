//! The weight gradient of a depthwise convolution over whole planes, 3 x 3 and 5 x 5 kernels,
//! `f32`: stride 1, output rows as long as the input's ([`Depthwise::whole_planes`]), the
//! plane's positions in the lanes.
//!
//! `dW[o][ky][kx] = Σ_images Σ_i dZ[o][i] · X[c][i + ky·W + kx - (P_h·W + P_w)]` over the output
//! positions `i` whose input column lies inside the row. Each image's input plane is copied
//! between zeros (so that every kernel step reads it at a fixed offset, the rows above and
//! below it zero), and `dZ` is multiplied, a vector at a time, by a vector of 0 and 1 per
//! kernel column (0 where that column would read past a row's end into the next row's values).
//! Each kernel step's sum stays in a vector across the batch's images and is added across its
//! lanes once per filter: one multiply-add per kernel step and vector of positions, no mask in
//! the inner loop. DS-CNN's 25 x 5 planes take 8 vectors of 16 (AVX-512) for 125 positions.
//!
//! The sums are in another order than the portable loops' (`kernels::depthwise`), so the
//! gradients differ in the last bits.

use super::isa::{Isa, assert_isa};
use super::simd::{Avx2F32, Avx512F32, Simd};
use crate::kernels::Depthwise;

/// The stack buffer of the column weights (`kernel width x` the output plane rounded up to
/// whole vectors), in `f32`.
const COLUMN_WEIGHTS: usize = 4096 + 5 * 16;

/// The stack buffer of one input plane between zeros, in `f32`.
const PADDED_PLANE: usize = 4096;

/// The input plane between zeros: the zeros before it, and its buffer's length (the last
/// vector of positions at the last kernel step reads up to its end).
const fn padded_plane(g: &Depthwise, lanes: usize) -> (usize, usize) {
    let width = g.input.1;
    let lead = g.padding.0 * width + g.padding.1;
    let plane = g.input.0 * width;
    let out_plane = g.output.0 * g.output.1;
    let reach = out_plane.div_ceil(lanes) * lanes + (g.kernel.0 - 1) * width + g.kernel.1 - 1;
    let len = if lead + plane > reach {
        lead + plane
    } else {
        reach
    };
    (lead, len)
}

/// Whether this kernel takes `g` with vectors of `lanes`: whole planes, a 3 x 3 or 5 x 5
/// kernel, padding no larger than the kernel, and the stack buffers large enough.
pub(crate) const fn applies(g: &Depthwise, lanes: usize) -> bool {
    let square = matches!(g.kernel, (3, 3) | (5, 5));
    if !g.whole_planes() || !square || g.padding.0 >= g.kernel.0 || g.padding.1 >= g.kernel.1 {
        return false;
    }
    let out_plane = g.output.0 * g.output.1;
    let columns = g.kernel.1 * out_plane.div_ceil(lanes) * lanes;
    columns <= COLUMN_WEIGHTS && padded_plane(g, lanes).1 <= PADDED_PLANE
}

/// `d_weight = Σ over the batch of dZ ⋆ X` (overwritten) for `batch` images `x` and their
/// output gradients `dz`, laid out as `kernels::depthwise`'s, with `isa`.
///
/// # Panics
///
/// When the kernel does not take `g` ([`applies`]), the lengths do not fit `g` and `batch`, or
/// the CPU does not have `isa`.
pub(crate) fn depthwise_weight_gradient_planes(
    isa: Isa,
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    dz: &[f32],
    d_weight: &mut [f32],
) {
    let lanes = super::lanes::<f32>(isa);
    assert!(
        applies(g, lanes),
        "{g:?} is not for the whole-planes SIMD kernel"
    );
    let (plane, out_plane) = (g.input.0 * g.input.1, g.output.0 * g.output.1);
    let filters = g.channels * g.multiplier;
    let taps = g.kernel.0 * g.kernel.1;
    assert!(
        x.len() == batch * g.channels * plane
            && dz.len() == batch * filters * out_plane
            && d_weight.len() == filters * taps,
        "depthwise weight gradient {g:?} of {batch} images: {} inputs, {} gradients, {} weights",
        x.len(),
        dz.len(),
        d_weight.len()
    );
    assert_isa(isa);
    // SAFETY (each): the CPU has the instruction set (asserted); the kernel takes the shape
    // and the lengths fit it (asserted above).
    match (isa, g.kernel) {
        (Isa::Avx512, (3, _)) => unsafe { avx512::<3, 9>(g, batch, x, dz, d_weight) },
        (Isa::Avx512, _) => unsafe { avx512::<5, 25>(g, batch, x, dz, d_weight) },
        (Isa::Avx2Fma, (3, _)) => unsafe { avx2::<3, 9>(g, batch, x, dz, d_weight) },
        (Isa::Avx2Fma, _) => unsafe { avx2::<5, 25>(g, batch, x, dz, d_weight) },
    }
}

/// # Safety
///
/// The CPU has AVX-512F; `g` and the lengths as [`depthwise_weight_gradient_planes`] checks,
/// `K` the kernel's size and `TAPS` its `K·K` steps.
#[target_feature(enable = "avx512f")]
unsafe fn avx512<const K: usize, const TAPS: usize>(
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    dz: &[f32],
    dw: &mut [f32],
) {
    // SAFETY: forwarded.
    unsafe { run::<Avx512F32, K, TAPS>(g, batch, x, dz, dw) }
}

/// # Safety
///
/// As [`avx512`], with AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<const K: usize, const TAPS: usize>(
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    dz: &[f32],
    dw: &mut [f32],
) {
    // SAFETY: forwarded.
    unsafe { run::<Avx2F32, K, TAPS>(g, batch, x, dz, dw) }
}

/// The kernel on vectors `S`, a `K x K` kernel of `TAPS` steps.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `g` (with `K`) and the lengths as
/// [`depthwise_weight_gradient_planes`] checks.
#[inline(always)]
unsafe fn run<S: Simd<E = f32>, const K: usize, const TAPS: usize>(
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    dz: &[f32],
    dw: &mut [f32],
) {
    const { assert!(TAPS == K * K) };
    let lanes = S::LANES;
    let width = g.input.1;
    let (plane, out_plane) = (g.input.0 * width, g.output.0 * g.output.1);
    let vectors = out_plane.div_ceil(lanes);
    let (lead, padded_len) = padded_plane(g, lanes);
    let filters = g.channels * g.multiplier;
    // 1 where kernel column `kx` reads inside the row at output position `i`, else 0.
    let mut columns = [0.0_f32; COLUMN_WEIGHTS];
    for kx in 0..K {
        for i in 0..out_plane {
            let column = i % width + kx;
            columns[kx * vectors * lanes + i] =
                if column >= g.padding.1 && column - g.padding.1 < width {
                    1.0
                } else {
                    0.0
                };
        }
    }
    let mut padded = [0.0_f32; PADDED_PLANE];
    // SAFETY: the CPU has `S`'s instruction set.
    let tail = unsafe { S::mask(out_plane - (vectors - 1) * lanes) };
    for o in 0..filters {
        let channel = o / g.multiplier;
        // SAFETY: the CPU has `S`'s instruction set (this function's contract).
        let mut sums = [unsafe { S::zero() }; TAPS];
        for b in 0..batch {
            let image = &x[(b * g.channels + channel) * plane..][..plane];
            padded[lead..lead + plane].copy_from_slice(image);
            let dz = &dz[(b * filters + o) * out_plane..][..out_plane];
            for v in 0..vectors {
                let start = v * lanes;
                // SAFETY: positions `start..start + lanes` are inside the plane but in the
                // last vector, whose load is masked to the plane's end; the CPU has `S`'s
                // instruction set.
                let d = unsafe {
                    if v + 1 < vectors {
                        S::load(dz.as_ptr().add(start))
                    } else {
                        S::load_masked(dz.as_ptr().add(start), tail)
                    }
                };
                for kx in 0..K {
                    // SAFETY: `columns` holds `K` rows of `vectors · lanes`; the CPU has `S`'s
                    // instruction set.
                    let d = unsafe {
                        S::fma(
                            d,
                            S::load(columns.as_ptr().add(kx * vectors * lanes + start)),
                            S::zero(),
                        )
                    };
                    for ky in 0..K {
                        let at = start + ky * width + kx;
                        debug_assert!(at + lanes <= padded_len);
                        // SAFETY: the last vector at the last kernel step ends within
                        // `padded_len` (see `padded_plane`), at most `PADDED_PLANE`; the CPU
                        // has `S`'s instruction set.
                        sums[ky * K + kx] = unsafe {
                            S::fma(d, S::load(padded.as_ptr().add(at)), sums[ky * K + kx])
                        };
                    }
                }
            }
        }
        let dw = &mut dw[o * K * K..][..K * K];
        for (dw, &sum) in dw.iter_mut().zip(&sums) {
            // SAFETY: the CPU has `S`'s instruction set (this function's contract).
            *dw = unsafe { S::sum(sum) };
        }
    }
}
