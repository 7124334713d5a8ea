//! Saving and loading parameters as [safetensors](https://github.com/huggingface/safetensors).
//!
//! Tensor names and shapes follow PyTorch's `nn.Sequential` (see
//! [`Parameters`](crate::nn::Parameters)): the 784-128-64-10 ReLU MLP is
//! `Sequential(Linear(784, 128), ReLU(), Linear(128, 64), ReLU(), Linear(64, 10))`, with tensors
//! `0.weight [128, 784]`, `0.bias [128]`, `2.weight [64, 128]`, `2.bias [64]`, `4.weight [10, 64]`,
//! `4.bias [10]`. So a file written by `safetensors.torch.save_file(model.state_dict(), path)`
//! loads directly, and a file written here loads into that PyTorch model.
//!
//! Loading checks every tensor against the net's type and reports the first problem precisely:
//!
//! ```
//! use constmat::io::safetensors;
//! use constmat::nn::{Dense, Identity, Parameters, Relu};
//!
//! type Small = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2, Identity>];
//! type Other = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 3, Identity>];
//!
//! let bytes = safetensors::to_bytes(&Small::zeros(), &[]);
//! let back: Small = safetensors::from_bytes(&bytes)?;
//! assert_eq!(back, Small::zeros());
//!
//! let err = safetensors::from_bytes::<Other>(&bytes).unwrap_err();
//! assert_eq!(err.to_string(), "tensor 2.weight: expected f32 [3, 3], found f32 [2, 3]");
//! # Ok::<(), safetensors::WeightsError>(())
//! ```

use std::boxed::Box;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::string::{String, ToString};
use std::vec::Vec;

use crate::format::{self, Dtype};
use crate::nn::Weights;

pub use crate::format::Element;

/// The parameters of `net` as a safetensors file, with the given extra metadata (the
/// `__metadata__` string map; `format = pt`, as PyTorch writes it, is added unless given).
///
/// The file is the same for the same net and metadata, byte for byte: metadata keys are
/// written in sorted order, tensors sorted as the reference implementation sorts them (by
/// dtype alignment, then by name), and the header is padded with spaces to a multiple of 8
/// bytes so that the data is aligned.
///
/// ```
/// use constmat::io::safetensors;
/// use constmat::nn::{Dense, Parameters, Relu};
///
/// let bytes = safetensors::to_bytes(&Dense::<f64, 2, 2, Relu>::zeros(), &[("note", "demo")]);
/// let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
/// let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
/// assert_eq!(
///     header.trim_end(),
///     r#"{"__metadata__":{"format":"pt","note":"demo"},"0.bias":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"0.weight":{"dtype":"F64","shape":[2,2],"data_offsets":[16,48]}}"#
/// );
/// ```
#[must_use]
pub fn to_bytes<P: Weights>(net: &P, metadata: &[(&str, &str)]) -> Vec<u8> {
    let mut tensors: Vec<(String, Dtype, &[usize], Vec<u8>)> = (0..P::SPEC.tensor_count())
        .map(|k| {
            let Some(tensor) = P::SPEC.tensor(k) else {
                unreachable!("k is below the net's tensor count")
            };
            let mut data = Vec::new();
            net.write_tensor(k, &mut data);
            (
                tensor.name().to_string(),
                tensor.spec.dtype,
                tensor.spec.shape,
                data,
            )
        })
        .collect();
    // The reference implementation's order: larger elements first (each tensor's data then
    // stays aligned to its element size), then by name.
    tensors.sort_by(|(a, da, _, _), (b, db, _, _)| db.bits().cmp(&da.bits()).then(a.cmp(b)));
    let mut info: BTreeMap<&str, &str> = metadata.iter().copied().collect();
    info.entry("format").or_insert("pt");

    let mut header = String::from("{\"__metadata__\":{");
    for (i, (key, value)) in info.iter().enumerate() {
        if i > 0 {
            header.push(',');
        }
        push_json_string(&mut header, key);
        header.push(':');
        push_json_string(&mut header, value);
    }
    header.push('}');
    let mut offset = 0;
    for (name, dtype, shape, data) in &tensors {
        header.push(',');
        push_json_string(&mut header, name);
        header.push_str(":{\"dtype\":");
        push_json_string(&mut header, dtype.name());
        header.push_str(",\"shape\":[");
        for (i, dim) in shape.iter().enumerate() {
            if i > 0 {
                header.push(',');
            }
            header.push_str(&dim.to_string());
        }
        header.push_str(&std::format!(
            "],\"data_offsets\":[{offset},{}]}}",
            offset + data.len()
        ));
        offset += data.len();
    }
    header.push('}');
    while !header.len().is_multiple_of(8) {
        header.push(' ');
    }

    let mut bytes = Vec::with_capacity(8 + header.len() + offset);
    bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for (_, _, _, data) in &tensors {
        bytes.extend_from_slice(data);
    }
    bytes
}

/// Appends `s` as a JSON string, escaped as `serde_json` escapes it.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&std::format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes the parameters of `net` to `path` (see [`to_bytes`]), replacing any file there whole
/// or not at all.
///
/// The file is written under a temporary name in the same directory (`.NAME.PID-N.tmp`),
/// flushed to the disk and then renamed over `path` ([`write_atomically`](super::write_atomically)),
/// so `path` always holds a complete file: the one that was there until the new one is
/// complete, the new one after. A save that fails part-way (a full disk) or a process killed
/// while saving never leaves a truncated file at `path`, and a good file saved there before is
/// kept. On failure the temporary file is removed (a process killed while writing may leave it).
///
/// # Errors
///
/// [`WeightsErrorKind::Io`] when the file cannot be written (the directory is missing or
/// read-only, the disk is full, ...); the error carries `path`, and `path` is unchanged.
pub fn save<P: Weights>(
    net: &P,
    path: impl AsRef<Path>,
    metadata: &[(&str, &str)],
) -> Result<(), WeightsError> {
    let path = path.as_ref();
    super::write_atomically(path, &to_bytes(net, metadata))
        .map_err(|e| WeightsError::new(WeightsErrorKind::Io(e)).with_path(path))
}

/// A net of type `P` with the parameters stored in `bytes`.
///
/// The file is checked by [`format::validate`], the same rule that
/// [`include_net!`](crate::include_net) applies at compile time.
///
/// # Errors
///
/// A [`WeightsError`] of kind [`WeightsErrorKind::Format`] for the first problem found: the
/// file is truncated or corrupt, a tensor is missing, has another dtype or shape than `P`
/// needs, holds a NaN or infinite value, (an int8 net's integers) a value outside its range
/// ([`format::Error::OutOfRange`]) or (an int8 layer's quantization scales) a scale that is
/// not a positive normal number ([`format::Error::ScaleOutOfRange`]), or the file holds a
/// tensor `P` does not have.
pub fn from_bytes<P: Weights>(bytes: &[u8]) -> Result<P, WeightsError> {
    let header = format::validate(bytes, &P::SPEC)?;
    Ok(P::read_tensors(&mut |k| {
        let Some(at) = P::SPEC.tensor(k) else {
            unreachable!("k is below the net's tensor count")
        };
        let Some(tensor) = header.find_module(at.module, at.field.as_bytes()) else {
            unreachable!("format::validate found every tensor of the net")
        };
        tensor.data
    }))
}

/// Reads a net of type `P` from the safetensors file at `path`.
///
/// # Errors
///
/// As [`from_bytes`], plus [`WeightsErrorKind::Io`] when the file cannot be read; the error
/// carries the path.
pub fn load<P: Weights>(path: impl AsRef<Path>) -> Result<P, WeightsError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| WeightsError::new(WeightsErrorKind::Io(e)).with_path(path))?;
    from_bytes(&bytes).map_err(|e| e.with_path(path))
}

/// Overwrites the parameters of `net` with those stored in `bytes`, after checking all of them;
/// on error `net` is left unchanged.
///
/// # Errors
///
/// As [`from_bytes`].
pub fn load_into<P: Weights>(net: &mut P, bytes: &[u8]) -> Result<(), WeightsError> {
    *net = from_bytes(bytes)?;
    Ok(())
}

/// Why weights could not be saved or loaded, with the file's path when known.
#[derive(Debug)]
pub struct WeightsError {
    // Boxed: the kinds carry names and shapes, and a small error keeps `Result`s cheap to return.
    kind: Box<WeightsErrorKind>,
    path: Option<PathBuf>,
}

impl WeightsError {
    /// An error of the given kind, without a path.
    #[must_use]
    pub fn new(kind: WeightsErrorKind) -> Self {
        Self {
            kind: Box::new(kind),
            path: None,
        }
    }

    /// The same error, about the file at `path`.
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &WeightsErrorKind {
        &self.kind
    }

    /// The file, when known.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The format error, unless reading or writing the file failed.
    ///
    /// ```
    /// use constmat::format::ErrorKind;
    /// use constmat::io::safetensors;
    /// use constmat::nn::Dense;
    ///
    /// let err = safetensors::from_bytes::<Dense<f32, 2, 2>>(b"garbage").unwrap_err();
    /// assert_eq!(err.format_error().map(|e| e.kind()), Some(ErrorKind::Truncated));
    /// ```
    #[must_use]
    pub fn format_error(&self) -> Option<&format::Error> {
        match &*self.kind {
            WeightsErrorKind::Format(e) => Some(e),
            WeightsErrorKind::Io(_) => None,
        }
    }
}

/// The kinds of [`WeightsError`].
#[derive(Debug)]
#[non_exhaustive]
// `WeightsError` boxes its kind, so the size of the larger variant costs one allocation.
#[allow(clippy::large_enum_variant)]
pub enum WeightsErrorKind {
    /// Reading or writing the file failed.
    Io(std::io::Error),
    /// The file is not a valid safetensors file, or not one of this net: the same
    /// [`format::Error`] that baking the file with [`include_net!`](crate::include_net) fails
    /// with.
    Format(format::Error),
}

impl fmt::Display for WeightsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Format(e) => write!(f, "{e}"),
        }
    }
}

impl From<format::Error> for WeightsError {
    fn from(e: format::Error) -> Self {
        Self::new(WeightsErrorKind::Format(e))
    }
}

impl fmt::Display for WeightsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        self.kind.fmt(f)
    }
}

impl std::error::Error for WeightsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.kind {
            WeightsErrorKind::Io(e) => Some(e),
            WeightsErrorKind::Format(e) => Some(e),
        }
    }
}
