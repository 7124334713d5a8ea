//! The dot products of int8 filters with the windows of an image laid out channels first, read
//! in place (no window copied), with AVX-512 VNNI and VBMI only, strides up to 4: the positions
//! of one output row in the lanes, four neighbouring columns of a window row in each lane's
//! four bytes.
//!
//! For the window row `(c, ky)` and the columns `4g..4g + 4` of the kernel, one masked load
//! takes the image row's bytes under 16 positions (the padding, outside the image, read as the
//! pad value), one `vpermb` lays out each position's four bytes in its lane (the columns past
//! the kernel's width zeroed), and each filter's four weights, broadcast, meet them in one
//! `vpdpbusd`. The image's bytes are offset by 128 to be unsigned; the offset's term
//! `128·Σ w[f]` is `128·weight_sums[f]`, subtracted at the end (exact modulo `2^32`, so exact
//! whenever the dot product fits an `i32`). A kernel 3 wide uses three of every four bytes;
//! the columns of a window row are read together, so no sum is reduced across lanes and no
//! window is interleaved byte by byte.

use core::arch::x86_64::*;

use crate::kernels::int8::{WindowShape, dot_windows_i8_applies};

/// The bits `lo..hi` of a 64-bit mask (none when `hi <= lo`).
#[inline(always)]
fn bits(lo: isize, hi: isize) -> u64 {
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

/// One tile of [`dot_windows_i8_vnni`]: `R` filters at `V` vectors of 16 positions, the
/// positions `ow0..ow0 + count` of output row `oh`, `count <= 16·V`, for filters of `C`
/// channels of `KH x KW`: sizes known to the compiler, so that every filter's weights are one
/// pointer plus a constant (a pointer per filter would take more registers than there are).
///
/// # Safety
///
/// The CPU has AVX-512BW, VL, VNNI and VBMI; `shape` has `C` channels and a `KH x KW` kernel;
/// `weight.len() >= R·l` (`l = C·KH·KW`); `image.len() == C·height·width`; `oh` and
/// `ow0 + count - 1` are output positions of `shape`; `1 <= count <= 16·V`; `stride <= 4`;
/// `dots.len() >= (R - 1)·n + count`.
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni,avx512vbmi")]
unsafe fn dot_windows_tile<
    const R: usize,
    const V: usize,
    const C: usize,
    const KH: usize,
    const KW: usize,
>(
    (weight, weight_sums): (&[i8], &[i32]),
    (image, shape, pad): (&[i8], &WindowShape, i8),
    (oh, ow0, count, n): (usize, usize, usize, usize),
    dots: &mut [i32],
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
    // The image column under byte 0 of vector v, group 0.
    let left: [isize; V] =
        core::array::from_fn(|v| ((ow0 + 16 * v) * stride) as isize - padding as isize);
    // SAFETY (whole body): the instruction sets are present (the contract). Image bytes are
    // read from row `iy < height` of channel `c < C`, at the columns `ix` a mask lets
    // through, `0 <= ix < width`, so inside `image` (masked-off bytes are not read). Weights
    // are read at `f·l + at`, `at = (c·KH + ky)·KW + 4g < l`, 4 bytes, inside `weight` for
    // `f < R - 1` (`(f + 1)·l + 3 <= R·l` for `l >= 3`, and `l < 3` is read by
    // `quad_at_end`) and for the last filter while `at + 4 <= last`, else by `quad_at_end`.
    // Dots are written at `f·n + 16v` for the lanes of the `count` positions, inside `dots`.
    unsafe {
        let (wp, ip) = (weight.as_ptr(), image.as_ptr());
        // Lane i's byte j reads the column i·stride + j of the 64 loaded.
        let index: [u8; 64] = core::array::from_fn(|b| ((b / 4) * stride + b % 4) as u8);
        let index = _mm512_loadu_si512(index.as_ptr().cast());
        let offset = _mm512_set1_epi8(-128);
        let pad_bytes = _mm512_set1_epi8(pad);
        let mut acc = [[_mm512_setzero_si512(); V]; R];
        // `acc[f] += data · (filter f's four weights from at)`, for every filter.
        let multiply_add = |acc: &mut [[__m512i; V]; R], data: &[__m512i; V], at: usize| {
            if at + 4 <= last && l >= 3 {
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
            let lay_out = |raw: __m512i| {
                _mm512_maskz_permutexvar_epi8(inside, index, _mm512_xor_si512(raw, offset))
            };
            for ky in 0..KH {
                let iy = (oh * stride + ky) as isize - padding as isize;
                let mut at = ky * KW + 4 * g;
                if iy >= 0 && (iy as usize) < height {
                    let mut row = ip.add(iy as usize * width);
                    for _ in 0..C {
                        let data: [__m512i; V] = core::array::from_fn(|v| {
                            lay_out(_mm512_mask_loadu_epi8(
                                pad_bytes,
                                masks[v],
                                row.wrapping_offset(left[v] + 4 * g as isize).cast(),
                            ))
                        });
                        multiply_add(&mut acc, &data, at);
                        row = row.wrapping_add(plane);
                        at += KH * KW;
                    }
                } else {
                    // A row of the padding: the same bytes for every channel.
                    let data = [lay_out(pad_bytes); V];
                    for _ in 0..C {
                        multiply_add(&mut acc, &data, at);
                        at += KH * KW;
                    }
                }
            }
        }
        for (f, acc) in acc.iter().enumerate() {
            let correction = _mm512_set1_epi32(weight_sums[f].wrapping_mul(128));
            for (v, acc) in acc.iter().enumerate() {
                let lanes = count.saturating_sub(16 * v).min(16);
                if lanes == 0 {
                    break;
                }
                let mask: __mmask16 = (((1_u32 << lanes) - 1) & 0xFFFF) as u16;
                _mm512_mask_storeu_epi32(
                    dots.as_mut_ptr().add(f * n + 16 * v),
                    mask,
                    _mm512_sub_epi32(*acc, correction),
                );
            }
        }
    }
}

/// `dots[f·n + i] = Σ_{c,ky,kx} weight[f][c][ky][kx] · x[c][oh·s + ky - p][ow·s + kx - p]`
/// for every filter `f < dots.len() / n` and the output positions `p0 + i = oh·out_width + ow`,
/// `i < n` (rows in order, then columns), the image `x` laid out `[channels][height][width]`,
/// `s` the stride and `p` the padding of `shape`, the padding read as `pad`: the dot products
/// of an int8 convolution's filters (laid out `[filters][channels][kh][kw]`) with its windows,
/// exact in `i32` (callers bound the window so that no sum overflows). `weight_sums[f]` is
/// filter `f`'s sum of weights. Each output row's run in tiles of 16 filters on 16 positions
/// or 8 filters on 32, then of 4 and of 1.
///
/// # Panics
///
/// When the CPU lacks AVX-512 VNNI or VBMI (with `std`), the stride is not from 1 to 4 or the
/// kernel wider than 64 ([`dot_windows_i8_applies`]), `shape`'s channels and kernel are not
/// `C` and `KH x KW`, or the sizes do not fit: `image` not `channels·height·width`
/// long, the positions not all in the output (or `n` is 0), `dots.len()` not a multiple of
/// `n`, `weight` or `weight_sums` shorter than the filters need.
pub(crate) fn dot_windows_i8_vnni<const C: usize, const KH: usize, const KW: usize>(
    (weight, weight_sums): (&[i8], &[i32]),
    (image, shape, pad): (&[i8], &WindowShape, i8),
    (p0, n): (usize, usize),
    dots: &mut [i32],
) {
    let (out_height, out_width) = shape.output();
    assert!(
        dot_windows_i8_applies(shape.stride, shape.kernel.1)
            && (shape.channels, shape.kernel) == (C, (KH, KW))
            && image.len() == shape.image_len()
            && n > 0
            && dots.len().is_multiple_of(n)
            && p0 + n <= out_height * out_width,
        "{} dot products of the positions {p0}..{} of {shape:?} on an image of {} bytes (the \
         output is {out_height} x {out_width})",
        dots.len(),
        p0 + n,
        image.len(),
    );
    let filters = dots.len() / n;
    let l = shape.window_len();
    assert!(
        weight.len() >= filters * l && weight_sums.len() >= filters,
        "{filters} filters of {l} weights, {} given, {} sums",
        weight.len(),
        weight_sums.len()
    );
    #[cfg(feature = "std")]
    assert!(
        std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512vbmi"),
        "the CPU lacks AVX-512BW, AVX-512VL, AVX-512 VNNI or AVX-512 VBMI"
    );
    let mut i0 = 0;
    while i0 < n {
        // The rest of this output row, at most two vectors of it.
        let (oh, ow0) = ((p0 + i0) / out_width, (p0 + i0) % out_width);
        let count = (n - i0).min(out_width - ow0).min(32);
        let wide = count > 16;
        let mut f0 = 0;
        while f0 < filters {
            let left = filters - f0;
            let tile = match (wide, left) {
                (false, 16..) => 16,
                (true, 8..) => 8,
                (_, 4..) => 4,
                _ => 1,
            };
            let w = (&weight[f0 * l..], &weight_sums[f0..]);
            let image = (image, shape, pad);
            let position = (oh, ow0, count, n);
            let d = &mut dots[f0 * n + i0..];
            macro_rules! tile {
                ($r:literal, $v:literal) => {
                    dot_windows_tile::<$r, $v, C, KH, KW>(w, image, position, d)
                };
            }
            // SAFETY: the instruction sets are present (detected, or checked above with std;
            // without std, the build targets them); the stride is at most 4 and the positions
            // are output positions of one row and the kernel at most 64 wide (checked above);
            // the tile's filters exist (`f0 + tile <= filters`) so the weights from `f0` hold
            // `tile·l` bytes; the dots from `f0·n + i0` hold `(tile - 1)·n + count`.
            unsafe {
                match (tile, wide) {
                    (16, _) => tile!(16, 1),
                    (8, _) => tile!(8, 2),
                    (4, true) => tile!(4, 2),
                    (4, false) => tile!(4, 1),
                    (_, true) => tile!(1, 2),
                    (_, false) => tile!(1, 1),
                }
            }
            f0 += tile;
        }
        i0 += count;
    }
}
