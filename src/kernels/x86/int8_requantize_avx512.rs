//! One filter's int8 requantization with AVX-512 (its parameters the same in every lane),
//! the fixed-point multiplication and the rounding shift fused into one 64-bit step:
//! [`UniformRequantization`].
//!
//! TensorFlow Lite's requantization rounds twice: the doubling high product `q = ⌊(a·m +
//! 2^30) / 2^31⌋`, then the division by `2^r` rounded half away from zero, `⌊(q + b) /
//! 2^r⌋` with `b = ⌊(2^r - 1 + [q ≥ 0]) / 2⌋`. Since `⌊(⌊x / u⌋ + n) / v⌋ = ⌊(x + n·u) /
//! (u·v)⌋` for integers, the two are one: `⌊(a·m + 2^30 + b·2^31) / 2^(31 + r)⌋`, where `b`
//! depends only on `r` and on whether `a·m ≥ -2^30` (`q ≥ 0`). In 64-bit lanes that is a
//! product, a comparison, an addition of one of two constants and one shift, exact (the sum
//! stays under `2^63` in magnitude), the same integers as the two steps. The doubling high
//! product saturates only for `a = m = i32::MIN`, and exponents above 0 shift left first:
//! those filters take the two steps ([`requantize_group_avx512`]).

use core::arch::x86_64::*;

use super::int8::requantize_group_avx512;

/// One filter's requantization, its constants broadcast once: `clamp(zero + M·sum, low,
/// high)` for 16 sums at a time ([`apply`](Self::apply)), `M = (multiplier, exponent)`.
#[derive(Clone, Copy)]
pub(super) struct UniformRequantization {
    multiplier: __m512i,
    exponent: __m512i,
    /// `2^30 + b·2^31` for `q ≥ 0` and for `q < 0`, in 64-bit lanes.
    offsets: (__m512i, __m512i),
    /// `31 + r`, the shift of the fused step.
    shift: __m128i,
    /// Whether the fused step applies: an exponent of at most 0 and a multiplier other than
    /// `i32::MIN`.
    fused: bool,
    range: (i8, i8, i8),
}

impl UniformRequantization {
    /// The constants of the requantization by `(multiplier, exponent)` onto `zero_and_range`
    /// `(zero, low, high)`.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; the exponent is in `-31..=30`.
    #[inline(always)]
    pub(super) unsafe fn new(
        (multiplier, exponent): (i32, i32),
        zero_and_range: (i8, i8, i8),
    ) -> Self {
        let fused = exponent <= 0 && multiplier != i32::MIN;
        let r = (-exponent).clamp(0, 31);
        // `b·2^31`: `2^(r - 1)·2^31` for `q ≥ 0`, one `2^31` less for `q < 0`, 0 when `r = 0`.
        let (up, down) = if r == 0 {
            (0, 0)
        } else {
            (1_i64 << (30 + r), (1_i64 << (30 + r)) - (1_i64 << 31))
        };
        // SAFETY: the instruction set is present (the contract); no memory is touched.
        unsafe {
            Self {
                multiplier: _mm512_set1_epi32(multiplier),
                exponent: _mm512_set1_epi32(exponent),
                offsets: (
                    _mm512_set1_epi64((1 << 30) + up),
                    _mm512_set1_epi64((1 << 30) + down),
                ),
                shift: _mm_cvtsi32_si128(31 + r),
                fused,
                range: zero_and_range,
            }
        }
    }

    /// `clamp(zero + M·sum, low, high)` per lane, in 32-bit lanes: the same integers as
    /// [`requantize_group_avx512`].
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512BW and VL.
    #[inline(always)]
    pub(super) unsafe fn apply(&self, sum: __m512i) -> __m512i {
        // SAFETY: the instruction set is present (the contract); no memory is touched; the
        // exponent is in range (`new`'s contract).
        unsafe {
            if !self.fused {
                let parameters = (sum, self.multiplier, self.exponent);
                return if _mm512_cvtsi512_si32(self.exponent) > 0 {
                    requantize_group_avx512::<true>(parameters, self.range)
                } else {
                    requantize_group_avx512::<false>(parameters, self.range)
                };
            }
            let threshold = _mm512_set1_epi64(-(1 << 30));
            let fused = |p: __m512i| {
                let offset = _mm512_mask_blend_epi64(
                    _mm512_cmpge_epi64_mask(p, threshold),
                    self.offsets.1,
                    self.offsets.0,
                );
                _mm512_sra_epi64(_mm512_add_epi64(p, offset), self.shift)
            };
            let even = fused(_mm512_mul_epi32(sum, self.multiplier));
            let odd = fused(_mm512_mul_epi32(
                _mm512_srli_epi64::<32>(sum),
                self.multiplier,
            ));
            let y = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64::<32>(odd));
            let (zero, low, high) = self.range;
            let zero = i32::from(zero);
            let y = _mm512_max_epi32(
                _mm512_min_epi32(y, _mm512_set1_epi32(i32::from(high) - zero)),
                _mm512_set1_epi32(i32::from(low) - zero),
            );
            _mm512_add_epi32(y, _mm512_set1_epi32(zero))
        }
    }
}
