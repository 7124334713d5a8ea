//! The weight gradient of a stride-1 convolution, direct, the filters in the vector lanes, from
//! the output gradients transposed position-major. Applies: any kernel size, an image padded
//! beforehand, `f32`, AVX-512 or AVX2.

use super::conv_filters::filters_tile_sized;
use super::gemm::Element;
use super::isa::{Isa, assert_isa};
use super::simd::{Avx2F32, Avx512F32, Simd, array_from};

use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::Conv;

/// Weight steps per tile of [`weight_grad_filters_tile`]: one accumulator each; their input
/// offsets stay in general-purpose registers.
const FILTER_TILE_STEPS: usize = 8;

/// One tile of a stride-1 convolution's weight gradient without padding, the filters in the
/// lanes, summed over a batch: `dW[f][step] (+)= Σ over the images and output positions of
/// dZ[f][position] · X̂[step][position]` for filters `f0..f0 + count` and the `NS` steps
/// `step0..step0 + NS`. The gradient `dzt` is position-major (`[image][position][filter]`):
/// per position, one vector of it and, per step, the input it met, broadcast: `NS` fused
/// multiply-adds per load, every lane useful, and no horizontal sums.
///
/// # Safety
///
/// The CPU has `S`'s instruction set; `x` holds `batch` images of `C·H·W`, `dzt` `batch` blocks
/// of `OH·OW·filters`, `dw` `filters·C·K·K`; `f0 + count <= filters`, `step0 + NS <= C·K·K`; no
/// padding.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn weight_grad_filters_tile<S: Simd, const NS: usize>(
    shape: &Conv,
    batch: usize,
    x: *const S::E,
    dzt: *const S::E,
    dw: *mut S::E,
    (f0, count): (usize, usize),
    step0: usize,
    accumulate: bool,
) {
    let Conv {
        channels,
        filters,
        kernel,
        height,
        width,
        ..
    } = *shape;
    let (out_height, out_width) = (shape.out_height(), shape.out_width());
    let steps = channels * kernel * kernel;
    // Where each step's window starts in the image: (c, ky, kx) -> (c·H + ky)·W + kx.
    let offsets: [usize; NS] = array_from(|s| {
        let step = step0 + s;
        let (c, ky, kx) = (
            step / (kernel * kernel),
            step / kernel % kernel,
            step % kernel,
        );
        (c * height + ky) * width + kx
    });
    // SAFETY (whole body): the instruction set is present (the caller's contract). Without
    // padding, the input broadcast for output (oh, ow) and step (c, ky, kx) is (c, oh + ky,
    // ow + kx), inside the image since oh + ky < OH + K - 1 = H and ow + kx < W likewise; the
    // gradient lanes read are filters f0..f0 + count of a position of an image in the batch
    // (the others masked off); the weight gradients written are (f0 + lane, step0 + s), inside
    // `dw`.
    unsafe {
        let mask = S::mask(count);
        let full = count == S::LANES;
        let mut acc = [S::zero(); NS];
        for b in 0..batch {
            let image = x.add(b * channels * height * width);
            let mut grads = dzt.add(b * out_height * out_width * filters + f0);
            for oh in 0..out_height {
                let row = image.add(oh * width);
                for ow in 0..out_width {
                    let g = if full {
                        S::load(grads)
                    } else {
                        S::load_masked(grads, mask)
                    };
                    grads = grads.wrapping_add(filters);
                    let inputs = row.add(ow);
                    for (acc_s, &offset) in acc.iter_mut().zip(offsets.iter()) {
                        *acc_s = S::fma(S::splat(*inputs.add(offset)), g, *acc_s);
                    }
                }
            }
        }
        let mut lanes = [S::E::default(); 16];
        for (s, &acc_s) in acc.iter().enumerate() {
            S::store(lanes.as_mut_ptr(), acc_s);
            let first = dw.add(f0 * steps + step0 + s);
            for (lane, &sum) in lanes[..count].iter().enumerate() {
                let p = first.add(lane * steps);
                *p = if accumulate { *p + sum } else { sum };
            }
        }
    }
}

/// The weight gradient of a batch, the filters in the lanes: per vector of filters, tiles of
/// [`FILTER_TILE_STEPS`] steps, each over the whole batch.
///
/// # Safety
///
/// As [`weight_grad_filters_tile`] for every tile; the slices checked by
/// [`conv2d_weight_gradient_filters`].
#[inline(always)]
pub(super) unsafe fn weight_grad_filters_run<S: Simd>(
    shape: &Conv,
    batch: usize,
    x: &[S::E],
    dzt: &[S::E],
    dw: &mut [S::E],
    accumulate: bool,
) {
    const NS: usize = FILTER_TILE_STEPS;
    let steps = shape.channels * shape.kernel * shape.kernel;
    let (x, dzt, dw) = (x.as_ptr(), dzt.as_ptr(), dw.as_mut_ptr());
    for f0 in (0..shape.filters).step_by(S::LANES) {
        let filters = (f0, S::LANES.min(shape.filters - f0));
        // SAFETY: every tile's filters and steps exist (the last tile takes what is left).
        unsafe {
            let mut step = 0;
            while step + NS <= steps {
                weight_grad_filters_tile::<S, NS>(
                    shape, batch, x, dzt, dw, filters, step, accumulate,
                );
                step += NS;
            }
            if step < steps {
                filters_tile_sized!(
                    weight_grad_filters_tile,
                    steps - step,
                    below NS,
                    shape,
                    batch,
                    x,
                    dzt,
                    dw,
                    filters,
                    step,
                    accumulate
                );
            }
        }
    }
}

macro_rules! weight_grad_filters_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; sizes checked by
        /// [`conv2d_weight_gradient_filters`].
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(
            shape: &Conv,
            batch: usize,
            x: &[$e],
            dzt: &[$e],
            dw: &mut [$e],
            accumulate: bool,
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { weight_grad_filters_run::<$simd>(shape, batch, x, dzt, dw, accumulate) }
        }
    };
}
#[allow(unused_imports)]
pub(super) use weight_grad_filters_entry;

weight_grad_filters_entry!(weight_grad_filters_avx512_f32, Avx512F32, f32, "avx512f");
weight_grad_filters_entry!(weight_grad_filters_avx2_f32, Avx2F32, f32, "avx2,fma");

/// The weight gradient of a stride-1 convolution without padding summed over a batch of
/// `batch` images, `dw (+)= Σ dZ·X̂ᵀ`, from the output gradients `dzt` laid out position-major
/// (`[image][position][filter]`), the filters in the vector lanes, with `isa`.
///
/// # Panics
///
/// As [`crate::kernels::conv2d_weight_gradient_stride1`], for `batch` images and gradients.
pub(crate) fn conv2d_weight_gradient_filters<E: Element>(
    isa: Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dzt: &[E],
    dw: &mut [E],
    accumulate: bool,
) {
    let image = shape.channels * shape.height * shape.width;
    let gradients = shape.filters * shape.out_height() * shape.out_width();
    shape.check_lengths(image, dw.len(), shape.filters, gradients);
    assert!(
        (x.len(), dzt.len()) == (batch * image, batch * gradients),
        "{} images and {} gradients do not fit a batch of {batch} of {shape:?}",
        x.len(),
        dzt.len()
    );
    assert_eq!(
        shape.padding, 0,
        "the weight-gradient kernel takes a padded image"
    );
    assert_isa(isa);
    let (Some(x), Some(dzt), Some(dw)) = (
        same_type_slice::<E, f32>(x),
        same_type_slice::<E, f32>(dzt),
        same_type_slice_mut::<E, f32>(dw),
    ) else {
        unreachable!("the SIMD convolution kernels take f32");
    };
    // SAFETY (both): lengths, sizes and instruction set checked above.
    match isa {
        Isa::Avx512 => unsafe {
            weight_grad_filters_avx512_f32(shape, batch, x, dzt, dw, accumulate)
        },
        Isa::Avx2Fma => unsafe {
            weight_grad_filters_avx2_f32(shape, batch, x, dzt, dw, accumulate)
        },
    }
}
