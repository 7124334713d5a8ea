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
