//! Structural operations: transpose, reshape, concatenation, splitting, sub-matrices.
//!
//! Apart from `transpose`, each of these has a rule that is an equation between dimensions
//! (`H * W == H2 * W2`, `W1 + W2 == W3`, ...). Stable Rust cannot put such an equation in a type,
//! so it is checked by `const { assert!(..) }`, which the compiler evaluates when it generates
//! code: **the error appears in `cargo build`, not in `cargo check` or an editor's live check.**
//! The message names the rule and the sizes (`reshape must keep the number of elements: 28 x 28
//! = 784, but 700 x 1 = 700`), and the compiler's last note points at the call.

use super::Matrix;
use crate::format::Message;
use crate::{Scalar, kernels};

/// The panic of a rule `a + b == total`: `what` and `total`, `but`, then `a + b = sum`.
#[track_caller]
const fn sum_rule(what: &str, total: usize, but: &str, (a, b): (usize, usize)) -> ! {
    Message::new()
        .str(what)
        .number(total)
        .str(but)
        .number(a)
        .str(" + ")
        .number(b)
        .str(" = ")
        .number(a + b)
        .panic()
}

/// The panic of a block that ends past the matrix: `count` `dimension` from `start` of `total`.
#[track_caller]
const fn block_rule(dimension: &str, (start, count): (usize, usize), total: usize) -> ! {
    Message::new()
        .str("submatrix: ")
        .str(dimension)
        .str(" ")
        .number(start)
        .str("..")
        .number(start + count)
        .str(" of a matrix of ")
        .number(total)
        .str(" ")
        .str(dimension)
        .panic()
}

impl<T: Scalar, const H: usize, const W: usize> Matrix<T, H, W> {
    /// The transpose: `H x W -> W x H`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// let t: Matrix<i32, 3, 2> = m.transpose();
    /// assert_eq!(t.as_slice(), &[1, 4, 2, 5, 3, 6]);
    /// ```
    #[must_use]
    pub fn transpose(&self) -> Matrix<T, W, H> {
        let mut out = Matrix::zeros();
        self.transpose_into(&mut out);
        out
    }

    /// `out = selfᵀ` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let mut out = Matrix::<i32, 2, 1>::zeros();
    /// m.transpose_into(&mut out);
    /// assert_eq!(out.as_slice(), &[1, 2]);
    /// ```
    pub fn transpose_into(&self, out: &mut Matrix<T, W, H>) {
        kernels::transpose_into(self.as_array(), out.as_array_mut());
    }

    /// The same elements in the same row-major order, seen as an `H2 x W2` matrix.
    ///
    /// The rule `H * W == H2 * W2` is checked at build time: by `cargo build`, not `cargo check`
    /// (see "Shape rules checked at build time" in the [crate docs](crate)).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let image = Matrix::<u8, 28, 28>::from_fn(|r, c| (r * 28 + c) as u8);
    /// let column: Matrix<u8, 784, 1> = image.clone().reshape();
    /// assert_eq!(column.as_slice(), image.as_slice());
    /// ```
    ///
    /// ```compile_fail
    /// # use constmat::Matrix;
    /// let image = Matrix::<u8, 28, 28>::zeros();
    /// let wrong: Matrix<u8, 700, 1> = image.reshape(); // 784 elements cannot become 700
    /// ```
    #[must_use]
    pub fn reshape<const H2: usize, const W2: usize>(self) -> Matrix<T, H2, W2> {
        const {
            if H * W != H2 * W2 {
                Message::new()
                    .str("reshape must keep the number of elements: ")
                    .number(H)
                    .str(" x ")
                    .number(W)
                    .str(" = ")
                    .number(H * W)
                    .str(", but ")
                    .number(H2)
                    .str(" x ")
                    .number(W2)
                    .str(" = ")
                    .number(H2 * W2)
                    .panic()
            }
        }
        Matrix::from_fn(|r, c| self.as_slice()[r * W2 + c])
    }

    /// `[self | right]`: the columns of `right` placed after those of `self`,
    /// `(H x W) ++ (H x W2) -> H x W3`.
    ///
    /// The rule `W + W2 == W3` is checked at build time (`cargo build`, not `cargo check`).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    /// let b = Matrix::<i32, 2, 2>::from_rows([[3, 4], [5, 6]]);
    /// let ab: Matrix<i32, 2, 3> = a.concat_columns(&b);
    /// assert_eq!(ab.as_slice(), &[1, 3, 4, 2, 5, 6]);
    /// ```
    #[must_use]
    pub fn concat_columns<const W2: usize, const W3: usize>(
        &self,
        right: &Matrix<T, H, W2>,
    ) -> Matrix<T, H, W3> {
        const {
            if W + W2 != W3 {
                sum_rule(
                    "concat_columns: the result is ",
                    W3,
                    " wide, but the widths add up to ",
                    (W, W2),
                )
            }
        }
        Matrix::from_fn(|r, c| {
            if c < W {
                self.as_array()[r][c]
            } else {
                right.as_array()[r][c - W]
            }
        })
    }

    /// `[self; below]`: the rows of `below` placed under those of `self`,
    /// `(H x W) ++ (H2 x W) -> H3 x W`.
    ///
    /// The rule `H + H2 == H3` is checked at build time (`cargo build`, not `cargo check`).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let b = Matrix::<i32, 2, 2>::from_rows([[3, 4], [5, 6]]);
    /// let ab: Matrix<i32, 3, 2> = a.concat_rows(&b);
    /// assert_eq!(ab.as_slice(), &[1, 2, 3, 4, 5, 6]);
    /// ```
    #[must_use]
    pub fn concat_rows<const H2: usize, const H3: usize>(
        &self,
        below: &Matrix<T, H2, W>,
    ) -> Matrix<T, H3, W> {
        const {
            if H + H2 != H3 {
                sum_rule(
                    "concat_rows: the result is ",
                    H3,
                    " high, but the heights add up to ",
                    (H, H2),
                )
            }
        }
        Matrix::from_fn(|r, c| {
            if r < H {
                self.as_array()[r][c]
            } else {
                below.as_array()[r - H][c]
            }
        })
    }

    /// Splits the columns into the first `W1` and the remaining `W2`: `H x W -> (H x W1, H x W2)`.
    ///
    /// The rule `W1 + W2 == W` is checked at build time (`cargo build`, not `cargo check`).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// let (left, right): (Matrix<i32, 2, 1>, Matrix<i32, 2, 2>) = m.split_columns();
    /// assert_eq!(left.as_slice(), &[1, 4]);
    /// assert_eq!(right.as_slice(), &[2, 3, 5, 6]);
    /// ```
    #[must_use]
    pub fn split_columns<const W1: usize, const W2: usize>(
        &self,
    ) -> (Matrix<T, H, W1>, Matrix<T, H, W2>) {
        const {
            if W1 + W2 != W {
                sum_rule(
                    "split_columns: the matrix is ",
                    W,
                    " wide, but the parts' widths add up to ",
                    (W1, W2),
                )
            }
        }
        (
            Matrix::from_fn(|r, c| self.as_array()[r][c]),
            Matrix::from_fn(|r, c| self.as_array()[r][W1 + c]),
        )
    }

    /// Splits the rows into the first `H1` and the remaining `H2`: `H x W -> (H1 x W, H2 x W)`.
    ///
    /// The rule `H1 + H2 == H` is checked at build time (`cargo build`, not `cargo check`).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 3, 1>::from_rows([[1], [2], [3]]);
    /// let (top, bottom): (Matrix<i32, 1, 1>, Matrix<i32, 2, 1>) = m.split_rows();
    /// assert_eq!(top.as_slice(), &[1]);
    /// assert_eq!(bottom.as_slice(), &[2, 3]);
    /// ```
    #[must_use]
    pub fn split_rows<const H1: usize, const H2: usize>(
        &self,
    ) -> (Matrix<T, H1, W>, Matrix<T, H2, W>) {
        const {
            if H1 + H2 != H {
                sum_rule(
                    "split_rows: the matrix is ",
                    H,
                    " high, but the parts' heights add up to ",
                    (H1, H2),
                )
            }
        }
        (
            Matrix::from_fn(|r, c| self.as_array()[r][c]),
            Matrix::from_fn(|r, c| self.as_array()[H1 + r][c]),
        )
    }

    /// A copy of the `H2 x W2` block whose top-left corner is at row `ROW`, column `COL`.
    ///
    /// The rules `ROW + H2 <= H` and `COL + W2 <= W` are checked at build time (`cargo build`,
    /// not `cargo check`).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 3, 3>::from_fn(|r, c| (3 * r + c) as i32);
    /// let block: Matrix<i32, 2, 2> = m.submatrix::<1, 1, 2, 2>();
    /// assert_eq!(block.as_slice(), &[4, 5, 7, 8]);
    /// ```
    #[must_use]
    pub fn submatrix<const ROW: usize, const COL: usize, const H2: usize, const W2: usize>(
        &self,
    ) -> Matrix<T, H2, W2> {
        const {
            if ROW + H2 > H {
                block_rule("rows", (ROW, H2), H)
            }
            if COL + W2 > W {
                block_rule("columns", (COL, W2), W)
            }
        }
        Matrix::from_fn(|r, c| self.as_array()[ROW + r][COL + c])
    }
}
