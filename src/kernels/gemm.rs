//! Matrix products on run-time sizes, `C (+)= op(A)·op(B)` on row-major slices: the engine under
//! the typed functions of [`crate::kernels`] and the convolutions' products.

use super::shape::Product;
#[cfg(target_arch = "x86_64")]
use crate::Scalar;

/// `c (+)= op(a)·op(b)` on row-major slices whose sizes are known only at run time: the products
/// of a convolution, whose operands (`C·K·K x OH·OW` patches, for instance) have shapes that
/// stable Rust cannot name from the layer's const parameters. The typed functions above are the
/// public API; this is their engine with the shapes checked here instead of by the compiler.
///
/// # Panics
///
/// When a slice's length is not the one its shape needs (a bug in the caller).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_slices<T: Scalar>(
    product: Product,
    (m, n, k): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [T],
    accumulate: bool,
) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "operand lengths {}, {}, {} do not fit an {m}x{k} by {k}x{n} product",
        a.len(),
        b.len(),
        c.len()
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa() {
        if let (Some(a), Some(b), Some(c)) = (
            super::cast::same_type_slice::<T, f32>(a),
            super::cast::same_type_slice::<T, f32>(b),
            super::cast::same_type_slice_mut::<T, f32>(c),
        ) {
            super::x86::gemm(isa, product, m, n, k, a, b, c, accumulate);
            return;
        }
        if let (Some(a), Some(b), Some(c)) = (
            super::cast::same_type_slice::<T, f64>(a),
            super::cast::same_type_slice::<T, f64>(b),
            super::cast::same_type_slice_mut::<T, f64>(c),
        ) {
            super::x86::gemm(isa, product, m, n, k, a, b, c, accumulate);
            return;
        }
    }
    super::reference::gemm_slices(product, (m, n, k), a, b, c, accumulate);
}

/// The bytes of stack buffer [`gemm_slices`] takes beyond its frame for an `m x n x k` product
/// with `layout` on elements of `element_size` bytes: on x86-64 in `f32` or `f64`, the packed
/// path's block of `B` where the product takes it (`x86::gemm_packed::path`, the same rule on
/// AVX2 and AVX-512); else none. What a layer's memory budget (`WORKING_BYTES`) counts for the
/// products its prediction runs.
pub(crate) const fn gemm_stack_bytes(
    layout: Product,
    (m, n, k): (usize, usize, usize),
    element_size: usize,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if (element_size == 4 || element_size == 8) && m > 0 && n > 0 && k > 0 {
        return super::x86::packed_stack_bytes(layout, m, n, k, element_size);
    }
    let _ = (layout, m, n, k, element_size);
    0
}
