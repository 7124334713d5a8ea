//! The weight gradient of a stride-1 convolution by Winograd's method along the rows, the filters
//! in the vector lanes: sums taken at the tiles' points, transformed once at the end. Applies:
//! kernels of 3 to 5 ([`crate::kernels::winograd::applies`]), an image padded beforehand, `f32`,
//! AVX-512 or AVX2.

use super::conv_winograd_rows::{SixPoints, winograd_forward_tiling, winograd_row_transforms};
use super::gemm::Element;
use super::isa::{Isa, assert_isa, lanes};
use super::layout::transpose;
use super::simd::{Avx2F32, Avx512F32, Simd, array_from};

use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::Conv;

/// The images whose transforms [`weight_grad_winograd_run`] holds at once: the pairs of
/// kernel rows go over them with their sums in registers, stored between groups of images.
pub(super) const WINOGRAD_GRADIENT_IMAGES: usize = 4;

/// The scratch elements [`conv2d_weight_gradient_winograd`] needs for `shape` (no padding) and a
/// batch of `batch`, with vectors of `lanes`: one image transposed, and for up to
/// [`WINOGRAD_GRADIENT_IMAGES`] images their input transforms, their gradients position-major
/// and those evaluated at the points (per vector of filters), then the sums in Winograd's
/// domain (per vector of filters, pair `(c, ky)` and point).
pub(crate) const fn weight_gradient_winograd_scratch(
    shape: &Conv,
    batch: usize,
    lanes: usize,
) -> usize {
    let (tiles, covered, rows) = winograd_forward_tiling(shape, crate::kernels::winograd::TILE);
    let stride = rows.next_multiple_of(lanes);
    let tile = crate::kernels::winograd::TILE;
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
/// `(c, ky)` (from `pair0`) at the 6 points, for `G` vectors of filters, over `images` images,
/// `NU` points a pass. Per output row `oh`, tile `t` and point `ν`: `G` vectors of the
/// gradients evaluated at the point (`e`), and per pair the input's transform `V[c][t][ν][oh +
/// ky]`, broadcast and multiplied into each: `G·NP` fused multiply-adds per `G + NP` loads,
/// where the direct kernel does `(7 - K)·K·NP` per `7 - K`. Each sum adds its terms in the same
/// order whatever the tile's shape (images, rows, tiles).
///
/// # Safety
///
/// The CPU has `S`'s instruction set; each `e[g]` holds its group's `images·OH·tiles·6`
/// vectors, `v` the images' transforms (`images` blocks of `C·tiles·6·rows`,
/// `[c][t][ν][row]`), each `sums[g]` its group's `C·K·6` vectors; `pair0 + NP <= C·K`.
#[inline(always)]
pub(super) unsafe fn weight_grad_winograd_tile<
    S: Simd,
    const G: usize,
    const NP: usize,
    const NU: usize,
>(
    shape: &Conv,
    images: usize,
    e: [*const S::E; G],
    v: *const S::E,
    sums: [*mut S::E; G],
    pair0: usize,
) {
    const TILE: usize = crate::kernels::winograd::TILE;
    let lanes = S::LANES;
    let (tiles, _, rows) = winograd_forward_tiling(shape, crate::kernels::winograd::TILE);
    let stride = rows.next_multiple_of(lanes);
    let image = shape.channels * tiles * TILE * stride;
    // Where pair (c, ky)'s transforms start in an image's, at tile 0, point 0, row oh = 0.
    let offsets: [usize; NP] = array_from(|p| {
        let (c, ky) = ((pair0 + p) / shape.kernel, (pair0 + p) % shape.kernel);
        c * tiles * TILE * stride + ky
    });
    // SAFETY (whole body): the instruction set is present (the caller's contract). The sums
    // read and written are the pairs pair0..pair0 + NP < C·K at the 6 points of each group;
    // the vectors of each `e[g]` read are the images·OH·tiles·6 it holds, in order; the
    // transforms of `v` read are of image i < images, pair (c, ky), tile t < tiles, point ν,
    // row oh + ky < OH + K - 1 = rows.
    unsafe {
        for nu0 in (0..TILE).step_by(NU) {
            let at =
                |g: usize, p: usize, k: usize| sums[g].add(((pair0 + p) * TILE + nu0 + k) * lanes);
            let mut acc: [[[S::V; NU]; NP]; G] = [[[S::zero(); NU]; NP]; G];
            for (g, acc_g) in acc.iter_mut().enumerate() {
                for (p, acc_gp) in acc_g.iter_mut().enumerate() {
                    for (k, sum) in acc_gp.iter_mut().enumerate() {
                        *sum = S::load(at(g, p, k));
                    }
                }
            }
            let mut e = e;
            for i in 0..images {
                let v_image = v.add(i * image);
                for oh in 0..shape.out_height() {
                    for t in 0..tiles {
                        let v_t = v_image.add(t * TILE * stride + oh);
                        for k in 0..NU {
                            let nu = nu0 + k;
                            let mut gradients = [S::zero(); G];
                            for (gradient, e) in gradients.iter_mut().zip(&e) {
                                *gradient = S::load(e.add(nu * lanes));
                            }
                            let v_nu = v_t.add(nu * stride);
                            for (p, &offset) in offsets.iter().enumerate() {
                                let input = S::splat(*v_nu.add(offset));
                                for (acc_g, &gradient) in acc.iter_mut().zip(&gradients) {
                                    acc_g[p][k] = S::fma(input, gradient, acc_g[p][k]);
                                }
                            }
                        }
                        for e in e.iter_mut() {
                            *e = e.add(TILE * lanes);
                        }
                    }
                }
            }
            for (g, acc_g) in acc.iter().enumerate() {
                for (p, acc_gp) in acc_g.iter().enumerate() {
                    for (k, &sum) in acc_gp.iter().enumerate() {
                        S::store(at(g, p, k), sum);
                    }
                }
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
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn weight_grad_winograd_run<
    S: Simd,
    const R: usize,
    const M: usize,
    const NP2: usize,
    const NU2: usize,
>(
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
    const TILE: usize = crate::kernels::winograd::TILE;
    let lanes = S::LANES;
    let Conv {
        channels, filters, ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let (tiles, covered, rows) = winograd_forward_tiling(shape, crate::kernels::winograd::TILE);
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
            // Two vectors of filters a tile where there are two (`NP2` pairs, `NU2` points a
            // pass), one otherwise (`S::WINOGRAD_GRADIENT_PAIRS` pairs, 6 points); the last
            // pairs of a row of tiles one at a time, or as many as are left.
            let v = v.cast_const();
            let mut group = 0;
            while group < groups {
                let e_of = |g: usize| e.add(g * e_len).cast_const();
                let sums_of = |g: usize| sums.add(g * pairs * TILE * lanes);
                let mut pair = 0;
                if NP2 > 0 && group + 1 < groups {
                    let (e, sums) = (
                        [e_of(group), e_of(group + 1)],
                        [sums_of(group), sums_of(group + 1)],
                    );
                    while pair < pairs {
                        if pairs - pair >= NP2 {
                            weight_grad_winograd_tile::<S, 2, NP2, NU2>(
                                shape, images, e, v, sums, pair,
                            );
                            pair += NP2;
                        } else {
                            weight_grad_winograd_tile::<S, 2, 1, NU2>(
                                shape, images, e, v, sums, pair,
                            );
                            pair += 1;
                        }
                    }
                    group += 2;
                    continue;
                }
                let (e, sums) = ([e_of(group)], [sums_of(group)]);
                while pair < pairs {
                    let n = S::WINOGRAD_GRADIENT_PAIRS.min(pairs - pair);
                    match n {
                        5 => weight_grad_winograd_tile::<S, 1, 5, TILE>(
                            shape, images, e, v, sums, pair,
                        ),
                        4 => weight_grad_winograd_tile::<S, 1, 4, TILE>(
                            shape, images, e, v, sums, pair,
                        ),
                        3 => weight_grad_winograd_tile::<S, 1, 3, TILE>(
                            shape, images, e, v, sums, pair,
                        ),
                        2 => weight_grad_winograd_tile::<S, 1, 2, TILE>(
                            shape, images, e, v, sums, pair,
                        ),
                        _ => weight_grad_winograd_tile::<S, 1, 1, TILE>(
                            shape, images, e, v, sums, pair,
                        ),
                    }
                    pair += n;
                }
                group += 1;
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

macro_rules! weight_grad_winograd_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal, $two_group_pairs:literal, $two_group_points:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_weight_gradient_winograd`].
        #[target_feature(enable = $features)]
        #[cfg(feature = "alloc")]
        #[allow(clippy::too_many_arguments)]
        pub(super) unsafe fn $name(
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
                let t = crate::kernels::winograd::gradient_transforms(kernel);
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
                    3 => weight_grad_winograd_run::<$simd, 3, 4, $two_group_pairs, $two_group_points>(shape, batch, x, dz, scratch, dw, accumulate, &const { tables(3) }),
                    4 => weight_grad_winograd_run::<$simd, 4, 3, $two_group_pairs, $two_group_points>(shape, batch, x, dz, scratch, dw, accumulate, &const { tables(4) }),
                    _ => weight_grad_winograd_run::<$simd, 5, 2, $two_group_pairs, $two_group_points>(shape, batch, x, dz, scratch, dw, accumulate, &const { tables(5) }),
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(super) use weight_grad_winograd_entry;

weight_grad_winograd_entry!(
    weight_grad_winograd_avx512_f32,
    Avx512F32,
    f32,
    "avx512f",
    0,
    6
);
weight_grad_winograd_entry!(
    weight_grad_winograd_avx2_f32,
    Avx2F32,
    f32,
    "avx2,fma",
    6,
    1
);

/// The weight gradient of a batch of stride-1 convolutions without padding, `dw (+)= Σ over the
/// batch of dZ·X̂ᵀ` (`dz` as the layer has it, `[image][filter][position]`), by Winograd's
/// method along the rows, the filters in the lanes, with `isa` (see
/// [`weight_grad_winograd_run`]). The sums are taken at the tiles' points and transformed at the
/// end, so they differ from the direct kernel's in the last bits, a little more than the other
/// orders of summation do (the transforms' coefficients reach 16).
///
/// # Panics
///
/// When [`crate::kernels::winograd::applies`] is false for `shape`, the shape has padding, a slice's
/// length does not fit, `scratch` is shorter than [`weight_gradient_winograd_scratch`], or the
/// CPU does not have `isa`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_weight_gradient_winograd<E: Element>(
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
        crate::kernels::winograd::applies(shape) && shape.padding == 0,
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
