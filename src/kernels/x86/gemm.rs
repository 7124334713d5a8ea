//! Matrix products, `C (+)= op(A)·op(B)` in `f32` (AVX-512 and AVX2) and `f64` (AVX2's kernels on
//! both), row-major, any sizes; reached through the safe [`gemm`], which picks the path from
//! the whole product's shape (`super::gemm_packed::path`): the packed micro-kernel
//! (`super::gemm_packed`) where the copy of `B` pays, else the tiles that read the operands in
//! place (`super::gemm_unpacked`).

use super::gemm_packed::{PACKED_BLOCK_BYTES, PACKED_KC, Path, gemm_packed, path};
use super::gemm_unpacked::run;
use super::isa::{Isa, assert_isa};
use super::simd::{Avx2F32, Avx2F64, Avx512F32, Simd};
use crate::kernels::shape::Product;
use core::ops::Range;

macro_rules! entry {
    ($name:ident, $packed:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; lengths checked by [`gemm`],
        /// `m`, `n` and `k` above 0 (an empty product never reaches a kernel), `rows` inside
        /// `0..m` and `c` exactly those rows.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        pub(super) unsafe fn $name(
            layout: Product,
            m: usize,
            n: usize,
            k: usize,
            rows: Range<usize>,
            a: &[$e],
            b: &[$e],
            c: &mut [$e],
            accumulate: bool,
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { run::<$simd>(layout, m, n, k, rows, a, b, c, accumulate) }
        }

        /// The packed path (`super::gemm_packed`), kept out of line: its 48 KiB buffer would
        /// otherwise sit in the stack frame of every product, single-sample predictions
        /// included.
        ///
        /// # Safety
        ///
        /// As the unpacked entry.
        #[target_feature(enable = $features)]
        #[inline(never)]
        #[allow(clippy::too_many_arguments)]
        pub(super) unsafe fn $packed(
            layout: Product,
            m: usize,
            n: usize,
            k: usize,
            rows: Range<usize>,
            a: &[$e],
            b: &[$e],
            c: &mut [$e],
            accumulate: bool,
        ) {
            const BLOCK: usize = PACKED_BLOCK_BYTES / size_of::<$e>();
            const MR: usize = <$simd as Simd>::PACKED_ROWS;
            const NV: usize = <$simd as Simd>::PACKED_VECTORS;
            // The buffer holds at least one micro-panel of a whole k block.
            const { assert!(PACKED_KC * NV * <$simd as Simd>::LANES <= BLOCK) };
            // SAFETY: forwarded from this function's contract.
            unsafe {
                gemm_packed::<$simd, MR, NV, BLOCK>(layout, m, n, k, rows, a, b, c, accumulate)
            }
        }
    };
}
#[allow(unused_imports)]
pub(super) use entry;

entry!(
    gemm_avx512_f32,
    gemm_avx512_f32_packed,
    Avx512F32,
    f32,
    "avx512f"
);
entry!(
    gemm_avx2_f32,
    gemm_avx2_f32_packed,
    Avx2F32,
    f32,
    "avx2,fma"
);
entry!(
    gemm_avx2_f64,
    gemm_avx2_f64_packed,
    Avx2F64,
    f64,
    "avx2,fma"
);

/// The bytes of the packed path's buffer when an `m x n x k` product with `layout` takes it,
/// else 0 (`m`, `n` and `k` above 0: an empty product reaches no kernel).
pub(crate) const fn packed_stack_bytes(
    layout: Product,
    m: usize,
    n: usize,
    k: usize,
    element_size: usize,
) -> usize {
    match path(layout, m, n, k, element_size) {
        Path::Packed => PACKED_BLOCK_BYTES,
        Path::Outer | Path::Dot => 0,
    }
}

/// The element types with SIMD kernels.
pub(crate) trait Element: Copy + Default + Send + Sync + 'static {
    /// Whether the type has AVX-512 product kernels; without them it takes the AVX2 ones on a
    /// CPU with AVX-512 too.
    const AVX512: bool;

    /// Runs rows `rows` of the product on `path` with `isa`'s kernels.
    ///
    /// # Safety
    ///
    /// As [`run`]: the CPU has `isa`, the slices were checked by [`gemm`], `m`, `n` and `k` are
    /// above 0, `rows` is inside `0..m` and `c` holds exactly those rows.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_rows(
        isa: Isa,
        path: Path,
        layout: Product,
        m: usize,
        n: usize,
        k: usize,
        rows: Range<usize>,
        a: &[Self],
        b: &[Self],
        c: &mut [Self],
        accumulate: bool,
    );
}

macro_rules! element {
    ($e:ty, avx512: $avx512:ident, $avx512_packed:ident, avx2: $avx2:ident, $avx2_packed:ident) => {
        element!($e, true, $avx512, $avx512_packed, $avx2, $avx2_packed);
    };
    ($e:ty, avx2 only: $avx2:ident, $avx2_packed:ident) => {
        // The AVX-512 arms are never taken (`gemm` asks for AVX2): the AVX2 names fill them.
        element!($e, false, $avx2, $avx2_packed, $avx2, $avx2_packed);
    };
    ($e:ty, $has_avx512:literal, $avx512:ident, $avx512_packed:ident, $avx2:ident, $avx2_packed:ident) => {
        impl Element for $e {
            const AVX512: bool = $has_avx512;

            unsafe fn run_rows(
                isa: Isa,
                path: Path,
                layout: Product,
                m: usize,
                n: usize,
                k: usize,
                rows: Range<usize>,
                a: &[$e],
                b: &[$e],
                c: &mut [$e],
                accumulate: bool,
            ) {
                // SAFETY (all four): forwarded from this function's contract.
                match (isa, path == Path::Packed) {
                    (Isa::Avx512, false) => unsafe {
                        $avx512(layout, m, n, k, rows, a, b, c, accumulate)
                    },
                    (Isa::Avx512, true) => unsafe {
                        $avx512_packed(layout, m, n, k, rows, a, b, c, accumulate)
                    },
                    (Isa::Avx2Fma, false) => unsafe {
                        $avx2(layout, m, n, k, rows, a, b, c, accumulate)
                    },
                    (Isa::Avx2Fma, true) => unsafe {
                        $avx2_packed(layout, m, n, k, rows, a, b, c, accumulate)
                    },
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(super) use element;
element!(
    f32,
    avx512: gemm_avx512_f32,
    gemm_avx512_f32_packed,
    avx2: gemm_avx2_f32,
    gemm_avx2_f32_packed
);
// `f64` takes the AVX2 kernels on AVX-512 too (every CPU with AVX-512F has AVX2 and FMA):
// its products serve gradient checks and the portable convolutions rather than speed, and a
// set of AVX-512 tiles of its own was 8% of the crate's build.
element!(f64, avx2 only: gemm_avx2_f64, gemm_avx2_f64_packed);

/// `C = op(A)·op(B)` (or `C +=` when `accumulate`) with `isa`; `C` is `m x n`.
///
/// With the `threads` feature and more than one thread in rayon's pool, a large product is split
/// by rows of `C` across the pool. Each element is still computed by one thread in the same
/// order, so the result is the same bit for bit whatever the number of threads.
///
/// # Panics
///
/// When a slice's length does not fit the dimensions, or when the CPU does not have `isa`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<E: Element>(
    isa: Isa,
    layout: Product,
    m: usize,
    n: usize,
    k: usize,
    a: &[E],
    b: &[E],
    c: &mut [E],
    accumulate: bool,
) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "operand lengths {}, {}, {} do not fit an {m}x{k} by {k}x{n} product",
        a.len(),
        b.len(),
        c.len()
    );
    // A type without AVX-512 kernels takes the AVX2 ones (which the CPU must then have).
    let isa = if E::AVX512 { isa } else { Isa::Avx2Fma };
    assert_isa(isa);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // An empty sum. Handled here so that no kernel forms pointers into empty operands
        // (an offset past the end of an allocation is undefined even if never read).
        if !accumulate {
            c.fill(E::default());
        }
        return;
    }
    // Decided on the whole product, not on a thread's rows: the dot-product tiles add in
    // another order, and every split across threads must give the same bits.
    let path = path(layout, m, n, k, size_of::<E>());
    #[cfg(feature = "threads")]
    if let Some(rows_per_thread) = parallel_split(m, n, k) {
        crate::kernels::threads::in_configured_pool(|| {
            rayon::scope(|scope| {
                for (t, chunk) in c.chunks_mut(rows_per_thread * n).enumerate() {
                    scope.spawn(move |_| {
                        let start = t * rows_per_thread;
                        let rows = start..start + chunk.len() / n;
                        // SAFETY: lengths and instruction set checked above; `chunk` is exactly
                        // the rows `rows` of C, disjoint from every other thread's chunk.
                        unsafe {
                            E::run_rows(isa, path, layout, m, n, k, rows, a, b, chunk, accumulate)
                        }
                    });
                }
            });
        });
        return;
    }
    // SAFETY: lengths and instruction set checked above; `c` holds all the rows.
    unsafe { E::run_rows(isa, path, layout, m, n, k, 0..m, a, b, c, accumulate) }
}

/// Rows of `C` per thread when the product is worth splitting across rayon's pool, else `None`.
#[cfg(feature = "threads")]
pub(super) fn parallel_split(m: usize, n: usize, k: usize) -> Option<usize> {
    /// Below this many multiply-adds (about 0.1 ms on one core) a split costs more than it saves:
    /// measured on 2 vCPUs, splitting the training step's products (up to 6.4 million) made an
    /// epoch 1.5 times slower.
    const MIN_WORK: usize = 1 << 24;
    let threads = crate::kernels::threads::in_configured_pool(rayon::current_num_threads);
    if threads < 2 || n == 0 || m < 16 || m * n * k < MIN_WORK {
        return None;
    }
    // Whole tiles per thread: 24 rows is a multiple of every tile height (12, 8, 6, 2).
    Some(m.div_ceil(threads).next_multiple_of(24))
}
