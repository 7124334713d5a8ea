//! Winograd's minimal filtering down the columns, `F(m, r)` with `m = 9 - r` on eight points:
//! the forward pass of a stride-1 convolution with few filters, the output positions of a row
//! in the vector lanes (LeNet-5's first layer: one channel, 6 filters, 5 x 5, 28 x 28 outputs).
//!
//! The direct kernel does `r²` multiply-adds per output, channel and filter. Here a column of
//! `m` outputs (rows `oy0..oy0 + m`, one lane each) is, for every kernel column `kx`, a 1-D
//! correlation of the column's `8` padded inputs (rows `oy0..oy0 + 8`, column `ox + kx`) with
//! the kernel's column `g[·][kx]`:
//!
//! ```text
//! y[oy0 + i][ox] = Σ_(c, kx) Σ_ν Aᵀ[i][ν] · U[c][ν][kx] · V[c][ν][ox + kx]
//! U[c][ν][kx] = Σ_ky G[ν][ky] · g[c][ky][kx]            (the filters' transforms, once per call)
//! V[c][ν][x]  = Σ_j Bᵀ[ν][j] · d[c][oy0 + j][x]          (per group of rows, shared by the filters)
//! ```
//!
//! `8·r` multiply-adds per `m` outputs, channel and filter (for 5 x 5: 10 per output, against
//! 25), and `Aᵀ` once per filter and group. A row of `V` is a whole transformed row of the
//! image, so the shift by `kx` is an unaligned load, and every lane is an output position of
//! one row: a row of 28 outputs is two vectors of 16, 28 of their 32 lanes used (the direct
//! kernel packs rows end to end and uses all of them; the multiply-adds saved outweigh that).
//!
//! The points are 0, ±1, ±2, ±1/2 and infinity ([`crate::kernels::winograd::toom_cook`]); `Bᵀ`'s
//! coefficients are multiples of 1/4, exact in either element type. The sums differ from the
//! direct kernel's in the last bits (`G`'s entries are rounded, and the transforms' coefficients
//! reach 21/4).

use super::isa::{Isa, assert_isa, lanes};
use super::simd::{Avx2F32, Avx512F32, Simd, array_from, finish};
use core::mem::MaybeUninit;

use crate::kernels::shape::{Conv, Epilogue};

/// The points of a tile: 7 finite and infinity.
pub(super) const TILE: usize = 8;

/// The finite points.
pub(super) const POINTS: [f64; TILE - 1] = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5];

/// The rows of `Bᵀ` that evaluate at `p` and `-p` (their even coefficients equal, their odd
/// ones opposite): `Bᵀ·d` at both from one sum of each parity.
pub(super) const PAIRS: [(usize, usize); 3] = [(1, 2), (3, 4), (5, 6)];

/// The width of a row of `V` (a transformed row of the padded image): the output row rounded up
/// to whole vectors, and one vector more for the shifts by `kx < r <= LANES`, whose columns past
/// the padded image are zero.
const fn transformed_row(shape: &Conv, lanes: usize) -> usize {
    shape.out_width().next_multiple_of(lanes) + lanes
}

/// The scratch elements [`conv2d_stride1_winograd_columns`] needs: the filters' transforms
/// (`[filter][c][ν][kx]`) and one group of rows' input transforms (`[c][ν][column]`).
pub(crate) const fn scratch_len(shape: &Conv, lanes: usize) -> usize {
    let Conv {
        channels,
        filters,
        kernel,
        ..
    } = *shape;
    filters * channels * TILE * kernel + channels * TILE * transformed_row(shape, lanes)
}

/// The tiles of one filter on one image with vectors of `lanes`: groups of `9 - r` output rows
/// times vectors of output columns. Each tile takes as many multiply-adds as the filter's
/// transforms (`U`), which are computed once per call: for one image the tiles repay them only
/// where there are several.
pub(crate) const fn tiles_per_filter(shape: &Conv, lanes: usize) -> usize {
    let rows_per_group = (TILE + 1).saturating_sub(shape.kernel);
    if rows_per_group == 0 {
        return 0;
    }
    shape.out_height().div_ceil(rows_per_group) * shape.out_width().div_ceil(lanes)
}

/// Whether [`conv2d_stride1_winograd_columns`] computes `shape`'s forward pass with vectors of
/// `lanes`: stride 1 (the caller's), kernels of 3 to 5 (no wider than a vector, whose lanes
/// hold a kernel row while `U` is computed), at least one output, and output rows that fill at
/// least three quarters of the vectors they take (a narrower row leaves lanes that the direct
/// kernel, which packs rows end to end, would use).
pub(crate) const fn applies(shape: &Conv, lanes: usize) -> bool {
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    shape.kernel >= 3
        && shape.kernel <= 5
        && shape.kernel <= lanes
        && shape.channels > 0
        && shape.filters > 0
        && out_height > 0
        && out_width > 0
        && 4 * out_width >= 3 * out_width.next_multiple_of(lanes)
}

/// `Bᵀ·d` of one tile's 8 rows (a vector of columns each), from the table: the rows for 0 and
/// infinity as they are, each pair `±p` from its sums of even and odd powers (`Bᵀ` has zeros
/// and repeated coefficients the compiler drops once the table is a constant).
///
/// # Safety
///
/// The CPU has `S`'s instruction set.
#[inline(always)]
pub(super) unsafe fn input_transform<S: Simd>(
    d: &[S::V; TILE],
    bt: &[[S::E; TILE]; TILE],
) -> [S::V; TILE]
where
    S::E: PartialEq,
{
    // SAFETY: the instruction set is present (the caller's contract).
    unsafe {
        let dot = |row: &[S::E; TILE], parity: Option<usize>| {
            let mut sum = S::zero();
            for (j, (&b, &d)) in row.iter().zip(d).enumerate() {
                if b != S::E::default() && parity.is_none_or(|p| j % 2 == p) {
                    sum = S::fma(S::splat(b), d, sum);
                }
            }
            sum
        };
        let mut v = [S::zero(); TILE];
        v[0] = dot(&bt[0], None);
        v[TILE - 1] = dot(&bt[TILE - 1], None);
        for (plus, minus) in PAIRS {
            let (even, odd) = (dot(&bt[plus], Some(0)), dot(&bt[plus], Some(1)));
            v[plus] = S::add(even, odd);
            v[minus] = S::sub(even, odd);
        }
        v
    }
}

/// `Aᵀ·s` of one tile's 8 sums: its first `M` outputs, from the sums and differences of each
/// pair of points (`Aᵀ[i][±p] = (±p)ⁱ`).
///
/// # Safety
///
/// The CPU has `S`'s instruction set.
#[inline(always)]
pub(super) unsafe fn output_transform<S: Simd, const M: usize>(
    s: &[S::V; TILE],
    at: &[[S::E; TILE]; TILE],
) -> [S::V; M] {
    // SAFETY: the instruction set is present (the caller's contract).
    unsafe {
        // Loops, not `map` or `from_fn`: their closures were not inlined into the vector code.
        let (mut sums, mut differences) = ([S::zero(); 3], [S::zero(); 3]);
        for k in 0..PAIRS.len() {
            let (plus, minus) = PAIRS[k];
            sums[k] = S::add(s[plus], s[minus]);
            differences[k] = S::sub(s[plus], s[minus]);
        }
        let mut outputs = [S::zero(); M];
        for (i, y) in outputs.iter_mut().enumerate() {
            let by_parity = if i % 2 == 0 { &sums } else { &differences };
            *y = by_parity[0]; // the point 1: 1ⁱ = 1
            for k in 1..PAIRS.len() {
                *y = S::fma(S::splat(at[i][PAIRS[k].0]), by_parity[k], *y);
            }
            if i == 0 {
                *y = S::add(s[0], *y);
            }
            if i == M - 1 {
                *y = S::add(*y, s[TILE - 1]);
            }
        }
        outputs
    }
}

/// The most points of a tile's 8 (1, 2, 4 or 8, so that they divide them) whose sums for
/// `vectors` (filters times vectors of columns) take at most `sums` registers.
const fn points_per_pass(vectors: usize, sums: usize) -> usize {
    let mut points = TILE;
    while points > 1 && points * vectors > sums {
        points /= 2;
    }
    points
}

/// One tile: filters `f0..f0 + N` at `COLS` vectors of output columns from `x0` (the last
/// holding `valid` of them) and rows `oy0..oy0 + rows` (`rows <= M`). The 8 points' sums are
/// taken a few points at a time, `N·COLS` sums a point in registers (the most points, 1, 2, 4
/// or 8, whose sums fit `SUMS`: [`points_per_pass`]): per pass, channel, kernel column
/// `kx` and point, `COLS` loads of `V` shifted by `kx` and `N` broadcasts of `U`, each
/// multiplied into every column vector. Each sum adds its terms in the same order whatever the
/// tile's shape (channels, then kernel columns).
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `u` and `v` hold the transforms ([`run`]); the filters,
/// rows and columns exist; `out` holds the image's `F·OH·OW` outputs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<
    S: Simd,
    const R: usize,
    const M: usize,
    const N: usize,
    const COLS: usize,
    const SUMS: usize,
>(
    shape: &Conv,
    u: *const S::E,
    v: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    (f0, oy0, rows, x0, valid): (usize, usize, usize, usize, usize),
    at: &[[S::E; TILE]; TILE],
    epilogue: Epilogue,
) {
    let (channels, out_height, out_width) = (shape.channels, shape.out_height(), shape.out_width());
    let row = transformed_row(shape, S::LANES);
    // SAFETY (whole body): the instruction set is present (the caller's contract). `u` is read
    // at ((f0 + i)·C + c)·8·R + ν·R + kx < F·C·8·R; `v` at (c·8 + ν)·row + x0 + k·LANES + kx +
    // lane < C·8·row, as x0 + COLS·LANES <= OW rounded up to vectors and kx < R <= LANES; the
    // stores are at rows oy0 + r < OH, columns x0 + k·LANES + lane < OW (the rest of the last
    // vector masked off) of filters f0 + i < F. Each of `sums`' points is written by the pass
    // that covers it before the output transform reads it.
    unsafe {
        // Uninitialized, as the passes below write every point's sums: a zeroed array of 16
        // to 32 vectors was a `memset` per tile (4% of ResNet-8's prediction).
        let mut sums = [[[MaybeUninit::<S::V>::uninit(); TILE]; COLS]; N];
        const { assert!(N * COLS <= SUMS, "a tile's sums at one point fit") };
        let points = const { points_per_pass(N * COLS, SUMS) };
        for nu0 in (0..TILE).step_by(points) {
            // `TILE` points' room, `points` of them used (the others optimized away).
            let mut acc = [[[S::zero(); TILE]; COLS]; N];
            // The bias starts the sums at the point 1, whose column of `Aᵀ` is all ones (1ⁱ).
            if (nu0..nu0 + points).contains(&1) {
                for (i, acc_i) in acc.iter_mut().enumerate() {
                    let b = S::splat(*bias.add(f0 + i));
                    for acc_ik in acc_i.iter_mut() {
                        acc_ik[1 - nu0] = b;
                    }
                }
            }
            for c in 0..channels {
                let u_c: [*const S::E; N] =
                    array_from(|i| u.add((((f0 + i) * channels + c) * TILE + nu0) * R));
                let v_c = v.add((c * TILE + nu0) * row + x0);
                for kx in 0..R {
                    for nu in 0..points {
                        let mut inputs = [S::zero(); COLS];
                        for (k, input) in inputs.iter_mut().enumerate() {
                            *input = S::load(v_c.add(nu * row + kx + k * S::LANES));
                        }
                        for (acc_i, u_i) in acc.iter_mut().zip(&u_c) {
                            let weight = S::splat(*u_i.add(nu * R + kx));
                            for (acc_ik, &input) in acc_i.iter_mut().zip(&inputs) {
                                acc_ik[nu] = S::fma(weight, input, acc_ik[nu]);
                            }
                        }
                    }
                }
            }
            for (sums_i, acc_i) in sums.iter_mut().zip(&acc) {
                for (sums_ik, acc_ik) in sums_i.iter_mut().zip(acc_i) {
                    for (sum, &acc) in sums_ik[nu0..nu0 + points].iter_mut().zip(acc_ik) {
                        sum.write(acc);
                    }
                }
            }
        }
        let mask = S::mask(valid);
        for (i, sums_i) in sums.iter().enumerate() {
            for (k, sums_ik) in sums_i.iter().enumerate() {
                // Every point was written: the passes' points `nu0..nu0 + points` cover
                // `0..TILE` (`points` divides it).
                let sums_ik: [S::V; TILE] = array_from(|nu| sums_ik[nu].assume_init());
                let outputs = output_transform::<S, M>(&sums_ik, at);
                let column = x0 + k * S::LANES;
                let plane = out.add(((f0 + i) * out_height + oy0) * out_width + column);
                let whole = k + 1 < COLS || valid == S::LANES;
                for (r, &y) in outputs.iter().enumerate().take(rows) {
                    let y = finish::<S>(y, epilogue);
                    if whole {
                        S::store(plane.add(r * out_width), y);
                    } else {
                        S::store_masked(plane.add(r * out_width), mask, y);
                    }
                }
            }
        }
    }
}

/// The forward pass of a batch (see [`conv2d_stride1_winograd_columns`]): `U` once, then per
/// image and group of `M` output rows, `V` of the group's 8 padded rows (read from the unpadded
/// image with masked loads: rows and columns of padding are zeros), and the tiles of `TF`
/// filters across the output row.
///
/// # Safety
///
/// The CPU has `S`'s instruction set and AVX2 with FMA; the slices and sizes were checked by
/// [`conv2d_stride1_winograd_columns`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn run<
    S: Simd<E = f32>,
    const R: usize,
    const M: usize,
    const TF: usize,
    const COLS: usize,
    const SUMS: usize,
>(
    shape: &Conv,
    batch: usize,
    x: &[S::E],
    w: &[S::E],
    bias: &[S::E],
    out: &mut [MaybeUninit<S::E>],
    scratch: &mut [MaybeUninit<S::E>],
    [at, g, bt]: &[[[S::E; TILE]; TILE]; 3],
    epilogue: Epilogue,
) where
    S::E: PartialEq,
{
    const { assert!(TF >= 1 && TF <= 4, "tiles of 1 to 4 filters") };
    let lanes = S::LANES;
    let Conv {
        channels,
        filters,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let row = transformed_row(shape, lanes);
    let (u, v) = scratch.split_at_mut(filters * channels * TILE * R);
    let (u, v) = (u.as_mut_ptr().cast::<S::E>(), v.as_mut_ptr().cast::<S::E>());
    // SAFETY (whole body): `S`'s instruction set and AVX2 with FMA (`SU`'s) are present (the
    // caller's contract).
    // - `U`: the taps read are (fc·R + ky)·R + kx < F·C·R·R (kx < R lanes, or all lanes where
    //   they are inside `w`, always before the last two (filter, channel)s: with R >= 3 and 8
    //   lanes, (fc·R + R - 1)·R + 8 <= (fc + 2)·R·R). The rows written, R lanes at
    //   (fc·8 + ν)·R (all lanes where they are inside `U`, always before the last two, as
    //   (fc·8 + 7)·R + 8 <= (fc + 2)·8·R), are inside its F·C·8·R elements, every one of them,
    //   in increasing order, so that the lanes past a row's R are written again with their
    //   values.
    // - `V`: the image is read at rows 0 <= oy0 + j - P < H and columns 0 <= col0 + lane - P <
    //   W only (the other lanes masked off, their addresses formed with wrapping arithmetic);
    //   written whole ((c·8 + ν)·row + col0 + LANES <= C·8·row) before `tile` reads it.
    // - `out`: each image's F·OH·OW outputs, every one written by the tiles (all filters, rows
    //   and columns), as `tile` says.
    unsafe {
        // `U` a filter and channel at a time, in `SU`'s vectors, the narrowest that hold a
        // kernel row (`R <= 5` taps): AVX-512's 16 lanes made these transforms a quarter of a
        // 32-channel layer's prediction (loads and stores split across cache lines, and two
        // halves per instruction on AMD's cores). Whole vectors where they stay inside `w` and
        // `U` (masked loads and stores are slow on AMD's cores): a row's lanes past its `R` taps
        // are the next taps, and the lanes past its `R` values of `U` are written over by the
        // next row's store, or the next (filter, channel)'s, later.
        type SU = Avx2F32;
        let (lanes_u, taps_mask, u_len) = (SU::LANES, SU::mask(R), filters * channels * TILE * R);
        macro_rules! transform {
            ($fc:expr, $checked:literal) => {{
                let fc = $fc;
                let mut taps = [SU::zero(); R];
                for (ky, tap) in taps.iter_mut().enumerate() {
                    let at = (fc * R + ky) * R;
                    *tap = if !$checked || at + lanes_u <= w.len() {
                        SU::load(w.as_ptr().add(at))
                    } else {
                        SU::load_masked(w.as_ptr().add(at), taps_mask)
                    };
                }
                for (nu, g_nu) in g.iter().enumerate() {
                    let mut sum = SU::zero();
                    for (&tap, &g) in taps.iter().zip(g_nu) {
                        if g != S::E::default() {
                            sum = SU::fma(SU::splat(g), tap, sum);
                        }
                    }
                    let at = (fc * TILE + nu) * R;
                    if !$checked || at + lanes_u <= u_len {
                        SU::store(u.add(at), sum);
                    } else {
                        SU::store_masked(u.add(at), taps_mask, sum);
                    }
                }
            }};
        }
        // Before the last two (filter, channel)s every vector is inside `w` and `U` (with
        // `R >= 3` and vectors of 8, a row's 8 lanes end inside the next one's taps, and a
        // point's inside the next one's values), so their loop checks no bounds.
        const {
            assert!(
                R >= 3 && R <= SU::LANES && SU::LANES <= 8,
                "a row of taps fits a vector that ends inside the next filter's"
            )
        };
        let checked_from = (filters * channels).saturating_sub(2);
        for fc in 0..checked_from {
            transform!(fc, false);
        }
        for fc in checked_from..filters * channels {
            transform!(fc, true);
        }
        let u = u.cast_const();
        let (image_len, output_len) = (shape.image_len(), shape.output_len());
        for b in 0..batch {
            let x = x.as_ptr().add(b * image_len);
            let out = out.as_mut_ptr().add(b * output_len).cast::<S::E>();
            for oy0 in (0..out_height).step_by(M) {
                // The rows of the group inside the image (the others are padding, or past it).
                let first = padding.saturating_sub(oy0).min(TILE);
                let last = (padding + height).saturating_sub(oy0).clamp(first, TILE);
                for c in 0..channels {
                    let image = x.add(c * height * width);
                    for col0 in (0..row).step_by(lanes) {
                        // The lanes inside the image's columns.
                        let lo = padding.saturating_sub(col0).min(lanes);
                        let hi = (padding + width).saturating_sub(col0).clamp(lo, lanes);
                        let mut transformed = [S::zero(); TILE];
                        if lo < hi && first < last {
                            let mask = S::mask_range(lo, hi);
                            let mut d = [S::zero(); TILE];
                            for (j, d_j) in d.iter_mut().enumerate().take(last).skip(first) {
                                let image_row = (oy0 + j - padding) * width;
                                let p = image.wrapping_add(image_row + col0).wrapping_sub(padding);
                                *d_j = S::load_masked(p, mask);
                            }
                            transformed = input_transform::<S>(&d, bt);
                        }
                        for (nu, &t) in transformed.iter().enumerate() {
                            S::store(v.add((c * TILE + nu) * row + col0), t);
                        }
                    }
                }
                let rows = M.min(out_height - oy0);
                let v = v.cast_const();
                // `COLS` vectors of columns a tile while as many are left, then one. The
                // filters in as few tiles of at most `TF` (at most 4) as they need, of sizes
                // that differ by one at most (6 filters as 3 and 3), so that no tile has too
                // few sums to hide the multiply-adds' latency.
                let vectors = out_width.div_ceil(lanes);
                let tiles = filters.div_ceil(TF);
                let (size, larger) = (filters / tiles, filters % tiles);
                let mut k0 = 0;
                while k0 < vectors {
                    let cols = if vectors - k0 >= COLS { COLS } else { 1 };
                    let x0 = k0 * lanes;
                    let valid = lanes.min(out_width - x0 - (cols - 1) * lanes);
                    let bias = bias.as_ptr();
                    let mut f0 = 0;
                    for t in 0..tiles {
                        let n = size + usize::from(t < larger);
                        let at_tile = (f0, oy0, rows, x0, valid);
                        macro_rules! tile {
                            ($n:literal) => {
                                if cols == COLS {
                                    tile::<S, R, M, $n, COLS, SUMS>(
                                        shape, u, v, bias, out, at_tile, at, epilogue,
                                    )
                                } else {
                                    tile::<S, R, M, $n, 1, SUMS>(
                                        shape, u, v, bias, out, at_tile, at, epilogue,
                                    )
                                }
                            };
                        }
                        match n {
                            4 => tile!(4),
                            3 => tile!(3),
                            2 => tile!(2),
                            _ => tile!(1),
                        }
                        f0 += n;
                    }
                    k0 += cols;
                }
            }
        }
    }
}

/// The tables `[Aᵀ, G, Bᵀ]` of `F(9 - r, r)` in `f64`.
const fn tables(r: usize) -> [[[f64; TILE]; TILE]; 3] {
    crate::kernels::winograd::toom_cook::<TILE>(&POINTS, r)
}

/// [`tables`] in `f32`, at compile time (here and in the 8-point tiles along the rows,
/// [`super::conv_winograd_rows::winograd_forward_points`]).
pub(super) const fn tables_f32(r: usize) -> [[[f32; TILE]; TILE]; 3] {
    let t = tables(r);
    let mut out = [[[0.0; TILE]; TILE]; 3];
    let mut i = 0;
    while i < 3 * TILE * TILE {
        let (k, row, col) = (i / (TILE * TILE), i / TILE % TILE, i % TILE);
        out[k][row][col] = t[k][row][col] as f32;
        i += 1;
    }
    out
}

macro_rules! entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal, $filters:literal, $cols:literal, $sums:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_stride1_winograd_columns`].
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
            // SAFETY: forwarded from this function's contract; `run` also takes AVX2 with FMA,
            // which `avx512f` implies.
            unsafe {
                match shape.kernel {
                    3 => run::<$simd, 3, 6, $filters, $cols, $sums>(shape, batch, x, w, bias, out, scratch, &const { tables_f32(3) }, epilogue),
                    4 => run::<$simd, 4, 5, $filters, $cols, $sums>(shape, batch, x, w, bias, out, scratch, &const { tables_f32(4) }, epilogue),
                    _ => run::<$simd, 5, 4, $filters, $cols, $sums>(shape, batch, x, w, bias, out, scratch, &const { tables_f32(5) }, epilogue),
                }
            }
        }
    };
}

// The tile's shape per instruction set (at most filters, vectors of columns, sums in
// registers), measured on the suite's nets. AVX-512: up to 4 filters x 1 vector, at most 24
// sums of the 32 registers (4 filters: 16 sums, 4 points a pass; 3 filters, LeNet's first
// layer: 24 sums, all 8 points); 16 to 64 filters in whole tiles of 4. AVX2: up to 3 filters x
// 2 vectors, at most 12 sums (2 points a pass), two loads and a broadcast of its 16 registers,
// so that a load of `V` serves three filters and a broadcast of `U` two vectors (a tile of one
// filter's 8 points takes two loads per multiply-add, and AVX2 leaves the multipliers idle
// half the time).
// The filters' transforms take AVX2's vectors on both (`run`'s `SU`; `avx512f` implies `avx2` and
// `fma`, for the compiler as on every CPU).
entry!(avx512_f32, Avx512F32, f32, "avx512f", 4, 1, 24);
entry!(avx2_f32, Avx2F32, f32, "avx2,fma", 3, 2, 12);

/// A batch of stride-1 convolutions in `f32`, `out = conv(x, w) + bias` image by image (see
/// [`Conv`]), by Winograd's minimal filtering down the columns, the output positions in the
/// lanes, with `isa`; `w` in PyTorch's layout (`[filters][C][K][K]`), the images unpadded.
/// Every output is written.
///
/// Only `f32`: in `f64` the direct kernel's sums, a few units in the last place from exact,
/// are what the finite-difference gradient checks difference (with a step of `1e-6`), and
/// these are up to a hundred times further (the transforms' coefficients reach 21/4).
///
/// # Panics
///
/// When [`applies`] is false for `shape` and `isa`'s lanes, the stride is not 1 (not checked:
/// [`Conv`] has none), a slice's length does not fit, `scratch` is shorter than
/// [`scratch_len`], or the CPU does not have `isa`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_stride1_winograd_columns(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    out: &mut [MaybeUninit<f32>],
    scratch: &mut [MaybeUninit<f32>],
    epilogue: Epilogue,
) {
    let lanes = lanes::<f32>(isa);
    assert!(
        applies(shape, lanes),
        "no Winograd columns for {shape:?} with {lanes} lanes"
    );
    shape.check_batch(batch, x.len(), w.len(), bias.len(), out.len());
    assert!(
        scratch.len() >= scratch_len(shape, lanes),
        "{} elements of scratch for {shape:?}",
        scratch.len()
    );
    assert_isa(isa);
    // SAFETY (both): sizes, lengths and instruction set checked above (`assert_isa` checks
    // AVX-512F, which comes with AVX2 and FMA, for the filters' transforms).
    match isa {
        Isa::Avx512 => unsafe { avx512_f32(shape, batch, x, w, bias, out, scratch, epilogue) },
        Isa::Avx2Fma => unsafe { avx2_f32(shape, batch, x, w, bias, out, scratch, epilogue) },
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::super::isa_available;
    use super::super::tests::{as_output, conv_of, padded_magnitude, values};
    use super::*;
    use crate::kernels::reference;
    use std::vec::Vec;

    /// The largest error of a batch of 3 (each image's outputs written over stale NaNs, which
    /// must all be gone), per unit of its tile's size: `|bias|` plus, per channel and kernel
    /// column, the column's largest weight times the sum of the 8 padded inputs the tile reads
    /// down that column. (The transforms' sums are over those inputs; the error of each is
    /// bounded by a constant times its size.)
    fn error(isa: Isa, shape: &Conv, seed: u64, epilogue: Epilogue) -> f64 {
        let batch = 3;
        let Conv {
            channels,
            filters,
            kernel,
            ..
        } = *shape;
        let (image, output) = (shape.image_len(), shape.output_len());
        let (out_height, out_width) = (shape.out_height(), shape.out_width());
        let m = TILE + 1 - kernel;
        let x = values(batch * image, 10 + seed);
        let w = values(filters * channels * kernel * kernel, 20 + seed);
        let b = values(filters, 30 + seed);
        let cast = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let mut got = cast(&std::vec![f64::NAN; batch * output]);
        let lanes = super::lanes::<f32>(isa);
        let mut scratch = std::vec![MaybeUninit::<f32>::uninit(); scratch_len(shape, lanes)];
        conv2d_stride1_winograd_columns(
            isa,
            shape,
            batch,
            &cast(&x),
            &cast(&w),
            &cast(&b),
            as_output(&mut got),
            &mut scratch,
            epilogue,
        );
        let mut worst = 0.0_f64;
        for n in 0..batch {
            let x = &x[n * image..][..image];
            let mut want = std::vec![0.0; output];
            reference::conv2d_stride1(shape, x, &w, &b, &mut want);
            let at = |c, row, column| padded_magnitude(shape, x, c, row, column);
            for f in 0..filters {
                for oh in 0..out_height {
                    let top = oh / m * m;
                    for ow in 0..out_width {
                        let mut size = b[f].abs();
                        for c in 0..channels {
                            for kx in 0..kernel {
                                let largest = (0..kernel)
                                    .map(|ky| w[((f * channels + c) * kernel + ky) * kernel + kx])
                                    .fold(0.0_f64, |a, v| a.max(v.abs()));
                                let inputs: f64 = (0..TILE).map(|j| at(c, top + j, ow + kx)).sum();
                                size += largest * inputs;
                            }
                        }
                        let j = (f * out_height + oh) * out_width + ow;
                        let g = f64::from(got[n * output + j]);
                        assert!(
                            g.is_finite(),
                            "{shape:?}: output {j} of image {n} not written"
                        );
                        let want = match epilogue {
                            Epilogue::Identity => want[j],
                            Epilogue::Relu => want[j].max(0.0),
                        };
                        worst = worst.max((g - want).abs() / size);
                    }
                }
            }
        }
        worst
    }

    /// LeNet-5's first layer and shapes around the kernel's sizes, then random ones: 1 to 8
    /// filters (balanced tiles of at most 4 or 3: 4 + 4, 4 + 3, 3 + 3 + 2, ...), kernels of 3 to 5 (groups of 6, 5 and 4 rows, the
    /// last one partial), padding 0 to 4 (wider than the kernel), rows of one vector or more.
    fn shapes() -> Vec<Conv> {
        let mut shapes: Vec<Conv> = [
            (1, 6, 5, 2, 28, 28),
            (1, 1, 5, 0, 20, 20),
            (2, 7, 3, 1, 13, 30),
            (3, 2, 4, 2, 9, 15),
            (1, 4, 5, 4, 3, 12),
            (1, 3, 3, 0, 33, 66),
            // More filters than a tile takes; three (filter, channel)s, the last two of them
            // with bound checks in the filters' transforms.
            (3, 40, 3, 1, 6, 14),
            (2, 37, 5, 2, 5, 12),
            (3, 1, 4, 1, 6, 14),
            (1, 3, 5, 2, 5, 12),
        ]
        .into_iter()
        .map(conv_of)
        .collect();
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut draw = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n) as usize
        };
        while shapes.len() < 40 {
            let conv = Conv {
                channels: 1 + draw(3),
                filters: 1 + draw(8),
                kernel: 3 + draw(3),
                padding: draw(5),
                height: 1 + draw(30),
                width: 1 + draw(40),
            };
            if conv.kernel <= conv.height + 2 * conv.padding
                && conv.kernel <= conv.width + 2 * conv.padding
            {
                shapes.push(conv);
            }
        }
        shapes
    }

    #[test]
    fn the_columns_forward_pass_matches_the_definition_on_every_available_instruction_set() {
        for isa in [Isa::Avx512, Isa::Avx2Fma] {
            if !isa_available(isa) {
                std::eprintln!("skipping {isa:?}: not on this CPU");
                continue;
            }
            let (mut worst, mut shapes_run) = (0.0_f64, 0);
            for (i, shape) in shapes().iter().enumerate() {
                let epilogue = if i % 2 == 0 {
                    Epilogue::Identity
                } else {
                    Epilogue::Relu
                };
                if applies(shape, super::lanes::<f32>(isa)) {
                    worst = worst.max(error(isa, shape, i as u64, epilogue));
                    shapes_run += 1;
                }
            }
            std::eprintln!(
                "{isa:?}: {shapes_run} shapes; worst error per unit of the tile's size {worst:.2e}"
            );
            assert!(shapes_run >= 12, "{shapes_run} shapes");
            assert!(worst <= 2e-6, "{isa:?}: error {worst:e}");
        }
    }

    /// The written-out `Bᵀ·d` and `Aᵀ·s` are the Toom-Cook matrices' products, for every kernel
    /// size, and `F(9 - r, r)` built from them is a correlation (exactly, in `f64`, on small
    /// integers).
    #[test]
    fn the_transforms_are_the_matrices_and_compute_a_correlation() {
        if !isa_available(Isa::Avx2Fma) {
            std::eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        #[target_feature(enable = "avx2,fma")]
        fn run<const R: usize, const M: usize>(d: [f64; TILE], g: [f64; R]) -> [f64; M] {
            let [at, gt, bt] = tables(R);
            // SAFETY: AVX2 and FMA are present (the caller checked); the stores write the
            // arrays' elements.
            unsafe {
                let vectors = d.map(|v| <super::super::simd::Avx2F64 as Simd>::splat(v));
                let v = input_transform::<super::super::simd::Avx2F64>(&vectors, &bt);
                let mut u = [0.0; TILE];
                for (nu, u) in u.iter_mut().enumerate() {
                    *u = (0..R).map(|k| gt[nu][k] * g[k]).sum();
                }
                let mut products = [<super::super::simd::Avx2F64 as Simd>::zero(); TILE];
                let mut transformed = [0.0; TILE];
                for nu in 0..TILE {
                    let mut lanes = [0.0; 4];
                    <super::super::simd::Avx2F64 as Simd>::store(lanes.as_mut_ptr(), v[nu]);
                    transformed[nu] = lanes[0];
                    let want: f64 = (0..TILE).map(|j| bt[nu][j] * d[j]).sum();
                    assert_eq!(lanes[0], want, "Bᵀ·d, row {nu}");
                    products[nu] =
                        <super::super::simd::Avx2F64 as Simd>::splat(u[nu] * transformed[nu]);
                }
                let y = output_transform::<super::super::simd::Avx2F64, M>(&products, &at);
                core::array::from_fn(|i| {
                    let mut lanes = [0.0; 4];
                    <super::super::simd::Avx2F64 as Simd>::store(lanes.as_mut_ptr(), y[i]);
                    let want: f64 = (0..TILE)
                        .map(|nu| at[i][nu] * u[nu] * transformed[nu])
                        .sum();
                    assert!(
                        (lanes[0] - want).abs() <= 1e-9 * want.abs().max(1.0),
                        "Aᵀ, row {i}"
                    );
                    lanes[0]
                })
            }
        }
        fn check<const R: usize, const M: usize>() {
            let d: [f64; TILE] = core::array::from_fn(|j| (j as f64 * 7.0) % 5.0 - 2.0);
            let g: [f64; R] = core::array::from_fn(|k| (k as f64 * 3.0) % 4.0 - 1.5);
            // SAFETY: AVX2 and FMA are present (checked above).
            let y = unsafe { run::<R, M>(d, g) };
            for (i, &y) in y.iter().enumerate() {
                let want: f64 = (0..R).map(|k| g[k] * d[i + k]).sum();
                assert!(
                    (y - want).abs() < 1e-12,
                    "F({M}, {R}), output {i}: {y} against {want}"
                );
            }
        }
        check::<3, 6>();
        check::<4, 5>();
        check::<5, 4>();
    }

    /// The kernel never reads past the image, nor writes past the output: both end at a page
    /// without access (the image's last row is loaded masked to its columns, the output rows'
    /// last vectors stored masked), for rows of one vector and a partial one, padded or not,
    /// groups of rows cut short by the image's end.
    #[cfg(unix)]
    #[test]
    fn the_columns_kernel_stays_inside_its_slices() {
        use super::super::tests::Guarded;
        for sizes in [
            (1, 6, 5, 2, 28, 28),
            (1, 4, 5, 0, 9, 20),
            (2, 3, 3, 1, 7, 14),
            (1, 2, 4, 3, 5, 26),
        ] {
            let shape = conv_of(sizes);
            for isa in [Isa::Avx512, Isa::Avx2Fma] {
                if !isa_available(isa) || !applies(&shape, super::lanes::<f32>(isa)) {
                    continue;
                }
                let batch = 2;
                let to_f32 = |v: Vec<f64>| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                let mut x = Guarded::new(&to_f32(values(batch * shape.image_len(), 1)));
                let mut out = Guarded::new(&std::vec![0.0; batch * shape.output_len()]);
                let (filters, kernel) = (shape.filters, shape.kernel);
                let mut w = Guarded::new(&to_f32(values(
                    filters * shape.channels * kernel * kernel,
                    2,
                )));
                let b = to_f32(values(filters, 3));
                let lanes = super::lanes::<f32>(isa);
                let mut scratch = std::vec![MaybeUninit::uninit(); scratch_len(&shape, lanes)];
                conv2d_stride1_winograd_columns(
                    isa,
                    &shape,
                    batch,
                    x.slice(),
                    w.slice(),
                    &b,
                    as_output(out.slice()),
                    &mut scratch,
                    Epilogue::Relu,
                );
                assert!(out.slice().iter().all(|v| v.is_finite() && *v >= 0.0));
            }
        }
    }

    #[test]
    fn lenets_first_layer_takes_the_columns_and_narrow_rows_do_not() {
        let lenet = crate::kernels::shape::LENET_FIRST;
        assert!(applies(&lenet, 16) && applies(&lenet, 8));
        // A kernel row wider than a vector (not with `f32`'s 8 or 16 lanes; `applies` takes any).
        assert!(!applies(&lenet, 4) && applies(&Conv { kernel: 3, ..lenet }, 4));
        // Rows of 16 outputs (one vector of 16), of 8 (half of one) and of 3 (of 8 lanes), 6 x 6
        // kernels, no outputs.
        assert!(applies(&Conv { width: 16, ..lenet }, 16));
        assert!(!applies(&Conv { width: 8, ..lenet }, 16));
        assert!(!applies(
            &Conv {
                width: 1,
                kernel: 3,
                ..lenet
            },
            8
        ));
        assert!(!applies(&Conv { kernel: 6, ..lenet }, 16));
        assert!(!applies(&Conv { height: 0, ..lenet }, 16));
        // The scratch of LeNet's first layer fits the small stack buffer.
        assert_eq!(scratch_len(&lenet, 16), 6 * 8 * 5 + 8 * 48);
    }
}
