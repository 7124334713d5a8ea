//! The int8 depthwise convolution: [`QConv2d`](super::QConv2d)'s arithmetic, each filter on
//! one input channel.
//!
//! For output channel `o`, which reads input channel `c = o / (OC / C)` (PyTorch's
//! `groups = C`, TensorFlow Lite's depth multiplier), at `(oh, ow)`:
//!
//! ```text
//! q_out[o][oh][ow] = z_out + M[o]·( Σ_{ky,kx} W_q[o][ky][kx]·x_q[c][oh·S+ky-P][ow·S+kx-P]  +  b_q[o] )
//!                    b_q[o] = round(b[o] / (s_in·s_w[o]))  -  z_in·Σ_{ky,kx} W_q[o][ky][kx]
//! ```
//!
//! the padding read as the input's zero point, as in `QConv2d`: bit for bit TensorFlow Lite
//! Micro's int8 `DEPTHWISE_CONV_2D` (`tests/tflm_int8.rs`).

use super::qconv::Decoded;
use super::qdense::{MOST_PRODUCTS, QuantizedActivation, int8_tensors, kernel_requantization};
use super::shape::{Window, check_depthwise_channels, check_output_size};
use super::{Bake, Identity, Inline, Layer, SafetensorsFile, Store};
use crate::format::{Error, Message, NetSpec};
use crate::kernels;
use crate::quant::{Multiplier, Quantization};

/// The outputs requantized in one call: one group of the kernels' 16 lanes, however narrow the
/// image (the working memory of a row of 16 outputs).
const REQUANTIZE_CHUNK: usize = 16;
/// A depthwise 2-D convolution in int8, for inference: [`DepthwiseConv2d`](super::DepthwiseConv2d)'s
/// sizes and layout (`C` input channels, `OC` filters, a multiple of `C`, each `K x K` on one
/// input channel; stride `STRIDE`, padding `PAD`, `H x W` images giving `OH x OW`), the
/// activation `A` (identity, ReLU or ReLU6), parameters in `S`.
///
/// Built by [`quantize`](super::quantize) from a trained `DepthwiseConv2d`. Its tensors in a
/// weights file are [`QDense`'s](super::QDense#weights-file), the weight `I8 [OC, 1, K, K]`.
///
/// ```
/// use constmat::nn::{Identity, Inline, Layer, QDepthwiseConv2d};
/// use constmat::quant::{Multiplier, Quantization};
///
/// // Two channels, one 1 x 1 filter each: channel 0 doubled, channel 1 negated.
/// let q = Quantization { scale: 0.1, zero_point: 0 };
/// let layer: QDepthwiseConv2d<2, 2, 1, 1, 0, 2, 2, 2, 2, Identity, Inline> =
///     QDepthwiseConv2d::new([[[[2]]], [[[-1]]]], [0, 0], [Multiplier::from_real(1.0); 2], q, q);
/// let mut out = [[[0; 2]; 2]; 2];
/// layer.forward_one(&[[[1, 2], [3, 4]], [[5, 6], [7, 8]]], &mut out);
/// assert_eq!(out, [[[2, 4], [6, 8]], [[-5, -6], [-7, -8]]]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct QDepthwiseConv2d<
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A = Identity,
    S: Store = Inline,
> {
    /// `W_q`, `[OC][1][K][K]`: each filter quantized symmetrically with its own scale.
    pub weight: S::Matrix<[[i8; K]; K], OC, 1>,
    /// `b_q`, in the accumulator's scale, the input's zero point folded in.
    pub bias: S::Vector<i32, OC>,
    /// `M[o] = s_in·s_w[o] / s_out` in fixed point: the significands.
    pub multiplier: S::Vector<i32, OC>,
    /// `M[o]`'s powers of two.
    pub exponent: S::Vector<i32, OC>,
    /// The input's quantization `(s_in, z_in)`: the padding reads as `z_in` (the real 0).
    pub input: Quantization,
    /// The output's quantization `(s_out, z_out)`.
    pub output: Quantization,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A: QuantizedActivation,
    S: Store,
> QDepthwiseConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
{
    /// The shape rules (as `DepthwiseConv2d`'s) and the accumulator's bound.
    pub(crate) const SHAPE: () = {
        check_depthwise_channels(C, OC);
        check_output_size(
            "QDepthwiseConv2d",
            "height",
            Window::Kernel,
            (H, K, STRIDE, PAD),
            OH,
        );
        check_output_size(
            "QDepthwiseConv2d",
            "width",
            Window::Kernel,
            (W, K, STRIDE, PAD),
            OW,
        );
        if K * K > MOST_PRODUCTS {
            Message::new()
                .str("QDepthwiseConv2d: filters of ")
                .number(K * K)
                .str(" weights could overflow the i32 accumulator (at most ")
                .number(MOST_PRODUCTS)
                .str(")")
                .panic()
        }
    };

    /// A layer from its integer parameters: the weight `[OC][1][K][K]`, the bias with the
    /// input's zero point folded in, the per-filter multipliers, and the quantizations of the
    /// input (whose zero point the padding reads as) and the output.
    #[must_use]
    pub fn new(
        weight: [[[[i8; K]; K]; 1]; OC],
        bias: [i32; OC],
        multipliers: [Multiplier; OC],
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

    /// The plane of one channel, for the kernel.
    const PLANE: kernels::PlaneShape = kernels::PlaneShape {
        h: H,
        w: W,
        k: K,
        stride: STRIDE,
        pad: PAD,
        oh: OH,
        ow: OW,
    };

    /// The outputs of one image: every channel in one call of the SIMD kernel where it takes
    /// the planes (`kernels::depthwise_i8_simd`), else [`forward_rows`](Self::forward_rows).
    fn forward_sample(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let () = Self::SHAPE;
        if kernels::depthwise_i8_fast(Self::PLANE) {
            let ((bias, multiplier, exponent), zero_and_range) = kernel_requantization::<A, S, OC>(
                (&self.bias, &self.multiplier, &self.exponent),
                self.output,
            );
            kernels::depthwise_i8_simd(
                (
                    x.as_flattened().as_flattened(),
                    Self::PLANE,
                    self.input.zero_point,
                ),
                S::matrix(&self.weight)
                    .as_flattened()
                    .as_flattened()
                    .as_flattened(),
                &kernels::Requantization {
                    parameters: (bias, multiplier, exponent),
                    zero_and_range,
                },
                y.as_flattened_mut().as_flattened_mut(),
            );
        } else {
            self.forward_rows(x, y);
        }
    }

    /// [`forward_sample`](Self::forward_sample) off the SIMD kernel: the dot products of as
    /// many rows as the buffers hold (`kernels::depthwise_dots_i8`, through a padded copy of
    /// the rows), then their requantization; planes too wide for the buffers take
    /// [`forward_plain`](Self::forward_plain). Never inlined: its buffers stay out of the SIMD
    /// path's frame.
    #[inline(never)]
    fn forward_rows(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let rows = Self::PLANE.rows_per_call();
        if rows == 0 {
            self.forward_plain(x, y);
            return;
        }
        let weight = S::matrix(&self.weight);
        let ((bias, multiplier, exponent), range) = kernel_requantization::<A, S, OC>(
            (&self.bias, &self.multiplier, &self.exponent),
            self.output,
        );
        let per_channel = OC / C;
        let mut padded = [0_i8; kernels::depthwise_i8::PADDED_BYTES];
        let mut dots = [0_i32; kernels::depthwise_i8::DOTS];
        for (o, plane) in y.iter_mut().enumerate() {
            let image = x[o / per_channel].as_flattened();
            let filter = weight[o][0].as_flattened();
            let out = plane.as_flattened_mut();
            let mut r = 0;
            while r < OH {
                let end = (r + rows).min(OH);
                kernels::depthwise_dots_i8(
                    image,
                    filter,
                    Self::PLANE,
                    self.input.zero_point,
                    r..end,
                    (&mut padded, &mut dots),
                );
                kernels::requantize_uniform_i8(
                    &dots[..(end - r) * OW],
                    (bias[o], multiplier[o], exponent[o]),
                    range,
                    &mut out[r * OW..end * OW],
                );
                r = end;
            }
        }
    }

    /// [`forward_sample`](Self::forward_sample) one window at a time, for planes too wide for
    /// the kernel's buffers: the windows' dot products, requantized [`REQUANTIZE_CHUNK`] at a
    /// time in one call of the int8 kernels, across rows.
    fn forward_plain(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let () = Self::SHAPE;
        let weight = S::matrix(&self.weight);
        let ((bias, multiplier, exponent), range) = kernel_requantization::<A, S, OC>(
            (&self.bias, &self.multiplier, &self.exponent),
            self.output,
        );
        let pad = i32::from(self.input.zero_point);
        let per_channel = OC / C;
        for (o, plane) in y.iter_mut().enumerate() {
            let image = &x[o / per_channel];
            let filter = &weight[o][0];
            let (b, m, e) = (
                [bias[o]; REQUANTIZE_CHUNK],
                [multiplier[o]; REQUANTIZE_CHUNK],
                [exponent[o]; REQUANTIZE_CHUNK],
            );
            let out = plane.as_flattened_mut();
            let mut dots = [0_i32; REQUANTIZE_CHUNK];
            let (mut filled, mut start) = (0, 0);
            for oh in 0..OH {
                for ow in 0..OW {
                    let mut dot = 0;
                    for (ky, filter_row) in filter.iter().enumerate() {
                        let line = (oh * STRIDE + ky)
                            .checked_sub(PAD)
                            .and_then(|iy| image.get(iy));
                        for (kx, &w) in filter_row.iter().enumerate() {
                            let v = (ow * STRIDE + kx)
                                .checked_sub(PAD)
                                .and_then(|ix| line.and_then(|line| line.get(ix)))
                                .map_or(pad, |&v| i32::from(v));
                            dot += i32::from(w) * v;
                        }
                    }
                    dots[filled] = dot;
                    filled += 1;
                    if filled == REQUANTIZE_CHUNK || start + filled == OH * OW {
                        kernels::requantize_i8(
                            &dots[..filled],
                            (&b[..filled], &m[..filled], &e[..filled]),
                            range,
                            &mut out[start..start + filled],
                        );
                        (start, filled) = (start + filled, 0);
                    }
                }
            }
        }
    }
}

impl<
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A: QuantizedActivation,
    S: Store,
> Layer for QDepthwiseConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
{
    type In = [[[i8; W]; H]; C];
    type Out = [[[i8; OW]; OH]; OC];

    /// `Conv2d(C, OC, K, groups=C)` then the activation's module, in int8: the weight
    /// (`I8 [OC, 1, K, K]`), then [the tensors every int8 layer
    /// has](crate::nn::QDense#weights-file).
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &int8_tensors!([OC, 1, K, K], OC),
    };

    type WithStore<S2: Store> = QDepthwiseConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S2>;

    /// The larger of the two paths' buffers: the SIMD kernel's padded rows, where it takes
    /// the planes; the portable loops' padded rows and dot products, or for planes too wide
    /// for those, a chunk's dot products and its per-position parameters.
    const WORKING_BYTES: usize = {
        let simd = if Self::PLANE.rows_per_call_vnni() > 0 {
            kernels::depthwise_i8::VNNI_PADDED_BYTES
        } else {
            0
        };
        let portable = if Self::PLANE.rows_per_call() > 0 {
            kernels::depthwise_i8::PADDED_BYTES + 4 * kernels::depthwise_i8::DOTS
        } else {
            4 * 4 * REQUANTIZE_CHUNK
        };
        if simd > portable { simd } else { portable }
    };

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        for (x, y) in x.iter().zip(y) {
            self.forward_sample(x, y);
        }
    }

    fn to_store<S2: Store>(&self) -> Self::WithStore<S2> {
        QDepthwiseConv2d {
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

#[cfg(feature = "alloc")]
impl<
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A: QuantizedActivation,
    S: Store,
> super::Weights for QDepthwiseConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        super::qdense::bytes::write(
            k,
            S::matrix(&self.weight)
                .as_flattened()
                .as_flattened()
                .as_flattened(),
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
        let () = Self::SHAPE;
        let mut weight = S::matrix_filled::<[[i8; K]; K], OC, 1>([[0; K]; K]);
        let r = super::qdense::bytes::read::<OC>(
            tensor,
            S::matrix_mut(&mut weight)
                .as_flattened_mut()
                .as_flattened_mut()
                .as_flattened_mut(),
        );
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

impl<
    F: SafetensorsFile,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A: QuantizedActivation,
> Bake<F> for QDepthwiseConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, Inline>
{
    const BAKED: Self = {
        let () = Self::SHAPE;
        let (weight, r, _) = Decoded::<F, 1, OC, K, K>::PARTS;
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
    const ERROR: Option<Error> = Decoded::<F, 1, OC, K, K>::PARTS.2;
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use num_traits::Float;

    use super::QDepthwiseConv2d;
    use crate::format::Element;
    use crate::nn::qdense::QuantizedActivation;
    use crate::nn::quantize::{calibrate, check_parameters, quantize_rows};
    use crate::nn::{
        DepthwiseConv2d, Heap, Quantize, QuantizeError, QuantizeSample, Sample, Store,
    };
    use crate::quant::Quantization;

    impl<
        T,
        const C: usize,
        const OC: usize,
        const K: usize,
        const STRIDE: usize,
        const PAD: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
        A,
        S,
    > Quantize for DepthwiseConv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S>
    where
        T: Element + Sample + Float + QuantizeSample,
        A: QuantizedActivation,
        S: Store,
    {
        type Quantized = QDepthwiseConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, Heap>;

        fn quantize_layer(
            &self,
            layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            let () = Self::Quantized::SHAPE;
            let weights = S::matrix(&self.weight)
                .as_flattened()
                .as_flattened()
                .as_flattened();
            let bias = S::vector(&self.bias);
            check_parameters(layer, weights, bias)?;
            let (outputs, output) = calibrate(self, layer, samples)?;
            let mut weight = Heap::matrix_filled::<[[i8; K]; K], OC, 1>([[0; K]; K]);
            let (bias, multipliers) = quantize_rows(
                layer,
                weights,
                bias,
                (input, output),
                Heap::matrix_mut(&mut weight)
                    .as_flattened_mut()
                    .as_flattened_mut()
                    .as_flattened_mut(),
            )?;
            let net = QDepthwiseConv2d {
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
