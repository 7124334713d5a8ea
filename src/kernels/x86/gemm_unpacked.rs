//! The matrix products that read their operands in place: small products, matrix-vector products
//! and the few rows of a batch-1 layer, where packing `B` would not pay (see
//! `super::gemm_packed::path`).
//!
//! Register-blocked micro-kernels cover the three layouts. A product with enough rows (and, for
//! `A·Bᵀ`, columns) to repay the copy takes the packed path (`super::gemm_packed`: panels of `B`
//! packed into a stack buffer, one micro-kernel for every layout); the others read their
//! operands in place:
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
//!
//! Edges (sizes that are not multiples of the tile) use the same kernels with masked loads and
//! stores, so every shape takes the fast path.

use core::arch::x86_64::*;
use core::ops::Range;

use super::simd::{Simd, column_masks};
use crate::kernels::shape::Product;

/// Rows of the `k` dimension per block of the outer-product kernel: a `KC x NR` panel of `B`
/// (16 KiB for AVX-512 `f32`) stays in L1 while the row blocks of `A` pass over it.
pub(super) const KC: usize = 128;

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
pub(super) unsafe fn outer_tile<S: Simd, const MR: usize, const NV: usize, const FULL: bool>(
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
        let masks = column_masks::<S, NV>(cols);
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
#[allow(unused_imports)]
pub(super) use outer_tile_rows;

/// [`outer_tile`] with `rows` rows (`1..=S::OUTER_ROWS`), `FULL` when `cols == 2 · LANES`: the
/// packed path's edge rows, with `B` a packed panel (`b_row = 2 · LANES`).
///
/// # Safety
///
/// As [`outer_tile`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn outer_tile_edge<S: Simd>(
    rows: usize,
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        if cols == 2 * S::LANES {
            outer_tile_rows!(
                rows, true, kc, a, a_row, a_k, b, b_row, c, c_row, cols, load_c
            );
        } else {
            outer_tile_rows!(
                rows, false, kc, a, a_row, a_k, b, b_row, c, c_row, cols, load_c
            );
        }
    }
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
pub(super) unsafe fn gemm_outer<S: Simd>(
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

/// How many elements ahead the single-row dot tiles prefetch each row of `B` (a prefetch never
/// faults, so running past the end of a row or of `B` is harmless).
pub(super) const PREFETCH_AHEAD: usize = 64;

/// One `MR x NR` dot-product tile: `C[r][j] (+)= Σ_p A[r][p] · B[j][p]` over `k` steps, `A` and
/// `B` with row stride `k`, `C` with row stride `c_row`.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; rows `0..MR` of `A`, `0..NR` of `B` (each `k` long) and the
/// `MR x NR` block of `C` are in bounds.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // indices mirror the register tile acc[r][j]
pub(super) unsafe fn dot_tile<S: Simd, const MR: usize, const NR: usize>(
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
pub(super) unsafe fn gemm_dot<S: Simd>(
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
pub(super) unsafe fn run<S: Simd>(
    layout: Product,
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
            Product::Plain => gemm_outer::<S>(rows, n, k, a, k, 1, b, c, accumulate),
            Product::TransposeLhs => gemm_outer::<S>(rows, n, k, a, 1, m, b, c, accumulate),
            Product::TransposeRhs => gemm_dot::<S>(rows, n, k, a, b, c, accumulate),
        }
    }
}
