//! Post-training quantization: a trained float net to its int8 form ([`quantize`]).
//!
//! Layer by layer, from the input: each layer is given the quantization of its input and the
//! float inputs it sees on a few hundred calibration samples; it runs them through its float
//! forward pass, takes the range of its outputs (min/max) as its output's quantization, and
//! builds its int8 form from its weights (symmetric, one scale per output) and the two
//! quantizations. Its float outputs are the next layer's calibration inputs. Scheme and
//! choices: `docs/quantization.md`.

use alloc::vec::Vec;
use core::fmt;

use num_traits::Float;

use super::{Chain, Layer, Sample, argmax};
use crate::kernels::InstructionSet;
use crate::quant::{Multiplier, Quantization};

/// Why a net could not be quantized. Nothing is changed by a failed quantization.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum QuantizeError {
    /// No calibration samples were given: the activations' ranges cannot be measured.
    NoCalibrationSamples,
    /// A weight, bias, calibration input or calibration output of layer `layer` (counted from
    /// 0) is NaN, infinite, or (in an `f64` net) beyond `f32`'s range.
    NotFinite {
        /// The layer, counted from the input.
        layer: usize,
        /// What was not finite: "weight", "bias", "calibration input" or "output".
        what: &'static str,
    },
    /// Every value of every calibration sample is 0 (blank images): there is no range to
    /// measure, and the input's quantization would saturate on every real input.
    BlankCalibration,
    /// The calibration samples span `[min, max]` (widened to contain 0), not all 0 but
    /// narrower than [`Quantization::MIN_RANGE`] (`255 · f32::EPSILON`, about `3.04e-5`): the
    /// input's scale would be held at `f32::EPSILON`, the samples would fall on fewer than 255
    /// of int8's levels (on the zero point alone below `6e-8`: samples of `1e-30` are blank to
    /// the int8 net), and real inputs of the usual sizes would saturate.
    ///
    /// ```
    /// use constmat::Matrix;
    /// use constmat::nn::{Dense, QuantizeError, quantize};
    ///
    /// let net: Dense<f32, 2, 1> = Dense::new(Matrix::from_rows([[1.0, -1.0]]), Matrix::from_rows([[0.0]]));
    /// let err = quantize(&net, &[[1e-30, 0.0]; 10]).unwrap_err();
    /// assert_eq!(err, QuantizeError::NarrowCalibration { min: 0.0, max: 1e-30 });
    /// // Inputs scaled to about [0, 1] calibrate.
    /// assert!(quantize(&net, &[[1.0, 0.0], [0.0, 0.5]]).is_ok());
    /// ```
    NarrowCalibration {
        /// The least calibration value (at most 0).
        min: f32,
        /// The greatest calibration value (at least 0).
        max: f32,
    },
    /// Layer `layer`'s requantization multiplier `s_in·s_w / s_out` is too large for the fixed
    /// point form (at least `2^30`): its output's range is tiny against its input's.
    Multiplier {
        /// The layer, counted from the input.
        layer: usize,
        /// The multiplier.
        value: f64,
    },
}

impl fmt::Display for QuantizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoCalibrationSamples => write!(
                f,
                "no calibration samples: quantizing needs a few hundred inputs to measure the activations' ranges"
            ),
            Self::NotFinite { layer, what } => {
                let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                write!(
                    f,
                    "layer {layer}: {article} {what} is NaN, infinite or beyond f32's range, which int8 cannot represent"
                )
            }
            Self::BlankCalibration => write!(
                f,
                "the calibration samples are all 0, so there is no range to measure (blank \
                 images?): calibrate on real inputs"
            ),
            Self::NarrowCalibration { min, max } => write!(
                f,
                "the calibration samples span only [{min:?}, {max:?}], narrower than {:?} \
                 (255 x f32::EPSILON), the narrowest range int8 quantizes onto its 256 levels: \
                 calibrate on real inputs, or scale the inputs (to about [0, 1]) before training \
                 and quantizing",
                Quantization::MIN_RANGE
            ),
            Self::Multiplier { layer, value } => write!(
                f,
                "layer {layer}: the requantization multiplier {value:e} is at least 2^30 (its outputs' range is tiny against its inputs')"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for QuantizeError {}

/// A float layer, or net, with an int8 form.
///
/// Implemented for [`Dense`](super::Dense), [`Conv2d`](super::Conv2d) and
/// [`DepthwiseConv2d`](super::DepthwiseConv2d) with an activation that is a clamp
/// ([`Identity`](super::Identity), [`Relu`](super::Relu), [`Relu6`](super::Relu6): a sigmoid
/// or tanh has no int8 form, and quantizing a net with one does not compile);
/// [`MaxPool2d`](super::MaxPool2d), [`AvgPool2d`](super::AvgPool2d),
/// [`ZeroPad2d`](super::ZeroPad2d), [`Flatten`](super::Flatten) and
/// [`Dropout`](super::Dropout) (which keep their input's quantization; dropout is the identity
/// at inference); [`Softmax`](super::Softmax) (its output always
/// [`SOFTMAX_OUTPUT`](super::SOFTMAX_OUTPUT)); the residual blocks
/// [`Residual`](super::Residual) and [`ProjectedResidual`](super::ProjectedResidual); and
/// [`Chain`]s of these. Batch normalization is folded into the layer before it first
/// ([`BatchNorm2d::fold_into`](super::BatchNorm2d)). Each layer kind's impl is in its int8
/// form's file (`qdense.rs`, `qconv.rs`, `qdepthwise.rs`, `qsoftmax.rs`, `qresidual.rs`,
/// `pad.rs`) or its own (`pool.rs`, `avg_pool.rs`, `flatten.rs`, `dropout.rs`).
///
/// Errors number the layers from the input, one per layer of the float net; a residual block
/// counts its branch's layers, then its shortcut's, then one for its sum.
pub trait Quantize: Layer {
    /// The int8 form, its parameters on the heap (convert it with
    /// [`Layer::to_store`] to bake it).
    type Quantized: Layer;

    /// The int8 form of this layer, `layer` counted from the input, whose input has the
    /// quantization `input` and takes the values `samples` on the calibration data; with the
    /// quantization of its output and the float outputs for `samples`.
    ///
    /// # Errors
    ///
    /// As [`quantize`].
    #[allow(clippy::type_complexity)]
    fn quantize_layer(
        &self,
        layer: usize,
        input: Quantization,
        samples: &[Self::In],
    ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError>;

    /// The number of layers (a chain's sum), for numbering them in errors.
    const LAYERS: usize = 1;
}

/// A quantized net with the quantizations of its input and output: what [`quantize`] returns,
/// and what [`Quantized::predict`] needs to feed it float samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized<Q> {
    /// The int8 net.
    pub net: Q,
    /// The quantization of its input: `x_q = round(x / scale) + zero_point`.
    pub input: Quantization,
    /// The quantization of its output: `y ≈ scale · (y_q - zero_point)`.
    pub output: Quantization,
}

impl<Q: Layer> Quantized<Q> {
    /// The int8 net's outputs for the float sample `x`, quantized with [`Quantized::input`]
    /// (the only float arithmetic: a microcontroller without an FPU quantizes its input
    /// otherwise, e.g. with a table of 256 entries for 8-bit pixels, and calls
    /// [`Layer::forward_one`] on `net`).
    ///
    /// Quantizing saturates: a value beyond the calibrated range becomes the nearest end of it
    /// (an infinity, the end on its side), and a NaN becomes the zero point, as
    /// [`Quantization::quantize`](crate::quant::Quantization::quantize) does. So unlike the
    /// float net, whose outputs a NaN input turns into NaNs, the int8 net answers with ordinary
    /// numbers: check the input for NaNs first where one can occur.
    pub fn forward_float<S: QuantizeSample<Quantized = Q::In>>(&self, x: &S) -> Q::Out {
        let mut out = Q::Out::ZERO;
        self.net.forward_one(&x.quantize(self.input), &mut out);
        out
    }
}

impl<Q: Layer<Out = [i8; C]>, const C: usize> Quantized<Q> {
    /// The class of the float sample `x`: the index of the int8 net's largest output (the
    /// first of equal ones). A NaN in `x` is quantized to the zero point (see
    /// [`forward_float`](Self::forward_float)), so the answer is a class like any other, where
    /// the float net's [`Predict::predict`](super::Predict::predict) gives 0 (the first NaN).
    pub fn predict<S: QuantizeSample<Quantized = Q::In>>(&self, x: &S) -> usize {
        argmax(&self.forward_float(x))
    }
}

/// A float sample (a value, or an array of them) and its int8 form.
pub trait QuantizeSample: Sample {
    /// The same shape in `i8`.
    type Quantized: Sample;
    /// Each value quantized with `q`.
    fn quantize(&self, q: Quantization) -> Self::Quantized;
    /// Widens `[min, max]` to contain every value; `false` when a value is NaN or infinite.
    fn widen_range(&self, range: &mut (f64, f64)) -> bool;
}

impl QuantizeSample for f32 {
    type Quantized = i8;
    fn quantize(&self, q: Quantization) -> i8 {
        q.quantize(*self)
    }
    fn widen_range(&self, range: &mut (f64, f64)) -> bool {
        let v = f64::from(*self);
        range.0 = range.0.min(v);
        range.1 = range.1.max(v);
        v.is_finite()
    }
}

impl QuantizeSample for f64 {
    type Quantized = i8;
    fn quantize(&self, q: Quantization) -> i8 {
        q.quantize(*self as f32)
    }
    fn widen_range(&self, range: &mut (f64, f64)) -> bool {
        range.0 = range.0.min(*self);
        range.1 = range.1.max(*self);
        self.is_finite()
    }
}

impl<S: QuantizeSample, const N: usize> QuantizeSample for [S; N] {
    type Quantized = [S::Quantized; N];
    fn quantize(&self, q: Quantization) -> [S::Quantized; N] {
        core::array::from_fn(|i| self[i].quantize(q))
    }
    fn widen_range(&self, range: &mut (f64, f64)) -> bool {
        self.iter()
            .fold(true, |finite, v| v.widen_range(range) & finite)
    }
}

/// The range of `samples` (layer `layer`'s `what`: "calibration input" or "output"), widened
/// to contain 0.
///
/// # Errors
///
/// [`QuantizeError::NotFinite`] when a value is NaN, infinite or beyond `f32`'s range.
fn range_of<S: QuantizeSample>(
    samples: &[S],
    layer: usize,
    what: &'static str,
) -> Result<(f32, f32), QuantizeError> {
    let mut range = (0.0_f64, 0.0_f64);
    let finite = samples
        .iter()
        .fold(true, |finite, s| s.widen_range(&mut range) & finite);
    // An f64 value beyond f32's range would become an infinite bound: refused as not finite.
    let (min, max) = (range.0 as f32, range.1 as f32);
    if finite && min.is_finite() && max.is_finite() {
        Ok((min, max))
    } else {
        Err(QuantizeError::NotFinite { layer, what })
    }
}

/// The int8 form of a trained net, calibrated on `calibration` (a few hundred training
/// samples: the activations' ranges are their min/max over them), following TensorFlow Lite's
/// int8 scheme: weights symmetric per output channel, activations with a scale and zero point
/// per tensor, biases in `i32`, requantization in fixed point (`docs/quantization.md`).
///
/// The result does not depend on the CPU: the calibration's float activations are computed on
/// the portable loops ([`InstructionSet::Portable`]), whose sums have one order everywhere, so
/// every machine writes the same int8 bytes for the same net and samples.
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Dense, Layer, Relu, quantize};
///
/// type Net = constmat::net![Dense<f32, 2, 3, Relu>, Dense<f32, 3, 2>];
/// let net = Net::new(
///     Dense::new(
///         Matrix::from_rows([[1.0, 0.5], [-0.5, 1.0], [0.25, -1.0]]),
///         Matrix::from_rows([[0.1, 0.0, -0.1]]),
///     ),
///     Dense::new(Matrix::from_rows([[1.0, -1.0, 0.5], [-1.0, 1.0, 0.25]]), Matrix::from_rows([[0.0, 0.2]])),
/// );
/// let calibration: Vec<[f32; 2]> =
///     (0..200).map(|i| [(i % 20) as f32 / 10.0 - 1.0, (i / 20) as f32 / 5.0 - 1.0]).collect();
/// let int8 = quantize(&net, &calibration).unwrap();
/// // The int8 outputs, dequantized, are close to the float ones.
/// let x = [0.3, -0.7];
/// let mut want = [0.0; 2];
/// net.forward_one(&x, &mut want);
/// let got = int8.forward_float(&x).map(|q| int8.output.dequantize(q));
/// for (g, w) in got.iter().zip(want) {
///     assert!((g - w).abs() < 0.05, "{got:?} vs {want:?}");
/// }
/// assert_eq!(int8.predict(&x), constmat::nn::argmax(&want));
/// ```
///
/// # Errors
///
/// [`QuantizeError::NoCalibrationSamples`] for an empty `calibration`;
/// [`QuantizeError::BlankCalibration`] when its values are all 0, and
/// [`QuantizeError::NarrowCalibration`] when they span less than
/// [`Quantization::MIN_RANGE`] (about `3.04e-5`);
/// [`QuantizeError::NotFinite`] when a weight, bias, input or activation is NaN or infinite;
/// [`QuantizeError::Multiplier`] when a layer's output range is so narrow against its input's
/// that the requantization multiplier is out of the fixed-point range.
pub fn quantize<N>(net: &N, calibration: &[N::In]) -> Result<Quantized<N::Quantized>, QuantizeError>
where
    N: Quantize,
    N::In: QuantizeSample,
{
    if calibration.is_empty() {
        return Err(QuantizeError::NoCalibrationSamples);
    }
    let (min, max) = range_of(calibration, 0, "calibration input")?;
    // Samples that are all 0 (blank images) have no range: the input's scale would be the
    // smallest there is, and every real input would saturate. (A layer whose outputs are all 0
    // is another matter: the float net gives the same on those samples, and so does the int8.)
    if min == 0.0 && max == 0.0 {
        return Err(QuantizeError::BlankCalibration);
    }
    // Samples that are nearly blank (all within 3e-5 of 0) are refused too: their range would
    // get the floor scale, f32::EPSILON, so they would fall on a few levels, or on the zero
    // point alone, and a real input would saturate. (MNIST's [0, 1] is 33,000 times wider.)
    if f64::from(max) - f64::from(min) < f64::from(Quantization::MIN_RANGE) {
        return Err(QuantizeError::NarrowCalibration { min, max });
    }
    let input = Quantization::from_range(min, max);
    // The calibration's float outputs on the portable loops: the SIMD kernels sum in an order
    // that depends on the vector width, and a scale's last bit (so a multiplier) with it, while
    // an int8 net's bytes must not depend on the CPU that quantized it.
    let (net, output, _) = crate::kernels::with_instruction_set(InstructionSet::Portable, || {
        net.quantize_layer(0, input, calibration)
    })?;
    Ok(Quantized { net, input, output })
}

/// The float outputs of `layer` for `samples`, one by one.
pub(crate) fn outputs_of<L: Layer>(layer: &L, samples: &[L::In]) -> Vec<L::Out> {
    samples
        .iter()
        .map(|x| {
            let mut y = L::Out::ZERO;
            layer.forward_one(x, &mut y);
            y
        })
        .collect()
}

/// The float outputs of `layer` for `samples`, and the quantization of their range.
///
/// # Errors
///
/// [`QuantizeError::NotFinite`] when an output is NaN or infinite.
#[allow(clippy::type_complexity)]
pub(crate) fn calibrate<L>(
    layer: &L,
    index: usize,
    samples: &[L::In],
) -> Result<(Vec<L::Out>, Quantization), QuantizeError>
where
    L: Layer,
    L::Out: QuantizeSample,
{
    let outputs = outputs_of(layer, samples);
    let (min, max) = range_of(&outputs, index, "output")?;
    let output = Quantization::from_range(min, max);
    Ok((outputs, output))
}

/// Checks that a layer's weights and biases are finite and within `f32`'s range (before its
/// calibration, whose outputs a bad parameter would spoil, so that the error names the cause).
///
/// # Errors
///
/// [`QuantizeError::NotFinite`] for a weight or bias that is NaN or infinite.
pub(crate) fn check_parameters<T: Float>(
    layer: usize,
    weights: &[T],
    bias: &[T],
) -> Result<(), QuantizeError> {
    // Finite, and within f32's range: the scales are f32.
    let finite = |values: &[T]| {
        values
            .iter()
            .all(|v| v.to_f64().is_some_and(|v| (v as f32).is_finite()))
    };
    let not_finite = |what| QuantizeError::NotFinite { layer, what };
    if !finite(weights) {
        return Err(not_finite("weight"));
    }
    if !finite(bias) {
        return Err(not_finite("bias"));
    }
    Ok(())
}

/// The int8 parameters of a layer whose output `o` is `bias[o] + Σ weights[o]·inputs` (a
/// dense layer's row, a convolution's filter): each row quantized symmetrically into
/// `q_weights` (the same layout), the bias into the accumulator's scale with the input's zero
/// point folded in, and the requantization multipliers.
///
/// # Errors
///
/// [`QuantizeError::Multiplier`] for a multiplier out of the fixed-point range.
#[allow(clippy::type_complexity)]
pub(crate) fn quantize_rows<T: Float, const O: usize>(
    layer: usize,
    weights: &[T],
    bias: &[T; O],
    (input, output): (Quantization, Quantization),
    q_weights: &mut [i8],
) -> Result<([i32; O], [Multiplier; O]), QuantizeError> {
    let to_f64 = |v: T| v.to_f64().unwrap_or(f64::NAN);
    let row_len = weights.len() / O.max(1);
    let s_in = f64::from(input.scale);
    let mut q_bias = [0_i32; O];
    let mut multipliers = [Multiplier::from_real(0.0); O];
    let rows = weights.chunks_exact(row_len.max(1));
    for (o, (row, q_row)) in rows
        .zip(q_weights.chunks_exact_mut(row_len.max(1)))
        .enumerate()
    {
        let max_abs = row.iter().fold(0.0_f64, |m, &w| m.max(to_f64(w).abs()));
        if !(max_abs as f32).is_finite() {
            return Err(QuantizeError::NotFinite {
                layer,
                what: "weight",
            });
        }
        // The row's scale: its largest weight onto 127, or coarser when the bias would not fit
        // the accumulator (|b_q| <= 2^29) in the scale s_in·s_w: a row of zeros, or an input
        // whose calibrated range is a point (a ReLU that never fired), with a bias.
        let bias_scale = (to_f64(bias[o]).abs() / (s_in * f64::from(1_u32 << 29))) as f32;
        let mut w_q = Quantization::symmetric(max_abs as f32);
        if bias_scale > w_q.scale {
            w_q.scale = bias_scale;
        }
        for (q, &w) in q_row.iter_mut().zip(row) {
            *q = w_q.quantize(to_f64(w) as f32);
        }
        let accumulator_scale = s_in * f64::from(w_q.scale);
        // b_q = round(b / (s_in·s_w)) - z_in·Σ W_q: the zero point's term folded in. The scale
        // above keeps the first term within 2^29 (the clamp only guards the rounding of the
        // f32 scale).
        let rounded = Float::round(to_f64(bias[o]) / accumulator_scale)
            .clamp(-f64::from(1_u32 << 30), f64::from(1_u32 << 30)) as i32;
        let weight_sum: i32 = q_row.iter().map(|&q| i32::from(q)).sum();
        q_bias[o] = rounded.saturating_sub(i32::from(input.zero_point) * weight_sum);
        let m = accumulator_scale / f64::from(output.scale);
        if m.partial_cmp(&1_073_741_824.0) != Some(core::cmp::Ordering::Less) {
            return Err(QuantizeError::Multiplier { layer, value: m });
        }
        multipliers[o] = Multiplier::from_real(m);
    }
    Ok((q_bias, multipliers))
}

impl<A, N> Quantize for Chain<A, N>
where
    A: Quantize,
    N: Quantize + Layer<In = A::Out>,
    N::Quantized: Layer<In = <A::Quantized as Layer>::Out>,
{
    type Quantized = Chain<A::Quantized, N::Quantized>;
    const LAYERS: usize = A::LAYERS + N::LAYERS;

    fn quantize_layer(
        &self,
        layer: usize,
        input: Quantization,
        samples: &[Self::In],
    ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
        let (first, middle, middle_values) = self.first.quantize_layer(layer, input, samples)?;
        let (rest, output, outputs) =
            self.rest
                .quantize_layer(layer + A::LAYERS, middle, &middle_values)?;
        Ok((Chain::new(first, rest), output, outputs))
    }
}

#[cfg(all(test, feature = "safetensors"))]
mod tests {
    use alloc::string::ToString;
    use alloc::vec::Vec;

    use super::{QuantizeError, quantize};
    use crate::Matrix;
    use crate::io::safetensors as st;
    use crate::nn::{Chain, Dense, Layer, Quantize, Relu};
    use crate::quant::Quantization;

    type Two = Chain<Dense<f32, 3, 4, Relu>, Dense<f32, 4, 2>>;

    /// Weights of about `w`, the bias `b`.
    fn net(w: f32, b: f32) -> Two {
        Chain::new(
            Dense::new(
                Matrix::from_fn(|o, i| w * ([1.0, -0.5, 0.25][i] * (o + 1) as f32 / 4.0)),
                Matrix::from_fn(|_, o| if o % 2 == 0 { b } else { -b }),
            ),
            Dense::new(
                Matrix::from_fn(|o, i| w * (if (o + i) % 2 == 0 { 0.5 } else { -1.0 })),
                Matrix::from_fn(|_, _| b),
            ),
        )
    }

    #[test]
    fn an_output_beyond_f32_is_refused_as_an_output() {
        let err = quantize(&net(3e38, 0.0), &[[10.0, 0.0, 0.0]]).unwrap_err();
        assert_eq!(
            err,
            QuantizeError::NotFinite {
                layer: 0,
                what: "output"
            }
        );
        assert_eq!(
            err.to_string(),
            "layer 0: an output is NaN, infinite or beyond f32's range, which int8 cannot represent"
        );
    }

    /// Weights, biases and calibration ranges from the least to the greatest the quantizer
    /// takes: it never panics (debug builds check every operation; the multiplier
    /// `s_in·s_w / s_out` is computed in f64 from scales of at least `f32::MIN_POSITIVE` and
    /// checked before it is made fixed point), and every net it gives writes a file whose
    /// scales the loader accepts (issue 44: positive normal numbers) and that computes.
    #[test]
    fn extreme_ranges_give_nets_that_load_or_errors_never_panics() {
        let (mut quantized, mut refused) = (0, 0);
        for w in [1e-38_f32, 1e-30, 1e-3, 1.0, 1e3, 1e30, 3e38] {
            for b in [0.0, 1e-30, 1.0, 1e30] {
                for size in [Quantization::MIN_RANGE, 1e-3, 1.0, 1e30, 3e38] {
                    let calibration: Vec<[f32; 3]> = (0..20)
                        .map(|k| {
                            let t = k as f32 / 19.0;
                            [size * t, -size * (1.0 - t), size * 0.5]
                        })
                        .collect();
                    match quantize(&net(w, b), &calibration) {
                        Ok(q) => {
                            quantized += 1;
                            let bytes = st::to_bytes(&q.net, &[]);
                            let back: <Two as Quantize>::Quantized = st::from_bytes(&bytes)
                                .unwrap_or_else(|e| {
                                    panic!("w {w:e}, b {b:e}, range {size:e}: {e}")
                                });
                            assert!(back == q.net);
                            let mut out = [0_i8; 2];
                            back.forward_one(&[127, -128, 0], &mut out);
                            let _ = q.predict(&calibration[7]);
                        }
                        Err(QuantizeError::Multiplier { .. } | QuantizeError::NotFinite { .. }) => {
                            refused += 1;
                        }
                        Err(e) => panic!("w {w:e}, b {b:e}, range {size:e}: {e}"),
                    }
                }
            }
        }
        assert!(
            quantized > 0 && refused > 0,
            "{quantized} quantized, {refused} refused"
        );
    }
}
