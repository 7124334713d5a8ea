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

use super::shape::check_nonzero;
use super::{Bake, Identity, Inline, Layer, Relu, Relu6, SafetensorsFile, Sample, Store};
use crate::format::decode::{self, Source};
use crate::format::{Error, Message, NetSpec};
use crate::kernels;
use crate::quant::{Multiplier, Quantization};

/// The most products of an `i8` and a weight in `-127..=127` an `i32` accumulator sums without
/// overflowing, with room for a bias of up to `2^30`: `2^30 / (128 · 127)`.
pub(crate) const MOST_PRODUCTS: usize = (1 << 30) / (128 * 127);

/// The activations an int8 layer can apply: those that are a clamp of the requantized output.
/// (A sigmoid or tanh would need a lookup table; quantizing a layer with one does not compile.)
///
/// ```
/// use constmat::nn::{Identity, QuantizedActivation, Relu, Relu6};
/// use constmat::quant::Quantization;
///
/// // Outputs of scale 0.05 and zero point -100: the real 0 is -100, the real 6 is 20.
/// let output = Quantization { scale: 0.05, zero_point: -100 };
/// assert_eq!(Identity::output_range(output), (-128, 127));
/// assert_eq!(Relu::output_range(output), (-100, 127));
/// assert_eq!(Relu6::output_range(output), (-100, 20));
/// ```
pub trait QuantizedActivation: super::Activation {
    /// The clamp `(low, high)` of the int8 outputs quantized with `output`: the quantized
    /// ends of the activation's range within int8's (TensorFlow Lite's
    /// `CalculateActivationRangeQuantized`, which rounds `6 / scale` in `f32`, halves away from
    /// zero).
    fn output_range(output: Quantization) -> (i8, i8);
}

impl QuantizedActivation for Identity {
    fn output_range(_: Quantization) -> (i8, i8) {
        (-128, 127)
    }
}

impl QuantizedActivation for Relu {
    fn output_range(output: Quantization) -> (i8, i8) {
        (output.zero_point, 127)
    }
}

impl QuantizedActivation for Relu6 {
    fn output_range(output: Quantization) -> (i8, i8) {
        // z + round(6 / s), computed as TensorFlow Lite does (in f32); a scale so small that
        // 6 is beyond int8's levels leaves the high end at 127.
        let six = num_traits::Float::round(f64::from(6.0_f32 / output.scale))
            + f64::from(output.zero_point);
        (output.zero_point, six.clamp(-128.0, 127.0) as i8)
    }
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
/// use constmat::quant::{Multiplier, Quantization};
///
/// // Two outputs: the sum and the difference of two inputs (M = 1), zero points 0.
/// let q = Quantization { scale: 0.5, zero_point: 0 };
/// let layer: QDense<2, 2, Identity, Inline> =
///     QDense::new([[1, 1], [1, -1]], [0, 0], [Multiplier::from_real(1.0); 2], q, q);
/// let mut out = [0; 2];
/// layer.forward_one(&[100, 20], &mut out);
/// assert_eq!(out, [120, 80]);
/// layer.forward_one(&[127, 127], &mut out);
/// assert_eq!(out, [127, 0]); // 254 saturates at 127
/// ```
///
/// # Weights file
///
/// An int8 layer's tensors, named as the float layer's `nn.Sequential` module `{m}` (so the
/// int8 file of a net has the float file's names, and more):
///
/// | tensor | dtype, shape | values |
/// | --- | --- | --- |
/// | `{m}.weight` | `I8 [O, I]` (a convolution's `[OC, C, K, K]`) | `-127..=127` |
/// | `{m}.bias` | `I32 [O]` | the input's zero point folded in |
/// | `{m}.multiplier` | `I32 [O]` | `0..=2^31-1` |
/// | `{m}.exponent` | `I32 [O]` | `-31..=30`, so that the shifts fit |
/// | `{m}.input_scale`, `{m}.input_zero_point` | `F32 []`, `I8 []` | the input's quantization: a positive normal scale, any zero point |
/// | `{m}.output_scale`, `{m}.output_zero_point` | `F32 []`, `I8 []` | the output's quantization: the same |
///
/// The scales are what the integers stand for (PyTorch's quantized modules store theirs as
/// 0-dimensional tensors too); inference reads none of them, only the zero points. Loading
/// and baking reject a value outside its range ([`format::Error::OutOfRange`](crate::format::Error::OutOfRange))
/// and a scale that is zero, negative or subnormal, from `f32::MIN_POSITIVE` up only
/// ([`format::Error::ScaleOutOfRange`](crate::format::Error::ScaleOutOfRange): the caller
/// quantizes the net's input with its first layer's scale).
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
    /// The input's quantization `(s_in, z_in)`. The forward pass does not read it (`z_in` is
    /// folded into the bias, `s_in` into the multipliers); it says how to quantize the net's
    /// input when this is its first layer.
    pub input: Quantization,
    /// The output's quantization `(s_out, z_out)`: `z_out` is added to every output (and is
    /// ReLU's floor), `s_out` says what the outputs stand for.
    pub output: Quantization,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<const I: usize, const O: usize, A: QuantizedActivation, S: Store> QDense<I, O, A, S> {
    /// The shape rules: neither width is 0, and the accumulator cannot overflow: `I` products
    /// of at most `128 · 127` in magnitude (the weights are in `-127..=127`) leave room in an
    /// `i32` for a bias of up to `2^30`.
    pub(crate) const SHAPE: () = {
        check_nonzero("QDense", "inputs", I);
        check_nonzero("QDense", "outputs", O);
        if I > MOST_PRODUCTS {
            Message::new()
                .str("QDense: ")
                .number(I)
                .str(" inputs could overflow the i32 accumulator (at most ")
                .number(MOST_PRODUCTS)
                .str(", so that products of at most 128 x 127 sum within 2^30)")
                .panic()
        }
    };

    /// A layer from its integer parameters: the weight `[O][I]`, the bias with the input's zero
    /// point folded in, the per-output multipliers, and the quantizations of the input and the
    /// output.
    #[must_use]
    pub fn new(
        weight: [[i8; I]; O],
        bias: [i32; O],
        multipliers: [Multiplier; O],
        input: Quantization,
        output: Quantization,
    ) -> Self {
        let () = Self::SHAPE;
        Self {
            weight: S::matrix_copied(&weight),
            bias: S::vector_copied(&bias),
            multiplier: S::vector_copied(&multipliers.map(|m| m.multiplier)),
            exponent: S::vector_copied(&multipliers.map(|m| m.exponent)),
            input,
            output,
            activation: A::VALUE,
        }
    }

    /// The outputs of one sample: per output, the dot product, the bias, the requantization,
    /// the clamp.
    #[inline]
    fn forward_sample(&self, x: &[i8; I], y: &mut [i8; O]) {
        let () = Self::SHAPE;
        let weight = S::matrix(&self.weight);
        let ((bias, multiplier, exponent), range) = kernel_requantization::<A, S, O>(
            (&self.bias, &self.multiplier, &self.exponent),
            self.output,
        );
        // Σ_i W_q[o][i]·x_q[i] for every output: i8 products summed in i32.
        let mut dots = [0_i32; O];
        kernels::dot_rows_i8(weight.as_flattened(), x, &mut dots);
        // q_out[o] = clamp(z_out + M[o]·(dot + b_q[o])).
        kernels::requantize_i8(&dots, (bias, multiplier, exponent), range, y);
    }
}

impl<const I: usize, const O: usize, A: QuantizedActivation, S: Store> Layer
    for QDense<I, O, A, S>
{
    type In = [i8; I];
    type Out = [i8; O];

    /// `Linear(I, O)` then the activation's module, in int8: the weight (`I8 [O, I]`, values in
    /// `-127..=127`), then [the tensors every int8 layer has](crate::nn::QDense#weights-file).
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &int8_tensors!([O, I], O),
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
            input: self.input,
            output: self.output,
            activation: A::VALUE,
        }
    }
}

/// The ranges of an int8 layer's integer tensors (see [`QDense`'s weights file](QDense#weights-file)).
pub(crate) const WEIGHT_RANGE: Option<(i32, i32)> = Some((-127, 127));
pub(crate) const MULTIPLIER_RANGE: Option<(i32, i32)> = Some((0, i32::MAX));
pub(crate) const EXPONENT_RANGE: Option<(i32, i32)> = Some((-31, 30));

/// The tensors of an int8 layer whose weight has the shape `$weight` and which has `$n`
/// outputs (or filters), in the order of its [`SPEC`](Layer::SPEC).
macro_rules! int8_tensors {
    ([$($weight:expr),+], $n:expr) => {
        [
            $crate::format::TensorSpec {
                module: 0,
                field: "weight",
                dtype: $crate::format::Dtype::I8,
                shape: &[$($weight),+],
                range: $crate::nn::qdense::WEIGHT_RANGE,
                scale: false,
                buffer: false,
            },
            $crate::nn::qdense::int8_tensor!("bias", I32, [$n], None),
            $crate::nn::qdense::int8_tensor!("multiplier", I32, [$n], $crate::nn::qdense::MULTIPLIER_RANGE),
            $crate::nn::qdense::int8_tensor!("exponent", I32, [$n], $crate::nn::qdense::EXPONENT_RANGE),
            $crate::nn::qdense::int8_tensor!("input_scale", F32, [], scale),
            // Every i8 is a zero point (TensorFlow Lite's int8 activations: -128..=127).
            $crate::nn::qdense::int8_tensor!("input_zero_point", I8, [], None),
            $crate::nn::qdense::int8_tensor!("output_scale", F32, [], scale),
            $crate::nn::qdense::int8_tensor!("output_zero_point", I8, [], None),
        ]
    };
}
pub(crate) use int8_tensors;

/// One tensor of [`int8_tensors!`], on the layer's first module: an integer tensor with its
/// range, or (`scale`) a quantization scale.
macro_rules! int8_tensor {
    ($field:literal, $dtype:ident, [$($dim:expr),*], scale) => {
        $crate::format::TensorSpec {
            module: 0,
            field: $field,
            dtype: $crate::format::Dtype::$dtype,
            shape: &[$($dim),*],
            range: None,
            scale: true,
            buffer: false,
        }
    };
    ($field:literal, $dtype:ident, [$($dim:expr),*], $range:expr) => {
        $crate::format::TensorSpec {
            module: 0,
            field: $field,
            dtype: $crate::format::Dtype::$dtype,
            shape: &[$($dim),*],
            range: $range,
            scale: false,
            buffer: false,
        }
    };
}
pub(crate) use int8_tensor;

/// An int8 layer's requantization as the kernels take it: its per-filter `(bias, multiplier,
/// exponent)` and its output's `(zero point, low, high)`, the activation `A`'s clamp.
#[allow(clippy::type_complexity)] // the kernels' own argument tuples
pub(crate) fn kernel_requantization<'a, A: QuantizedActivation, S: Store, const N: usize>(
    (bias, multiplier, exponent): (
        &'a S::Vector<i32, N>,
        &'a S::Vector<i32, N>,
        &'a S::Vector<i32, N>,
    ),
    output: Quantization,
) -> ((&'a [i32; N], &'a [i32; N], &'a [i32; N]), (i8, i8, i8)) {
    let (low, high) = A::output_range(output);
    (
        (S::vector(bias), S::vector(multiplier), S::vector(exponent)),
        (output.zero_point, low, high),
    )
}

/// What an int8 layer has besides its weight, for `N` outputs: tensors 1 to 7 of
/// [`int8_tensors!`].
#[derive(Clone, Copy)]
pub(crate) struct Requantization<const N: usize> {
    pub(crate) bias: [i32; N],
    pub(crate) multiplier: [i32; N],
    pub(crate) exponent: [i32; N],
    pub(crate) input: Quantization,
    pub(crate) output: Quantization,
}

impl<const N: usize> Requantization<N> {
    /// All zeros, scales 0: what a layer that could not be baked holds (its error says why).
    pub(crate) const ZERO: Self = Self {
        bias: [0; N],
        multiplier: [0; N],
        exponent: [0; N],
        input: Quantization {
            scale: 0.0,
            zero_point: 0,
        },
        output: Quantization {
            scale: 0.0,
            zero_point: 0,
        },
    };

    /// Tensors 1 to 7 read from the file `bytes` at compile time, for the layer at `module`.
    #[allow(clippy::result_large_err)] // `format::Error` is `Copy` and heap-free on purpose
    pub(crate) const fn decode(source: Source<'_>, module: usize) -> Result<Self, Error> {
        macro_rules! tri {
            ($e:expr) => {
                match $e {
                    Ok(value) => value,
                    Err(e) => return Err(e),
                }
            };
        }
        Ok(Self {
            bias: tri!(decode::i32_vector_from(source, module, "bias", None)),
            multiplier: tri!(decode::i32_vector_from(
                source,
                module,
                "multiplier",
                MULTIPLIER_RANGE
            )),
            exponent: tri!(decode::i32_vector_from(
                source,
                module,
                "exponent",
                EXPONENT_RANGE
            )),
            input: Quantization {
                scale: tri!(decode::f32_scale_from(source, module, "input_scale")),
                zero_point: tri!(decode::i8_scalar_from(source, module, "input_zero_point")),
            },
            output: Quantization {
                scale: tri!(decode::f32_scale_from(source, module, "output_scale")),
                zero_point: tri!(decode::i8_scalar_from(source, module, "output_zero_point")),
            },
        })
    }
}

/// Writing and reading int8 layers' tensors as a file's bytes.
#[cfg(feature = "alloc")]
pub(crate) mod bytes {
    use alloc::vec::Vec;

    use crate::quant::Quantization;

    /// Appends tensor `k` (0 the weight, then as [`int8_tensors!`](super::int8_tensors)) of an
    /// int8 layer.
    pub(crate) fn write(
        k: usize,
        weight: &[i8],
        (bias, multiplier, exponent): (&[i32], &[i32], &[i32]),
        (input, output): (Quantization, Quantization),
        out: &mut Vec<u8>,
    ) {
        let words = |values: &[i32], out: &mut Vec<u8>| {
            for v in values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
        match k {
            0 => out.extend(weight.iter().map(|&w| w as u8)),
            1 => words(bias, out),
            2 => words(multiplier, out),
            3 => words(exponent, out),
            4 => out.extend_from_slice(&input.scale.to_le_bytes()),
            5 => out.push(input.zero_point as u8),
            6 => out.extend_from_slice(&output.scale.to_le_bytes()),
            7 => out.push(output.zero_point as u8),
            _ => panic!("an int8 layer has 8 tensors; asked for tensor {k}"),
        }
    }

    /// Fills `weight` from tensor 0 and returns tensors 1 to 7.
    pub(crate) fn read<'a, const N: usize>(
        tensor: &mut dyn FnMut(usize) -> &'a [u8],
        weight: &mut [i8],
    ) -> super::Requantization<N> {
        let bytes = tensor(0);
        assert!(
            bytes.len() >= weight.len(),
            "an int8 weight of {} bytes",
            weight.len()
        );
        for (w, &b) in weight.iter_mut().zip(bytes) {
            *w = b as i8;
        }
        let mut words = |k: usize| -> [i32; N] {
            let bytes = tensor(k);
            core::array::from_fn(|i| {
                i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4 bytes"))
            })
        };
        let (bias, multiplier, exponent) = (words(1), words(2), words(3));
        let mut quantization = |k: usize| Quantization {
            scale: f32::from_le_bytes(tensor(k)[..4].try_into().expect("4 bytes")),
            zero_point: tensor(k + 1)[0] as i8,
        };
        let (input, output) = (quantization(4), quantization(6));
        super::Requantization {
            bias,
            multiplier,
            exponent,
            input,
            output,
        }
    }
}

#[cfg(feature = "alloc")]
impl<const I: usize, const O: usize, A: QuantizedActivation, S: Store> super::Weights
    for QDense<I, O, A, S>
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        bytes::write(
            k,
            S::matrix(&self.weight).as_flattened(),
            (
                S::vector(&self.bias),
                S::vector(&self.multiplier),
                S::vector(&self.exponent),
            ),
            (self.input, self.output),
            out,
        );
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        // Filled in its storage (on the heap for `Heap`): a large weight would overflow the
        // stack as a temporary array.
        let mut weight = S::matrix_filled::<i8, O, I>(0);
        let r = bytes::read::<O>(tensor, S::matrix_mut(&mut weight).as_flattened_mut());
        Self {
            weight,
            bias: S::vector_copied(&r.bias),
            multiplier: S::vector_copied(&r.multiplier),
            exponent: S::vector_copied(&r.exponent),
            input: r.input,
            output: r.output,
            activation: A::VALUE,
        }
    }
}

/// A baked int8 dense layer's weight, other tensors and first problem, decoded from the file
/// `F` in one pass.
struct Decoded<F, const I: usize, const O: usize>(core::marker::PhantomData<fn() -> F>);

impl<F: SafetensorsFile, const I: usize, const O: usize> Decoded<F, I, O> {
    const PARTS: ([[i8; I]; O], Requantization<O>, Option<Error>) = match decode::i8_matrix_from(
        Source::Index(&F::INDEX),
        F::FIRST_MODULE,
        "weight",
        WEIGHT_RANGE,
    ) {
        Err(e) => ([[0; I]; O], Requantization::ZERO, Some(e)),
        Ok(weight) => match Requantization::decode(Source::Index(&F::INDEX), F::FIRST_MODULE) {
            Err(e) => (weight, Requantization::ZERO, Some(e)),
            Ok(r) => (weight, r, None),
        },
    };
}

impl<F: SafetensorsFile, const I: usize, const O: usize, A: QuantizedActivation> Bake<F>
    for QDense<I, O, A, Inline>
{
    const BAKED: Self = {
        let (weight, r, _) = Decoded::<F, I, O>::PARTS;
        Self {
            weight,
            bias: r.bias,
            multiplier: r.multiplier,
            exponent: r.exponent,
            input: r.input,
            output: r.output,
            activation: A::VALUE,
        }
    };
    const ERROR: Option<Error> = Decoded::<F, I, O>::PARTS.2;
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
            let () = QDense::<I, O, A, Heap>::SHAPE;
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
                input,
                output,
                activation: A::VALUE,
            };
            Ok((net, output, outputs))
        }
    }
}
