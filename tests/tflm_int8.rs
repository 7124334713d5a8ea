//! constmat's int8 layers against TensorFlow Lite Micro's reference kernels, bit for bit.
//!
//! Each fixture of `tests/fixtures/tflm/` (written by `tests/fixtures/tflm_int8_kernels.py`,
//! which builds a one-operator int8 `.tflite` model and runs it in TFLM's interpreter) holds an
//! operator's quantized parameters, 64 random inputs and TFLM's outputs. Each test builds the
//! constmat layer from the same integers and scales, as an importer of the model would, and
//! asserts the same outputs on every input. The tests run on the instruction set the CPU has;
//! the int8 kernels' paths are compared with each other in the crate's own tests.

use constmat::format::{self, Dtype};
use constmat::nn::{
    Activation, AvgPool2d, Chain, Identity, Inline, Layer, QConv2d, QDense, QDepthwiseConv2d,
    QSoftmax, QZeroPad2d, QuantizedActivation, QuantizedAdd, Relu, Relu6, Sample,
};
use constmat::quant::{Multiplier, Quantization};

/// One fixture file.
struct Fixture {
    name: &'static str,
    bytes: Vec<u8>,
}

impl Fixture {
    fn open(name: &'static str) -> Self {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tflm")
            .join(format!("{name}.safetensors"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self { name, bytes }
    }

    /// Tensor `tensor`'s values (I8, I32 or F32, all exact in f64) and shape.
    fn values(&self, tensor: &str) -> (Vec<f64>, Vec<usize>) {
        let header = format::parse(&self.bytes).unwrap();
        let t = header
            .find(tensor.as_bytes())
            .unwrap_or_else(|| panic!("{}: no tensor {tensor}", self.name));
        let values = match t.dtype {
            Dtype::I8 => t.data.iter().map(|&b| f64::from(b as i8)).collect(),
            Dtype::I32 => t
                .data
                .chunks_exact(4)
                .map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap())))
                .collect(),
            Dtype::F32 => t
                .data
                .chunks_exact(4)
                .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
                .collect(),
            other => panic!("{}: {tensor} is {other:?}", self.name),
        };
        (values, t.shape.dims().to_vec())
    }

    fn i8s(&self, tensor: &str) -> Vec<i8> {
        self.values(tensor).0.iter().map(|&v| v as i8).collect()
    }

    fn i32s(&self, tensor: &str) -> Vec<i32> {
        self.values(tensor).0.iter().map(|&v| v as i32).collect()
    }

    fn f32s(&self, tensor: &str) -> Vec<f32> {
        self.values(tensor).0.iter().map(|&v| v as f32).collect()
    }

    /// The quantization `{prefix}_scale`, `{prefix}_zero_point`.
    fn quantization(&self, prefix: &str) -> Quantization {
        Quantization {
            scale: self.f32s(&format!("{prefix}_scale"))[0],
            zero_point: i8::try_from(self.i32s(&format!("{prefix}_zero_point"))[0]).unwrap(),
        }
    }

    /// Checks the fixture's geometry and fused activation against the layer's type.
    fn expect_geometry(&self, kernel: usize, stride: usize, padding: usize, activation: i32) {
        let ints = |t: &str| self.i32s(t).iter().map(|&v| v as usize).collect::<Vec<_>>();
        assert_eq!(ints("kernel"), [kernel; 2], "{}: kernel", self.name);
        assert_eq!(ints("stride"), [stride; 2], "{}: stride", self.name);
        assert_eq!(ints("padding"), [padding; 4], "{}: padding", self.name);
        assert_eq!(
            self.i32s("activation"),
            [activation],
            "{}: activation",
            self.name
        );
    }

    /// `layer` on every input, against every output of TFLM: equal, or a report of the first
    /// sample that differs and how many values differ in all.
    fn assert_matches<L: Layer>(
        &self,
        layer: &L,
        from: impl Fn(&[i8]) -> L::In,
        to: impl Fn(&L::Out) -> Vec<i8>,
    ) {
        let (_, shape) = self.values("input");
        let samples = shape[0];
        let inputs = self.i8s("input");
        let outputs = self.i8s("output");
        let (x_len, y_len) = (inputs.len() / samples, outputs.len() / samples);
        let mut differing = 0;
        let mut first = None;
        for s in 0..samples {
            let x = from(&inputs[s * x_len..(s + 1) * x_len]);
            let mut y = L::Out::ZERO;
            layer.forward_one(&x, &mut y);
            let got = to(&y);
            let want = &outputs[s * y_len..(s + 1) * y_len];
            let wrong = got.iter().zip(want).filter(|(g, w)| g != w).count();
            if wrong > 0 && first.is_none() {
                first = Some((s, got.clone(), want.to_vec()));
            }
            differing += wrong;
        }
        if let Some((s, got, want)) = first {
            panic!(
                "{}: {differing} of {} outputs differ from TFLM's; sample {s}:\n got:  {got:?}\n want: {want:?}",
                self.name,
                outputs.len()
            );
        }
    }
}

/// `values` as a `[[[i8; W]; H]; C]` image (channels first).
fn image<const C: usize, const H: usize, const W: usize>(values: &[i8]) -> [[[i8; W]; H]; C] {
    assert_eq!(values.len(), C * H * W);
    core::array::from_fn(|c| {
        core::array::from_fn(|h| core::array::from_fn(|w| values[(c * H + h) * W + w]))
    })
}

fn flat<const C: usize, const H: usize, const W: usize>(image: &[[[i8; W]; H]; C]) -> Vec<i8> {
    image.as_flattened().as_flattened().to_vec()
}

/// TFLite's requantization multiplier of output channel `o`: `s_in · s_w[o] / s_out`, in f64
/// from the f32 scales (`PopulateConvolutionQuantizationParams`).
fn multipliers<const N: usize>(
    input: Quantization,
    weight_scales: &[f32],
    output: Quantization,
) -> [Multiplier; N] {
    assert_eq!(weight_scales.len(), N);
    core::array::from_fn(|o| {
        Multiplier::from_real(
            f64::from(input.scale) * f64::from(weight_scales[o]) / f64::from(output.scale),
        )
    })
}

/// TFLite's bias with the input's zero point folded in, as constmat's int8 layers hold it:
/// `b - z_in · Σ W[o]` (TFLite adds `-z_in` to every input instead; the sums are equal).
fn folded_bias<const N: usize>(bias: &[i32], weight: &[i8], input: Quantization) -> [i32; N] {
    let per_row = weight.len() / N;
    core::array::from_fn(|o| {
        let sum: i32 = weight[o * per_row..(o + 1) * per_row]
            .iter()
            .map(|&w| i32::from(w))
            .sum();
        bias[o] - i32::from(input.zero_point) * sum
    })
}

/// The TFLite activation code of `A`.
fn activation_code<A: Activation>() -> i32 {
    match A::TORCH_MODULE {
        None => 0,
        Some("ReLU") => 1,
        Some("ReLU6") => 3,
        Some(other) => panic!("no TFLite code for {other}"),
    }
}

fn conv2d<
    const C: usize,
    const OC: usize,
    const K: usize,
    const S: usize,
    const P: usize,
    const H: usize,
    const OH: usize,
    A: QuantizedActivation,
>(
    name: &'static str,
) {
    let f = Fixture::open(name);
    f.expect_geometry(K, S, P, activation_code::<A>());
    let (input, output) = (f.quantization("input"), f.quantization("output"));
    let weight = f.i8s("weight");
    let layer: QConv2d<C, OC, K, S, P, H, H, OH, OH, A, Inline> = QConv2d::new(
        core::array::from_fn(|o| image::<C, K, K>(&weight[o * C * K * K..(o + 1) * C * K * K])),
        folded_bias::<OC>(&f.i32s("bias"), &weight, input),
        multipliers::<OC>(input, &f.f32s("weight_scale"), output),
        input,
        output,
    );
    f.assert_matches(&layer, image::<C, H, H>, flat::<OC, OH, OH>);
}

#[test]
fn conv2d_matches_tflm() {
    conv2d::<3, 4, 3, 1, 1, 6, 6, Relu6>("conv2d-same-relu6");
    conv2d::<4, 6, 1, 2, 0, 8, 4, Identity>("conv2d-1x1-stride2");
    conv2d::<2, 5, 3, 2, 0, 7, 3, Relu>("conv2d-valid-relu");
}

fn depthwise<
    const C: usize,
    const OC: usize,
    const K: usize,
    const S: usize,
    const P: usize,
    const H: usize,
    const OH: usize,
    A: QuantizedActivation,
>(
    name: &'static str,
) {
    let f = Fixture::open(name);
    f.expect_geometry(K, S, P, activation_code::<A>());
    let (input, output) = (f.quantization("input"), f.quantization("output"));
    let weight = f.i8s("weight");
    let layer: QDepthwiseConv2d<C, OC, K, S, P, H, H, OH, OH, A, Inline> = QDepthwiseConv2d::new(
        core::array::from_fn(|o| image::<1, K, K>(&weight[o * K * K..(o + 1) * K * K])),
        folded_bias::<OC>(&f.i32s("bias"), &weight, input),
        multipliers::<OC>(input, &f.f32s("weight_scale"), output),
        input,
        output,
    );
    f.assert_matches(&layer, image::<C, H, H>, flat::<OC, OH, OH>);
}

#[test]
fn depthwise_conv2d_matches_tflm() {
    depthwise::<4, 8, 3, 1, 1, 6, 6, Relu>("depthwise-same-relu");
    depthwise::<3, 3, 3, 2, 0, 7, 3, Relu6>("depthwise-valid-relu6");
}

fn fully_connected<const I: usize, const O: usize, A: QuantizedActivation>(name: &'static str) {
    let f = Fixture::open(name);
    assert_eq!(f.i32s("activation"), [activation_code::<A>()], "{name}");
    let (input, output) = (f.quantization("input"), f.quantization("output"));
    let weight = f.i8s("weight");
    let scale = f.f32s("weight_scale");
    assert_eq!(scale.len(), 1, "{name}: one weight scale");
    let layer: QDense<I, O, A, Inline> = QDense::new(
        core::array::from_fn(|o| core::array::from_fn(|i| weight[o * I + i])),
        folded_bias::<O>(&f.i32s("bias"), &weight, input),
        multipliers::<O>(input, &[scale[0]; O], output),
        input,
        output,
    );
    f.assert_matches(&layer, |x| x.try_into().unwrap(), |y: &[i8; O]| y.to_vec());
}

#[test]
fn fully_connected_matches_tflm() {
    fully_connected::<20, 7, Relu>("fully_connected-relu");
    fully_connected::<13, 5, Identity>("fully_connected-none");
}

fn average_pool<const C: usize, const K: usize, const S: usize, const H: usize, const OH: usize>(
    name: &'static str,
) {
    let f = Fixture::open(name);
    f.expect_geometry(K, S, 0, 0);
    assert_eq!(
        f.quantization("input"),
        f.quantization("output"),
        "{name}: one quantization"
    );
    let layer = AvgPool2d::<i8, C, K, S, H, H, OH, OH>::new();
    f.assert_matches(&layer, image::<C, H, H>, flat::<C, OH, OH>);
}

#[test]
fn average_pool_matches_tflm() {
    average_pool::<3, 2, 2, 6, 3>("average_pool-2x2");
    average_pool::<5, 8, 8, 8, 1>("average_pool-global");
    average_pool::<2, 3, 2, 7, 3>("average_pool-3x3-stride2");
}

fn softmax<const N: usize>(name: &'static str) {
    let f = Fixture::open(name);
    assert_eq!(f.f32s("beta"), [1.0], "{name}: beta");
    assert_eq!(
        f.quantization("output"),
        constmat::nn::SOFTMAX_OUTPUT,
        "{name}"
    );
    let layer = QSoftmax::<N>::new(f.quantization("input"));
    f.assert_matches(&layer, |x| x.try_into().unwrap(), |y: &[i8; N]| y.to_vec());
}

#[test]
fn softmax_matches_tflm() {
    softmax::<10>("softmax-10");
    softmax::<12>("softmax-12-small-scale");
    // A scale of 64: s·2^26 held at 2^31 - 1, the shift 31, only the largest logits count.
    softmax::<10>("softmax-large-scale");
    // An ImageNet-sized head, and rows of up to 511 equal largest logits (TFLM stops at 512,
    // where its shift would be 32; constmat gives 0 there, `tests/quantize_blocks.rs`).
    softmax::<1000>("softmax-1000");
}

fn add<A: QuantizedActivation>(name: &'static str) {
    let f = Fixture::open(name);
    assert_eq!(f.i32s("activation"), [activation_code::<A>()], "{name}");
    let add = QuantizedAdd::new(
        f.quantization("input"),
        f.quantization("input2"),
        f.quantization("output"),
    );
    let range = A::output_range(f.quantization("output"));
    let (left, right, want) = (f.i8s("input"), f.i8s("input2"), f.i8s("output"));
    let got: Vec<i8> = left
        .iter()
        .zip(&right)
        .map(|(&b, &s)| add.apply(b, s, range))
        .collect();
    let differing = got.iter().zip(&want).filter(|(g, w)| g != w).count();
    assert_eq!(
        differing,
        0,
        "{name}: {differing} of {} sums differ from TFLM's",
        want.len()
    );
}

#[test]
fn add_matches_tflm() {
    add::<Relu>("add-relu");
    add::<Identity>("add-none");
    // Outputs at both of ReLU6's clamps.
    add::<Relu6>("add-relu6");
}

#[test]
fn pad_matches_tflm() {
    let f = Fixture::open("pad-1-2-0-3");
    assert_eq!(f.i32s("padding"), [1, 0, 2, 3], "top, left, bottom, right");
    assert_eq!(f.quantization("input"), f.quantization("output"));
    let layer = QZeroPad2d::<3, 1, 0, 2, 3, 5, 4, 8, 7>::new(f.quantization("input"));
    f.assert_matches(&layer, image::<3, 5, 4>, flat::<3, 8, 7>);
}

/// TensorFlow's SAME padding of a stride-2 window on an even size (0 before, 1 after): the
/// padding layer, then the convolution with padding 0.
#[test]
fn same_padding_with_stride_2_matches_tflm() {
    let f = Fixture::open("conv2d-same-stride2");
    assert_eq!(f.i32s("padding"), [0, 0, 1, 1]);
    assert_eq!(
        (f.i32s("kernel"), f.i32s("stride")),
        (vec![3, 3], vec![2, 2])
    );
    assert_eq!(f.i32s("activation"), [activation_code::<Relu6>()]);
    let (input, output) = (f.quantization("input"), f.quantization("output"));
    let weight = f.i8s("weight");
    let conv: QConv2d<3, 4, 3, 2, 0, 9, 9, 4, 4, Relu6, Inline> = QConv2d::new(
        core::array::from_fn(|o| image::<3, 3, 3>(&weight[o * 27..(o + 1) * 27])),
        folded_bias::<4>(&f.i32s("bias"), &weight, input),
        multipliers::<4>(input, &f.f32s("weight_scale"), output),
        input,
        output,
    );
    let net = Chain::new(QZeroPad2d::<3, 0, 0, 1, 1, 8, 8, 9, 9>::new(input), conv);
    f.assert_matches(&net, image::<3, 8, 8>, flat::<4, 4, 4>);

    let f = Fixture::open("depthwise-same-stride2");
    assert_eq!(f.i32s("padding"), [0, 0, 1, 1]);
    assert_eq!(f.i32s("activation"), [activation_code::<Relu>()]);
    let (input, output) = (f.quantization("input"), f.quantization("output"));
    let weight = f.i8s("weight");
    let depthwise: QDepthwiseConv2d<4, 4, 3, 2, 0, 9, 9, 4, 4, Relu, Inline> =
        QDepthwiseConv2d::new(
            core::array::from_fn(|o| image::<1, 3, 3>(&weight[o * 9..(o + 1) * 9])),
            folded_bias::<4>(&f.i32s("bias"), &weight, input),
            multipliers::<4>(input, &f.f32s("weight_scale"), output),
            input,
            output,
        );
    let net = Chain::new(
        QZeroPad2d::<4, 0, 0, 1, 1, 8, 8, 9, 9>::new(input),
        depthwise,
    );
    f.assert_matches(&net, image::<4, 8, 8>, flat::<4, 4, 4>);
}

/// TFLM's average pool whose window is the whole image, as the global average pool.
#[test]
fn global_average_pool_matches_tflm() {
    let f = Fixture::open("average_pool-global");
    assert_eq!(f.i32s("kernel"), [8, 8]);
    let layer = constmat::nn::GlobalAvgPool2d::<i8, 5, 8, 8>::new();
    f.assert_matches(&layer, image::<5, 8, 8>, flat::<5, 1, 1>);
}

/// A kernel whose height and width differ (DS-CNN's first layer, scaled down: 10 x 4, stride 2,
/// TensorFlow's `SAME` padding 4 above, 5 below, 1 on each side).
#[test]
fn a_10x4_kernel_matches_tflm() {
    let f = Fixture::open("conv2d-10x4-stride2-same");
    assert_eq!(f.i32s("kernel"), [10, 4]);
    assert_eq!(f.i32s("stride"), [2, 2]);
    assert_eq!(f.i32s("padding"), [4, 1, 5, 1], "top, left, bottom, right");
    assert_eq!(f.i32s("activation"), [activation_code::<Relu>()]);
    let (input, output) = (f.quantization("input"), f.quantization("output"));
    let weight = f.i8s("weight");
    let conv: QConv2d<1, 4, 10, 2, 0, 22, 8, 7, 3, Relu, Inline, 4> = QConv2d::new(
        core::array::from_fn(|o| {
            [core::array::from_fn(|r| {
                core::array::from_fn(|c| weight[o * 40 + r * 4 + c])
            })]
        }),
        folded_bias::<4>(&f.i32s("bias"), &weight, input),
        multipliers::<4>(input, &f.f32s("weight_scale"), output),
        input,
        output,
    );
    let net = Chain::new(QZeroPad2d::<1, 4, 1, 5, 1, 13, 6, 22, 8>::new(input), conv);
    f.assert_matches(&net, image::<1, 13, 6>, flat::<4, 7, 3>);
}
