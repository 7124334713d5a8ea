//! Saving and loading parameters as [safetensors](https://github.com/huggingface/safetensors).
//!
//! Tensor names and shapes follow PyTorch's `nn.Sequential` (see
//! [`Parameters`]): the 784-128-64-10 ReLU MLP is
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
//! type Other = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 2, 3, Identity>];
//!
//! let bytes = safetensors::to_bytes(&Small::zeros(), &[]);
//! let back: Small = safetensors::from_bytes(&bytes)?;
//! assert_eq!(back, Small::zeros());
//!
//! let err = safetensors::from_bytes::<f32, Other>(&bytes).unwrap_err();
//! assert_eq!(err.to_string(), "tensor 2.weight: expected f32 [3, 2], found f32 [2, 3]");
//! # Ok::<(), safetensors::WeightsError>(())
//! ```

use std::boxed::Box;
use std::collections::HashMap;
use std::fmt;
use std::format;
use std::path::{Path, PathBuf};
use std::string::{String, ToString};
use std::vec::Vec;

use ::safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::Scalar;
use crate::nn::Parameters;

/// An element type that safetensors can store: `f32` (`F32`) or `f64` (`F64`), little-endian.
pub trait Element: Scalar {
    /// The safetensors dtype.
    const DTYPE: Dtype;
    /// Appends the little-endian bytes of `self`.
    fn extend_le(self, out: &mut Vec<u8>);
    /// Reads a value from exactly `size_of::<Self>()` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
    /// Whether the value is finite (not NaN or infinite).
    fn is_finite_value(self) -> bool;
}

macro_rules! element {
    ($t:ty, $dtype:ident) => {
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$dtype;
            fn extend_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> Self {
                let mut array = [0; size_of::<$t>()];
                array.copy_from_slice(bytes);
                <$t>::from_le_bytes(array)
            }
            fn is_finite_value(self) -> bool {
                self.is_finite()
            }
        }
    };
}
element!(f32, F32);
element!(f64, F64);

/// The parameters of `net` as a safetensors file, with the given extra metadata (the
/// `__metadata__` string map; `format = pt`, as PyTorch writes it, is added unless given).
///
/// ```
/// use constmat::io::safetensors;
/// use constmat::nn::{Dense, Parameters, Relu};
///
/// let bytes = safetensors::to_bytes(&Dense::<f64, 2, 2, Relu>::zeros(), &[("note", "demo")]);
/// let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
/// let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
/// assert!(header.contains("\"0.weight\":{\"dtype\":\"F64\",\"shape\":[2,2]"));
/// assert!(header.contains("\"note\":\"demo\""));
/// ```
#[must_use]
pub fn to_bytes<T: Element, P: Parameters<T>>(net: &P, metadata: &[(&str, &str)]) -> Vec<u8> {
    let buffers: Vec<(String, Vec<usize>, Vec<u8>)> = (0..net.tensor_count())
        .map(|k| {
            let info = net.tensor_info(k);
            let mut bytes = Vec::with_capacity(info.len() * size_of::<T>());
            for &x in net.tensor(k) {
                x.extend_le(&mut bytes);
            }
            (info.name(), info.shape().to_vec(), bytes)
        })
        .collect();
    let views = buffers.iter().map(|(name, shape, bytes)| {
        let view = TensorView::new(T::DTYPE, shape.clone(), bytes)
            .expect("the byte length matches the shape by construction");
        (name.as_str(), view)
    });
    let mut info: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    info.entry("format".into()).or_insert_with(|| "pt".into());
    ::safetensors::serialize(views, Some(info))
        .expect("serializing in-memory tensors with valid shapes cannot fail")
}

/// Writes the parameters of `net` to `path` (see [`to_bytes`]).
///
/// # Errors
///
/// [`WeightsErrorKind::Io`] when the file cannot be written.
pub fn save<T: Element, P: Parameters<T>>(
    net: &P,
    path: impl AsRef<Path>,
    metadata: &[(&str, &str)],
) -> Result<(), WeightsError> {
    let path = path.as_ref();
    std::fs::write(path, to_bytes(net, metadata))
        .map_err(|e| WeightsError::new(WeightsErrorKind::Io(e)).with_path(path))
}

/// A net of type `P` with the parameters stored in `bytes`.
///
/// # Errors
///
/// A [`WeightsError`] for the first problem found: the file is truncated or corrupt, a tensor is
/// missing, has another dtype or shape than `P` needs, holds a NaN or infinite value, or the file
/// holds a tensor `P` does not have.
pub fn from_bytes<T: Element, P: Parameters<T>>(bytes: &[u8]) -> Result<P, WeightsError> {
    let mut net = P::zeros();
    load_into(&mut net, bytes)?;
    Ok(net)
}

/// Reads a net of type `P` from the safetensors file at `path`.
///
/// # Errors
///
/// As [`from_bytes`], plus [`WeightsErrorKind::Io`] when the file cannot be read; the error
/// carries the path.
pub fn load<T: Element, P: Parameters<T>>(path: impl AsRef<Path>) -> Result<P, WeightsError> {
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
pub fn load_into<T: Element, P: Parameters<T>>(
    net: &mut P,
    bytes: &[u8],
) -> Result<(), WeightsError> {
    let file = SafeTensors::deserialize(bytes)
        .map_err(|e| WeightsError::new(WeightsErrorKind::Corrupt(e.to_string())))?;
    let mut views = Vec::with_capacity(net.tensor_count());
    for k in 0..net.tensor_count() {
        let info = net.tensor_info(k);
        let name = info.name();
        let view = file.tensor(&name).map_err(|_| {
            WeightsError::new(WeightsErrorKind::Missing {
                tensor: name.clone(),
                expected: dtype_name(T::DTYPE),
                expected_shape: info.shape().to_vec(),
            })
        })?;
        if view.dtype() != T::DTYPE || view.shape() != info.shape() {
            return Err(WeightsError::new(WeightsErrorKind::Mismatch {
                tensor: name,
                expected: dtype_name(T::DTYPE),
                expected_shape: info.shape().to_vec(),
                found: dtype_name(view.dtype()),
                found_shape: view.shape().to_vec(),
            }));
        }
        let chunks = view.data().chunks_exact(size_of::<T>());
        if let Some(index) = chunks
            .clone()
            .position(|c| !T::from_le(c).is_finite_value())
        {
            return Err(WeightsError::new(WeightsErrorKind::NonFinite {
                tensor: name,
                index,
            }));
        }
        views.push(chunks);
    }
    let mut unexpected: Vec<&str> = file
        .names()
        .into_iter()
        .filter(|name| !(0..net.tensor_count()).any(|k| net.tensor_info(k).name() == *name))
        .collect();
    unexpected.sort_unstable();
    if let Some(name) = unexpected.first() {
        return Err(WeightsError::new(WeightsErrorKind::Unexpected {
            tensor: (*name).to_string(),
        }));
    }
    for (k, chunks) in views.into_iter().enumerate() {
        for (dst, src) in net.tensor_mut(k).iter_mut().zip(chunks) {
            *dst = T::from_le(src);
        }
    }
    Ok(())
}

/// `F32` -> `"f32"`, the way the messages spell dtypes.
fn dtype_name(dtype: Dtype) -> String {
    format!("{dtype:?}").to_lowercase()
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
}

/// The kinds of [`WeightsError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum WeightsErrorKind {
    /// Reading or writing the file failed.
    Io(std::io::Error),
    /// The bytes are not a valid safetensors file (truncated, bad header, offsets out of range).
    Corrupt(String),
    /// A tensor the net needs is not in the file.
    Missing {
        /// Its name, e.g. `2.weight`.
        tensor: String,
        /// The dtype the net needs.
        expected: String,
        /// The shape the net needs.
        expected_shape: Vec<usize>,
    },
    /// A tensor has another dtype or shape than the net needs.
    Mismatch {
        /// Its name.
        tensor: String,
        /// The dtype the net needs.
        expected: String,
        /// The shape the net needs.
        expected_shape: Vec<usize>,
        /// The dtype in the file.
        found: String,
        /// The shape in the file.
        found_shape: Vec<usize>,
    },
    /// A tensor holds a NaN or infinite value.
    NonFinite {
        /// Its name.
        tensor: String,
        /// The row-major index of the first such value.
        index: usize,
    },
    /// The file holds a tensor the net does not have (the first such name, alphabetically).
    Unexpected {
        /// Its name.
        tensor: String,
    },
}

impl fmt::Display for WeightsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Corrupt(reason) => write!(f, "not a valid safetensors file: {reason}"),
            Self::Missing {
                tensor,
                expected,
                expected_shape,
            } => write!(
                f,
                "tensor {tensor} is missing: expected {expected} {expected_shape:?}"
            ),
            Self::Mismatch {
                tensor,
                expected,
                expected_shape,
                found,
                found_shape,
            } => write!(
                f,
                "tensor {tensor}: expected {expected} {expected_shape:?}, found {found} {found_shape:?}"
            ),
            Self::NonFinite { tensor, index } => {
                write!(f, "tensor {tensor}: element {index} is not a finite number")
            }
            Self::Unexpected { tensor } => write!(
                f,
                "the file holds tensor {tensor}, which the net does not have"
            ),
        }
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
            _ => None,
        }
    }
}
