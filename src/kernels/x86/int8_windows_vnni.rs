//! An int8 convolution's outputs, its windows read from an image laid out channels first in
//! place (no window copied), with AVX-512 VNNI and VBMI (and BW, VL) only, strides up to 4:
//! the positions of one output row (or of several rows 8 or fewer positions long) in the
//! lanes, four neighbouring columns of a window row in each lane's four bytes.
//!
//! For the window row `(c, ky)` and the columns `4g..4g + 4` of the kernel, one masked load
//! takes the image row's bytes under 16 positions (the padding, outside the image, read as the
//! pad value), one `vpermb` lays out each position's four bytes in its lane (the columns past
//! the kernel's width zeroed), and each filter's four weights, broadcast, meet them in one
//! `vpdpbusd`. The image's bytes are offset by 128 to be unsigned; the offset's term
//! `128·Σ w[f]` is `128·weight_sums[f]`, subtracted at the end (exact modulo `2^32`, so exact
//! whenever the dot product fits an `i32`). A kernel 3 wide uses three of every four bytes;
//! the columns of a window row are read together, so no sum is reduced across lanes and no
//! window is interleaved byte by byte. Each filter's sums are requantized in the registers
//! that hold them (its bias, multiplier and clamp) and stored as bytes.

use core::arch::x86_64::*;

use super::int8::add_bias_saturating_avx512;
use super::int8_requantize_avx512::UniformRequantization;
use crate::kernels::int8::{Requantization, WindowShape, windows_kernel_takes};

/// The bits `lo..hi` of a 64-bit mask (none when `hi <= lo`).
#[inline(always)]
pub(super) fn bits(lo: isize, hi: isize) -> u64 {
    let (lo, hi) = (lo.clamp(0, 64) as u32, hi.clamp(0, 64) as u32);
    if hi <= lo {
        0
    } else {
        (u64::MAX >> (64 - (hi - lo))) << lo
    }
}

/// A filter's four weights from `at`, those at or past `weight.len()` read as 0: the last
/// quads of a slice's last filter, which a plain 4-byte read would take past its end.
#[cold]
#[inline(never)]
fn quad_at_end(weight: &[i8], at: usize) -> i32 {
    let bytes: [u8; 4] = core::array::from_fn(|i| weight.get(at + i).map_or(0, |&w| w as u8));
    i32::from_le_bytes(bytes)
}

/// The positions of one vector of a tile: `rows` output rows from `(oh, ow)`, `len`
/// positions of each (`rows·len <= 16`; several rows only whole, `ow = 0` and
/// `len = out_width`), `at` positions after the call's first.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    oh: usize,
    ow: usize,
    rows: usize,
    len: usize,
    at: usize,
}

/// One tile of [`conv_windows_i8_vnni`]: `R` filters at the `V` vectors of positions `runs`
/// (one row a vector unless `SHORT_ROWS`, counted from `p0`), their dot products requantized
/// and stored, for filters of `C` channels of `KH x KW`: sizes known to the compiler, so that
/// every filter's weights are one pointer plus a constant (a pointer per filter would take
/// more registers than there are).
///
/// # Safety
///
/// The CPU has AVX-512BW, VL, VNNI and VBMI; `shape` has `C` channels and a `KH x KW` kernel;
/// `weight.len() >= R·l` (`l = C·KH·KW`); `image.len() == C·height·width`; each run's
/// positions are output positions of `shape`, `1 <= rows·len <= 16`, `rows == 1` unless
/// `SHORT_ROWS`; `stride <= 4`; `requantization`'s slices hold `R` values, the exponents in
/// `-31..=30`; `out.len() >= (R - 1)·out_plane + p0 + at + rows·len` for each run.
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni,avx512vbmi")]
unsafe fn conv_windows_tile<
    const R: usize,
    const V: usize,
    const C: usize,
    const KH: usize,
    const KW: usize,
    const SHORT_ROWS: bool,
>(
    (weight, weight_sums): (&[i8], &[i32]),
    (image, shape, pad): (&[i8], &WindowShape, i8),
    (runs, p0): ([Run; V], usize),
    (requantization, out, out_plane): (&Requantization, &mut [i8], usize),
) {
    let WindowShape {
        height,
        width,
        stride,
        padding,
        ..
    } = *shape;
    let l = C * KH * KW;
    let plane = height * width;
    // A quad of the last filter from `at` is inside `weight` when `at + 4 <= last`.
    let last = weight.len() - (R - 1) * l;
    // The image column under byte 0 of each vector's rows, group 0.
    let left: [isize; V] =
        core::array::from_fn(|v| (runs[v].ow * stride) as isize - padding as isize);
    // SAFETY (whole body): the instruction sets are present (the contract). Image bytes are
    // read from row `iy < height` of channel `c < C`, at the columns `ix` a mask lets
    // through, `0 <= ix < width`, so inside `image` (masked-off bytes are not read). Weights
    // are read at `f·l + at`, `at = (c·KH + ky)·KW + 4g < l`, 4 bytes, while `at + 4 <=
    // last`: then `f·l + at + 4 <= (R - 1)·l + last = weight.len()` for every `f < R`; else
    // byte by byte by `quad_at_end`.
    // Outputs are written at `f·out_plane + p0 + at` for the lanes of a run's positions,
    // inside `out`; the requantization's exponents are in range (the contract).
    unsafe {
        let (wp, ip) = (weight.as_ptr(), image.as_ptr());
        // Lane i's byte j reads the column i·stride + j of the 64 loaded; a run's row s,
        // from lane s·len, reads its own load with the lanes counted from there.
        let index: [u8; 64] = core::array::from_fn(|b| ((b / 4) * stride + b % 4) as u8);
        let index = _mm512_loadu_si512(index.as_ptr().cast());
        let offset = _mm512_set1_epi8(-128);
        let pad_bytes = _mm512_set1_epi8(pad);
        let mut acc = [[_mm512_setzero_si512(); V]; R];
        // `acc[f] += data · (filter f's four weights from at)`, for every filter.
        let multiply_add = |acc: &mut [[__m512i; V]; R], data: &[__m512i; V], at: usize| {
            if at + 4 <= last {
                let quads = wp.add(at);
                for (f, acc) in acc.iter_mut().enumerate() {
                    let w = core::ptr::read_unaligned(quads.add(f * l).cast::<i32>());
                    let w = _mm512_set1_epi32(w);
                    for (acc, data) in acc.iter_mut().zip(data) {
                        *acc = _mm512_dpbusd_epi32(*acc, *data, w);
                    }
                }
            } else {
                for (f, acc) in acc.iter_mut().enumerate() {
                    let w = _mm512_set1_epi32(quad_at_end(weight, f * l + at));
                    for (acc, data) in acc.iter_mut().zip(data) {
                        *acc = _mm512_dpbusd_epi32(*acc, *data, w);
                    }
                }
            }
        };
        for g in 0..KW.div_ceil(4) {
            // The loaded bytes inside the image row, per vector, and the bytes of the
            // columns inside the kernel (4g + j < KW).
            let masks: [u64; V] = core::array::from_fn(|v| {
                let start = left[v] + 4 * g as isize;
                bits(-start, width as isize - start)
            });
            let inside: u64 = {
                let lane = (1_u64 << (KW - 4 * g).min(4)) - 1;
                (0..16).fold(0, |m, i| m | lane << (4 * i))
            };
            for ky in 0..KH {
                let at = ky * KW + 4 * g;
                if !SHORT_ROWS {
                    // One row a vector: one load and one `vpermb` each.
                    let rows: [Option<*const i8>; V] = core::array::from_fn(|v| {
                        let iy = (runs[v].oh * stride + ky) as isize - padding as isize;
                        (iy >= 0 && (iy as usize) < height).then(|| {
                            ip.wrapping_add(iy as usize * width)
                                .wrapping_offset(left[v] + 4 * g as isize)
                        })
                    });
                    let mut at = at;
                    for c in 0..C {
                        let data: [__m512i; V] = core::array::from_fn(|v| {
                            let raw = match rows[v] {
                                Some(row) => _mm512_mask_loadu_epi8(
                                    pad_bytes,
                                    masks[v],
                                    row.wrapping_add(c * plane).cast(),
                                ),
                                None => pad_bytes,
                            };
                            _mm512_maskz_permutexvar_epi8(
                                inside,
                                index,
                                _mm512_xor_si512(raw, offset),
                            )
                        });
                        multiply_add(&mut acc, &data, at);
                        at += KH * KW;
                    }
                } else {
                    // Whole short rows, several a vector: a load and a `vpermb` per row,
                    // each into its row's lanes. Per row: where it starts in channel 0 (none
                    // in the padding), its lanes, its index.
                    let mut starts = [[None::<*const i8>; 16]; V];
                    let mut lanes = [[0_u64; 16]; V];
                    let mut indices = [[_mm512_setzero_si512(); 16]; V];
                    for (v, run) in runs.iter().enumerate() {
                        for s in 0..run.rows {
                            let iy = ((run.oh + s) * stride + ky) as isize - padding as isize;
                            starts[v][s] = (iy >= 0 && (iy as usize) < height).then(|| {
                                ip.wrapping_add(iy as usize * width)
                                    .wrapping_offset(left[v] + 4 * g as isize)
                            });
                            let first = 4 * (s * run.len) as isize;
                            lanes[v][s] = bits(first, first + 4 * run.len as isize) & inside;
                            indices[v][s] = _mm512_sub_epi8(
                                index,
                                _mm512_set1_epi8((s * run.len * stride) as i8),
                            );
                        }
                    }
                    let mut at = at;
                    for c in 0..C {
                        let data: [__m512i; V] = core::array::from_fn(|v| {
                            let mut data = _mm512_setzero_si512();
                            for s in 0..runs[v].rows {
                                let raw = match starts[v][s] {
                                    Some(row) => _mm512_mask_loadu_epi8(
                                        pad_bytes,
                                        masks[v],
                                        row.wrapping_add(c * plane).cast(),
                                    ),
                                    None => pad_bytes,
                                };
                                data = _mm512_mask_permutexvar_epi8(
                                    data,
                                    lanes[v][s],
                                    indices[v][s],
                                    _mm512_xor_si512(raw, offset),
                                );
                            }
                            data
                        });
                        multiply_add(&mut acc, &data, at);
                        at += KH * KW;
                    }
                }
            }
        }
        let (bias, multiplier, exponent) = requantization.parameters;
        let range = requantization.zero_and_range;
        for (f, acc) in acc.iter().enumerate() {
            let correction = _mm512_set1_epi32(weight_sums[f].wrapping_mul(128));
            let requantize = UniformRequantization::new((multiplier[f], exponent[f]), range);
            for (run, acc) in runs.iter().zip(acc) {
                let dot = _mm512_sub_epi32(*acc, correction);
                let sum = add_bias_saturating_avx512(dot, bias[f]);
                let q = requantize.apply(sum);
                let lanes = run.rows * run.len;
                let mask: __mmask16 = (((1_u32 << lanes) - 1) & 0xFFFF) as u16;
                _mm_mask_storeu_epi8(
                    out.as_mut_ptr().add(f * out_plane + p0 + run.at),
                    mask,
                    _mm512_cvtepi32_epi8(q),
                );
            }
        }
    }
}

/// `out[f·out_plane + p] = requantize(Σ_{c,ky,kx} weight[f][c][ky][kx] · x[c][oh·s + ky -
/// p][ow·s + kx - p])` for every filter `f` and the output positions `p = oh·out_width + ow`
/// from `p0` to `p0 + n` (`out_plane = out_height·out_width`), the image `x` laid out
/// `[channels][height][width]`, `s` the stride and `p` the padding of `shape`, the padding read
/// as `pad`: an int8 convolution's outputs, its filters laid out `[filters][channels][kh][kw]`,
/// the dot products exact in `i32` (callers bound the window so that no sum overflows), then
/// filter `f`'s bias, multiplier and clamp (`requantization`, as `requantize_i8`).
/// `weight_sums[f]` is filter `f`'s sum of weights. Tiles of 16 filters on one vector of 16
/// positions or 8 filters on two, then of 4, 2 and 1; a vector holds up to 16 positions of
/// one output row, or (one vector a tile) as many whole rows as it can when they are 8 or
/// fewer positions long.
///
/// # Panics
///
/// When the CPU lacks AVX-512 VNNI or VBMI (with `std`), the stride is not from 1 to 4 or the
/// kernel wider than 64 ([`windows_kernel_takes`]), `shape`'s channels and kernel are not
/// `C` and `KH x KW`, an exponent is outside `-31..=30`, or the sizes do not fit: `image` not
/// `channels·height·width` long, the positions not all in the output (or `n` is 0), `out` not
/// whole planes of the output, `weight`, `weight_sums` or the requantization's slices
/// shorter than the filters need.
pub(crate) fn conv_windows_i8_vnni<const C: usize, const KH: usize, const KW: usize>(
    (weight, weight_sums): (&[i8], &[i32]),
    requantization: &Requantization,
    (image, shape, pad): (&[i8], &WindowShape, i8),
    (p0, n): (usize, usize),
    out: &mut [i8],
) {
    let (out_height, out_width) = shape.output();
    let out_plane = out_height * out_width;
    assert!(
        windows_kernel_takes(shape.stride, shape.kernel.1)
            && (shape.channels, shape.kernel) == (C, (KH, KW))
            && image.len() == shape.image_len()
            && n > 0
            && out_plane > 0
            && out.len().is_multiple_of(out_plane)
            && p0 + n <= out_plane,
        "the positions {p0}..{} of {shape:?} on an image of {} bytes into {} outputs (the \
         output is {out_height} x {out_width})",
        p0 + n,
        image.len(),
        out.len(),
    );
    let filters = out.len() / out_plane;
    let l = shape.window_len();
    check_filters((weight, Some(weight_sums)), requantization, filters, l);
    let (bias, multiplier, exponent) = requantization.parameters;
    let mut i0 = 0;
    while i0 < n {
        // The next one or two vectors of positions.
        let (oh, ow) = ((p0 + i0) / out_width, (p0 + i0) % out_width);
        let whole_rows = (n - i0) / out_width;
        let mut runs = [Run::default(); 2];
        let short_rows = ow == 0 && out_width <= 8 && whole_rows >= 2;
        let vectors = if short_rows {
            runs[0] = Run {
                oh,
                ow: 0,
                rows: (16 / out_width).min(whole_rows),
                len: out_width,
                at: i0,
            };
            1
        } else {
            let count = (n - i0).min(out_width - ow).min(32);
            let first = count.min(16);
            runs[0] = Run {
                oh,
                ow,
                rows: 1,
                len: first,
                at: i0,
            };
            runs[1] = Run {
                oh,
                ow: ow + first,
                rows: 1,
                len: count - first,
                at: i0 + first,
            };
            if count > 16 { 2 } else { 1 }
        };
        let wide = vectors == 2;
        let mut f0 = 0;
        while f0 < filters {
            let left = filters - f0;
            let tile = match (wide, left) {
                (false, 16..) => 16,
                (true, 8..) => 8,
                (_, 4..) => 4,
                (_, 2..) => 2,
                _ => 1,
            };
            let w = (&weight[f0 * l..], &weight_sums[f0..]);
            let image = (image, shape, pad);
            let tile_requantization = Requantization {
                parameters: (&bias[f0..], &multiplier[f0..], &exponent[f0..]),
                zero_and_range: requantization.zero_and_range,
            };
            let o = (&tile_requantization, &mut out[f0 * out_plane..], out_plane);
            macro_rules! tile {
                ($r:literal, 1) => {
                    if short_rows {
                        conv_windows_tile::<$r, 1, C, KH, KW, true>(w, image, ([runs[0]], p0), o)
                    } else {
                        conv_windows_tile::<$r, 1, C, KH, KW, false>(w, image, ([runs[0]], p0), o)
                    }
                };
                ($r:literal, 2) => {
                    conv_windows_tile::<$r, 2, C, KH, KW, false>(w, image, (runs, p0), o)
                };
            }
            // SAFETY: the instruction sets are present (detected, or checked above with std;
            // without std, the build targets them); the stride is at most 4 and the runs'
            // positions are output positions, at most 16 a vector (checked above, and made
            // so); the tile's filters exist (`f0 + tile <= filters`) so the weights from `f0`
            // hold `tile·l` bytes, the requantization's slices `tile` values (the exponents
            // checked above), and the outputs from `f0·out_plane` `tile` whole planes.
            unsafe {
                match (tile, wide) {
                    (16, _) => tile!(16, 1),
                    (8, _) => tile!(8, 2),
                    (4, true) => tile!(4, 2),
                    (4, false) => tile!(4, 1),
                    (2, true) => tile!(2, 2),
                    (2, false) => tile!(2, 1),
                    (_, true) => tile!(1, 2),
                    (_, false) => tile!(1, 1),
                }
            }
            f0 += tile;
        }
        i0 += runs[..vectors]
            .iter()
            .map(|run| run.rows * run.len)
            .sum::<usize>();
    }
}

/// Checks what the int8 convolution kernels of AVX-512 VNNI and VBMI (the windows' and the
/// quads' kernels) need of their `filters` filters of `l` weights: the weights, their sums
/// (where the caller gives them) and the requantization's slices long enough, the exponents in `-31..=30`, and (with `std`)
/// the CPU's instruction sets.
///
/// # Panics
///
/// When one of them does not hold, with a message naming it.
pub(super) fn check_filters(
    (weight, weight_sums): (&[i8], Option<&[i32]>),
    requantization: &Requantization,
    filters: usize,
    l: usize,
) {
    let (bias, multiplier, exponent) = requantization.parameters;
    let sums = weight_sums.map_or(filters, <[i32]>::len);
    assert!(
        weight.len() >= filters * l
            && sums >= filters
            && bias.len() >= filters
            && multiplier.len() >= filters
            && exponent.len() >= filters,
        "{filters} filters of {l} weights, {} given, {sums} sums, {} biases, {} multipliers, \
         {} exponents",
        weight.len(),
        bias.len(),
        multiplier.len(),
        exponent.len(),
    );
    assert!(
        exponent[..filters].iter().all(|e| (-31..=30).contains(e)),
        "a multiplier's exponent is from -31 to 30"
    );
    #[cfg(feature = "std")]
    assert!(
        std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512vbmi"),
        "the CPU lacks AVX-512BW, AVX-512VL, AVX-512 VNNI or AVX-512 VBMI"
    );
}
