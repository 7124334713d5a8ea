//! The int8 dense layer: `q_out = clamp(z_out + M·(W_q·x_q + b_q))`, integers only.
//!
//! The float layer `a = f(W·x + b)` with `x ≈ s_in·(x_q - z_in)`, `W[o] ≈ s_w[o]·W_q[o]`
//! (symmetric, one scale per output) and `a ≈ s_out·(q_out - z_out)` gives, for output `o`:
//!
//! ```text
//! q_out[o] = z_out + M[o]·( Σ_i W_q[o][i]·x_q[i]  +  b_q[o] )      M[o] = s_in·s_w[o] / s_out
//!            b_q[o] = round(b[o] / (s_in·s_w[o]))  -  z_in·Σ_i W_q[o][i]
//! ```
//!
//! The zero point's term is a constant per output, folded into `b_q` when the layer is built, so
//! the inner loop is a plain `i8·i8` dot product into an `i32`. `M[o]` is a fixed-point
//! [`Multiplier`]; ReLU is the lower clamp at `z_out` (0 in real terms). Derivation and choices:
//! `docs/quantization.md`.

use super::{Identity, Inline, Layer, Relu, Sample, Store};
use crate::format::{Dtype, Message, NetSpec, TensorSpec};
use crate::kernels;
use crate::quant::Multiplier;

/// The most products of an `i8` and a weight in `-127..=127` an `i32` accumulator sums without
/// overflowing, with room for a bias of up to `2^30`: `2^30 / (128 · 127)`.
pub(crate) const MOST_PRODUCTS: usize = (1 << 30) / (128 * 127);

/// The activations an int8 layer can apply: those that are a clamp of the requantized output.
/// (A sigmoid or tanh would need a lookup table; quantizing a layer with one does not compile.)
pub trait QuantizedActivation: super::Activation {
    /// Whether outputs below the real value 0 (the zero point) are clamped to it: ReLU.
    const CLAMPS_AT_ZERO: bool;
}

impl QuantizedActivation for Identity {
    const CLAMPS_AT_ZERO: bool = false;
}

impl QuantizedActivation for Relu {
    const CLAMPS_AT_ZERO: bool = true;
}

/// A dense layer in int8, for inference: `I` inputs, `O` outputs, the activation `A` (identity
/// or ReLU), parameters in the storage `S` ([`Inline`] unless said otherwise: the int8 form is
/// for embedding).
///
/// Built by [`quantize`](super::quantize) from a trained [`Dense`](super::Dense), or by hand
/// with [`QDense::new`]. Its samples are `[i8; I]` in and `[i8; O]` out, each with the
/// quantization (scale and zero point) the quantizer chose; no float is involved.
///
/// ```
/// use constmat::nn::{Identity, Inline, Layer, QDense};
///
/// // Two outputs: the sum and the difference of two inputs (M = 1), zero points 0.
/// let layer: QDense<2, 2, Identity, Inline> = QDense::new(
///     [[1, 1], [1, -1]],
///     [0, 0],
///     [constmat::quant::Multiplier::from_real(1.0); 2],
///     0,
/// );
/// let mut out = [0; 2];
/// layer.forward_one(&[100, 20], &mut out);
/// assert_eq!(out, [120, 80]);
/// layer.forward_one(&[127, 127], &mut out);
/// assert_eq!(out, [127, 0]); // 254 saturates at 127
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct QDense<const I: usize, const O: usize, A = Identity, S: Store = Inline> {
    /// `W_q`, `[O][I]`: each row quantized symmetrically with its own scale.
    pub weight: S::Matrix<i8, O, I>,
    /// `b_q`, in the accumulator's scale `s_in·s_w[o]`, the input's zero point folded in.
    pub bias: S::Vector<i32, O>,
    /// `M[o] = s_in·s_w[o] / s_out` in fixed point: the significands.
    pub multiplier: S::Vector<i32, O>,
    /// `M[o]`'s powers of two.
    pub exponent: S::Vector<i32, O>,
    /// `z_out`: the output's zero point.
    pub output_zero_point: i8,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<const I: usize, const O: usize, A: QuantizedActivation, S: Store> QDense<I, O, A, S> {
    /// The accumulator cannot overflow: `I` products of at most `128 · 127` in magnitude (the
    /// weights are in `-127..=127`) leave room in an `i32` for a bias of up to `2^30`.
    pub(crate) const ACCUMULATOR_FITS: () = if I > MOST_PRODUCTS {
        Message::new()
            .str("QDense: ")
            .number(I)
            .str(" inputs could overflow the i32 accumulator (at most ")
            .number(MOST_PRODUCTS)
            .str(", so that products of at most 128 x 127 sum within 2^30)")
            .panic()
    };

    /// A layer from its integer parameters: the weight `[O][I]`, the bias with the input's zero
    /// point folded in, the per-output multipliers, and the output's zero point.
    #[must_use]
    pub fn new(
        weight: [[i8; I]; O],
        bias: [i32; O],
        multipliers: [Multiplier; O],
        output_zero_point: i8,
    ) -> Self {
        let () = Self::ACCUMULATOR_FITS;
        Self {
            weight: S::matrix_copied(&weight),
            bias: S::vector_copied(&bias),
            multiplier: S::vector_copied(&multipliers.map(|m| m.multiplier)),
            exponent: S::vector_copied(&multipliers.map(|m| m.exponent)),
            output_zero_point,
            activation: A::VALUE,
        }
    }

    /// The outputs of one sample: per output, the dot product, the bias, the requantization,
    /// the clamp.
    #[inline]
    fn forward_sample(&self, x: &[i8; I], y: &mut [i8; O]) {
        let () = Self::ACCUMULATOR_FITS;
        let weight = S::matrix(&self.weight);
        let (bias, multiplier, exponent) = (
            S::vector(&self.bias),
            S::vector(&self.multiplier),
            S::vector(&self.exponent),
        );
        let zero = self.output_zero_point;
        let low = if A::CLAMPS_AT_ZERO { zero } else { -128 };
        // Σ_i W_q[o][i]·x_q[i] for every output: i8 products summed in i32.
        let mut dots = [0_i32; O];
        kernels::dot_rows_i8(weight.as_flattened(), x, &mut dots);
        // q_out[o] = clamp(z_out + M[o]·(dot + b_q[o])).
        kernels::requantize_i8(&dots, (bias, multiplier, exponent), (zero, low), y);
    }
}

impl<const I: usize, const O: usize, A: QuantizedActivation, S: Store> Layer
    for QDense<I, O, A, S>
{
    type In = [i8; I];
    type Out = [i8; O];

    /// `Linear(I, O)` then the activation's module, in int8: the weight (`I8`), the bias with
    /// the input's zero point folded in, and the multipliers' significands and exponents
    /// (`I32`). (Saving and loading int8 files comes with the int8 weights file.)
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &[
            TensorSpec {
                module: 0,
                field: "weight",
                dtype: Dtype::I8,
                shape: &[O, I],
            },
            TensorSpec {
                module: 0,
                field: "bias",
                dtype: Dtype::I32,
                shape: &[O],
            },
            TensorSpec {
                module: 0,
                field: "multiplier",
                dtype: Dtype::I32,
                shape: &[O],
            },
            TensorSpec {
                module: 0,
                field: "exponent",
                dtype: Dtype::I32,
                shape: &[O],
            },
        ],
    };

    type WithStore<S2: Store> = QDense<I, O, A, S2>;

    /// The dot products of one sample, before requantization: `O` values of `i32`.
    const WORKING_BYTES: usize = 4 * O;

    fn forward<const B: usize>(&self, x: &[[i8; I]; B], y: &mut [[i8; O]; B]) {
        for (x, y) in x.iter().zip(y) {
            self.forward_sample(x, y);
        }
    }

    fn to_store<S2: Store>(&self) -> QDense<I, O, A, S2> {
        QDense {
            weight: S2::matrix_copied(S::matrix(&self.weight)),
            bias: S2::vector_copied(S::vector(&self.bias)),
            multiplier: S2::vector_copied(S::vector(&self.multiplier)),
            exponent: S2::vector_copied(S::vector(&self.exponent)),
            output_zero_point: self.output_zero_point,
            activation: A::VALUE,
        }
    }
}

impl Sample for i8 {
    const ZERO: Self = 0;
}

impl Sample for i32 {
    const ZERO: Self = 0;
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use num_traits::Float;

    use super::{QDense, QuantizedActivation};
    use crate::format::Element;
    use crate::nn::quantize::{calibrate, check_parameters, quantize_rows};
    use crate::nn::{Dense, Heap, Quantize, QuantizeError, QuantizeSample, Sample, Store};
    use crate::quant::Quantization;

    impl<T, const I: usize, const O: usize, A, S> Quantize for Dense<T, I, O, A, S>
    where
        T: Element + Sample + Float + QuantizeSample,
        A: QuantizedActivation,
        S: Store,
    {
        type Quantized = QDense<I, O, A, Heap>;

        fn quantize_layer(
            &self,
            layer: usize,
            input: Quantization,
            samples: &[[T; I]],
        ) -> Result<(Self::Quantized, Quantization, Vec<[T; O]>), QuantizeError> {
            let () = QDense::<I, O, A, Heap>::ACCUMULATOR_FITS;
            let (weights, bias) = (
                S::matrix(&self.weight).as_flattened(),
                S::vector(&self.bias),
            );
            check_parameters(layer, weights, bias)?;
            let (outputs, output) = calibrate(self, layer, samples)?;
            let mut weight = Heap::matrix_filled::<i8, O, I>(0);
            let (bias, multipliers) = quantize_rows(
                layer,
                weights,
                bias,
                (input, output),
                Heap::matrix_mut(&mut weight).as_flattened_mut(),
            )?;
            let net = QDense {
                weight,
                bias: Heap::vector_copied(&bias),
                multiplier: Heap::vector_copied(&multipliers.map(|m| m.multiplier)),
                exponent: Heap::vector_copied(&multipliers.map(|m| m.exponent)),
                output_zero_point: output.zero_point,
                activation: A::VALUE,
            };
            Ok((net, output, outputs))
        }
    }
}
