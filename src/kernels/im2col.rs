//! Copying a convolution's images: padding, row copies, and `col2im` (the patches' gradients
//! added back to the image they came from).

use super::shape::Conv;

use crate::Scalar;

/// Copies the image `x` into the inside of `padded`, `shape.padding` from each edge; the
/// border is not written.
pub(crate) fn pad<T: Scalar>(shape: &Conv, x: &[T], padded: &mut [T]) {
    let (p, height, width) = (shape.padding, shape.height, shape.width);
    let (padded_height, padded_width) = (height + 2 * p, width + 2 * p);
    let plane = height * width;
    if plane == 0 {
        return;
    }
    for c in 0..shape.channels {
        let inside = &mut padded[(c * padded_height + p) * padded_width + p..];
        let x = &x[c * plane..][..plane];
        copy_rows(x, width, inside, padded_width, (height, width));
    }
}

/// Copies `rows` rows of `width` elements, row `i` from `from[i·from_stride..]` to
/// `to[i·to_stride..]`, leaving the rest of each stride as it was. With masked vector moves
/// for `f32` and `f64` on x86-64 (AVX2 or AVX-512), where `copy_from_slice` called `memmove`
/// per row, which for short rows (28 elements, LeNet-5's) cost more than the copy.
///
/// # Panics
///
/// When a row falls outside its slice (a bug in the caller).
pub(crate) fn copy_rows<T: Copy + 'static>(
    from: &[T],
    from_stride: usize,
    to: &mut [T],
    to_stride: usize,
    (rows, width): (usize, usize),
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && super::x86::copy_rows(isa, from, from_stride, to, to_stride, (rows, width))
    {
        return;
    }
    for i in 0..rows {
        to[i * to_stride..][..width].copy_from_slice(&from[i * from_stride..][..width]);
    }
}

/// `dx += col2im(d_patches)` for a stride-1 convolution of `shape` (`d_patches` is
/// `C·K·K x OH·OW`, `dx` the `C x H x W` input gradient): each row `(c, ky, kx)` added, output
/// row by output row, to the input row it met, on AVX-512. Returns `false`, changing nothing,
/// unless `T` is `f32` or `f64` and the CPU has AVX-512 (the caller's generic code then does the
/// same additions in the same order).
///
/// # Panics
///
/// When the slices' lengths do not fit `shape` (a bug in the caller).
#[cfg(feature = "alloc")]
pub(crate) fn col2im_stride1<T: 'static>(shape: &Conv, d_patches: &[T], dx: &mut [T]) -> bool {
    let taps = shape.channels * shape.kernel * shape.kernel;
    assert!(
        d_patches.len() == taps * shape.out_height() * shape.out_width()
            && dx.len() == shape.channels * shape.height * shape.width,
        "col2im: {} patch values and {} input values for {shape:?}",
        d_patches.len(),
        dx.len()
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(super::x86::Isa::Avx512) = super::x86::detected_isa() {
        return super::x86::col2im_stride1_avx512(shape, d_patches, dx);
    }
    let _ = (d_patches, dx);
    false
}
