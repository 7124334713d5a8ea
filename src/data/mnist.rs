//! The MNIST handwritten digits: the four IDX files of a directory, checked and laid out for
//! training with compile-time batch sizes.
//!
//! [`Mnist::load`] reads [`FILES`] from a directory (each plain or gzipped), checks that the
//! images are 28x28, that every label is below 10 and that each image file has as many images
//! as its label file has labels. Fashion-MNIST uses the same file names and format, so it loads
//! the same way.
//!
//! ```no_run
//! use constmat::Matrix;
//! use constmat::data::mnist::{self, Mnist};
//!
//! let mnist = Mnist::load("/path/to/mnist")?;
//! assert_eq!((mnist.train.len(), mnist.test.len()), (60_000, 10_000));
//!
//! const B: usize = 32;
//! let order: Vec<usize> = (0..mnist.train.len()).collect(); // shuffle it each epoch
//! let mut x = Matrix::<f32, B, { mnist::PIXELS }>::zeros();
//! let mut y = [0_u8; B];
//! for batch in order.as_chunks::<B>().0 {
//!     mnist.train.fill_batch(batch, x.as_array_mut(), &mut y); // no allocation
//!     // ... forward, backward, update ...
//! }
//! # Ok::<(), mnist::MnistError>(())
//! ```

use core::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::vec::Vec;

use num_traits::Float;

use super::idx::{self, IdxError, Images};
use crate::Scalar;

/// The base names of the four MNIST files, each expected in the directory either as is or with
/// `.gz` appended: training images, training labels, test images, test labels.
///
/// ```
/// use constmat::data::mnist::FILES;
///
/// for name in FILES {
///     println!("needs {name} or {name}.gz");
/// }
/// assert_eq!(FILES[0], "train-images-idx3-ubyte");
/// ```
pub const FILES: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

/// The height of an MNIST image, in pixels.
///
/// ```
/// assert_eq!(constmat::data::mnist::ROWS, 28);
/// ```
pub const ROWS: usize = 28;

/// The width of an MNIST image, in pixels.
///
/// ```
/// assert_eq!(constmat::data::mnist::COLS, 28);
/// ```
pub const COLS: usize = 28;

/// The number of pixels of an MNIST image, `ROWS * COLS`: the width of an input batch.
///
/// ```
/// assert_eq!(constmat::data::mnist::PIXELS, 784);
/// ```
pub const PIXELS: usize = ROWS * COLS;

/// The number of classes (the digits 0 to 9): every label is below it.
///
/// ```
/// assert_eq!(constmat::data::mnist::CLASSES, 10);
/// ```
pub const CLASSES: usize = 10;

/// [`CLASSES`] as the type of a label.
const CLASSES_U8: u8 = CLASSES as u8;

/// The MNIST training and test sets.
///
/// ```
/// use constmat::data::mnist::{Mnist, MnistError};
///
/// match Mnist::load("/no/such/dir") {
///     Ok(mnist) => println!("{} training images", mnist.train.len()),
///     Err(MnistError::MissingFiles { missing, .. }) => assert_eq!(missing.len(), 4),
///     Err(other) => panic!("{other}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mnist {
    /// The training set: 60,000 images in the original files.
    pub train: Split,
    /// The test set (`t10k`): 10,000 images in the original files.
    pub test: Split,
}

impl Mnist {
    /// Reads and checks the four [`FILES`] in `dir`.
    ///
    /// Each file is looked for under its base name, then with `.gz` appended; whether it is
    /// compressed is decided by its contents, not its name.
    ///
    /// The four headers are read and checked against each other and against
    /// [`idx::DEFAULT_LIMIT_BYTES`] (256 MiB of pixels per image file: 342,000 images, 5.7
    /// times MNIST's training set) before any data is read or decompressed, so a directory
    /// holding a decompression bomb fails fast; [`load_with_limit`](Self::load_with_limit)
    /// sets another limit.
    ///
    /// # Errors
    ///
    /// [`MnistError::MissingFiles`] if any file is in neither form (listing all such files and
    /// the directory searched); otherwise [`MnistError::Idx`] for the first file that cannot be
    /// read or fails a check: not IDX, truncated, images not 28x28, more data than the limit,
    /// a label not below 10, or a different number of labels than images (reported on the label
    /// file).
    ///
    /// ```
    /// use constmat::data::mnist::Mnist;
    ///
    /// let err = Mnist::load("/no/such/dir").unwrap_err();
    /// assert!(err.to_string().starts_with(
    ///     "MNIST files missing in /no/such/dir: train-images-idx3-ubyte[.gz], "
    /// ));
    /// ```
    pub fn load<P: AsRef<Path>>(dir: P) -> Result<Self, MnistError> {
        Self::load_with_limit(dir, idx::DEFAULT_LIMIT_BYTES)
    }

    /// Reads and checks the four [`FILES`] in `dir` as [`load`](Self::load) does, refusing an
    /// image file whose header declares more than `limit_bytes` of pixels (and a label file
    /// declaring more than `limit_bytes` labels), before any data is read. A limit above
    /// [`idx::MAX_DATA_BYTES`] counts as that.
    ///
    /// At most about `limit_bytes` (plus the labels, `limit_bytes / 784`) is then read and
    /// allocated per set, whatever the files hold: MNIST itself needs 60,000 x 784 =
    /// 47,040,000 bytes.
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load); an [`IdxErrorKind::TooLarge`](idx::IdxErrorKind::TooLarge)
    /// names the limit and the file.
    ///
    /// ```
    /// use constmat::data::mnist::{self, Mnist};
    ///
    /// // Two images in each set, one training image more than 1,000 bytes allow.
    /// let dir = std::env::temp_dir().join("constmat-doc-load_with_limit");
    /// std::fs::create_dir_all(&dir)?;
    /// let (images, labels) = (
    ///     [&[0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28][..], &[0; 2 * 784]].concat(),
    ///     [0, 0, 8, 1, 0, 0, 0, 2, 3, 7],
    /// );
    /// for (name, bytes) in mnist::FILES.iter().zip([&images[..], &labels, &images, &labels]) {
    ///     std::fs::write(dir.join(name), bytes)?;
    /// }
    /// assert_eq!(Mnist::load_with_limit(&dir, 2 * 784)?.train.labels(), &[3, 7]);
    /// let err = Mnist::load_with_limit(&dir, 1_000).unwrap_err();
    /// assert!(err.to_string().ends_with(
    ///     "train-images-idx3-ubyte: IDX data too large: dimensions 2 x 28 x 28 exceed the \
    ///      limit of 1000 bytes"
    /// ));
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_with_limit<P: AsRef<Path>>(dir: P, limit_bytes: u64) -> Result<Self, MnistError> {
        let [train_images, train_labels, test_images, test_labels] = Self::locate(dir)?;
        // Every header before any data: a bomb in the test set is found before the 47 MB of
        // training images are read.
        let train = Pending::open(&train_images, &train_labels, limit_bytes)?;
        let test = Pending::open(&test_images, &test_labels, limit_bytes)?;
        Ok(Self {
            train: train.read()?,
            test: test.read()?,
        })
    }

    /// The paths [`load`](Self::load) would read, in the order of [`FILES`], without reading
    /// them.
    ///
    /// # Errors
    ///
    /// [`MnistError::MissingFiles`] if any file is in neither form.
    ///
    /// ```
    /// use constmat::data::mnist::{Mnist, MnistError};
    ///
    /// let err = Mnist::locate("/no/such/dir").unwrap_err();
    /// let MnistError::MissingFiles { dir, missing } = err else { unreachable!() };
    /// assert_eq!(dir, std::path::Path::new("/no/such/dir"));
    /// assert_eq!(missing, constmat::data::mnist::FILES);
    /// ```
    pub fn locate<P: AsRef<Path>>(dir: P) -> Result<[PathBuf; 4], MnistError> {
        let dir = dir.as_ref();
        let found = FILES.map(|name| {
            let plain = dir.join(name);
            let gzipped = dir.join(std::format!("{name}.gz"));
            // A path whose existence cannot be decided is kept, so that opening it reports why.
            [plain, gzipped]
                .into_iter()
                .find(|path| !matches!(path.try_exists(), Ok(false)))
        });
        let missing: Vec<&'static str> = FILES
            .iter()
            .zip(&found)
            .filter(|(_, path)| path.is_none())
            .map(|(&name, _)| name)
            .collect();
        match found {
            [Some(a), Some(b), Some(c), Some(d)] => Ok([a, b, c, d]),
            _ => Err(MnistError::MissingFiles {
                dir: dir.to_path_buf(),
                missing,
            }),
        }
    }
}

/// An image file and its label file whose headers have been read and checked against each
/// other (28 x 28 images, as many as labels) and against the limit: nothing else has been read.
struct Pending<'a> {
    images: idx::Opened<File>,
    images_path: &'a Path,
    labels: idx::Opened<File>,
    labels_path: &'a Path,
}

impl<'a> Pending<'a> {
    fn open(
        images_path: &'a Path,
        labels_path: &'a Path,
        limit_bytes: u64,
    ) -> Result<Self, IdxError> {
        let labels = idx::open_path(labels_path, Some(1), idx::NO_CHECK, limit_bytes)?;
        let count = labels.dims()[0] as usize;
        let check = idx::image_check(ROWS as u32, COLS as u32, Some(count));
        match idx::open_path(images_path, Some(3), &check, limit_bytes) {
            Ok(images) => Ok(Self {
                images,
                images_path,
                labels,
                labels_path,
            }),
            // The counts disagree: named, as before, by the label file, unless its stream turns
            // out corrupt (the image file's was looked at already).
            Err(e) if matches!(e.kind(), idx::IdxErrorKind::CountMismatch { .. }) => {
                Err(IdxError::new(labels.real_cause(e.into_kind())).with_path(labels_path))
            }
            Err(e) => Err(e),
        }
    }

    /// Reads the labels, checks them, then the images; errors name the file.
    fn read(self) -> Result<Split, IdxError> {
        let labels = self
            .labels
            .read()
            .and_then(|array| {
                let labels = array.into_data();
                idx::check_labels(&labels, CLASSES_U8).map_err(IdxError::into_kind)?;
                Ok(labels)
            })
            .map_err(|kind| IdxError::new(kind).with_path(self.labels_path))?;
        let images = self
            .images
            .read()
            .and_then(|array| idx::into_images(array, idx::MAX_DATA_BYTES))
            .map_err(|kind| IdxError::new(kind).with_path(self.images_path))?;
        Ok(Split {
            pixels: images.into_pixels(),
            labels,
        })
    }
}

/// An error of [`Mnist::load`].
///
/// ```
/// use constmat::data::mnist::{Mnist, MnistError};
///
/// let err = Mnist::load("/no/such/dir").unwrap_err();
/// assert!(matches!(err, MnistError::MissingFiles { .. }));
/// assert!(err.to_string().contains("needs all four of train-images-idx3-ubyte"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum MnistError {
    /// Some of the four files are in the directory in neither form (plain or `.gz`).
    MissingFiles {
        /// The directory searched.
        dir: PathBuf,
        /// The base names (from [`FILES`]) of the files not found.
        missing: Vec<&'static str>,
    },
    /// A file is there but cannot be read, or is not what MNIST needs; the error names the file.
    Idx(IdxError),
}

impl From<IdxError> for MnistError {
    fn from(e: IdxError) -> Self {
        Self::Idx(e)
    }
}

impl fmt::Display for MnistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingFiles { dir, missing } => {
                write!(f, "MNIST files missing in {}: ", dir.display())?;
                for (i, name) in missing.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{name}[.gz]")?;
                }
                f.write_str(" (the directory needs all four of ")?;
                for (i, name) in FILES.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{name}")?;
                }
                f.write_str(", each plain or gzipped with .gz appended)")
            }
            // The inner error's text, unchanged: it already names the file.
            Self::Idx(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for MnistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::MissingFiles { .. } => None,
            // `Display` shows the inner error itself, so the chain continues with its source.
            Self::Idx(e) => std::error::Error::source(e),
        }
    }
}

/// One MNIST set (training or test): 28x28 images with their labels, all checked.
///
/// Images are stored contiguously as `[u8; PIXELS]` rows; [`fill_batch`](Self::fill_batch)
/// copies a batch of them, scaled to `[0, 1]`, into a caller-owned buffer.
///
/// ```
/// use constmat::data::{idx, mnist::{self, Split}};
///
/// // Two synthetic 28x28 images (all 0, all 255) labelled 3 and 7.
/// let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28];
/// bytes.extend([0; 784]);
/// bytes.extend([255; 784]);
/// let split = Split::new(idx::read_images(&bytes[..])?, vec![3, 7])?;
/// assert_eq!(split.len(), 2);
/// assert_eq!(split.image(1), &[255; mnist::PIXELS]);
/// assert_eq!(split.labels(), &[3, 7]);
/// # Ok::<(), idx::IdxError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Split {
    /// `labels.len() * PIXELS` bytes.
    pixels: Vec<u8>,
    /// Each below `CLASSES`.
    labels: Vec<u8>,
}

impl Split {
    /// Checks and pairs images with their labels: 28x28 images, labels below 10, as many labels
    /// as images.
    ///
    /// # Errors
    ///
    /// [`IdxErrorKind::WrongImageSize`](idx::IdxErrorKind::WrongImageSize),
    /// [`IdxErrorKind::LabelOutOfRange`](idx::IdxErrorKind::LabelOutOfRange) or
    /// [`IdxErrorKind::CountMismatch`](idx::IdxErrorKind::CountMismatch), checked in that order.
    ///
    /// ```
    /// use constmat::data::{idx, mnist::Split};
    ///
    /// let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28];
    /// bytes.extend([0; 784]);
    /// let images = idx::read_images(&bytes[..])?;
    /// assert!(Split::new(images.clone(), vec![9]).is_ok());
    /// let err = Split::new(images, vec![10]).unwrap_err();
    /// assert_eq!(err.to_string(), "label out of range at index 0: expected a label below 10, found 10");
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    pub fn new(images: Images, labels: Vec<u8>) -> Result<Self, IdxError> {
        images.check_size(ROWS as u32, COLS as u32)?;
        idx::check_labels(&labels, CLASSES_U8)?;
        idx::check_counts(&images, &labels)?;
        Ok(Self {
            pixels: images.into_pixels(),
            labels,
        })
    }

    /// The number of images (and labels).
    ///
    /// ```
    /// # use constmat::data::{idx, mnist::Split};
    /// let images = idx::read_images(&[0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28][..])?;
    /// let empty = Split::new(images, vec![])?;
    /// assert_eq!(empty.len(), 0);
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the set holds no images.
    ///
    /// ```
    /// # use constmat::data::{idx, mnist::Split};
    /// let images = idx::read_images(&[0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28][..])?;
    /// assert!(Split::new(images, vec![])?.is_empty());
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// All images, each as its 784 pixels (row-major, 0 = background, 255 = ink).
    ///
    /// ```
    /// # use constmat::data::{idx, mnist::Split};
    /// let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28];
    /// bytes.extend([1; 784]);
    /// bytes.extend([2; 784]);
    /// let split = Split::new(idx::read_images(&bytes[..])?, vec![0, 1])?;
    /// assert_eq!(split.images().len(), 2);
    /// assert_eq!(split.images()[1][783], 2);
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn images(&self) -> &[[u8; PIXELS]] {
        // `new` and `load_split` guarantee `pixels.len() == len() * PIXELS`: no remainder.
        self.pixels.as_chunks::<PIXELS>().0
    }

    /// Image `index`, as its 784 pixels.
    ///
    /// # Panics
    ///
    /// If `index >= self.len()`.
    ///
    /// ```
    /// # use constmat::data::{idx, mnist::Split};
    /// let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28];
    /// bytes.extend((0..784).map(|i| (i % 256) as u8));
    /// let split = Split::new(idx::read_images(&bytes[..])?, vec![4])?;
    /// assert_eq!(split.image(0)[300], 44);
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    #[must_use]
    #[track_caller]
    pub fn image(&self, index: usize) -> &[u8; PIXELS] {
        &self.images()[index]
    }

    /// All labels, each below [`CLASSES`].
    ///
    /// ```
    /// # use constmat::data::{idx, mnist::Split};
    /// let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28];
    /// bytes.extend([0; 2 * 784]);
    /// let split = Split::new(idx::read_images(&bytes[..])?, vec![8, 1])?;
    /// assert_eq!(split.labels(), &[8, 1]);
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    #[must_use]
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }

    /// The label of image `index`.
    ///
    /// # Panics
    ///
    /// If `index >= self.len()`.
    ///
    /// ```
    /// # use constmat::data::{idx, mnist::Split};
    /// let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28];
    /// bytes.extend([0; 2 * 784]);
    /// let split = Split::new(idx::read_images(&bytes[..])?, vec![8, 1])?;
    /// assert_eq!(split.label(1), 1);
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    #[must_use]
    #[track_caller]
    pub fn label(&self, index: usize) -> u8 {
        self.labels[index]
    }

    /// Copies the images and labels at `indices` into a caller-owned batch, without allocating.
    ///
    /// Sample `k` of `x` receives image `indices[k]` with each pixel `p` scaled to `p / 255` (so
    /// in `[0, 1]`, exactly `p as f32 / 255.0` for `f32`); `y[k]` receives its label. The batch
    /// size `B` is part of the types, so a batch of the wrong size does not compile; cut an
    /// index list into batches with [`slice::as_chunks`].
    ///
    /// A sample is either of the two inputs of an MNIST net ([`Pixels`]): a vector of
    /// [`PIXELS`] for a dense net (a `Matrix<T, B, PIXELS>` gives its storage as `x` through
    /// [`Matrix::as_array_mut`](crate::Matrix::as_array_mut)), or an image of one channel,
    /// `[[[T; COLS]; ROWS]; 1]`, for a net that starts with `Input<T, 1, 28, 28>` (a batch from
    /// [`zeroed_batch`](crate::nn::zeroed_batch), say).
    ///
    /// # Panics
    ///
    /// If an index is not below [`len`](Self::len).
    ///
    /// ```
    /// use constmat::Matrix;
    /// use constmat::data::{idx, mnist::{self, Split}};
    ///
    /// // Three synthetic images, filled with 0, 51 and 255, labelled 0, 1, 2.
    /// let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28];
    /// for p in [0, 51, 255] {
    ///     bytes.extend([p; 784]);
    /// }
    /// let split = Split::new(idx::read_images(&bytes[..])?, vec![0, 1, 2])?;
    ///
    /// let mut x = Matrix::<f32, 2, { mnist::PIXELS }>::zeros();
    /// let mut y = [0_u8; 2];
    /// split.fill_batch(&[2, 1], x.as_array_mut(), &mut y);
    /// assert_eq!(y, [2, 1]);
    /// assert!(x.as_array()[0].iter().all(|&v| v == 1.0));
    /// assert!(x.as_array()[1].iter().all(|&v| v == 0.2));
    ///
    /// // The same images for a convolutional net: one channel of 28 rows of 28.
    /// let mut images = [[[[0.0_f32; mnist::COLS]; mnist::ROWS]; 1]; 2];
    /// split.fill_batch(&[2, 1], &mut images, &mut y);
    /// assert_eq!(images[0][0][27][27], 1.0);
    /// assert_eq!(images[1][0][0][0], 0.2);
    /// # Ok::<(), idx::IdxError>(())
    /// ```
    #[track_caller]
    pub fn fill_batch<X: Pixels, const B: usize>(
        &self,
        indices: &[usize; B],
        x: &mut [X; B],
        y: &mut [u8; B],
    ) {
        let images = self.images();
        let scale = <X::Element as From<u8>>::from(u8::MAX);
        for ((sample, label), &index) in x.iter_mut().zip(y.iter_mut()).zip(indices) {
            for (dst, &p) in sample.pixels_mut().iter_mut().zip(&images[index]) {
                *dst = <X::Element as From<u8>>::from(p) / scale;
            }
            *label = self.labels[index];
        }
    }
}

/// A sample that holds one MNIST image, as [`Split::fill_batch`] writes it: the [`PIXELS`]
/// values row after row, as a vector `[T; PIXELS]` (a dense net's input) or as an image of one
/// channel `[[[T; COLS]; ROWS]; 1]` (the input of a net that starts with `Input<T, 1, 28, 28>`,
/// channels, rows, columns as in PyTorch).
///
/// Sealed: these two are the layouts of an MNIST net's input.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not hold one MNIST image",
    label = "a sample of this batch is `{Self}`",
    note = "a sample is `[T; 784]` (a dense net's input) or `[[[T; 28]; 28]; 1]` (an image of one channel), T a float: `fill_batch::<[f32; 784], B>`, not `fill_batch::<f32, B>`"
)]
pub trait Pixels: sealed::Sealed {
    /// The type of one pixel's value (`f32`, `f64`).
    type Element: Float + From<u8>;
    /// The [`PIXELS`] values, row after row.
    fn pixels_mut(&mut self) -> &mut [Self::Element];
}

impl<T: Float + From<u8>> Pixels for [T; PIXELS] {
    type Element = T;
    #[inline]
    fn pixels_mut(&mut self) -> &mut [T] {
        self
    }
}

impl<T: Float + From<u8>> Pixels for [[[T; COLS]; ROWS]; 1] {
    type Element = T;
    #[inline]
    fn pixels_mut(&mut self) -> &mut [T] {
        self.as_flattened_mut().as_flattened_mut()
    }
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for [T; super::PIXELS] {}
    impl<T> Sealed for [[[T; super::COLS]; super::ROWS]; 1] {}
}

/// Writes the one-hot encoding of each label: row `k` of `out` is all zeros except a one at
/// column `labels[k]`. For targets of a loss that wants them (mean squared error, say).
///
/// # Panics
///
/// If a label is not below [`CLASSES`] (labels of a [`Split`] always are).
///
/// ```
/// use constmat::data::mnist::{self, CLASSES};
///
/// let mut targets = [[0.0_f32; CLASSES]; 2];
/// mnist::one_hot(&[3, 0], &mut targets);
/// assert_eq!(targets[0], [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
/// assert_eq!(targets[1][0], 1.0);
/// ```
#[track_caller]
pub fn one_hot<T: Scalar, const B: usize>(labels: &[u8; B], out: &mut [[T; CLASSES]; B]) {
    for (row, &label) in out.iter_mut().zip(labels) {
        assert!(
            label < CLASSES_U8,
            "label {label} out of range: expected a label below {CLASSES}"
        );
        row.fill(T::zero());
        row[usize::from(label)] = T::one();
    }
}
