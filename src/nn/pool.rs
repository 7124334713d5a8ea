//! 2-D max pooling: forward and backward side by side.
//!
//! Derivation: `docs/backprop.md`, section "Max pooling". Each output is the largest input of
//! its window; the gradient goes back to that input alone:
//!
//! ```text
//! forward                                      backward
//! Y[c][oh][ow] = max over the window of X      dX[c][i][j] = Σ dY[c][oh][ow] over the outputs
//!   window: rows oh·S..oh·S+K,                               whose window's first maximum
//!           columns ow·S..ow·S+K                             is X[c][i][j]
//! ```
//!
//! The maximum is found again from `X` in the backward pass (no index is kept), the first one
//! in the window's row-major order when several inputs tie, as PyTorch does. A NaN in a window
//! is its maximum (the first NaN), so that it is not silently dropped.

use core::mem::MaybeUninit;

use super::shape::{Window, check_output_size};
use super::{Layer, NetSpec, Sample, Store};
use crate::kernels;

/// Max pooling over `K x K` windows with stride `STRIDE`, on `C` channels of `H x W`, giving
/// `OH x OW`: PyTorch's `nn.MaxPool2d(K, stride=STRIDE)` (no padding, no dilation).
///
/// It has no parameters, so there is nothing to store: the same type serves training and baked
/// nets. [`net!`](crate::net) computes `OH` and `OW` (see [`pool_output_size`]); written by hand,
/// a wrong size is reported by `cargo build` with both sizes.
///
/// ```
/// use constmat::nn::{Layer, MaxPool2d};
///
/// let pool = MaxPool2d::<f32, 1, 2, 2, 4, 4, 2, 2>::new();
/// let image = [[[1.0, 2.0, 0.0, 0.0], [3.0, 4.0, 0.0, 9.0], [5.0, 0.0, 7.0, 7.0], [0.0, 6.0, 7.0, 7.0]]];
/// let mut out = [[[0.0; 2]; 2]; 1];
/// pool.forward_one(&image, &mut out);
/// assert_eq!(out, [[[4.0, 9.0], [6.0, 7.0]]]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxPool2d<
    T,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(core::marker::PhantomData<fn() -> T>);

/// The output size of a max pooling along one dimension: `(input - window) / stride + 1`,
/// checked like [`conv_output_size`](super::conv_output_size) (the window fits, the stride
/// divides what is left).
///
/// # Panics
///
/// (At compile time, as an error, when used in a type.) As [`conv_output_size`](super::conv_output_size).
///
/// ```
/// use constmat::nn::pool_output_size;
/// assert_eq!(pool_output_size(28, 2, 2), 14);
/// // As PyTorch: the last row of 13 is in no window.
/// assert_eq!(pool_output_size(13, 2, 2), 6);
/// ```
#[must_use]
#[track_caller]
pub const fn pool_output_size(input: usize, window: usize, stride: usize) -> usize {
    super::shape::output_size(
        "MaxPool2d",
        "input",
        Window::Pool,
        (input, window, stride, 0),
    )
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
> MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    /// The shape rule, evaluated when the layer's code is generated.
    const SHAPE: () = {
        check_output_size("MaxPool2d", "height", Window::Pool, (H, K, STRIDE, 0), OH);
        check_output_size("MaxPool2d", "width", Window::Pool, (W, K, STRIDE, 0), OW);
    };

    /// Whether the 2 x 2 kernels (`kernels::max_pool_2x2`) take this layer: windows of 2 with
    /// stride 2 on even sizes, where every input is in a window (on odd sizes the last row and
    /// column are in none, and the layer's loops take them).
    const TWO_BY_TWO: bool = K == 2 && STRIDE == 2 && H.is_multiple_of(2) && W.is_multiple_of(2);

    /// The layer (it has no parameters); a `const fn`, for `static`s.
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
> Default for MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    /// [`MaxPool2d::new`]: its shape rule checked too.
    ///
    /// ```compile_fail,E0080
    /// // Windows of 2 with stride 2 on 5 x 5 give 2 x 2 (the last row and column are in no
    /// // window), not 3 x 3.
    /// let _ = constmat::nn::MaxPool2d::<f32, 1, 2, 2, 5, 5, 3, 3>::default();
    /// ```
    fn default() -> Self {
        Self::new()
    }
}

impl<
    T: Sample + PartialOrd,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    /// `v` if it is larger than `m` or the first NaN (`v` is NaN and `m` is not), else `m`: the
    /// running maximum of a window in its row-major order. A select, not a branch.
    #[inline(always)]
    fn larger(m: T, v: T) -> T {
        if Self::takes_over(m, v) { v } else { m }
    }

    /// Whether `v` takes over from the running maximum `m` (see [`larger`](Self::larger)).
    /// `|` and `&`, not `||` and `&&`: no short circuit, so no branch.
    #[inline(always)]
    fn takes_over(m: T, v: T) -> bool {
        #[allow(clippy::eq_op)] // x != x is the NaN test for a generic PartialOrd type
        let first_nan = (v != v) & (m == m);
        (v > m) | first_nan
    }
}

impl<
    T: Sample + PartialOrd,
    const C: usize,
    const K: usize,
    const STRIDE: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> Layer for MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>
{
    type In = [[[T; W]; H]; C];
    type Out = [[[T; OW]; OH]; C];

    /// `MaxPool2d(K, STRIDE)`: one module, no tensors.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[],
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        let () = Self::SHAPE;
        // Without branches on the data (a comparison that goes either way is a mispredicted
        // branch half the time, which made pooling cost more than the convolutions): a row of
        // windows at a time, each window's elements in its row-major order for all of the row's
        // windows together, so that the first maximum (and the first NaN) is kept, bit for bit,
        // as the backward pass finds it.
        // 2 x 2 windows with stride 2 in f32: the SIMD kernel, the same values, the whole batch
        // in one call.
        if Self::TWO_BY_TWO
            && kernels::max_pool_2x2(
                x.as_flattened().as_flattened().as_flattened(),
                (H, W),
                y.as_flattened_mut().as_flattened_mut().as_flattened_mut(),
            )
        {
            return;
        }
        // Compiled for the widest vectors the CPU has (AVX2 has no pooling kernel of its own).
        kernels::with_wide_vectors(
            #[inline(always)]
            || {
                for (x, y) in x.iter().zip(y) {
                    for (x, y) in x.iter().zip(y) {
                        for (oh, y) in y.iter_mut().enumerate() {
                            let top = oh * STRIDE;
                            *y = core::array::from_fn(|ow| x[top][ow * STRIDE]);
                            for (i, row) in x[top..top + K].iter().enumerate() {
                                for j in (0..K).filter(|&j| (i, j) != (0, 0)) {
                                    for (ow, best) in y.iter_mut().enumerate() {
                                        *best = Self::larger(*best, row[ow * STRIDE + j]);
                                    }
                                }
                            }
                        }
                    }
                }
            },
        );
    }

    /// 2 x 2 windows with stride 2 in `f32` where the SIMD kernel runs: it writes every
    /// output, so `y` is not zeroed first.
    fn forward_uninit<'y, const B: usize>(
        &self,
        x: &[Self::In; B],
        y: &'y mut MaybeUninit<[Self::Out; B]>,
    ) -> &'y mut [Self::Out; B] {
        let () = Self::SHAPE;
        let y = if Self::TWO_BY_TWO {
            let x = x.as_flattened().as_flattened().as_flattened();
            match kernels::max_pool_2x2_images(x, (H, W), y) {
                Ok(pooled) => return pooled,
                Err(y) => y,
            }
        } else {
            y
        };
        let y = y.write([Self::Out::ZERO; B]);
        self.forward(x, y);
        y
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

no_parameters!("max pooling", [T: Sample + PartialOrd, const C: usize, const K: usize, const STRIDE: usize, const H: usize, const W: usize, const OH: usize, const OW: usize], MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>);

#[cfg(feature = "alloc")]
mod train {

    use super::MaxPool2d;
    use crate::nn::{Sample, Train};

    impl<
        T: Sample + PartialOrd + core::ops::Add<Output = T>,
        const B: usize,
        const C: usize,
        const K: usize,
        const STRIDE: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > Train<T, B> for MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>
    {
        outputs_as_workspace!(B);

        fn backward(
            &self,
            x: &[[[[T; W]; H]; C]; B],
            _ws: &mut Self::Workspace,
            d_output: &[[[[T; OW]; OH]; C]; B],
            d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
            _gradients: &mut Self,
        ) {
            let () = Self::SHAPE;
            let Some(d_input) = d_input else {
                return;
            };
            // dX: each output's gradient, to the first maximum of its window (found again). A row
            // of windows at a time, each window's elements in order for all of the row's
            // windows together: independent selects, no data-dependent branch.
            if Self::TWO_BY_TWO {
                // 2 x 2 windows with stride 2 in f32: the SIMD kernel, the same values, the
                // whole batch in one call.
                let dx = d_input
                    .as_flattened_mut()
                    .as_flattened_mut()
                    .as_flattened_mut();
                // No zeroing first: the kernel writes every input a window reads, which on
                // even sizes is every input.
                if crate::kernels::max_pool_2x2_backward(
                    x.as_flattened().as_flattened().as_flattened(),
                    (H, W),
                    d_output.as_flattened().as_flattened().as_flattened(),
                    dx,
                ) {
                    return;
                }
            }
            // Compiled for the widest vectors the CPU has, as the forward pass.
            crate::kernels::with_wide_vectors(
                #[inline(always)]
                || Self::backward_loops(x, d_output, d_input),
            );
        }
    }

    impl<
        T: Sample + PartialOrd + core::ops::Add<Output = T>,
        const C: usize,
        const K: usize,
        const STRIDE: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>
    {
        /// The backward pass's generic loops (see `backward`).
        #[inline(always)]
        fn backward_loops<const B: usize>(
            x: &[[[[T; W]; H]; C]; B],
            d_output: &[[[[T; OW]; OH]; C]; B],
            d_input: &mut [[[[T; W]; H]; C]; B],
        ) {
            for ((x, dy), dx) in x.iter().zip(d_output).zip(d_input) {
                *dx = [[[T::ZERO; W]; H]; C];
                for ((x, dy), dx) in x.iter().zip(dy).zip(dx.iter_mut()) {
                    for (oh, dy) in dy.iter().enumerate() {
                        let top = oh * STRIDE;
                        let mut best: [T; OW] = core::array::from_fn(|ow| x[top][ow * STRIDE]);
                        // Window positions as u32 (vector lanes twice as many as usize's): a
                        // window has at most 65,535² positions (checked where this compiles).
                        const {
                            assert!(
                                K <= u16::MAX as usize,
                                "MaxPool2d: a window of more than 65,535 rows"
                            )
                        };
                        let mut at = [0_u32; OW];
                        for (i, row) in x[top..top + K].iter().enumerate() {
                            for j in 0..K {
                                let position = (i * K + j) as u32;
                                for ((best, at), ow) in best.iter_mut().zip(&mut at).zip(0..OW) {
                                    let v = row[ow * STRIDE + j];
                                    let take = Self::takes_over(*best, v);
                                    *at = if take { position } else { *at };
                                    *best = if take { v } else { *best };
                                }
                            }
                        }
                        for (ow, (&at, &d)) in at.iter().zip(dy).enumerate() {
                            let (i, j) = (top + at as usize / K, ow * STRIDE + at as usize % K);
                            dx[i][j] = dx[i][j] + d;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use super::MaxPool2d;
    use crate::nn::quantize::outputs_of;
    use crate::nn::{Quantize, QuantizeError, QuantizeSample, Sample};
    use crate::quant::Quantization;

    /// Max pooling commutes with quantizing (both are monotone): the int8 layer pools the
    /// integers, and its output has its input's quantization.
    impl<
        T,
        const C: usize,
        const K: usize,
        const STRIDE: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > Quantize for MaxPool2d<T, C, K, STRIDE, H, W, OH, OW>
    where
        T: Sample + PartialOrd + QuantizeSample<Quantized = i8>,
    {
        type Quantized = MaxPool2d<i8, C, K, STRIDE, H, W, OH, OW>;

        fn quantize_layer(
            &self,
            _layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            Ok((MaxPool2d::new(), input, outputs_of(self, samples)))
        }
    }
}
