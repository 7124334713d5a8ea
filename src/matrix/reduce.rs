//! Reductions: sums and means over rows and columns with typed results, row-wise argmax.

use super::Matrix;
use crate::Scalar;
use crate::kernels::argmax;

impl<T: Scalar, const H: usize, const W: usize> Matrix<T, H, W> {
    /// The sum of all elements.
    ///
    /// With integer elements an overflow panics in a debug build and wraps in a release build;
    /// [`checked_sum`](Self::checked_sum) returns `None` instead.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// assert_eq!(m.sum(), 10);
    /// ```
    #[must_use]
    pub fn sum(&self) -> T {
        self.iter().fold(T::zero(), |acc, &x| acc + x)
    }

    /// The sum of each column (summing over the rows): `H x W -> 1 x W`.
    ///
    /// With one sample per row, this is the bias gradient `db = Σ_batch dZ`.
    ///
    /// With integer elements an overflow panics in a debug build and wraps in a release build,
    /// as Rust's `+` does. There is no checked form: sum in a wider type instead, where no
    /// realistic matrix overflows (`m.map(i64::from).column_sums()` for `i32` elements, below).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// let sums: Matrix<i32, 1, 3> = m.column_sums();
    /// assert_eq!(sums.as_slice(), &[5, 7, 9]);
    ///
    /// // i32 sums that overflow, summed in i64.
    /// let big = Matrix::<i32, 2, 1>::filled(i32::MAX);
    /// assert_eq!(big.map(i64::from).column_sums().as_slice(), &[2 * i64::from(i32::MAX)]);
    /// ```
    #[must_use]
    pub fn column_sums(&self) -> Matrix<T, 1, W> {
        let mut out = Matrix::zeros();
        self.column_sums_into(&mut out);
        out
    }

    /// `out = column sums of self` with no allocation: `H x W -> 1 x W`.
    ///
    /// Integer overflow as in [`column_sums`](Self::column_sums).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// let mut out = Matrix::filled(100);
    /// m.column_sums_into(&mut out);
    /// assert_eq!(out.as_slice(), &[4, 6]);
    /// ```
    pub fn column_sums_into(&self, out: &mut Matrix<T, 1, W>) {
        let out = &mut out.as_array_mut()[0];
        *out = [T::zero(); W];
        for row in self.rows() {
            for (o, &x) in out.iter_mut().zip(row.iter()) {
                *o += x;
            }
        }
    }

    /// The sum of each row (summing over the columns): `H x W -> H x 1`.
    ///
    /// With integer elements an overflow panics in a debug build and wraps in a release build,
    /// as Rust's `+` does. There is no checked form: sum in a wider type instead, where no
    /// realistic matrix overflows (`m.map(i64::from).row_sums()` for `i32` elements, below).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// let sums: Matrix<i32, 2, 1> = m.row_sums();
    /// assert_eq!(sums.as_slice(), &[6, 15]);
    ///
    /// // i32 sums that overflow, summed in i64.
    /// let big = Matrix::<i32, 1, 2>::filled(i32::MAX);
    /// assert_eq!(big.map(i64::from).row_sums().as_slice(), &[2 * i64::from(i32::MAX)]);
    /// ```
    #[must_use]
    pub fn row_sums(&self) -> Matrix<T, H, 1> {
        let mut out = Matrix::zeros();
        self.row_sums_into(&mut out);
        out
    }

    /// `out = row sums of self` with no allocation: `H x W -> H x 1`.
    ///
    /// Integer overflow as in [`row_sums`](Self::row_sums).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// let mut out = Matrix::zeros();
    /// m.row_sums_into(&mut out);
    /// assert_eq!(out.as_slice(), &[3, 7]);
    /// ```
    pub fn row_sums_into(&self, out: &mut Matrix<T, H, 1>) {
        for (o, row) in out.rows_mut().zip(self.rows()) {
            o[0] = row.iter().fold(T::zero(), |acc, &x| acc + x);
        }
    }

    /// The mean of each column: `H x W -> 1 x W`. For integers the division truncates.
    ///
    /// An empty column (`H == 0`) has no mean: for floats its entry is NaN (`0 / 0`).
    ///
    /// With integer elements, the sums behind the means overflow as in
    /// [`column_sums`](Self::column_sums): a panic in a debug build, a wrapped (wrong) mean in a
    /// release build. There is no checked form; take the mean in a wider type,
    /// `m.map(i64::from).column_means()`.
    ///
    /// # Panics
    ///
    /// For integer types, when `H == 0` (division by zero) or when `H` does not fit in `T`
    /// (a `u8` matrix with more than 255 rows); in a debug build, when a column's sum
    /// overflows `T`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<f64, 2, 2>::from_rows([[1.0, 2.0], [3.0, 6.0]]);
    /// assert_eq!(m.column_means().as_slice(), &[2.0, 4.0]);
    /// ```
    #[must_use]
    pub fn column_means(&self) -> Matrix<T, 1, W> {
        let n = count::<T>(H);
        let mut out = self.column_sums();
        out.map_in_place(|s| s / n);
        out
    }

    /// The mean of each row: `H x W -> H x 1`. For integers the division truncates.
    ///
    /// An empty row (`W == 0`) has no mean: for floats its entry is NaN (`0 / 0`).
    ///
    /// With integer elements, the sums behind the means overflow as in
    /// [`row_sums`](Self::row_sums): a panic in a debug build, a wrapped (wrong) mean in a
    /// release build. There is no checked form; take the mean in a wider type,
    /// `m.map(i64::from).row_means()`.
    ///
    /// # Panics
    ///
    /// For integer types, when `W == 0` (division by zero) or when `W` does not fit in `T`; in
    /// a debug build, when a row's sum overflows `T`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<f64, 2, 2>::from_rows([[1.0, 2.0], [3.0, 6.0]]);
    /// assert_eq!(m.row_means().as_slice(), &[1.5, 4.5]);
    /// ```
    #[must_use]
    pub fn row_means(&self) -> Matrix<T, H, 1> {
        let n = count::<T>(W);
        let mut out = self.row_sums();
        out.map_in_place(|s| s / n);
        out
    }

    /// The column index of the largest element of each row: `H x W -> H x 1`.
    ///
    /// Ties go to the first (leftmost) largest element. A NaN counts as larger than any number,
    /// so a row holding one points at its first NaN rather than silently at a number. A row of a
    /// zero-width matrix has no elements; its entry is 0.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let scores = Matrix::<f32, 2, 3>::from_rows([[0.1, 0.7, 0.2], [0.5, 0.5, f32::NAN]]);
    /// assert_eq!(scores.row_argmax().as_slice(), &[1, 2]);
    /// ```
    #[must_use]
    pub fn row_argmax(&self) -> Matrix<usize, H, 1> {
        let mut out = Matrix::zeros();
        self.row_argmax_into(&mut out);
        out
    }

    /// `out = row_argmax(self)` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 2>::from_rows([[3, 1], [1, 3]]);
    /// let mut out = Matrix::zeros();
    /// m.row_argmax_into(&mut out);
    /// assert_eq!(out.as_slice(), &[0, 1]);
    /// ```
    pub fn row_argmax_into(&self, out: &mut Matrix<usize, H, 1>) {
        for (o, row) in out.rows_mut().zip(self.rows()) {
            o[0] = argmax(row);
        }
    }
}

/// `n` as a `T`; only counts up to a matrix dimension reach here.
fn count<T: Scalar>(n: usize) -> T {
    T::from(n).unwrap_or_else(|| panic!("{n} does not fit in the element type"))
}
