//! The safetensors format, read by one set of `const fn`s: the rule every weights file is held
//! to, whether it is baked into a `static` at compile time
//! ([`include_net!`](crate::include_net)) or loaded at run time
//! ([`io::safetensors`](crate::io::safetensors)).
//!
//! A safetensors file is an 8-byte little-endian header length `n`, a JSON header of `n` bytes,
//! and the tensors' raw bytes. The header is one JSON object mapping each tensor's name to
//! `{"dtype":"F32","shape":[O,I],"data_offsets":[begin,end]}` (offsets into the data that
//! follows the header), plus an optional `"__metadata__"` object of strings:
//!
//! ```text
//! {"__metadata__":{"format":"pt"},"0.weight":{"dtype":"F32","shape":[3,4],"data_offsets":[0,48]},...}
//! ```
//!
//! # One rule, two callers
//!
//! [`parse`] checks a file against the format and [`check_net`] checks it against a net's
//! [`NetSpec`]; [`validate`] does both. Because they are `const fn`s, the compile-time baking
//! and the run-time loader call the very same code, so they accept exactly the same files and
//! report the same [`Error`] for the rest. (Baking runs [`validate_layout`], everything but the
//! values, and checks each value as the [`decode`] functions read it, so that the values are
//! read once: the compiler's interpreter is slow, and each layer's evaluation has a step limit.) The rule is the one of the `safetensors` crate (the
//! reference implementation, which PyTorch's files are written by), with a few rejections of
//! our own where that crate would silently pick one reading of an ambiguous file:
//!
//! | what | rule |
//! | --- | --- |
//! | header length | at least 8 bytes in the file; the length `n` at most 100,000,000 and at most what follows it |
//! | header | UTF-8; one JSON object, nothing but whitespace after its closing `}` |
//! | names | unique (the reference crate keeps the last of two equal names: rejected here), without `\` escapes |
//! | `__metadata__` | absent, `null`, or an object whose values are all strings |
//! | each tensor | exactly the fields `dtype` (a known name), `shape` (non-negative integers) and `data_offsets` (two of them) |
//! | sizes | `end - begin` is the product of the shape times the dtype's size, with no overflow |
//! | offsets | sorted by begin, the tensors' data follow each other from 0 with no gap or overlap, and end exactly where the file does |
//! | count | at most [`MAX_TENSORS`] tensors (the reader keeps no heap) |
//!
//! Then, for a net: every tensor of its [`NetSpec`] is present with the dtype and shape it
//! needs, float values are finite (an int8 layer's quantization scales positive normal numbers,
//! [`TensorSpec::scale`]), integers within their [`TensorSpec::range`], and the file holds no
//! tensor the net lacks.
//!
//! ```
//! use constmat::format::{self, ErrorKind};
//! use constmat::io::safetensors;
//! use constmat::nn::{Dense, Layer, Parameters, Relu};
//!
//! type Net = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2>];
//! let bytes = safetensors::to_bytes(&Net::zeros(), &[]);
//! assert!(format::validate(&bytes, &Net::SPEC).is_ok());
//!
//! let cut = &bytes[..bytes.len() - 4];
//! let err = format::validate(cut, &Net::SPEC).unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::DataLength);
//! assert_eq!(
//!     err.to_string(),
//!     "not a valid safetensors file: the header says the data section is 92 bytes, \
//!      the file has 88 after the header"
//! );
//! ```
//!
//! # Messages without a heap
//!
//! A `const` evaluation can only fail with a single `&str`, and this module needs no `alloc`,
//! so an [`Error`] is written out by [`Error::message`] into a fixed-size [`Message`] buffer;
//! its `Display` and the compile-time panic print that same text.

// An `Error` is a few hundred bytes: it is `Copy` and borrows nothing, so that `const` code can
// return it and a loader can keep it after the file is gone, and there is no heap to box it in.
#![allow(clippy::result_large_err)]

pub mod decode;
mod error;
mod parse;
mod spec;
mod values;

pub use error::{Error, ErrorKind, Message, Shape, TensorName};
#[doc(hidden)]
pub use parse::Index;
pub use parse::{
    Header, MAX_HEADER_LEN, MAX_TENSORS, Tensor, check_layout, check_net, parse, validate,
    validate_layout,
};
#[doc(hidden)]
pub use spec::Scope;
pub use spec::{Element, FieldPath, NetSpec, Part, TensorAt, TensorSpec};

/// The element types of the safetensors format, with their names as the header spells them.
///
/// Every dtype of the reference implementation is known, so that a file is judged by the same
/// size rule whatever it holds; a net reads only the dtypes of its [`Element`] types.
///
/// ```
/// use constmat::format::Dtype;
/// assert_eq!(Dtype::from_name(b"F32"), Some(Dtype::F32));
/// assert_eq!(Dtype::F32.name(), "F32");
/// assert_eq!(Dtype::BF16.bits(), 16);
/// assert_eq!(Dtype::from_name(b"f32"), None); // names are upper case
/// ```
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    /// Boolean, one byte.
    BOOL,
    /// 4-bit float (FP4 E2M1).
    F4,
    /// 6-bit float, 2 exponent and 3 mantissa bits.
    F6_E2M3,
    /// 6-bit float, 3 exponent and 2 mantissa bits.
    F6_E3M2,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// 8-bit float, 5 exponent and 2 mantissa bits.
    F8_E5M2,
    /// 8-bit float, 4 exponent and 3 mantissa bits.
    F8_E4M3,
    /// 8-bit exponent-only float (a scale).
    F8_E8M0,
    /// 8-bit float E4M3 without negative zero.
    F8_E4M3FNUZ,
    /// 8-bit float E5M2 without negative zero.
    F8_E5M2FNUZ,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// IEEE single precision: `f32`.
    F32,
    /// Complex of two `f32`.
    C64,
    /// IEEE double precision: `f64`.
    F64,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
}

impl Dtype {
    const ALL: [Self; 22] = [
        Self::BOOL,
        Self::F4,
        Self::F6_E2M3,
        Self::F6_E3M2,
        Self::U8,
        Self::I8,
        Self::F8_E5M2,
        Self::F8_E4M3,
        Self::F8_E8M0,
        Self::F8_E4M3FNUZ,
        Self::F8_E5M2FNUZ,
        Self::I16,
        Self::U16,
        Self::F16,
        Self::BF16,
        Self::I32,
        Self::U32,
        Self::F32,
        Self::C64,
        Self::F64,
        Self::I64,
        Self::U64,
    ];

    /// The name in a header, e.g. `"F32"`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::BOOL => "BOOL",
            Self::F4 => "F4",
            Self::F6_E2M3 => "F6_E2M3",
            Self::F6_E3M2 => "F6_E3M2",
            Self::U8 => "U8",
            Self::I8 => "I8",
            Self::F8_E5M2 => "F8_E5M2",
            Self::F8_E4M3 => "F8_E4M3",
            Self::F8_E8M0 => "F8_E8M0",
            Self::F8_E4M3FNUZ => "F8_E4M3FNUZ",
            Self::F8_E5M2FNUZ => "F8_E5M2FNUZ",
            Self::I16 => "I16",
            Self::U16 => "U16",
            Self::F16 => "F16",
            Self::BF16 => "BF16",
            Self::I32 => "I32",
            Self::U32 => "U32",
            Self::F32 => "F32",
            Self::C64 => "C64",
            Self::F64 => "F64",
            Self::I64 => "I64",
            Self::U64 => "U64",
        }
    }

    /// The size of one element in bits (4 and 6 for the sub-byte floats).
    #[must_use]
    pub const fn bits(self) -> usize {
        match self {
            Self::F4 => 4,
            Self::F6_E2M3 | Self::F6_E3M2 => 6,
            Self::BOOL
            | Self::U8
            | Self::I8
            | Self::F8_E5M2
            | Self::F8_E4M3
            | Self::F8_E8M0
            | Self::F8_E4M3FNUZ
            | Self::F8_E5M2FNUZ => 8,
            Self::I16 | Self::U16 | Self::F16 | Self::BF16 => 16,
            Self::I32 | Self::U32 | Self::F32 => 32,
            Self::C64 | Self::F64 | Self::I64 | Self::U64 => 64,
        }
    }

    /// The dtype a header names `name`, or `None` for a name the format does not have.
    #[must_use]
    pub const fn from_name(name: &[u8]) -> Option<Self> {
        let mut i = 0;
        while i < Self::ALL.len() {
            if bytes_eq(Self::ALL[i].name().as_bytes(), name) {
                return Some(Self::ALL[i]);
            }
            i += 1;
        }
        None
    }
}

/// Byte-wise equality (`==` on slices is a trait method, which a `const fn` cannot call).
pub(crate) const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
