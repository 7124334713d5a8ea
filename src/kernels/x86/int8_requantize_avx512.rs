//! The int8 requantization with AVX-512, 16 outputs at a time: TensorFlow Lite's two steps
//! ([`requantize_group_avx512`]: the doubling high product, then the rounding right shift),
//! and for one filter's parameters (the same in every lane) the two fused into one 64-bit
//! step ([`UniformRequantization`]).
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
            onto_range(y, self.range)
        }
    }
}

/// One group of 16 lanes of `requantize_i8_avx512` (`int8.rs`) after the bias: `clamp(zero + M·acc, low,
/// top)` per lane, as `i32`. Without `LEFT`, every exponent is at most 0 (no left shift).
///
/// # Safety
///
/// The CPU has AVX-512BW and VL; every exponent is in `-31..=30` (at most 0 without `LEFT`).
#[inline(always)]
pub(super) unsafe fn requantize_group_avx512<const LEFT: bool>(
    (acc, m, e): (__m512i, __m512i, __m512i),
    (zero, low, top): (i8, i8, i8),
) -> __m512i {
    // SAFETY: the instruction sets are present (the contract); no memory is touched.
    unsafe {
        let y = multiply_by_multiplier_avx512::<LEFT>((acc, m, e));
        onto_range(y, (zero, low, top))
    }
}

/// `zero + y` clamped to `[low, top]` per lane: `y` clamped to `[low - zero, top - zero]` (no
/// overflow), then `zero` added.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn onto_range(y: __m512i, (zero, low, top): (i8, i8, i8)) -> __m512i {
    // SAFETY: the instruction set is present (the contract); no memory is touched.
    unsafe {
        let zero = i32::from(zero);
        let y = _mm512_max_epi32(
            _mm512_min_epi32(y, _mm512_set1_epi32(i32::from(top) - zero)),
            _mm512_set1_epi32(i32::from(low) - zero),
        );
        _mm512_add_epi32(y, _mm512_set1_epi32(zero))
    }
}

/// `M·acc` per lane, `M = (m, e)` in fixed point, rounded as
/// [`Multiplier::apply`](crate::quant::Multiplier::apply): the fixed-point multiplication of
/// [`requantize_group_avx512`] and of the int8 addition's inputs. Without `LEFT`, every
/// exponent is at most 0 (no left shift).
///
/// # Safety
///
/// The CPU has AVX-512BW and VL; every exponent is in `-31..=30` (at most 0 without `LEFT`).
#[inline(always)]
pub(super) unsafe fn multiply_by_multiplier_avx512<const LEFT: bool>(
    (acc, m, e): (__m512i, __m512i, __m512i),
) -> __m512i {
    // SAFETY: the instruction sets are present (the contract); no memory is touched.
    unsafe {
        // A multiplier of 1 or more (exponent > 0) first shifts acc left, saturating (the
        // shift undone differs from acc exactly when bits or the sign were lost).
        let acc = if LEFT {
            let left = _mm512_max_epi32(e, _mm512_setzero_si512());
            let shifted = _mm512_sllv_epi32(acc, left);
            let lost = _mm512_cmpneq_epi32_mask(_mm512_srav_epi32(shifted, left), acc);
            let limit = _mm512_xor_si512(_mm512_srai_epi32(acc, 31), _mm512_set1_epi32(i32::MAX));
            _mm512_mask_blend_epi32(lost, shifted, limit)
        } else {
            acc
        };
        // The doubling high product: round(acc·m / 2^31), ties up; MIN·MIN saturates.
        /// The doubling high product's 64-bit step, for the products in 64-bit lanes.
        #[inline(always)]
        unsafe fn high64(p: __m512i) -> __m512i {
            // SAFETY: the caller's instruction sets; no memory is touched.
            // gemmlowp's nudge (2^30, or 1 - 2^30 for a negative product) and its division by
            // 2^31 truncating toward zero come to one floor for either sign: (p + 2^30) >> 31
            // (for p < 0: (p + 1 - 2^30 + 2^31 - 1) >> 31).
            unsafe { _mm512_srai_epi64(_mm512_add_epi64(p, _mm512_set1_epi64(1 << 30)), 31) }
        }
        let even = high64(_mm512_mul_epi32(acc, m));
        let odd = high64(_mm512_mul_epi32(
            _mm512_srli_epi64(acc, 32),
            _mm512_srli_epi64(m, 32),
        ));
        let high = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
        let both_min = _mm512_cmpeq_epi32_mask(acc, _mm512_set1_epi32(i32::MIN))
            & _mm512_cmpeq_epi32_mask(m, _mm512_set1_epi32(i32::MIN));
        let high = _mm512_mask_blend_epi32(both_min, high, _mm512_set1_epi32(i32::MAX));
        // The rounding right shift by r = max(-exponent, 0).
        let r = _mm512_max_epi32(
            _mm512_sub_epi32(_mm512_setzero_si512(), e),
            _mm512_setzero_si512(),
        );
        rounding_shift_right_lanes(high, r)
    }
}

/// `x / 2^r` per lane, rounded to the nearest, ties away from zero (gemmlowp's
/// `RoundingDivideByPOT`): `(x >> r) + (remainder > threshold)`, the threshold half of `2^r`
/// rounded down, one more for a negative `x`. `r` from 0 to 31 in every lane.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
pub(super) unsafe fn rounding_shift_right_lanes(x: __m512i, r: __m512i) -> __m512i {
    // SAFETY: the instruction set is present (the contract); no memory is touched.
    unsafe {
        let ones = _mm512_set1_epi32(1);
        let low_bits = _mm512_sub_epi32(_mm512_sllv_epi32(ones, r), ones);
        let remainder = _mm512_and_si512(x, low_bits);
        let negative = _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512());
        let threshold = _mm512_mask_add_epi32(
            _mm512_srai_epi32(low_bits, 1),
            negative,
            _mm512_srai_epi32(low_bits, 1),
            ones,
        );
        let up = _mm512_cmpgt_epi32_mask(remainder, threshold);
        let shifted = _mm512_srav_epi32(x, r);
        _mm512_mask_add_epi32(shifted, up, shifted, ones)
    }
}
