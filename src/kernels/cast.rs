//! The element type of a generic slice, found at compile time: how the generic layers reach the
//! `f32` and `f64` kernels; and slices of values seen as memory to write into, and back.

use core::mem::MaybeUninit;

/// `s` as a slice of `E`, when its element type `T` is `E`: how [`super::gemm_slices`] reaches
/// the SIMD kernels from generic code. (`Any` cannot do it: it needs sized referents, and a
/// slice is not one.)
pub(crate) fn same_type_slice<T: 'static, E: 'static>(s: &[T]) -> Option<&[E]> {
    if core::any::TypeId::of::<T>() == core::any::TypeId::of::<E>() {
        // SAFETY: `T` and `E` are the same type (equal `TypeId`s), so the pointer, the length
        // and the lifetime describe the same valid, initialized elements.
        Some(unsafe { core::slice::from_raw_parts(s.as_ptr().cast::<E>(), s.len()) })
    } else {
        None
    }
}

/// [`same_type_slice`] for a mutable slice.
pub(crate) fn same_type_slice_mut<T: 'static, E: 'static>(s: &mut [T]) -> Option<&mut [E]> {
    if core::any::TypeId::of::<T>() == core::any::TypeId::of::<E>() {
        // SAFETY: as in `same_type_slice`; the exclusive borrow of `s` moves into the result.
        Some(unsafe { core::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<E>(), s.len()) })
    } else {
        None
    }
}

/// The elements of an uninitialized batch of images (`[image][plane][row][column]`), to write
/// into.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(super) fn uninit_elements<T, const C: usize, const H: usize, const W: usize, const B: usize>(
    images: &mut MaybeUninit<[[[[T; W]; H]; C]; B]>,
) -> &mut [MaybeUninit<T>] {
    // SAFETY: nested arrays of `T` are their `B·C·H·W` elements in a row, without padding, and
    // `MaybeUninit<T>` has `T`'s layout; the exclusive borrow of `images` moves into the result.
    unsafe {
        core::slice::from_raw_parts_mut(images.as_mut_ptr().cast::<MaybeUninit<T>>(), B * C * H * W)
    }
}

/// `values` as memory to write into (`MaybeUninit<T>` has `T`'s layout).
///
/// # Safety
///
/// Only initialized values may be written through the result: the elements stay `T`s.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(super) unsafe fn as_uninit_mut<T>(values: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: same layout; the exclusive borrow moves into the result; the caller writes only
    // initialized values.
    unsafe { &mut *(core::ptr::from_mut(values) as *mut [MaybeUninit<T>]) }
}

/// `values` as initialized (`<[MaybeUninit<T>]>::assume_init_mut`, which needs Rust 1.93).
///
/// # Safety
///
/// Every element of `values` is initialized.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(super) unsafe fn assume_init_mut<T>(values: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout; the elements are initialized (the contract);
    // the exclusive borrow moves into the result.
    unsafe { core::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<T>(), values.len()) }
}
