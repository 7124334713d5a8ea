//! Flattening an image into a vector: forward and backward side by side.
//!
//! Derivation: `docs/backprop.md`, section "Flatten". The same numbers in another shape, in
//! PyTorch's order (channel, then row, then column), so `dX` is `dY` in the input's shape.

use super::{Layer, Message, NetSpec, Sample, Store};

/// An image of `C` channels of `H x W` as a vector of `N = C·H·W`: PyTorch's `nn.Flatten()`.
///
/// `N` is in the type, so the next layer's width is checked against it: a `Dense` whose input
/// width is not `N` does not compile, and the message names both widths (PyTorch finds that
/// mistake at run time: `mat1 and mat2 shapes cannot be multiplied (64x256 and 784x120)`).
/// [`net!`](crate::net) computes `N`; written by hand, a wrong `N` is reported by `cargo build`.
///
/// ```
/// use constmat::nn::{Flatten, Layer};
///
/// let flatten = Flatten::<f32, 2, 1, 2, 4>::new();
/// let mut out = [0.0; 4];
/// flatten.forward_one(&[[[1.0, 2.0]], [[3.0, 4.0]]], &mut out);
/// assert_eq!(out, [1.0, 2.0, 3.0, 4.0]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flatten<T, const C: usize, const H: usize, const W: usize, const N: usize>(
    core::marker::PhantomData<fn() -> T>,
);

impl<T, const C: usize, const H: usize, const W: usize, const N: usize> Flatten<T, C, H, W, N> {
    /// The shape rule, evaluated when the layer's code is generated: `N = C·H·W`.
    const SHAPE: () = if N != C * H * W {
        Message::new()
            .str("Flatten: the output width is ")
            .number(N)
            .str(", but an image of ")
            .number(C)
            .str(" x ")
            .number(H)
            .str(" x ")
            .number(W)
            .str(" has ")
            .number(C * H * W)
            .str(" values")
            .panic()
    };

    /// The layer (it has no parameters); a `const fn`, for `static`s.
    #[must_use]
    pub const fn new() -> Self {
        // The shape rule, checked where the layer is made (the error's last note points at the
        // caller).
        let () = Self::SHAPE;
        Self(core::marker::PhantomData)
    }
}

impl<T, const C: usize, const H: usize, const W: usize, const N: usize> Default
    for Flatten<T, C, H, W, N>
{
    /// [`Flatten::new`]: its shape rule checked too.
    ///
    /// ```compile_fail,E0080
    /// // 2 x 3 x 3 = 18 values, not 16.
    /// let _ = constmat::nn::Flatten::<f32, 2, 3, 3, 16>::default();
    /// ```
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Sample, const C: usize, const H: usize, const W: usize, const N: usize> Layer
    for Flatten<T, C, H, W, N>
{
    type In = [[[T; W]; H]; C];
    type Out = [T; N];

    /// `Flatten()`: one module, no tensors; its images' sizes, for the messages of a file whose
    /// next layer reads another number of values.
    const SPEC: NetSpec = NetSpec::Flatten {
        channels: C,
        height: H,
        width: W,
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        let () = Self::SHAPE;
        for (x, y) in x.iter().zip(y) {
            y.copy_from_slice(x.as_flattened().as_flattened());
        }
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

no_parameters!("flatten", [T: Sample, const C: usize, const H: usize, const W: usize, const N: usize], Flatten<T, C, H, W, N>);

#[cfg(feature = "alloc")]
mod train {

    use super::Flatten;
    use crate::nn::{Sample, Train};

    impl<T: Sample, const B: usize, const C: usize, const H: usize, const W: usize, const N: usize>
        Train<T, B> for Flatten<T, C, H, W, N>
    {
        outputs_as_workspace!(B);

        fn backward(
            &self,
            _x: &[[[[T; W]; H]; C]; B],
            _ws: &mut Self::Workspace,
            d_output: &[[T; N]; B],
            d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
            _gradients: &mut Self,
        ) {
            // dX is dY in the input's shape.
            if let Some(d_input) = d_input {
                for (dy, dx) in d_output.iter().zip(d_input) {
                    dx.as_flattened_mut().as_flattened_mut().copy_from_slice(dy);
                }
            }
        }
    }
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use super::Flatten;
    use crate::nn::quantize::outputs_of;
    use crate::nn::{Quantize, QuantizeError, QuantizeSample, Sample};
    use crate::quant::Quantization;

    /// Flattening moves values: the int8 layer moves the integers, with its input's quantization.
    impl<T, const C: usize, const H: usize, const W: usize, const N: usize> Quantize
        for Flatten<T, C, H, W, N>
    where
        T: Sample + QuantizeSample<Quantized = i8>,
    {
        type Quantized = Flatten<i8, C, H, W, N>;

        fn quantize_layer(
            &self,
            _layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            Ok((Flatten::new(), input, outputs_of(self, samples)))
        }
    }
}
