//! The global average pool: each channel's mean over the whole image, forward and backward side
//! by side.
//!
//! Derivation: `docs/backprop.md`, section "Average pooling" (one window of the whole image):
//!
//! ```text
//! forward                                   backward
//! Y[c] = (Σ_{i,j} X[c][i][j]) / (H·W)       dX[c][i][j] = dY[c] / (H·W)
//! ```
//!
//! Any height and width: DS-CNN's 25 x 5 as well as ResNet's 8 x 8, where [`AvgPool2d`]'s
//! square window cannot reach.
//!
//! [`AvgPool2d`]: super::AvgPool2d

use super::avg_pool::{Averageable, check_window_values};
use super::{Layer, NetSpec, Store};
use crate::kernels;

/// The mean of each of `C` channels of `H x W`, as a `C x 1 x 1` image: PyTorch's
/// `nn.AdaptiveAvgPool2d(1)`, TensorFlow's `GlobalAveragePooling2D` (with `keepdims`), and
/// TensorFlow Lite's `AVERAGE_POOL_2D` whose window is the whole image. On `i8` it is TensorFlow
/// Lite's integer mean (the sum divided by `H·W`, rounded to nearest, halves away from zero),
/// the output keeping the input's quantization.
///
/// In [`net!`](crate::net): `GlobalAvgPool2d`, which takes the size that reaches it.
///
/// ```
/// use constmat::nn::{GlobalAvgPool2d, Layer};
///
/// let pool = GlobalAvgPool2d::<f32, 2, 1, 3>::new();
/// let mut y = [[[0.0]]; 2];
/// pool.forward_one(&[[[1.0, 2.0, 6.0]], [[-3.0, 0.0, 0.0]]], &mut y);
/// assert_eq!(y, [[[3.0]], [[-1.0]]]);
///
/// // DS-CNN's head: 64 channels of 25 x 5, then the dense layer.
/// type Head = constmat::net![Input<f32, 64, 25, 5>, GlobalAvgPool2d, Flatten, Dense<64, 12>];
/// assert_eq!(core::mem::size_of::<<Head as Layer>::Out>(), 12 * 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalAvgPool2d<T, const C: usize, const H: usize, const W: usize>(
    core::marker::PhantomData<fn() -> T>,
);

impl<T: Averageable, const C: usize, const H: usize, const W: usize> GlobalAvgPool2d<T, C, H, W> {
    /// The window's bound: its values' sum fits the element type's accumulator.
    const WINDOW: () = check_window_values(H * W, T::MOST_VALUES);

    /// The layer (it has no parameters); a `const fn`, for `static`s.
    #[must_use]
    pub const fn new() -> Self {
        // The window's bound, checked where the layer is made (the error's note points there).
        let () = Self::WINDOW;
        Self(core::marker::PhantomData)
    }
}

impl<T: Averageable, const C: usize, const H: usize, const W: usize> Default
    for GlobalAvgPool2d<T, C, H, W>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Averageable, const C: usize, const H: usize, const W: usize> Layer
    for GlobalAvgPool2d<T, C, H, W>
{
    type In = [[[T; W]; H]; C];
    type Out = [[[T; 1]; 1]; C];

    /// `AdaptiveAvgPool2d(1)`: one module, no tensors.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[],
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        let () = Self::WINDOW;
        kernels::with_wide_vectors(
            #[inline(always)]
            || {
                for (x, y) in x.iter().zip(y) {
                    for (x, y) in x.iter().zip(y) {
                        // One window: all H rows, all W columns.
                        T::means::<W, W, 1>(x, W, &mut y[0]);
                    }
                }
            },
        );
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

no_parameters!("a global average pool", [T: Averageable, const C: usize, const H: usize, const W: usize], GlobalAvgPool2d<T, C, H, W>);

#[cfg(feature = "alloc")]
mod train {
    use num_traits::Float;

    use super::GlobalAvgPool2d;
    use crate::nn::Train;
    use crate::nn::avg_pool::Averageable;

    impl<T: Averageable + Float, const B: usize, const C: usize, const H: usize, const W: usize>
        Train<T, B> for GlobalAvgPool2d<T, C, H, W>
    {
        outputs_as_workspace!(B);

        /// `dX[c][i][j] = dY[c] / (H·W)`.
        fn backward(
            &self,
            _x: &[[[[T; W]; H]; C]; B],
            _ws: &mut Self::Workspace,
            d_output: &[[[[T; 1]; 1]; C]; B],
            d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
            _gradients: &mut Self,
        ) {
            let Some(d_input) = d_input else {
                return;
            };
            let len = T::from(H * W).unwrap_or_else(T::nan);
            for (dy, dx) in d_output.iter().zip(d_input) {
                for (dy, dx) in dy.iter().zip(dx.iter_mut()) {
                    let share = dy[0][0] / len;
                    for row in dx.iter_mut() {
                        row.fill(share);
                    }
                }
            }
        }
    }
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use super::GlobalAvgPool2d;
    use crate::nn::avg_pool::Averageable;
    use crate::nn::quantize::outputs_of;
    use crate::nn::{Quantize, QuantizeError, QuantizeSample};
    use crate::quant::Quantization;

    /// The int8 layer averages the integers and keeps its input's quantization (as
    /// [`AvgPool2d`](crate::nn::AvgPool2d)'s).
    impl<T, const C: usize, const H: usize, const W: usize> Quantize for GlobalAvgPool2d<T, C, H, W>
    where
        T: Averageable + QuantizeSample<Quantized = i8>,
    {
        type Quantized = GlobalAvgPool2d<i8, C, H, W>;

        fn quantize_layer(
            &self,
            _layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            Ok((GlobalAvgPool2d::new(), input, outputs_of(self, samples)))
        }
    }
}
