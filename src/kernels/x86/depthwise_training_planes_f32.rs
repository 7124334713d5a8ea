//! A depthwise convolution's training passes over whole planes, 3 x 3 and 5 x 5 kernels, `f32`:
//! stride 1, output rows as long as the input's ([`Depthwise::whole_planes`]), the plane's
//! positions in the lanes. Kernel step `(ky, kx)` pairs output position `i` with input
//! position `i + ky·W + kx - (P_h·W + P_w)` of the flattened plane, where the input column lies
//! inside the row; a vector of 0 and 1 per kernel column (0 where that column would read past
//! a row's end into the next row's values) multiplies what that column reads, so that no mask
//! is needed in the inner loops. DS-CNN's 25 x 5 planes take 8 vectors of 16 (AVX-512) for 125
//! positions.
//!
//! - **Forward pass** (a training pass's batch), `Z[o][i] = b[o] + Σ_kx c_kx[i] · Σ_ky
//!   w[o][ky][kx] · X[c][i + offset]`: each image's plane copied between zeros (the rows above
//!   and below it read as zero), each kernel column's sum over the kernel rows (broadcast
//!   weights) weighted by its vector of 0 and 1.
//! - **Weight gradient**, `dW[o][ky][kx] = Σ_images Σ_i dZ[o][i] · X[c][i + offset]`: each
//!   image's input plane copied between zeros (the rows above and below it read as zero), one
//!   vector of sums per kernel step kept across the batch's images and added across its lanes
//!   once per filter.
//! - **Input gradient**, `dX[c][j] = Σ_o Σ_(ky, kx) w[o][ky][kx] · dZ[o][j - offset]`: each
//!   filter's `dZ` plane, times each kernel column's vector of 0 and 1, copied between zeros,
//!   one vector of inputs summed over the kernel steps (broadcast weights) and stored once.
//!
//! The sums are in another order than the portable loops' (`kernels::depthwise`), so the
//! results differ in the last bits; and a value that is not finite where a kernel column's
//! weight is 0 gives NaN (0 · ∞) where the loops skip it: the trainer's check of the
//! gradients rejects such a step either way.

use super::isa::{Isa, assert_isa};
use super::simd::{Avx2F32, Avx512F32, Simd};
use crate::kernels::Depthwise;

/// The stack buffer of the column weights (`kernel width x` the output plane rounded up to
/// whole vectors), in `f32`.
const COLUMN_WEIGHTS: usize = 4096 + 5 * 16;

/// The filters whose sums [`run`] keeps at a time (16 of 25 vectors of 16 lanes: 25 KiB).
const GROUP: usize = 16;

/// The stack buffer of one input plane between zeros, in `f32`.
const PADDED_PLANE: usize = 4096;

/// The input plane between zeros: the zeros before it, and its buffer's length (the last
/// vector of positions at the last kernel step reads up to its end).
const fn padded_plane(g: &Depthwise, lanes: usize) -> (usize, usize) {
    let width = g.input.1;
    let lead = g.padding.0 * width + g.padding.1;
    let plane = g.input.0 * width;
    let out_plane = g.output.0 * g.output.1;
    let reach = out_plane.div_ceil(lanes) * lanes + (g.kernel.0 - 1) * width + g.kernel.1 - 1;
    let len = if lead + plane > reach {
        lead + plane
    } else {
        reach
    };
    (lead, len)
}

/// The stack buffer of one output gradient plane between zeros, once per kernel column, in
/// `f32`.
const PADDED_GRADIENTS: usize = 8192;

/// An output gradient plane between zeros: the zeros before it (as many as the farthest kernel
/// step's offset), and the length of one kernel column's copy (the last vector of inputs at the
/// first kernel step reads up to its end).
const fn padded_gradients(g: &Depthwise, lanes: usize) -> (usize, usize) {
    let width = g.input.1;
    let front = (g.kernel.0 - 1) * width + g.kernel.1 - 1;
    let lead = g.padding.0 * width + g.padding.1;
    let copy = front + (g.output.0 * g.output.1).div_ceil(lanes) * lanes;
    let reach = front + lead + (g.input.0 * width).div_ceil(lanes) * lanes;
    (front, if copy > reach { copy } else { reach })
}

/// Whether these kernels take `g` with vectors of `lanes`: whole planes of at least one row, a
/// 3 x 3 or 5 x 5 kernel, padding smaller than the kernel, and the stack buffers large enough.
pub(crate) const fn applies(g: &Depthwise, lanes: usize) -> bool {
    let square = matches!(g.kernel, (3, 3) | (5, 5));
    let empty = g.input.0 == 0 || g.output.0 == 0;
    if !g.whole_planes()
        || !square
        || empty
        || g.padding.0 >= g.kernel.0
        || g.padding.1 >= g.kernel.1
    {
        return false;
    }
    let out_plane = g.output.0 * g.output.1;
    let columns = g.kernel.1 * out_plane.div_ceil(lanes) * lanes;
    columns <= COLUMN_WEIGHTS
        && padded_plane(g, lanes).1 <= PADDED_PLANE
        && g.kernel.1 * padded_gradients(g, lanes).1 <= PADDED_GRADIENTS
}

/// `columns[kx · vectors · lanes + i]`: 1 where kernel column `kx` reads inside the row at
/// output position `i`, else 0 (also past the plane's end, up to `vectors · lanes`).
fn column_weights(g: &Depthwise, lanes: usize, columns: &mut [f32; COLUMN_WEIGHTS]) {
    let width = g.input.1;
    let out_plane = g.output.0 * g.output.1;
    let row = out_plane.div_ceil(lanes) * lanes;
    for kx in 0..g.kernel.1 {
        for (i, weight) in columns[kx * row..][..row].iter_mut().enumerate() {
            let column = i % width + kx;
            let inside = i < out_plane && column >= g.padding.1 && column - g.padding.1 < width;
            *weight = if inside { 1.0 } else { 0.0 };
        }
    }
}

/// Panics unless these kernels take `g` with `isa`'s vectors ([`applies`]), the CPU has `isa`,
/// and the lengths of a `pass` are `batch` images, `batch` outputs, the filters' weights and,
/// where given, their biases.
fn check(
    isa: Isa,
    g: &Depthwise,
    batch: usize,
    pass: &str,
    (images, outputs, weights, biases): (usize, usize, usize, Option<usize>),
) {
    assert!(
        applies(g, super::lanes::<f32>(isa)),
        "{g:?} is not for the whole-planes SIMD kernel"
    );
    let filters = g.channels * g.multiplier;
    let expected = (
        batch * g.channels * g.input.0 * g.input.1,
        batch * filters * g.output.0 * g.output.1,
        filters * g.kernel.0 * g.kernel.1,
    );
    assert!(
        (images, outputs, weights) == expected && biases.is_none_or(|b| b == filters),
        "depthwise {pass} {g:?} of {batch} images: {images} inputs, {outputs} outputs, \
         {weights} weights, {biases:?} biases; {expected:?} and {filters} biases expected"
    );
    assert_isa(isa);
}

/// `d_weight = Σ over the batch of dZ ⋆ X` (overwritten) for `batch` images `x` and their
/// output gradients `dz`, laid out as `kernels::depthwise`'s, with `isa`.
///
/// # Panics
///
/// When the kernel does not take `g` ([`applies`]), the lengths do not fit `g` and `batch`, or
/// the CPU does not have `isa`.
pub(crate) fn depthwise_weight_gradient_planes(
    isa: Isa,
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    dz: &[f32],
    d_weight: &mut [f32],
) {
    check(
        isa,
        g,
        batch,
        "weight gradient",
        (x.len(), dz.len(), d_weight.len(), None),
    );
    // SAFETY: the CPU has the instruction set (asserted); the kernel takes the shape and the
    // lengths fit it (asserted above).
    unsafe { run_pass(isa, Pass::Weight, g, batch, (x, dz, &[]), d_weight) }
}

/// Which pass [`run_pass`] computes.
#[derive(Clone, Copy)]
enum Pass {
    /// The inputs are the images, the weights and the biases, `out` the outputs
    /// ([`run_forward`]).
    Forward,
    /// The inputs are the images and `dZ`, `out` the weight gradient ([`run`]).
    Weight,
    /// The inputs are the weights and `dZ`, `out` the input gradient ([`run_input`]).
    Input,
}

/// `pass` with `isa`'s kernels, for the kernel size of `g` (3 x 3 or 5 x 5).
///
/// # Safety
///
/// The CPU has `isa`; `g` and the lengths as the pass's entry point checks.
unsafe fn run_pass(
    isa: Isa,
    pass: Pass,
    g: &Depthwise,
    batch: usize,
    inputs: Inputs<'_>,
    out: &mut [f32],
) {
    // SAFETY (each): forwarded.
    match (isa, pass) {
        (Isa::Avx512, Pass::Forward) => unsafe { avx512_forward(g, batch, inputs, out) },
        (Isa::Avx512, Pass::Weight) => unsafe { avx512_weight(g, batch, inputs, out) },
        (Isa::Avx512, Pass::Input) => unsafe { avx512_input(g, batch, inputs, out) },
        (Isa::Avx2Fma, Pass::Forward) => unsafe { avx2_forward(g, batch, inputs, out) },
        (Isa::Avx2Fma, Pass::Weight) => unsafe { avx2_weight(g, batch, inputs, out) },
        (Isa::Avx2Fma, Pass::Input) => unsafe { avx2_input(g, batch, inputs, out) },
    }
}

/// A pass's inputs (see [`Pass`]); the third is empty but in the forward pass.
type Inputs<'a> = (&'a [f32], &'a [f32], &'a [f32]);

/// One pass for one instruction set, a copy for each kernel size (a constant there): a function
/// of its own, so that its stack buffers are the only ones in its frame.
macro_rules! entry {
    ($name:ident, $simd:ty, $features:literal, |$g:ident, $batch:ident, $inputs:pat, $out:ident| $run:ident($($arg:expr),*)) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; `g` and the lengths as
        /// the pass's entry point checks.
        #[target_feature(enable = $features)]
        unsafe fn $name($g: &Depthwise, $batch: usize, $inputs: Inputs<'_>, $out: &mut [f32]) {
            // SAFETY (both): forwarded; the kernel is 3 x 3 or 5 x 5 (`applies`).
            if $g.kernel.0 == 3 {
                unsafe { $run::<$simd, 3, 9>($($arg),*) }
            } else {
                unsafe { $run::<$simd, 5, 25>($($arg),*) }
            }
        }
    };
}

entry!(
    avx512_forward,
    Avx512F32,
    "avx512f",
    |g, batch, (x, w, bias), y| run_forward(g, batch, x, w, bias, y)
);
entry!(
    avx512_weight,
    Avx512F32,
    "avx512f",
    |g, batch, (x, dz, _), dw| run(g, batch, x, dz, dw)
);
entry!(
    avx512_input,
    Avx512F32,
    "avx512f",
    |g, batch, (w, dz, _), dx| run_input(g, batch, w, dz, dx)
);
entry!(
    avx2_forward,
    Avx2F32,
    "avx2,fma",
    |g, batch, (x, w, bias), y| run_forward(g, batch, x, w, bias, y)
);
entry!(
    avx2_weight,
    Avx2F32,
    "avx2,fma",
    |g, batch, (x, dz, _), dw| run(g, batch, x, dz, dw)
);
entry!(
    avx2_input,
    Avx2F32,
    "avx2,fma",
    |g, batch, (w, dz, _), dx| run_input(g, batch, w, dz, dx)
);

/// The kernel on vectors `S`, a `K x K` kernel of `TAPS` steps.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `g` (with `K`) and the lengths as
/// [`depthwise_weight_gradient_planes`] checks.
#[inline(always)]
unsafe fn run<S: Simd<E = f32>, const K: usize, const TAPS: usize>(
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    dz: &[f32],
    dw: &mut [f32],
) {
    const { assert!(TAPS == K * K) };
    let lanes = S::LANES;
    let width = g.input.1;
    let (plane, out_plane) = (g.input.0 * width, g.output.0 * g.output.1);
    let vectors = out_plane.div_ceil(lanes);
    let (lead, padded_len) = padded_plane(g, lanes);
    let filters = g.channels * g.multiplier;
    let mut columns = [0.0_f32; COLUMN_WEIGHTS];
    column_weights(g, lanes, &mut columns);
    let mut padded = [0.0_f32; PADDED_PLANE];
    // SAFETY: the CPU has `S`'s instruction set.
    let tail = unsafe { S::mask(out_plane - (vectors - 1) * lanes) };
    // A group of filters at a time, each image's planes of the group in turn: they lie side
    // by side, so the images are read in order (one filter across the batch jumped a whole
    // image from plane to plane, and waited on memory for each).
    for group in (0..filters).step_by(GROUP) {
        let members = group..(group + GROUP).min(filters);
        // SAFETY: the CPU has `S`'s instruction set (this function's contract).
        let mut group_sums = [[unsafe { S::zero() }; TAPS]; GROUP];
        for b in 0..batch {
            for (o, sums) in members.clone().zip(&mut group_sums) {
                let channel = o / g.multiplier;
                let image = &x[(b * g.channels + channel) * plane..][..plane];
                padded[lead..lead + plane].copy_from_slice(image);
                let dz = &dz[(b * filters + o) * out_plane..][..out_plane];
                let mut acc = *sums;
                for v in 0..vectors {
                    let start = v * lanes;
                    // SAFETY: positions `start..start + lanes` are inside the plane but in the
                    // last vector, whose load is masked to the plane's end; the CPU has `S`'s
                    // instruction set.
                    let d = unsafe {
                        if v + 1 < vectors {
                            S::load(dz.as_ptr().add(start))
                        } else {
                            S::load_masked(dz.as_ptr().add(start), tail)
                        }
                    };
                    for kx in 0..K {
                        // SAFETY: `columns` holds `K` rows of `vectors · lanes`; the CPU has
                        // `S`'s instruction set.
                        let d = unsafe {
                            S::fma(
                                d,
                                S::load(columns.as_ptr().add(kx * vectors * lanes + start)),
                                S::zero(),
                            )
                        };
                        for ky in 0..K {
                            let at = start + ky * width + kx;
                            debug_assert!(at + lanes <= padded_len);
                            // SAFETY: the last vector at the last kernel step ends within
                            // `padded_len` (see `padded_plane`), at most `PADDED_PLANE`; the
                            // CPU has `S`'s instruction set.
                            acc[ky * K + kx] = unsafe {
                                S::fma(d, S::load(padded.as_ptr().add(at)), acc[ky * K + kx])
                            };
                        }
                    }
                }
                *sums = acc;
            }
        }
        for (o, sums) in members.zip(&group_sums) {
            let dw = &mut dw[o * K * K..][..K * K];
            for (dw, &sum) in dw.iter_mut().zip(sums) {
                // SAFETY: the CPU has `S`'s instruction set (this function's contract).
                *dw = unsafe { S::sum(sum) };
            }
        }
    }
}

/// `dx = Σ over the filters of each channel of w ⋆ᵀ dZ` (overwritten) for `batch` images' output
/// gradients `dz`, laid out as `kernels::depthwise`'s, with `isa`.
///
/// # Panics
///
/// When the kernel does not take `g` ([`applies`]), the lengths do not fit `g` and `batch`, or
/// the CPU does not have `isa`.
pub(crate) fn depthwise_input_gradient_planes(
    isa: Isa,
    g: &Depthwise,
    batch: usize,
    weight: &[f32],
    dz: &[f32],
    dx: &mut [f32],
) {
    check(
        isa,
        g,
        batch,
        "input gradient",
        (dx.len(), dz.len(), weight.len(), None),
    );
    // SAFETY: the CPU has the instruction set (asserted); the kernel takes the shape and the
    // lengths fit it (asserted above).
    unsafe { run_pass(isa, Pass::Input, g, batch, (weight, dz, &[]), dx) }
}

/// The input gradient on vectors `S`, a `K x K` kernel of `TAPS` steps.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `g` (with `K`) and the lengths as
/// [`depthwise_input_gradient_planes`] checks.
#[inline(always)]
unsafe fn run_input<S: Simd<E = f32>, const K: usize, const TAPS: usize>(
    g: &Depthwise,
    batch: usize,
    weight: &[f32],
    dz: &[f32],
    dx: &mut [f32],
) {
    const { assert!(TAPS == K * K) };
    let lanes = S::LANES;
    let width = g.input.1;
    let (plane, out_plane) = (g.input.0 * width, g.output.0 * g.output.1);
    let (out_vectors, in_vectors) = (out_plane.div_ceil(lanes), plane.div_ceil(lanes));
    let lead = g.padding.0 * width + g.padding.1;
    let (front, len) = padded_gradients(g, lanes);
    let filters = g.channels * g.multiplier;
    let mut columns = [0.0_f32; COLUMN_WEIGHTS];
    column_weights(g, lanes, &mut columns);
    // Kernel column `kx`'s copy of `dZ` at `kx · len`, between zeros that are never written.
    let mut padded = [0.0_f32; PADDED_GRADIENTS];
    // SAFETY (both): the CPU has `S`'s instruction set.
    let out_tail = unsafe { S::mask(out_plane - (out_vectors - 1) * lanes) };
    let in_tail = unsafe { S::mask(plane - (in_vectors - 1) * lanes) };
    for b in 0..batch {
        for o in 0..filters {
            let channel = o / g.multiplier;
            let dz = &dz[(b * filters + o) * out_plane..][..out_plane];
            for v in 0..out_vectors {
                let start = v * lanes;
                // SAFETY: positions `start..start + lanes` are inside the plane but in the
                // last vector, whose load is masked to the plane's end; `columns` holds `K`
                // rows of `out_vectors · lanes`, and each copy `len ≥ front + out_vectors ·
                // lanes` values (`padded_gradients`), `K` of them within `PADDED_GRADIENTS`
                // (`applies`); the CPU has `S`'s instruction set.
                unsafe {
                    let d = if v + 1 < out_vectors {
                        S::load(dz.as_ptr().add(start))
                    } else {
                        S::load_masked(dz.as_ptr().add(start), out_tail)
                    };
                    for kx in 0..K {
                        let column =
                            S::load(columns.as_ptr().add(kx * out_vectors * lanes + start));
                        let at = kx * len + front + start;
                        S::store(padded.as_mut_ptr().add(at), S::fma(d, column, S::zero()));
                    }
                }
            }
            let w = &weight[o * TAPS..][..TAPS];
            // SAFETY: the CPU has `S`'s instruction set.
            let w: [S::V; TAPS] = core::array::from_fn(|t| unsafe { S::splat(w[t]) });
            let dx = &mut dx[(b * g.channels + channel) * plane..][..plane];
            let first = o % g.multiplier == 0;
            for v in 0..in_vectors {
                let start = v * lanes;
                // SAFETY: the CPU has `S`'s instruction set.
                let mut sum = unsafe { S::zero() };
                for ky in 0..K {
                    for kx in 0..K {
                        let at = kx * len + front + lead + start - ky * width - kx;
                        debug_assert!(at + lanes <= (kx + 1) * len);
                        // SAFETY: `front` covers the farthest step back, and the last vector of
                        // inputs ends within the copy's `len` (`padded_gradients`); the CPU has
                        // `S`'s instruction set.
                        sum = unsafe {
                            S::fma(w[ky * K + kx], S::load(padded.as_ptr().add(at)), sum)
                        };
                    }
                }
                let out = dx[start..].as_mut_ptr();
                // SAFETY: positions `start..start + lanes` are inside the plane but in the last
                // vector, whose load and store are masked to the plane's end; the CPU has `S`'s
                // instruction set.
                unsafe {
                    if v + 1 < in_vectors {
                        if !first {
                            sum = S::add(sum, S::load(out));
                        }
                        S::store(out, sum);
                    } else {
                        if !first {
                            sum = S::add(sum, S::load_masked(out, in_tail));
                        }
                        S::store_masked(out, in_tail, sum);
                    }
                }
            }
        }
    }
}

/// `y = dwconv(x, weight) + bias` (every output written) for `batch` images, laid out as
/// `kernels::depthwise`'s, with `isa`: the forward pass of a training batch.
///
/// # Panics
///
/// When the kernel does not take `g` ([`applies`]), the lengths do not fit `g` and `batch`, or
/// the CPU does not have `isa`.
pub(crate) fn depthwise_forward_planes(
    isa: Isa,
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    weight: &[f32],
    bias: &[f32],
    y: &mut [f32],
) {
    check(
        isa,
        g,
        batch,
        "forward pass",
        (x.len(), y.len(), weight.len(), Some(bias.len())),
    );
    // SAFETY: the CPU has the instruction set (asserted); the kernel takes the shape and the
    // lengths fit it (asserted above).
    unsafe { run_pass(isa, Pass::Forward, g, batch, (x, weight, bias), y) }
}

/// The forward pass on vectors `S`, a `K x K` kernel of `TAPS` steps.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `g` (with `K`) and the lengths as
/// [`depthwise_forward_planes`] checks.
#[inline(always)]
unsafe fn run_forward<S: Simd<E = f32>, const K: usize, const TAPS: usize>(
    g: &Depthwise,
    batch: usize,
    x: &[f32],
    weight: &[f32],
    bias: &[f32],
    y: &mut [f32],
) {
    const { assert!(TAPS == K * K) };
    let lanes = S::LANES;
    let width = g.input.1;
    let (plane, out_plane) = (g.input.0 * width, g.output.0 * g.output.1);
    let vectors = out_plane.div_ceil(lanes);
    let (lead, padded_len) = padded_plane(g, lanes);
    let filters = g.channels * g.multiplier;
    let mut columns = [0.0_f32; COLUMN_WEIGHTS];
    column_weights(g, lanes, &mut columns);
    let mut padded = [0.0_f32; PADDED_PLANE];
    // SAFETY: the CPU has `S`'s instruction set.
    let tail = unsafe { S::mask(out_plane - (vectors - 1) * lanes) };
    for b in 0..batch {
        for o in 0..filters {
            let channel = o / g.multiplier;
            if o % g.multiplier == 0 {
                let image = &x[(b * g.channels + channel) * plane..][..plane];
                padded[lead..lead + plane].copy_from_slice(image);
            }
            let w = &weight[o * TAPS..][..TAPS];
            // SAFETY: the CPU has `S`'s instruction set.
            let w: [S::V; TAPS] = core::array::from_fn(|t| unsafe { S::splat(w[t]) });
            // SAFETY: the CPU has `S`'s instruction set.
            let b_o = unsafe { S::splat(bias[o]) };
            let y = &mut y[(b * filters + o) * out_plane..][..out_plane];
            for v in 0..vectors {
                let start = v * lanes;
                let mut z = b_o;
                for kx in 0..K {
                    // SAFETY: the CPU has `S`'s instruction set.
                    let mut column_sum = unsafe { S::zero() };
                    for ky in 0..K {
                        let at = start + ky * width + kx;
                        debug_assert!(at + lanes <= padded_len);
                        // SAFETY: the last vector at the last kernel step ends within
                        // `padded_len` (see `padded_plane`), at most `PADDED_PLANE`; the CPU
                        // has `S`'s instruction set.
                        column_sum = unsafe {
                            S::fma(w[ky * K + kx], S::load(padded.as_ptr().add(at)), column_sum)
                        };
                    }
                    // SAFETY: `columns` holds `K` rows of `vectors · lanes`; the CPU has `S`'s
                    // instruction set.
                    z = unsafe {
                        S::fma(
                            column_sum,
                            S::load(columns.as_ptr().add(kx * vectors * lanes + start)),
                            z,
                        )
                    };
                }
                let out = y[start..].as_mut_ptr();
                // SAFETY: positions `start..start + lanes` are inside the plane but in the last
                // vector, whose store is masked to the plane's end; the CPU has `S`'s
                // instruction set.
                unsafe {
                    if v + 1 < vectors {
                        S::store(out, z);
                    } else {
                        S::store_masked(out, tail, z);
                    }
                }
            }
        }
    }
}
