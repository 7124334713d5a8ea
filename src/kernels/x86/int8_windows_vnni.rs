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

/// One tile of [`dot_windows_i8_vnni`]: `R` filters at `V` vectors of 16 positions, the
/// positions `ow0..ow0 + count` of output row `oh`, `count <= 16·V`. `CHECKED` reads the
/// weights' last quads byte by byte (the tile holding the slice's last filter, where a quad
/// of the last window row would run past the slice's end).
///
/// # Safety
///
/// The CPU has AVX-512BW, VL, VNNI and VBMI; `weight.len() >= R·l` (`l` the window's
/// `channels·kh·kw` bytes) and, unless `CHECKED`, `weight.len() >= R·l + 3`;
/// `image.len() == channels·height·width`; `oh` and `ow0 + count - 1` are output positions of
/// `shape`; `1 <= count <= 16·V`; `stride <= 4`; `dots.len() >= (R - 1)·n + count`.
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni,avx512vbmi")]
unsafe fn dot_windows_tile<const R: usize, const V: usize, const CHECKED: bool>(
    (weight, weight_sums): (&[i8], &[i32]),
    (image, shape, pad): (&[i8], &WindowShape, i8),
    (oh, ow0, count, n): (usize, usize, usize, usize),
    dots: &mut [i32],
) {
    let WindowShape {
        channels,
        height,
        width,
        kernel: (kh, kw),
        stride,
        padding,
    } = *shape;
    let l = channels * kh * kw;
    let groups = kw.div_ceil(4);
    // SAFETY (whole body): the instruction sets are present (the contract). Image bytes are
    // read from row `iy < height` of channel `c < channels`, at the columns `ix` a mask lets
    // through, `0 <= ix < width`, so inside `image` (masked-off bytes are not read). Weights are
    // read at `f·l + (c·kh + ky)·kw + 4g`, 4 bytes, inside `weight` unless `CHECKED` (then byte
    // by byte below `weight.len()`). Dots are written at `f·n + 16v` for the lanes of the
    // `count` positions, inside `dots`.
    unsafe {
        let (wp, ip) = (weight.as_ptr(), image.as_ptr());
        // Lane i's byte j reads the column i·stride + j of the 64 loaded.
        let index: [u8; 64] = core::array::from_fn(|b| ((b / 4) * stride + b % 4) as u8);
        let index = _mm512_loadu_si512(index.as_ptr().cast());
        let offset = _mm512_set1_epi8(-128);
        let pad_bytes = _mm512_set1_epi8(pad);
        let quad = |at: usize| -> i32 {
            if CHECKED && at + 4 > weight.len() {
                let mut bytes = [0_u8; 4];
                for (i, byte) in bytes.iter_mut().enumerate() {
                    if let Some(&w) = weight.get(at + i) {
                        *byte = w as u8;
                    }
                }
                i32::from_le_bytes(bytes)
            } else {
                core::ptr::read_unaligned(wp.add(at).cast::<i32>())
            }
        };
        let mut acc = [[_mm512_setzero_si512(); V]; R];
        // The image column under byte 0 of vector v, before the group's 4g.
        let left: [isize; V] =
            core::array::from_fn(|v| ((ow0 + 16 * v) * stride) as isize - padding as isize);
        for g in 0..groups {
            // The bytes of the columns inside the kernel: 4g + j < kw.
            let inside: u64 = {
                let j = (kw - 4 * g).min(4);
                let lane = (1_u64 << j) - 1;
                (0..16).fold(0, |m, i| m | lane << (4 * i))
            };
            let masks: [u64; V] = core::array::from_fn(|v| {
                let start = left[v] + 4 * g as isize;
                bits(-start, width as isize - start)
            });
            for c in 0..channels {
                for ky in 0..kh {
                    let iy = (oh * stride + ky) as isize - padding as isize;
                    let mut data = [_mm512_setzero_si512(); V];
                    for (v, data) in data.iter_mut().enumerate() {
                        let raw = if iy >= 0 && (iy as usize) < height {
                            let row = ip.add((c * height + iy as usize) * width);
                            let start = left[v] + 4 * g as isize;
                            _mm512_mask_loadu_epi8(
                                pad_bytes,
                                masks[v],
                                row.wrapping_offset(start).cast(),
                            )
                        } else {
                            pad_bytes
                        };
                        *data = _mm512_maskz_permutexvar_epi8(
                            inside,
                            index,
                            _mm512_xor_si512(raw, offset),
                        );
                    }
                    let at = (c * kh + ky) * kw + 4 * g;
                    for (f, acc) in acc.iter_mut().enumerate() {
                        let w = _mm512_set1_epi32(quad(f * l + at));
                        for (acc, data) in acc.iter_mut().zip(&data) {
                            *acc = _mm512_dpbusd_epi32(*acc, *data, w);
                        }
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

/// `dots[f·n + i] = Σ_{c,ky,kx} weight[f][c][ky][kx] · x[c][oh·s + ky - p][(ow0 + i)·s + kx - p]`
/// for every filter `f < dots.len() / n` and position `i < n` of output row `oh`, the image
/// `x` laid out `[channels][height][width]`, `s` the stride and `p` the padding of `shape`,
/// the padding read as `pad`: the dot products of an int8 convolution's filters (laid out
/// `[filters][channels][kh][kw]`) with its windows, exact in `i32` (callers bound the window
/// so that no sum overflows). `weight_sums[f]` is filter `f`'s sum of weights. Tiles of 16
/// filters on 16 positions or 8 filters on 32, then of 4 and of 1.
///
/// # Panics
///
/// When the CPU lacks AVX-512 VNNI or VBMI (with `std`), the stride is not from 1 to 4
/// ([`dot_windows_i8_applies`]), or the sizes do not fit: `image` not `channels·height·width`
/// long, the positions not all in the output (or `n` is 0), `dots.len()` not a multiple of
/// `n`, `weight` or `weight_sums` shorter than the filters need.
pub(crate) fn dot_windows_i8_vnni(
    (weight, weight_sums): (&[i8], &[i32]),
    (image, shape, pad): (&[i8], &WindowShape, i8),
    (oh, ow0, n): (usize, usize, usize),
    dots: &mut [i32],
) {
    let (out_height, out_width) = shape.output();
    assert!(
        dot_windows_i8_applies(shape.stride)
            && image.len() == shape.image_len()
            && n > 0
            && dots.len().is_multiple_of(n)
            && oh < out_height
            && ow0 + n <= out_width,
        "{} dot products of the positions {ow0}..{} of output row {oh} of {shape:?} on an image \
         of {} bytes (the output is {out_height} x {out_width})",
        dots.len(),
        ow0 + n,
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
        let count = (n - i0).min(32);
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
            let position = (oh, ow0 + i0, count, n);
            let d = &mut dots[f0 * n + i0..];
            // Whether a quad of the tile's last window row can run past the weights' end.
            let checked = weight.len() < (f0 + tile) * l + 3;
            macro_rules! tile {
                ($r:literal, $v:literal) => {
                    if checked {
                        dot_windows_tile::<$r, $v, true>(w, image, position, d)
                    } else {
                        dot_windows_tile::<$r, $v, false>(w, image, position, d)
                    }
                };
            }
            // SAFETY: the instruction sets are present (detected, or checked above with std;
            // without std, the build targets them); the stride is at most 4 and the positions
            // are output positions (checked above); the tile's filters exist (`f0 + tile <=
            // filters`) so the weights from `f0` hold `tile·l` bytes, 3 more unless
            // `checked`; the dots from `f0·n + i0` hold `(tile - 1)·n + count`.
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
