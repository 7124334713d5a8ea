//! Max pooling over 2 x 2 windows with stride 2, forward and backward, with AVX2: 8 windows of a
//! row pair a step, each pair of rows de-interleaved into even and odd columns. Applies: `f32`,
//! any plane; the same bits as the portable loops and the AVX-512 kernel (the first maximum of
//! each window, or its first NaN).

use super::simd::mask_avx2_ps;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Up to 8 of a row pair's windows from window `j0`: the four inputs of each (`top[2j]`,
/// `top[2j + 1]`, `bottom[2j]`, `bottom[2j + 1]`) and their first maximum.
///
/// # Safety
///
/// The CPU has AVX2; both rows hold at least `2·(j0 + count)` values, `0 < count <= 8`. The
/// pointer to a row's second vector may lie past its end when `count <= 4` (its mask is then
/// empty): it is formed with `wrapping_add` and not read.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn windows(
    (top, bottom): (&[f32], &[f32]),
    j0: usize,
    count: usize,
) -> ([__m256; 4], __m256) {
    // SAFETY: as the contract says; the loads are masked to values `2·j0 .. 2·(j0 + count)`.
    unsafe {
        let load = |r: &[f32]| {
            let (from, next) = (r.as_ptr().add(2 * j0), r.as_ptr().wrapping_add(2 * j0 + 8));
            if count == 8 {
                (_mm256_loadu_ps(from), _mm256_loadu_ps(next))
            } else {
                let low = mask_avx2_ps((2 * count).min(8));
                let high = mask_avx2_ps((2 * count).saturating_sub(8));
                (
                    _mm256_maskload_ps(from, low),
                    _mm256_maskload_ps(next, high),
                )
            }
        };
        let row = |r: &[f32]| {
            let (a, b) = load(r);
            // [a0 a2 b0 b2 | a4 a6 b4 b6], then its 64-bit quarters in the order 0, 2, 1, 3.
            let even = _mm256_shuffle_ps::<0x88>(a, b);
            let odd = _mm256_shuffle_ps::<0xDD>(a, b);
            let order =
                |v: __m256| _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(v)));
            (order(even), order(odd))
        };
        let (t0, t1) = row(top);
        let (b0, b1) = row(bottom);
        let inputs = [t0, t1, b0, b1];
        (inputs, first_maximum_of_windows(inputs))
    }
}

/// Each lane's first maximum of the windows' four inputs in order, or its first NaN: max
/// pooling's rule, bit for bit (as `max_pool_2x2_avx512::first_maximum_of_windows`).
///
/// # Safety
///
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn first_maximum_of_windows([t0, t1, b0, b1]: [__m256; 4]) -> __m256 {
    // `v` replaces `best` where `best` is a number and `v` is larger or a NaN.
    let larger = |best: __m256, v: __m256| {
        let best_is_number = _mm256_cmp_ps::<_CMP_ORD_Q>(best, best);
        let take = _mm256_and_ps(best_is_number, _mm256_cmp_ps::<_CMP_NLE_UQ>(v, best));
        _mm256_blendv_ps(best, v, take)
    };
    // `max(v, best)` returns its second operand on ties and differs from `larger` only
    // where a NaN comes after a number.
    let any_nan = _mm256_or_ps(
        _mm256_cmp_ps::<_CMP_UNORD_Q>(t0, t1),
        _mm256_cmp_ps::<_CMP_UNORD_Q>(b0, b1),
    );
    if _mm256_movemask_ps(any_nan) == 0 {
        _mm256_max_ps(b1, _mm256_max_ps(b0, _mm256_max_ps(t1, t0)))
    } else {
        larger(larger(larger(t0, t1), b0), b1)
    }
}

/// Max pooling of planes of `height x width` (`x` holds `planes` whole planes) into planes of
/// `height / 2 x width / 2`, an odd last row or column left out.
///
/// # Safety
///
/// The CPU has AVX2; `x` holds `planes` planes of `height x width`, `out` as many of
/// `height / 2 x width / 2`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn max_pool_2x2_planes_avx2(
    x: &[f32],
    (height, width): (usize, usize),
    out: &mut [MaybeUninit<f32>],
    planes: usize,
) {
    let (out_height, out_width) = (height / 2, width / 2);
    if out_width == 0 || out_height == 0 {
        return; // nothing to write (and no chunks of 0 elements)
    }
    let x_planes = x.chunks_exact(height * width).take(planes);
    for (plane, out_plane) in x_planes.zip(out.chunks_exact_mut(out_height * out_width)) {
        for (r, out_row) in out_plane.chunks_exact_mut(out_width).enumerate() {
            let rows = (&plane[2 * r * width..], &plane[(2 * r + 1) * width..]);
            // SAFETY (whole loop): AVX2 is present (the contract); each row holds `width >=
            // 2·out_width` values, so step `j0` reads inside them; it writes outputs `j0 ..
            // j0 + count` of `out_row`.
            let mut j0 = 0;
            while j0 < out_width {
                let count = (out_width - j0).min(8);
                let (_, best) = unsafe { windows(rows, j0, count) };
                let to = out_row[j0..].as_mut_ptr().cast::<f32>();
                if count == 8 {
                    unsafe { _mm256_storeu_ps(to, best) };
                } else {
                    let mut lanes = [0.0_f32; 8];
                    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), best) };
                    for (o, &v) in out_row[j0..j0 + count].iter_mut().zip(&lanes) {
                        *o = MaybeUninit::new(v);
                    }
                }
                j0 += count;
            }
        }
    }
}

/// The backward pass of [`max_pool_2x2_planes_avx2`]: each window's gradient `dy[j]` goes to
/// its first maximum (the first input whose bits are the maximum's), as `0 + dy[j]`, and the
/// other three inputs get 0, exactly as the portable code writes them; an odd last row or
/// column of `dx` is not written.
///
/// # Safety
///
/// The CPU has AVX2; `x` and `dx` hold `planes` planes of `height x width`, `dy` as many of
/// `height / 2 x width / 2`.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn max_pool_2x2_backward_planes_avx2(
    x: &[f32],
    (height, width): (usize, usize),
    dy: &[f32],
    dx: &mut [f32],
    planes: usize,
) {
    let (out_height, out_width) = (height / 2, width / 2);
    for p in 0..planes {
        for r in 0..out_height {
            let top = (p * height + 2 * r) * width;
            let rows = (&x[top..][..width], &x[top + width..][..width]);
            let dy = &dy[(p * out_height + r) * out_width..][..out_width];
            let (upper, lower) = dx[top..][..2 * width].split_at_mut(width);
            let mut j0 = 0;
            while j0 < out_width {
                let count = (out_width - j0).min(8);
                // SAFETY: AVX2 is present (the contract); each row holds `width >=
                // 2·out_width` values, `dy` `out_width`: a step of 8 reads `dy[j0..j0 + 8]`
                // and writes `2·j0 .. 2·j0 + 16` of each row whole, a shorter step goes
                // through arrays.
                unsafe {
                    let (inputs, best) = windows(rows, j0, count);
                    let g = if count == 8 {
                        _mm256_loadu_ps(dy[j0..].as_ptr())
                    } else {
                        let mut gradients = [0.0_f32; 8];
                        gradients[..count].copy_from_slice(&dy[j0..j0 + count]);
                        _mm256_loadu_ps(gradients.as_ptr())
                    };
                    let g = _mm256_add_ps(_mm256_setzero_ps(), g);
                    // The first input whose bits are the maximum's takes the gradient.
                    let best_bits = _mm256_castps_si256(best);
                    let mut taken = _mm256_setzero_si256();
                    let parts: [__m256; 4] = core::array::from_fn(|k| {
                        let same = _mm256_cmpeq_epi32(_mm256_castps_si256(inputs[k]), best_bits);
                        let first = _mm256_andnot_si256(taken, same);
                        taken = _mm256_or_si256(taken, same);
                        _mm256_and_ps(_mm256_castsi256_ps(first), g)
                    });
                    // Even and odd columns interleaved again (values 0-7 and 8-15 of a row
                    // from `2·j0`), stored whole or through an array for a last, short step.
                    let store = |row: &mut [f32], even: __m256, odd: __m256| {
                        let (lo, hi) =
                            (_mm256_unpacklo_ps(even, odd), _mm256_unpackhi_ps(even, odd));
                        let (first, second) = (
                            _mm256_permute2f128_ps::<0x20>(lo, hi),
                            _mm256_permute2f128_ps::<0x31>(lo, hi),
                        );
                        let to = &mut row[2 * j0..2 * (j0 + count)];
                        if count == 8 {
                            _mm256_storeu_ps(to.as_mut_ptr(), first);
                            _mm256_storeu_ps(to.as_mut_ptr().add(8), second);
                        } else {
                            let mut values = [0.0_f32; 16];
                            _mm256_storeu_ps(values.as_mut_ptr(), first);
                            _mm256_storeu_ps(values.as_mut_ptr().add(8), second);
                            to.copy_from_slice(&values[..2 * count]);
                        }
                    };
                    store(upper, parts[0], parts[1]);
                    store(lower, parts[2], parts[3]);
                }
                j0 += count;
            }
        }
    }
}
