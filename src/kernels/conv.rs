//! The convolutions' safe entry points: forward passes, weight and input gradients of stride-1
//! convolutions, each dispatched to the SIMD kernel its shape takes on this CPU (see
//! [`super::plan`]) or to the reference loops.

use super::cast::{as_uninit_mut, assume_init_mut, uninit_elements};
#[cfg(target_arch = "x86_64")]
use super::im2col::pad;
use super::plan::ScratchFor;
#[cfg(target_arch = "x86_64")]
use super::plan::{ForwardKernel, forward_kernel};
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
use super::plan::{WeightGradientKernel, weight_gradient_kernel};
use super::shape::{Conv, Epilogue};
#[cfg(target_arch = "x86_64")]
use super::shape::{SMALL_STACK_SCRATCH, STACK_SCRATCH, WINOGRAD_STACK_SCRATCH};
use core::mem::MaybeUninit;

use crate::Scalar;

/// `out = epilogue(conv(x, w) + bias)` for a batch of `batch` images, stride 1 (see [`Conv`]): `x` is
/// `[batch][channels][height][width]`, `w` is `[filters][channels][kernel][kernel]` (PyTorch's
/// layout), `out` is `[batch][filters][out_height][out_width]`, all row-major. Computed
/// directly, without unrolling patches, with one of two SIMD kernels, whichever fills more of
/// each vector:
///
/// - **positions in the lanes**: each output row is a few vectors, each filter step a broadcast
///   weight times a shifted input row, the padding masked off;
/// - **filters in the lanes** (many filters, narrow images): each filter step is a vector of the
///   transposed weights times a broadcast input, per output position. The weights are
///   transposed once per call (and each image padded) into a stack buffer.
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(crate) fn conv2d_stride1<T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &mut [T],
    epilogue: Epilogue,
) {
    // SAFETY: the convolution writes only initialized values (its outputs) into `out`.
    let out = unsafe { as_uninit_mut(out) };
    conv2d_stride1_uninit(shape, batch, x, w, bias, out, epilogue);
}

/// [`conv2d_stride1`] into `out` whether it is initialized or not: every element of it is
/// written (each kernel stores every output position of every filter, as the tests of each
/// one check from stale contents), and it is returned initialized. What lets a chain of layers
/// skip zeroing the samples between them.
///
/// # Panics
///
/// As [`conv2d_stride1`].
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(crate) fn conv2d_stride1_uninit<'o, T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &'o mut [MaybeUninit<T>],
    epilogue: Epilogue,
) -> &'o mut [T] {
    shape.check_batch(batch, x.len(), w.len(), bias.len(), out.len());
    conv2d_stride1_dispatch(shape, batch, x, w, bias, out, epilogue);
    // SAFETY: every path of `conv2d_stride1_dispatch` writes every element of `out` (the
    // lengths were checked to be `batch` outputs).
    unsafe { assume_init_mut(out) }
}

/// [`conv2d_stride1`] with `scratch` from a layer's workspace (training) or for a prediction
/// (an arena, a caller's), as `purpose` says, at least [`super::plan::forward_scratch_any_isa`]
/// elements (any contents): the kernel of the plan with no limit
/// ([`super::plan::scratch_kernel`]) on it where that plan takes more scratch than the stack
/// buffer holds, or takes the products of a 1 x 1 kernel (any scratch, none too), else as
/// [`conv2d_stride1`] (a shorter scratch too).
///
/// # Panics
///
/// As [`conv2d_stride1`].
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_stride1_with_scratch<T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &mut [T],
    epilogue: Epilogue,
    scratch: &mut [T],
    purpose: ScratchFor,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && let (Some(x), Some(w), Some(bias), Some(out), Some(scratch)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(w),
            super::cast::same_type_slice::<T, f32>(bias),
            super::cast::same_type_slice_mut::<T, f32>(out),
            super::cast::same_type_slice_mut::<T, f32>(scratch),
        )
    {
        let lanes = super::x86::lanes::<f32>(isa);
        let needed = super::plan::workspace_forward_scratch(shape, lanes, purpose);
        let kernel = super::plan::scratch_kernel(shape, lanes, purpose);
        if (needed > 0 && scratch.len() >= needed) || kernel == ForwardKernel::PointwiseProducts {
            shape.check_batch(batch, x.len(), w.len(), bias.len(), out.len());
            // SAFETY (both): the kernel writes only initialized values into `out` (its
            // outputs) and into `scratch`, which stay initialized.
            let (out, scratch) = unsafe { (as_uninit_mut(out), as_uninit_mut(scratch)) };
            let operands = (shape, batch, x, w, bias);
            run_forward_kernel(isa, kernel, operands, out, epilogue, scratch);
            return;
        }
    }
    let _ = (scratch, purpose);
    conv2d_stride1(shape, batch, x, w, bias, out, epilogue);
}

/// [`conv2d_stride1_uninit`] of a batch of `B` images into `y`, an uninitialized batch of
/// outputs (`[image][filter][row][column]`), returned initialized: a layer's output written
/// without being zeroed first.
///
/// # Panics
///
/// When `x` is not `B` images or `OC x OH x OW` not the output of `shape`.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(crate) fn conv2d_stride1_images<
    'y,
    T: Scalar,
    const OC: usize,
    const OH: usize,
    const OW: usize,
    const B: usize,
>(
    shape: &Conv,
    x: &[T],
    w: &[T],
    bias: &[T],
    y: &'y mut MaybeUninit<[[[[T; OW]; OH]; OC]; B]>,
    epilogue: Epilogue,
) -> &'y mut [[[[T; OW]; OH]; OC]; B] {
    conv2d_stride1_uninit(shape, B, x, w, bias, uninit_elements(y), epilogue);
    // SAFETY: `conv2d_stride1_uninit` wrote every element of `y` (or panicked on
    // lengths that do not fit).
    unsafe { y.assume_init_mut() }
}

/// The paths of [`conv2d_stride1_uninit`], the lengths checked: the SIMD kernels for `f32` on
/// x86-64 with AVX2 or AVX-512, else the reference loops, then the epilogue.
#[allow(unsafe_code)] // uninitialized outputs: see `conv2d_stride1_uninit`
pub(super) fn conv2d_stride1_dispatch<T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    w: &[T],
    bias: &[T],
    out: &mut [MaybeUninit<T>],
    epilogue: Epilogue,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && let (Some(x), Some(w), Some(bias), Some(out)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(w),
            super::cast::same_type_slice::<T, f32>(bias),
            super::cast::same_type_slice_mut::<MaybeUninit<T>, MaybeUninit<f32>>(out),
        )
    {
        conv2d_stride1_simd(isa, shape, batch, x, w, bias, out, epilogue);
        return;
    }
    // The reference loops add into their outputs: zeros first.
    out.fill(MaybeUninit::new(T::zero()));
    // SAFETY: every element was just written.
    let out = unsafe { assume_init_mut(out) };
    let len = shape.output_len();
    for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
        let out = &mut out[b * len..(b + 1) * len];
        super::reference::conv2d_stride1(shape, x, w, bias, out);
        if epilogue != Epilogue::Identity {
            for z in out {
                *z = epilogue.apply(*z);
            }
        }
    }
}

/// The `batch` images (or outputs, or output gradients) of `len` elements each in `x`, one
/// slice each (an empty image still counts).
pub(super) fn per_image<T>(x: &[T], batch: usize, len: usize) -> impl Iterator<Item = &[T]> {
    (0..batch).map(move |b| &x[b * len..(b + 1) * len])
}

/// [`conv2d_stride1`] on the SIMD kernels, the lengths checked: the stack plan's kernel
/// ([`forward_kernel`] with [`STACK_SCRATCH`]), its scratch in a stack buffer.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(super) fn conv2d_stride1_simd<E: super::x86::Element + Scalar>(
    isa: super::x86::Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    w: &[E],
    bias: &[E],
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    let kernel = forward_kernel(shape, super::x86::lanes::<E>(isa), STACK_SCRATCH);
    let operands = (shape, batch, x, w, bias);
    match kernel.stack_scratch() {
        0 => run_forward_kernel(isa, kernel, operands, out, epilogue, &mut []),
        SMALL_STACK_SCRATCH => {
            on_stack::<E, SMALL_STACK_SCRATCH>(isa, kernel, operands, out, epilogue);
        }
        STACK_SCRATCH => on_stack::<E, STACK_SCRATCH>(isa, kernel, operands, out, epilogue),
        WINOGRAD_STACK_SCRATCH => {
            on_stack::<E, WINOGRAD_STACK_SCRATCH>(isa, kernel, operands, out, epilogue);
        }
        other => unreachable!("no stack buffer of {other} elements"),
    }
}

/// A forward pass's inputs: the shape, the number of images, the images, the weights and the
/// biases.
#[cfg(target_arch = "x86_64")]
type Operands<'a, E> = (&'a Conv, usize, &'a [E], &'a [E], &'a [E]);

/// [`run_forward_kernel`] with a stack buffer of `N` elements for its scratch (not zeroed).
/// Never inlined, so that the buffer is not in the caller's stack frame on the other paths.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn on_stack<E: super::x86::Element + Scalar, const N: usize>(
    isa: super::x86::Isa,
    kernel: ForwardKernel,
    operands: Operands<'_, E>,
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
) {
    let mut scratch = [const { MaybeUninit::<E>::uninit() }; N];
    run_forward_kernel(isa, kernel, operands, out, epilogue, &mut scratch);
}

/// Runs `kernel` (a plan's, for this shape) on `batch` images, its scratch in `scratch`, which
/// holds at least [`ForwardKernel::scratch`] elements and need not be initialized.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // the padded image's zeros and the outputs' biases, written, then read as initialized
fn run_forward_kernel<E: super::x86::Element + Scalar>(
    isa: super::x86::Isa,
    kernel: ForwardKernel,
    (shape, batch, x, w, bias): Operands<'_, E>,
    out: &mut [MaybeUninit<E>],
    epilogue: Epilogue,
    scratch: &mut [MaybeUninit<E>],
) {
    let len = shape.output_len();
    let padded_len = if shape.padding > 0 {
        shape.padded().image_len()
    } else {
        0
    };
    match kernel {
        ForwardKernel::WinogradRows => {
            super::x86::conv2d_stride1_winograd(
                isa, shape, batch, x, w, bias, out, scratch, epilogue,
            );
        }
        ForwardKernel::FiltersInLanes { .. } => {
            super::conv_windows::filters_in_lanes_images(
                isa,
                &shape.prepadded(),
                shape.padding,
                (batch, x, w, bias),
                out,
                epilogue,
                scratch,
            );
        }
        ForwardKernel::WinogradColumns { .. } => {
            let (Some(x), Some(w), Some(bias), Some(out), Some(scratch)) = (
                super::cast::same_type_slice::<E, f32>(x),
                super::cast::same_type_slice::<E, f32>(w),
                super::cast::same_type_slice::<E, f32>(bias),
                super::cast::same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<f32>>(out),
                super::cast::same_type_slice_mut::<MaybeUninit<E>, MaybeUninit<f32>>(scratch),
            ) else {
                unreachable!("Winograd's method down the columns takes f32");
            };
            super::x86::conv_winograd_columns_f32::conv2d_stride1_winograd_columns(
                isa, shape, batch, x, w, bias, out, scratch, epilogue,
            );
        }
        ForwardKernel::Flat => {
            for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
                let out = &mut out[b * len..(b + 1) * len];
                super::x86::conv2d_stride1_flat(isa, shape, x, w, bias, out, epilogue);
            }
        }
        ForwardKernel::FlatPadded { .. } => {
            let zeros = &mut scratch[..padded_len];
            zeros.fill(MaybeUninit::new(E::default()));
            // SAFETY: every element of `zeros` was just written.
            let padded_image = unsafe { assume_init_mut(zeros) };
            for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
                pad(shape, x, padded_image); // the border stays zero from the start
                let out = &mut out[b * len..(b + 1) * len];
                super::x86::conv2d_stride1_flat(
                    isa,
                    &shape.padded(),
                    padded_image,
                    w,
                    bias,
                    out,
                    epilogue,
                );
            }
        }
        ForwardKernel::Direct => {
            for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
                let out = &mut out[b * len..(b + 1) * len];
                super::x86::conv2d_stride1(isa, shape, x, w, bias, out, epilogue);
            }
        }
        ForwardKernel::PointwiseProducts => {
            let positions = shape.out_height() * shape.out_width();
            for (b, x) in per_image(x, batch, shape.image_len()).enumerate() {
                let out = &mut out[b * len..(b + 1) * len];
                // Each filter's plane starts as its bias: the product adds into it.
                for (plane, &bias) in out.chunks_exact_mut(positions.max(1)).zip(bias) {
                    plane.fill(MaybeUninit::new(bias));
                }
                // SAFETY: every element of `out` was just written (`filters` planes of
                // `positions`, the output's length).
                let out = unsafe { assume_init_mut(out) };
                super::gemm_slices(
                    super::Product::Plain,
                    (shape.filters, positions, shape.channels),
                    w,
                    x,
                    out,
                    true,
                );
                if epilogue != Epilogue::Identity {
                    for z in out.iter_mut() {
                        *z = epilogue.apply(*z);
                    }
                }
            }
        }
    }
}

/// `dw (+)= Σ over the batch of dZ·X̂ᵀ`, the weight gradient of a stride-1 convolution (see
/// [`Conv`]), `[filters][channels][kernel][kernel]`, from `batch` images `x` and the gradients
/// of their outputs `dz` (`[batch][filters][out_height][out_width]`), without unrolling the
/// patches `X̂`. The SIMD kernel that puts the positions in the lanes pads the images as it
/// copies them; the others are fast only without padding: where
/// [`conv_weight_gradient_pads`] is false, a padded convolution's caller passes the padded
/// images (and `shape.padded()`).
///
/// The SIMD kernels lay their operands out in `scratch` (see
/// [`conv_weight_gradient_scratch`]): with many filters and narrow images they put the filters
/// in the lanes and want `dz` position-major (with a kernel of 3 to 5, by Winograd's method
/// along the rows, which keeps a few images' transforms and the sums at its tiles' points
/// there instead); otherwise they put the positions in the lanes,
/// take `dz` as it is and copy a few images at a time once per kernel column, shifted, so that
/// the inputs that meet a vector of `dz` are one vector too. Where the scratch has another
/// length, the generic loops run.
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[cfg(feature = "alloc")]
pub(crate) fn conv2d_weight_gradient_stride1<T: Scalar>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    dz: &[T],
    scratch: &mut [T],
    dw: &mut [T],
    accumulate: bool,
) {
    shape.check_batch(batch, x.len(), dw.len(), shape.filters, dz.len());
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && let (Some(x), Some(dz), Some(scratch), Some(dw)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(dz),
            super::cast::same_type_slice_mut::<T, f32>(scratch),
            super::cast::same_type_slice_mut::<T, f32>(dw),
        )
    {
        weight_gradient_simd(isa, shape, batch, x, dz, scratch, dw, accumulate);
        return;
    }
    let _ = scratch; // only the SIMD kernels lay their operands out
    let images = per_image(x, batch, shape.image_len());
    for (b, (x, dz)) in images
        .zip(per_image(dz, batch, shape.output_len()))
        .enumerate()
    {
        super::reference::conv2d_weight_gradient_stride1(shape, x, dz, dw, accumulate || b > 0);
    }
    if batch == 0 && !accumulate {
        dw.fill(T::zero());
    }
}

/// For a stride-1 ReLU layer of `shape` whose input gradient is not wanted (a net's first
/// layer): `dw = Σ over the batch of dZ·X̂ᵀ` and `db = Σ dZ` (both written, not added to)
/// with `dZ = dA ⊙ ReLU'(A)` formed as the kernel reads it, from the layer's outputs `a` and
/// their gradient `da` (each `batch x filters x OH x OW`), where a kernel does this
/// (`super::x86::weight_grad_winograd_5x5_narrow_avx512`, `f32` on AVX-512): the layer then neither writes `dZ` nor reads it
/// back. `dZ` is the layer's own product, bit for bit, and so is `dw`; `db`'s sums are taken
/// in another order. `scratch` is [`conv_weight_gradient_scratch`] long and `x` holds the
/// images unpadded (where this applies, [`conv_weight_gradient_pads`] holds). Returns `false`,
/// changing nothing, where it does not apply (the caller forms `dZ` and calls
/// [`conv2d_weight_gradient_stride1`]).
///
/// # Panics
///
/// When the lengths do not fit the sizes (a bug in the caller).
#[cfg(feature = "alloc")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_weight_and_bias_gradients_through_relu<T: 'static>(
    shape: &Conv,
    batch: usize,
    x: &[T],
    a: &[T],
    da: &[T],
    scratch: &mut [T],
    dw: &mut [T],
    db: &mut [T],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa()
        && weight_gradient_kernel::<T>(isa, &shape.padded())
            == WeightGradientKernel::RowTilesInLanes
        // The padded shape can qualify where the images are empty (a height or width of 0
        // with padding of 3 or more): those take the layer's loops.
        && super::x86::weight_grad_winograd_5x5_narrow_avx512::applies(shape)
        && scratch.len() == super::x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(&shape.padded())
        && let (Some(x), Some(a), Some(da), Some(scratch), Some(dw), Some(db)) = (
            super::cast::same_type_slice::<T, f32>(x),
            super::cast::same_type_slice::<T, f32>(a),
            super::cast::same_type_slice::<T, f32>(da),
            super::cast::same_type_slice_mut::<T, f32>(scratch),
            super::cast::same_type_slice_mut::<T, f32>(dw),
            super::cast::same_type_slice_mut::<T, f32>(db),
        )
    {
        let gradients =
            super::x86::weight_grad_winograd_5x5_narrow_avx512::Gradients::ThroughRelu {
                output: a,
                d_output: da,
                d_bias: db,
            };
        super::x86::weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
            isa, shape, batch, x, gradients, scratch, dw, false,
        );
        return true;
    }
    let _ = (shape, batch, x, a, da, scratch, dw, db);
    false
}

/// `dx = col2im(Wᵀ·dZ)` of each of `batch` images of a stride-1 convolution of `shape`
/// (padding included), by the kernel the plan takes ([`super::plan::input_gradient_kernel`]):
/// the forward pass of the transposed convolution on `dZ` ([`Conv::transposed`]), or
/// Winograd's minimal filtering for the gradient (`kernels/winograd/`). `dz` is `batch x
/// filters x OH x OW`, `w` the filters, `dx` (written) `batch x channels x H x W`, `scratch`
/// [`conv_input_gradient_scratch`](super::conv_input_gradient_scratch) elements. Returns
/// `false`, changing nothing, when no kernel takes the shape, the thread has no SIMD kernels,
/// or `scratch` is shorter: the caller then takes the product and `col2im`.
///
/// # Panics
///
/// When the slices' lengths do not fit `shape` (a bug in the caller).
#[cfg(feature = "alloc")]
pub(crate) fn conv2d_input_gradient_stride1<T: num_traits::Float + 'static>(
    shape: &Conv,
    batch: usize,
    dz: &[T],
    w: &[T],
    dx: &mut [T],
    scratch: &mut [T],
) -> bool {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if let Some(isa) = super::x86::detected_isa() {
        use super::plan::{InputGradientKernel, input_gradient_kernel, input_gradient_scratch};
        let lanes = super::x86::lanes::<f32>(isa);
        let kernel = input_gradient_kernel(shape, lanes);
        if scratch.len() < input_gradient_scratch::<T>(shape, lanes) {
            return false;
        }
        let transposed_operands = (
            shape.transposed(),
            super::cast::same_type_slice::<T, f32>(dz),
            super::cast::same_type_slice::<T, f32>(w),
            super::cast::same_type_slice_mut::<T, f32>(dx),
            super::cast::same_type_slice_mut::<T, f32>(scratch),
        );
        match (kernel, transposed_operands) {
            (
                Some(InputGradientKernel::TransposedForward),
                (Some(transposed), Some(dz), Some(w), Some(dx), Some(scratch)),
            ) => {
                shape.check_batch(batch, dx.len(), w.len(), shape.filters, dz.len());
                let (flipped, rest) = scratch.split_at_mut(w.len());
                let (zeros, rest) = rest.split_at_mut(shape.channels);
                flip_transposed(shape, w, flipped);
                zeros.fill(0.0);
                conv2d_stride1_with_scratch(
                    &transposed,
                    batch,
                    dz,
                    flipped,
                    zeros,
                    dx,
                    Epilogue::Identity,
                    rest,
                    ScratchFor::Training,
                );
                return true;
            }
            (Some(_), _) => {
                super::x86::winograd_input_gradient(isa, shape, batch, dz, w, dx, scratch);
                return true;
            }
            (None, _) => {}
        }
    }
    let _ = (shape, batch, dz, w, dx, scratch);
    false
}

/// The filters of [`Conv::transposed`] from `w`, `shape`'s: `flipped[c][o][ky][kx] =
/// w[o][c][kernel - 1 - ky][kernel - 1 - kx]`.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
fn flip_transposed(shape: &Conv, w: &[f32], flipped: &mut [f32]) {
    let area = shape.kernel * shape.kernel;
    for (o, filter) in w.chunks_exact(shape.channels * area).enumerate() {
        for (c, kernel) in filter.chunks_exact(area).enumerate() {
            let start = (c * shape.filters + o) * area;
            for (to, &from) in flipped[start..start + area]
                .iter_mut()
                .zip(kernel.iter().rev())
            {
                *to = from;
            }
        }
    }
}

/// [`conv2d_weight_gradient_stride1`] on the SIMD kernels, the lengths checked.
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
pub(super) fn weight_gradient_simd<E: super::x86::Element + Scalar>(
    isa: super::x86::Isa,
    shape: &Conv,
    batch: usize,
    x: &[E],
    dz: &[E],
    scratch: &mut [E],
    dw: &mut [E],
    accumulate: bool,
) {
    let positions = shape.out_height() * shape.out_width();
    // The kernels with the filters in the lanes want the image padded by the caller (no masks
    // in their inner loops).
    let unpadded = shape.padding == 0;
    match weight_gradient_kernel::<E>(isa, &shape.padded()) {
        WeightGradientKernel::Patches
            if scratch.len() == super::weight_grad_patches::scratch_len(shape) =>
        {
            super::weight_grad_patches::conv2d_weight_gradient(
                isa, shape, batch, x, dz, scratch, dw, accumulate,
            );
            return;
        }
        WeightGradientKernel::FiltersInLanes
            if scratch.len() == dz.len() && positions > 0 && unpadded =>
        {
            // dZ of each image, [filter][position] -> [position][filter].
            for (dz, dzt) in dz
                .chunks_exact(shape.output_len())
                .zip(scratch.chunks_exact_mut(shape.output_len()))
            {
                super::x86::transpose(dz, shape.filters, dzt);
            }
            let dzt = &scratch[..];
            super::x86::conv2d_weight_gradient_filters(isa, shape, batch, x, dzt, dw, accumulate);
            return;
        }
        WeightGradientKernel::WinogradRows
            if unpadded
                && scratch.len()
                    == super::x86::weight_gradient_winograd_scratch(
                        shape,
                        batch,
                        super::x86::lanes::<E>(isa),
                    ) =>
        {
            super::x86::conv2d_weight_gradient_winograd(
                isa, shape, batch, x, dz, scratch, dw, accumulate,
            );
            return;
        }
        WeightGradientKernel::PositionsInLanes
            if scratch.len()
                == super::x86::weight_grad_images_per_pass::<E>(shape, batch)
                    * super::x86::shifted_image_len(shape) =>
        {
            super::x86::conv2d_weight_gradient_positions(
                isa, shape, batch, x, dz, scratch, dw, accumulate,
            );
            return;
        }
        WeightGradientKernel::RowTilesInLanes
            if scratch.len()
                == super::x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(
                    shape,
                )
                && super::x86::weight_grad_winograd_5x5_narrow_avx512::applies(shape) =>
        {
            if let (Some(x), Some(dz), Some(scratch), Some(dw)) = (
                super::cast::same_type_slice::<E, f32>(x),
                super::cast::same_type_slice::<E, f32>(dz),
                super::cast::same_type_slice_mut::<E, f32>(scratch),
                super::cast::same_type_slice_mut::<E, f32>(dw),
            ) {
                super::x86::weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
                    isa,
                    shape,
                    batch,
                    x,
                    super::x86::weight_grad_winograd_5x5_narrow_avx512::Gradients::PreActivation(
                        dz,
                    ),
                    scratch,
                    dw,
                    accumulate,
                );
                return;
            }
        }
        // A scratch of another length, no position, or padding the kernel does not take: the
        // generic loops.
        _ => {}
    }
    let images = per_image(x, batch, shape.image_len());
    for (b, (x, dz)) in images
        .zip(per_image(dz, batch, shape.output_len()))
        .enumerate()
    {
        super::reference::conv2d_weight_gradient_stride1(shape, x, dz, dw, accumulate || b > 0);
    }
    if batch == 0 && !accumulate {
        dw.fill(E::zero());
    }
}
