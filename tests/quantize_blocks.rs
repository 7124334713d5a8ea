//! The int8 forms of the MLPerf Tiny layers inside a net: a MobileNet- and ResNet-style net with
//! a depthwise convolution (ReLU6), an identity and a projected residual block, a global average
//! pool and a softmax, quantized by `nn::quantize`; its type is what `net!` writes for the same
//! layers on `Input<i8, ..>`; its predictions follow the float net's; its weights file loads and
//! bakes (`include_net!`) into the same net.
//!
//! The baked file, `tests/fixtures/int8-blocks.safetensors`, is what `quantize` writes for the
//! seeded net below: the test checks it byte for byte (quantizing is the same on every machine),
//! and `CONSTMAT_BLESS_FIXTURES=1` writes it again after an intended change.
#![cfg(all(feature = "safetensors", feature = "rand"))]

use constmat::embed::Baked;
use constmat::io::safetensors as st;
use constmat::nn::{Inline, Layer, RandomInit, Relu, Relu6, quantize};
use rand::{RngExt, SeedableRng, rngs::StdRng};

type Float = constmat::net![
    Input<f32, 2, 8, 8>,
    Conv2d<2, 4, 3, 1, 1, Relu>,
    DepthwiseConv2d<4, 8, 3, 1, 1, Relu6>,
    Residual<[Conv2d<8, 8, 3, 1, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], Relu>,
    Residual<[Conv2d<8, 16, 3, 2, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], [Conv2d<8, 16, 1, 2, 0>], Relu>,
    AvgPool2d<4>,
    Flatten,
    Dense<16, 5>,
    Softmax,
];

type Int8 = constmat::net![
    Input<i8, 2, 8, 8>,
    Conv2d<2, 4, 3, 1, 1, Relu>,
    DepthwiseConv2d<4, 8, 3, 1, 1, Relu6>,
    Residual<[Conv2d<8, 8, 3, 1, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], Relu>,
    Residual<[Conv2d<8, 16, 3, 2, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], [Conv2d<8, 16, 1, 2, 0>], Relu>,
    AvgPool2d<4>,
    Flatten,
    Dense<16, 5>,
    Softmax,
];

static BAKED: Baked<Int8> = constmat::include_net!("fixtures/int8-blocks.safetensors");

const FIXTURE: &str = "tests/fixtures/int8-blocks.safetensors";

fn samples(rng: &mut StdRng, n: usize) -> Vec<[[[f32; 8]; 8]; 2]> {
    (0..n)
        .map(|_| {
            std::array::from_fn(|_| {
                std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-1.0..1.0)))
            })
        })
        .collect()
}

#[test]
fn quantized_blocks_follow_the_float_net_and_bake() {
    let mut rng = StdRng::seed_from_u64(39);
    let net = Float::random(&mut rng);
    let calibration = samples(&mut rng, 200);
    let int8 = quantize(&net, &calibration).unwrap();
    // The quantized net's type is `net!`'s int8 net (its parameters on the heap).
    let inline: Int8 = int8.net.to_store::<Inline>();

    // Probabilities within a few 1/256 steps of the float net's, on other samples.
    let mut worst = 0.0_f32;
    for x in samples(&mut rng, 100) {
        let mut want = [0.0; 5];
        net.forward_one(&x, &mut want);
        let got = int8.forward_float(&x).map(|q| int8.output.dequantize(q));
        for (g, w) in got.iter().zip(want) {
            worst = worst.max((g - w).abs());
        }
    }
    assert!(
        worst < 0.06,
        "int8 probabilities {worst} from the float net's"
    );

    // The file: what quantize wrote before, byte for byte; loaded and baked, the same net.
    let bytes = st::to_bytes(&int8.net, &[]);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    if std::env::var_os("CONSTMAT_BLESS_FIXTURES").is_some() {
        std::fs::write(&path, &bytes).unwrap();
    }
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "{FIXTURE} is not what quantize writes (CONSTMAT_BLESS_FIXTURES=1 writes it again)"
    );
    let loaded: Int8 = st::from_bytes(&bytes).unwrap();
    assert_eq!(loaded, inline);
    let baked: &Int8 = &BAKED;
    assert_eq!(baked, &inline);
    let names: Vec<String> = (0..<Int8 as Layer>::SPEC.tensor_count())
        .map(|k| {
            let t = <Int8 as Layer>::SPEC.tensor(k).unwrap();
            format!("{}.{}", t.module, t.field.as_str())
        })
        .collect();
    assert!(
        names.contains(&"4.branch.2.weight".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"6.shortcut.0.weight".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"6.output_zero_point".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"11.multiplier".to_string()), "{names:?}");
}
