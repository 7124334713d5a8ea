//! Element-wise operations: sums into an output, the Hadamard product, scaling, `map`, `zip_map`.

use super::Matrix;
use crate::Scalar;

impl<T: Scalar, const H: usize, const W: usize> Matrix<T, H, W> {
    /// `out = self + rhs` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let mut out = Matrix::zeros();
    /// a.add_into(&a, &mut out);
    /// assert_eq!(out.as_slice(), &[2, 4]);
    /// ```
    pub fn add_into(&self, rhs: &Self, out: &mut Self) {
        self.zip_map_into(rhs, out, |x, y| x + y);
    }

    /// `out = self - rhs` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let mut out = Matrix::filled(9);
    /// a.sub_into(&a, &mut out);
    /// assert_eq!(out, Matrix::zeros());
    /// ```
    pub fn sub_into(&self, rhs: &Self, out: &mut Self) {
        self.zip_map_into(rhs, out, |x, y| x - y);
    }

    /// The element-wise (Hadamard) product `self ⊙ rhs`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 3>::from_rows([[1, 2, 3]]);
    /// let b = Matrix::<i32, 1, 3>::from_rows([[4, 5, 6]]);
    /// assert_eq!(a.hadamard(&b).as_slice(), &[4, 10, 18]);
    /// ```
    #[must_use]
    pub fn hadamard(&self, rhs: &Self) -> Self {
        self.zip_map(rhs, |x, y| x * y)
    }

    /// `out = self ⊙ rhs` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[2, 3]]);
    /// let mut out = Matrix::zeros();
    /// a.hadamard_into(&a, &mut out);
    /// assert_eq!(out.as_slice(), &[4, 9]);
    /// ```
    pub fn hadamard_into(&self, rhs: &Self, out: &mut Self) {
        self.zip_map_into(rhs, out, |x, y| x * y);
    }

    /// `self = self ⊙ rhs`, in place.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let mut a = Matrix::<i32, 1, 2>::from_rows([[2, 3]]);
    /// a.hadamard_assign(&Matrix::from_rows([[10, 0]]));
    /// assert_eq!(a.as_slice(), &[20, 0]);
    /// ```
    pub fn hadamard_assign(&mut self, rhs: &Self) {
        for (x, &y) in self.iter_mut().zip(rhs.iter()) {
            *x *= y;
        }
    }

    /// Every element multiplied by `factor`.
    ///
    /// ```
    /// let a = constmat::Matrix::<f32, 1, 2>::from_rows([[1.0, -2.0]]);
    /// assert_eq!(a.scale(0.5).as_slice(), &[0.5, -1.0]);
    /// ```
    #[must_use]
    pub fn scale(&self, factor: T) -> Self {
        self.map(|x| x * factor)
    }

    /// `out = factor · self` with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let mut out = Matrix::zeros();
    /// a.scale_into(3, &mut out);
    /// assert_eq!(out.as_slice(), &[3, 6]);
    /// ```
    pub fn scale_into(&self, factor: T, out: &mut Self) {
        self.map_into(out, |x| x * factor);
    }

    /// `self = factor · self`, in place.
    ///
    /// ```
    /// let mut a = constmat::Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// a.scale_assign(-1);
    /// assert_eq!(a.as_slice(), &[-1, -2]);
    /// ```
    pub fn scale_assign(&mut self, factor: T) {
        self.map_in_place(|x| x * factor);
    }

    /// `self += alpha · x`, in place (BLAS's `axpy`): the shape of a gradient-descent update.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let mut w = Matrix::<f64, 1, 2>::from_rows([[1.0, 1.0]]);
    /// let grad = Matrix::<f64, 1, 2>::from_rows([[2.0, -4.0]]);
    /// w.add_scaled(-0.5, &grad);
    /// assert_eq!(w.as_slice(), &[0.0, 3.0]);
    /// ```
    pub fn add_scaled(&mut self, alpha: T, x: &Self) {
        for (s, &v) in self.iter_mut().zip(x.iter()) {
            *s += alpha * v;
        }
    }

    /// A new matrix with `f` applied to every element.
    ///
    /// The result may have another element type:
    ///
    /// ```
    /// let a = constmat::Matrix::<i32, 1, 3>::from_rows([[1, -2, 3]]);
    /// let positive = a.map(|x| if x > 0 { 1.0 } else { 0.0 });
    /// assert_eq!(positive.as_slice(), &[1.0_f32, 0.0, 1.0]);
    /// ```
    #[must_use]
    pub fn map<U: Copy>(&self, mut f: impl FnMut(T) -> U) -> Matrix<U, H, W> {
        Matrix::from_fn(|r, c| f(self.as_array()[r][c]))
    }

    /// `out[i] = f(self[i])` for every element, with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<f32, 1, 2>::from_rows([[-1.0, 2.0]]);
    /// let mut out = Matrix::zeros();
    /// a.map_into(&mut out, |x| x.max(0.0));
    /// assert_eq!(out.as_slice(), &[0.0, 2.0]);
    /// ```
    pub fn map_into<U: Copy>(&self, out: &mut Matrix<U, H, W>, mut f: impl FnMut(T) -> U) {
        for (o, &x) in out.iter_mut().zip(self.iter()) {
            *o = f(x);
        }
    }

    /// Applies `f` to every element in place.
    ///
    /// ```
    /// let mut a = constmat::Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// a.map_in_place(|x| x * x);
    /// assert_eq!(a.as_slice(), &[1, 4]);
    /// ```
    pub fn map_in_place(&mut self, mut f: impl FnMut(T) -> T) {
        for x in self.iter_mut() {
            *x = f(*x);
        }
    }

    /// A new matrix with `f` applied to each pair of elements at the same position.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 5]]);
    /// let b = Matrix::<i32, 1, 2>::from_rows([[4, 2]]);
    /// assert_eq!(a.zip_map(&b, i32::max).as_slice(), &[4, 5]);
    /// ```
    #[must_use]
    pub fn zip_map<U: Scalar, V: Copy>(
        &self,
        rhs: &Matrix<U, H, W>,
        mut f: impl FnMut(T, U) -> V,
    ) -> Matrix<V, H, W> {
        Matrix::from_fn(|r, c| f(self.as_array()[r][c], rhs.as_array()[r][c]))
    }

    /// `out[i] = f(self[i], rhs[i])` for every element, with no allocation.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 1, 2>::from_rows([[1, 5]]);
    /// let mut out = Matrix::zeros();
    /// a.zip_map_into(&a, &mut out, |x, y| x * 10 + y);
    /// assert_eq!(out.as_slice(), &[11, 55]);
    /// ```
    pub fn zip_map_into<U: Scalar, V: Copy>(
        &self,
        rhs: &Matrix<U, H, W>,
        out: &mut Matrix<V, H, W>,
        mut f: impl FnMut(T, U) -> V,
    ) {
        for ((o, &x), &y) in out.iter_mut().zip(self.iter()).zip(rhs.iter()) {
            *o = f(x, y);
        }
    }
}
