//! Elementwise access to samples of any shape.

use super::Sample;

/// The values of a sample of any nesting (`[T; N]`, `[[[T; W]; H]; C]`), one by one: how
/// [`Dropout`](super::Dropout) and [`Residual`](super::Residual) reach them without knowing
/// the sample's shape. Implemented for `f32`, `f64` and arrays of samples; not for direct use.
#[doc(hidden)]
pub trait Values: Sample {
    /// The element type: `f32` or `f64` (`i8` in int8 nets).
    type Value: bytemuck::Pod;

    /// All the values, in order, as one slice: for loops that the compiler vectorizes whole.
    #[inline]
    fn values_mut(&mut self) -> &mut [Self::Value] {
        bytemuck::cast_slice_mut(core::slice::from_mut(self))
    }

    /// All the values, in order, as one slice.
    #[inline]
    fn values(&self) -> &[Self::Value] {
        bytemuck::cast_slice(core::slice::from_ref(self))
    }

    /// Calls `f` on each value of `self` with the value at the same place in `other`.
    fn zip_with(&mut self, other: &Self, f: &mut impl FnMut(&mut Self::Value, Self::Value));

    /// Sets each value to `f()`, in order.
    fn fill_with(&mut self, f: &mut impl FnMut() -> Self::Value);
}

macro_rules! values {
    ($($t:ty),*) => {$(
        impl Values for $t {
            type Value = $t;

            #[inline]
            fn zip_with(&mut self, other: &Self, f: &mut impl FnMut(&mut $t, $t)) {
                f(self, *other);
            }

            #[inline]
            fn fill_with(&mut self, f: &mut impl FnMut() -> $t) {
                *self = f();
            }
        }
    )*};
}
values!(f32, f64, i8);

impl<S: Values, const N: usize> Values for [S; N] {
    type Value = S::Value;

    #[inline]
    fn zip_with(&mut self, other: &Self, f: &mut impl FnMut(&mut S::Value, S::Value)) {
        for (a, b) in self.iter_mut().zip(other) {
            a.zip_with(b, f);
        }
    }

    #[inline]
    fn fill_with(&mut self, f: &mut impl FnMut() -> S::Value) {
        for a in self {
            a.fill_with(f);
        }
    }
}
