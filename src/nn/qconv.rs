//! The int8 2-D convolution: [`QDense`](super::QDense)'s arithmetic on every window.
//!
//! For output channel `o` at `(oh, ow)`, with the window's inputs `x_q` (the padding read as the
//! input's zero point `z_in`, which stands for the real 0 that the float layer pads with):
//!
//! ```text
//! q_out[o][oh][ow] = z_out + M[o]·( Σ_{c,ky,kx} W_q[o][c][ky][kx]·x_q[c][oh·S+ky-P][ow·S+kx-P]  +  b_q[o] )
//!                    b_q[o] = round(b[o] / (s_in·s_w[o]))  -  z_in·Σ_{c,ky,kx} W_q[o][c][ky][kx]
//! ```
//!
//! Because the padding holds `z_in`, every window has all `C·K·K` terms and the zero point's
//! term is the same constant for every position: folded into `b_q`. Derivation:
//! `docs/quantization.md`.

use super::qdense::{
    MOST_PRODUCTS, QuantizedActivation, Requantization, WEIGHT_RANGE, int8_tensors,
    kernel_requantization,
};
use super::shape::{Window, check_nonzero, check_output_size};
use super::{Bake, Identity, Inline, Layer, SafetensorsFile, Store};
use crate::format::decode::{self, Source};
use crate::format::{Error, Message, NetSpec};
use crate::kernels;
use crate::quant::{Multiplier, Quantization};

/// A 2-D convolution in int8, for inference: [`Conv2d`](super::Conv2d)'s sizes and layout
/// (`C` input and `OC` output channels, a `K x K` kernel, stride `STRIDE`, padding `PAD`, `H x W`
/// images giving `OH x OW`), the activation `A` (identity, ReLU or ReLU6), parameters in `S`.
///
/// The kernel's width may differ from its height: `KW`, last, defaults to `K`. DS-CNN's first
/// layer, 64 filters of 10 x 4 with stride 2 on MFCCs padded to 58 x 12 (TensorFlow's `SAME`
/// on 49 x 10, a [`QZeroPad2d`](super::QZeroPad2d) before it), is
/// `QConv2d<1, 64, 10, 2, 0, 58, 12, 25, 5, Relu, Inline, 4>`, in an `Input<i8, ..>` net
/// `Conv2d<1, 64, (10, 4), 2, 0, Relu>` (an imported model's layer: the float
/// [`Conv2d`](super::Conv2d)'s kernels are square).
///
/// Built by [`quantize`](super::quantize) from a trained `Conv2d`. Images are
/// `[[[i8; W]; H]; C]` in and `[[[i8; OW]; OH]; OC]` out. Its tensors in a weights file are
/// [`QDense`'s](super::QDense#weights-file), the weight `I8 [OC, C, K, K]`.
///
/// ```
/// use constmat::nn::{Identity, Inline, Layer, QConv2d};
/// use constmat::quant::{Multiplier, Quantization};
///
/// // One 3x3 filter that sums its window, padding 1; the input's zero point is -10, so the
/// // padding reads as -10 and the bias holds +10 per weight: the border sums like the inside.
/// let input = Quantization { scale: 0.1, zero_point: -10 };
/// let output = Quantization { scale: 0.1, zero_point: 0 };
/// let layer: QConv2d<1, 1, 3, 1, 1, 4, 4, 4, 4, Identity, Inline> =
///     QConv2d::new([[[[1; 3]; 3]; 1]; 1], [90], [Multiplier::from_real(1.0)], input, output);
/// let image = [[[-10; 4]; 4]; 1]; // all real zeros
/// let mut out = [[[0; 4]; 4]; 1];
/// layer.forward_one(&image, &mut out);
/// assert_eq!(out, [[[0; 4]; 4]; 1]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct QConv2d<
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
    const KW: usize = K,
> {
    /// `W_q`, `[OC][C][K][KW]`: each filter quantized symmetrically with its own scale.
    pub weight: S::Matrix<[[i8; KW]; K], OC, C>,
    /// `b_q`, in the accumulator's scale, the input's zero point folded in.
    pub bias: S::Vector<i32, OC>,
    /// `M[o] = s_in·s_w[o] / s_out` in fixed point: the significands.
    pub multiplier: S::Vector<i32, OC>,
    /// `M[o]`'s powers of two.
    pub exponent: S::Vector<i32, OC>,
    /// The input's quantization `(s_in, z_in)`: the padding reads as `z_in` (the real 0).
    pub input: Quantization,
    /// The output's quantization `(s_out, z_out)`: `z_out` is added to every output.
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
    const KW: usize,
> QConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
{
    /// The shape rule (as [`Conv2d`](super::Conv2d)'s) and the accumulator's bound: `C·K·K`
    /// products of at most `128 · 127` leave room in an `i32` for a bias of up to `2^30`.
    pub(crate) const SHAPE: () = {
        check_nonzero("QConv2d", "input channels", C);
        check_nonzero("QConv2d", "output channels", OC);
        check_output_size("QConv2d", "height", Window::Kernel, (H, K, STRIDE, PAD), OH);
        check_output_size("QConv2d", "width", Window::Kernel, (W, KW, STRIDE, PAD), OW);
        if C * K * KW > MOST_PRODUCTS {
            Message::new()
                .str("QConv2d: filters of ")
                .number(C * K * KW)
                .str(" weights could overflow the i32 accumulator (at most ")
                .number(MOST_PRODUCTS)
                .str(", so that products of at most 128 x 127 sum within 2^30)")
                .panic()
        }
    };

    /// A layer from its integer parameters: the weight `[OC][C][K][K]`, the bias with the
    /// input's zero point folded in, the per-filter multipliers, and the quantizations of the
    /// input (whose zero point the padding reads as) and the output.
    #[must_use]
    pub fn new(
        weight: [[[[i8; KW]; K]; C]; OC],
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

    /// The outputs of one image: per filter and position, the window's dot product (the
    /// padding read as `z_in`), the bias, the requantization, the clamp.
    ///
    /// Where the CPU has AVX-512 VNNI and VBMI, a convolution other than 1 x 1 of stride 1
    /// reads four channels a lane when its tile and band fit the kernel's buffer
    /// ([`forward_quads`](Self::forward_quads)); with VNNI, a 1 x 1 convolution multiplies the
    /// image as it lies ([`forward_pointwise`](Self::forward_pointwise)); with VBMI too, 8
    /// filters or more read their windows in place ([`forward_windows`](Self::forward_windows)). Otherwise
    /// windows of up to [`PATCH_BYTES`] values are copied, a block of positions at a time, into
    /// a stack buffer of rows (one per position), so that each filter's dot products with a
    /// whole block are one call of the int8 kernels (`kernels::dot_rows_i8`) and their
    /// requantization another; larger windows take plain loops.
    fn forward_sample(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let () = Self::SHAPE;
        if kernels::conv_quads_i8_fast(&Self::WINDOWS, OC).is_some() {
            self.forward_quads(x, y);
        } else if Self::POINTWISE && kernels::dot_columns_i8_fast() {
            self.forward_pointwise(x, y);
        } else if kernels::conv_windows_i8_fast(STRIDE, KW, OC) {
            self.forward_windows(x, y);
        } else if C * K * KW <= PATCH_BYTES {
            self.forward_blocks(x, y);
        } else {
            self.forward_plain(x, y);
        }
    }

    /// The filters one after another, `[OC][C][K][KW]` flattened.
    fn filters(&self) -> &[i8] {
        S::matrix(&self.weight)
            .as_flattened()
            .as_flattened()
            .as_flattened()
    }

    /// The filters one after another (`[OC][C][K][KW]` flattened) and each filter's sum of
    /// weights: the SIMD kernels' offset terms.
    fn filters_and_sums(&self) -> (&[i8], [i32; OC]) {
        let weight = self.filters();
        let sums = core::array::from_fn(|o| {
            weight[o * C * K * KW..(o + 1) * C * K * KW]
                .iter()
                .map(|&w| i32::from(w))
                .sum()
        });
        (weight, sums)
    }

    /// Each filter's requantization as the int8 kernels take it.
    fn kernel_requantization(&self) -> kernels::Requantization<'_> {
        let ((bias, multiplier, exponent), zero_and_range) = kernel_requantization::<A, S, OC>(
            (&self.bias, &self.multiplier, &self.exponent),
            self.output,
        );
        kernels::Requantization {
            parameters: (bias, multiplier, exponent),
            zero_and_range,
        }
    }

    /// A 1 x 1 convolution of stride 1 without padding: its windows are the image's columns,
    /// so its dot products are the filters' product with the image as it lies, channels
    /// first (no window is copied).
    const POINTWISE: bool = K == 1 && KW == 1 && STRIDE == 1 && PAD == 0;

    /// [`forward_sample`](Self::forward_sample) of a [`POINTWISE`](Self::POINTWISE) layer:
    /// blocks of [`COLUMN_POSITIONS`] positions, each multiplied by as many filters as
    /// [`COLUMN_DOTS`] dot products hold in one call of `kernels::dot_columns_i8`, then each
    /// filter's outputs requantized in one call.
    fn forward_pointwise(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let (weight, sums) = self.filters_and_sums();
        let ((bias, multiplier, exponent), range) = kernel_requantization::<A, S, OC>(
            (&self.bias, &self.multiplier, &self.exponent),
            self.output,
        );
        let image = x.as_flattened().as_flattened();
        let plane = H * W;
        let mut dots = [0_i32; COLUMN_DOTS];
        let mut p0 = 0;
        while p0 < plane {
            let n = COLUMN_POSITIONS.min(plane - p0);
            let mut f0 = 0;
            while f0 < OC {
                let filters = (COLUMN_DOTS / n).min(OC - f0);
                let dots = &mut dots[..filters * n];
                kernels::dot_columns_i8(
                    (&weight[f0 * C..(f0 + filters) * C], &sums[f0..f0 + filters]),
                    (&image[p0..], plane),
                    (C, n),
                    dots,
                );
                for (f, dots) in dots.chunks_exact(n).enumerate() {
                    let o = f0 + f;
                    kernels::requantize_uniform_i8(
                        dots,
                        (bias[o], multiplier[o], exponent[o]),
                        range,
                        &mut y[o].as_flattened_mut()[p0..p0 + n],
                    );
                }
                f0 += filters;
            }
            p0 += n;
        }
    }

    /// The layer's sizes, as the int8 convolution kernels take them.
    const WINDOWS: kernels::WindowShape = kernels::WindowShape {
        channels: C,
        height: H,
        width: W,
        kernel: (K, KW),
        stride: STRIDE,
        padding: PAD,
    };

    /// [`forward_sample`](Self::forward_sample) on the kernel that reads four channels a lane
    /// (`kernels::conv_quads_i8`), laying a band of the image's rows and a tile's weights out
    /// in a stack buffer of [`kernels::QUADS_SCRATCH_QUADS`] quads, in one call.
    fn forward_quads(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let mut scratch = [0_u32; kernels::QUADS_SCRATCH_QUADS];
        kernels::conv_quads_i8::<C, K, KW>(
            self.filters(),
            &self.kernel_requantization(),
            (
                x.as_flattened().as_flattened(),
                &Self::WINDOWS,
                self.input.zero_point,
            ),
            &mut scratch,
            y.as_flattened_mut().as_flattened_mut(),
        );
    }

    /// [`forward_sample`](Self::forward_sample) on the kernel that reads the windows in place
    /// and requantizes each filter's outputs as it computes them (`kernels::conv_windows_i8`),
    /// in one call.
    fn forward_windows(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let (weight, sums) = self.filters_and_sums();
        kernels::conv_windows_i8::<C, K, KW>(
            (weight, &sums),
            &self.kernel_requantization(),
            (
                x.as_flattened().as_flattened(),
                &Self::WINDOWS,
                self.input.zero_point,
            ),
            (0, OH * OW),
            y.as_flattened_mut().as_flattened_mut(),
        );
    }

    /// Copies the window of the output position `(oh, ow)` into `patch` (`C·K·KW` values,
    /// channel by channel, row by row, as a filter's weights are laid out), the padding read
    /// as `pad`.
    #[inline]
    fn gather_window(x: &[[[i8; W]; H]; C], (oh, ow): (usize, usize), pad: i8, patch: &mut [i8]) {
        for (image, channel) in x.iter().zip(patch.chunks_exact_mut(K * KW)) {
            for (ky, row) in channel.chunks_exact_mut(KW).enumerate() {
                let Some(line) = (oh * STRIDE + ky)
                    .checked_sub(PAD)
                    .and_then(|iy| image.get(iy))
                else {
                    row.fill(pad);
                    continue;
                };
                let left = ow * STRIDE;
                if left >= PAD && left - PAD + KW <= W {
                    row.copy_from_slice(&line[left - PAD..left - PAD + KW]);
                } else {
                    for (kx, v) in row.iter_mut().enumerate() {
                        let ix = (left + kx).checked_sub(PAD).filter(|&i| i < W);
                        *v = ix.map_or(pad, |ix| line[ix]);
                    }
                }
            }
        }
    }

    /// The outputs of filter `o` at a block of positions, from their dot products.
    #[inline]
    fn requantize_block(&self, o: usize, dots: &[i32], out: &mut [i8]) {
        let (low, high) = A::output_range(self.output);
        let parameters = (
            S::vector(&self.bias)[o],
            S::vector(&self.multiplier)[o],
            S::vector(&self.exponent)[o],
        );
        kernels::requantize_uniform_i8(dots, parameters, (self.output.zero_point, low, high), out);
    }

    /// [`forward_sample`](Self::forward_sample) a block of positions at a time.
    fn forward_blocks(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let window = C * K * KW;
        // Whole tiles of the kernels' rows where the buffer holds one (a row left over is
        // several times slower per row).
        let fit = (PATCH_BYTES / window).min(PATCH_POSITIONS);
        let block = if fit >= kernels::DOT_ROWS_TILE {
            fit - fit % kernels::DOT_ROWS_TILE
        } else {
            fit
        };
        let weight = S::matrix(&self.weight);
        let mut patches = [0_i8; PATCH_BYTES];
        let mut dots = [0_i32; PATCH_POSITIONS];
        let mut start = 0;
        while start < OH * OW {
            let count = block.min(OH * OW - start);
            // Row `p` of `patches`: the window of position `start + p`.
            for (p, patch) in patches[..count * window]
                .chunks_exact_mut(window)
                .enumerate()
            {
                let position = ((start + p) / OW, (start + p) % OW);
                Self::gather_window(x, position, self.input.zero_point, patch);
            }
            for (o, plane) in y.iter_mut().enumerate() {
                let filter = weight[o].as_flattened().as_flattened();
                kernels::dot_rows_i8(&patches[..count * window], filter, &mut dots[..count]);
                self.requantize_block(
                    o,
                    &dots[..count],
                    &mut plane.as_flattened_mut()[start..start + count],
                );
            }
            start += count;
        }
    }

    /// [`forward_sample`](Self::forward_sample) one output at a time, for windows too large for
    /// the stack buffer.
    fn forward_plain(&self, x: &[[[i8; W]; H]; C], y: &mut [[[i8; OW]; OH]; OC]) {
        let weight = S::matrix(&self.weight);
        let ((bias, multiplier, exponent), range) = kernel_requantization::<A, S, OC>(
            (&self.bias, &self.multiplier, &self.exponent),
            self.output,
        );
        let pad = i32::from(self.input.zero_point);
        for (o, plane) in y.iter_mut().enumerate() {
            for (oh, row) in plane.iter_mut().enumerate() {
                for (ow, out) in row.iter_mut().enumerate() {
                    let mut dot = 0_i32;
                    for (filter, image) in weight[o].iter().zip(x) {
                        for (ky, filter_row) in filter.iter().enumerate() {
                            let iy = (oh * STRIDE + ky).checked_sub(PAD).filter(|&i| i < H);
                            for (kx, &w) in filter_row.iter().enumerate() {
                                let ix = (ow * STRIDE + kx).checked_sub(PAD).filter(|&i| i < W);
                                let v = match (iy, ix) {
                                    (Some(iy), Some(ix)) => i32::from(image[iy][ix]),
                                    _ => pad,
                                };
                                dot += i32::from(w) * v;
                            }
                        }
                    }
                    *out =
                        kernels::requantize_one(dot, (bias[o], multiplier[o], exponent[o]), range);
                }
            }
        }
    }
}

/// The bytes of the stack buffer [`QConv2d`] copies windows into: windows up to this size take
/// the int8 kernels. A tile of the kernels' rows (8) of the 3 x 3 windows of 64 channels.
const PATCH_BYTES: usize = 4608;

/// The most positions of one block of [`QConv2d`]'s forward pass.
const PATCH_POSITIONS: usize = 64;

/// The positions of one block of a 1 x 1 [`QConv2d`]'s forward pass on the columns' kernel.
const COLUMN_POSITIONS: usize = 64;

/// The dot products of one call of the columns' kernel in a 1 x 1 [`QConv2d`]: 16 filters of a
/// block of [`COLUMN_POSITIONS`].
const COLUMN_DOTS: usize = 1024;

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
    const KW: usize,
> Layer for QConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
{
    type In = [[[i8; W]; H]; C];
    type Out = [[[i8; OW]; OH]; OC];

    /// `Conv2d(C, OC, (K, KW))` then the activation's module, in int8: the weight (`I8 [OC, C, K, KW]`,
    /// values in `-127..=127`), then [the tensors every int8 layer
    /// has](crate::nn::QDense#weights-file).
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &int8_tensors!([OC, C, K, KW], OC),
    };

    type WithStore<S2: Store> = QConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S2, KW>;

    /// The windows' buffer and a block's dot products (when the window takes the int8
    /// kernels); for a 1 x 1 convolution, at least the columns' kernel's dot products and the
    /// filters' sums; for the shapes the in-place windows' kernel takes, the filters' sums; for
    /// those the channel quads' kernel takes, its buffer (the CPU decides at run time which
    /// runs).
    const WORKING_BYTES: usize = {
        let windows = if C * K * KW <= PATCH_BYTES {
            PATCH_BYTES + 4 * PATCH_POSITIONS
        } else {
            0
        };
        let quads = if kernels::conv_quads_i8_applies(&Self::WINDOWS, OC) {
            4 * kernels::QUADS_SCRATCH_QUADS
        } else {
            0
        };
        let columns = if Self::POINTWISE {
            4 * COLUMN_DOTS + 4 * OC
        } else if kernels::conv_windows_i8_applies(STRIDE, KW, OC) {
            4 * OC
        } else {
            0
        };
        let most = if windows > columns { windows } else { columns };
        if quads > most { quads } else { most }
    };

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        for (x, y) in x.iter().zip(y) {
            self.forward_sample(x, y);
        }
    }

    fn to_store<S2: Store>(&self) -> Self::WithStore<S2> {
        QConv2d {
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
    const KW: usize,
> super::Weights for QConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
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
        // Filled in its storage (on the heap for `Heap`), not as a temporary on the stack.
        let mut weight = S::matrix_filled::<[[i8; KW]; K], OC, C>([[0; KW]; K]);
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

/// A baked int8 convolution's weight, other tensors and first problem, decoded from the file
/// `F` in one pass (a depthwise convolution's too: one input channel per filter, `KW = K`).
pub(super) struct Decoded<F, const C: usize, const OC: usize, const K: usize, const KW: usize>(
    core::marker::PhantomData<fn() -> F>,
);

impl<F: SafetensorsFile, const C: usize, const OC: usize, const K: usize, const KW: usize>
    Decoded<F, C, OC, K, KW>
{
    #[allow(clippy::type_complexity)]
    pub(super) const PARTS: ([[[[i8; KW]; K]; C]; OC], Requantization<OC>, Option<Error>) =
        match decode::i8_tensor4_from(
            Source::Index(&F::INDEX),
            F::FIRST_MODULE,
            "weight",
            WEIGHT_RANGE,
        ) {
            Err(e) => ([[[[0; KW]; K]; C]; OC], Requantization::ZERO, Some(e)),
            Ok(weight) => match Requantization::decode(Source::Index(&F::INDEX), F::FIRST_MODULE) {
                Err(e) => (weight, Requantization::ZERO, Some(e)),
                Ok(r) => (weight, r, None),
            },
        };
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
    const KW: usize,
> Bake<F> for QConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, Inline, KW>
{
    const BAKED: Self = {
        let () = Self::SHAPE;
        let (weight, r, _) = Decoded::<F, C, OC, K, KW>::PARTS;
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
    const ERROR: Option<Error> = Decoded::<F, C, OC, K, KW>::PARTS.2;
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use num_traits::Float;

    use super::QConv2d;
    use crate::format::Element;
    use crate::nn::qdense::QuantizedActivation;
    use crate::nn::quantize::{calibrate, check_parameters, quantize_rows};
    use crate::nn::{Conv2d, Heap, Quantize, QuantizeError, QuantizeSample, Sample, Store};
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
        const KW: usize,
    > Quantize for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
    where
        T: Element + Sample + Float + QuantizeSample,
        A: QuantizedActivation,
        S: Store,
    {
        type Quantized = QConv2d<C, OC, K, STRIDE, PAD, H, W, OH, OW, A, Heap, KW>;

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
            let mut weight = Heap::matrix_filled::<[[i8; KW]; K], OC, C>([[0; KW]; K]);
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
            let net = QConv2d {
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

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::QConv2d;
    use crate::nn::{Inline, Relu};
    use crate::quant::{Multiplier, Quantization};

    /// The ways of computing a convolution (windows as rows of the int8 kernels, plain loops,
    /// and the channel quads' kernel where the CPU has it) give the same integers.
    #[test]
    fn every_path_computes_the_same_outputs() {
        fn check<const C: usize, const S: usize, const P: usize, const OH: usize>(seed: u32) {
            let mut state = seed;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state
            };
            let weight: [[[[i8; 3]; 3]; C]; 5] = core::array::from_fn(|_| {
                core::array::from_fn(|_| {
                    core::array::from_fn(|_| core::array::from_fn(|_| (next() % 255) as i8))
                })
            });
            let bias = core::array::from_fn(|_| (next() % 20_000) as i32 - 10_000);
            let multipliers = core::array::from_fn(|_| {
                Multiplier::from_real(0.0005 + f64::from(next() % 100) * 1e-5)
            });
            let q = |z: i8| Quantization {
                scale: 0.1,
                zero_point: z,
            };
            let layer: QConv2d<C, 5, 3, S, P, 9, 9, OH, OH, Relu, Inline> =
                QConv2d::new(weight, bias, multipliers, q(-17), q(4));
            let x: [[[i8; 9]; 9]; C] = core::array::from_fn(|_| {
                core::array::from_fn(|_| core::array::from_fn(|_| next() as i8))
            });
            let mut plain = [[[0; OH]; OH]; 5];
            layer.forward_plain(&x, &mut plain);
            let mut blocks = [[[1; OH]; OH]; 5];
            layer.forward_blocks(&x, &mut blocks);
            assert_eq!(blocks, plain, "windows as rows, {C} channels");
            // The SIMD kernels the CPU has: the layer's weights, sums, pad value and
            // requantization as they take them.
            type Layer<const C: usize, const S: usize, const P: usize, const OH: usize> =
                QConv2d<C, 5, 3, S, P, 9, 9, OH, OH, Relu, Inline>;
            if crate::kernels::conv_quads_i8_fast(&Layer::<C, S, P, OH>::WINDOWS, 5).is_some() {
                let mut quads = [[[2; OH]; OH]; 5];
                layer.forward_quads(&x, &mut quads);
                assert_eq!(quads, plain, "channel quads, {C} channels");
            }
        }
        // A kernel 3 high and 2 wide: windows as rows against plain loops.
        let q = Quantization {
            scale: 0.1,
            zero_point: -5,
        };
        let weight: [[[[i8; 2]; 3]; 2]; 3] = core::array::from_fn(|o| {
            core::array::from_fn(|c| {
                core::array::from_fn(|r| {
                    core::array::from_fn(|k| (o * 31 + c * 7 + r * 5 + k * 3) as i8 - 40)
                })
            })
        });
        let layer: QConv2d<2, 3, 3, 1, 1, 5, 6, 5, 7, Relu, Inline, 2> = QConv2d::new(
            weight,
            [100, -200, 300],
            [Multiplier::from_real(0.003); 3],
            q,
            Quantization {
                scale: 0.2,
                zero_point: 3,
            },
        );
        let x: [[[i8; 6]; 5]; 2] = core::array::from_fn(|c| {
            core::array::from_fn(|r| {
                core::array::from_fn(|k| ((c * 97 + r * 13 + k * 29) % 256) as u8 as i8)
            })
        });
        let (mut plain, mut blocks) = ([[[0; 7]; 5]; 3], [[[1; 7]; 5]; 3]);
        layer.forward_plain(&x, &mut plain);
        layer.forward_blocks(&x, &mut blocks);
        assert_eq!(blocks, plain, "a 3 x 2 kernel");
        for seed in 1..6 {
            check::<1, 1, 1, 9>(seed);
            check::<3, 2, 0, 4>(seed);
            check::<7, 1, 0, 7>(seed);
            check::<29, 1, 1, 9>(seed);
        }
    }
}
