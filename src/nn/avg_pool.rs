//! 2-D average pooling: forward and backward side by side.
//!
//! Derivation: `docs/backprop.md`, section "Average pooling". Each output is the mean of its
//! window; its gradient is shared equally by the window's inputs:
//!
//! ```text
//! forward                                      backward
//! Y[c][oh][ow] = (Σ X over the window) / K²    dX[c][i][j] = Σ dY[c][oh][ow] / K² over the
//!   window: rows oh·S..oh·S+K,                               outputs whose window holds (i, j)
//!           columns ow·S..ow·S+K
//! ```
//!
//! A window of the whole image (`K` = its height = its width) is a global average pool, as in
//! the ResNets of MLPerf Tiny (`AveragePooling2D(pool_size=8)` on 8 x 8, then `Flatten`).

use super::shape::{Window, check_output_size};
use super::{Layer, NetSpec, Sample, Store};
use crate::kernels;

/// Average pooling over `K x K` windows with stride `STRIDE`, on `C` channels of `H x W`, giving
/// `OH x OW`: PyTorch's `nn.AvgPool2d(K, stride=STRIDE)` (no padding), TensorFlow's
/// `AveragePooling2D` with `"valid"` padding.
///
/// It has no parameters, so the same type serves training and baked nets. [`net!`](crate::net)
/// computes `OH` and `OW` as for [`MaxPool2d`](super::MaxPool2d) ([`pool_output_size`](super::pool_output_size)):
/// rows and columns left over at the end, in no window, are dropped.
///
/// ```
/// use constmat::nn::{AvgPool2d, Chain, Flatten, Layer};
///
/// let pool = AvgPool2d::<f32, 1, 2, 2, 4, 4, 2, 2>::new();
/// let image = [[[1.0, 3.0, 0.0, 0.0], [5.0, 7.0, 0.0, 8.0], [1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 6.0]]];
/// let mut out = [[[0.0; 2]; 2]; 1];
/// pool.forward_one(&image, &mut out);
/// assert_eq!(out, [[[4.0, 2.0], [1.0, 3.0]]]);
///
/// // A global average pool: one window over the whole 8 x 8 image of each channel.
/// type Global = constmat::net![Input<f32, 16, 8, 8>, AvgPool2d<8>, Flatten];
/// let mut means = [0.0; 16];
/// let global: Global = Chain::new(AvgPool2d::new(), Flatten::new());
/// global.forward_one(&[[[0.5; 8]; 8]; 16], &mut means);
/// assert_eq!(means, [0.5; 16]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AvgPool2d<
    T,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(core::marker::PhantomData<fn() -> T>);

impl<
    T,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    /// The shape rule, evaluated when the layer's code is generated.
    const SHAPE: () = {
        check_output_size("AvgPool2d", "height", Window::Pool, (H, K, STRIDE, 0), OH);
        check_output_size("AvgPool2d", "width", Window::Pool, (W, K, STRIDE, 0), OW);
    };

    /// The layer (it has no parameters); a `const fn`, for `static`s.
    ///
    /// ```compile_fail,E0080
    /// // Windows of 3 with stride 3 on 8 x 8 give 2 x 2, not 3 x 3.
    /// let _ = constmat::nn::AvgPool2d::<f32, 1, 3, 3, 8, 8, 3, 3>::new();
    /// ```
    #[must_use]
    pub const fn new() -> Self {
        // The shape rule, checked where the layer is made (the error's last note points at the
        // caller).
        let () = Self::SHAPE;
        Self(core::marker::PhantomData)
    }
}

impl<
    T,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> Default for AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    fn default() -> Self {
        Self::new()
    }
}

/// A value [`AvgPool2d`] takes means of: `f32` and `f64` (the sum divided by the window's
/// length), and `i8` for int8 nets (TensorFlow Lite's integer mean: the sum divided by the
/// length, rounded to nearest, halves away from zero; the output keeps the input's
/// quantization).
pub trait Averageable: Sample {
    /// The most values a window may hold: their sum must fit the accumulator (`i8`'s is an
    /// `i32`: 2^24 values of -128).
    #[doc(hidden)]
    const MOST_VALUES: usize;

    /// `means[ow]`: the mean of `window_rows`' windows `ow` (columns `ow·stride..ow·stride+K`,
    /// every row of `window_rows`).
    #[doc(hidden)]
    fn means<const K: usize, const W: usize, const OW: usize>(
        window_rows: &[[Self; W]],
        stride: usize,
        means: &mut [Self; OW],
    );
}

macro_rules! float_means {
    ($($t:ty),*) => {$(
        impl Averageable for $t {
            const MOST_VALUES: usize = usize::MAX;

            #[inline(always)]
            fn means<const K: usize, const W: usize, const OW: usize>(
                window_rows: &[[Self; W]],
                stride: usize,
                means: &mut [Self; OW],
            ) {
                // Each window's values added in its row-major order (as PyTorch adds them),
                // then divided by K².
                *means = [0.0; OW];
                for row in window_rows {
                    for j in 0..K {
                        for (ow, sum) in means.iter_mut().enumerate() {
                            *sum += row[ow * stride + j];
                        }
                    }
                }
                let len = (window_rows.len() * K) as $t; // exact for any window a type can hold
                for mean in means.iter_mut() {
                    *mean /= len;
                }
            }
        }
    )*};
}

float_means!(f32, f64);

impl Averageable for i8 {
    const MOST_VALUES: usize = 1 << 24;

    #[inline(always)]
    fn means<const K: usize, const W: usize, const OW: usize>(
        window_rows: &[[Self; W]],
        stride: usize,
        means: &mut [Self; OW],
    ) {
        let mut sums = [0_i32; OW];
        for row in window_rows {
            for j in 0..K {
                for (ow, sum) in sums.iter_mut().enumerate() {
                    *sum += i32::from(row[ow * stride + j]);
                }
            }
        }
        for (mean, &sum) in means.iter_mut().zip(&sums) {
            *mean = rounded_mean(sum, window_rows.len() * K);
        }
    }
}

/// Nothing, or a compile error when a window of `values` could overflow the accumulator of
/// the element type (whose bound is `most`).
#[track_caller]
pub(crate) const fn check_window_values(values: usize, most: usize) {
    if values > most {
        crate::format::Message::new()
            .str("average pooling: a window of ")
            .number(values)
            .str(" values could overflow the i32 sum of int8 values (at most ")
            .number(most)
            .str(")")
            .panic()
    }
}

/// `sum / count` rounded to nearest, halves away from zero (TensorFlow Lite's integer average
/// pooling), as an `i8`: the mean of int8 values is one.
#[inline(always)]
fn rounded_mean(sum: i32, count: usize) -> i8 {
    // The count is from 1 (the shape rule) to 2^24 (`MOST_VALUES`, checked by the layers).
    let count = count as i32;
    let half = count / 2;
    // Division truncates toward zero, so moving the sum half a count away from zero first
    // rounds halves away from zero.
    let mean = if sum > 0 {
        (sum + half) / count
    } else {
        (sum - half) / count
    };
    mean.clamp(-128, 127) as i8
}

impl<
    T: Averageable,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> Layer for AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    type In = [[[T; W]; H]; C];
    type Out = [[[T; OW]; OH]; C];

    /// `AvgPool2d(K, STRIDE)`: one module, no tensors.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[],
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        let () = Self::SHAPE;
        const { check_window_values(K * K, T::MOST_VALUES) };
        // A row of windows at a time: compiled for the widest vectors the CPU has.
        kernels::with_wide_vectors(
            #[inline(always)]
            || {
                for (x, y) in x.iter().zip(y) {
                    for (x, y) in x.iter().zip(y) {
                        for (oh, y) in y.iter_mut().enumerate() {
                            let top = oh * STRIDE;
                            T::means::<K, W, OW>(&x[top..top + K], STRIDE, y);
                        }
                    }
                }
            },
        );
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

no_parameters!("average pooling", [T: Averageable, const C: usize, const K: usize, const STRIDE: usize, const H: usize, const W: usize, const OH: usize, const OW: usize], AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>);

#[cfg(feature = "alloc")]
mod train {

    use num_traits::Float;

    use super::{Averageable, AvgPool2d};
    use crate::kernels;
    use crate::nn::Train;

    impl<
        T: Averageable + Float,
        const B: usize,
        const C: usize,
        const K: usize,
        const STRIDE: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > Train<T, B> for AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>
    {
        outputs_as_workspace!(B);

        /// `dX`: each output's gradient divided by `K²`, added to each input of its window;
        /// inputs in no window get 0.
        fn backward(
            &self,
            _x: &[[[[T; W]; H]; C]; B],
            _ws: &mut Self::Workspace,
            d_output: &[[[[T; OW]; OH]; C]; B],
            d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
            _gradients: &mut Self,
        ) {
            let () = Self::SHAPE;
            let Some(d_input) = d_input else {
                return;
            };
            // K², the values of a window, as T (exact for any window a type can hold).
            let len = T::from(K * K).unwrap_or_else(T::nan);
            kernels::with_wide_vectors(
                #[inline(always)]
                || {
                    for (dy, dx) in d_output.iter().zip(d_input) {
                        *dx = [[[T::zero(); W]; H]; C];
                        for (dy, dx) in dy.iter().zip(dx.iter_mut()) {
                            for (oh, dy) in dy.iter().enumerate() {
                                let share: [T; OW] = core::array::from_fn(|ow| dy[ow] / len);
                                let top = oh * STRIDE;
                                for row in &mut dx[top..top + K] {
                                    for j in 0..K {
                                        for (ow, &g) in share.iter().enumerate() {
                                            let at = &mut row[ow * STRIDE + j];
                                            *at = *at + g;
                                        }
                                    }
                                }
                            }
                        }
                    }
                },
            );
        }
    }
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use super::{Averageable, AvgPool2d};
    use crate::nn::quantize::outputs_of;
    use crate::nn::{Quantize, QuantizeError, QuantizeSample};
    use crate::quant::Quantization;

    /// The int8 layer averages the integers and keeps its input's quantization, as TensorFlow
    /// Lite's `AVERAGE_POOL_2D` requires: the mean of `s·(q - z)` is `s·(mean(q) - z)`, so only
    /// the rounding of the integer mean differs from the float layer's.
    impl<
        T,
        const C: usize,
        const K: usize,
        const STRIDE: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > Quantize for AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>
    where
        T: Averageable + QuantizeSample<Quantized = i8>,
    {
        type Quantized = AvgPool2d<i8, C, K, STRIDE, H, W, OH, OW>;

        fn quantize_layer(
            &self,
            _layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            Ok((AvgPool2d::new(), input, outputs_of(self, samples)))
        }
    }
}
