//! MLPerf Tiny's int8 ResNet-8 (`pretrainedResnet_quant.tflite`, Apache-2.0) in constmat: its
//! parameters, converted once by `tests/fixtures/tflm_mlperf_resnet8.py` into a constmat
//! weights file, load and bake into `net!`'s int8 net, and its outputs on 32 inputs are
//! TensorFlow Lite Micro's, bit for bit. The whole int8 stack on a model people deploy: per-channel
//! convolutions, TensorFlow's uneven `SAME` padding (`ZeroPad2d`), residual additions of three
//! quantizations, the global average pool, the dense layer and the int8 softmax.
#![cfg(feature = "safetensors")]

use constmat::embed::Baked;
use constmat::format;
use constmat::io::safetensors as st;
use constmat::nn::{Arena, Layer, Relu};

/// The model as `net!` writes it: `SAME` 3 x 3 stride-2 convolutions as `ZeroPad2d<0, 1, 0, 1>`
/// (0 before, 1 after) and padding 0; the activations fused as the file fuses them.
type ResNet8Int8 = constmat::net![
    Input<i8, 3, 32, 32>,
    Conv2d<3, 16, 3, 1, 1, Relu>,
    Residual<[Conv2d<16, 16, 3, 1, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], Relu>,
    Residual<[ZeroPad2d<0, 1, 0, 1>, Conv2d<16, 32, 3, 2, 0, Relu>, Conv2d<32, 32, 3, 1, 1>], [Conv2d<16, 32, 1, 2, 0>], Relu>,
    Residual<[ZeroPad2d<0, 1, 0, 1>, Conv2d<32, 64, 3, 2, 0, Relu>, Conv2d<64, 64, 3, 1, 1>], [Conv2d<32, 64, 1, 2, 0>], Relu>,
    AvgPool2d<8>,
    Flatten,
    Dense<64, 10>,
    Softmax,
];

static BAKED: Baked<ResNet8Int8> =
    constmat::include_net!("fixtures/mlperf-resnet8-int8.safetensors");

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Tensor `name` of `bytes` as `i8`s.
fn i8s(bytes: &[u8], name: &str) -> Vec<i8> {
    let header = format::parse(bytes).unwrap();
    let t = header
        .find(name.as_bytes())
        .unwrap_or_else(|| panic!("no tensor {name}"));
    assert_eq!(t.dtype, format::Dtype::I8, "{name}");
    t.data.iter().map(|&b| b as i8).collect()
}

#[test]
fn mlperf_resnet8_int8_matches_tflm() {
    let loaded: ResNet8Int8 = st::from_bytes(&fixture("mlperf-resnet8-int8.safetensors")).unwrap();
    let baked: &ResNet8Int8 = &BAKED;
    assert_eq!(baked, &loaded);
    let io = fixture("mlperf-resnet8-int8-io.safetensors");
    let (inputs, outputs) = (i8s(&io, "input"), i8s(&io, "output"));
    let samples = outputs.len() / 10;
    assert_eq!(inputs.len(), samples * 3 * 32 * 32);
    let mut differing = 0;
    let mut first = None;
    let mut arena = Arena::<{ <ResNet8Int8 as Layer>::ARENA_BYTES }>::new();
    for s in 0..samples {
        let x: [[[i8; 32]; 32]; 3] = core::array::from_fn(|c| {
            core::array::from_fn(|h| {
                core::array::from_fn(|w| inputs[s * 3072 + (c * 32 + h) * 32 + w])
            })
        });
        let mut y = [0_i8; 10];
        baked.forward_one(&x, &mut y);
        // The memory plan runs the same kernels: the same outputs, in an arena reused from the
        // previous sample.
        *arena.input(baked) = x;
        assert_eq!(*arena.run(baked), y, "sample {s} in the arena");
        let want = &outputs[s * 10..(s + 1) * 10];
        let wrong = y.iter().zip(want).filter(|(g, w)| g != w).count();
        if wrong > 0 && first.is_none() {
            first = Some((s, y, want.to_vec()));
        }
        differing += wrong;
    }
    if let Some((s, got, want)) = first {
        panic!(
            "{differing} of {} outputs differ from TFLM's; sample {s}:\n got:  {got:?}\n want: {want:?}",
            outputs.len()
        );
    }
}

/// Its memory, known when it compiles (`docs/embedding.md`): the `.tflite` file is 98,496
/// bytes.
#[test]
fn mlperf_resnet8_int8_memory() {
    assert_eq!(<ResNet8Int8 as Layer>::PARAMETER_BYTES, 81_848);
    assert_eq!(<ResNet8Int8 as Layer>::WORKING_BYTES, 163_554);
    // With the memory plan (`Arena`): TensorFlow Lite Micro's arena for it is 55,984 bytes,
    // of which 49,152 for the activations.
    assert_eq!(<ResNet8Int8 as Layer>::ARENA_BYTES, 50_240);
    assert_eq!(<ResNet8Int8 as Layer>::KERNEL_BYTES, 4_864);
    const {
        assert!(
            <ResNet8Int8 as Layer>::ARENA_BYTES + <ResNet8Int8 as Layer>::KERNEL_BYTES <= 55_984
        )
    };
}
