//! The int8 arithmetic of quantized nets: TensorFlow Lite's scheme, integer-only.
//!
//! A real value `r` is stored as an 8-bit integer `q` with a scale `s` and a zero point `z`:
//! `r ≈ s · (q - z)` ([`Quantization`]). A layer's sum of `i8 · i8` products is an `i32` with the
//! scale `s_in · s_w`; bringing it to the output's scale multiplies it by the real number
//! `M = s_in · s_w / s_out`, which inference does in fixed point, with no float: `M` is stored as
//! a 32-bit multiplier `m` and a power-of-two exponent `e` ([`Multiplier`], `M ≈ m · 2^(e-31)`),
//! and the product is two integer steps, each rounding to nearest:
//!
//! ```text
//! high = round(x · m / 2^31)          saturating_rounding_doubling_high_mul    (ties toward +∞)
//! y    = round(high · 2^e)            rounding_divide_by_power_of_two (e < 0)  (ties away from 0)
//! ```
//!
//! These are gemmlowp's and TensorFlow Lite's `SaturatingRoundingDoublingHighMul`,
//! `RoundingDivideByPOT` and `MultiplyByQuantizedMultiplier`, bit for bit, so that a net
//! quantized here computes what TensorFlow Lite Micro and CMSIS-NN compute from the same
//! integers. Every function is a `const fn` on integers: they run on a core without a
//! floating-point unit, and in a `const` (a baked net's requantization constants).
//!
//! docs/quantization.md derives the scheme and says what was chosen and why.

use num_traits::Float;

pub mod fixed_point;

/// Quantization parameters of a tensor: `real ≈ scale · (q - zero_point)`, `q` an `i8`.
///
/// Weights are quantized symmetrically (`zero_point = 0`, `q` in `-127..=127`), activations
/// asymmetrically (the zero point puts the calibrated range `[min, max]` onto `-128..=127`).
///
/// ```
/// use constmat::quant::Quantization;
///
/// let q = Quantization::from_range(-1.0, 3.0); // activations seen in [-1, 3]
/// assert_eq!(q.quantize(0.0), q.zero_point); // zero is exact
/// assert_eq!(q.quantize(-1.0), -128);
/// assert_eq!(q.quantize(3.0), 127);
/// assert_eq!(q.quantize(100.0), 127); // saturates
/// assert!((q.dequantize(q.quantize(1.25)) - 1.25).abs() <= q.scale / 2.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantization {
    /// The real value of one step of `q`.
    pub scale: f32,
    /// The `q` that stands for the real value 0.
    pub zero_point: i8,
}

impl Quantization {
    /// The narrowest range [`from_range`](Self::from_range) maps onto all of `-128..=127`:
    /// `255 · f32::EPSILON`, about `3.04e-5`. A narrower one gets the scale `f32::EPSILON`
    /// and fewer than 255 steps; [`nn::quantize`](crate::nn::quantize) refuses calibration
    /// samples that span less ([`QuantizeError::NarrowCalibration`](crate::nn::QuantizeError::NarrowCalibration)).
    ///
    /// ```
    /// use constmat::quant::Quantization;
    ///
    /// assert_eq!(Quantization::from_range(0.0, Quantization::MIN_RANGE).scale, f32::EPSILON);
    /// let narrow = Quantization::from_range(0.0, 1e-30);
    /// assert_eq!(narrow.scale, f32::EPSILON); // the floor: 1e-30 and 0 are one level
    /// assert_eq!(narrow.quantize(1e-30), narrow.quantize(0.0));
    /// ```
    pub const MIN_RANGE: f32 = 255.0 * f32::EPSILON;

    /// The parameters that map `[min, max]` onto `-128..=127`, widened to contain 0 (so that
    /// zero, the padding and ReLU's floor, is exact), with a scale of at least `f32::EPSILON`
    /// (a constant tensor still gets a usable scale; a range narrower than `255·EPSILON`, about
    /// `3.0e-5`, gets fewer than 255 steps). TensorFlow Lite's choice for activations.
    ///
    /// A bound that is not finite is treated as 0: a calibration that saw a NaN or an infinity
    /// does not produce a NaN scale (the calibration reports it instead; see docs/quantization.md).
    #[must_use]
    pub fn from_range(min: f32, max: f32) -> Self {
        let finite = |v: f32| if v.is_finite() { v } else { 0.0 };
        let (min, max) = (finite(min).min(0.0), finite(max).max(0.0));
        let scale = ((f64::from(max) - f64::from(min)) / 255.0).max(f64::from(f32::EPSILON));
        // The zero point: the q that min maps to is -128, so 0 maps to -128 - min / scale.
        let zero_point = Float::round(-128.0 - f64::from(min) / scale).clamp(-128.0, 127.0) as i8;
        Self {
            scale: scale as f32,
            zero_point,
        }
    }

    /// Symmetric parameters for values in `[-max_abs, max_abs]` (weights): zero point 0, the
    /// range onto `-127..=127` (not -128, so that negating a weight cannot overflow). The scale
    /// is at least `f32::MIN_POSITIVE`: a row of zeros still gets one.
    #[must_use]
    pub fn symmetric(max_abs: f32) -> Self {
        let max_abs = if max_abs.is_finite() {
            max_abs.abs()
        } else {
            0.0
        };
        Self {
            scale: (max_abs / 127.0).max(f32::MIN_POSITIVE),
            zero_point: 0,
        }
    }

    /// `q = clamp(round(r / scale) + zero_point)`, rounding ties away from zero (as
    /// TensorFlow Lite's `round`); a NaN becomes the zero point.
    #[must_use]
    #[inline]
    pub fn quantize(&self, real: f32) -> i8 {
        let q = Float::round(f64::from(real) / f64::from(self.scale)) + f64::from(self.zero_point);
        if q.is_nan() {
            self.zero_point
        } else {
            q.clamp(-128.0, 127.0) as i8
        }
    }

    /// `r = scale · (q - zero_point)`.
    #[must_use]
    #[inline]
    pub fn dequantize(&self, q: i8) -> f32 {
        self.scale * (i32::from(q) - i32::from(self.zero_point)) as f32
    }
}

/// The largest real a [`Multiplier`] holds (excluded): its left shift stays below `2^31`.
const MAX_REAL: f64 = 1_073_741_824.0;

/// A real multiplier `M` in fixed point: `M ≈ multiplier · 2^(exponent - 31)`, with
/// `multiplier` in `[2^30, 2^31)` (or 0 for `M = 0`): 31 bits of precision whatever the size of
/// `M`. [`Multiplier::apply`] multiplies an `i32` by it with integers only.
///
/// ```
/// use constmat::quant::Multiplier;
///
/// let m = Multiplier::from_real(0.003_921_568_6); // ≈ 1/255
/// assert_eq!(m.apply(255), 1);
/// assert_eq!(m.apply(-383), -2); // -1.502, to nearest
/// assert_eq!(m.apply(126), 0); // 0.494
/// assert_eq!(m.apply(128), 1); // 0.502
/// // Two roundings: 127 / 255 = 0.498, but its high product is 63.75 -> 64, and 64 / 2^7 is a tie.
/// assert_eq!(m.apply(127), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Multiplier {
    /// The significand, in `[2^30, 2^31)`, or 0.
    pub multiplier: i32,
    /// The power of two: `M = multiplier · 2^(exponent - 31)`. Positive for `M >= 1`.
    pub exponent: i32,
}

impl Multiplier {
    /// The fixed-point form of `real` (TensorFlow Lite's `QuantizeMultiplier`): `real = f · 2^e`
    /// with `f` in `[0.5, 1)`, `multiplier = round(f · 2^31)` (which may round up to `2^31`:
    /// then halved, and the exponent raised; a real just below `2^30` that would then need the
    /// exponent 31 is held at `(2^31 - 1, 30)`, as TensorFlow Lite does). A multiplier below
    /// `2^-32` (it would shift every product to zero) is 0. `real` must be finite and not
    /// negative; a requantization multiplier `s_in · s_w / s_out` always is.
    ///
    /// # Panics
    ///
    /// When `real` is negative, NaN or infinite, or at least `2^30` (no layer's scales give
    /// that; the caller checks a computed multiplier before building a net from it).
    #[must_use]
    pub fn from_real(real: f64) -> Self {
        assert!(
            real.is_finite() && (0.0..MAX_REAL).contains(&real),
            "a requantization multiplier must be finite and in [0, 2^30), not {real}"
        );
        if real == 0.0 {
            return Self {
                multiplier: 0,
                exponent: 0,
            };
        }
        // real = f · 2^exponent, f in [0.5, 1): the exponent from the float's bits, exactly.
        let mut exponent = 0_i32;
        let mut f = real;
        while f >= 1.0 {
            f /= 2.0;
            exponent += 1;
        }
        while f < 0.5 {
            f *= 2.0;
            exponent -= 1;
        }
        let mut q = Float::round(f * 2_147_483_648.0) as i64;
        if q == 1 << 31 {
            q /= 2;
            exponent += 1;
        }
        if exponent > 30 {
            // Only a real in [2^30 - 2^-2, 2^30) gets here: the largest multiplier the left
            // shift of `apply` allows.
            return Self {
                multiplier: i32::MAX,
                exponent: 30,
            };
        }
        if exponent < -31 {
            return Self {
                multiplier: 0,
                exponent: 0,
            };
        }
        Self {
            multiplier: q as i32,
            exponent,
        }
    }

    /// The real number this stands for, `multiplier · 2^(exponent - 31)`.
    #[must_use]
    pub fn to_real(self) -> f64 {
        f64::from(self.multiplier) * Float::powi(2_f64, self.exponent - 31)
    }

    /// `round(x · M)` with integers only (TensorFlow Lite's `MultiplyByQuantizedMultiplier`):
    /// `x` shifted left by a positive exponent, the high half of the doubled product with
    /// `multiplier` rounded, then shifted right by a negative exponent, rounded: within one of
    /// `x · M`. The left shift saturates where TensorFlow Lite's would overflow (it never does
    /// for a layer's accumulators and multipliers below 1).
    #[must_use]
    #[inline]
    pub const fn apply(self, x: i32) -> i32 {
        let (left, right) = if self.exponent > 0 {
            (self.exponent, 0)
        } else {
            (0, -self.exponent)
        };
        let shifted = x.saturating_mul(1 << left);
        rounding_divide_by_power_of_two(
            saturating_rounding_doubling_high_mul(shifted, self.multiplier),
            right,
        )
    }
}

/// The high 32 bits of `2·a·b`, rounded to nearest, ties toward +∞: `⌊a·b / 2^31 + 1/2⌋`.
/// The one product that overflows, `i32::MIN · i32::MIN` (`2^31`), saturates to `i32::MAX`.
/// (gemmlowp's `SaturatingRoundingDoublingHighMul`, whose nudge of `2^30` (or `1 - 2^30` for a
/// negative product) before a division that truncates toward zero gives exactly that.)
///
/// ```
/// use constmat::quant::saturating_rounding_doubling_high_mul as high_mul;
///
/// assert_eq!(high_mul(1 << 30, 1 << 30), 1 << 29); // 2^60 / 2^31
/// assert_eq!(high_mul(3, 1 << 30), 2); // 1.5 -> 2
/// assert_eq!(high_mul(-3, 1 << 30), -1); // -1.5 -> -1: ties go up
/// assert_eq!(high_mul(-7, 1 << 29), -2); // -1.75 -> -2
/// assert_eq!(high_mul(i32::MIN, i32::MIN), i32::MAX);
/// ```
#[must_use]
#[inline]
pub const fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let product = a as i64 * b as i64;
    let nudge = if product >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    // Division truncates toward zero; the nudge makes it round to nearest, ties toward +∞.
    ((product + nudge) / (1_i64 << 31)) as i32
}

/// `round(x / 2^exponent)`, ties away from zero, for `exponent` in `0..=31`. (gemmlowp's
/// `RoundingDivideByPOT`.)
///
/// ```
/// use constmat::quant::rounding_divide_by_power_of_two as divide;
///
/// assert_eq!(divide(5, 1), 3); // 2.5 -> 3
/// assert_eq!(divide(-5, 1), -3); // -2.5 -> -3
/// assert_eq!(divide(-6, 2), -2); // -1.5 -> -2
/// assert_eq!(divide(7, 0), 7);
/// ```
///
/// # Panics
///
/// When `exponent` is outside `0..=31` (at compile time in a `const`).
#[must_use]
#[inline]
pub const fn rounding_divide_by_power_of_two(x: i32, exponent: i32) -> i32 {
    assert!(
        0 <= exponent && exponent <= 31,
        "a power of two from 2^0 to 2^31"
    );
    let mask = ((1_i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    // `x >> e` rounds down; the remainder's bits decide whether to add one: above half always,
    // exactly half only for a positive x (a negative one is already rounded away from zero).
    let threshold = (mask >> 1) + (x < 0) as i32;
    (x >> exponent) + (remainder > threshold) as i32
}
