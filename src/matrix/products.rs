//! Matrix products: plain, `Aᵀ·B` and `A·Bᵀ`, each allocating, writing into a caller-owned output,
//! or accumulating into one. The arithmetic is in [`crate::kernels`].
//!
//! With integer elements, the products follow Rust's rule for integer arithmetic: an overflow
//! panics in a debug build and wraps around in a release build (a wrong answer, silently).
//! [`Matrix::checked_matmul`] returns `None` instead, in every build.

use super::Matrix;
use crate::{Scalar, kernels};

impl<T: Scalar, const H: usize, const K: usize> Matrix<T, H, K> {
    /// The matrix product `self · rhs`: `(H x K) · (K x W) -> H x W`. Same as `&self * &rhs`.
    ///
    /// With integer elements an overflow panics in a debug build and wraps in a release build
    /// (see [`checked_matmul`](Self::checked_matmul)).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let b = Matrix::<i32, 2, 3>::from_rows([[1, 0, 1], [0, 1, 1]]);
    /// assert_eq!(a.matmul(&b).as_slice(), &[1, 2, 3]);
    /// ```
    #[must_use]
    pub fn matmul<const W: usize>(&self, rhs: &Matrix<T, K, W>) -> Matrix<T, H, W> {
        let mut out = Matrix::zeros();
        kernels::matmul_accumulate_into(self.as_array(), rhs.as_array(), out.as_array_mut());
        out
    }

    /// `out = self · rhs` with no allocation: `(H x K) · (K x W)` into an `H x W` output.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// let mut out = Matrix::<i32, 2, 2>::filled(99);
    /// a.matmul_into(&Matrix::identity(), &mut out);
    /// assert_eq!(out, a);
    /// ```
    pub fn matmul_into<const W: usize>(&self, rhs: &Matrix<T, K, W>, out: &mut Matrix<T, H, W>) {
        kernels::matmul_into(self.as_array(), rhs.as_array(), out.as_array_mut());
    }

    /// `out += self · rhs` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// let mut out = Matrix::<i32, 2, 2>::ones();
    /// a.matmul_accumulate_into(&Matrix::identity(), &mut out);
    /// assert_eq!(out.as_slice(), &[2, 3, 4, 5]);
    /// ```
    pub fn matmul_accumulate_into<const W: usize>(
        &self,
        rhs: &Matrix<T, K, W>,
        out: &mut Matrix<T, H, W>,
    ) {
        kernels::matmul_accumulate_into(self.as_array(), rhs.as_array(), out.as_array_mut());
    }

    /// `self · rhsᵀ` without building the transpose: `(H x K) · (W x K)ᵀ -> H x W`.
    ///
    /// A dense layer's forward pass with weights stored `out x in`: `Z = X · Wᵀ`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let x = Matrix::<i32, 1, 3>::from_rows([[1, 2, 3]]);
    /// let w = Matrix::<i32, 2, 3>::from_rows([[1, 0, 0], [1, 1, 1]]);
    /// assert_eq!(x.matmul_transpose_rhs(&w), x.matmul(&w.transpose()));
    /// ```
    #[must_use]
    pub fn matmul_transpose_rhs<const W: usize>(&self, rhs: &Matrix<T, W, K>) -> Matrix<T, H, W> {
        let mut out = Matrix::zeros();
        self.matmul_transpose_rhs_into(rhs, &mut out);
        out
    }

    /// `out = self · rhsᵀ` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let mut out = Matrix::<i32, 1, 1>::zeros();
    /// a.matmul_transpose_rhs_into(&a, &mut out);
    /// assert_eq!(out[(0, 0)], 5);
    /// ```
    pub fn matmul_transpose_rhs_into<const W: usize>(
        &self,
        rhs: &Matrix<T, W, K>,
        out: &mut Matrix<T, H, W>,
    ) {
        kernels::matmul_transpose_rhs_into(self.as_array(), rhs.as_array(), out.as_array_mut());
    }

    /// `out += self · rhsᵀ` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let mut out = Matrix::<i32, 1, 1>::filled(10);
    /// a.matmul_transpose_rhs_accumulate_into(&a, &mut out);
    /// assert_eq!(out[(0, 0)], 15);
    /// ```
    pub fn matmul_transpose_rhs_accumulate_into<const W: usize>(
        &self,
        rhs: &Matrix<T, W, K>,
        out: &mut Matrix<T, H, W>,
    ) {
        kernels::matmul_transpose_rhs_accumulate_into(
            self.as_array(),
            rhs.as_array(),
            out.as_array_mut(),
        );
    }
}

impl<T: Scalar, const K: usize, const H: usize> Matrix<T, K, H> {
    /// `selfᵀ · rhs` without building the transpose: `(K x H)ᵀ · (K x W) -> H x W`.
    ///
    /// The shape of a weight gradient when a batch is stored one sample per row: `dW = dZᵀ · X`.
    /// (nalgebra calls this `tr_mul`.)
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let dz = Matrix::<i32, 3, 2>::from_fn(|r, c| (r + c) as i32);
    /// let x = Matrix::<i32, 3, 4>::ones();
    /// let dw: Matrix<i32, 2, 4> = dz.matmul_transpose_lhs(&x);
    /// assert_eq!(dw, dz.transpose().matmul(&x));
    /// ```
    #[must_use]
    pub fn matmul_transpose_lhs<const W: usize>(&self, rhs: &Matrix<T, K, W>) -> Matrix<T, H, W> {
        let mut out = Matrix::zeros();
        self.matmul_transpose_lhs_accumulate_into(rhs, &mut out);
        out
    }

    /// `out = selfᵀ · rhs` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    /// let mut out = Matrix::<i32, 1, 1>::filled(7);
    /// a.matmul_transpose_lhs_into(&a, &mut out);
    /// assert_eq!(out[(0, 0)], 5);
    /// ```
    pub fn matmul_transpose_lhs_into<const W: usize>(
        &self,
        rhs: &Matrix<T, K, W>,
        out: &mut Matrix<T, H, W>,
    ) {
        kernels::matmul_transpose_lhs_into(self.as_array(), rhs.as_array(), out.as_array_mut());
    }

    /// `out += selfᵀ · rhs` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    /// let mut out = Matrix::<i32, 1, 1>::filled(7);
    /// a.matmul_transpose_lhs_accumulate_into(&a, &mut out);
    /// assert_eq!(out[(0, 0)], 12);
    /// ```
    pub fn matmul_transpose_lhs_accumulate_into<const W: usize>(
        &self,
        rhs: &Matrix<T, K, W>,
        out: &mut Matrix<T, H, W>,
    ) {
        kernels::matmul_transpose_lhs_accumulate_into(
            self.as_array(),
            rhs.as_array(),
            out.as_array_mut(),
        );
    }
}

impl<T, const H: usize, const K: usize> Matrix<T, H, K>
where
    T: Scalar + num_traits::CheckedAdd + num_traits::CheckedMul,
{
    /// The matrix product of integer matrices, or `None` if a product or a sum of the
    /// computation overflows `T`, in debug and release builds alike (where `*` panics or wraps).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i8, 1, 2>::from_rows([[100, 100]]);
    /// let ones = Matrix::<i8, 2, 1>::from_rows([[1], [1]]);
    /// assert_eq!(a.checked_matmul(&ones), None); // 100 + 100 does not fit an i8
    /// let halves = Matrix::<i8, 1, 2>::from_rows([[50, 50]]);
    /// assert_eq!(halves.checked_matmul(&ones).unwrap()[(0, 0)], 100);
    /// ```
    #[must_use]
    pub fn checked_matmul<const W: usize>(&self, rhs: &Matrix<T, K, W>) -> Option<Matrix<T, H, W>> {
        let mut out = Matrix::zeros();
        for (a_row, out_row) in self.as_array().iter().zip(out.as_array_mut().iter_mut()) {
            for (j, out_ij) in out_row.iter_mut().enumerate() {
                let mut sum = T::zero();
                for (&a, b_row) in a_row.iter().zip(rhs.as_array().iter()) {
                    sum = sum.checked_add(&a.checked_mul(&b_row[j])?)?;
                }
                *out_ij = sum;
            }
        }
        Some(out)
    }

    /// The sum of all elements, or `None` if it overflows `T` (see [`sum`](Self::sum)).
    ///
    /// ```
    /// let m = constmat::Matrix::<u8, 1, 3>::from_rows([[100, 100, 100]]);
    /// assert_eq!(m.checked_sum(), None);
    /// assert_eq!(constmat::Matrix::<u8, 1, 2>::from_rows([[100, 100]]).checked_sum(), Some(200));
    /// ```
    #[must_use]
    pub fn checked_sum(&self) -> Option<T> {
        self.iter().try_fold(T::zero(), |acc, x| acc.checked_add(x))
    }
}
