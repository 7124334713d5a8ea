//! The int8 layers' dot products and requantization, on the SIMD kernels where the CPU has them.

pub(crate) use super::shape::{Requantization, WindowShape};

/// `sums[r] = Σ_i weight[r·n + i] · x[i]` (`n = x.len()`): the dot products of the int8 layers,
/// exact in `i32` (their callers bound `n` so that no sum can overflow), on the SIMD kernels
/// (AVX-512BW or AVX2: the `i8` values widened to `i16` and multiplied-and-added in pairs) where
/// the CPU has them, on plain loops elsewhere.
///
/// # Panics
///
/// When `weight.len() != sums.len() · x.len()` (a bug in the caller).
pub(crate) fn dot_rows_i8(weight: &[i8], x: &[i8], sums: &mut [i32]) {
    assert_eq!(
        weight.len(),
        sums.len() * x.len(),
        "a weight of {} values does not have {} rows of {}",
        weight.len(),
        sums.len(),
        x.len()
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa_i8() {
        super::x86::dot_rows_i8(isa, weight, x, sums);
        return;
    }
    super::reference::dot_rows_i8(weight, x, sums);
}

/// The rows [`dot_rows_i8`] takes together, sharing each chunk of `x`: callers with a choice
/// pass whole tiles of them.
pub(crate) const DOT_ROWS_TILE: usize = 8;

/// `out[o] = clamp(zero + M[o]·(dots[o] + bias[o]), low, 127)`, `M[o]` the fixed-point
/// multiplier `(multiplier[o], exponent[o])` ([`crate::quant::Multiplier::apply`]): the int8
/// layers' requantization, 16 outputs at a time on AVX-512, one at a time elsewhere, the same
/// integers either way.
///
/// # Panics
///
/// When the slices' lengths differ (a bug in the caller), or an exponent is outside `-31..=30`
/// (no [`crate::quant::Multiplier`] has one), on every path.
pub(crate) fn requantize_i8(
    dots: &[i32],
    parameters: (&[i32], &[i32], &[i32]),
    zero_and_range: (i8, i8, i8),
    out: &mut [i8],
) {
    let (bias, multiplier, exponent) = parameters;
    assert!(
        // Compared one by one: an array comparison here stalls on its stores (measured).
        (dots.len(), bias.len(), multiplier.len(), exponent.len())
            == (out.len(), out.len(), out.len(), out.len()),
        "requantizing {} outputs from slices of other lengths",
        out.len()
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa_i8() {
        // The SIMD kernels check the exponents as they load them.
        super::x86::requantize_i8(isa, dots, parameters, zero_and_range, out);
        return;
    }
    assert!(
        exponent.iter().all(|&e| (-31..=30).contains(&e)),
        "a multiplier's exponent is from -31 to 30"
    );
    super::reference::requantize_i8(dots, parameters, zero_and_range, out);
}

/// [`requantize_i8`] with the same parameters `(bias, multiplier, exponent)` for every output
/// (one filter's outputs at many positions): broadcast once, on the SIMD kernels where the CPU
/// has them; the same integers.
///
/// # Panics
///
/// When the slices' lengths differ (a bug in the caller), or the exponent is outside
/// `-31..=30`, on every path.
pub(crate) fn requantize_uniform_i8(
    dots: &[i32],
    parameters: (i32, i32, i32),
    zero_and_range: (i8, i8, i8),
    out: &mut [i8],
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa_i8() {
        super::x86::requantize_uniform_i8(isa, dots, parameters, zero_and_range, out);
        return;
    }
    assert_eq!(
        dots.len(),
        out.len(),
        "requantizing {} outputs from {} dot products",
        out.len(),
        dots.len()
    );
    assert!(
        (-31..=30).contains(&parameters.2),
        "a multiplier's exponent is from -31 to 30"
    );
    for (out, &dot) in out.iter_mut().zip(dots) {
        *out = super::reference::requantize_one(dot, parameters, zero_and_range);
    }
}

/// Whether [`dot_columns_i8`] runs on a SIMD kernel on this CPU (AVX-512 VNNI, within the
/// limit of [`super::instruction_set()`]): the int8 1 x 1 convolution takes it then, and
/// copies windows for [`dot_rows_i8`] elsewhere, where that is faster.
pub(crate) fn dot_columns_i8_fast() -> bool {
    #[cfg(target_arch = "x86_64")]
    if super::x86::detected_isa_i8() == Some(super::x86::IsaI8::Avx512Vnni) {
        return true;
    }
    false
}

/// `dots[f·n + p] = Σ_c weight[f·l + c] · x[c·stride + p]` for every filter `f` (`dots.len() /
/// n` of them) and position `p < n`: int8 filters of `l` weights times `l` rows of an image
/// laid out channels first (a 1 x 1 convolution's product), exact in `i32` (callers bound `l`
/// so that no sum overflows). `weight_sums[f]` is filter `f`'s sum of weights (the SIMD
/// kernel's offset term). On the AVX-512 VNNI kernel where [`dot_columns_i8_fast`], plain
/// loops elsewhere.
///
/// # Panics
///
/// When the sizes do not fit (a bug in the caller): `l` or `n` is 0, `dots.len()` is not a
/// multiple of `n`, or a slice is shorter than they need.
pub(crate) fn dot_columns_i8(
    weights: (&[i8], &[i32]),
    x: (&[i8], usize),
    (l, n): (usize, usize),
    dots: &mut [i32],
) {
    #[cfg(target_arch = "x86_64")]
    if dot_columns_i8_fast() {
        super::x86::dot_columns_i8_vnni(weights, x, (l, n), dots);
        return;
    }
    super::reference::dot_columns_i8(weights.0, x, (l, n), dots);
}

/// Whether the SIMD kernel of [`conv_windows_i8`] can take a convolution of this stride and
/// kernel width: the 16 positions of a vector and the four columns each reads span
/// `15·stride + 4` bytes, within one 64-byte load (any width: a group of four columns at a
/// time).
pub(crate) const fn windows_kernel_takes(stride: usize, kernel_width: usize) -> bool {
    stride >= 1 && stride <= 4 && kernel_width >= 1
}

/// Whether an int8 convolution of this stride, kernel width and number of filters is to run
/// on [`conv_windows_i8`]'s SIMD kernel where the CPU has it: the kernel
/// [takes it](windows_kernel_takes), and there are at least [`WINDOWS_LEAST_FILTERS`] filters
/// to share each window row it lays out. The layers choose with it and size their buffers
/// with it.
pub(crate) const fn conv_windows_i8_applies(
    stride: usize,
    kernel_width: usize,
    filters: usize,
) -> bool {
    windows_kernel_takes(stride, kernel_width) && filters >= WINDOWS_LEAST_FILTERS
}

/// The fewest filters [`conv_windows_i8`]'s SIMD kernel takes: with fewer, laying out the
/// windows' rows costs more than the products it feeds, and copying the windows for
/// [`dot_rows_i8`] is faster (LeNet-5's first layer, 6 filters of 5 x 5 on one channel:
/// about 10 µs copying, 14-18 µs on the windows' kernel, AVX-512 VNNI).
pub(crate) const WINDOWS_LEAST_FILTERS: usize = 8;

/// Whether [`conv_windows_i8`] runs on a SIMD kernel on this CPU for a convolution of this
/// stride, kernel width and number of filters (AVX-512 VNNI and VBMI,
/// [`conv_windows_i8_applies`], within the limit of
/// [`super::instruction_set()`]): the int8 convolution takes it then, and copies windows for
/// [`dot_rows_i8`] elsewhere.
pub(crate) fn conv_windows_i8_fast(stride: usize, kernel_width: usize, filters: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    if conv_windows_i8_applies(stride, kernel_width, filters)
        && super::x86::detected_isa_i8() == Some(super::x86::IsaI8::Avx512Vnni)
        && super::x86::has_avx512_vbmi()
    {
        return true;
    }
    let _ = (stride, kernel_width, filters);
    false
}

/// `out[f·out_plane + p] = requantize(Σ_{c,ky,kx} weight[f][c][ky][kx] · x[c][oh·s + ky -
/// p][ow·s + kx - p])` for every filter `f < out.len() / out_plane` and the output positions
/// `p = oh·out_width + ow` from `p0` to `p0 + n` (`s` the stride, `p` the padding of `shape`,
/// the padding read as `pad`, `out_plane = out_height·out_width`): an int8 convolution's
/// outputs, its windows read from the image in place, the dot products exact in `i32`
/// (callers bound the window so that no sum overflows), then each filter's
/// [`Requantization`]. `weight_sums[f]` is filter `f`'s sum of weights (the SIMD kernel's
/// offset term). `C`, `KH` and `KW` are `shape`'s channels and kernel: the SIMD kernel is
/// compiled for each. On the AVX-512 VNNI and VBMI kernel where the CPU has them and the
/// kernel [takes](windows_kernel_takes) the shape, plain loops elsewhere.
///
/// # Panics
///
/// When the sizes do not fit (a bug in the caller): `shape` does not have `C` channels and a
/// `KH x KW` kernel, `image` is not `channels·height·width` long, a position is outside the
/// output or `n` is 0, `out` is not whole planes of the output, a slice is shorter than the
/// filters need, or an exponent is outside `-31..=30`.
pub(crate) fn conv_windows_i8<const C: usize, const KH: usize, const KW: usize>(
    weights: (&[i8], &[i32]),
    requantization: &Requantization,
    image: (&[i8], &WindowShape, i8),
    positions: (usize, usize),
    out: &mut [i8],
) {
    assert_compiled_for::<C, KH, KW>(image.1);
    #[cfg(target_arch = "x86_64")]
    if windows_kernel_takes(image.1.stride, KW)
        && super::x86::detected_isa_i8() == Some(super::x86::IsaI8::Avx512Vnni)
        && super::x86::has_avx512_vbmi()
    {
        super::x86::conv_windows_i8_vnni::<C, KH, KW>(
            weights,
            requantization,
            image,
            positions,
            out,
        );
        return;
    }
    super::reference::conv_windows_i8(weights.0, requantization, image, positions, out);
}

/// The quads (4 bytes each) of the scratch [`conv_quads_i8`] lays a band of image rows and a
/// tile's weights out in: 4,608 bytes, the int8 convolution's other stack buffer's size, so
/// that a layer's working memory does not grow with it.
pub(crate) const QUADS_SCRATCH_QUADS: usize = 1152;

/// How [`conv_quads_i8`]'s kernel cuts a convolution ([`quads_plan`]): tiles of `filters`
/// filters on `vectors` vectors of up to 16 output positions (`filters·vectors = 16`
/// accumulators), each vector `rows_per_vector` whole output rows where they are 8 or fewer
/// positions long, else up to 16 positions of one row; bands of `band_rows` output rows, whose
/// input rows are laid out together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QuadsPlan {
    pub filters: usize,
    pub vectors: usize,
    pub rows_per_vector: usize,
    pub band_rows: usize,
}

impl QuadsPlan {
    /// The quads of one phase of one channel quad of an input row: the padded columns the
    /// windows read, `(out_width - 1)·stride + kw`, over the stride, rounded up.
    pub(crate) const fn phase_quads(&self, shape: &WindowShape) -> usize {
        let read = (shape.output().1 - 1) * shape.stride + shape.kernel.1;
        read.div_ceil(shape.stride)
    }

    /// The quads of one input row: every channel quad, every phase.
    pub(crate) const fn row_quads(&self, shape: &WindowShape) -> usize {
        shape.channels.div_ceil(4) * shape.stride * self.phase_quads(shape)
    }

    /// The quads of the weights of one tile of filters.
    const fn weight_quads(&self, shape: &WindowShape) -> usize {
        self.filters * shape.channels.div_ceil(4) * shape.kernel.0 * shape.kernel.1
    }

    /// The quads of the input rows of a band of `band_rows` output rows.
    const fn band_quads(&self, shape: &WindowShape, band_rows: usize) -> usize {
        ((band_rows - 1) * shape.stride + shape.kernel.0) * self.row_quads(shape)
    }

    /// Whether a tile's weights and a band of `band_rows` output rows' input rows fit the
    /// scratch.
    const fn fits(&self, shape: &WindowShape, band_rows: usize) -> bool {
        self.weight_quads(shape) + self.band_quads(shape, band_rows) <= QUADS_SCRATCH_QUADS
    }

    /// The quads of the scratch the plan uses: a tile's weights, then a band's rows; at most
    /// [`QUADS_SCRATCH_QUADS`].
    pub(crate) const fn scratch_quads(&self, shape: &WindowShape) -> usize {
        self.weight_quads(shape) + self.band_quads(shape, self.band_rows)
    }
}

/// The plan of [`conv_quads_i8`]'s kernel for `filters` filters on `shape`, or `None` where
/// it does not take the shape: a stride from 1 to 4, at most 16 taps (`kh·kw`), a non-empty
/// output, and a tile and a band that fit [`QUADS_SCRATCH_QUADS`]. The tile is the first of
/// 16 filters on one vector, 8 on two, 4 on four that the filters fill (4 always) and that
/// fits with its smallest band; the band is then the most output rows that fit, a whole
/// tile's vectors at a time.
pub(crate) const fn quads_plan(shape: &WindowShape, filters: usize) -> Option<QuadsPlan> {
    let (out_height, out_width) = shape.output();
    if shape.stride == 0
        || shape.stride > 4
        || shape.kernel.0 == 0
        || shape.kernel.1 == 0
        || shape.kernel.0 * shape.kernel.1 > 16
        || shape.channels == 0
        || filters == 0
        || out_height == 0
    {
        return None;
    }
    let rows_per_vector = if out_width <= 8 {
        let rows = 16 / out_width;
        if rows < out_height { rows } else { out_height }
    } else {
        1
    };
    let tiles = [(16, 1), (8, 2), (4, 4)];
    let mut i = 0;
    while i < tiles.len() {
        let (tile_filters, vectors) = tiles[i];
        i += 1;
        if tile_filters > filters && tile_filters > 4 {
            continue;
        }
        // The output rows of one tile's vectors.
        let step = if out_width <= 8 {
            vectors * rows_per_vector
        } else {
            vectors.div_ceil(out_width.div_ceil(16))
        };
        let step = if step < out_height { step } else { out_height };
        let mut plan = QuadsPlan {
            filters: tile_filters,
            vectors,
            rows_per_vector,
            band_rows: step,
        };
        if !plan.fits(shape, step) {
            continue;
        }
        while plan.band_rows + step <= out_height && plan.fits(shape, plan.band_rows + step) {
            plan.band_rows += step;
        }
        return Some(plan);
    }
    None
}

/// Whether the int8 convolution takes [`conv_quads_i8`]'s kernel for `filters` filters on
/// `shape` where the CPU has it: the kernel has a [plan](quads_plan) for it, and the shape is
/// not a 1 x 1 convolution of stride 1, whose windows are the image's columns as it lies
/// (`int8_columns_vnni.rs` multiplies them without laying the rows out, and measured faster).
pub(crate) const fn conv_quads_i8_applies(shape: &WindowShape, filters: usize) -> bool {
    let pointwise = shape.stride == 1 && shape.kernel.0 == 1 && shape.kernel.1 == 1;
    !pointwise && quads_plan(shape, filters).is_some()
}

/// The plan [`conv_quads_i8`] runs on this CPU for `filters` filters on `shape`: the
/// [`quads_plan`] where the CPU has AVX-512 VNNI and VBMI (within the limit of
/// [`super::instruction_set()`]) and [`conv_quads_i8_applies`], `None` elsewhere (the int8
/// convolution then takes another kernel).
pub(crate) fn conv_quads_i8_fast(shape: &WindowShape, filters: usize) -> Option<QuadsPlan> {
    #[cfg(target_arch = "x86_64")]
    if conv_quads_i8_applies(shape, filters)
        && super::x86::detected_isa_i8() == Some(super::x86::IsaI8::Avx512Vnni)
        && super::x86::has_avx512_vbmi()
    {
        return quads_plan(shape, filters);
    }
    let _ = (shape, filters);
    None
}

/// [`conv_windows_i8`] on every output position, on the kernel that reads four channels a
/// lane (`x86::conv_quads_i8_vnni`) where [`conv_quads_i8_fast`] gives a plan, laying the
/// image's rows and the weights out in `scratch`; plain loops elsewhere. The same integers.
///
/// # Panics
///
/// As [`conv_windows_i8`]; and when `scratch` is shorter than the plan's
/// [`scratch_quads`](QuadsPlan::scratch_quads) (never with [`QUADS_SCRATCH_QUADS`]).
pub(crate) fn conv_quads_i8<const C: usize, const KH: usize, const KW: usize>(
    weight: &[i8],
    requantization: &Requantization,
    image: (&[i8], &WindowShape, i8),
    scratch: &mut [u32],
    out: &mut [i8],
) {
    assert_compiled_for::<C, KH, KW>(image.1);
    let (out_height, out_width) = image.1.output();
    let out_plane = out_height * out_width;
    #[cfg(target_arch = "x86_64")]
    if out_plane > 0
        && let Some(plan) = conv_quads_i8_fast(image.1, out.len() / out_plane)
    {
        super::x86::conv_quads_i8_vnni::<C, KH, KW>(
            weight,
            requantization,
            image,
            (plan, scratch),
            out,
        );
        return;
    }
    let _ = scratch;
    super::reference::conv_windows_i8(weight, requantization, image, (0, out_plane), out);
}

/// Checks that `shape` has the channels and kernel an int8 convolution kernel was compiled
/// for.
///
/// # Panics
///
/// When they differ (a bug in the caller), naming both.
fn assert_compiled_for<const C: usize, const KH: usize, const KW: usize>(shape: &WindowShape) {
    assert_eq!(
        (shape.channels, shape.kernel),
        (C, (KH, KW)),
        "the windows of {shape:?} with the kernel compiled for {C} channels of {KH} x {KW}",
    );
}

/// One output of [`requantize_i8`]: `clamp(zero + M·(dot + bias), low, 127)`, `M` the
/// fixed-point multiplier `(multiplier, exponent)`.
#[inline]
pub(crate) fn requantize_one(
    dot: i32,
    (bias, multiplier, exponent): (i32, i32, i32),
    range: (i8, i8, i8),
) -> i8 {
    super::reference::requantize_one(dot, (bias, multiplier, exponent), range)
}
