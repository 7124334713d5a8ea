//! TensorFlow Lite's int8 addition (`ADD`, the sum of a residual block) of two tensors, each
//! of its own quantization, into a third: the definition, value by value, and the choice of
//! the SIMD kernel (`x86::add_i8_avx512`), which computes the same integers 16 values at a
//! time.
//!
//! Each input's value `q`, its zero point `z` taken off and shifted left by
//! [`ADD_LEFT_SHIFT`] bits of headroom, is brought to the sum's common scale by its fixed-point
//! multiplier; the two are added, and the sum requantized with the output's multiplier, zero
//! point and clamp ([`requantize_one`](super::requantize_one), no bias).

/// The left shift of the summands before scaling: 20 bits of headroom for int8 differences
/// (TensorFlow Lite's `left_shift` for int8 `ADD`).
pub(crate) const ADD_LEFT_SHIFT: i32 = 20;

/// The fixed-point parameters of an int8 addition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AddScales {
    /// Each input's zero point and multiplier `(zero, multiplier, exponent)`: the branch's,
    /// then the shortcut's.
    pub inputs: [(i8, i32, i32); 2],
    /// The output's multiplier `(multiplier, exponent)`.
    pub output: (i32, i32),
    /// The output's zero point and its clamp `(zero, low, high)`.
    pub zero_and_range: (i8, i8, i8),
}

/// An input's value `q` on the sum's common scale: `M·((q - zero) << 20)`, `M = (multiplier,
/// exponent)` (saturating where a multiplier of 1 or more would overflow).
#[inline]
pub(crate) const fn add_input_scaled(q: i8, (zero, multiplier, exponent): (i8, i32, i32)) -> i32 {
    crate::quant::Multiplier {
        multiplier,
        exponent,
    }
    .apply((q as i32 - zero as i32) << ADD_LEFT_SHIFT)
}

/// The sum of the first input's value `a` and the second's `b`: the definition.
#[inline]
pub(crate) fn add_one(a: i8, b: i8, scales: &AddScales) -> i8 {
    let sum =
        add_input_scaled(a, scales.inputs[0]).saturating_add(add_input_scaled(b, scales.inputs[1]));
    let (multiplier, exponent) = scales.output;
    super::requantize_one(sum, (0, multiplier, exponent), scales.zero_and_range)
}

/// Whether [`add_i8_simd`] runs on a SIMD kernel on this CPU for `scales`: AVX-512BW (within
/// the limit of [`super::instruction_set()`]), inputs' multipliers of magnitude at most 1
/// (exponents at most 0: each scaled input then stays under `2^28` in magnitude, so that their sum never
/// saturates; TensorFlow Lite's always are) and exponents from -31 to 30.
pub(crate) fn add_i8_fast(scales: &AddScales) -> bool {
    let fits = scales
        .inputs
        .iter()
        .all(|&(_, _, e)| (-31..=0).contains(&e))
        && (-31..=30).contains(&scales.output.1);
    #[cfg(target_arch = "x86_64")]
    if fits
        && matches!(
            super::x86::detected_isa_i8(),
            Some(super::x86::IsaI8::Avx512Bw | super::x86::IsaI8::Avx512Vnni)
        )
    {
        return true;
    }
    let _ = fits;
    false
}

/// `a[i] = add_one(a[i], b[i], scales)` for every `i`: an int8 addition in place, on the SIMD
/// kernel where [`add_i8_fast`] says so.
///
/// # Panics
///
/// When [`add_i8_fast`] is false for `scales` (the caller takes its own loops then), or the
/// slices' lengths differ (a bug in the caller).
pub(crate) fn add_i8_simd(a: &mut [i8], b: &[i8], scales: &AddScales) {
    assert!(
        add_i8_fast(scales),
        "no SIMD kernel takes the addition {scales:?} on this CPU"
    );
    #[cfg(target_arch = "x86_64")]
    super::x86::add_i8_avx512(a, b, scales);
    let _ = (a, b);
}
