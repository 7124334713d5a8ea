//! The owning matrix type: storage, construction and access.
//!
//! Operations live in files by concern: `ops` (operators), `elementwise`, `products`,
//! `reduce`, `broadcast`, `structure` (transpose, reshape, concatenation, splitting), `fmt`.

mod broadcast;
mod elementwise;
mod fmt;
mod ops;
mod products;
mod reduce;
mod structure;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::{Deref, DerefMut, Index, IndexMut};

use crate::format::Message;
use crate::{LengthError, Scalar};

/// An `H x W` matrix (H rows, W columns) of `T`, stored row-major on the heap.
///
/// The shape lives only in the type; the data is one heap buffer of `H * W` elements in the
/// classic flat layout (`index = row * W + col`). Every constructor builds that buffer in place, so
/// no full-size value passes through the stack: a 4096x4096 matrix is fine on a 1 MiB thread in
/// a debug build.
///
/// # Shape rules
///
/// Operations state their shape rule in their signature, and the compiler enforces it:
///
/// ```
/// use constmat::Matrix;
///
/// let x = Matrix::<f64, 4, 3>::filled(1.0);
/// let w = Matrix::<f64, 3, 2>::from_fn(|r, c| (r + c) as f64);
/// let y: Matrix<f64, 4, 2> = &x * &w;                  // (4x3)(3x2) -> 4x2
/// let g: Matrix<f64, 3, 2> = x.matmul_transpose_lhs(&y); // (4x3)ᵀ(4x2) -> 3x2
/// assert_eq!(y[(0, 1)], 6.0);
/// assert_eq!(g[(2, 0)], 12.0);
/// ```
///
/// # Borrowed views
///
/// [`as_array`](Self::as_array) and [`as_array_mut`](Self::as_array_mut) lend the data as
/// `&[[T; W]; H]`, the form the [`kernels`](crate::kernels) take; [`as_slice`](Self::as_slice)
/// lends it flat.
#[derive(PartialEq, Eq, Hash)]
pub struct Matrix<T, const H: usize, const W: usize> {
    data: Box<[[T; W]; H]>,
}

impl<T, const H: usize, const W: usize> Matrix<T, H, W> {
    /// The number of rows, `H`.
    pub const ROWS: usize = H;
    /// The number of columns, `W`.
    pub const COLS: usize = W;
    /// The number of elements, `H * W`.
    pub const LEN: usize = H * W;

    /// Turns `H` heap-allocated rows into a matrix. The only place storage is made.
    fn from_row_vec(rows: Vec<[T; W]>) -> Self {
        debug_assert_eq!(rows.len(), H);
        match rows.into_boxed_slice().try_into() {
            Ok(data) => Self { data },
            Err(_) => unreachable!("every constructor builds exactly H rows"),
        }
    }

    /// The matrix as a borrowed `H x W` row-major array: the view the kernels take.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// let view: &[[i32; 2]; 2] = m.as_array();
    /// assert_eq!(view[1][0], 3);
    /// ```
    #[inline]
    #[must_use]
    pub fn as_array(&self) -> &[[T; W]; H] {
        &self.data
    }

    /// The matrix as a mutable `H x W` row-major array.
    ///
    /// ```
    /// let mut m = constmat::Matrix::<i32, 2, 2>::zeros();
    /// m.as_array_mut()[0][1] = 7;
    /// assert_eq!(m[(0, 1)], 7);
    /// ```
    #[inline]
    #[must_use]
    pub fn as_array_mut(&mut self) -> &mut [[T; W]; H] {
        &mut self.data
    }

    /// The elements in row-major order (`index = row * W + col`).
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// assert_eq!(m.as_slice(), &[1, 2, 3, 4, 5, 6]);
    /// ```
    #[inline]
    #[must_use]
    pub fn as_slice(&self) -> &[T] {
        self.data.as_flattened()
    }

    /// The elements in row-major order, mutable.
    ///
    /// ```
    /// let mut m = constmat::Matrix::<i32, 2, 2>::zeros();
    /// m.as_mut_slice()[3] = 1;
    /// assert_eq!(m[(1, 1)], 1);
    /// ```
    #[inline]
    #[must_use]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.data.as_flattened_mut()
    }

    /// Gives up the matrix as its boxed array (no copy).
    ///
    /// ```
    /// let m = constmat::Matrix::<u8, 1, 2>::from_rows([[1, 2]]);
    /// let b: Box<[[u8; 2]; 1]> = m.into_boxed_array();
    /// assert_eq!(*b, [[1, 2]]);
    /// ```
    #[must_use]
    pub fn into_boxed_array(self) -> Box<[[T; W]; H]> {
        self.data
    }

    /// Wraps a boxed array (no copy).
    ///
    /// ```
    /// let b: Box<[[u8; 2]; 1]> = vec![[1, 2]].into_boxed_slice().try_into().unwrap();
    /// let m = constmat::Matrix::from_boxed_array(b);
    /// assert_eq!(m[(0, 1)], 2);
    /// ```
    #[must_use]
    pub fn from_boxed_array(data: Box<[[T; W]; H]>) -> Self {
        Self { data }
    }

    /// Row `r` as an array, or `None` when `r >= H`.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// assert_eq!(m.row(1), Some(&[3, 4]));
    /// assert_eq!(m.row(2), None);
    /// ```
    #[inline]
    #[must_use]
    pub fn row(&self, r: usize) -> Option<&[T; W]> {
        self.data.get(r)
    }

    /// Row `r` as a mutable array, or `None` when `r >= H`.
    ///
    /// ```
    /// let mut m = constmat::Matrix::<i32, 2, 2>::zeros();
    /// *m.row_mut(0).unwrap() = [5, 6];
    /// assert_eq!(m.as_slice(), &[5, 6, 0, 0]);
    /// ```
    #[inline]
    #[must_use]
    pub fn row_mut(&mut self, r: usize) -> Option<&mut [T; W]> {
        self.data.get_mut(r)
    }

    /// An iterator over the rows, top to bottom.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// let row_sums: Vec<i32> = m.rows().map(|row| row.iter().sum()).collect();
    /// assert_eq!(row_sums, [3, 7]);
    /// ```
    #[inline]
    pub fn rows(&self) -> core::slice::Iter<'_, [T; W]> {
        self.data.iter()
    }

    /// An iterator over the mutable rows, top to bottom.
    ///
    /// ```
    /// let mut m = constmat::Matrix::<i32, 2, 2>::zeros();
    /// for (r, row) in m.rows_mut().enumerate() {
    ///     row[0] = r as i32;
    /// }
    /// assert_eq!(m.as_slice(), &[0, 0, 1, 0]);
    /// ```
    #[inline]
    pub fn rows_mut(&mut self) -> core::slice::IterMut<'_, [T; W]> {
        self.data.iter_mut()
    }

    /// An iterator over column `c`, top to bottom, or `None` when `c >= W`.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 3, 2>::from_rows([[1, 2], [3, 4], [5, 6]]);
    /// let col: Vec<i32> = m.column(1).unwrap().copied().collect();
    /// assert_eq!(col, [2, 4, 6]);
    /// assert!(m.column(2).is_none());
    /// ```
    #[must_use]
    pub fn column(&self, c: usize) -> Option<impl ExactSizeIterator<Item = &T> + '_> {
        (c < W).then(|| self.data.iter().map(move |row| &row[c]))
    }

    /// An iterator over all elements in row-major order.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// assert_eq!(m.iter().max(), Some(&4));
    /// ```
    #[inline]
    pub fn iter(&self) -> core::slice::Iter<'_, T> {
        self.as_slice().iter()
    }

    /// An iterator over all elements in row-major order, mutable.
    ///
    /// ```
    /// let mut m = constmat::Matrix::<i32, 2, 2>::zeros();
    /// m.iter_mut().enumerate().for_each(|(i, x)| *x = i as i32);
    /// assert_eq!(m.as_slice(), &[0, 1, 2, 3]);
    /// ```
    #[inline]
    pub fn iter_mut(&mut self) -> core::slice::IterMut<'_, T> {
        self.as_mut_slice().iter_mut()
    }

    /// The element at row `r`, column `c`, or `None` when out of bounds.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// assert_eq!(m.get(1, 2), Some(&6));
    /// assert_eq!(m.get(2, 0), None);
    /// assert_eq!(m.get(0, 3), None);
    /// ```
    #[inline]
    #[must_use]
    pub fn get(&self, r: usize, c: usize) -> Option<&T> {
        self.data.get(r).and_then(|row| row.get(c))
    }

    /// The element at row `r`, column `c`, mutable, or `None` when out of bounds.
    ///
    /// ```
    /// let mut m = constmat::Matrix::<i32, 2, 2>::zeros();
    /// *m.get_mut(1, 0).unwrap() = 9;
    /// assert_eq!(m[(1, 0)], 9);
    /// assert!(m.get_mut(0, 2).is_none());
    /// ```
    #[inline]
    #[must_use]
    pub fn get_mut(&mut self, r: usize, c: usize) -> Option<&mut T> {
        self.data.get_mut(r).and_then(|row| row.get_mut(c))
    }
}

impl<T: Copy, const H: usize, const W: usize> Matrix<T, H, W> {
    /// A matrix with every element set to `value`.
    ///
    /// ```
    /// let m = constmat::Matrix::<f32, 2, 3>::filled(0.5);
    /// assert!(m.iter().all(|&x| x == 0.5));
    /// ```
    #[must_use]
    pub fn filled(value: T) -> Self {
        Self::from_row_vec(alloc::vec![[value; W]; H])
    }

    /// A matrix whose element at `(row, col)` is `f(row, col)`, called in row-major order.
    ///
    /// ```
    /// let m = constmat::Matrix::<usize, 2, 3>::from_fn(|r, c| 10 * r + c);
    /// assert_eq!(m.as_slice(), &[0, 1, 2, 10, 11, 12]);
    /// ```
    #[must_use]
    pub fn from_fn(mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut rows = Vec::with_capacity(H);
        for r in 0..H {
            rows.push(core::array::from_fn(|c| f(r, c)));
        }
        Self::from_row_vec(rows)
    }

    /// A matrix from its rows. Meant for small literals: the argument itself is a stack value.
    ///
    /// ```
    /// let m = constmat::Matrix::from_rows([[1, 2, 3], [4, 5, 6]]);
    /// assert_eq!(m[(1, 0)], 4);
    /// ```
    #[must_use]
    pub fn from_rows(rows: [[T; W]; H]) -> Self {
        Self::from_row_vec(rows.to_vec())
    }

    /// A matrix from `H * W` elements in row-major order, their number checked when the program
    /// runs. For a literal, whose length is known when it is built, use
    /// [`from_flat`](Self::from_flat) (or [`from_rows`](Self::from_rows)): a wrong length is
    /// then a build error.
    ///
    /// # Errors
    ///
    /// [`LengthError`] when `data.len() != H * W`; nothing panics.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<i32, 2, 2>::from_slice(&[1, 2, 3, 4])?;
    /// assert_eq!(m[(1, 0)], 3);
    /// assert!(Matrix::<i32, 2, 2>::from_slice(&[1, 2, 3]).is_err());
    /// # Ok::<(), constmat::LengthError>(())
    /// ```
    pub fn from_slice(data: &[T]) -> Result<Self, LengthError> {
        if data.len() != H * W {
            return Err(LengthError {
                rows: H,
                cols: W,
                found: data.len(),
            });
        }
        Ok(Self::from_fn(|r, c| data[r * W + c]))
    }

    /// A matrix from an array of `H * W` elements in row-major order, its length checked when
    /// the program is built.
    ///
    /// The length of an array is part of its type, so a wrong one is a build error rather than
    /// the run-time [`LengthError`] of [`from_slice`](Self::from_slice). Like the other rules
    /// that are equations between dimensions, it is reported by `cargo build`, not `cargo check`
    /// (`docs/shape-errors.md`).
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<f32, 2, 3>::from_flat([1., 2., 3., 4., 5., 6.]);
    /// assert_eq!(m[(1, 0)], 4.0);
    /// ```
    ///
    /// ```compile_fail,E0080
    /// # use constmat::Matrix;
    /// let m = Matrix::<f32, 2, 3>::from_flat([1., 2., 3., 4., 5.]); // 5 elements for 2x3
    /// ```
    pub fn from_flat<const N: usize>(data: [T; N]) -> Self {
        const {
            if N != H * W {
                Message::new()
                    .str("from_flat: an array of ")
                    .number(N)
                    .str(" values for a ")
                    .number(H)
                    .str(" x ")
                    .number(W)
                    .str(" matrix, which has ")
                    .number(H * W)
                    .str(" elements")
                    .panic()
            }
        }
        Self::from_fn(|r, c| data[r * W + c])
    }

    /// A matrix from a `Vec` of `H * W` elements in row-major order.
    ///
    /// # Errors
    ///
    /// [`LengthError`] when `data.len() != H * W`.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let m = Matrix::<f64, 1, 3>::from_vec(vec![1.0, 2.0, 3.0])?;
    /// assert_eq!(m.as_slice(), &[1.0, 2.0, 3.0]);
    /// let err = Matrix::<f64, 2, 2>::from_vec(vec![0.0; 5]).unwrap_err();
    /// assert_eq!(err.to_string(), "expected 4 elements for a 2x2 matrix, found 5");
    /// # Ok::<(), constmat::LengthError>(())
    /// ```
    pub fn from_vec(data: Vec<T>) -> Result<Self, LengthError> {
        Self::from_slice(&data)
    }

    /// Overwrites every element with `value`.
    ///
    /// ```
    /// let mut m = constmat::Matrix::<i32, 2, 2>::zeros();
    /// m.fill(3);
    /// assert_eq!(m.as_slice(), &[3; 4]);
    /// ```
    pub fn fill(&mut self, value: T) {
        self.as_mut_slice().fill(value);
    }

    /// Copies every element of `source` into `self` (no allocation).
    ///
    /// ```
    /// let src = constmat::Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    /// let mut dst = constmat::Matrix::<i32, 1, 2>::zeros();
    /// dst.copy_from(&src);
    /// assert_eq!(dst, src);
    /// ```
    pub fn copy_from(&mut self, source: &Self) {
        self.as_mut_slice().copy_from_slice(source.as_slice());
    }
}

impl<T: Scalar, const H: usize, const W: usize> Matrix<T, H, W> {
    /// A matrix of zeros.
    ///
    /// ```
    /// let m = constmat::Matrix::<f32, 784, 128>::zeros(); // 392 KiB, on the heap
    /// assert_eq!(m.iter().sum::<f32>(), 0.0);
    /// ```
    #[must_use]
    pub fn zeros() -> Self {
        Self::filled(T::zero())
    }

    /// A matrix of ones.
    ///
    /// ```
    /// let m = constmat::Matrix::<i64, 3, 2>::ones();
    /// assert_eq!(m.iter().sum::<i64>(), 6);
    /// ```
    #[must_use]
    pub fn ones() -> Self {
        Self::filled(T::one())
    }

    /// A matrix whose elements are drawn from `distribution` with the caller's `rng`, row-major.
    ///
    /// ```
    /// use constmat::Matrix;
    /// use rand::{SeedableRng, distr::Uniform, rngs::StdRng};
    ///
    /// let mut rng = StdRng::seed_from_u64(7);
    /// let m = Matrix::<f32, 3, 4>::random(&Uniform::new(-1.0, 1.0).unwrap(), &mut rng);
    /// assert!(m.iter().all(|x| (-1.0..1.0).contains(x)));
    /// ```
    #[cfg(feature = "rand")]
    #[must_use]
    pub fn random<D, R>(distribution: &D, rng: &mut R) -> Self
    where
        D: rand::distr::Distribution<T> + ?Sized,
        R: rand::Rng + ?Sized,
    {
        Self::from_fn(|_, _| distribution.sample(rng))
    }
}

impl<T: Scalar, const N: usize> Matrix<T, N, N> {
    /// The `N x N` identity matrix. Only square matrix types have one.
    ///
    /// ```
    /// use constmat::Matrix;
    ///
    /// let a = Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// assert_eq!(&a * &Matrix::identity(), a);
    /// ```
    #[must_use]
    pub fn identity() -> Self {
        Self::from_fn(|r, c| if r == c { T::one() } else { T::zero() })
    }
}

impl<T: Clone, const H: usize, const W: usize> Clone for Matrix<T, H, W> {
    /// Clones row by row into a new heap buffer (`Box::clone` of a large array would build the
    /// copy on the stack first).
    fn clone(&self) -> Self {
        Self::from_row_vec(self.data.to_vec())
    }

    fn clone_from(&mut self, source: &Self) {
        self.data.clone_from_slice(&source.data[..]);
    }
}

impl<T: Scalar, const H: usize, const W: usize> Default for Matrix<T, H, W> {
    /// A matrix of zeros.
    fn default() -> Self {
        Self::zeros()
    }
}

impl<T, const H: usize, const W: usize> Index<(usize, usize)> for Matrix<T, H, W> {
    type Output = T;

    /// The element at `(row, col)`.
    ///
    /// # Panics
    ///
    /// When `row >= H` or `col >= W`, like slice indexing. Use [`Matrix::get`] to get an
    /// `Option` instead.
    #[inline]
    #[track_caller]
    fn index(&self, (r, c): (usize, usize)) -> &T {
        match self.get(r, c) {
            Some(x) => x,
            None => out_of_bounds(r, c, H, W),
        }
    }
}

impl<T, const H: usize, const W: usize> IndexMut<(usize, usize)> for Matrix<T, H, W> {
    /// # Panics
    ///
    /// When `row >= H` or `col >= W`.
    #[inline]
    #[track_caller]
    fn index_mut(&mut self, (r, c): (usize, usize)) -> &mut T {
        match self.data.get_mut(r).and_then(|row| row.get_mut(c)) {
            Some(x) => x,
            None => out_of_bounds(r, c, H, W),
        }
    }
}

/// Row `r`, as an array: `m[r]` is the `r`-th sample of a batch, `m[r][c]` an element (as
/// `m[(r, c)]`).
///
/// ```
/// use constmat::Matrix;
///
/// let x = Matrix::<f32, 2, 3>::from_rows([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// let sample: &[f32; 3] = &x[1];
/// assert_eq!(sample, &[4.0, 5.0, 6.0]);
/// assert_eq!(x[1][2], x[(1, 2)]);
/// ```
///
/// # Panics
///
/// When `r >= H`, like slice indexing. Use [`Matrix::row`] to get an `Option` instead.
impl<T, const H: usize, const W: usize> Index<usize> for Matrix<T, H, W> {
    type Output = [T; W];

    #[inline]
    #[track_caller]
    fn index(&self, r: usize) -> &[T; W] {
        match self.data.get(r) {
            Some(row) => row,
            None => row_out_of_bounds(r, H, W),
        }
    }
}

impl<T, const H: usize, const W: usize> IndexMut<usize> for Matrix<T, H, W> {
    /// # Panics
    ///
    /// When `r >= H`.
    #[inline]
    #[track_caller]
    fn index_mut(&mut self, r: usize) -> &mut [T; W] {
        match self.data.get_mut(r) {
            Some(row) => row,
            None => row_out_of_bounds(r, H, W),
        }
    }
}

#[cold]
#[track_caller]
fn row_out_of_bounds(r: usize, h: usize, w: usize) -> ! {
    panic!("row {r} out of bounds for a {h}x{w} matrix")
}

#[cold]
#[track_caller]
fn out_of_bounds(r: usize, c: usize, h: usize, w: usize) -> ! {
    panic!("index ({r}, {c}) out of bounds for a {h}x{w} matrix")
}

impl<'a, T, const H: usize, const W: usize> IntoIterator for &'a Matrix<T, H, W> {
    type Item = &'a T;
    type IntoIter = core::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A matrix is its `H x W` array of rows: `&Matrix<T, H, W>` coerces to `&[[T; W]; H]`, the
/// form the [`kernels`](crate::kernels) and the [`nn`](crate::nn) layers take, and `m[r]` is row
/// `r`. The matrix's own methods come first: `m.as_slice()` is the flat slice of elements.
///
/// ```
/// use constmat::Matrix;
///
/// let m = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
/// let rows: &[[i32; 3]; 2] = &m;
/// assert_eq!(rows[1], [4, 5, 6]);
/// assert_eq!(m[(0, 2)], 3);
/// assert_eq!(m.as_flattened(), m.as_slice());
/// ```
impl<T, const H: usize, const W: usize> Deref for Matrix<T, H, W> {
    type Target = [[T; W]; H];

    #[inline]
    fn deref(&self) -> &[[T; W]; H] {
        self.as_array()
    }
}

impl<T, const H: usize, const W: usize> DerefMut for Matrix<T, H, W> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [[T; W]; H] {
        self.as_array_mut()
    }
}

impl<T, const H: usize, const W: usize> AsRef<[[T; W]; H]> for Matrix<T, H, W> {
    fn as_ref(&self) -> &[[T; W]; H] {
        self.as_array()
    }
}

impl<T, const H: usize, const W: usize> AsMut<[[T; W]; H]> for Matrix<T, H, W> {
    fn as_mut(&mut self) -> &mut [[T; W]; H] {
        self.as_array_mut()
    }
}
