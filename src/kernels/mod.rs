//! The arithmetic: matrix products and transposes on borrowed row-major arrays.
//!
//! Every function here takes `&[[T; W]; H]` arrays (an `H x W` matrix, row-major) and writes into
//! a caller-owned output. Nothing here allocates or knows about [`Matrix`](crate::Matrix), so the
//! same code runs on heap matrices (through [`Matrix::as_array`](crate::Matrix::as_array)) and on
//! `static` weight arrays in a `no_std` build without a heap.
//!
//! The shapes are in the signatures, so a kernel can never be called with operands that do not fit:
//!
//! ```
//! use constmat::kernels;
//!
//! static A: [[f32; 3]; 2] = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! static B: [[f32; 2]; 3] = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
//! let mut out = [[0.0_f32; 2]; 2];
//! kernels::matmul_into(&A, &B, &mut out);
//! assert_eq!(out, [[4.0, 5.0], [10.0, 11.0]]);
//! ```
//!
//! # Speed
//!
//! For `f32` and `f64` on x86-64, the products run on SIMD kernels (AVX-512F, else AVX2+FMA;
//! `f64` takes the AVX2 ones on both) chosen at run time from what the CPU has, so a default
//! `cargo build --release` is fast on any x86-64 and correct everywhere; no `-C
//! target-cpu=native` is needed. The convolutions have SIMD kernels in `f32`; `f64` ones (for
//! gradient checks rather than speed) take the reference loops and the SIMD products. Other
//! element types, other CPUs, and `no_std` builds not compiled for those features use the
//! reference loops. Both give the same results up to floating-point rounding (the tests compare
//! them on many shapes). [`with_instruction_set`] and `CONSTMAT_INSTRUCTION_SET` choose a
//! narrower instruction set ([`InstructionSet`]).

use core::any::Any;

use crate::Scalar;

pub use instruction_set::{
    INSTRUCTION_SET_VARIABLE, InstructionSet, instruction_set, with_instruction_set,
};
#[cfg(feature = "threads")]
pub use threads::use_threads;

// What the layers call.
pub(crate) use add_i8::{AddScales, add_i8_fast, add_i8_simd};
#[cfg(feature = "alloc")]
pub(crate) use conv::{
    conv2d_input_gradient_stride1, conv2d_weight_and_bias_gradients_through_relu,
    conv2d_weight_gradient_stride1,
};
pub(crate) use conv::{conv2d_stride1_images, conv2d_stride1_with_scratch};
pub(crate) use conv_windows::conv2d_windows_in_place;
pub(crate) use depthwise::{Depthwise, depthwise_conv2d};
#[cfg(feature = "alloc")]
pub(crate) use depthwise::{
    depthwise_conv2d_input_gradient, depthwise_conv2d_training, depthwise_conv2d_weight_gradient,
};
pub(crate) use depthwise_i8::{
    PlaneShape, depthwise_dots_i8, depthwise_i8_fast, depthwise_i8_simd,
};
pub(crate) use gemm::{gemm_slices, gemm_stack_bytes};
#[cfg(feature = "alloc")]
pub(crate) use im2col::{col2im_stride1, pad};
pub(crate) use int8::{
    DOT_ROWS_TILE, QUADS_SCRATCH_QUADS, Requantization, WindowShape, conv_quads_i8,
    conv_quads_i8_applies, conv_quads_i8_fast, conv_windows_i8, conv_windows_i8_applies,
    conv_windows_i8_fast, dot_columns_i8, dot_columns_i8_fast, dot_rows_i8, quads_plan,
    requantize_i8, requantize_one, requantize_uniform_i8,
};
pub(crate) use plan::{
    ScratchFor, conv_stack_scratch, forward_scratch_any_isa, windows_in_place_scratch_any_isa,
};
#[cfg(feature = "alloc")]
pub(crate) use plan::{
    conv_forward_workspace_scratch, conv_input_gradient_scratch, conv_weight_gradient_pads,
    conv_weight_gradient_pads_on_every_isa, conv_weight_gradient_scratch,
    conv_weight_gradient_scratch_any_isa,
};
#[cfg(feature = "alloc")]
pub(crate) use pool::max_pool_2x2_backward;
pub(crate) use pool::{max_pool_2x2, max_pool_2x2_images};
pub(crate) use shape::{Conv, Epilogue, PrepaddedConv, Product};

// The one place a generic slice is reinterpreted as `f32` or `f64` (their `TypeId`s checked),
// or seen as memory to write into.
pub(crate) mod add_i8;
#[allow(unsafe_code)]
pub(crate) mod cast;
mod conv;
mod conv_windows;
mod depthwise;
pub(crate) mod depthwise_i8;
mod gemm;
mod im2col;
mod instruction_set;
mod int8;
pub(crate) mod le_bytes;
mod plan;
mod pool;
mod reference;
mod shape;
#[cfg(feature = "threads")]
mod threads;
// Every `unsafe` block of the kernels is there, each with its `// SAFETY:` note.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86;
// Its input gradient is reached only with `std`, which detects the fused multiply-adds that
// `mul_add` needs; its tables serve the SIMD forward kernel everywhere.
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
mod weight_grad_patches;
#[cfg(target_arch = "x86_64")]
mod winograd;

/// Runs `op(a)·op(b)` into `out` on the SIMD kernels when the element type and the CPU allow;
/// returns `false` (having done nothing) otherwise.
///
/// The element type is found with `Any` (a compile-time constant after monomorphization), so the
/// choice costs nothing at run time and needs no `unsafe`.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn try_simd<
    T: Scalar,
    const AH: usize,
    const AW: usize,
    const BH: usize,
    const BW: usize,
    const H: usize,
    const W: usize,
>(
    layout: Product,
    (m, n, k): (usize, usize, usize),
    a: &[[T; AW]; AH],
    b: &[[T; BW]; BH],
    out: &mut [[T; W]; H],
    accumulate: bool,
) -> bool {
    let Some(isa) = x86::detected_isa() else {
        return false;
    };
    let (a, b, out): (&dyn Any, &dyn Any, &mut dyn Any) = (a, b, out);
    let dims = (m, n, k);
    run_as::<f32, AH, AW, BH, BW, H, W>(isa, layout, dims, a, b, out, accumulate)
        || run_as::<f64, AH, AW, BH, BW, H, W>(isa, layout, dims, a, b, out, accumulate)
}

/// Runs the SIMD product if the operands are arrays of `E`; returns whether they were.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn run_as<
    E: x86::Element,
    const AH: usize,
    const AW: usize,
    const BH: usize,
    const BW: usize,
    const H: usize,
    const W: usize,
>(
    isa: x86::Isa,
    layout: Product,
    (m, n, k): (usize, usize, usize),
    a: &dyn Any,
    b: &dyn Any,
    out: &mut dyn Any,
    accumulate: bool,
) -> bool {
    let (Some(a), Some(b), Some(out)) = (
        a.downcast_ref::<[[E; AW]; AH]>(),
        b.downcast_ref::<[[E; BW]; BH]>(),
        out.downcast_mut::<[[E; W]; H]>(),
    ) else {
        return false;
    };
    let (a, b, out) = (a.as_flattened(), b.as_flattened(), out.as_flattened_mut());
    x86::gemm(isa, layout, m, n, k, a, b, out, accumulate);
    true
}

/// `out = a · b`: `(H x K) · (K x W) -> H x W`.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. The kernels have no checked form (they are the
/// fast path, and need neither `alloc` nor a result per element); with `alloc`,
/// `Matrix::checked_matmul` is this product with every
/// operation checked.
///
/// ```
/// let a = [[1, 2], [3, 4]];
/// let b = [[5, 6], [7, 8]];
/// let mut out = [[0; 2]; 2];
/// constmat::kernels::matmul_into(&a, &b, &mut out);
/// assert_eq!(out, [[19, 22], [43, 50]]);
/// ```
pub fn matmul_into<T: Scalar, const H: usize, const K: usize, const W: usize>(
    a: &[[T; K]; H],
    b: &[[T; W]; K],
    out: &mut [[T; W]; H],
) {
    #[cfg(target_arch = "x86_64")]
    if try_simd(Product::Plain, (H, W, K), a, b, out, false) {
        return;
    }
    fill(out, T::zero());
    reference::matmul_accumulate_into(a, b, out);
}

/// `out += a · b`: `(H x K) · (K x W)` added into an `H x W` output.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. The kernels have no checked form (they are the
/// fast path, and need neither `alloc` nor a result per element); with `alloc`,
/// `Matrix::checked_matmul` checks the product (adding it
/// into `out` is then the caller's to check).
///
/// ```
/// let a = [[1, 2], [3, 4]];
/// let b = [[5, 6], [7, 8]];
/// let mut out = [[1; 2]; 2];
/// constmat::kernels::matmul_accumulate_into(&a, &b, &mut out);
/// assert_eq!(out, [[20, 23], [44, 51]]);
/// ```
pub fn matmul_accumulate_into<T: Scalar, const H: usize, const K: usize, const W: usize>(
    a: &[[T; K]; H],
    b: &[[T; W]; K],
    out: &mut [[T; W]; H],
) {
    #[cfg(target_arch = "x86_64")]
    if try_simd(Product::Plain, (H, W, K), a, b, out, true) {
        return;
    }
    reference::matmul_accumulate_into(a, b, out);
}

/// `out = aᵀ · b` without building the transpose: `a` is `K x H`, `b` is `K x W`, `out` is `H x W`.
///
/// This is the shape of a weight gradient, `dW = dZᵀ · X`.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. The kernels have no checked form (they are the
/// fast path, and need neither `alloc` nor a result per element); with `alloc`,
/// `Matrix::checked_matmul` of `a`'s transpose and `b` is
/// the same product, checked.
///
/// ```
/// let a = [[1, 2], [3, 4]]; // aᵀ = [[1, 3], [2, 4]]
/// let b = [[5, 6], [7, 8]];
/// let mut out = [[0; 2]; 2];
/// constmat::kernels::matmul_transpose_lhs_into(&a, &b, &mut out);
/// assert_eq!(out, [[26, 30], [38, 44]]);
/// ```
pub fn matmul_transpose_lhs_into<T: Scalar, const K: usize, const H: usize, const W: usize>(
    a: &[[T; H]; K],
    b: &[[T; W]; K],
    out: &mut [[T; W]; H],
) {
    #[cfg(target_arch = "x86_64")]
    if try_simd(Product::TransposeLhs, (H, W, K), a, b, out, false) {
        return;
    }
    fill(out, T::zero());
    reference::matmul_transpose_lhs_accumulate_into(a, b, out);
}

/// `out += aᵀ · b`: `a` is `K x H`, `b` is `K x W`, `out` is `H x W`.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. The kernels have no checked form (they are the
/// fast path, and need neither `alloc` nor a result per element); with `alloc`,
/// `Matrix::checked_matmul` of `a`'s transpose and `b` is
/// the same product, checked.
///
/// ```
/// let a = [[1, 2], [3, 4]];
/// let b = [[5, 6], [7, 8]];
/// let mut out = [[1; 2]; 2];
/// constmat::kernels::matmul_transpose_lhs_accumulate_into(&a, &b, &mut out);
/// assert_eq!(out, [[27, 31], [39, 45]]);
/// ```
pub fn matmul_transpose_lhs_accumulate_into<
    T: Scalar,
    const K: usize,
    const H: usize,
    const W: usize,
>(
    a: &[[T; H]; K],
    b: &[[T; W]; K],
    out: &mut [[T; W]; H],
) {
    #[cfg(target_arch = "x86_64")]
    if try_simd(Product::TransposeLhs, (H, W, K), a, b, out, true) {
        return;
    }
    reference::matmul_transpose_lhs_accumulate_into(a, b, out);
}

/// `out = a · bᵀ` without building the transpose: `a` is `H x K`, `b` is `W x K`, `out` is `H x W`.
///
/// This is the shape of a dense layer's forward pass with PyTorch-oriented weights, `Z = X · Wᵀ`.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. The kernels have no checked form (they are the
/// fast path, and need neither `alloc` nor a result per element); with `alloc`,
/// `Matrix::checked_matmul` of `a` and `b`'s transpose is
/// the same product, checked.
///
/// ```
/// let a = [[1, 2], [3, 4]];
/// let b = [[5, 6], [7, 8]]; // bᵀ = [[5, 7], [6, 8]]
/// let mut out = [[0; 2]; 2];
/// constmat::kernels::matmul_transpose_rhs_into(&a, &b, &mut out);
/// assert_eq!(out, [[17, 23], [39, 53]]);
/// ```
pub fn matmul_transpose_rhs_into<T: Scalar, const H: usize, const K: usize, const W: usize>(
    a: &[[T; K]; H],
    b: &[[T; K]; W],
    out: &mut [[T; W]; H],
) {
    #[cfg(target_arch = "x86_64")]
    if try_simd(Product::TransposeRhs, (H, W, K), a, b, out, false) {
        return;
    }
    reference::matmul_transpose_rhs_into(a, b, out, false);
}

/// `out += a · bᵀ`: `a` is `H x K`, `b` is `W x K`, `out` is `H x W`.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. The kernels have no checked form (they are the
/// fast path, and need neither `alloc` nor a result per element); with `alloc`,
/// `Matrix::checked_matmul` of `a` and `b`'s transpose is
/// the same product, checked.
///
/// ```
/// let a = [[1, 2], [3, 4]];
/// let b = [[5, 6], [7, 8]];
/// let mut out = [[1; 2]; 2];
/// constmat::kernels::matmul_transpose_rhs_accumulate_into(&a, &b, &mut out);
/// assert_eq!(out, [[18, 24], [40, 54]]);
/// ```
pub fn matmul_transpose_rhs_accumulate_into<
    T: Scalar,
    const H: usize,
    const K: usize,
    const W: usize,
>(
    a: &[[T; K]; H],
    b: &[[T; K]; W],
    out: &mut [[T; W]; H],
) {
    #[cfg(target_arch = "x86_64")]
    if try_simd(Product::TransposeRhs, (H, W, K), a, b, out, true) {
        return;
    }
    reference::matmul_transpose_rhs_into(a, b, out, true);
}

/// `out = w · x` for one sample: `w` is `O x I` (a weight in `out x in` orientation), `x` has `I`
/// elements, `out` has `O`. The single-sample forward pass of a dense layer.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. The kernels have no checked form (they are the
/// fast path, and need neither `alloc` nor a result per element); with `alloc`,
/// `Matrix::checked_matmul` of `w` and `x` as a column is
/// the same product, checked.
///
/// ```
/// let w = [[1, 0, 2], [0, 1, 0]];
/// let mut out = [0; 2];
/// constmat::kernels::matvec_into(&w, &[3, 4, 5], &mut out);
/// assert_eq!(out, [13, 4]);
/// ```
pub fn matvec_into<T: Scalar, const O: usize, const I: usize>(
    w: &[[T; I]; O],
    x: &[T; I],
    out: &mut [T; O],
) {
    // A matrix-vector product is the 1-row case of `x · wᵀ`.
    matmul_transpose_rhs_into(core::array::from_ref(x), w, core::array::from_mut(out));
}

/// `out = aᵀ`: `a` is `H x W`, `out` is `W x H`.
///
/// ```
/// let a = [[1, 2, 3], [4, 5, 6]];
/// let mut out = [[0; 2]; 3];
/// constmat::kernels::transpose_into(&a, &mut out);
/// assert_eq!(out, [[1, 4], [2, 5], [3, 6]]);
/// ```
pub fn transpose_into<T: Copy, const H: usize, const W: usize>(
    a: &[[T; W]; H],
    out: &mut [[T; H]; W],
) {
    for (r, a_row) in a.iter().enumerate() {
        for (out_row, &x) in out.iter_mut().zip(a_row.iter()) {
            out_row[r] = x;
        }
    }
}

/// `to = fromᵀ` for `from` of `rows` rows, row-major slices of run-time sizes (`to` as long as
/// `from`): the SIMD blocks for `f32` on AVX-512 or AVX2 (`x86::transpose`), else element by
/// element.
///
/// # Panics
///
/// When `rows` does not divide `from.len()` or `to` is not as long as `from`.
#[cfg(feature = "alloc")]
pub(crate) fn transpose_slice<T: Copy + 'static>(from: &[T], rows: usize, to: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    {
        x86::transpose(from, rows, to);
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        assert_eq!(from.len(), to.len(), "a transpose keeps every element");
        let columns = from.len().checked_div(rows).unwrap_or(0);
        assert_eq!(rows * columns, from.len(), "not {rows} whole rows");
        for (r, row) in from.chunks_exact(columns.max(1)).enumerate() {
            for (c, &v) in row.iter().enumerate() {
                to[c * rows + r] = v;
            }
        }
    }
}

/// The dot product of two equal-length rows.
///
/// Floating-point sums are accumulated in several independent partial sums, so the result may
/// differ from a left-to-right sum in the last bits.
///
/// With integer elements a product or a sum that overflows panics in a debug build and wraps
/// in a release build, as Rust's `*` and `+` do. There is no checked form (the kernels are the
/// fast path); a checked dot product is one fold, as below.
///
/// ```
/// assert_eq!(constmat::kernels::dot(&[1, 2, 3], &[4, 5, 6]), 32);
/// let ones = [1.0_f32; 100];
/// assert_eq!(constmat::kernels::dot(&ones, &ones), 100.0);
///
/// // Checked, for integers: `None` on overflow, in every build.
/// let checked_dot = |a: &[i8], b: &[i8]| {
///     a.iter().zip(b).try_fold(0_i8, |sum, (&x, &y)| sum.checked_add(x.checked_mul(y)?))
/// };
/// assert_eq!(checked_dot(&[1, 2, 3], &[4, 5, 6]), Some(32));
/// assert_eq!(checked_dot(&[100, 100], &[1, 1]), None);
/// ```
#[must_use]
pub fn dot<T: Scalar, const N: usize>(a: &[T; N], b: &[T; N]) -> T {
    reference::dot(a, b)
}

/// Runs `f` compiled for the widest vectors the CPU has: its loops, inlined into a function
/// built with AVX-512 (or AVX2), are vectorized with those. The crate is built for baseline
/// x86-64 (SSE2: four `f32` lanes), so this is how the layers' elementwise loops (activations
/// and their derivatives, which the SIMD kernels do not cover) use the wider vectors: applying
/// ReLU to the output of LeNet's first convolution took 0.33 µs of a 3.0 µs layer with SSE2.
/// Elsewhere (or without those instruction sets), simply `f()`.
#[inline]
pub(crate) fn with_wide_vectors<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa() {
        return x86::with_isa(isa, f);
    }
    f()
}

/// Whether every value is finite (no NaN, no infinity): the check a training step makes of its
/// gradients and parameters, on the SIMD path for `f32` and `f64`.
#[cfg(feature = "alloc")]
pub(crate) fn all_finite<T: num_traits::Float + 'static>(values: &[T]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa() {
        if let Some(v) = cast::same_type_slice::<T, f32>(values) {
            return x86::all_finite(isa, v);
        }
        if let Some(v) = cast::same_type_slice::<T, f64>(values) {
            return x86::all_finite(isa, v);
        }
    }
    reference::all_finite(values)
}

/// Sets every element of `out` to `value`.
fn fill<T: Copy, const H: usize, const W: usize>(out: &mut [[T; W]; H], value: T) {
    for row in out.iter_mut() {
        *row = [value; W];
    }
}

/// The index of the largest element: the first one among equals, the first NaN if there is one,
/// 0 for an empty slice. What a prediction's class is ([`nn::argmax`](crate::nn::argmax), the
/// same function) and what `Matrix::row_argmax` computes per row.
///
/// ```
/// use constmat::kernels::argmax;
/// assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
/// assert_eq!(argmax(&[1.0, f32::NAN, 3.0]), 1);
/// ```
#[must_use]
pub fn argmax<T: PartialOrd>(values: &[T]) -> usize {
    let mut best = 0;
    for (i, x) in values.iter().enumerate() {
        #[allow(clippy::eq_op)] // x != x is the NaN test for a generic PartialOrd type
        if x != x {
            return i;
        }
        if *x > values[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests;
