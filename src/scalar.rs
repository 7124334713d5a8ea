//! The element types a matrix can hold.

use core::fmt::{Debug, Display};
use num_traits::{Num, NumAssign, NumCast};

/// An element type of a [`Matrix`](crate::Matrix): any `Copy` number with the usual arithmetic.
///
/// Implemented automatically for every type that qualifies: `f32`, `f64` and the primitive
/// integers among them. Operations that need more (square roots, exponentials) ask for
/// [`num_traits::Float`] on top.
///
/// ```
/// fn sum_all<T: constmat::Scalar>(xs: &[T]) -> T {
///     xs.iter().fold(T::zero(), |acc, &x| acc + x)
/// }
/// assert_eq!(sum_all(&[1_i32, 2, 3]), 6);
/// assert_eq!(sum_all(&[0.5_f64, 0.25]), 0.75);
/// ```
pub trait Scalar:
    Copy + PartialOrd + Num + NumAssign + NumCast + Debug + Display + Send + Sync + 'static
{
}

impl<T> Scalar for T where
    T: Copy + PartialOrd + Num + NumAssign + NumCast + Debug + Display + Send + Sync + 'static
{
}
