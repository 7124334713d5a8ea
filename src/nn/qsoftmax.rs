//! The int8 softmax: TensorFlow Lite's `SOFTMAX` on int8, integers only.
//!
//! For a row of int8 logits `q` with scale `s`, the probabilities are
//! `p_j = exp(s·(q_j - max q)) / Σ_k exp(s·(q_k - max q))`, the zero point cancelling in the
//! differences. Each difference is scaled by `s` into Q5.26 with a fixed-point [`Multiplier`]
//! (`s·2^26`, at least 1), `exp` is taken in fixed point
//! ([`exp_on_negative_values`](crate::quant::fixed_point::exp_on_negative_values)), the sum's
//! reciprocal likewise, and each probability is written with scale 1/256 and zero point -128
//! (`p = (q_out + 128) / 256`), as TensorFlow Lite requires of an int8 softmax. Differences
//! below `diff_min`, whose `exp` is below int8's resolution and whose scaled value would not
//! fit, give -128 (probability 0).

use super::qdense::{MULTIPLIER_RANGE, int8_tensor};
use super::{Bake, Layer, SafetensorsFile, Store};
use crate::format::decode::{self, Source};
use crate::format::{Error, NetSpec};
use crate::quant::fixed_point::{
    SOFTMAX_DIFF_INTEGER_BITS, SOFTMAX_SUM_INTEGER_BITS, exp_on_negative_values,
    multiply_by_power_of_two, reciprocal, softmax_input_multiplier,
};
use crate::quant::{Multiplier, Quantization};
use crate::quant::{rounding_divide_by_power_of_two, saturating_rounding_doubling_high_mul};

/// The output quantization of every int8 softmax: probabilities in `[0, 1)` onto `-128..=127`.
pub const SOFTMAX_OUTPUT: Quantization = Quantization {
    scale: 1.0 / 256.0,
    zero_point: -128,
};

/// The range of the softmax multiplier's exponent: a left shift of the differences.
const SOFTMAX_EXPONENT_RANGE: Option<(i32, i32)> = Some((0, 31));

/// A softmax over `N` int8 logits, for inference: [`Softmax`](super::Softmax)'s int8 form,
/// bit for bit TensorFlow Lite Micro's int8 `SOFTMAX` (beta 1).
///
/// Built by [`quantize`](super::quantize) from a net ending in `Softmax`, or with
/// [`QSoftmax::new`] from the logits' quantization. The outputs have the quantization
/// [`SOFTMAX_OUTPUT`]: probability `(q + 128) / 256`.
///
/// ```
/// use constmat::nn::{Layer, QSoftmax};
/// use constmat::quant::Quantization;
///
/// // Logits 0.1 apart: 2.0, 1.0 and 0.0 in real terms.
/// let softmax = QSoftmax::<3>::new(Quantization { scale: 0.1, zero_point: 0 });
/// let mut p = [0; 3];
/// softmax.forward_one(&[20, 10, 0], &mut p);
/// // softmax([2, 1, 0]) = [0.665, 0.245, 0.090], in 1/256 above -128.
/// assert_eq!(p.map(|q| i32::from(q) + 128), [170, 63, 23]);
/// ```
///
/// # Weights file
///
/// Tensors of the `nn.Sequential` module `{m}` (the float `Softmax`'s):
///
/// | tensor | dtype, shape | values |
/// | --- | --- | --- |
/// | `{m}.multiplier` | `I32 [1]` | `0..=2^31-1`: `s·2^26`'s significand |
/// | `{m}.exponent` | `I32 [1]` | `0..=31`: its power of two |
/// | `{m}.input_scale`, `{m}.input_zero_point` | `F32 []`, `I8 []` | the logits' quantization |
///
/// The output's quantization is not in the file: it is always [`SOFTMAX_OUTPUT`].
///
/// At most 4,096 classes (the sum of their `exp`s is held in Q12.19); more do not compile:
///
/// ```compile_fail,E0080
/// use constmat::nn::{Layer, QSoftmax};
/// use constmat::quant::Quantization;
///
/// let softmax = QSoftmax::<5000>::new(Quantization { scale: 0.1, zero_point: 0 });
/// softmax.forward_one(&[0; 5000], &mut [0; 5000]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QSoftmax<const N: usize> {
    /// The logits' quantization (only the scale matters: the zero point cancels).
    pub input: Quantization,
    /// The significand of `s·2^26` (in Q5.26, a difference of one level is `s`).
    pub multiplier: i32,
    /// Its power of two, `0..=31`: `s·2^26 = multiplier · 2^(exponent - 31)`.
    pub exponent: i32,
}

impl<const N: usize> QSoftmax<N> {
    /// The bound on the classes: their `exp`s, each at most 1, sum within Q12.19's range.
    const SHAPE: () = if N > 1 << SOFTMAX_SUM_INTEGER_BITS {
        crate::format::Message::new()
            .str("QSoftmax: ")
            .number(N)
            .str(" classes, more than the 4096 whose probabilities' sum int8's softmax holds")
            .panic()
    };

    /// The softmax of logits quantized with `input` (TensorFlow Lite's
    /// `PreprocessSoftmaxScaling` with beta 1: `s·2^26` held to `[1, 2^31 - 1]`, then its
    /// significand and exponent as `QuantizeMultiplier` rounds them). A scale of `2^-26` or
    /// less, which TensorFlow Lite refuses (its interpreter aborts), is taken as `2^-26`: the
    /// logits then differ by too little to matter, and the probabilities are nearly uniform.
    ///
    /// # Panics
    ///
    /// When the scale is not positive and finite.
    #[must_use]
    pub fn new(input: Quantization) -> Self {
        // The class bound, checked where the layer is made (the error's note points there).
        let () = Self::SHAPE;
        assert!(
            input.scale.is_finite() && input.scale > 0.0,
            "a softmax's input scale is positive and finite, not {}",
            input.scale
        );
        let Multiplier {
            multiplier,
            exponent,
        } = softmax_input_multiplier(input.scale);
        Self {
            input,
            multiplier,
            exponent,
        }
    }

    /// The most negative difference from the row's largest logit that counts: TensorFlow Lite's
    /// `-CalculateInputRadius(5, exponent)`, `-⌊31·2^26 / 2^exponent⌋`. Larger differences would
    /// overflow the shift; their `exp` is 0 at int8's resolution anyway.
    const fn diff_min(&self) -> i32 {
        let exponent = if self.exponent < 0 {
            0
        } else if self.exponent > 31 {
            31
        } else {
            self.exponent
        };
        -((((1_i64 << SOFTMAX_DIFF_INTEGER_BITS) - 1) << (31 - SOFTMAX_DIFF_INTEGER_BITS))
            >> exponent) as i32
    }

    /// `exp(s·diff)` in Q0.31, for a difference the softmax counts.
    #[inline]
    fn exp_of(&self, diff: i32) -> i32 {
        // diff >= diff_min, so diff·2^exponent fits an i32.
        let scaled = saturating_rounding_doubling_high_mul(
            diff.wrapping_mul(1_i32.wrapping_shl(self.exponent as u32)),
            self.multiplier,
        );
        exp_on_negative_values(scaled)
    }

    fn forward_sample(&self, x: &[i8; N], y: &mut [i8; N]) {
        let () = Self::SHAPE;
        let Some(&max) = x.iter().max() else {
            return;
        };
        let diff_min = self.diff_min();
        let diffs = x.map(|q| i32::from(q) - i32::from(max));
        // Σ exp, in Q12.19.
        let mut sum = 0_i32;
        for &d in &diffs {
            if d >= diff_min {
                sum = sum.wrapping_add(multiply_by_power_of_two(
                    self.exp_of(d),
                    -SOFTMAX_SUM_INTEGER_BITS,
                ));
            }
        }
        let (scale, bits_over_unit) = reciprocal(sum, SOFTMAX_SUM_INTEGER_BITS);
        // exp·(1/sum) is Q0.31; to 1/256 steps: a right shift by 31 - 8, and the reciprocal's
        // power of two. A shift past 31 (a sum of at least 512, many flat classes) leaves
        // less than half a step of a Q0.31 value: 0 (TensorFlow Lite's shift is undefined
        // there).
        let shift = bits_over_unit + 31 - 8;
        for (&d, q) in diffs.iter().zip(y.iter_mut()) {
            *q = if d >= diff_min {
                let product = saturating_rounding_doubling_high_mul(scale, self.exp_of(d));
                let p = if shift > 31 {
                    0
                } else {
                    rounding_divide_by_power_of_two(product, shift.max(0))
                };
                (p - 128).clamp(-128, 127) as i8
            } else {
                -128
            };
        }
    }
}

impl<const N: usize> Layer for QSoftmax<N> {
    type In = [i8; N];
    type Out = [i8; N];

    /// `Softmax(dim=1)` in int8: one module, its [tensors](QSoftmax#weights-file).
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[
            int8_tensor!("multiplier", I32, [1], MULTIPLIER_RANGE),
            int8_tensor!("exponent", I32, [1], SOFTMAX_EXPONENT_RANGE),
            int8_tensor!("input_scale", F32, [], scale),
            int8_tensor!("input_zero_point", I8, [], None),
        ],
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[[i8; N]; B], y: &mut [[i8; N]; B]) {
        for (x, y) in x.iter().zip(y) {
            self.forward_sample(x, y);
        }
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

#[cfg(feature = "alloc")]
impl<const N: usize> super::Weights for QSoftmax<N> {
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        match k {
            0 => out.extend_from_slice(&self.multiplier.to_le_bytes()),
            1 => out.extend_from_slice(&self.exponent.to_le_bytes()),
            2 => out.extend_from_slice(&self.input.scale.to_le_bytes()),
            3 => out.push(self.input.zero_point as u8),
            _ => panic!("an int8 softmax has 4 tensors; asked for tensor {k}"),
        }
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let mut word = |k: usize| tensor(k)[..4].try_into().expect("4 bytes");
        let multiplier = i32::from_le_bytes(word(0));
        let exponent = i32::from_le_bytes(word(1));
        let scale = f32::from_le_bytes(word(2));
        Self {
            input: Quantization {
                scale,
                zero_point: tensor(3)[0] as i8,
            },
            multiplier,
            exponent,
        }
    }
}

/// A baked int8 softmax's parameters and first problem, decoded from the file `F`.
struct Decoded<F>(core::marker::PhantomData<fn() -> F>);

impl<F: SafetensorsFile> Decoded<F> {
    const PARTS: (Quantization, i32, i32, Option<Error>) = {
        let source = Source::Index(&F::INDEX);
        let module = F::FIRST_MODULE;
        let zero = Quantization {
            scale: 0.0,
            zero_point: 0,
        };
        match (
            decode::i32_vector_from::<1>(source, module, "multiplier", MULTIPLIER_RANGE),
            decode::i32_vector_from::<1>(source, module, "exponent", SOFTMAX_EXPONENT_RANGE),
            decode::f32_scale_from(source, module, "input_scale"),
            decode::i8_scalar_from(source, module, "input_zero_point"),
        ) {
            (Ok([m]), Ok([e]), Ok(scale), Ok(zero_point)) => {
                (Quantization { scale, zero_point }, m, e, None)
            }
            (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => {
                (zero, 0, 0, Some(e))
            }
        }
    };
}

impl<F: SafetensorsFile, const N: usize> Bake<F> for QSoftmax<N> {
    const BAKED: Self = {
        let (input, multiplier, exponent, _) = Decoded::<F>::PARTS;
        Self {
            input,
            multiplier,
            exponent,
        }
    };
    const ERROR: Option<Error> = Decoded::<F>::PARTS.3;
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use num_traits::Float;

    use super::{QSoftmax, SOFTMAX_OUTPUT};
    use crate::nn::quantize::outputs_of;
    use crate::nn::{Quantize, QuantizeError, QuantizeSample, Sample, Softmax};
    use crate::quant::Quantization;

    /// The int8 softmax of the quantized logits; its output is always quantized with
    /// [`SOFTMAX_OUTPUT`], whatever the calibration.
    impl<T, const N: usize> Quantize for Softmax<T, N>
    where
        T: Sample + Float + QuantizeSample<Quantized = i8>,
    {
        type Quantized = QSoftmax<N>;

        fn quantize_layer(
            &self,
            _layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            Ok((
                QSoftmax::new(input),
                SOFTMAX_OUTPUT,
                outputs_of(self, samples),
            ))
        }
    }
}
