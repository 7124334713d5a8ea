//! The packed matrix product: one register-blocked micro-kernel for every layout and element
//! type, fed by panels of `B` packed into a stack buffer. Applies: products with enough rows
//! (and, for `A·Bᵀ`, columns) to repay the copy ([`path`]); `f32` on AVX-512 or AVX2, `f64` on
//! AVX2.
//!
//! # Blocking
//!
//! ```text
//! for rows in blocks whose A fits L2      (the two outer loops swap places on
//!   for pc in 0..k step KC               AVX2: Simd::PACKED_K_BLOCKS_INSIDE)
//!     for jc in 0..n step NC             B[pc.., jc..] packed: NC/NR micro-panels of KC x NR
//!       for ir in rows step MR           A's rows read in place
//!         for jr in 0..NC step NR        the MR x NR register tile of C
//! ```
//!
//! Every element of `C` is one chain of fused multiply-adds over `p = 0, 1, .., k - 1` in
//! order, started from `C` (accumulating) or from `0`: a tile loads `C` into its accumulators
//! for every k block after the first. The bits therefore depend on nothing but `k`'s order: not
//! on `KC`, `NC`, the tile, nor on how the rows are split across threads; and they are the bits
//! of the unpacked outer-product tiles (`super::gemm_unpacked`) too. (`A·Bᵀ`'s dot-product tiles sum in
//! another order: a product keeps one path, decided by its whole shape.)

use core::mem::MaybeUninit;
use core::ops::Range;

use super::gemm_unpacked::outer_tile_edge;
use super::simd::{Simd, array_from, column_masks};
use crate::kernels::shape::Product;

/// The kernels a product runs on, chosen from its whole shape (never from the rows one call
/// computes: the dot-product path adds in another order, and every split of the rows across
/// threads must give the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Packed panels of `B`, the micro-kernel.
    Packed,
    /// Outer-product tiles reading `B` in place (`A·B`, `Aᵀ·B`): same bits as `Packed`.
    Outer,
    /// Dot-product tiles (`A·Bᵀ`), matrix-vector products included.
    Dot,
}

/// From this many rows of `C` on, `A·B` and `Aᵀ·B` pack `B`: below, each column panel of `B` is
/// used by too few row tiles to repay the copy. Measured on a Xeon (2026-11-29), both
/// instruction sets: from 24 to 36 rows the unpacked tiles win by 0-55% (32 x 147 x 96, a
/// 7 x 7 stride-2 stem's product: 107 -> 153 GFLOP/s with AVX-512, 77 -> 95 with AVX2;
/// `Aᵀ·B` 32 x 64 x 784: 110 -> 150 and 70 -> 100); at 40 and 48 rows and more the two are
/// within the noise. (On Zen 3 with AVX2, where this was first tuned, the packed tiles won from
/// 24 rows; not measured there again.)
const PACK_MIN_ROWS: usize = 40;

/// ... or from this many, when `B`'s rows are a multiple of 4 KiB apart: the unpacked tiles
/// then read a column strip of `B` whose lines all fall into one L1 set, and alias with the
/// stores to `C` (32x1024x27: 45 GFLOP/s unpacked, 66 packed; at 8 rows 32 and 40).
const PACK_MIN_ROWS_ALIASED: usize = 8;

/// Up to this many steps `A·B` and `Aᵀ·B` stay unpacked at any `m` (a tile's few steps cannot
/// repay packing: 48x784x25, 85 GFLOP/s unpacked, 79 packed) unless `B`'s rows are a multiple
/// of 2 KiB apart, where the strips collide in L1 (128x512x10: 41 unpacked, 72 packed).
const UNPACKED_MAX_K: usize = 32;

/// The path of an `m x n x k` product with `layout` and elements of `element_size` bytes.
pub(super) const fn path(
    layout: Product,
    m: usize,
    n: usize,
    k: usize,
    element_size: usize,
) -> Path {
    match layout {
        Product::Plain | Product::TransposeLhs => {
            let stride = n * element_size;
            if stride.is_multiple_of(4096) && m >= PACK_MIN_ROWS_ALIASED
                || m >= PACK_MIN_ROWS && (k > UNPACKED_MAX_K || stride.is_multiple_of(2048))
            {
                Path::Packed
            } else {
                Path::Outer
            }
        }
        Product::TransposeRhs => {
            if n >= PACK_MIN_COLUMNS_TRANSPOSED
                && (m >= PACK_MIN_ROWS_TRANSPOSED || m >= 3 && k < DOT_MIN_K)
            {
                Path::Packed
            } else {
                Path::Dot
            }
        }
    }
}

/// From this many rows of `C` on, `A·Bᵀ` packs `Bᵀ` (a transposing copy) rather than taking dot
/// tiles (12x512x784: equal; 24 rows: 75 packed, 62 dot).
const PACK_MIN_ROWS_TRANSPOSED: usize = 12;

/// ... or from 3 rows when `k` is below this: dot tiles of few steps spend most of their time
/// on masked tails and horizontal sums (6x784x25: 17 GFLOP/s dot, 42 packed).
const DOT_MIN_K: usize = 64;

/// Below this many columns `A·Bᵀ` keeps the dot tiles: a packed panel would be mostly padding
/// (48x10x512: 70 GFLOP/s dot, 40 packed).
const PACK_MIN_COLUMNS_TRANSPOSED: usize = 16;

/// `k` steps per block: a `PACKED_KC x NR` micro-panel of `B` is 16 KiB (`f32`, `NR = 16`).
pub(super) const PACKED_KC: usize = 256;

/// Bytes of `A` (its rows times one k block) that the column blocks pass over while it stays in
/// L2 (half of Zen 3's 512 KiB, so that the packed `B`, `C` and the next block fit beside it).
const A_L2_BYTES: usize = 256 * 1024;

/// Bytes of `A` stored `k x m` that one k block of a row tile spans (`kc` rows of `m`): each
/// step of the micro-kernel is on another line, and past about 48 pages the L1 TLB misses.
/// [`kc_for`] cuts `kc` to fit.
const TRANSPOSED_A_SPAN: usize = 192 * 1024;

/// The k block of the packed path: [`PACKED_KC`], or less for `A` stored `k x m` with long
/// rows (512 x 512 x 512 `Aᵀ·B`: 73 -> 80 GFLOP/s with 96 steps). A function of the whole
/// product's layout and `m`, so the same for every row (and the bits do not depend on it
/// anyway).
const fn kc_for(layout: Product, m: usize, element_size: usize) -> usize {
    match layout {
        Product::TransposeLhs => {
            let kc = TRANSPOSED_A_SPAN / (m * element_size);
            if kc < 64 {
                64
            } else if kc > PACKED_KC {
                PACKED_KC
            } else {
                kc
            }
        }
        Product::Plain | Product::TransposeRhs => PACKED_KC,
    }
}

/// Bytes of the packed block of `B`, the one stack buffer of this path (in a never-inlined
/// entry, so in no other path's frame).
pub(super) const PACKED_BLOCK_BYTES: usize = 48 * 1024;

/// One `MR x NR` tile of `C` (`NR = NV · LANES`): `C[r][j] (+)= Σ_p A(r, p) · panel[p][j]`
/// over `kc` steps, each element one chain of fused multiply-adds in `p`'s order.
///
/// `A(r, p)` is at `a[r] + p·a_k`; the packed panel holds `kc` rows of `NR` elements. Row `r`
/// of `C` is at `c + r·c_row`; only the first `rows` rows and `cols` columns are read (when
/// `load_c`) and written. The accumulators start from `C` when `load_c`, else from zero.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `a[r] + p·a_k` is readable for every `r < MR`, `p < kc`
/// (rows past `rows` may repeat a valid row: their results are dropped); the panel has
/// `kc · NR` initialized elements; the `rows x cols` block of `C` is valid for reads and writes.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn micro_kernel<S: Simd, const MR: usize, const NV: usize>(
    kc: usize,
    a: [*const S::E; MR],
    a_k: usize,
    panel: *const S::E,
    c: *mut S::E,
    c_row: usize,
    rows: usize,
    cols: usize,
    load_c: bool,
) {
    let lanes = S::LANES;
    let nr = NV * lanes;
    // SAFETY (whole body): the instruction set is present; every access is to an element the
    // caller vouches for. Edge vectors of C are addressed with `wrapping_add` and reached only
    // through masks selecting in-bounds lanes.
    unsafe {
        let full = rows == MR && cols == nr;
        let masks = column_masks::<S, NV>(cols);
        let mut acc = [[S::zero(); NV]; MR];
        if load_c {
            for (r, acc_row) in acc.iter_mut().enumerate() {
                if full {
                    for (v, acc_v) in acc_row.iter_mut().enumerate() {
                        *acc_v = S::load(c.add(r * c_row + v * lanes));
                    }
                } else if r < rows {
                    for (v, acc_v) in acc_row.iter_mut().enumerate() {
                        *acc_v = S::load_masked(c.wrapping_add(r * c_row + v * lanes), masks[v]);
                    }
                }
            }
        }
        let mut b = panel;
        let mut off = 0;
        for _ in 0..kc {
            let mut b_v = [S::zero(); NV];
            for (v, b_v) in b_v.iter_mut().enumerate() {
                *b_v = S::load(b.add(v * lanes));
            }
            for (acc_row, a_r) in acc.iter_mut().zip(a.iter()) {
                let a_rp = S::splat(*a_r.add(off));
                for (acc_v, &b_v) in acc_row.iter_mut().zip(b_v.iter()) {
                    *acc_v = S::fma(a_rp, b_v, *acc_v);
                }
            }
            b = b.add(nr);
            off += a_k;
        }
        for (r, acc_row) in acc.iter().enumerate() {
            if full {
                for (v, &acc_v) in acc_row.iter().enumerate() {
                    S::store(c.add(r * c_row + v * lanes), acc_v);
                }
            } else if r < rows {
                for (v, &acc_v) in acc_row.iter().enumerate() {
                    S::store_masked(c.wrapping_add(r * c_row + v * lanes), masks[v], acc_v);
                }
            }
        }
    }
}

/// Packs `B`'s block of steps `pc..pc + kc` and columns `jc..jc + nc` into micro-panels of
/// `kc x NR`: panel `q`, row `p`, column `jj` holds `op(B)[pc + p][jc + q·NR + jj]`, zero past
/// column `nc`. `B` is `k x n` (`transposed == false`) or `n x k` (`transposed`).
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `b` holds the whole `B`; the block is inside it;
/// `dst` has room for `nc.div_ceil(NR) · NR · kc` elements.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pack_b<S: Simd, const NV: usize>(
    b: &[S::E],
    transposed: bool,
    n: usize,
    k: usize,
    pc: usize,
    kc: usize,
    jc: usize,
    nc: usize,
    dst: *mut S::E,
) {
    let lanes = S::LANES;
    let nr = NV * lanes;
    let b = b.as_ptr();
    // SAFETY (whole body): reads stay in the block (rows pc..pc+kc, columns jc..jc+nc of
    // op(B)), which the caller vouches is inside `b`; writes stay in the
    // nc.div_ceil(nr) · nr · kc elements of `dst`.
    unsafe {
        if !transposed {
            // Row by row of B: each row's nc contiguous elements spread over the panels.
            let full = nc / nr;
            let w = nc % nr;
            let masks = column_masks::<S, NV>(w);
            for p in 0..kc {
                let src = b.add((pc + p) * n + jc);
                for q in 0..full {
                    for v in 0..NV {
                        let x = S::load(src.add(q * nr + v * lanes));
                        S::store(dst.add(q * nr * kc + p * nr + v * lanes), x);
                    }
                }
                if w > 0 {
                    for (v, &mask) in masks.iter().enumerate() {
                        let x = S::load_masked(src.wrapping_add(full * nr + v * lanes), mask);
                        S::store(dst.add(full * nr * kc + p * nr + v * lanes), x);
                    }
                }
            }
            return;
        }
        for (q, j0) in (jc..jc + nc).step_by(nr).enumerate() {
            let w = nr.min(jc + nc - j0);
            let panel = dst.add(q * nr * kc);
            {
                // Panel row p, column jj is B[j0 + jj][pc + p]: transposed by LANES x LANES
                // blocks, the edges element by element.
                let src = b.add(j0 * k + pc);
                let full_groups = w / lanes;
                let full_steps = kc - kc % lanes;
                for g in 0..full_groups {
                    for p0 in (0..full_steps).step_by(lanes) {
                        S::transpose_block(
                            src.add(g * lanes * k + p0),
                            k,
                            panel.add(p0 * nr + g * lanes),
                            nr,
                        );
                    }
                    for p in full_steps..kc {
                        for jj in g * lanes..(g + 1) * lanes {
                            *panel.add(p * nr + jj) = *src.add(jj * k + p);
                        }
                    }
                }
                for p in 0..kc {
                    for jj in full_groups * lanes..nr {
                        *panel.add(p * nr + jj) = if jj < w {
                            *src.add(jj * k + p)
                        } else {
                            S::E::default()
                        };
                    }
                }
            }
        }
    }
}

/// The k blocks of a product with `k` steps: `k.div_ceil(KC)` blocks of (nearly) equal size,
/// `kc` steps each but the last; a function of `k` and `kc_max` (the product's), so the same for
/// every row.
#[inline(always)]
const fn k_block(k: usize, kc_max: usize) -> usize {
    let blocks = k.div_ceil(kc_max);
    if blocks == 0 { 1 } else { k.div_ceil(blocks) }
}

/// Rows `rows` of `C (+)= op(A)·op(B)` through packed panels of `B`; `c` holds just those rows.
/// `B`'s block is packed into a stack buffer of `BLOCK` elements (`NC` is as many whole
/// micro-panels of a k block as it holds); `A` is read in place (packing it measured no faster on
/// Zen 3: with `B`'s block bounded by the stack, a packed panel of `A` serves only `NC / NR`
/// tiles before it must be packed again). Rows are taken in blocks whose `A` stays in L2 while
/// the column blocks pass over it.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices hold the whole operands (`a`: `m x k` or, for
/// `TransposeLhs`, `k x m`; `b`: `k x n` or, for `TransposeRhs`, `n x k`) and `c` exactly the
/// rows `rows` of `C`; `k > 0`, `rows` inside `0..m`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_packed<S: Simd, const MR: usize, const NV: usize, const BLOCK: usize>(
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
    // The edge tiles (`outer_tile_edge`) are two vectors wide, as the packed panels.
    const { assert!(MR <= 16 && NV == 2) };
    // The entries take `S::PACKED_ROWS`; a test takes more rows than `S::OUTER_ROWS` on AVX2
    // too, where the micro-kernel's masked rows otherwise never run.
    debug_assert!(MR >= S::PACKED_ROWS && NV == S::PACKED_VECTORS);
    let nr = NV * S::LANES;
    let kc_block = k_block(k, kc_for(layout, m, size_of::<S::E>()));
    // Columns per packed block: as many whole micro-panels of kc_block steps as BLOCK holds
    // (kc_block <= PACKED_KC, and BLOCK holds a panel of PACKED_KC, checked at compile time by
    // the entries).
    assert!(
        kc_block * nr <= BLOCK,
        "a k block of {kc_block} does not fit the buffer"
    );
    let nc_max = BLOCK / (kc_block * nr) * nr;
    let mut block = [const { MaybeUninit::<S::E>::uninit() }; BLOCK];
    let block = block.as_mut_ptr().cast::<S::E>();
    // A(i, p) at a + i·a_row + p·a_k.
    let (a_row, a_k) = match layout {
        Product::TransposeLhs => (1, m),
        Product::Plain | Product::TransposeRhs => (k, 1),
    };
    // Rows per L2 block: A's kc steps of them fill about A_L2_BYTES, in whole tiles.
    let l2_rows = (A_L2_BYTES / size_of::<S::E>() / kc_block / MR).max(1) * MR;
    let transposed = layout == Product::TransposeRhs;
    let (a_ptr, c_ptr) = (a.as_ptr(), c.as_mut_ptr());
    // Every k block of every block of rows, in the order the instruction set prefers; each
    // packs the column blocks of B in turn, each passed over by the rows' tiles.
    let k_blocks = k.div_ceil(kc_block);
    let row_blocks = rows.len().div_ceil(l2_rows);
    for outer in 0..k_blocks * row_blocks {
        let (row_block, k_block) = if S::PACKED_K_BLOCKS_INSIDE {
            (outer / k_blocks, outer % k_blocks)
        } else {
            (outer % row_blocks, outer / row_blocks)
        };
        let l2_start = rows.start + row_block * l2_rows;
        let l2_end = rows.end.min(l2_start + l2_rows);
        let pc = k_block * kc_block;
        let kc = kc_block.min(k - pc);
        let load_c = accumulate || pc > 0;
        for jc in (0..n).step_by(nc_max) {
            let nc = nc_max.min(n - jc);
            // SAFETY: the block pc..pc+kc x jc..jc+nc is inside op(B); the buffer holds
            // nc_max / nr panels of kc_block x nr >= nc.div_ceil(nr) · nr · kc elements.
            unsafe { pack_b::<S, NV>(b, transposed, n, k, pc, kc, jc, nc, block) };
            for i0 in (l2_start..l2_end).step_by(MR) {
                let tile_rows = MR.min(l2_end - i0);
                // Rows past the edge repeat row i0 (read, never stored).
                let a_rows: [*const S::E; MR] = array_from(|r| {
                    let i = if r < tile_rows { i0 + r } else { i0 };
                    a_ptr.wrapping_add(i * a_row + pc * a_k)
                });
                for (q, j0) in (jc..jc + nc).step_by(nr).enumerate() {
                    // SAFETY: A's rows i0.. (or i0 repeated) for steps pc..pc+kc are in
                    // `a`; panel q of B was packed above with kc rows; the tile's rows
                    // i0..i0+tile_rows (of which `c` holds rows.start..) and columns
                    // j0..j0+cols are in C.
                    unsafe {
                        let cols = nr.min(jc + nc - j0);
                        let c_tile = c_ptr.add((i0 - rows.start) * n + j0);
                        let panel = block.add(q * nr * kc);
                        if tile_rows < MR && tile_rows <= S::OUTER_ROWS {
                            // An edge of fewer rows: the outer-product tile of its exact
                            // height on the packed panel (the same chain of multiply-adds).
                            outer_tile_edge::<S>(
                                tile_rows,
                                kc,
                                a_ptr.add(i0 * a_row + pc * a_k),
                                a_row,
                                a_k,
                                panel,
                                nr,
                                c_tile,
                                n,
                                cols,
                                load_c,
                            );
                        } else {
                            micro_kernel::<S, MR, NV>(
                                kc, a_rows, a_k, panel, c_tile, n, tile_rows, cols, load_c,
                            );
                        }
                    }
                }
            }
        }
    }
}
