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

impl Depthwise {
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
    let g = *shape;
    let (plane, out_plane, taps) = (
        g.input.0 * g.input.1,
        g.output.0 * g.output.1,
        g.kernel.0 * g.kernel.1,
    );
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
pub(crate) fn depthwise_conv2d_weight_gradient<T: Float>(
    shape: &Depthwise,
    batch: usize,
    x: &[T],
    dz: &[T],
    d_weight: &mut [T],
) {
    shape.check(batch, x.len(), d_weight.len(), dz.len());
    let g = *shape;
    let (plane, out_plane, taps) = (
        g.input.0 * g.input.1,
        g.output.0 * g.output.1,
        g.kernel.0 * g.kernel.1,
    );
    d_weight.fill(T::zero());
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

/// The input gradient `dX = Σ over the filters of each input plane` of each output gradient
/// times its weight, added back where the forward pass read its input (overwritten; inputs in
/// no window get 0): `dz` and `dx` laid out as [`depthwise_conv2d`]'s `y` and `x`.
///
/// # Panics
///
/// As [`depthwise_conv2d`].
#[cfg(feature = "alloc")]
pub(crate) fn depthwise_conv2d_input_gradient<T: Float>(
    shape: &Depthwise,
    batch: usize,
    weight: &[T],
    dz: &[T],
    dx: &mut [T],
) {
    shape.check(batch, dx.len(), weight.len(), dz.len());
    let g = *shape;
    let (plane, out_plane, taps) = (
        g.input.0 * g.input.1,
        g.output.0 * g.output.1,
        g.kernel.0 * g.kernel.1,
    );
    dx.fill(T::zero());
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
            let inner = |x: &[f64], w: &[f64]| -> f64 {
                let mut y = vec![0.0; batch * g.output_len()];
                depthwise_conv2d(&g, batch, x, w, &zero_bias, &mut y);
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

    #[test]
    #[should_panic(expected = "depthwise convolution")]
    fn wrong_lengths_panic() {
        let g = shapes()[0];
        depthwise_conv2d(&g, 1, &[0.0; 3], &[0.0; 9], &[0.0], &mut [0.0; 35]);
    }
}
