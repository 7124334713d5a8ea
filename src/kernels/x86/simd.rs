//! Vector operations on one element type with one instruction set: the [`Simd`] trait every
//! x86 kernel is written against, its AVX-512F and AVX2+FMA implementations for `f32` and
//! `f64`, and small lane helpers.

use core::arch::x86_64::*;

use super::transpose_block::{
    transpose4_pd, transpose8_pd, transpose8_ps, transpose8_registers_ps, transpose16_ps,
};
use core::mem::MaybeUninit;

use crate::kernels::shape::Epilogue;

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

/// Vector operations on one element type with one instruction set.
///
/// # Safety
///
/// Every method may only be called on a CPU that has the instruction set of the implementation
/// (the `unsafe fn` + `#[target_feature]` pairs below), with pointers valid as each method states.
pub(super) trait Simd {
    type E: Copy + Default + core::ops::Add<Output = Self::E>;
    type V: Copy;
    type Mask: Copy;
    const LANES: usize;
    /// Rows of the packed product's register tile (`MR`, see `super::gemm_packed`).
    const PACKED_ROWS: usize;
    /// Vectors per row of that tile (`NR = PACKED_VECTORS · LANES` columns).
    const PACKED_VECTORS: usize;
    /// Whether the packed product takes a block of rows through all its k blocks before the
    /// next (`C`'s rows stay in L2 between their k blocks), rather than each k block through all
    /// the rows. The bits are the same either way (each element's chain is in `p`'s order).
    const PACKED_K_BLOCKS_INSIDE: bool;
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
    /// column for kernels of 4 and 5 ([`COLUMN_TILE_ROWS`](super::weight_grad_positions::COLUMN_TILE_ROWS) filters by `K` steps): their 19
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
    /// Copies a `LANES x LANES` block transposed: `dst[j·dst_row + i] = src[i·src_row + j]`.
    /// Every element so addressed must be valid (read in `src`, written in `dst`).
    unsafe fn transpose_block(
        src: *const Self::E,
        src_row: usize,
        dst: *mut Self::E,
        dst_row: usize,
    );
    /// `f()` in a function of its own, never inlined, compiled for this instruction set (`f`'s
    /// code is inlined there). A kernel's run loop calls its tiles through it, so that each tile
    /// size is a function LLVM optimizes on its own: with every tile size inlined into one
    /// function, LLVM's loop passes on it grew faster than its size (the flat convolution's
    /// AVX-512 entry took 40 s of a 75 s release build).
    ///
    /// # Safety
    ///
    /// The CPU has this instruction set.
    unsafe fn outlined<R>(f: impl FnOnce() -> R) -> R;
    /// Stores `rows` transposed: lane `l < count` of `rows[i]` to `out[l·stride + i]`.
    /// `rows.len() <= 16`, `count <= LANES`, and those elements must be valid for writing.
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
pub(super) unsafe fn store_transposed_lanes<S: Simd + ?Sized>(
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

/// The masks of `NV` vectors covering the first `cols` columns of a row of `NV · LANES`: whole
/// vectors, then the first lanes of one, then none.
///
/// # Safety
///
/// The CPU has `S`'s instruction set.
#[inline(always)]
pub(super) unsafe fn column_masks<S: Simd, const NV: usize>(cols: usize) -> [S::Mask; NV] {
    // SAFETY: the caller's contract.
    array_from(|v| unsafe { S::mask(cols.saturating_sub(v * S::LANES).min(S::LANES)) })
}

/// `v` after `epilogue`, lane by lane as [`Epilogue::apply`] does, bit for bit.
///
/// # Safety
///
/// The CPU has `S`'s instruction set.
#[inline(always)]
pub(super) unsafe fn finish<S: Simd>(v: S::V, epilogue: Epilogue) -> S::V {
    match epilogue {
        Epilogue::Identity => v,
        // SAFETY: the caller's contract.
        Epilogue::Relu => unsafe { S::relu(v) },
    }
}

macro_rules! avx512 {
    ($name:ident, $e:ty, $v:ty, $mask:ty, $lanes:expr, $suffix:ident, $transpose:ident) => {
        #[derive(Clone, Copy)]
        pub(super) struct $name;

        impl Simd for $name {
            type E = $e;
            type V = $v;
            type Mask = $mask;
            const LANES: usize = $lanes;
            // 24 accumulators, 2 vectors of the packed panel and a broadcast (of 32 registers;
            // 14 rows would leave one spare and invite spills).
            const PACKED_ROWS: usize = 12;
            const PACKED_VECTORS: usize = 2;
            // Measured on a Xeon: 5-15% faster on 512 x 512 x 512 and the wide MLP's products
            // (1000 x 784 x 512: 124-127 -> 136-138 GFLOP/s). Otherwise each k block passes
            // over the whole of C, which falls out of L2 between them.
            const PACKED_K_BLOCKS_INSIDE: bool = true;
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
            unsafe fn transpose_block(src: *const $e, src_row: usize, dst: *mut $e, dst_row: usize) {
                // SAFETY: the caller's contract; every CPU with AVX-512F has AVX2 and FMA,
                // which the transposes take.
                unsafe { $transpose(src, src_row, dst, dst_row) }
            }
            #[inline(never)]
            #[target_feature(enable = "avx512f")]
            unsafe fn outlined<R>(f: impl FnOnce() -> R) -> R {
                f()
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
#[allow(unused_imports)]
pub(super) use avx512;

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
#[allow(unused_imports)]
pub(super) use pastey_ps;
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
#[allow(unused_imports)]
pub(super) use pastey_pd;

/// [`Simd::rotate_lanes`] for `f32` on AVX-512: one permute by computed indices.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn rotate_lanes_avx512_ps(v: __m512, by: usize) -> __m512 {
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // `by < 16`: the cast keeps it.
    let turned = _mm512_add_epi32(lanes, _mm512_set1_epi32(by as i32));
    _mm512_permutexvar_ps(_mm512_and_si512(turned, _mm512_set1_epi32(15)), v)
}

/// [`Simd::rotate_lanes`] for `f64` on AVX-512.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn rotate_lanes_avx512_pd(v: __m512d, by: usize) -> __m512d {
    let lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    // `by < 8`: the cast keeps it.
    let turned = _mm512_add_epi64(lanes, _mm512_set1_epi64(by as i64));
    _mm512_permutexvar_pd(_mm512_and_si512(turned, _mm512_set1_epi64(7)), v)
}

/// [`Simd::store_transposed`] for `f32` on AVX2: the rows eight at a time (zeros past
/// `rows.len()`), transposed in registers, each column stored whole or masked to the rows
/// there are. A lane at a time through a buffer, the filters-in-lanes forward pass spent as
/// long storing as multiplying on 16 steps.
///
/// # Safety
///
/// As [`Simd::store_transposed`].
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn store_transposed_avx2_ps(
    rows: &[__m256],
    out: *mut f32,
    stride: usize,
    count: usize,
) {
    for (block, rows) in rows.chunks(8).enumerate() {
        let r: [__m256; 8] = array_from(|i| rows.get(i).copied().unwrap_or(_mm256_setzero_ps()));
        let columns = transpose8_registers_ps(r);
        let mask = mask_avx2_ps(rows.len());
        for (lane, &column) in columns[..count].iter().enumerate() {
            // SAFETY: lanes i < rows.len() of column `lane` go to out[lane·stride + 8·block +
            // i], valid for writing (the caller's contract); the other lanes are masked off.
            unsafe {
                let to = out.add(lane * stride + 8 * block);
                if rows.len() == 8 {
                    _mm256_storeu_ps(to, column);
                } else {
                    _mm256_maskstore_ps(to, mask, column);
                }
            }
        }
    }
}

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
pub(super) unsafe fn store_transposed_avx512_ps(
    rows: &[__m512],
    out: *mut f32,
    stride: usize,
    count: usize,
) {
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

/// Four horizontal sums at once: two rounds of 128-bit block shuffles leave each input's partial
/// sums in one block, two in-block permutes finish them, one permute gathers the four results.
/// About 9 instructions instead of 4 separate reductions' 32.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn sum4_avx512_ps([a, b, c, d]: [__m512; 4]) -> [f32; 4] {
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
pub(super) fn sum4_avx512_pd([a, b, c, d]: [__m512d; 4]) -> [f64; 4] {
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

avx512!(Avx512F32, f32, __m512, __mmask16, 16, ps, transpose16_ps);
avx512!(Avx512F64, f64, __m512d, __mmask8, 8, pd, transpose8_pd);

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
#[allow(unused_imports)]
pub(super) use avx2_ps;
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
#[allow(unused_imports)]
pub(super) use avx2_pd;

/// The horizontal sum of 8 floats: add the two 128-bit halves, then two horizontal adds.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn sum_avx2_ps(v: __m256) -> f32 {
    let halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let pairs = _mm_hadd_ps(halves, halves);
    _mm_cvtss_f32(_mm_hadd_ps(pairs, pairs))
}

/// The horizontal sum of 4 doubles.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn sum_avx2_pd(v: __m256d) -> f64 {
    let halves = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
    _mm_cvtsd_f64(_mm_hadd_pd(halves, halves))
}

/// A mask selecting the first `n` of 8 32-bit lanes (all ones where lane < n).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn mask_avx2_ps(n: usize) -> __m256i {
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// A mask selecting the first `n` of 4 64-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn mask_avx2_pd(n: usize) -> __m256i {
    _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), _mm256_setr_epi64x(0, 1, 2, 3))
}

macro_rules! avx2 {
    ($name:ident, $e:ty, $v:ty, $lanes:expr, $ops:ident, $sum:ident, $mask:ident, $fma_masked:ident, $rotate:ident, $transpose:ident, $store_transposed:expr) => {
        #[derive(Clone, Copy)]
        pub(super) struct $name;

        impl Simd for $name {
            type E = $e;
            type V = $v;
            type Mask = __m256i;
            const LANES: usize = $lanes;
            // 12 accumulators, 2 vectors of the packed panel and a broadcast: 15 of the 16
            // registers.
            const PACKED_ROWS: usize = 6;
            const PACKED_VECTORS: usize = 2;
            // The same Xeon on this path: 3-7% slower with the k blocks inside.
            const PACKED_K_BLOCKS_INSIDE: bool = false;
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
            unsafe fn store_transposed(rows: &[$v], out: *mut $e, stride: usize, count: usize) {
                // SAFETY: the caller's contract.
                unsafe { $store_transposed(rows, out, stride, count) }
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
            #[inline]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn transpose_block(src: *const $e, src_row: usize, dst: *mut $e, dst_row: usize) {
                // SAFETY: the caller's contract.
                unsafe { $transpose(src, src_row, dst, dst_row) }
            }
            #[inline(never)]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn outlined<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
        }
    };
}
#[allow(unused_imports)]
pub(super) use avx2;

avx2!(
    Avx2F32,
    f32,
    __m256,
    8,
    avx2_ps,
    sum_avx2_ps,
    mask_avx2_ps,
    fma_masked_avx2_ps,
    rotate_lanes_avx2_ps,
    transpose8_ps,
    store_transposed_avx2_ps
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
    rotate_lanes_avx2_pd,
    transpose4_pd,
    store_transposed_lanes::<Avx2F64>
);

/// [`Simd::fma_masked`] for `f32` on AVX2: the product, then a blend.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn fma_masked_avx2_ps(a: __m256, b: __m256, c: __m256, m: __m256i) -> __m256 {
    _mm256_blendv_ps(c, _mm256_fmadd_ps(a, b, c), _mm256_castsi256_ps(m))
}

/// [`Simd::fma_masked`] for `f64` on AVX2.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn fma_masked_avx2_pd(a: __m256d, b: __m256d, c: __m256d, m: __m256i) -> __m256d {
    _mm256_blendv_pd(c, _mm256_fmadd_pd(a, b, c), _mm256_castsi256_pd(m))
}

/// [`Simd::rotate_lanes`] for `f32` on AVX2.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn rotate_lanes_avx2_ps(v: __m256, by: usize) -> __m256 {
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
pub(super) fn rotate_lanes_avx2_pd(v: __m256d, by: usize) -> __m256d {
    // `by < 4`: the cast keeps it; lane pair i takes the pair (i + by) % 4.
    let pairs = _mm256_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6);
    let turned = _mm256_and_si256(
        _mm256_add_epi32(pairs, _mm256_set1_epi32(2 * by as i32)),
        _mm256_set1_epi32(7),
    );
    let halves = _mm256_add_epi32(turned, _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1));
    _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(v), halves))
}
