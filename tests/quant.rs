//! The int8 fixed-point arithmetic (`constmat::quant`) against a reference written from the
//! specification (gemmlowp's fixed-point notes and TensorFlow Lite's quantization spec) in exact
//! 128-bit integer arithmetic: the high product rounds to nearest with ties toward +∞ (what
//! gemmlowp's nudge-then-truncate gives), the power-of-two division with ties away from zero.

use constmat::quant::{
    Multiplier, Quantization, rounding_divide_by_power_of_two,
    saturating_rounding_doubling_high_mul,
};
use proptest::prelude::*;

/// `n / 2^e` rounded to nearest, ties away from zero, exactly.
fn round_div_pow2(n: i128, e: u32) -> i128 {
    let d = 1_i128 << e;
    let (q, r) = (n / d, n % d); // truncated toward zero
    if 2 * r.abs() >= d { q + n.signum() } else { q }
}

/// `⌊a·b / 2^31 + 1/2⌋`, saturated to the `i32` range.
fn reference_high_mul(a: i32, b: i32) -> i32 {
    let exact = (i128::from(a) * i128::from(b) + (1 << 30)).div_euclid(1 << 31);
    exact.clamp(i128::from(i32::MIN), i128::from(i32::MAX)) as i32
}

/// TensorFlow Lite's multiply: `x · 2^left` saturated, the rounded high product, then the
/// rounded right shift.
fn reference_apply(m: Multiplier, x: i32) -> i32 {
    let left = m.exponent.max(0) as u32;
    let right = (-m.exponent).max(0) as u32;
    let shifted = (i128::from(x) << left).clamp(i128::from(i32::MIN), i128::from(i32::MAX));
    let high = reference_high_mul(shifted as i32, m.multiplier);
    round_div_pow2(i128::from(high), right) as i32
}

#[test]
fn rounding_ties_go_away_from_zero() {
    // x / 2: 0.5, 1.5, 2.5 and their negatives.
    for (x, want) in [
        (1, 1),
        (3, 2),
        (5, 3),
        (-1, -1),
        (-3, -2),
        (-5, -3),
        (4, 2),
        (-4, -2),
    ] {
        assert_eq!(rounding_divide_by_power_of_two(x, 1), want, "{x} / 2");
    }
    // Just below and above a half: 1.49.. and 1.5 + a little, for x / 8 (0.125 steps).
    assert_eq!(rounding_divide_by_power_of_two(11, 3), 1); // 1.375
    assert_eq!(rounding_divide_by_power_of_two(12, 3), 2); // 1.5
    assert_eq!(rounding_divide_by_power_of_two(-12, 3), -2); // -1.5
    assert_eq!(rounding_divide_by_power_of_two(-11, 3), -1); // -1.375
    assert_eq!(rounding_divide_by_power_of_two(i32::MIN, 31), -1);
    assert_eq!(rounding_divide_by_power_of_two(i32::MAX, 31), 1);
    // The doubling high product: 2^30 is one half in Q31.
    // The doubling high product's ties go up (gemmlowp's nudge, then a truncating division).
    assert_eq!(saturating_rounding_doubling_high_mul(1, 1 << 30), 1); // 0.5 -> 1
    assert_eq!(saturating_rounding_doubling_high_mul(-1, 1 << 30), 0); // -0.5 -> 0
    assert_eq!(saturating_rounding_doubling_high_mul(-3, 1 << 30), -1); // -1.5 -> -1
    assert_eq!(saturating_rounding_doubling_high_mul(-3, (1 << 30) + 1), -2); // just below -1.5
    for (a, b) in [
        (1, 1 << 30),
        (-1, 1 << 30),
        (-3, 1 << 30),
        (5, -(1 << 30)),
        (7, 1 << 29),
    ] {
        assert_eq!(
            saturating_rounding_doubling_high_mul(a, b),
            reference_high_mul(a, b)
        );
    }
    assert_eq!(
        saturating_rounding_doubling_high_mul(i32::MIN, i32::MIN),
        i32::MAX
    );
    assert_eq!(
        saturating_rounding_doubling_high_mul(i32::MIN, i32::MAX),
        reference_high_mul(i32::MIN, i32::MAX)
    );
}

#[test]
#[should_panic(expected = "a power of two from 2^0 to 2^31")]
fn a_shift_past_31_is_refused() {
    let _ = rounding_divide_by_power_of_two(1, 32);
}

#[test]
fn multipliers_hold_31_bits_of_the_real_value() {
    for real in [
        1e-9,
        1.0 / 255.0,
        0.0021,
        0.25,
        0.5,
        0.999_999_999_9,
        1.0,
        1.5,
        3.0,
        1000.0,
        5e8,
    ] {
        let m = Multiplier::from_real(real);
        assert!(
            (1 << 30..=i32::MAX).contains(&m.multiplier),
            "{real}: significand {} outside [2^30, 2^31)",
            m.multiplier
        );
        let error = (m.to_real() - real).abs() / real;
        assert!(error <= 2f64.powi(-31), "{real}: relative error {error:e}");
    }
    // Just below 2^30, rounding up would need the exponent 31, which the left shift cannot
    // take: held at the largest multiplier, as TensorFlow Lite does (the review of issue 11
    // found the sign flipped there).
    let top = Multiplier::from_real(1_073_741_824.0 - 2f64.powi(-16));
    assert_eq!((top.multiplier, top.exponent), (i32::MAX, 30));
    assert_eq!(top.apply(1), 1 << 30);
    // Rounding up to 2^31 renormalizes: 1 - 2^-33 is 1.0.
    let m = Multiplier::from_real(1.0 - 2f64.powi(-33));
    assert_eq!((m.multiplier, m.exponent), (1 << 30, 1));
    // Too small to move any i32 (below 2^-32): zero.
    assert_eq!(Multiplier::from_real(1e-12).multiplier, 0);
    assert_eq!(Multiplier::from_real(2f64.powi(-33)).multiplier, 0);
    assert_ne!(Multiplier::from_real(2f64.powi(-32)).multiplier, 0);
    assert_eq!(Multiplier::from_real(0.0).apply(i32::MAX), 0);
}

#[test]
#[should_panic(expected = "must be finite and in [0, 2^30)")]
fn a_negative_multiplier_is_refused() {
    let _ = Multiplier::from_real(-0.5);
}

#[test]
#[should_panic(expected = "must be finite and in [0, 2^30)")]
fn a_nan_multiplier_is_refused() {
    let _ = Multiplier::from_real(f64::NAN);
}

#[test]
fn multiplying_saturates_instead_of_wrapping() {
    // 1000 = 0.977 · 2^10: x · 2^10 saturates at the i32 limits, then times 0.977.
    let m = Multiplier::from_real(1000.0);
    assert_eq!(m.apply(i32::MAX), reference_apply(m, i32::MAX));
    assert_eq!(m.apply(i32::MIN), reference_apply(m, i32::MIN));
    assert!(
        m.apply(i32::MAX) > 2_000_000_000,
        "no wrap to a negative value"
    );
    assert!(
        m.apply(i32::MIN) < -2_000_000_000,
        "no wrap to a positive value"
    );
}

proptest! {
    #[test]
    fn the_high_product_matches_the_specification(a: i32, b: i32) {
        prop_assert_eq!(saturating_rounding_doubling_high_mul(a, b), reference_high_mul(a, b));
    }

    #[test]
    fn the_division_matches_the_specification(x: i32, e in 0..=31_i32) {
        prop_assert_eq!(
            rounding_divide_by_power_of_two(x, e),
            round_div_pow2(i128::from(x), e as u32) as i32
        );
    }

    #[test]
    fn applying_a_multiplier_matches_the_specification(
        x in -(1_i32 << 24)..(1 << 24),
        real in 1e-6_f64..64.0,
    ) {
        let m = Multiplier::from_real(real);
        let got = m.apply(x);
        prop_assert_eq!(got, reference_apply(m, x));
        // Two roundings: within one step of the exact product.
        let exact = f64::from(x) * real;
        prop_assert!((f64::from(got) - exact).abs() <= 1.0 + exact.abs() * 1e-8,
            "{} x {} = {}, got {}", x, real, exact, got);
    }

    #[test]
    fn quantizing_is_within_half_a_step_inside_the_range(
        min in -100.0_f32..0.0,
        width in 0.01_f32..200.0,
        t in 0.0_f32..=1.0,
    ) {
        let max = min + width;
        let q = Quantization::from_range(min, max);
        prop_assert_eq!(q.dequantize(q.quantize(0.0)), 0.0, "zero is exact");
        let r = min.max(-q.scale * 128.0) + t * (max.min(q.scale * 127.0) - min.max(-q.scale * 128.0));
        let back = q.dequantize(q.quantize(r));
        prop_assert!((back - r).abs() <= q.scale * 0.5 + q.scale * 1e-3 + r.abs() * 1e-6,
            "{} -> {} -> {} (scale {}, zero point {})", r, q.quantize(r), back, q.scale, q.zero_point);
    }
}

#[test]
fn quantizing_saturates_and_survives_bad_values() {
    let q = Quantization::from_range(0.0, 6.0); // a ReLU6's range: zero point -128
    assert_eq!(q.zero_point, -128);
    assert_eq!(q.quantize(-5.0), -128);
    assert_eq!(q.quantize(1e30), 127);
    assert_eq!(q.quantize(f32::NAN), -128);
    assert_eq!(q.quantize(f32::INFINITY), 127);
    let w = Quantization::symmetric(0.5);
    assert_eq!(
        (w.zero_point, w.quantize(0.5), w.quantize(-0.5)),
        (0, 127, -127)
    );
    assert_eq!(w.quantize(-1.0), -128, "saturates at the type's limit");
    // A range that is a point, or not finite, still gives a finite, positive scale.
    for q in [
        Quantization::from_range(0.0, 0.0),
        Quantization::from_range(f32::NAN, f32::INFINITY),
        Quantization::symmetric(0.0),
        Quantization::symmetric(f32::NAN),
    ] {
        assert!(q.scale.is_finite() && q.scale > 0.0, "{q:?}");
    }
}
