//! The forward pass of a convolution that does not take the stride-1 kernels (a stride other
//! than 1, or a kernel that is not square) without unrolling its patches: the filters in the
//! vector lanes, each window read where it lies (see [`super::plan::windows_in_place_scratch`]),
//! and the loop over a batch that the stride-1 plan's filters-in-lanes kernel shares.

#[cfg(target_arch = "x86_64")]
use super::cast::as_uninit_mut;
#[cfg(target_arch = "x86_64")]
use super::plan::windows_in_place_scratch;
#[cfg(target_arch = "x86_64")]
use super::shape::Conv;
use super::shape::{Epilogue, PrepaddedConv};
#[cfg(target_arch = "x86_64")]
use core::mem::MaybeUninit;

use crate::Scalar;

/// `out = epilogue(conv(x, w) + bias)` for a batch of `batch` images of a convolution of
/// `shape` on images padded by `padding` on every side (`shape` has the padded sizes; `x` is
/// `[batch][channels][height - 2·padding][width - 2·padding]`, `w` `[filters][channels]
/// [kernel_height][kernel_width]`, `out` `[batch][filters][out_height][out_width]`), by the
/// filters-in-lanes kernel, where the plan takes the shape for this CPU's instruction set
/// (`super::plan::windows_in_place_scratch`) and `scratch` holds that many elements (any
/// contents): returns whether it did. Otherwise it writes nothing, and the caller unrolls the
/// patches.
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[allow(unsafe_code)] // `out` and `scratch` seen as uninitialized: see below
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_windows_in_place<T: Scalar>(
    shape: &PrepaddedConv,
    padding: usize,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &mut [T],
    epilogue: Epilogue,
    scratch: &mut [T],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && let Some(needed) =
            windows_in_place_scratch(shape, padding, super::x86::lanes::<f32>(isa))
        && scratch.len() >= needed
        && let (Some(x), Some(w), Some(bias), Some(out), Some(scratch)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(w),
            super::cast::same_type_slice::<T, f32>(bias),
            super::cast::same_type_slice_mut::<T, f32>(out),
            super::cast::same_type_slice_mut::<T, f32>(scratch),
        )
    {
        // SAFETY (both): the kernel writes only initialized values into `out` (its outputs),
        // and `filters_in_lanes_images` into `scratch`, which stay initialized.
        let (out, scratch) = unsafe { (as_uninit_mut(out), as_uninit_mut(scratch)) };
        let operands = (batch, x, w, bias);
        filters_in_lanes_images(isa, shape, padding, operands, out, epilogue, scratch);
        return true;
    }
    let _ = (shape, padding, batch, x, w, bias, out, epilogue, scratch);
    false
}

/// The filters-in-lanes kernel on `batch` images (`x`, unpadded), the weights `w` transposed
/// once into `scratch` and each image padded by `padding` after them (where it is not 0):
/// `scratch` holds at least `shape.weights_len()` elements, plus `shape.image_len()` with
/// padding, and need not be initialized.
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[cfg(target_arch = "x86_64")]
pub(super) fn filters_in_lanes_images<E: super::x86::Element + Scalar>(
    isa: super::x86::Isa,
    shape: &PrepaddedConv,
    padding: usize,
    (batch, x, w, bias): (usize, &[E], &[E], &[E]),
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
    scratch: &mut [MaybeUninit<E>],
) {
    // The images as they come, before padding.
    let original = Conv {
        channels: shape.channels,
        filters: shape.filters,
        kernel: 1, // not read by `pad`
        padding,
        height: shape.height - 2 * padding,
        width: shape.width - 2 * padding,
    };
    let (image_len, output_len) = (original.image_len(), shape.output_len());
    assert!(
        x.len() == batch * image_len && out.len() == batch * output_len,
        "{} input and {} output elements do not fit a batch of {batch} of {shape:?} padded by {padding}",
        x.len(),
        out.len()
    );
    let padded_len = if padding > 0 { shape.image_len() } else { 0 };
    super::x86::with_transposed_filters(scratch, w, shape.filters, padded_len, |wt, padded| {
        for (x, out) in x
            .chunks_exact(image_len.max(1))
            .zip(out.chunks_exact_mut(output_len.max(1)))
        {
            let image = if padding > 0 {
                super::im2col::pad(&original, x, padded); // the border stays zero
                &*padded
            } else {
                x
            };
            super::x86::conv2d_filters_in_lanes(isa, shape, image, wt, bias, out, epilogue);
        }
    });
}
