//! Zero padding of an image, each side its own amount: forward and backward side by side, and
//! the int8 form.
//!
//! Derivation: `docs/backprop.md`, section "Zero padding". The output is the input surrounded
//! by zeros; the gradient is the output's gradient without its border:
//!
//! ```text
//! forward                                         backward
//! Y[c][TOP + i][LEFT + j] = X[c][i][j], else 0    dX[c][i][j] = dY[c][TOP + i][LEFT + j]
//! ```
//!
//! With a convolution of padding 0 after it, this is TensorFlow's `SAME` padding where it pads
//! one more row or column after than before (an even size and stride 2: MobileNet's and
//! ResNet's downsampling), which a convolution's own padding, the same on both sides, cannot
//! give.

use super::qdense::int8_tensor;
use super::{Bake, Layer, Message, NetSpec, SafetensorsFile, Sample, Store};
use crate::format::Error;
use crate::format::decode::{self, Source};
use crate::quant::Quantization;

/// The shape rule of the padding layers: `OH = TOP + H + BOTTOM`, `OW = LEFT + W + RIGHT`.
#[track_caller]
const fn check_padded(
    layer: &str,
    (h, w): (usize, usize),
    sides: [usize; 4],
    (oh, ow): (usize, usize),
) {
    let [top, left, bottom, right] = sides;
    if oh != top + h + bottom {
        Message::new()
            .str(layer)
            .str(": the output height is ")
            .number(oh)
            .str(", but ")
            .number(h)
            .str(" rows padded by ")
            .number(top)
            .str(" above and ")
            .number(bottom)
            .str(" below give ")
            .number(top + h + bottom)
            .panic()
    }
    if ow != left + w + right {
        Message::new()
            .str(layer)
            .str(": the output width is ")
            .number(ow)
            .str(", but ")
            .number(w)
            .str(" columns padded by ")
            .number(left)
            .str(" on the left and ")
            .number(right)
            .str(" on the right give ")
            .number(left + w + right)
            .panic()
    }
}

/// Copies each channel of `x` into the middle of `y`'s, the border `fill`.
#[inline]
fn pad_into<
    V: Copy,
    const C: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(
    x: &[[[V; W]; H]; C],
    (top, left): (usize, usize),
    fill: V,
    y: &mut [[[V; OW]; OH]; C],
) {
    for (x, y) in x.iter().zip(y.iter_mut()) {
        for (r, row) in y.iter_mut().enumerate() {
            match r.checked_sub(top).and_then(|i| x.get(i)) {
                Some(line) => {
                    row[..left].fill(fill);
                    row[left..left + W].copy_from_slice(line);
                    row[left + W..].fill(fill);
                }
                None => row.fill(fill),
            }
        }
    }
}

/// Zero padding of `C` channels of `H x W`: `TOP` rows above, `LEFT` columns on the left,
/// `BOTTOM` rows below, `RIGHT` columns on the right, giving `OH x OW`. PyTorch's
/// `nn.ZeroPad2d((LEFT, RIGHT, TOP, BOTTOM))`, TensorFlow Lite's `PAD` with zeros.
///
/// In [`net!`](crate::net): `ZeroPad2d<P>` (every side) or `ZeroPad2d<LEFT, RIGHT, TOP, BOTTOM>`
/// (PyTorch's order); the macro computes `OH` and `OW`. TensorFlow's `SAME` padding of a 3 x 3,
/// stride-2 convolution on 8 x 8 (0 before, 1 after) is `ZeroPad2d<0, 1, 0, 1>` then the
/// convolution with padding 0.
///
/// ```
/// use constmat::nn::{Layer, ZeroPad2d};
///
/// // One row above, one column on the right.
/// let pad = ZeroPad2d::<f32, 1, 1, 0, 0, 1, 2, 2, 3, 3>::new();
/// let mut y = [[[9.0; 3]; 3]; 1];
/// pad.forward_one(&[[[1.0, 2.0], [3.0, 4.0]]], &mut y);
/// assert_eq!(y, [[[0.0, 0.0, 0.0], [1.0, 2.0, 0.0], [3.0, 4.0, 0.0]]]);
///
/// type Same = constmat::net![Input<f32, 3, 8, 8>, ZeroPad2d<0, 1, 0, 1>, Conv2d<3, 4, 3, 2, 0>];
/// assert_eq!(core::mem::size_of::<<Same as Layer>::Out>(), 4 * 4 * 4 * 4); // 4 x 4 x 4
/// ```
///
/// A wrong output size does not compile:
///
/// ```compile_fail,E0080
/// // 2 rows padded by 1 above give 3, not 4.
/// let _ = constmat::nn::ZeroPad2d::<f32, 1, 1, 0, 0, 0, 2, 2, 4, 2>::new();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroPad2d<
    T,
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(core::marker::PhantomData<fn() -> T>);

impl<
    T,
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> ZeroPad2d<T, C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
{
    const SHAPE: () = check_padded("ZeroPad2d", (H, W), [TOP, LEFT, BOTTOM, RIGHT], (OH, OW));

    /// The layer (it has no parameters); a `const fn`, for `static`s.
    #[must_use]
    pub const fn new() -> Self {
        let () = Self::SHAPE;
        Self(core::marker::PhantomData)
    }
}

impl<
    T,
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> Default for ZeroPad2d<T, C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<
    T: Sample + num_traits::Float,
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> Layer for ZeroPad2d<T, C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
{
    type In = [[[T; W]; H]; C];
    type Out = [[[T; OW]; OH]; C];

    /// `ZeroPad2d((LEFT, RIGHT, TOP, BOTTOM))`: one module, no tensors.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[],
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        let () = Self::SHAPE;
        for (x, y) in x.iter().zip(y) {
            pad_into(x, (TOP, LEFT), T::zero(), y);
        }
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

no_parameters!("zero padding", [T: Sample + num_traits::Float, const C: usize, const TOP: usize, const LEFT: usize, const BOTTOM: usize, const RIGHT: usize, const H: usize, const W: usize, const OH: usize, const OW: usize], ZeroPad2d<T, C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>);

#[cfg(feature = "alloc")]
mod train {
    use super::ZeroPad2d;
    use crate::nn::{Sample, Train};

    impl<
        T: Sample + num_traits::Float,
        const B: usize,
        const C: usize,
        const TOP: usize,
        const LEFT: usize,
        const BOTTOM: usize,
        const RIGHT: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > Train<T, B> for ZeroPad2d<T, C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
    {
        outputs_as_workspace!(B);

        /// `dX`: `dY` without its border.
        fn backward(
            &self,
            _x: &[[[[T; W]; H]; C]; B],
            _ws: &mut Self::Workspace,
            d_output: &[[[[T; OW]; OH]; C]; B],
            d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
            _gradients: &mut Self,
        ) {
            let Some(d_input) = d_input else {
                return;
            };
            for (dy, dx) in d_output.iter().zip(d_input) {
                for (dy, dx) in dy.iter().zip(dx.iter_mut()) {
                    for (i, row) in dx.iter_mut().enumerate() {
                        row.copy_from_slice(&dy[TOP + i][LEFT..LEFT + W]);
                    }
                }
            }
        }
    }
}

/// [`ZeroPad2d`]'s int8 form: the border is the input's zero point (the real 0), and the output
/// keeps the input's quantization, as TensorFlow Lite's int8 `PAD` (bit for bit,
/// `tests/tflm_int8.rs`).
///
/// Its tensors in a weights file, on the float layer's module `{m}`: `{m}.input_scale`
/// (`F32 []`) and `{m}.input_zero_point` (`I8 []`).
///
/// ```
/// use constmat::nn::{Layer, QZeroPad2d};
/// use constmat::quant::Quantization;
///
/// let pad = QZeroPad2d::<1, 0, 1, 0, 0, 1, 1, 1, 2>::new(Quantization { scale: 0.1, zero_point: -7 });
/// let mut y = [[[0; 2]; 1]; 1];
/// pad.forward_one(&[[[5]]], &mut y);
/// assert_eq!(y, [[[-7, 5]]]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QZeroPad2d<
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> {
    /// The quantization of the input and the output: the border is its zero point.
    pub input: Quantization,
}

impl<
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> QZeroPad2d<C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
{
    const SHAPE: () = check_padded("QZeroPad2d", (H, W), [TOP, LEFT, BOTTOM, RIGHT], (OH, OW));

    /// The padding of images quantized with `input`; a `const fn`, for `static`s.
    #[must_use]
    pub const fn new(input: Quantization) -> Self {
        let () = Self::SHAPE;
        Self { input }
    }
}

impl<
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> Layer for QZeroPad2d<C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
{
    type In = [[[i8; W]; H]; C];
    type Out = [[[i8; OW]; OH]; C];

    /// `ZeroPad2d` in int8: one module, the input's quantization.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1,
        tensors: &[
            int8_tensor!("input_scale", F32, [], scale),
            int8_tensor!("input_zero_point", I8, [], None),
        ],
    };

    type WithStore<S: Store> = Self;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        let () = Self::SHAPE;
        for (x, y) in x.iter().zip(y) {
            pad_into(x, (TOP, LEFT), self.input.zero_point, y);
        }
    }

    fn to_store<S: Store>(&self) -> Self {
        *self
    }
}

#[cfg(feature = "alloc")]
impl<
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> super::Weights for QZeroPad2d<C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        match k {
            0 => out.extend_from_slice(&self.input.scale.to_le_bytes()),
            1 => out.push(self.input.zero_point as u8),
            _ => panic!("an int8 padding has 2 tensors; asked for tensor {k}"),
        }
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let scale = f32::from_le_bytes(tensor(0)[..4].try_into().expect("4 bytes"));
        Self::new(Quantization {
            scale,
            zero_point: tensor(1)[0] as i8,
        })
    }
}

/// A baked int8 padding's quantization and first problem.
struct Decoded<F>(core::marker::PhantomData<fn() -> F>);

impl<F: SafetensorsFile> Decoded<F> {
    const PARTS: (Quantization, Option<Error>) = {
        let (source, module) = (Source::Index(&F::INDEX), F::FIRST_MODULE);
        match (
            decode::f32_scale_from(source, module, "input_scale"),
            decode::i8_scalar_from(source, module, "input_zero_point"),
        ) {
            (Ok(scale), Ok(zero_point)) => (Quantization { scale, zero_point }, None),
            (Err(e), _) | (_, Err(e)) => (
                Quantization {
                    scale: 0.0,
                    zero_point: 0,
                },
                Some(e),
            ),
        }
    };
}

impl<
    F: SafetensorsFile,
    const C: usize,
    const TOP: usize,
    const LEFT: usize,
    const BOTTOM: usize,
    const RIGHT: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
> Bake<F> for QZeroPad2d<C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
{
    const BAKED: Self = Self::new(Decoded::<F>::PARTS.0);
    const ERROR: Option<Error> = Decoded::<F>::PARTS.1;
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use super::{QZeroPad2d, ZeroPad2d};
    use crate::nn::quantize::outputs_of;
    use crate::nn::{Quantize, QuantizeError, QuantizeSample, Sample};
    use crate::quant::Quantization;

    /// The int8 padding keeps its input's quantization: the real 0 is the zero point.
    impl<
        T,
        const C: usize,
        const TOP: usize,
        const LEFT: usize,
        const BOTTOM: usize,
        const RIGHT: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > Quantize for ZeroPad2d<T, C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>
    where
        T: Sample + num_traits::Float + QuantizeSample<Quantized = i8>,
    {
        type Quantized = QZeroPad2d<C, TOP, LEFT, BOTTOM, RIGHT, H, W, OH, OW>;

        fn quantize_layer(
            &self,
            _layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            Ok((QZeroPad2d::new(input), input, outputs_of(self, samples)))
        }
    }
}
