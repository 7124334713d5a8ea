//! 2 x 2 max pooling with stride 2, forward and backward, on the SIMD kernels where they apply.

use super::cast::{as_uninit_mut, uninit_elements};
use core::mem::MaybeUninit;

/// Max pooling with 2 x 2 windows and stride 2 of whole planes of `height x width` (a batch's
/// channels one after the other) into planes of `height / 2 x width / 2`: `out[j]` is the first
/// maximum of `top[2j], top[2j + 1], bottom[2j], bottom[2j + 1]` of each pair of rows (a NaN,
/// the first, if there is one). Returns `false`, writing nothing, unless `T` is `f32` and the
/// CPU has AVX2 or AVX-512 (the caller then pools with its generic code, which gives the same
/// values).
///
/// # Panics
///
/// When the slices are not whole planes (a bug in the caller).
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(crate) fn max_pool_2x2<T: 'static>(x: &[T], size: (usize, usize), out: &mut [T]) -> bool {
    // SAFETY: pooling writes only initialized values (its outputs) into `out`.
    max_pool_2x2_dispatch(x, size, unsafe { as_uninit_mut(out) })
}

/// [`max_pool_2x2`] of a batch of `B` images (`[image][plane][row][column]`, planes of
/// `size`) into `y`, an uninitialized batch of outputs, returned initialized (the kernel writes
/// every output, as its tests check from stale contents); or `y` back, untouched, where there
/// is no kernel.
///
/// # Panics
///
/// Where the kernel runs, when `x` is not `B` images of `C` planes of `size` or `OH x OW` not
/// their pooled size (where it does not, nothing is checked: the caller's own loops are).
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
#[allow(clippy::type_complexity)]
pub(crate) fn max_pool_2x2_images<
    'y,
    T: 'static,
    const C: usize,
    const OH: usize,
    const OW: usize,
    const B: usize,
>(
    x: &[T],
    size: (usize, usize),
    y: &'y mut MaybeUninit<[[[[T; OW]; OH]; C]; B]>,
) -> Result<&'y mut [[[[T; OW]; OH]; C]; B], &'y mut MaybeUninit<[[[[T; OW]; OH]; C]; B]>> {
    if max_pool_2x2_dispatch(x, size, uninit_elements(y)) {
        // SAFETY: the kernel wrote every element of `out`, all of `y` (or panicked on lengths
        // that do not fit).
        Ok(unsafe { y.assume_init_mut() })
    } else {
        Err(y) // nothing written
    }
}

/// The kernel of [`max_pool_2x2`] into `out`, initialized or not: every element written when
/// it returns `true`, none when `false`.
pub(super) fn max_pool_2x2_dispatch<T: 'static>(
    x: &[T],
    size: (usize, usize),
    out: &mut [MaybeUninit<T>],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && let (Some(x), Some(out)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice_mut::<MaybeUninit<T>, MaybeUninit<f32>>(out),
        )
    {
        super::x86::max_pool_2x2_f32(isa, x, size, out);
        return true;
    }
    let _ = (x, size, out);
    false
}

/// The backward pass of [`max_pool_2x2`]: each window's gradient `dy[j]` to the first maximum
/// of its window (`0 + dy[j]`), 0 to its other inputs, in `dx` (planes like `x`'s; an odd last
/// row or column is not written). Returns `false`, writing nothing, unless `T` is `f32` and the
/// CPU has AVX2 or AVX-512.
///
/// # Panics
///
/// When the slices are not whole planes (a bug in the caller).
#[cfg(feature = "alloc")]
pub(crate) fn max_pool_2x2_backward<T: 'static>(
    x: &[T],
    size: (usize, usize),
    dy: &[T],
    dx: &mut [T],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && let (Some(x), Some(dy), Some(dx)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(dy),
            super::cast::same_type_slice_mut::<T, f32>(dx),
        )
    {
        super::x86::max_pool_2x2_backward_f32(isa, x, size, dy, dx);
        return true;
    }
    let _ = (x, size, dy, dx);
    false
}
