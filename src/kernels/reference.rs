//! The reference kernels: simple, cache-friendly loops for every element type.
//!
//! They define what the fast kernels must compute, serve every type without a SIMD path (integers,
//! and machines without AVX2), and are what the property tests compare the fast kernels against.

use super::shape::Conv;
use super::shape::Product;
use crate::Scalar;

/// `out += a · b` in `i-k-j` order: the innermost loop walks a row of `b` and of `out`.
pub fn matmul_accumulate_into<T: Scalar, const H: usize, const K: usize, const W: usize>(
    a: &[[T; K]; H],
    b: &[[T; W]; K],
    out: &mut [[T; W]; H],
) {
    for (a_row, out_row) in a.iter().zip(out.iter_mut()) {
        for (&a_ik, b_row) in a_row.iter().zip(b.iter()) {
            axpy_row(a_ik, b_row, out_row);
        }
    }
}

/// `out += aᵀ · b`: row `k` of `a` and of `b` contribute the outer product `a[k]ᵀ·b[k]`.
pub fn matmul_transpose_lhs_accumulate_into<
    T: Scalar,
    const K: usize,
    const H: usize,
    const W: usize,
>(
    a: &[[T; H]; K],
    b: &[[T; W]; K],
    out: &mut [[T; W]; H],
) {
    for (a_row, b_row) in a.iter().zip(b.iter()) {
        for (&a_ki, out_row) in a_row.iter().zip(out.iter_mut()) {
            axpy_row(a_ki, b_row, out_row);
        }
    }
}

/// `out (+)= a · bᵀ`: each element is the dot product of a row of `a` and a row of `b`.
pub fn matmul_transpose_rhs_into<T: Scalar, const H: usize, const K: usize, const W: usize>(
    a: &[[T; K]; H],
    b: &[[T; K]; W],
    out: &mut [[T; W]; H],
    accumulate: bool,
) {
    for (a_row, out_row) in a.iter().zip(out.iter_mut()) {
        for (b_row, out_ij) in b.iter().zip(out_row.iter_mut()) {
            let d = dot(a_row, b_row);
            *out_ij = if accumulate { *out_ij + d } else { d };
        }
    }
}

/// The dot product with 16 independent partial sums.
pub fn dot<T: Scalar>(a: &[T], b: &[T]) -> T {
    // One running sum would make every addition wait for the previous one (and floating-point
    // addition may not be reordered by the compiler). Independent partial sums break that
    // chain and let the compiler keep them in vector registers.
    const LANES: usize = 16;
    let (a_chunks, a_tail) = a.as_chunks::<LANES>();
    let (b_chunks, b_tail) = b.as_chunks::<LANES>();
    let mut partial = [T::zero(); LANES];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for ((p, &x), &y) in partial.iter_mut().zip(x).zip(y) {
            *p += x * y;
        }
    }
    let tail = a_tail
        .iter()
        .zip(b_tail)
        .fold(T::zero(), |acc, (&x, &y)| acc + x * y);
    partial.iter().fold(tail, |acc, &p| acc + p)
}

/// `out += alpha · x` over one row (BLAS's `axpy`).
fn axpy_row<T: Scalar, const N: usize>(alpha: T, x: &[T; N], out: &mut [T; N]) {
    for (o, &v) in out.iter_mut().zip(x.iter()) {
        *o += alpha * v;
    }
}

/// `c (+)= op(a)·op(b)` on row-major slices (see [`super::gemm_slices`], which checked the
/// lengths): the same loop orders as the typed kernels above.
pub fn gemm_slices<T: Scalar>(
    product: Product,
    (m, n, k): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [T],
    accumulate: bool,
) {
    if !accumulate {
        c.fill(T::zero());
    }
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    match product {
        Product::Plain => {
            for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
                for (&a_ik, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
                    for (o, &v) in c_row.iter_mut().zip(b_row) {
                        *o += a_ik * v;
                    }
                }
            }
        }
        Product::TransposeLhs => {
            for (a_row, b_row) in a.chunks_exact(m).zip(b.chunks_exact(n)) {
                for (&a_ki, c_row) in a_row.iter().zip(c.chunks_exact_mut(n)) {
                    for (o, &v) in c_row.iter_mut().zip(b_row) {
                        *o += a_ki * v;
                    }
                }
            }
        }
        Product::TransposeRhs => {
            for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
                for (b_row, o) in b.chunks_exact(k).zip(c_row.iter_mut()) {
                    *o += dot(a_row, b_row);
                }
            }
        }
    }
}

/// A stride-1 convolution written out: each output is its bias plus, channel by channel, the
/// sum of that channel's `kernel x kernel` products (a sum per channel first, so that the
/// rounding error grows with the channels' count plus the kernel's size, not with their
/// product). The outputs
/// are taken a block of [`CONV_BLOCK`] at a time (whole rows where they fit, else a row's
/// columns): each step `(ky, kx)` adds its weight times the input row it meets, shifted, to
/// each row of the block; the padding is where the shifted row runs off the image (nothing is
/// added there). The innermost loop runs along a row of outputs and a row of inputs, which the
/// compiler vectorizes for any target.
pub fn conv2d_stride1<T: Scalar>(shape: &Conv, x: &[T], w: &[T], bias: &[T], out: &mut [T]) {
    let Conv {
        channels,
        kernel,
        padding,
        height,
        width,
        ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    if out_height == 0 || out_width == 0 {
        return;
    }
    let steps = channels * kernel * kernel;
    let columns = out_width.min(CONV_BLOCK);
    let rows = CONV_BLOCK / columns;
    let (mut total, mut channel_sum) = ([T::zero(); CONV_BLOCK], [T::zero(); CONV_BLOCK]);
    for (o, (&b, plane)) in bias
        .iter()
        .zip(out.chunks_exact_mut(out_height * out_width))
        .enumerate()
    {
        let filter = &w[o * steps..(o + 1) * steps];
        for oh0 in (0..out_height).step_by(rows) {
            let block_rows = rows.min(out_height - oh0);
            for start in (0..out_width).step_by(columns) {
                let end = (start + columns).min(out_width);
                let len = block_rows * (end - start);
                total[..len].fill(b);
                for (c, taps) in filter.chunks_exact(kernel * kernel).enumerate() {
                    channel_sum[..len].fill(T::zero());
                    for (step, &weight) in taps.iter().enumerate() {
                        let (ky, kx) = (step / kernel, step % kernel);
                        // Outputs `first..last` of a row read input columns `first + kx - P ..`.
                        let first = padding.saturating_sub(kx).clamp(start, end);
                        let last = (width + padding).saturating_sub(kx).clamp(start, end);
                        if first >= last {
                            continue;
                        }
                        for (r, sums) in
                            channel_sum[..len].chunks_exact_mut(end - start).enumerate()
                        {
                            let Some(row) = (oh0 + r + ky)
                                .checked_sub(padding)
                                .filter(|&row| row < height)
                            else {
                                continue;
                            };
                            let at = (c * height + row) * width + first + kx - padding;
                            let inputs = &x[at..at + (last - first)];
                            for (sum, &input) in
                                sums[first - start..last - start].iter_mut().zip(inputs)
                            {
                                *sum += weight * input;
                            }
                        }
                    }
                    for (total, &sum) in total[..len].iter_mut().zip(&channel_sum[..len]) {
                        *total += sum;
                    }
                }
                for (r, sums) in total[..len].chunks_exact(end - start).enumerate() {
                    let row = (oh0 + r) * out_width;
                    plane[row + start..row + end].copy_from_slice(sums);
                }
            }
        }
    }
}

/// The outputs [`conv2d_stride1`] sums at a time, in two stack buffers (1 KiB in `f32`; the
/// size changes no sum's order).
const CONV_BLOCK: usize = 128;

/// A stride-1 convolution's weight gradient written out: for every weight `(o, c, ky, kx)`, the
/// sum over the output rows of the dot product of `dZ[o]`'s row with the input row it
/// multiplied (shifted, the padding left out).
#[cfg(feature = "alloc")]
pub fn conv2d_weight_gradient_stride1<T: Scalar>(
    shape: &Conv,
    x: &[T],
    dz: &[T],
    dw: &mut [T],
    accumulate: bool,
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
    let steps = channels * kernel * kernel;
    for (i, d) in dw.iter_mut().enumerate() {
        let (o, step) = (i / steps, i % steps);
        let (c, ky, kx) = (
            step / (kernel * kernel),
            step / kernel % kernel,
            step % kernel,
        );
        let first = padding.saturating_sub(kx).min(out_width);
        let last = (width + padding).saturating_sub(kx).min(out_width);
        let mut sum = if accumulate { *d } else { T::zero() };
        for oh in 0..out_height {
            let Some(row) = (oh + ky).checked_sub(padding).filter(|&r| r < height) else {
                continue;
            };
            if first >= last {
                continue;
            }
            let start = (c * height + row) * width + first + kx - padding;
            let grads = (o * out_height + oh) * out_width;
            sum += dot(
                &dz[grads + first..grads + last],
                &x[start..start + (last - first)],
            );
        }
        *d = sum;
    }
}

/// Whether every value is finite. `v - v` is 0 for a finite value and NaN for a NaN or an
/// infinity, and a NaN stays in a sum: 64 independent sums of it, with no comparison and no
/// early exit, which the compiler turns into vector adds, four or more vectors apart so that
/// no add waits for the previous one. (A check per value, `is_finite` and an early exit, took
/// 13% of an MLP training step.)
#[inline(always)]
#[allow(clippy::eq_op)] // `v - v` is the point: 0, or NaN for a value that is not finite
pub fn all_finite<T: num_traits::Float>(values: &[T]) -> bool {
    let mut sums = [T::zero(); 64];
    let chunks = values.chunks_exact(64);
    let rest = chunks
        .remainder()
        .iter()
        .fold(T::zero(), |s, &v| s + (v - v));
    for chunk in chunks {
        for (s, &v) in sums.iter_mut().zip(chunk) {
            *s = *s + (v - v);
        }
    }
    sums.iter().fold(rest, |s, &p| s + p) == T::zero()
}

/// `sums[r] = Σ_i weight[r·n + i] · x[i]`, each product widened to `i32`.
pub fn dot_rows_i8(weight: &[i8], x: &[i8], sums: &mut [i32]) {
    for (sum, row) in sums.iter_mut().zip(weight.chunks_exact(x.len().max(1))) {
        *sum = row
            .iter()
            .zip(x)
            .map(|(&w, &x)| i32::from(w) * i32::from(x))
            .sum();
    }
}

/// One output of the int8 layers' requantization, the definition:
/// `clamp(zero + M·(dot + bias), low, high)` with `M = (multiplier, exponent)` in fixed point
/// ([`crate::quant::Multiplier::apply`]), the sums saturating.
#[inline]
pub fn requantize_one(
    dot: i32,
    (bias, multiplier, exponent): (i32, i32, i32),
    (zero, low, high): (i8, i8, i8),
) -> i8 {
    let m = crate::quant::Multiplier {
        multiplier,
        exponent,
    };
    let q = i32::from(zero).saturating_add(m.apply(dot.saturating_add(bias)));
    q.clamp(i32::from(low), i32::from(high)) as i8
}

/// `dots[f·n + p] = Σ_c weight[f·l + c] · x[c·stride + p]` for every filter `f` (`dots.len()
/// / n` of them) and position `p < n`: the definition of `kernels::dot_columns_i8`.
///
/// # Panics
///
/// When `l` or `n` is 0, `dots.len()` is not a multiple of `n`, or a slice is shorter than
/// the sizes need.
pub(crate) fn dot_columns_i8(
    weight: &[i8],
    (x, stride): (&[i8], usize),
    (l, n): (usize, usize),
    dots: &mut [i32],
) {
    assert!(
        l > 0 && n > 0 && dots.len().is_multiple_of(n),
        "{} dot products of {n} positions and {l} channels",
        dots.len()
    );
    for (filter, dots) in weight.chunks_exact(l).zip(dots.chunks_exact_mut(n)) {
        dots.fill(0);
        for (c, &w) in filter.iter().enumerate() {
            let row = &x[c * stride..c * stride + n];
            for (dot, &v) in dots.iter_mut().zip(row) {
                *dot += i32::from(w) * i32::from(v);
            }
        }
    }
}

/// `out[f·out_plane + p] = requantize(Σ_{c,ky,kx} weight[f][c][ky][kx] · x[c][oh·s + ky -
/// p][ow·s + kx - p])` for the output positions `p = oh·out_width + ow` from `p0` to `p0 + n`,
/// the padding read as `pad`, each filter's [`requantize_one`]: the definition of
/// `kernels::conv_windows_i8`.
///
/// # Panics
///
/// When `n` is 0, `out` is not whole planes of the output, a position is outside the output,
/// or a slice is shorter than the sizes need.
pub(crate) fn conv_windows_i8(
    weight: &[i8],
    requantization: &super::shape::Requantization,
    (image, shape, pad): (&[i8], &super::shape::WindowShape, i8),
    (p0, n): (usize, usize),
    out: &mut [i8],
) {
    let (out_height, out_width) = shape.output();
    let out_plane = out_height * out_width;
    assert!(
        n > 0
            && out_plane > 0
            && out.len().is_multiple_of(out_plane)
            && p0 + n <= out_plane
            && image.len() == shape.image_len(),
        "the positions {p0}..{} of {shape:?} into {} outputs",
        p0 + n,
        out.len()
    );
    let filters = out.len() / out_plane;
    let (bias, multiplier, exponent) = requantization.parameters;
    assert!(
        weight.len() >= filters * shape.window_len()
            && bias.len() >= filters
            && multiplier.len() >= filters
            && exponent.len() >= filters,
        "{filters} filters of {} weights: {} weights, {} biases, {} multipliers, {} exponents",
        shape.window_len(),
        weight.len(),
        bias.len(),
        multiplier.len(),
        exponent.len()
    );
    assert!(
        exponent[..filters].iter().all(|e| (-31..=30).contains(e)),
        "a multiplier's exponent is from -31 to 30"
    );
    let (kh, kw) = shape.kernel;
    let (s, p) = (shape.stride, shape.padding);
    let pixel = |c: usize, iy: usize, ix: usize| -> i32 {
        let inside = iy >= p && ix >= p && iy - p < shape.height && ix - p < shape.width;
        i32::from(if inside {
            image[(c * shape.height + iy - p) * shape.width + ix - p]
        } else {
            pad
        })
    };
    for (f, (filter, plane)) in weight
        .chunks_exact(shape.window_len())
        .zip(out.chunks_exact_mut(out_plane))
        .enumerate()
    {
        for (position, out) in plane.iter_mut().enumerate().skip(p0).take(n) {
            let (oh, ow) = (position / out_width, position % out_width);
            let mut dot = 0_i32;
            for (e, &w) in filter.iter().enumerate() {
                let (c, ky, kx) = (e / (kh * kw), e / kw % kh, e % kw);
                dot += i32::from(w) * pixel(c, oh * s + ky, ow * s + kx);
            }
            *out = requantize_one(
                dot,
                (bias[f], multiplier[f], exponent[f]),
                requantization.zero_and_range,
            );
        }
    }
}

/// [`requantize_one`] for every output.
pub fn requantize_i8(
    dots: &[i32],
    (bias, multiplier, exponent): (&[i32], &[i32], &[i32]),
    range: (i8, i8, i8),
    out: &mut [i8],
) {
    for (o, q) in out.iter_mut().enumerate() {
        *q = requantize_one(dots[o], (bias[o], multiplier[o], exponent[o]), range);
    }
}
