//! Reading data sets from disk: the IDX format (MNIST and any IDX data set).
//!
//! - [`idx`]: a strict reader for IDX files of unsigned bytes, plain or gzip-compressed, from a
//!   path, any [`std::io::Read`] or a byte slice. Every malformed input is a typed
//!   [`IdxError`](idx::IdxError), never a panic or a silently wrong read.
//! - [`mnist`]: the four MNIST files of a directory, checked (28x28 images, labels below 10,
//!   matching counts) and laid out for training with compile-time batch sizes.
//!
//! ```
//! use constmat::data::idx;
//!
//! // A label file: magic 0x00000801 (unsigned bytes, 1 dimension), 3 labels, then the labels.
//! let bytes = [0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1];
//! assert_eq!(idx::read_labels(&bytes[..])?, [7, 2, 1]);
//! # Ok::<(), idx::IdxError>(())
//! ```

pub mod idx;
pub mod mnist;
