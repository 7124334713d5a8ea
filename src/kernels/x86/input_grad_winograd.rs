//! The input gradient of a stride-1 convolution by Winograd's method (the portable code of
//! [`crate::kernels::winograd`]), compiled for AVX-512 or AVX2 so that its loops use those vectors
//! and `mul_add` is one instruction.

use super::isa::{Isa, assert_isa};

use crate::kernels::shape::Conv;

/// [`crate::kernels::winograd::input_gradient`] compiled with `isa`'s instruction set: it is too large
/// for the compiler to inline into [`with_isa`](super::isa::with_isa)'s closure, so it gets functions of its own,
/// into which it is inlined (and its `mul_add` becomes a fused multiply-add instruction rather
/// than a call to a software one).
///
/// # Panics
///
/// When the CPU does not have `isa`, or as [`crate::kernels::winograd::input_gradient`].
#[cfg(feature = "std")]
pub(crate) fn winograd_input_gradient<T: num_traits::Float + 'static>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    dz: &[T],
    w: &[T],
    dx: &mut [T],
    scratch: &mut [T],
) {
    use crate::kernels::winograd::{input_gradient, input_gradient_by};

    #[target_feature(enable = "avx512f")]
    fn with_avx512<T: num_traits::Float + 'static>(
        shape: &Conv,
        batch: usize,
        (dz, w, dx, scratch): (&[T], &[T], &mut [T], &mut [T]),
    ) {
        // 3 positions by 6 channels of sums, one register each in f32 (18 of 32); in f64 a
        // lane group is two registers, and one position a pass fits.
        if core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>() {
            input_gradient_by::<T, 3>(shape, batch, dz, w, dx, scratch);
        } else {
            input_gradient(shape, batch, dz, w, dx, scratch);
        }
    }

    #[target_feature(enable = "avx2,fma")]
    fn with_avx2<T: num_traits::Float + 'static>(
        shape: &Conv,
        batch: usize,
        (dz, w, dx, scratch): (&[T], &[T], &mut [T], &mut [T]),
    ) {
        input_gradient(shape, batch, dz, w, dx, scratch);
    }

    assert_isa(isa);
    let operands = (dz, w, dx, scratch);
    match isa {
        // SAFETY (both): the CPU has the instruction set (asserted); the functions are safe code.
        Isa::Avx512 => unsafe { with_avx512(shape, batch, operands) },
        Isa::Avx2Fma => unsafe { with_avx2(shape, batch, operands) },
    }
}
