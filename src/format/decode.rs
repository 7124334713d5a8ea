//! Decoding tensors in `const` code: how a layer's [`Bake`](crate::nn::Bake) implementation
//! turns the bytes of a file into the arrays of a `static`.
//!
//! `const` code cannot call trait methods, so there is one set of functions per element type.
//! Each checks the values as it decodes them, so that a baked net reads its values once: a
//! NaN or an infinity is [`Error::NonFinite`], an integer outside its tensor's
//! [`range`](super::TensorSpec::range) [`Error::OutOfRange`], each for the first such element
//! by row-major index. This module holds the one definition of that value rule: the run-time
//! loader's [`check_net`](super::check_net) runs the same decoding functions over each tensor
//! (into a scratch buffer), so the two paths cannot disagree on a value. The rest of the file (names, dtypes, shapes) is checked before,
//! by [`validate_layout`](super::validate_layout), where [`include_net!`](crate::include_net)
//! is written; a tensor these functions do not find with the dtype and shape they decode is
//! reported as [`Error::Missing`] or [`Error::Mismatch`] all the same.
//!
//! ```
//! use constmat::format::{decode, Error};
//! use constmat::io::safetensors;
//! use constmat::nn::{Dense, Parameters};
//!
//! let mut layer = Dense::<f32, 2, 1>::zeros();
//! layer.weight.as_mut_slice().copy_from_slice(&[0.5, -2.0]);
//! let bytes = safetensors::to_bytes(&layer, &[]);
//! assert_eq!(decode::f32_matrix::<1, 2>(&bytes, 0, "weight"), Ok([[0.5, -2.0]]));
//! assert!(matches!(decode::f32_matrix::<2, 1>(&bytes, 0, "weight"), Err(Error::Mismatch { .. })));
//!
//! layer.weight.as_mut_slice()[1] = f32::NAN;
//! let bytes = safetensors::to_bytes(&layer, &[]);
//! let err = decode::f32_matrix::<1, 2>(&bytes, 0, "weight").unwrap_err();
//! assert_eq!(err.to_string(), "tensor 0.weight: element 1 is not a finite number");
//! ```

use super::{Dtype, Error, Shape, Tensor, TensorName, parse};

/// The tensor `{module}.{field}` of `bytes`, checked to have `dtype` and `shape`.
const fn find<'a>(
    bytes: &'a [u8],
    module: usize,
    field: &str,
    dtype: Dtype,
    shape: &[usize],
) -> Result<Tensor<'a>, Error> {
    let header = match parse(bytes) {
        Ok(header) => header,
        Err(e) => return Err(e),
    };
    let name = TensorName::of(module, field);
    match header.find_module(module, field.as_bytes()) {
        Some(tensor) if tensor.dtype as u8 == dtype as u8 && tensor.shape.is(shape) => Ok(tensor),
        Some(tensor) => Err(Error::Mismatch {
            name,
            expected_dtype: dtype,
            expected_shape: Shape::new(shape),
            found_dtype: tensor.dtype,
            found_shape: tensor.shape,
        }),
        None => Err(Error::Missing {
            name,
            dtype,
            shape: Shape::new(shape),
        }),
    }
}

macro_rules! decoders {
    (
        $t:ty, $dtype:ident, $bits:ty, $exponent:expr, $matrix:ident, $vector:ident,
        $tensor4:ident, $fill:ident, |$b:ident| $assemble:expr
    ) => {
        #[doc = concat!(
            "The `", stringify!($dtype), "` tensor `{module}.{field}` of shape `[H, W]` in the ",
            "safetensors file `bytes`.\n\n",
            "# Errors\n\n",
            "The file's [`Error`] if it is not valid; [`Error::Missing`] or [`Error::Mismatch`] ",
            "if it does not hold the tensor with that dtype and shape; [`Error::NonFinite`] for ",
            "its first NaN or infinity.",
        )]
        pub const fn $matrix<const H: usize, const W: usize>(
            bytes: &[u8],
            module: usize,
            field: &str,
        ) -> Result<[[$t; W]; H], Error> {
            let tensor = match find(bytes, module, field, Dtype::$dtype, &[H, W]) {
                Ok(tensor) => tensor,
                Err(e) => return Err(e),
            };
            let mut out = [[0.0; W]; H];
            let mut row = 0;
            while row < H {
                let (_, rest) = tensor.data.split_at(row * W * size_of::<$t>());
                if let Some(i) = $fill(rest, &mut out[row]) {
                    return Err(Error::NonFinite {
                        name: TensorName::of(module, field),
                        index: row * W + i,
                    });
                }
                row += 1;
            }
            Ok(out)
        }

        #[doc = concat!(
            "The `", stringify!($dtype), "` tensor `{module}.{field}` of shape `[A, B, C, D]` in ",
            "the safetensors file `bytes` (a convolution's weight, `[out, in, kh, kw]`).\n\n",
            "# Errors\n\n",
            "As [`", stringify!($matrix), "`].",
        )]
        pub const fn $tensor4<const A: usize, const B: usize, const C: usize, const D: usize>(
            bytes: &[u8],
            module: usize,
            field: &str,
        ) -> Result<[[[[$t; D]; C]; B]; A], Error> {
            let tensor = match find(bytes, module, field, Dtype::$dtype, &[A, B, C, D]) {
                Ok(tensor) => tensor,
                Err(e) => return Err(e),
            };
            let mut out = [[[[0.0; D]; C]; B]; A];
            let mut row = 0;
            while row < A * B * C {
                let (_, rest) = tensor.data.split_at(row * D * size_of::<$t>());
                let (a, b, c) = (row / (B * C), row / C % B, row % C);
                if let Some(i) = $fill(rest, &mut out[a][b][c]) {
                    return Err(Error::NonFinite {
                        name: TensorName::of(module, field),
                        index: row * D + i,
                    });
                }
                row += 1;
            }
            Ok(out)
        }

        #[doc = concat!(
            "The `", stringify!($dtype), "` tensor `{module}.{field}` of shape `[N]` in the ",
            "safetensors file `bytes`.\n\n",
            "# Errors\n\n",
            "As [`", stringify!($matrix), "`].",
        )]
        pub const fn $vector<const N: usize>(
            bytes: &[u8],
            module: usize,
            field: &str,
        ) -> Result<[$t; N], Error> {
            let tensor = match find(bytes, module, field, Dtype::$dtype, &[N]) {
                Ok(tensor) => tensor,
                Err(e) => return Err(e),
            };
            let mut out = [0.0; N];
            match $fill(tensor.data, &mut out) {
                Some(index) => Err(Error::NonFinite {
                    name: TensorName::of(module, field),
                    index,
                }),
                None => Ok(out),
            }
        }

        /// Decodes `out.len()` little-endian values from the start of `bytes` (which holds at
        /// least that many: the caller found the tensor with its shape). Returns the index of
        /// the first NaN or infinity (its exponent bits all ones), if any.
        const fn $fill(bytes: &[u8], out: &mut [$t]) -> Option<usize> {
            let (chunks, _) = bytes.as_chunks::<{ size_of::<$t>() }>();
            // The bound is computed once: the compiler interprets this loop step by step, and a
            // call per element (`len()`) would cost as much as the decoding.
            let n = if out.len() < chunks.len() {
                out.len()
            } else {
                chunks.len()
            };
            let mut i = 0;
            while i < n {
                // Assembled by hand: `from_le_bytes` would be a call, and calls are what costs
                // most when the compiler interprets this loop (it halves the build time).
                let $b = chunks[i];
                let bits: $bits = $assemble;
                if bits & $exponent == $exponent {
                    return Some(i);
                }
                out[i] = <$t>::from_bits(bits);
                i += 1;
            }
            None
        }
    };
}

decoders!(
    f32,
    F32,
    u32,
    0x7f80_0000,
    f32_matrix,
    f32_vector,
    f32_tensor4,
    fill_f32,
    |b| { (b[0] as u32) | (b[1] as u32) << 8 | (b[2] as u32) << 16 | (b[3] as u32) << 24 }
);
decoders!(
    f64,
    F64,
    u64,
    0x7ff0_0000_0000_0000,
    f64_matrix,
    f64_vector,
    f64_tensor4,
    fill_f64,
    |b| {
        (b[0] as u64)
            | (b[1] as u64) << 8
            | (b[2] as u64) << 16
            | (b[3] as u64) << 24
            | (b[4] as u64) << 32
            | (b[5] as u64) << 40
            | (b[6] as u64) << 48
            | (b[7] as u64) << 56
    }
);

/// The range a tensor's values are checked against: `None` allows every value of the type.
type Range = Option<(i32, i32)>;

/// Decodes `out.len()` little-endian integers of `SIZE` bytes (1 or 4) from the start of
/// `bytes`, checking each against `range`; returns the index and value of the first outside
/// it, if any.
const fn fill_integers<const SIZE: usize>(
    bytes: &[u8],
    out: &mut [i32],
    range: Range,
) -> Option<(usize, i32)> {
    let (chunks, _) = bytes.as_chunks::<SIZE>();
    let n = if out.len() < chunks.len() {
        out.len()
    } else {
        chunks.len()
    };
    let (min, max) = match range {
        Some(range) => range,
        None => (i32::MIN, i32::MAX),
    };
    let mut i = 0;
    while i < n {
        let b = chunks[i];
        let value = if SIZE == 1 {
            b[0] as i8 as i32
        } else {
            (b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16 | (b[3] as u32) << 24) as i32
        };
        if value < min || value > max {
            return Some((i, value));
        }
        out[i] = value;
        i += 1;
    }
    None
}

/// The error for element `index` of `{module}.{field}` holding `value`, outside `range`.
const fn out_of_range(module: usize, field: &str, index: usize, value: i32, range: Range) -> Error {
    let (min, max) = match range {
        Some(range) => range,
        None => (i32::MIN, i32::MAX),
    };
    Error::OutOfRange {
        name: TensorName::of(module, field),
        index,
        value,
        min,
        max,
    }
}

/// Elements decoded at a time by [`check_values`]: its scratch buffer, on the stack.
const CHECK_CHUNK: usize = 256;

/// Checks the values of a tensor with the rule the decoders apply (they are the ones that run
/// here, into a scratch buffer): the first NaN or infinity of a float tensor, or the first
/// integer outside `range`, as [`Error::NonFinite`] or [`Error::OutOfRange`] naming
/// `{module}.{field}`. `data` holds little-endian elements of `dtype`; the dtypes no layer
/// holds have no value rule here (a net's tensors never have them: their dtypes are checked
/// first).
///
/// What [`check_net`](super::check_net) evaluates for each of a net's tensors at run time.
pub(crate) const fn check_values(
    dtype: Dtype,
    data: &[u8],
    module: usize,
    field: &str,
    range: Range,
) -> Result<(), Error> {
    let size = match dtype {
        Dtype::F32 | Dtype::I32 => 4,
        Dtype::F64 => 8,
        Dtype::I8 => 1,
        _ => return Ok(()),
    };
    let count = data.len() / size;
    let mut start = 0;
    while start < count {
        let n = if count - start < CHECK_CHUNK {
            count - start
        } else {
            CHECK_CHUNK
        };
        let (_, rest) = data.split_at(start * size);
        let bad = match dtype {
            Dtype::F32 => {
                let mut scratch = [0.0; CHECK_CHUNK];
                match fill_f32(rest, scratch.split_at_mut(n).0) {
                    Some(i) => Some((i, None)),
                    None => None,
                }
            }
            Dtype::F64 => {
                let mut scratch = [0.0; CHECK_CHUNK];
                match fill_f64(rest, scratch.split_at_mut(n).0) {
                    Some(i) => Some((i, None)),
                    None => None,
                }
            }
            _ => {
                let mut scratch = [0; CHECK_CHUNK];
                let out = scratch.split_at_mut(n).0;
                let bad = if size == 1 {
                    fill_integers::<1>(rest, out, range)
                } else {
                    fill_integers::<4>(rest, out, range)
                };
                match bad {
                    Some((i, value)) => Some((i, Some(value))),
                    None => None,
                }
            }
        };
        match bad {
            Some((i, None)) => {
                return Err(Error::NonFinite {
                    name: TensorName::of(module, field),
                    index: start + i,
                });
            }
            Some((i, Some(value))) => {
                return Err(out_of_range(module, field, start + i, value, range));
            }
            None => {}
        }
        start += n;
    }
    Ok(())
}

/// The `I8` tensor `{module}.{field}` of shape `[H, W]` in the safetensors file `bytes`, each
/// value checked against `range` (an int8 weight: `Some((-127, 127))`).
///
/// # Errors
///
/// The file's [`Error`] if it is not valid; [`Error::Missing`] or [`Error::Mismatch`] if it
/// does not hold the tensor with that dtype and shape; [`Error::OutOfRange`] for its first value
/// outside `range`.
pub const fn i8_matrix<const H: usize, const W: usize>(
    bytes: &[u8],
    module: usize,
    field: &str,
    range: Range,
) -> Result<[[i8; W]; H], Error> {
    let tensor = match find(bytes, module, field, Dtype::I8, &[H, W]) {
        Ok(tensor) => tensor,
        Err(e) => return Err(e),
    };
    let mut out = [[0; W]; H];
    let mut row = 0;
    while row < H {
        let mut values = [0; W];
        let (_, rest) = tensor.data.split_at(row * W);
        if let Some((i, value)) = fill_integers::<1>(rest, &mut values, range) {
            return Err(out_of_range(module, field, row * W + i, value, range));
        }
        let mut i = 0;
        while i < W {
            out[row][i] = values[i] as i8;
            i += 1;
        }
        row += 1;
    }
    Ok(out)
}

/// The `I8` tensor `{module}.{field}` of shape `[A, B, C, D]` in the safetensors file `bytes`
/// (an int8 convolution's weight, `[out, in, kh, kw]`), each value checked against `range`.
///
/// # Errors
///
/// As [`i8_matrix`].
pub const fn i8_tensor4<const A: usize, const B: usize, const C: usize, const D: usize>(
    bytes: &[u8],
    module: usize,
    field: &str,
    range: Range,
) -> Result<[[[[i8; D]; C]; B]; A], Error> {
    let tensor = match find(bytes, module, field, Dtype::I8, &[A, B, C, D]) {
        Ok(tensor) => tensor,
        Err(e) => return Err(e),
    };
    let mut out = [[[[0; D]; C]; B]; A];
    let mut row = 0;
    while row < A * B * C {
        let mut values = [0; D];
        let (_, rest) = tensor.data.split_at(row * D);
        if let Some((i, value)) = fill_integers::<1>(rest, &mut values, range) {
            return Err(out_of_range(module, field, row * D + i, value, range));
        }
        let (a, b, c) = (row / (B * C), row / C % B, row % C);
        let mut i = 0;
        while i < D {
            out[a][b][c][i] = values[i] as i8;
            i += 1;
        }
        row += 1;
    }
    Ok(out)
}

/// The `I32` tensor `{module}.{field}` of shape `[N]` in the safetensors file `bytes`, each
/// value checked against `range` (a requantization exponent: `Some((-31, 30))`).
///
/// # Errors
///
/// As [`i8_matrix`].
pub const fn i32_vector<const N: usize>(
    bytes: &[u8],
    module: usize,
    field: &str,
    range: Range,
) -> Result<[i32; N], Error> {
    let tensor = match find(bytes, module, field, Dtype::I32, &[N]) {
        Ok(tensor) => tensor,
        Err(e) => return Err(e),
    };
    let mut out = [0; N];
    match fill_integers::<4>(tensor.data, &mut out, range) {
        Some((i, value)) => Err(out_of_range(module, field, i, value, range)),
        None => Ok(out),
    }
}

/// The `I8` scalar (shape `[]`, as PyTorch stores a zero point) `{module}.{field}` in the
/// safetensors file `bytes`.
///
/// # Errors
///
/// As [`i8_matrix`], without a range.
pub const fn i8_scalar(bytes: &[u8], module: usize, field: &str) -> Result<i8, Error> {
    match find(bytes, module, field, Dtype::I8, &[]) {
        Ok(tensor) => Ok(tensor.data[0] as i8),
        Err(e) => Err(e),
    }
}

/// The `F32` scalar (shape `[]`, as PyTorch stores a scale) `{module}.{field}` in the
/// safetensors file `bytes`.
///
/// # Errors
///
/// As [`f32_matrix`].
pub const fn f32_scalar(bytes: &[u8], module: usize, field: &str) -> Result<f32, Error> {
    let tensor = match find(bytes, module, field, Dtype::F32, &[]) {
        Ok(tensor) => tensor,
        Err(e) => return Err(e),
    };
    let mut out = [0.0];
    match fill_f32(tensor.data, &mut out) {
        Some(index) => Err(Error::NonFinite {
            name: TensorName::of(module, field),
            index,
        }),
        None => Ok(out[0]),
    }
}
