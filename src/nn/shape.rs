//! The output sizes of sliding-window layers (convolution, pooling), computed and checked in
//! `const` code: by the layers' shape rules, and by [`net!`](crate::net) in the types it writes.

use crate::format::Message;

/// `(input + 2·padding - window) / stride + 1`, or a panic naming the layer, the dimension
/// (`"height"`, `"width"`, or `"input"`) and the sizes when the window does not fit, the stride
/// is 0, or the last rows of the input would never be read.
#[track_caller]
pub(crate) const fn output_size(
    layer: &str,
    dimension: &str,
    (input, window, stride, padding): (usize, usize, usize, usize),
) -> usize {
    let padded = input + 2 * padding;
    if stride == 0 {
        Message::new().str(layer).str(": the stride is 0").panic()
    }
    if window > padded || window == 0 {
        let m = Message::new()
            .str(layer)
            .str(": the kernel (")
            .number(window);
        let m = if bytes_eq(dimension.as_bytes(), b"input") {
            m.str(") is larger than the padded input (")
        } else {
            m.str(") is larger than the padded ")
                .str(dimension)
                .str(" (")
        };
        m.number(input)
            .str(" + 2 x ")
            .number(padding)
            .str(" = ")
            .number(padded)
            .str(")")
            .panic()
    }
    // The last (padded - window) % stride rows are never read; that is fine while they are
    // padding, not input.
    let left_over = (padded - window) % stride;
    if left_over > padding {
        Message::new()
            .str(layer)
            .str(": windows of ")
            .number(window)
            .str(" with stride ")
            .number(stride)
            .str(" never read the last ")
            .number(left_over - padding)
            .str(" of the ")
            .str(dimension)
            .str("'s ")
            .number(input)
            .str(": ")
            .number(input)
            .str(" + 2 x ")
            .number(padding)
            .str(" - ")
            .number(window)
            .str(" = ")
            .number(padded - window)
            .str(" is not a multiple of ")
            .number(stride)
            .panic()
    }
    (padded - window) / stride + 1
}

/// [`output_size`] without the checks (0 where it would panic): how [`net!`](crate::net) passes
/// a size on to the next layer, so that a mistake is reported once, at the layer that makes it.
#[doc(hidden)]
#[must_use]
pub const fn __output_size_unchecked(
    input: usize,
    window: usize,
    stride: usize,
    padding: usize,
) -> usize {
    let padded = input + 2 * padding;
    if stride == 0 || window > padded {
        0
    } else {
        (padded - window) / stride + 1
    }
}

/// Whether [`output_size`] accepts these sizes (returns rather than panics).
#[doc(hidden)]
#[must_use]
pub const fn __fits(input: usize, window: usize, stride: usize, padding: usize) -> bool {
    let padded = input + 2 * padding;
    stride > 0 && window > 0 && window <= padded && (padded - window) % stride <= padding
}

/// [`output_size`] for [`net!`](crate::net): the layer's own output height or width, checked
/// while `checked` (every layer before this one passed its checks). After a layer that failed,
/// the sizes that reach this one follow from that mistake, which was reported where it was
/// made: [`__output_size_unchecked`], no second error.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __output_size(
    layer: &str,
    dimension: &str,
    checked: bool,
    input: usize,
    window: usize,
    stride: usize,
    padding: usize,
) -> usize {
    if !checked {
        return __output_size_unchecked(input, window, stride, padding);
    }
    output_size(layer, dimension, (input, window, stride, padding))
}

/// Checks that `out` is the output size of `input` (see [`output_size`]), naming the dimension
/// and both sizes otherwise.
#[track_caller]
pub(crate) const fn check_output_size(
    layer: &str,
    dimension: &str,
    (input, window, stride, padding): (usize, usize, usize, usize),
    out: usize,
) {
    let expected = output_size(layer, dimension, (input, window, stride, padding));
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
    if written != given {
        Message::new()
            .str("`")
            .str(layer)
            .str("` takes ")
            .number(written)
            .str(" input channels, but the layer before it gives ")
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
    if written != given {
        Message::new()
            .str("`")
            .str(layer)
            .str("` takes ")
            .number(written)
            .str(" inputs, but the layer before it gives ")
            .number(given)
            .panic()
    }
    given
}

/// For [`net!`](crate::net): `written`, the inputs of the dense layer after `Flatten`, checked
/// against what `Flatten` gives, `channels x height x width`, while `checked` (see
/// [`__output_size`]). Returns that width.
#[doc(hidden)]
#[must_use]
#[track_caller]
pub const fn __flattened_inputs(
    layer: &str,
    checked: bool,
    written: usize,
    (channels, height, width): (usize, usize, usize),
) -> usize {
    let given = channels * height * width;
    if checked && written != given {
        Message::new()
            .str("`")
            .str(layer)
            .str("` takes ")
            .number(written)
            .str(" inputs, but `Flatten` gives ")
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
