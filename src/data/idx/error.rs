//! The errors of the IDX readers: [`IdxError`] (a kind and, for a file, its path) and
//! [`IdxErrorKind`] (what was expected and what was found).

use core::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::vec::Vec;

use super::{TYPE_U8, type_name};
// The limits the documentation below links to.
#[cfg(doc)]
use super::{DEFAULT_LIMIT_BYTES, MAX_DATA_BYTES, TRAILING_BYTES_COUNTED};

/// An error reading an IDX file: what went wrong ([`kind`](Self::kind)) and, when the data came
/// from a file, its [`path`](Self::path).
///
/// Its `Display` names the path (when known) and says what was expected and what was found;
/// [`source`](std::error::Error::source) gives the underlying I/O or gzip error, if any.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// let err = idx::read_labels(&[0, 0, 8, 1, 0, 0, 0, 3, 7][..]).unwrap_err();
/// assert!(matches!(
///     err.kind(),
///     IdxErrorKind::Truncated { expected_bytes: 11, found_bytes: 9 }
/// ));
/// assert_eq!(err.path(), None);
/// assert_eq!(
///     err.with_path("labels.idx").to_string(),
///     "labels.idx: truncated IDX data: expected 11 bytes, found 9"
/// );
/// ```
#[derive(Debug)]
pub struct IdxError {
    kind: IdxErrorKind,
    path: Option<PathBuf>,
}

impl IdxError {
    /// An error of the given kind, not tied to a file.
    ///
    /// For checks of your own on data read with this module.
    ///
    /// ```
    /// use constmat::data::idx::{IdxError, IdxErrorKind};
    ///
    /// let err = IdxError::new(IdxErrorKind::CountMismatch { images: 3, labels: 2 });
    /// assert_eq!(err.to_string(), "image and label counts differ: 3 images, 2 labels");
    /// ```
    #[must_use]
    pub fn new(kind: IdxErrorKind) -> Self {
        Self { kind, path: None }
    }

    /// The same error, attributed to the file at `path` (replacing any path it had).
    ///
    /// ```
    /// use constmat::data::idx::{IdxError, IdxErrorKind};
    ///
    /// let err = IdxError::new(IdxErrorKind::UnsupportedDataType { found: 0x0D }).with_path("x.idx");
    /// assert_eq!(err.path(), Some(std::path::Path::new("x.idx")));
    /// ```
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// What went wrong.
    ///
    /// ```
    /// use constmat::data::idx::{self, IdxErrorKind};
    ///
    /// let err = idx::read_labels(&[0, 0, 8, 3][..]).unwrap_err();
    /// assert!(matches!(err.kind(), IdxErrorKind::WrongDimensionCount { expected: 1, found: 3 }));
    /// ```
    #[must_use]
    pub fn kind(&self) -> &IdxErrorKind {
        &self.kind
    }

    /// What went wrong, by value (to keep an inner [`io::Error`]).
    ///
    /// ```
    /// use constmat::data::idx::{self, IdxErrorKind};
    ///
    /// let err = idx::read_labels_from_path("/no/such/dir/labels.idx").unwrap_err();
    /// match err.into_kind() {
    ///     IdxErrorKind::Io(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
    ///     other => panic!("unexpected {other:?}"),
    /// }
    /// ```
    #[must_use]
    pub fn into_kind(self) -> IdxErrorKind {
        self.kind
    }

    /// The file the error is about, when the data came from one.
    ///
    /// ```
    /// use constmat::data::idx;
    /// use std::path::Path;
    ///
    /// let err = idx::read_labels_from_path("/no/such/dir/labels.idx").unwrap_err();
    /// assert_eq!(err.path(), Some(Path::new("/no/such/dir/labels.idx")));
    /// ```
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl From<IdxErrorKind> for IdxError {
    fn from(kind: IdxErrorKind) -> Self {
        Self::new(kind)
    }
}

impl fmt::Display for IdxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        fmt::Display::fmt(&self.kind, f)
    }
}

impl std::error::Error for IdxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            IdxErrorKind::Io(e) | IdxErrorKind::Gzip(e) => Some(e),
            _ => None,
        }
    }
}

/// What went wrong reading an IDX file.
///
/// Byte counts (`expected_bytes`, `found_bytes`) are of the IDX data itself, header included:
/// for a gzipped file, of the decompressed stream.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// // A gzip file (1f 8b) whose header is cut short.
/// let err = idx::read_labels(&[0x1f, 0x8b, 8][..]).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::Gzip(_)));
/// assert!(err.to_string().starts_with("corrupt gzip data: "));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum IdxErrorKind {
    /// Opening or reading the file (or the reader) failed.
    Io(io::Error),
    /// The data starts like gzip (`1f 8b`) but does not decompress: corrupt, cut short, or
    /// followed by bytes that are not gzip.
    Gzip(io::Error),
    /// The magic number is not that of an IDX file (its first two bytes must be zero and its
    /// third an IDX type code).
    InvalidMagic {
        /// The magic number that was expected: unsigned bytes with the expected number of
        /// dimensions (with the number found, when any number is accepted).
        expected: u32,
        /// The first four bytes, big-endian.
        found: u32,
    },
    /// A valid IDX element type other than unsigned bytes (`0x08`), the only one supported.
    UnsupportedDataType {
        /// The type code found: `0x09` (signed byte), `0x0B` (i16), `0x0C` (i32), `0x0D` (f32)
        /// or `0x0E` (f64).
        found: u8,
    },
    /// The file has a different number of dimensions than expected (3 for images, 1 for labels).
    WrongDimensionCount {
        /// The number of dimensions expected.
        expected: u8,
        /// The number of dimensions in the header.
        found: u8,
    },
    /// The data ended inside the header (the magic number or the dimension sizes).
    TruncatedHeader {
        /// The length of the header, as far as it could be read (4 bytes if even the magic
        /// number is incomplete).
        expected_bytes: u64,
        /// The number of bytes present.
        found_bytes: u64,
    },
    /// The data is shorter than its header declares.
    Truncated {
        /// The length the header declares: header plus the product of the dimensions.
        expected_bytes: u64,
        /// The number of bytes present.
        found_bytes: u64,
    },
    /// More data follows what the header declares.
    TrailingBytes {
        /// The length the header declares: header plus the product of the dimensions.
        expected_bytes: u64,
        /// The number of bytes present.
        found_bytes: u64,
    },
    /// More than [`TRAILING_BYTES_COUNTED`] bytes follow what the header declares: the rest was
    /// not read (or decompressed), so the file's length is not known.
    ManyTrailingBytes {
        /// The length the header declares: header plus the product of the dimensions.
        expected_bytes: u64,
        /// The file is longer than this.
        more_than_bytes: u64,
    },
    /// The header declares more data than the reader's limit (so none of it is read or
    /// decompressed), or, for images, a single image larger than that. The limit is
    /// [`DEFAULT_LIMIT_BYTES`] unless the reader's `_with_limit` form set another.
    TooLarge {
        /// The dimension sizes in the header.
        dims: Vec<u32>,
        /// The limit that was exceeded, in bytes (at most [`MAX_DATA_BYTES`]).
        limit_bytes: u64,
    },
    /// The images are not of the size required (28x28 for MNIST).
    WrongImageSize {
        /// The required size, `(rows, columns)`.
        expected: (u32, u32),
        /// The size in the file, `(rows, columns)`.
        found: (u32, u32),
    },
    /// An image file and its label file hold different numbers of items.
    CountMismatch {
        /// The number of images.
        images: usize,
        /// The number of labels.
        labels: usize,
    },
    /// A label is not below the number of classes (10 for MNIST).
    LabelOutOfRange {
        /// The position of the first such label.
        index: usize,
        /// The label found there.
        label: u8,
        /// The number of classes: labels must be below it.
        classes: u8,
    },
}

impl fmt::Display for IdxErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "I/O error: {e}"),
            Self::Gzip(e) => write!(f, "corrupt gzip data: {e}"),
            Self::InvalidMagic { expected, found } => write!(
                f,
                "invalid IDX magic number: expected {expected:#010x}, found {found:#010x}"
            ),
            Self::UnsupportedDataType { found } => write!(
                f,
                "unsupported IDX data type: expected {TYPE_U8:#04x} (unsigned byte), found \
                 {found:#04x} ({})",
                type_name(*found).unwrap_or("unknown")
            ),
            Self::WrongDimensionCount { expected, found } => write!(
                f,
                "wrong number of IDX dimensions: expected {expected}, found {found}"
            ),
            Self::TruncatedHeader {
                expected_bytes,
                found_bytes,
            } => write!(
                f,
                "truncated IDX header: expected {expected_bytes} bytes, found {found_bytes}"
            ),
            Self::Truncated {
                expected_bytes,
                found_bytes,
            } => write!(
                f,
                "truncated IDX data: expected {expected_bytes} bytes, found {found_bytes}"
            ),
            Self::TrailingBytes {
                expected_bytes,
                found_bytes,
            } => write!(
                f,
                "trailing bytes after IDX data: expected {expected_bytes} bytes, found \
                 {found_bytes}"
            ),
            Self::ManyTrailingBytes {
                expected_bytes,
                more_than_bytes,
            } => write!(
                f,
                "trailing bytes after IDX data: expected {expected_bytes} bytes, found more than \
                 {more_than_bytes} (the rest was not read)"
            ),
            Self::TooLarge { dims, limit_bytes } => {
                f.write_str("IDX data too large: dimensions ")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" x ")?;
                    }
                    write!(f, "{d}")?;
                }
                write!(f, " exceed the limit of {limit_bytes} bytes")
            }
            Self::WrongImageSize { expected, found } => write!(
                f,
                "wrong image size: expected {}x{}, found {}x{}",
                expected.0, expected.1, found.0, found.1
            ),
            Self::CountMismatch { images, labels } => write!(
                f,
                "image and label counts differ: {images} images, {labels} labels"
            ),
            Self::LabelOutOfRange {
                index,
                label,
                classes,
            } => write!(
                f,
                "label out of range at index {index}: expected a label below {classes}, found \
                 {label}"
            ),
        }
    }
}
