//! The forward pass of a stride-1 convolution, direct, the output positions in the vector lanes:
//! row tiles (padding masked off), and "flat" and "dense" tiles over an unpadded image's rows laid
//! end to end. Applies: any kernel size and padding, `f32`, AVX-512 or AVX2.

use super::gemm::Element;
use super::isa::{Isa, assert_isa};
use super::simd::{Avx2F32, Avx512F32, Simd, array_from, finish};
use core::mem::MaybeUninit;

use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::{Conv, Epilogue};

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
#[allow(unused_imports)]
pub(super) use tile_rows;

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
pub(super) unsafe fn conv_tile<S: Simd, const MR: usize, const NV: usize>(
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
pub(super) unsafe fn conv_run<S: Simd>(
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
pub(super) unsafe fn positions_tile_sums<S: Simd, const MR: usize, const NV: usize>(
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
pub(super) unsafe fn conv_flat_tile<S: Simd, const MR: usize, const NV: usize>(
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
pub(super) struct DenseVector<M> {
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
pub(super) unsafe fn conv_dense_tile<S: Simd, const MR: usize, const NV: usize>(
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
pub(super) unsafe fn conv_flat_run<S: Simd>(
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
            let whole = vectors / per_tile;
            let tiles = (0, whole, epilogue, dense);
            match per_tile {
                // (Tiles of 3 and 4 vectors only where `FLAT_VECTORS` is 3: not instantiated
                // for the other instruction sets.)
                4 if const { S::FLAT_VECTORS == 3 } => {
                    tile_rows!(conv_flat_tiles, rows, 4, shape, x, w, bias, out, tiles)
                }
                3 if const { S::FLAT_VECTORS == 3 } => {
                    tile_rows!(conv_flat_tiles, rows, 3, shape, x, w, bias, out, tiles)
                }
                2 => tile_rows!(conv_flat_tiles, rows, 2, shape, x, w, bias, out, tiles),
                _ => tile_rows!(conv_flat_tiles, rows, 1, shape, x, w, bias, out, tiles),
            }
            let first = whole * per_tile;
            let last = (first, 1, epilogue, dense);
            match vectors - first {
                0 => {}
                3 if const { S::FLAT_VECTORS == 3 } => {
                    tile_rows!(conv_flat_tiles, rows, 3, shape, x, w, bias, out, last)
                }
                2 => tile_rows!(conv_flat_tiles, rows, 2, shape, x, w, bias, out, last),
                _ => tile_rows!(conv_flat_tiles, rows, 1, shape, x, w, bias, out, last),
            }
        }
    }
}

/// `count` tiles of [`conv_flat_tile`] from vector `first` on, in a function of their own for
/// each instruction set and tile size ([`Simd::outlined`]), with the epilogue a constant there.
///
/// # Safety
///
/// As [`conv_flat_tile`], for each of the tiles.
#[inline(always)]
unsafe fn conv_flat_tiles<S: Simd, const MR: usize, const NV: usize>(
    shape: &Conv,
    x: *const S::E,
    w: *const S::E,
    bias: *const S::E,
    out: *mut S::E,
    (first, count, epilogue, dense): (usize, usize, Epilogue, bool),
) {
    if count == 0 {
        return;
    }
    // SAFETY: the instruction set is present (this function's contract); the tiles' contract
    // is forwarded. The closure is always inlined: it has no target features of its own, so
    // left out of line it could not inline the vector operations it calls (each `fma` a call).
    unsafe {
        S::outlined(
            #[inline(always)]
            move || match epilogue {
                Epilogue::Identity => conv_flat_tile_run::<S, MR, NV>(
                    shape,
                    (x, w, bias, out),
                    (first, count, Epilogue::Identity, dense),
                ),
                Epilogue::Relu => conv_flat_tile_run::<S, MR, NV>(
                    shape,
                    (x, w, bias, out),
                    (first, count, Epilogue::Relu, dense),
                ),
            },
        );
    }
}

/// The loop of [`conv_flat_tiles`], inlined into each of its epilogues' arms.
///
/// # Safety
///
/// As [`conv_flat_tile`], for each of the tiles.
#[inline(always)]
unsafe fn conv_flat_tile_run<S: Simd, const MR: usize, const NV: usize>(
    shape: &Conv,
    (x, w, bias, out): (*const S::E, *const S::E, *const S::E, *mut S::E),
    (first, count, epilogue, dense): (usize, usize, Epilogue, bool),
) {
    for tile in 0..count {
        let q0 = (first + tile * NV) * S::LANES;
        // SAFETY: forwarded (this function's contract).
        unsafe { conv_flat_tile::<S, MR, NV>(shape, x, w, bias, out, (q0, epilogue, dense)) };
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
        pub(super) unsafe fn $name(
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
#[allow(unused_imports)]
pub(super) use conv_forward_entry;

conv_forward_entry!(
    conv_flat_avx512_f32,
    conv_flat_run,
    Avx512F32,
    f32,
    "avx512f"
);
conv_forward_entry!(conv_flat_avx2_f32, conv_flat_run, Avx2F32, f32, "avx2,fma");

conv_forward_entry!(conv_avx512_f32, conv_run, Avx512F32, f32, "avx512f");
conv_forward_entry!(conv_avx2_f32, conv_run, Avx2F32, f32, "avx2,fma");

/// A stride-1 convolution of one image, `out = conv(x, w) + bias` (see [`Conv`]), with `isa`.
///
/// # Panics
///
/// When a slice's length does not fit the sizes, when the output size is not
/// `H + 2P - K + 1` (`W` likewise), or when the CPU does not have `isa`.
pub(crate) fn conv2d_stride1<E: Element>(
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
    let (Some(x), Some(w), Some(bias), Some(out)) = (
        same_type_slice::<E, f32>(x),
        same_type_slice::<E, f32>(w),
        same_type_slice::<E, f32>(bias),
        same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<f32>>(out),
    ) else {
        unreachable!("the SIMD convolution kernels take f32");
    };
    // SAFETY (both): lengths, sizes and instruction set checked above.
    match isa {
        Isa::Avx512 => unsafe { conv_avx512_f32(shape, x, w, bias, out, epilogue) },
        Isa::Avx2Fma => unsafe { conv_avx2_f32(shape, x, w, bias, out, epilogue) },
    }
}

/// A stride-1 convolution of one image without padding, `out = conv(x, w) + bias`, positions
/// in the lanes with the output rows laid end to end ("flat", see [`conv_flat_tile`]), with
/// `isa`.
///
/// # Panics
///
/// As [`conv2d_stride1`], and when the padding is not 0.
pub(crate) fn conv2d_stride1_flat<E: Element>(
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
    let (Some(x), Some(w), Some(bias), Some(out)) = (
        same_type_slice::<E, f32>(x),
        same_type_slice::<E, f32>(w),
        same_type_slice::<E, f32>(bias),
        same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<f32>>(out),
    ) else {
        unreachable!("the SIMD convolution kernels take f32");
    };
    // SAFETY (both): lengths, sizes and instruction set checked above.
    match isa {
        Isa::Avx512 => unsafe { conv_flat_avx512_f32(shape, x, w, bias, out, epilogue) },
        Isa::Avx2Fma => unsafe { conv_flat_avx2_f32(shape, x, w, bias, out, epilogue) },
    }
}
