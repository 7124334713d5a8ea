//! Residual blocks in int8: the branch's int8 output added to the shortcut's (the block's input,
//! or its projection) with TensorFlow Lite's quantized `ADD`, the activation fused as its clamp.
//!
//! The two summands have scales and zero points of their own, and so does the sum. Each is
//! brought to a common fixed-point scale, `2·max(s_b, s_s) / 2^20` per unit, by a
//! [`Multiplier`] below 1, summed, and the sum brought to the output's scale:
//!
//! ```text
//! b' = M_b·((q_b - z_b)·2^20)      M_b = s_b / (2·max(s_b, s_s))
//! s' = M_s·((q_s - z_s)·2^20)      M_s = s_s / (2·max(s_b, s_s))
//! q  = clamp(z_out + M_out·(b' + s'))      M_out = 2·max(s_b, s_s) / (2^20·s_out)
//! ```
//!
//! bit for bit TensorFlow Lite Micro's int8 `ADD` (`tests/tflm_int8.rs`).

use core::mem::MaybeUninit;

use super::arena::{self, Side};
use super::bake::Within;
use super::qdense::{EXPONENT_RANGE, MULTIPLIER_RANGE, QuantizedActivation, int8_tensor};
use super::residual::{BranchPart, ShortcutPart};
use super::{Bake, Identity, Layer, NetSpec, PartName, SafetensorsFile, Store, Values};
use crate::format::decode::{self, Source};
use crate::format::{Error, Part, TensorSpec};
use crate::kernels;
use crate::quant::{Multiplier, Quantization};

/// The left shift of the summands before scaling: 20 bits of headroom for int8 differences.
const LEFT_SHIFT: i32 = kernels::add_i8::ADD_LEFT_SHIFT;

/// The values [`QuantizedAdd`]'s table path sums before one call of the requantization
/// kernels.
const SUMS_CHUNK: usize = 64;

/// TensorFlow Lite's quantized addition of two int8 tensors of their own quantizations into a
/// third: the sum of a residual block.
///
/// ```
/// use constmat::nn::QuantizedAdd;
/// use constmat::quant::Quantization;
///
/// let add = QuantizedAdd::new(
///     Quantization { scale: 0.1, zero_point: 10 },  // the branch: real (q - 10) / 10
///     Quantization { scale: 0.05, zero_point: 0 },  // the shortcut: real q / 20
///     Quantization { scale: 0.2, zero_point: -5 },  // the sum: real (q + 5) / 5
/// );
/// // 1.0 + 0.5 = 1.5, which is 7.5 + (-5): rounded to 3.
/// assert_eq!(add.apply(20, 10, (-128, 127)), 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantizedAdd {
    /// The quantizations of the branch, the shortcut and the sum.
    pub quantization: [Quantization; 3],
    /// The multipliers `M_b`, `M_s`, `M_out`: significands.
    pub multiplier: [i32; 3],
    /// Their powers of two.
    pub exponent: [i32; 3],
}

impl QuantizedAdd {
    /// The addition of a branch quantized with `branch` and a shortcut quantized with
    /// `shortcut` into a sum quantized with `output` (TensorFlow Lite's multipliers, computed
    /// in `f64` from the `f32` scales).
    ///
    /// # Panics
    ///
    /// When a multiplier is out of the fixed-point range: a scale that is not positive and
    /// finite, or an output scale so much smaller than the inputs' that `M_out` is `2^30` or
    /// more ([`QuantizedAdd::multipliers`] says which; `quantize` checks it and reports
    /// [`QuantizeError::Multiplier`](super::QuantizeError::Multiplier)).
    #[must_use]
    pub fn new(branch: Quantization, shortcut: Quantization, output: Quantization) -> Self {
        let m = Self::multipliers(branch, shortcut, output).map(Multiplier::from_real);
        Self {
            quantization: [branch, shortcut, output],
            multiplier: m.map(|m| m.multiplier),
            exponent: m.map(|m| m.exponent),
        }
    }

    /// The real multipliers `M_b`, `M_s` and `M_out` of the addition of `branch` and
    /// `shortcut` into `output`.
    #[must_use]
    pub fn multipliers(
        branch: Quantization,
        shortcut: Quantization,
        output: Quantization,
    ) -> [f64; 3] {
        let twice_max = 2.0 * f64::from(branch.scale.max(shortcut.scale));
        [
            f64::from(branch.scale) / twice_max,
            f64::from(shortcut.scale) / twice_max,
            twice_max / (f64::from(1 << LEFT_SHIFT) * f64::from(output.scale)),
        ]
    }

    /// The fixed-point parameters of the kernels, with the clamp `low..=high`.
    fn scales(&self, (low, high): (i8, i8)) -> kernels::AddScales {
        let input = |i: usize| {
            (
                self.quantization[i].zero_point,
                self.multiplier[i],
                self.exponent[i],
            )
        };
        kernels::AddScales {
            inputs: [input(0), input(1)],
            output: (self.multiplier[2], self.exponent[2]),
            zero_and_range: (self.quantization[2].zero_point, low, high),
        }
    }

    /// The sum of the branch's value `b` and the shortcut's `s`, clamped to `low..=high`.
    #[must_use]
    #[inline]
    pub fn apply(&self, b: i8, s: i8, range: (i8, i8)) -> i8 {
        kernels::add_i8::add_one(b, s, &self.scales(range))
    }

    /// `y = y + s` (branch plus shortcut), value by value, clamped by the activation `A`: on
    /// the SIMD kernel where the CPU has one (`kernels::add_i8_simd`), else through tables.
    ///
    /// An input's scaled value depends on that value alone, one of 256: off the SIMD kernel,
    /// for samples of more values than two tables of 256, each input's is looked up in a
    /// table made first, which leaves one multiplication of the three per value (the
    /// ResNet-8's additions took a quarter of its prediction).
    fn add_into<O: Values<Value = i8>, A: QuantizedActivation, const B: usize>(
        &self,
        y: &mut [O; B],
        s: &[O; B],
    ) {
        let range = A::output_range(self.quantization[2]);
        let scales = self.scales(range);
        let (y, s) = (bytemuck::bytes_of_mut(y), bytemuck::bytes_of(s));
        if kernels::add_i8_fast(&scales) {
            kernels::add_i8_simd(
                bytemuck::cast_slice_mut(y),
                bytemuck::cast_slice(s),
                &scales,
            );
        } else if Self::table_bytes::<[O; B]>() > 0 {
            self.add_with_tables(y, s, &scales);
        } else {
            for (y, &s) in y.iter_mut().zip(s) {
                *y = kernels::add_i8::add_one(*y as i8, s as i8, &scales) as u8;
            }
        }
    }

    /// The stack bytes of [`add_into`](Self::add_into)'s tables for samples `S`: two tables of
    /// 256 `i32` and the sums of [`SUMS_CHUNK`] values where `S` has more values than the
    /// tables, else none.
    const fn table_bytes<S>() -> usize {
        if core::mem::size_of::<S>() > 2 * 256 {
            2 * 256 * 4 + SUMS_CHUNK * 4
        } else {
            0
        }
    }

    /// [`add_into`](Self::add_into) with the inputs' scaled values from tables, on the values'
    /// bytes: a chunk's sums from the tables, then the output's multiplier, zero point and
    /// clamp on them all in one call of the requantization kernels (the output's multiplier
    /// is a requantization with no bias). Never inlined: the tables live in this call's frame
    /// only, after the branch's calls have returned ([`Layer::KERNEL_BYTES`]).
    #[inline(never)]
    fn add_with_tables(&self, y: &mut [u8], s: &[u8], scales: &kernels::AddScales) {
        let table = |i: usize| -> [i32; 256] {
            core::array::from_fn(|q| {
                kernels::add_i8::add_input_scaled(q as u8 as i8, scales.inputs[i])
            })
        };
        let (branch, shortcut) = (table(0), table(1));
        let parameters = (0, scales.output.0, scales.output.1);
        let mut sums = [0_i32; SUMS_CHUNK];
        for (y, s) in y.chunks_mut(SUMS_CHUNK).zip(s.chunks(SUMS_CHUNK)) {
            let sums = &mut sums[..y.len()];
            for ((sum, &y), &s) in sums.iter_mut().zip(&*y).zip(s) {
                *sum = branch[usize::from(y)].saturating_add(shortcut[usize::from(s)]);
            }
            kernels::requantize_uniform_i8(
                sums,
                parameters,
                scales.zero_and_range,
                bytemuck::cast_slice_mut(y),
            );
        }
    }

    /// The addition's tensors, on the block's own module, after its parts'.
    const TENSORS: [TensorSpec; 8] = [
        int8_tensor!("multiplier", I32, [3], MULTIPLIER_RANGE),
        int8_tensor!("exponent", I32, [3], EXPONENT_RANGE),
        int8_tensor!("branch_scale", F32, [], scale),
        int8_tensor!("branch_zero_point", I8, [], None),
        int8_tensor!("shortcut_scale", F32, [], scale),
        int8_tensor!("shortcut_zero_point", I8, [], None),
        int8_tensor!("output_scale", F32, [], scale),
        int8_tensor!("output_zero_point", I8, [], None),
    ];

    /// All zeros: what a block that could not be baked holds (its error says why).
    const ZERO: Self = Self {
        quantization: [Quantization {
            scale: 0.0,
            zero_point: 0,
        }; 3],
        multiplier: [0; 3],
        exponent: [0; 3],
    };

    /// The addition's tensors read at compile time from the file `F` (the block's module).
    #[allow(clippy::result_large_err)] // `format::Error` is `Copy` and heap-free on purpose
    const fn decode<F: SafetensorsFile>() -> Result<Self, Error> {
        macro_rules! tri {
            ($e:expr) => {
                match $e {
                    Ok(value) => value,
                    Err(e) => return Err(e),
                }
            };
        }
        let (source, module) = (Source::Index(&F::INDEX), F::FIRST_MODULE);
        Ok(Self {
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
            quantization: [
                Quantization {
                    scale: tri!(decode::f32_scale_from(source, module, "branch_scale")),
                    zero_point: tri!(decode::i8_scalar_from(source, module, "branch_zero_point")),
                },
                Quantization {
                    scale: tri!(decode::f32_scale_from(source, module, "shortcut_scale")),
                    zero_point: tri!(decode::i8_scalar_from(
                        source,
                        module,
                        "shortcut_zero_point"
                    )),
                },
                Quantization {
                    scale: tri!(decode::f32_scale_from(source, module, "output_scale")),
                    zero_point: tri!(decode::i8_scalar_from(source, module, "output_zero_point")),
                },
            ],
        })
    }

    /// Appends the addition's tensor `k` (as [`TENSORS`](Self::TENSORS)).
    #[cfg(feature = "alloc")]
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        let words = |values: &[i32; 3], out: &mut alloc::vec::Vec<u8>| {
            for v in values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
        match k {
            0 => words(&self.multiplier, out),
            1 => words(&self.exponent, out),
            2..=7 => {
                let q = self.quantization[(k - 2) / 2];
                if k.is_multiple_of(2) {
                    out.extend_from_slice(&q.scale.to_le_bytes());
                } else {
                    out.push(q.zero_point as u8);
                }
            }
            _ => panic!("an int8 addition has 8 tensors; asked for tensor {k}"),
        }
    }

    /// The addition from its tensors 0 to 7.
    #[cfg(feature = "alloc")]
    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let mut words = |k: usize| -> [i32; 3] {
            let bytes = tensor(k);
            core::array::from_fn(|i| {
                i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4 bytes"))
            })
        };
        let (multiplier, exponent) = (words(0), words(1));
        let quantization = core::array::from_fn(|i| Quantization {
            scale: f32::from_le_bytes(tensor(2 + 2 * i)[..4].try_into().expect("4 bytes")),
            zero_point: tensor(3 + 2 * i)[0] as i8,
        });
        Self {
            quantization,
            multiplier,
            exponent,
        }
    }
}

/// [`Residual`](super::Residual)'s int8 form: `A(branch(X) + X)` with the branch in int8 and the
/// sum a [`QuantizedAdd`] (the shortcut's quantization is the block's input's).
///
/// Built by [`quantize`](super::quantize); in [`net!`](crate::net), `Residual<[..]>` in an
/// `Input<i8, ..>` net. Its tensors are the branch's (`{module}.branch.{m}.{field}`), then the
/// addition's on the block's module: `{module}.multiplier` and `{module}.exponent` (`I32 [3]`:
/// branch, shortcut, sum), and the scale and zero point of `{module}.branch_`, `shortcut_` and
/// `output_`.
#[derive(Debug, Clone, PartialEq)]
pub struct QResidual<Br, A = Identity> {
    /// The int8 layers whose output is added to the input.
    pub branch: Br,
    /// The addition.
    pub add: QuantizedAdd,
    /// The activation, the sum's clamp (a zero-sized marker).
    pub activation: A,
}

/// [`ProjectedResidual`](super::ProjectedResidual)'s int8 form: `A(branch(X) + shortcut(X))`,
/// both parts in int8, the sum a [`QuantizedAdd`]. Tensors: the branch's, the shortcut's
/// (`{module}.shortcut.{m}.{field}`), then the addition's as [`QResidual`]'s.
#[derive(Debug, Clone, PartialEq)]
pub struct QProjectedResidual<Br, Sh, A = Identity> {
    /// The int8 layers whose output is added to the shortcut's.
    pub branch: Br,
    /// The int8 projection of the input.
    pub shortcut: Sh,
    /// The addition.
    pub add: QuantizedAdd,
    /// The activation, the sum's clamp (a zero-sized marker).
    pub activation: A,
}

impl<Br, A> Layer for QResidual<Br, A>
where
    Br: Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value = i8>,
    A: QuantizedActivation,
{
    type In = Br::In;
    type Out = Br::In;

    /// The float block's modules, the branch a part, the addition's tensors on the block.
    const SPEC: NetSpec = NetSpec::Block {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        parts: &[Part {
            name: BranchPart::NAME,
            spec: &Br::SPEC,
        }],
        tensors: &QuantizedAdd::TENSORS,
    };

    type WithStore<S: Store> = QResidual<Br::WithStore<S>, A>;

    /// The branch's, and the addition's tables.
    const WORKING_BYTES: usize = Br::WORKING_BYTES + QuantizedAdd::table_bytes::<Br::Out>();

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        self.branch.forward(x, y);
        self.add.add_into::<_, A, B>(y, x);
    }

    const KERNEL_BYTES: usize =
        arena::larger(Br::KERNEL_BYTES, QuantizedAdd::table_bytes::<Br::Out>());

    const ARENA_BYTES: usize = arena::residual_arena_bytes::<Br>();

    fn forward_in_arena(&self, arena: &mut [u8], input: Side) {
        arena::residual_in_arena(&self.branch, arena, input, |y, x| {
            self.add
                .add_into::<_, A, 1>(core::array::from_mut(y), core::array::from_ref(x));
        });
    }

    fn to_store<S: Store>(&self) -> Self::WithStore<S> {
        QResidual {
            branch: self.branch.to_store(),
            add: self.add,
            activation: A::VALUE,
        }
    }
}

impl<Br, Sh, A> Layer for QProjectedResidual<Br, Sh, A>
where
    Br: Layer,
    Br::Out: Values<Value = i8>,
    Sh: Layer<In = Br::In, Out = Br::Out>,
    A: QuantizedActivation,
{
    type In = Br::In;
    type Out = Br::Out;

    /// The float block's modules, the branch and shortcut parts, the addition's tensors on the
    /// block.
    const SPEC: NetSpec = NetSpec::Block {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        parts: &[
            Part {
                name: BranchPart::NAME,
                spec: &Br::SPEC,
            },
            Part {
                name: ShortcutPart::NAME,
                spec: &Sh::SPEC,
            },
        ],
        tensors: &QuantizedAdd::TENSORS,
    };

    type WithStore<S: Store> = QProjectedResidual<Br::WithStore<S>, Sh::WithStore<S>, A>;

    /// The shortcut's output beside the branch's, both parts' own, and the addition's tables.
    const WORKING_BYTES: usize = core::mem::size_of::<Br::Out>()
        + Br::WORKING_BYTES
        + Sh::WORKING_BYTES
        + QuantizedAdd::table_bytes::<Br::Out>();

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        self.branch.forward(x, y);
        let mut s = MaybeUninit::uninit();
        let s = self.shortcut.forward_uninit(x, &mut s);
        self.add.add_into::<_, A, B>(y, s);
    }

    const KERNEL_BYTES: usize = arena::larger(
        arena::larger(Br::KERNEL_BYTES, Sh::KERNEL_BYTES),
        QuantizedAdd::table_bytes::<Br::Out>(),
    );

    const ARENA_BYTES: usize = arena::projected_residual_arena_bytes::<Br, Sh>();

    fn forward_in_arena(&self, arena: &mut [u8], input: Side) {
        arena::projected_residual_in_arena(&self.branch, &self.shortcut, arena, input, |y, s| {
            self.add
                .add_into::<_, A, 1>(core::array::from_mut(y), core::array::from_ref(s));
        });
    }

    fn to_store<S: Store>(&self) -> Self::WithStore<S> {
        QProjectedResidual {
            branch: self.branch.to_store(),
            shortcut: self.shortcut.to_store(),
            add: self.add,
            activation: A::VALUE,
        }
    }
}

#[cfg(feature = "alloc")]
impl<Br, A> super::Weights for QResidual<Br, A>
where
    Br: super::Weights + Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value = i8>,
    A: QuantizedActivation,
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        let split = Br::SPEC.tensor_count();
        if k < split {
            self.branch.write_tensor(k, out);
        } else {
            self.add.write_tensor(k - split, out);
        }
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let split = Br::SPEC.tensor_count();
        let branch = Br::read_tensors(tensor);
        Self {
            branch,
            add: QuantizedAdd::read_tensors(&mut |k| tensor(k + split)),
            activation: A::VALUE,
        }
    }
}

#[cfg(feature = "alloc")]
impl<Br, Sh, A> super::Weights for QProjectedResidual<Br, Sh, A>
where
    Br: super::Weights,
    Br::Out: Values<Value = i8>,
    Sh: super::Weights + Layer<In = Br::In, Out = Br::Out>,
    A: QuantizedActivation,
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        let (branch, shortcut) = (Br::SPEC.tensor_count(), Sh::SPEC.tensor_count());
        if k < branch {
            self.branch.write_tensor(k, out);
        } else if k < branch + shortcut {
            self.shortcut.write_tensor(k - branch, out);
        } else {
            self.add.write_tensor(k - branch - shortcut, out);
        }
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let (split, end) = (
            Br::SPEC.tensor_count(),
            Br::SPEC.tensor_count() + Sh::SPEC.tensor_count(),
        );
        let branch = Br::read_tensors(tensor);
        let shortcut = Sh::read_tensors(&mut |k| tensor(k + split));
        Self {
            branch,
            shortcut,
            add: QuantizedAdd::read_tensors(&mut |k| tensor(k + end)),
            activation: A::VALUE,
        }
    }
}

/// A baked block's addition and its first problem.
struct DecodedAdd<F>(core::marker::PhantomData<fn() -> F>);

impl<F: SafetensorsFile> DecodedAdd<F> {
    const PARTS: (QuantizedAdd, Option<Error>) = match QuantizedAdd::decode::<F>() {
        Ok(add) => (add, None),
        Err(e) => (QuantizedAdd::ZERO, Some(e)),
    };
}

impl<F, Br, A> Bake<F> for QResidual<Br, A>
where
    F: SafetensorsFile,
    Br: Bake<Within<F, BranchPart>> + Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value = i8>,
    A: QuantizedActivation,
{
    const BAKED: Self = Self {
        branch: Br::BAKED,
        add: DecodedAdd::<F>::PARTS.0,
        activation: A::VALUE,
    };
    /// The first error in tensor order: the branch's, then the addition's.
    const ERROR: Option<Error> = match Br::ERROR {
        Some(e) => Some(e),
        None => DecodedAdd::<F>::PARTS.1,
    };
}

impl<F, Br, Sh, A> Bake<F> for QProjectedResidual<Br, Sh, A>
where
    F: SafetensorsFile,
    Br: Bake<Within<F, BranchPart>>,
    Br::Out: Values<Value = i8>,
    Sh: Bake<Within<F, ShortcutPart>> + Layer<In = Br::In, Out = Br::Out>,
    A: QuantizedActivation,
{
    const BAKED: Self = Self {
        branch: Br::BAKED,
        shortcut: Sh::BAKED,
        add: DecodedAdd::<F>::PARTS.0,
        activation: A::VALUE,
    };
    /// The first error in tensor order: the branch's, the shortcut's, the addition's.
    const ERROR: Option<Error> = match (Br::ERROR, Sh::ERROR) {
        (Some(e), _) | (None, Some(e)) => Some(e),
        (None, None) => DecodedAdd::<F>::PARTS.1,
    };
}

#[cfg(feature = "alloc")]
mod quantize {
    use alloc::vec::Vec;

    use super::{QProjectedResidual, QResidual, QuantizedAdd};
    use crate::nn::qdense::QuantizedActivation;
    use crate::nn::quantize::calibrate;
    use crate::nn::{
        Layer, ProjectedResidual, Quantize, QuantizeError, QuantizeSample, Residual, Values,
    };
    use crate::quant::Quantization;

    /// The addition of layer `layer` (a block's sum counts as one layer, after its branch's
    /// and shortcut's), its multipliers checked.
    fn checked_add(
        layer: usize,
        branch: Quantization,
        shortcut: Quantization,
        output: Quantization,
    ) -> Result<QuantizedAdd, QuantizeError> {
        for value in QuantizedAdd::multipliers(branch, shortcut, output) {
            if !(value.is_finite() && (0.0..f64::from(1_u32 << 30)).contains(&value)) {
                return Err(QuantizeError::Multiplier { layer, value });
            }
        }
        Ok(QuantizedAdd::new(branch, shortcut, output))
    }

    /// The branch quantized from the block's input; the sum's quantization calibrated on the
    /// block's float outputs (after the activation, which the addition's clamp applies). In
    /// errors, the branch's layers are counted from the block's first, then the sum is one
    /// more layer.
    impl<Br, A> Quantize for Residual<Br, A>
    where
        Br: Quantize + Layer<Out = <Br as Layer>::In>,
        Br::In: Values<Value: num_traits::Float> + QuantizeSample,
        Br::Quantized: Layer<
                In = <Br::In as QuantizeSample>::Quantized,
                Out = <Br::In as QuantizeSample>::Quantized,
            >,
        <Br::In as QuantizeSample>::Quantized: Values<Value = i8>,
        A: QuantizedActivation,
    {
        type Quantized = QResidual<Br::Quantized, A>;

        fn quantize_layer(
            &self,
            layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            let (branch, branch_output, _) = self.branch.quantize_layer(layer, input, samples)?;
            let (outputs, output) = calibrate(self, layer + Br::LAYERS, samples)?;
            let net = QResidual {
                branch,
                add: checked_add(layer + Br::LAYERS, branch_output, input, output)?,
                activation: A::VALUE,
            };
            Ok((net, output, outputs))
        }

        const LAYERS: usize = Br::LAYERS + 1;
    }

    /// As [`Residual`]'s, the shortcut quantized from the block's input too.
    impl<Br, Sh, A> Quantize for ProjectedResidual<Br, Sh, A>
    where
        Br: Quantize,
        Br::Out: Values<Value: num_traits::Float> + QuantizeSample,
        Sh: Quantize + Layer<In = Br::In, Out = Br::Out>,
        Sh::Quantized:
            Layer<In = <Br::Quantized as Layer>::In, Out = <Br::Quantized as Layer>::Out>,
        <Br::Quantized as Layer>::Out: Values<Value = i8>,
        A: QuantizedActivation,
    {
        type Quantized = QProjectedResidual<Br::Quantized, Sh::Quantized, A>;

        fn quantize_layer(
            &self,
            layer: usize,
            input: Quantization,
            samples: &[Self::In],
        ) -> Result<(Self::Quantized, Quantization, Vec<Self::Out>), QuantizeError> {
            let (branch, branch_output, _) = self.branch.quantize_layer(layer, input, samples)?;
            let (shortcut, shortcut_output, _) =
                self.shortcut
                    .quantize_layer(layer + Br::LAYERS, input, samples)?;
            let sum = layer + Br::LAYERS + Sh::LAYERS;
            let (outputs, output) = calibrate(self, sum, samples)?;
            let net = QProjectedResidual {
                branch,
                shortcut,
                add: checked_add(sum, branch_output, shortcut_output, output)?,
                activation: A::VALUE,
            };
            Ok((net, output, outputs))
        }

        const LAYERS: usize = Br::LAYERS + Sh::LAYERS + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::QuantizedAdd;
    use crate::nn::{Identity, QuantizedActivation, Relu, Relu6};
    use crate::quant::Quantization;

    /// The tables of a large sample, and the path `add_into` takes on this CPU (the SIMD
    /// kernel where it has one), give what `apply` gives value by value: scales far apart and
    /// alike, multipliers of 1 or more (a file's, which saturate), every zero point's sign and
    /// each activation's clamp.
    #[test]
    fn the_tables_and_the_kernel_give_applys_values() {
        let q = |scale, zero_point| Quantization { scale, zero_point };
        let mut add = QuantizedAdd::new(q(0.02, -3), q(0.5, 17), q(0.1, -128));
        let mut adds = std::vec![
            add,
            QuantizedAdd::new(q(0.05, 0), q(0.05, 0), q(0.05, 0)),
            QuantizedAdd::new(q(1e-3, 127), q(2e-3, -128), q(1e-4, 5)),
        ];
        add.multiplier[2] = i32::MAX;
        add.exponent[2] = 3;
        adds.push(add);
        let mut state = 0x2545_F491_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 24) as u8 as i8
        };
        fn check<A: QuantizedActivation>(add: &QuantizedAdd, y: [i8; 1024], s: [i8; 1024]) {
            let range = A::output_range(add.quantization[2]);
            let want: std::vec::Vec<i8> = y
                .iter()
                .zip(&s)
                .map(|(&y, &s)| add.apply(y, s, range))
                .collect();
            assert!(QuantizedAdd::table_bytes::<[i8; 1024]>() > 0);
            let mut got = [y];
            add.add_into::<_, A, 1>(&mut got, &[s]);
            assert_eq!(got[0].as_slice(), want.as_slice(), "{add:?}");
            let mut got = y.map(|v| v as u8);
            add.add_with_tables(&mut got, &s.map(|v| v as u8), &add.scales(range));
            assert_eq!(got.map(|v| v as i8).as_slice(), want.as_slice(), "{add:?}");
        }
        for add in &adds {
            let (y, s) = (
                core::array::from_fn(|_| next()),
                core::array::from_fn(|_| next()),
            );
            check::<Identity>(add, y, s);
            check::<Relu>(add, y, s);
            check::<Relu6>(add, y, s);
        }
    }
}
