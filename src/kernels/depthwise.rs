//! Depthwise convolutions (each input channel convolved with its own filters: PyTorch's
//! `groups = channels`, TensorFlow Lite's DEPTHWISE_CONV_2D), any kernel, stride and padding:
//! the forward pass, the weight gradient and the input gradient, as loops over a row of
//! outputs that the compiler vectorizes for the widest vectors the CPU has
//! ([`with_wide_vectors`](super::with_wide_vectors)). Every element type, every target.
//!
//! A depthwise convolution has `K·K` multiply-adds per output, not `C·K·K`: it is bound by
//! memory traffic, not arithmetic, so a product (im2col and GEMM) would only add copies. The
//! loops keep the row of outputs being summed in the L1 cache and read each input row once per
//! kernel column.
//!
//! Narrow images (DS-CNN's 25 x 5) make those rows a few values long, too short for a vector.
//! Where the stride is 1 and the output rows are as long as the input's (TensorFlow's `SAME`,
//! PyTorch's `padding = K / 2`), a kernel step is one offset in the flattened plane, so the
//! loops run over whole planes instead ([`Depthwise::whole_planes`]): each step a shifted
//! multiply-add over the plane, the outputs whose column would read past a row's end held by a
//! mask of that column (computed once a call, on the stack). A training pass of 3 x 3 and 5 x 5
//! kernels over whole planes in `f32` (forward, `dW`, `dX`) runs on SIMD kernels with the
//! positions in the lanes (`x86/depthwise_training_planes_f32.rs`), where the masked sums
//! vectorized badly; a prediction keeps these loops and their small stack.

use core::ops::Range;

use num_traits::Float;

/// The sizes of a depthwise convolution of one image: `channels` planes of `input`
/// (height, width) in, `channels · multiplier` planes of `output` out; output plane `o` is
/// input plane `o / multiplier` convolved with filter `o` (`kernel` = height x width), with
/// `stride` and zero `padding` before the first row and column (height, width). Rows and
/// columns past the last window are not read; the padding after the last row and column is
/// whatever `output` implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Depthwise {
    pub(crate) channels: usize,
    pub(crate) multiplier: usize,
    pub(crate) kernel: (usize, usize),
    pub(crate) stride: (usize, usize),
    pub(crate) padding: (usize, usize),
    pub(crate) input: (usize, usize),
    pub(crate) output: (usize, usize),
}

/// The column masks of the whole-plane loops, in bools on the stack: up to this many
/// (`kernel width x output positions`). Only on x86-64: a microcontroller keeps the row loops
/// and its stack.
const PLANE_MASKS: usize = if cfg!(target_arch = "x86_64") {
    4096
} else {
    0
};

impl Depthwise {
    /// Whether the kernels run over whole planes: stride 1 both ways and output rows as long as
    /// the input's (so that kernel step `(ky, kx)` reads the flattened plane at a fixed offset
    /// from each output), with the column masks (`kernel width x output positions`) within
    /// [`PLANE_MASKS`].
    pub(crate) const fn whole_planes(&self) -> bool {
        self.stride.0 == 1
            && self.stride.1 == 1
            && self.output.1 == self.input.1
            && self.output.1 > 0
            && self.kernel.1 * self.output.0 * self.output.1 <= PLANE_MASKS
    }

    /// The bytes of stack the kernels take beyond their frames' few values: the column masks
    /// where they run over whole planes, else 0. The same conditions as the kernels' choice.
    pub(crate) const fn stack_bytes(&self) -> usize {
        if self.whole_planes() { PLANE_MASKS } else { 0 }
    }

    /// `masks[kx · out_plane + i]`: whether output position `i` (column `i mod width`) reads
    /// inside its row at kernel column `kx`.
    fn column_masks(&self, masks: &mut [bool]) {
        let (width, out_plane) = (self.output.1, self.output.0 * self.output.1);
        for kx in 0..self.kernel.1 {
            let columns = self.columns(kx);
            let masks = &mut masks[kx * out_plane..][..out_plane];
            for (i, m) in masks.iter_mut().enumerate() {
                *m = columns.contains(&(i % width));
            }
        }
    }

    /// Kernel step `(ky, kx)` over a whole plane: the output positions whose input row is
    /// inside the image and whose input position `i + offset` is inside the plane (those left
    /// out all read padding), and the offset; `0..0` when there are none (a kernel row wholly
    /// in the padding, whose bounds may lie past the planes' ends).
    #[inline(always)]
    fn plane_step(&self, ky: usize, kx: usize) -> (Range<usize>, usize, bool) {
        let (range, offset, ahead) = self.plane_step_bounds(ky, kx);
        if range.is_empty() {
            (0..0, 0, true)
        } else {
            (range, offset, ahead)
        }
    }

    /// [`Self::plane_step`] before empty steps are made `0..0`.
    #[inline(always)]
    fn plane_step_bounds(&self, ky: usize, kx: usize) -> (Range<usize>, usize, bool) {
        let width = self.input.1;
        let rows = self.rows(ky);
        let (start, end) = (rows.start * width, rows.end * width);
        let plane = self.input.0 * width;
        // offset = (ky - padding.0)·width + kx - padding.1, kept as a magnitude and a sign.
        let ahead = ky * width + kx;
        let behind = self.padding.0 * width + self.padding.1;
        if ahead >= behind {
            let offset = ahead - behind;
            let end = end.min(plane.saturating_sub(offset));
            (start..end.max(start), offset, true)
        } else {
            let offset = behind - ahead;
            let (start, end) = (start.max(offset), end.min(plane + offset));
            (start..end.max(start), offset, false)
        }
    }

    /// The input positions `range + offset` (`forward`) or `range - offset` of a plane step.
    #[inline(always)]
    fn shifted(range: &Range<usize>, offset: usize, forward: bool) -> Range<usize> {
        if forward {
            range.start + offset..range.end + offset
        } else {
            range.start - offset..range.end - offset
        }
    }

    /// The values of an input plane, of an output plane, and of a filter (its taps).
    #[inline(always)]
    const fn sizes(&self) -> (usize, usize, usize) {
        (
            self.input.0 * self.input.1,
            self.output.0 * self.output.1,
            self.kernel.0 * self.kernel.1,
        )
    }

    const fn input_len(&self) -> usize {
        self.channels * self.input.0 * self.input.1
    }

    const fn output_len(&self) -> usize {
        self.channels * self.multiplier * self.output.0 * self.output.1
    }

    const fn filters_len(&self) -> usize {
        self.channels * self.multiplier * self.kernel.0 * self.kernel.1
    }

    /// The outputs `o` along one dimension whose input `o·stride + k - padding` (kernel step
    /// `k`) lies inside `0..input`: the others read the zero padding and add nothing.
    #[inline(always)]
    fn inside(
        k: usize,
        stride: usize,
        padding: usize,
        input: usize,
        output: usize,
    ) -> Range<usize> {
        let first = if k >= padding {
            0
        } else {
            (padding - k).div_ceil(stride)
        };
        // The last: o·stride + k - padding <= input - 1.
        let end = if input + padding <= k {
            0
        } else {
            ((input + padding - k - 1) / stride + 1).min(output)
        };
        first..end.max(first)
    }

    #[inline(always)]
    fn rows(&self, ky: usize) -> Range<usize> {
        Self::inside(
            ky,
            self.stride.0,
            self.padding.0,
            self.input.0,
            self.output.0,
        )
    }

    #[inline(always)]
    fn columns(&self, kx: usize) -> Range<usize> {
        Self::inside(
            kx,
            self.stride.1,
            self.padding.1,
            self.input.1,
            self.output.1,
        )
    }

    /// Panics unless the slices hold `batch` images, `batch` outputs and the filters.
    fn check(&self, batch: usize, x: usize, filters: usize, y: usize) {
        assert!(
            x == batch * self.input_len()
                && filters == self.filters_len()
                && y == batch * self.output_len()
                && self.stride.0 > 0
                && self.stride.1 > 0,
            "depthwise convolution {self:?} of {batch} images: {x} inputs, {filters} filter \
             values, {y} outputs"
        );
    }
}

/// `y = conv(x, weight) + bias` of `batch` images (`[image][channel][row][column]`), the weight
/// `[filter][row][column]`, `y` `[image][filter][row][column]`: each output is its bias, then
/// plus each kernel step's product in row-major order of the kernel. No activation.
///
/// # Panics
///
/// When the slices' lengths do not match `shape` and `batch`, or a stride is 0 (a bug in the
/// caller).
pub(crate) fn depthwise_conv2d<T: Float>(
    shape: &Depthwise,
    batch: usize,
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
) {
    shape.check(batch, x.len(), weight.len(), y.len());
    assert_eq!(
        bias.len(),
        shape.channels * shape.multiplier,
        "one bias per filter"
    );
    if shape.whole_planes() {
        forward_planes(shape, batch, x, weight, bias, y);
    } else {
        forward_rows(shape, x, weight, bias, y);
    }
}

/// The instruction set whose SIMD kernels take a training pass of `g` over whole planes
/// (`x86/depthwise_training_planes_f32.rs`), if any.
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
fn simd_planes(g: &Depthwise) -> Option<super::x86::Isa> {
    let isa = super::x86::detected_isa()?;
    super::x86::depthwise_training_planes_f32::applies(g, super::x86::lanes::<f32>(isa))
        .then_some(isa)
}

/// [`depthwise_conv2d`] of a training pass's batch: on the SIMD kernel with the positions in
/// the lanes where it takes the shape (whole planes of 3 x 3 and 5 x 5 kernels in `f32`,
/// `x86/depthwise_training_planes_f32.rs`: the sums in another order, so the outputs differ from
/// a prediction's in the last bits), else as [`depthwise_conv2d`]. A prediction keeps the
/// portable loops, whose stack (`Depthwise::stack_bytes`) the memory budget counts.
///
/// # Panics
///
/// As [`depthwise_conv2d`].
#[cfg(feature = "alloc")]
pub(crate) fn depthwise_conv2d_training<T: Float + 'static>(
    shape: &Depthwise,
    batch: usize,
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = simd_planes(shape)
        && let (Some(x), Some(weight), Some(bias), Some(y)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(weight),
            super::cast::same_type_slice::<T, f32>(bias),
            super::cast::same_type_slice_mut::<T, f32>(y),
        )
    {
        super::x86::depthwise_training_planes_f32::depthwise_forward_planes(
            isa, shape, batch, x, weight, bias, y,
        );
        return;
    }
    depthwise_conv2d(shape, batch, x, weight, bias, y);
}

/// [`depthwise_conv2d`] row by row of each output plane: any shape (the reference the
/// whole-plane loops are tested against, bit for bit).
fn forward_rows<T: Float>(shape: &Depthwise, x: &[T], weight: &[T], bias: &[T], y: &mut [T]) {
    let g = *shape;
    let (plane, out_plane, taps) = g.sizes();
    super::with_wide_vectors(
        #[inline(always)]
        || {
            let images = x.chunks_exact(g.input_len().max(1));
            let outputs = y.chunks_exact_mut(g.output_len().max(1));
            for (x, y) in images.zip(outputs) {
                let filters = weight.chunks_exact(taps.max(1));
                let outputs = y.chunks_exact_mut(out_plane.max(1));
                for (o, ((y, w), &b)) in outputs.zip(filters).zip(bias).enumerate() {
                    let x = &x[o / g.multiplier * plane..][..plane];
                    y.fill(b);
                    for ky in 0..g.kernel.0 {
                        for oy in g.rows(ky) {
                            let iy = oy * g.stride.0 + ky - g.padding.0;
                            let x = &x[iy * g.input.1..][..g.input.1];
                            let y = &mut y[oy * g.output.1..][..g.output.1];
                            for kx in 0..g.kernel.1 {
                                let w = w[ky * g.kernel.1 + kx];
                                let columns = g.columns(kx);
                                if columns.is_empty() {
                                    continue;
                                }
                                let x = &x[columns.start * g.stride.1 + kx - g.padding.1..];
                                let y = &mut y[columns];
                                if g.stride.1 == 1 {
                                    for (y, &x) in y.iter_mut().zip(x) {
                                        *y = *y + w * x;
                                    }
                                } else {
                                    for (y, x) in y.iter_mut().zip(x.iter().step_by(g.stride.1)) {
                                        *y = *y + w * *x;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    );
}

/// [`depthwise_conv2d`] over whole planes ([`Depthwise::whole_planes`]): each output is its
/// bias, then plus each kernel step's product in row-major order of the kernel, as the row
/// loops add them. Not inlined, so that the masks take stack only on this path.
#[inline(never)]
fn forward_planes<T: Float>(
    g: &Depthwise,
    batch: usize,
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
) {
    let mut masks = [false; PLANE_MASKS];
    g.column_masks(&mut masks);
    let (plane, out_plane, taps) = g.sizes();
    super::with_wide_vectors(
        #[inline(always)]
        || {
            let images = x.chunks_exact(g.input_len().max(1));
            let outputs = y.chunks_exact_mut(g.output_len().max(1));
            for (x, y) in images.zip(outputs).take(batch) {
                let filters = weight.chunks_exact(taps.max(1));
                let outputs = y.chunks_exact_mut(out_plane.max(1));
                for (o, ((y, w), &b)) in outputs.zip(filters).zip(bias).enumerate() {
                    let x = &x[o / g.multiplier * plane..][..plane];
                    y.fill(b);
                    for ky in 0..g.kernel.0 {
                        for kx in 0..g.kernel.1 {
                            let w = w[ky * g.kernel.1 + kx];
                            let (range, offset, ahead) = g.plane_step(ky, kx);
                            let x = &x[Depthwise::shifted(&range, offset, ahead)];
                            let m = &masks[kx * out_plane..][range.clone()];
                            for ((y, &x), &m) in y[range].iter_mut().zip(x).zip(m) {
                                *y = if m { *y + w * x } else { *y };
                            }
                        }
                    }
                }
            }
        },
    );
}

/// `a · b` over their common length, in 8 independent partial sums (one running sum would make
/// each addition wait for the last, and the compiler may not reorder it into vectors).
#[cfg(feature = "alloc")]
#[inline(always)]
fn dot<T: Float>(a: &[T], b: impl Iterator<Item = T> + Clone) -> T {
    let mut partial = [T::zero(); 8];
    let mut b = b;
    let chunks = a.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (p, &a) in partial.iter_mut().zip(chunk) {
            let b = b.next().unwrap_or_else(T::zero);
            *p = *p + a * b;
        }
    }
    let tail = rest.iter().zip(b).fold(T::zero(), |s, (&a, b)| s + a * b);
    partial.iter().fold(tail, |s, &p| s + p)
}

/// The weight gradient `dW[o][ky][kx] = Σ_images Σ_(oy, ox) dZ[o][oy][ox] ·
/// X[o / multiplier][oy·S + ky - P][ox·S + kx - P]` (overwritten), from the batch's inputs `x`
/// and output gradients `dz`, laid out as [`depthwise_conv2d`]'s `x` and `y`.
///
/// # Panics
///
/// As [`depthwise_conv2d`].
#[cfg(feature = "alloc")]
pub(crate) fn depthwise_conv2d_weight_gradient<T: Float + 'static>(
    shape: &Depthwise,
    batch: usize,
    x: &[T],
    dz: &[T],
    d_weight: &mut [T],
) {
    shape.check(batch, x.len(), d_weight.len(), dz.len());
    let g = *shape;
    // Whole planes of 3 x 3 and 5 x 5 kernels in `f32`: the positions in the SIMD lanes.
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = simd_planes(&g)
        && let (Some(x), Some(dz), Some(d_weight)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(dz),
            super::cast::same_type_slice_mut::<T, f32>(d_weight),
        )
    {
        super::x86::depthwise_training_planes_f32::depthwise_weight_gradient_planes(
            isa, &g, batch, x, dz, d_weight,
        );
        return;
    }
    d_weight.fill(T::zero());
    if g.whole_planes() {
        weight_gradient_planes(&g, x, dz, d_weight);
    } else {
        weight_gradient_rows(&g, x, dz, d_weight);
    }
}

/// [`depthwise_conv2d_weight_gradient`] row by row, into the zeroed `d_weight`: any shape.
#[cfg(feature = "alloc")]
fn weight_gradient_rows<T: Float>(g: &Depthwise, x: &[T], dz: &[T], d_weight: &mut [T]) {
    let g = *g;
    let (plane, out_plane, taps) = g.sizes();
    super::with_wide_vectors(
        #[inline(always)]
        || {
            let images = x.chunks_exact(g.input_len().max(1));
            let gradients = dz.chunks_exact(g.output_len().max(1));
            for (x, dz) in images.zip(gradients) {
                let filters = d_weight.chunks_exact_mut(taps.max(1));
                let planes = dz.chunks_exact(out_plane.max(1));
                for (o, (dz, dw)) in planes.zip(filters).enumerate() {
                    let x = &x[o / g.multiplier * plane..][..plane];
                    for ky in 0..g.kernel.0 {
                        for oy in g.rows(ky) {
                            let iy = oy * g.stride.0 + ky - g.padding.0;
                            let x = &x[iy * g.input.1..][..g.input.1];
                            let dz = &dz[oy * g.output.1..][..g.output.1];
                            for kx in 0..g.kernel.1 {
                                let columns = g.columns(kx);
                                if columns.is_empty() {
                                    continue;
                                }
                                let x = &x[columns.start * g.stride.1 + kx - g.padding.1..];
                                let dz = &dz[columns];
                                let sum = if g.stride.1 == 1 {
                                    dot(dz, x.iter().copied())
                                } else {
                                    dot(dz, x.iter().copied().step_by(g.stride.1))
                                };
                                let dw = &mut dw[ky * g.kernel.1 + kx];
                                *dw = *dw + sum;
                            }
                        }
                    }
                }
            }
        },
    );
}

/// [`depthwise_conv2d_weight_gradient`] over whole planes ([`Depthwise::whole_planes`]), into
/// the zeroed `d_weight`: each kernel step's sum over a plane one masked dot product.
#[cfg(feature = "alloc")]
#[inline(never)]
fn weight_gradient_planes<T: Float>(g: &Depthwise, x: &[T], dz: &[T], d_weight: &mut [T]) {
    let mut masks = [false; PLANE_MASKS];
    g.column_masks(&mut masks);
    let (plane, out_plane, taps) = g.sizes();
    super::with_wide_vectors(
        #[inline(always)]
        || {
            let images = x.chunks_exact(g.input_len().max(1));
            let gradients = dz.chunks_exact(g.output_len().max(1));
            for (x, dz) in images.zip(gradients) {
                let filters = d_weight.chunks_exact_mut(taps.max(1));
                let planes = dz.chunks_exact(out_plane.max(1));
                for (o, (dz, dw)) in planes.zip(filters).enumerate() {
                    let x = &x[o / g.multiplier * plane..][..plane];
                    for ky in 0..g.kernel.0 {
                        for kx in 0..g.kernel.1 {
                            let (range, offset, ahead) = g.plane_step(ky, kx);
                            let x = &x[Depthwise::shifted(&range, offset, ahead)];
                            let m = &masks[kx * out_plane..][range.clone()];
                            let sum = masked_dot(&dz[range], x, m);
                            let dw = &mut dw[ky * g.kernel.1 + kx];
                            *dw = *dw + sum;
                        }
                    }
                }
            }
        },
    );
}

/// `Σ a[i]·b[i]` over the `i` where `mask[i]`, in 8 independent partial sums (see [`dot`]).
#[cfg(feature = "alloc")]
#[inline(always)]
fn masked_dot<T: Float>(a: &[T], b: &[T], mask: &[bool]) -> T {
    let mut partial = [T::zero(); 8];
    let (ca, cb, cm) = (a.chunks_exact(8), b.chunks_exact(8), mask.chunks_exact(8));
    let tail = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .zip(cm.remainder())
        .fold(T::zero(), |s, ((&a, &b), &m)| if m { s + a * b } else { s });
    for ((a, b), m) in ca.zip(cb).zip(cm) {
        for (((p, &a), &b), &m) in partial.iter_mut().zip(a).zip(b).zip(m) {
            *p = if m { *p + a * b } else { *p };
        }
    }
    partial.iter().fold(tail, |s, &p| s + p)
}

/// The input gradient `dX = Σ over the filters of each input plane` of each output gradient
/// times its weight, added back where the forward pass read its input (overwritten; inputs in
/// no window get 0): `dz` and `dx` laid out as [`depthwise_conv2d`]'s `y` and `x`.
///
/// # Panics
///
/// As [`depthwise_conv2d`].
#[cfg(feature = "alloc")]
pub(crate) fn depthwise_conv2d_input_gradient<T: Float + 'static>(
    shape: &Depthwise,
    batch: usize,
    weight: &[T],
    dz: &[T],
    dx: &mut [T],
) {
    shape.check(batch, dx.len(), weight.len(), dz.len());
    let g = *shape;
    // Whole planes of 3 x 3 and 5 x 5 kernels in `f32`: the positions in the SIMD lanes.
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = simd_planes(&g)
        && let (Some(weight), Some(dz), Some(dx)) = (
            super::cast::same_type_slice::<T, f32>(weight),
            super::cast::same_type_slice::<T, f32>(dz),
            super::cast::same_type_slice_mut::<T, f32>(dx),
        )
    {
        super::x86::depthwise_training_planes_f32::depthwise_input_gradient_planes(
            isa, &g, batch, weight, dz, dx,
        );
        return;
    }
    dx.fill(T::zero());
    if g.whole_planes() {
        input_gradient_planes(&g, weight, dz, dx);
    } else {
        input_gradient_rows(&g, weight, dz, dx);
    }
}

/// [`depthwise_conv2d_input_gradient`] row by row, into the zeroed `dx`: any shape.
#[cfg(feature = "alloc")]
fn input_gradient_rows<T: Float>(g: &Depthwise, weight: &[T], dz: &[T], dx: &mut [T]) {
    let g = *g;
    let (plane, out_plane, taps) = g.sizes();
    super::with_wide_vectors(
        #[inline(always)]
        || {
            let images = dx.chunks_exact_mut(g.input_len().max(1));
            let gradients = dz.chunks_exact(g.output_len().max(1));
            for (dx, dz) in images.zip(gradients) {
                let filters = weight.chunks_exact(taps.max(1));
                let planes = dz.chunks_exact(out_plane.max(1));
                for (o, (dz, w)) in planes.zip(filters).enumerate() {
                    let dx = &mut dx[o / g.multiplier * plane..][..plane];
                    for ky in 0..g.kernel.0 {
                        for oy in g.rows(ky) {
                            let iy = oy * g.stride.0 + ky - g.padding.0;
                            let dx = &mut dx[iy * g.input.1..][..g.input.1];
                            let dz = &dz[oy * g.output.1..][..g.output.1];
                            for kx in 0..g.kernel.1 {
                                let w = w[ky * g.kernel.1 + kx];
                                let columns = g.columns(kx);
                                if columns.is_empty() {
                                    continue;
                                }
                                let dx = &mut dx[columns.start * g.stride.1 + kx - g.padding.1..];
                                let dz = &dz[columns];
                                if g.stride.1 == 1 {
                                    for (dx, &dz) in dx.iter_mut().zip(dz) {
                                        *dx = *dx + w * dz;
                                    }
                                } else {
                                    let dx = dx.iter_mut().step_by(g.stride.1);
                                    for (dx, &dz) in dx.zip(dz) {
                                        *dx = *dx + w * dz;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    );
}

/// [`depthwise_conv2d_input_gradient`] over whole planes ([`Depthwise::whole_planes`]), into
/// the zeroed `dx`: each kernel step adds `w · dZ`, masked, at its offset; each input's terms
/// in the order of the row loops.
#[cfg(feature = "alloc")]
#[inline(never)]
fn input_gradient_planes<T: Float>(g: &Depthwise, weight: &[T], dz: &[T], dx: &mut [T]) {
    let mut masks = [false; PLANE_MASKS];
    g.column_masks(&mut masks);
    let (plane, out_plane, taps) = g.sizes();
    super::with_wide_vectors(
        #[inline(always)]
        || {
            let images = dx.chunks_exact_mut(g.input_len().max(1));
            let gradients = dz.chunks_exact(g.output_len().max(1));
            for (dx, dz) in images.zip(gradients) {
                let filters = weight.chunks_exact(taps.max(1));
                let planes = dz.chunks_exact(out_plane.max(1));
                for (o, (dz, w)) in planes.zip(filters).enumerate() {
                    let dx = &mut dx[o / g.multiplier * plane..][..plane];
                    for ky in 0..g.kernel.0 {
                        for kx in 0..g.kernel.1 {
                            let w = w[ky * g.kernel.1 + kx];
                            let (range, offset, ahead) = g.plane_step(ky, kx);
                            let dx = &mut dx[Depthwise::shifted(&range, offset, ahead)];
                            let m = &masks[kx * out_plane..][range.clone()];
                            for ((dx, &dz), &m) in dx.iter_mut().zip(&dz[range]).zip(m) {
                                *dx = if m { *dx + w * dz } else { *dx };
                            }
                        }
                    }
                }
            }
        },
    );
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// The definition, one output at a time, reading the padding as zeros.
    fn naive(g: &Depthwise, x: &[f64], w: &[f64], b: &[f64]) -> Vec<f64> {
        let oc = g.channels * g.multiplier;
        let mut y = vec![0.0; oc * g.output.0 * g.output.1];
        for o in 0..oc {
            for oy in 0..g.output.0 {
                for ox in 0..g.output.1 {
                    let mut sum = b[o];
                    for ky in 0..g.kernel.0 {
                        for kx in 0..g.kernel.1 {
                            let iy = (oy * g.stride.0 + ky) as isize - g.padding.0 as isize;
                            let ix = (ox * g.stride.1 + kx) as isize - g.padding.1 as isize;
                            if iy < 0
                                || ix < 0
                                || iy >= g.input.0 as isize
                                || ix >= g.input.1 as isize
                            {
                                continue;
                            }
                            let xv = x[(o / g.multiplier * g.input.0 + iy as usize) * g.input.1
                                + ix as usize];
                            sum += w[(o * g.kernel.0 + ky) * g.kernel.1 + kx] * xv;
                        }
                    }
                    y[(o * g.output.0 + oy) * g.output.1 + ox] = sum;
                }
            }
        }
        y
    }

    fn values(n: usize, seed: u64) -> Vec<f64> {
        // Small integers: every sum is exact, so any order gives the same bits.
        (0..n as u64)
            .map(|i| ((i * 7 + seed * 13) % 11) as f64 - 5.0)
            .collect()
    }

    /// Shapes with every case of the windows: padding before and after, strides that leave
    /// rows over, kernels of other heights and widths, multipliers above 1.
    fn shapes() -> Vec<Depthwise> {
        let mut shapes = Vec::new();
        for (kernel, stride, padding, input) in [
            ((3, 3), (1, 1), (1, 1), (5, 7)),
            ((3, 3), (2, 2), (1, 1), (8, 8)),
            ((3, 3), (2, 2), (0, 0), (9, 6)),
            ((10, 4), (2, 2), (4, 1), (49, 10)),
            ((1, 1), (2, 2), (0, 0), (8, 8)),
            ((5, 5), (1, 1), (2, 2), (4, 4)),
            ((3, 2), (1, 3), (2, 0), (4, 11)),
            // Whole planes with kernel rows or columns wholly in the padding (padding as large
            // as the image), and kernels of one row or column.
            ((3, 3), (1, 1), (1, 1), (1, 6)),
            ((5, 5), (1, 1), (2, 2), (2, 3)),
            ((1, 3), (1, 1), (0, 1), (4, 5)),
            ((5, 1), (1, 1), (2, 0), (3, 4)),
        ] {
            for (channels, multiplier) in [(1, 1), (3, 1), (2, 3)] {
                let out = |i: usize, k: usize, s: usize, p: usize, after: usize| {
                    (i + p + after - k) / s + 1
                };
                // TensorFlow's SAME may pad one more after than before.
                let output = (
                    out(input.0, kernel.0, stride.0, padding.0, padding.0 + 1),
                    out(input.1, kernel.1, stride.1, padding.1, padding.1),
                );
                shapes.push(Depthwise {
                    channels,
                    multiplier,
                    kernel,
                    stride,
                    padding,
                    input,
                    output,
                });
            }
        }
        shapes
    }

    #[test]
    fn forward_is_the_definition() {
        for g in shapes() {
            let batch = 2;
            let x = values(batch * g.input_len(), 1);
            let w = values(g.filters_len(), 2);
            let b = values(g.channels * g.multiplier, 3);
            let mut y = vec![f64::NAN; batch * g.output_len()];
            depthwise_conv2d(&g, batch, &x, &w, &b, &mut y);
            for (x, y) in x
                .chunks_exact(g.input_len())
                .zip(y.chunks_exact(g.output_len()))
            {
                assert_eq!(y, naive(&g, x, &w, &b), "{g:?}");
            }
        }
    }

    /// The gradients are the forward pass's adjoint: `⟨dz, conv(x)⟩ = ⟨dW, w⟩`-style identities
    /// checked by the definition: each gradient is the derivative of `⟨dz, y⟩`, which is linear
    /// in `w` and in `x`, so it is `⟨dz, y(e_i)⟩` for each unit vector `e_i`.
    #[test]
    fn gradients_are_the_definition() {
        for g in shapes() {
            let batch = 2;
            let x = values(batch * g.input_len(), 4);
            let w = values(g.filters_len(), 5);
            let dz = values(batch * g.output_len(), 6);
            let zero_bias = vec![0.0; g.channels * g.multiplier];
            // From the definition (`naive`), not from the forward kernel, so that a mistake
            // shared by a kernel and its gradients is caught too.
            let inner = |x: &[f64], w: &[f64]| -> f64 {
                let y: Vec<f64> = x
                    .chunks_exact(g.input_len())
                    .flat_map(|x| naive(&g, x, w, &zero_bias))
                    .collect();
                y.iter().zip(&dz).map(|(y, d)| y * d).sum()
            };
            let mut dw = vec![f64::NAN; g.filters_len()];
            depthwise_conv2d_weight_gradient(&g, batch, &x, &dz, &mut dw);
            // Every weight; a spread of the inputs (every one would take minutes in a debug
            // build).
            for i in 0..w.len() {
                let mut e = vec![0.0; w.len()];
                e[i] = 1.0;
                assert_eq!(dw[i], inner(&x, &e), "{g:?}: dW[{i}]");
            }
            let mut dx = vec![f64::NAN; batch * g.input_len()];
            depthwise_conv2d_input_gradient(&g, batch, &w, &dz, &mut dx);
            for i in (0..x.len())
                .step_by((x.len() / 97).max(1))
                .chain([x.len() - 1])
            {
                let mut e = vec![0.0; x.len()];
                e[i] = 1.0;
                assert_eq!(dx[i], inner(&e, &w), "{g:?}: dX[{i}]");
            }
        }
    }

    /// Where the kernels run over whole planes, they compute what the row loops compute: the
    /// outputs and the input gradients bit for bit (the same terms in the same order), the
    /// weight gradients to the rounding of their sums (added in another order), on values
    /// whose sums round.
    #[test]
    #[cfg(target_arch = "x86_64")] // elsewhere the kernels keep the rows (no masks' stack)
    fn whole_planes_compute_what_the_rows_compute() {
        let planes: Vec<Depthwise> = shapes().into_iter().filter(|g| g.whole_planes()).collect();
        assert!(planes.len() >= 18, "shapes with whole planes: {planes:?}");
        for g in planes {
            let batch = 3;
            let real = |n: usize, seed: u64| -> Vec<f32> {
                (0..n as u64)
                    .map(|i| ((i * 2_654_435_761 + seed * 97) % 1000) as f32 / 333.0 - 1.5)
                    .collect()
            };
            let x = real(batch * g.input_len(), 1);
            let w = real(g.filters_len(), 2);
            let b = real(g.channels * g.multiplier, 3);
            let dz = real(batch * g.output_len(), 4);
            let (mut rows, mut planes) = (vec![0.0; dz.len()], vec![f32::NAN; dz.len()]);
            forward_rows(&g, &x, &w, &b, &mut rows);
            depthwise_conv2d(&g, batch, &x, &w, &b, &mut planes);
            assert_eq!(rows, planes, "{g:?}: forward");
            // The portable plane loops themselves (in `f32` the dispatch may take the SIMD
            // kernels, tested in `x86/tests/depthwise.rs`), into zeroed gradients.
            let (mut rows, mut planes) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            input_gradient_rows(&g, &w, &dz, &mut rows);
            input_gradient_planes(&g, &w, &dz, &mut planes);
            assert_eq!(rows, planes, "{g:?}: input gradient");
            let (mut rows, mut planes) = (vec![0.0; w.len()], vec![0.0; w.len()]);
            weight_gradient_rows(&g, &x, &dz, &mut rows);
            weight_gradient_planes(&g, &x, &dz, &mut planes);
            for (r, p) in rows.iter().zip(&planes) {
                assert!(
                    (r - p).abs() <= 1e-4 * r.abs().max(1.0),
                    "{g:?}: dW {r} vs {p}"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "depthwise convolution")]
    fn wrong_lengths_panic() {
        let g = shapes()[0];
        depthwise_conv2d(&g, 1, &[0.0; 3], &[0.0; 9], &[0.0], &mut [0.0; 35]);
    }
}
