//! The forward pass of a stride-1 convolution, direct, the filters in the vector lanes: for many
//! filters on narrow images, where a row of outputs would leave lanes empty. Applies: any kernel
//! size, an image padded beforehand, `f32`, AVX-512 or AVX2.

use super::conv_direct::conv_forward_entry;
use super::gemm::Element;
use super::isa::{Isa, assert_isa};
use super::layout::transpose_uninit;
use super::simd::{Avx2F32, Avx512F32, Simd, array_from, finish};
use core::mem::MaybeUninit;

use crate::kernels::cast::assume_init_mut;
use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::{Conv, Epilogue};

/// Output positions per tile of [`conv_filters_tile`]: one accumulator each, plus the weights'
/// vector and a broadcast, within AVX2's 16 registers.
pub(super) const FILTER_TILE_POSITIONS: usize = 12;

/// One tile of a stride-1 convolution without padding, the filters in the lanes: filters
/// `f0..f0 + count` (`count <= LANES`) at the `NP` positions `ow0..ow0 + NP` of output row `oh`.
/// Each step `(c, ky, kx)` loads the step's weights of those filters from the transposed weights
/// `wt` (`[C·K·K][filters]`) and, per position, broadcasts the input it meets: `NP` fused
/// multiply-adds per load, every lane useful. The sums are stored transposed, one lane per
/// output plane.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `x` holds `C·H·W` elements, `wt` `C·K·K·filters`, `bias`
/// `filters`, `out` `filters·OH·OW`; `f0 + count <= filters`, `oh < OH`, `ow0 + NP <= OW`; no
/// padding.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn conv_filters_tile<S: Simd, const NP: usize>(
    shape: &Conv,
    x: *const S::E,
    wt: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    (f0, count): (usize, usize),
    oh: usize,
    ow0: usize,
    epilogue: Epilogue,
) {
    let Conv {
        channels,
        filters,
        kernel,
        height,
        width,
        ..
    } = *shape;
    let plane_out = shape.out_height() * shape.out_width();
    // SAFETY (whole body): the instruction set is present (the caller's contract). The weight
    // vectors read are lanes `f0..f0 + count` of rows `step < C·K·K` of `wt` (the others masked
    // off), the bias lanes `f0..f0 + count`; the inputs broadcast are `(c, oh + ky, ow0 + i +
    // kx)` with `oh + ky < OH + K - 1 = H` and `ow0 + i + kx < OW + K - 1 = W` (no padding),
    // inside `x`; the outputs written are `(f0 + lane, oh, ow0 + i)`, inside `out`.
    unsafe {
        let mask = S::mask(count);
        let full = count == S::LANES;
        let load = |p: *const S::E| {
            if full {
                S::load(p)
            } else {
                S::load_masked(p, mask)
            }
        };
        let mut acc = [load(bias.add(f0)); NP];
        let mut weights = wt.add(f0);
        for c in 0..channels {
            for ky in 0..kernel {
                let row = x.add((c * height + oh + ky) * width + ow0);
                for kx in 0..kernel {
                    let w = load(weights);
                    weights = weights.wrapping_add(filters);
                    let inputs = row.add(kx);
                    for (i, acc_i) in acc.iter_mut().enumerate() {
                        *acc_i = S::fma(S::splat(*inputs.add(i)), w, *acc_i);
                    }
                }
            }
        }
        let first = out.add(f0 * plane_out + oh * shape.out_width() + ow0);
        let acc: [S::V; NP] = array_from(|p| finish::<S>(acc[p], epilogue));
        S::store_transposed(&acc, first, plane_out, count);
    }
}

/// Calls `$tile::<S, N>` for a runtime `$n` in `1..FILTER_TILE_POSITIONS` (or `..STEPS`).
macro_rules! filters_tile_sized {
    ($tile:ident, $n:expr, below $whole:expr, $($args:expr),*) => {
        match $n {
            1 => $tile::<S, 1>($($args),*),
            2 => $tile::<S, 2>($($args),*),
            3 => $tile::<S, 3>($($args),*),
            4 => $tile::<S, 4>($($args),*),
            5 => $tile::<S, 5>($($args),*),
            6 => $tile::<S, 6>($($args),*),
            7 => $tile::<S, 7>($($args),*),
            // Only the sizes below a whole tile of `$whole` are instantiated.
            8 if const { $whole > 8 } => $tile::<S, 8>($($args),*),
            9 if const { $whole > 9 } => $tile::<S, 9>($($args),*),
            10 if const { $whole > 10 } => $tile::<S, 10>($($args),*),
            11 if const { $whole > 11 } => $tile::<S, 11>($($args),*),
            _ => unreachable!("a partial tile is smaller than a whole one"),
        }
    };
}
#[allow(unused_imports)]
pub(super) use filters_tile_sized;

/// The whole stride-1 convolution of one image without padding, the filters in the lanes: per
/// vector of filters, per output row, tiles of [`FILTER_TILE_POSITIONS`] positions.
///
/// # Safety
///
/// As [`conv_filters_tile`], for the whole output; the slices checked by
/// [`conv2d_stride1_filters`].
#[inline(always)]
pub(super) unsafe fn conv_filters_run<S: Simd>(
    shape: &Conv,
    x: &[S::E],
    wt: &[S::E],
    bias: &[S::E],
    out: &mut [MaybeUninit<S::E>],
    epilogue: Epilogue,
) {
    const NP: usize = FILTER_TILE_POSITIONS;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let (x, wt, bias) = (x.as_ptr(), wt.as_ptr(), bias.as_ptr());
    let out = out.as_mut_ptr().cast::<S::E>();
    for f0 in (0..shape.filters).step_by(S::LANES) {
        let filters = (f0, S::LANES.min(shape.filters - f0));
        for oh in 0..out_height {
            // SAFETY: every tile lies inside the output: f0 + count <= filters, oh < OH, and
            // ow0 + NP <= OW (the last tile takes what is left).
            unsafe {
                let mut ow0 = 0;
                while ow0 + NP <= out_width {
                    conv_filters_tile::<S, NP>(shape, x, wt, bias, out, filters, oh, ow0, epilogue);
                    ow0 += NP;
                }
                if ow0 < out_width {
                    filters_tile_sized!(
                        conv_filters_tile,
                        out_width - ow0,
                        below NP,
                        shape,
                        x,
                        wt,
                        bias,
                        out,
                        filters,
                        oh,
                        ow0,
                        epilogue
                    );
                }
            }
        }
    }
}

conv_forward_entry!(
    conv_filters_avx512_f32,
    conv_filters_run,
    Avx512F32,
    f32,
    "avx512f"
);
conv_forward_entry!(
    conv_filters_avx2_f32,
    conv_filters_run,
    Avx2F32,
    f32,
    "avx2,fma"
);

/// A stride-1 convolution of one image without padding, `out = conv(x, w) + bias`, from the
/// transposed weights `wt` (`[C·K·K][filters]`), the filters in the vector lanes (see
/// [`filters_in_lanes`]), with `isa`.
///
/// # Panics
///
/// As [`conv2d_stride1`](super::conv_direct::conv2d_stride1), and when the padding is not 0.
pub(crate) fn conv2d_stride1_filters<E: Element>(
    isa: Isa,
    shape: &Conv,
    x: &[E],
    wt: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    shape.check_lengths(x.len(), wt.len(), bias.len(), out.len());
    assert_eq!(
        shape.padding, 0,
        "the filters-in-lanes kernel takes a padded image"
    );
    assert_isa(isa);
    let (Some(x), Some(wt), Some(bias), Some(out)) = (
        same_type_slice::<E, f32>(x),
        same_type_slice::<E, f32>(wt),
        same_type_slice::<E, f32>(bias),
        same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<f32>>(out),
    ) else {
        unreachable!("the SIMD convolution kernels take f32");
    };
    // SAFETY (both): lengths, sizes and instruction set checked above.
    match isa {
        Isa::Avx512 => unsafe { conv_filters_avx512_f32(shape, x, wt, bias, out, epilogue) },
        Isa::Avx2Fma => unsafe { conv_filters_avx2_f32(shape, x, wt, bias, out, epilogue) },
    }
}

/// Runs `f` on the weights `w` (`[filters][C·K·K]`) transposed and on `padded_len` zeros (where
/// an image is padded), both in `scratch`, which need not be initialized: the scratch of the
/// filters-in-lanes forward pass.
///
/// # Panics
///
/// When `w` and the zeros do not fit in `scratch`, or `filters` does not divide `w.len()`.
pub(crate) fn with_transposed_filters<E: Element, R>(
    scratch: &mut [MaybeUninit<E>],
    w: &[E],
    filters: usize,
    padded_len: usize,
    f: impl FnOnce(&[E], &mut [E]) -> R,
) -> R {
    let (wt, rest) = scratch.split_at_mut(w.len());
    let wt = transpose_uninit(w, filters, wt);
    let zeros = &mut rest[..padded_len];
    zeros.fill(MaybeUninit::new(E::default()));
    // SAFETY: every element of `zeros` was just written.
    let zeros = unsafe { assume_init_mut(zeros) };
    f(wt, zeros)
}
