//! A strict reader for IDX files of unsigned bytes, plain or gzip-compressed.
//!
//! IDX is the format of MNIST (and Fashion-MNIST, EMNIST, ...). A file is big-endian:
//!
//! | bytes | content |
//! | --- | --- |
//! | 4 | magic: `0x00 0x00 <type> <number of dimensions>`; type `0x08` = unsigned byte |
//! | 4 per dimension | the size of each dimension, as a `u32` |
//! | the product of the sizes | the data, row-major, one byte per element |
//!
//! A gzip-compressed file is recognised by its first two bytes (`1f 8b`), never by its name, and
//! decompressed on the fly. Every function checks the magic number, the element type, the number
//! of dimensions and that the data is exactly as long as the header says, and reports anything
//! else as an [`IdxError`]: a malformed file is never a panic and never a silently wrong read.
//!
//! The cost of reading an untrusted file is bounded by its header. A header that declares more
//! data than a limit ([`DEFAULT_LIMIT_BYTES`], 256 MiB, unless a reader's `_with_limit` form sets
//! another) is refused before anything else is read or decompressed; only the bytes actually
//! present are allocated, so a header that declares more than a short file holds costs nothing;
//! and at most [`TRAILING_BYTES_COUNTED`] bytes past the declared data are read (a gzip bomb
//! that holds more than it declares is not decompressed to its end).
//!
//! Every reader takes any [`std::io::Read`]; a byte slice `&[u8]` is one:
//!
//! ```
//! use constmat::data::idx;
//!
//! // Two 2x3 images: magic 0x00000803, then the sizes 2, 2, 3, then 12 pixels.
//! let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3];
//! bytes.extend(0..12);
//! let images = idx::read_images(&bytes[..])?;
//! assert_eq!((images.count(), images.rows(), images.cols()), (2, 2, 3));
//! assert_eq!(images.image(1), &[6, 7, 8, 9, 10, 11]);
//!
//! // One byte missing: a typed error that says what was expected and what was found.
//! let err = idx::read_images(&bytes[..bytes.len() - 1]).unwrap_err();
//! assert_eq!(err.to_string(), "truncated IDX data: expected 28 bytes, found 27");
//! # Ok::<(), idx::IdxError>(())
//! ```

use std::io::Read;
use std::path::Path;
use std::vec::Vec;

mod error;
mod stream;
pub use error::{IdxError, IdxErrorKind};
pub(crate) use stream::{NO_CHECK, Opened, open_path};
use stream::{read_any, read_path};

/// The largest limit a reader takes: the most data (the product of the dimensions, in bytes)
/// a header may declare under any limit. A larger limit given to a `_with_limit` reader counts
/// as this one.
///
/// 4 GiB on 64-bit targets (and `isize::MAX` bytes on smaller ones, so that the data can be
/// indexed). Readers refuse less by default: [`DEFAULT_LIMIT_BYTES`].
///
/// ```
/// assert!(constmat::data::idx::MAX_DATA_BYTES >= 60_000 * 28 * 28);
/// ```
pub const MAX_DATA_BYTES: u64 = if usize::BITS >= 64 {
    1 << 32
} else {
    isize::MAX as u64
};

/// The most data (the product of the dimensions, in bytes) a reader accepts unless told
/// otherwise: 256 MiB.
///
/// What MNIST-like data sets need, and a bound on what an untrusted file can cost: MNIST's
/// training images are 47 MB (60,000 x 28 x 28), as are Fashion-MNIST's and Kuzushiji-MNIST's;
/// the limit leaves room for 5.7 times as many (342,000 images of 28 x 28 in one file), EMNIST's
/// digits, letters and balanced sets included (up to 188 MB). A header that declares more, such
/// as a 4 MB gzip bomb declaring 65,536 images of 256 x 256 (4 GiB), is refused with
/// [`IdxErrorKind::TooLarge`] before any data is read or decompressed. For larger sets (EMNIST's
/// byclass and bymerge training images are 547 MB), or to hold untrusted files to less, pass
/// another limit to a reader's `_with_limit` form ([`read_images_with_limit`],
/// [`read_labels_with_limit`], [`read_idx_with_limit`], their `_from_path` forms,
/// [`Mnist::load_with_limit`](super::mnist::Mnist::load_with_limit)), up to
/// [`MAX_DATA_BYTES`].
///
/// ```
/// use constmat::data::idx::{self, DEFAULT_LIMIT_BYTES, IdxErrorKind};
///
/// assert_eq!(DEFAULT_LIMIT_BYTES, 256 << 20);
/// // A header declaring 65,536 images of 256 x 256 (4 GiB).
/// let mut header = vec![0, 0, 8, 3];
/// for d in [65_536_u32, 256, 256] {
///     header.extend(d.to_be_bytes());
/// }
/// let err = idx::read_images(&header[..]).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes: DEFAULT_LIMIT_BYTES, .. }));
/// ```
pub const DEFAULT_LIMIT_BYTES: u64 = 1 << 28;

/// Bytes after the declared data are counted up to this many; beyond it the reader stops
/// ([`IdxErrorKind::ManyTrailingBytes`]), so that what is read (and decompressed) is bounded by
/// what the header declares plus this.
///
/// ```
/// assert_eq!(constmat::data::idx::TRAILING_BYTES_COUNTED, 1 << 20);
/// ```
pub const TRAILING_BYTES_COUNTED: u64 = 1 << 20;

/// The first two bytes of every gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// The IDX type code of unsigned bytes, the only element type this reader returns.
const TYPE_U8: u8 = 0x08;
/// How far past a nonsensical header or data a gzip stream is decoded, to find whether it is
/// corrupt (the real cause then).
const GZIP_LOOK_AHEAD: u64 = 1 << 20;
/// At most this much is reserved before the data is read; the rest grows with the bytes found.
const PREALLOCATE_AT_MOST: u64 = 1 << 20;

/// The IDX magic number of unsigned-byte data with `dims` dimensions.
const fn u8_magic(dims: u8) -> u32 {
    ((TYPE_U8 as u32) << 8) | dims as u32
}

/// The element type an IDX type code stands for, or `None` for a code that is not IDX at all.
fn type_name(code: u8) -> Option<&'static str> {
    Some(match code {
        0x08 => "unsigned byte",
        0x09 => "signed byte",
        0x0B => "16-bit integer",
        0x0C => "32-bit integer",
        0x0D => "32-bit float",
        0x0E => "64-bit float",
        _ => return None,
    })
}

/// An IDX array of unsigned bytes with any number of dimensions, as read by [`read_idx`].
///
/// ```
/// use constmat::data::idx;
///
/// // A 2x2x2 array.
/// let bytes = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8];
/// let array = idx::read_idx(&bytes[..])?;
/// assert_eq!(array.dims(), &[2, 2, 2]);
/// assert_eq!(array.data(), &[1, 2, 3, 4, 5, 6, 7, 8]);
/// # Ok::<(), idx::IdxError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdxArray {
    dims: Vec<u32>,
    data: Vec<u8>,
}

impl IdxArray {
    /// The size of each dimension, outermost first.
    ///
    /// ```
    /// let array = constmat::data::idx::read_idx(&[0, 0, 8, 1, 0, 0, 0, 1, 42][..])?;
    /// assert_eq!(array.dims(), &[1]);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// The elements, row-major: exactly the product of [`dims`](Self::dims) bytes.
    ///
    /// ```
    /// let array = constmat::data::idx::read_idx(&[0, 0, 8, 1, 0, 0, 0, 1, 42][..])?;
    /// assert_eq!(array.data(), &[42]);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The elements, by value.
    ///
    /// ```
    /// let array = constmat::data::idx::read_idx(&[0, 0, 8, 1, 0, 0, 0, 1, 42][..])?;
    /// assert_eq!(array.into_data(), vec![42]);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// A set of equally sized greyscale images, as read by [`read_images`]: an IDX file with three
/// dimensions (count, rows, columns).
///
/// ```
/// use constmat::data::idx;
///
/// // Three 1x2 images.
/// let bytes = [0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 10, 11, 20, 21, 30, 31];
/// let images = idx::read_images(&bytes[..])?;
/// assert_eq!(images.pixels_per_image(), 2);
/// assert_eq!(images.iter().map(|im| im[0]).collect::<Vec<_>>(), [10, 20, 30]);
/// # Ok::<(), idx::IdxError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Images {
    count: u32,
    rows: u32,
    cols: u32,
    pixels: Vec<u8>,
}

impl Images {
    /// The number of images.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6];
    /// assert_eq!(constmat::data::idx::read_images(&bytes[..])?.count(), 2);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn count(&self) -> usize {
        self.count as usize
    }

    /// The height of every image, in pixels.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 5, 6];
    /// assert_eq!(constmat::data::idx::read_images(&bytes[..])?.rows(), 2);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// The width of every image, in pixels.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 5, 6];
    /// assert_eq!(constmat::data::idx::read_images(&bytes[..])?.cols(), 2);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn cols(&self) -> usize {
        self.cols as usize
    }

    /// `rows * cols`: the length of each image's slice.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 5, 6];
    /// assert_eq!(constmat::data::idx::read_images(&bytes[..])?.pixels_per_image(), 2);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn pixels_per_image(&self) -> usize {
        // The readers checked that this product is within their limit, at most
        // `MAX_DATA_BYTES`, so it fits.
        self.rows as usize * self.cols as usize
    }

    /// All pixels, image after image, each image row-major.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6];
    /// assert_eq!(constmat::data::idx::read_images(&bytes[..])?.pixels(), &[5, 6]);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    /// All pixels, by value.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6];
    /// assert_eq!(constmat::data::idx::read_images(&bytes[..])?.into_pixels(), vec![5, 6]);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn into_pixels(self) -> Vec<u8> {
        self.pixels
    }

    /// The pixels of image `index` (row-major), or `None` if there are not that many images.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6];
    /// let images = constmat::data::idx::read_images(&bytes[..])?;
    /// assert_eq!(images.get(1), Some(&[6][..]));
    /// assert_eq!(images.get(2), None);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.count() {
            return None;
        }
        let n = self.pixels_per_image();
        self.pixels.get(index * n..(index + 1) * n)
    }

    /// The pixels of image `index` (row-major).
    ///
    /// # Panics
    ///
    /// If `index >= self.count()`; [`get`](Self::get) returns an `Option` instead.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6];
    /// assert_eq!(constmat::data::idx::read_images(&bytes[..])?.image(0), &[5]);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    #[must_use]
    #[track_caller]
    pub fn image(&self, index: usize) -> &[u8] {
        match self.get(index) {
            Some(image) => image,
            None => panic!("image index {index} out of range for {} images", self.count),
        }
    }

    /// The images in order, each as a slice of [`pixels_per_image`](Self::pixels_per_image)
    /// bytes.
    ///
    /// ```
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6];
    /// let images = constmat::data::idx::read_images(&bytes[..])?;
    /// assert_eq!(images.iter().collect::<Vec<_>>(), [&[5], &[6]]);
    /// # Ok::<(), constmat::data::idx::IdxError>(())
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.count()).map(|i| self.image(i))
    }

    /// Checks that the images are `rows` x `cols` pixels.
    ///
    /// # Errors
    ///
    /// [`IdxErrorKind::WrongImageSize`] if they are not.
    ///
    /// ```
    /// use constmat::data::idx;
    ///
    /// let bytes = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 5, 6];
    /// let images = idx::read_images(&bytes[..])?;
    /// assert!(images.check_size(1, 2).is_ok());
    /// let err = images.check_size(28, 28).unwrap_err();
    /// assert_eq!(err.to_string(), "wrong image size: expected 28x28, found 1x2");
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    pub fn check_size(&self, rows: u32, cols: u32) -> Result<(), IdxError> {
        if (self.rows, self.cols) == (rows, cols) {
            Ok(())
        } else {
            Err(IdxErrorKind::WrongImageSize {
                expected: (rows, cols),
                found: (self.rows, self.cols),
            }
            .into())
        }
    }
}

/// Reads an IDX file of unsigned bytes with any number of dimensions, plain or gzipped, to its
/// end.
///
/// The reader must reach its end: bytes after the declared data are an error. A header that
/// declares more than [`DEFAULT_LIMIT_BYTES`] of data is refused before anything else is read;
/// [`read_idx_with_limit`] sets another limit.
///
/// # Errors
///
/// Any [`IdxErrorKind`] about the file itself (all but the image-size, count and label checks).
///
/// ```
/// use constmat::data::idx;
///
/// let array = idx::read_idx(&[0, 0, 8, 2, 0, 0, 0, 1, 0, 0, 0, 2, 3, 4][..])?;
/// assert_eq!((array.dims(), array.data()), (&[1, 2][..], &[3, 4][..]));
///
/// // 32-bit floats (type 0x0D) are IDX too, but not supported.
/// let err = idx::read_idx(&[0, 0, 0x0D, 1, 0, 0, 0, 0][..]).unwrap_err();
/// assert!(err.to_string().starts_with("unsupported IDX data type"));
/// # Ok::<(), idx::IdxError>(())
/// ```
pub fn read_idx<R: Read>(reader: R) -> Result<IdxArray, IdxError> {
    read_idx_with_limit(reader, DEFAULT_LIMIT_BYTES)
}

/// Reads an IDX stream as [`read_idx`] does, refusing from its header data larger than
/// `limit_bytes` (rather than [`DEFAULT_LIMIT_BYTES`]): lower for a caller that knows how large
/// its files can be, so that a file declaring more (a decompression bomb) costs less; higher for
/// a larger data set. A limit above [`MAX_DATA_BYTES`] counts as [`MAX_DATA_BYTES`].
///
/// # Errors
///
/// As [`read_idx`]; [`IdxErrorKind::TooLarge`] names the limit.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// let two_by_three = [0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6];
/// assert!(idx::read_idx_with_limit(&two_by_three[..], 6).is_ok());
/// let err = idx::read_idx_with_limit(&two_by_three[..], 5).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes: 5, .. }));
/// assert_eq!(err.to_string(), "IDX data too large: dimensions 2 x 3 exceed the limit of 5 bytes");
/// ```
pub fn read_idx_with_limit<R: Read>(reader: R, limit_bytes: u64) -> Result<IdxArray, IdxError> {
    read_any(reader, None, NO_CHECK, limit_bytes).map_err(IdxError::new)
}

/// Reads the IDX file at `path` with [`read_idx`]; errors name the path.
///
/// # Errors
///
/// [`IdxErrorKind::Io`] if the file cannot be opened (`NotFound` if it does not exist), or any
/// error of [`read_idx`].
///
/// ```
/// use constmat::data::idx;
///
/// let path = std::env::temp_dir().join("constmat-doc-read_idx_from_path.idx");
/// std::fs::write(&path, [0, 0, 8, 1, 0, 0, 0, 2, 9, 8])?;
/// assert_eq!(idx::read_idx_from_path(&path)?.data(), &[9, 8]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_idx_from_path<P: AsRef<Path>>(path: P) -> Result<IdxArray, IdxError> {
    read_idx_from_path_with_limit(path, DEFAULT_LIMIT_BYTES)
}

/// Reads the IDX file at `path` with [`read_idx_with_limit`]; errors name the path.
///
/// # Errors
///
/// As [`read_idx_from_path`]; [`IdxErrorKind::TooLarge`] names `limit_bytes`.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// let path = std::env::temp_dir().join("constmat-doc-read_idx_from_path_with_limit.idx");
/// std::fs::write(&path, [0, 0, 8, 1, 0, 0, 0, 2, 9, 8])?;
/// assert_eq!(idx::read_idx_from_path_with_limit(&path, 2)?.data(), &[9, 8]);
/// let err = idx::read_idx_from_path_with_limit(&path, 1).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes: 1, .. }));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_idx_from_path_with_limit<P: AsRef<Path>>(
    path: P,
    limit_bytes: u64,
) -> Result<IdxArray, IdxError> {
    read_path(path.as_ref(), None, NO_CHECK, limit_bytes)
}

/// Reads an image file: IDX unsigned bytes with three dimensions (count, rows, columns), plain or
/// gzipped, to the end of the reader.
///
/// A header that declares more than [`DEFAULT_LIMIT_BYTES`] of pixels is refused before any
/// pixel is read (or decompressed); [`read_images_with_limit`] sets another limit, and
/// [`read_images_expecting`] checks the image size and count too.
///
/// # Errors
///
/// Those of [`read_idx`], [`IdxErrorKind::WrongDimensionCount`] for any other number of
/// dimensions (a label file, say), and [`IdxErrorKind::TooLarge`] if a single image would
/// exceed the limit (even in a file of no images).
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// // One 2x2 image.
/// let bytes = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 85, 170, 255];
/// assert_eq!(idx::read_images(&bytes[..])?.image(0), &[0, 85, 170, 255]);
///
/// // A label file is not an image file.
/// let err = idx::read_images(&[0, 0, 8, 1, 0, 0, 0, 1, 7][..]).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::WrongDimensionCount { expected: 3, found: 1 }));
/// # Ok::<(), idx::IdxError>(())
/// ```
pub fn read_images<R: Read>(reader: R) -> Result<Images, IdxError> {
    read_images_with_limit(reader, DEFAULT_LIMIT_BYTES)
}

/// Reads an image file as [`read_images`] does, refusing from its header pixels larger than
/// `limit_bytes` (rather than [`DEFAULT_LIMIT_BYTES`]). A limit above [`MAX_DATA_BYTES`] counts
/// as [`MAX_DATA_BYTES`].
///
/// # Errors
///
/// As [`read_images`]; [`IdxErrorKind::TooLarge`] names the limit.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// // A header declaring 65,536 images of 256 x 256 (4 GiB), then no pixels: refused from the
/// // header, whatever follows it.
/// let mut header = vec![0, 0, 8, 3];
/// for d in [65_536_u32, 256, 256] {
///     header.extend(d.to_be_bytes());
/// }
/// let err = idx::read_images_with_limit(&header[..], 60_000 * 28 * 28).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "IDX data too large: dimensions 65536 x 256 x 256 exceed the limit of 47040000 bytes"
/// );
/// ```
pub fn read_images_with_limit<R: Read>(reader: R, limit_bytes: u64) -> Result<Images, IdxError> {
    read_any(reader, Some(3), NO_CHECK, limit_bytes)
        .and_then(|array| into_images(array, limit_bytes))
        .map_err(IdxError::new)
}

/// Reads the image file at `path` with [`read_images`]; errors name the path.
///
/// # Errors
///
/// [`IdxErrorKind::Io`] if the file cannot be opened, or any error of [`read_images`].
///
/// ```
/// use constmat::data::idx;
///
/// let path = std::env::temp_dir().join("constmat-doc-read_images_from_path.idx");
/// std::fs::write(&path, [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 200])?;
/// assert_eq!(idx::read_images_from_path(&path)?.pixels(), &[200]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_images_from_path<P: AsRef<Path>>(path: P) -> Result<Images, IdxError> {
    read_images_from_path_with_limit(path, DEFAULT_LIMIT_BYTES)
}

/// Reads the image file at `path` with [`read_images_with_limit`]; errors name the path.
///
/// # Errors
///
/// As [`read_images_from_path`]; [`IdxErrorKind::TooLarge`] names `limit_bytes`.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// let path = std::env::temp_dir().join("constmat-doc-read_images_from_path_with_limit.idx");
/// // Two 1 x 2 images: 4 bytes of pixels.
/// std::fs::write(&path, [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3, 4])?;
/// assert_eq!(idx::read_images_from_path_with_limit(&path, 4)?.count(), 2);
/// let err = idx::read_images_from_path_with_limit(&path, 3).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes: 3, .. }));
/// assert_eq!(err.path(), Some(path.as_path()));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_images_from_path_with_limit<P: AsRef<Path>>(
    path: P,
    limit_bytes: u64,
) -> Result<Images, IdxError> {
    let path = path.as_ref();
    read_path(path, Some(3), NO_CHECK, limit_bytes).and_then(|array| {
        into_images(array, limit_bytes).map_err(|kind| IdxError::new(kind).with_path(path))
    })
}

/// Reads a label file: IDX unsigned bytes with one dimension, plain or gzipped, to the end of
/// the reader.
///
/// The labels are not checked against a number of classes: see [`check_labels`]. A header that
/// declares more than [`DEFAULT_LIMIT_BYTES`] labels is refused before any label is read (or
/// decompressed); [`read_labels_with_limit`] sets another limit.
///
/// # Errors
///
/// Those of [`read_idx`], and [`IdxErrorKind::WrongDimensionCount`] for any other number of
/// dimensions (an image file, say).
///
/// ```
/// use constmat::data::idx;
///
/// assert_eq!(idx::read_labels(&[0, 0, 8, 1, 0, 0, 0, 2, 5, 0][..])?, [5, 0]);
/// # Ok::<(), idx::IdxError>(())
/// ```
pub fn read_labels<R: Read>(reader: R) -> Result<Vec<u8>, IdxError> {
    read_labels_with_limit(reader, DEFAULT_LIMIT_BYTES)
}

/// Reads a label file as [`read_labels`] does, refusing from its header more than
/// `limit_bytes` labels (rather than [`DEFAULT_LIMIT_BYTES`]). A limit above [`MAX_DATA_BYTES`]
/// counts as [`MAX_DATA_BYTES`].
///
/// # Errors
///
/// As [`read_labels`]; [`IdxErrorKind::TooLarge`] names the limit.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// // A header declaring 268,435,456 labels: refused from the header, nothing else is read.
/// let header = [0, 0, 8, 1, 0x10, 0, 0, 0];
/// let err = idx::read_labels_with_limit(&header[..], 60_000).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes: 60_000, .. }));
/// ```
pub fn read_labels_with_limit<R: Read>(reader: R, limit_bytes: u64) -> Result<Vec<u8>, IdxError> {
    read_any(reader, Some(1), NO_CHECK, limit_bytes)
        .map(IdxArray::into_data)
        .map_err(IdxError::new)
}

/// Reads the label file at `path` with [`read_labels`]; errors name the path.
///
/// # Errors
///
/// [`IdxErrorKind::Io`] if the file cannot be opened, or any error of [`read_labels`].
///
/// ```
/// use constmat::data::idx;
///
/// let path = std::env::temp_dir().join("constmat-doc-read_labels_from_path.idx");
/// std::fs::write(&path, [0, 0, 8, 1, 0, 0, 0, 2, 5, 0])?;
/// assert_eq!(idx::read_labels_from_path(&path)?, [5, 0]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_labels_from_path<P: AsRef<Path>>(path: P) -> Result<Vec<u8>, IdxError> {
    read_labels_from_path_with_limit(path, DEFAULT_LIMIT_BYTES)
}

/// Reads the label file at `path` with [`read_labels_with_limit`]; errors name the path.
///
/// # Errors
///
/// As [`read_labels_from_path`]; [`IdxErrorKind::TooLarge`] names `limit_bytes`.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// let path = std::env::temp_dir().join("constmat-doc-read_labels_from_path_with_limit.idx");
/// std::fs::write(&path, [0, 0, 8, 1, 0, 0, 0, 2, 5, 0])?;
/// assert_eq!(idx::read_labels_from_path_with_limit(&path, 2)?, [5, 0]);
/// let err = idx::read_labels_from_path_with_limit(&path, 1).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes: 1, .. }));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_labels_from_path_with_limit<P: AsRef<Path>>(
    path: P,
    limit_bytes: u64,
) -> Result<Vec<u8>, IdxError> {
    read_path(path.as_ref(), Some(1), NO_CHECK, limit_bytes).map(IdxArray::into_data)
}

/// Checks that every label is below `classes`.
///
/// # Errors
///
/// [`IdxErrorKind::LabelOutOfRange`] for the first label that is not.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// assert!(idx::check_labels(&[0, 9, 3], 10).is_ok());
/// let err = idx::check_labels(&[0, 9, 12, 3], 10).unwrap_err();
/// assert!(matches!(
///     err.kind(),
///     IdxErrorKind::LabelOutOfRange { index: 2, label: 12, classes: 10 }
/// ));
/// assert_eq!(
///     err.to_string(),
///     "label out of range at index 2: expected a label below 10, found 12"
/// );
/// ```
pub fn check_labels(labels: &[u8], classes: u8) -> Result<(), IdxError> {
    match labels.iter().position(|&label| label >= classes) {
        None => Ok(()),
        Some(index) => Err(IdxErrorKind::LabelOutOfRange {
            index,
            label: labels[index],
            classes,
        }
        .into()),
    }
}

/// Checks that there are as many labels as images.
///
/// # Errors
///
/// [`IdxErrorKind::CountMismatch`] if the numbers differ.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// // Two 1x1 images.
/// let images = idx::read_images(&[0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5, 6][..])?;
/// assert!(idx::check_counts(&images, &[1, 2]).is_ok());
/// let err = idx::check_counts(&images, &[1, 2, 3]).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::CountMismatch { images: 2, labels: 3 }));
/// # Ok::<(), idx::IdxError>(())
/// ```
pub fn check_counts(images: &Images, labels: &[u8]) -> Result<(), IdxError> {
    if images.count() == labels.len() {
        Ok(())
    } else {
        Err(IdxErrorKind::CountMismatch {
            images: images.count(),
            labels: labels.len(),
        }
        .into())
    }
}

/// The header check of an image file expected to hold `count` (if given) images of
/// `rows x cols`.
pub(crate) fn image_check(
    rows: u32,
    cols: u32,
    count: Option<usize>,
) -> impl Fn(&[u32]) -> Result<(), IdxErrorKind> {
    move |dims| {
        if let &[n, r, c] = dims {
            if (r, c) != (rows, cols) {
                return Err(IdxErrorKind::WrongImageSize {
                    expected: (rows, cols),
                    found: (r, c),
                });
            }
            if let Some(count) = count
                && n as usize != count
            {
                return Err(IdxErrorKind::CountMismatch {
                    images: n as usize,
                    labels: count,
                });
            }
        }
        Ok(())
    }
}

/// Reads an image file as [`read_images`] does, but checks the image size (and the number of
/// images, when `count` is given: the number of labels that go with them) in the header,
/// before reading a single pixel: a file that declares other sizes is refused without reading
/// (or decompressing) its body, however large it says it is. The data is also held to
/// [`DEFAULT_LIMIT_BYTES`], as by [`read_images`].
///
/// # Errors
///
/// As [`read_images`], plus [`IdxErrorKind::WrongImageSize`] and
/// [`IdxErrorKind::CountMismatch`], found from the header.
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// // A header declaring 65,536 images of 256 x 256 (4 GiB), and no pixels at all.
/// let mut header = vec![0, 0, 8, 3];
/// for d in [65_536_u32, 256, 256] {
///     header.extend(d.to_be_bytes());
/// }
/// let err = idx::read_images_expecting(&header[..], 28, 28, Some(60_000)).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::WrongImageSize { found: (256, 256), .. }));
/// ```
pub fn read_images_expecting<R: Read>(
    reader: R,
    rows: u32,
    cols: u32,
    count: Option<usize>,
) -> Result<Images, IdxError> {
    read_any(
        reader,
        Some(3),
        &image_check(rows, cols, count),
        DEFAULT_LIMIT_BYTES,
    )
    .and_then(|array| into_images(array, DEFAULT_LIMIT_BYTES))
    .map_err(IdxError::new)
}

/// [`read_images_expecting`] on a file; every error names the path.
///
/// # Errors
///
/// As [`read_images_expecting`].
///
/// ```
/// use constmat::data::idx::{self, IdxErrorKind};
///
/// let path = std::env::temp_dir().join("constmat-doc-read_images_from_path_expecting.idx");
/// // One 1 x 2 image.
/// std::fs::write(&path, [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 7, 9])?;
/// assert_eq!(idx::read_images_from_path_expecting(&path, 1, 2, Some(1))?.pixels(), &[7, 9]);
/// let err = idx::read_images_from_path_expecting(&path, 1, 2, Some(2)).unwrap_err();
/// assert!(matches!(err.kind(), IdxErrorKind::CountMismatch { images: 1, labels: 2 }));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_images_from_path_expecting<P: AsRef<Path>>(
    path: P,
    rows: u32,
    cols: u32,
    count: Option<usize>,
) -> Result<Images, IdxError> {
    let path = path.as_ref();
    read_path(
        path,
        Some(3),
        &image_check(rows, cols, count),
        DEFAULT_LIMIT_BYTES,
    )
    .and_then(|array| {
        into_images(array, DEFAULT_LIMIT_BYTES).map_err(|kind| IdxError::new(kind).with_path(path))
    })
}

/// An array of three dimensions as [`Images`], provided one image is within `limit_bytes`.
pub(crate) fn into_images(array: IdxArray, limit_bytes: u64) -> Result<Images, IdxErrorKind> {
    let limit_bytes = limit_bytes.min(MAX_DATA_BYTES);
    let IdxArray { dims, data } = array;
    let &[count, rows, cols] = dims.as_slice() else {
        // The readers ask for three dimensions; this is not reached.
        return Err(IdxErrorKind::WrongDimensionCount {
            expected: 3,
            found: u8::try_from(dims.len()).unwrap_or(u8::MAX),
        });
    };
    // With no images, the data is empty whatever the image size; still refuse an image size
    // that could not be indexed (or that no file within the limit could hold).
    if u64::from(rows) * u64::from(cols) > limit_bytes {
        return Err(IdxErrorKind::TooLarge { dims, limit_bytes });
    }
    Ok(Images {
        count,
        rows,
        cols,
        pixels: data,
    })
}
