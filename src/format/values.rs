//! The value rules of a weights file's tensors: which floats, integers and quantization scales a
//! layer accepts. One definition, applied by the decoders that bake a net ([`super::decode`])
//! and by [`super::check_net`] at run time, through the same `const fn`s.

use super::{Dtype, Error, TensorName};
use crate::kernels::le_bytes;

/// The range a tensor's values are checked against: `None` allows every value of the type.
pub(super) type Range = Option<(i32, i32)>;

/// `range` as the bounds of an `i32`.
pub(super) const fn bounds(range: Range) -> (i32, i32) {
    match range {
        Some(range) => range,
        None => (i32::MIN, i32::MAX),
    }
}

/// The index and value of the first `i8` of `bytes` outside `range`.
pub(super) const fn first_i8_outside(bytes: &[u8], range: Range) -> Option<(usize, i32)> {
    let (min, max) = bounds(range);
    if min > max || min > i8::MAX as i32 || max < i8::MIN as i32 {
        // An empty range (no layer asks for one): the first value is outside it.
        return match bytes.first() {
            Some(&b) => Some((0, b as i8 as i32)),
            None => None,
        };
    }
    // The range meets the values of an `i8`: its part inside them.
    let min = if min < i8::MIN as i32 {
        i8::MIN
    } else {
        min as i8
    };
    let max = if max > i8::MAX as i32 {
        i8::MAX
    } else {
        max as i8
    };
    match le_bytes::first_i8_outside(bytes, min, max) {
        Some(i) => Some((i, bytes[i] as i8 as i32)),
        None => None,
    }
}

/// The index and value of the first little-endian `i32` of `bytes` outside `range`.
pub(super) const fn first_i32_outside(bytes: &[u8], range: Range) -> Option<(usize, i32)> {
    let (min, max) = bounds(range);
    let (chunks, _) = bytes.as_chunks::<4>();
    let mut i = 0;
    while i < chunks.len() {
        let value = i32::from_le_bytes(chunks[i]);
        if value < min || value > max {
            return Some((i, value));
        }
        i += 1;
    }
    None
}

/// The error for element `index` of the scale `{module}.{field}` holding `value`.
pub(super) const fn not_a_scale(module: usize, field: &str, index: usize, value: f32) -> Error {
    Error::ScaleOutOfRange {
        name: TensorName::of(module, field),
        index,
        bits: value.to_bits(),
    }
}

/// The error for element `index` of `{module}.{field}` holding `value`, outside `range`.
pub(super) const fn out_of_range(
    module: usize,
    field: &str,
    index: usize,
    value: i32,
    range: Range,
) -> Error {
    let (min, max) = bounds(range);
    Error::OutOfRange {
        name: TensorName::of(module, field),
        index,
        value,
        min,
        max,
    }
}

/// The index and value of the first little-endian `f32` of `bytes` that is not a quantization
/// scale: not a positive normal number (`f32::MIN_POSITIVE..=f32::MAX`). Zero, negative and
/// subnormal values, and NaNs and infinities, are not scales.
///
/// Why normal: a subnormal scale has fewer than 24 significant bits (`1e-45` is a single bit,
/// `2^-149`), its reciprocal overflows `f32` (so a caller's `x / scale` or `x * (1.0 / scale)`
/// in `f32`, a pixel table's, is infinite), and no quantizer gives one: `nn::quantize`'s scales
/// are at least `f32::EPSILON` (activations) and `f32::MIN_POSITIVE` (weights).
pub(super) const fn first_non_scale_f32(bytes: &[u8]) -> Option<(usize, f32)> {
    let (chunks, _) = bytes.as_chunks::<4>();
    let mut i = 0;
    while i < chunks.len() {
        let value = f32::from_le_bytes(chunks[i]);
        // Written so that a NaN is not a scale either.
        let is_scale = value >= f32::MIN_POSITIVE && value <= f32::MAX;
        if !is_scale {
            return Some((i, value));
        }
        i += 1;
    }
    None
}

/// Checks the values of a tensor with the rule the decoders apply (they call the same
/// functions): the first NaN or infinity of a float tensor, then (for a quantization scale,
/// `scale`) its first value that is not a positive normal number, or the first integer
/// outside `range`, as [`Error::NonFinite`], [`Error::ScaleOutOfRange`] or
/// [`Error::OutOfRange`] naming `{module}.{field}`. `data` holds little-endian elements of
/// `dtype`; the dtypes no layer holds have no value rule here (a net's tensors never have
/// them: their dtypes are checked first).
///
/// What [`check_net`](super::check_net) evaluates for each of a net's tensors at run time.
pub(crate) const fn check_values(
    dtype: Dtype,
    data: &[u8],
    module: usize,
    field: &str,
    (range, scale): (Range, bool),
) -> Result<(), Error> {
    let non_finite = match dtype {
        Dtype::F32 => le_bytes::first_non_finite_f32(data),
        Dtype::F64 => le_bytes::first_non_finite_f64(data),
        _ => None,
    };
    if let Some(index) = non_finite {
        return Err(Error::NonFinite {
            name: TensorName::of(module, field),
            index,
        });
    }
    if scale
        && matches!(dtype, Dtype::F32)
        && let Some((index, value)) = first_non_scale_f32(data)
    {
        return Err(not_a_scale(module, field, index, value));
    }
    let outside = match dtype {
        Dtype::I8 => first_i8_outside(data, range),
        Dtype::I32 => first_i32_outside(data, range),
        _ => None,
    };
    match outside {
        Some((index, value)) => Err(out_of_range(module, field, index, value, range)),
        None => Ok(()),
    }
}
