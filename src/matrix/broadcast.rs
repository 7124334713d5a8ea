//! Broadcasting a column (`H x 1`) or a row (`1 x W`) across a matrix, with the shapes typed.

use super::Matrix;
use crate::Scalar;

impl<T: Scalar, const H: usize, const W: usize> Matrix<T, H, W> {
    /// `self + column` with the `H x 1` column added to every column of `self`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 3>::zeros();
    /// let col = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    /// assert_eq!(m.add_column_broadcast(&col).as_slice(), &[1, 1, 1, 2, 2, 2]);
    /// ```
    #[must_use]
    pub fn add_column_broadcast(&self, column: &Matrix<T, H, 1>) -> Self {
        let mut out = self.clone();
        out.add_column_broadcast_assign(column);
        out
    }

    /// Adds the `H x 1` column to every column of `self`, in place.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let mut m = Matrix::<i32, 2, 2>::ones();
    /// m.add_column_broadcast_assign(&Matrix::from_rows([[10], [20]]));
    /// assert_eq!(m.as_slice(), &[11, 11, 21, 21]);
    /// ```
    pub fn add_column_broadcast_assign(&mut self, column: &Matrix<T, H, 1>) {
        for (row, c) in self.rows_mut().zip(column.rows()) {
            for x in row.iter_mut() {
                *x += c[0];
            }
        }
    }

    /// `self + row` with the `1 x W` row added to every row of `self`.
    ///
    /// With one sample per row, this is adding a bias: `Z = X·Wᵀ + b`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 3>::zeros();
    /// let row = Matrix::<i32, 1, 3>::from_rows([[1, 2, 3]]);
    /// assert_eq!(m.add_row_broadcast(&row).as_slice(), &[1, 2, 3, 1, 2, 3]);
    /// ```
    #[must_use]
    pub fn add_row_broadcast(&self, row: &Matrix<T, 1, W>) -> Self {
        let mut out = self.clone();
        out.add_row_broadcast_assign(row);
        out
    }

    /// Adds the `1 x W` row to every row of `self`, in place.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let mut m = Matrix::<i32, 2, 2>::ones();
    /// m.add_row_broadcast_assign(&Matrix::from_rows([[10, 20]]));
    /// assert_eq!(m.as_slice(), &[11, 21, 11, 21]);
    /// ```
    pub fn add_row_broadcast_assign(&mut self, row: &Matrix<T, 1, W>) {
        let row = &row.as_array()[0];
        for r in self.rows_mut() {
            for (x, &b) in r.iter_mut().zip(row.iter()) {
                *x += b;
            }
        }
    }
}

impl<T: Scalar, const H: usize> Matrix<T, H, 1> {
    /// Repeats this `H x 1` column `W` times: `H x 1 -> H x W`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let col = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    /// let m: Matrix<i32, 2, 3> = col.broadcast_column();
    /// assert_eq!(m.as_slice(), &[1, 1, 1, 2, 2, 2]);
    /// ```
    #[must_use]
    pub fn broadcast_column<const W: usize>(&self) -> Matrix<T, H, W> {
        Matrix::from_fn(|r, _| self.as_array()[r][0])
    }
}

impl<T: Scalar, const W: usize> Matrix<T, 1, W> {
    /// Repeats this `1 x W` row `H` times: `1 x W -> H x W`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let row = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let m: Matrix<i32, 3, 2> = row.broadcast_row();
    /// assert_eq!(m.as_slice(), &[1, 2, 1, 2, 1, 2]);
    /// ```
    #[must_use]
    pub fn broadcast_row<const H: usize>(&self) -> Matrix<T, H, W> {
        Matrix::from_fn(|_, c| self.as_array()[0][c])
    }
}
