//! The forward pass of a convolution, direct, the filters in the vector lanes: for many filters
//! on narrow images, where a row of outputs would leave lanes empty, and for strided
//! convolutions, whose windows it reads in place (no unrolled patches). Applies: any kernel
//! height and width, stride 1 or 2, an image padded beforehand, `f32`, AVX-512 or AVX2.

use super::gemm::Element;
use super::isa::{Isa, assert_isa};
use super::layout::transpose_uninit;
use super::simd::{Avx2F32, Avx512F32, Simd, array_from, finish};
use core::mem::MaybeUninit;

use crate::kernels::cast::assume_init_mut;
use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::{Epilogue, PrepaddedConv};

/// The strides the kernel takes: each is a constant of its own copy, so that the inputs a tile
/// broadcasts are at fixed offsets.
pub(crate) const FILTERS_IN_LANES_STRIDES: [usize; 2] = [1, 2];

/// Output positions per tile of [`conv_filters_tile`]: one accumulator each, plus the weights'
/// vector and a broadcast, within AVX2's 16 registers. (Two vectors of filters a tile, 12
/// positions with AVX-512 and 6 with AVX2, were 1.2-2.4x slower on Zen 4 with AVX-512 and no
/// faster with AVX2.)
pub(super) const FILTER_TILE_POSITIONS: usize = 12;

/// One tile of a convolution without padding, stride `STRIDE`, the filters in the lanes: filters
/// `f0..f0 + count` (`count <= LANES`) at the `NP` positions `ow0..ow0 + NP` of output row `oh`.
/// Each step `(c, ky, kx)` loads the step's weights of those filters from the transposed weights
/// `wt` (`[C·KH·KW][filters]`) and, per position, broadcasts the input it meets: `NP` fused
/// multiply-adds per load, every lane useful. The sums, plus the biases, are stored transposed,
/// one lane per output plane.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `shape.stride == STRIDE`; `x` holds `C·H·W` elements,
/// `wt` `C·KH·KW·filters`, `bias` `filters`, `out` `filters·OH·OW`; `f0 + count <= filters`,
/// `oh < OH`, `ow0 + NP <= OW`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn conv_filters_tile<S: Simd, const NP: usize, const STRIDE: usize>(
    shape: &PrepaddedConv,
    x: *const S::E,
    wt: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    (f0, count): (usize, usize),
    oh: usize,
    ow0: usize,
    epilogue: Epilogue,
) {
    let PrepaddedConv {
        channels,
        filters,
        kernel_height,
        kernel_width,
        height,
        width,
        ..
    } = *shape;
    let plane_out = shape.out_height() * shape.out_width();
    // SAFETY (whole body): the instruction set is present (the caller's contract). The weight
    // vectors read are lanes `f0..f0 + count` of rows `step < C·KH·KW` of `wt` (the others
    // masked off), the bias lanes `f0..f0 + count`; the inputs broadcast are `(c, oh·S + ky,
    // (ow0 + i)·S + kx)` with `oh·S + ky <= (OH - 1)·S + KH - 1 < H` and `(ow0 + i)·S + kx <=
    // (OW - 1)·S + KW - 1 < W` (the definition of `OH` and `OW`), inside `x`; the outputs
    // written are `(f0 + lane, oh, ow0 + i)`, inside `out`.
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
        // The sums start from 0 and take the bias last, as the unrolled patches' products do
        // (`Z = W·X̂`, then `Z + b`): a strided layer's outputs are the same bits whichever of
        // the two its plan takes.
        let mut acc = [S::zero(); NP];
        let mut weights = wt.add(f0);
        for c in 0..channels {
            for ky in 0..kernel_height {
                let row = x.add((c * height + oh * STRIDE + ky) * width + ow0 * STRIDE);
                for kx in 0..kernel_width {
                    let w = load(weights);
                    weights = weights.wrapping_add(filters);
                    let inputs = row.add(kx);
                    for (i, acc_i) in acc.iter_mut().enumerate() {
                        *acc_i = S::fma(S::splat(*inputs.add(i * STRIDE)), w, *acc_i);
                    }
                }
            }
        }
        let first = out.add(f0 * plane_out + oh * shape.out_width() + ow0);
        let b = load(bias.add(f0));
        let acc: [S::V; NP] = array_from(|p| finish::<S>(S::add(acc[p], b), epilogue));
        S::store_transposed(&acc, first, plane_out, count);
    }
}

/// Calls `$tile::<S, N $(, $more)*>` for a runtime `$n` in `1..FILTER_TILE_POSITIONS` (or
/// `..STEPS`).
macro_rules! filters_tile_sized {
    ($tile:ident $(<$($more:ident),*>)?, $n:expr, below $whole:expr, $($args:expr),*) => {
        match $n {
            1 => $tile::<S, 1 $($(, $more)*)?>($($args),*),
            2 => $tile::<S, 2 $($(, $more)*)?>($($args),*),
            3 => $tile::<S, 3 $($(, $more)*)?>($($args),*),
            4 => $tile::<S, 4 $($(, $more)*)?>($($args),*),
            5 => $tile::<S, 5 $($(, $more)*)?>($($args),*),
            6 => $tile::<S, 6 $($(, $more)*)?>($($args),*),
            7 => $tile::<S, 7 $($(, $more)*)?>($($args),*),
            // Only the sizes below a whole tile of `$whole` are instantiated.
            8 if const { $whole > 8 } => $tile::<S, 8 $($(, $more)*)?>($($args),*),
            9 if const { $whole > 9 } => $tile::<S, 9 $($(, $more)*)?>($($args),*),
            10 if const { $whole > 10 } => $tile::<S, 10 $($(, $more)*)?>($($args),*),
            11 if const { $whole > 11 } => $tile::<S, 11 $($(, $more)*)?>($($args),*),
            _ => unreachable!("a partial tile is smaller than a whole one"),
        }
    };
}
#[allow(unused_imports)]
pub(super) use filters_tile_sized;

/// The whole convolution of one image without padding, stride `STRIDE`, the filters in the
/// lanes: per vector of filters, per output row, tiles of [`FILTER_TILE_POSITIONS`] positions.
///
/// # Safety
///
/// As [`conv_filters_tile`], for the whole output; the slices checked by
/// [`conv2d_filters_in_lanes`].
#[inline(always)]
unsafe fn conv_filters_run<S: Simd, const STRIDE: usize>(
    shape: &PrepaddedConv,
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
                    conv_filters_tile::<S, NP, STRIDE>(
                        shape, x, wt, bias, out, filters, oh, ow0, epilogue,
                    );
                    ow0 += NP;
                }
                if ow0 < out_width {
                    filters_tile_sized!(
                        conv_filters_tile<STRIDE>,
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

// The entries below have a copy for each of these strides, and no other.
const _: () = assert!(matches!(FILTERS_IN_LANES_STRIDES, [1, 2]));

/// The kernel for one instruction set: one copy for each stride and epilogue, each a
/// constant there.
macro_rules! filters_in_lanes_entry {
    ($name:ident, $simd:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; the sizes and lengths
        /// checked by [`conv2d_filters_in_lanes`], and the stride one of
        /// [`FILTERS_IN_LANES_STRIDES`].
        #[target_feature(enable = $features)]
        unsafe fn $name(
            shape: &PrepaddedConv,
            x: &[f32],
            wt: &[f32],
            bias: &[f32],
            out: &mut [MaybeUninit<f32>],
            epilogue: Epilogue,
        ) {
            use Epilogue::{Identity, Relu};
            // SAFETY (each): forwarded from this function's contract; the stride matched.
            match (shape.stride, epilogue) {
                (1, Identity) => unsafe {
                    conv_filters_run::<$simd, 1>(shape, x, wt, bias, out, Identity)
                },
                (1, Relu) => unsafe { conv_filters_run::<$simd, 1>(shape, x, wt, bias, out, Relu) },
                (2, Identity) => unsafe {
                    conv_filters_run::<$simd, 2>(shape, x, wt, bias, out, Identity)
                },
                (2, Relu) => unsafe { conv_filters_run::<$simd, 2>(shape, x, wt, bias, out, Relu) },
                _ => unreachable!("a stride the filters-in-lanes kernel does not take"),
            }
        }
    };
}

filters_in_lanes_entry!(conv_filters_avx512_f32, Avx512F32, "avx512f");
filters_in_lanes_entry!(conv_filters_avx2_f32, Avx2F32, "avx2,fma");

/// A convolution of one image read as it is (padded beforehand where it has padding), `out =
/// conv(x, w) + bias`, from the transposed weights `wt` (`[C·KH·KW][filters]`), the filters in
/// the vector lanes, with `isa`.
///
/// # Panics
///
/// When the operands do not fit `shape` (see `PrepaddedConv::check_lengths`), the stride is
/// not one of [`FILTERS_IN_LANES_STRIDES`], `isa` is not present, or `E` is not `f32`.
pub(crate) fn conv2d_filters_in_lanes<E: Element>(
    isa: Isa,
    shape: &PrepaddedConv,
    x: &[E],
    wt: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    shape.check_lengths(x.len(), wt.len(), bias.len(), out.len());
    assert!(
        FILTERS_IN_LANES_STRIDES.contains(&shape.stride),
        "the filters-in-lanes kernel takes strides {FILTERS_IN_LANES_STRIDES:?}, not {}",
        shape.stride
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
    // SAFETY (both): lengths, sizes, stride and instruction set checked above.
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
