//! The product of int8 filters with an image laid out channels first, the positions in the
//! lanes (a 1 x 1 convolution of stride 1 without padding), with AVX-512 VNNI only: elsewhere
//! the int8 convolution copies windows for the dot products of `int8.rs`, which is faster
//! there than this layout without `vpdpbusd`.

use core::arch::x86_64::*;

/// The filters of one tile of [`dot_columns_i8_vnni`].
pub(crate) const COLUMNS_TILE: usize = 16;

/// `dots[f·n + p] = Σ_c weight[f·l + c] · x[c·stride + p]` for the `R` filters `f` of a tile
/// and the positions `p < n`, with AVX-512 VNNI: the product of int8 filters with images laid
/// out channels first (a 1 x 1 convolution), the positions in the lanes, so no sum is reduced
/// across lanes. Per 4 channels and 16 positions, the 4 rows' bytes are interleaved into
/// 16 groups of 4 (one per position), offset by 128 to be unsigned, and each filter's 4
/// weights, broadcast, meet them in one `vpdpbusd`; the offset's term `128·Σ_c w[f][c]` is
/// `128·weight_sums[f]`, subtracted at the end (exact modulo `2^32`, so exact whenever the dot
/// product fits an `i32`). Channels past `l` and positions past `n` read as nothing.
///
/// # Safety
///
/// The CPU has AVX-512BW, VL and VNNI; `weight.len() >= R·l`; `l >= 1`;
/// `x.len() >= (l - 1)·stride + n`; `dots.len() >= R·n`; `weight_sums[f]` is the sum of
/// filter `f`'s weights.
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_columns_tile_i8_vnni<const R: usize>(
    (weight, weight_sums): (&[i8], &[i32; R]),
    (x, stride): (&[i8], usize),
    (l, n): (usize, usize),
    dots: &mut [i32],
) {
    // SAFETY (whole body): the instruction sets are present (the contract). Row `c < l` of
    // `x` is read at `c·stride + p0` for the `count` bytes a mask selects, with
    // `p0 + count <= n`, inside `x` by the contract; weights are read at `f·l + c` for
    // `c + 4 <= l` (4 bytes) or one by one below `l`, inside `weight`; dots are written at
    // `f·n + p0` for the masked `count` lanes, inside `dots`.
    unsafe {
        let (wp, xp) = (weight.as_ptr(), x.as_ptr());
        let offset = _mm512_set1_epi8(-128);
        let mut p0 = 0;
        while p0 < n {
            let count = 16.min(n - p0);
            let mask: __mmask16 = if count == 16 {
                0xFFFF
            } else {
                (1 << count) - 1
            };
            let mut acc = [_mm512_setzero_si512(); R];
            let mut c = 0;
            while c < l {
                // Rows c..c + 4, those past `l` as zeros (their weights are zeros too).
                let row = |i: usize| {
                    if c + i < l {
                        _mm_maskz_loadu_epi8(mask, xp.add((c + i) * stride + p0))
                    } else {
                        _mm_setzero_si128()
                    }
                };
                let (a, b, e, d) = (row(0), row(1), row(2), row(3));
                let ab_low = _mm_unpacklo_epi8(a, b);
                let ab_high = _mm_unpackhi_epi8(a, b);
                let ed_low = _mm_unpacklo_epi8(e, d);
                let ed_high = _mm_unpackhi_epi8(e, d);
                // The four channels of positions 0-3, 4-7, 8-11 and 12-15.
                let groups = _mm512_inserti32x4::<3>(
                    _mm512_inserti32x4::<2>(
                        _mm512_inserti32x4::<1>(
                            _mm512_castsi128_si512(_mm_unpacklo_epi16(ab_low, ed_low)),
                            _mm_unpackhi_epi16(ab_low, ed_low),
                        ),
                        _mm_unpacklo_epi16(ab_high, ed_high),
                    ),
                    _mm_unpackhi_epi16(ab_high, ed_high),
                );
                let unsigned = _mm512_xor_si512(groups, offset);
                for (f, acc) in acc.iter_mut().enumerate() {
                    let quad = if c + 4 <= l {
                        core::ptr::read_unaligned(wp.add(f * l + c).cast::<i32>())
                    } else {
                        let mut bytes = [0_i8; 4];
                        for (i, byte) in bytes.iter_mut().enumerate().take(l - c) {
                            *byte = *wp.add(f * l + c + i);
                        }
                        i32::from_le_bytes(bytes.map(|b| b as u8))
                    };
                    *acc = _mm512_dpbusd_epi32(*acc, unsigned, _mm512_set1_epi32(quad));
                }
                c += 4;
            }
            for (f, acc) in acc.iter().enumerate() {
                let correction = _mm512_set1_epi32(weight_sums[f].wrapping_mul(128));
                _mm512_mask_storeu_epi32(
                    dots.as_mut_ptr().add(f * n + p0),
                    mask,
                    _mm512_sub_epi32(*acc, correction),
                );
            }
            p0 += count;
        }
    }
}

/// `dots[f·n + p] = Σ_c weight[f·l + c] · x[c·stride + p]` for every filter `f <
/// dots.len() / n` and position `p < n`: [`dot_columns_tile_i8_vnni`] on tiles of
/// [`COLUMNS_TILE`] filters (each interleaved quad of channels is shared by 16 filters), then
/// of 8, then single filters.
///
/// # Panics
///
/// When the CPU lacks AVX-512 VNNI (with `std`), or the slices are shorter than the sizes
/// need: `weight` than `filters·l`, `x` than `(l - 1)·stride + n`, `weight_sums` than the
/// filters; or `l` or `n` is 0, or `dots.len()` is not a multiple of `n`.
pub(crate) fn dot_columns_i8_vnni(
    (weight, weight_sums): (&[i8], &[i32]),
    (x, stride): (&[i8], usize),
    (l, n): (usize, usize),
    dots: &mut [i32],
) {
    assert!(
        l > 0 && n > 0 && dots.len().is_multiple_of(n),
        "{} dot products of {n} positions and {l} channels",
        dots.len()
    );
    let filters = dots.len() / n;
    assert!(
        weight.len() >= filters * l
            && weight_sums.len() >= filters
            && x.len() >= (l - 1) * stride + n,
        "{filters} filters of {l} weights ({} given, {} sums) on {l} rows of {n} at a stride of \
         {stride} ({} values given)",
        weight.len(),
        weight_sums.len(),
        x.len()
    );
    #[cfg(feature = "std")]
    assert!(
        std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni"),
        "the CPU lacks AVX-512BW, AVX-512VL or AVX-512 VNNI"
    );
    let mut f0 = 0;
    while f0 < filters {
        let tile = match filters - f0 {
            COLUMNS_TILE.. => COLUMNS_TILE,
            8.. => 8,
            _ => 1,
        };
        let (w, d) = (&weight[f0 * l..], &mut dots[f0 * n..]);
        // SAFETY: the instruction sets are present (detected, or checked above with std;
        // without std, the build targets them); the tile's filters exist (`f0 + tile <=
        // filters`), so the lengths checked above hold for the slices from `f0`.
        unsafe {
            if tile == COLUMNS_TILE {
                let sums: &[i32; COLUMNS_TILE] =
                    weight_sums[f0..f0 + COLUMNS_TILE].try_into().unwrap();
                dot_columns_tile_i8_vnni::<COLUMNS_TILE>((w, sums), (x, stride), (l, n), d);
            } else if tile == 8 {
                let sums: &[i32; 8] = weight_sums[f0..f0 + 8].try_into().unwrap();
                dot_columns_tile_i8_vnni::<8>((w, sums), (x, stride), (l, n), d);
            } else {
                let sums = [weight_sums[f0]];
                dot_columns_tile_i8_vnni::<1>((w, &sums), (x, stride), (l, n), d);
            }
        }
        f0 += tile;
    }
}
