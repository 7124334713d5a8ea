//! Errors of building a matrix from run-time data.

use core::fmt;

/// A slice or `Vec` did not hold exactly `rows * cols` elements.
///
/// Returned by [`Matrix::from_slice`](crate::Matrix::from_slice) and
/// [`Matrix::from_vec`](crate::Matrix::from_vec).
///
/// ```
/// use constmat::Matrix;
///
/// let err = Matrix::<f32, 2, 3>::from_slice(&[1.0, 2.0]).unwrap_err();
/// assert_eq!(err.expected(), 6);
/// assert_eq!(err.to_string(), "expected 6 elements for a 2x3 matrix, found 2");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LengthError {
    /// Rows of the matrix that was being built.
    pub rows: usize,
    /// Columns of the matrix that was being built.
    pub cols: usize,
    /// The number of elements that were given.
    pub found: usize,
}

impl LengthError {
    /// The number of elements that were needed: `rows * cols`.
    #[must_use]
    pub const fn expected(&self) -> usize {
        self.rows * self.cols
    }
}

impl fmt::Display for LengthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expected {} elements for a {}x{} matrix, found {}",
            self.expected(),
            self.rows,
            self.cols,
            self.found
        )
    }
}

impl core::error::Error for LengthError {}
