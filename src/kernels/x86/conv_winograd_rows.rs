//! The forward pass of a stride-1 convolution by Winograd's minimal filtering along the rows,
//! `F(m, r)` on 6 points (or 8 with AVX-512), the filters in the vector lanes. Applies: kernels
//! of 3 to 5 whose filters fill the lanes better than a row does, scratch within the caller's
//! buffer, `f32`, AVX-512 or AVX2.

use super::gemm::Element;
use super::isa::{Isa, assert_isa, lanes};
use super::layout::transpose_uninit;
use super::simd::{Avx2F32, Avx512F32, Simd, array_from, finish};
use core::mem::MaybeUninit;

use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::{Conv, Epilogue};

/// `Bᵀ·d` of the Winograd tile (6 inputs to 6), written out (see [`crate::kernels::winograd`]; the tests
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
pub(super) unsafe fn winograd_input_transform<S: Simd>(d: [S::V; 6]) -> [S::V; 6]
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
pub(super) unsafe fn winograd_output_transform<S: Simd, const M: usize>(
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
pub(super) const fn winograd_forward_tiling(shape: &Conv, points: usize) -> (usize, usize, usize) {
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
/// checks (see [`super::conv_winograd_columns_f32`]). Not with AVX2: measured only on a CPU with AVX-512, where
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
        && winograd_forward_scratch_on(shape, lanes, 8)
            <= crate::kernels::shape::WINOGRAD_STACK_SCRATCH
    {
        8
    } else {
        crate::kernels::winograd::TILE
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
pub(super) const fn winograd_forward_scratch_on(
    shape: &Conv,
    lanes: usize,
    points: usize,
) -> usize {
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
/// [`crate::kernels::winograd::applies`]) and at least one whole tile of 6 points across an output row.
pub(crate) const fn winograd_forward_applies(shape: &Conv) -> bool {
    crate::kernels::winograd::applies(shape)
        && shape.out_height() > 0
        && shape.out_width() >= crate::kernels::winograd::outputs_per_tile(shape.kernel)
}

/// The transforms of Winograd's method along the rows on `P` points ([`SixPoints`] or
/// [`EightPoints`]): `Bᵀ·d` of a tile's `P` inputs, and `Aᵀ·m` of its `P` products stored a
/// vector apart.
pub(super) trait RowPoints<S: Simd, const P: usize> {
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
pub(super) struct SixPoints;

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
/// `conv_winograd_columns_f32::tables` (the transforms of [`super::conv_winograd_columns_f32`]).
pub(super) struct EightPoints<'a, E>(&'a [[[E; 8]; 8]; 3]);

impl<S: Simd> RowPoints<S, 8> for EightPoints<'_, S::E>
where
    S::E: PartialEq,
{
    #[inline(always)]
    unsafe fn input(&self, d: [S::V; 8]) -> [S::V; 8] {
        // SAFETY: the caller's contract.
        unsafe { super::conv_winograd_columns_f32::input_transform::<S>(&d, &self.0[2]) }
    }

    #[inline(always)]
    unsafe fn output<const M: usize>(&self, m: &[S::V; 8], out: *mut S::E, valid: usize) {
        // SAFETY: the caller's contract (`valid <= M` vectors from `out`).
        unsafe {
            let y = super::conv_winograd_columns_f32::output_transform::<S, M>(m, &self.0[0]);
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
pub(super) unsafe fn winograd_row_transforms<S: Simd, const P: usize, const M: usize>(
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
pub(super) fn zero_image_border<E: Copy + Default>(
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
pub(super) unsafe fn winograd_forward_tile<
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
pub(super) unsafe fn winograd_forward_run<
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
        pub(super) unsafe fn $name(
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
                let g = crate::kernels::winograd::filter_transform(r);
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
#[allow(unused_imports)]
pub(super) use winograd_forward_entry;

winograd_forward_entry!(
    winograd_forward_avx512_f32,
    Avx512F32,
    f32,
    "avx512f",
    eight points: super::conv_winograd_columns_f32::tables_f32
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
pub(crate) fn conv2d_stride1_winograd<E: Element>(
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
