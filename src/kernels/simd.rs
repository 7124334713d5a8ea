//! SIMD matrix products for `f32` and `f64` on x86-64: AVX-512F or AVX2+FMA, chosen at run time.
//!
//! This is the crate's only `unsafe` code. Everything here is reached through the safe functions
//! at the bottom ([`gemm_f32`], [`gemm_f64`]), which check every slice length against the
//! dimensions before any pointer is formed, and pick an instruction set the CPU has.
//!
//! # How the products are computed
//!
//! Two register-blocked micro-kernels cover the three layouts, none of which copies (packs) its
//! operands: at this crate's sizes (a few hundred rows and columns) the operands sit in L1/L2
//! cache, and a packing copy would cost as much as it saves.
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
//!   horizontally at the end. This is also the single-sample (matrix-vector) path.
//!
//! Edges (sizes that are not multiples of the tile) use the same kernels with masked loads and
//! stores, so every shape takes the fast path.

#![allow(unsafe_code)]

use core::arch::x86_64::*;

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

/// The instruction sets these kernels can use, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Avx2Fma,
}

/// The best instruction set this CPU has, detected once (with `std`), or the one the build targets
/// (without `std`, where run-time detection is not available).
pub(crate) fn detected_isa() -> Option<Isa> {
    #[cfg(feature = "std")]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not yet detected, 1: none, 2: AVX2+FMA, 3: AVX-512F.
        static DETECTED: AtomicU8 = AtomicU8::new(0);
        let code = match DETECTED.load(Ordering::Relaxed) {
            0 => {
                let code = if std::is_x86_feature_detected!("avx512f") {
                    3
                } else if std::is_x86_feature_detected!("avx2")
                    && std::is_x86_feature_detected!("fma")
                {
                    2
                } else {
                    1
                };
                DETECTED.store(code, Ordering::Relaxed);
                code
            }
            code => code,
        };
        match code {
            3 => Some(Isa::Avx512),
            2 => Some(Isa::Avx2Fma),
            _ => None,
        }
    }
    #[cfg(not(feature = "std"))]
    {
        if cfg!(target_feature = "avx512f") {
            Some(Isa::Avx512)
        } else if cfg!(all(target_feature = "avx2", target_feature = "fma")) {
            Some(Isa::Avx2Fma)
        } else {
            None
        }
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
    type E: Copy + core::ops::Add<Output = Self::E>;
    type V: Copy;
    type Mask: Copy;
    const LANES: usize;
    /// Rows of an outer-product tile.
    const OUTER_ROWS: usize;
    /// Vectors per row of an outer-product tile.
    const OUTER_VECTORS: usize;

    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: Self::E) -> Self::V;
    /// `a · b + c`, fused.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    unsafe fn sum(v: Self::V) -> Self::E;
    /// A mask selecting the first `n` lanes (`n <= LANES`).
    unsafe fn mask(n: usize) -> Self::Mask;
    /// `p` must be valid for reading `LANES` elements.
    unsafe fn load(p: *const Self::E) -> Self::V;
    /// The lanes selected by `m` must be valid for reading; the others are zero and never read.
    unsafe fn load_masked(p: *const Self::E, m: Self::Mask) -> Self::V;
    /// `p` must be valid for writing `LANES` elements.
    unsafe fn store(p: *mut Self::E, v: Self::V);
    /// The lanes selected by `m` must be valid for writing; the others are not touched.
    unsafe fn store_masked(p: *mut Self::E, m: Self::Mask, v: Self::V);
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
            unsafe fn sum(v: $v) -> $e {
                avx512!(@op reduce_add, $suffix)(v)
            }
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn mask(n: usize) -> $mask {
                // n <= LANES <= 16, so the shift cannot overflow a u32.
                ((1_u32 << n) - 1) as $mask
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
        }
    };
    (@op $op:ident, ps) => { pastey_ps!($op) };
    (@op $op:ident, pd) => { pastey_pd!($op) };
}

/// The AVX-512 intrinsic names for `f32` (`_ps`) and `f64` (`_pd`).
macro_rules! pastey_ps {
    (setzero) => {
        _mm512_setzero_ps
    };
    (set1) => {
        _mm512_set1_ps
    };
    (fmadd) => {
        _mm512_fmadd_ps
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
    (storeu) => {
        _mm512_storeu_ps
    };
    (mask_storeu) => {
        _mm512_mask_storeu_ps
    };
}
macro_rules! pastey_pd {
    (setzero) => {
        _mm512_setzero_pd
    };
    (set1) => {
        _mm512_set1_pd
    };
    (fmadd) => {
        _mm512_fmadd_pd
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
    (storeu) => {
        _mm512_storeu_pd
    };
    (mask_storeu) => {
        _mm512_mask_storeu_pd
    };
}

avx512!(Avx512F32, f32, __m512, __mmask16, 16, ps);
avx512!(Avx512F64, f64, __m512d, __mmask8, 8, pd);

#[derive(Clone, Copy)]
struct Avx2F32;

impl Simd for Avx2F32 {
    type E = f32;
    type V = __m256;
    type Mask = __m256i;
    const LANES: usize = 8;
    const OUTER_ROWS: usize = 6;
    const OUTER_VECTORS: usize = 2;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn sum(v: __m256) -> f32 {
        let halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let pairs = _mm_hadd_ps(halves, halves);
        _mm_cvtss_f32(_mm_hadd_ps(pairs, pairs))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask(n: usize) -> __m256i {
        // Lane i is selected (all ones) when i < n.
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees 8 readable floats at p; no alignment is required.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load_masked(p: *const f32, m: __m256i) -> __m256 {
        // SAFETY: the caller guarantees the selected lanes are readable; vmaskmov does not
        // access (or fault on) masked-off lanes.
        unsafe { _mm256_maskload_ps(p, m) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: the caller guarantees 8 writable floats at p.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store_masked(p: *mut f32, m: __m256i, v: __m256) {
        // SAFETY: the caller guarantees the selected lanes are writable; others are untouched.
        unsafe { _mm256_maskstore_ps(p, m, v) }
    }
}

#[derive(Clone, Copy)]
struct Avx2F64;

impl Simd for Avx2F64 {
    type E = f64;
    type V = __m256d;
    type Mask = __m256i;
    const LANES: usize = 4;
    const OUTER_ROWS: usize = 6;
    const OUTER_VECTORS: usize = 2;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn zero() -> __m256d {
        _mm256_setzero_pd()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn splat(x: f64) -> __m256d {
        _mm256_set1_pd(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fma(a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        _mm256_fmadd_pd(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn sum(v: __m256d) -> f64 {
        let halves = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
        _mm_cvtsd_f64(_mm_hadd_pd(halves, halves))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask(n: usize) -> __m256i {
        _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), _mm256_setr_epi64x(0, 1, 2, 3))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(p: *const f64) -> __m256d {
        // SAFETY: the caller guarantees 4 readable doubles at p; no alignment is required.
        unsafe { _mm256_loadu_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load_masked(p: *const f64, m: __m256i) -> __m256d {
        // SAFETY: the caller guarantees the selected lanes are readable; masked-off lanes are
        // not accessed.
        unsafe { _mm256_maskload_pd(p, m) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(p: *mut f64, v: __m256d) {
        // SAFETY: the caller guarantees 4 writable doubles at p.
        unsafe { _mm256_storeu_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store_masked(p: *mut f64, m: __m256i, v: __m256d) {
        // SAFETY: the caller guarantees the selected lanes are writable; others are untouched.
        unsafe { _mm256_maskstore_pd(p, m, v) }
    }
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

/// `C (+)= A·B` or `Aᵀ·B` with outer-product tiles; `a(i, p)` is at `a + i·a_row + p·a_k`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `a` addresses `m x k` elements through the strides, `b` is
/// `k x n` row-major, `c` is `m x n` row-major, all in bounds.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_outer<S: Simd>(
    m: usize,
    n: usize,
    k: usize,
    a: *const S::E,
    a_row: usize,
    a_k: usize,
    b: *const S::E,
    c: *mut S::E,
    accumulate: bool,
) {
    macro_rules! tile {
        ($rows:expr, $full:expr, $($args:expr),*) => {
            match $rows {
                1 => outer_tile::<S, 1, 2, $full>($($args),*),
                2 => outer_tile::<S, 2, 2, $full>($($args),*),
                3 => outer_tile::<S, 3, 2, $full>($($args),*),
                4 => outer_tile::<S, 4, 2, $full>($($args),*),
                5 => outer_tile::<S, 5, 2, $full>($($args),*),
                6 => outer_tile::<S, 6, 2, $full>($($args),*),
                7 => outer_tile::<S, 7, 2, $full>($($args),*),
                8 => outer_tile::<S, 8, 2, $full>($($args),*),
                _ => unreachable!("tiles have at most 8 rows"),
            }
        };
    }
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
            for i0 in (0..m).step_by(mr) {
                let rows = mr.min(m - i0);
                // SAFETY: the tile's rows i0..i0+rows, columns j0..j0+cols and steps k0..k0+kc
                // are inside the operands (the caller's contract), which is what outer_tile needs.
                unsafe {
                    let a_tile = a.add(i0 * a_row + k0 * a_k);
                    let b_tile = b.add(k0 * n + j0);
                    let c_tile = c.add(i0 * n + j0);
                    if cols == nr {
                        tile!(
                            rows, true, kc, a_tile, a_row, a_k, b_tile, n, c_tile, n, cols, load_c
                        );
                    } else {
                        tile!(
                            rows, false, kc, a_tile, a_row, a_k, b_tile, n, c_tile, n, cols, load_c
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

/// One `MR x NR` dot-product tile: `C[r][j] (+)= Σ_p A[r][p] · B[j][p]` over `k` steps, `A` and
/// `B` with row stride `k`, `C` with row stride `c_row`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; rows `0..MR` of `A`, `0..NR` of `B` (each `k` long) and the
/// `MR x NR` block of `C` are in bounds.
#[inline(always)]
unsafe fn dot_tile<S: Simd, const MR: usize, const NR: usize>(
    k: usize,
    a: *const S::E,
    b: *const S::E,
    c: *mut S::E,
    c_row: usize,
    accumulate: bool,
) {
    // SAFETY (whole body): as the caller guarantees; the tail vectors are read with masks whose
    // lanes stay inside each row, through `wrapping_add` pointers.
    unsafe {
        let lanes = S::LANES;
        let mut acc = [[S::zero(); NR]; MR];
        let full = k - k % lanes;
        let mut p = 0;
        while p < full {
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
                    acc[r][j] = S::fma(a_v[r], b_v, acc[r][j]);
                }
            }
        }
        for (r, acc_row) in acc.iter().enumerate() {
            for (j, &v) in acc_row.iter().enumerate() {
                let out = c.add(r * c_row + j);
                let s = S::sum(v);
                *out = if accumulate { *out + s } else { s };
            }
        }
    }
}

/// `C (+)= A·Bᵀ` with dot-product tiles.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `a` is `m x k`, `b` is `n x k`, `c` is `m x n`, all
/// row-major and in bounds.
#[inline(always)]
unsafe fn gemm_dot<S: Simd>(
    m: usize,
    n: usize,
    k: usize,
    a: *const S::E,
    b: *const S::E,
    c: *mut S::E,
    accumulate: bool,
) {
    const MR: usize = 4;
    const NR: usize = 4;
    macro_rules! tile {
        ($rows:expr, $cols:expr, $($args:expr),*) => {
            match ($rows, $cols) {
                (4, 4) => dot_tile::<S, 4, 4>($($args),*),
                (4, 3) => dot_tile::<S, 4, 3>($($args),*),
                (4, 2) => dot_tile::<S, 4, 2>($($args),*),
                (4, 1) => dot_tile::<S, 4, 1>($($args),*),
                (3, 4) => dot_tile::<S, 3, 4>($($args),*),
                (3, 3) => dot_tile::<S, 3, 3>($($args),*),
                (3, 2) => dot_tile::<S, 3, 2>($($args),*),
                (3, 1) => dot_tile::<S, 3, 1>($($args),*),
                (2, 4) => dot_tile::<S, 2, 4>($($args),*),
                (2, 3) => dot_tile::<S, 2, 3>($($args),*),
                (2, 2) => dot_tile::<S, 2, 2>($($args),*),
                (2, 1) => dot_tile::<S, 2, 1>($($args),*),
                (1, 4) => dot_tile::<S, 1, 4>($($args),*),
                (1, 3) => dot_tile::<S, 1, 3>($($args),*),
                (1, 2) => dot_tile::<S, 1, 2>($($args),*),
                (1, 1) => dot_tile::<S, 1, 1>($($args),*),
                _ => unreachable!("dot tiles are at most 4 x 4"),
            }
        };
    }
    for i0 in (0..m).step_by(MR) {
        let rows = MR.min(m - i0);
        for j0 in (0..n).step_by(NR) {
            let cols = NR.min(n - j0);
            // SAFETY: rows i0..i0+rows of A, j0..j0+cols of B and that block of C are in bounds
            // (the caller's contract), which is what dot_tile needs.
            unsafe {
                tile!(
                    rows,
                    cols,
                    k,
                    a.add(i0 * k),
                    b.add(j0 * k),
                    c.add(i0 * n + j0),
                    n,
                    accumulate
                );
            }
        }
    }
}

/// Runs the product with the kernels of `S`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set, and the slices hold at least the elements the dimensions
/// need (checked by the safe callers).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm<S: Simd>(
    layout: Layout,
    m: usize,
    n: usize,
    k: usize,
    a: &[S::E],
    b: &[S::E],
    c: &mut [S::E],
    accumulate: bool,
) {
    let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    // SAFETY: forwarded from this function's contract; the strides describe exactly the layouts
    // whose sizes the callers checked.
    unsafe {
        match layout {
            Layout::Plain => gemm_outer::<S>(m, n, k, a, k, 1, b, c, accumulate),
            Layout::TransposeLhs => gemm_outer::<S>(m, n, k, a, 1, m, b, c, accumulate),
            Layout::TransposeRhs => gemm_dot::<S>(m, n, k, a, b, c, accumulate),
        }
    }
}

macro_rules! entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; slice lengths checked.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            layout: Layout,
            m: usize,
            n: usize,
            k: usize,
            a: &[$e],
            b: &[$e],
            c: &mut [$e],
            accumulate: bool,
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { gemm::<$simd>(layout, m, n, k, a, b, c, accumulate) }
        }
    };
}

entry!(gemm_avx512_f32, Avx512F32, f32, "avx512f");
entry!(gemm_avx512_f64, Avx512F64, f64, "avx512f");
entry!(gemm_avx2_f32, Avx2F32, f32, "avx2,fma");
entry!(gemm_avx2_f64, Avx2F64, f64, "avx2,fma");

/// Panics unless the slices hold exactly the elements of their layouts.
fn check_lengths<E>(m: usize, n: usize, k: usize, a: &[E], b: &[E], c: &[E]) {
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "operand lengths {}, {}, {} do not fit an {m}x{k} by {k}x{n} product",
        a.len(),
        b.len(),
        c.len()
    );
}

/// `C = op(A)·op(B)` (or `C +=` when `accumulate`) in `f32` with `isa`.
///
/// # Panics
///
/// When a slice's length does not fit the dimensions, or when the CPU does not have `isa`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_f32(
    isa: Isa,
    layout: Layout,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    accumulate: bool,
) {
    check_lengths(m, n, k, a, b, c);
    assert_isa(isa);
    match isa {
        // SAFETY: the lengths are checked above and the instruction set is present.
        Isa::Avx512 => unsafe { gemm_avx512_f32(layout, m, n, k, a, b, c, accumulate) },
        // SAFETY: as above.
        Isa::Avx2Fma => unsafe { gemm_avx2_f32(layout, m, n, k, a, b, c, accumulate) },
    }
}

/// `C = op(A)·op(B)` (or `C +=` when `accumulate`) in `f64` with `isa`.
///
/// # Panics
///
/// When a slice's length does not fit the dimensions, or when the CPU does not have `isa`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_f64(
    isa: Isa,
    layout: Layout,
    m: usize,
    n: usize,
    k: usize,
    a: &[f64],
    b: &[f64],
    c: &mut [f64],
    accumulate: bool,
) {
    check_lengths(m, n, k, a, b, c);
    assert_isa(isa);
    match isa {
        // SAFETY: the lengths are checked above and the instruction set is present.
        Isa::Avx512 => unsafe { gemm_avx512_f64(layout, m, n, k, a, b, c, accumulate) },
        // SAFETY: as above.
        Isa::Avx2Fma => unsafe { gemm_avx2_f64(layout, m, n, k, a, b, c, accumulate) },
    }
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

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Deterministic values in [-1, 1) that are not round numbers.
    fn values(len: usize, seed: u64) -> Vec<f64> {
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
                |l, m, n, k, a, b, c, acc| gemm_f32(isa, l, m, n, k, a, b, c, acc),
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
                |l, m, n, k, a, b, c, acc| gemm_f64(isa, l, m, n, k, a, b, c, acc),
                |x| x,
                1e-13,
            );
        }
    }

    #[test]
    #[should_panic(expected = "do not fit")]
    fn wrong_lengths_are_refused_before_any_access() {
        let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
        let mut c = [0.0_f32; 4];
        gemm_f32(
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
}
