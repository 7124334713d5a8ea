//! Winograd's minimal filtering along the rows (`F(5, 2)`) with a row's tiles in the vector
//! lanes: the weight gradient of a 5 x 5 convolution with few filters on narrow images
//! (LeNet-5's first layer: 6 filters, 28 x 28 images padded by 2), on AVX-512 with `f32`.
//!
//! The other Winograd kernels put the filters in the lanes, which a layer of 6 filters fills
//! to 6 of 16. Here lane `p` holds tile `p` of a row: the 6 padded inputs from column `2p`
//! (`d`), and the 2 output gradients at columns `2p` and `2p + 1` (`g`). A row of at most 32
//! padded columns is at most 14 tiles of 2 outputs: one vector. Gathering a tile's inputs from a
//! row is one two-source permute per input (`vpermt2ps`), zero-masked where the column is
//! padding or past the row, so the images are padded as they are read.
//!
//! For filter `f`, channel `c`, kernel row `ky` and output row `oy`, the weight gradient sums
//! `dw[kx] = Σ_ox dz[ox] · x[ox + kx]` along the row, a correlation of the input row with the
//! row's 2-tap gradients, tile by tile: `Aᵀ[(G·g) ⊙ (Bᵀ·d)]` with the tables of
//! [`crate::kernels::winograd::gradient_transforms`] (`F(5, 2)`). All of it is linear, so the
//! sums over the batch, the rows and the tiles (the lanes) are taken at the 6 points and `Aᵀ`
//! is applied once per call: per image, 6 products per tile where the direct sums take 10, and
//! `Bᵀ·d` once per padded row, shared by every filter and kernel row.

use super::conv_winograd_rows::winograd_input_transform;
use super::isa::{Isa, assert_isa};
use super::simd::{Avx512F32, array_from};
use core::arch::x86_64::*;

use crate::kernels::shape::Conv;

/// The kernel size this path computes.
pub(super) const KERNEL: usize = 5;
/// The gradient columns per tile: the `2` of `F(5, 2)`.
pub(super) const OUTPUTS: usize = 2;
/// The points of a tile (and the inputs it covers).
pub(super) const TILE: usize = crate::kernels::winograd::TILE;
/// A vector of `f32` on AVX-512.
pub(super) const LANES: usize = 16;
/// The filters of a tile of [`weight_gradient_tile`]: 3 filters by the 5 kernel rows keep 15
/// accumulators, 3 gradient vectors and an input in registers, and do 15 multiply-adds for 8
/// loads (11 at the four points where the gradients are evaluated from both columns).
pub(super) const TILE_FILTERS: usize = 3;

/// Whether [`conv2d_weight_gradient`] computes `shape`'s weight gradient: a 5 x 5 kernel, at
/// least one output, and a padded row of at most 32 columns (two vectors; its tiles one).
pub(crate) const fn applies(shape: &Conv) -> bool {
    shape.kernel == KERNEL
        && shape.channels > 0
        && shape.filters > 0
        && shape.height > 0
        && shape.width > 0
        && shape.height + 2 * shape.padding >= KERNEL
        && shape.width + 2 * shape.padding >= KERNEL
        && shape.width + 2 * shape.padding <= 2 * LANES
}

/// The tiles across an output row: `⌈OW / 2⌉`, at most 14 where [`applies`] holds.
const fn tiles(shape: &Conv) -> usize {
    shape.out_width().div_ceil(OUTPUTS)
}

/// The scratch elements [`conv2d_weight_gradient`] needs for `shape`: one image's input
/// transforms (`[ν][c][padded row]`), one block of filters' gradients split into the tiles'
/// first and second (`[f][oy][s]`), and the sums (`[ν][f][c][ky]`), each a vector. For LeNet-5's
/// first layer, 8,640 (34 KiB).
pub(crate) const fn weight_gradient_scratch(shape: &Conv) -> usize {
    let rows = shape.height + 2 * shape.padding;
    (TILE * shape.channels * rows
        + OUTPUTS * TILE_FILTERS * shape.out_height()
        + TILE * shape.filters * shape.channels * KERNEL)
        * LANES
}

/// The output gradients [`conv2d_weight_gradient`] reads, each `batch x filters x OH x OW`.
pub(crate) enum Gradients<'a> {
    /// `dZ`, the gradient of the pre-activations, as it is.
    PreActivation(&'a [f32]),
    /// A ReLU layer's outputs `A` and their gradient `dA`: the kernel forms
    /// `dZ = dA · ReLU'(A)` (`dA · 1` where `A > 0`, `dA · 0` elsewhere, as the layer's own
    /// loop does, so a NaN still spreads) as it reads the rows, and writes the bias gradient
    /// `db = Σ dZ` over the batch and positions (`filters` long; added to under
    /// `accumulate`), so that the layer need not write `dZ` for a kernel to read it again.
    ThroughRelu {
        output: &'a [f32],
        d_output: &'a [f32],
        d_bias: &'a mut [f32],
    },
}

/// `dw (+)= Σ over the batch of dZ·X̂ᵀ` for a stride-1 convolution of `shape` (padding
/// included: `x` holds the images without it) by Winograd's method with the row's tiles in the
/// lanes (see the module's documentation), with `isa`, `dZ` read from `gradients`. The sums are
/// taken at the points and transformed at the end, so they differ from the direct kernel's in
/// the last bits.
///
/// # Panics
///
/// When [`applies`] is false for `shape`, a slice's length does not fit, `scratch` is not
/// [`weight_gradient_scratch`] long, or `isa` is not AVX-512 or not present.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_weight_gradient(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[f32],
    gradients: Gradients<'_>,
    scratch: &mut [f32],
    dw: &mut [f32],
    accumulate: bool,
) {
    assert!(applies(shape), "no row-tiles kernel for {shape:?}");
    let (dz, mut relu) = match gradients {
        Gradients::PreActivation(dz) => (dz, None),
        Gradients::ThroughRelu {
            output,
            d_output,
            d_bias,
        } => {
            assert_eq!(output.len(), d_output.len(), "A and dA of {shape:?}");
            assert_eq!(
                d_bias.len(),
                shape.filters,
                "the bias gradient of {shape:?}"
            );
            (d_output, Some((output, d_bias)))
        }
    };
    shape.check_batch(batch, x.len(), dw.len(), shape.filters, dz.len());
    assert_eq!(
        scratch.len(),
        weight_gradient_scratch(shape),
        "the scratch of the weight gradient of {shape:?}"
    );
    assert!(isa == Isa::Avx512, "the row-tiles kernel is AVX-512 only");
    assert_isa(isa);
    if let Some((_, d_bias)) = &mut relu
        && !accumulate
    {
        d_bias.fill(0.0);
    }
    // SAFETY: AVX-512F is present (`assert_isa`); the sizes and lengths were checked above.
    unsafe { weight_gradient_avx512(shape, batch, x, dz, relu, scratch, dw, accumulate) }
}

/// Gathers the inputs of every tile of a row: input `j` of tile `p` is column `2p + j - pad`
/// of the row, zero where that column is outside `0..width` or the tile past the last.
struct RowGather<const N: usize> {
    index: [__m512i; N],
    mask: [__mmask16; N],
    /// The columns in each of the row's two vectors.
    halves: [__mmask16; 2],
}

impl<const N: usize> RowGather<N> {
    /// The gather of the first `N` inputs of `tiles` tiles from rows of `width <= 32` columns
    /// that start `pad` columns into the padded row.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn new(width: usize, pad: usize, tiles: usize) -> Self {
        let mut index = [[0_i32; LANES]; N];
        let mut mask = [0_u16; N];
        for (j, (index, mask)) in index.iter_mut().zip(&mut mask).enumerate() {
            for (p, index) in index.iter_mut().enumerate() {
                let column = (OUTPUTS * p + j) as isize - pad as isize;
                if p < tiles && column >= 0 && (column as usize) < width {
                    *index = column as i32;
                    *mask |= 1 << p;
                }
            }
        }
        // SAFETY: AVX-512F is present (the caller's contract); `index` holds N·16 `i32`s.
        unsafe {
            let lanes = |n: usize| ((1_u32 << n.min(LANES)) - 1) as u16;
            Self {
                index: array_from(|j| _mm512_loadu_si512(index[j].as_ptr().cast())),
                mask,
                halves: [lanes(width), lanes(width.saturating_sub(LANES))],
            }
        }
    }

    /// The tiles' `N` inputs from the row at `row`.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `row` is valid for reading the `width` columns `new` was given
    /// (nothing past them: the second half's address is formed with `wrapping_add`, as a row
    /// of at most 16 columns may end its allocation, and its load then has an empty mask).
    #[inline(always)]
    unsafe fn gather(&self, row: *const f32) -> [__m512; N] {
        // SAFETY: the caller's contract is `load`'s.
        unsafe { self.permute(self.load(row)) }
    }

    /// The tiles' `N` inputs from `dA · ReLU'(A)`, the rows of `dA` and `A` at `d_output` and
    /// `output`: `dA · 1` where `A > 0`, `dA · 0` elsewhere (a NaN in `dA` spreads, as in the
    /// layer's loop).
    ///
    /// # Safety
    ///
    /// As [`Self::gather`], for both rows.
    #[inline(always)]
    unsafe fn gather_through_relu(&self, d_output: *const f32, output: *const f32) -> [__m512; N] {
        // SAFETY: the caller's contract is `load`'s, for both rows.
        unsafe {
            let (da, a) = (self.load(d_output), self.load(output));
            let one = _mm512_set1_ps(1.0);
            let dz = array_from(|i| {
                let positive = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a[i], _mm512_setzero_ps());
                _mm512_mul_ps(da[i], _mm512_maskz_mov_ps(positive, one))
            });
            self.permute(dz)
        }
    }

    /// The row's two vectors, zero past its `width` columns.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `row` is valid for reading the `width` columns `new` was given
    /// (nothing past them: the second half's address is formed with `wrapping_add`, as a row
    /// of at most 16 columns may end its allocation, and its load then has an empty mask).
    #[inline(always)]
    unsafe fn load(&self, row: *const f32) -> [__m512; 2] {
        // SAFETY: the masked loads read columns below `width` only (the caller's contract).
        unsafe {
            [
                _mm512_maskz_loadu_ps(self.halves[0], row),
                _mm512_maskz_loadu_ps(self.halves[1], row.wrapping_add(LANES)),
            ]
        }
    }

    /// The tiles' `N` inputs from a row's two vectors.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn permute(&self, [low, high]: [__m512; 2]) -> [__m512; N] {
        // SAFETY: AVX-512F is present (the caller's contract); no memory is touched.
        unsafe {
            array_from(|j| _mm512_maskz_permutex2var_ps(self.mask[j], low, self.index[j], high))
        }
    }
}

/// The tables of `F(5, 2)` ([`crate::kernels::winograd::gradient_transforms`]) in `f32`: the
/// gradients evaluated at the points (`[ν][s]`, `s < 2`) and `Aᵀ` with the denominators
/// (`[kx][ν]`).
pub(super) const TABLES: [[[f32; TILE]; TILE]; 2] = {
    let t = crate::kernels::winograd::gradient_transforms(KERNEL);
    let mut out = [[[0.0; TILE]; TILE]; 2];
    let mut i = 0;
    while i < 2 * TILE * TILE {
        out[i / 36][i / 6 % 6][i % 6] = t[i / 36][i / 6 % 6][i % 6] as f32;
        i += 1;
    }
    out
};

/// # Safety
///
/// The CPU has AVX-512F; the sizes and lengths were checked by [`conv2d_weight_gradient`].
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn weight_gradient_avx512(
    shape: &Conv,
    batch: usize,
    x: &[f32],
    dz: &[f32],
    mut relu: Option<(&[f32], &mut [f32])>,
    scratch: &mut [f32],
    dw: &mut [f32],
    accumulate: bool,
) {
    let finish = &TABLES[1];
    let Conv {
        channels,
        filters,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let rows = height + 2 * padding;
    let tiles = tiles(shape);
    let (image_len, output_len) = (shape.image_len(), shape.output_len());
    let (v, rest) = scratch.split_at_mut(TILE * channels * rows * LANES);
    let (h, sums) = rest.split_at_mut(OUTPUTS * TILE_FILTERS * out_height * LANES);
    sums.fill(0.0);
    let (v, h, sums) = (v.as_mut_ptr(), h.as_mut_ptr(), sums.as_mut_ptr());
    // Where point ν's blocks start.
    let (v_point, sums_point) = (channels * rows * LANES, filters * channels * KERNEL * LANES);
    // SAFETY (whole body): AVX-512F is present (the caller's contract). The rows gathered are
    // rows of image b < batch (channel c, row r - padding < H, W columns) and of its gradients
    // (filter f0 + i < F, row oy < OH, OW columns), inside `x` and `dz`; the vectors written
    // and read in `v`, `h` and `sums` are inside the blocks split above ([ν][c][r],
    // [f - f0][oy][s] for a block of at most TILE_FILTERS filters, [ν][f][c][ky], each index
    // below its size); the weight gradients written are the F·C·K·K of `dw`. `A`'s rows are
    // read where `dA`'s (`dz`) are, in a slice as long; the bias gradient is `filters` long.
    unsafe {
        let inputs = RowGather::<TILE>::new(width, padding, tiles);
        let gradients = RowGather::<OUTPUTS>::new(out_width, 0, tiles);
        for b in 0..batch {
            let x = x.as_ptr().add(b * image_len);
            for c in 0..channels {
                for r in 0..rows {
                    let d = if r >= padding && r - padding < height {
                        inputs.gather(x.add((c * height + r - padding) * width))
                    } else {
                        [_mm512_setzero_ps(); TILE]
                    };
                    let z = winograd_input_transform::<Avx512F32>(d);
                    for (nu, z) in z.into_iter().enumerate() {
                        _mm512_storeu_ps(v.add(nu * v_point + (c * rows + r) * LANES), z);
                    }
                }
            }
            let dz = dz.as_ptr().add(b * output_len);
            for f0 in (0..filters).step_by(TILE_FILTERS) {
                // The gradients of the block's rows split into the tiles' first and second
                // (`[f - f0][oy][s]`): the tiles evaluate them at each point as they go. (The
                // values at the 6 points, stored for every filter, were 3 times the stores,
                // and the transforms, gradients and sums of an image did not fit L1.)
                let block = TILE_FILTERS.min(filters - f0);
                for f in 0..block {
                    let mut bias = _mm512_setzero_ps();
                    for row in f * out_height..(f + 1) * out_height {
                        let row_at = (f0 * out_height + row) * out_width;
                        let g = match &relu {
                            None => gradients.gather(dz.add(row_at)),
                            Some((a, _)) => {
                                let a = a.as_ptr().add(b * output_len + row_at);
                                let g = gradients.gather_through_relu(dz.add(row_at), a);
                                // The tiles' two columns hold the row's once (the rest 0).
                                bias = _mm512_add_ps(bias, _mm512_add_ps(g[0], g[1]));
                                g
                            }
                        };
                        _mm512_storeu_ps(h.add(2 * row * LANES), g[0]);
                        _mm512_storeu_ps(h.add((2 * row + 1) * LANES), g[1]);
                    }
                    if let Some((_, d_bias)) = &mut relu {
                        d_bias[f0 + f] += _mm512_reduce_add_ps(bias);
                    }
                }
                let h = h.cast_const();
                for c in 0..channels {
                    let v = v.add(c * rows * LANES).cast_const();
                    let sums = sums.add((f0 * channels + c) * KERNEL * LANES);
                    let stride = channels * KERNEL * LANES;
                    macro_rules! point {
                        ($nu:literal) => {{
                            let (v, sums) = (v.add($nu * v_point), sums.add($nu * sums_point));
                            match block {
                                1 => weight_gradient_tile::<1, $nu>(out_height, h, v, sums, stride),
                                2 => weight_gradient_tile::<2, $nu>(out_height, h, v, sums, stride),
                                _ => weight_gradient_tile::<3, $nu>(out_height, h, v, sums, stride),
                            }
                        }};
                    }
                    point!(0);
                    point!(1);
                    point!(2);
                    point!(3);
                    point!(4);
                    point!(5);
                }
            }
        }
        // dw[f][c][ky][kx] = Σ_ν finish[kx][ν] · (the lanes' sum of sums[ν][f][c][ky]).
        for f in 0..filters {
            for c in 0..channels {
                for ky in 0..KERNEL {
                    let at = ((f * channels + c) * KERNEL + ky) * LANES;
                    let point: [f32; TILE] = array_from(|nu| {
                        _mm512_reduce_add_ps(_mm512_loadu_ps(sums.add(nu * sums_point + at)))
                    });
                    for (kx, finish) in finish.iter().take(KERNEL).enumerate() {
                        let value: f32 = finish.iter().zip(&point).map(|(&a, &s)| a * s).sum();
                        let to = &mut dw[((f * channels + c) * KERNEL + ky) * KERNEL + kx];
                        *to = if accumulate { *to + value } else { value };
                    }
                }
            }
        }
    }
}

/// The gradients of a row's tiles, `h` (the tiles' first and second, a vector apart),
/// evaluated at point `NU`: `G` (without its denominators) times them, `G`'s row a constant
/// here, so that its zeros and ones cost nothing. (A closure would not be compiled with the
/// caller's instruction set, and would not inline.)
///
/// # Safety
///
/// The CPU has AVX-512F; `h` is valid for reading two vectors.
#[inline(always)]
unsafe fn at_point<const NU: usize>(h: *const f32) -> __m512 {
    let [a, b] = [TABLES[0][NU][0], TABLES[0][NU][1]];
    // SAFETY: AVX-512F is present; the vectors read are the two the contract names.
    unsafe {
        if b == 0.0 {
            _mm512_mul_ps(_mm512_set1_ps(a), _mm512_loadu_ps(h))
        } else if a == 0.0 {
            _mm512_mul_ps(_mm512_set1_ps(b), _mm512_loadu_ps(h.add(LANES)))
        } else {
            _mm512_fmadd_ps(
                _mm512_set1_ps(b),
                _mm512_loadu_ps(h.add(LANES)),
                _mm512_mul_ps(_mm512_set1_ps(a), _mm512_loadu_ps(h)),
            )
        }
    }
}

/// One tile of the weight gradient at point `NU`: the sums of `NF` filters by the 5 kernel
/// rows of one channel, over an image's output rows. Per output row, the `NF` filters'
/// gradients evaluated at the point (from the tiles' two, `h`) and the 5 input transforms of
/// the rows `oy..oy + 5` meet in `5·NF` accumulators.
///
/// # Safety
///
/// The CPU has AVX-512F; `h` holds the `NF` filters' `out_height` pairs of vectors, `v` the
/// channel's `out_height + 4` rows at the point, `sums` the `NF` filters' 5 vectors (`stride`
/// apart).
#[inline(always)]
unsafe fn weight_gradient_tile<const NF: usize, const NU: usize>(
    out_height: usize,
    h: *const f32,
    v: *const f32,
    sums: *mut f32,
    stride: usize,
) {
    // SAFETY: AVX-512F is present and every vector read or written is one the contract names.
    unsafe {
        let mut acc: [[__m512; KERNEL]; NF] =
            array_from(|f| array_from(|ky| _mm512_loadu_ps(sums.add(f * stride + ky * LANES))));
        for oy in 0..out_height {
            let g: [__m512; NF] =
                array_from(|f| at_point::<NU>(h.add(2 * (f * out_height + oy) * LANES)));
            for ky in 0..KERNEL {
                let d = _mm512_loadu_ps(v.add((oy + ky) * LANES));
                for (acc, &g) in acc.iter_mut().zip(&g) {
                    acc[ky] = _mm512_fmadd_ps(g, d, acc[ky]);
                }
            }
        }
        for (f, acc) in acc.iter().enumerate() {
            for (ky, &sum) in acc.iter().enumerate() {
                _mm512_storeu_ps(sums.add(f * stride + ky * LANES), sum);
            }
        }
    }
}
