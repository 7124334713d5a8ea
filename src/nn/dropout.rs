//! Dropout: during training each value is kept with probability `1 - p` and scaled by
//! `1 / (1 - p)`, or set to 0; at inference the layer is the identity. Forward and backward side
//! by side.
//!
//! Derivation: `docs/backprop.md`, section "Dropout". With the mask `M` drawn by the forward
//! pass (each entry `1 / (1 - p)` or 0):
//!
//! ```text
//! forward (training)        backward            inference
//! Y = X ⊙ M                 dX = dY ⊙ M         Y = X
//! ```

use core::marker::PhantomData;

use super::{Layer, NetSpec, Sample, Store};

/// Dropout with probability `PERCENT / 100` on samples of type `S`: PyTorch's
/// `nn.Dropout(p=PERCENT / 100)`. Training ([`Train::forward_train`](super::Train)) zeroes each
/// value with that probability and scales the others by `100 / (100 - PERCENT)`, so that
/// each value's expectation is unchanged; inference ([`Layer::forward`], a baked net) passes
/// the sample through. The masks come from a generator in the layer's workspace, seeded
/// ([`DropoutWorkspace::seed`]), so a run is reproducible.
///
/// In [`net!`](crate::net)'s image form, `Dropout<PERCENT>` takes the sample that reaches it
/// (an image, or a vector after `Flatten` or `Dense`). `PERCENT` of 100 or more is a compile
/// error.
///
/// ```
/// use constmat::nn::{Layer, Parameters, Relu};
///
/// // nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2)).
/// type Net = constmat::net![Input<f32, 4, 1, 1>, Flatten, Dense<4, 8, Relu>, Dropout<20>, Dense<8, 2>];
/// let net = Net::zeros();
/// // The linear layer after the dropout is module 4.
/// assert_eq!(net.tensor_info(2).name().as_str(), "4.weight");
/// let mut out = [0.0; 2];
/// net.forward_one(&[[[1.0]]; 4], &mut out); // inference: no dropout
/// ```
///
/// ```compile_fail,E0080
/// // Every value dropped: nothing would reach the next layer.
/// let _ = constmat::nn::Dropout::<[f32; 4], 100>::new();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropout<S, const PERCENT: usize>(PhantomData<fn() -> S>);

impl<S, const PERCENT: usize> Dropout<S, PERCENT> {
    /// The rule on `PERCENT`, evaluated when the layer's code is generated.
    const RATE: () = if PERCENT >= 100 {
        crate::format::Message::new()
            .str("Dropout<")
            .number(PERCENT)
            .str(">: a dropout of 100% or more drops every value; the percentage is 0 to 99")
            .panic()
    };

    /// The layer (it has no parameters); a `const fn`, for `static`s.
    #[must_use]
    pub const fn new() -> Self {
        let () = Self::RATE;
        Self(PhantomData)
    }
}

impl<S, const PERCENT: usize> Default for Dropout<S, PERCENT> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Sample, const PERCENT: usize> Layer for Dropout<S, PERCENT> {
    type In = S;
    type Out = S;

    /// `Dropout(p)`: one module, no tensors.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[],
    };

    type WithStore<St: Store> = Self;

    /// Inference: the identity.
    fn forward<const B: usize>(&self, x: &[S; B], y: &mut [S; B]) {
        let () = Self::RATE;
        *y = *x;
    }

    fn to_store<St: Store>(&self) -> Self {
        *self
    }
}

no_parameters!("dropout", [S: Sample, const PERCENT: usize], Dropout<S, PERCENT>);

#[cfg(feature = "alloc")]
pub use train::DropoutWorkspace;

#[cfg(feature = "alloc")]
mod train {
    use alloc::boxed::Box;

    use num_traits::Float;

    use super::Dropout;
    use crate::nn::Train;
    use crate::nn::Values;
    use crate::nn::train::zeroed_samples;

    /// The buffers of a [`Dropout`] layer: its outputs, the mask of the last forward pass
    /// (each value `1 / (1 - p)` or 0), and the generator that draws the masks.
    #[derive(Debug, Clone)]
    pub struct DropoutWorkspace<S, const B: usize> {
        /// The outputs of the last forward pass, `x ⊙ mask`.
        pub output: Box<[S; B]>,
        /// The mask of the last forward pass, which the backward pass multiplies by.
        pub mask: Box<[S; B]>,
        generator: SplitMix64,
    }

    impl<S, const B: usize> DropoutWorkspace<S, B> {
        /// The seed a new workspace starts from: the same masks in every run.
        pub const DEFAULT_SEED: u64 = 0x5EED_D50F_0000_0001;

        /// Restarts the masks' generator from `seed`: the same seed gives the same masks for
        /// the same sequence of forward passes.
        pub fn seed(&mut self, seed: u64) {
            self.generator = SplitMix64(seed);
        }
    }

    /// SplitMix64 (Steele, Lea and Flood, 2014): 64 bits of state, every output equally likely;
    /// enough for masks, and no dependency.
    #[derive(Debug, Clone)]
    struct SplitMix64(u64);

    impl SplitMix64 {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }

    impl<T: Float, S: Values<Value = T>, const B: usize, const PERCENT: usize> Train<T, B>
        for Dropout<S, PERCENT>
    {
        type Workspace = DropoutWorkspace<S, B>;

        fn workspace(&self) -> Self::Workspace {
            DropoutWorkspace {
                output: zeroed_samples(),
                mask: zeroed_samples(),
                generator: SplitMix64(DropoutWorkspace::<S, B>::DEFAULT_SEED),
            }
        }

        /// Draws a mask (each value dropped with probability `PERCENT / 100`, the others
        /// scaled by `100 / (100 - PERCENT)`) and multiplies the inputs by it.
        fn forward_train<'w>(&self, x: &[S; B], ws: &'w mut Self::Workspace) -> &'w [S; B] {
            let () = Self::RATE;
            let hundred = T::from(100).unwrap_or_else(T::nan);
            let kept = T::from(100 - PERCENT).unwrap_or_else(T::nan);
            let scale = hundred / kept;
            let DropoutWorkspace {
                output,
                mask,
                generator,
            } = ws;
            let mut draw = || {
                // A percentile, uniform on 0..100, from the top 32 bits.
                let percentile = ((generator.next() >> 32) * 100) >> 32;
                if percentile < PERCENT as u64 {
                    T::zero()
                } else {
                    scale
                }
            };
            for ((x, y), m) in x.iter().zip(output.iter_mut()).zip(mask.iter_mut()) {
                m.fill_with(&mut draw);
                *y = *x;
                y.zip_with(m, &mut |y, m| *y = *y * m);
            }
            output
        }

        fn output(ws: &Self::Workspace) -> &[S; B] {
            &ws.output
        }

        /// `dX = dY ⊙ mask`.
        fn backward(
            &self,
            _x: &[S; B],
            ws: &mut Self::Workspace,
            d_output: &[S; B],
            d_input: Option<&mut [S; B]>,
            _gradients: &mut Self,
        ) {
            let Some(d_input) = d_input else {
                return;
            };
            for ((dx, dy), m) in d_input.iter_mut().zip(d_output).zip(ws.mask.iter()) {
                *dx = *dy;
                dx.zip_with(m, &mut |dx, m| *dx = *dx * m);
            }
        }
    }
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use super::Dropout;
    use crate::nn::quantize::outputs_of;
    use crate::nn::{Quantize, QuantizeError, QuantizeSample, Sample};
    use crate::quant::Quantization;

    /// At inference dropout is the identity: the int8 layer passes the integers on, with its
    /// input's quantization (so a net trained with dropout quantizes as the same net without).
    impl<S, const PERCENT: usize> Quantize for Dropout<S, PERCENT>
    where
        S: Sample + QuantizeSample,
    {
        type Quantized = Dropout<S::Quantized, PERCENT>;

        fn quantize_layer(
            &self,
            _layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            Ok((Dropout::new(), input, outputs_of(self, samples)))
        }
    }
}
