//! SIMD kernels on x86-64, AVX-512F or AVX2+FMA, chosen at run time: matrix products for `f32`
//! (both instruction sets) and `f64` (AVX2's), convolutions and 2x2 max pooling for `f32`, int8
//! dot products and requantization.
//!
//! With [`le_bytes`](super::le_bytes) (compile-time decoding of weights files), this is the
//! crate's only `unsafe` code. Everything here is reached through the safe functions
//! at the bottom ([`gemm_f32`], [`gemm_f64`]), which check every slice length against the
//! dimensions before any pointer is formed, and pick an instruction set the CPU has.
//!
//! # How the products are computed
//!
//! Register-blocked micro-kernels cover the three layouts. At this crate's sizes (a few hundred
//! rows and columns) the operands sit in L1/L2 cache, so only one case copies (packs) an operand:
//! `A·Bᵀ` with many rows, where reading `Bᵀ` would otherwise stride across `B`.
//!
//! - **Outer-product tiles** for `A·B` and `Aᵀ·B`: an `MR x NR` block of the output lives in
//!   `MR · NV` vector registers (`NR = NV · LANES`); each step over `k` loads `NV` vectors of a row
//!   of `B`, broadcasts `MR` elements of `A` and does `MR · NV` fused multiply-adds. `A·B` and
//!   `Aᵀ·B` differ only in the strides used to find `A`'s elements. `k` is cut into blocks of
//!   [`KC`] so that the `KC x NR` panel of `B` stays in L1 while every row block of `A` passes
//!   over it.
//! - **Dot-product tiles** for `A·Bᵀ`: both operands are read along their rows (the `k`
//!   direction). An `MR x NR` block of outputs keeps one vector of partial sums per output,
//!   loads `MR + NR` vectors per step, does `MR · NR` fused multiply-adds, and sums each vector
//!   horizontally at the end. With a single row of `A` (a matrix-vector product), the tiles are
//!   1 x 8 and prefetch the rows of `B`, which stream from L2.
//! - **Packed panels** for `A·Bᵀ` from 32 rows of `A` on: each `KC x NR` panel of `Bᵀ` is
//!   transposed once into a stack buffer and then shared by every row tile, through the
//!   outer-product kernel. This path is a separate, never-inlined function, so its 16-32 KiB
//!   buffer is not in the stack frame of the other paths.
//!
//! Edges (sizes that are not multiples of the tile) use the same kernels with masked loads and
//! stores, so every shape takes the fast path.

#![allow(unsafe_code)]

use core::arch::x86_64::*;
use core::mem::MaybeUninit;
use core::ops::Range;

use super::{Conv, Epilogue, assume_init_mut};

// Training only: without a heap there is no backward pass.
#[cfg(feature = "alloc")]
pub(crate) mod row_tiles;
pub(crate) mod winograd_columns;

/// How the operands of `C = op(A) · op(B)` are laid out (all row-major, `C` is `m x n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `C = A·B`: `A` is `m x k`, `B` is `k x n`.
    Plain,
    /// `C = Aᵀ·B`: `A` is stored `k x m`, `B` is `k x n`.
    TransposeLhs,
    /// `C = A·Bᵀ`: `A` is `m x k`, `B` is stored `n x k`.
    TransposeRhs,
}

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

/// `[f(0), f(1), .., f(N - 1)]`, as `core::array::from_fn` gives it, in a plain loop. The
/// kernels build their registers' arrays with it: `from_fn`'s general machinery (fallible
/// construction, a guard that drops the elements built so far) expanded to a fifth of the
/// crate's LLVM IR, once per call site and tile size, all of it for the optimizer to remove.
#[inline(always)]
pub(crate) fn array_from<T, const N: usize>(mut f: impl FnMut(usize) -> T) -> [T; N] {
    let mut out = [const { MaybeUninit::<T>::uninit() }; N];
    // A counted loop without iterators: the least IR to expand at every call site.
    let mut i = 0;
    while i < N {
        out[i] = MaybeUninit::new(f(i));
        i += 1;
    }
    // SAFETY: the loop wrote every element (a panic in `f` leaves, and leaks, the elements
    // written so far); `[MaybeUninit<T>; N]` has the layout of `[T; N]`.
    unsafe { core::ptr::from_ref(&out).cast::<[T; N]>().read() }
}

/// The instruction sets these kernels can use, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Avx2Fma,
}

/// The best instruction set this CPU has, detected once (with `std`), or the one the build targets
/// (without `std`, where run-time detection is not available); lowered by the limits of
/// [`super::instruction_set`] (the process's `CONSTMAT_INSTRUCTION_SET`, this thread's
/// `with_instruction_set`).
// Inlined: the kernels' entry points ask once per call, some once per row.
#[inline]
pub(crate) fn detected_isa() -> Option<Isa> {
    // 1: none, 2: AVX2+FMA, 3: AVX-512F (the codes of `InstructionSet`).
    #[cfg(feature = "std")]
    let code = {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not yet detected.
        static DETECTED: AtomicU8 = AtomicU8::new(0);
        #[cold]
        fn detect() -> u8 {
            let code = if std::is_x86_feature_detected!("avx512f") {
                3
            } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
            {
                2
            } else {
                1
            };
            let code = code.min(super::instruction_set::process_limit());
            DETECTED.store(code, Ordering::Relaxed);
            code
        }
        match DETECTED.load(Ordering::Relaxed) {
            0 => detect(),
            code => code,
        }
    };
    #[cfg(not(feature = "std"))]
    let code = if cfg!(target_feature = "avx512f") {
        3
    } else if cfg!(all(target_feature = "avx2", target_feature = "fma")) {
        2
    } else {
        1
    };
    match code.min(super::instruction_set::thread_limit()) {
        3 => Some(Isa::Avx512),
        2 => Some(Isa::Avx2Fma),
        _ => None,
    }
}

/// Whether `isa` can run on this CPU (always true for what [`detected_isa`] returns; the tests
/// use it to run every instruction set the machine has).
#[cfg(all(test, feature = "std"))]
pub(crate) fn isa_available(isa: Isa) -> bool {
    match isa {
        Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
        Isa::Avx2Fma => {
            std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
        }
    }
}

/// Rows of the `k` dimension per block of the outer-product kernel: a `KC x NR` panel of `B`
/// (16 KiB for AVX-512 `f32`) stays in L1 while the row blocks of `A` pass over it.
const KC: usize = 128;

/// Vector operations on one element type with one instruction set.
///
/// # Safety
///
/// Every method may only be called on a CPU that has the instruction set of the implementation
/// (the `unsafe fn` + `#[target_feature]` pairs below), with pointers valid as each method states.
trait Simd {
    type E: Copy + Default + core::ops::Add<Output = Self::E>;
    type V: Copy;
    type Mask: Copy;
    const LANES: usize;
    /// Rows of an outer-product tile.
    const OUTER_ROWS: usize;
    /// Vectors per row of an outer-product tile.
    const OUTER_VECTORS: usize;
    /// Rows (of `A`) of a dot-product tile.
    const DOT_ROWS: usize;
    /// Rows of `B` (columns of the output) of a dot-product tile.
    const DOT_COLS: usize;
    /// Vectors per tile of the flat convolution kernel (2 or 3), `OUTER_ROWS` filters each.
    const FLAT_VECTORS: usize;
    /// Output rows per tile of the Winograd forward kernel, at most (the rows are shared out
    /// evenly): 2 accumulators each.
    const WINOGRAD_ROWS: usize;
    /// Pairs `(c, ky)` per tile of the Winograd weight gradient: 6 accumulators each.
    // Training only: without a heap there is no backward pass.
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    const WINOGRAD_GRADIENT_PAIRS: usize;
    /// Whether the weight gradient with the positions in the lanes takes tiles along a kernel
    /// column for kernels of 4 and 5 ([`COLUMN_TILE_ROWS`] filters by `K` steps): their 19
    /// vectors fit 32 registers, not 16 (with AVX2 the tile spilled to the stack).
    // Training only: without a heap there is no backward pass.
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    const COLUMN_TILES: bool;

    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: Self::E) -> Self::V;
    /// `a · b + c`, fused.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `a + b` (on the adders, which the fused multiply-adds leave free on some CPUs).
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// `a - b`.
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// `max(v, 0)` per lane, a NaN kept and `-0.0` made `+0.0` ([`Epilogue::Relu`]): the lanes
    /// "not less than or equal to 0, or unordered" kept, the others zeroed.
    unsafe fn relu(v: Self::V) -> Self::V;
    /// `a · b + c` in the lanes selected by `m`; the other lanes are `c`'s, bit for bit (a
    /// masked-off product of zeros would turn a `-0.0` into `+0.0`).
    unsafe fn fma_masked(a: Self::V, b: Self::V, c: Self::V, m: Self::Mask) -> Self::V;
    /// `v` with its lanes turned: lane `i` of the result is lane `(i + by) % LANES` of `v`
    /// (`by < LANES`).
    unsafe fn rotate_lanes(v: Self::V, by: usize) -> Self::V;
    unsafe fn sum(v: Self::V) -> Self::E;
    /// The sums of four vectors, `[sum(v[0]), .., sum(v[3])]`.
    #[inline(always)]
    unsafe fn sum4(v: [Self::V; 4]) -> [Self::E; 4] {
        // SAFETY: the caller's contract (the instruction set is present).
        unsafe {
            [
                Self::sum(v[0]),
                Self::sum(v[1]),
                Self::sum(v[2]),
                Self::sum(v[3]),
            ]
        }
    }
    /// A mask selecting the first `n` lanes (`n <= LANES`).
    unsafe fn mask(n: usize) -> Self::Mask;
    /// A mask selecting the lanes `lo..hi` (`lo <= hi <= LANES`).
    unsafe fn mask_range(lo: usize, hi: usize) -> Self::Mask;
    /// `p` must be valid for reading `LANES` elements.
    unsafe fn load(p: *const Self::E) -> Self::V;
    /// The lanes selected by `m` must be valid for reading; the others are zero and never read.
    unsafe fn load_masked(p: *const Self::E, m: Self::Mask) -> Self::V;
    /// `v` with the lanes selected by `m` loaded from `p` (which must be valid for reading
    /// them; the others are never read).
    unsafe fn load_masked_into(v: Self::V, p: *const Self::E, m: Self::Mask) -> Self::V;
    /// `p` must be valid for writing `LANES` elements.
    unsafe fn store(p: *mut Self::E, v: Self::V);
    /// The lanes selected by `m` must be valid for writing; the others are not touched.
    unsafe fn store_masked(p: *mut Self::E, m: Self::Mask, v: Self::V);
    /// Stores `rows` transposed: lane `l < count` of `rows[i]` to `out[l·stride + i]`.
    /// `rows.len() <= LANES`, `count <= LANES`, and those elements must be valid for writing.
    #[inline(always)]
    unsafe fn store_transposed(rows: &[Self::V], out: *mut Self::E, stride: usize, count: usize) {
        // SAFETY: the caller's contract.
        unsafe { store_transposed_lanes::<Self>(rows, out, stride, count) }
    }
}

/// [`Simd::store_transposed`] a lane at a time, through a buffer.
///
/// # Safety
///
/// As [`Simd::store_transposed`].
#[inline(always)]
unsafe fn store_transposed_lanes<S: Simd + ?Sized>(
    rows: &[S::V],
    out: *mut S::E,
    stride: usize,
    count: usize,
) {
    // SAFETY: the instruction set is present and the elements written are valid (the
    // caller's contract); `lanes` holds the LANES <= 16 elements stored.
    unsafe {
        let mut lanes = [S::E::default(); 16];
        for (i, &row) in rows.iter().enumerate() {
            S::store(lanes.as_mut_ptr(), row);
            for (lane, &value) in lanes[..count].iter().enumerate() {
                *out.add(lane * stride + i) = value;
            }
        }
    }
}

/// `v` after `epilogue`, lane by lane as [`Epilogue::apply`] does, bit for bit.
///
/// # Safety
///
/// The CPU has `S`'s instruction set.
#[inline(always)]
unsafe fn finish<S: Simd>(v: S::V, epilogue: Epilogue) -> S::V {
    match epilogue {
        Epilogue::Identity => v,
        // SAFETY: the caller's contract.
        Epilogue::Relu => unsafe { S::relu(v) },
    }
}

macro_rules! avx512 {
    ($name:ident, $e:ty, $v:ty, $mask:ty, $lanes:expr, $suffix:ident) => {
        #[derive(Clone, Copy)]
        struct $name;

        impl Simd for $name {
            type E = $e;
            type V = $v;
            type Mask = $mask;
            const LANES: usize = $lanes;
            const OUTER_ROWS: usize = 8;
            const OUTER_VECTORS: usize = 2;
            const FLAT_VECTORS: usize = 3;
            // 12 accumulators (2 points each), 2 vectors of the filters' transforms and the
            // broadcasts of up to 10 rows.
            const WINOGRAD_ROWS: usize = 6;
            // 30 accumulators, a vector of the gradients' transforms and a broadcast.
            const WINOGRAD_GRADIENT_PAIRS: usize = 5;
            const COLUMN_TILES: bool = true;
            // 24 accumulators, 6 vectors of A and one of B: 31 of the 32 registers.
            const DOT_ROWS: usize = 6;
            const DOT_COLS: usize = 4;

            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn zero() -> $v {
                avx512!(@op setzero, $suffix)()
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn splat(x: $e) -> $v {
                avx512!(@op set1, $suffix)(x)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn fma(a: $v, b: $v, c: $v) -> $v {
                avx512!(@op fmadd, $suffix)(a, b, c)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn add(a: $v, b: $v) -> $v {
                avx512!(@op add, $suffix)(a, b)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn sub(a: $v, b: $v) -> $v {
                avx512!(@op sub, $suffix)(a, b)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn relu(v: $v) -> $v {
                let zero = avx512!(@op setzero, $suffix)();
                let keep = avx512!(@op cmp_mask, $suffix)(v, zero);
                avx512!(@op maskz_mov, $suffix)(keep, v)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn fma_masked(a: $v, b: $v, c: $v, m: $mask) -> $v {
                avx512!(@op mask3_fmadd, $suffix)(a, b, c, m)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn rotate_lanes(v: $v, by: usize) -> $v {
                avx512!(@rotate, $suffix)(v, by)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn sum(v: $v) -> $e {
                avx512!(@op reduce_add, $suffix)(v)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn sum4(v: [$v; 4]) -> [$e; 4] {
                avx512!(@sum4, $suffix)(v)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn mask(n: usize) -> $mask {
                // n <= LANES <= 16, so the shift cannot overflow a u32.
                ((1_u32 << n) - 1) as $mask
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn mask_range(lo: usize, hi: usize) -> $mask {
                (((1_u32 << hi) - 1) & !((1_u32 << lo) - 1)) as $mask
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn load(p: *const $e) -> $v {
                // SAFETY: the caller guarantees LANES readable elements at p; loadu has no
                // alignment requirement.
                unsafe { avx512!(@op loadu, $suffix)(p) }
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn load_masked(p: *const $e, m: $mask) -> $v {
                // SAFETY: the caller guarantees the lanes selected by m are readable; AVX-512
                // masked loads do not access (or fault on) the lanes that are masked off.
                unsafe { avx512!(@op maskz_loadu, $suffix)(m, p) }
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn load_masked_into(v: $v, p: *const $e, m: $mask) -> $v {
                // SAFETY: as `load_masked`; the masked-off lanes are `v`'s.
                unsafe { avx512!(@op mask_loadu, $suffix)(v, m, p) }
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn store(p: *mut $e, v: $v) {
                // SAFETY: the caller guarantees LANES writable elements at p.
                unsafe { avx512!(@op storeu, $suffix)(p, v) }
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn store_masked(p: *mut $e, m: $mask, v: $v) {
                // SAFETY: the caller guarantees the lanes selected by m are writable; masked-off
                // lanes are not accessed.
                unsafe { avx512!(@op mask_storeu, $suffix)(p, m, v) }
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn store_transposed(rows: &[$v], out: *mut $e, stride: usize, count: usize) {
                // SAFETY: the caller's contract.
                unsafe { avx512!(@store_transposed, $suffix)(rows, out, stride, count) }
            }
        }
    };
    (@rotate, ps) => { rotate_lanes_avx512_ps };
    (@rotate, pd) => { rotate_lanes_avx512_pd };
    (@sum4, ps) => { sum4_avx512_ps };
    (@sum4, pd) => { sum4_avx512_pd };
    (@store_transposed, ps) => { store_transposed_avx512_ps };
    (@store_transposed, pd) => { store_transposed_lanes::<Avx512F64> };
    (@op $op:ident, ps) => { pastey_ps!($op) };
    (@op $op:ident, pd) => { pastey_pd!($op) };
}

/// The AVX-512 intrinsic names for `f32` (`_ps`) and `f64` (`_pd`).
macro_rules! pastey_ps {
    (add) => {
        _mm512_add_ps
    };
    (sub) => {
        _mm512_sub_ps
    };
    (cmp_mask) => {
        _mm512_cmp_ps_mask::<_CMP_NLE_UQ>
    };
    (maskz_mov) => {
        _mm512_maskz_mov_ps
    };
    (setzero) => {
        _mm512_setzero_ps
    };
    (set1) => {
        _mm512_set1_ps
    };
    (fmadd) => {
        _mm512_fmadd_ps
    };
    (mask3_fmadd) => {
        _mm512_mask3_fmadd_ps
    };
    (reduce_add) => {
        _mm512_reduce_add_ps
    };
    (loadu) => {
        _mm512_loadu_ps
    };
    (maskz_loadu) => {
        _mm512_maskz_loadu_ps
    };
    (mask_loadu) => {
        _mm512_mask_loadu_ps
    };
    (storeu) => {
        _mm512_storeu_ps
    };
    (mask_storeu) => {
        _mm512_mask_storeu_ps
    };
}
macro_rules! pastey_pd {
    (add) => {
        _mm512_add_pd
    };
    (sub) => {
        _mm512_sub_pd
    };
    (cmp_mask) => {
        _mm512_cmp_pd_mask::<_CMP_NLE_UQ>
    };
    (maskz_mov) => {
        _mm512_maskz_mov_pd
    };
    (setzero) => {
        _mm512_setzero_pd
    };
    (set1) => {
        _mm512_set1_pd
    };
    (fmadd) => {
        _mm512_fmadd_pd
    };
    (mask3_fmadd) => {
        _mm512_mask3_fmadd_pd
    };
    (reduce_add) => {
        _mm512_reduce_add_pd
    };
    (loadu) => {
        _mm512_loadu_pd
    };
    (maskz_loadu) => {
        _mm512_maskz_loadu_pd
    };
    (mask_loadu) => {
        _mm512_mask_loadu_pd
    };
    (storeu) => {
        _mm512_storeu_pd
    };
    (mask_storeu) => {
        _mm512_mask_storeu_pd
    };
}

/// [`Simd::rotate_lanes`] for `f32` on AVX-512: one permute by computed indices.
#[inline]
#[target_feature(enable = "avx512f")]
fn rotate_lanes_avx512_ps(v: __m512, by: usize) -> __m512 {
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // `by < 16`: the cast keeps it.
    let turned = _mm512_add_epi32(lanes, _mm512_set1_epi32(by as i32));
    _mm512_permutexvar_ps(_mm512_and_si512(turned, _mm512_set1_epi32(15)), v)
}

/// [`Simd::rotate_lanes`] for `f64` on AVX-512.
#[inline]
#[target_feature(enable = "avx512f")]
fn rotate_lanes_avx512_pd(v: __m512d, by: usize) -> __m512d {
    let lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    // `by < 8`: the cast keeps it.
    let turned = _mm512_add_epi64(lanes, _mm512_set1_epi64(by as i64));
    _mm512_permutexvar_pd(_mm512_and_si512(turned, _mm512_set1_epi64(7)), v)
}

/// Four horizontal sums at once: two rounds of 128-bit block shuffles leave each input's partial
/// sums in one block, two in-block permutes finish them, one permute gathers the four results.
/// [`Simd::store_transposed`] for `f32` on AVX-512: the rows (zeros past `rows.len()`)
/// transposed as a 16 x 16 block in registers (64 shuffles), then one masked store per column
/// written, instead of 16 scalar stores per row (which the compiler turns into scatters, slow on
/// some CPUs).
///
/// # Safety
///
/// As [`Simd::store_transposed`].
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store_transposed_avx512_ps(rows: &[__m512], out: *mut f32, stride: usize, count: usize) {
    // The missing rows are zeros; read in place (a copy into a 16-row buffer was a call to
    // `memcpy`, for rows of variable number).
    let r = |i: usize| rows.get(i).copied().unwrap_or(_mm512_setzero_ps());
    // Per 128-bit block k: columns 4k, 4k+1 (then 4k+2, 4k+3) of rows 2i, 2i+1 interleaved.
    let t: [__m512; 16] = array_from(|i| {
        let (a, b) = (r(i / 2 * 2), r(i / 2 * 2 + 1));
        if i % 2 == 0 {
            _mm512_unpacklo_ps(a, b)
        } else {
            _mm512_unpackhi_ps(a, b)
        }
    });
    // u[g][j], block k: column 4k + j of rows 4g..4g+3.
    let u: [[__m512; 4]; 4] = array_from(|g| {
        array_from(|j| {
            let (a, b) = (
                _mm512_castps_pd(t[4 * g + j / 2]),
                _mm512_castps_pd(t[4 * g + 2 + j / 2]),
            );
            _mm512_castpd_ps(if j % 2 == 0 {
                _mm512_unpacklo_pd(a, b)
            } else {
                _mm512_unpackhi_pd(a, b)
            })
        })
    });
    let mut columns = [_mm512_setzero_ps(); 16];
    for j in 0..4 {
        // Blocks: columns j, 8+j, j, 8+j (even) or 4+j, 12+j, 4+j, 12+j (odd) of rows 0-3,
        // 0-3, 4-7, 4-7 (v, w) or 8-11, 8-11, 12-15, 12-15 (v2, w2).
        let v = _mm512_shuffle_f32x4::<0b10_00_10_00>(u[0][j], u[1][j]);
        let w = _mm512_shuffle_f32x4::<0b11_01_11_01>(u[0][j], u[1][j]);
        let v2 = _mm512_shuffle_f32x4::<0b10_00_10_00>(u[2][j], u[3][j]);
        let w2 = _mm512_shuffle_f32x4::<0b11_01_11_01>(u[2][j], u[3][j]);
        columns[j] = _mm512_shuffle_f32x4::<0b10_00_10_00>(v, v2);
        columns[8 + j] = _mm512_shuffle_f32x4::<0b11_01_11_01>(v, v2);
        columns[4 + j] = _mm512_shuffle_f32x4::<0b10_00_10_00>(w, w2);
        columns[12 + j] = _mm512_shuffle_f32x4::<0b11_01_11_01>(w, w2);
    }
    let mask = ((1_u32 << rows.len()) - 1) as __mmask16;
    for (lane, &column) in columns[..count].iter().enumerate() {
        // SAFETY: lanes i < rows.len() of column `lane` go to out[lane·stride + i], valid for
        // writing (the caller's contract); the other lanes are masked off.
        unsafe { _mm512_mask_storeu_ps(out.add(lane * stride), mask, column) };
    }
}

/// About 9 instructions instead of 4 separate reductions' 32.
#[inline]
#[target_feature(enable = "avx512f")]
fn sum4_avx512_ps([a, b, c, d]: [__m512; 4]) -> [f32; 4] {
    // Blocks [a0+a2, a1+a3, b0+b2, b1+b3] and the same for c, d.
    let ab = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b01_00_01_00>(a, b),
        _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b),
    );
    let cd = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b01_00_01_00>(c, d),
        _mm512_shuffle_f32x4::<0b11_10_11_10>(c, d),
    );
    // Blocks [a, b, c, d], each holding 4 partial sums.
    let abcd = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b10_00_10_00>(ab, cd),
        _mm512_shuffle_f32x4::<0b11_01_11_01>(ab, cd),
    );
    let pairs = _mm512_add_ps(abcd, _mm512_permute_ps::<0b01_00_11_10>(abcd));
    let sums = _mm512_add_ps(pairs, _mm512_permute_ps::<0b10_11_00_01>(pairs));
    let gathered = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        sums,
    );
    let low = _mm512_castps512_ps128(gathered);
    let mut out = [0.0; 4];
    // SAFETY: `out` has room for the 4 floats written.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), low) };
    out
}

/// [`sum4_avx512_ps`] for `f64`: blocks of 2 doubles.
#[inline]
#[target_feature(enable = "avx512f")]
fn sum4_avx512_pd([a, b, c, d]: [__m512d; 4]) -> [f64; 4] {
    let ab = _mm512_add_pd(
        _mm512_shuffle_f64x2::<0b01_00_01_00>(a, b),
        _mm512_shuffle_f64x2::<0b11_10_11_10>(a, b),
    );
    let cd = _mm512_add_pd(
        _mm512_shuffle_f64x2::<0b01_00_01_00>(c, d),
        _mm512_shuffle_f64x2::<0b11_10_11_10>(c, d),
    );
    let abcd = _mm512_add_pd(
        _mm512_shuffle_f64x2::<0b10_00_10_00>(ab, cd),
        _mm512_shuffle_f64x2::<0b11_01_11_01>(ab, cd),
    );
    // Swap the two doubles of each block and add: lane 0 of each block holds its sum.
    let sums = _mm512_add_pd(abcd, _mm512_permute_pd::<0b0101_0101>(abcd));
    let gathered = _mm512_permutexvar_pd(_mm512_setr_epi64(0, 2, 4, 6, 0, 0, 0, 0), sums);
    let mut out = [0.0; 4];
    // SAFETY: `out` has room for the 4 doubles written.
    unsafe { _mm256_storeu_pd(out.as_mut_ptr(), _mm512_castpd512_pd256(gathered)) };
    out
}

avx512!(Avx512F32, f32, __m512, __mmask16, 16, ps);
avx512!(Avx512F64, f64, __m512d, __mmask8, 8, pd);

/// The AVX2 intrinsic names for `f32` (`_ps`) and `f64` (`_pd`).
macro_rules! avx2_ps {
    (add) => {
        _mm256_add_ps
    };
    (sub) => {
        _mm256_sub_ps
    };
    (and) => {
        _mm256_and_ps
    };
    (cmp) => {
        _mm256_cmp_ps::<_CMP_NLE_UQ>
    };
    (setzero) => {
        _mm256_setzero_ps
    };
    (set1) => {
        _mm256_set1_ps
    };
    (fmadd) => {
        _mm256_fmadd_ps
    };
    (loadu) => {
        _mm256_loadu_ps
    };
    (maskload) => {
        _mm256_maskload_ps
    };
    (blendv) => {
        _mm256_blendv_ps
    };
    (cast_mask) => {
        _mm256_castsi256_ps
    };
    (storeu) => {
        _mm256_storeu_ps
    };
    (maskstore) => {
        _mm256_maskstore_ps
    };
}
macro_rules! avx2_pd {
    (add) => {
        _mm256_add_pd
    };
    (sub) => {
        _mm256_sub_pd
    };
    (and) => {
        _mm256_and_pd
    };
    (cmp) => {
        _mm256_cmp_pd::<_CMP_NLE_UQ>
    };
    (setzero) => {
        _mm256_setzero_pd
    };
    (set1) => {
        _mm256_set1_pd
    };
    (fmadd) => {
        _mm256_fmadd_pd
    };
    (loadu) => {
        _mm256_loadu_pd
    };
    (maskload) => {
        _mm256_maskload_pd
    };
    (blendv) => {
        _mm256_blendv_pd
    };
    (cast_mask) => {
        _mm256_castsi256_pd
    };
    (storeu) => {
        _mm256_storeu_pd
    };
    (maskstore) => {
        _mm256_maskstore_pd
    };
}

/// The horizontal sum of 8 floats: add the two 128-bit halves, then two horizontal adds.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sum_avx2_ps(v: __m256) -> f32 {
    let halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let pairs = _mm_hadd_ps(halves, halves);
    _mm_cvtss_f32(_mm_hadd_ps(pairs, pairs))
}

/// The horizontal sum of 4 doubles.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sum_avx2_pd(v: __m256d) -> f64 {
    let halves = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
    _mm_cvtsd_f64(_mm_hadd_pd(halves, halves))
}

/// A mask selecting the first `n` of 8 32-bit lanes (all ones where lane < n).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn mask_avx2_ps(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// A mask selecting the first `n` of 4 64-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn mask_avx2_pd(n: usize) -> __m256i {
    _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), _mm256_setr_epi64x(0, 1, 2, 3))
}

macro_rules! avx2 {
    ($name:ident, $e:ty, $v:ty, $lanes:expr, $ops:ident, $sum:ident, $mask:ident, $fma_masked:ident, $rotate:ident) => {
        #[derive(Clone, Copy)]
        struct $name;

        impl Simd for $name {
            type E = $e;
            type V = $v;
            type Mask = __m256i;
            const LANES: usize = $lanes;
            const OUTER_ROWS: usize = 6;
            const OUTER_VECTORS: usize = 2;
            const FLAT_VECTORS: usize = 2;
            // 6 accumulators (2 points each), 2 vectors of the filters' transforms and the
            // broadcasts, of the 16 registers.
            const WINOGRAD_ROWS: usize = 3;
            // 12 accumulators of the 16 registers.
            const WINOGRAD_GRADIENT_PAIRS: usize = 2;
            const COLUMN_TILES: bool = false;
            // 8 accumulators, 2 vectors of A and one of B fit the 16 registers without spilling.
            const DOT_ROWS: usize = 2;
            const DOT_COLS: usize = 4;

            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn zero() -> $v {
                $ops!(setzero)()
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn splat(x: $e) -> $v {
                $ops!(set1)(x)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn fma(a: $v, b: $v, c: $v) -> $v {
                $ops!(fmadd)(a, b, c)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn add(a: $v, b: $v) -> $v {
                $ops!(add)(a, b)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn sub(a: $v, b: $v) -> $v {
                $ops!(sub)(a, b)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn relu(v: $v) -> $v {
                // The comparison's lanes are all ones or all zeros: `and` keeps or zeroes.
                $ops!(and)($ops!(cmp)(v, $ops!(setzero)()), v)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn fma_masked(a: $v, b: $v, c: $v, m: __m256i) -> $v {
                $fma_masked(a, b, c, m)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn rotate_lanes(v: $v, by: usize) -> $v {
                $rotate(v, by)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn sum(v: $v) -> $e {
                $sum(v)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn mask(n: usize) -> __m256i {
                $mask(n)
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn mask_range(lo: usize, hi: usize) -> __m256i {
                _mm256_andnot_si256($mask(lo), $mask(hi))
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn load(p: *const $e) -> $v {
                // SAFETY: the caller guarantees LANES readable elements at p; no alignment is
                // required.
                unsafe { $ops!(loadu)(p) }
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn load_masked(p: *const $e, m: __m256i) -> $v {
                // SAFETY: the caller guarantees the selected lanes are readable; vmaskmov does
                // not access (or fault on) masked-off lanes.
                unsafe { $ops!(maskload)(p, m) }
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn load_masked_into(v: $v, p: *const $e, m: __m256i) -> $v {
                // SAFETY: as `load_masked`; the mask's lanes are all ones or all zeros, so
                // `blendv` takes the loaded lanes where it is set.
                unsafe { $ops!(blendv)(v, $ops!(maskload)(p, m), $ops!(cast_mask)(m)) }
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn store(p: *mut $e, v: $v) {
                // SAFETY: the caller guarantees LANES writable elements at p.
                unsafe { $ops!(storeu)(p, v) }
            }
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn store_masked(p: *mut $e, m: __m256i, v: $v) {
                // SAFETY: the caller guarantees the selected lanes are writable; others are
                // untouched.
                unsafe { $ops!(maskstore)(p, m, v) }
            }
        }
    };
}

avx2!(
    Avx2F32,
    f32,
    __m256,
    8,
    avx2_ps,
    sum_avx2_ps,
    mask_avx2_ps,
    fma_masked_avx2_ps,
    rotate_lanes_avx2_ps
);
avx2!(
    Avx2F64,
    f64,
    __m256d,
    4,
    avx2_pd,
    sum_avx2_pd,
    mask_avx2_pd,
    fma_masked_avx2_pd,
    rotate_lanes_avx2_pd
);

/// [`Simd::fma_masked`] for `f32` on AVX2: the product, then a blend.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn fma_masked_avx2_ps(a: __m256, b: __m256, c: __m256, m: __m256i) -> __m256 {
    _mm256_blendv_ps(c, _mm256_fmadd_ps(a, b, c), _mm256_castsi256_ps(m))
}

/// [`Simd::fma_masked`] for `f64` on AVX2.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn fma_masked_avx2_pd(a: __m256d, b: __m256d, c: __m256d, m: __m256i) -> __m256d {
    _mm256_blendv_pd(c, _mm256_fmadd_pd(a, b, c), _mm256_castsi256_pd(m))
}

/// [`Simd::rotate_lanes`] for `f32` on AVX2.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn rotate_lanes_avx2_ps(v: __m256, by: usize) -> __m256 {
    // `by < 8`: the cast keeps it.
    let turned = _mm256_add_epi32(
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        _mm256_set1_epi32(by as i32),
    );
    _mm256_permutevar8x32_ps(v, _mm256_and_si256(turned, _mm256_set1_epi32(7)))
}

/// [`Simd::rotate_lanes`] for `f64` on AVX2: each double is a pair of 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn rotate_lanes_avx2_pd(v: __m256d, by: usize) -> __m256d {
    // `by < 4`: the cast keeps it; lane pair i takes the pair (i + by) % 4.
    let pairs = _mm256_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6);
    let turned = _mm256_and_si256(
        _mm256_add_epi32(pairs, _mm256_set1_epi32(2 * by as i32)),
        _mm256_set1_epi32(7),
    );
    let halves = _mm256_add_epi32(turned, _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1));
    _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(v), halves))
}

/// One `MR x (NV · LANES)` outer-product tile: `C[.., ..] (+)= Σ_p a(r, p) · B[p, ..]` over
/// `kc` steps. `a(r, p)` is at `a + r·a_row + p·a_k`; row `p` of `B` at `b + p·b_row`; row `r` of
/// `C` at `c + r·c_row`. Only the first `cols` columns are read from `B` and written to `C`
/// (`FULL` means `cols == NV · LANES`, so no masks are needed).
///
/// # Safety
///
/// The CPU has `S`'s instruction set, and every element addressed as above for `r < MR`,
/// `p < kc` and the first `cols` columns is in bounds of its slice.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn outer_tile<S: Simd, const MR: usize, const NV: usize, const FULL: bool>(
    kc: usize,
    a: *const S::E,
    a_row: usize,
    a_k: usize,
    b: *const S::E,
    b_row: usize,
    c: *mut S::E,
    c_row: usize,
    cols: usize,
    load_c: bool,
) {
    // SAFETY (whole body): the instruction set is present (the caller's contract); every pointer
    // formed below addresses an element the caller guarantees to be in bounds, except the
    // masked-off lanes of edge vectors, which are formed with `wrapping_add` and never accessed.
    unsafe {
        let lanes = S::LANES;
        let mut masks = [S::mask(lanes); NV];
        if !FULL {
            for (v, m) in masks.iter_mut().enumerate() {
                *m = S::mask(cols.saturating_sub(v * lanes).min(lanes));
            }
        }
        let mut acc = [[S::zero(); NV]; MR];
        if load_c {
            for (r, acc_row) in acc.iter_mut().enumerate() {
                for (v, acc_v) in acc_row.iter_mut().enumerate() {
                    let p = c.wrapping_add(r * c_row + v * lanes);
                    *acc_v = if FULL {
                        S::load(p)
                    } else {
                        S::load_masked(p, masks[v])
                    };
                }
            }
        }
        for p in 0..kc {
            let b_p = b.add(p * b_row);
            let mut b_vectors = [S::zero(); NV];
            for (v, b_v) in b_vectors.iter_mut().enumerate() {
                let q = b_p.wrapping_add(v * lanes);
                *b_v = if FULL {
                    S::load(q)
                } else {
                    S::load_masked(q, masks[v])
                };
            }
            let a_p = a.add(p * a_k);
            for (r, acc_row) in acc.iter_mut().enumerate() {
                let a_rp = S::splat(*a_p.add(r * a_row));
                for (acc_v, &b_v) in acc_row.iter_mut().zip(b_vectors.iter()) {
                    *acc_v = S::fma(a_rp, b_v, *acc_v);
                }
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (v, &acc_v) in acc_row.iter().enumerate() {
                let p = c.wrapping_add(r * c_row + v * lanes);
                if FULL {
                    S::store(p, acc_v);
                } else {
                    S::store_masked(p, masks[v], acc_v);
                }
            }
        }
    }
}

/// Calls [`outer_tile`] for a tile of `$rows` rows (1 to 8; a const generic, so one match arm
/// per height) of the `Simd` type `S` in scope at the call site.
macro_rules! outer_tile_rows {
    ($rows:expr, $full:expr, $($args:expr),*) => {
        match $rows {
            1 => outer_tile::<S, 1, 2, $full>($($args),*),
            2 => outer_tile::<S, 2, 2, $full>($($args),*),
            3 => outer_tile::<S, 3, 2, $full>($($args),*),
            4 => outer_tile::<S, 4, 2, $full>($($args),*),
            5 => outer_tile::<S, 5, 2, $full>($($args),*),
            6 => outer_tile::<S, 6, 2, $full>($($args),*),
            7 => if const { S::OUTER_ROWS >= 7 } { outer_tile::<S, 7, 2, $full>($($args),*) } else { unreachable!() },
            8 => if const { S::OUTER_ROWS >= 8 } { outer_tile::<S, 8, 2, $full>($($args),*) } else { unreachable!() },
            _ => unreachable!("tiles have at most 8 rows"),
        }
    };
}

/// Rows `rows` of `C (+)= A·B` or `Aᵀ·B` with outer-product tiles; `a(i, p)` is at
/// `a + i·a_row + p·a_k`, and `c` points at row `rows.start` of `C`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `a` addresses the rows `rows` (`k` steps each) through the
/// strides, `b` is `k x n` row-major, `c` holds `rows.len()` rows of `n`, all in bounds.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_outer<S: Simd>(
    rows: Range<usize>,
    n: usize,
    k: usize,
    a: *const S::E,
    a_row: usize,
    a_k: usize,
    b: *const S::E,
    c: *mut S::E,
    accumulate: bool,
) {
    debug_assert_eq!(S::OUTER_VECTORS, 2);
    let mr = S::OUTER_ROWS;
    let nr = S::OUTER_VECTORS * S::LANES;
    let mut k0 = 0;
    // One pass even when k == 0, so that an overwriting product still writes its zeros.
    loop {
        let kc = KC.min(k - k0);
        let load_c = accumulate || k0 > 0;
        for j0 in (0..n).step_by(nr) {
            let cols = nr.min(n - j0);
            for i0 in rows.clone().step_by(mr) {
                let tile_rows = mr.min(rows.end - i0);
                // SAFETY: the tile's rows i0..i0+tile_rows, columns j0..j0+cols and steps k0..k0+kc
                // are inside the operands (the caller's contract), which is what outer_tile needs.
                unsafe {
                    let a_tile = a.add(i0 * a_row + k0 * a_k);
                    let b_tile = b.add(k0 * n + j0);
                    let c_tile = c.add((i0 - rows.start) * n + j0);
                    if cols == nr {
                        outer_tile_rows!(
                            tile_rows, true, kc, a_tile, a_row, a_k, b_tile, n, c_tile, n, cols,
                            load_c
                        );
                    } else {
                        outer_tile_rows!(
                            tile_rows, false, kc, a_tile, a_row, a_k, b_tile, n, c_tile, n, cols,
                            load_c
                        );
                    }
                }
            }
        }
        k0 += kc;
        if k0 >= k {
            break;
        }
    }
}

/// From this many rows of `C` on, `A·Bᵀ` packs panels of `Bᵀ` rather than using dot tiles.
const PACK_MIN_ROWS: usize = 32;

/// The most elements of a packed panel of `B`: `KC` rows of the widest tile (32 `f32`).
const PANEL: usize = KC * 32;

/// Rows `rows` of `C (+)= A·Bᵀ` (`B` stored `n x k`) with outer-product tiles, packing each
/// `KC x NR` panel of `Bᵀ` into a stack buffer first.
///
/// Reading `Bᵀ` along its rows means striding across the rows of `B`, so each panel is transposed
/// once into contiguous memory and then reused by every row tile of `A`. Worth it when there are
/// many row tiles to share the cost (a large batch); with few, [`gemm_dot`] needs no copy.
///
/// # Safety
///
/// As [`gemm_outer`] with `a` row-major (`m x k`) and `b` row-major `n x k`.
#[inline(always)]
unsafe fn gemm_packed_rhs<S: Simd>(
    rows: Range<usize>,
    n: usize,
    k: usize,
    a: *const S::E,
    b: *const S::E,
    c: *mut S::E,
    accumulate: bool,
) {
    let mr = S::OUTER_ROWS;
    let nr = S::OUTER_VECTORS * S::LANES;
    debug_assert!(KC * nr <= PANEL);
    let mut panel = [S::E::default(); PANEL];
    let mut k0 = 0;
    loop {
        let kc = KC.min(k - k0);
        let load_c = accumulate || k0 > 0;
        for j0 in (0..n).step_by(nr) {
            let cols = nr.min(n - j0);
            // Panel row p, column jj holds B[j0 + jj][k0 + p].
            for jj in 0..cols {
                // SAFETY: row j0 + jj < n of B, elements k0..k0 + kc < k: in bounds.
                let b_row = unsafe { core::slice::from_raw_parts(b.add((j0 + jj) * k + k0), kc) };
                for (p, &x) in b_row.iter().enumerate() {
                    panel[p * nr + jj] = x;
                }
            }
            for i0 in rows.clone().step_by(mr) {
                let tile_rows = mr.min(rows.end - i0);
                // SAFETY: the tile's rows and steps are inside A and C (the caller's contract),
                // and the panel holds kc rows of nr elements, the first `cols` of them written.
                unsafe {
                    let a_tile = a.add(i0 * k + k0);
                    let c_tile = c.add((i0 - rows.start) * n + j0);
                    let p = panel.as_ptr();
                    if cols == nr {
                        outer_tile_rows!(
                            tile_rows, true, kc, a_tile, k, 1, p, nr, c_tile, n, cols, load_c
                        );
                    } else {
                        outer_tile_rows!(
                            tile_rows, false, kc, a_tile, k, 1, p, nr, c_tile, n, cols, load_c
                        );
                    }
                }
            }
        }
        k0 += kc;
        if k0 >= k {
            break;
        }
    }
}

/// How many elements ahead the single-row dot tiles prefetch each row of `B` (a prefetch never
/// faults, so running past the end of a row or of `B` is harmless).
const PREFETCH_AHEAD: usize = 64;

/// One `MR x NR` dot-product tile: `C[r][j] (+)= Σ_p A[r][p] · B[j][p]` over `k` steps, `A` and
/// `B` with row stride `k`, `C` with row stride `c_row`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; rows `0..MR` of `A`, `0..NR` of `B` (each `k` long) and the
/// `MR x NR` block of `C` are in bounds.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // indices mirror the register tile acc[r][j]
unsafe fn dot_tile<S: Simd, const MR: usize, const NR: usize>(
    k: usize,
    a: *const S::E,
    b: *const S::E,
    c: *mut S::E,
    c_row: usize,
    accumulate: bool,
) {
    // SAFETY (whole body): as the caller guarantees; the first vectors of a shifted loop and the
    // tail vectors are read with masks whose lanes stay inside each row, through `wrapping_*`
    // pointers; prefetches are only hints and never access memory architecturally.
    unsafe {
        let lanes = S::LANES;
        let mut acc = [[S::zero(); NR]; MR];
        // A single row of A streams B from L2. Rows that start off the vector width split cache
        // lines (every load of 64 bytes, every other one of 32): when all of them start `shift`
        // lanes in (`k` a nonzero multiple of the lanes), the loop starts `shift` lanes early,
        // its first and last vectors masked, so that all the others are aligned (one
        // prediction of the MLP 4.53 -> 4.28 µs). Each lane still sums the same elements in the
        // same order, `shift` lanes over, and is turned back before the horizontal sums: the
        // result does not depend on where B lies.
        let shift = if MR == 1 && k > 0 && k.is_multiple_of(lanes) {
            (b as usize % (lanes * size_of::<S::E>())) / size_of::<S::E>()
        } else {
            0
        };
        let mut full = k - k % lanes;
        let mut p = 0;
        if shift > 0 {
            // Lane l holds element l - shift: lanes shift.. are elements 0..lanes - shift. (The
            // other lanes are still +0, which a plain multiply-add of the masked zeros would
            // keep too; masked, nothing depends on that.)
            let m = S::mask_range(shift, lanes);
            let a_v = S::load_masked(a.wrapping_sub(shift), m);
            for j in 0..NR {
                let b_v = S::load_masked(b.wrapping_add(j * k).wrapping_sub(shift), m);
                acc[0][j] = S::fma_masked(a_v, b_v, acc[0][j], m);
            }
            p = lanes - shift;
            full = k - shift;
        }
        while p < full {
            if MR == 1 {
                // Asking for each row's next lines early measured 25-45% faster (1x784x128) on
                // the Intel Xeon this was written on; on a Zen 4 it costs about 4%.
                for j in 0..NR {
                    let ahead = b.wrapping_add(j * k + p + PREFETCH_AHEAD);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.cast::<i8>());
                }
            }
            let mut a_v = [S::zero(); MR];
            for (r, v) in a_v.iter_mut().enumerate() {
                *v = S::load(a.add(r * k + p));
            }
            for j in 0..NR {
                let b_v = S::load(b.add(j * k + p));
                for r in 0..MR {
                    acc[r][j] = S::fma(a_v[r], b_v, acc[r][j]);
                }
            }
            p += lanes;
        }
        if p < k {
            let m = S::mask(k - p);
            let mut a_v = [S::zero(); MR];
            for (r, v) in a_v.iter_mut().enumerate() {
                *v = S::load_masked(a.wrapping_add(r * k + p), m);
            }
            for j in 0..NR {
                let b_v = S::load_masked(b.wrapping_add(j * k + p), m);
                for r in 0..MR {
                    acc[r][j] = S::fma_masked(a_v[r], b_v, acc[r][j], m);
                }
            }
        }
        if shift > 0 {
            for v in &mut acc[0] {
                *v = S::rotate_lanes(*v, shift);
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (q, group) in acc_row.chunks(4).enumerate() {
                let mut sums = [S::E::default(); 4];
                if let Ok(four) = <[S::V; 4]>::try_from(group) {
                    sums = S::sum4(four);
                } else {
                    for (s, &v) in sums.iter_mut().zip(group) {
                        *s = S::sum(v);
                    }
                }
                for (j, &s) in sums.iter().take(group.len()).enumerate() {
                    let out = c.add(r * c_row + 4 * q + j);
                    *out = if accumulate { *out + s } else { s };
                }
            }
        }
    }
}

/// Rows `rows` of `C (+)= A·Bᵀ` with dot-product tiles; `c` points at row `rows.start` of `C`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `a` has the rows `rows` (each `k` long), `b` is `n x k`,
/// `c` holds `rows.len()` rows of `n`, all row-major and in bounds.
#[inline(always)]
unsafe fn gemm_dot<S: Simd>(
    rows: Range<usize>,
    n: usize,
    k: usize,
    a: *const S::E,
    b: *const S::E,
    c: *mut S::E,
    accumulate: bool,
) {
    macro_rules! cols {
        ($rows:literal, $cols:expr, $($args:expr),*) => {
            match $cols {
                4 => dot_tile::<S, $rows, 4>($($args),*),
                3 => dot_tile::<S, $rows, 3>($($args),*),
                2 => dot_tile::<S, $rows, 2>($($args),*),
                1 => dot_tile::<S, $rows, 1>($($args),*),
                _ => unreachable!("dot tiles have at most 4 columns"),
            }
        };
    }
    macro_rules! tile {
        ($rows:expr, $cols:expr, $($args:expr),*) => {
            match $rows {
                6 => if const { S::DOT_ROWS >= 6 } { cols!(6, $cols, $($args),*) } else { unreachable!() },
                5 => if const { S::DOT_ROWS >= 5 } { cols!(5, $cols, $($args),*) } else { unreachable!() },
                4 => if const { S::DOT_ROWS >= 4 } { cols!(4, $cols, $($args),*) } else { unreachable!() },
                3 => if const { S::DOT_ROWS >= 3 } { cols!(3, $cols, $($args),*) } else { unreachable!() },
                2 => cols!(2, $cols, $($args),*),
                1 => cols!(1, $cols, $($args),*),
                _ => unreachable!("dot tiles have at most S::DOT_ROWS rows"),
            }
        };
    }
    if rows.len() == 1 {
        // A matrix-vector product: nothing to reuse across rows of A, so take 8 rows of B at a
        // time (8 accumulators, one load of A per 8 of B).
        let i0 = rows.start;
        let mut j0 = 0;
        while j0 < n {
            // Tiles of 8 rows of B, then one of 4 and one of the last 1-3.
            let cols = match n - j0 {
                8.. => 8,
                4..=7 => 4,
                left => left,
            };
            // SAFETY: row i0 of A, rows j0..j0+cols of B and that part of C's row are in bounds.
            unsafe {
                let (a_row, b_rows, c_out) = (a.add(i0 * k), b.add(j0 * k), c.add(j0));
                match cols {
                    8 => dot_tile::<S, 1, 8>(k, a_row, b_rows, c_out, n, accumulate),
                    _ => cols!(1, cols, k, a_row, b_rows, c_out, n, accumulate),
                }
            }
            j0 += cols;
        }
        return;
    }
    let (mr, nr) = (S::DOT_ROWS, S::DOT_COLS);
    for i0 in rows.clone().step_by(mr) {
        let tile_rows = mr.min(rows.end - i0);
        for j0 in (0..n).step_by(nr) {
            let cols = nr.min(n - j0);
            // SAFETY: rows i0..i0+tile_rows of A, j0..j0+cols of B and that block of C are in
            // bounds (the caller's contract), which is what dot_tile needs.
            unsafe {
                tile!(
                    tile_rows,
                    cols,
                    k,
                    a.add(i0 * k),
                    b.add(j0 * k),
                    c.add((i0 - rows.start) * n + j0),
                    n,
                    accumulate
                );
            }
        }
    }
}

/// Runs rows `rows` of the product with the kernels of `S`; `c` holds just those rows.
///
/// # Safety
///
/// The CPU has `S`'s instruction set, `a` and `b` hold the whole operands and `c` the rows
/// `rows` of the output (checked by [`gemm`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn run<S: Simd>(
    layout: Layout,
    m: usize,
    n: usize,
    k: usize,
    rows: Range<usize>,
    a: &[S::E],
    b: &[S::E],
    c: &mut [S::E],
    accumulate: bool,
) {
    let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    // SAFETY: forwarded from this function's contract; the strides describe exactly the layouts
    // whose sizes the caller checked.
    unsafe {
        match layout {
            Layout::Plain => gemm_outer::<S>(rows, n, k, a, k, 1, b, c, accumulate),
            Layout::TransposeLhs => gemm_outer::<S>(rows, n, k, a, 1, m, b, c, accumulate),
            Layout::TransposeRhs => gemm_dot::<S>(rows, n, k, a, b, c, accumulate),
        }
    }
}

/// Rows `rows` of `C (+)= A·Bᵀ` through packed panels of `Bᵀ` ([`gemm_packed_rhs`]).
///
/// # Safety
///
/// As [`run`] with the `TransposeRhs` layout.
#[inline(always)]
unsafe fn run_packed<S: Simd>(
    n: usize,
    k: usize,
    rows: Range<usize>,
    a: &[S::E],
    b: &[S::E],
    c: &mut [S::E],
    accumulate: bool,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        gemm_packed_rhs::<S>(
            rows,
            n,
            k,
            a.as_ptr(),
            b.as_ptr(),
            c.as_mut_ptr(),
            accumulate,
        )
    }
}

macro_rules! entry {
    ($name:ident, $packed:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; lengths checked by [`gemm`].
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            layout: Layout,
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

        /// The packed `A·Bᵀ` path, kept out of line: its 16-32 KiB panel would otherwise sit
        /// in the stack frame of every product, single-sample predictions included.
        ///
        /// # Safety
        ///
        /// As the unpacked entry, with the `TransposeRhs` layout.
        #[target_feature(enable = $features)]
        #[inline(never)]
        unsafe fn $packed(
            n: usize,
            k: usize,
            rows: Range<usize>,
            a: &[$e],
            b: &[$e],
            c: &mut [$e],
            accumulate: bool,
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { run_packed::<$simd>(n, k, rows, a, b, c, accumulate) }
        }
    };
}

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

/// The element types with SIMD kernels.
pub(crate) trait Element: Copy + Default + Send + Sync + 'static {
    /// Whether the type has AVX-512 product kernels; without them it takes the AVX2 ones on a
    /// CPU with AVX-512 too.
    const AVX512: bool;

    /// Runs rows `rows` of the product with `isa`'s kernels.
    ///
    /// # Safety
    ///
    /// As [`run`]: the CPU has `isa`, the slices were checked by [`gemm`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_rows(
        isa: Isa,
        layout: Layout,
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

/// The element types with SIMD convolution kernels: `f32`. (`f64` convolutions, for gradient
/// checks rather than speed, take the portable loops and the SIMD products: a second set of
/// these kernels doubled the crate's build time.)
pub(crate) trait ConvElement: Element {
    /// Runs a stride-1 convolution with `isa`'s kernels.
    ///
    /// # Safety
    ///
    /// The CPU has `isa`; the slices and sizes were checked by [`conv2d_stride1`].
    unsafe fn conv_rows(
        isa: Isa,
        shape: &Conv,
        x: &[Self],
        w: &[Self],
        bias: &[Self],
        out: &mut [MaybeUninit<Self>],
        epilogue: Epilogue,
    );

    /// Runs a stride-1 convolution of one image without padding, flat, with `isa`'s kernels.
    ///
    /// # Safety
    ///
    /// The CPU has `isa`; the slices and sizes were checked by [`conv2d_stride1_flat`].
    unsafe fn conv_flat_rows(
        isa: Isa,
        shape: &Conv,
        x: &[Self],
        w: &[Self],
        bias: &[Self],
        out: &mut [MaybeUninit<Self>],
        epilogue: Epilogue,
    );

    /// Runs a stride-1 convolution of one image without padding, the filters in the lanes,
    /// with `isa`'s kernels.
    ///
    /// # Safety
    ///
    /// The CPU has `isa`; the slices and sizes were checked by [`conv2d_stride1_filters`].
    unsafe fn conv_filters_rows(
        isa: Isa,
        shape: &Conv,
        x: &[Self],
        wt: &[Self],
        bias: &[Self],
        out: &mut [MaybeUninit<Self>],
        epilogue: Epilogue,
    );

    /// Runs a stride-1 convolution's weight gradient over a batch, the filters in the lanes,
    /// with `isa`'s kernels.
    ///
    /// # Safety
    ///
    /// The CPU has `isa`; the slices and sizes were checked by
    /// [`conv2d_weight_gradient_filters`].
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    unsafe fn weight_grad_filters_rows(
        isa: Isa,
        shape: &Conv,
        batch: usize,
        x: &[Self],
        dzt: &[Self],
        dw: &mut [Self],
        accumulate: bool,
    );

    /// Runs a stride-1 convolution's weight gradient over a batch, positions in the lanes, with
    /// `isa`'s kernels.
    ///
    /// # Safety
    ///
    /// The CPU has `isa`; the slices and sizes were checked by
    /// [`conv2d_weight_gradient_positions`].
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    #[allow(clippy::too_many_arguments)]
    unsafe fn weight_grad_rows(
        isa: Isa,
        shape: &Conv,
        batch: usize,
        x: &[Self],
        dz: &[Self],
        shifted: &mut [Self],
        dw: &mut [Self],
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
                layout: Layout,
                m: usize,
                n: usize,
                k: usize,
                rows: Range<usize>,
                a: &[$e],
                b: &[$e],
                c: &mut [$e],
                accumulate: bool,
            ) {
                // Decided on the whole product, not on this call's rows: the two paths add in
                // different orders, and every split across threads must give the same bits.
                let packed = layout == Layout::TransposeRhs && m >= PACK_MIN_ROWS;
                // SAFETY (all four): forwarded from this function's contract.
                match (isa, packed) {
                    (Isa::Avx512, false) => unsafe {
                        $avx512(layout, m, n, k, rows, a, b, c, accumulate)
                    },
                    (Isa::Avx512, true) => unsafe {
                        $avx512_packed(n, k, rows, a, b, c, accumulate)
                    },
                    (Isa::Avx2Fma, false) => unsafe {
                        $avx2(layout, m, n, k, rows, a, b, c, accumulate)
                    },
                    (Isa::Avx2Fma, true) => unsafe { $avx2_packed(n, k, rows, a, b, c, accumulate) },
                }
            }
        }
    };
}
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

// SAFETY (every arm below): forwarded from the method's contract.
impl ConvElement for f32 {
    unsafe fn conv_flat_rows(
        isa: Isa,
        shape: &Conv,
        x: &[f32],
        w: &[f32],
        bias: &[f32],
        out: &mut [MaybeUninit<f32>],
        epilogue: Epilogue,
    ) {
        match isa {
            Isa::Avx512 => unsafe { conv_flat_avx512_f32(shape, x, w, bias, out, epilogue) },
            Isa::Avx2Fma => unsafe { conv_flat_avx2_f32(shape, x, w, bias, out, epilogue) },
        }
    }

    unsafe fn conv_filters_rows(
        isa: Isa,
        shape: &Conv,
        x: &[f32],
        wt: &[f32],
        bias: &[f32],
        out: &mut [MaybeUninit<f32>],
        epilogue: Epilogue,
    ) {
        match isa {
            Isa::Avx512 => unsafe { conv_filters_avx512_f32(shape, x, wt, bias, out, epilogue) },
            Isa::Avx2Fma => unsafe { conv_filters_avx2_f32(shape, x, wt, bias, out, epilogue) },
        }
    }

    unsafe fn weight_grad_filters_rows(
        isa: Isa,
        shape: &Conv,
        batch: usize,
        x: &[f32],
        dzt: &[f32],
        dw: &mut [f32],
        accumulate: bool,
    ) {
        match isa {
            Isa::Avx512 => unsafe {
                weight_grad_filters_avx512_f32(shape, batch, x, dzt, dw, accumulate)
            },
            Isa::Avx2Fma => unsafe {
                weight_grad_filters_avx2_f32(shape, batch, x, dzt, dw, accumulate)
            },
        }
    }

    unsafe fn weight_grad_rows(
        isa: Isa,
        shape: &Conv,
        batch: usize,
        x: &[f32],
        dz: &[f32],
        shifted: &mut [f32],
        dw: &mut [f32],
        accumulate: bool,
    ) {
        match isa {
            Isa::Avx512 => unsafe {
                weight_grad_avx512_f32(shape, batch, x, dz, shifted, dw, accumulate)
            },
            Isa::Avx2Fma => unsafe {
                weight_grad_avx2_f32(shape, batch, x, dz, shifted, dw, accumulate)
            },
        }
    }

    unsafe fn conv_rows(
        isa: Isa,
        shape: &Conv,
        x: &[f32],
        w: &[f32],
        bias: &[f32],
        out: &mut [MaybeUninit<f32>],
        epilogue: Epilogue,
    ) {
        match isa {
            Isa::Avx512 => unsafe { conv_avx512_f32(shape, x, w, bias, out, epilogue) },
            Isa::Avx2Fma => unsafe { conv_avx2_f32(shape, x, w, bias, out, epilogue) },
        }
    }
}

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
    layout: Layout,
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
    #[cfg(feature = "threads")]
    if let Some(rows_per_thread) = parallel_split(m, n, k) {
        super::in_configured_pool(|| {
            rayon::scope(|scope| {
                for (t, chunk) in c.chunks_mut(rows_per_thread * n).enumerate() {
                    scope.spawn(move |_| {
                        let start = t * rows_per_thread;
                        let rows = start..start + chunk.len() / n;
                        // SAFETY: lengths and instruction set checked above; `chunk` is exactly
                        // the rows `rows` of C, disjoint from every other thread's chunk.
                        unsafe { E::run_rows(isa, layout, m, n, k, rows, a, b, chunk, accumulate) }
                    });
                }
            });
        });
        return;
    }
    // SAFETY: lengths and instruction set checked above; `c` holds all the rows.
    unsafe { E::run_rows(isa, layout, m, n, k, 0..m, a, b, c, accumulate) }
}

/// Rows of `C` per thread when the product is worth splitting across rayon's pool, else `None`.
#[cfg(feature = "threads")]
fn parallel_split(m: usize, n: usize, k: usize) -> Option<usize> {
    /// Below this many multiply-adds (about 0.1 ms on one core) a split costs more than it saves:
    /// measured on 2 vCPUs, splitting the training step's products (up to 6.4 million) made an
    /// epoch 1.5 times slower.
    const MIN_WORK: usize = 1 << 24;
    let threads = super::in_configured_pool(rayon::current_num_threads);
    if threads < 2 || n == 0 || m < 16 || m * n * k < MIN_WORK {
        return None;
    }
    // Whole tiles per thread: 24 rows is a multiple of every tile height (8, 6, 2).
    Some(m.div_ceil(threads).next_multiple_of(24))
}

/// Running a kernel on a CPU without its instruction set would be undefined behaviour, so it is
/// checked on every call (one relaxed atomic load with `std`).
fn assert_isa(isa: Isa) {
    #[cfg(feature = "std")]
    let present = match isa {
        Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
        Isa::Avx2Fma => {
            std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
        }
    };
    #[cfg(not(feature = "std"))]
    let present = match isa {
        Isa::Avx512 => cfg!(target_feature = "avx512f"),
        Isa::Avx2Fma => cfg!(all(target_feature = "avx2", target_feature = "fma")),
    };
    assert!(present, "the CPU lacks {isa:?}");
}

/// Calls `$tile::<S, R, $n>` with `R = $rows` (1 to 8) rows of filters: a tile size the
/// compiler unrolls, chosen at run time.
macro_rules! tile_rows {
    ($tile:ident, $rows:expr, $n:literal, $($args:expr),*) => {
        match $rows {
            1 => $tile::<S, 1, $n>($($args),*),
            2 => $tile::<S, 2, $n>($($args),*),
            3 => $tile::<S, 3, $n>($($args),*),
            4 => $tile::<S, 4, $n>($($args),*),
            5 => $tile::<S, 5, $n>($($args),*),
            6 => $tile::<S, 6, $n>($($args),*),
            7 => if const { S::OUTER_ROWS >= 7 } { $tile::<S, 7, $n>($($args),*) } else { unreachable!() },
            8 => if const { S::OUTER_ROWS >= 8 } { $tile::<S, 8, $n>($($args),*) } else { unreachable!() },
            _ => unreachable!("tiles have at most 8 rows"),
        }
    };
}

/// One tile of a stride-1 convolution: output channels `0..MR` of the filters at `w` (each
/// `C·K·K` weights, `[c][ky][kx]`), at `NV` vectors of output positions, each `(oh, ow0, count)`:
/// the `count <= LANES` outputs `ow0..ow0 + count` of output row `oh`. Every output starts from
/// its bias; each step `(c, ky, kx)` loads, per vector, the input row `oh + ky - P` of channel
/// `c` from column `ow0 + kx - P` (masked to the lanes inside the image: the padding reads as
/// zero), broadcasts the `MR` weights of that step, and does `MR · NV` fused multiply-adds.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `x` holds `C·H·W` elements, `w` and `bias` the `MR`
/// filters and biases, `out` the `MR` output planes of `OH·OW` from the tile's first channel on;
/// every vector lies inside the output (`oh < OH`, `ow0 + count <= OW`), and the sizes satisfy
/// `OH = H + 2P - K + 1`, `OW = W + 2P - K + 1`.
#[inline(always)]
unsafe fn conv_tile<S: Simd, const MR: usize, const NV: usize>(
    shape: &Conv,
    x: *const S::E,
    w: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    vectors: [(usize, usize, usize); NV],
    epilogue: Epilogue,
) {
    let Conv {
        channels,
        kernel,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let weights_per_filter = channels * kernel * kernel;
    // SAFETY (whole body): the instruction set is present (the caller's contract). A vector's
    // lanes `lo..hi` are the columns `ow0 + kx - P + lane` that fall inside `0..W` of an input
    // row that exists (`0 <= oh + ky - P < H`), so every lane loaded is in `x`; the other lanes
    // are masked off, their addresses formed with wrapping arithmetic and never accessed. The
    // weights read are `r·C·K·K + p` with `r < MR`, `p < C·K·K`, inside `w`; the stores are the
    // vectors' positions, inside `out` by the caller's contract.
    unsafe {
        let lanes = S::LANES;
        let mut acc = [[S::zero(); NV]; MR];
        for (r, acc_row) in acc.iter_mut().enumerate() {
            *acc_row = [S::splat(*bias.add(r)); NV];
        }
        let plane_len = height * width;
        let kernel_len = kernel * kernel;
        // The window offsets outside, the channels inside: which lanes of a vector are in the
        // image depends on the offset only, so it is worked out once for all channels.
        for ky in 0..kernel {
            // Per vector: the input row, none when it is in the padding.
            let rows: [Option<usize>; NV] = array_from(|v| {
                let (oh, _, _) = vectors[v];
                (oh + ky).checked_sub(padding).filter(|&r| r < height)
            });
            if rows.iter().all(Option::is_none) {
                continue; // every vector's row is padding: nothing to add
            }
            for kx in 0..kernel {
                // Per vector: its first input element in channel 0, and the lanes inside the
                // image (none when the input row is in the padding).
                let mut firsts = [x; NV];
                let mut masks = [S::mask(0); NV];
                let mut full = true;
                for (((first, mask), &(_, ow0, count)), &row) in firsts
                    .iter_mut()
                    .zip(masks.iter_mut())
                    .zip(vectors.iter())
                    .zip(rows.iter())
                {
                    let (lo, hi) = match row {
                        Some(row) => {
                            *first = x.wrapping_add(row * width + ow0 + kx).wrapping_sub(padding);
                            (
                                padding.saturating_sub(ow0 + kx).min(count),
                                (width + padding).saturating_sub(ow0 + kx).min(count),
                            )
                        }
                        None => (0, 0),
                    };
                    full &= lo == 0 && hi == lanes;
                    *mask = S::mask_range(lo, hi.max(lo));
                }
                let step0 = ky * kernel + kx;
                for c in 0..channels {
                    let mut inputs = [S::zero(); NV];
                    for ((input, &first), &mask) in
                        inputs.iter_mut().zip(firsts.iter()).zip(masks.iter())
                    {
                        let p = first.wrapping_add(c * plane_len);
                        *input = if full {
                            S::load(p)
                        } else {
                            S::load_masked(p, mask)
                        };
                    }
                    let step = c * kernel_len + step0;
                    for (r, acc_row) in acc.iter_mut().enumerate() {
                        let weight = S::splat(*w.add(r * weights_per_filter + step));
                        for (acc_v, &input) in acc_row.iter_mut().zip(inputs.iter()) {
                            *acc_v = S::fma(weight, input, *acc_v);
                        }
                    }
                }
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (&acc_v, &(oh, ow0, count)) in acc_row.iter().zip(vectors.iter()) {
                let p = out.add(r * out_height * out_width + oh * out_width + ow0);
                let acc_v = finish::<S>(acc_v, epilogue);
                if count == lanes {
                    S::store(p, acc_v);
                } else {
                    S::store_masked(p, S::mask(count), acc_v);
                }
            }
        }
    }
}

/// The whole stride-1 convolution: blocks of `OUTER_ROWS` filters, each over the output rows
/// cut into vectors of `LANES` positions, two vectors per tile.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices and sizes were checked by [`conv2d_stride1`].
#[inline(always)]
unsafe fn conv_run<S: Simd>(
    shape: &Conv,
    x: &[S::E],
    w: &[S::E],
    bias: &[S::E],
    out: &mut [MaybeUninit<S::E>],
    epilogue: Epilogue,
) {
    let lanes = S::LANES;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let per_row = out_width.div_ceil(lanes);
    let vectors = out_height * per_row;
    let vector = |i: usize| {
        let ow0 = i % per_row * lanes;
        (i / per_row, ow0, lanes.min(out_width - ow0))
    };
    let weights_per_filter = shape.channels * shape.kernel * shape.kernel;
    let (x, out) = (x.as_ptr(), out.as_mut_ptr().cast::<S::E>());
    for r0 in (0..shape.filters).step_by(S::OUTER_ROWS) {
        let rows = S::OUTER_ROWS.min(shape.filters - r0);
        // SAFETY: filters r0..r0+rows exist; their weights start at r0·C·K·K, their output
        // planes at r0·OH·OW; the vectors are inside the output (built from OH and OW).
        unsafe {
            let w = w.as_ptr().add(r0 * weights_per_filter);
            let bias = bias.as_ptr().add(r0);
            let out = out.add(r0 * out_height * out_width);
            let mut i = 0;
            while i + 2 <= vectors {
                tile_rows!(
                    conv_tile,
                    rows,
                    2,
                    shape,
                    x,
                    w,
                    bias,
                    out,
                    [vector(i), vector(i + 1)],
                    epilogue
                );
                i += 2;
            }
            if i < vectors {
                let last = [vector(i)];
                tile_rows!(conv_tile, rows, 1, shape, x, w, bias, out, last, epilogue);
            }
        }
    }
}

/// The elements of one image's column-shifted copy for the weight gradient of `shape`: the
/// padded image once per kernel column `kx`, shifted left by `kx` and cut to the output's
/// width, `X_kx[c][row][ow] = X[c][row][ow + kx]`, `C·K·(H + 2P)·OW` elements. In it, the
/// inputs that meet the output positions `q = oh·OW + ow` at a step `(c, ky, kx)` are
/// contiguous, `X_kx[c][ky·OW + q]`, exactly as `dZ`'s positions are: one vector of positions
/// is one load of each, whatever the widths (see [`weight_grad_tile`]).
// Training only: without a heap there is no backward pass.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) const fn shifted_image_len(shape: &Conv) -> usize {
    shape.channels * shape.kernel * (shape.height + 2 * shape.padding) * shape.out_width()
}

/// How many images [`weight_grad_run`] shifts and sums at once for `shape`, in a
/// batch of `batch`: as many as keep their shifted copies and gradients within
/// [`WEIGHT_GRAD_PASS_BYTES`], at least one. The scratch it needs is that many
/// [`shifted_image_len`]s.
// Training only: without a heap there is no backward pass.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) const fn weight_grad_images_per_pass<E>(shape: &Conv, batch: usize) -> usize {
    let bytes = (shifted_image_len(shape) + shape.output_len()) * size_of::<E>();
    let per_pass = WEIGHT_GRAD_PASS_BYTES / if bytes == 0 { 1 } else { bytes };
    let most = if batch == 0 { 1 } else { batch };
    if per_pass < 1 {
        1
    } else if per_pass > most {
        most
    } else {
        per_pass
    }
}

/// One tile of a stride-1 convolution's weight gradient without padding, summed over a batch:
/// `dW[r][step] (+)= Σ over the images and output positions of dZ[r][position] ·
/// X̂[step][position]` for filters `0..MR` and the `NS` steps `steps` (each `(c·K + ky)·K + kx`),
/// read from the images' column-shifted copies `shifted` (see [`shifted_image_len`]) without
/// unrolling the patches. A vector's lane at output position `q = oh·OW + ow` meets
/// `dz[r][q]` and `shifted[c][kx][ky·OW + q]`: one contiguous vector of each per step, the
/// rows of `dZ` laid end to end as the layer holds them, so every vector is full but the
/// plane's last (masked).
///
/// Per vector of positions, `MR` vectors of `dZ` and, per step, one of inputs meet in `MR · NS`
/// accumulators, kept from one image to the next and summed horizontally once.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `shifted` holds `batch` column-shifted images of
/// [`shifted_image_len`]; `dz` points at the first of the tile's `MR` gradient planes of image
/// 0, each image's `filters` planes of `OH·OW` following each other; `dw` at the tile's first
/// filter's `C·K·K` weight gradients (the `MR` filters' rows following each other); every step
/// is below `C·K·K`; no padding; `OH = H - K + 1` and `OW = W - K + 1` are not 0.
// Training only: without a heap there is no backward pass.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn weight_grad_tile<S: Simd, const MR: usize, const NS: usize>(
    shape: &Conv,
    batch: usize,
    shifted: *const S::E,
    dz: *const S::E,
    dw: *mut S::E,
    steps: [usize; NS],
    accumulate: bool,
) {
    let Conv {
        channels,
        filters,
        kernel,
        height,
        ..
    } = *shape;
    let out_width = shape.out_width();
    let steps_per_filter = channels * kernel * kernel;
    let (image_len, plane) = (shifted_image_len(shape), shape.out_height() * out_width);
    let (whole, rest) = (plane / S::LANES, plane % S::LANES);
    // Where each step's inputs start in a shifted image: (c, ky, kx) -> X_kx[c][ky·OW].
    let offsets: [usize; NS] = array_from(|s| {
        let step = steps[s];
        let (c, ky, kx) = (
            step / (kernel * kernel),
            step / kernel % kernel,
            step % kernel,
        );
        ((c * kernel + kx) * height + ky) * out_width
    });
    // SAFETY (whole body): the instruction set is present (the caller's contract). A lane at
    // position q < OH·OW reads dz[r·OH·OW + q] of its image, r < MR, and shifted[((c·K + kx)·H +
    // ky)·OW + q] <= shifted[((c·K + kx)·H + K - 1)·OW + OH·OW - 1] = shifted[(c·K + kx + 1)·H·OW
    // - 1] (as OH + K - 1 = H), inside the image's copy; lanes at q >= OH·OW are masked off. The
    // gradients written are `dw[r·C·K·K + step]`, r < MR, step < C·K·K.
    unsafe {
        let rest_mask = S::mask(rest);
        let mut acc = [[S::zero(); NS]; MR];
        for b in 0..batch {
            let (x, dz) = (shifted.add(b * image_len), dz.add(b * filters * plane));
            // One vector of positions at `q`: a macro, not a closure, which would not inherit
            // the caller's target features.
            macro_rules! add_vector {
                ($q:expr, $load:expr) => {{
                    let q = $q;
                    let grads: [S::V; MR] = array_from(|r| $load(dz.add(r * plane + q)));
                    for (s, &offset) in offsets.iter().enumerate() {
                        let input = $load(x.add(offset + q));
                        for (acc_row, &g) in acc.iter_mut().zip(grads.iter()) {
                            acc_row[s] = S::fma(g, input, acc_row[s]);
                        }
                    }
                }};
            }
            for v in 0..whole {
                add_vector!(v * S::LANES, |p| S::load(p));
            }
            if rest > 0 {
                add_vector!(whole * S::LANES, |p| S::load_masked(p, rest_mask));
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (&acc_v, &step) in acc_row.iter().zip(steps.iter()) {
                let p = dw.add(r * steps_per_filter + step);
                let sum = S::sum(acc_v);
                *p = if accumulate { *p + sum } else { sum };
            }
        }
    }
}

/// Makes the column-shifted copies (see [`shifted_image_len`]) of `images` at the start of
/// `shifted`: row `r` of channel `c` of a padded image, from column `kx` on, `OW` wide, goes to
/// row `r` of its copy `kx` of that channel. The padding is written here, from the image as it
/// is: its rows are zeros, and its columns are the lanes a load leaves out.
///
/// A copy is written a column of vectors at a time, the last first: which lanes a load keeps
/// depends on the column only, so it is worked out once per column, not once per row (with
/// padding, that work was a quarter of the first layer's weight gradient). Every store is a
/// whole vector: the lanes of a row's last vector past its end land on the first vectors of
/// the rows (and copies) that follow, all written later, or past the last copy, where nothing
/// reads them. Only the stores past the end of `shifted` are masked
/// (a masked store costs several plain ones on some CPUs), and, without padding, the loads
/// past the end of `images`; with padding, every load is masked to the columns inside the
/// image.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the kernel fits the padded image (`OW = W + 2P - K + 1`);
/// `images` holds whole images of `shape` (without their padding), `shifted` at least as many
/// copies.
// Training only: without a heap there is no backward pass.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[inline(always)]
unsafe fn shift_columns<S: Simd>(shape: &Conv, images: &[S::E], shifted: &mut [S::E]) {
    let Conv {
        kernel,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (out_width, rows) = (shape.out_width(), height + 2 * padding);
    let lanes = S::LANES;
    let (source_len, target_len) = (images.len(), shifted.len());
    let (source, target) = (images.as_ptr(), shifted.as_mut_ptr());
    // One plane of an image (a channel) and its `K` copies, in order.
    let planes = source_len.checked_div(height * width).unwrap_or(0);
    // SAFETY (whole body): the instruction set is present (the caller's contract). Row r of
    // the padded plane p, from column kx + v, is row r - P of plane p from column kx + v - P,
    // at `p·H·W + (r - P)·W + kx + v - P` in `images` (before the row's start when kx + v <
    // P: the pointer is formed with wrapping arithmetic and those lanes are never read); its
    // copy at `((p·K + kx)·(H + 2P) + r)·OW + v` in `shifted`, below `planes·K·(H + 2P)·OW <=
    // target_len` (the caller's contract). Without padding, a load at `from` reads `from..from
    // + LANES` when that is inside `images`, else only the lanes the row needs (inside: `kx +
    // OW <= W`); with padding, only the lanes whose column `v + lane + kx - P` is in `0..W`, in
    // row r - P < H. A store writes `to..to + LANES` when that is inside `shifted`, else the
    // lanes of the row.
    unsafe {
        for p in 0..planes {
            for kx in 0..kernel {
                let copy = (p * kernel + kx) * rows * out_width;
                let mut v = out_width.div_ceil(lanes) * lanes;
                while v > 0 {
                    v -= lanes;
                    let needed = S::mask(lanes.min(out_width - v));
                    // With padding, the lanes whose columns v + lane + kx - P are in 0..W.
                    let first = (padding - (kx + v).min(padding)).min(lanes);
                    let last = (width + padding).saturating_sub(kx + v).min(lanes);
                    let inside_columns = S::mask_range(first, last.max(first));
                    for r in 0..rows {
                        let to = copy + r * out_width + v;
                        let value = if r < padding || r >= height + padding {
                            S::zero()
                        } else if padding == 0 {
                            let from = p * height * width + r * width + kx + v;
                            if from + lanes <= source_len {
                                S::load(source.add(from))
                            } else {
                                S::load_masked(source.add(from), needed)
                            }
                        } else if first < last {
                            let row = p * height * width + (r - padding) * width;
                            let from = source.add(row).wrapping_add(kx + v).wrapping_sub(padding);
                            S::load_masked(from, inside_columns)
                        } else {
                            S::zero()
                        };
                        if to + lanes <= target_len {
                            S::store(target.add(to), value);
                        } else {
                            S::store_masked(target.add(to), needed, value);
                        }
                    }
                }
            }
        }
    }
}

/// The weight gradient of a batch, a few images at a time
/// ([`weight_grad_images_per_pass`]): their column-shifted copies made in `shifted`, then the
/// tiles of [`weight_grad_tile`]. For a kernel of 4 or 5 (with [`Simd::COLUMN_TILES`]), a tile
/// is [`COLUMN_TILE_ROWS`] filters by a column of the kernel (the steps `(c, 0..K, kx)`, which
/// read consecutive rows of one shifted copy); otherwise `OUTER_ROWS` filters by two steps.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices and sizes were checked by
/// [`conv2d_weight_gradient_positions`].
// Training only: without a heap there is no backward pass.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[inline(always)]
unsafe fn weight_grad_run<S: Simd>(
    shape: &Conv,
    batch: usize,
    x: &[S::E],
    dz: &[S::E],
    shifted: &mut [S::E],
    dw: &mut [S::E],
    accumulate: bool,
) {
    if shape.out_height() == 0 || shape.out_width() == 0 {
        // No position: the sums are empty.
        if !accumulate {
            dw.fill(S::E::default());
        }
        return;
    }
    let out_width = shape.out_width();
    let steps = shape.channels * shape.kernel * shape.kernel;
    let (image_len, gradients_len) = (shape.image_len(), shape.output_len());
    let per_pass = weight_grad_images_per_pass::<S::E>(shape, batch);
    // The tiles read the shifted copies, which hold the padding: to them the image is padded.
    let padded = shape.padded();
    for first in (0..batch.max(1)).step_by(per_pass) {
        let batch = per_pass.min(batch - first);
        let accumulate = accumulate || first > 0;
        let images = &x[first * image_len..][..batch * image_len];
        // SAFETY: `images` are the pass's `batch` images, and `shifted` holds at least that
        // many copies (checked by the caller).
        unsafe { shift_columns::<S>(shape, images, shifted) };
        let (shifted, dz, dw) = (
            shifted.as_ptr(),
            dz[first * gradients_len..].as_ptr(),
            dw.as_mut_ptr(),
        );
        let kernel = shape.kernel;
        let by_columns = S::COLUMN_TILES && (kernel == 4 || kernel == 5);
        let block = if by_columns {
            COLUMN_TILE_ROWS
        } else {
            S::OUTER_ROWS
        };
        for r0 in (0..shape.filters).step_by(block) {
            let rows = block.min(shape.filters - r0);
            // SAFETY: the pass's `batch` shifted copies were just made; images first..first +
            // batch have gradients; filters r0..r0+rows exist: their gradient planes start at
            // r0·OH·OW in each image, their weight gradients at r0·C·K·K; every step passed is
            // below C·K·K.
            unsafe {
                let plane = shape.out_height() * out_width;
                let (dz, dw) = (dz.add(r0 * plane), dw.add(r0 * steps));
                if by_columns {
                    for column in 0..shape.channels * kernel {
                        // The steps (c, ky, kx), each (c·K + ky)·K + kx, for ky in 0..K.
                        let (c, kx) = (column / kernel, column % kernel);
                        let top_step = c * kernel * kernel + kx;
                        macro_rules! column_tile {
                            ($k:literal) => {{
                                let steps: [usize; $k] = array_from(|ky| top_step + ky * $k);
                                macro_rules! sized {
                                    ($rows:expr) => {
                                        weight_grad_tile::<S, $rows, $k>(
                                            &padded, batch, shifted, dz, dw, steps, accumulate,
                                        )
                                    };
                                }
                                const { assert!(COLUMN_TILE_ROWS == 3) };
                                match rows {
                                    1 => sized!(1),
                                    2 => sized!(2),
                                    3 => sized!(3),
                                    _ => unreachable!("column tiles have at most 3 filters"),
                                }
                            }};
                        }
                        if kernel == 4 {
                            column_tile!(4);
                        } else {
                            column_tile!(5);
                        }
                    }
                    continue;
                }
                let mut step = 0;
                while step + 2 <= steps {
                    tile_rows!(
                        weight_grad_tile,
                        rows,
                        2,
                        &padded,
                        batch,
                        shifted,
                        dz,
                        dw,
                        [step, step + 1],
                        accumulate
                    );
                    step += 2;
                }
                if step < steps {
                    tile_rows!(
                        weight_grad_tile,
                        rows,
                        1,
                        &padded,
                        batch,
                        shifted,
                        dz,
                        dw,
                        [step],
                        accumulate
                    );
                }
            }
        }
    }
}

/// The most bytes of shifted images and gradients one pass of [`weight_grad_run`]'s tiles
/// reads (at least one image): the tiles pass over them once per pair of steps, so they should
/// stay in the L1 cache. LeNet-5's first convolution, 36 KB per image, goes one image per
/// pass; measured with the earlier layout (the images as they are, 23 KB per image), five
/// images per pass made a training step 5% slower than one, the whole batch of 64, read from
/// L3, 12% slower.
const WEIGHT_GRAD_PASS_BYTES: usize = 32 * 1024;

/// The filters of [`weight_grad_run`]'s tiles along a kernel column (4 or 5 steps): 3 filters
/// keep at most 15 accumulators, 3 gradient vectors and an input in registers (of AVX-512's
/// 32), and do 15 multiply-adds for 8 loads (12 for 7 with a kernel of 4), where LeNet-5's 6
/// filters by 2 steps did 12 for 8. Measured on LeNet-5's first layer (6 filters, 5 x 5): its
/// backward pass 2-4% faster than with the pairs of steps.
const COLUMN_TILE_ROWS: usize = 3;

/// The sums of a tile of [`conv_flat_tile`] or [`conv_dense_tile`]: `acc[r][v]` = filter `r`'s
/// bias plus, over the steps `(c, ky, kx)`, its weight times vector `v` of inputs,
/// `load(v, at)` with `at` the image at `(c·H + ky)·W + kx` (each tile adds where its vector's
/// lanes start).
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `w` and `bias` hold the `MR` filters and biases; `load`
/// reads only inside the image.
#[inline(always)]
unsafe fn positions_tile_sums<S: Simd, const MR: usize, const NV: usize>(
    shape: &Conv,
    x: *const S::E,
    w: *const S::E,
    bias: *const S::E,
    load: impl Fn(usize, *const S::E) -> S::V,
) -> [[S::V; NV]; MR] {
    let Conv {
        channels,
        kernel,
        height,
        width,
        ..
    } = *shape;
    let steps = channels * kernel * kernel;
    // SAFETY: the instruction set is present; weights read: r·C·K·K + step, r < MR (the
    // caller's contract); the inputs' addresses are formed with wrapping arithmetic and read
    // only by `load`.
    unsafe {
        let mut acc = [[S::zero(); NV]; MR];
        for (r, acc_row) in acc.iter_mut().enumerate() {
            *acc_row = [S::splat(*bias.add(r)); NV];
        }
        let mut step = 0;
        for c in 0..channels {
            for ky in 0..kernel {
                let row = x.wrapping_add((c * height + ky) * width);
                for kx in 0..kernel {
                    let at = row.wrapping_add(kx);
                    let inputs: [S::V; NV] = array_from(|v| load(v, at));
                    for (r, acc_row) in acc.iter_mut().enumerate() {
                        let weight = S::splat(*w.add(r * steps + step));
                        for (acc_v, &input) in acc_row.iter_mut().zip(inputs.iter()) {
                            *acc_v = S::fma(weight, input, *acc_v);
                        }
                    }
                    step += 1;
                }
            }
        }
        acc
    }
}

/// One tile of a stride-1 convolution without padding, positions in the lanes, the output rows
/// laid end to end at the input's row stride ("flat"): flat position `q = oh·W + ow` reads the
/// input at `q + (c·H + ky)·W + kx` for step `(c, ky, kx)`, so each vector of positions is one
/// contiguous load per step, whatever the rows, and no lane needs a mask for the padding (the
/// caller pads the image). Positions with `ow >= OW` are computed and never stored. Filters
/// `0..MR` at the `NV` vectors of flat positions from `q0`; with `dense`, [`conv_dense_tile`]
/// instead, `q0` a dense position (which needs `OW >= LANES`: a vector then spans at most two
/// rows).
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `x` holds `C·H·W` elements, `w` and `bias` the `MR`
/// filters and biases, `out` the `MR` output planes of `OH·OW` from the tile's first filter on;
/// `OH, OW >= 1`; no padding; `OW >= LANES` with `dense`.
#[inline(always)]
unsafe fn conv_flat_tile<S: Simd, const MR: usize, const NV: usize>(
    shape: &Conv,
    x: *const S::E,
    w: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    (q0, epilogue, dense): (usize, Epilogue, bool),
) {
    let width = shape.width;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let lanes = S::LANES;
    // Flat positions 0..end hold every output; the last vectors may run past it.
    let end = (out_height - 1) * width + out_width;
    let plane_out = out_height * out_width;
    if dense {
        // SAFETY: forwarded (this function's contract).
        unsafe { conv_dense_tile::<S, MR, NV>(shape, x, w, bias, out, q0, epilogue) };
        return;
    }
    // SAFETY (whole body): the instruction set is present (the caller's contract). A lane at
    // flat position q < end reads x[q + (c·H + ky)·W + kx] <= x[(OH - 1)·W + OW - 1 +
    // (C - 1)·H·W + (K - 1)·W + K - 1] = x[C·H·W - 1] (as OH + K - 1 = H, OW + K - 1 = W);
    // lanes at q >= end are masked off, their addresses formed with wrapping arithmetic and never
    // accessed. Weights read: r·C·K·K + step, r < MR. Stores: lanes at (oh, ow) with oh < OH,
    // ow < OW only, the others masked off.
    unsafe {
        let vectors: [(bool, S::Mask); NV] = array_from(|v| {
            let valid = end.saturating_sub(q0 + v * lanes).min(lanes);
            (valid == lanes, S::mask(valid))
        });
        let acc = positions_tile_sums::<S, MR, NV>(shape, x, w, bias, |v, at| {
            let p = at.wrapping_add(q0 + v * lanes);
            let (full, mask) = vectors[v];
            if full {
                S::load(p)
            } else {
                S::load_masked(p, mask)
            }
        });
        for v in 0..NV {
            let q_start = q0 + v * lanes;
            let q_end = (q_start + lanes).min(end);
            // Each output row the vector reaches: its lanes at columns below OW.
            let mut oh = q_start / width;
            while oh * width < q_end {
                let row_start = oh * width;
                let (lo, hi) = (row_start.max(q_start), (row_start + out_width).min(q_end));
                if lo < hi {
                    let mask = S::mask_range(lo - q_start, hi - q_start);
                    for (r, acc_row) in acc.iter().enumerate() {
                        // Lane i is flat position q_start + i: column q_start + i - row_start.
                        let p = out
                            .add(r * plane_out + oh * out_width)
                            .wrapping_add(q_start)
                            .wrapping_sub(row_start);
                        S::store_masked(p, mask, finish::<S>(acc_row[v], epilogue));
                    }
                }
                oh += 1;
            }
        }
    }
}

/// A vector of [`conv_dense_tile`]: its first input's offset, whether it lies whole in one
/// output row, the masks of its two parts (the lanes in its first row, and those in the next),
/// and how many of its lanes are outputs.
#[derive(Clone, Copy)]
struct DenseVector<M> {
    offset: usize,
    whole: bool,
    first: M,
    second: M,
    valid: usize,
}

/// The tile of [`conv_flat_tile`] with the output positions dense (`d = oh·OW + ow`, lane `i`
/// at `d0 + i`), for outputs at least a vector wide: a vector then spans at most two output
/// rows, whose inputs lie `W - OW` apart at every step, so it is loaded in two masked parts
/// (one where it lies in one row) and no lane computes a column of padding (in LeNet-5's first
/// layer, 4 of every 32 lanes of the flat tile did), and it is stored whole. `q0` is the first
/// dense position.
///
/// # Safety
///
/// As [`conv_flat_tile`], and `OW >= LANES`.
#[inline(always)]
unsafe fn conv_dense_tile<S: Simd, const MR: usize, const NV: usize>(
    shape: &Conv,
    x: *const S::E,
    w: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    d0: usize,
    epilogue: Epilogue,
) {
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let (lanes, gap) = (S::LANES, shape.width - out_width);
    let plane_out = out_height * out_width;
    // SAFETY (whole body): the instruction set is present (the caller's contract). Lane `i` of
    // vector `v` is dense position `d = d0 + v·LANES + i`, output `(oh, ow) = (d / OW, d % OW)`,
    // which reads the input at the flat position `oh·W + ow = d + oh·(W - OW)`, as the flat
    // tile's lane at that position does (in bounds for every output); the lanes in the vector's
    // first row are loaded from `d + oh0·(W - OW)` on, the others (row `oh0 + 1`, as `OW >=
    // LANES`) from `W - OW` further; lanes at `d >= OH·OW` are masked off, never accessed.
    // Weights read: r·C·K·K + step, r < MR. Stores: dense positions below OH·OW only.
    unsafe {
        let vectors: [DenseVector<S::Mask>; NV] = array_from(|v| {
            let d = d0 + v * lanes;
            let valid = plane_out.saturating_sub(d).min(lanes);
            let oh0 = d / out_width;
            let first = (out_width * (oh0 + 1)).saturating_sub(d).min(valid);
            DenseVector {
                offset: d + oh0 * gap,
                whole: first == lanes,
                first: S::mask(first),
                second: S::mask_range(first, valid.max(first)),
                valid,
            }
        });
        let acc = positions_tile_sums::<S, MR, NV>(shape, x, w, bias, |v, at| {
            let vector = vectors[v];
            let p = at.wrapping_add(vector.offset);
            if vector.whole {
                S::load(p)
            } else {
                let part = S::load_masked(p, vector.first);
                S::load_masked_into(part, p.wrapping_add(gap), vector.second)
            }
        });
        for (v, &DenseVector { valid, .. }) in vectors.iter().enumerate() {
            let d = d0 + v * lanes;
            for (r, acc_row) in acc.iter().enumerate() {
                let p = out.wrapping_add(r * plane_out + d);
                let value = finish::<S>(acc_row[v], epilogue);
                if valid == lanes {
                    S::store(p, value);
                } else if valid > 0 {
                    S::store_masked(p, S::mask(valid), value);
                }
            }
        }
    }
}

/// The whole stride-1 convolution of one image without padding, positions in the lanes, flat
/// (see [`conv_flat_tile`]), or dense where the output is at least a vector wide (see
/// [`conv_dense_tile`]): blocks of `OUTER_ROWS` filters, each over the positions,
/// `FLAT_VECTORS` vectors per tile (4 for up to 6 filters on AVX-512), then one tile of the
/// vectors left. (A last tile as wide as the others computed up to 3 vectors past the end:
/// with the dense positions of LeNet-5's first layer, 49 vectors, 4 x 13 of them.)
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices and sizes were checked by
/// [`conv2d_stride1_flat`].
#[inline(always)]
unsafe fn conv_flat_run<S: Simd>(
    shape: &Conv,
    x: &[S::E],
    w: &[S::E],
    bias: &[S::E],
    out: &mut [MaybeUninit<S::E>],
    epilogue: Epilogue,
) {
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    if out_height == 0 || out_width == 0 {
        return;
    }
    // Outputs at least a vector wide: dense positions (see `conv_dense_tile`).
    let dense = out_width >= S::LANES;
    let end = if dense {
        out_height * out_width
    } else {
        (out_height - 1) * shape.width + out_width
    };
    let vectors = end.div_ceil(S::LANES);
    let steps = shape.channels * shape.kernel * shape.kernel;
    let (x, out) = (x.as_ptr(), out.as_mut_ptr().cast::<S::E>());
    for r0 in (0..shape.filters).step_by(S::OUTER_ROWS) {
        let rows = S::OUTER_ROWS.min(shape.filters - r0);
        // SAFETY: filters r0..r0+rows exist; their weights start at r0·C·K·K, their output
        // planes at r0·OH·OW; a tile's vectors past the last position are masked off.
        unsafe {
            let w = w.as_ptr().add(r0 * steps);
            let bias = bias.as_ptr().add(r0);
            let out = out.add(r0 * out_height * out_width);
            // Up to 6 filters leave the registers for a fourth vector (24 sums).
            let per_tile = if S::FLAT_VECTORS == 3 && rows <= 6 {
                4
            } else {
                S::FLAT_VECTORS
            };
            // Whole tiles, then one of the vectors left (no tile of vectors past the end).
            let mut v = 0;
            while v < vectors {
                let n = per_tile.min(vectors - v);
                let q0 = v * S::LANES;
                let args = (q0, epilogue, dense);
                match n {
                    // (Tiles of 3 and 4 vectors only where `FLAT_VECTORS` is 3: not instantiated
                    // for the other instruction sets.)
                    4 if const { S::FLAT_VECTORS == 3 } => {
                        tile_rows!(conv_flat_tile, rows, 4, shape, x, w, bias, out, args)
                    }
                    3 if const { S::FLAT_VECTORS == 3 } => {
                        tile_rows!(conv_flat_tile, rows, 3, shape, x, w, bias, out, args)
                    }
                    2 => tile_rows!(conv_flat_tile, rows, 2, shape, x, w, bias, out, args),
                    _ => tile_rows!(conv_flat_tile, rows, 1, shape, x, w, bias, out, args),
                }
                v += n;
            }
        }
    }
}

/// The entry of a stride-1 convolution's forward kernel `$run` (`conv_run`, `conv_flat_run`,
/// `conv_filters_run`) for one instruction set and element type.
macro_rules! conv_forward_entry {
    ($name:ident, $run:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; the sizes and lengths
        /// checked by the safe function that calls it.
        #[target_feature(enable = $features)]
        unsafe fn $name(
            shape: &Conv,
            x: &[$e],
            w: &[$e],
            bias: &[$e],
            out: &mut [MaybeUninit<$e>],
            epilogue: Epilogue,
        ) {
            // SAFETY (both): forwarded from this function's contract. One inlined copy per
            // epilogue, each a constant there: as a run-time value it cost the flat kernel 15%.
            match epilogue {
                Epilogue::Identity => unsafe {
                    $run::<$simd>(shape, x, w, bias, out, Epilogue::Identity)
                },
                Epilogue::Relu => unsafe { $run::<$simd>(shape, x, w, bias, out, Epilogue::Relu) },
            }
        }
    };
}

conv_forward_entry!(
    conv_flat_avx512_f32,
    conv_flat_run,
    Avx512F32,
    f32,
    "avx512f"
);
conv_forward_entry!(conv_flat_avx2_f32, conv_flat_run, Avx2F32, f32, "avx2,fma");

/// Output positions per tile of [`conv_filters_tile`]: one accumulator each, plus the weights'
/// vector and a broadcast, within AVX2's 16 registers.
const FILTER_TILE_POSITIONS: usize = 12;

/// Weight steps per tile of [`weight_grad_filters_tile`]: one accumulator each; their input
/// offsets stay in general-purpose registers.
const FILTER_TILE_STEPS: usize = 8;

/// Whether a stride-1 convolution's kernels run with the filters in the vector lanes (the
/// `*_filters` kernels) rather than output positions (one row at a time): when more of each
/// vector is useful that way. A 10-wide output row fills 10 of 16 `f32` lanes of AVX-512, 16
/// filters fill all 16.
pub(crate) fn filters_in_lanes<E>(isa: Isa, shape: &Conv) -> bool {
    super::filters_fill_lanes_better(shape, lanes::<E>(isa))
}

/// The lanes of `isa`'s vectors of `E`.
pub(crate) const fn lanes<E>(isa: Isa) -> usize {
    let bytes = match isa {
        Isa::Avx512 => 64,
        Isa::Avx2Fma => 32,
    };
    bytes / core::mem::size_of::<E>()
}

/// One tile of a stride-1 convolution without padding, the filters in the lanes: filters
/// `f0..f0 + count` (`count <= LANES`) at the `NP` positions `ow0..ow0 + NP` of output row `oh`.
/// Each step `(c, ky, kx)` loads the step's weights of those filters from the transposed weights
/// `wt` (`[C·K·K][filters]`) and, per position, broadcasts the input it meets: `NP` fused
/// multiply-adds per load, every lane useful. The sums are stored transposed, one lane per
/// output plane.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `x` holds `C·H·W` elements, `wt` `C·K·K·filters`, `bias`
/// `filters`, `out` `filters·OH·OW`; `f0 + count <= filters`, `oh < OH`, `ow0 + NP <= OW`; no
/// padding.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn conv_filters_tile<S: Simd, const NP: usize>(
    shape: &Conv,
    x: *const S::E,
    wt: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    (f0, count): (usize, usize),
    oh: usize,
    ow0: usize,
    epilogue: Epilogue,
) {
    let Conv {
        channels,
        filters,
        kernel,
        height,
        width,
        ..
    } = *shape;
    let plane_out = shape.out_height() * shape.out_width();
    // SAFETY (whole body): the instruction set is present (the caller's contract). The weight
    // vectors read are lanes `f0..f0 + count` of rows `step < C·K·K` of `wt` (the others masked
    // off), the bias lanes `f0..f0 + count`; the inputs broadcast are `(c, oh + ky, ow0 + i +
    // kx)` with `oh + ky < OH + K - 1 = H` and `ow0 + i + kx < OW + K - 1 = W` (no padding),
    // inside `x`; the outputs written are `(f0 + lane, oh, ow0 + i)`, inside `out`.
    unsafe {
        let mask = S::mask(count);
        let full = count == S::LANES;
        let load = |p: *const S::E| {
            if full {
                S::load(p)
            } else {
                S::load_masked(p, mask)
            }
        };
        let mut acc = [load(bias.add(f0)); NP];
        let mut weights = wt.add(f0);
        for c in 0..channels {
            for ky in 0..kernel {
                let row = x.add((c * height + oh + ky) * width + ow0);
                for kx in 0..kernel {
                    let w = load(weights);
                    weights = weights.wrapping_add(filters);
                    let inputs = row.add(kx);
                    for (i, acc_i) in acc.iter_mut().enumerate() {
                        *acc_i = S::fma(S::splat(*inputs.add(i)), w, *acc_i);
                    }
                }
            }
        }
        let first = out.add(f0 * plane_out + oh * shape.out_width() + ow0);
        let acc: [S::V; NP] = array_from(|p| finish::<S>(acc[p], epilogue));
        S::store_transposed(&acc, first, plane_out, count);
    }
}

/// Calls `$tile::<S, N>` for a runtime `$n` in `1..FILTER_TILE_POSITIONS` (or `..STEPS`).
macro_rules! filters_tile_sized {
    ($tile:ident, $n:expr, below $whole:expr, $($args:expr),*) => {
        match $n {
            1 => $tile::<S, 1>($($args),*),
            2 => $tile::<S, 2>($($args),*),
            3 => $tile::<S, 3>($($args),*),
            4 => $tile::<S, 4>($($args),*),
            5 => $tile::<S, 5>($($args),*),
            6 => $tile::<S, 6>($($args),*),
            7 => $tile::<S, 7>($($args),*),
            // Only the sizes below a whole tile of `$whole` are instantiated.
            8 if const { $whole > 8 } => $tile::<S, 8>($($args),*),
            9 if const { $whole > 9 } => $tile::<S, 9>($($args),*),
            10 if const { $whole > 10 } => $tile::<S, 10>($($args),*),
            11 if const { $whole > 11 } => $tile::<S, 11>($($args),*),
            _ => unreachable!("a partial tile is smaller than a whole one"),
        }
    };
}

/// The whole stride-1 convolution of one image without padding, the filters in the lanes: per
/// vector of filters, per output row, tiles of [`FILTER_TILE_POSITIONS`] positions.
///
/// # Safety
///
/// As [`conv_filters_tile`], for the whole output; the slices checked by
/// [`conv2d_stride1_batch`].
#[inline(always)]
unsafe fn conv_filters_run<S: Simd>(
    shape: &Conv,
    x: &[S::E],
    wt: &[S::E],
    bias: &[S::E],
    out: &mut [MaybeUninit<S::E>],
    epilogue: Epilogue,
) {
    const NP: usize = FILTER_TILE_POSITIONS;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let (x, wt, bias) = (x.as_ptr(), wt.as_ptr(), bias.as_ptr());
    let out = out.as_mut_ptr().cast::<S::E>();
    for f0 in (0..shape.filters).step_by(S::LANES) {
        let filters = (f0, S::LANES.min(shape.filters - f0));
        for oh in 0..out_height {
            // SAFETY: every tile lies inside the output: f0 + count <= filters, oh < OH, and
            // ow0 + NP <= OW (the last tile takes what is left).
            unsafe {
                let mut ow0 = 0;
                while ow0 + NP <= out_width {
                    conv_filters_tile::<S, NP>(shape, x, wt, bias, out, filters, oh, ow0, epilogue);
                    ow0 += NP;
                }
                if ow0 < out_width {
                    filters_tile_sized!(
                        conv_filters_tile,
                        out_width - ow0,
                        below NP,
                        shape,
                        x,
                        wt,
                        bias,
                        out,
                        filters,
                        oh,
                        ow0,
                        epilogue
                    );
                }
            }
        }
    }
}

/// One tile of a stride-1 convolution's weight gradient without padding, the filters in the
/// lanes, summed over a batch: `dW[f][step] (+)= Σ over the images and output positions of
/// dZ[f][position] · X̂[step][position]` for filters `f0..f0 + count` and the `NS` steps
/// `step0..step0 + NS`. The gradient `dzt` is position-major (`[image][position][filter]`):
/// per position, one vector of it and, per step, the input it met, broadcast: `NS` fused
/// multiply-adds per load, every lane useful, and no horizontal sums.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `x` holds `batch` images of `C·H·W`, `dzt` `batch` blocks
/// of `OH·OW·filters`, `dw` `filters·C·K·K`; `f0 + count <= filters`, `step0 + NS <= C·K·K`; no
/// padding.
// Training only: without a heap there is no backward pass.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn weight_grad_filters_tile<S: Simd, const NS: usize>(
    shape: &Conv,
    batch: usize,
    x: *const S::E,
    dzt: *const S::E,
    dw: *mut S::E,
    (f0, count): (usize, usize),
    step0: usize,
    accumulate: bool,
) {
    let Conv {
        channels,
        filters,
        kernel,
        height,
        width,
        ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let steps = channels * kernel * kernel;
    // Where each step's window starts in the image: (c, ky, kx) -> (c·H + ky)·W + kx.
    let offsets: [usize; NS] = array_from(|s| {
        let step = step0 + s;
        let (c, ky, kx) = (
            step / (kernel * kernel),
            step / kernel % kernel,
            step % kernel,
        );
        (c * height + ky) * width + kx
    });
    // SAFETY (whole body): the instruction set is present (the caller's contract). Without
    // padding, the input broadcast for output (oh, ow) and step (c, ky, kx) is (c, oh + ky,
    // ow + kx), inside the image since oh + ky < OH + K - 1 = H and ow + kx < W likewise; the
    // gradient lanes read are filters f0..f0 + count of a position of an image in the batch
    // (the others masked off); the weight gradients written are (f0 + lane, step0 + s), inside
    // `dw`.
    unsafe {
        let mask = S::mask(count);
        let full = count == S::LANES;
        let mut acc = [S::zero(); NS];
        for b in 0..batch {
            let image = x.add(b * channels * height * width);
            let mut grads = dzt.add(b * out_height * out_width * filters + f0);
            for oh in 0..out_height {
                let row = image.add(oh * width);
                for ow in 0..out_width {
                    let g = if full {
                        S::load(grads)
                    } else {
                        S::load_masked(grads, mask)
                    };
                    grads = grads.wrapping_add(filters);
                    let inputs = row.add(ow);
                    for (acc_s, &offset) in acc.iter_mut().zip(offsets.iter()) {
                        *acc_s = S::fma(S::splat(*inputs.add(offset)), g, *acc_s);
                    }
                }
            }
        }
        let mut lanes = [S::E::default(); 16];
        for (s, &acc_s) in acc.iter().enumerate() {
            S::store(lanes.as_mut_ptr(), acc_s);
            let first = dw.add(f0 * steps + step0 + s);
            for (lane, &sum) in lanes[..count].iter().enumerate() {
                let p = first.add(lane * steps);
                *p = if accumulate { *p + sum } else { sum };
            }
        }
    }
}

/// The weight gradient of a batch, the filters in the lanes: per vector of filters, tiles of
/// [`FILTER_TILE_STEPS`] steps, each over the whole batch.
///
/// # Safety
///
/// As [`weight_grad_filters_tile`] for every tile; the slices checked by
/// [`conv2d_weight_gradient_batch`].
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[inline(always)]
unsafe fn weight_grad_filters_run<S: Simd>(
    shape: &Conv,
    batch: usize,
    x: &[S::E],
    dzt: &[S::E],
    dw: &mut [S::E],
    accumulate: bool,
) {
    const NS: usize = FILTER_TILE_STEPS;
    let steps = shape.channels * shape.kernel * shape.kernel;
    let (x, dzt, dw) = (x.as_ptr(), dzt.as_ptr(), dw.as_mut_ptr());
    for f0 in (0..shape.filters).step_by(S::LANES) {
        let filters = (f0, S::LANES.min(shape.filters - f0));
        // SAFETY: every tile's filters and steps exist (the last tile takes what is left).
        unsafe {
            let mut step = 0;
            while step + NS <= steps {
                weight_grad_filters_tile::<S, NS>(
                    shape, batch, x, dzt, dw, filters, step, accumulate,
                );
                step += NS;
            }
            if step < steps {
                filters_tile_sized!(
                    weight_grad_filters_tile,
                    steps - step,
                    below NS,
                    shape,
                    batch,
                    x,
                    dzt,
                    dw,
                    filters,
                    step,
                    accumulate
                );
            }
        }
    }
}

/// The images whose transforms [`weight_grad_winograd_run`] holds at once: the pairs of
/// kernel rows go over them with their sums in registers, stored between groups of images.
#[cfg(feature = "alloc")]
const WINOGRAD_GRADIENT_IMAGES: usize = 4;

/// The scratch elements [`conv2d_weight_gradient_winograd`] needs for `shape` (no padding) and a
/// batch of `batch`, with vectors of `lanes`: one image transposed, and for up to
/// [`WINOGRAD_GRADIENT_IMAGES`] images their input transforms, their gradients position-major
/// and those evaluated at the points (per vector of filters), then the sums in Winograd's
/// domain (per vector of filters, pair `(c, ky)` and point).
#[cfg(feature = "alloc")]
pub(crate) const fn weight_gradient_winograd_scratch(
    shape: &Conv,
    batch: usize,
    lanes: usize,
) -> usize {
    let (tiles, covered, rows) = winograd_forward_tiling(shape, super::winograd::TILE);
    let stride = rows.next_multiple_of(lanes);
    let tile = super::winograd::TILE;
    let images = if batch < WINOGRAD_GRADIENT_IMAGES {
        batch
    } else {
        WINOGRAD_GRADIENT_IMAGES
    };
    let groups = shape.filters.div_ceil(lanes);
    shape.channels * covered * rows
        + images * shape.channels * tiles * tile * stride
        + images * shape.output_len()
        + groups * images * shape.out_height() * tiles * tile * lanes
        + groups * shape.channels * shape.kernel * tile * lanes
}

/// One tile of the weight gradient by Winograd's method along the rows: the sums of `NP` pairs
/// `(c, ky)` (from `pair0`) at the 6 points, one vector of filters, over `images` images. Per
/// output row `oh` and tile `t`: 6 vectors of the gradients evaluated at the points, `e`, and
/// per pair and point the input's transform `V[c][t][ν][oh + ky]`, broadcast: `6·NP` fused
/// multiply-adds per 6 loads, where the direct kernel does `(7 - K)·K·NP` per `7 - K`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `e` holds the group's `images·OH·tiles·6` vectors, `v`
/// the images' transforms (`images` blocks of `C·tiles·6·rows`, `[c][t][ν][row]`), `sums` the
/// group's `C·K·6` vectors; `pair0 + NP <= C·K`.
#[cfg(feature = "alloc")]
#[inline(always)]
unsafe fn weight_grad_winograd_tile<S: Simd, const NP: usize>(
    shape: &Conv,
    images: usize,
    e: *const S::E,
    v: *const S::E,
    sums: *mut S::E,
    pair0: usize,
) {
    const TILE: usize = super::winograd::TILE;
    let lanes = S::LANES;
    let (tiles, _, rows) = winograd_forward_tiling(shape, super::winograd::TILE);
    let stride = rows.next_multiple_of(lanes);
    let image = shape.channels * tiles * TILE * stride;
    // Where pair (c, ky)'s transforms start in an image's, at tile 0, point 0, row oh = 0.
    let offsets: [usize; NP] = array_from(|p| {
        let (c, ky) = ((pair0 + p) / shape.kernel, (pair0 + p) % shape.kernel);
        c * tiles * TILE * stride + ky
    });
    // SAFETY (whole body): the instruction set is present (the caller's contract). The sums
    // read and written are the pairs pair0..pair0 + NP < C·K at the 6 points; the vectors of
    // `e` read are the images·OH·tiles·6 it holds, in order; the transforms of `v` read are of
    // image i < images, pair (c, ky), tile t < tiles, point ν, row oh + ky < OH + K - 1 =
    // rows.
    unsafe {
        let mut acc: [[S::V; TILE]; NP] =
            array_from(|p| array_from(|nu| S::load(sums.add(((pair0 + p) * TILE + nu) * lanes))));
        let mut e = e;
        for i in 0..images {
            let v_image = v.add(i * image);
            for oh in 0..shape.out_height() {
                for t in 0..tiles {
                    let v_t = v_image.add(t * TILE * stride + oh);
                    for nu in 0..TILE {
                        let g = S::load(e.add(nu * lanes));
                        let v_nu = v_t.add(nu * stride);
                        for (acc_p, &offset) in acc.iter_mut().zip(&offsets) {
                            acc_p[nu] = S::fma(S::splat(*v_nu.add(offset)), g, acc_p[nu]);
                        }
                    }
                    e = e.add(TILE * lanes);
                }
            }
        }
        for (p, acc_p) in acc.iter().enumerate() {
            for (nu, &sum) in acc_p.iter().enumerate() {
                S::store(sums.add(((pair0 + p) * TILE + nu) * lanes), sum);
            }
        }
    }
}

/// The weight gradient of a batch of stride-1 convolutions without padding by Winograd's
/// minimal filtering along the rows, `F(R, M)` with `M = 7 - R`, the filters in the lanes: per
/// output row, pair `(c, ky)` and tile of `M` gradients, 6 products where the direct kernel does
/// `M·R`. For one row, filter and pair, `dw[kx] = Σ_ow dz[ow] · x[ow + kx]` is, tile by tile,
/// a correlation of the tile's 6 inputs `d` (columns `t·M..t·M + 6` of the input row) with the
/// tile's `M` gradients `g`: `Aᵀ[(G·g) ⊙ (Bᵀ·d)]`. All of it is linear, so the sums over the
/// batch, the rows and the tiles are taken at the 6 points, and `Aᵀ` (with `G`'s denominators,
/// `finish`) once per call. `Bᵀ·d` is the forward pass's input transform
/// ([`winograd_row_transforms`]); `G·g` without its denominators evaluates the gradients at the
/// points (`evaluate`), once per image, row and tile.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices and sizes were checked by
/// [`conv2d_weight_gradient_winograd`] (`scratch` as [`weight_gradient_winograd_scratch`]
/// says).
#[cfg(feature = "alloc")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn weight_grad_winograd_run<S: Simd, const R: usize, const M: usize>(
    shape: &Conv,
    batch: usize,
    x: &[S::E],
    dz: &[S::E],
    scratch: &mut [S::E],
    dw: &mut [S::E],
    accumulate: bool,
    [evaluate, finish]: &[[[S::E; 6]; 6]; 2],
) where
    S::E: From<f32> + PartialEq + 'static,
{
    const TILE: usize = super::winograd::TILE;
    let lanes = S::LANES;
    let Conv {
        channels, filters, ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let (tiles, covered, rows) = winograd_forward_tiling(shape, super::winograd::TILE);
    let (image_len, output_len) = (shape.image_len(), shape.output_len());
    let groups = filters.div_ceil(lanes);
    let pairs = channels * R;
    let chunk = WINOGRAD_GRADIENT_IMAGES.min(batch);
    let v_len = channels * tiles * TILE * rows.next_multiple_of(lanes);
    let e_len = chunk * out_height * tiles * TILE * lanes;
    let (image, rest) = scratch.split_at_mut(channels * covered * rows);
    let (v, rest) = rest.split_at_mut(chunk * v_len);
    let (dzt, rest) = rest.split_at_mut(chunk * output_len);
    let (e, rest) = rest.split_at_mut(groups * e_len);
    let sums = &mut rest[..groups * pairs * TILE * lanes];
    // The columns past the image stay zero: the last tile's inputs past the image meet only
    // gradients past the output, which are zero too.
    image.fill(S::E::default());
    sums.fill(S::E::default());
    let (image, v, e, sums) = (
        image.as_mut_ptr(),
        v.as_mut_ptr(),
        e.as_mut_ptr(),
        sums.as_mut_ptr(),
    );
    // SAFETY (whole body): the instruction set is present (the caller's contract); every read
    // and write is inside the slices split above (their lengths are the bounds each comment
    // names) or inside `x`, `dz` and `dw`, whose lengths the caller checked.
    unsafe {
        for b0 in (0..batch).step_by(chunk.max(1)) {
            let images = chunk.min(batch - b0);
            for i in 0..images {
                let b = b0 + i;
                winograd_row_transforms::<S, 6, M>(
                    shape,
                    x.as_ptr().add(b * image_len),
                    image,
                    v.add(i * v_len),
                    &SixPoints,
                );
                // Position-major, [position][filter], for vectors of filters.
                transpose(
                    &dz[b * output_len..][..output_len],
                    filters,
                    &mut dzt[i * output_len..][..output_len],
                );
            }
            // The gradients of each tile evaluated at the points (a tile past the output's
            // width takes zeros): [group][image][oh][t][ν][lane].
            for group in 0..groups {
                let f0 = group * lanes;
                let mask = S::mask(lanes.min(filters - f0));
                let mut to = e.add(group * e_len);
                for i in 0..images {
                    let dzt = dzt.as_ptr().add(i * output_len + f0);
                    for oh in 0..out_height {
                        for t in 0..tiles {
                            let first = oh * out_width + t * M;
                            let valid = M.min(out_width - t * M);
                            let g: [S::V; M] = array_from(|s| {
                                if s < valid {
                                    S::load_masked(dzt.add((first + s) * filters), mask)
                                } else {
                                    S::zero()
                                }
                            });
                            for (nu, row) in evaluate.iter().enumerate() {
                                let mut sum = S::zero();
                                for (&coefficient, &g) in row.iter().zip(&g) {
                                    if coefficient != S::E::default() {
                                        sum = S::fma(S::splat(coefficient), g, sum);
                                    }
                                }
                                S::store(to.add(nu * lanes), sum);
                            }
                            to = to.add(TILE * lanes);
                        }
                    }
                }
            }
            for group in 0..groups {
                let (e, sums) = (
                    e.add(group * e_len).cast_const(),
                    sums.add(group * pairs * TILE * lanes),
                );
                let v = v.cast_const();
                let mut pair = 0;
                while pair < pairs {
                    let n = S::WINOGRAD_GRADIENT_PAIRS.min(pairs - pair);
                    match n {
                        5 => weight_grad_winograd_tile::<S, 5>(shape, images, e, v, sums, pair),
                        4 => weight_grad_winograd_tile::<S, 4>(shape, images, e, v, sums, pair),
                        3 => weight_grad_winograd_tile::<S, 3>(shape, images, e, v, sums, pair),
                        2 => weight_grad_winograd_tile::<S, 2>(shape, images, e, v, sums, pair),
                        _ => weight_grad_winograd_tile::<S, 1>(shape, images, e, v, sums, pair),
                    }
                    pair += n;
                }
            }
        }
        // dw[f][c][ky][kx] = Σ_ν finish[kx][ν] · sums[c][ky][ν][f].
        let mut lanes_out = [S::E::default(); 16];
        for group in 0..groups {
            let f0 = group * lanes;
            let count = lanes.min(filters - f0);
            for pair in 0..pairs {
                let at = sums.add((group * pairs + pair) * TILE * lanes);
                let point: [S::V; TILE] = array_from(|nu| S::load(at.add(nu * lanes)));
                for (kx, row) in finish.iter().take(R).enumerate() {
                    let mut sum = S::zero();
                    for (&coefficient, &p) in row.iter().zip(&point) {
                        if coefficient != S::E::default() {
                            sum = S::fma(S::splat(coefficient), p, sum);
                        }
                    }
                    S::store(lanes_out.as_mut_ptr(), sum);
                    for (lane, &value) in lanes_out[..count].iter().enumerate() {
                        let to = dw.as_mut_ptr().add(((f0 + lane) * pairs + pair) * R + kx);
                        *to = if accumulate { *to + value } else { value };
                    }
                }
            }
        }
    }
}

/// `Bᵀ·d` of the Winograd tile (6 inputs to 6), written out (see [`super::winograd`]; the tests
/// check it against the matrix):
///
/// ```text
/// z0 = 4 d0 - 5 d2 + d4          z3 = (d4 - d2) + 2 (d3 - d1)
/// z1 = (d4 - 4 d2) + (d3 - 4 d1)  z4 = (d4 - d2) - 2 (d3 - d1)
/// z2 = (d4 - 4 d2) - (d3 - 4 d1)  z5 = 4 d1 - 5 d3 + d5
/// ```
///
/// # Safety
///
/// The CPU has `S`'s instruction set.
#[inline(always)]
unsafe fn winograd_input_transform<S: Simd>(d: [S::V; 6]) -> [S::V; 6]
where
    S::E: From<f32>,
{
    // SAFETY: the instruction set is present (the caller's contract).
    unsafe {
        let c = |v: f32| S::splat(S::E::from(v));
        let (four, minus_four, minus_five, two) = (c(4.0), c(-4.0), c(-5.0), c(2.0));
        let t0 = S::fma(minus_four, d[2], d[4]);
        let t1 = S::fma(minus_four, d[1], d[3]);
        let t2 = S::sub(d[4], d[2]);
        let t3 = S::sub(d[3], d[1]);
        [
            S::fma(four, d[0], S::fma(minus_five, d[2], d[4])),
            S::add(t0, t1),
            S::sub(t0, t1),
            S::fma(two, t3, t2),
            S::fma(S::splat(S::E::from(-2.0)), t3, t2),
            S::fma(four, d[1], S::fma(minus_five, d[3], d[5])),
        ]
    }
}

/// `Aᵀ·m` of the Winograd tile (6 products to `M` outputs), written out, its first `valid`
/// outputs stored a vector apart from `out`: output `i` is
/// `[i = 0]·m0 + (m1 + (-1)ⁱ m2) + 2ⁱ (m3 + (-1)ⁱ m4) + [i = M - 1]·m5`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `out` is valid for writing `valid <= M` vectors.
#[inline(always)]
unsafe fn winograd_output_transform<S: Simd, const M: usize>(
    m: &[S::V; 6],
    out: *mut S::E,
    valid: usize,
) where
    S::E: From<f32>,
{
    // SAFETY: the instruction set is present and the vectors written are valid (the caller's
    // contract).
    unsafe {
        let (sum_1, difference_1) = (S::add(m[1], m[2]), S::sub(m[1], m[2]));
        let (sum_2, difference_2) = (S::add(m[3], m[4]), S::sub(m[3], m[4]));
        for i in 0..valid {
            let power_of_2 = S::splat(S::E::from((1_u32 << i) as f32));
            let mut y = if i % 2 == 0 {
                S::fma(power_of_2, sum_2, sum_1)
            } else {
                S::fma(power_of_2, difference_2, difference_1)
            };
            if i == 0 {
                y = S::add(m[0], y);
            }
            if i == M - 1 {
                y = S::add(y, m[5]);
            }
            S::store(out.add(i * S::LANES), y);
        }
    }
}

/// The sizes of [`winograd_forward_run`] for `shape` on tiles of `points` points, each of
/// `points + 1 - K` outputs: the tiles across an output row, the width of the padded image
/// they cover, and the padded height.
const fn winograd_forward_tiling(shape: &Conv, points: usize) -> (usize, usize, usize) {
    let (r, m) = (shape.kernel, points + 1 - shape.kernel);
    let tiles = shape.out_width().div_ceil(m);
    (tiles, tiles * m + r - 1, shape.height + 2 * shape.padding)
}

/// The points of [`winograd_forward_run`]'s tiles for `shape` with vectors of `lanes`: 8 (0,
/// ±1, ±2, ±1/2 and infinity, `F(9 - K, K)`) where the vectors have 16 lanes, so in `f32` with
/// AVX-512, the output row takes fewer products that way (LeNet's second layer: 3 tiles of 8
/// across a row of 10, where 6 points take 5 tiles of 6), and the scratch fits the stack
/// buffer; otherwise 6 (`F(7 - K, K)`), so that a shape whose 6-point scratch fits and whose
/// 8-point scratch does not keeps Winograd's method.
///
/// Not in `f64`: the larger points' rounding error would reach the finite-difference gradient
/// checks (see [`winograd_columns`]). Not with AVX2: measured only on a CPU with AVX-512, where
/// AVX2's `f32` kernel is not the one that runs.
pub(crate) const fn winograd_forward_points(shape: &Conv, lanes: usize) -> usize {
    let kernel = shape.kernel;
    let out_width = shape.out_width();
    // At least one whole tile of 8 points across the row, as `winograd_forward_applies` asks
    // of 6.
    if lanes == 16
        && kernel >= 3
        && kernel <= 5
        && out_width >= 9 - kernel
        && out_width.div_ceil(9 - kernel) * 8 < out_width.div_ceil(7 - kernel) * 6
        && winograd_forward_scratch_on(shape, lanes, 8) <= super::WINOGRAD_STACK_SCRATCH
    {
        8
    } else {
        super::winograd::TILE
    }
}

/// The scratch elements [`conv2d_stride1_winograd`] needs for `shape` with vectors of `lanes`
/// (on [`winograd_forward_points`]'s tiles): see [`winograd_forward_scratch_on`].
pub(crate) const fn winograd_forward_scratch(shape: &Conv, lanes: usize) -> usize {
    winograd_forward_scratch_on(shape, lanes, winograd_forward_points(shape, lanes))
}

/// The scratch elements of [`winograd_forward_run`] for `shape` with vectors of `lanes` on
/// tiles of `points`: the filters' transforms, and then either the transposed filters (while
/// the transforms are computed) or, in the same place, one padded image transposed, its
/// transforms, and one vector of sums per output position.
const fn winograd_forward_scratch_on(shape: &Conv, lanes: usize, points: usize) -> usize {
    let Conv {
        channels,
        filters,
        kernel,
        ..
    } = *shape;
    let (tiles, covered, padded_height) = winograd_forward_tiling(shape, points);
    let filters_transposed = filters * channels * kernel * kernel;
    let per_image = channels * covered * padded_height
        + channels * tiles * points * padded_height.next_multiple_of(lanes)
        + shape.out_height() * shape.out_width() * lanes;
    filters.div_ceil(lanes) * channels * kernel * points * lanes
        + if filters_transposed > per_image {
            filters_transposed
        } else {
            per_image
        }
}

/// Whether [`conv2d_stride1_winograd`] computes `shape`'s forward pass: kernels of 3 to 5 (see
/// [`super::winograd::applies`]) and at least one whole tile of 6 points across an output row.
pub(crate) const fn winograd_forward_applies(shape: &Conv) -> bool {
    super::winograd::applies(shape)
        && shape.out_height() > 0
        && shape.out_width() >= super::winograd::outputs_per_tile(shape.kernel)
}

/// The transforms of Winograd's method along the rows on `P` points ([`SixPoints`] or
/// [`EightPoints`]): `Bᵀ·d` of a tile's `P` inputs, and `Aᵀ·m` of its `P` products stored a
/// vector apart.
trait RowPoints<S: Simd, const P: usize> {
    /// `Bᵀ·d`.
    ///
    /// # Safety
    ///
    /// The CPU has `S`'s instruction set.
    unsafe fn input(&self, d: [S::V; P]) -> [S::V; P];

    /// The first `valid <= M` outputs of `Aᵀ·m` (`M = P + 1 - K`), a vector apart from `out`.
    ///
    /// # Safety
    ///
    /// The CPU has `S`'s instruction set; `out` is valid for writing `valid` vectors.
    unsafe fn output<const M: usize>(&self, m: &[S::V; P], out: *mut S::E, valid: usize);
}

/// The 6 points 0, ±1, ±2 and infinity, their transforms written out
/// ([`winograd_input_transform`], [`winograd_output_transform`]).
struct SixPoints;

impl<S: Simd> RowPoints<S, 6> for SixPoints
where
    S::E: From<f32>,
{
    #[inline(always)]
    unsafe fn input(&self, d: [S::V; 6]) -> [S::V; 6] {
        // SAFETY: the caller's contract.
        unsafe { winograd_input_transform::<S>(d) }
    }

    #[inline(always)]
    unsafe fn output<const M: usize>(&self, m: &[S::V; 6], out: *mut S::E, valid: usize) {
        // SAFETY: the caller's contract.
        unsafe { winograd_output_transform::<S, M>(m, out, valid) }
    }
}

/// The 8 points 0, ±1, ±2, ±1/2 and infinity, from the tables `[Aᵀ, G, Bᵀ]` of
/// [`winograd_columns::tables`] (the transforms of [`winograd_columns`]).
struct EightPoints<'a, E>(&'a [[[E; 8]; 8]; 3]);

impl<S: Simd> RowPoints<S, 8> for EightPoints<'_, S::E>
where
    S::E: PartialEq,
{
    #[inline(always)]
    unsafe fn input(&self, d: [S::V; 8]) -> [S::V; 8] {
        // SAFETY: the caller's contract.
        unsafe { winograd_columns::input_transform::<S>(&d, &self.0[2]) }
    }

    #[inline(always)]
    unsafe fn output<const M: usize>(&self, m: &[S::V; 8], out: *mut S::E, valid: usize) {
        // SAFETY: the caller's contract (`valid <= M` vectors from `out`).
        unsafe {
            let y = winograd_columns::output_transform::<S, M>(m, &self.0[0]);
            // All `M` tested one by one: a loop over `y[..valid]` became a call of `memcpy`
            // (1.3% of a LeNet prediction).
            for (i, &y) in y.iter().enumerate() {
                if i < valid {
                    S::store(out.add(i * S::LANES), y);
                }
            }
        }
    }
}

/// The input transforms of Winograd's method along the rows (tiles of `M` outputs on `P`
/// points, see [`winograd_forward_run`]) of one image: `V = Bᵀ·d` of every `P`-wide tile `t`
/// (columns `t·M..t·M + P` of the padded image) and every padded row, into `v` as
/// `[c][t][ν][row]`, each `[row]` the padded height rounded up to whole vectors (whose last
/// rows are never read). The image is transposed into `image` first (`[c][column][row]`, 16 x
/// 16 blocks at a time), so that the transform has the rows in the lanes; the padding and the
/// columns past the image in `image` are never written here, and must be zero.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `M = P + 1 - K`; `x` holds the image's `C·H·W`
/// elements, `image` `C·covered·padded_height` and `v` `C·tiles·P·stride`
/// ([`winograd_forward_tiling`]; `stride` the padded height rounded up to a multiple of
/// `S::LANES`).
#[inline(always)]
unsafe fn winograd_row_transforms<S: Simd, const P: usize, const M: usize>(
    shape: &Conv,
    x: *const S::E,
    image: *mut S::E,
    v: *mut S::E,
    points: &impl RowPoints<S, P>,
) {
    let lanes = S::LANES;
    let Conv {
        channels,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (tiles, covered, padded_height) = winograd_forward_tiling(shape, P);
    let stride = padded_height.next_multiple_of(lanes);
    // SAFETY (whole body): the instruction set is present (the caller's contract); the reads
    // are of rows r0 + i < H and columns x0 + j < W of the image; the writes of `image` at
    // column padding + x0 + j < covered and row padding + r0 + i < the padded height; the reads
    // of `image` at columns t·M + j <= (tiles - 1)·M + P - 1 = tiles·M + K - 2 < covered (as M
    // = P + 1 - K), and the writes of `v` inside its C·tiles·P rows of `stride` (whole vectors:
    // r0 + LANES <= stride).
    unsafe {
        let mut rows = [S::zero(); 16];
        for c in 0..channels {
            for r0 in (0..height).step_by(lanes) {
                let n = lanes.min(height - r0);
                for x0 in (0..width).step_by(lanes) {
                    let columns = lanes.min(width - x0);
                    let mask = S::mask(columns);
                    for (i, row) in rows[..n].iter_mut().enumerate() {
                        *row = S::load_masked(x.add((c * height + r0 + i) * width + x0), mask);
                    }
                    let to = image.add((c * covered + padding + x0) * padded_height + padding + r0);
                    S::store_transposed(&rows[..n], to, padded_height, columns);
                }
            }
        }
        // Column t·M + j of the image is input j of row tile t.
        for c in 0..channels {
            for t in 0..tiles {
                let from = image.add((c * covered + t * M) * padded_height);
                let to = v.add((c * tiles + t) * P * stride);
                for r0 in (0..padded_height).step_by(lanes) {
                    let mask = S::mask(lanes.min(padded_height - r0));
                    let d: [S::V; P] =
                        array_from(|j| S::load_masked(from.add(j * padded_height + r0), mask));
                    // Whole vectors: the rows past the padded height are zeros' transforms,
                    // never read (a masked store cost several plain ones).
                    for (nu, z) in points.input(d).into_iter().enumerate() {
                        S::store(to.add(nu * stride + r0), z);
                    }
                }
            }
        }
    }
}

/// Zeros what [`winograd_row_transforms`] reads of a transposed image (`[c][column][row]`,
/// `covered` columns of `padded_height` rows) and does not write: the padding around the image
/// and the columns past it. Only those: at batch 1, zeroing the whole image took 1.6% of a
/// LeNet prediction.
fn zero_image_border<E: Copy + Default>(
    image: &mut [MaybeUninit<E>],
    shape: &Conv,
    covered: usize,
    padded_height: usize,
) {
    let zero = MaybeUninit::new(E::default());
    let Conv {
        channels,
        padding,
        height,
        width,
        ..
    } = *shape;
    let planes = image.chunks_exact_mut(covered * padded_height);
    for plane in planes.take(channels) {
        for (column, rows) in plane.chunks_exact_mut(padded_height).enumerate() {
            if (padding..padding + width).contains(&column) {
                rows[..padding].fill(zero);
                rows[padding + height..].fill(zero);
            } else {
                rows.fill(zero);
            }
        }
    }
}

/// One tile of the Winograd forward pass: output rows `oh0..oh0 + NR` of the tile `t` (its `M`
/// columns from `t·M`), for one group of filters (in the lanes). Two transformed positions `ν`
/// at a time, per channel: for each kernel row `ky` a vector of the filters' transforms
/// `U[c][ky][ν]`, and for each output row `o` the input's transform `V[c][t][ν][oh0 + o + ky]`,
/// broadcast. A row of `V` serves every `(o, ky)` with the same `o + ky`, so each is loaded
/// once: `NR + R - 1` broadcasts and `R` vectors per `NR·R` multiply-adds and position (the
/// loads, not the multiply-adds, set the pace). Then `Aᵀ` of each row's `P` sums into `out`,
/// one vector of filters per output position (`[oh][ow][lane]`).
///
/// The sums of each output are taken in the same order as ever (channel by channel, kernel
/// rows in order): how the work is cut does not change a bit.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `P` is even; `u` holds the group's `C·R·P` vectors, `v`
/// the image's transforms (`[c][t][ν][row]`); `out` holds `OH·OW` vectors; the output rows
/// exist and `t·M + valid <= OW`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn winograd_forward_tile<
    S: Simd,
    const P: usize,
    const R: usize,
    const M: usize,
    const NR: usize,
>(
    shape: &Conv,
    points: &impl RowPoints<S, P>,
    u: *const S::E,
    v: *const S::E,
    tiles: usize,
    out: *mut S::E,
    (oh0, t, valid): (usize, usize, usize),
) {
    // The rows of a transform, whole vectors ([`winograd_row_transforms`]).
    let stride = (shape.height + 2 * shape.padding).next_multiple_of(S::LANES);
    let lanes = S::LANES;
    // SAFETY (whole body): the instruction set is present (the caller's contract). The vectors
    // of `u` read are (c·R + ky)·P + ν < C·R·P; the transforms of `v` read are of tile t < tiles
    // at rows oh0 + o + ky < OH + R - 1 = the padded height; the vectors written are at rows
    // oh0 + o < OH, columns t·M + i < OW.
    unsafe {
        // Not zeroed first: a `memset` of the whole array (2% of a LeNet prediction), every
        // element of which the loop writes.
        let mut sums = [[MaybeUninit::<S::V>::uninit(); P]; NR];
        for nu in (0..P).step_by(2) {
            let mut acc = [[S::zero(); 2]; NR];
            for c in 0..shape.channels {
                let v_c = v.add(((c * tiles + t) * P + nu) * stride + oh0);
                let u_c = u.add((c * R * P + nu) * lanes);
                for ky in 0..R {
                    let u_ky = u_c.add(ky * P * lanes);
                    let u_pair = [S::load(u_ky), S::load(u_ky.add(lanes))];
                    for (o, acc_o) in acc.iter_mut().enumerate() {
                        for (i, acc_o_i) in acc_o.iter_mut().enumerate() {
                            let row = S::splat(*v_c.add(i * stride + o + ky));
                            *acc_o_i = S::fma(row, u_pair[i], *acc_o_i);
                        }
                    }
                }
            }
            for (sums_o, acc_o) in sums.iter_mut().zip(&acc) {
                sums_o[nu].write(acc_o[0]);
                sums_o[nu + 1].write(acc_o[1]);
            }
        }
        for (o, sums) in sums.iter().enumerate() {
            // SAFETY: the loop above wrote ν and ν + 1 for every even ν < P (P is even).
            let sums: [S::V; P] = array_from(|nu| sums[nu].assume_init());
            let first = out.add(((oh0 + o) * shape.out_width() + t * M) * lanes);
            points.output::<M>(&sums, first, valid);
        }
    }
}

/// The forward pass of a batch of stride-1 convolutions by Winograd's minimal filtering along
/// the rows, `F(M, R)` on `P = M + R - 1` points, the filters in the lanes: `P/M` products per
/// output and step `(c, ky)` where the direct kernel does `R`. Each output is
/// `Σ_(c, ky) Aᵀ[(G·g[c][ky]) ⊙ (Bᵀ·d[c][oh + ky])]` over the `P`-wide input tile `d` of its
/// row: the filters' transforms `G·g` once per call, each image's `Bᵀ·d` once per image, the
/// input rows in the lanes (the image transposed first). A tile takes up to `ROWS` output rows
/// (`P` sums each in registers), the rows split evenly among the tiles down a column.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `P` is [`winograd_forward_points`]'s for `shape`; the
/// slices and sizes were checked by [`conv2d_stride1_winograd`] (`scratch` as
/// [`winograd_forward_scratch`] says).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn winograd_forward_run<
    S: Simd,
    const P: usize,
    const R: usize,
    const M: usize,
    const ROWS: usize,
>(
    shape: &Conv,
    batch: usize,
    x: &[S::E],
    w: &[S::E],
    bias: &[S::E],
    out: &mut [MaybeUninit<S::E>],
    points: &impl RowPoints<S, P>,
    g: &[[S::E; P]; P],
    scratch: &mut [MaybeUninit<S::E>],
    epilogue: Epilogue,
) where
    S::E: PartialEq + 'static,
{
    const {
        assert!(ROWS >= 1 && ROWS <= 6, "tiles of 1 to 6 rows");
        assert!(
            P.is_multiple_of(2) && M + R == P + 1,
            "F(M, R) on an even P = M + R - 1"
        );
    }
    debug_assert_eq!(shape.kernel, R);
    let lanes = S::LANES;
    let Conv {
        channels, filters, ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let (tiles, covered, padded_height) = winograd_forward_tiling(shape, P);
    let groups = filters.div_ceil(lanes);
    // Not zeroed first (at batch 1 that cost a tenth of the convolution): `wt` is written whole
    // here, `image`'s border is zeroed and the rest written by the transposes, and every element
    // of `u`, `v` and `sums` is written before it is read. The filters
    // transposed, `wt`, are needed only for `u`: the image's parts take their place after.
    let (u, rest) = scratch.split_at_mut(groups * channels * R * P * lanes);
    let u = u.as_mut_ptr().cast::<S::E>();
    // SAFETY: the instruction set is present (the caller's contract); `wt` was written whole
    // by the transpose; the vectors of `u` written are inside it (its length above).
    unsafe {
        let wt = transpose_uninit(w, filters, &mut rest[..filters * channels * R * R]);
        // U = G·g of every (c, ky), one vector of filters at a time: [group][c][ky][ν][lane].
        for group in 0..groups {
            let f0 = group * lanes;
            let mask = S::mask(lanes.min(filters - f0));
            for step in 0..channels * R {
                // Taps (c, ky, kx) of filters f0.. (masked to the filters that exist).
                let taps: [S::V; R] = array_from(|kx| {
                    S::load_masked(wt.as_ptr().add((step * R + kx) * filters + f0), mask)
                });
                let u_step = u.add((group * channels * R + step) * P * lanes);
                for (nu, g_nu) in g.iter().enumerate() {
                    let mut sum = S::zero();
                    for (&tap, &g) in taps.iter().zip(g_nu) {
                        if g != S::E::default() {
                            sum = S::fma(S::splat(g), tap, sum);
                        }
                    }
                    S::store(u_step.add(nu * lanes), sum);
                }
            }
        }
    }
    let (image, rest) = rest.split_at_mut(channels * covered * padded_height);
    let stride = padded_height.next_multiple_of(lanes);
    let (v, rest) = rest.split_at_mut(channels * tiles * P * stride);
    let sums = &mut rest[..out_height * out_width * lanes];
    zero_image_border(image, shape, covered, padded_height);
    // Tiles of at most ROWS rows, as many as that takes, the rows shared out evenly (10 rows
    // in tiles of at most 3 are 3, 3, 2, 2: a tile of 1 would load a vector of `U` per
    // multiply-add).
    let row_tiles = out_height.div_ceil(ROWS);
    // SAFETY (whole body): the instruction set is present (the caller's contract); every read
    // and write is inside the slices split above, as each comment says; `image`'s border was
    // just zeroed and the transposes write the rest before it is read; `u` (whole, above), `v`
    // and `sums` are read only where written.
    unsafe {
        let image = image.as_mut_ptr().cast::<S::E>();
        let v = v.as_mut_ptr().cast::<S::E>();
        let sums = sums.as_mut_ptr().cast::<S::E>();
        let (image_len, output_len) = (shape.image_len(), shape.output_len());
        let mut rows = [S::zero(); 16];
        for b in 0..batch {
            winograd_row_transforms::<S, P, M>(
                shape,
                x[b * image_len..][..image_len].as_ptr(),
                image,
                v,
                points,
            );
            let out = out[b * output_len..][..output_len]
                .as_mut_ptr()
                .cast::<S::E>();
            for group in 0..groups {
                let f0 = group * lanes;
                let count = lanes.min(filters - f0);
                let bias = S::load_masked(bias.as_ptr().add(f0), S::mask(count));
                let u = u.add(group * channels * R * P * lanes).cast_const();
                let v = v.cast_const();
                for t in 0..tiles {
                    let valid = M.min(out_width - t * M);
                    let mut oh0 = 0;
                    for row_tile in 0..row_tiles {
                        let n =
                            out_height / row_tiles + usize::from(row_tile < out_height % row_tiles);
                        let at = (oh0, t, valid);
                        // Arms only up to ROWS, decided at compile time (`const`): the others would
                        // be compiled for nothing.
                        match n {
                            6 if const { ROWS >= 6 } => winograd_forward_tile::<S, P, R, M, 6>(
                                shape, points, u, v, tiles, sums, at,
                            ),
                            5 if const { ROWS >= 5 } => winograd_forward_tile::<S, P, R, M, 5>(
                                shape, points, u, v, tiles, sums, at,
                            ),
                            4 if const { ROWS >= 4 } => winograd_forward_tile::<S, P, R, M, 4>(
                                shape, points, u, v, tiles, sums, at,
                            ),
                            3 if const { ROWS >= 3 } => winograd_forward_tile::<S, P, R, M, 3>(
                                shape, points, u, v, tiles, sums, at,
                            ),
                            2 if const { ROWS >= 2 } => winograd_forward_tile::<S, P, R, M, 2>(
                                shape, points, u, v, tiles, sums, at,
                            ),
                            1 => winograd_forward_tile::<S, P, R, M, 1>(
                                shape, points, u, v, tiles, sums, at,
                            ),
                            _ => unreachable!("a tile of {n} rows, at most {ROWS}"),
                        }
                        oh0 += n;
                    }
                }
                // The group's outputs, position-major in `sums`, plus the bias, into their
                // planes, 16 positions (one transpose) at a time.
                let plane = out_height * out_width;
                let out = out.add(f0 * plane);
                for p0 in (0..plane).step_by(lanes) {
                    let n = lanes.min(plane - p0);
                    for (i, row) in rows[..n].iter_mut().enumerate() {
                        *row = finish::<S>(
                            S::add(S::load(sums.add((p0 + i) * lanes)), bias),
                            epilogue,
                        );
                    }
                    S::store_transposed(&rows[..n], out.add(p0), plane, count);
                }
            }
        }
    }
}

macro_rules! winograd_forward_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal $(, eight points: $tables:path)?) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_stride1_winograd`].
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            shape: &Conv,
            batch: usize,
            x: &[$e],
            w: &[$e],
            bias: &[$e],
            out: &mut [MaybeUninit<$e>],
            scratch: &mut [MaybeUninit<$e>],
            epilogue: Epilogue,
        ) {
            // `G` of each kernel size in the element type, at compile time.
            const fn g(r: usize) -> [[$e; 6]; 6] {
                let g = super::winograd::filter_transform(r);
                let mut out = [[0.0; 6]; 6];
                let mut i = 0;
                while i < 36 {
                    out[i / 6][i % 6] = g[i / 6][i % 6] as $e;
                    i += 1;
                }
                out
            }
            const ROWS: usize = <$simd as Simd>::WINOGRAD_ROWS;
            // SAFETY: forwarded from this function's contract (the points are
            // `winograd_forward_points`'s).
            unsafe {
                $(
                    if winograd_forward_points(shape, <$simd as Simd>::LANES) == 8 {
                        match shape.kernel {
                            3 => {
                                let t = &const { $tables(3) };
                                winograd_forward_run::<$simd, 8, 3, 6, ROWS>(shape, batch, x, w, bias, out, &EightPoints(t), &t[1], scratch, epilogue)
                            }
                            4 => {
                                let t = &const { $tables(4) };
                                winograd_forward_run::<$simd, 8, 4, 5, ROWS>(shape, batch, x, w, bias, out, &EightPoints(t), &t[1], scratch, epilogue)
                            }
                            _ => {
                                let t = &const { $tables(5) };
                                winograd_forward_run::<$simd, 8, 5, 4, ROWS>(shape, batch, x, w, bias, out, &EightPoints(t), &t[1], scratch, epilogue)
                            }
                        }
                        return;
                    }
                )?
                match shape.kernel {
                    3 => winograd_forward_run::<$simd, 6, 3, 4, ROWS>(shape, batch, x, w, bias, out, &SixPoints, &const { g(3) }, scratch, epilogue),
                    4 => winograd_forward_run::<$simd, 6, 4, 3, ROWS>(shape, batch, x, w, bias, out, &SixPoints, &const { g(4) }, scratch, epilogue),
                    _ => winograd_forward_run::<$simd, 6, 5, 2, ROWS>(shape, batch, x, w, bias, out, &SixPoints, &const { g(5) }, scratch, epilogue),
                }
            }
        }
    };
}

macro_rules! weight_grad_winograd_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_weight_gradient_winograd`].
        #[target_feature(enable = $features)]
        #[cfg(feature = "alloc")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            shape: &Conv,
            batch: usize,
            x: &[$e],
            dz: &[$e],
            scratch: &mut [$e],
            dw: &mut [$e],
            accumulate: bool,
        ) {
            // The tables of each kernel size in the element type, at compile time.
            const fn tables(kernel: usize) -> [[[$e; 6]; 6]; 2] {
                let t = super::winograd::gradient_transforms(kernel);
                let mut out = [[[0.0; 6]; 6]; 2];
                let mut i = 0;
                while i < 72 {
                    out[i / 36][i / 6 % 6][i % 6] = t[i / 36][i / 6 % 6][i % 6] as $e;
                    i += 1;
                }
                out
            }
            // SAFETY: forwarded from this function's contract.
            unsafe {
                match shape.kernel {
                    3 => weight_grad_winograd_run::<$simd, 3, 4>(shape, batch, x, dz, scratch, dw, accumulate, &const { tables(3) }),
                    4 => weight_grad_winograd_run::<$simd, 4, 3>(shape, batch, x, dz, scratch, dw, accumulate, &const { tables(4) }),
                    _ => weight_grad_winograd_run::<$simd, 5, 2>(shape, batch, x, dz, scratch, dw, accumulate, &const { tables(5) }),
                }
            }
        }
    };
}

weight_grad_winograd_entry!(weight_grad_winograd_avx512_f32, Avx512F32, f32, "avx512f");
weight_grad_winograd_entry!(weight_grad_winograd_avx2_f32, Avx2F32, f32, "avx2,fma");

/// The weight gradient of a batch of stride-1 convolutions without padding, `dw (+)= Σ over the
/// batch of dZ·X̂ᵀ` (`dz` as the layer has it, `[image][filter][position]`), by Winograd's
/// method along the rows, the filters in the lanes, with `isa` (see
/// [`weight_grad_winograd_run`]). The sums are taken at the tiles' points and transformed at the
/// end, so they differ from the direct kernel's in the last bits, a little more than the other
/// orders of summation do (the transforms' coefficients reach 16).
///
/// # Panics
///
/// When [`super::winograd::applies`] is false for `shape`, the shape has padding, a slice's
/// length does not fit, `scratch` is shorter than [`weight_gradient_winograd_scratch`], or the
/// CPU does not have `isa`.
#[cfg(feature = "alloc")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_weight_gradient_winograd<E: ConvElement>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dz: &[E],
    scratch: &mut [E],
    dw: &mut [E],
    accumulate: bool,
) {
    assert!(
        super::winograd::applies(shape) && shape.padding == 0,
        "no Winograd weight gradient for {shape:?}"
    );
    shape.check_batch(batch, x.len(), dw.len(), shape.filters, dz.len());
    assert!(
        scratch.len() >= weight_gradient_winograd_scratch(shape, batch, lanes::<E>(isa)),
        "{} elements of scratch for {shape:?}",
        scratch.len()
    );
    assert_isa(isa);
    macro_rules! run {
        ($e:ty, $avx512:ident, $avx2:ident) => {
            if let (Some(x), Some(dz), Some(scratch), Some(dw)) = (
                same_type_slice::<E, $e>(x),
                same_type_slice::<E, $e>(dz),
                same_type_slice_mut::<E, $e>(scratch),
                same_type_slice_mut::<E, $e>(dw),
            ) {
                // SAFETY (both): sizes, lengths and instruction set checked above.
                match isa {
                    Isa::Avx512 => unsafe { $avx512(shape, batch, x, dz, scratch, dw, accumulate) },
                    Isa::Avx2Fma => unsafe { $avx2(shape, batch, x, dz, scratch, dw, accumulate) },
                }
                return;
            }
        };
    }
    run!(
        f32,
        weight_grad_winograd_avx512_f32,
        weight_grad_winograd_avx2_f32
    );
    unreachable!("the SIMD convolution kernels take f32");
}

winograd_forward_entry!(
    winograd_forward_avx512_f32,
    Avx512F32,
    f32,
    "avx512f",
    eight points: winograd_columns::tables_f32
);
winograd_forward_entry!(winograd_forward_avx2_f32, Avx2F32, f32, "avx2,fma");

/// A batch of stride-1 convolutions, `out = conv(x, w) + bias` image by image (see [`Conv`]),
/// by Winograd's minimal filtering along the rows, the filters in the lanes, with `isa`; `w` in
/// PyTorch's layout (`[filters][C][K][K]`).
///
/// # Panics
///
/// When [`winograd_forward_applies`] is false for `shape`, a slice's length does not fit,
/// `scratch` is shorter than [`winograd_forward_scratch`], or the CPU does not have `isa`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_stride1_winograd<E: ConvElement>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    scratch: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    assert!(
        winograd_forward_applies(shape),
        "no Winograd tiles for {shape:?}"
    );
    shape.check_batch(batch, x.len(), w.len(), bias.len(), out.len());
    assert!(
        scratch.len() >= winograd_forward_scratch(shape, lanes::<E>(isa)),
        "{} elements of scratch for {shape:?}",
        scratch.len()
    );
    assert_isa(isa);
    macro_rules! run {
        ($e:ty, $avx512:ident, $avx2:ident) => {
            if let (Some(x), Some(w), Some(bias), Some(out), Some(scratch)) = (
                same_type_slice::<E, $e>(x),
                same_type_slice::<E, $e>(w),
                same_type_slice::<E, $e>(bias),
                same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<$e>>(out),
                same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<$e>>(scratch),
            ) {
                // SAFETY (both): sizes, lengths and instruction set checked above.
                match isa {
                    Isa::Avx512 => unsafe { $avx512(shape, batch, x, w, bias, out, scratch, epilogue) },
                    Isa::Avx2Fma => unsafe { $avx2(shape, batch, x, w, bias, out, scratch, epilogue) },
                }
                return;
            }
        };
    }
    run!(f32, winograd_forward_avx512_f32, winograd_forward_avx2_f32);
    unreachable!("the SIMD convolution kernels take f32");
}

macro_rules! weight_grad_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_weight_gradient_positions`].
        #[target_feature(enable = $features)]
        #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
        unsafe fn $name(
            shape: &Conv,
            batch: usize,
            x: &[$e],
            dz: &[$e],
            shifted: &mut [$e],
            dw: &mut [$e],
            accumulate: bool,
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { weight_grad_run::<$simd>(shape, batch, x, dz, shifted, dw, accumulate) }
        }
    };
}

macro_rules! weight_grad_filters_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_weight_gradient_filters`].
        #[target_feature(enable = $features)]
        #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
        unsafe fn $name(
            shape: &Conv,
            batch: usize,
            x: &[$e],
            dzt: &[$e],
            dw: &mut [$e],
            accumulate: bool,
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { weight_grad_filters_run::<$simd>(shape, batch, x, dzt, dw, accumulate) }
        }
    };
}

conv_forward_entry!(
    conv_filters_avx512_f32,
    conv_filters_run,
    Avx512F32,
    f32,
    "avx512f"
);
conv_forward_entry!(
    conv_filters_avx2_f32,
    conv_filters_run,
    Avx2F32,
    f32,
    "avx2,fma"
);

weight_grad_filters_entry!(weight_grad_filters_avx512_f32, Avx512F32, f32, "avx512f");
weight_grad_filters_entry!(weight_grad_filters_avx2_f32, Avx2F32, f32, "avx2,fma");

weight_grad_entry!(weight_grad_avx512_f32, Avx512F32, f32, "avx512f");
weight_grad_entry!(weight_grad_avx2_f32, Avx2F32, f32, "avx2,fma");

conv_forward_entry!(conv_avx512_f32, conv_run, Avx512F32, f32, "avx512f");
conv_forward_entry!(conv_avx2_f32, conv_run, Avx2F32, f32, "avx2,fma");

/// A stride-1 convolution of one image, `out = conv(x, w) + bias` (see [`Conv`]), with `isa`.
///
/// # Panics
///
/// When a slice's length does not fit the sizes, when the output size is not
/// `H + 2P - K + 1` (`W` likewise), or when the CPU does not have `isa`.
pub(crate) fn conv2d_stride1<E: ConvElement>(
    isa: Isa,
    shape: &Conv,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    shape.check_lengths(x.len(), w.len(), bias.len(), out.len());
    assert_isa(isa);
    // SAFETY: lengths, sizes and instruction set checked above.
    unsafe { E::conv_rows(isa, shape, x, w, bias, out, epilogue) }
}

/// The weight gradient of a stride-1 convolution summed over a batch of `batch` images, `dw
/// (+)= Σ dZ·X̂ᵀ` (see [`Conv`]), with `isa`, without unrolling the patches `X̂`, positions in
/// the lanes: `x` is the images without their padding, `dz` `[image][filter][OH][OW]` as the
/// layer holds it, and `shifted` the scratch for [`weight_grad_images_per_pass`]
/// column-shifted padded images (see [`shifted_image_len`] and [`weight_grad_tile`]), which
/// are made here with their padding.
///
/// # Panics
///
/// When `x` is not `batch` images, `dz` not their gradients, `dw` not the weight's length, or
/// `shifted` not the scratch's length.
// Training only: without a heap there is no backward pass.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_weight_gradient_positions<E: ConvElement>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dz: &[E],
    shifted: &mut [E],
    dw: &mut [E],
    accumulate: bool,
) {
    shape.check_batch(batch, x.len(), dw.len(), shape.filters, dz.len());
    assert_eq!(
        shifted.len(),
        weight_grad_images_per_pass::<E>(shape, batch) * shifted_image_len(shape),
        "the scratch of the weight gradient of {batch} images of {shape:?}"
    );
    assert_isa(isa);
    // SAFETY: lengths, sizes and instruction set checked above.
    unsafe { E::weight_grad_rows(isa, shape, batch, x, dz, shifted, dw, accumulate) }
}

/// A stride-1 convolution of one image without padding, `out = conv(x, w) + bias`, positions
/// in the lanes with the output rows laid end to end ("flat", see [`conv_flat_tile`]), with
/// `isa`.
///
/// # Panics
///
/// As [`conv2d_stride1`], and when the padding is not 0.
pub(crate) fn conv2d_stride1_flat<E: ConvElement>(
    isa: Isa,
    shape: &Conv,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    shape.check_lengths(x.len(), w.len(), bias.len(), out.len());
    assert_eq!(shape.padding, 0, "the flat kernel takes a padded image");
    assert_isa(isa);
    // SAFETY: lengths, padding, sizes and instruction set checked above.
    unsafe { E::conv_flat_rows(isa, shape, x, w, bias, out, epilogue) }
}

/// A stride-1 convolution of one image without padding, `out = conv(x, w) + bias`, from the
/// transposed weights `wt` (`[C·K·K][filters]`), the filters in the vector lanes (see
/// [`filters_in_lanes`]), with `isa`.
///
/// # Panics
///
/// As [`conv2d_stride1`], and when the padding is not 0.
pub(crate) fn conv2d_stride1_filters<E: ConvElement>(
    isa: Isa,
    shape: &Conv,
    x: &[E],
    wt: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    shape.check_lengths(x.len(), wt.len(), bias.len(), out.len());
    assert_eq!(
        shape.padding, 0,
        "the filters-in-lanes kernel takes a padded image"
    );
    assert_isa(isa);
    // SAFETY: lengths, padding, sizes and instruction set checked above.
    unsafe { E::conv_filters_rows(isa, shape, x, wt, bias, out, epilogue) }
}

/// Runs `f` compiled with `isa`'s instruction set (see [`super::with_wide_vectors`]).
///
/// # Panics
///
/// When the CPU does not have `isa`.
pub(crate) fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    assert_isa(isa);
    match isa {
        // SAFETY (both): the CPU has the instruction set (asserted); `f` is safe code.
        Isa::Avx512 => unsafe { run_with_avx512(f) },
        Isa::Avx2Fma => unsafe { run_with_avx2(f) },
    }
}

/// [`super::winograd::input_gradient`] compiled with `isa`'s instruction set: it is too large
/// for the compiler to inline into [`with_isa`]'s closure, so it gets functions of its own,
/// into which it is inlined (and its `mul_add` becomes a fused multiply-add instruction rather
/// than a call to a software one).
///
/// # Panics
///
/// When the CPU does not have `isa`, or as [`super::winograd::input_gradient`].
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
    use super::winograd::{input_gradient, input_gradient_by};

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

/// `f()`, its code inlined here and so compiled with AVX-512F.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn run_with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f()`, its code inlined here and so compiled with AVX2 and FMA.
///
/// # Safety
///
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn run_with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The rows of [`copy_rows`]: each row's vectors loaded and stored masked to its `width`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices hold the rows as [`copy_rows`] checks.
#[inline(always)]
unsafe fn copy_rows_run<S: Simd>(
    from: &[S::E],
    from_stride: usize,
    to: &mut [S::E],
    to_stride: usize,
    (rows, width): (usize, usize),
) {
    let lanes = S::LANES;
    let (from, to) = (from.as_ptr(), to.as_mut_ptr());
    // SAFETY (whole body): the instruction set is present (the caller's contract); row `i`
    // reads `from[i·from_stride..][..width]` and writes `to[i·to_stride..][..width]`, both in
    // bounds (checked by `copy_rows`), every load and store masked to those.
    unsafe {
        for i in 0..rows {
            let (source, target) = (from.add(i * from_stride), to.add(i * to_stride));
            let mut v = 0;
            while v < width {
                let mask = S::mask(lanes.min(width - v));
                let loaded = S::load_masked(source.add(v), mask);
                S::store_masked(target.add(v), mask, loaded);
                v += lanes;
            }
        }
    }
}

macro_rules! copy_rows_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; the slices checked by
        /// [`copy_rows`].
        #[target_feature(enable = $features)]
        unsafe fn $name(
            from: &[$e],
            from_stride: usize,
            to: &mut [$e],
            to_stride: usize,
            size: (usize, usize),
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { copy_rows_run::<$simd>(from, from_stride, to, to_stride, size) }
        }
    };
}

copy_rows_entry!(copy_rows_avx512_f32, Avx512F32, f32, "avx512f");
copy_rows_entry!(copy_rows_avx512_f64, Avx512F64, f64, "avx512f");
copy_rows_entry!(copy_rows_avx2_f32, Avx2F32, f32, "avx2,fma");
copy_rows_entry!(copy_rows_avx2_f64, Avx2F64, f64, "avx2,fma");

/// Copies `rows` rows of `width` elements, row `i` from `from[i·from_stride..]` to
/// `to[i·to_stride..]`, with `isa`, leaving the rest of each stride as it was. Masked vector
/// moves: `copy_from_slice` called `memmove` once per row,
/// and for rows of 28 `f32`s (LeNet-5's first layer) the calls cost more than the copies.
/// Returns `false`, writing nothing, unless `E` is `f32` or `f64`.
///
/// # Panics
///
/// When a row falls outside its slice, or the CPU does not have `isa`.
pub(crate) fn copy_rows<E: 'static>(
    isa: Isa,
    from: &[E],
    from_stride: usize,
    to: &mut [E],
    to_stride: usize,
    (rows, width): (usize, usize),
) -> bool {
    let last = |stride: usize| (rows > 0).then(|| (rows - 1) * stride + width);
    let in_from = last(from_stride).is_none_or(|n| n <= from.len());
    let in_to = last(to_stride).is_none_or(|n| n <= to.len());
    assert!(
        in_from && in_to,
        "{rows} rows of {width} from a stride of {from_stride} in {} elements to a stride of \
         {to_stride} in {}",
        from.len(),
        to.len()
    );
    assert_isa(isa);
    let size = (rows, width);
    macro_rules! run {
        ($e:ty, $avx512:ident, $avx2:ident) => {
            if let (Some(from), Some(to)) =
                (same_type_slice::<E, $e>(from), same_type_slice_mut::<E, $e>(to))
            {
                // SAFETY (both): bounds and instruction set checked above.
                match isa {
                    Isa::Avx512 => unsafe { $avx512(from, from_stride, to, to_stride, size) },
                    Isa::Avx2Fma => unsafe { $avx2(from, from_stride, to, to_stride, size) },
                }
                return true;
            }
        };
    }
    run!(f32, copy_rows_avx512_f32, copy_rows_avx2_f32);
    run!(f64, copy_rows_avx512_f64, copy_rows_avx2_f64);
    false
}

/// `to = fromᵀ` for `from` of `rows` rows (row-major both; `to` as long as `from`): how the
/// filters-in-lanes kernels get their weights (`[filters][C·K·K]` to `[C·K·K][filters]`) and
/// the weight gradient its `dZ`.
///
/// # Panics
///
/// When `rows` does not divide `from.len()` or `to` is not as long as `from`.
#[cfg(any(feature = "alloc", test))]
pub(crate) fn transpose<E: Copy + 'static>(from: &[E], rows: usize, to: &mut [E]) {
    assert_eq!(from.len(), to.len(), "a transpose keeps every element");
    // SAFETY: `to` is as long as `from` (asserted), and initialized values are written to it.
    unsafe { transpose_raw(from, rows, to.as_mut_ptr()) }
}

/// [`transpose`] into a buffer that is not initialized yet: every element of `to` is written,
/// and returned initialized. The buffer of a prediction is not zeroed first (at LeNet's second
/// layer, zeroing it cost more than the convolution's bias and activation together).
///
/// # Panics
///
/// As [`transpose`].
pub(crate) fn transpose_uninit<'a, E: Copy + 'static>(
    from: &[E],
    rows: usize,
    to: &'a mut [MaybeUninit<E>],
) -> &'a mut [E] {
    assert_eq!(from.len(), to.len(), "a transpose keeps every element");
    // SAFETY: `to` is as long as `from` (asserted), so `transpose_raw` writes every one of its
    // elements (`MaybeUninit<E>` has `E`'s layout); after it they are all initialized.
    unsafe {
        transpose_raw(from, rows, to.as_mut_ptr().cast::<E>());
        assume_init_mut(to)
    }
}

/// # Safety
///
/// `to` is valid for writes of `from.len()` elements. Every one of them is written.
unsafe fn transpose_raw<E: Copy + 'static>(from: &[E], rows: usize, to: *mut E) {
    let columns = from.len().checked_div(rows).unwrap_or(0);
    assert!(
        rows * columns == from.len(),
        "{} elements are not {rows} whole rows",
        from.len()
    );
    // Rows `..done` transposed by the SIMD blocks (whole blocks of 16 `f32` rows on AVX-512).
    let mut done = 0;
    if core::any::TypeId::of::<E>() == core::any::TypeId::of::<f32>()
        && columns > 0
        && detected_isa() == Some(Isa::Avx512)
    {
        assert_isa(Isa::Avx512);
        let (from, to) = (from.as_ptr().cast::<f32>(), to.cast::<f32>());
        while done + 16 <= rows {
            // SAFETY: AVX-512F is present (asserted); `E` is `f32`, so the pointers are to
            // `f32`s; rows `done..done + 16` are inside `from`, and the block writes their
            // elements' places in `to` (the caller's contract covers all of them).
            unsafe {
                transpose_16_rows_avx512(from.add(done * columns), columns, rows, to.add(done))
            };
            done += 16;
        }
    }
    for (r, row) in from.chunks_exact(columns.max(1)).enumerate().skip(done) {
        for (c, &v) in row.iter().enumerate() {
            // SAFETY: c·rows + r < columns·rows = from.len(), inside `to` (the contract).
            unsafe { to.add(c * rows + r).write(v) };
        }
    }
}

/// Transposes 16 rows of `columns` `f32`s at `from` into `to`, where column `c` of them goes to
/// `to[c·stride..][..16]`. Four columns at a time: the four 4-element pieces of each group of four
/// rows are loaded as one 4 x 4 block per vector, and two rounds of two-source permutes make each
/// vector one column of all 16 rows: 8 permutes per 64 elements, where an element-by-element
/// copy needs 64 stores.
///
/// # Safety
///
/// The CPU has AVX-512F; `from` holds 16 rows of `columns`, `to` is valid for writes at
/// `c·stride + i` for every `c < columns`, `i < 16`.
#[target_feature(enable = "avx512f")]
unsafe fn transpose_16_rows_avx512(from: *const f32, columns: usize, stride: usize, to: *mut f32) {
    // SAFETY (whole body): the instruction set is present (the contract); the loads read
    // elements `r·columns + c .. + 4` with `r < 16`, `c + 4 <= columns` (then single elements
    // for the last columns); the stores write `c·stride .. + 16` for `c < columns`.
    unsafe {
        // Rows r..r + 4, columns c..c + 4: [row r: c..c+4, row r+1: c..c+4, ...].
        let block = |r: usize, c: usize| {
            let piece = |i: usize| _mm_loadu_ps(from.add((r + i) * columns + c));
            let v = _mm512_broadcast_f32x4(piece(0));
            let v = _mm512_mask_broadcast_f32x4(v, 0x00f0, piece(1));
            let v = _mm512_mask_broadcast_f32x4(v, 0x0f00, piece(2));
            _mm512_mask_broadcast_f32x4(v, 0xf000, piece(3))
        };
        // From blocks `a` (rows 0-3) and `b` (rows 4-7): columns 0 and 1 of rows 0-7, or 2 and 3.
        let columns_01 =
            _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
        let columns_23 =
            _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
        // From those of rows 0-7 and of rows 8-15: one column of all 16 rows.
        let first = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        let second =
            _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
        let mut c = 0;
        while c + 4 <= columns {
            let (a, b) = (block(0, c), block(4, c));
            let (d, e) = (block(8, c), block(12, c));
            let (top_01, top_23) = (
                _mm512_permutex2var_ps(a, columns_01, b),
                _mm512_permutex2var_ps(a, columns_23, b),
            );
            let (bottom_01, bottom_23) = (
                _mm512_permutex2var_ps(d, columns_01, e),
                _mm512_permutex2var_ps(d, columns_23, e),
            );
            let out = to.add(c * stride);
            _mm512_storeu_ps(out, _mm512_permutex2var_ps(top_01, first, bottom_01));
            _mm512_storeu_ps(
                out.add(stride),
                _mm512_permutex2var_ps(top_01, second, bottom_01),
            );
            _mm512_storeu_ps(
                out.add(2 * stride),
                _mm512_permutex2var_ps(top_23, first, bottom_23),
            );
            _mm512_storeu_ps(
                out.add(3 * stride),
                _mm512_permutex2var_ps(top_23, second, bottom_23),
            );
            c += 4;
        }
        for c in c..columns {
            for r in 0..16 {
                to.add(c * stride + r).write(*from.add(r * columns + c));
            }
        }
    }
}

/// Runs `f` on the weights `w` (`[filters][C·K·K]`) transposed and on `padded_len` zeros (where
/// an image is padded), both in a stack buffer of `N` elements that is not zeroed first: the
/// scratch of the filters-in-lanes forward pass.
///
/// # Panics
///
/// When `w` and the zeros do not fit in `N` elements, or `filters` does not divide `w.len()`.
pub(crate) fn with_transposed_filters<E: Element, const N: usize, R>(
    w: &[E],
    filters: usize,
    padded_len: usize,
    f: impl FnOnce(&[E], &mut [E]) -> R,
) -> R {
    let mut scratch = [const { MaybeUninit::<E>::uninit() }; N];
    let (wt, rest) = scratch.split_at_mut(w.len());
    let wt = transpose_uninit(w, filters, wt);
    let zeros = &mut rest[..padded_len];
    zeros.fill(MaybeUninit::new(E::default()));
    // SAFETY: every element of `zeros` was just written.
    let zeros = unsafe { assume_init_mut(zeros) };
    f(wt, zeros)
}

/// The weight gradient of a stride-1 convolution without padding summed over a batch of
/// `batch` images, `dw (+)= Σ dZ·X̂ᵀ`, from the output gradients `dzt` laid out position-major
/// (`[image][position][filter]`), the filters in the vector lanes, with `isa`.
///
/// # Panics
///
/// As [`super::conv2d_weight_gradient_stride1`], for `batch` images and gradients.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) fn conv2d_weight_gradient_filters<E: ConvElement>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dzt: &[E],
    dw: &mut [E],
    accumulate: bool,
) {
    let image = shape.channels * shape.height * shape.width;
    let gradients = shape.filters * shape.out_height() * shape.out_width();
    shape.check_lengths(image, dw.len(), shape.filters, gradients);
    assert!(
        (x.len(), dzt.len()) == (batch * image, batch * gradients),
        "{} images and {} gradients do not fit a batch of {batch} of {shape:?}",
        x.len(),
        dzt.len()
    );
    assert_eq!(
        shape.padding, 0,
        "the weight-gradient kernel takes a padded image"
    );
    assert_isa(isa);
    // SAFETY: lengths, padding, sizes and instruction set checked above.
    unsafe { E::weight_grad_filters_rows(isa, shape, batch, x, dzt, dw, accumulate) }
}

macro_rules! all_finite_entry {
    ($name:ident, $e:ty, $features:literal) => {
        /// [`super::reference::all_finite`] compiled for the instruction set: the same loop, in
        /// the instruction set's vectors.
        #[target_feature(enable = $features)]
        #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
        fn $name(values: &[$e]) -> bool {
            super::reference::all_finite(values)
        }
    };
}

all_finite_entry!(all_finite_avx512_f32, f32, "avx512f");
all_finite_entry!(all_finite_avx512_f64, f64, "avx512f");
all_finite_entry!(all_finite_avx2_f32, f32, "avx2,fma");
all_finite_entry!(all_finite_avx2_f64, f64, "avx2,fma");

/// The element types [`all_finite`] has entry points for.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) trait FiniteCheck: Sized {
    /// [`all_finite`] for this type.
    fn all_finite(isa: Isa, values: &[Self]) -> bool;
}

impl FiniteCheck for f32 {
    fn all_finite(isa: Isa, values: &[f32]) -> bool {
        assert_isa(isa);
        // SAFETY (both): the CPU has the instruction set (checked just above); the functions
        // only read the slice, through safe code.
        match isa {
            Isa::Avx512 => unsafe { all_finite_avx512_f32(values) },
            Isa::Avx2Fma => unsafe { all_finite_avx2_f32(values) },
        }
    }
}

impl FiniteCheck for f64 {
    fn all_finite(isa: Isa, values: &[f64]) -> bool {
        assert_isa(isa);
        // SAFETY (both): as for `f32`.
        match isa {
            Isa::Avx512 => unsafe { all_finite_avx512_f64(values) },
            Isa::Avx2Fma => unsafe { all_finite_avx2_f64(values) },
        }
    }
}

/// Whether every value is finite, with `isa`.
///
/// # Panics
///
/// When the CPU does not have `isa`.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) fn all_finite<E: FiniteCheck>(isa: Isa, values: &[E]) -> bool {
    E::all_finite(isa, values)
}

// ---------------------------------------------------------------------------------------------
// col2im of a stride-1 convolution's backward pass.
// ---------------------------------------------------------------------------------------------

/// `dx += col2im(d_patches)` for a stride-1 convolution with AVX-512: each input row is loaded
/// once, a vector of columns at a time, every patch row that met it (`(c, ky, kx)` at output
/// row `ih + padding - ky`) is added to it, shifted by `kx - padding` and masked to the columns
/// it reaches, and it is stored once. Each input value receives its terms in the generic code's
/// order (by `ky`, then `kx`), so the sums are the same bit for bit; and no load reads back a
/// value just stored (a masked store does not forward to a load: it stalls until it retires).
macro_rules! col2im_entry {
    ($name:ident, $e:ty, $lanes:expr, $mask:ty, $load:ident, $add:ident, $store:ident) => {
        /// # Safety
        ///
        /// The CPU has AVX-512F; `d_patches` holds `C·K·K·OH·OW` values and `dx` `C·H·W`, and
        /// the kernel is at most [`COL2IM_MAX_KERNEL`] wide (checked by
        /// [`col2im_stride1_avx512`]).
        #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
        #[target_feature(enable = "avx512f")]
        unsafe fn $name(shape: &Conv, d_patches: &[$e], dx: &mut [$e]) {
            let Conv {
                channels,
                kernel: k,
                padding: pad,
                height: h,
                width: w,
                ..
            } = *shape;
            let (out_height, out_width) = (shape.out_height(), shape.out_width());
            let positions = out_height * out_width;
            let lanes_between = |lo: isize, hi: isize, n: usize| -> $mask {
                let (lo, hi) = (lo.clamp(0, n as isize) as u32, hi.clamp(0, n as isize) as u32);
                if lo >= hi {
                    0
                } else {
                    (((1_u32 << hi) - 1) & !((1_u32 << lo) - 1)) as $mask
                }
            };
            // Each kernel column's lanes and offset depend on `kx` and the block `j0` only:
            // computed once per block, not once per patch row (the scalar bookkeeping cost
            // several times the adds).
            let mut reach: [$mask; COL2IM_MAX_KERNEL] = [0; COL2IM_MAX_KERNEL];
            let mut offset = [0_isize; COL2IM_MAX_KERNEL];
            // SAFETY (whole body): AVX-512F is present (the contract); `k <= COL2IM_MAX_KERNEL`
            // (checked by the caller). Each load or store of `dx` covers lanes `0..n` at
            // `(c·H + ih)·W + j0` with `ih < H`, `j0 + n <= W`. Each load of `d_patches` is masked
            // to the lanes `l` whose output column `j0 + l + pad - kx` lies in `0..OW`, at row
            // `(c, ky, kx)` and output row `oh < OH` (filtered): inside the patch row; the
            // pointer to lane 0 may lie outside it and is formed with `wrapping_offset`, never
            // read there.
            unsafe {
                let (dp, xp) = (d_patches.as_ptr(), dx.as_mut_ptr());
                let mut j0 = 0;
                while j0 < w {
                    let n = (w - j0).min($lanes);
                    let all = ((1_u32 << n) - 1) as $mask;
                    for kx in 0..k {
                        let shift = kx as isize - pad as isize - j0 as isize;
                        reach[kx] = lanes_between(shift, shift + out_width as isize, n);
                        offset[kx] = (kx * positions) as isize - shift;
                    }
                    for c in 0..channels {
                        for ih in 0..h {
                            let row = xp.add((c * h + ih) * w + j0);
                            let mut acc = $load(all, row);
                            // The output rows that met input row `ih`: `oh = ih + pad - ky`.
                            for ky in 0..k {
                                let Some(oh) = (ih + pad).checked_sub(ky).filter(|&oh| oh < out_height)
                                else {
                                    continue;
                                };
                                let first = dp.wrapping_add((c * k + ky) * k * positions + oh * out_width);
                                for (&reach, &offset) in reach[..k].iter().zip(&offset[..k]) {
                                    if reach != 0 {
                                        acc = $add(acc, $load(reach, first.wrapping_offset(offset)));
                                    }
                                }
                            }
                            $store(row, all, acc);
                        }
                    }
                    j0 += n;
                }
            }
        }
    };
}

/// The largest kernel the AVX-512 `col2im` takes (its per-column masks live in fixed arrays);
/// larger ones take the generic loop.
const COL2IM_MAX_KERNEL: usize = 16;

col2im_entry!(
    col2im_stride1_avx512_f32,
    f32,
    16,
    __mmask16,
    _mm512_maskz_loadu_ps,
    _mm512_add_ps,
    _mm512_mask_storeu_ps
);
col2im_entry!(
    col2im_stride1_avx512_f64,
    f64,
    8,
    __mmask8,
    _mm512_maskz_loadu_pd,
    _mm512_add_pd,
    _mm512_mask_storeu_pd
);

/// [`super::col2im_stride1`] for `f32` (`E = f32`) or `f64` on AVX-512.
///
/// # Panics
///
/// When the lengths do not fit `shape`, or the CPU lacks AVX-512F.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) fn col2im_stride1_avx512<E: 'static>(
    shape: &Conv,
    d_patches: &[E],
    dx: &mut [E],
) -> bool {
    let taps = shape.channels * shape.kernel * shape.kernel;
    assert!(
        d_patches.len() == taps * shape.out_height() * shape.out_width()
            && dx.len() == shape.channels * shape.height * shape.width,
        "col2im: {} patch values and {} input values for {shape:?}",
        d_patches.len(),
        dx.len()
    );
    assert_isa(Isa::Avx512);
    if shape.kernel > COL2IM_MAX_KERNEL {
        return false;
    }
    if let (Some(d), Some(x)) = (
        same_type_slice::<E, f32>(d_patches),
        same_type_slice_mut::<E, f32>(&mut *dx),
    ) {
        // SAFETY: AVX-512F is present (`assert_isa`) and the lengths were checked above.
        unsafe { col2im_stride1_avx512_f32(shape, d, x) };
        return true;
    }
    if let (Some(d), Some(x)) = (
        same_type_slice::<E, f64>(d_patches),
        same_type_slice_mut::<E, f64>(&mut *dx),
    ) {
        // SAFETY: as above.
        unsafe { col2im_stride1_avx512_f64(shape, d, x) };
        return true;
    }
    false
}

// ---------------------------------------------------------------------------------------------
// Max pooling over 2 x 2 windows with stride 2, in f32.
// ---------------------------------------------------------------------------------------------

/// Max pooling of planes of `height x width` (`x` holds whole planes) with 2 x 2 windows and
/// stride 2 into planes of `height / 2 x width / 2` (an odd last row or column is left out):
/// `out[j]` = the first maximum of `top[2j], top[2j + 1], bottom[2j], bottom[2j + 1]` in that
/// order for each pair of rows, a NaN (the first) if there is one: the generic pooling's result,
/// bit for bit, 16 outputs per step (each pair of rows de-interleaved into even and odd
/// columns). One call for a whole batch: a call per row cost more than the row's work.
///
/// # Panics
///
/// When `x` is not whole planes, `out` not as many pooled planes, or `isa` is not AVX-512 or
/// not present.
pub(crate) fn max_pool_2x2_f32(
    isa: Isa,
    x: &[f32],
    (height, width): (usize, usize),
    out: &mut [MaybeUninit<f32>],
) {
    let planes = pooled_planes(x.len(), (height, width), out.len());
    assert!(isa == Isa::Avx512, "max pooling has an AVX-512 kernel only");
    assert_isa(isa);
    // SAFETY: AVX-512F is present (`assert_isa`); the slices are `planes` whole planes.
    unsafe { max_pool_2x2_planes_avx512(x, (height, width), out, planes) }
}

/// The number of planes of `height x width` in `len` values, checked to be whole and to match
/// `pooled_len` values of pooled planes.
fn pooled_planes(len: usize, (height, width): (usize, usize), pooled_len: usize) -> usize {
    let planes = len.checked_div(height * width).unwrap_or(0);
    assert!(
        len == planes * height * width && pooled_len == planes * (height / 2) * (width / 2),
        "{len} values of {height} x {width} planes pooled into {pooled_len}"
    );
    planes
}

/// # Safety
///
/// The CPU has AVX-512F; `x` holds `planes` planes of `height x width`, `out` as many of
/// `height / 2 x width / 2`.
#[target_feature(enable = "avx512f")]
unsafe fn max_pool_2x2_planes_avx512(
    x: &[f32],
    (height, width): (usize, usize),
    out: &mut [MaybeUninit<f32>],
    planes: usize,
) {
    let (out_height, out_width) = (height / 2, width / 2);
    if height % 2 == 0 && width % 2 == 0 && (2..=16).contains(&width) {
        // SAFETY: AVX-512F is present (the contract); the planes have even sizes, so their
        // rows are whole row pairs, and rows of at most 16.
        unsafe { max_pool_2x2_narrow_avx512(x, width, out, planes * out_height) };
        return;
    }
    if out_width == 0 || out_height == 0 {
        return; // nothing to write (and no chunks of 0 elements)
    }
    // Whole row pairs (an odd last row is left out), each a row of outputs: as chunks, so that
    // every row's sizes and masks are the same values, computed once.
    let x_planes = x.chunks_exact(height * width).take(planes);
    for (plane, out_plane) in x_planes.zip(out.chunks_exact_mut(out_height * out_width)) {
        let pairs = plane.chunks_exact(2 * width);
        for (pair, out_row) in pairs.zip(out_plane.chunks_exact_mut(out_width)) {
            let (top, bottom) = pair.split_at(width);
            // SAFETY: AVX-512F is present (the contract); each row holds `2·out_row.len()`
            // values.
            unsafe { max_pool_2x2_avx512(top, bottom, out_row) }
        }
    }
}

/// Max pooling 2 x 2 of rows of at most 16 (LeNet's second pooling: 10), several row pairs
/// per vector: with one row pair per vector, 5 of 16 lanes would be useful. The input is a
/// sequence of `pairs` row pairs (planes of even height, one after the other), `2·width` values
/// each, and the output `width / 2` values per pair. Each step loads the next `⌊32 / width⌋`
/// pairs (at most 64 values, four vectors) and picks each window's four inputs into four
/// vectors with two-source permutes (one per half of the loaded values, blended), then takes
/// their first maximum ([`first_maximum_of_windows`], as the row-by-row kernel does).
///
/// # Safety
///
/// The CPU has AVX-512F; `2 <= width <= 16` and even; `x` holds `pairs · 2·width` values, `out`
/// `pairs · width / 2`.
#[target_feature(enable = "avx512f")]
unsafe fn max_pool_2x2_narrow_avx512(
    x: &[f32],
    width: usize,
    out: &mut [MaybeUninit<f32>],
    pairs: usize,
) {
    let out_width = width / 2;
    let tables = NarrowPoolTables::of(width);
    // SAFETY (whole body): AVX-512F is present (the contract). Step `g0` reads values
    // `g0·2W .. (g0 + count)·2W` of `x` (`NarrowPoolTables::windows`) and writes outputs
    // `g0·OW .. (g0 + count)·OW` (the store masked to those), `g0 + count <= pairs`.
    unsafe {
        let mut g0 = 0;
        while g0 < pairs {
            let (count, _, best, mask) = tables.step(x, width, g0, pairs);
            let to = out.as_mut_ptr().add(g0 * out_width).cast::<f32>();
            _mm512_mask_storeu_ps(to, mask, best);
            g0 += count;
        }
    }
}

/// Where max pooling's kernels for rows of at most 16 (`2 <= W <= 16`, even) find the
/// windows' inputs, and where the backward pass puts their gradients: each step takes the
/// next `⌊32 / W⌋` row pairs (at most 64 values, four vectors), lane `l` the window `l % OW`
/// of pair `l / OW`.
#[derive(Clone, Copy)]
struct NarrowPoolTables {
    /// Row pairs per step: `per_step · OW <= 16` lanes.
    per_step: usize,
    /// For each of a window's four inputs (`top[2j]`, `top[2j + 1]`, `bottom[2j]`,
    /// `bottom[2j + 1]`) and each lane: its place among the step's first or last 32 values.
    gather: [[[i32; 16]; 2]; 4],
    /// For each input, the lanes whose value is among the last 32.
    gather_upper: [u16; 4],
    /// For each of the step's four vectors of values, for each value: the lane of its window,
    /// plus 16 if it is in an odd column (the second input of its row); for the backward
    /// pass.
    scatter: [[i32; 16]; 4],
    /// For each of those vectors, the values in a bottom row.
    scatter_bottom: [u16; 4],
}

impl NarrowPoolTables {
    /// The tables of every even width from 2 to 16 (index `width / 2 - 1`), built at compile
    /// time: built per call, they took 0.6% of a LeNet prediction.
    const ALL: [NarrowPoolTables; 8] = {
        let mut all = [NarrowPoolTables::new(2); 8];
        let mut i = 1;
        while i < 8 {
            all[i] = NarrowPoolTables::new(2 * (i + 1));
            i += 1;
        }
        all
    };

    /// The tables for rows of `width` (even, 2 to 16).
    fn of(width: usize) -> &'static NarrowPoolTables {
        &Self::ALL[width / 2 - 1]
    }

    /// The tables for rows of `width`.
    const fn new(width: usize) -> Self {
        let out_width = width / 2;
        let per_step = 32 / width;
        let mut tables = NarrowPoolTables {
            per_step,
            gather: [[[0; 16]; 2]; 4],
            gather_upper: [0; 4],
            scatter: [[0; 16]; 4],
            scatter_bottom: [0; 4],
        };
        let mut l = 0;
        while l < per_step * out_width {
            let (pair, j) = (l / out_width, l % out_width);
            let top_left = pair * 2 * width + 2 * j;
            let offsets = [0, 1, width, width + 1];
            let mut input = 0;
            while input < 4 {
                let at = top_left + offsets[input];
                tables.gather[input][at / 32][l] = (at % 32) as i32;
                if at >= 32 {
                    tables.gather_upper[input] |= 1 << l;
                }
                let (column_parity, bottom) = (input % 2, input / 2);
                tables.scatter[at / 16][at % 16] = (l + 16 * column_parity) as i32;
                if bottom == 1 {
                    tables.scatter_bottom[at / 16] |= 1 << (at % 16);
                }
                input += 1;
            }
            l += 1;
        }
        tables
    }

    /// The four inputs of the windows of a step's row pairs, `values` of them (at most 64)
    /// from `source`; the lanes past the step's windows belong to no window.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `source` is valid for reading `values <= 64` values.
    #[inline(always)]
    unsafe fn windows(&self, source: *const f32, values: usize) -> [__m512; 4] {
        // SAFETY: AVX-512F is present (the contract); every load is masked to the `values`
        // values (the pointers past them are formed with `wrapping_add` and not read); the
        // tables are read whole.
        unsafe {
            let load = |k: usize| {
                let valid = values.saturating_sub(16 * k).min(16);
                let mask = ((1_u32 << valid) - 1) as __mmask16;
                _mm512_maskz_loadu_ps(mask, source.wrapping_add(16 * k))
            };
            let (a, b, c, d) = (load(0), load(1), load(2), load(3));
            array_from(|i| {
                let index = |h: usize| _mm512_loadu_si512(self.gather[i][h].as_ptr().cast());
                let low = _mm512_permutex2var_ps(a, index(0), b);
                let high = _mm512_permutex2var_ps(c, index(1), d);
                _mm512_mask_blend_ps(self.gather_upper[i], low, high)
            })
        }
    }

    /// The step from row pair `g0` of the `pairs` in `x` (rows of `width`): how many row pairs
    /// it takes, its windows' four inputs ([`Self::windows`]), their first maxima
    /// ([`first_maximum_of_windows`]) and the mask of its outputs' lanes.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `x` holds `pairs` row pairs of `width`, `g0 < pairs`.
    #[inline(always)]
    unsafe fn step(
        &self,
        x: &[f32],
        width: usize,
        g0: usize,
        pairs: usize,
    ) -> (usize, [__m512; 4], __m512, __mmask16) {
        // SAFETY: AVX-512F is present (the contract); the step's `count·2W` values from pair
        // `g0` lie inside `x`, as `g0 + count <= pairs`.
        unsafe {
            let count = self.per_step.min(pairs - g0);
            let inputs = self.windows(x.as_ptr().add(g0 * 2 * width), count * 2 * width);
            let best = first_maximum_of_windows(inputs);
            let mask = ((1_u32 << (count * (width / 2))) - 1) as __mmask16;
            (count, inputs, best, mask)
        }
    }

    /// Writes each window's four input gradients (`gradients`, lanes as [`Self::windows`]
    /// reads them) where its inputs lie: `values` values from `target`.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `target` is valid for writing `values <= 64` values.
    #[inline(always)]
    unsafe fn scatter(&self, [g0, g1, g2, g3]: [__m512; 4], target: *mut f32, values: usize) {
        // SAFETY: AVX-512F is present (the contract); every store is masked to the `values`
        // values (the pointers past them are formed with `wrapping_add` and not written); the
        // tables are read whole.
        unsafe {
            for k in 0..4 {
                let valid = values.saturating_sub(16 * k).min(16);
                if valid == 0 {
                    break;
                }
                let index = _mm512_loadu_si512(self.scatter[k].as_ptr().cast());
                let top = _mm512_permutex2var_ps(g0, index, g1);
                let bottom = _mm512_permutex2var_ps(g2, index, g3);
                let value = _mm512_mask_blend_ps(self.scatter_bottom[k], top, bottom);
                let mask = ((1_u32 << valid) - 1) as __mmask16;
                _mm512_mask_storeu_ps(target.wrapping_add(16 * k), mask, value);
            }
        }
    }
}

/// Up to 16 of a row pair's 2 x 2 windows from window `j0`, as max pooling's kernels read
/// them: each of the four inputs of every window (`top[2j]`, `top[2j + 1]`, `bottom[2j]`,
/// `bottom[2j + 1]`: each pair of rows de-interleaved into even and odd columns), their first
/// maximum (a NaN, the first, if any: `max(v, best)` is `v > best ? v : best`, and a NaN meeting
/// a number is blended in), and the masks of the `2·count` values of each row.
///
/// # Safety
///
/// The CPU has AVX-512F; both rows hold at least `2·(j0 + count)` values, `count <= 16`. The
/// pointer to a row's second vector may lie past its end when `count <= 8` (its mask is then
/// empty): it is formed with `wrapping_add` and not read.
#[inline(always)]
unsafe fn pool_windows_2x2(
    (top, bottom): (&[f32], &[f32]),
    j0: usize,
    count: usize,
) -> ([__m512; 4], __m512, (__mmask16, __mmask16)) {
    // SAFETY: as the contract says; the loads are masked to values `2·j0 .. 2·(j0 + count)`.
    unsafe {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let low = ((1_u32 << (2 * count).min(16)) - 1) as __mmask16;
        let high = ((1_u64 << (2 * count).saturating_sub(16)) - 1) as __mmask16;
        let row = |r: &[f32]| {
            let a = _mm512_maskz_loadu_ps(low, r.as_ptr().add(2 * j0));
            let b = _mm512_maskz_loadu_ps(high, r.as_ptr().wrapping_add(2 * j0 + 16));
            (
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
            )
        };
        let (t0, t1) = row(top);
        let (b0, b1) = row(bottom);
        let inputs = [t0, t1, b0, b1];
        (inputs, first_maximum_of_windows(inputs), (low, high))
    }
}

/// Each lane's first maximum of the windows' four inputs `[top[2j], top[2j + 1], bottom[2j],
/// bottom[2j + 1]]` in that order, or its first NaN: max pooling's rule, bit for bit.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn first_maximum_of_windows([t0, t1, b0, b1]: [__m512; 4]) -> __m512 {
    // SAFETY: AVX-512F is present (the contract); register operations only.
    unsafe {
        // `v` replaces `best` where `best` is a number and `v` is larger or a NaN: "not less
        // or equal, unordered true" is both, in one comparison, masked to where `best` is
        // ordered.
        let larger = |best: __m512, v: __m512| {
            let best_is_number = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(best, best);
            let take = _mm512_mask_cmp_ps_mask::<_CMP_NLE_UQ>(best_is_number, v, best);
            _mm512_mask_mov_ps(best, take, v)
        };
        // `max(v, best)` keeps `best` on ties, as `larger` does, and differs from it only where
        // a NaN comes after a number: without NaNs (nearly always) three maxima give the
        // windows' first maxima, a chain half as long.
        let any_nan =
            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(t0, t1) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(b0, b1);
        if any_nan == 0 {
            _mm512_max_ps(b1, _mm512_max_ps(b0, _mm512_max_ps(t1, t0)))
        } else {
            larger(larger(larger(t0, t1), b0), b1)
        }
    }
}

/// # Safety
///
/// The CPU has AVX-512F; both rows hold at least `2 · out.len()` values.
#[inline(always)]
unsafe fn max_pool_2x2_avx512(top: &[f32], bottom: &[f32], out: &mut [MaybeUninit<f32>]) {
    // SAFETY (whole body): AVX-512F is present (the contract). Step `j0` reads values
    // `2·j0 .. 2·j0 + 2·count` of each row (`pool_windows_2x2`) and writes outputs
    // `j0 .. j0 + count`, masked to those, `j0 + count <= out.len()`.
    unsafe {
        let mut j0 = 0;
        while j0 < out.len() {
            let count = (out.len() - j0).min(16);
            let (_, best, _) = pool_windows_2x2((top, bottom), j0, count);
            let mask = ((1_u32 << count) - 1) as __mmask16;
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(j0).cast::<f32>(), mask, best);
            j0 += count;
        }
    }
}

/// The backward pass of [`max_pool_2x2_f32`]: each window's gradient `dy[j]` goes to its first
/// maximum (the first value whose bits are the maximum's: the first NaN, if any), the other three
/// inputs get 0, as `0 + dy[j]` and `0` exactly as the generic code writes them. Writes the
/// windows' values of `dx` (planes like `x`'s), not an odd last row or column.
///
/// # Panics
///
/// When `x` and `dx` are not whole planes, `dy` not as many pooled planes, or `isa` is not
/// AVX-512 or not present.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) fn max_pool_2x2_backward_f32(
    isa: Isa,
    x: &[f32],
    (height, width): (usize, usize),
    dy: &[f32],
    dx: &mut [f32],
) {
    let planes = pooled_planes(x.len(), (height, width), dy.len());
    assert_eq!(
        dx.len(),
        x.len(),
        "the input gradient is not the input's size"
    );
    assert!(isa == Isa::Avx512, "max pooling has an AVX-512 kernel only");
    assert_isa(isa);
    // SAFETY: AVX-512F is present (`assert_isa`); the slices are `planes` whole planes.
    unsafe { max_pool_2x2_backward_planes_avx512(x, (height, width), dy, dx, planes) }
}

/// # Safety
///
/// The CPU has AVX-512F; `x` and `dx` hold `planes` planes of `height x width`, `dy` as many of
/// `height / 2 x width / 2`.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[target_feature(enable = "avx512f")]
unsafe fn max_pool_2x2_backward_planes_avx512(
    x: &[f32],
    (height, width): (usize, usize),
    dy: &[f32],
    dx: &mut [f32],
    planes: usize,
) {
    let (out_height, out_width) = (height / 2, width / 2);
    if height % 2 == 0 && width % 2 == 0 && (2..=16).contains(&width) {
        // SAFETY: AVX-512F is present (the contract); the planes have even sizes, so their
        // rows are whole row pairs, and rows of at most 16.
        unsafe { max_pool_2x2_backward_narrow_avx512(x, width, dy, dx, planes * out_height) };
        return;
    }
    for p in 0..planes {
        for r in 0..out_height {
            let top = (p * height + 2 * r) * width;
            let rows = (&x[top..][..width], &x[top + width..][..width]);
            let dy = &dy[(p * out_height + r) * out_width..][..out_width];
            let (upper, lower) = dx[top..][..2 * width].split_at_mut(width);
            // SAFETY: AVX-512F is present (the contract); each row holds `2·dy.len()` values.
            unsafe { max_pool_2x2_backward_avx512(rows, dy, (upper, lower)) }
        }
    }
}

/// # Safety
///
/// The CPU has AVX-512F; the four rows hold at least `2 · dy.len()` values.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[target_feature(enable = "avx512f")]
unsafe fn max_pool_2x2_backward_avx512(
    (top, bottom): (&[f32], &[f32]),
    dy: &[f32],
    (d_top, d_bottom): (&mut [f32], &mut [f32]),
) {
    // SAFETY (whole body): AVX-512F is present (the contract). Step `j0` reads values
    // `2·j0 .. 2·j0 + 2·count` of each input row (`pool_windows_2x2`) and `j0 .. j0 + count` of
    // `dy`, and writes the same values of each gradient row, masked to those,
    // `j0 + count <= dy.len()`. The pointer to a gradient row's second vector may lie past its
    // end when `count <= 8` (its mask is then empty): formed with `wrapping_add`, not written.
    unsafe {
        let first_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let second_half =
            _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        let mut j0 = 0;
        while j0 < dy.len() {
            let count = (dy.len() - j0).min(16);
            let (inputs, best, (low, high)) = pool_windows_2x2((top, bottom), j0, count);
            let d = _mm512_maskz_loadu_ps(((1_u32 << count) - 1) as __mmask16, dy.as_ptr().add(j0));
            let [g0, g1, g2, g3] = window_gradients(inputs, best, d);
            let store = |out: &mut [f32], even_values: __m512, odd_values: __m512| {
                let a = _mm512_permutex2var_ps(even_values, first_half, odd_values);
                let b = _mm512_permutex2var_ps(even_values, second_half, odd_values);
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(2 * j0), low, a);
                _mm512_mask_storeu_ps(out.as_mut_ptr().wrapping_add(2 * j0 + 16), high, b);
            };
            store(d_top, g0, g1);
            store(d_bottom, g2, g3);
            j0 += count;
        }
    }
}

/// Each window's gradient `d` to its first input with the maximum's bits (the first maximum,
/// or the first NaN), as `0 + d`; the window's other inputs get 0.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[inline(always)]
unsafe fn window_gradients([t0, t1, b0, _]: [__m512; 4], best: __m512, d: __m512) -> [__m512; 4] {
    // SAFETY: AVX-512F is present (the contract); register operations only.
    unsafe {
        let same_bits = |a: __m512, b: __m512| {
            _mm512_cmpeq_epi32_mask(_mm512_castps_si512(a), _mm512_castps_si512(b))
        };
        let (e0, e1, e2) = (
            same_bits(t0, best),
            same_bits(t1, best),
            same_bits(b0, best),
        );
        let takes = [e0, e1 & !e0, e2 & !(e0 | e1), !(e0 | e1 | e2)];
        let zero = _mm512_setzero_ps();
        array_from(|i| _mm512_maskz_add_ps(takes[i], zero, d))
    }
}

/// The backward pass of [`max_pool_2x2_narrow_avx512`] (rows of at most 16, several row pairs
/// per step): each step finds its windows' first maxima again, routes `dy` to them
/// ([`window_gradients`]) and writes each gradient where its input lies in `dx`. With one row
/// pair per step, LeNet-5's second pooling (rows of 10) took five times its forward pass.
///
/// # Safety
///
/// The CPU has AVX-512F; `2 <= width <= 16` and even; `x` and `dx` hold `pairs · 2·width`
/// values, `dy` `pairs · width / 2`.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[target_feature(enable = "avx512f")]
unsafe fn max_pool_2x2_backward_narrow_avx512(
    x: &[f32],
    width: usize,
    dy: &[f32],
    dx: &mut [f32],
    pairs: usize,
) {
    let out_width = width / 2;
    let tables = NarrowPoolTables::of(width);
    // SAFETY (whole body): AVX-512F is present (the contract). Step `g0` reads values
    // `g0·2W .. (g0 + count)·2W` of `x` and writes the same of `dx` (`NarrowPoolTables`'
    // loads and stores are masked to those), and reads outputs `g0·OW .. (g0 + count)·OW` of
    // `dy` (the load masked to those), `g0 + count <= pairs`.
    unsafe {
        let mut g0 = 0;
        while g0 < pairs {
            let (count, inputs, best, mask) = tables.step(x, width, g0, pairs);
            let d = _mm512_maskz_loadu_ps(mask, dy.as_ptr().add(g0 * out_width));
            let gradients = window_gradients(inputs, best, d);
            let values = count * 2 * width;
            tables.scatter(gradients, dx.as_mut_ptr().add(g0 * 2 * width), values);
            g0 += count;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Int8 dot products: the hot loop of the int8 layers.
// ---------------------------------------------------------------------------------------------

/// The instruction sets of the int8 kernels, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IsaI8 {
    /// AVX-512 VNNI (with BW and VL): `vpdpbusd` multiplies 64 unsigned by 64 signed bytes and
    /// adds them in fours into 16 `i32` sums, one instruction (the weights offset by 128 to
    /// make them unsigned, the offset's term `128·Σx` subtracted at the end).
    Avx512Vnni,
    /// AVX-512BW (with VL, for the masked 32-byte loads of a row's tail): 32 `i8` widened to
    /// `i16` per vector, `vpmaddwd` into 16 `i32` sums.
    Avx512Bw,
    /// AVX2: 16 `i8` widened to `i16` per vector, `vpmaddwd` into 8 `i32` sums.
    Avx2,
}

/// The best int8 instruction set this CPU has, detected once (with `std`), or the one the build
/// targets (without `std`); lowered, as [`detected_isa`], by the limits of
/// [`super::instruction_set`] (`avx2` keeps AVX2, `portable` none).
pub(crate) fn detected_isa_i8() -> Option<IsaI8> {
    // 1: none, 2: AVX2, 3: AVX-512BW, 4: AVX-512 VNNI.
    #[cfg(feature = "std")]
    let code = {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not yet detected.
        static DETECTED: AtomicU8 = AtomicU8::new(0);
        match DETECTED.load(Ordering::Relaxed) {
            0 => {
                let bw = std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl");
                let code = if bw && std::is_x86_feature_detected!("avx512vnni") {
                    4
                } else if bw {
                    3
                } else if std::is_x86_feature_detected!("avx2") {
                    2
                } else {
                    1
                };
                let code = code.min(i8_code(super::instruction_set::process_limit()));
                DETECTED.store(code, Ordering::Relaxed);
                code
            }
            code => code,
        }
    };
    #[cfg(not(feature = "std"))]
    let code = if cfg!(all(
        target_feature = "avx512bw",
        target_feature = "avx512vl",
        target_feature = "avx512vnni"
    )) {
        4
    } else if cfg!(all(
        target_feature = "avx512bw",
        target_feature = "avx512vl"
    )) {
        3
    } else if cfg!(target_feature = "avx2") {
        2
    } else {
        1
    };
    match code.min(i8_code(super::instruction_set::thread_limit())) {
        4 => Some(IsaI8::Avx512Vnni),
        3 => Some(IsaI8::Avx512Bw),
        2 => Some(IsaI8::Avx2),
        _ => None,
    }
}

/// A limit of [`super::instruction_set`] (1 portable, 2 AVX2, 3 AVX-512, more: none) as the
/// highest int8 code it allows.
#[inline]
fn i8_code(limit: u8) -> u8 {
    match limit {
        ..=1 => 1,
        2 => 2,
        _ => u8::MAX,
    }
}

/// Rows of the weight per pass of the int8 kernels: each chunk of `x`, widened once, meets this
/// many rows.
const I8_ROWS: usize = 8;

/// `R` rows of the int8 dot products from row `r0`, with AVX-512BW: per chunk of 32 inputs, `x`
/// widened to 16 bits once, and per row the weights widened and multiplied-and-added in pairs
/// into 16 lanes of 32-bit sums (`R` accumulators in registers); the tail of fewer than 32
/// inputs with masked loads.
///
/// # Safety
///
/// The CPU has AVX-512BW; `weight.len() == sums.len() · x.len()`; `r0 + R <= sums.len()`.
#[inline(always)]
unsafe fn dot_tile_i8_avx512<const R: usize>(weight: &[i8], x: &[i8], sums: &mut [i32], r0: usize) {
    let n = x.len();
    let whole = n - n % 32;
    let tail = n % 32;
    // SAFETY (whole body): AVX-512BW is present (the contract). Every load reads 32 bytes at
    // `i` with `i + 32 <= whole <= n`, or at `whole` the `tail` bytes a mask selects (the
    // others are not read), of `x` or of a row `r0 + r < sums.len()` of `weight`, which exists
    // since `weight.len() == sums.len() · n`.
    unsafe {
        let (wp, xp) = (weight.as_ptr(), x.as_ptr());
        let rows: [*const i8; R] = array_from(|r| wp.add((r0 + r) * n));
        let mut acc = [_mm512_setzero_si512(); R];
        let mut i = 0;
        while i < whole {
            let xv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(xp.add(i).cast()));
            for (acc_r, &row) in acc.iter_mut().zip(&rows) {
                let wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(row.add(i).cast()));
                *acc_r = _mm512_add_epi32(*acc_r, _mm512_madd_epi16(xv, wv));
            }
            i += 32;
        }
        if tail > 0 {
            let mask: __mmask32 = (1_u32 << tail) - 1;
            let xv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, xp.add(whole)));
            for (acc_r, &row) in acc.iter_mut().zip(&rows) {
                let wv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, row.add(whole)));
                *acc_r = _mm512_add_epi32(*acc_r, _mm512_madd_epi16(xv, wv));
            }
        }
        store_lane_sums(&acc, sums.as_mut_ptr().add(r0));
    }
}

/// Writes the sum of the 16 lanes of each of the `R` vectors to `out[0..R]`: for 8 vectors
/// at once, halves added and `vphaddd` in a tree (about 20 instructions for the 8 sums, where
/// summing each vector on its own takes about 9 per vector).
///
/// # Safety
///
/// The CPU has AVX-512F; `out` is valid for `R` writes.
#[inline(always)]
unsafe fn store_lane_sums<const R: usize>(v: &[__m512i; R], out: *mut i32) {
    // SAFETY: AVX-512F (and so AVX2) is present and `out` holds `R` values (the contract).
    unsafe {
        if R == 8 {
            let half = |z: __m512i| {
                _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64::<1>(z))
            };
            let a: [__m256i; 8] = array_from(|r| half(v[r]));
            // [a0 lanes 0+1, 2+3, a1 lanes 0+1, 2+3 | the same of lanes 4-7], and so on.
            let b01 = _mm256_hadd_epi32(a[0], a[1]);
            let b23 = _mm256_hadd_epi32(a[2], a[3]);
            let b45 = _mm256_hadd_epi32(a[4], a[5]);
            let b67 = _mm256_hadd_epi32(a[6], a[7]);
            // [a0..a3 summed over lanes 0-3 | a0..a3 over lanes 4-7], and for a4..a7.
            let c0123 = _mm256_hadd_epi32(b01, b23);
            let c4567 = _mm256_hadd_epi32(b45, b67);
            let low = _mm256_permute2x128_si256::<0x20>(c0123, c4567);
            let high = _mm256_permute2x128_si256::<0x31>(c0123, c4567);
            _mm256_storeu_si256(out.cast(), _mm256_add_epi32(low, high));
        } else {
            for (r, v) in v.iter().enumerate() {
                *out.add(r) = _mm512_reduce_add_epi32(*v);
            }
        }
    }
}

/// Defines `$name`: `sums[r] = Σ_i weight[r·n + i] · x[i]` for the rows `r` of `weight`
/// (`n = x.len()`) with `$tile`: tiles of [`I8_ROWS`] rows sharing each chunk of `x`, then
/// single rows.
macro_rules! dot_rows_i8_driver {
    ($name:ident, $tile:ident, $features:literal, $isa:literal) => {
        #[doc = concat!("The int8 dot products of every row with ", $isa, ".")]
        ///
        /// # Safety
        ///
        #[doc = concat!("The CPU has ", $isa, "; `weight.len() == sums.len() · x.len()`.")]
        #[target_feature(enable = $features)]
        unsafe fn $name(weight: &[i8], x: &[i8], sums: &mut [i32]) {
            let mut r0 = 0;
            // SAFETY: every tile's rows exist (r0 + rows <= sums.len()); the rest is the
            // contract.
            unsafe {
                while r0 + I8_ROWS <= sums.len() {
                    $tile::<I8_ROWS>(weight, x, sums, r0);
                    r0 += I8_ROWS;
                }
                while r0 < sums.len() {
                    $tile::<1>(weight, x, sums, r0);
                    r0 += 1;
                }
            }
        }
    };
}

dot_rows_i8_driver!(
    dot_rows_i8_avx512,
    dot_tile_i8_avx512,
    "avx512bw,avx512vl",
    "AVX-512BW and VL"
);
dot_rows_i8_driver!(
    dot_rows_i8_vnni,
    dot_tile_i8_vnni,
    "avx512bw,avx512vl,avx512vnni",
    "AVX-512BW, VL and VNNI"
);
dot_rows_i8_driver!(dot_rows_i8_avx2, dot_tile_i8_avx2, "avx2", "AVX2");

/// `R` rows of the int8 dot products from row `r0`, with AVX-512 VNNI: per chunk of 64 inputs
/// and per row, the weights offset by 128 to be unsigned (`w ^ 0x80`, one `vpxord`) and one
/// `vpdpbusd` adding `(w + 128) · x` in fours into 16 lanes of 32-bit sums; at the end
/// `Σ w·x = Σ (w + 128)·x - 128·Σ x`, where `Σ x` (one more `vpdpbusd` per chunk, for all the
/// rows) is shared by every row. The sums wrap modulo `2^32` (`vpdpbusd` does not saturate),
/// so the result is exact whenever the true dot product fits an `i32`, whatever the values.
///
/// # Safety
///
/// The CPU has AVX-512BW, VL and VNNI; `weight.len() == sums.len() · x.len()`;
/// `r0 + R <= sums.len()`.
#[inline(always)]
unsafe fn dot_tile_i8_vnni<const R: usize>(weight: &[i8], x: &[i8], sums: &mut [i32], r0: usize) {
    let n = x.len();
    let whole = n - n % 64;
    let tail = n % 64;
    // SAFETY (whole body): the instruction sets are present (the contract). Every load reads 64
    // bytes at `i` with `i + 64 <= whole <= n`, or at `whole` the `tail` bytes a mask selects
    // (the others are not read), of `x` or of a row `r0 + r < sums.len()` of `weight`, which
    // exists since `weight.len() == sums.len() · n`.
    unsafe {
        let (wp, xp) = (weight.as_ptr(), x.as_ptr());
        let rows: [*const i8; R] = array_from(|r| wp.add((r0 + r) * n));
        let offset = _mm512_set1_epi8(-128);
        let ones = _mm512_set1_epi8(1);
        let mut acc = [_mm512_setzero_si512(); R];
        let mut x_sum = _mm512_setzero_si512();
        let mut i = 0;
        while i < whole {
            let xv = _mm512_loadu_si512(xp.add(i).cast());
            x_sum = _mm512_dpbusd_epi32(x_sum, ones, xv);
            for r in 0..R {
                let u = _mm512_xor_si512(_mm512_loadu_si512(rows[r].add(i).cast()), offset);
                acc[r] = _mm512_dpbusd_epi32(acc[r], u, xv);
            }
            i += 64;
        }
        if tail > 0 {
            let mask: __mmask64 = (1_u64 << tail) - 1;
            // Masked-off inputs load as 0, adding nothing whatever the weight's offset.
            let xv = _mm512_maskz_loadu_epi8(mask, xp.add(whole));
            x_sum = _mm512_dpbusd_epi32(x_sum, ones, xv);
            for r in 0..R {
                let w = _mm512_maskz_loadu_epi8(mask, rows[r].add(whole));
                acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_xor_si512(w, offset), xv);
            }
        }
        // Σ (w + 128)·x - 128·Σ x, lane by lane, then the lanes summed.
        let correction = _mm512_slli_epi32(x_sum, 7);
        let dots: [__m512i; R] = array_from(|r| _mm512_sub_epi32(acc[r], correction));
        store_lane_sums(&dots, sums.as_mut_ptr().add(r0));
    }
}

/// [`dot_tile_i8_avx512`] with AVX2: chunks of 16 inputs, 8 lanes of 32-bit sums; the tail of
/// fewer than 16 inputs in plain code.
///
/// # Safety
///
/// The CPU has AVX2; `weight.len() == sums.len() · x.len()`; `r0 + R <= sums.len()`.
#[inline(always)]
unsafe fn dot_tile_i8_avx2<const R: usize>(weight: &[i8], x: &[i8], sums: &mut [i32], r0: usize) {
    let n = x.len();
    let whole = n - n % 16;
    // SAFETY (whole body): AVX2 is present (the contract). Every vector load reads 16 bytes at
    // `i` with `i + 16 <= whole <= n`, of `x` or of a row `r0 + r < sums.len()` of `weight`,
    // which exists since `weight.len() == sums.len() · n`.
    unsafe {
        let (wp, xp) = (weight.as_ptr(), x.as_ptr());
        let rows: [*const i8; R] = array_from(|r| wp.add((r0 + r) * n));
        let mut acc = [_mm256_setzero_si256(); R];
        let mut i = 0;
        while i < whole {
            let xv = _mm256_cvtepi8_epi16(_mm_loadu_si128(xp.add(i).cast()));
            for (acc_r, &row) in acc.iter_mut().zip(&rows) {
                let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(row.add(i).cast()));
                *acc_r = _mm256_add_epi32(*acc_r, _mm256_madd_epi16(xv, wv));
            }
            i += 16;
        }
        for (r, acc_r) in acc.iter().enumerate() {
            let mut lanes = [0_i32; 8];
            _mm256_storeu_si256(lanes.as_mut_ptr().cast(), *acc_r);
            let row = &weight[(r0 + r) * n..(r0 + r + 1) * n];
            let rest: i32 = row[whole..]
                .iter()
                .zip(&x[whole..])
                .map(|(&w, &x)| i32::from(w) * i32::from(x))
                .sum();
            sums[r0 + r] = lanes.iter().sum::<i32>() + rest;
        }
    }
}

/// `out[o] = clamp(zero + M[o]·(dots[o] + bias[o]), low, 127)` for 16 outputs at a time with
/// AVX-512F, `M[o]` the fixed-point multiplier `(multiplier[o], exponent[o])`: the same integers
/// as [`crate::quant::Multiplier::apply`], lane by lane (a group with a positive exponent, which
/// needs a saturating left shift, is done one output at a time). The steps, per lane:
/// `acc = dots + bias` (saturating); the doubling high product, its 64-bit products in even and
/// odd lanes, rounded as gemmlowp's; the rounding right shift by `-exponent`; the zero point and
/// the clamp.
///
/// # Safety
///
/// The CPU has AVX-512BW and VL; every slice has `out.len()` elements.
///
/// # Panics
///
/// When an exponent is outside `-31..=30` (checked 16 at a time, as the group is loaded).
#[target_feature(enable = "avx512bw,avx512vl")]
unsafe fn requantize_i8_avx512(
    dots: &[i32],
    (bias, multiplier, exponent): (&[i32], &[i32], &[i32]),
    (zero, low): (i8, i8),
    out: &mut [i8],
) {
    let n = out.len();
    // SAFETY (whole body): AVX-512BW and VL are present (the contract). Each group reads and
    // writes lanes `o0..o0 + count` of slices of `n` elements, `count <= 16` and
    // `o0 + count <= n`, the other lanes masked off.
    unsafe {
        let mut o0 = 0;
        while o0 < n {
            let count = 16.min(n - o0);
            let mask: __mmask16 = if count == 16 {
                0xFFFF
            } else {
                (1 << count) - 1
            };
            let load = |s: &[i32]| _mm512_maskz_loadu_epi32(mask, s.as_ptr().add(o0));
            let (d, b, m, e) = (load(dots), load(bias), load(multiplier), load(exponent));
            let out_of_range = _mm512_mask_cmpgt_epi32_mask(mask, e, _mm512_set1_epi32(30))
                | _mm512_mask_cmplt_epi32_mask(mask, e, _mm512_set1_epi32(-31));
            assert!(
                out_of_range == 0,
                "a multiplier's exponent is from -31 to 30"
            );
            if _mm512_mask_cmpgt_epi32_mask(mask, e, _mm512_setzero_si512()) != 0 {
                for o in o0..o0 + count {
                    out[o] =
                        requantize_one(dots[o], bias[o], multiplier[o], exponent[o], zero, low);
                }
                o0 += count;
                continue;
            }
            // acc = d + b, saturating: an overflow has both operands' sign and the other result
            // sign.
            let sum = _mm512_add_epi32(d, b);
            let overflow = _mm512_cmplt_epi32_mask(
                _mm512_and_si512(_mm512_xor_si512(d, sum), _mm512_xor_si512(b, sum)),
                _mm512_setzero_si512(),
            );
            let saturated = _mm512_xor_si512(_mm512_srai_epi32(d, 31), _mm512_set1_epi32(i32::MAX));
            let acc = _mm512_mask_blend_epi32(overflow, sum, saturated);
            // The doubling high product: round(acc·m / 2^31), ties up; MIN·MIN saturates.
            let high64 = |p: __m512i| {
                let negative = _mm512_cmplt_epi64_mask(p, _mm512_setzero_si512());
                let nudge = _mm512_mask_blend_epi64(
                    negative,
                    _mm512_set1_epi64(1 << 30),
                    _mm512_set1_epi64(1 - (1 << 30)),
                );
                let v = _mm512_add_epi64(p, nudge);
                // Division by 2^31 truncating toward zero: a negative value first adds 2^31 - 1.
                let v_negative = _mm512_cmplt_epi64_mask(v, _mm512_setzero_si512());
                let v = _mm512_mask_add_epi64(v, v_negative, v, _mm512_set1_epi64((1 << 31) - 1));
                _mm512_srai_epi64(v, 31)
            };
            let even = high64(_mm512_mul_epi32(acc, m));
            let odd = high64(_mm512_mul_epi32(
                _mm512_srli_epi64(acc, 32),
                _mm512_srli_epi64(m, 32),
            ));
            let high = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
            let both_min = _mm512_cmpeq_epi32_mask(acc, _mm512_set1_epi32(i32::MIN))
                & _mm512_cmpeq_epi32_mask(m, _mm512_set1_epi32(i32::MIN));
            let high = _mm512_mask_blend_epi32(both_min, high, _mm512_set1_epi32(i32::MAX));
            // The rounding right shift by r = -exponent: (x >> r) + (remainder > threshold).
            let r = _mm512_sub_epi32(_mm512_setzero_si512(), e);
            let ones = _mm512_set1_epi32(1);
            let low_bits = _mm512_sub_epi32(_mm512_sllv_epi32(ones, r), ones);
            let remainder = _mm512_and_si512(high, low_bits);
            let negative = _mm512_cmplt_epi32_mask(high, _mm512_setzero_si512());
            let threshold = _mm512_mask_add_epi32(
                _mm512_srai_epi32(low_bits, 1),
                negative,
                _mm512_srai_epi32(low_bits, 1),
                ones,
            );
            let up = _mm512_cmpgt_epi32_mask(remainder, threshold);
            let shifted = _mm512_srav_epi32(high, r);
            let y = _mm512_mask_add_epi32(shifted, up, shifted, ones);
            // zero + y, clamped to [low, 127]: y first clamped to a range where the sum cannot
            // overflow and the final clamp still decides.
            let y = _mm512_max_epi32(
                _mm512_min_epi32(y, _mm512_set1_epi32(1024)),
                _mm512_set1_epi32(-1024),
            );
            let q = _mm512_add_epi32(y, _mm512_set1_epi32(i32::from(zero)));
            let q = _mm512_max_epi32(
                _mm512_min_epi32(q, _mm512_set1_epi32(127)),
                _mm512_set1_epi32(i32::from(low)),
            );
            _mm_mask_storeu_epi8(out.as_mut_ptr().add(o0), mask, _mm512_cvtepi32_epi8(q));
            o0 += count;
        }
    }
}

/// One output of [`requantize_i8`], the definition: `clamp(zero + M·(dot + bias), low, 127)`.
#[inline]
fn requantize_one(dot: i32, bias: i32, multiplier: i32, exponent: i32, zero: i8, low: i8) -> i8 {
    super::reference::requantize_one(dot, bias, multiplier, exponent, zero, low)
}

/// `out[o] = clamp(zero + M[o]·(dots[o] + bias[o]), low, 127)`: the int8 layers'
/// requantization, 16 outputs at a time with `isa` when it has AVX-512, one at a time
/// otherwise.
///
/// # Panics
///
/// When the slices' lengths differ, or an exponent is outside `-31..=30` (no
/// [`crate::quant::Multiplier`] has one).
pub(crate) fn requantize_i8(
    isa: IsaI8,
    dots: &[i32],
    (bias, multiplier, exponent): (&[i32], &[i32], &[i32]),
    (zero, low): (i8, i8),
    out: &mut [i8],
) {
    let n = out.len();
    assert!(
        (dots.len(), bias.len(), multiplier.len(), exponent.len()) == (n, n, n, n),
        "requantizing {n} outputs from slices of other lengths"
    );
    match isa {
        IsaI8::Avx512Vnni | IsaI8::Avx512Bw => {
            #[cfg(feature = "std")]
            assert!(
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl"),
                "the CPU lacks AVX-512BW or AVX-512VL"
            );
            // SAFETY: lengths checked above; AVX-512BW and VL are present (detected, or
            // checked above with std; without std, the build targets them). The kernel checks
            // the exponents itself.
            unsafe { requantize_i8_avx512(dots, (bias, multiplier, exponent), (zero, low), out) }
        }
        IsaI8::Avx2 => {
            assert!(
                exponent.iter().all(|&e| (-31..=30).contains(&e)),
                "a multiplier's exponent is from -31 to 30"
            );
            for (o, q) in out.iter_mut().enumerate() {
                *q = requantize_one(dots[o], bias[o], multiplier[o], exponent[o], zero, low);
            }
        }
    }
}

/// `sums[r] = Σ_i weight[r·n + i] · x[i]` with `isa`: the int8 layers' dot products.
///
/// # Panics
///
/// When `weight.len() != sums.len() · x.len()`, or the CPU does not have `isa`.
pub(crate) fn dot_rows_i8(isa: IsaI8, weight: &[i8], x: &[i8], sums: &mut [i32]) {
    assert_eq!(
        weight.len(),
        sums.len() * x.len(),
        "a weight of {} values does not have {} rows of {}",
        weight.len(),
        sums.len(),
        x.len()
    );
    match isa {
        IsaI8::Avx512Vnni => {
            #[cfg(feature = "std")]
            assert!(
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512vnni"),
                "the CPU lacks AVX-512BW, AVX-512VL or AVX-512 VNNI"
            );
            // SAFETY: lengths checked above; the instruction sets are present (detected, or
            // checked above with std; without std, the build targets them).
            unsafe { dot_rows_i8_vnni(weight, x, sums) }
        }
        IsaI8::Avx512Bw => {
            #[cfg(feature = "std")]
            assert!(
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl"),
                "the CPU lacks AVX-512BW or AVX-512VL"
            );
            // SAFETY: lengths checked above; the instruction set is present (detected, or
            // checked above with std; without std, the build targets it).
            unsafe { dot_rows_i8_avx512(weight, x, sums) }
        }
        IsaI8::Avx2 => {
            #[cfg(feature = "std")]
            assert!(std::is_x86_feature_detected!("avx2"), "the CPU lacks AVX2");
            // SAFETY: as above, for AVX2.
            unsafe { dot_rows_i8_avx2(weight, x, sums) }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::vec::Vec;

    const ID: Epilogue = Epilogue::Identity;

    /// The sizes `(channels, filters, kernel, padding, height, width)` of the tests' tables.
    pub(super) fn conv_of(
        (channels, filters, kernel, padding, height, width): (
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
        ),
    ) -> Conv {
        Conv {
            channels,
            filters,
            kernel,
            padding,
            height,
            width,
        }
    }

    /// `|x|` of the padded image `x` (`shape`'s, unpadded in memory) at `(c, row, column)`, 0
    /// outside the image: what the Winograd kernels' error bounds sum over a tile.
    pub(super) fn padded_magnitude(
        shape: &Conv,
        x: &[f64],
        c: usize,
        row: usize,
        column: usize,
    ) -> f64 {
        let (p, height, width) = (shape.padding, shape.height, shape.width);
        match (row.checked_sub(p), column.checked_sub(p)) {
            (Some(y), Some(x0)) if y < height && x0 < width => {
                x[(c * height + y) * width + x0].abs()
            }
            _ => 0.0,
        }
    }

    /// `values` as a kernel's output, which the kernels take uninitialized.
    pub(super) fn as_output<E>(values: &mut [E]) -> &mut [MaybeUninit<E>] {
        // SAFETY: the kernels write only initialized values (their outputs).
        unsafe { super::super::as_uninit_mut(values) }
    }

    /// Deterministic values in [-1, 1) that are not round numbers.
    pub(super) fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    /// The textbook definition, in f64, independent of both kernel families.
    fn expected(layout: Layout, m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
        let a_at = |i: usize, p: usize| match layout {
            Layout::TransposeLhs => a[p * m + i],
            _ => a[i * k + p],
        };
        let b_at = |p: usize, j: usize| match layout {
            Layout::TransposeRhs => b[j * k + p],
            _ => b[p * n + j],
        };
        let mut c = std::vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a_at(i, p) * b_at(p, j)).sum();
            }
        }
        c
    }

    /// Shapes that hit full tiles, every edge case of both tile kinds, `k` across block and
    /// vector boundaries, and empty dimensions.
    const SHAPES: &[(usize, usize, usize)] = &[
        (1, 1, 1),
        (3, 5, 7),
        (8, 32, 16),
        (9, 33, 17),
        (17, 13, 129),
        (6, 16, 300),
        (64, 128, 784),
        (13, 70, 5),
        (4, 4, 0),
        (0, 5, 3),
        (5, 0, 3),
        (1, 10, 64),
        // Packed A·Bᵀ (32 rows or more) with edge columns and k across a block boundary.
        (37, 45, 300),
        (1, 130, 784),
        // Matrix-vector products whose width leaves every remainder after tiles of 8 and 4.
        (1, 5, 9),
        (1, 6, 17),
        (1, 7, 3),
        (1, 13, 300),
        // An empty inner dimension with outputs wider and taller than a tile.
        (40, 100, 0),
    ];

    fn check<E: Copy + Into<f64>>(
        run: impl Fn(Layout, usize, usize, usize, &[E], &[E], &mut [E], bool),
        from: impl Fn(f64) -> E,
        tolerance: f64,
    ) {
        for layout in [Layout::Plain, Layout::TransposeLhs, Layout::TransposeRhs] {
            for &(m, n, k) in SHAPES {
                let a64 = values(m * k, 1 + m as u64);
                let b64 = values(k * n, 2 + n as u64);
                let start64 = values(m * n, 3 + k as u64);
                let (a, b): (Vec<E>, Vec<E>) = (
                    a64.iter().map(|&x| from(x)).collect(),
                    b64.iter().map(|&x| from(x)).collect(),
                );
                let want = expected(layout, m, n, k, &a64, &b64);
                for accumulate in [false, true] {
                    // Stale contents must be overwritten (or added to, when accumulating).
                    let mut c: Vec<E> = start64.iter().map(|&x| from(x)).collect();
                    run(layout, m, n, k, &a, &b, &mut c, accumulate);
                    for (idx, (&got, &w)) in c.iter().zip(&want).enumerate() {
                        let w = if accumulate { w + start64[idx] } else { w };
                        let got: f64 = got.into();
                        let bound = tolerance * (1.0 + k as f64).sqrt() * (1.0 + w.abs());
                        assert!(
                            (got - w).abs() <= bound,
                            "{layout:?} {m}x{n}x{k} accumulate={accumulate}: element {idx} is \
                             {got}, expected {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_available_instruction_set_matches_the_definition_in_f32() {
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            check::<f32>(
                |l, m, n, k, a, b, c, acc| gemm(isa, l, m, n, k, a, b, c, acc),
                |x| x as f32,
                1e-6,
            );
        }
    }

    #[test]
    fn every_available_instruction_set_matches_the_definition_in_f64() {
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            check::<f64>(
                |l, m, n, k, a, b, c, acc| gemm(isa, l, m, n, k, a, b, c, acc),
                |x| x,
                1e-13,
            );
        }
    }

    /// `C (+)= A·Bᵀ` with `B` at `offset` elements past a 64-byte boundary, `C` starting as
    /// `start`.
    fn product_with_rhs_at<E: Element>(
        isa: Isa,
        (m, n, k): (usize, usize, usize),
        (a, b): (&[E], &[E]),
        (start, accumulate): (&[E], bool),
        offset: usize,
    ) -> Vec<E> {
        let mut storage = std::vec![E::default(); b.len() + 64];
        let at = storage.as_ptr().align_offset(64) + offset;
        storage[at..at + b.len()].copy_from_slice(b);
        let mut c = start.to_vec();
        let b = &storage[at..at + b.len()];
        gemm(isa, Layout::TransposeRhs, m, n, k, a, b, &mut c, accumulate);
        c
    }

    /// Values whose sums depend on their order (magnitudes from 2^-24 to 2^24, both signs),
    /// `B`'s first row with NaNs of different payloads (which one a sum keeps depends on the
    /// order too), its second row products that underflow to `-0.0` (a lane that adds a `+0.0`
    /// turns the sum into `+0.0`).
    fn order_sensitive<E: Copy>(
        (m, n, k): (usize, usize, usize),
        seed: u64,
        from: impl Fn(f64) -> E,
        nan: impl Fn(u32) -> E,
        tiny: f64,
    ) -> (Vec<E>, Vec<E>) {
        let mut next = xorshift(seed);
        let mut value = || {
            let r = next();
            let magnitude =
                2.0_f64.powi((r % 49) as i32 - 24) * (1.0 + (r >> 8) as f64 / 2.0_f64.powi(56));
            if r & 1 << 7 == 0 {
                magnitude
            } else {
                -magnitude
            }
        };
        let mut a: Vec<E> = (0..m * k).map(|_| from(value())).collect();
        let mut b: Vec<E> = (0..n * k).map(|_| from(value())).collect();
        for (p, v) in b[..k].iter_mut().enumerate() {
            if p % 3 == 1 {
                *v = nan(p as u32 + 1);
            }
        }
        if n > 1 {
            for p in 0..k {
                b[k + p] = from(-tiny);
            }
            for v in &mut a[..k] {
                *v = from(tiny);
            }
        }
        (a, b)
    }

    /// `got` (`C` after `C (+)= A·Bᵀ`, one row of `A` per row of `C`) against the definition
    /// in `f64`: a NaN where a NaN is due, else within `tolerance` of the sum of the products'
    /// magnitudes (the values' sums cancel), plus `smallest`, the element type's smallest
    /// normal value (for products that underflow in it).
    fn assert_near_definition(
        (m, n, k): (usize, usize, usize),
        (a, b, start): (&[f64], &[f64], &[f64]),
        accumulate: bool,
        got: &[f64],
        (tolerance, smallest): (f64, f64),
        what: &str,
    ) {
        let sums = expected(Layout::TransposeRhs, m, n, k, a, b);
        for i in 0..m {
            for j in 0..n {
                let base = if accumulate { start[i * n + j] } else { 0.0 };
                let want = base + sums[i * n + j];
                let magnitudes = (0..k).map(|p| (a[i * k + p] * b[j * k + p]).abs());
                let scale = magnitudes.fold(base.abs(), |s, v| s + v);
                let got = got[i * n + j];
                assert!(
                    if want.is_nan() {
                        got.is_nan()
                    } else {
                        (got - want).abs() <= tolerance * scale + smallest
                    },
                    "{what}: C[{i}][{j}] is {got}, expected {want}"
                );
            }
        }
    }

    /// The lanes of `E` for `isa`.
    fn lanes_of<E>(isa: Isa) -> usize {
        let bytes = if isa == Isa::Avx512 { 64 } else { 32 };
        bytes / core::mem::size_of::<E>()
    }

    /// One element type's part of the test below: `C (+)= A·Bᵀ` for `dims` (values from
    /// [`order_sensitive`]) near the definition, its underflowing row `-0.0`, and the same bits
    /// with `B` at every offset from a 64-byte boundary.
    #[allow(clippy::type_complexity)]
    fn check_matvec_at_every_offset<E: Element>(
        isa: Isa,
        (dims, seed): ((usize, usize, usize), u64),
        (from, nan, tiny): (&dyn Fn(f64) -> E, &dyn Fn(u32) -> E, f64),
        (widen, bits): (&dyn Fn(E) -> f64, &dyn Fn(E) -> u64),
        tolerance: (f64, f64),
    ) {
        let (m, n, k) = dims;
        let (a, b) = order_sensitive(dims, seed, from, nan, tiny);
        let start: Vec<E> = (0..m * n).map(|i| from(i as f64 - 3.5)).collect();
        let wide = |v: &[E]| v.iter().map(|&x| widen(x)).collect::<Vec<_>>();
        let lanes = lanes_of::<E>(isa);
        for accumulate in [false, true] {
            let what = std::format!("{isa:?} {dims:?}, accumulate {accumulate}");
            let run = |offset| {
                let c = product_with_rhs_at(isa, dims, (&a, &b), (&start, accumulate), offset);
                c.into_iter().map(bits).collect::<Vec<u64>>()
            };
            let aligned = run(0);
            let mut c = start.clone();
            gemm(
                isa,
                Layout::TransposeRhs,
                m,
                n,
                k,
                &a,
                &b,
                &mut c,
                accumulate,
            );
            let c_bits: Vec<u64> = c.iter().map(|&v| bits(v)).collect();
            assert_eq!(c_bits, aligned, "{what}, B where the allocator put it");
            let operands = (&wide(&a)[..], &wide(&b)[..], &wide(&start)[..]);
            assert_near_definition(dims, operands, accumulate, &wide(&c), tolerance, &what);
            if n > 1 && !accumulate {
                // The underflowing row's sum is -0.0.
                assert_eq!(aligned[1], bits(from(-0.0)), "{what}");
            }
            for offset in 1..lanes {
                assert_eq!(run(offset), aligned, "{what}, B {offset} past a line");
            }
        }
    }

    #[test]
    fn matrix_vector_products_do_not_depend_on_where_the_matrix_lies() {
        // Rows a whole number of vectors long take the aligned loop from any starting lane; one
        // row of A (and, with AVX2's tiles of 2 rows, the third of 3) is a matrix-vector
        // product. Every tile width (8, 4, and 1-3 rows of B), C written and added to.
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            for m in [1, 3] {
                for n in [1, 2, 3, 4, 7, 8, 13, 20] {
                    for vectors in [1, 2, 25] {
                        let dims = (m, n, vectors * lanes_of::<f32>(isa));
                        check_matvec_at_every_offset::<f32>(
                            isa,
                            (dims, 7 + n as u64),
                            (&|v| v as f32, &|p| f32::from_bits(0x7fc0_0000 | p), 1e-30),
                            (&f64::from, &|v| u64::from(v.to_bits())),
                            (1e-6, f64::from(f32::MIN_POSITIVE)),
                        );
                        let dims = (m, n, vectors * lanes_of::<f64>(isa));
                        check_matvec_at_every_offset::<f64>(
                            isa,
                            (dims, 9 + n as u64),
                            (
                                &|v| v,
                                &|p| f64::from_bits(0x7ff8_0000_0000_0000 | u64::from(p)),
                                1e-200,
                            ),
                            (&|v| v, &f64::to_bits),
                            (1e-14, f64::MIN_POSITIVE),
                        );
                    }
                }
            }
        }
    }

    #[cfg(feature = "threads")]
    #[test]
    fn splitting_across_threads_gives_the_same_bits() {
        let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
        // Above the split threshold (2^24 multiply-adds). With 2 threads the 64 rows split into
        // 48 + 16: the 16-row chunk alone is below the packing threshold, so this catches a path
        // chosen per chunk instead of per product.
        let (m, n, k) = (64, 512, 600);
        let a: Vec<f32> = values(m * k, 7).iter().map(|&x| x as f32).collect();
        let b: Vec<f32> = values(k * n, 8).iter().map(|&x| x as f32).collect();
        for layout in [Layout::Plain, Layout::TransposeLhs, Layout::TransposeRhs] {
            let run_with = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("a thread pool");
                let mut c = std::vec![0.0_f32; m * n];
                pool.install(|| gemm(isa, layout, m, n, k, &a, &b, &mut c, false));
                c
            };
            let one = run_with(1);
            for threads in [2, 3] {
                let many = run_with(threads);
                assert!(
                    one.iter()
                        .zip(&many)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{layout:?} with {threads} threads differs from one thread"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "do not fit")]
    fn wrong_lengths_are_refused_before_any_access() {
        let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
        let mut c = [0.0_f32; 4];
        gemm::<f32>(
            isa,
            Layout::Plain,
            2,
            2,
            2,
            &[0.0; 3],
            &[0.0; 4],
            &mut c,
            false,
        );
    }

    /// Convolutions for the direct kernel: every tile height (1 to 8 filters and more), one and
    /// two vectors per tile, rows narrower and wider than a vector (with a partial last
    /// vector), padding on every side (masked lanes at both ends, rows wholly in the padding),
    /// a kernel as large as the padded image, and several channels.
    const CONVS: &[Conv] = &[
        crate::kernels::LENET_FIRST,
        Conv {
            channels: 6,
            filters: 16,
            kernel: 5,
            padding: 0,
            height: 14,
            width: 14,
        },
        Conv {
            channels: 3,
            filters: 1,
            kernel: 3,
            padding: 1,
            height: 5,
            width: 5,
        },
        Conv {
            channels: 2,
            filters: 9,
            kernel: 3,
            padding: 1,
            height: 7,
            width: 40,
        },
        Conv {
            channels: 1,
            filters: 3,
            kernel: 1,
            padding: 0,
            height: 1,
            width: 17,
        },
        Conv {
            channels: 4,
            filters: 13,
            kernel: 2,
            padding: 3,
            height: 3,
            width: 33,
        },
        Conv {
            channels: 2,
            filters: 2,
            kernel: 9,
            padding: 3,
            height: 3,
            width: 4,
        },
        Conv {
            channels: 0,
            filters: 2,
            kernel: 1,
            padding: 0,
            height: 2,
            width: 2,
        },
    ];

    fn check_conv<E: Copy + Into<f64>>(
        run: impl Fn(&Conv, &[E], &[E], &[E], &mut [E]),
        from: impl Fn(f64) -> E,
        tolerance: f64,
    ) {
        for (i, shape) in CONVS.iter().enumerate() {
            let steps = shape.channels * shape.kernel * shape.kernel;
            let x64 = values(shape.channels * shape.height * shape.width, 10 + i as u64);
            let w64 = values(shape.filters * steps, 20 + i as u64);
            let b64 = values(shape.filters, 30 + i as u64);
            let out_len = shape.filters * shape.out_height() * shape.out_width();
            let mut want = std::vec![0.0; out_len];
            super::super::reference::conv2d_stride1(shape, &x64, &w64, &b64, &mut want);
            let cast = |v: &[f64]| v.iter().map(|&x| from(x)).collect::<Vec<E>>();
            // Stale contents must be overwritten.
            let mut got = cast(&values(out_len, 40));
            run(shape, &cast(&x64), &cast(&w64), &cast(&b64), &mut got);
            for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
                let g: f64 = g.into();
                let bound = tolerance * (1.0 + steps as f64).sqrt() * (1.0 + w.abs());
                assert!(
                    (g - w).abs() <= bound,
                    "{shape:?}: element {idx} is {g}, expected {w}"
                );
            }
        }
    }

    #[test]
    fn convolutions_match_the_definition_on_every_available_instruction_set() {
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            check_conv::<f32>(
                |s, x, w, b, o| conv2d_stride1(isa, s, x, w, b, as_output(o), Epilogue::Identity),
                |x| x as f32,
                1e-6,
            );
        }
    }

    #[test]
    fn convolution_weight_gradients_match_the_definition_on_every_available_instruction_set() {
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            // The kernel takes images already padded: the shapes without padding, and the
            // padded ones as their callers pass them.
            let unpadded = CONVS.iter().map(|s| Conv {
                padding: 0,
                height: s.height + 2 * s.padding,
                width: s.width + 2 * s.padding,
                ..*s
            });
            for (i, shape) in unpadded.enumerate() {
                // The kernel sums over the batch: none, one image, several.
                for batch in [0, 1, 3] {
                    for accumulate in [false, true] {
                        let run = (batch, accumulate);
                        let seed = 50 + 10 * i as u64;
                        let f32s = (|v| v as f32, f32::NAN, 1e-6);
                        check_weight_gradient_positions::<f32>(isa, &shape, run, f32s, seed);
                    }
                }
            }
        }
    }

    /// The weight gradient with the positions in the lanes (`isa`, element type `E`) of a batch
    /// of `batch` images of `shape` (no padding), from gradients `start` on with `accumulate`,
    /// against the reference, within `tolerance · √(1 + sums) · (1 + |w|)`; the scratch filled
    /// with `nan` first, as an earlier call may leave it. `seed` picks the values.
    fn check_weight_gradient_positions<E: ConvElement + Into<f64>>(
        isa: Isa,
        shape: &Conv,
        (batch, accumulate): (usize, bool),
        (from_f64, nan, tolerance): (impl Fn(f64) -> E, E, f64),
        seed: u64,
    ) {
        let steps = shape.channels * shape.kernel * shape.kernel;
        let (image, plane) = (shape.image_len(), shape.output_len());
        let x = values(batch * image, seed);
        let dz = values(batch * plane, seed + 1);
        let start = values(shape.filters * steps, seed + 2);
        let mut want = start.clone();
        for b in 0..batch {
            super::super::reference::conv2d_weight_gradient_stride1(
                shape,
                &x[b * image..(b + 1) * image],
                &dz[b * plane..(b + 1) * plane],
                &mut want,
                accumulate || b > 0,
            );
        }
        if batch == 0 && !accumulate {
            want.fill(0.0);
        }
        let cast = |v: &[f64]| v.iter().map(|&v| from_f64(v)).collect::<Vec<E>>();
        let scratch = weight_grad_images_per_pass::<E>(shape, batch) * shifted_image_len(shape);
        let mut scratch = std::vec![nan; scratch];
        let mut got = cast(&start);
        conv2d_weight_gradient_positions(
            isa,
            shape,
            batch,
            &cast(&x),
            &cast(&dz),
            &mut scratch,
            &mut got,
            accumulate,
        );
        let sums = (batch * shape.out_height() * shape.out_width()) as f64;
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let g: f64 = g.into();
            assert!(
                (g - w).abs() <= tolerance * (1.0 + sums).sqrt() * (1.0 + w.abs()),
                "{isa:?} {shape:?} batch {batch} accumulate={accumulate}: dW[{i}] is {g}, \
                 expected {w}"
            );
        }
    }
    /// The weight gradient with the positions in the lanes on small shapes of every width
    /// around the vector sizes (kernels of 1 to 5, outputs narrower than a vector, images
    /// shorter than one), in both element types, batches that take several passes of several
    /// images with a shorter last one: each against the definition, the scratch first filled
    /// with NaN (left by an earlier call), which no sum may meet.
    #[test]
    fn weight_gradients_over_passes_of_shifted_images_match_the_definition() {
        let (mut cases, mut shorter_last_passes) = (0_u64, 0);
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            // Padding too: the copies write it, from images without it (zero rows, and the
            // columns a load leaves out, on the left, the right, or both; wider than the
            // kernel too).
            // Kernels of 4 and 5 take the tiles along a kernel column, 3 filters each on
            // AVX-512: 11 filters end on a tile of 2, 1 filter is a tile of 1; the other
            // kernels take two blocks of `OUTER_ROWS` filters for 11.
            for (kernel, padding) in (1..=5).flat_map(|k| [(k, 0), (k, 1), (k, 3)]) {
                for height in [kernel, kernel + 1, kernel + 3] {
                    for width in [0, 1, 2, 3, 7, 8, 15, 16, 17].map(|w| kernel + w) {
                        for (channels, filters) in [(1, 1), (2, 3), (1, 11)] {
                            if padding > 0 && (channels, filters) != (2, 3) {
                                continue;
                            }
                            let shape =
                                conv_of((channels, filters, kernel, padding, height, width));
                            for batch in [0, 1, 3, 7] {
                                let per_pass = weight_grad_images_per_pass::<f32>(&shape, batch);
                                if per_pass > 1 && batch > per_pass && batch % per_pass != 0 {
                                    shorter_last_passes += 1;
                                }
                                for accumulate in [false, true] {
                                    cases += 1;
                                    let run = (batch, accumulate);
                                    let f32s = (|v| v as f32, f32::NAN, 1e-6);
                                    check_weight_gradient_positions::<f32>(
                                        isa, &shape, run, f32s, cases,
                                    );
                                }
                            }
                        }
                    }
                }
            }
            // Three images a pass in f32: passes of 3 and 1, of 3 and 2.
            let shape = conv_of((2, 3, 3, 0, 18, 19));
            assert_eq!(weight_grad_images_per_pass::<f32>(&shape, 5), 3);
            for batch in [4, 5] {
                for accumulate in [false, true] {
                    check_weight_gradient_positions::<f32>(
                        isa,
                        &shape,
                        (batch, accumulate),
                        (|v| v as f32, f32::NAN, 1e-6),
                        7,
                    );
                }
            }
        }
        if cases > 0 {
            assert!(
                shorter_last_passes > 0,
                "no batch ended with a shorter pass"
            );
        }
    }

    /// Shapes with many filters and narrow images, where the kernels put the filters in the
    /// lanes: whole vectors of filters, a partial one, several, in f32's and f64's lanes.
    const MANY_FILTERS: &[Conv] = &[
        Conv {
            channels: 3,
            filters: 16,
            kernel: 3,
            padding: 0,
            height: 6,
            width: 7,
        },
        Conv {
            channels: 2,
            filters: 21,
            kernel: 2,
            padding: 0,
            height: 5,
            width: 17,
        },
        Conv {
            channels: 1,
            filters: 40,
            kernel: 1,
            padding: 0,
            height: 3,
            width: 29,
        },
        Conv {
            channels: 5,
            filters: 3,
            kernel: 4,
            padding: 0,
            height: 4,
            width: 4,
        },
        // Kernels 5 and 3 wide with whole and partial tiles of positions and of filters (LeNet-5's
        // second convolution is in `CONVS`).
        Conv {
            channels: 2,
            filters: 20,
            kernel: 5,
            padding: 0,
            height: 7,
            width: 31,
        },
        Conv {
            channels: 2,
            filters: 19,
            kernel: 3,
            padding: 1,
            height: 5,
            width: 27,
        },
    ];

    /// Every shape as the filters-in-lanes kernels take it: padded beforehand.
    fn filter_shapes() -> impl Iterator<Item = Conv> {
        CONVS.iter().chain(MANY_FILTERS).map(|s| s.padded())
    }

    fn transposed(w: &[f64], rows: usize) -> Vec<f64> {
        let columns = w.len() / rows.max(1);
        let mut t = std::vec![0.0; w.len()];
        for r in 0..rows {
            for c in 0..columns {
                t[c * rows + r] = w[r * columns + c];
            }
        }
        t
    }

    #[test]
    fn convolutions_of_padded_images_match_the_definition() {
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            for (i, shape) in filter_shapes().enumerate() {
                let steps = shape.channels * shape.kernel * shape.kernel;
                let x = values(shape.image_len(), 80 + i as u64);
                let w = values(shape.filters * steps, 90 + i as u64);
                let bias = values(shape.filters, 100 + i as u64);
                let mut want = std::vec![0.0; shape.output_len()];
                super::super::reference::conv2d_stride1(&shape, &x, &w, &bias, &mut want);
                let wt = transposed(&w, shape.filters);
                let bound = |w: f64, tolerance: f64| {
                    tolerance * (1.0 + steps as f64).sqrt() * (1.0 + w.abs())
                };
                let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                // Both kernels for padded images: filters in the lanes (transposed weights) and
                // flat positions in the lanes.
                for (kernel, weights) in [("filters", &wt), ("flat", &w)] {
                    let (x, weights, bias) = (f32s(&x), f32s(weights), f32s(&bias));
                    let mut got = f32s(&values(shape.output_len(), 110));
                    match kernel {
                        "filters" => conv2d_stride1_filters(
                            isa,
                            &shape,
                            &x,
                            &weights,
                            &bias,
                            as_output(&mut got),
                            ID,
                        ),
                        _ => conv2d_stride1_flat(
                            isa,
                            &shape,
                            &x,
                            &weights,
                            &bias,
                            as_output(&mut got),
                            ID,
                        ),
                    }
                    for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (f64::from(g) - w).abs() <= bound(w, 1e-6),
                            "{kernel} {isa:?} {shape:?}: f32 element {idx} is {g}, expected {w}"
                        );
                    }
                }
            }
        }
    }

    /// Every convolution kernel applies ReLU as it stores an output exactly as the scalar rule
    /// applied to the output it stores without it: bit for bit, a NaN kept and a `-0.0` made
    /// `+0.0`. Filter 0's weights and bias are `-0.0` (outputs of `-0.0` where no product is
    /// positive zero) and filter 1's bias is a NaN.
    #[test]
    fn every_convolution_kernel_applies_relu_as_it_stores_bit_for_bit() {
        /// How many outputs without the epilogue were negative, `-0.0` and NaN.
        #[derive(Default)]
        struct Seen {
            negative: usize,
            negative_zero: usize,
            nan: usize,
        }
        fn operands(shape: &Conv, seed: u64) -> [Vec<f64>; 3] {
            let steps = shape.channels * shape.kernel * shape.kernel;
            let x = values(shape.image_len() * 2, seed);
            let mut w = values(shape.filters * steps, seed + 1);
            let mut bias = values(shape.filters, seed + 2);
            let first = steps.min(w.len());
            w[..first].fill(-0.0);
            if let Some(b) = bias.first_mut() {
                *b = -0.0;
            }
            if let Some(b) = bias.get_mut(1) {
                *b = f64::NAN;
            }
            [x, w, bias]
        }
        /// Runs `kernel` with each epilogue on the operands cast to `E` and compares.
        fn compare<E: Element + crate::Scalar + Into<f64>>(
            what: &str,
            [x, w, bias]: &[Vec<f64>; 3],
            out_len: usize,
            from: impl Fn(f64) -> E,
            kernel: impl Fn(&[E], &[E], &[E], &mut [E], Epilogue),
            seen: &mut Seen,
        ) {
            let cast = |v: &[f64]| v.iter().map(|&v| from(v)).collect::<Vec<E>>();
            let (x, w, bias) = (cast(x), cast(w), cast(bias));
            let mut plain = cast(&values(out_len, 7)); // stale contents
            kernel(&x, &w, &bias, &mut plain, Epilogue::Identity);
            let mut fused = cast(&values(out_len, 8));
            kernel(&x, &w, &bias, &mut fused, Epilogue::Relu);
            for (i, (&p, &f)) in plain.iter().zip(&fused).enumerate() {
                let (p, f, want): (f64, f64, f64) =
                    (p.into(), f.into(), Epilogue::Relu.apply(p).into());
                assert_eq!(
                    f.to_bits(),
                    want.to_bits(),
                    "{what}: output {i} is {f:?} with ReLU, {p:?} without"
                );
                seen.negative += usize::from(p < 0.0);
                seen.negative_zero += usize::from(p.to_bits() == (-0.0_f64).to_bits());
                seen.nan += usize::from(p.is_nan());
            }
        }
        fn every_kernel<E: ConvElement + crate::Scalar + Into<f64>>(
            isa: Isa,
            from: impl Fn(f64) -> E + Copy,
            seen: &mut Seen,
        ) {
            for (i, shape) in CONVS.iter().enumerate() {
                let ops = operands(shape, 300 + i as u64);
                let (image, len) = (shape.image_len(), shape.output_len());
                let what = std::format!("{isa:?} positions in the lanes {shape:?}");
                compare(
                    &what,
                    &ops,
                    len,
                    from,
                    |x, w, b, out, e| {
                        conv2d_stride1(isa, shape, &x[..image], w, b, as_output(out), e)
                    },
                    seen,
                );
            }
            for (i, shape) in filter_shapes().enumerate() {
                let ops = operands(&shape, 400 + i as u64);
                let (image, len) = (shape.image_len(), shape.output_len());
                let what = std::format!("{isa:?} flat {shape:?}");
                compare(
                    &what,
                    &ops,
                    len,
                    from,
                    |x, w, b, out, e| {
                        conv2d_stride1_flat(isa, &shape, &x[..image], w, b, as_output(out), e)
                    },
                    seen,
                );
                let [x, w, b] = &ops;
                let transposed_ops = [x.clone(), transposed(w, shape.filters), b.clone()];
                let what = std::format!("{isa:?} filters in the lanes {shape:?}");
                compare(
                    &what,
                    &transposed_ops,
                    len,
                    from,
                    |x, wt, b, out, e| {
                        conv2d_stride1_filters(isa, &shape, &x[..image], wt, b, as_output(out), e)
                    },
                    seen,
                );
            }
            let winograd = [
                (6, 16, 5, 0, 14, 14),
                (3, 20, 3, 1, 9, 11),
                (2, 5, 4, 2, 7, 6),
            ];
            for (i, sizes) in winograd.into_iter().enumerate() {
                let shape = conv_of(sizes);
                assert!(winograd_forward_applies(&shape), "{shape:?}");
                let ops = operands(&shape, 500 + i as u64);
                let what = std::format!("{isa:?} Winograd {shape:?}");
                let scratch_len = winograd_forward_scratch(&shape, lanes::<E>(isa));
                compare(
                    &what,
                    &ops,
                    2 * shape.output_len(),
                    from,
                    |x, w, b, out, e| {
                        let mut scratch = std::vec![MaybeUninit::uninit(); scratch_len];
                        conv2d_stride1_winograd(
                            isa,
                            &shape,
                            2,
                            x,
                            w,
                            b,
                            as_output(out),
                            &mut scratch,
                            e,
                        )
                    },
                    seen,
                );
            }
        }
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            let mut seen = Seen::default();
            every_kernel::<f32>(isa, |v| v as f32, &mut seen);
            // The cases the rule distinguishes all occurred.
            assert!(seen.negative > 100 && seen.negative_zero > 10 && seen.nan > 10);
        }
    }

    /// Shapes for the Winograd weight gradient: every kernel size it takes, outputs as wide as
    /// a tile, narrower, and not a multiple of one (the last tile's gradients past the output
    /// are zeros), filters fewer than a vector, a whole one, and more than one.
    fn winograd_gradient_shapes() -> impl Iterator<Item = Conv> {
        let shape = |(channels, filters, kernel, height, width)| {
            conv_of((channels, filters, kernel, 0, height, width))
        };
        filter_shapes()
            .filter(super::super::winograd::applies)
            .chain(
                [
                    (6, 16, 5, 14, 14),
                    (2, 3, 5, 5, 5),
                    (1, 17, 5, 7, 10),
                    (3, 8, 4, 6, 9),
                    (2, 33, 4, 4, 4),
                    (1, 5, 3, 3, 3),
                    (4, 16, 3, 9, 13),
                    (3, 20, 3, 5, 8),
                ]
                .map(shape),
            )
    }

    /// A weight-gradient kernel against the definition (`reference`), on each of `isas` that
    /// is here, over `shapes` and `batches`, adding to the gradients or not, within
    /// `tolerance · √(terms summed) · (1 + |dw|)`. `f32s` runs the kernel: `(isa, shape, batch,
    /// x, dz, dw, accumulate)`, `dz` as the layer holds it.
    #[allow(clippy::type_complexity)]
    fn check_weight_gradient_kernel(
        isas: &[Isa],
        shapes: &[Conv],
        batches: &[usize],
        seed: u64,
        f32s: &dyn Fn(Isa, &Conv, usize, &[f32], &[f32], &mut [f32], bool),
        tolerance: f64,
    ) {
        for &isa in isas {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            for (i, &shape) in shapes.iter().enumerate() {
                let steps = shape.channels * shape.kernel * shape.kernel;
                let positions = shape.out_height() * shape.out_width();
                for &batch in batches {
                    let seed = seed + 10 * i as u64;
                    let x = values(batch * shape.image_len(), seed);
                    let dz = values(batch * shape.output_len(), seed + 1);
                    let start = values(shape.filters * steps, seed + 2);
                    for accumulate in [false, true] {
                        let mut want = start.clone();
                        if !accumulate {
                            want.fill(0.0);
                        }
                        for (x, dz) in x
                            .chunks(shape.image_len().max(1))
                            .zip(dz.chunks(shape.output_len().max(1)))
                        {
                            super::super::reference::conv2d_weight_gradient_stride1(
                                &shape, x, dz, &mut want, true,
                            );
                        }
                        let bound = |w: f64, tolerance: f64| {
                            tolerance * (1.0 + (batch * positions) as f64).sqrt() * (1.0 + w.abs())
                        };
                        let to_f32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                        let mut got = to_f32(&start);
                        f32s(
                            isa,
                            &shape,
                            batch,
                            &to_f32(&x),
                            &to_f32(&dz),
                            &mut got,
                            accumulate,
                        );
                        for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
                            assert!(
                                (f64::from(g) - w).abs() <= bound(w, tolerance),
                                "{isa:?} {shape:?} batch {batch} accumulate={accumulate}: f32 dW[{idx}] is {g}, expected {w}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn winograd_weight_gradients_match_the_definition() {
        /// The kernel, its scratch first filled with NaN: it must write what it reads.
        fn run<E: ConvElement + num_traits::Float>(
            isa: Isa,
            shape: &Conv,
            batch: usize,
            x: &[E],
            dz: &[E],
            dw: &mut [E],
            accumulate: bool,
        ) {
            let len = weight_gradient_winograd_scratch(shape, batch, lanes::<E>(isa));
            let mut scratch = std::vec![E::nan(); len];
            conv2d_weight_gradient_winograd(isa, shape, batch, x, dz, &mut scratch, dw, accumulate);
        }
        // 5 and 9 images: groups of WINOGRAD_GRADIENT_IMAGES with a shorter last one. The sums
        // at the points are larger than the gradients they give (the transforms' coefficients
        // reach 5 in `Bᵀ`, 16 in `Aᵀ`): a few bits more rounding than the direct sums'.
        // Measured in f32: at most 2.4e-6 for 5 x 5 kernels, 4.1e-7 for 4 x 4, 2.1e-6 for 3 x
        // 3 (the direct kernel's test allows 1e-6).
        check_weight_gradient_kernel(
            &[Isa::Avx512, Isa::Avx2Fma],
            &winograd_gradient_shapes().collect::<Vec<_>>(),
            &[0, 1, 5, 9],
            150,
            &run::<f32>,
            5e-6,
        );
    }

    /// The tables of the Winograd weight gradient, in f64 on integers: `Aᵀ` of the evaluated
    /// gradients times the input's transform, summed, is each tile's correlation exactly.
    #[test]
    fn the_winograd_gradient_tables_compute_a_tiles_correlation() {
        for kernel in 3..=5 {
            let m = super::super::winograd::outputs_per_tile(kernel);
            let [evaluate, finish] = super::super::winograd::gradient_transforms(kernel);
            let bt = super::super::winograd::output_and_input_transforms(m)[1];
            for seed in 0..20_u64 {
                let g: Vec<f64> = values(m, 180 + seed)
                    .iter()
                    .map(|v| (v * 8.0).round())
                    .collect();
                let d: Vec<f64> = values(6, 190 + seed)
                    .iter()
                    .map(|v| (v * 8.0).round())
                    .collect();
                let points: Vec<f64> = (0..6)
                    .map(|nu| {
                        let e: f64 = (0..m).map(|s| evaluate[nu][s] * g[s]).sum();
                        let v: f64 = (0..6).map(|j| bt[nu][j] * d[j]).sum();
                        e * v
                    })
                    .collect();
                for kx in 0..kernel {
                    let got: f64 = (0..6).map(|nu| finish[kx][nu] * points[nu]).sum();
                    let want: f64 = (0..m).map(|s| g[s] * d[s + kx]).sum();
                    assert!(
                        (got - want).abs() <= 1e-9 * (1.0 + want.abs()),
                        "kernel {kernel}, output {kx}: {got} against {want}"
                    );
                }
            }
        }
    }

    /// The weight gradient with a row's tiles in the lanes (`row_tiles`), in f32 on AVX-512,
    /// against the definition in f64: LeNet-5's first layer and shapes around the kernel's
    /// edges (one output; odd output widths, whose last tile has one output; the widest rows, of
    /// 32 columns padded or not; padding wider than the kernel's reach; 1 to 8 filters, so
    /// that tiles of 3 end with 1 and 2), over batches of 0 to 3, adding to the gradients or
    /// not. The scratch starts as NaN: the kernel must write what it reads.
    #[test]
    fn weight_gradients_with_a_rows_tiles_in_the_lanes_match_the_definition() {
        /// The kernel, its scratch first filled with NaN: it must write what it reads.
        fn run(
            isa: Isa,
            shape: &Conv,
            batch: usize,
            x: &[f32],
            dz: &[f32],
            dw: &mut [f32],
            accumulate: bool,
        ) {
            assert!(row_tiles::applies(shape), "{shape:?}");
            let mut scratch = std::vec![f32::NAN; row_tiles::weight_gradient_scratch(shape)];
            row_tiles::conv2d_weight_gradient(
                isa,
                shape,
                batch,
                x,
                row_tiles::Gradients::PreActivation(dz),
                &mut scratch,
                dw,
                accumulate,
            );
        }
        let shapes = [
            (1, 6, 5, 2, 28, 28),
            (1, 1, 5, 0, 5, 5),
            (2, 3, 5, 1, 7, 9),
            (1, 7, 5, 0, 9, 32),
            (3, 4, 5, 2, 6, 28),
            (1, 5, 5, 3, 4, 5),
            (2, 2, 5, 0, 5, 6),
            (1, 4, 5, 1, 12, 13),
            (1, 8, 5, 2, 3, 1),
            (2, 1, 5, 4, 1, 24),
        ]
        .map(conv_of);
        // As the Winograd kernel with the filters in the lanes: its sums at the points round
        // a few bits more than the direct sums.
        check_weight_gradient_kernel(&[Isa::Avx512], &shapes, &[0, 1, 3], 400, &run, 5e-6);
    }

    /// The row tiles reading a ReLU layer's `dA` and `A` (`Gradients::ThroughRelu`), on the
    /// shapes of the test above (odd output widths: a last tile of one column, whose second
    /// must not reach the bias) over batches of 0 to 3, adding to the gradients or not: `dw` the
    /// same bits as with `dZ = dA · ReLU'(A)` formed first (as the layer's loop does), `db` the
    /// sums of that `dZ` in f64 within rounding. A quarter of `A` is exactly 0, where ReLU' is 0.
    #[test]
    fn the_row_tiles_form_dz_through_relu_as_the_layers_loop_does() {
        if !isa_available(Isa::Avx512) {
            std::eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        let to_f32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        for (i, shape) in [
            (1, 6, 5, 2, 28, 28),
            (2, 3, 5, 1, 7, 9),
            (1, 7, 5, 0, 9, 32),
            (1, 5, 5, 3, 4, 5),
            (1, 8, 5, 2, 3, 1),
            (2, 1, 5, 4, 1, 24),
        ]
        .map(conv_of)
        .iter()
        .enumerate()
        {
            for batch in [0, 1, 3] {
                let seed = 500 + 10 * i as u64;
                let x = to_f32(&values(batch * shape.image_len(), seed));
                let da = to_f32(&values(batch * shape.output_len(), seed + 1));
                let mut a = to_f32(&values(batch * shape.output_len(), seed + 2));
                a.iter_mut().step_by(4).for_each(|a| *a = 0.0);
                let dz: Vec<f32> = a
                    .iter()
                    .zip(&da)
                    .map(|(&a, &da)| da * if a > 0.0 { 1.0 } else { 0.0 })
                    .collect();
                let start = to_f32(&values(shape.filters * shape.channels * 25, seed + 3));
                let bias_start = to_f32(&values(shape.filters, seed + 4));
                let len = row_tiles::weight_gradient_scratch(shape);
                for accumulate in [false, true] {
                    let mut want = start.clone();
                    row_tiles::conv2d_weight_gradient(
                        Isa::Avx512,
                        shape,
                        batch,
                        &x,
                        row_tiles::Gradients::PreActivation(&dz),
                        &mut std::vec![f32::NAN; len],
                        &mut want,
                        accumulate,
                    );
                    let (mut got, mut d_bias) = (start.clone(), bias_start.clone());
                    let gradients = row_tiles::Gradients::ThroughRelu {
                        output: &a,
                        d_output: &da,
                        d_bias: &mut d_bias,
                    };
                    row_tiles::conv2d_weight_gradient(
                        Isa::Avx512,
                        shape,
                        batch,
                        &x,
                        gradients,
                        &mut std::vec![f32::NAN; len],
                        &mut got,
                        accumulate,
                    );
                    assert_eq!(
                        got, want,
                        "{shape:?} batch {batch} accumulate={accumulate}: dW"
                    );
                    for (f, (&got, &start)) in d_bias.iter().zip(&bias_start).enumerate() {
                        let dz = dz
                            .chunks(shape.output_len())
                            .flat_map(|image| {
                                image.chunks(shape.output_len() / shape.filters).nth(f)
                            })
                            .flatten();
                        let (sum, scale) = dz.fold((0.0, 0.0), |(s, m), &v| {
                            (s + f64::from(v), m + f64::from(v).abs())
                        });
                        let want = if accumulate {
                            f64::from(start) + sum
                        } else {
                            sum
                        };
                        assert!(
                            (f64::from(got) - want).abs() <= 1e-6 * (1.0 + scale + want.abs()),
                            "{shape:?} batch {batch} accumulate={accumulate}: db[{f}] is {got}, expected {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn weight_gradients_with_the_filters_in_the_lanes_match_the_definition() {
        /// The kernel, `dz` given position-major as it takes it.
        fn run<E: ConvElement>(
            isa: Isa,
            shape: &Conv,
            batch: usize,
            x: &[E],
            dz: &[E],
            dw: &mut [E],
            accumulate: bool,
        ) {
            let mut dzt = dz.to_vec();
            for (dz, dzt) in dz
                .chunks(shape.output_len().max(1))
                .zip(dzt.chunks_mut(shape.output_len().max(1)))
            {
                transpose(dz, shape.filters, dzt);
            }
            conv2d_weight_gradient_filters(isa, shape, batch, x, &dzt, dw, accumulate);
        }
        check_weight_gradient_kernel(
            &[Isa::Avx512, Isa::Avx2Fma],
            &filter_shapes().collect::<Vec<_>>(),
            &[0, 1, 3],
            120,
            &run::<f32>,
            1e-6,
        );
    }

    #[test]
    fn int8_dot_products_match_the_definition_on_every_available_instruction_set() {
        let available = [
            (
                IsaI8::Avx512Vnni,
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512vnni"),
            ),
            (
                IsaI8::Avx512Bw,
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl"),
            ),
            (IsaI8::Avx2, std::is_x86_feature_detected!("avx2")),
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8 as i8
        };
        for (isa, present) in available {
            if !present {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            for n in [
                0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 784,
            ] {
                for rows in [1, 3, 4, 5, 9, 10] {
                    // Random values, and the extremes (-128 x -128 is the largest product).
                    let mut weight: Vec<i8> = (0..rows * n).map(|_| next()).collect();
                    let mut x: Vec<i8> = (0..n).map(|_| next()).collect();
                    if rows == 9 {
                        weight.iter_mut().for_each(|w| *w = -127);
                        x.iter_mut().for_each(|v| *v = -128);
                    }
                    if rows == 10 {
                        weight.iter_mut().for_each(|w| *w = -128);
                        x.iter_mut().for_each(|v| *v = 127);
                    }
                    let want: Vec<i32> = (0..rows)
                        .map(|r| {
                            weight[r * n..(r + 1) * n]
                                .iter()
                                .zip(&x)
                                .map(|(&w, &v)| i32::from(w) * i32::from(v))
                                .sum()
                        })
                        .collect();
                    let mut got = std::vec![i32::MIN; rows]; // stale contents
                    dot_rows_i8(isa, &weight, &x, &mut got);
                    assert_eq!(got, want, "{isa:?}: {rows} rows of {n}");
                }
            }
        }
    }

    #[test]
    fn transposed_stores_in_registers_match_the_lane_by_lane_ones() {
        if detected_isa() != Some(Isa::Avx512) {
            std::eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        let values: Vec<f32> = (0..256).map(|i| i as f32 + 0.5).collect();
        for n in 0..=16 {
            for count in 0..=16 {
                let mut want = std::vec![-1.0_f32; 16 * 17];
                let mut got = want.clone();
                // SAFETY: AVX-512F is present (checked above); the loads read 16 of the 256
                // values, and the stores write lanes l < 16 of rows i < 16 at l·17 + i < 16·17.
                unsafe {
                    let rows: Vec<__m512> = (0..n)
                        .map(|i| _mm512_loadu_ps(values[16 * i..].as_ptr()))
                        .collect();
                    store_transposed_lanes::<Avx512F32>(&rows, want.as_mut_ptr(), 17, count);
                    Avx512F32::store_transposed(&rows, got.as_mut_ptr(), 17, count);
                }
                assert_eq!(got, want, "{n} rows, {count} lanes");
            }
        }
    }

    #[test]
    fn col2im_adds_each_patch_value_to_the_input_it_came_from() {
        if detected_isa() != Some(Isa::Avx512) {
            std::eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        for (channels, kernel, padding, height, width) in [
            (1, 5, 2, 28, 28),
            (6, 5, 0, 14, 14),
            (2, 3, 1, 5, 7),
            (3, 1, 0, 4, 19),
            (2, 4, 3, 3, 2),
        ] {
            let shape = Conv {
                channels,
                filters: 1,
                kernel,
                padding,
                height,
                width,
            };
            let (oh, ow) = (shape.out_height(), shape.out_width());
            let d_patches: Vec<f64> = (0..channels * kernel * kernel * oh * ow)
                .map(|i| ((i * 37 % 101) as f64 - 50.0) / 8.0)
                .collect();
            let start: Vec<f64> = (0..channels * height * width)
                .map(|i| i as f64 / 3.0)
                .collect();
            // The definition, one value at a time, in the generic code's order.
            fn definition<T: Copy + core::ops::AddAssign>(
                shape: &Conv,
                d_patches: &[T],
                dx: &mut [T],
            ) {
                let (oh, ow) = (shape.out_height(), shape.out_width());
                let (k, p) = (shape.kernel as isize, shape.padding as isize);
                let (h, w) = (shape.height as isize, shape.width as isize);
                for (row, patch) in d_patches.chunks_exact(oh * ow).enumerate() {
                    let (c, ky, kx) = (
                        row as isize / (k * k),
                        row as isize / k % k,
                        row as isize % k,
                    );
                    for y in 0..oh as isize {
                        for x in 0..ow as isize {
                            let (iy, ix) = (y + ky - p, x + kx - p);
                            if (0..h).contains(&iy) && (0..w).contains(&ix) {
                                dx[((c * h + iy) * w + ix) as usize] +=
                                    patch[(y * ow as isize + x) as usize];
                            }
                        }
                    }
                }
            }
            let mut want = start.clone();
            definition(&shape, &d_patches, &mut want);
            let mut got = start.clone();
            assert!(col2im_stride1_avx512(&shape, &d_patches, &mut got));
            assert_eq!(got, want, "{shape:?}");
            let d32: Vec<f32> = d_patches.iter().map(|&v| v as f32).collect();
            let mut got32: Vec<f32> = start.iter().map(|&v| v as f32).collect();
            assert!(col2im_stride1_avx512(&shape, &d32, &mut got32));
            let mut want32: Vec<f32> = start.iter().map(|&v| v as f32).collect();
            definition(&shape, &d32, &mut want32);
            assert_eq!(got32, want32, "{shape:?}, f32");
        }
        // A kernel wider than the per-column arrays is left to the generic loop.
        let wide = Conv {
            channels: 1,
            filters: 1,
            kernel: COL2IM_MAX_KERNEL + 1,
            padding: 0,
            height: COL2IM_MAX_KERNEL + 1,
            width: COL2IM_MAX_KERNEL + 1,
        };
        let (d_patches, mut dx) = (
            std::vec![1.0_f32; wide.kernel * wide.kernel],
            std::vec![0.0_f32; wide.kernel * wide.kernel],
        );
        assert!(!col2im_stride1_avx512(&wide, &d_patches, &mut dx));
        assert!(dx.iter().all(|&v| v == 0.0));
    }

    /// The SIMD blocks (16 rows of `f32`, four columns at a time) and the element-by-element
    /// rest against the definition, for row counts around the block's 16 and column counts
    /// around its 4, into a zeroed buffer and into one never initialized.
    #[test]
    fn transposes_match_the_definition_for_every_block_edge() {
        for rows in [1, 5, 15, 16, 17, 31, 32, 48] {
            for columns in [0, 1, 3, 4, 5, 8, 150, 151] {
                let from64 = values(rows * columns, (rows * 1000 + columns) as u64);
                let from: Vec<f32> = from64.iter().map(|&v| v as f32).collect();
                let want: Vec<f32> = transposed(&from64, rows)
                    .iter()
                    .map(|&v| v as f32)
                    .collect();
                let mut to = std::vec![0.0_f32; from.len()];
                transpose(&from, rows, &mut to);
                assert_eq!(to, want, "{rows} x {columns}");
                let mut uninit = std::vec![MaybeUninit::<f32>::uninit(); from.len()];
                assert_eq!(transpose_uninit(&from, rows, &mut uninit), &want[..]);
                let mut to64 = std::vec![0.0; from64.len()];
                transpose(&from64, rows, &mut to64);
                assert_eq!(to64, transposed(&from64, rows), "f64 {rows} x {columns}");
            }
        }
    }

    /// The forward pass's scratch: the weights transposed, the image's share all zeros, even
    /// where the stack held other values before (NaNs, left by the call before).
    #[test]
    fn the_filters_scratch_holds_the_transposed_weights_and_zeros() {
        let w: Vec<f32> = values(16 * 150, 3).iter().map(|&v| v as f32).collect();
        let want: Vec<f32> = transposed(&values(16 * 150, 3), 16)
            .iter()
            .map(|&v| v as f32)
            .collect();
        // Twice: the first call leaves NaNs in the buffer's place on the stack, which the second
        // must not see.
        for _ in 0..2 {
            with_transposed_filters::<f32, 4096, _>(&w, 16, 1024, |wt, zeros| {
                assert_eq!(wt, &want[..]);
                assert!(
                    zeros.iter().all(|&z| z.to_bits() == 0),
                    "the padding is zeroed"
                );
                assert_eq!((wt.len(), zeros.len()), (2400, 1024));
                zeros.fill(f32::NAN);
            });
        }
    }

    /// A xorshift generator: the pooling tests' values, the same on every run.
    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// Values that make ties, signed zeros and NaNs (with different payloads) meet in pooling
    /// windows; and the same without NaNs, which the kernels pool on their faster path.
    const POOLED_WITH_NANS: [f32; 9] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        f32::NAN,
        f32::from_bits(0x7fc0_0001),
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    const POOLED_WITHOUT_NANS: [f32; 7] =
        [0.0, -0.0, 1.0, -1.0, 2.5, f32::INFINITY, f32::NEG_INFINITY];

    /// Max pooling's rule: the window's first maximum in its row-major order, or its first NaN.
    fn first_maximum(window: [f32; 4]) -> f32 {
        window[1..].iter().fold(window[0], |m, &v| {
            if v > m || (v.is_nan() && !m.is_nan()) {
                v
            } else {
                m
            }
        })
    }

    /// `len` `f32`s that end where a page without access begins: a load past their end (a
    /// mask that lets one lane too many through) faults and fails the test run.
    #[cfg(unix)]
    pub(super) struct Guarded {
        map: *mut libc::c_void,
        map_len: usize,
        len: usize,
    }

    #[cfg(unix)]
    impl Guarded {
        pub(super) fn new(values: &[f32]) -> Self {
            const PAGE: usize = 1 << 16; // a multiple of every page size in use
            let bytes = core::mem::size_of_val(values);
            let data = bytes.div_ceil(PAGE) * PAGE;
            let map_len = data + PAGE;
            // SAFETY: a fresh private anonymous mapping, checked; its last page made
            // inaccessible; the values copied to the `bytes` before it, inside the mapping.
            unsafe {
                let map = libc::mmap(
                    core::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(map, libc::MAP_FAILED, "mmap");
                let guard = map.cast::<u8>().add(data);
                assert_eq!(libc::mprotect(guard.cast(), PAGE, libc::PROT_NONE), 0);
                let start = guard.sub(bytes).cast::<f32>();
                core::ptr::copy_nonoverlapping(values.as_ptr(), start, values.len());
                Self {
                    map,
                    map_len,
                    len: values.len(),
                }
            }
        }

        pub(super) fn slice(&mut self) -> &mut [f32] {
            // SAFETY: the `len` values just before the guard page, written in `new`, borrowed
            // through `self`.
            unsafe {
                let guard = self.map.cast::<u8>().add(self.map_len - (1 << 16));
                core::slice::from_raw_parts_mut(guard.cast::<f32>().sub(self.len), self.len)
            }
        }
    }

    #[cfg(unix)]
    impl Drop for Guarded {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`, not used after this.
            unsafe { libc::munmap(self.map, self.map_len) };
        }
    }

    /// Max pooling (forward and backward) and the transposes never read past their input, nor
    /// write past their output: both end at a page without access, for every shape around the
    /// kernels' vector and step sizes (the masks of the last, partial vectors are what this
    /// checks).
    #[cfg(unix)]
    #[test]
    fn no_kernel_reads_or_writes_past_the_end_of_its_slices() {
        let mut next = xorshift(0x5eed_1234_abcd_0001);
        let mut values = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| (next() % 1000) as f32 / 100.0 - 5.0)
                .collect()
        };
        if detected_isa() == Some(Isa::Avx512) {
            for planes in 1..4 {
                for height in 2..9 {
                    for width in 2..41 {
                        let x = values(planes * height * width);
                        let n = planes * (height / 2) * (width / 2);
                        let (mut x, mut out) = (Guarded::new(&x), Guarded::new(&std::vec![0.0; n]));
                        max_pool_2x2_f32(
                            Isa::Avx512,
                            x.slice(),
                            (height, width),
                            as_output(out.slice()),
                        );
                        // The backward pass: the input, the gradients and the input gradient
                        // each end at the guard page.
                        let mut dy = Guarded::new(&values(n));
                        let mut dx = Guarded::new(&std::vec![0.0; planes * height * width]);
                        max_pool_2x2_backward_f32(
                            Isa::Avx512,
                            x.slice(),
                            (height, width),
                            dy.slice(),
                            dx.slice(),
                        );
                    }
                }
            }
        }
        // The weight gradient, positions in the lanes (each plane's last vector masked), two
        // images: the second image, its gradients and the last shifted copy in the scratch end
        // at the guard page.
        fn positions_weight_gradient(shape: &Conv, x: &[f32], dz: &[f32]) {
            let batch = 2;
            let scratch =
                weight_grad_images_per_pass::<f32>(shape, batch) * shifted_image_len(shape);
            let (mut x, mut dz, mut scratch) = (
                Guarded::new(x),
                Guarded::new(dz),
                Guarded::new(&std::vec![0.0; scratch]),
            );
            let kernel = shape.kernel;
            let mut dw = std::vec![0.0; shape.filters * shape.channels * kernel * kernel];
            for isa in [Isa::Avx512, Isa::Avx2Fma]
                .into_iter()
                .filter(|&i| isa_available(i))
            {
                conv2d_weight_gradient_positions(
                    isa,
                    shape,
                    batch,
                    x.slice(),
                    dz.slice(),
                    scratch.slice(),
                    &mut dw,
                    false,
                );
            }
        }
        // The flat convolution kernel, positions dense where the output is at least a vector
        // wide (each vector's last lanes loaded from the next row), flat where it is not: the
        // image and the output end at the guard page. Then the weight gradient, positions in
        // the lanes, of these and of padded images (the copies load each row's columns masked,
        // before the row's start where the padding is on the left).
        for sizes in [
            (1, 6, 5, 0, 32, 32),
            (2, 3, 3, 0, 18, 19),
            (1, 1, 1, 0, 1, 16),
            (1, 2, 3, 0, 7, 9),
            (3, 9, 2, 0, 5, 40),
            // Shorter than a vector: the images, the gradients, the shifted copies.
            (1, 2, 2, 0, 2, 3),
            (1, 1, 1, 0, 1, 3),
            // Padded: the weight gradient only.
            (1, 6, 5, 2, 28, 28),
            (2, 3, 3, 1, 5, 17),
            (1, 2, 2, 3, 2, 3),
        ] {
            let shape = conv_of(sizes);
            if shape.padding == 0 {
                flat_convolution(&shape, &mut values);
            }
            let batch = 2;
            let (x, dz) = (
                values(batch * shape.image_len()),
                values(batch * shape.output_len()),
            );
            positions_weight_gradient(&shape, &x, &dz);
        }
        // The weight gradient with a row's tiles in the lanes: the images (their rows loaded
        // masked, two vectors each), the gradients and the scratch end at the guard page, for
        // rows of 1 to 32 columns (one vector and a partial one, or a partial one alone),
        // padded or not, 1 to 6 filters (tiles of 3 and their rest).
        if isa_available(Isa::Avx512) {
            for (channels, filters, padding, height, width) in [
                (1, 6, 2, 28, 28),
                (1, 1, 0, 5, 5),
                (2, 4, 0, 6, 32),
                (1, 2, 1, 5, 17),
                (2, 3, 2, 2, 1),
                (1, 5, 0, 9, 16),
            ] {
                let shape = conv_of((channels, filters, 5, padding, height, width));
                let batch = 2;
                let (mut x, mut dz, mut a, mut scratch) = (
                    Guarded::new(&values(batch * shape.image_len())),
                    Guarded::new(&values(batch * shape.output_len())),
                    Guarded::new(&values(batch * shape.output_len())),
                    Guarded::new(&std::vec![0.0; row_tiles::weight_gradient_scratch(&shape)]),
                );
                let mut dw = Guarded::new(&std::vec![0.0; filters * channels * 25]);
                let mut db = Guarded::new(&std::vec![0.0; filters]);
                row_tiles::conv2d_weight_gradient(
                    Isa::Avx512,
                    &shape,
                    batch,
                    x.slice(),
                    row_tiles::Gradients::PreActivation(dz.slice()),
                    scratch.slice(),
                    dw.slice(),
                    false,
                );
                // And with dZ formed from dA and A as they are read, db written.
                let gradients = row_tiles::Gradients::ThroughRelu {
                    output: a.slice(),
                    d_output: dz.slice(),
                    d_bias: db.slice(),
                };
                row_tiles::conv2d_weight_gradient(
                    Isa::Avx512,
                    &shape,
                    batch,
                    x.slice(),
                    gradients,
                    scratch.slice(),
                    dw.slice(),
                    false,
                );
            }
        }
        // The flat convolution of `shape` (no padding) on every instruction set here.
        fn flat_convolution(shape: &Conv, values: &mut impl FnMut(usize) -> Vec<f32>) {
            let Conv {
                channels,
                filters,
                kernel,
                ..
            } = *shape;
            let x = values(shape.image_len());
            let w = values(filters * channels * kernel * kernel);
            let bias = values(filters);
            let (mut x, mut out) = (
                Guarded::new(&x),
                Guarded::new(&std::vec![0.0; shape.output_len()]),
            );
            for isa in [Isa::Avx512, Isa::Avx2Fma]
                .into_iter()
                .filter(|&i| isa_available(i))
            {
                let out = as_output(out.slice());
                conv2d_stride1_flat(isa, shape, x.slice(), &w, &bias, out, Epilogue::Relu);
            }
        }
        // The weight gradient by Winograd's method: the images, their gradients and the
        // scratch end at the guard page (the image's rows and `dZ`'s filters are loaded
        // masked at their ends).
        for sizes in [
            (6, 16, 5, 0, 14, 14),
            (2, 3, 4, 0, 5, 7),
            (1, 17, 3, 0, 3, 4),
        ] {
            let shape = conv_of(sizes);
            for batch in [1, 5] {
                let (x, dz) = (
                    values(batch * shape.image_len()),
                    values(batch * shape.output_len()),
                );
                let kernel = shape.kernel;
                let mut dw = std::vec![0.0; shape.filters * shape.channels * kernel * kernel];
                for isa in [Isa::Avx512, Isa::Avx2Fma]
                    .into_iter()
                    .filter(|&i| isa_available(i))
                {
                    let scratch =
                        weight_gradient_winograd_scratch(&shape, batch, lanes::<f32>(isa));
                    let (mut x, mut dz, mut scratch) = (
                        Guarded::new(&x),
                        Guarded::new(&dz),
                        Guarded::new(&std::vec![0.0; scratch]),
                    );
                    conv2d_weight_gradient_winograd(
                        isa,
                        &shape,
                        batch,
                        x.slice(),
                        dz.slice(),
                        scratch.slice(),
                        &mut dw,
                        false,
                    );
                }
            }
        }
        for rows in [1, 2, 5] {
            for width in [1, 3, 15, 16, 17, 28, 33] {
                let (from_stride, to_stride) = (width + 1, width + 2);
                let from = values((rows - 1) * from_stride + width);
                let to_len = (rows - 1) * to_stride + width;
                let (mut from, mut to) =
                    (Guarded::new(&from), Guarded::new(&std::vec![0.0; to_len]));
                let size = (rows, width);
                for isa in [Isa::Avx512, Isa::Avx2Fma]
                    .into_iter()
                    .filter(|&i| isa_available(i))
                {
                    copy_rows(isa, from.slice(), from_stride, to.slice(), to_stride, size);
                }
            }
        }
        for rows in [1, 15, 16, 17, 32, 33] {
            for columns in [1, 3, 4, 5, 7, 150] {
                let from = values(rows * columns);
                let (mut from, mut to) = (
                    Guarded::new(&from),
                    Guarded::new(&std::vec![0.0; rows * columns]),
                );
                transpose(from.slice(), rows, to.slice());
                assert_eq!(
                    to.slice()[..],
                    transposed(
                        &from
                            .slice()
                            .iter()
                            .map(|&v| f64::from(v))
                            .collect::<Vec<_>>(),
                        rows
                    )
                    .iter()
                    .map(|&v| v as f32)
                    .collect::<Vec<_>>()[..]
                );
            }
        }
    }

    /// Row copies against the definition, for widths around the vector sizes, both strides
    /// larger than the width (and equal): the values of each row copied, nothing else written.
    #[test]
    fn row_copies_move_each_row_and_nothing_else() {
        fn check<E: Element + PartialEq + std::fmt::Debug>(isa: Isa, from_f64: impl Fn(f64) -> E) {
            let stale = from_f64(7.5);
            for width in [0, 1, 3, 7, 8, 15, 16, 17, 28, 33] {
                for (rows, from_gap, to_gap) in
                    [(0, 0, 0), (1, 0, 0), (3, 0, 4), (5, 2, 0), (4, 3, 17)]
                {
                    {
                        let (from_stride, to_stride) = (width + from_gap, width + to_gap);
                        let from: Vec<E> = values(rows * from_stride, width as u64)
                            .into_iter()
                            .map(&from_f64)
                            .collect();
                        let mut to = std::vec![stale; rows * to_stride + 3];
                        let mut want = to.clone();
                        for i in 0..rows {
                            for j in 0..to_stride {
                                if j < width {
                                    want[i * to_stride + j] = from[i * from_stride + j];
                                }
                            }
                        }
                        let size = (rows, width);
                        assert!(copy_rows(isa, &from, from_stride, &mut to, to_stride, size,));
                        assert_eq!(
                            to, want,
                            "{isa:?}: {rows} rows of {width}, strides {from_stride} and {to_stride}"
                        );
                    }
                }
            }
        }
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            check::<f32>(isa, |v| v as f32);
            check::<f64>(isa, |v| v);
            // Other element types: nothing written, the caller copies.
            let mut to = [1_i32; 4];
            assert!(!copy_rows(isa, &[2_i32; 4], 2, &mut to, 2, (2, 2)));
            assert_eq!(to, [1; 4]);
        }
    }

    #[test]
    #[should_panic(
        expected = "3 rows of 4 from a stride of 4 in 12 elements to a stride of 5 in 13"
    )]
    fn row_copies_past_the_end_of_their_slices_are_refused() {
        let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
        // The last row would end at 14.
        copy_rows(isa, &[0.0_f32; 12], 4, &mut [0.0; 13], 5, (3, 4));
    }

    /// The bits of a 2 x 2 window's input gradients as the generic code writes them: `0 + dy` to
    /// the input that took over last (the first maximum, or the first NaN), 0 to the others.
    fn window_gradient_bits(window: [f32; 4], dy: f32) -> [u32; 4] {
        let (mut best, mut at) = (window[0], 0);
        for (p, &v) in window.iter().enumerate().skip(1) {
            if v > best || (v.is_nan() && !best.is_nan()) {
                (best, at) = (v, p);
            }
        }
        let mut bits = [0_u32; 4];
        bits[at] = (0.0 + dy).to_bits();
        bits
    }

    /// Planes of even sizes with rows of at most 16 (several row pairs per vector), forward
    /// and backward, against the definition: each window's first maximum (the first NaN, if
    /// any) and the gradient routed to it, bit for bit, whatever the number of row pairs left
    /// for the last step.
    #[test]
    fn max_pooling_of_narrow_planes_matches_the_definition_bit_for_bit() {
        if detected_isa() != Some(Isa::Avx512) {
            std::eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for choices in [&POOLED_WITH_NANS[..], &POOLED_WITHOUT_NANS[..]] {
            for width in (2..=16).step_by(2) {
                for height in [2, 4, 6, 10] {
                    for planes in [1, 2, 3, 7] {
                        let x: Vec<f32> = (0..planes * height * width)
                            .map(|_| choices[(next() % choices.len() as u64) as usize])
                            .collect();
                        let (oh, ow) = (height / 2, width / 2);
                        let mut want = std::vec![0_u32; planes * oh * ow];
                        for (o, want) in want.iter_mut().enumerate() {
                            let (pair, j) = (o / ow, o % ow);
                            let top = pair * 2 * width + 2 * j;
                            let window = [x[top], x[top + 1], x[top + width], x[top + width + 1]];
                            *want = first_maximum(window).to_bits();
                        }
                        let mut out = std::vec![7.0_f32; want.len() + 1];
                        let n = want.len();
                        max_pool_2x2_f32(
                            Isa::Avx512,
                            &x,
                            (height, width),
                            as_output(&mut out[..n]),
                        );
                        let got: Vec<u32> = out[..n].iter().map(|v| v.to_bits()).collect();
                        assert_eq!(got, want, "{planes} planes of {height} x {width}");
                        assert_eq!(out[n], 7.0, "nothing written past the output");

                        // The backward pass, with the same windows.
                        let dy: Vec<f32> = (0..n)
                            .map(|_| [-0.0, 1.5, -2.0][(next() % 3) as usize])
                            .collect();
                        let mut want = std::vec![0_u32; x.len()];
                        for (o, &dy) in dy.iter().enumerate() {
                            let (pair, j) = (o / ow, o % ow);
                            let top = pair * 2 * width + 2 * j;
                            let at = [top, top + 1, top + width, top + width + 1];
                            let window = at.map(|i| x[i]);
                            for (i, bits) in at.into_iter().zip(window_gradient_bits(window, dy)) {
                                want[i] = bits;
                            }
                        }
                        let mut dx = std::vec![9.0_f32; x.len() + 1];
                        let len = x.len();
                        max_pool_2x2_backward_f32(
                            Isa::Avx512,
                            &x,
                            (height, width),
                            &dy,
                            &mut dx[..len],
                        );
                        let got: Vec<u32> = dx[..len].iter().map(|v| v.to_bits()).collect();
                        assert_eq!(got, want, "backward, {planes} planes of {height} x {width}");
                        assert_eq!(dx[len], 9.0, "nothing written past the input gradient");
                    }
                }
            }
        }
    }

    /// Planes of fewer than two rows pool into nothing, whatever their width (the kernel for
    /// wide rows once cut its output into chunks of 0 elements and panicked).
    #[test]
    fn max_pooling_of_planes_too_short_for_a_window_writes_nothing() {
        if detected_isa() != Some(Isa::Avx512) {
            std::eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        for (planes, height, width) in [(1, 1, 32), (3, 1, 40), (2, 0, 21), (1, 1, 3), (0, 4, 40)] {
            let x = std::vec![1.0_f32; planes * height * width];
            max_pool_2x2_f32(Isa::Avx512, &x, (height, width), as_output(&mut []));
        }
    }

    #[test]
    fn max_pooling_keeps_the_first_maximum_and_the_first_nan_bit_for_bit() {
        if detected_isa() != Some(Isa::Avx512) {
            std::eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        let mut next = xorshift(0x0123_4567_89ab_cdef);
        for choices in [&POOLED_WITH_NANS[..], &POOLED_WITHOUT_NANS[..]] {
            for n in 0..40 {
                for _ in 0..50 {
                    let mut pick = || choices[(next() % choices.len() as u64) as usize];
                    let top: Vec<f32> = (0..2 * n + 1).map(|_| pick()).collect();
                    let bottom: Vec<f32> = (0..2 * n + 1).map(|_| pick()).collect();
                    let want: Vec<u32> = (0..n)
                        .map(|j| {
                            let window =
                                [top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1]];
                            first_maximum(window).to_bits()
                        })
                        .collect();
                    // One plane of three rows (the last, odd one left out) and 2n + 1 columns.
                    let third: Vec<f32> = (0..2 * n + 1).map(|_| pick()).collect();
                    let plane = [&top[..], &bottom[..], &third[..]].concat();
                    let size = (3, 2 * n + 1);
                    let mut out = std::vec![7.0_f32; n];
                    max_pool_2x2_f32(Isa::Avx512, &plane, size, as_output(&mut out));
                    let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "{n} windows: {top:?} / {bottom:?}");
                    // Two planes in one call: each pooled on its own.
                    let mut two = std::vec![7.0_f32; 2 * n];
                    max_pool_2x2_f32(
                        Isa::Avx512,
                        &[&plane[..], &plane[..]].concat(),
                        size,
                        as_output(&mut two),
                    );
                    let got: Vec<u32> = two.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(
                        got,
                        [&want[..], &want[..]].concat(),
                        "two planes of {n} windows"
                    );

                    // The backward pass: the gradient to the window's first maximum as the generic
                    // code finds it (the last input that took over), `0 + dy` there, 0 elsewhere.
                    let dy: Vec<f32> = (0..n)
                        .map(|_| [-0.0, 1.5, -2.0][(next() % 3) as usize])
                        .collect();
                    let (mut want_top, mut want_bottom) =
                        (std::vec![0_u32; 2 * n], std::vec![0_u32; 2 * n]);
                    for j in 0..n {
                        let window = [top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1]];
                        let [t0, t1, b0, b1] = window_gradient_bits(window, dy[j]);
                        (want_top[2 * j], want_top[2 * j + 1]) = (t0, t1);
                        (want_bottom[2 * j], want_bottom[2 * j + 1]) = (b0, b1);
                    }
                    let mut d_plane = std::vec![9.0_f32; plane.len()];
                    max_pool_2x2_backward_f32(Isa::Avx512, &plane, size, &dy, &mut d_plane);
                    let (d_top, rest) = d_plane.split_at(2 * n + 1);
                    let (d_bottom, d_third) = rest.split_at(2 * n + 1);
                    assert!(
                        d_third.iter().all(|&v| v == 9.0),
                        "the odd row is left alone"
                    );
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
                    assert_eq!(bits(&d_top[..2 * n]), want_top, "backward, {n} windows");
                    assert_eq!(
                        bits(&d_bottom[..2 * n]),
                        want_bottom,
                        "backward, {n} windows"
                    );
                    assert_eq!(
                        (d_top[2 * n], d_bottom[2 * n]),
                        (9.0, 9.0),
                        "nothing past the windows"
                    );
                }
            }
        }
    }

    #[test]
    fn int8_requantization_refuses_exponents_no_multiplier_has() {
        let isas = [
            (
                IsaI8::Avx512Vnni,
                std::is_x86_feature_detected!("avx512vnni"),
            ),
            (IsaI8::Avx512Bw, std::is_x86_feature_detected!("avx512bw")),
            (IsaI8::Avx2, std::is_x86_feature_detected!("avx2")),
        ];
        for (isa, present) in isas {
            if !present {
                continue;
            }
            for bad in [31, -32, i32::MIN, i32::MAX] {
                // The bad exponent in the second group of 16, at its last lane.
                let mut exponent = std::vec![-5; 20];
                exponent[19] = bad;
                let ones = std::vec![1 << 30; 20];
                let result = std::panic::catch_unwind(|| {
                    let mut out = [0_i8; 20];
                    requantize_i8(isa, &ones, (&ones, &ones, &exponent), (0, -128), &mut out);
                });
                assert!(result.is_err(), "{isa:?} took the exponent {bad}");
            }
        }
    }

    #[test]
    fn int8_requantization_matches_the_definition_on_every_available_instruction_set() {
        let available = [
            (
                IsaI8::Avx512Vnni,
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512vnni"),
            ),
            (
                IsaI8::Avx512Bw,
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl"),
            ),
            (IsaI8::Avx2, std::is_x86_feature_detected!("avx2")),
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let edges = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
        for (isa, present) in available {
            if !present {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            for n in [1, 7, 16, 17, 40, 128] {
                for round in 0..200 {
                    let pick = |v: u64, small: bool| -> i32 {
                        match v % 4 {
                            0 => edges[(v >> 8) as usize % edges.len()],
                            1 if small => ((v >> 8) % 4001) as i32 - 2000,
                            _ => (v >> 16) as u32 as i32,
                        }
                    };
                    let dots: Vec<i32> = (0..n).map(|_| pick(next(), true)).collect();
                    let bias: Vec<i32> = (0..n).map(|_| pick(next(), true)).collect();
                    let multiplier: Vec<i32> = (0..n)
                        .map(|_| match next() % 5 {
                            0 => i32::MIN,
                            1 => 0,
                            _ => (1 << 30) + (next() % (1 << 30)) as i32,
                        })
                        .collect();
                    // Exponents from -31 to 0, and in some rounds a positive one (the group
                    // then takes the scalar path).
                    let exponent: Vec<i32> = (0..n)
                        .map(|_| {
                            if round % 10 == 0 && next() % 8 == 0 {
                                (next() % 5) as i32
                            } else {
                                -((next() % 32) as i32)
                            }
                        })
                        .collect();
                    let zero = (next() % 256) as u8 as i8;
                    let low = if round % 2 == 0 { -128 } else { zero };
                    let mut want = std::vec![0_i8; n];
                    super::super::reference::requantize_i8(
                        &dots,
                        (&bias, &multiplier, &exponent),
                        (zero, low),
                        &mut want,
                    );
                    let mut got = std::vec![99_i8; n]; // stale contents
                    requantize_i8(
                        isa,
                        &dots,
                        (&bias, &multiplier, &exponent),
                        (zero, low),
                        &mut got,
                    );
                    assert_eq!(got, want, "{isa:?}, {n} outputs, round {round}");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "do not fit")]
    fn convolution_operands_of_the_wrong_length_are_refused() {
        let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
        let shape = Conv {
            channels: 1,
            filters: 1,
            kernel: 3,
            padding: 0,
            height: 4,
            width: 4,
        };
        let mut out = [0.0_f32; 4];
        conv2d_stride1(
            isa,
            &shape,
            &[0.0; 15],
            &[0.0; 9],
            &[0.0],
            as_output(&mut out),
            ID,
        );
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn a_kernel_larger_than_the_padded_image_is_refused() {
        let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
        let shape = Conv {
            channels: 1,
            filters: 1,
            kernel: 5,
            padding: 0,
            height: 4,
            width: 4,
        };
        conv2d_stride1::<f32>(isa, &shape, &[0.0; 16], &[0.0; 25], &[0.0], &mut [], ID);
    }

    #[test]
    fn the_finiteness_check_finds_every_nan_and_infinity() {
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                continue;
            }
            for len in [0_usize, 1, 15, 16, 17, 63, 64, 65, 100, 1000] {
                let ok: Vec<f32> = (0..len).map(|i| (i % 61) as f32 * 1e36 - 3e37).collect();
                assert!(all_finite(isa, &ok), "{isa:?} {len}");
                let ok64: Vec<f64> = ok.iter().map(|&v| f64::from(v) * 1e270).collect();
                assert!(all_finite(isa, &ok64), "{isa:?} {len}");
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                    for at in [0, len / 2, len.saturating_sub(1)]
                        .into_iter()
                        .filter(|&i| i < len)
                    {
                        let mut v = ok.clone();
                        v[at] = bad;
                        assert!(!all_finite(isa, &v), "{isa:?} {len} {bad} at {at}");
                        let mut v: Vec<f64> = ok64.clone();
                        v[at] = f64::from(bad);
                        assert!(!all_finite(isa, &v), "{isa:?} {len} {bad} at {at}");
                    }
                }
            }
        }
    }

    /// The Winograd forward pass of a batch agrees with the definition summed in `f64`, on
    /// each instruction set, in `f32`: every kernel size, padded or not (padding
    /// larger than the kernel too), partial groups of filters, tiles that overhang the output,
    /// images taller and wider than a vector, and 60 shapes drawn at random.
    ///
    /// With AVX-512, `f32` takes tiles of 8 points where [`winograd_forward_points`] says so
    /// (every kernel size among the fixed shapes); the test checks that they occurred.
    ///
    /// The bound is relative to the tile, not to the output: the transforms mix the 6 or 8
    /// inputs of a tile's row, so an output's rounding error scales with all of them (an output
    /// whose own window is all padding is the bias plus an error of the size of its tile's
    /// inputs, not the bias exactly). `tolerance` is per unit of
    /// `|b| + Σ_(c, ky) max_kx |w| · Σ_j |d_j|`.
    #[test]
    fn winograd_forward_passes_match_the_definition_on_every_available_instruction_set() {
        let mut shapes = std::vec![
            (6, 16, 5, 0, 14, 14), // LeNet's second convolution
            (3, 20, 3, 1, 7, 9),   // 3x3, padded, 20 filters, a partial tile (9 = 2·4 + 1)
            (2, 5, 4, 2, 18, 19),  // 4x4, padded, taller and wider than a vector
            (1, 33, 5, 0, 6, 20),  // 3 groups of filters with 16 lanes, 5 with 8, 9 with 4
            (4, 8, 3, 0, 35, 6),   // one tile across, three vectors of rows
            (2, 3, 5, 3, 2, 2),    // padding larger than the image
            (1, 16, 3, 7, 3, 8),   // padding more than twice the kernel
            (2, 20, 3, 0, 3, 12),  // one output row: a tile of 1 row (8 points with AVX-512)
            (2, 20, 4, 0, 5, 13),  // two output rows, 4 x 4 (8 points with AVX-512)
        ];
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut draw = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n) as usize
        };
        while shapes.len() < 67 {
            let shape = (
                1 + draw(6),
                1 + draw(40),
                3 + draw(3),
                draw(8),
                1 + draw(24),
                1 + draw(24),
            );
            let conv = Conv {
                channels: shape.0,
                filters: shape.1,
                kernel: shape.2,
                padding: shape.3,
                height: shape.4,
                width: shape.5,
            };
            if conv.kernel <= conv.height + 2 * conv.padding
                && conv.kernel <= conv.width + 2 * conv.padding
                && winograd_forward_applies(&conv)
            {
                shapes.push(shape);
            }
        }
        // With AVX-512's 16 lanes of f32 (whether or not this CPU has them), every kernel size
        // among the fixed shapes, and most of the others, take 8 points.
        let eight: Vec<Conv> = shapes
            .iter()
            .map(|&sizes| conv_of(sizes))
            .filter(|shape| winograd_forward_points(shape, 16) == 8)
            .collect();
        std::eprintln!("16 lanes: {} shapes on 8 points", eight.len());
        assert!(eight.len() >= 12, "{} shapes on 8 points", eight.len());
        for kernel in 3..=5 {
            assert!(eight[..6].iter().any(|shape| shape.kernel == kernel));
        }
        let worst = |isa: Isa| {
            let mut worst = 0.0_f64;
            for (i, &sizes) in shapes.iter().enumerate() {
                let shape = conv_of(sizes);
                assert!(winograd_forward_applies(&shape), "{shape:?}");
                worst = worst.max(error::<f32>(isa, &shape, i as u64, |x| x as f32));
            }
            worst
        };
        /// The largest error of a batch of 2, per unit of its tile's size (see above).
        fn error<E: ConvElement + Into<f64>>(
            isa: Isa,
            shape: &Conv,
            seed: u64,
            from: impl Fn(f64) -> E,
        ) -> f64 {
            let batch = 2;
            let Conv {
                channels,
                filters,
                kernel,
                ..
            } = *shape;
            let (image, output) = (shape.image_len(), shape.output_len());
            let (out_height, out_width) = (shape.out_height(), shape.out_width());
            let points = winograd_forward_points(shape, lanes::<E>(isa));
            let m = points + 1 - kernel;
            let x = values(batch * image, 50 + seed);
            let w = values(filters * channels * kernel * kernel, 60 + seed);
            let b = values(filters, 70 + seed);
            let cast = |v: &[f64]| v.iter().map(|&x| from(x)).collect::<Vec<E>>();
            let mut got = cast(&values(batch * output, 80));
            // Scratch filled with NaN: an element read before it is written (or zeroed) gives a
            // NaN output. (Where the filters' transposes, which come first, cover the image's
            // place, such a miss reads a weight instead, and the error bound catches it.)
            let scratch_len = winograd_forward_scratch(shape, lanes::<E>(isa));
            let mut scratch = std::vec![MaybeUninit::new(from(f64::NAN)); scratch_len];
            conv2d_stride1_winograd(
                isa,
                shape,
                batch,
                &cast(&x),
                &cast(&w),
                &cast(&b),
                as_output(&mut got),
                &mut scratch,
                Epilogue::Identity,
            );
            let mut worst = 0.0_f64;
            for n in 0..batch {
                let x = &x[n * image..][..image];
                let mut want = std::vec![0.0; output];
                super::super::reference::conv2d_stride1(shape, x, &w, &b, &mut want);
                let at = |c, row, column| padded_magnitude(shape, x, c, row, column);
                for f in 0..filters {
                    for oh in 0..out_height {
                        for ow in 0..out_width {
                            let tile = ow / m * m;
                            let mut size = b[f].abs();
                            for c in 0..channels {
                                for ky in 0..kernel {
                                    let row =
                                        &w[((f * channels + c) * kernel + ky) * kernel..][..kernel];
                                    let largest = row.iter().fold(0.0_f64, |a, v| a.max(v.abs()));
                                    let inputs: f64 =
                                        (0..points).map(|j| at(c, oh + ky, tile + j)).sum();
                                    size += largest * inputs;
                                }
                            }
                            let j = (f * out_height + oh) * out_width + ow;
                            let g: f64 = got[n * output + j].into();
                            assert!(g.is_finite(), "{shape:?}: output {j} is {g}");
                            worst = worst.max((g - want[j]).abs() / size);
                        }
                    }
                }
            }
            worst
        }
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            let in_f32 = worst(isa);
            std::eprintln!("{isa:?}: worst error per unit of the tile's size: {in_f32:.2e}");
            assert!(in_f32 <= 2e-6, "{isa:?}: error {in_f32:e}");
        }
    }

    /// With AVX-512, LeNet's second layer in `f32` runs on 8 points, not on the 6 it took
    /// before: the outputs differ from the 6-point kernel's in the last bits (which an error
    /// bound cannot see), and both are within the bound of the definition. A shape whose
    /// 8-point scratch would not fit the stack buffer keeps 6 points.
    #[test]
    fn lenets_second_layer_runs_on_eight_points_with_avx512() {
        if !isa_available(Isa::Avx512) {
            std::eprintln!("skipping: no AVX-512 on this CPU");
            return;
        }
        let shape = conv_of((6, 16, 5, 0, 14, 14));
        assert_eq!(winograd_forward_points(&shape, 16), 8);
        let taller = conv_of((6, 16, 5, 0, 15, 14));
        assert!(winograd_forward_scratch_on(&taller, 16, 8) > super::super::WINOGRAD_STACK_SCRATCH);
        assert_eq!(winograd_forward_points(&taller, 16), 6);
        assert!(winograd_forward_scratch(&taller, 16) <= super::super::WINOGRAD_STACK_SCRATCH);
        let cast = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect::<Vec<f32>>();
        let x = cast(values(shape.image_len(), 1));
        let w = cast(values(16 * 6 * 25, 2));
        let b = cast(values(16, 3));
        let len = shape.output_len();
        let mut scratch = std::vec![MaybeUninit::uninit(); 2 * WINOGRAD_TEST_SCRATCH];
        let mut on_eight = std::vec![0.0_f32; len];
        conv2d_stride1_winograd(
            Isa::Avx512,
            &shape,
            1,
            &x,
            &w,
            &b,
            as_output(&mut on_eight),
            &mut scratch,
            Epilogue::Identity,
        );
        #[target_feature(enable = "avx512f")]
        fn on_six(shape: &Conv, x: &[f32], w: &[f32], b: &[f32], out: &mut [f32]) {
            let g = super::super::winograd::filter_transform(5).map(|row| row.map(|g| g as f32));
            let mut scratch = std::vec![MaybeUninit::uninit(); 2 * WINOGRAD_TEST_SCRATCH];
            // SAFETY: AVX-512 is present (the caller checked); the shape is LeNet's second
            // layer, whose 6-point scratch is within the buffer, and the slices fit it.
            unsafe {
                winograd_forward_run::<Avx512F32, 6, 5, 2, 6>(
                    shape,
                    1,
                    x,
                    w,
                    b,
                    as_output(out),
                    &SixPoints,
                    &g,
                    &mut scratch,
                    Epilogue::Identity,
                );
            }
        }
        let mut on_six_points = std::vec![0.0_f32; len];
        // SAFETY: AVX-512 is present (checked above).
        unsafe { on_six(&shape, &x, &w, &b, &mut on_six_points) };
        assert_ne!(on_eight, on_six_points);
        let mut want = std::vec![0.0; len];
        let wide = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
        super::super::reference::conv2d_stride1(&shape, &wide(&x), &wide(&w), &wide(&b), &mut want);
        for (got, name) in [(&on_eight, "8 points"), (&on_six_points, "6 points")] {
            let worst = got
                .iter()
                .zip(&want)
                .map(|(&g, &w)| (f64::from(g) - w).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-4, "{name}: {worst:e}");
        }
    }

    /// Twice the scratch LeNet's second layer needs on either number of points.
    const WINOGRAD_TEST_SCRATCH: usize = 9 * 1024;

    /// The written-out `Bᵀ·d` and `Aᵀ·m` of the Winograd forward kernel are the Toom-Cook
    /// matrices' products, for every kernel size.
    #[test]
    fn the_winograd_forward_transforms_are_the_matrices() {
        if !isa_available(Isa::Avx2Fma) {
            std::eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        #[target_feature(enable = "avx2,fma")]
        fn run<const M: usize>(d: [f64; 6]) -> ([f64; 6], [f64; M]) {
            // SAFETY: AVX2 and FMA are present (the caller checked); the stores write the
            // arrays' elements.
            unsafe {
                let vectors = d.map(|v| Avx2F64::splat(v));
                let mut z = [0.0; 6];
                for (z, v) in z
                    .iter_mut()
                    .zip(winograd_input_transform::<Avx2F64>(vectors))
                {
                    let mut lanes = [0.0; 4];
                    Avx2F64::store(lanes.as_mut_ptr(), v);
                    *z = lanes[0];
                }
                let mut y = [[0.0; 4]; M];
                winograd_output_transform::<Avx2F64, M>(&vectors, y.as_mut_ptr().cast(), M);
                (z, y.map(|lanes| lanes[0]))
            }
        }
        let d = [0.3, -1.7, 2.9, 0.55, -0.8, 1.3];
        for r in 3..=5 {
            let [at, bt] = super::super::winograd::output_and_input_transforms(r);
            // SAFETY: AVX2 and FMA are present (checked above).
            let (z, y) = unsafe {
                match r {
                    3 => {
                        let (z, y) = run::<4>(d);
                        (z, y.to_vec())
                    }
                    4 => {
                        let (z, y) = run::<3>(d);
                        (z, y.to_vec())
                    }
                    _ => {
                        let (z, y) = run::<2>(d);
                        (z, y.to_vec())
                    }
                }
            };
            for (j, &z) in z.iter().enumerate() {
                let expected: f64 = (0..6).map(|i| bt[j][i] * d[i]).sum();
                assert!(
                    (z - expected).abs() < 1e-12,
                    "Bᵀ·d, row {j}: {z} against {expected}"
                );
            }
            for (i, &y) in y.iter().enumerate() {
                let expected: f64 = (0..6).map(|j| at[i][j] * d[j]).sum();
                assert!(
                    (y - expected).abs() < 1e-12,
                    "Aᵀ·m, r = {r}, row {i}: {y} against {expected}"
                );
            }
        }
    }
}
