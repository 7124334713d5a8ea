//! The MLPerf Tiny reference models (`../shared/mlperf-tiny/`, or `$MLPERF_TINY_DIR`) imported:
//! the weights file loads into the net the generated source names, and the net's outputs are
//! the reference interpreters' on random inputs: TensorFlow Lite Micro's bit for bit for the
//! int8 models, LiteRT's within 1e-5 for the f32 one. `fixtures/reference.py` ran the
//! interpreters on 1,000 inputs and kept their outputs; the inputs are made again here by the
//! same generator. A debug build runs the first 100 (`generated_crate.rs` runs all 1,000
//! through the generated `invoke`, optimized).
//! The constmat repository's own fixtures (`tests/fixtures/mlperf-*-io.safetensors`, written by
//! `tests/fixtures/tflm_mlperf_*.py`, MFCC- and image-like inputs among them) are checked too.

mod common;

use common::model;
use std::path::PathBuf;

use constmat::format;
use constmat::io::safetensors as st;
use constmat::nn::{Layer, Relu};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Tensor `name` of a fixture's bytes, as `i8`s.
fn i8s(bytes: &[u8], name: &str) -> Vec<i8> {
    let header = format::parse(bytes).unwrap();
    let t = header
        .find(name.as_bytes())
        .unwrap_or_else(|| panic!("no tensor {name}"));
    t.data.iter().map(|&b| b as i8).collect()
}

/// Runs `net` on every input of the fixture `io` (NCHW `[C][H][W]` samples) and compares
/// with TFLM's outputs.
fn matches_tflm<N, const C: usize, const H: usize, const W: usize, const K: usize>(
    net: &N,
    io: &str,
) where
    N: Layer<In = [[[i8; W]; H]; C], Out = [i8; K]>,
{
    let io = fixture(io);
    let (inputs, outputs) = (i8s(&io, "input"), i8s(&io, "output"));
    let samples = outputs.len() / K;
    assert!(samples > 0 && inputs.len() == samples * C * H * W);
    let mut differing = 0;
    for s in 0..samples {
        let x: [[[i8; W]; H]; C] = core::array::from_fn(|c| {
            core::array::from_fn(|h| {
                core::array::from_fn(|w| inputs[s * C * H * W + (c * H + h) * W + w])
            })
        });
        let mut y = [0_i8; K];
        net.forward_one(&x, &mut y);
        differing += y
            .iter()
            .zip(&outputs[s * K..(s + 1) * K])
            .filter(|(a, b)| a != b)
            .count();
    }
    assert_eq!(
        differing,
        0,
        "{differing} of {} outputs differ from TFLM's",
        outputs.len()
    );
}

/// MLPerf Tiny's ResNet-8 as the importer writes it, with elements of type `$t` (TensorFlow's
/// `SAME` 3 x 3 stride-2 convolutions as `ZeroPad2d<0, 1, 0, 1>` and padding 0).
macro_rules! resnet8 {
    ($t:ident) => {
        constmat::net![
            Input<$t, 3, 32, 32>,
            Conv2d<3, 16, 3, 1, 1, Relu>,
            Residual<[Conv2d<16, 16, 3, 1, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], Relu>,
            Residual<[ZeroPad2d<0, 1, 0, 1>, Conv2d<16, 32, 3, 2, 0, Relu>, Conv2d<32, 32, 3, 1, 1>], [Conv2d<16, 32, 1, 2, 0>], Relu>,
            Residual<[ZeroPad2d<0, 1, 0, 1>, Conv2d<32, 64, 3, 2, 0, Relu>, Conv2d<64, 64, 3, 1, 1>], [Conv2d<32, 64, 1, 2, 0>], Relu>,
            GlobalAvgPool2d,
            Flatten,
            Dense<64, 10>,
            Softmax,
        ]
    };
}

#[test]
fn the_int8_dscnn_is_tflm_bit_for_bit() {
    let Some(bytes) = model("kws_ref_model.tflite") else {
        return;
    };
    let imported = constmat_import::import(&bytes, "kws_ref_model.tflite", "kws").unwrap();
    type DsCnn = constmat::net![
        Input<i8, 1, 49, 10>,
        ZeroPad2d<1, 1, 4, 5>,
        Conv2d<1, 64, (10, 4), 2, 0, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, 1, 0, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, 1, 0, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, 1, 0, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, 1, 0, Relu>,
        GlobalAvgPool2d,
        Flatten,
        Dense<64, 12>,
        Softmax,
    ];
    for line in [
        "Input<i8, 1, 49, 10>,",
        "ZeroPad2d<1, 1, 4, 5>,",
        "Conv2d<1, 64, (10, 4), 2, 0, Relu>,",
    ] {
        assert!(
            imported.source.contains(&format!("\n    {line}\n")),
            "{line}\n{}",
            imported.source
        );
    }
    let net: DsCnn = st::from_bytes(&imported.weights).unwrap();
    matches_tflm(&net, "mlperf-dscnn-int8-io.safetensors");
    matches_tflm_on_random_inputs(&net, "kws_ref_model");
}

#[test]
fn the_int8_resnet8_is_tflm_bit_for_bit() {
    let Some(bytes) = model("pretrainedResnet_quant.tflite") else {
        return;
    };
    let imported =
        constmat_import::import(&bytes, "pretrainedResnet_quant.tflite", "resnet").unwrap();
    type ResNet8 = resnet8!(i8);
    let net: ResNet8 = st::from_bytes(&imported.weights).unwrap();
    matches_tflm(&net, "mlperf-resnet8-int8-io.safetensors");
    matches_tflm_on_random_inputs(&net, "pretrainedResnet_quant");
}

/// `fixtures/reference.py`'s inputs: xorshift32 from 0x2545F491, one value per step, in
/// TensorFlow Lite's order (`NHWC`), sample after sample; a value is the step's top byte.
struct Inputs(u32);

impl Inputs {
    fn new() -> Self {
        Self(0x2545_F491)
    }

    fn next(&mut self) -> u8 {
        let mut s = self.0;
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        self.0 = s;
        (s >> 24) as u8
    }

    /// One sample in constmat's order `[C][H][W]`.
    fn sample<T: Copy + Default, const C: usize, const H: usize, const W: usize>(
        &mut self,
        value: impl Fn(u8) -> T,
    ) -> [[[T; W]; H]; C] {
        let mut x = [[[T::default(); W]; H]; C];
        for h in 0..H {
            for w in 0..W {
                for channel in x.iter_mut() {
                    channel[h][w] = value(self.next());
                }
            }
        }
        x
    }
}

/// The outputs `fixtures/reference.py` kept for `stem`, flat.
fn reference(stem: &str) -> (Vec<u8>, usize) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/reference-{stem}.safetensors"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = format::parse(&bytes).unwrap();
    let t = header.find(b"output").expect("an output tensor");
    (t.data.to_vec(), t.shape.dims()[1])
}

/// The int8 `net` on the first `SAMPLES` inputs against TensorFlow Lite Micro's outputs for
/// `stem`.
fn matches_tflm_on_random_inputs<
    N,
    const C: usize,
    const H: usize,
    const W: usize,
    const K: usize,
>(
    net: &N,
    stem: &str,
) where
    N: Layer<In = [[[i8; W]; H]; C], Out = [i8; K]>,
{
    let (want, classes) = reference(stem);
    assert_eq!(classes, K);
    let mut inputs = Inputs::new();
    let mut differing = 0;
    assert_eq!(want.len() / K, 1000);
    for sample in want.chunks(K).take(SAMPLES) {
        let x = inputs.sample::<i8, C, H, W>(|b| (b ^ 0x80) as i8);
        let mut y = [0_i8; K];
        net.forward_one(&x, &mut y);
        differing += y
            .iter()
            .zip(sample)
            .filter(|&(&a, &b)| a != b as i8)
            .count();
    }
    assert_eq!(
        differing,
        0,
        "{differing} of {} outputs differ from TFLM's",
        SAMPLES * K
    );
}

/// The reference inputs a debug build runs.
const SAMPLES: usize = 100;

#[test]
fn the_f32_resnet8_is_litert_within_1e_5() {
    let Some(bytes) = model("pretrainedResnet.tflite") else {
        return;
    };
    let imported = constmat_import::import(&bytes, "pretrainedResnet.tflite", "resnet").unwrap();
    type ResNet8 = resnet8!(f32);
    let net: ResNet8 = st::from_bytes(&imported.weights).unwrap();
    let (want, classes) = reference("pretrainedResnet");
    assert_eq!(classes, 10);
    let want: Vec<f32> = want
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let mut inputs = Inputs::new();
    assert_eq!(want.len() / 10, 1000);
    let mut worst = 0.0_f32;
    for sample in want.chunks(10).take(SAMPLES / 5) {
        let x = inputs.sample::<f32, 3, 32, 32>(f32::from);
        let mut y = [0.0_f32; 10];
        net.forward_one(&x, &mut y);
        // Relative to the sample's largest probability.
        let largest = sample.iter().fold(0.0_f32, |m, &v| m.max(v.abs()));
        for (a, b) in y.iter().zip(sample) {
            worst = worst.max((a - b).abs() / largest);
        }
    }
    assert!(
        worst <= 1e-5,
        "the outputs differ from LiteRT's by up to {worst} (relative)"
    );
}

/// `examples/keyword_spotting` holds the DS-CNN as the importer writes it today.
#[test]
fn the_keyword_spotting_example_holds_todays_import() {
    let Some(bytes) = model("kws_ref_model.tflite") else {
        return;
    };
    let imported = constmat_import::import(&bytes, "kws_ref_model.tflite", "kws").unwrap();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/keyword_spotting");
    let source = std::fs::read_to_string(dir.join("kws.rs")).unwrap();
    let weights = std::fs::read(dir.join("kws.safetensors")).unwrap();
    assert!(
        source == imported.source && weights == imported.weights,
        "examples/keyword_spotting differs from today's import: run \
         `cargo run --release -p constmat-import -- kws_ref_model.tflite --out examples/keyword_spotting --name kws`"
    );
}
