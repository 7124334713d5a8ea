//! Which convolution kernel takes a shape, and the scratch it needs: decided here, in `const`
//! code where the memory budget needs it, for both the dispatch in [`super::conv`] and the
//! workspaces' sizes.

use super::shape::{Conv, PrepaddedConv};
#[cfg(target_arch = "x86_64")]
use super::shape::{
    SMALL_STACK_SCRATCH, STACK_SCRATCH, WINOGRAD_STACK_SCRATCH, filters_fill_lanes_better,
};

/// The forward kernel of a stride-1 `f32` convolution on x86-64 with vectors of `lanes` (16 for
/// AVX-512, 8 for AVX2), and the scratch it takes: chosen by [`forward_kernel`] (on the stack)
/// and [`scratch_kernel`] (with a workspace's or a prediction's scratch), the rules that the
/// dispatch ([`super::conv`]), the memory budget ([`conv_stack_scratch`]) and the scratch of
/// workspaces and predictions ([`forward_scratch_any_isa`]) read.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ForwardKernel {
    /// Winograd's method along the rows, the filters in the lanes; its scratch is a stack
    /// buffer of [`WINOGRAD_STACK_SCRATCH`] elements.
    WinogradRows,
    /// Direct, the filters in the lanes: the weights transposed, and the image padded, into
    /// `scratch` elements.
    FiltersInLanes { scratch: usize },
    /// Winograd's method down the columns, the positions in the lanes: the filters' transforms
    /// and a group of rows' input transforms in `scratch` elements.
    WinogradColumns { scratch: usize },
    /// Direct, the output rows laid end to end, on the image as it is (no padding).
    Flat,
    /// As `Flat`, on the image padded into `scratch` elements first.
    FlatPadded { scratch: usize },
    /// Direct, row tiles with the padding masked off: any shape, no scratch.
    Direct,
    /// A 1 x 1 kernel without padding, a batch of images (training): each image's output is
    /// the product `W·X` (`filters x channels` by `channels x positions`) on the matrix
    /// kernels, added to the biases; no scratch.
    PointwiseProducts,
}

#[cfg(target_arch = "x86_64")]
impl ForwardKernel {
    /// The elements of scratch the kernel takes.
    pub(crate) const fn scratch(self) -> usize {
        match self {
            Self::WinogradRows => WINOGRAD_STACK_SCRATCH,
            Self::FiltersInLanes { scratch }
            | Self::WinogradColumns { scratch }
            | Self::FlatPadded { scratch } => scratch,
            Self::Flat | Self::Direct | Self::PointwiseProducts => 0,
        }
    }

    /// The elements of the stack buffer the kernel takes where its scratch is on the stack:
    /// Winograd's method along the rows its own, the others the smaller of the two buffers that
    /// holds their scratch (a buffer is zeroed or written on every call, and the stack of a
    /// prediction is smaller with the small one). Only for the stack plan's kernels
    /// ([`forward_kernel`] with [`STACK_SCRATCH`]), whose scratch fits.
    pub(crate) const fn stack_scratch(self) -> usize {
        if matches!(self, Self::WinogradRows) {
            return WINOGRAD_STACK_SCRATCH;
        }
        let scratch = self.scratch();
        debug_assert!(
            scratch <= STACK_SCRATCH,
            "a kernel of the plan with no limit"
        );
        match scratch {
            0 => 0,
            n if n <= SMALL_STACK_SCRATCH => SMALL_STACK_SCRATCH,
            _ => STACK_SCRATCH,
        }
    }
}

/// Which forward kernel takes a stride-1 `f32` convolution of `shape` with vectors of `lanes`
/// and at most `limit` elements of scratch (beside Winograd's method along the rows, which has
/// a stack buffer of its own): the first that applies, in the order of the variants of
/// [`ForwardKernel`] (all but [`ForwardKernel::PointwiseProducts`], which only
/// [`scratch_kernel`] takes). A prediction on the stack has [`STACK_SCRATCH`]; a workspace or a
/// prediction's scratch has what [`scratch_kernel`] takes.
#[cfg(target_arch = "x86_64")]
pub(crate) const fn forward_kernel(shape: &Conv, lanes: usize, limit: usize) -> ForwardKernel {
    use super::x86::conv_winograd_columns_f32 as columns;
    let padded_len = if shape.padding > 0 {
        shape.padded().image_len()
    } else {
        0
    };
    let weights = shape.filters * shape.channels * shape.kernel * shape.kernel;
    let filters = filters_fill_lanes_better(shape, lanes);
    let columns_scratch = columns::scratch_len(shape, lanes);
    if filters
        && super::x86::winograd_forward_applies(shape)
        && super::x86::winograd_forward_scratch(shape, lanes) <= WINOGRAD_STACK_SCRATCH
    {
        ForwardKernel::WinogradRows
    } else if filters && shape.output_len() > 0 && weights + padded_len <= limit {
        ForwardKernel::FiltersInLanes {
            scratch: weights + padded_len,
        }
    } else if columns::applies(shape, lanes) && columns_scratch <= limit {
        ForwardKernel::WinogradColumns {
            scratch: columns_scratch,
        }
    } else if shape.padding == 0 {
        ForwardKernel::Flat
    } else if padded_len <= limit {
        ForwardKernel::FlatPadded {
            scratch: padded_len,
        }
    } else {
        ForwardKernel::Direct
    }
}

/// What a scratch beyond the stack buffer is for: the kernels that pay differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScratchFor {
    /// A layer's workspace: a batch of a training step, the filters' transforms shared by its
    /// images.
    // Without a heap there is no training.
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    Training,
    /// A prediction (`Layer::PREDICT_SCRATCH`, which an arena holds): one image a call, as a
    /// rule.
    Prediction,
}

/// The kernel of a stride-1 `f32` convolution of `shape` with vectors of `lanes` where the
/// scratch is not the stack's but a workspace's or a prediction's, sized for it. Where the
/// stack plan falls to a direct kernel on the image as it is or padded (`Flat`, `FlatPadded`,
/// `Direct`): Winograd's method down the columns where it applies; else, where the stack
/// plan pads, the first kernel that applies with no limit (the filters in the lanes, or the
/// flat kernel on a padded copy); the stack plan's kernel otherwise. A prediction with AVX2
/// takes Winograd's method only where a filter has 4 tiles or more
/// ([`tiles_per_filter`](super::x86::conv_winograd_columns_f32::tiles_per_filter)), and no
/// padded copy: it keeps the stack plan's direct kernel elsewhere. A training pass's batch
/// through a 1 x 1 kernel without padding takes the products
/// ([`ForwardKernel::PointwiseProducts`]: DS-CNN's 64 -> 64 filters on 25 x 5, 64 images,
/// Zen 4 with AVX-512, 0.73-0.79 ms against 1.09-1.24 with the filters in the lanes).
///
/// Measured one image at a time, the stack plan's kernel against this one's: on Zen 4 with
/// AVX-512, the suite's ResNet-8 342-353 -> 302-311 µs, the CIFAR-style CNN 152-157 -> 141-154,
/// MLPerf Tiny's ResNet-8 imported in `f32` (an arena) 368-438 -> 275-366; with AVX2 the
/// CIFAR-style CNN 174-179 -> 121-124 µs and ResNet-8 271-278 -> 237-240 by Winograd's method
/// down the columns on the layers of 4 tiles a filter or more (taking its 7 x 7 layers too
/// measured 258-259 µs), while the flat kernel on a padded copy made ResNet-8 slower (on Zen 3,
/// 522-533 -> 635-699); 64 filters of 64 x 5 x 5 on 16 x 16 (Xeon), 411 -> 279 µs with
/// AVX-512 and 621 -> 444 with AVX2. On 64 images (training), see
/// [`workspace_forward_scratch`].
#[cfg(target_arch = "x86_64")]
pub(crate) const fn scratch_kernel(
    shape: &Conv,
    lanes: usize,
    purpose: ScratchFor,
) -> ForwardKernel {
    use super::x86::conv_winograd_columns_f32 as columns;
    let stack = forward_kernel(shape, lanes, STACK_SCRATCH);
    let one_image_on_avx2 = matches!(purpose, ScratchFor::Prediction) && lanes < 16;
    // One image with AVX2: the filters' transforms, once per call, take as many multiply-adds
    // as a tile; with fewer than 4 tiles a filter (an image of 8 x 8 or smaller) the stack
    // plan's direct kernel measured faster (the suite's ResNet-8 and its 7 x 7 layers), and
    // needs no scratch.
    let columns_pay = !one_image_on_avx2 || columns::tiles_per_filter(shape, lanes) >= 4;
    if matches!(purpose, ScratchFor::Training) && shape.kernel == 1 && shape.padding == 0 {
        return ForwardKernel::PointwiseProducts;
    }
    match stack {
        ForwardKernel::Flat | ForwardKernel::FlatPadded { .. } | ForwardKernel::Direct
            if columns_pay && columns::applies(shape, lanes) =>
        {
            ForwardKernel::WinogradColumns {
                scratch: columns::scratch_len(shape, lanes),
            }
        }
        ForwardKernel::FlatPadded { .. } | ForwardKernel::Direct if !one_image_on_avx2 => {
            forward_kernel(shape, lanes, usize::MAX)
        }
        _ => stack,
    }
}

/// The elements of scratch a stride-1 `f32` convolution of `shape` with vectors of `lanes`
/// takes from a workspace or an arena for `purpose`: [`scratch_kernel`]'s, where it is more
/// than the stack buffer holds; else 0 (the stack plan, or a kernel that takes no scratch:
/// [`ForwardKernel::PointwiseProducts`]). Measured on 64 images (Xeon,
/// AVX-512 / AVX2): 32→64 filters 3 x 3 on 16 x 16, direct 4.9 / 7.9 ms, columns 3.0 / 6.3;
/// 64→64 5 x 5 on 16 x 16, 29 / 45 against 15 / 31; 3→64 5 x 5 on 32 x 32 (flat, padded on the
/// stack) 5.7 / 9.4 against 3.1 / 6.5.
#[cfg(target_arch = "x86_64")]
pub(crate) const fn workspace_forward_scratch(
    shape: &Conv,
    lanes: usize,
    purpose: ScratchFor,
) -> usize {
    // Winograd's method along the rows has a stack buffer of its own.
    match scratch_kernel(shape, lanes, purpose) {
        ForwardKernel::WinogradRows => 0,
        kernel if kernel.scratch() > STACK_SCRATCH => kernel.scratch(),
        _ => 0,
    }
}

/// The most elements of scratch [`workspace_forward_scratch`] gives a stride-1 convolution of
/// `shape` on elements of `element_size` bytes, whichever instruction set runs: on x86-64 in
/// `f32`, the larger of AVX-512's and AVX2's (an instruction set lowered at run time still finds
/// enough); else 0. What `Layer::PREDICT_SCRATCH` counts, and a workspace holds.
pub(crate) const fn forward_scratch_any_isa(
    shape: &Conv,
    element_size: usize,
    purpose: ScratchFor,
) -> usize {
    // Only `f32` has SIMD convolution kernels (`f64` is the other element type).
    if !cfg!(target_arch = "x86_64") || element_size != 4 {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = workspace_forward_scratch(shape, 16, purpose);
        let avx2 = workspace_forward_scratch(shape, 8, purpose);
        if avx512 > avx2 { avx512 } else { avx2 }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (shape, purpose);
        0
    }
}

/// The fewest filters for which [`windows_in_place_scratch`] takes the filters-in-lanes kernel:
/// with fewer, most of an AVX-512 vector's lanes would be empty, and the unrolled patches'
/// products fill them with positions.
#[cfg(target_arch = "x86_64")]
const WINDOWS_MIN_FILTERS: usize = 8;

/// The fewest steps (`channels·kernel_height·kernel_width`) for which
/// [`windows_in_place_scratch`] takes the filters-in-lanes kernel: each tile's sums are
/// transposed as they are stored, which fewer steps do not pay for. Measured on Zen 4 with
/// AVX-512, one image / 64 images against the unrolled patches' products: 1 x 1 stride 2, 16
/// and 32 steps, 1.2-1.7x slower; DS-CNN's first layer (10 x 4 on one channel, 40 steps, five
/// outputs a row) 1.1x slower; 3 x 3 stride 2 on 16 and 32 channels (144 and 288 steps)
/// 1.2-1.8x faster, a 7 x 7 stem on 3 channels (147) 1.5-2x faster.
#[cfg(target_arch = "x86_64")]
const WINDOWS_MIN_STEPS: usize = 64;

/// The smallest window (`kernel_height·kernel_width`) for which [`windows_in_place_scratch`]
/// takes the filters-in-lanes kernel with AVX2, whose broadcasts are loads of their own: on
/// Zen 4's AVX2 path, the 7 x 7 stem was 1.2-1.3x faster, 3 x 3 stride 2 on 16 and 32
/// channels 1.0-1.2x slower.
#[cfg(target_arch = "x86_64")]
const WINDOWS_MIN_AREA_AVX2: usize = 25;

/// The elements of scratch the forward pass of a convolution that does not take the stride-1
/// kernels (a stride other than 1, or a kernel that is not square) takes by the filters in the
/// lanes (`super::x86::conv2d_filters_in_lanes`), which reads its windows in place, with vectors of
/// `lanes` `f32`: its weights transposed, and its image padded by `padding` where that is not
/// 0 (`shape` is on the padded image). `None` where that kernel does not take the shape: a
/// stride it has no copy for, fewer than [`WINDOWS_MIN_FILTERS`] filters or
/// [`WINDOWS_MIN_STEPS`] steps, or with AVX2 a window smaller than
/// [`WINDOWS_MIN_AREA_AVX2`] (the layer unrolls patches there).
#[cfg(target_arch = "x86_64")]
pub(crate) const fn windows_in_place_scratch(
    shape: &PrepaddedConv,
    padding: usize,
    lanes: usize,
) -> Option<usize> {
    let strides = super::x86::FILTERS_IN_LANES_STRIDES;
    let mut stride_taken = false;
    let mut i = 0;
    while i < strides.len() {
        stride_taken |= strides[i] == shape.stride;
        i += 1;
    }
    let window = shape.kernel_height * shape.kernel_width;
    if !stride_taken
        || shape.filters < WINDOWS_MIN_FILTERS
        || shape.channels * window < WINDOWS_MIN_STEPS
        || (lanes < 16 && window < WINDOWS_MIN_AREA_AVX2)
        || shape.output_len() == 0
    {
        return None;
    }
    let padded = if padding > 0 { shape.image_len() } else { 0 };
    Some(shape.weights_len() + padded)
}

/// The most elements of scratch [`windows_in_place_scratch`] takes on elements of
/// `element_size` bytes, whichever instruction set runs: on x86-64 in `f32`, the larger of
/// AVX-512's and AVX2's; else 0 (no such kernel). What `Layer::PREDICT_SCRATCH` and a
/// workspace count.
pub(crate) const fn windows_in_place_scratch_any_isa(
    shape: &PrepaddedConv,
    padding: usize,
    element_size: usize,
) -> usize {
    if !cfg!(target_arch = "x86_64") || element_size != 4 {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = match windows_in_place_scratch(shape, padding, 16) {
            Some(len) => len,
            None => 0,
        };
        let avx2 = match windows_in_place_scratch(shape, padding, 8) {
            Some(len) => len,
            None => 0,
        };
        if avx512 > avx2 { avx512 } else { avx2 }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (shape, padding);
        0
    }
}

/// The elements of a layer's workspace scratch for the forward pass of a stride-1 convolution
/// of `shape` on elements `T`: [`forward_scratch_any_isa`] where the CPU has AVX2 or AVX-512
/// and `T` is `f32`, else 0.
#[cfg(feature = "alloc")]
pub(crate) fn conv_forward_workspace_scratch<T: 'static>(shape: &Conv) -> usize {
    #[cfg(target_arch = "x86_64")]
    if core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>()
        && super::x86::detected_isa().is_some()
    {
        return forward_scratch_any_isa(shape, 4, ScratchFor::Training);
    }
    let _ = shape;
    0
}

/// The most elements of stack buffer [`super::conv2d_stride1`] takes for a convolution of
/// `shape` on elements of `element_size` bytes on this target: on x86-64 in `f32`, the larger
/// of the buffers the kernels chosen for AVX-512 and for AVX2 take ([`forward_kernel`]);
/// elsewhere none. What the memory budget (`WORKING_BYTES`) counts.
pub(crate) const fn conv_stack_scratch(shape: &Conv, element_size: usize) -> usize {
    // Only `f32` has SIMD convolution kernels (4-byte integers take the same bound: an upper
    // one).
    if !cfg!(target_arch = "x86_64") || element_size != 4 {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = forward_kernel(shape, 16, STACK_SCRATCH).stack_scratch();
        let avx2 = forward_kernel(shape, 8, STACK_SCRATCH).stack_scratch();
        if avx512 > avx2 { avx512 } else { avx2 }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = shape;
        0
    }
}

/// How the SIMD kernels compute the input gradient of a stride-1 convolution (`dX`, see
/// [`conv2d_input_gradient_stride1`](super::conv2d_input_gradient_stride1)): decided by
/// [`input_gradient_kernel`], for both the dispatch and the workspace's scratch
/// ([`conv_input_gradient_scratch`]).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputGradientKernel {
    /// The forward pass of the transposed convolution ([`Conv::transposed`]) on `dZ`, by the
    /// forward plan's kernel for that shape ([`scratch_kernel`]): the filters flipped and
    /// transposed, and a zero bias, in the scratch before the forward kernel's own.
    TransposedForward,
    /// Winograd's method for the gradient (`super::winograd`): the portable code compiled for
    /// the instruction set.
    Winograd,
}

/// Which kernel takes the input gradient of a stride-1 `f32` convolution of `shape` with
/// vectors of `lanes`, or `None` where none does (the caller multiplies `Wᵀ·dZ` and adds the
/// patches back). The transposed forward pass where the forward kernels measured faster than
/// Winograd's method for the gradient (its transforms compiled from portable code): kernels
/// of 3 to 5 whose padding keeps the output the input's size or larger (`2·padding ≥ kernel -
/// 1`, so that the transposed pass pads as much or less), with AVX-512, and with AVX2 for 5 x
/// 5 kernels. On 64 images, Zen 4, the two alternated twice, the transposed forward pass
/// against Winograd's gradient, with AVX-512: 16 → 16 filters 3 x 3 on 28 x 28, 1.7-2.2
/// against 3.4-3.7 ms; 32 → 32 on 28 x 28, 7.3 against 8.9; 32 → 64 on 16 x 16, 3.8-4.0
/// against 4.5-4.6; 64 → 64 on 7 x 7, 2.2 both; 64 → 64 5 x 5 on 16 x 16, 14.5 against 17.9. With AVX2,
/// that 5 x 5 layer 16.5-16.7 against 20.9-21.3 ms, but the 3 x 3 layers 1.0-1.4x slower
/// (32 → 64 on 16 x 16, 4.5-5.7 against 4.1-4.3; 64 → 64 on 7 x 7, 3.0-3.1 against 2.2-2.3).
/// Without padding (LeNet-5's second layer, whose transposed pass pads by 4), the transposed
/// forward pass was 2x slower.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) const fn input_gradient_kernel(
    shape: &Conv,
    lanes: usize,
) -> Option<InputGradientKernel> {
    if !super::winograd::applies(shape) {
        return None;
    }
    match shape.transposed() {
        Some(_) if (lanes >= 16 || shape.kernel >= 5) && 2 * shape.padding + 1 >= shape.kernel => {
            Some(InputGradientKernel::TransposedForward)
        }
        _ => Some(InputGradientKernel::Winograd),
    }
}

/// The elements of scratch [`InputGradientKernel::TransposedForward`] takes for `shape` with
/// vectors of `lanes`: the flipped filters, a zero bias, and the forward kernel's scratch for
/// the transposed shape; 0 where there is no transposed convolution.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) const fn transposed_forward_scratch(shape: &Conv, lanes: usize) -> usize {
    match shape.transposed() {
        Some(transposed) => {
            shape.filters * shape.channels * shape.kernel * shape.kernel
                + shape.channels
                + workspace_forward_scratch(&transposed, lanes, ScratchFor::Training)
        }
        None => 0,
    }
}

/// The elements of the scratch [`input_gradient_kernel`]'s kernel takes for `shape` on
/// elements `T` with vectors of `lanes`.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) fn input_gradient_scratch<T: 'static>(shape: &Conv, lanes: usize) -> usize {
    let f32 = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
    match input_gradient_kernel(shape, lanes) {
        Some(InputGradientKernel::TransposedForward) if f32 => {
            transposed_forward_scratch(shape, lanes)
        }
        Some(_) => super::winograd::scratch_len(shape),
        None => 0,
    }
}

/// The elements of the scratch a workspace holds for
/// [`conv2d_input_gradient_stride1`](super::conv2d_input_gradient_stride1) on `shape` and
/// elements `T`: the most [`input_gradient_scratch`] takes with AVX-512 or AVX2, on x86-64 with
/// `std` (where the instruction set is detected at run time); else 0. Not what the thread's
/// instruction set is now: a workspace made while `with_instruction_set` holds the portable
/// loops serves the SIMD kernels later too.
#[cfg(feature = "alloc")]
// `T` is read only where the SIMD kernels are (x86-64 with `std`).
#[cfg_attr(
    not(all(feature = "std", target_arch = "x86_64")),
    allow(clippy::extra_unused_type_parameters)
)]
pub(crate) fn conv_input_gradient_scratch<T: 'static>(shape: &Conv) -> usize {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        input_gradient_scratch::<T>(shape, 16).max(input_gradient_scratch::<T>(shape, 8))
    }
    #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
    {
        let _ = shape;
        0
    }
}

/// Which SIMD weight-gradient kernel takes a shape without padding (a padded convolution's
/// `shape.padded()`), and so what it wants in its scratch: decided here once, for both the
/// workspace's scratch ([`conv_weight_gradient_scratch`]) and the kernel it sizes
/// ([`weight_gradient_simd`]).
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WeightGradientKernel {
    /// The patches unrolled a chunk at a time and multiplied by `dZ` with the packed products
    /// (`super::weight_grad_patches`): any kernel size and padding, at least
    /// `super::weight_grad_patches::MIN_FILTERS` filters, where Winograd's method along the
    /// rows is not faster ([`winograd_rows_beat_patches`]). The scratch holds the sums and a
    /// chunk of patches.
    Patches,
    /// The filters in the lanes: `dz` transposed into the scratch, `[position][filter]`.
    FiltersInLanes,
    /// The filters in the lanes, by Winograd's method along the rows
    /// (`super::x86::conv2d_weight_gradient_winograd`), for the kernel sizes it has tiles for,
    /// where it beats the patches' products (at least 32 filters) or where fewer filters fill
    /// the lanes better: the scratch holds a few images' transforms and the sums at the
    /// tiles' points.
    WinogradRows,
    /// The positions in the lanes: `dz` as it is, the images copied into the scratch once per
    /// kernel column, shifted (`super::x86::shifted_image_len`), a few at a time.
    PositionsInLanes,
    /// Winograd's method along the rows with a row's tiles in the lanes
    /// (`super::x86::weight_grad_winograd_5x5_narrow_avx512`), for 5 x 5 kernels on rows of at most 32 padded columns, `f32` on
    /// AVX-512: the scratch holds one image's transforms and the sums at the points.
    RowTilesInLanes,
}

#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
pub(super) fn weight_gradient_kernel<E: 'static>(
    isa: super::x86::Isa,
    shape: &Conv,
) -> WeightGradientKernel {
    if super::weight_grad_patches::applies(shape) {
        if winograd_rows_beat_patches::<E>(isa, shape) {
            WeightGradientKernel::WinogradRows
        } else {
            WeightGradientKernel::Patches
        }
    } else if filters_fill_lanes_better(shape, super::x86::lanes::<E>(isa)) {
        if super::winograd::applies(shape) && shape.out_height() > 0 && shape.out_width() > 0 {
            WeightGradientKernel::WinogradRows
        } else {
            WeightGradientKernel::FiltersInLanes
        }
    } else if isa == super::x86::Isa::Avx512
        && core::any::TypeId::of::<E>() == core::any::TypeId::of::<f32>()
        && super::x86::weight_grad_winograd_5x5_narrow_avx512::applies(shape)
    {
        WeightGradientKernel::RowTilesInLanes
    } else {
        WeightGradientKernel::PositionsInLanes
    }
}

/// Whether Winograd's method along the rows is faster than the patches' products on a shape
/// without padding that both take (at least `super::weight_grad_patches::MIN_FILTERS`
/// filters). Measured on `f32` at batch 64: with AVX-512, 1.2-2.5x faster on every shape tried
/// (3 to 128 channels, kernels of 3 to 5, images of 4 x 4 to 32 x 32); with AVX2, 1.1-2x
/// faster on kernels of 3 and 4 from 8 channels, but 1.4x slower on 3 channels (its
/// transforms of `dZ` are shared by too few channels) and 1.3-1.7x slower on 5 x 5 kernels
/// (two outputs a tile of six points).
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
fn winograd_rows_beat_patches<E: 'static>(isa: super::x86::Isa, shape: &Conv) -> bool {
    let f32_only = core::any::TypeId::of::<E>() == core::any::TypeId::of::<f32>();
    let on_this_isa = match isa {
        super::x86::Isa::Avx512 => true,
        super::x86::Isa::Avx2Fma => shape.kernel <= 4 && shape.channels >= 8,
    };
    f32_only && on_this_isa && super::winograd::applies(shape)
}

/// The elements of the scratch [`conv2d_weight_gradient_stride1`] uses for a batch of `batch`
/// on this thread's instruction set ([`WeightGradientKernel`]): `dz`'s length with the filters
/// in the lanes (by Winograd's method, `super::x86::weight_gradient_winograd_scratch`), the
/// column-shifted copies of the images of one pass with the positions in the lanes, 0 without
/// SIMD kernels. A workspace holds [`conv_weight_gradient_scratch_any_isa`] and passes this
/// much of it.
#[cfg(feature = "alloc")]
pub(crate) fn conv_weight_gradient_scratch<T: 'static>(shape: &Conv, batch: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa() {
        return weight_gradient_scratch_on::<T>(isa, shape, batch);
    }
    let _ = (shape, batch);
    0
}

/// The most [`conv_weight_gradient_scratch`] asks for on any instruction set (AVX-512, AVX2):
/// what a layer's workspace holds, so that it serves whichever set `with_instruction_set`
/// gives the thread that trains with it.
#[cfg(feature = "alloc")]
pub(crate) fn conv_weight_gradient_scratch_any_isa<T: 'static>(
    shape: &Conv,
    batch: usize,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = weight_gradient_scratch_on::<T>(super::x86::Isa::Avx512, shape, batch);
        let avx2 = weight_gradient_scratch_on::<T>(super::x86::Isa::Avx2Fma, shape, batch);
        avx512.max(avx2)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (shape, batch);
        0
    }
}

/// [`conv_weight_gradient_scratch`] on `isa`.
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
fn weight_gradient_scratch_on<T: 'static>(
    isa: super::x86::Isa,
    shape: &Conv,
    batch: usize,
) -> usize {
    if core::any::TypeId::of::<T>() != core::any::TypeId::of::<f32>() {
        return 0;
    }
    let padded = shape.padded();
    match weight_gradient_kernel::<T>(isa, &padded) {
        WeightGradientKernel::Patches => super::weight_grad_patches::scratch_len(&padded),
        WeightGradientKernel::FiltersInLanes => batch * shape.output_len(),
        WeightGradientKernel::WinogradRows => super::x86::weight_gradient_winograd_scratch(
            &padded,
            batch,
            super::x86::lanes::<T>(isa),
        ),
        WeightGradientKernel::PositionsInLanes => {
            super::x86::weight_grad_images_per_pass::<T>(&padded, batch)
                * super::x86::shifted_image_len(&padded)
        }
        WeightGradientKernel::RowTilesInLanes => {
            super::x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(&padded)
        }
    }
}

/// Whether [`conv2d_weight_gradient_stride1`] is fast on `shape`'s images as they are, without
/// their padding, on this thread's instruction set (always when the padding is 0): where its
/// SIMD kernel unrolls the patches or puts the positions in the lanes, which pad the images as
/// they copy them. Otherwise a padded convolution pads its images first and passes
/// `shape.padded()`, where its workspace holds them
/// ([`conv_weight_gradient_pads_on_every_isa`]); the generic loops take either.
#[cfg(feature = "alloc")]
pub(crate) fn conv_weight_gradient_pads<T: 'static>(shape: &Conv) -> bool {
    if shape.padding == 0 {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = super::x86::detected_isa() {
        return weight_gradient_pads_on::<T>(isa, shape);
    }
    false
}

/// Whether [`conv_weight_gradient_pads`] holds on every instruction set (AVX-512, AVX2): where
/// it does not, a layer's workspace holds its padded images.
#[cfg(feature = "alloc")]
pub(crate) fn conv_weight_gradient_pads_on_every_isa<T: 'static>(shape: &Conv) -> bool {
    if shape.padding == 0 {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    {
        weight_gradient_pads_on::<T>(super::x86::Isa::Avx512, shape)
            && weight_gradient_pads_on::<T>(super::x86::Isa::Avx2Fma, shape)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`conv_weight_gradient_pads`] on `isa`, for a padded `shape`.
#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
fn weight_gradient_pads_on<T: 'static>(isa: super::x86::Isa, shape: &Conv) -> bool {
    core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>()
        && matches!(
            weight_gradient_kernel::<T>(isa, &shape.padded()),
            WeightGradientKernel::Patches
                | WeightGradientKernel::PositionsInLanes
                | WeightGradientKernel::RowTilesInLanes
        )
}
