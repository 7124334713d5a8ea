//! The MLPerf Tiny reference models (`../shared/mlperf-tiny/`, or `$MLPERF_TINY_DIR`) imported:
//! the weights file loads into the net the generated source names, and the net's outputs are
//! TensorFlow Lite Micro's, bit for bit, on the inputs of the fixtures that
//! `tests/fixtures/tflm_mlperf_*.py` wrote with TFLM's interpreter.

use std::path::PathBuf;

use constmat::format;
use constmat::io::safetensors as st;
use constmat::nn::{Layer, Relu};

/// Where the models are: `$MLPERF_TINY_DIR`, else `../shared/mlperf-tiny` beside the
/// repository. `.ci/run` sets the variable; without it and without the directory the tests
/// say so and pass (a fresh clone elsewhere has no models).
fn model(file: &str) -> Option<Vec<u8>> {
    let dir = match std::env::var_os("MLPERF_TINY_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/mlperf-tiny");
            if !dir.is_dir() {
                eprintln!(
                    "skipped: no MLPerf Tiny models at {} (set MLPERF_TINY_DIR)",
                    dir.display()
                );
                return None;
            }
            dir
        }
    };
    let path = dir.join(file);
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

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
}

#[test]
fn the_int8_resnet8_is_tflm_bit_for_bit() {
    let Some(bytes) = model("pretrainedResnet_quant.tflite") else {
        return;
    };
    let imported =
        constmat_import::import(&bytes, "pretrainedResnet_quant.tflite", "resnet").unwrap();
    type ResNet8 = constmat::net![
        Input<i8, 3, 32, 32>,
        Conv2d<3, 16, 3, 1, 1, Relu>,
        Residual<[Conv2d<16, 16, 3, 1, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], Relu>,
        Residual<[ZeroPad2d<0, 1, 0, 1>, Conv2d<16, 32, 3, 2, 0, Relu>, Conv2d<32, 32, 3, 1, 1>], [Conv2d<16, 32, 1, 2, 0>], Relu>,
        Residual<[ZeroPad2d<0, 1, 0, 1>, Conv2d<32, 64, 3, 2, 0, Relu>, Conv2d<64, 64, 3, 1, 1>], [Conv2d<32, 64, 1, 2, 0>], Relu>,
        GlobalAvgPool2d,
        Flatten,
        Dense<64, 10>,
        Softmax,
    ];
    let net: ResNet8 = st::from_bytes(&imported.weights).unwrap();
    matches_tflm(&net, "mlperf-resnet8-int8-io.safetensors");
}
