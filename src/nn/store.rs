//! Where a layer keeps its parameters: on the heap for training ([`Heap`]), inline for a net
//! baked into a `static` ([`Inline`]). One layer definition serves both.

use core::fmt::Debug;

use super::Sample;

/// The storage of a layer's parameters: a type parameter of every layer (`Dense<T, I, O, A, S>`),
/// [`Heap`] unless said otherwise.
///
/// A layer's code reads its parameters only through these functions, as arrays, so its forward
/// and backward passes are written once for every storage.
///
/// | storage | a matrix `H x W` | a vector of `N` | for |
/// | --- | --- | --- | --- |
/// | [`Heap`] | [`Matrix<E, H, W>`](crate::Matrix) | `Matrix<E, 1, N>` | training, nets loaded at run time |
/// | [`Inline`] | `[[E; W]; H]` | `[E; N]` | nets baked into a `static`, `no_std` without `alloc` |
///
/// ```
/// use constmat::nn::{Heap, Inline, Store};
///
/// let inline: [[f32; 2]; 1] = Inline::matrix_copied(&[[1.0, 2.0]]);
/// let heap = Heap::matrix_copied(&inline);
/// assert_eq!(Heap::matrix(&heap), &inline);
/// ```
pub trait Store: Copy + Debug + Default + Send + Sync + 'static {
    /// An `H x W` matrix of `E`.
    type Matrix<E: Sample, const H: usize, const W: usize>: Clone + Debug + PartialEq + Send + Sync;
    /// A vector of `N` `E`.
    type Vector<E: Sample, const N: usize>: Clone + Debug + PartialEq + Send + Sync;

    /// The matrix as a row-major array.
    fn matrix<E: Sample, const H: usize, const W: usize>(m: &Self::Matrix<E, H, W>)
    -> &[[E; W]; H];
    /// The matrix as a mutable row-major array.
    fn matrix_mut<E: Sample, const H: usize, const W: usize>(
        m: &mut Self::Matrix<E, H, W>,
    ) -> &mut [[E; W]; H];
    /// The vector as an array.
    fn vector<E: Sample, const N: usize>(v: &Self::Vector<E, N>) -> &[E; N];
    /// The vector as a mutable array.
    fn vector_mut<E: Sample, const N: usize>(v: &mut Self::Vector<E, N>) -> &mut [E; N];
    /// A matrix with every element `value`.
    fn matrix_filled<E: Sample, const H: usize, const W: usize>(value: E) -> Self::Matrix<E, H, W>;
    /// A vector with every element `value`.
    fn vector_filled<E: Sample, const N: usize>(value: E) -> Self::Vector<E, N>;
    /// A copy of `m`.
    fn matrix_copied<E: Sample, const H: usize, const W: usize>(
        m: &[[E; W]; H],
    ) -> Self::Matrix<E, H, W>;
    /// A copy of `v`.
    fn vector_copied<E: Sample, const N: usize>(v: &[E; N]) -> Self::Vector<E, N>;
}

/// Parameters in arrays inside the layer: what a `static` net is made of.
///
/// No heap is needed, and a `static` of an `Inline` net lives in read-only memory, used in
/// place. A value is as large as its parameters (437 KB for the MNIST net): keep large ones in
/// a `static` (see [`include_net!`](crate::include_net)) or a `Box`, not in local variables.
///
/// ```
/// use constmat::nn::{Dense, Inline, Layer, Relu};
///
/// static LAYER: Dense<f32, 3, 2, Relu, Inline> =
///     Dense::new([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0]], [0.5, 0.5]);
/// let mut out = [0.0; 2];
/// LAYER.forward_one(&[2.0, 3.0, 4.0], &mut out);
/// assert_eq!(out, [2.5, 0.0]); // relu(2 + 0.5), relu(-3 + 0.5)
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Inline;

impl Store for Inline {
    type Matrix<E: Sample, const H: usize, const W: usize> = [[E; W]; H];
    type Vector<E: Sample, const N: usize> = [E; N];

    #[inline]
    fn matrix<E: Sample, const H: usize, const W: usize>(m: &[[E; W]; H]) -> &[[E; W]; H] {
        m
    }

    #[inline]
    fn matrix_mut<E: Sample, const H: usize, const W: usize>(
        m: &mut [[E; W]; H],
    ) -> &mut [[E; W]; H] {
        m
    }

    #[inline]
    fn vector<E: Sample, const N: usize>(v: &[E; N]) -> &[E; N] {
        v
    }

    #[inline]
    fn vector_mut<E: Sample, const N: usize>(v: &mut [E; N]) -> &mut [E; N] {
        v
    }

    fn matrix_filled<E: Sample, const H: usize, const W: usize>(value: E) -> [[E; W]; H] {
        [[value; W]; H]
    }

    fn vector_filled<E: Sample, const N: usize>(value: E) -> [E; N] {
        [value; N]
    }

    fn matrix_copied<E: Sample, const H: usize, const W: usize>(m: &[[E; W]; H]) -> [[E; W]; H] {
        *m
    }

    fn vector_copied<E: Sample, const N: usize>(v: &[E; N]) -> [E; N] {
        *v
    }
}

/// Parameters in heap-allocated [`Matrix`](crate::Matrix) values: the storage of training,
/// and the default of every layer.
///
/// A weight is a `Matrix<T, O, I>` and a bias a `Matrix<T, 1, O>`, built in place on the heap,
/// so nets of any size train in debug builds on small thread stacks.
///
/// Without the `alloc` feature the type still exists, so that a net's type can be written the
/// same way in every build (`Baked<Net>` names its [`Inline`] form), but no value of a `Heap`
/// layer can be made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Heap;

#[cfg(feature = "alloc")]
impl Store for Heap {
    type Matrix<E: Sample, const H: usize, const W: usize> = crate::Matrix<E, H, W>;
    type Vector<E: Sample, const N: usize> = crate::Matrix<E, 1, N>;

    #[inline]
    fn matrix<E: Sample, const H: usize, const W: usize>(
        m: &crate::Matrix<E, H, W>,
    ) -> &[[E; W]; H] {
        m.as_array()
    }

    #[inline]
    fn matrix_mut<E: Sample, const H: usize, const W: usize>(
        m: &mut crate::Matrix<E, H, W>,
    ) -> &mut [[E; W]; H] {
        m.as_array_mut()
    }

    #[inline]
    fn vector<E: Sample, const N: usize>(v: &crate::Matrix<E, 1, N>) -> &[E; N] {
        &v.as_array()[0]
    }

    #[inline]
    fn vector_mut<E: Sample, const N: usize>(v: &mut crate::Matrix<E, 1, N>) -> &mut [E; N] {
        &mut v.as_array_mut()[0]
    }

    fn matrix_filled<E: Sample, const H: usize, const W: usize>(
        value: E,
    ) -> crate::Matrix<E, H, W> {
        crate::Matrix::filled(value)
    }

    fn vector_filled<E: Sample, const N: usize>(value: E) -> crate::Matrix<E, 1, N> {
        crate::Matrix::filled(value)
    }

    fn matrix_copied<E: Sample, const H: usize, const W: usize>(
        m: &[[E; W]; H],
    ) -> crate::Matrix<E, H, W> {
        crate::Matrix::from_fn(|r, c| m[r][c])
    }

    fn vector_copied<E: Sample, const N: usize>(v: &[E; N]) -> crate::Matrix<E, 1, N> {
        crate::Matrix::from_fn(|_, c| v[c])
    }
}

#[cfg(not(feature = "alloc"))]
mod no_heap {
    //! [`Heap`] without a heap: types that can be named but have no values.

    use core::marker::PhantomData;

    use super::{Heap, Sample, Store};

    /// No value: the build has no heap.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Unavailable {}

    /// A heap matrix in a build without a heap: it has no values.
    #[derive(Debug, Clone, PartialEq)]
    pub struct NoMatrix<E, const H: usize, const W: usize>(Unavailable, PhantomData<E>);

    /// A heap vector in a build without a heap: it has no values.
    #[derive(Debug, Clone, PartialEq)]
    pub struct NoVector<E, const N: usize>(Unavailable, PhantomData<E>);

    impl Store for Heap {
        type Matrix<E: Sample, const H: usize, const W: usize> = NoMatrix<E, H, W>;
        type Vector<E: Sample, const N: usize> = NoVector<E, N>;

        fn matrix<E: Sample, const H: usize, const W: usize>(
            m: &NoMatrix<E, H, W>,
        ) -> &[[E; W]; H] {
            match m.0 {}
        }

        fn matrix_mut<E: Sample, const H: usize, const W: usize>(
            m: &mut NoMatrix<E, H, W>,
        ) -> &mut [[E; W]; H] {
            match m.0 {}
        }

        fn vector<E: Sample, const N: usize>(v: &NoVector<E, N>) -> &[E; N] {
            match v.0 {}
        }

        fn vector_mut<E: Sample, const N: usize>(v: &mut NoVector<E, N>) -> &mut [E; N] {
            match v.0 {}
        }

        fn matrix_filled<E: Sample, const H: usize, const W: usize>(_: E) -> NoMatrix<E, H, W> {
            const { panic!("a heap layer needs the `alloc` feature") }
        }

        fn vector_filled<E: Sample, const N: usize>(_: E) -> NoVector<E, N> {
            const { panic!("a heap layer needs the `alloc` feature") }
        }

        fn matrix_copied<E: Sample, const H: usize, const W: usize>(
            _: &[[E; W]; H],
        ) -> NoMatrix<E, H, W> {
            const { panic!("a heap layer needs the `alloc` feature") }
        }

        fn vector_copied<E: Sample, const N: usize>(_: &[E; N]) -> NoVector<E, N> {
            const { panic!("a heap layer needs the `alloc` feature") }
        }
    }
}
