//! Winograd's minimal filtering for the input gradient of a stride-1 convolution: the same sums
//! as `col2im(Wᵀ·dZ)` with 2.8-4 times fewer multiplications.
//!
//! # The method
//!
//! `F(m, r)` computes `m` outputs of a 1-D correlation with an `r`-tap filter from a tile of
//! `n = m + r - 1` inputs as `y = Aᵀ[(G·g) ⊙ (Bᵀ·d)]`: `n` multiplications instead of `m·r`.
//! The three matrices come from evaluating polynomials at `n - 1` points and at infinity (the
//! Toom-Cook construction; here the points 0, 1, -1, 2, -2, so tiles are always 6 wide and
//! `m = 7 - r`). In two dimensions, one `m x m` block of outputs of one filter is
//!
//! ```text
//! Y = Aᵀ [ Σ_c U_c ⊙ V_c ] A,     U_c = G g_c Gᵀ (6 x 6),   V_c = Bᵀ d_c B (6 x 6)
//! ```
//!
//! where `d_c` is the 6 x 6 input tile of channel `c` and `g_c` the filter's `r x r` kernel on
//! that channel. Every step is linear, so the input gradient is the same steps transposed, in
//! reverse order:
//!
//! ```text
//! dM = A dY Aᵀ          (m x m -> 6 x 6, per filter and tile)
//! dV_c = Σ_f U_fc ⊙ dM_f (36 products of a C x OC matrix by an OC vector, per tile)
//! dd_c = B dV_c Bᵀ       (6 x 6, added into the input gradient where the tile read the input)
//! ```
//!
//! The products of the middle step are where the time goes: `36·C·OC` per tile of `m x m`
//! outputs, against `m²·r²·C·OC` for `col2im(Wᵀ·dZ)` (for a 5 x 5 kernel, 36 against 100).
//!
//! # Layout
//!
//! [`LANES`] images are done at once, one per vector lane: every array here is of
//! `[T; LANES]`, and every step is the same arithmetic in each lane, which the compiler turns
//! into vector instructions (the caller compiles this with AVX-512 or AVX2). A batch that is not a multiple of
//! `LANES` leaves the last group's extra lanes at zero.
//!
//! No `unsafe` here: the speed comes from the loops' shapes, not from intrinsics.

// Without `std` only the tables are used (by the SIMD forward kernel).
#![cfg_attr(not(feature = "std"), allow(dead_code))]

use super::shape::Conv;
use num_traits::Float;

/// The width of a tile: 5 finite points and infinity.
pub(crate) const TILE: usize = 6;
/// The positions of a tile, `TILE²`; the middle step does one product per position.
const POSITIONS: usize = TILE * TILE;
/// The images of a batch done at once, one per vector lane (a 512-bit vector of `f32`).
pub(crate) const LANES: usize = 16;

type Lanes<T> = [T; LANES];

/// Whether the input gradient of `shape` (stride 1) is computed here: kernels of 3 to 5, which
/// a 6-wide tile fits with at least 2 outputs. A 2 x 2 kernel would fit too (5 outputs a
/// side), but its transforms (powers of 2 up to 16) lose 2-4 times more precision in `f32`
/// than the others'. A layer with a size of 0 (channels, filters, the input's height or width)
/// takes the product and `col2im`, which handle them. Needs fused multiply-adds in hardware
/// (`std`'s `mul_add` on x86-64 with AVX2 or AVX-512), which the caller checks.
pub(crate) const fn applies(shape: &Conv) -> bool {
    shape.kernel >= 3
        && shape.kernel <= 5
        && shape.channels > 0
        && shape.filters > 0
        && shape.height > 0
        && shape.width > 0
}

/// The outputs per tile side, `m = 7 - r`.
pub(crate) const fn outputs_per_tile(kernel: usize) -> usize {
    TILE + 1 - kernel
}

/// The tiles along a side of `out` outputs, the last one partial when `m` does not divide it.
const fn tiles(out: usize, kernel: usize) -> usize {
    out.div_ceil(outputs_per_tile(kernel))
}

/// The sizes [`input_gradient`] works with for `shape`: the tiles down and across, and the
/// padded input they cover (`tiles·m + r - 1` along each side, at least the padded input).
const fn tiling(shape: &Conv) -> (usize, usize, usize, usize) {
    let m = outputs_per_tile(shape.kernel);
    let (high, wide) = (
        tiles(shape.out_height(), shape.kernel),
        tiles(shape.out_width(), shape.kernel),
    );
    (
        high,
        wide,
        high * m + shape.kernel - 1,
        wide * m + shape.kernel - 1,
    )
}

/// The elements of scratch [`input_gradient`] needs for `shape`: the transformed filters, one
/// tile's `A dY` and its `dV`, one group's `dZ` with the images in the lanes, and its padded
/// input gradient twice (images in the lanes, then image by image): for LeNet's second
/// convolution, 286 KiB of `f32`. About 16 times a layer's output and twice 16 times its
/// padded input: for many channels, several times the `d_patches` of the product and `col2im`
/// it replaces.
pub(crate) const fn scratch_len(shape: &Conv) -> usize {
    let (_, _, covered_high, covered_wide) = tiling(shape);
    let (c, f) = (shape.channels, shape.filters);
    let m = outputs_per_tile(shape.kernel);
    POSITIONS * f * c
        + (f * TILE * m + POSITIONS * c) * LANES
        + f * shape.out_height() * shape.out_width() * LANES
        + 2 * c * covered_high * covered_wide * LANES
}

/// The three matrices of `F(m, r)` on the points 0, 1, -1, 2, -2 and infinity, each stored in a
/// 6 x 6 array (the rows and columns past its size are zero). The kernels apply `G` as it is
/// and `A` and `B` written out ([`evaluate`], [`b_times`]), which the tests check against
/// these.
#[derive(Clone, Copy)]
struct Transforms {
    /// `Aᵀ`, `m x 6`.
    at: [[f64; TILE]; TILE],
    /// `G`, `6 x r`.
    g: [[f64; TILE]; TILE],
    /// `Bᵀ`, `6 x 6`.
    #[cfg_attr(not(test), allow(dead_code))]
    bt: [[f64; TILE]; TILE],
}

/// `G` of `F(7 - r, r)` (`6 x r`, in a 6 x 6 array): the filter's transform, applied as a
/// matrix (once per call, not per tile).
pub(crate) const fn filter_transform(r: usize) -> [[f64; TILE]; TILE] {
    Transforms::new(r).g
}

/// The tables of the weight gradient along the rows (`super::x86::weight_grad_winograd_run`) of a
/// `kernel`-wide convolution: `F(kernel, m)` with `m = 7 - kernel` gradients per tile, the
/// gradients the filter and the input's tile the data. The first, `6 x m`, evaluates the
/// polynomial whose coefficients are `m` gradients at the points (`p_νˢ`; the last row,
/// infinity, takes the leading coefficient): `G` without its denominators. The second,
/// `kernel x 6`, is `Aᵀ` with each column `ν` divided by that denominator (`Π_(l≠ν) (p_ν -
/// p_l)`, 1 for infinity), so that `dw[kx] = Σ_ν second[kx][ν] · Σ (first·g)_ν (Bᵀ·d)_ν`.
pub(crate) const fn gradient_transforms(kernel: usize) -> [[[f64; TILE]; TILE]; 2] {
    let m = outputs_per_tile(kernel);
    let t = Transforms::new(m);
    let mut evaluate = [[0.0; TILE]; TILE];
    let mut output = [[0.0; TILE]; TILE];
    let mut nu = 0;
    while nu < TILE {
        let mut denominator = 1.0;
        if nu < POINTS.len() {
            let p = POINTS[nu];
            let mut l = 0;
            while l < POINTS.len() {
                if l != nu {
                    denominator *= p - POINTS[l];
                }
                l += 1;
            }
            let mut s = 0;
            while s < m {
                evaluate[nu][s] = power(p, s);
                s += 1;
            }
        } else {
            evaluate[nu][m - 1] = 1.0;
        }
        let mut kx = 0;
        while kx < kernel {
            output[kx][nu] = t.at[kx][nu] / denominator;
            kx += 1;
        }
        nu += 1;
    }
    [evaluate, output]
}

/// `Aᵀ` and `Bᵀ` of `F(7 - r, r)`, for the tests of the kernels that write them out.
#[cfg(test)]
pub(crate) fn output_and_input_transforms(r: usize) -> [[[f64; TILE]; TILE]; 2] {
    let t = Transforms::new(r);
    [t.at, t.bt]
}

/// `x^n`, in a `const fn`.
const fn power(x: f64, n: usize) -> f64 {
    let mut value = 1.0;
    let mut i = 0;
    while i < n {
        value *= x;
        i += 1;
    }
    value
}

/// The coefficients (lowest power first) of `Π (x - p)` over `points` but `points[skip]`
/// (`skip` past the end: all of them), in an array of `N`.
const fn product_of_roots<const N: usize>(points: &[f64], skip: usize) -> [f64; N] {
    let mut coefficients = [0.0; N];
    coefficients[0] = 1.0;
    let mut degree = 0;
    let mut l = 0;
    while l < points.len() {
        if l != skip {
            // (c_0 + c_1 x + ..)(x - p)
            let mut i = degree + 1;
            loop {
                let shifted = if i > 0 { coefficients[i - 1] } else { 0.0 };
                coefficients[i] = shifted - points[l] * coefficients[i];
                if i == 0 {
                    break;
                }
                i -= 1;
            }
            degree += 1;
        }
        l += 1;
    }
    coefficients
}

/// The finite points the polynomials are evaluated at; infinity is the sixth.
const POINTS: [f64; TILE - 1] = [0.0, 1.0, -1.0, 2.0, -2.0];

/// The three matrices `[Aᵀ, G, Bᵀ]` of `F(N + 1 - r, r)` on the `N - 1` finite `points` and
/// infinity, by the Toom-Cook construction: with `N(x) = Π (x - p)` over the finite points,
/// `Aᵀ[i][j] = p_jⁱ`, `G[j][k] = p_jᵏ / Π_{l≠j} (p_j - p_l)`, row `j` of `Bᵀ` the coefficients of
/// `N(x) / (x - p_j)`; infinity contributes the last column of `Aᵀ` (`[0, .., 0, 1]`), the last
/// row of `G` (`[0, .., 0, 1]`) and the last row of `Bᵀ` (the coefficients of `N`). `Aᵀ` is
/// `m x N`, `G` `N x r`, `Bᵀ` `N x N`, each in an `N x N` array (the rest zero).
pub(crate) const fn toom_cook<const N: usize>(points: &[f64], r: usize) -> [[[f64; N]; N]; 3] {
    assert!(points.len() + 1 == N && r >= 1 && r <= N);
    let m = N + 1 - r;
    let mut at = [[0.0; N]; N];
    let mut g = [[0.0; N]; N];
    let mut bt = [[0.0; N]; N];
    let mut j = 0;
    while j < points.len() {
        let p = points[j];
        let mut i = 0;
        while i < m {
            at[i][j] = power(p, i);
            i += 1;
        }
        let mut norm = 1.0;
        let mut l = 0;
        while l < points.len() {
            if l != j {
                norm *= p - points[l];
            }
            l += 1;
        }
        let mut k = 0;
        while k < r {
            g[j][k] = power(p, k) / norm;
            k += 1;
        }
        bt[j] = product_of_roots(points, j);
        j += 1;
    }
    at[m - 1][N - 1] = 1.0;
    g[N - 1][r - 1] = 1.0;
    bt[N - 1] = product_of_roots(points, usize::MAX);
    [at, g, bt]
}

impl Transforms {
    /// [`toom_cook`] on the points 0, 1, -1, 2, -2 and infinity. The values are small integers
    /// and fractions with denominators dividing 24, exact in `f64`.
    const fn new(r: usize) -> Self {
        let [at, g, bt] = toom_cook::<TILE>(&POINTS, r);
        Transforms { at, g, bt }
    }
}

/// `a · x + y`, lane by lane.
#[inline(always)]
fn fma<T: Float>(a: T, x: Lanes<T>, y: Lanes<T>) -> Lanes<T> {
    let mut out = y;
    for (o, x) in out.iter_mut().zip(x) {
        *o = a.mul_add(x, *o);
    }
    out
}

/// `x + y` (or `x - y` with `sign` -1), lane by lane.
#[inline(always)]
fn add<T: Float>(x: Lanes<T>, sign: T, y: Lanes<T>) -> Lanes<T> {
    fma(sign, y, x)
}

/// A small constant in the element type.
#[inline(always)]
fn constant<T: Float>(v: f64) -> T {
    T::from(v).expect("a float type holds small integers")
}

/// `A·x` for `x` of `M` values: the polynomial with coefficients `x` evaluated at the points
/// 0, 1, -1, 2, -2 and (its leading coefficient) infinity. Written out, with the even and odd
/// powers summed apart so that ±1 and ±2 share them: the generic matrix product spent most of
/// its time on the zeros and ones of `A`.
#[inline(always)]
fn evaluate<T: Float, const M: usize>(x: [Lanes<T>; M]) -> [Lanes<T>; TILE] {
    // The sums start from their first terms, not from 0: `0 + v` is not `v` when `v` is -0.0,
    // so the compiler would have to add the zeros.
    let (mut even_1, mut even_2) = (x[0], x[0]);
    let (mut odd_1, mut odd_2) = (x[1], scale(constant(2.0), x[1]));
    for (p, &x_p) in x.iter().enumerate().skip(2) {
        let power_of_2 = constant::<T>(power(2.0, p));
        if p % 2 == 0 {
            even_1 = add(even_1, T::one(), x_p);
            even_2 = fma(power_of_2, x_p, even_2);
        } else {
            odd_1 = add(odd_1, T::one(), x_p);
            odd_2 = fma(power_of_2, x_p, odd_2);
        }
    }
    let minus = -T::one();
    [
        x[0],
        add(even_1, T::one(), odd_1),
        add(even_1, minus, odd_1),
        add(even_2, T::one(), odd_2),
        add(even_2, minus, odd_2),
        x[M - 1],
    ]
}

/// `a · x`, lane by lane.
#[inline(always)]
fn scale<T: Float>(a: T, x: Lanes<T>) -> Lanes<T> {
    x.map(|x| a * x)
}

/// `B·x` (`Bᵀ` of [`Transforms`] transposed), written out:
///
/// ```text
/// y0 = 4 x0
/// y1 = -4 (x1 - x2) - 2 (x3 - x4) + 4 x5
/// y2 = -5 x0 - 4 (x1 + x2) - (x3 + x4)
/// y3 =   (x1 - x2) + 2 (x3 - x4) - 5 x5
/// y4 =   x0 + (x1 + x2) + (x3 + x4)
/// y5 = x5
/// ```
#[inline(always)]
fn b_times<T: Float>(x: [Lanes<T>; TILE]) -> [Lanes<T>; TILE] {
    let (one, minus) = (T::one(), -T::one());
    let (c2, c4, c5) = (constant::<T>(2.0), constant::<T>(4.0), constant::<T>(5.0));
    let sum_12 = add(x[1], one, x[2]);
    let difference_12 = add(x[1], minus, x[2]);
    let sum_34 = add(x[3], one, x[4]);
    let difference_34 = add(x[3], minus, x[4]);
    [
        scale(c4, x[0]),
        fma(-c4, difference_12, fma(-c2, difference_34, scale(c4, x[5]))),
        fma(-c5, x[0], fma(-c4, sum_12, scale(minus, sum_34))),
        fma(c2, difference_34, fma(-c5, x[5], difference_12)),
        add(add(x[0], one, sum_12), one, sum_34),
        x[5],
    ]
}

/// A table of [`Transforms`] in the element type.
fn cast<T: Float>(table: &[[f64; TILE]; TILE]) -> [[T; TILE]; TILE] {
    table.map(|row| row.map(|v| T::from(v).expect("a float type holds small fractions")))
}

/// The input gradient of a stride-1 convolution of `shape` for a batch of `batch` images:
/// `dx = col2im(Wᵀ·dZ)` of each image, by the transposed Winograd steps (see the module
/// documentation). `dz` is `batch x OC x OH x OW`, `w` the filters `OC x C x r x r`, `dx`
/// (written, not added to) `batch x C x H x W`; `scratch` holds [`scratch_len`] elements.
///
/// # Panics
///
/// When [`applies`] is false for `shape` or a slice's length does not fit (bugs in the caller).
#[cfg(feature = "std")]
// Inlined into its callers, compiled with AVX-512 or AVX2 (`super::x86::winograd_input_gradient`):
// compiled on its own, for baseline x86-64, `mul_add` would be a call to a software fused
// multiply-add.
#[inline(always)]
pub(crate) fn input_gradient<T: Float + 'static>(
    shape: &Conv,
    batch: usize,
    dz: &[T],
    w: &[T],
    dx: &mut [T],
    scratch: &mut [T],
) {
    input_gradient_by::<T, 1>(shape, batch, dz, w, dx, scratch);
}

/// [`input_gradient`], its sums over the filters taken `J` positions of a tile's row at a time
/// (1, 2, 3 or 6; see [`row_of_d_v`]): 3 where 18 vectors of sums fit the registers (`f32` on
/// AVX-512), 1 elsewhere. The same sums in the same order whatever `J`: the same bits.
#[cfg(feature = "std")]
#[inline(always)]
pub(crate) fn input_gradient_by<T: Float + 'static, const J: usize>(
    shape: &Conv,
    batch: usize,
    dz: &[T],
    w: &[T],
    dx: &mut [T],
    scratch: &mut [T],
) {
    // One copy of the kernel per kernel size: its loops over a tile's outputs then have
    // constant bounds, and unroll.
    match shape.kernel {
        3 => sized::<T, 3, 4, J>(shape, batch, dz, w, dx, scratch),
        4 => sized::<T, 4, 3, J>(shape, batch, dz, w, dx, scratch),
        5 => sized::<T, 5, 2, J>(shape, batch, dz, w, dx, scratch),
        _ => panic!("no Winograd tile for {shape:?}"),
    }
}

#[cfg(feature = "std")]
/// [`input_gradient`] for a kernel of `R`, `M = 7 - R` outputs per tile side.
#[inline(always)]
fn sized<T: Float + 'static, const R: usize, const M: usize, const J: usize>(
    shape: &Conv,
    batch: usize,
    dz: &[T],
    w: &[T],
    dx: &mut [T],
    scratch: &mut [T],
) {
    let transforms = const { Transforms::new(R) };
    let Conv {
        channels,
        filters,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let (image_len, output_len) = (channels * height * width, filters * out_height * out_width);
    assert!(
        R == shape.kernel
            && M == outputs_per_tile(R)
            && dz.len() == batch * output_len
            && w.len() == filters * channels * R * R
            && dx.len() == batch * image_len
            && scratch.len() >= scratch_len(shape),
        "Winograd operands of {}, {}, {}, {} elements do not fit a batch of {batch} of {shape:?}",
        dz.len(),
        w.len(),
        dx.len(),
        scratch.len(),
    );
    let (tiles_high, tiles_wide, covered_high, covered_wide) = tiling(shape);
    let covered = covered_high * covered_wide;

    let (u, rest) = scratch.split_at_mut(POSITIONS * filters * channels);
    let (a_dy_all, rest) = rest.split_at_mut(filters * TILE * M * LANES);
    let (d_v, rest) = rest.split_at_mut(POSITIONS * channels * LANES);
    let (group_dz, rest) = rest.split_at_mut(output_len * LANES);
    let (group_dx, rest) = rest.split_at_mut(channels * covered * LANES);
    let by_image = &mut rest[..channels * covered * LANES];
    let a_dy_all = a_dy_all.as_chunks_mut::<LANES>().0;
    let a_dy_all = a_dy_all.as_chunks_mut::<M>().0.as_chunks_mut::<TILE>().0;
    let (d_v, group_dx) = (
        d_v.as_chunks_mut::<LANES>().0,
        group_dx.as_chunks_mut::<LANES>().0,
    );

    // U = G g Gᵀ of every (filter, channel), once per batch, stored position-major
    // (u[(ξ·OC + f)·C + c]): the sums over the filters at one position read it in order.
    let g = cast::<T>(&transforms.g);
    for f in 0..filters {
        for c in 0..channels {
            let kernel = &w[(f * channels + c) * R * R..][..R * R];
            let mut g_times_kernel = [[T::zero(); R]; TILE];
            for (i, row) in g_times_kernel.iter_mut().enumerate() {
                for (l, value) in row.iter_mut().enumerate() {
                    *value = (0..R).fold(T::zero(), |s, k| s + g[i][k] * kernel[k * R + l]);
                }
            }
            for (i, row) in g_times_kernel.iter().enumerate() {
                for j in 0..TILE {
                    let value = (0..R).fold(T::zero(), |s, l| s + row[l] * g[j][l]);
                    u[((i * TILE + j) * filters + f) * channels + c] = value;
                }
            }
        }
    }

    for group in (0..batch).step_by(LANES) {
        let images = LANES.min(batch - group);
        // The group's dZ with the images in the lanes ([filter][y][x][image]), so that every
        // step below is one vector operation for the whole group.
        let group_dz = {
            let from = &dz[group * output_len..][..images * output_len];
            if images == LANES {
                super::x86::transpose(from, LANES, group_dz);
            } else {
                group_dz.fill(T::zero());
                for (l, image) in from.chunks_exact(output_len).enumerate() {
                    for (k, &v) in image.iter().enumerate() {
                        group_dz[k * LANES + l] = v;
                    }
                }
            }
            group_dz.as_chunks::<LANES>().0
        };
        group_dx.fill([T::zero(); LANES]);
        for tile_y in 0..tiles_high {
            for tile_x in 0..tiles_wide {
                let (y0, x0) = (tile_y * M, tile_x * M);
                // A dY of each filter (6 x m); dY is zero past the output's edge.
                for (f, a_dy) in a_dy_all.iter_mut().enumerate() {
                    let plane = &group_dz[f * out_height * out_width..][..out_height * out_width];
                    let mut d_y = [[[T::zero(); LANES]; M]; M];
                    for (p, row) in d_y.iter_mut().enumerate() {
                        for (q, lanes) in row.iter_mut().enumerate() {
                            let (oy, ox) = (y0 + p, x0 + q);
                            if oy < out_height && ox < out_width {
                                *lanes = plane[oy * out_width + ox];
                            }
                        }
                    }
                    for q in 0..M {
                        let column = evaluate(d_y.map(|row| row[q]));
                        for (row, value) in a_dy.iter_mut().zip(column) {
                            row[q] = value;
                        }
                    }
                }
                // Row i of dM = (A dY) Aᵀ for every filter, and dV_c = Σ_f U_fc ⊙ dM_f at the
                // row's 6 positions.
                for i in 0..TILE {
                    row_of_d_v::<T, M, J>(i, u, a_dy_all, d_v);
                }
                // dd_c = B dV_c Bᵀ, added where the tile read the input.
                for c in 0..channels {
                    // B dV, column by column, then (B dV) Bᵀ, row by row.
                    let mut b_dv = [[[T::zero(); LANES]; TILE]; TILE];
                    for j in 0..TILE {
                        let column: [Lanes<T>; TILE] =
                            core::array::from_fn(|i| d_v[(i * TILE + j) * channels + c]);
                        for (row, value) in b_dv.iter_mut().zip(b_times(column)) {
                            row[j] = value;
                        }
                    }
                    let plane = &mut group_dx[c * covered..][..covered];
                    for (a, &b_dv_row) in b_dv.iter().enumerate() {
                        let row = &mut plane[(y0 + a) * covered_wide + x0..][..TILE];
                        for (lanes, value) in row.iter_mut().zip(b_times(b_dv_row)) {
                            *lanes = add(*lanes, T::one(), value);
                        }
                    }
                }
            }
        }
        // Back to one image after another in one transpose (vector shuffles for f32 with
        // AVX-512), then each image without its padding.
        super::x86::transpose(group_dx.as_flattened(), channels * covered, by_image);
        for (l, image) in dx[group * image_len..]
            .chunks_exact_mut(image_len)
            .take(images)
            .enumerate()
        {
            let padded = &by_image[l * channels * covered..][..channels * covered];
            for (plane, padded) in image
                .chunks_exact_mut(height * width)
                .zip(padded.chunks_exact(covered))
            {
                let inside = &padded[padding * covered_wide + padding..];
                super::im2col::copy_rows(inside, covered_wide, plane, width, (height, width));
            }
        }
    }
}

/// The filters whose rows of `dM` are evaluated at a time into a stack buffer (6 KiB in
/// `f32`), for kernels of 3 and 4 (see [`row_of_d_v`]).
const EVALUATED_FILTERS: usize = 16;

/// A filter's row of `dM` as a pass reads it: evaluated already ([`Evaluated`]), or `A dY`
/// (`[6][m]`), whose row `i` it evaluates where it is read.
trait RowOfDm<T> {
    /// Row `i` at the tile's 6 positions.
    fn positions(&self, i: usize) -> [Lanes<T>; TILE];
}

/// A row of `dM` evaluated at the tile's 6 positions.
#[derive(Clone, Copy)]
struct Evaluated<T>([Lanes<T>; TILE]);

impl<T: Float> RowOfDm<T> for Evaluated<T> {
    #[inline(always)]
    fn positions(&self, _: usize) -> [Lanes<T>; TILE] {
        self.0
    }
}

impl<T: Float, const M: usize> RowOfDm<T> for [[Lanes<T>; M]; TILE] {
    #[inline(always)]
    fn positions(&self, i: usize) -> [Lanes<T>; TILE] {
        evaluate(self[i])
    }
}

/// Row `i` of `dV_c = Σ_f U_fc ⊙ dM_f` for every channel `c`, at the row's 6 positions, from
/// each filter's `A dY` (`a_dy_all`, `[f][6][m]`). A pass takes `J` positions by 6 channels,
/// so that `6·J` vectors of sums stay in registers while each filter's row of `dM` is read
/// once per pass; `u` is position-major (`u[(ξ·F + f)·C + c]`). The sums over the filters are
/// taken from `f = 0` up whatever `J` (a pass after the first block of filters starts from the
/// sums it stored), so the bits do not depend on how rows are evaluated.
///
/// `dM_f`'s row `i`, `(A dY)[i]` evaluated at the points: for kernels of 3 and 4 (`m` of 4
/// and 3) evaluated once for [`EVALUATED_FILTERS`] filters at a time into a stack buffer that
/// every pass reads, since a pass per 6 channels evaluating it would evaluate each row `C / 6`
/// times (with AVX2, 40% of the multiply-adds of a 3 x 3 layer on 32 channels); for 5 x 5 (`m`
/// = 2, a position one addition) evaluated where it is read, which measured faster: a store
/// and a load per position cost more than the addition.
#[cfg(feature = "std")]
#[inline(always)]
fn row_of_d_v<T: Float, const M: usize, const J: usize>(
    i: usize,
    u: &[T],
    a_dy_all: &[[[Lanes<T>; M]; TILE]],
    d_v: &mut [Lanes<T>],
) {
    const {
        assert!(
            J == 1 || J == 2 || J == 3 || J == 6,
            "J divides a tile's row"
        )
    };
    let channels = d_v.len() / POSITIONS;
    let filters = a_dy_all.len();
    // The passes of J positions over every channel, for the rows of filters `f0..`. The
    // positions of a pass are constants (`S`), and so its reads of a row.
    macro_rules! passes {
        ($rows:expr, $f0:expr; $($start:literal)*) => {$(
            if $start % J == 0 {
                let mut c0 = 0;
                while c0 < channels {
                    let at = (i, c0, $f0, filters);
                    match channels - c0 {
                        1 => pass::<T, _, J, 1, $start>(at, u, $rows, d_v),
                        2 => pass::<T, _, J, 2, $start>(at, u, $rows, d_v),
                        3 => pass::<T, _, J, 3, $start>(at, u, $rows, d_v),
                        4 => pass::<T, _, J, 4, $start>(at, u, $rows, d_v),
                        5 => pass::<T, _, J, 5, $start>(at, u, $rows, d_v),
                        _ => pass::<T, _, J, 6, $start>(at, u, $rows, d_v),
                    }
                    c0 += 6;
                }
            }
        )*};
    }
    if M > 2 {
        let mut evaluated = [Evaluated([[T::zero(); LANES]; TILE]); EVALUATED_FILTERS];
        for f0 in (0..filters).step_by(EVALUATED_FILTERS) {
            let block = &a_dy_all[f0..filters.min(f0 + EVALUATED_FILTERS)];
            for (d_m, a_dy) in evaluated.iter_mut().zip(block) {
                *d_m = Evaluated(evaluate(a_dy[i]));
            }
            let rows = &evaluated[..block.len()];
            passes!(rows, f0; 0 1 2 3 4 5);
        }
    } else {
        passes!(a_dy_all, 0; 0 1 2 3 4 5);
    }

    /// The sums of positions `S..S + J` of row `i` and channels `c0..c0 + N` over filters
    /// `f0..f0 + rows.len()` (of `filters`), added to those of the filters before `f0`.
    /// Inlined in optimized builds, into the caller compiled with the wide vectors (a call
    /// would be compiled for the baseline). In unoptimized builds a call: inlined there, the
    /// locals of its copies each kept a slot of their own, and the caller's frame overflowed a
    /// test thread's 2 MiB stack.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline(never))]
    fn pass<T: Float, R: RowOfDm<T>, const J: usize, const N: usize, const S: usize>(
        (i, c0, f0, filters): (usize, usize, usize, usize),
        u: &[T],
        rows: &[R],
        d_v: &mut [Lanes<T>],
    ) {
        let channels = d_v.len() / POSITIONS;
        let mut sums = [[[T::zero(); LANES]; N]; J];
        if f0 > 0 {
            for (j, sums) in sums.iter_mut().enumerate() {
                sums.copy_from_slice(&d_v[(i * TILE + S + j) * channels + c0..][..N]);
            }
        }
        for (f, row) in rows.iter().enumerate() {
            let d_m = row.positions(i);
            for (j, sums) in sums.iter_mut().enumerate() {
                let u = &u[((i * TILE + S + j) * filters + f0 + f) * channels + c0..][..N];
                for (sum, &u) in sums.iter_mut().zip(u) {
                    for (s, &x) in sum.iter_mut().zip(&d_m[S + j]) {
                        *s = u.mul_add(x, *s);
                    }
                }
            }
        }
        for (j, sums) in sums.iter().enumerate() {
            d_v[(i * TILE + S + j) * channels + c0..][..N].copy_from_slice(sums);
        }
    }
}

// Its kernels (`input_gradient_by`, the SIMD ones) are built with `std`.
#[cfg(all(test, feature = "std"))]
pub(in crate::kernels) mod tests;
