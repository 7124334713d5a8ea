//! The output sizes of sliding-window layers (convolution, pooling), computed and checked in
//! `const` code: by the layers' shape rules, and by [`net!`](crate::net) in the types it writes.

use crate::format::Message;

/// What slides over the input: a convolution's kernel (the input padded) or a pooling's window
/// (no padding), for the wording of [`output_size`]'s messages.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    Kernel,
    Pool,
}

/// `(input + 2·padding - window) / stride + 1`, or a panic naming the layer (as `layer`), the
/// dimension (`"height"`, `"width"`, or `"input"`) and the sizes when the window is empty or
/// does not fit, or the stride is 0. As in PyTorch, rows left over at the end, in no window,
/// are allowed (their gradient is 0).
#[track_caller]
pub(crate) const fn output_size(
    layer: &str,
    dimension: &str,
    kind: Window,
    (input, window, stride, padding): (usize, usize, usize, usize),
) -> usize {
    let (noun, pooling) = match kind {
        Window::Kernel => ("kernel", false),
        Window::Pool => ("window", true),
    };
    let padded = input + 2 * padding;
    // An empty window or a stride of 0 is one mistake, not one per dimension: the height's
    // check, which every caller makes with the width's, reports it. (A pooling's stride is its
    // window unless given, so the window is looked at first.)
    let width = bytes_eq(dimension.as_bytes(), b"width");
    if window == 0 {
        if width {
            return 0;
        }
        Message::new()
            .str(layer)
            .str(": the ")
            .str(noun)
            .str(" is 0 x 0; it needs at least one row and column")
            .panic()
    }
    if stride == 0 {
        if width {
            return 0;
        }
        Message::new().str(layer).str(": the stride is 0").panic()
    }
    if window > padded {
        let m = Message::new()
            .str(layer)
            .str(": the ")
            .str(noun)
            .str(" (")
            .number(window)
            .str(") is larger than the ");
        let m = if pooling { m } else { m.str("padded ") };
        let m = m.str(dimension).str(" (").number(input);
        let m = if pooling {
            m
        } else {
            m.str(" + 2 x ").number(padding).str(" = ").number(padded)
        };
        m.str(")").panic()
    }
    // The last (padded - window) % stride rows, if any, are in no window: PyTorch and
    // TensorFlow ("VALID") drop them too, and a net brought from them has such layers
    // (ResNet's 1 x 1 stride-2 shortcut on an even size).
    (padded - window) / stride + 1
}

/// [`output_size`] without the checks, for [`net!`](crate::net) to pass a size on to the next
/// layer: 0 where the check fails, and 0 for an `input` of 0 that does not come straight from
/// `Input` (`from_input`: a layer before failed), so that every size after a mistake is 0 and
/// the layers there do not report it again.
#[doc(hidden)]
#[must_use]
pub const fn __output_size_unchecked(
    from_input: bool,
    input: usize,
    window: usize,
    stride: usize,
    padding: usize,
) -> usize {
    if (input == 0 && !from_input) || !fits(input, window, stride, padding) {
        0
    } else {
        (input + 2 * padding - window) / stride + 1
    }
}

/// Whether [`output_size`] accepts these sizes (returns rather than panics).
const fn fits(input: usize, window: usize, stride: usize, padding: usize) -> bool {
    let padded = input + 2 * padding;
    stride > 0 && window > 0 && window <= padded
}

/// [`output_size`] for [`net!`](crate::net): a convolution's own output height or width
/// (`layer` is the layer as written). `from_input` says the sizes come straight from `Input`;
/// after another layer, an `input` of 0 is the consequence of a mistake reported there (see
/// [`__output_size_unchecked`]), and gives 0 without a second error.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __conv_output_size(
    layer: &str,
    dimension: &str,
    from_input: bool,
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
) -> usize {
    if input == 0 && !from_input {
        return 0;
    }
    output_size(
        layer,
        dimension,
        Window::Kernel,
        (input, kernel, stride, padding),
    )
}

/// [`__conv_output_size`] for a max pooling (no padding).
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __pool_output_size(
    layer: &str,
    dimension: &str,
    from_input: bool,
    input: usize,
    window: usize,
    stride: usize,
) -> usize {
    if input == 0 && !from_input {
        return 0;
    }
    output_size(layer, dimension, Window::Pool, (input, window, stride, 0))
}

/// Checks that `out` is the output size of `input` (see [`output_size`]), naming the dimension
/// and both sizes otherwise.
#[track_caller]
pub(crate) const fn check_output_size(
    layer: &str,
    dimension: &str,
    kind: Window,
    (input, window, stride, padding): (usize, usize, usize, usize),
    out: usize,
) {
    let expected = output_size(layer, dimension, kind, (input, window, stride, padding));
    if out != expected {
        Message::new()
            .str(layer)
            .str(": the output ")
            .str(dimension)
            .str(" is ")
            .number(out)
            .str(", but (")
            .number(input)
            .str(" + 2 x ")
            .number(padding)
            .str(" - ")
            .number(window)
            .str(") / ")
            .number(stride)
            .str(" + 1 = ")
            .number(expected)
            .panic()
    }
}

/// Checks that a depthwise convolution's `output` channels are a whole multiple of its `input`
/// channels (each input channel has the same number of filters), naming both otherwise.
#[track_caller]
pub(crate) const fn check_depthwise_channels(input: usize, output: usize) {
    // (A multiple of 0 is 0: no input channels, no filters.)
    if !output.is_multiple_of(input) {
        Message::new()
            .str("DepthwiseConv2d: the output channels (")
            .number(output)
            .str(") are not a multiple of the input channels (")
            .number(input)
            .str("): each input channel has the same number of filters (PyTorch's groups = ")
            .number(input)
            .str(")")
            .panic()
    }
}

/// For [`net!`](crate::net): [`check_depthwise_channels`] where the net is written; returns
/// `output`.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __depthwise_filters(input: usize, output: usize) -> usize {
    // 0 input channels after a layer of 0 filters: that mistake, reported there.
    if input != 0 {
        check_nonzero("`DepthwiseConv2d`", "output channels", output);
        check_depthwise_channels(input, output);
    }
    output
}

/// Checks that a layer's size `value` (`what`: "output channels", "outputs", ...) is not 0,
/// naming the layer and the size otherwise: a layer of 0 channels or 0 outputs gives a
/// constant, and a later layer of it computes nothing (no net means it; a constant written as
/// `8 / 16` may be 0 by mistake).
#[track_caller]
pub(crate) const fn check_nonzero(layer: &str, what: &str, value: usize) {
    if value == 0 {
        Message::new()
            .str(layer)
            .str(" has 0 ")
            .str(what)
            .str("; a layer has at least 1")
            .panic()
    }
}

/// For [`net!`](crate::net): [`check_nonzero`] where the net is written, the layer named as
/// written; returns `value`.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __nonzero(layer: &str, what: &str, value: usize) -> usize {
    check_nonzero(layer, what, value);
    value
}

const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    crate::format::bytes_eq(a, b)
}

/// For [`net!`](crate::net): `written`, the input channels a convolution is written with,
/// checked against `given`, the channels the layer before it gives (or the `Input`'s). Returns
/// `given`, so that the net's type chains even where the check fails (one error, here).
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __input_channels(layer: &str, written: usize, given: usize) -> usize {
    // 0 channels given: a layer of 0 filters before, reported there (an `Input` of 0 channels
    // is refused by the first layer's type).
    if written != given && given != 0 {
        Message::new()
            .str("`")
            .str(layer)
            .str("` takes ")
            .number(written)
            .str(if written == 1 {
                " input channel"
            } else {
                " input channels"
            })
            .str(", but the layer before it gives ")
            .number(given)
            .panic()
    }
    given
}

/// For [`net!`](crate::net): `written`, the inputs a dense layer is written with, checked
/// against `given`, the width of the dense layer before it. Returns `given`.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __inputs(layer: &str, written: usize, given: usize) -> usize {
    // 0 inputs given: a layer of 0 outputs before, reported there.
    if written != given && given != 0 {
        Message::new()
            .str("`")
            .str(layer)
            .str("` takes ")
            .number(written)
            .str(if written == 1 { " input" } else { " inputs" })
            .str(", but the layer before it gives ")
            .number(given)
            .panic()
    }
    given
}

/// For [`net!`](crate::net): `written`, the inputs of the dense layer after `Flatten`, checked
/// against what `Flatten` gives, `channels x height x width`, unless that is 0 after a layer
/// that failed its check (see [`__conv_output_size`]). Returns that width.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __flattened_inputs(
    layer: &str,
    from_input: bool,
    written: usize,
    (channels, height, width): (usize, usize, usize),
) -> usize {
    let given = channels * height * width;
    // A failed layer zeroes the height and width, and a layer of 0 filters the channels: both
    // reported where they are made. `Input`'s sizes are checked as any.
    let reported = (channels == 0 || height == 0 || width == 0) && !from_input;
    if !reported && written != given {
        Message::new()
            .str("`")
            .str(layer)
            .str("` takes ")
            .number(written)
            .str(if written == 1 { " input" } else { " inputs" })
            .str(", but `Flatten` gives ")
            .number(channels)
            .str(" x ")
            .number(height)
            .str(" x ")
            .number(width)
            .str(" = ")
            .number(given)
            .panic()
    }
    given
}

/// What [`net!`](crate::net) writes for a net it cannot read (a layer misspelled or out of
/// order), next to the error that says why: its size argument refers to that error, so the
/// compiler adds none for the uses of the net. Not for direct use.
#[doc(hidden)]
pub struct __Mistake<const ERROR: usize>;

/// What a layer does to one size of the image (its channels, height or width), as
/// [`net!`](crate::net) reads it from the numbers the layer is written with, to compute the
/// size a residual block gives ([`__size_after`]). Not for direct use.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum __SizeStep<'a> {
    /// A window (a convolution's or a pooling's): kernel, stride, padding.
    Window(usize, usize, usize),
    /// Zero padding: before, after.
    Pad(usize, usize),
    /// The size becomes this: a convolution's channels, a global pool's height and width.
    Set(usize),
    /// The size is unchanged.
    Keep,
    /// A residual block within the list: its branch's steps.
    Block(&'a [__SizeStep<'a>]),
    /// A layer `net!` reports a mistake in: the steps stop (the size reached so far is given).
    End,
}

/// The size after `steps`, from `input` (`from_input`: straight from `Input`, as for
/// [`__output_size_unchecked`]). Not for direct use.
#[doc(hidden)]
#[must_use]
pub const fn __size_after(input: usize, from_input: bool, steps: &[__SizeStep<'_>]) -> usize {
    let (mut size, mut from_input) = (input, from_input);
    let mut i = 0;
    while i < steps.len() {
        size = match steps[i] {
            __SizeStep::Window(window, stride, padding) => {
                __output_size_unchecked(from_input, size, window, stride, padding)
            }
            __SizeStep::Pad(before, after) => before + size + after,
            __SizeStep::Set(value) => value,
            __SizeStep::Keep => size,
            __SizeStep::Block(branch) => __size_after(size, from_input, branch),
            __SizeStep::End => return size,
        };
        if !matches!(steps[i], __SizeStep::Keep) {
            from_input = false;
        }
        i += 1;
    }
    size
}

/// `T` itself, once the check `OK` (a `const` expression) has been evaluated: how
/// [`net!`](crate::net) attaches a check to a type that has no parameter for it (a residual
/// block's shapes). Not for direct use.
#[doc(hidden)]
pub trait __Checked<const OK: usize> {
    type Type: ?Sized;
}

impl<T: ?Sized, const OK: usize> __Checked<OK> for T {
    type Type = T;
}

/// For [`net!`](crate::net): a residual block's branch gives `branch` (channels, height,
/// width), and its shortcut (`shortcut`, the identity's or a projection's) gives `other`; they
/// are added, so they must be equal. Panics naming both otherwise; returns 0.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __residual_shapes(
    block: &str,
    shortcut: &str,
    branch: (usize, usize, usize),
    other: (usize, usize, usize),
) -> usize {
    if branch.0 != other.0 || branch.1 != other.1 || branch.2 != other.2 {
        Message::new()
            .str("`")
            .str(block)
            .str("`: the branch gives ")
            .number(branch.0)
            .str(" x ")
            .number(branch.1)
            .str(" x ")
            .number(branch.2)
            .str(", but ")
            .str(shortcut)
            .str(" gives ")
            .number(other.0)
            .str(" x ")
            .number(other.1)
            .str(" x ")
            .number(other.2)
            .str("; the two are added, so they must be the same shape")
            .panic()
    }
    0
}
