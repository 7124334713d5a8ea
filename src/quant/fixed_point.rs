//! Fixed-point `exp` and reciprocal: the arithmetic of TensorFlow Lite's int8 softmax
//! (gemmlowp's `exp_on_negative_values`, `one_over_one_plus_x_for_x_in_0_1` and TensorFlow
//! Lite's `GetReciprocal`), bit for bit, integers only.
//!
//! A value is an `i32` raw `r` with `n` integer bits, standing for `r / 2^(31 - n)` (Q`n`.`31-n`):
//! Q0.31 holds `[-1, 1)`, Q5.26 `[-32, 32)`. A product of a Q`a` and a Q`b` value is the doubling
//! high product of their raws, a Q`a+b` value; changing the integer bits is a rounding (or
//! saturating) shift.

use super::{rounding_divide_by_power_of_two, saturating_rounding_doubling_high_mul as mul};

/// The integer bits of the scaled differences the softmax takes `exp` of (Q5.26): differences
/// down to -32 are representable, and `exp(-32)` is far below int8's resolution.
pub const SOFTMAX_DIFF_INTEGER_BITS: i32 = 5;

/// The integer bits of the sum of `exp`s (Q12.19): the `exp`s of up to 4,096 classes, each at
/// most 1, sum to at most `2^31` raw, which the reciprocal reads as unsigned.
pub const SOFTMAX_SUM_INTEGER_BITS: i32 = 12;

/// `x · 2^exponent`: a left shift that saturates at `i32`'s ends for a positive exponent, a
/// right shift rounding to nearest (ties away from zero) for a negative one (gemmlowp's
/// `SaturatingRoundingMultiplyByPOT`).
///
/// ```
/// use constmat::quant::fixed_point::multiply_by_power_of_two as times;
///
/// assert_eq!(times(3, 2), 12);
/// assert_eq!(times(1 << 30, 1), i32::MAX); // saturates
/// assert_eq!(times(-(1 << 30), 2), i32::MIN);
/// assert_eq!(times(6, -2), 2); // 1.5 -> 2
/// assert_eq!(times(-6, -2), -2);
/// ```
///
/// # Panics
///
/// When `exponent` is outside `-31..=31` (at compile time in a `const`).
#[must_use]
pub const fn multiply_by_power_of_two(x: i32, exponent: i32) -> i32 {
    assert!(
        -31 <= exponent && exponent <= 31,
        "a power of two from 2^-31 to 2^31"
    );
    if exponent > 0 {
        let threshold = (1_i32 << (31 - exponent)) - 1;
        if x > threshold {
            i32::MAX
        } else if x < -threshold {
            i32::MIN
        } else {
            x << exponent
        }
    } else {
        rounding_divide_by_power_of_two(x, -exponent)
    }
}

/// `round((a + b) / 2)`, ties away from zero (gemmlowp's `RoundingHalfSum`).
const fn rounding_half_sum(a: i32, b: i32) -> i32 {
    let sum = a as i64 + b as i64;
    let sign = if sum >= 0 { 1 } else { -1 };
    ((sum + sign) / 2) as i32
}

/// `exp(a)` for `a` in `[-1/4, 0)`, both Q0.31: a fourth-order Taylor expansion around `-1/8`.
const fn exp_on_quarter_interval(a: i32) -> i32 {
    // exp(-1/8) and 1/3 in Q0.31.
    const EXP_MINUS_ONE_EIGHTH: i32 = 1_895_147_668;
    const ONE_THIRD: i32 = 715_827_883;
    // x = a + 1/8, in [-1/8, 1/8).
    let x = a.wrapping_add(1 << 28);
    let x2 = mul(x, x);
    let x3 = mul(x2, x);
    let x4 = mul(x2, x2);
    let x4_over_4 = multiply_by_power_of_two(x4, -2);
    // x²/2 + x³/6 + x⁴/24 = ((x⁴/4 + x³)/3 + x²) / 2.
    let higher = multiply_by_power_of_two(
        mul(x4_over_4.wrapping_add(x3), ONE_THIRD).wrapping_add(x2),
        -1,
    );
    EXP_MINUS_ONE_EIGHTH.wrapping_add(mul(EXP_MINUS_ONE_EIGHTH, x.wrapping_add(higher)))
}

/// `exp(a)` for `a <= 0` given in Q5.26, as Q0.31 (`exp(0)` is `i32::MAX`, the largest Q0.31
/// value).
///
/// `a` is split into `a mod 1/4 - 1/4` (in `[-1/4, 0)`, by the Taylor expansion) and a multiple
/// of 1/4, whose bits each multiply by a constant `exp(-2^k)`.
///
/// ```
/// use constmat::quant::fixed_point::exp_on_negative_values;
///
/// let q5_26 = |x: f64| (x * f64::from(1 << 26)).round() as i32;
/// let real = |raw: i32| f64::from(raw) / 2_f64.powi(31);
/// assert_eq!(exp_on_negative_values(0), i32::MAX);
/// for x in [-0.1, -0.25, -1.0, -2.5, -7.75, -20.0] {
///     assert!((real(exp_on_negative_values(q5_26(x))) - x.exp()).abs() < 1e-6);
/// }
/// ```
#[must_use]
pub const fn exp_on_negative_values(a: i32) -> i32 {
    const FRACTIONAL_BITS: i32 = 31 - SOFTMAX_DIFF_INTEGER_BITS;
    const ONE_QUARTER: i32 = 1 << (FRACTIONAL_BITS - 2);
    // exp(-2^k) in Q0.31, for k = -2..=4.
    const BARREL: [(i32, i32); 7] = [
        (-2, 1_672_461_947),
        (-1, 1_302_514_674),
        (0, 790_015_084),
        (1, 290_630_308),
        (2, 39_332_535),
        (3, 720_401),
        (4, 242),
    ];
    let a_mod_quarter_minus_quarter = (a & (ONE_QUARTER - 1)).wrapping_sub(ONE_QUARTER);
    let mut result = exp_on_quarter_interval(multiply_by_power_of_two(
        a_mod_quarter_minus_quarter,
        SOFTMAX_DIFF_INTEGER_BITS,
    ));
    let remainder = a_mod_quarter_minus_quarter.wrapping_sub(a);
    let mut i = 0;
    while i < BARREL.len() {
        let (k, exp_minus_two_to_k) = BARREL[i];
        if remainder & (1 << (FRACTIONAL_BITS + k)) != 0 {
            result = mul(result, exp_minus_two_to_k);
        }
        i += 1;
    }
    if a == 0 { i32::MAX } else { result }
}

/// `1 / (1 + a)` for `a` in `[0, 1)`, both Q0.31: three Newton-Raphson steps from the linear
/// estimate `48/17 - 32/17·d`, where `d = (1 + a) / 2`.
const fn one_over_one_plus_x(a: i32) -> i32 {
    // 48/17, -32/17 and 1 in Q2.29.
    const C48_OVER_17: i32 = 1_515_870_810;
    const MINUS_32_OVER_17: i32 = -1_010_580_540;
    const ONE_Q2: i32 = 1 << 29;
    let half_denominator = rounding_half_sum(a, i32::MAX);
    let mut x = C48_OVER_17.wrapping_add(mul(half_denominator, MINUS_32_OVER_17));
    let mut step = 0;
    while step < 3 {
        let one_minus_dx = ONE_Q2.wrapping_sub(mul(half_denominator, x));
        // x·(1 - d·x) is Q4.27; back to Q2.29.
        x = x.wrapping_add(multiply_by_power_of_two(mul(x, one_minus_dx), 2));
        step += 1;
    }
    // x ≈ 1/d = 2/(1 + a) in Q2.29, so the same raw read as Q1.30 is 1/(1 + a): to Q0.31.
    multiply_by_power_of_two(x, 1)
}

/// `1 / x` for a positive `x` with `integer_bits` integer bits, as a Q0.31 value `r` in
/// `[1/2, 1]` and a power of two `p`: `1/x ≈ r · 2^-p` (TensorFlow Lite's `GetReciprocal`,
/// returning `(r, p)`, `p` its `num_bits_over_unit`).
///
/// ```
/// use constmat::quant::fixed_point::reciprocal;
///
/// // 2.5 in Q12.19: 1 / 2.5 = 0.4 = 0.8 · 2^-1.
/// let (r, p) = reciprocal(5 << 18, 12);
/// assert_eq!(p, 1);
/// assert!((f64::from(r) / 2_f64.powi(31) - 0.8).abs() < 1e-6);
/// ```
///
/// # Panics
///
/// When `x` is 0, which has no reciprocal.
#[must_use]
pub const fn reciprocal(x: i32, integer_bits: i32) -> (i32, i32) {
    assert!(x != 0, "the reciprocal of 0");
    let headroom_plus_one = (x as u32).leading_zeros() as i32;
    let bits_over_unit = integer_bits - headroom_plus_one;
    // x · 2^headroom is in [1, 2) as Q1.31 unsigned; minus 1 it is a Q0.31 value in [0, 1).
    let shifted_minus_one = ((x as u32) << headroom_plus_one).wrapping_sub(1 << 31) as i32;
    (one_over_one_plus_x(shifted_minus_one), bits_over_unit)
}

/// The multiplier that scales an int8 softmax's logit differences (input scale `scale`) to
/// Q5.26: TensorFlow Lite's `PreprocessSoftmaxScaling` with beta 1, `scale·2^26` held to
/// `[1, 2^31 - 1]`, then its significand and exponent as `QuantizeMultiplier` rounds them
/// (the exponent in `0..=31`). [`nn::QSoftmax::new`](crate::nn::QSoftmax::new) and a
/// converter of TensorFlow Lite files compute it with this.
#[must_use]
pub fn softmax_input_multiplier(scale: f32) -> super::Multiplier {
    let real = (f64::from(scale) * f64::from(1 << (31 - SOFTMAX_DIFF_INTEGER_BITS)))
        .clamp(1.0, f64::from(i32::MAX));
    // real = f·2^e, f in [0.5, 1): the exponent from the float's bits, exactly.
    let mut exponent = 0;
    let mut f = real;
    while f >= 1.0 {
        f /= 2.0;
        exponent += 1;
    }
    let mut multiplier = num_traits::Float::round(f * 2_147_483_648.0) as i64;
    if multiplier == 1 << 31 {
        multiplier /= 2;
        exponent += 1;
    }
    super::Multiplier {
        multiplier: multiplier as i32,
        exponent,
    }
}
