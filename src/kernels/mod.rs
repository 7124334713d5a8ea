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
use core::mem::MaybeUninit;

/// Lets the matrix products use `threads` threads (the `threads` feature), from now on.
///
/// Large products are then split by rows of the output across a pool of that many threads;
/// small ones (under about 16 million multiply-adds) stay on the calling thread, where a split
/// would cost more than it saves. Each output element is computed by one thread in the same
/// order whatever the split, so results are identical for any number of threads.
///
/// It can be called at any time, again and again: each call replaces the pool (products already
/// running finish on the old one). Until the first call, products use rayon's global pool.
///
/// # Errors
///
/// When the operating system cannot start the threads (rayon's error says why); the previous
/// configuration then stays.
///
/// ```
/// use constmat::Matrix;
///
/// let a = Matrix::<f32, 512, 512>::filled(1.0);
/// let _ = &a * &a; // uses rayon's global pool
/// constmat::kernels::use_threads(2).expect("two threads");
/// let two = &a * &a;
/// constmat::kernels::use_threads(1).expect("one thread"); // later calls work too
/// assert_eq!(&a * &a, two);
/// ```
#[cfg(feature = "threads")]
pub fn use_threads(threads: usize) -> Result<(), rayon::ThreadPoolBuildError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    *POOL
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::sync::Arc::new(pool));
    Ok(())
}

/// The pool set by [`use_threads`], if any.
#[cfg(feature = "threads")]
static POOL: std::sync::RwLock<Option<std::sync::Arc<rayon::ThreadPool>>> =
    std::sync::RwLock::new(None);

/// Runs `f` in the pool set by [`use_threads`] (so that rayon's calls in it use that pool), or
/// where it is when none was set.
#[cfg(feature = "threads")]
pub(crate) fn in_configured_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pool = POOL
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

use crate::Scalar;

pub use instruction_set::{
    INSTRUCTION_SET_VARIABLE, InstructionSet, instruction_set, with_instruction_set,
};

mod instruction_set;
pub(crate) mod le_bytes;
mod reference;
// The one place a generic slice is reinterpreted as `f32` or `f64` (their `TypeId`s checked).
#[allow(unsafe_code)]
mod cast;
// Every `unsafe` block of the kernels is there, each with its `// SAFETY:` note.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86;
// Its input gradient is reached only with `std`, which detects the fused multiply-adds that
// `mul_add` needs; its tables serve the SIMD forward kernel everywhere.
#[cfg(target_arch = "x86_64")]
mod winograd;

#[cfg(target_arch = "x86_64")]
use x86::Layout;

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
    layout: Layout,
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
    layout: Layout,
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
    if try_simd(Layout::Plain, (H, W, K), a, b, out, false) {
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
    if try_simd(Layout::Plain, (H, W, K), a, b, out, true) {
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
    if try_simd(Layout::TransposeLhs, (H, W, K), a, b, out, false) {
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
    if try_simd(Layout::TransposeLhs, (H, W, K), a, b, out, true) {
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
    if try_simd(Layout::TransposeRhs, (H, W, K), a, b, out, false) {
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
    if try_simd(Layout::TransposeRhs, (H, W, K), a, b, out, true) {
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

/// How the operands of [`gemm_slices`] are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Without a heap there is no training, whose backward passes use the transposed forms.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) enum Product {
    /// `C = A·B`: `A` is `m x k`, `B` is `k x n`.
    Plain,
    /// `C = Aᵀ·B`: `A` is stored `k x m`, `B` is `k x n`.
    TransposeLhs,
    /// `C = A·Bᵀ`: `A` is `m x k`, `B` is stored `n x k`.
    TransposeRhs,
}

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
    if let Some(isa) = x86::detected_isa() {
        let layout = match product {
            Product::Plain => Layout::Plain,
            Product::TransposeLhs => Layout::TransposeLhs,
            Product::TransposeRhs => Layout::TransposeRhs,
        };
        if let (Some(a), Some(b), Some(c)) = (
            cast::same_type_slice::<T, f32>(a),
            cast::same_type_slice::<T, f32>(b),
            cast::same_type_slice_mut::<T, f32>(c),
        ) {
            x86::gemm(isa, layout, m, n, k, a, b, c, accumulate);
            return;
        }
        if let (Some(a), Some(b), Some(c)) = (
            cast::same_type_slice::<T, f64>(a),
            cast::same_type_slice::<T, f64>(b),
            cast::same_type_slice_mut::<T, f64>(c),
        ) {
            x86::gemm(isa, layout, m, n, k, a, b, c, accumulate);
            return;
        }
    }
    reference::gemm_slices(product, (m, n, k), a, b, c, accumulate);
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

/// The sizes of a stride-1 2-D convolution of one image, for [`conv2d_stride1`]: `channels`
/// input planes of `height x width`, `filters` filters of `channels x kernel x kernel`, zero
/// padding `padding` on every side. The output has `filters` planes of
/// `(height + 2·padding - kernel + 1) x (width + ...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conv {
    pub channels: usize,
    pub filters: usize,
    pub kernel: usize,
    pub padding: usize,
    pub height: usize,
    pub width: usize,
}

impl Conv {
    /// The output height, `height + 2·padding - kernel + 1`.
    pub(crate) const fn out_height(&self) -> usize {
        self.height + 2 * self.padding + 1 - self.kernel
    }

    /// The output width, `width + 2·padding - kernel + 1`.
    pub(crate) const fn out_width(&self) -> usize {
        self.width + 2 * self.padding + 1 - self.kernel
    }

    /// Panics unless the kernel fits the padded image and the slices have the lengths the sizes
    /// give (the image, the filters `[filters][channels][kernel][kernel]`, the biases, the
    /// output planes).
    fn check_lengths(&self, x: usize, w: usize, bias: usize, out: usize) {
        assert!(
            self.kernel > 0
                && self.kernel <= self.height + 2 * self.padding
                && self.kernel <= self.width + 2 * self.padding,
            "a {k}x{k} kernel does not fit a {h}x{w} image padded by {p}",
            k = self.kernel,
            h = self.height,
            w = self.width,
            p = self.padding
        );
        let expected = (
            self.channels * self.height * self.width,
            self.filters * self.channels * self.kernel * self.kernel,
            self.filters,
            self.filters * self.out_height() * self.out_width(),
        );
        assert!(
            (x, w, bias, out) == expected,
            "convolution operands of {x}, {w}, {bias}, {out} elements do not fit {self:?}, which needs {expected:?}"
        );
    }
}

impl Conv {
    /// The elements of one input image, `channels·height·width`.
    const fn image_len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// The elements of one output, `filters·out_height·out_width`.
    const fn output_len(&self) -> usize {
        self.filters * self.out_height() * self.out_width()
    }

    /// The same convolution on the image padded beforehand: no padding, the padded sizes.
    const fn padded(&self) -> Conv {
        Conv {
            padding: 0,
            height: self.height + 2 * self.padding,
            width: self.width + 2 * self.padding,
            ..*self
        }
    }

    /// Panics unless `x` and `out` hold `batch` images and outputs (and the other operands fit,
    /// see [`Conv::check_lengths`]).
    fn check_batch(&self, batch: usize, x: usize, w: usize, bias: usize, out: usize) {
        self.check_lengths(self.image_len(), w, bias, self.output_len());
        assert!(
            (x, out) == (batch * self.image_len(), batch * self.output_len()),
            "{x} input and {out} output elements do not fit a batch of {batch} of {self:?}"
        );
    }
}

/// LeNet-5's first convolution, for the tests of every kernel module.
#[cfg(test)]
pub(crate) const LENET_FIRST: Conv = Conv {
    channels: 1,
    filters: 6,
    kernel: 5,
    padding: 2,
    height: 28,
    width: 28,
};

/// The elements of the stack buffer the SIMD forward passes transpose the weights and pad one
/// image into, or (down the columns) keep the filters' and a group of rows' transforms in;
/// larger convolutions take the kernel that masks the padding off instead. A
/// convolution that needs at most [`SMALL_STACK_SCRATCH`] takes a buffer of that size: the
/// buffer is zeroed on every call, and the stack of a prediction is smaller.
const STACK_SCRATCH: usize = 4096;

/// See [`STACK_SCRATCH`].
const SMALL_STACK_SCRATCH: usize = 1024;

/// Whether vectors of `lanes` are fuller with a convolution's filters in them than with a row
/// of its outputs: `filters / ⌈filters⌉ > width / ⌈width⌉`, rounding up to whole vectors.
const fn filters_fill_lanes_better(shape: &Conv, lanes: usize) -> bool {
    let (filters, width) = (shape.filters, shape.out_width());
    filters * whole_vectors(width, lanes) > width * whole_vectors(filters, lanes)
}

/// `n` rounded up to a multiple of `lanes` (at least 1, so that it can divide).
const fn whole_vectors(n: usize, lanes: usize) -> usize {
    let vectors = n.div_ceil(lanes) * lanes;
    if vectors == 0 { 1 } else { vectors }
}

/// The most elements of stack buffer [`conv2d_stride1`] takes for a convolution of `shape` on
/// elements of `element_size` bytes on this target: on x86-64, the buffer its SIMD kernels pad
/// the image and transpose the weights into, the scratch of the forward pass by Winograd's
/// method down the columns (`f32`), or the Winograd forward pass's scratch (the largest of the
/// paths AVX-512 and AVX2 take); elsewhere none.
pub(crate) const fn conv_stack_scratch(shape: &Conv, element_size: usize) -> usize {
    // Only `f32` has SIMD convolution kernels (4-byte integers take the same bound: an upper
    // one).
    if !cfg!(target_arch = "x86_64") || element_size != 4 {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // The Winograd forward pass, with either instruction set's vectors.
        let mut lanes = 64 / element_size;
        while lanes >= 32 / element_size && lanes > 0 {
            if filters_fill_lanes_better(shape, lanes)
                && x86::winograd_forward_applies(shape)
                && x86::winograd_forward_scratch(shape, lanes) <= WINOGRAD_STACK_SCRATCH
            {
                return WINOGRAD_STACK_SCRATCH;
            }
            lanes /= 2;
        }
    }
    let filters_somewhere = filters_fill_lanes_better(shape, 64 / element_size)
        || filters_fill_lanes_better(shape, 32 / element_size);
    let padded = if shape.padding > 0 {
        shape.padded().image_len()
    } else {
        0
    };
    let weights = shape.filters * shape.channels * shape.kernel * shape.kernel;
    let filters_path = if filters_somewhere && weights + padded <= STACK_SCRATCH {
        weights + padded
    } else {
        0
    };
    let flat_path = if padded <= STACK_SCRATCH { padded } else { 0 };
    // Down the columns: `f32` only, 16 or 8 lanes.
    let mut columns_path = 0;
    #[cfg(target_arch = "x86_64")]
    if element_size == 4 {
        let mut lanes = 16;
        while lanes >= 8 {
            let scratch = x86::conv_winograd_columns_f32::scratch_len(shape, lanes);
            if x86::conv_winograd_columns_f32::applies(shape, lanes)
                && scratch <= STACK_SCRATCH
                && scratch > columns_path
            {
                columns_path = scratch;
            }
            lanes /= 2;
        }
    }
    let mut most = if filters_path > flat_path {
        filters_path
    } else {
        flat_path
    };
    if columns_path > most {
        most = columns_path;
    }
    if most == 0 {
        0
    } else if most <= SMALL_STACK_SCRATCH {
        SMALL_STACK_SCRATCH
    } else {
        STACK_SCRATCH
    }
}

/// What the convolution kernels do to each output, its sum plus the bias, as they store it: an
/// activation fused into the kernel, so that it costs no pass of its own over the output (one
/// over the 4,704 outputs of LeNet's first convolution took 0.15 µs, its stores alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Epilogue {
    /// The value as it is.
    Identity,
    /// `max(z, 0)`, a NaN kept and `-0.0` made `+0.0`: ReLU's rule
    /// ([`Relu::apply`](crate::nn::Relu)), bit for bit.
    Relu,
}

impl Epilogue {
    /// The epilogue of one value: what the SIMD kernels compute in their vectors.
    #[inline]
    pub(crate) fn apply<T: Scalar>(self, z: T) -> T {
        match self {
            Self::Identity => z,
            // `z != z` is a NaN: kept, as `z > 0` alone would not.
            #[allow(clippy::eq_op)]
            Self::Relu if z > T::zero() || z != z => z,
            Self::Relu => T::zero(),
        }
    }
}

/// `out = epilogue(conv(x, w) + bias)` for a batch of `batch` images, stride 1 (see [`Conv`]): `x` is
/// `[batch][channels][height][width]`, `w` is `[filters][channels][kernel][kernel]` (PyTorch's
/// layout), `out` is `[batch][filters][out_height][out_width]`, all row-major. Computed
/// directly, without unrolling patches, with one of two SIMD kernels, whichever fills more of
/// each vector:
///
/// - **positions in the lanes**: each output row is a few vectors, each filter step a broadcast
///   weight times a shifted input row, the padding masked off;
/// - **filters in the lanes** (many filters, narrow images): each filter step is a vector of the
///   transposed weights times a broadcast input, per output position. The weights are
///   transposed once per call (and each image padded) into a stack buffer.
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(crate) fn conv2d_stride1<T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &mut [T],
    epilogue: Epilogue,
) {
    // SAFETY: the convolution writes only initialized values (its outputs) into `out`.
    let out = unsafe { as_uninit_mut(out) };
    conv2d_stride1_uninit(shape, batch, x, w, bias, out, epilogue);
}

/// [`conv2d_stride1`] into `out` whether it is initialized or not: every element of it is
/// written (each kernel stores every output position of every filter, as the tests of each
/// one check from stale contents), and it is returned initialized. What lets a chain of layers
/// skip zeroing the samples between them.
///
/// # Panics
///
/// As [`conv2d_stride1`].
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(crate) fn conv2d_stride1_uninit<'o, T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &'o mut [MaybeUninit<T>],
    epilogue: Epilogue,
) -> &'o mut [T] {
    shape.check_batch(batch, x.len(), w.len(), bias.len(), out.len());
    conv2d_stride1_dispatch(shape, batch, x, w, bias, out, epilogue);
    // SAFETY: every path of `conv2d_stride1_dispatch` writes every element of `out` (the
    // lengths were checked to be `batch` outputs).
    unsafe { assume_init_mut(out) }
}

/// [`conv2d_stride1_uninit`] of a batch of `B` images into `y`, an uninitialized batch of
/// outputs (`[image][filter][row][column]`), returned initialized: a layer's output written
/// without being zeroed first.
///
/// # Panics
///
/// When `x` is not `B` images or `OC x OH x OW` not the output of `shape`.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(crate) fn conv2d_stride1_images<
    'y,
    T: Scalar,
    const OC: usize,
    const OH: usize,
    const OW: usize,
    const B: usize,
>(
    shape: &Conv,
    x: &[T],
    w: &[T],
    bias: &[T],
    y: &'y mut MaybeUninit<[[[[T; OW]; OH]; OC]; B]>,
    epilogue: Epilogue,
) -> &'y mut [[[[T; OW]; OH]; OC]; B] {
    conv2d_stride1_uninit(shape, B, x, w, bias, uninit_elements(y), epilogue);
    // SAFETY: `conv2d_stride1_uninit` wrote every element of `y` (or panicked on
    // lengths that do not fit).
    unsafe { y.assume_init_mut() }
}

/// The paths of [`conv2d_stride1_uninit`], the lengths checked: the SIMD kernels for `f32`
/// and `f64` on x86-64 with AVX2 or AVX-512, else the reference loops, then the epilogue.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
fn conv2d_stride1_dispatch<T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &mut [MaybeUninit<T>],
    epilogue: Epilogue,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa()
        && let (Some(x), Some(w), Some(bias), Some(out)) = (
            cast::same_type_slice::<T, f32>(x),
            cast::same_type_slice::<T, f32>(w),
            cast::same_type_slice::<T, f32>(bias),
            cast::same_type_slice_mut::<MaybeUninit<T>, MaybeUninit<f32>>(out),
        )
    {
        conv2d_stride1_simd(isa, shape, batch, x, w, bias, out, epilogue);
        return;
    }
    // The reference loops add into their outputs: zeros first.
    out.fill(MaybeUninit::new(T::zero()));
    // SAFETY: every element was just written.
    let out = unsafe { assume_init_mut(out) };
    let len = shape.output_len();
    for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
        let out = &mut out[b * len..(b + 1) * len];
        reference::conv2d_stride1(shape, x, w, bias, out);
        if epilogue != Epilogue::Identity {
            for z in out {
                *z = epilogue.apply(*z);
            }
        }
    }
}

/// The elements of an uninitialized batch of images (`[image][plane][row][column]`), to write
/// into.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
fn uninit_elements<T, const C: usize, const H: usize, const W: usize, const B: usize>(
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
unsafe fn as_uninit_mut<T>(values: &mut [T]) -> &mut [MaybeUninit<T>] {
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
unsafe fn assume_init_mut<T>(values: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout; the elements are initialized (the contract);
    // the exclusive borrow moves into the result.
    unsafe { core::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<T>(), values.len()) }
}

/// The `batch` images (or outputs, or output gradients) of `len` elements each in `x`, one
/// slice each (an empty image still counts).
fn per_image<T>(x: &[T], batch: usize, len: usize) -> impl Iterator<Item = &[T]> {
    (0..batch).map(move |b| &x[b * len..(b + 1) * len])
}

/// [`conv2d_stride1`] on the SIMD kernels, the lengths checked.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn conv2d_stride1_simd<E: x86::Element + Scalar>(
    isa: x86::Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    let padded_len = if shape.padding > 0 {
        shape.padded().image_len()
    } else {
        0
    };
    if x86::filters_in_lanes::<E>(isa, shape)
        && x86::winograd_forward_applies(shape)
        && x86::winograd_forward_scratch(shape, x86::lanes::<E>(isa)) <= WINOGRAD_STACK_SCRATCH
    {
        conv2d_stride1_winograd_on_stack(isa, shape, batch, x, w, bias, out, epilogue);
    } else if x86::filters_in_lanes::<E>(isa, shape)
        && shape.output_len() > 0
        && w.len() + padded_len <= STACK_SCRATCH
    {
        if w.len() + padded_len <= SMALL_STACK_SCRATCH {
            conv2d_stride1_filters_in_lanes::<E, SMALL_STACK_SCRATCH>(
                isa, shape, batch, padded_len, x, w, bias, out, epilogue,
            );
        } else {
            conv2d_stride1_filters_in_lanes::<E, STACK_SCRATCH>(
                isa, shape, batch, padded_len, x, w, bias, out, epilogue,
            );
        }
    } else if let Some(scratch) = winograd_columns_scratch(isa, shape)
        && let (Some(x), Some(w), Some(bias), Some(out)) = (
            cast::same_type_slice::<E, f32>(x),
            cast::same_type_slice::<E, f32>(w),
            cast::same_type_slice::<E, f32>(bias),
            cast::same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<f32>>(out),
        )
    {
        if scratch <= SMALL_STACK_SCRATCH {
            conv2d_stride1_winograd_columns_on_stack::<SMALL_STACK_SCRATCH>(
                isa, shape, batch, x, w, bias, out, epilogue,
            );
        } else {
            conv2d_stride1_winograd_columns_on_stack::<STACK_SCRATCH>(
                isa, shape, batch, x, w, bias, out, epilogue,
            );
        }
    } else if shape.padding == 0 {
        let len = shape.output_len();
        for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
            let out = &mut out[b * len..(b + 1) * len];
            x86::conv2d_stride1_flat(isa, shape, x, w, bias, out, epilogue);
        }
    } else if padded_len <= SMALL_STACK_SCRATCH {
        conv2d_stride1_flat_padded::<E, SMALL_STACK_SCRATCH>(
            isa, shape, batch, x, w, bias, out, epilogue,
        );
    } else if padded_len <= STACK_SCRATCH {
        conv2d_stride1_flat_padded::<E, STACK_SCRATCH>(
            isa, shape, batch, x, w, bias, out, epilogue,
        );
    } else {
        let len = shape.output_len();
        for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
            let out = &mut out[b * len..(b + 1) * len];
            x86::conv2d_stride1(isa, shape, x, w, bias, out, epilogue);
        }
    }
}

/// The elements of the stack buffer of the Winograd forward pass (36 KiB of `f32`; LeNet's
/// second layer needs 9,088 with AVX-512, on 8 points, and 7,736 with AVX2); a convolution
/// whose filters' and image's transforms need more takes the direct kernel.
const WINOGRAD_STACK_SCRATCH: usize = 9 * 1024;

/// The Winograd path of [`conv2d_stride1_simd`], its scratch on the stack (not zeroed). Never
/// inlined, so that its buffer is not in the caller's stack frame on the other paths.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn conv2d_stride1_winograd_on_stack<E: x86::Element + Scalar>(
    isa: x86::Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    let mut scratch = [const { core::mem::MaybeUninit::<E>::uninit() }; WINOGRAD_STACK_SCRATCH];
    x86::conv2d_stride1_winograd(isa, shape, batch, x, w, bias, out, &mut scratch, epilogue);
}

/// The scratch elements of the forward pass by Winograd's method down the columns (`f32`
/// only) for `shape` with `isa`, when it applies and they fit [`STACK_SCRATCH`].
#[cfg(target_arch = "x86_64")]
fn winograd_columns_scratch(isa: x86::Isa, shape: &Conv) -> Option<usize> {
    let lanes = x86::lanes::<f32>(isa);
    let scratch = x86::conv_winograd_columns_f32::scratch_len(shape, lanes);
    (x86::conv_winograd_columns_f32::applies(shape, lanes) && scratch <= STACK_SCRATCH)
        .then_some(scratch)
}

/// The path of [`conv2d_stride1_simd`] by Winograd's method down the columns, its scratch (the
/// filters' transforms and one group of rows' input transforms) on the stack, not zeroed. Never
/// inlined, so that its buffer is not in the caller's stack frame on the other paths.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn conv2d_stride1_winograd_columns_on_stack<const SCRATCH: usize>(
    isa: x86::Isa,
    shape: &Conv,
    batch: usize,
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    out: &mut [MaybeUninit<f32>],
    epilogue: Epilogue,
) {
    let mut scratch = [const { MaybeUninit::<f32>::uninit() }; SCRATCH];
    x86::conv_winograd_columns_f32::conv2d_stride1_winograd_columns(
        isa,
        shape,
        batch,
        x,
        w,
        bias,
        out,
        &mut scratch,
        epilogue,
    );
}

/// The flat path of [`conv2d_stride1_simd`] for a padded convolution: each image padded in a
/// stack buffer first. Never inlined, so that its buffer is not in the caller's stack frame on
/// the other paths.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn conv2d_stride1_flat_padded<E: x86::Element + Scalar, const SCRATCH: usize>(
    isa: x86::Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    let mut scratch = [E::default(); SCRATCH];
    let padded_image = &mut scratch[..shape.padded().image_len()];
    let len = shape.output_len();
    for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
        pad(shape, x, padded_image); // the border stays zero from the start
        let out = &mut out[b * len..(b + 1) * len];
        x86::conv2d_stride1_flat(isa, &shape.padded(), padded_image, w, bias, out, epilogue);
    }
}

/// The filters-in-lanes path of [`conv2d_stride1_simd`]: the weights transposed to
/// `[C·K·K][filters]` and each image padded (when `padded_len > 0`) in a stack buffer. Never
/// inlined, so that its buffer is not in the caller's stack frame on the other path.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn conv2d_stride1_filters_in_lanes<E: x86::Element + Scalar, const SCRATCH: usize>(
    isa: x86::Isa,
    shape: &Conv,
    batch: usize,
    padded_len: usize,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    let len = shape.output_len();
    x86::with_transposed_filters::<E, SCRATCH, _>(w, shape.filters, padded_len, |wt, padded| {
        for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
            let out = &mut out[b * len..(b + 1) * len];
            let image = if padded_len > 0 {
                pad(shape, x, padded); // the border stays zero from the start
                &*padded
            } else {
                x
            };
            x86::conv2d_stride1_filters(isa, &shape.padded(), image, wt, bias, out, epilogue);
        }
    });
}

/// Copies the image `x` into the inside of `padded`, `shape.padding` from each edge; the
/// border is not written.
pub(crate) fn pad<T: Scalar>(shape: &Conv, x: &[T], padded: &mut [T]) {
    let (p, height, width) = (shape.padding, shape.height, shape.width);
    let (padded_height, padded_width) = (height + 2 * p, width + 2 * p);
    let plane = height * width;
    if plane == 0 {
        return;
    }
    for c in 0..shape.channels {
        let inside = &mut padded[(c * padded_height + p) * padded_width + p..];
        let x = &x[c * plane..][..plane];
        copy_rows(x, width, inside, padded_width, (height, width));
    }
}

/// Copies `rows` rows of `width` elements, row `i` from `from[i·from_stride..]` to
/// `to[i·to_stride..]`, leaving the rest of each stride as it was. With masked vector moves
/// for `f32` and `f64` on x86-64 (AVX2 or AVX-512), where `copy_from_slice` called `memmove`
/// per row, which for short rows (28 elements, LeNet-5's) cost more than the copy.
///
/// # Panics
///
/// When a row falls outside its slice (a bug in the caller).
pub(crate) fn copy_rows<T: Copy + 'static>(
    from: &[T],
    from_stride: usize,
    to: &mut [T],
    to_stride: usize,
    (rows, width): (usize, usize),
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa()
        && x86::copy_rows(isa, from, from_stride, to, to_stride, (rows, width))
    {
        return;
    }
    for i in 0..rows {
        to[i * to_stride..][..width].copy_from_slice(&from[i * from_stride..][..width]);
    }
}

/// `dw (+)= Σ over the batch of dZ·X̂ᵀ`, the weight gradient of a stride-1 convolution (see
/// [`Conv`]), `[filters][channels][kernel][kernel]`, from `batch` images `x` and the gradients
/// of their outputs `dz` (`[batch][filters][out_height][out_width]`), without unrolling the
/// patches `X̂`. The SIMD kernel that puts the positions in the lanes pads the images as it
/// copies them; the others are fast only without padding: where
/// [`conv_weight_gradient_pads`] is false, a padded convolution's caller passes the padded
/// images (and `shape.padded()`).
///
/// The SIMD kernels lay their operands out in `scratch` (see
/// [`conv_weight_gradient_scratch`]): with many filters and narrow images they put the filters
/// in the lanes and want `dz` position-major (with a kernel of 3 to 5, by Winograd's method
/// along the rows, which keeps a few images' transforms and the sums at its tiles' points
/// there instead); otherwise they put the positions in the lanes,
/// take `dz` as it is and copy a few images at a time once per kernel column, shifted, so that
/// the inputs that meet a vector of `dz` are one vector too. Where the scratch has another
/// length, the generic loops run.
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[cfg(feature = "alloc")]
pub(crate) fn conv2d_weight_gradient_stride1<T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    dz: &[T],
    scratch: &mut [T],
    dw: &mut [T],
    accumulate: bool,
) {
    shape.check_batch(batch, x.len(), dw.len(), shape.filters, dz.len());
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa()
        && let (Some(x), Some(dz), Some(scratch), Some(dw)) = (
            cast::same_type_slice::<T, f32>(x),
            cast::same_type_slice::<T, f32>(dz),
            cast::same_type_slice_mut::<T, f32>(scratch),
            cast::same_type_slice_mut::<T, f32>(dw),
        )
    {
        weight_gradient_simd(isa, shape, batch, x, dz, scratch, dw, accumulate);
        return;
    }
    let _ = scratch; // only the SIMD kernels lay their operands out
    let images = per_image(x, batch, shape.image_len());
    for (b, (x, dz)) in images
        .zip(per_image(dz, batch, shape.output_len()))
        .enumerate()
    {
        reference::conv2d_weight_gradient_stride1(shape, x, dz, dw, accumulate || b > 0);
    }
    if batch == 0 && !accumulate {
        dw.fill(T::zero());
    }
}

/// For a stride-1 ReLU layer of `shape` whose input gradient is not wanted (a net's first
/// layer): `dw = Σ over the batch of dZ·X̂ᵀ` and `db = Σ dZ` (both written, not added to)
/// with `dZ = dA ⊙ ReLU'(A)` formed as the kernel reads it, from the layer's outputs `a` and
/// their gradient `da` (each `batch x filters x OH x OW`), where a kernel does this
/// (`x86::weight_grad_winograd_5x5_narrow_avx512`, `f32` on AVX-512): the layer then neither writes `dZ` nor reads it
/// back. `dZ` is the layer's own product, bit for bit, and so is `dw`; `db`'s sums are taken
/// in another order. `scratch` is [`conv_weight_gradient_scratch`] long and `x` holds the
/// images unpadded (where this applies, [`conv_weight_gradient_pads`] holds). Returns `false`,
/// changing nothing, where it does not apply (the caller forms `dZ` and calls
/// [`conv2d_weight_gradient_stride1`]).
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[cfg(feature = "alloc")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_weight_and_bias_gradients_through_relu<T: 'static>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    a: &[T],
    da: &[T],
    scratch: &mut [T],
    dw: &mut [T],
    db: &mut [T],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa()
        && weight_gradient_kernel::<T>(isa, &shape.padded())
            == WeightGradientKernel::RowTilesInLanes
        // The padded shape can qualify where the images are empty (a height or width of 0
        // with padding of 3 or more): those take the layer's loops.
        && x86::weight_grad_winograd_5x5_narrow_avx512::applies(shape)
        && scratch.len() == x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(&shape.padded())
        && let (Some(x), Some(a), Some(da), Some(scratch), Some(dw), Some(db)) = (
            cast::same_type_slice::<T, f32>(x),
            cast::same_type_slice::<T, f32>(a),
            cast::same_type_slice::<T, f32>(da),
            cast::same_type_slice_mut::<T, f32>(scratch),
            cast::same_type_slice_mut::<T, f32>(dw),
            cast::same_type_slice_mut::<T, f32>(db),
        )
    {
        let gradients = x86::weight_grad_winograd_5x5_narrow_avx512::Gradients::ThroughRelu {
            output: a,
            d_output: da,
            d_bias: db,
        };
        x86::weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
            isa, shape, batch, x, gradients, scratch, dw, false,
        );
        return true;
    }
    let _ = (shape, batch, x, a, da, scratch, dw, db);
    false
}

/// The elements of the scratch [`conv2d_input_gradient_stride1`] uses for `shape`: 0 when it
/// does not apply, which it decides the same way: a kernel of 3 to 5 (`winograd::applies`), on
/// a CPU with fused multiply-adds in hardware, which `mul_add` needs to be fast (x86-64 with
/// AVX2 or AVX-512, detected at run time, so `std`).
#[cfg(feature = "alloc")]
pub(crate) fn conv_input_gradient_scratch(shape: &Conv) -> usize {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if x86::detected_isa().is_some() && winograd::applies(shape) {
        return winograd::scratch_len(shape);
    }
    let _ = shape;
    0
}

/// `dx = col2im(Wᵀ·dZ)` of each of `batch` images of a stride-1 convolution of `shape`
/// (padding included), by Winograd's minimal filtering (`kernels/winograd.rs`): `dz` is
/// `batch x filters x OH x OW`, `w` the filters, `dx` (written) `batch x channels x H x W`,
/// `scratch` [`conv_input_gradient_scratch`] elements. Returns `false`, changing nothing, when it
/// does not apply (see [`conv_input_gradient_scratch`]; the caller then takes the product and
/// `col2im`).
///
/// # Panics
///
/// When the slices' lengths do not fit `shape` (a bug in the caller).
#[cfg(feature = "alloc")]
pub(crate) fn conv2d_input_gradient_stride1<T: num_traits::Float + 'static>(
    shape: &Conv,
    batch: usize,
    dz: &[T],
    w: &[T],
    dx: &mut [T],
    scratch: &mut [T],
) -> bool {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if let Some(isa) = x86::detected_isa()
        && winograd::applies(shape)
    {
        x86::winograd_input_gradient(isa, shape, batch, dz, w, dx, scratch);
        return true;
    }
    let _ = (shape, batch, dz, w, dx, scratch);
    false
}

/// Which SIMD weight-gradient kernel takes a shape without padding (a padded convolution's
/// `shape.padded()`), and so what it wants in its scratch: decided here once, for both the
/// workspace's scratch ([`conv_weight_gradient_scratch`]) and the kernel it sizes
/// ([`weight_gradient_simd`]).
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WeightGradientKernel {
    /// The filters in the lanes: `dz` transposed into the scratch, `[position][filter]`.
    FiltersInLanes,
    /// The filters in the lanes, by Winograd's method along the rows
    /// (`x86::conv2d_weight_gradient_winograd`), for the kernel sizes it has tiles for: the
    /// scratch holds a few images' transforms and the sums at the tiles' points.
    WinogradRows,
    /// The positions in the lanes: `dz` as it is, the images copied into the scratch once per
    /// kernel column, shifted (`x86::shifted_image_len`), a few at a time.
    PositionsInLanes,
    /// Winograd's method along the rows with a row's tiles in the lanes
    /// (`x86::weight_grad_winograd_5x5_narrow_avx512`), for 5 x 5 kernels on rows of at most 32 padded columns, `f32` on
    /// AVX-512: the scratch holds one image's transforms and the sums at the points.
    RowTilesInLanes,
}

#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
fn weight_gradient_kernel<E: 'static>(isa: x86::Isa, shape: &Conv) -> WeightGradientKernel {
    if x86::filters_in_lanes::<E>(isa, shape) {
        if winograd::applies(shape) && shape.out_height() > 0 && shape.out_width() > 0 {
            WeightGradientKernel::WinogradRows
        } else {
            WeightGradientKernel::FiltersInLanes
        }
    } else if isa == x86::Isa::Avx512
        && core::any::TypeId::of::<E>() == core::any::TypeId::of::<f32>()
        && x86::weight_grad_winograd_5x5_narrow_avx512::applies(shape)
    {
        WeightGradientKernel::RowTilesInLanes
    } else {
        WeightGradientKernel::PositionsInLanes
    }
}

/// The elements of the scratch [`conv2d_weight_gradient_stride1`] uses for a batch of `batch`
/// ([`WeightGradientKernel`]): `dz`'s length with the filters in the lanes (by Winograd's
/// method, `x86::weight_gradient_winograd_scratch`), the column-shifted
/// copies of the images of one pass with the positions in the lanes, 0 without SIMD kernels.
#[cfg(feature = "alloc")]
pub(crate) fn conv_weight_gradient_scratch<T: 'static>(shape: &Conv, batch: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa() {
        let simd_type = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        let padded = shape.padded();
        if simd_type {
            return match weight_gradient_kernel::<T>(isa, &padded) {
                WeightGradientKernel::FiltersInLanes => batch * shape.output_len(),
                WeightGradientKernel::WinogradRows => {
                    x86::weight_gradient_winograd_scratch(&padded, batch, x86::lanes::<T>(isa))
                }
                WeightGradientKernel::PositionsInLanes => {
                    x86::weight_grad_images_per_pass::<T>(&padded, batch)
                        * x86::shifted_image_len(&padded)
                }
                WeightGradientKernel::RowTilesInLanes => {
                    x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(&padded)
                }
            };
        }
    }
    let _ = (shape, batch);
    0
}

/// Whether [`conv2d_weight_gradient_stride1`] is fast on `shape`'s images as they are, without
/// their padding (always when the padding is 0): where its SIMD kernel puts the positions in
/// the lanes, which pads the images as it copies them. Otherwise a padded convolution pads its
/// images first and passes `shape.padded()`.
#[cfg(feature = "alloc")]
pub(crate) fn conv_weight_gradient_pads<T: 'static>(shape: &Conv) -> bool {
    if shape.padding == 0 {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa() {
        let simd_type = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        return simd_type
            && matches!(
                weight_gradient_kernel::<T>(isa, &shape.padded()),
                WeightGradientKernel::PositionsInLanes | WeightGradientKernel::RowTilesInLanes
            );
    }
    false
}

/// [`conv2d_weight_gradient_stride1`] on the SIMD kernels, the lengths checked.
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
fn weight_gradient_simd<E: x86::Element + Scalar>(
    isa: x86::Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dz: &[E],
    scratch: &mut [E],
    dw: &mut [E],
    accumulate: bool,
) {
    let positions = shape.out_height() * shape.out_width();
    // The kernels with the filters in the lanes want the image padded by the caller (no masks
    // in their inner loops).
    let unpadded = shape.padding == 0;
    match weight_gradient_kernel::<E>(isa, &shape.padded()) {
        WeightGradientKernel::FiltersInLanes
            if scratch.len() == dz.len() && positions > 0 && unpadded =>
        {
            // dZ of each image, [filter][position] -> [position][filter].
            for (dz, dzt) in dz
                .chunks_exact(shape.output_len())
                .zip(scratch.chunks_exact_mut(shape.output_len()))
            {
                x86::transpose(dz, shape.filters, dzt);
            }
            let dzt = &scratch[..];
            x86::conv2d_weight_gradient_filters(isa, shape, batch, x, dzt, dw, accumulate);
            return;
        }
        WeightGradientKernel::WinogradRows
            if unpadded
                && scratch.len()
                    == x86::weight_gradient_winograd_scratch(
                        shape,
                        batch,
                        x86::lanes::<E>(isa),
                    ) =>
        {
            x86::conv2d_weight_gradient_winograd(isa, shape, batch, x, dz, scratch, dw, accumulate);
            return;
        }
        WeightGradientKernel::PositionsInLanes
            if scratch.len()
                == x86::weight_grad_images_per_pass::<E>(shape, batch)
                    * x86::shifted_image_len(shape) =>
        {
            x86::conv2d_weight_gradient_positions(
                isa, shape, batch, x, dz, scratch, dw, accumulate,
            );
            return;
        }
        WeightGradientKernel::RowTilesInLanes
            if scratch.len()
                == x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(shape)
                && x86::weight_grad_winograd_5x5_narrow_avx512::applies(shape) =>
        {
            if let (Some(x), Some(dz), Some(scratch), Some(dw)) = (
                cast::same_type_slice::<E, f32>(x),
                cast::same_type_slice::<E, f32>(dz),
                cast::same_type_slice_mut::<E, f32>(scratch),
                cast::same_type_slice_mut::<E, f32>(dw),
            ) {
                x86::weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
                    isa,
                    shape,
                    batch,
                    x,
                    x86::weight_grad_winograd_5x5_narrow_avx512::Gradients::PreActivation(dz),
                    scratch,
                    dw,
                    accumulate,
                );
                return;
            }
        }
        // A scratch of another length, no position, or padding the kernel does not take: the
        // generic loops.
        _ => {}
    }
    let images = per_image(x, batch, shape.image_len());
    for (b, (x, dz)) in images
        .zip(per_image(dz, batch, shape.output_len()))
        .enumerate()
    {
        reference::conv2d_weight_gradient_stride1(shape, x, dz, dw, accumulate || b > 0);
    }
    if batch == 0 && !accumulate {
        dw.fill(E::zero());
    }
}

/// `sums[r] = Σ_i weight[r·n + i] · x[i]` (`n = x.len()`): the dot products of the int8 layers,
/// exact in `i32` (their callers bound `n` so that no sum can overflow), on the SIMD kernels
/// (AVX-512BW or AVX2: the `i8` values widened to `i16` and multiplied-and-added in pairs) where
/// the CPU has them, on plain loops elsewhere.
///
/// # Panics
///
/// When `weight.len() != sums.len() · x.len()` (a bug in the caller).
pub(crate) fn dot_rows_i8(weight: &[i8], x: &[i8], sums: &mut [i32]) {
    assert_eq!(
        weight.len(),
        sums.len() * x.len(),
        "a weight of {} values does not have {} rows of {}",
        weight.len(),
        sums.len(),
        x.len()
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa_i8() {
        x86::dot_rows_i8(isa, weight, x, sums);
        return;
    }
    reference::dot_rows_i8(weight, x, sums);
}

/// `out[o] = clamp(zero + M[o]·(dots[o] + bias[o]), low, 127)`, `M[o]` the fixed-point
/// multiplier `(multiplier[o], exponent[o])` ([`crate::quant::Multiplier::apply`]): the int8
/// layers' requantization, 16 outputs at a time on AVX-512, one at a time elsewhere, the same
/// integers either way.
///
/// # Panics
///
/// When the slices' lengths differ (a bug in the caller), or an exponent is outside `-31..=30`
/// (no [`crate::quant::Multiplier`] has one), on every path.
pub(crate) fn requantize_i8(
    dots: &[i32],
    parameters: (&[i32], &[i32], &[i32]),
    zero_and_low: (i8, i8),
    out: &mut [i8],
) {
    let (bias, multiplier, exponent) = parameters;
    assert!(
        // Compared one by one: an array comparison here stalls on its stores (measured).
        (dots.len(), bias.len(), multiplier.len(), exponent.len())
            == (out.len(), out.len(), out.len(), out.len()),
        "requantizing {} outputs from slices of other lengths",
        out.len()
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = x86::detected_isa_i8() {
        // The SIMD kernels check the exponents as they load them.
        x86::requantize_i8(isa, dots, parameters, zero_and_low, out);
        return;
    }
    assert!(
        exponent.iter().all(|&e| (-31..=30).contains(&e)),
        "a multiplier's exponent is from -31 to 30"
    );
    reference::requantize_i8(dots, parameters, zero_and_low, out);
}

/// One output of [`requantize_i8`]: `clamp(zero + M·(dot + bias), low, 127)`, `M` the
/// fixed-point multiplier `(multiplier, exponent)`.
#[inline]
pub(crate) fn requantize_one(
    dot: i32,
    (bias, multiplier, exponent): (i32, i32, i32),
    (zero, low): (i8, i8),
) -> i8 {
    reference::requantize_one(dot, bias, multiplier, exponent, zero, low)
}

/// Max pooling with 2 x 2 windows and stride 2 of whole planes of `height x width` (a batch's
/// channels one after the other) into planes of `height / 2 x width / 2`: `out[j]` is the first
/// maximum of `top[2j], top[2j + 1], bottom[2j], bottom[2j + 1]` of each pair of rows (a NaN,
/// the first, if there is one). Returns `false`, writing nothing, unless `T` is `f32` and the
/// CPU has AVX-512 (the caller then pools with its generic code, which gives the same values).
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
fn max_pool_2x2_dispatch<T: 'static>(
    x: &[T],
    size: (usize, usize),
    out: &mut [MaybeUninit<T>],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa @ x86::Isa::Avx512) = x86::detected_isa()
        && let (Some(x), Some(out)) = (
            cast::same_type_slice::<T, f32>(x),
            cast::same_type_slice_mut::<MaybeUninit<T>, MaybeUninit<f32>>(out),
        )
    {
        x86::max_pool_2x2_f32(isa, x, size, out);
        return true;
    }
    let _ = (x, size, out);
    false
}

/// The backward pass of [`max_pool_2x2`]: each window's gradient `dy[j]` to the first maximum
/// of its window (`0 + dy[j]`), 0 to its other inputs, in `dx` (planes like `x`'s; an odd last
/// row or column is not written). Returns `false`, writing nothing, unless `T` is `f32` and the
/// CPU has AVX-512.
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
    if let Some(isa @ x86::Isa::Avx512) = x86::detected_isa()
        && let (Some(x), Some(dy), Some(dx)) = (
            cast::same_type_slice::<T, f32>(x),
            cast::same_type_slice::<T, f32>(dy),
            cast::same_type_slice_mut::<T, f32>(dx),
        )
    {
        x86::max_pool_2x2_backward_f32(isa, x, size, dy, dx);
        return true;
    }
    let _ = (x, size, dy, dx);
    false
}

/// `dx += col2im(d_patches)` for a stride-1 convolution of `shape` (`d_patches` is
/// `C·K·K x OH·OW`, `dx` the `C x H x W` input gradient): each row `(c, ky, kx)` added, output
/// row by output row, to the input row it met, on AVX-512. Returns `false`, changing nothing,
/// unless `T` is `f32` or `f64` and the CPU has AVX-512 (the caller's generic code then does the
/// same additions in the same order).
///
/// # Panics
///
/// When the slices' lengths do not fit `shape` (a bug in the caller).
#[cfg(feature = "alloc")]
pub(crate) fn col2im_stride1<T: 'static>(shape: &Conv, d_patches: &[T], dx: &mut [T]) -> bool {
    let taps = shape.channels * shape.kernel * shape.kernel;
    assert!(
        d_patches.len() == taps * shape.out_height() * shape.out_width()
            && dx.len() == shape.channels * shape.height * shape.width,
        "col2im: {} patch values and {} input values for {shape:?}",
        d_patches.len(),
        dx.len()
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(x86::Isa::Avx512) = x86::detected_isa() {
        return x86::col2im_stride1_avx512(shape, d_patches, dx);
    }
    let _ = (d_patches, dx);
    false
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
mod tests {
    use super::*;

    /// The textbook triple loop, independent of the kernels' loop orders.
    fn naive<const H: usize, const K: usize, const W: usize>(
        a: &[[i64; K]; H],
        b: &[[i64; W]; K],
    ) -> [[i64; W]; H] {
        let mut out = [[0; W]; H];
        for i in 0..H {
            for j in 0..W {
                for k in 0..K {
                    out[i][j] += a[i][k] * b[k][j];
                }
            }
        }
        out
    }

    fn pattern<const H: usize, const W: usize>(seed: i64) -> [[i64; W]; H] {
        core::array::from_fn(|r| {
            core::array::from_fn(|c| (seed * 7 + r as i64 * 3 - c as i64 * 5) % 11)
        })
    }

    #[test]
    fn products_agree_with_the_triple_loop_on_odd_shapes() {
        let a: [[i64; 5]; 3] = pattern(1);
        let b: [[i64; 7]; 5] = pattern(2);
        let expected = naive(&a, &b);

        let mut out = [[0; 7]; 3];
        matmul_into(&a, &b, &mut out);
        assert_eq!(out, expected);

        let mut a_t = [[0; 3]; 5];
        transpose_into(&a, &mut a_t);
        let mut out_tl = [[0; 7]; 3];
        matmul_transpose_lhs_into(&a_t, &b, &mut out_tl);
        assert_eq!(out_tl, expected);

        let mut b_t = [[0; 5]; 7];
        transpose_into(&b, &mut b_t);
        let mut out_tr = [[0; 7]; 3];
        matmul_transpose_rhs_into(&a, &b_t, &mut out_tr);
        assert_eq!(out_tr, expected);
    }

    #[test]
    fn accumulate_forms_add_to_the_existing_output() {
        let a: [[i64; 4]; 2] = pattern(3);
        let b: [[i64; 3]; 4] = pattern(4);
        let product = naive(&a, &b);
        let start: [[i64; 3]; 2] = pattern(5);
        let expected: [[i64; 3]; 2] =
            core::array::from_fn(|r| core::array::from_fn(|c| start[r][c] + product[r][c]));

        let mut out = start;
        matmul_accumulate_into(&a, &b, &mut out);
        assert_eq!(out, expected);

        let mut a_t = [[0; 2]; 4];
        transpose_into(&a, &mut a_t);
        let mut out = start;
        matmul_transpose_lhs_accumulate_into(&a_t, &b, &mut out);
        assert_eq!(out, expected);

        let mut b_t = [[0; 4]; 3];
        transpose_into(&b, &mut b_t);
        let mut out = start;
        matmul_transpose_rhs_accumulate_into(&a, &b_t, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn overwrite_forms_ignore_what_the_output_held() {
        let a: [[i64; 2]; 2] = pattern(6);
        let b: [[i64; 2]; 2] = pattern(7);
        let mut out = [[99; 2]; 2];
        matmul_into(&a, &b, &mut out);
        assert_eq!(out, naive(&a, &b));
        let mut out = [[99; 2]; 2];
        matmul_transpose_lhs_into(&a, &b, &mut out);
        let mut a_t = [[0; 2]; 2];
        transpose_into(&a, &mut a_t);
        assert_eq!(out, naive(&a_t, &b));
    }

    #[test]
    fn empty_inner_dimension_gives_zeros() {
        let a: [[i64; 0]; 2] = [[], []];
        let b: [[i64; 3]; 0] = [];
        let mut out = [[5; 3]; 2];
        matmul_into(&a, &b, &mut out);
        assert_eq!(out, [[0; 3]; 2]);
    }

    /// The run-time-sized products against the textbook loop, every layout, every element type
    /// with its own path (SIMD for f32 and f64 when the CPU has it, the reference loops for
    /// integers), odd sizes on both sides of the SIMD tiles, overwriting and accumulating.
    #[test]
    fn slice_products_agree_with_the_triple_loop() {
        fn check<T: Scalar + core::fmt::Debug>(to: fn(i64) -> T, close: fn(T, T) -> bool) {
            for (m, n, k) in [
                (1, 1, 1),
                (3, 5, 7),
                (6, 17, 25),
                (16, 33, 9),
                (1, 100, 150),
                (37, 1, 8),
            ] {
                let a: std::vec::Vec<i64> =
                    (0..m * k).map(|i| (i as i64 * 7 + 3) % 13 - 6).collect();
                let b: std::vec::Vec<i64> =
                    (0..k * n).map(|i| (i as i64 * 5 + 1) % 11 - 5).collect();
                let mut want = std::vec![0_i64; m * n];
                for i in 0..m {
                    for j in 0..n {
                        for p in 0..k {
                            want[i * n + j] += a[i * k + p] * b[p * n + j];
                        }
                    }
                }
                // The same product with each operand stored transposed.
                let a_t: std::vec::Vec<i64> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
                let b_t: std::vec::Vec<i64> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
                let conv = |v: &[i64]| v.iter().map(|&x| to(x)).collect::<std::vec::Vec<T>>();
                for (product, a, b) in [
                    (Product::Plain, &a, &b),
                    (Product::TransposeLhs, &a_t, &b),
                    (Product::TransposeRhs, &a, &b_t),
                ] {
                    for accumulate in [false, true] {
                        let mut c = conv(&std::vec![1_i64; m * n]);
                        gemm_slices(product, (m, n, k), &conv(a), &conv(b), &mut c, accumulate);
                        for (i, (&got, &w)) in c.iter().zip(&want).enumerate() {
                            let w = to(w + i64::from(accumulate));
                            assert!(
                                close(got, w),
                                "{product:?} {m}x{n}x{k} [{i}]: {got:?} vs {w:?}"
                            );
                        }
                    }
                }
            }
        }
        check::<f32>(
            |x| x as f32,
            |a, b| (a - b).abs() <= 1e-4 * b.abs().max(1.0),
        );
        check::<f64>(
            |x| x as f64,
            |a, b| (a - b).abs() <= 1e-12 * b.abs().max(1.0),
        );
        check::<i64>(|x| x, |a, b| a == b);
    }

    #[test]
    fn the_relu_epilogue_is_relus_rule() {
        let relu = |z: f32| Epilogue::Relu.apply(z).to_bits();
        assert_eq!(relu(2.5), 2.5_f32.to_bits());
        assert_eq!(relu(-2.5), 0.0_f32.to_bits());
        assert_eq!(relu(-0.0), 0.0_f32.to_bits()); // +0.0
        assert!(f32::from_bits(relu(f32::NAN)).is_nan());
        assert_eq!(relu(f32::NEG_INFINITY), 0.0_f32.to_bits());
        for z in [2.5_f32, -2.5, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY] {
            assert_eq!(
                relu(z),
                <crate::nn::Relu as crate::nn::Activation>::apply(z).to_bits(),
                "{z}"
            );
        }
        assert_eq!(
            Epilogue::Identity.apply(-0.0_f32).to_bits(),
            (-0.0_f32).to_bits()
        );
        assert_eq!(Epilogue::Relu.apply(-3_i64), 0);
    }

    /// Types without SIMD kernels (here `i64`) take the generic convolution, then the epilogue
    /// in a pass of its own: the same outputs as without it, the negative ones made 0.
    #[test]
    fn the_generic_convolution_applies_the_epilogue_after() {
        let shape = Conv {
            channels: 2,
            filters: 3,
            kernel: 3,
            padding: 1,
            height: 4,
            width: 5,
        };
        let batch = 2;
        let value = |n: usize, seed: usize| -> std::vec::Vec<i64> {
            (0..n)
                .map(|j| ((j * 31 + seed * 17) % 11) as i64 - 5)
                .collect()
        };
        let (x, w, bias) = (
            value(batch * shape.image_len(), 1),
            value(3 * 2 * 9, 2),
            value(3, 3),
        );
        let mut plain = std::vec![7; batch * shape.output_len()];
        conv2d_stride1(&shape, batch, &x, &w, &bias, &mut plain, Epilogue::Identity);
        let mut fused = std::vec![7; batch * shape.output_len()];
        conv2d_stride1(&shape, batch, &x, &w, &bias, &mut fused, Epilogue::Relu);
        assert!(plain.iter().any(|&z| z < 0) && plain.iter().any(|&z| z > 0));
        let want: std::vec::Vec<i64> = plain.iter().map(|&z| z.max(0)).collect();
        assert_eq!(fused, want);
    }

    /// LeNet-5's second convolution.
    #[cfg(target_arch = "x86_64")]
    const LENET_SECOND: Conv = Conv {
        channels: 6,
        filters: 16,
        kernel: 5,
        padding: 0,
        height: 14,
        width: 14,
    };

    /// `n` values in [-1, 1], spread out, from `seed`.
    #[cfg(target_arch = "x86_64")]
    fn spread_values(n: usize, seed: usize) -> std::vec::Vec<f32> {
        (0..n)
            .map(|j| ((j * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0)
            .collect()
    }

    /// The weight gradient's dispatch: LeNet-5's second layer by Winograd's method (its
    /// workspace sized for it, and the same bits as the kernel called directly), its first
    /// by Winograd's method with a row's tiles in the lanes on AVX-512 (the same), with the
    /// positions in the lanes on AVX2.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn lenets_weight_gradients_take_the_kernels_measured_for_them() {
        let Some(isa) = x86::detected_isa() else {
            std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
            return;
        };
        let first = LENET_FIRST;
        let second = LENET_SECOND;
        // Both kernels pad the images as they read them: the layer does not pad them first.
        assert!(conv_weight_gradient_pads::<f32>(&first));
        // f64 takes the portable loops, on images the layer pads first.
        assert!(!conv_weight_gradient_pads::<f64>(&first));
        assert_eq!(conv_weight_gradient_scratch::<f64>(&first, 64), 0);
        if isa == x86::Isa::Avx512 {
            assert_eq!(
                weight_gradient_kernel::<f32>(isa, &first.padded()),
                WeightGradientKernel::RowTilesInLanes
            );
            let batch = 3;
            let (x, dz) = (
                spread_values(batch * first.image_len(), 3),
                spread_values(batch * first.output_len(), 4),
            );
            let scratch_len = conv_weight_gradient_scratch::<f32>(&first, batch);
            assert_eq!(
                scratch_len,
                x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(&first)
            );
            let mut scratch = std::vec![0.0_f32; scratch_len];
            let mut by_dispatch = std::vec![0.0_f32; 6 * 25];
            conv2d_weight_gradient_stride1(
                &first,
                batch,
                &x,
                &dz,
                &mut scratch,
                &mut by_dispatch,
                false,
            );
            let mut by_kernel = std::vec![0.0_f32; 6 * 25];
            x86::weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
                isa,
                &first,
                batch,
                &x,
                x86::weight_grad_winograd_5x5_narrow_avx512::Gradients::PreActivation(&dz),
                &mut scratch,
                &mut by_kernel,
                false,
            );
            assert_eq!(by_dispatch, by_kernel);
            // A ReLU layer's dA and A, read by the same kernel (A > 0 everywhere: dZ = dA).
            let (a, mut db) = (std::vec![1.0_f32; dz.len()], [0.0_f32; 6]);
            let mut through_relu = std::vec![0.0_f32; 6 * 25];
            assert!(conv2d_weight_and_bias_gradients_through_relu(
                &first,
                batch,
                &x,
                &a,
                &dz,
                &mut scratch,
                &mut through_relu,
                &mut db,
            ));
            assert_eq!(through_relu, by_kernel);
        } else {
            assert_eq!(
                weight_gradient_kernel::<f32>(isa, &first.padded()),
                WeightGradientKernel::PositionsInLanes
            );
        }
        // Not in f64, nor for the second layer (the filters in the lanes): the caller forms dZ.
        let first_f64 = (
            std::vec![0.0_f64; first.image_len()],
            std::vec![0.0_f64; first.output_len()],
        );
        let f64_scratch = conv_weight_gradient_scratch::<f64>(&first, 1);
        assert!(!conv2d_weight_and_bias_gradients_through_relu(
            &first,
            1,
            &first_f64.0,
            &first_f64.1,
            &first_f64.1,
            &mut std::vec![0.0; f64_scratch],
            &mut [0.0; 6 * 25],
            &mut [0.0; 6],
        ));
        let second_scratch = conv_weight_gradient_scratch::<f32>(&second, 1);
        assert!(!conv2d_weight_and_bias_gradients_through_relu(
            &second,
            1,
            &std::vec![0.0_f32; second.image_len()],
            &std::vec![0.0_f32; second.output_len()],
            &std::vec![0.0_f32; second.output_len()],
            &mut std::vec![0.0; second_scratch],
            &mut std::vec![0.0; 16 * 6 * 25],
            &mut [0.0; 16],
        ));
        assert_eq!(
            weight_gradient_kernel::<f32>(isa, &second),
            WeightGradientKernel::WinogradRows
        );
        let batch = 5;
        let value = spread_values;
        let (x, dz) = (
            value(batch * second.image_len(), 1),
            value(batch * second.output_len(), 2),
        );
        let scratch_len = conv_weight_gradient_scratch::<f32>(&second, batch);
        assert_eq!(
            scratch_len,
            x86::weight_gradient_winograd_scratch(&second, batch, x86::lanes::<f32>(isa))
        );
        let mut by_dispatch = std::vec![0.0_f32; 16 * 6 * 25];
        let mut scratch = std::vec![0.0_f32; scratch_len];
        conv2d_weight_gradient_stride1(
            &second,
            batch,
            &x,
            &dz,
            &mut scratch,
            &mut by_dispatch,
            false,
        );
        let mut by_winograd = std::vec![0.0_f32; 16 * 6 * 25];
        x86::conv2d_weight_gradient_winograd(
            isa,
            &second,
            batch,
            &x,
            &dz,
            &mut scratch,
            &mut by_winograd,
            false,
        );
        assert_eq!(by_dispatch, by_winograd);
    }

    /// On a CPU with AVX2 or AVX-512, LeNet's first layer in `f32` (the positions in the lanes),
    /// and one with 20 filters whose transforms need the larger stack buffer, take the forward
    /// pass by Winograd's method down the columns: the batch function's outputs are its
    /// outputs, bit for bit, and `conv_stack_scratch` counts its buffer; in `f64` they take
    /// the portable loops, whose sums are the definition's to a few units in the last place.
    #[cfg(target_arch = "x86_64")]
    #[test]
    #[allow(unsafe_code)] // the kernel's output as it takes it
    fn lenets_first_convolution_takes_winograd_down_the_columns_in_f32() {
        let Some(isa) = x86::detected_isa() else {
            std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
            return;
        };
        let lenet = LENET_FIRST;
        let wider = Conv {
            filters: 20,
            ..lenet
        };
        let lanes = x86::lanes::<f32>(isa);
        for (shape, buffer) in [(lenet, SMALL_STACK_SCRATCH), (wider, STACK_SCRATCH)] {
            let scratch_len = x86::conv_winograd_columns_f32::scratch_len(&shape, lanes);
            assert!(x86::conv_winograd_columns_f32::applies(&shape, lanes));
            assert!(
                scratch_len <= buffer
                    && (buffer == SMALL_STACK_SCRATCH || scratch_len > SMALL_STACK_SCRATCH)
            );
            assert_eq!(conv_stack_scratch(&shape, 4), buffer);
            let batch = 2;
            let (x, w, bias) = (
                spread_values(batch * shape.image_len(), 1),
                spread_values(shape.filters * 25, 2),
                spread_values(shape.filters, 3),
            );
            let mut by_dispatch = std::vec![0.0_f32; batch * shape.output_len()];
            conv2d_stride1(
                &shape,
                batch,
                &x,
                &w,
                &bias,
                &mut by_dispatch,
                Epilogue::Relu,
            );
            let mut by_columns = std::vec![0.0_f32; batch * shape.output_len()];
            let mut scratch = std::vec![core::mem::MaybeUninit::uninit(); scratch_len];
            x86::conv_winograd_columns_f32::conv2d_stride1_winograd_columns(
                isa,
                &shape,
                batch,
                &x,
                &w,
                &bias,
                // SAFETY: the kernel writes only initialized values (its outputs).
                unsafe { as_uninit_mut(&mut by_columns) },
                &mut scratch,
                Epilogue::Relu,
            );
            assert_eq!(by_dispatch, by_columns);
            // In f64, the direct sums: the definition's to within a few units in the last place.
            let to_f64 = |v: &[f32]| {
                v.iter()
                    .map(|&v| f64::from(v))
                    .collect::<std::vec::Vec<_>>()
            };
            let (x, w, bias) = (to_f64(&x), to_f64(&w), to_f64(&bias));
            let mut in_f64 = std::vec![0.0_f64; batch * shape.output_len()];
            conv2d_stride1(
                &shape,
                batch,
                &x,
                &w,
                &bias,
                &mut in_f64,
                Epilogue::Identity,
            );
            let mut direct = std::vec![0.0_f64; shape.output_len()];
            reference::conv2d_stride1(&shape, &x[..shape.image_len()], &w, &bias, &mut direct);
            for (got, want) in in_f64.iter().zip(&direct) {
                assert!(
                    (got - want).abs() <= 1e-13 * want.abs().max(1.0),
                    "{got} against {want}"
                );
            }
        }
    }

    /// On a CPU with AVX2 or AVX-512, a stride-1 convolution with the filters in the lanes and a
    /// 3 x 3 to 5 x 5 kernel (LeNet's second layer) takes the Winograd forward pass: the batch
    /// function's outputs are its outputs, bit for bit (the direct kernel's differ in the last
    /// bits), and its stack buffer is what `conv_stack_scratch` counts.
    #[cfg(target_arch = "x86_64")]
    #[test]
    #[allow(unsafe_code)] // the kernel's output as it takes it
    fn lenets_second_convolution_takes_the_winograd_forward_pass() {
        let Some(isa) = x86::detected_isa() else {
            std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
            return;
        };
        let shape = LENET_SECOND;
        let value = spread_values;
        let batch = 2;
        let (x, w, bias) = (
            value(batch * shape.image_len(), 1),
            value(16 * 6 * 25, 2),
            value(16, 3),
        );
        let mut by_dispatch = std::vec![0.0_f32; batch * shape.output_len()];
        conv2d_stride1(
            &shape,
            batch,
            &x,
            &w,
            &bias,
            &mut by_dispatch,
            Epilogue::Identity,
        );
        let mut by_winograd = std::vec![0.0_f32; batch * shape.output_len()];
        let lanes = x86::lanes::<f32>(isa);
        let scratch_len = x86::winograd_forward_scratch(&shape, lanes);
        assert!(scratch_len <= WINOGRAD_STACK_SCRATCH);
        // With AVX-512, 3 tiles of 8 points across its rows of 10 (9,088 elements of scratch,
        // all but 128 of the buffer); with AVX2, 5 tiles of 6.
        let (points, expected_scratch) = if lanes == 16 { (8, 9088) } else { (6, 7736) };
        assert_eq!(x86::winograd_forward_points(&shape, lanes), points);
        assert_eq!(scratch_len, expected_scratch);
        let mut scratch = std::vec![core::mem::MaybeUninit::uninit(); scratch_len];
        x86::conv2d_stride1_winograd(
            isa,
            &shape,
            batch,
            &x,
            &w,
            &bias,
            // SAFETY: the kernel writes only initialized values (its outputs).
            unsafe { as_uninit_mut(&mut by_winograd) },
            &mut scratch,
            Epilogue::Identity,
        );
        assert_eq!(by_dispatch, by_winograd);
        let mut direct = std::vec![0.0_f32; shape.output_len()];
        reference::conv2d_stride1(&shape, &x[..shape.image_len()], &w, &bias, &mut direct);
        assert_ne!(
            direct[..],
            by_winograd[..shape.output_len()],
            "the direct sums round differently"
        );
        assert_eq!(conv_stack_scratch(&shape, 4), WINOGRAD_STACK_SCRATCH);
    }

    /// Whichever kernel a batch takes (filters or positions in the lanes, padded or not, with
    /// or without the scratch: without it, the generic loops), the batch functions compute each
    /// image's convolution and the batch's summed weight gradient as the per-image definitions
    /// do, in every element type.
    #[test]
    fn batches_of_convolutions_match_the_per_image_definitions() {
        let shapes = [
            (1, 6, 5, 2, 28, 28),  // LeNet's first layer: positions in the lanes
            (6, 16, 5, 0, 14, 14), // its second: filters in the lanes
            (2, 20, 3, 1, 5, 6),   // padded, filters in the lanes (a partial vector)
            (8, 70, 3, 0, 9, 9),   // weights too large for the stack buffer: flat
            // Padded image too large for it: the padding masked off (in `f32`, Winograd's
            // method down the columns).
            (1, 3, 3, 1, 70, 70),
            // No padding: flat (in `f32` with AVX2, down the columns).
            (2, 5, 3, 0, 4, 21),
            (0, 2, 1, 0, 2, 2), // no input channels: the bias only
        ];
        for (i, &(channels, filters, kernel, padding, height, width)) in shapes.iter().enumerate() {
            let shape = Conv {
                channels,
                filters,
                kernel,
                padding,
                height,
                width,
            };
            let value = |n: usize, seed: usize| -> std::vec::Vec<i64> {
                (0..n)
                    .map(|j| ((j * 7 + seed * 13 + i) % 11) as i64 - 5)
                    .collect()
            };
            let steps = channels * kernel * kernel;
            let batch = 3;
            let (x, w, bias) = (
                value(batch * shape.image_len(), 1),
                value(filters * steps, 2),
                value(filters, 3),
            );
            let dz = value(batch * shape.output_len(), 4);
            let padded = shape.padded();
            let mut x_padded = std::vec![0; batch * padded.image_len()];
            for (x, p) in x
                .chunks(shape.image_len().max(1))
                .zip(x_padded.chunks_mut(padded.image_len().max(1)))
            {
                pad(&shape, x, p);
            }
            // The definitions, image by image, in exact integers.
            let mut want_out = std::vec![0; batch * shape.output_len()];
            let mut want_dw = value(filters * steps, 5);
            for b in 0..batch {
                let (xi, oi) = (b * shape.image_len(), b * shape.output_len());
                reference::conv2d_stride1(
                    &shape,
                    &x[xi..xi + shape.image_len()],
                    &w,
                    &bias,
                    &mut want_out[oi..oi + shape.output_len()],
                );
                let pi = b * padded.image_len();
                reference::conv2d_weight_gradient_stride1(
                    &padded,
                    &x_padded[pi..pi + padded.image_len()],
                    &dz[oi..oi + shape.output_len()],
                    &mut want_dw,
                    true,
                );
            }
            /// `tolerance`: of the outputs and the weight gradients, per unit of the sum of the
            /// terms' sizes (the Winograd forward pass and weight gradient round their
            /// transforms; everything else is exact here).
            fn check<T: Scalar + Into<f64>>(
                shape: &Conv,
                operands: [&[i64]; 6],
                want_out: &[i64],
                want_dw: &[i64],
                from: impl Fn(i64) -> T,
                tolerance: f64,
            ) {
                let [x, w, bias, dz, x_padded, dw_start] =
                    operands.map(|o| o.iter().map(|&v| from(v)).collect::<std::vec::Vec<T>>());
                let batch = 3;
                let mut out = std::vec![from(99); want_out.len()];
                conv2d_stride1(shape, batch, &x, &w, &bias, &mut out, Epilogue::Identity);
                // Every value is at most 5 in size.
                let terms = (shape.channels * shape.kernel * shape.kernel * 25 + 5) as f64;
                for (j, (&g, &e)) in out.iter().zip(want_out).enumerate() {
                    let g: f64 = g.into();
                    assert!(
                        (g - e as f64).abs() <= tolerance * terms,
                        "{shape:?}: output {j} is {g}, expected {e}"
                    );
                }
                let padded = shape.padded();
                let scratch = conv_weight_gradient_scratch::<T>(&padded, batch);
                // The padded images, and where the kernel pads them itself, the images as they
                // are.
                let unpadded = (shape.padding > 0 && conv_weight_gradient_pads::<T>(shape))
                    .then_some((shape, &x));
                for (shape, x) in [(&padded, &x_padded)].into_iter().chain(unpadded) {
                    for scratch_len in [scratch, 0] {
                        let mut scratch = std::vec![from(0); scratch_len];
                        let mut dw = dw_start.clone();
                        conv2d_weight_gradient_stride1(
                            shape,
                            batch,
                            x,
                            &dz,
                            &mut scratch,
                            &mut dw,
                            true,
                        );
                        // Winograd's weight gradient rounds too (sums at its tiles' points).
                        let terms =
                            (batch * shape.out_height() * shape.out_width() * 25 + 5) as f64;
                        for (j, (&g, &e)) in dw.iter().zip(want_dw).enumerate() {
                            let g: f64 = g.into();
                            assert!(
                                (g - e as f64).abs() <= tolerance * terms,
                                "{shape:?} scratch {scratch_len}: dW {j} is {g}, expected {e}"
                            );
                        }
                    }
                }
            }
            let operands = [
                &x[..],
                &w,
                &bias,
                &dz,
                &x_padded,
                &value(filters * steps, 5),
            ];
            // Small integers: every sum is exact in f32 and f64, whatever the order, but for
            // Winograd's forward pass and weight gradient (their transforms have fractions).
            check::<f32>(&shape, operands, &want_out, &want_dw, |v| v as f32, 1e-6);
            check::<f64>(&shape, operands, &want_out, &want_dw, |v| v as f64, 1e-14);
            check::<i32>(&shape, operands, &want_out, &want_dw, |v| v as i32, 0.0);
        }
    }
}
