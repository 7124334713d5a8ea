//! Operators: `*` is the matrix product; `+`, `-`, unary `-`, `+=`, `-=` are element-wise on equal
//! shapes.
//!
//! Each left-hand type has exactly one impl of each operator trait. With a single candidate, a
//! shape mismatch is reported as `E0308 mismatched types: expected 3, found 4`, naming the
//! dimensions; a second impl (say `Matrix * T` for scaling) would turn it into an `E0277` listing
//! every impl. So scaling is the method [`Matrix::scale`], and the owned and borrowed forms pair
//! up: `Matrix op Matrix`, `&Matrix op &Matrix`, `Matrix op= &Matrix`.

use core::ops::{Add, AddAssign, Mul, Neg, Sub, SubAssign};

use super::Matrix;
use crate::Scalar;

impl<T: Scalar, const H: usize, const K: usize, const W: usize> Mul<&Matrix<T, K, W>>
    for &Matrix<T, H, K>
{
    type Output = Matrix<T, H, W>;

    /// The matrix product: `(H x K) * (K x W) -> H x W`.
    ///
    /// With integer elements an overflow panics in a debug build and wraps in a release build;
    /// [`Matrix::checked_matmul`] returns `None` instead.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// let b = Matrix::<i32, 3, 1>::from_rows([[1], [1], [1]]);
    /// assert_eq!((&a * &b).as_slice(), &[6, 15]);
    /// ```
    fn mul(self, rhs: &Matrix<T, K, W>) -> Matrix<T, H, W> {
        self.matmul(rhs)
    }
}

impl<T: Scalar, const H: usize, const K: usize, const W: usize> Mul<Matrix<T, K, W>>
    for Matrix<T, H, K>
{
    type Output = Matrix<T, H, W>;

    /// The matrix product of owned operands: `(H x K) * (K x W) -> H x W`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// assert_eq!((a.clone() * Matrix::identity()), a);
    /// ```
    fn mul(self, rhs: Matrix<T, K, W>) -> Matrix<T, H, W> {
        self.matmul(&rhs)
    }
}

/// Element-wise binary operators, owned (reusing the left buffer) and borrowed (allocating).
macro_rules! elementwise_operator {
    ($Op:ident, $op:ident, $OpAssign:ident, $op_assign:ident, $into:ident, $sym:tt, $doc:literal) => {
        impl<T: Scalar, const H: usize, const W: usize> $Op for Matrix<T, H, W> {
            type Output = Self;

            #[doc = $doc]
            /// Reuses the left operand's buffer.
            fn $op(mut self, rhs: Self) -> Self {
                self $sym &rhs;
                self
            }
        }

        impl<T: Scalar, const H: usize, const W: usize> $Op<&Matrix<T, H, W>> for &Matrix<T, H, W> {
            type Output = Matrix<T, H, W>;

            #[doc = $doc]
            fn $op(self, rhs: &Matrix<T, H, W>) -> Matrix<T, H, W> {
                let mut out = Matrix::zeros();
                self.$into(rhs, &mut out);
                out
            }
        }

        impl<T: Scalar, const H: usize, const W: usize> $OpAssign<&Matrix<T, H, W>>
            for Matrix<T, H, W>
        {
            #[doc = $doc]
            /// In place, no allocation.
            fn $op_assign(&mut self, rhs: &Matrix<T, H, W>) {
                for (x, &y) in self.iter_mut().zip(rhs.iter()) {
                    x.$op_assign(y);
                }
            }
        }
    };
}

elementwise_operator!(
    Add,
    add,
    AddAssign,
    add_assign,
    add_into,
    +=,
    "Element-wise sum of two matrices of the same shape.\n\n```\nlet a = constmat::Matrix::<i32, 1, 2>::from_rows([[1, 2]]);\nlet mut b = &a + &a;\nb += &a;\nassert_eq!(b.as_slice(), &[3, 6]);\nassert_eq!((a.clone() + a).as_slice(), &[2, 4]);\n```\n"
);
elementwise_operator!(
    Sub,
    sub,
    SubAssign,
    sub_assign,
    sub_into,
    -=,
    "Element-wise difference of two matrices of the same shape.\n\n```\nlet a = constmat::Matrix::<i32, 1, 2>::from_rows([[5, 7]]);\nlet b = constmat::Matrix::<i32, 1, 2>::from_rows([[1, 2]]);\nlet mut c = &a - &b;\nc -= &b;\nassert_eq!(c.as_slice(), &[3, 3]);\nassert_eq!((a - b).as_slice(), &[4, 5]);\n```\n"
);

impl<T: Scalar + Neg<Output = T>, const H: usize, const W: usize> Neg for Matrix<T, H, W> {
    type Output = Self;

    /// Negates every element, reusing the buffer.
    ///
    /// ```
    /// let a = constmat::Matrix::<i32, 1, 2>::from_rows([[1, -2]]);
    /// assert_eq!((-a).as_slice(), &[-1, 2]);
    /// ```
    fn neg(mut self) -> Self {
        self.map_in_place(|x| -x);
        self
    }
}

impl<T: Scalar + Neg<Output = T>, const H: usize, const W: usize> Neg for &Matrix<T, H, W> {
    type Output = Matrix<T, H, W>;

    /// Negates every element into a new matrix.
    ///
    /// ```
    /// let a = constmat::Matrix::<f32, 1, 2>::from_rows([[1.0, -2.0]]);
    /// assert_eq!((-&a).as_slice(), &[-1.0, 2.0]);
    /// ```
    fn neg(self) -> Matrix<T, H, W> {
        self.map(|x| -x)
    }
}
