//! The element type of a generic slice, found at compile time: how the generic layers reach the
//! `f32` and `f64` kernels without `unsafe`.

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
