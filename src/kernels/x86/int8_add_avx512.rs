//! TensorFlow Lite's int8 addition (`kernels::add_i8`) with AVX-512BW: 16 values of each input
//! a vector, widened to `i32`, each input's fixed-point multiplication in 32-bit lanes (its
//! value has 9 bits: the product splits into two that fit), the output's requantization the
//! int8 layers' own ([`UniformRequantization`]), so the same integers as the definition,
//! value by value.

use core::arch::x86_64::*;

use super::int8_requantize_avx512::UniformRequantization;
use crate::kernels::add_i8::{ADD_LEFT_SHIFT, AddScales};

/// `a[i] = add_one(a[i], b[i], scales)` for every `i` (`kernels::add_i8::add_one`).
///
/// # Panics
///
/// When the slices' lengths differ, an input's exponent is outside `-31..=0` or the output's
/// outside `-31..=30`, or (with `std`) the CPU lacks AVX-512BW or VL.
pub(crate) fn add_i8_avx512(a: &mut [i8], b: &[i8], scales: &AddScales) {
    assert_eq!(a.len(), b.len(), "the two inputs of an addition");
    assert!(
        scales
            .inputs
            .iter()
            .all(|&(_, _, e)| (-31..=0).contains(&e))
            && (-31..=30).contains(&scales.output.1),
        "the exponents of the inputs' multipliers are from -31 to 0, the output's from -31 \
         to 30: {scales:?}"
    );
    #[cfg(feature = "std")]
    assert!(
        std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512vl"),
        "the CPU lacks AVX-512BW or AVX-512VL"
    );
    // SAFETY: the instruction sets are present (asserted with `std`, the build's target
    // without: the dispatcher's check); the lengths and exponents are checked above.
    unsafe { add(a, b, scales) }
}

/// [`add_i8_avx512`] once checked.
///
/// # Safety
///
/// The CPU has AVX-512BW and VL; `a.len() == b.len()`; the inputs' exponents are in
/// `-31..=0`, the output's in `-31..=30`.
#[target_feature(enable = "avx512bw,avx512vl")]
unsafe fn add(a: &mut [i8], b: &[i8], scales: &AddScales) {
    let n = a.len();
    // SAFETY (whole body): the instruction sets are present (the contract). Each group reads
    // and writes lanes `i0..i0 + count` of slices of `n` values, `count <= 16` and
    // `i0 + count <= n`, the other lanes masked off; the exponents are in range.
    unsafe {
        // An input's parameters: its zero point, its multiplier's high bits `m >> 11` and
        // low bits `m & 0x7FF`, the rounding's addends for values of either sign, and its
        // right shift `r = -exponent`.
        let input = |(zero, multiplier, exponent): (i8, i32, i32)| {
            let r = -exponent;
            let half = ((1_i64 << r) >> 1) as i32;
            let below_half = (((1_i64 << r) - 1) >> 1) as i32;
            (
                _mm512_set1_epi32(i32::from(zero)),
                (
                    _mm512_set1_epi32(multiplier >> 11),
                    _mm512_set1_epi32(multiplier & 0x7FF),
                ),
                (_mm512_set1_epi32(half), _mm512_set1_epi32(below_half)),
                _mm_cvtsi32_si128(r),
            )
        };
        let (first, second) = (input(scales.inputs[0]), input(scales.inputs[1]));
        let output = UniformRequantization::new(scales.output, scales.zero_and_range);
        // An input's 16 values on the common scale, in 32-bit lanes: the doubling high product
        // of `d·2^20` (`d = q - zero`, `|d| <= 255`) and `m` is `p = ⌊(d·m + 2^10) / 2^11⌋`
        // (the numerator and the denominator of `⌊(d·2^20·m + 2^30) / 2^31⌋` divided by
        // `2^20`), and with `m = 2^11·high + low` that is `d·high + ⌊(d·low + 2^10) / 2^11⌋`:
        // both products under `2^28` in magnitude. Then the division by `2^r` rounded half
        // away from zero, `⌊(p + b) / 2^r⌋` with `b = ⌊2^r / 2⌋` for `p >= 0` and `⌊(2^r - 1) /
        // 2⌋` below (`p + b` under `2^31`). Exact, and under `2^28` (the exponent is at most
        // 0), so the two add without saturating.
        type Input = (__m512i, (__m512i, __m512i), (__m512i, __m512i), __m128i);
        let scaled = |q: __m128i, (zero, (high, low), (half, below_half), r): Input| {
            let d = _mm512_sub_epi32(_mm512_cvtepi8_epi32(q), zero);
            let p = _mm512_add_epi32(
                _mm512_mullo_epi32(d, high),
                _mm512_srai_epi32::<11>(_mm512_add_epi32(
                    _mm512_mullo_epi32(d, low),
                    _mm512_set1_epi32(1 << 10),
                )),
            );
            let b = _mm512_mask_blend_epi32(
                _mm512_cmpge_epi32_mask(p, _mm512_setzero_si512()),
                below_half,
                half,
            );
            _mm512_sra_epi32(_mm512_add_epi32(p, b), r)
        };
        let mut i0 = 0;
        while i0 < n {
            let count = 16.min(n - i0);
            let mask: __mmask16 = if count == 16 {
                0xFFFF
            } else {
                (1 << count) - 1
            };
            let x = _mm_maskz_loadu_epi8(mask, a.as_ptr().add(i0));
            let y = _mm_maskz_loadu_epi8(mask, b.as_ptr().add(i0));
            let sum = _mm512_add_epi32(scaled(x, first), scaled(y, second));
            let q = output.apply(sum);
            _mm_mask_storeu_epi8(a.as_mut_ptr().add(i0), mask, _mm512_cvtepi32_epi8(q));
            i0 += count;
        }
    }
}

const _: () = assert!(
    ADD_LEFT_SHIFT == 20,
    "the inputs' scaling assumes 20 bits of headroom"
);
