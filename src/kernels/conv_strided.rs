//! The forward pass of a convolution that does not take the stride-1 kernels (a stride other
//! than 1, or a kernel that is not square) without unrolling its patches: the filters in the
//! vector lanes, each window read where it lies (see [`super::plan::strided_forward_scratch`]).

#[cfg(target_arch = "x86_64")]
use super::cast::as_uninit_mut;
#[cfg(target_arch = "x86_64")]
use super::plan::strided_forward_scratch;
#[cfg(target_arch = "x86_64")]
use super::shape::Conv;
use super::shape::{Epilogue, UnpaddedConv};

use crate::Scalar;

/// `out = epilogue(conv(x, w) + bias)` for a batch of `batch` images of a convolution of
/// `shape` on images padded by `padding` on every side (`shape` has the padded sizes; `x` is
/// `[batch][channels][height - 2·padding][width - 2·padding]`, `w` `[filters][channels]
/// [kernel_height][kernel_width]`, `out` `[batch][filters][out_height][out_width]`), by the
/// filters-in-lanes kernel, where the plan takes the shape for this CPU's instruction set
/// (`super::plan::strided_forward_scratch`) and `scratch` holds that many elements (any
/// contents): returns whether it did. Otherwise it writes nothing, and the caller unrolls the
/// patches.
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[allow(unsafe_code)] // `out` and `scratch` seen as uninitialized: see below
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_strided_with_scratch<T: Scalar>(
    shape: &UnpaddedConv,
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
        && let Some(needed) = strided_forward_scratch(shape, padding, super::x86::lanes::<f32>(isa))
        && scratch.len() >= needed
        && let (Some(x), Some(w), Some(bias), Some(out), Some(scratch)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(w),
            super::cast::same_type_slice::<T, f32>(bias),
            super::cast::same_type_slice_mut::<T, f32>(out),
            super::cast::same_type_slice_mut::<T, f32>(scratch),
        )
    {
        // The image as it comes, before padding.
        let unpadded = Conv {
            channels: shape.channels,
            filters: shape.filters,
            kernel: 1, // not read by `pad`
            padding,
            height: shape.height - 2 * padding,
            width: shape.width - 2 * padding,
        };
        let (image_len, output_len) = (unpadded.image_len(), shape.output_len());
        assert!(
            x.len() == batch * image_len && out.len() == batch * output_len,
            "{} input and {} output elements do not fit a batch of {batch} of {shape:?} padded by {padding}",
            x.len(),
            out.len()
        );
        let padded_len = if padding > 0 { shape.image_len() } else { 0 };
        // SAFETY (both): the kernel writes only initialized values into `out` (its outputs),
        // and `with_transposed_filters` into `scratch`, which stay initialized.
        let (out, scratch) = unsafe { (as_uninit_mut(out), as_uninit_mut(scratch)) };
        super::x86::with_transposed_filters(scratch, w, shape.filters, padded_len, |wt, padded| {
            for (x, out) in x
                .chunks_exact(image_len.max(1))
                .zip(out.chunks_exact_mut(output_len.max(1)))
            {
                let image = if padding > 0 {
                    super::im2col::pad(&unpadded, x, padded); // the border stays zero
                    &*padded
                } else {
                    x
                };
                super::x86::conv2d_filters_in_lanes(isa, shape, image, wt, bias, out, epilogue);
            }
        });
        return true;
    }
    let _ = (shape, padding, batch, x, w, bias, out, epilogue, scratch);
    false
}
