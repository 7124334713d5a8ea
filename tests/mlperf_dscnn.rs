//! MLPerf Tiny's int8 keyword-spotting DS-CNN (`kws_ref_model.tflite`, Apache-2.0) in constmat:
//! its parameters, converted once by `tests/fixtures/tflm_mlperf_dscnn.py` into a constmat
//! weights file, load and bake into the int8 net below, and its outputs on 64 inputs are
//! TensorFlow Lite Micro's, bit for bit: a 10 x 4 stride-2 convolution after TensorFlow's uneven
//! `SAME` padding, four depthwise-separable blocks, the global average pool over 25 x 5, the
//! dense layer and the int8 softmax.
#![cfg(feature = "safetensors")]

use constmat::embed::Baked;
use constmat::format;
use constmat::io::safetensors as st;
use constmat::nn::{Arena, Chain, Inline, Layer, QConv2d, QZeroPad2d, Relu};

/// After the first layer: the depthwise-separable blocks and the head, as `net!` writes them.
type Blocks = constmat::net![
    Input<i8, 64, 25, 5>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, Relu>,
    GlobalAvgPool2d,
    Flatten,
    Dense<64, 12>,
    Softmax,
];

/// The model: TensorFlow's `SAME` padding of the first layer (4 rows above, 5 below, a column on
/// each side of the 49 x 10 MFCCs), its 10 x 4 stride-2 kernel, then the blocks (written out
/// here; `net_spells_the_dscnn` gives the same type from one `net!`).
type DsCnnInt8 = Chain<
    QZeroPad2d<1, 4, 1, 5, 1, 49, 10, 58, 12>,
    Chain<QConv2d<1, 64, 10, 2, 0, 58, 12, 25, 5, Relu, Inline, 4>, Blocks>,
>;

static BAKED: Baked<DsCnnInt8> = constmat::include_net!("fixtures/mlperf-dscnn-int8.safetensors");

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
fn mlperf_dscnn_int8_matches_tflm() {
    let loaded: DsCnnInt8 = st::from_bytes(&fixture("mlperf-dscnn-int8.safetensors")).unwrap();
    let baked: &DsCnnInt8 = &BAKED;
    assert_eq!(baked, &loaded);
    let io = fixture("mlperf-dscnn-int8-io.safetensors");
    let (inputs, outputs) = (i8s(&io, "input"), i8s(&io, "output"));
    let samples = outputs.len() / 12;
    assert_eq!(inputs.len(), samples * 49 * 10);
    let mut differing = 0;
    let mut first = None;
    let mut arena = Arena::<{ <DsCnnInt8 as Layer>::ARENA_BYTES }>::new();
    for s in 0..samples {
        let x: [[[i8; 10]; 49]; 1] = [core::array::from_fn(|h| {
            core::array::from_fn(|w| inputs[s * 490 + h * 10 + w])
        })];
        let mut y = [0_i8; 12];
        baked.forward_one(&x, &mut y);
        // The memory plan runs the same kernels: the same outputs, in an arena reused from the
        // previous sample.
        *arena.input(baked) = x;
        assert_eq!(*arena.run(baked), y, "sample {s} in the arena");
        let want = &outputs[s * 12..(s + 1) * 12];
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

/// Its memory, known when it compiles (`docs/embedding.md`): the `.tflite` file is 53,936
/// bytes.
#[test]
fn mlperf_dscnn_int8_memory() {
    assert_eq!(<DsCnnInt8 as Layer>::PARAMETER_BYTES, 29_256);
    assert_eq!(<DsCnnInt8 as Layer>::WORKING_BYTES, 103_348);
    // With the memory plan (`Arena`): TensorFlow Lite Micro's arena for it is 24,272 bytes,
    // of which 16,000 for the activations.
    assert_eq!(<DsCnnInt8 as Layer>::ARENA_BYTES, 16_000);
    assert_eq!(<DsCnnInt8 as Layer>::KERNEL_BYTES, 4_864);
    const { assert!(<DsCnnInt8 as Layer>::ARENA_BYTES + <DsCnnInt8 as Layer>::KERNEL_BYTES <= 24_272) };
}

/// `net!` writes the same net, the first layer's kernel spelled `(10, 4)`.
#[test]
fn net_spells_the_dscnn() {
    type Spelled = constmat::net![
        Input<i8, 1, 49, 10>,
        ZeroPad2d<1, 1, 4, 5>,
        Conv2d<1, 64, (10, 4), 2, 0, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, Relu>,
        DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
        Conv2d<64, 64, 1, Relu>,
        GlobalAvgPool2d,
        Flatten,
        Dense<64, 12>,
        Softmax,
    ];
    let same: fn(DsCnnInt8) -> Spelled = |net| net;
    let _ = same;
}
