//! Decoding tensors in `const` code: how a layer's [`Bake`](crate::nn::Bake) implementation
//! turns the bytes of a file into the arrays of a `static`.
//!
//! `const` code cannot call trait methods, so there is one set of functions per element type.
//! Each checks a tensor's values before copying them, so that a baked net holds only values the
//! rule allows: a NaN or an infinity is [`Error::NonFinite`], a quantization scale that is not
//! a positive normal number ([`f32_scale`]) [`Error::ScaleOutOfRange`], an integer outside its
//! tensor's [`range`](super::TensorSpec::range) [`Error::OutOfRange`], each for the first such element
//! by row-major index. The checks are the one definition of that value rule (written in
//! `kernels::le_bytes`, whole blocks of values per step of the compiler's interpreter): the
//! run-time loader's [`check_net`](super::check_net) runs the same functions on each tensor, so
//! the two paths cannot disagree on a value. The rest of the file (names, dtypes, shapes) is
//! checked before, where [`include_net!`](crate::include_net) is written; a tensor these
//! functions do not find with the dtype and shape they decode is reported as
//! [`Error::Missing`] or [`Error::Mismatch`] all the same.
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

use super::values::{
    Range, first_i8_outside, first_i32_outside, first_non_scale_f32, not_a_scale, out_of_range,
};
use super::{Dtype, Error, FieldPath, Index, Shape, Tensor, TensorName, parse};
use crate::kernels::le_bytes;

/// Where a decoder looks for its tensor: the bytes of a file (parsed again for each tensor),
/// or a file's [`Index`], which a baked net builds once for all its layers.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Bytes(&'a [u8]),
    Index(&'a Index<'a>),
}

impl Source<'_> {
    /// The file's module and the rest of the name of the layer's tensor `{module}.{field}`:
    /// the same, unless the layer sits inside a block ([`Index::within`]).
    const fn key(&self, module: usize, field: &str) -> (usize, FieldPath) {
        match self {
            Self::Bytes(_) => (module, FieldPath::new(field)),
            Self::Index(index) => index.scope().key(module, field),
        }
    }
}

/// The tensor `{module}.{field}` of `source`, checked to have `dtype` and `shape`.
const fn find<'a>(
    source: Source<'a>,
    module: usize,
    field: &str,
    dtype: Dtype,
    shape: &[usize],
) -> Result<Tensor<'a>, Error> {
    let found = match source {
        Source::Bytes(bytes) => match parse(bytes) {
            Ok(header) => header.find_module(module, field.as_bytes()),
            Err(e) => return Err(e),
        },
        Source::Index(index) => match index.find_module(module, field.as_bytes()) {
            Ok(found) => found,
            Err(e) => return Err(e),
        },
    };
    let name = TensorName::of(module, field);
    match found {
        Some(tensor) if tensor.dtype as u8 == dtype as u8 && tensor.shape.is(shape) => Ok(tensor),
        Some(tensor) => Err(Error::Mismatch {
            name,
            expected_dtype: dtype,
            expected_shape: Shape::new(shape),
            found_dtype: tensor.dtype,
            found_shape: tensor.shape,
            flattened: None,
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
        $t:ty, $dtype:ident, $first_bad:path, $copy:path, $checked:ident,
        $matrix:ident / $matrix_from:ident, $vector:ident / $vector_from:ident,
        $tensor4:ident / $tensor4_from:ident
    ) => {
        /// The data of the tensor `{module}.{field}` of `shape` in `source`, its values checked
        /// (the first NaN or infinity is [`Error::NonFinite`]).
        const fn $checked<'a>(
            source: Source<'a>,
            module: usize,
            field: &str,
            shape: &[usize],
        ) -> Result<&'a [u8], Error> {
            let key = source.key(module, field);
            let (module, field) = (key.0, key.1.as_str());
            let tensor = match find(source, module, field, Dtype::$dtype, shape) {
                Ok(tensor) => tensor,
                Err(e) => return Err(e),
            };
            match $first_bad(tensor.data) {
                Some(index) => Err(Error::NonFinite {
                    name: TensorName::of(module, field),
                    index,
                }),
                None => Ok(tensor.data),
            }
        }

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
            $matrix_from::<H, W>(Source::Bytes(bytes), module, field)
        }

        /// The same, from a [`Source`].
        pub(crate) const fn $matrix_from<const H: usize, const W: usize>(
            source: Source<'_>,
            module: usize,
            field: &str,
        ) -> Result<[[$t; W]; H], Error> {
            let data = match $checked(source, module, field, &[H, W]) {
                Ok(data) => data,
                Err(e) => return Err(e),
            };
            let mut out = [[0.0; W]; H];
            $copy(data, out.as_flattened_mut());
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
            $tensor4_from::<A, B, C, D>(Source::Bytes(bytes), module, field)
        }

        /// The same, from a [`Source`].
        pub(crate) const fn $tensor4_from<const A: usize, const B: usize, const C: usize, const D: usize>(
            source: Source<'_>,
            module: usize,
            field: &str,
        ) -> Result<[[[[$t; D]; C]; B]; A], Error> {
            let data = match $checked(source, module, field, &[A, B, C, D]) {
                Ok(data) => data,
                Err(e) => return Err(e),
            };
            let mut out = [[[[0.0; D]; C]; B]; A];
            $copy(
                data,
                out.as_flattened_mut().as_flattened_mut().as_flattened_mut(),
            );
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
            $vector_from::<N>(Source::Bytes(bytes), module, field)
        }

        /// The same, from a [`Source`].
        pub(crate) const fn $vector_from<const N: usize>(
            source: Source<'_>,
            module: usize,
            field: &str,
        ) -> Result<[$t; N], Error> {
            let data = match $checked(source, module, field, &[N]) {
                Ok(data) => data,
                Err(e) => return Err(e),
            };
            let mut out = [0.0; N];
            $copy(data, &mut out);
            Ok(out)
        }
    };
}
decoders!(
    f32,
    F32,
    le_bytes::first_non_finite_f32,
    le_bytes::copy_f32,
    checked_f32,
    f32_matrix / f32_matrix_from,
    f32_vector / f32_vector_from,
    f32_tensor4 / f32_tensor4_from
);
decoders!(
    f64,
    F64,
    le_bytes::first_non_finite_f64,
    le_bytes::copy_f64,
    checked_f64,
    f64_matrix / f64_matrix_from,
    f64_vector / f64_vector_from,
    f64_tensor4 / f64_tensor4_from
);

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
    i8_matrix_from::<H, W>(Source::Bytes(bytes), module, field, range)
}

/// [`i8_matrix`] from a [`Source`].
pub(crate) const fn i8_matrix_from<const H: usize, const W: usize>(
    source: Source<'_>,
    module: usize,
    field: &str,
    range: Range,
) -> Result<[[i8; W]; H], Error> {
    let key = source.key(module, field);
    let (module, field) = (key.0, key.1.as_str());
    let tensor = match find(source, module, field, Dtype::I8, &[H, W]) {
        Ok(tensor) => tensor,
        Err(e) => return Err(e),
    };
    if let Some((i, value)) = first_i8_outside(tensor.data, range) {
        return Err(out_of_range(module, field, i, value, range));
    }
    let mut out = [[0; W]; H];
    le_bytes::copy_i8(tensor.data, out.as_flattened_mut());
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
    i8_tensor4_from::<A, B, C, D>(Source::Bytes(bytes), module, field, range)
}

/// [`i8_tensor4`] from a [`Source`].
pub(crate) const fn i8_tensor4_from<
    const A: usize,
    const B: usize,
    const C: usize,
    const D: usize,
>(
    source: Source<'_>,
    module: usize,
    field: &str,
    range: Range,
) -> Result<[[[[i8; D]; C]; B]; A], Error> {
    let key = source.key(module, field);
    let (module, field) = (key.0, key.1.as_str());
    let tensor = match find(source, module, field, Dtype::I8, &[A, B, C, D]) {
        Ok(tensor) => tensor,
        Err(e) => return Err(e),
    };
    if let Some((i, value)) = first_i8_outside(tensor.data, range) {
        return Err(out_of_range(module, field, i, value, range));
    }
    let mut out = [[[[0; D]; C]; B]; A];
    le_bytes::copy_i8(
        tensor.data,
        out.as_flattened_mut().as_flattened_mut().as_flattened_mut(),
    );
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
    i32_vector_from::<N>(Source::Bytes(bytes), module, field, range)
}

/// [`i32_vector`] from a [`Source`].
pub(crate) const fn i32_vector_from<const N: usize>(
    source: Source<'_>,
    module: usize,
    field: &str,
    range: Range,
) -> Result<[i32; N], Error> {
    let key = source.key(module, field);
    let (module, field) = (key.0, key.1.as_str());
    let tensor = match find(source, module, field, Dtype::I32, &[N]) {
        Ok(tensor) => tensor,
        Err(e) => return Err(e),
    };
    if let Some((i, value)) = first_i32_outside(tensor.data, range) {
        return Err(out_of_range(module, field, i, value, range));
    }
    let mut out = [0; N];
    le_bytes::copy_i32(tensor.data, &mut out);
    Ok(out)
}

/// The `I8` scalar (shape `[]`, as PyTorch stores a zero point) `{module}.{field}` in the
/// safetensors file `bytes`.
///
/// # Errors
///
/// As [`i8_matrix`], without a range.
pub const fn i8_scalar(bytes: &[u8], module: usize, field: &str) -> Result<i8, Error> {
    i8_scalar_from(Source::Bytes(bytes), module, field)
}

/// [`i8_scalar`] from a [`Source`].
pub(crate) const fn i8_scalar_from(
    source: Source<'_>,
    module: usize,
    field: &str,
) -> Result<i8, Error> {
    let key = source.key(module, field);
    let (module, field) = (key.0, key.1.as_str());
    match find(source, module, field, Dtype::I8, &[]) {
        Ok(tensor) => Ok(tensor.data[0] as i8),
        Err(e) => Err(e),
    }
}

/// The `I64` scalar (shape `[]`, as PyTorch stores batch normalization's
/// `num_batches_tracked`) `{module}.{field}` in the safetensors file `bytes`.
///
/// # Errors
///
/// As [`i8_matrix`], without a range.
pub const fn i64_scalar(bytes: &[u8], module: usize, field: &str) -> Result<i64, Error> {
    i64_scalar_from(Source::Bytes(bytes), module, field)
}

/// [`i64_scalar`] from a [`Source`].
pub(crate) const fn i64_scalar_from(
    source: Source<'_>,
    module: usize,
    field: &str,
) -> Result<i64, Error> {
    let key = source.key(module, field);
    let (module, field) = (key.0, key.1.as_str());
    match find(source, module, field, Dtype::I64, &[]) {
        Ok(tensor) => {
            let mut bytes = [0; 8];
            let mut i = 0;
            while i < 8 {
                bytes[i] = tensor.data[i];
                i += 1;
            }
            Ok(i64::from_le_bytes(bytes))
        }
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
    f32_scalar_from(Source::Bytes(bytes), module, field)
}

/// [`f32_scalar`] from a [`Source`].
pub(crate) const fn f32_scalar_from(
    source: Source<'_>,
    module: usize,
    field: &str,
) -> Result<f32, Error> {
    let data = match checked_f32(source, module, field, &[]) {
        Ok(data) => data,
        Err(e) => return Err(e),
    };
    let mut out = [0.0];
    le_bytes::copy_f32(data, &mut out);
    Ok(out[0])
}

/// The `F32` scalar `{module}.{field}` in the safetensors file `bytes`, checked to be a
/// quantization scale: a positive normal number, `f32::MIN_POSITIVE..=f32::MAX` (an int8
/// layer's `input_scale` and `output_scale`; docs/quantization.md says why).
///
/// ```
/// use constmat::format::{decode, ErrorKind};
/// use constmat::io::safetensors;
/// use constmat::nn::QDense;
/// use constmat::quant::{Multiplier, Quantization};
///
/// let q = Quantization { scale: 0.5, zero_point: 0 };
/// let mut layer: QDense<1, 1> = QDense::new([[1]], [0], [Multiplier::from_real(1.0)], q, q);
/// let bytes = safetensors::to_bytes(&layer, &[]);
/// assert_eq!(decode::f32_scale(&bytes, 0, "input_scale"), Ok(0.5));
///
/// layer.input.scale = 1e-45; // subnormal
/// let bytes = safetensors::to_bytes(&layer, &[]);
/// let err = decode::f32_scale(&bytes, 0, "input_scale").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::ScaleOutOfRange);
/// ```
///
/// # Errors
///
/// As [`f32_scalar`]; then [`Error::ScaleOutOfRange`] for a value that is zero, negative or
/// subnormal.
pub const fn f32_scale(bytes: &[u8], module: usize, field: &str) -> Result<f32, Error> {
    f32_scale_from(Source::Bytes(bytes), module, field)
}

/// [`f32_scale`] from a [`Source`].
pub(crate) const fn f32_scale_from(
    source: Source<'_>,
    module: usize,
    field: &str,
) -> Result<f32, Error> {
    let data = match checked_f32(source, module, field, &[]) {
        Ok(data) => data,
        Err(e) => return Err(e),
    };
    if let Some((index, value)) = first_non_scale_f32(data) {
        // (`checked_f32` looked the tensor up by its name in the file; the error names it so.)
        let key = source.key(module, field);
        return Err(not_a_scale(key.0, key.1.as_str(), index, value));
    }
    let mut out = [0.0];
    le_bytes::copy_f32(data, &mut out);
    Ok(out[0])
}
