//! The sizes of a stride-1 convolution ([`Conv`]) and what its kernels do to each output as they
//! store it ([`Epilogue`]), how a product's operands are stored ([`Product`]), the stack
//! buffers' sizes the kernels' choices respect, and an int8 convolution's sizes
//! ([`WindowShape`]) and requantization ([`Requantization`]): the values every kernel takes.

use crate::Scalar;

/// The sizes of a stride-1 2-D convolution of one image, for [`conv2d_stride1`]: `channels`
/// input planes of `height x width`, `filters` filters of `channels x kernel x kernel`, zero
/// padding `padding` on every side. The output has `filters` planes of
/// `(height + 2·padding - kernel + 1) x (width + ...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conv {
    pub channels: usize,
    pub filters: usize,
    pub kernel: usize,
    pub padding: usize,
    pub height: usize,
    pub width: usize,
}

impl Conv {
    /// The output height, `height + 2·padding - kernel + 1`.
    pub(crate) const fn out_height(&self) -> usize {
        self.height + 2 * self.padding + 1 - self.kernel
    }

    /// The output width, `width + 2·padding - kernel + 1`.
    pub(crate) const fn out_width(&self) -> usize {
        self.width + 2 * self.padding + 1 - self.kernel
    }

    /// Panics unless the kernel fits the padded image and the slices have the lengths the sizes
    /// give (the image, the filters `[filters][channels][kernel][kernel]`, the biases, the
    /// output planes).
    pub(super) fn check_lengths(&self, x: usize, w: usize, bias: usize, out: usize) {
        assert!(
            self.kernel > 0
                && self.kernel <= self.height + 2 * self.padding
                && self.kernel <= self.width + 2 * self.padding,
            "a {k}x{k} kernel does not fit a {h}x{w} image padded by {p}",
            k = self.kernel,
            h = self.height,
            w = self.width,
            p = self.padding
        );
        let expected = (
            self.channels * self.height * self.width,
            self.filters * self.channels * self.kernel * self.kernel,
            self.filters,
            self.filters * self.out_height() * self.out_width(),
        );
        assert!(
            (x, w, bias, out) == expected,
            "convolution operands of {x}, {w}, {bias}, {out} elements do not fit {self:?}, which needs {expected:?}"
        );
    }
}

impl Conv {
    /// The elements of one input image, `channels·height·width`.
    pub(super) const fn image_len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// The elements of one output, `filters·out_height·out_width`.
    pub(super) const fn output_len(&self) -> usize {
        self.filters * self.out_height() * self.out_width()
    }

    /// The same convolution on the image padded beforehand: no padding, the padded sizes.
    pub(super) const fn padded(&self) -> Conv {
        Conv {
            padding: 0,
            height: self.height + 2 * self.padding,
            width: self.width + 2 * self.padding,
            ..*self
        }
    }

    /// The convolution whose forward pass is this one's input gradient, where there is one (a
    /// padding of at most `kernel - 1`, a kernel that fits the padded image): on the output planes (`filters` channels of `out_height x
    /// out_width`), `channels` filters, padded by `kernel - 1 - padding`, so that its output
    /// has this one's input size. Its filter `c` reads channel `o` through this one's filter
    /// `o`, channel `c`, turned by half a turn: `dX = conv(dZ, flip(Wᵀ))` (docs/backprop.md).
    // Only the x86-64 plan with `std` takes it (its SIMD forward kernels are what pays).
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
    pub(super) const fn transposed(&self) -> Option<Conv> {
        let fits = self.kernel <= self.height + 2 * self.padding
            && self.kernel <= self.width + 2 * self.padding;
        if self.padding >= self.kernel || !fits {
            return None;
        }
        Some(Conv {
            channels: self.filters,
            filters: self.channels,
            kernel: self.kernel,
            padding: self.kernel - 1 - self.padding,
            height: self.out_height(),
            width: self.out_width(),
        })
    }

    /// Panics unless `x` and `out` hold `batch` images and outputs (and the other operands fit,
    /// see [`Conv::check_lengths`]).
    pub(super) fn check_batch(&self, batch: usize, x: usize, w: usize, bias: usize, out: usize) {
        self.check_lengths(self.image_len(), w, bias, self.output_len());
        assert!(
            (x, out) == (batch * self.image_len(), batch * self.output_len()),
            "{x} input and {out} output elements do not fit a batch of {batch} of {self:?}"
        );
    }
}

/// The sizes of a convolution of one image read as it is, any padding already applied: `channels`
/// planes of `height x width`, `filters` filters of `channels x kernel_height x kernel_width`,
/// stride `stride` both ways. The output has `filters` planes of `((height - kernel_height) /
/// stride + 1) x ((width - kernel_width) / stride + 1)`; rows and columns left over at the end,
/// in no window, are not read.
// Only the x86-64 kernels read it; elsewhere the layers name it for a plan that is empty.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrepaddedConv {
    pub channels: usize,
    pub filters: usize,
    pub kernel_height: usize,
    pub kernel_width: usize,
    pub stride: usize,
    pub height: usize,
    pub width: usize,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl PrepaddedConv {
    /// The output height, `(height - kernel_height) / stride + 1`; 0 where the kernel does not fit.
    pub(crate) const fn out_height(&self) -> usize {
        if self.kernel_height > self.height || self.stride == 0 {
            0
        } else {
            (self.height - self.kernel_height) / self.stride + 1
        }
    }

    /// The output width, `(width - kernel_width) / stride + 1`; 0 where the kernel does not fit.
    pub(crate) const fn out_width(&self) -> usize {
        if self.kernel_width > self.width || self.stride == 0 {
            0
        } else {
            (self.width - self.kernel_width) / self.stride + 1
        }
    }

    /// The elements of the filters, `filters·channels·kernel_height·kernel_width`.
    pub(crate) const fn weights_len(&self) -> usize {
        self.filters * self.channels * self.kernel_height * self.kernel_width
    }

    /// The elements of one input image, `channels·height·width`.
    pub(crate) const fn image_len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// The elements of one output, `filters·out_height·out_width`.
    pub(crate) const fn output_len(&self) -> usize {
        self.filters * self.out_height() * self.out_width()
    }

    /// Panics unless the kernel fits the image, the stride is not 0 and the slices have the
    /// lengths the sizes give (the image, the filters `[filters][channels][kernel_height]
    /// [kernel_width]`, the biases, the output planes).
    pub(super) fn check_lengths(&self, x: usize, w: usize, bias: usize, out: usize) {
        assert!(
            self.stride > 0
                && self.kernel_height > 0
                && self.kernel_width > 0
                && self.kernel_height <= self.height
                && self.kernel_width <= self.width,
            "a {}x{} kernel with stride {} does not fit a {}x{} image",
            self.kernel_height,
            self.kernel_width,
            self.stride,
            self.height,
            self.width
        );
        let expected = (
            self.image_len(),
            self.weights_len(),
            self.filters,
            self.output_len(),
        );
        assert!(
            (x, w, bias, out) == expected,
            "convolution operands of {x}, {w}, {bias}, {out} elements do not fit {self:?}, which needs {expected:?}"
        );
    }
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl Conv {
    /// The same stride-1 convolution as a [`PrepaddedConv`] on the image padded beforehand.
    pub(crate) const fn prepadded(&self) -> PrepaddedConv {
        let padded = self.padded();
        PrepaddedConv {
            channels: self.channels,
            filters: self.filters,
            kernel_height: self.kernel,
            kernel_width: self.kernel,
            stride: 1,
            height: padded.height,
            width: padded.width,
        }
    }
}

/// LeNet-5's first convolution, for the tests of every kernel module.
#[cfg(test)]
pub(crate) const LENET_FIRST: Conv = Conv {
    channels: 1,
    filters: 6,
    kernel: 5,
    padding: 2,
    height: 28,
    width: 28,
};

/// What the convolution kernels do to each output, its sum plus the bias, as they store it: an
/// activation fused into the kernel, so that it costs no pass of its own over the output (one
/// over the 4,704 outputs of LeNet's first convolution took 0.15 µs, its stores alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Epilogue {
    /// The value as it is.
    Identity,
    /// `max(z, 0)`, a NaN kept and `-0.0` made `+0.0`: ReLU's rule
    /// ([`Relu::apply`](crate::nn::Relu)), bit for bit.
    Relu,
}

impl Epilogue {
    /// The epilogue of one value: what the SIMD kernels compute in their vectors.
    #[inline]
    pub(crate) fn apply<T: Scalar>(self, z: T) -> T {
        match self {
            Self::Identity => z,
            // `z != z` is a NaN: kept, as `z > 0` alone would not.
            #[allow(clippy::eq_op)]
            Self::Relu if z > T::zero() || z != z => z,
            Self::Relu => T::zero(),
        }
    }
}

/// The elements of the stack buffer the SIMD forward passes transpose the weights and pad one
/// image into, or (down the columns) keep the filters' and a group of rows' transforms in;
/// larger convolutions take the kernel that masks the padding off instead. A
/// convolution that needs at most [`SMALL_STACK_SCRATCH`] takes a buffer of that size: the
/// buffer is zeroed on every call, and the stack of a prediction is smaller.
pub(super) const STACK_SCRATCH: usize = 4096;

/// See [`STACK_SCRATCH`].
pub(super) const SMALL_STACK_SCRATCH: usize = 1024;

/// Whether vectors of `lanes` are fuller with a convolution's filters in them than with a row
/// of its outputs (a 10-wide output row fills 10 of AVX-512's 16 `f32` lanes, 16 filters all
/// 16), so that its kernels put the filters in the lanes: `filters / ⌈filters⌉ > width /
/// ⌈width⌉`, rounding up to whole vectors.
pub(super) const fn filters_fill_lanes_better(shape: &Conv, lanes: usize) -> bool {
    let (filters, width) = (shape.filters, shape.out_width());
    filters * whole_vectors(width, lanes) > width * whole_vectors(filters, lanes)
}

/// `n` rounded up to a multiple of `lanes` (at least 1, so that it can divide).
pub(super) const fn whole_vectors(n: usize, lanes: usize) -> usize {
    let vectors = n.div_ceil(lanes) * lanes;
    if vectors == 0 { 1 } else { vectors }
}

/// The elements of the stack buffer of the Winograd forward pass (36 KiB of `f32`; LeNet's
/// second layer needs 9,088 with AVX-512, on 8 points, and 7,736 with AVX2); a convolution
/// whose filters' and image's transforms need more takes the direct kernel.
pub(super) const WINOGRAD_STACK_SCRATCH: usize = 9 * 1024;

/// How the operands of [`gemm_slices`] are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Without a heap there is no training, whose backward passes use the transposed forms.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) enum Product {
    /// `C = A·B`: `A` is `m x k`, `B` is `k x n`.
    Plain,
    /// `C = Aᵀ·B`: `A` is stored `k x m`, `B` is `k x n`.
    TransposeLhs,
    /// `C = A·Bᵀ`: `A` is `m x k`, `B` is stored `n x k`.
    TransposeRhs,
}

/// The sizes of an int8 convolution of one image, for `kernels::conv_windows_i8`: `channels` planes of
/// `height x width`, filters of `channels x kh x kw` (`kernel = (kh, kw)`), `stride` and
/// `padding` (every side) in both directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowShape {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub kernel: (usize, usize),
    pub stride: usize,
    pub padding: usize,
}

impl WindowShape {
    /// The bytes of one image, `channels·height·width`.
    pub(crate) const fn image_len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// The bytes of one window (and one filter), `channels·kh·kw`.
    pub(crate) const fn window_len(&self) -> usize {
        self.channels * self.kernel.0 * self.kernel.1
    }

    /// The output's height and width: `(height + 2·padding - kh) / stride + 1` and likewise;
    /// `(0, 0)` when the kernel does not fit the padded image or the stride is 0.
    pub(crate) const fn output(&self) -> (usize, usize) {
        let (h, w) = (
            self.height + 2 * self.padding,
            self.width + 2 * self.padding,
        );
        if self.stride == 0 || self.kernel.0 > h || self.kernel.1 > w {
            return (0, 0);
        }
        (
            (h - self.kernel.0) / self.stride + 1,
            (w - self.kernel.1) / self.stride + 1,
        )
    }
}

/// Each filter's requantization (as `kernels::requantize_i8`'s): the biases, multipliers and exponents
/// `(bias, multiplier, exponent)`, one per filter, and the output's zero point and clamp
/// `(zero, low, high)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Requantization<'a> {
    pub parameters: (&'a [i32], &'a [i32], &'a [i32]),
    pub zero_and_range: (i8, i8, i8),
}
