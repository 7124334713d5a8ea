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

use num_traits::Float;

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

impl<
    T: Float,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    /// `K²`, the values of a window, as `T` (exact for any window a type can hold).
    fn window_len() -> T {
        T::from(K * K).unwrap_or_else(T::nan)
    }
}

impl<
    T: Sample + Float,
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
        let len = Self::window_len();
        // A row of windows at a time, each window's values added in its row-major order (as
        // PyTorch adds them), then divided by K²: compiled for the widest vectors the CPU has.
        kernels::with_wide_vectors(
            #[inline(always)]
            || {
                for (x, y) in x.iter().zip(y) {
                    for (x, y) in x.iter().zip(y) {
                        for (oh, y) in y.iter_mut().enumerate() {
                            let top = oh * STRIDE;
                            *y = [T::zero(); OW];
                            for row in &x[top..top + K] {
                                for j in 0..K {
                                    for (ow, sum) in y.iter_mut().enumerate() {
                                        *sum = *sum + row[ow * STRIDE + j];
                                    }
                                }
                            }
                            for mean in y.iter_mut() {
                                *mean = *mean / len;
                            }
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

no_parameters!("average pooling", [T: Sample + Float, const C: usize, const K: usize, const STRIDE: usize, const H: usize, const W: usize, const OH: usize, const OW: usize], AvgPool2d<T, C, K, STRIDE, H, W, OH, OW>);

#[cfg(feature = "alloc")]
mod train {

    use num_traits::Float;

    use super::AvgPool2d;
    use crate::kernels;
    use crate::nn::{Sample, Train};

    impl<
        T: Sample + Float,
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
            let len = Self::window_len();
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
