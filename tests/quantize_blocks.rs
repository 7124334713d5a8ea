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
use constmat::nn::{Arena, Inline, Layer, RandomInit, Relu, Relu6, quantize};
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

fn fixture_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

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
    let path = fixture_path();
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

/// The new int8 tensors are held to their rules when a file is loaded: each out-of-range value
/// is refused with a message naming the tensor, and the net is left as it was.
#[test]
fn the_blocks_tensors_are_held_to_their_rules() {
    let good: Int8 = st::from_bytes(&std::fs::read(fixture_path()).unwrap()).unwrap();
    let mut cases: Vec<(Int8, &str)> = Vec::new();
    let mut net = good.clone();
    net.rest.first.exponent[0] = 31;
    cases.push((net, "tensor 2.exponent: element 0 is 31, outside -31..=30"));
    let mut net = good.clone();
    net.rest.rest.first.add.exponent[2] = 31;
    cases.push((net, "tensor 4.exponent: element 2 is 31, outside -31..=30"));
    let mut net = good.clone();
    net.rest.rest.first.add.multiplier[1] = -1;
    cases.push((
        net,
        "tensor 4.multiplier: element 1 is -1, outside 0..=2147483647",
    ));
    let mut net = good.clone();
    net.rest.rest.rest.first.add.quantization[1].scale = f32::NAN;
    cases.push((
        net,
        "tensor 6.shortcut_scale: element 0 is not a finite number",
    ));
    fn softmax(net: &mut Int8) -> &mut constmat::nn::QSoftmax<5> {
        &mut net.rest.rest.rest.rest.rest.rest.rest
    }
    let mut net = good.clone();
    softmax(&mut net).exponent = 32;
    cases.push((net, "tensor 11.exponent: element 0 is 32, outside 0..=31"));
    let mut net = good.clone();
    softmax(&mut net).input.scale = 0.0;
    cases.push((
        net,
        "tensor 11.input_scale: element 0 is 0, expected a quantization scale: a positive \
         normal f32, from 1.1754944e-38 to 3.4028235e38",
    ));
    for (bad, message) in cases {
        let mut net = good.clone();
        let err = st::load_into(&mut net, &st::to_bytes(&bad, &[])).unwrap_err();
        assert_eq!(err.to_string(), message);
        assert!(net == good, "a failed load leaves the net as it was");
    }
}

/// Int8 block files with random bytes overwritten in their data: each loads or is refused, and
/// a net that loads predicts without panicking (debug builds check every integer operation).
#[test]
fn corrupted_block_files_load_or_are_refused_never_panic() {
    let bytes = std::fs::read(fixture_path()).unwrap();
    let data_start =
        8 + usize::try_from(u64::from_le_bytes(bytes[..8].try_into().unwrap())).unwrap();
    let mut rng = StdRng::seed_from_u64(6);
    let (mut loaded, mut refused) = (0, 0);
    for _ in 0..500 {
        let mut corrupt = bytes.clone();
        for _ in 0..rng.random_range(1..8) {
            let at = rng.random_range(data_start..corrupt.len());
            corrupt[at] = rng.random();
        }
        match st::from_bytes::<Int8>(&corrupt) {
            Ok(net) => {
                loaded += 1;
                let image = std::array::from_fn(|_| {
                    std::array::from_fn(|_| std::array::from_fn(|_| rng.random()))
                });
                let mut out = [0_i8; 5];
                net.forward_one(&image, &mut out);
            }
            Err(_) => refused += 1,
        }
    }
    assert!(
        loaded > 0 && refused > 0,
        "{loaded} loaded, {refused} refused"
    );
}

/// A residual block whose sum is always 0 (its branch cancels its input) calibrates the sum's
/// scale to its floor, and the addition's multiplier out of the fixed-point range: an error
/// naming the sum's layer, not a panic.
#[test]
fn an_addition_out_of_range_is_an_error() {
    type Cancelling = constmat::net![Input<f32, 1, 1, 1>, Residual<[Conv2d<1, 1, 1, 1, 0>]>];
    let net: Cancelling = constmat::nn::Residual::new(constmat::nn::Conv2d::new(
        constmat::Matrix::from_rows([[[[-1.0]]]]),
        constmat::Matrix::from_rows([[0.0]]),
    ));
    let calibration = [[[[1e10_f32]]], [[[-1e10]]]];
    match quantize(&net, &calibration) {
        Err(constmat::nn::QuantizeError::Multiplier { layer, value }) => {
            assert_eq!(
                layer, 1,
                "the branch's convolution is layer 0, the sum layer 1"
            );
            assert!(value >= f64::from(1_u32 << 30), "{value}");
        }
        other => panic!("{other:?}"),
    }
}

/// The int8 softmax of many equal logits: each probability is 1/N, which rounds to -128 (0) in
/// 1/256 steps once N > 512, where the shift passes 31.
#[test]
fn softmax_of_many_equal_classes() {
    use constmat::nn::QSoftmax;
    use constmat::quant::Quantization;
    let q = Quantization {
        scale: 0.05,
        zero_point: 0,
    };
    let mut p = [0_i8; 1024];
    QSoftmax::<1024>::new(q).forward_one(&[7; 1024], &mut p);
    assert!(p.iter().all(|&v| v == -128), "{:?}", &p[..4]);
    let mut p = [0_i8; 4096];
    QSoftmax::<4096>::new(q).forward_one(&[-3; 4096], &mut p);
    assert!(p.iter().all(|&v| v == -128));
    let mut p = [0_i8; 4];
    QSoftmax::<4>::new(q).forward_one(&[1; 4], &mut p);
    assert_eq!(p, [-64; 4]); // 1/4 = 64/256
}

/// The memory of MLPerf Tiny's ResNet-8 (one input channel, batch normalization folded, as
/// `examples/fashion_resnet` quantizes it) in f32 and int8, as `docs/embedding.md` gives it.
#[test]
fn resnet8_memory_budget() {
    type Folded = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 16, 3, 1, 1, Relu>,
        Residual<[Conv2d<16, 16, 3, 1, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], Relu>,
        Residual<[Conv2d<16, 32, 3, 2, 1, Relu>, Conv2d<32, 32, 3, 1, 1>], [Conv2d<16, 32, 1, 2, 0>], Relu>,
        Residual<[Conv2d<32, 64, 3, 2, 1, Relu>, Conv2d<64, 64, 3, 1, 1>], [Conv2d<32, 64, 1, 2, 0>], Relu>,
        AvgPool2d<7>,
        Flatten,
        Dense<64, 10>,
    ];
    type Int8 = constmat::net![
        Input<i8, 1, 28, 28>,
        Conv2d<1, 16, 3, 1, 1, Relu>,
        Residual<[Conv2d<16, 16, 3, 1, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], Relu>,
        Residual<[Conv2d<16, 32, 3, 2, 1, Relu>, Conv2d<32, 32, 3, 1, 1>], [Conv2d<16, 32, 1, 2, 0>], Relu>,
        Residual<[Conv2d<32, 64, 3, 2, 1, Relu>, Conv2d<64, 64, 3, 1, 1>], [Conv2d<32, 64, 1, 2, 0>], Relu>,
        AvgPool2d<7>,
        Flatten,
        Dense<64, 10>,
    ];
    // 77,658 parameters less the batch norms' (folded), in f32.
    assert_eq!(<Folded as Layer>::PARAMETER_BYTES, 309_696);
    assert_eq!(<Int8 as Layer>::PARAMETER_BYTES, 81_528);
    assert_eq!(<Int8 as Layer>::WORKING_BYTES, 116_712);
    if cfg!(target_arch = "x86_64") {
        assert_eq!(<Folded as Layer>::WORKING_BYTES, 505_600);
    }
}

/// A net with a global average pool quantizes to the int8 net `net!` writes for it.
#[test]
fn a_global_average_pool_quantizes() {
    type Float = constmat::net![Input<f32, 2, 5, 3>, Conv2d<2, 4, 3, 1, 1, Relu>, GlobalAvgPool2d, Flatten, Dense<4, 3>];
    type Int8 = constmat::net![Input<i8, 2, 5, 3>, Conv2d<2, 4, 3, 1, 1, Relu>, GlobalAvgPool2d, Flatten, Dense<4, 3>];
    let mut rng = StdRng::seed_from_u64(8);
    let net = Float::random(&mut rng);
    let calibration: Vec<[[[f32; 3]; 5]; 2]> = (0..50)
        .map(|_| {
            std::array::from_fn(|_| {
                std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-1.0..1.0)))
            })
        })
        .collect();
    let int8 = quantize(&net, &calibration).unwrap();
    let baked: Int8 = int8.net.to_store::<Inline>();
    let mut want = [0.0; 3];
    net.forward_one(&calibration[0], &mut want);
    let x = calibration[0].map(|c| c.map(|r| r.map(|v| int8.input.quantize(v))));
    let mut got = [0_i8; 3];
    baked.forward_one(&x, &mut got);
    for (g, w) in got.iter().zip(want) {
        assert!(
            (int8.output.dequantize(*g) - w).abs() < 0.05,
            "{got:?} against {want:?}"
        );
    }
}

/// The memory plan (`nn::Arena`) gives `forward_one`'s outputs, an arena reused from one input to
/// the next: the depthwise convolution, both kinds of int8 residual block (their additions
/// requantize), the average pool and the softmax.
#[test]
fn the_int8_blocks_run_in_an_arena_as_forward_one() {
    let mut rng = StdRng::seed_from_u64(7);
    let net: &Int8 = &BAKED;
    let mut arena = Arena::<{ Int8::ARENA_BYTES }>::new();
    for k in 0..20 {
        let x: [[[i8; 8]; 8]; 2] = std::array::from_fn(|_| {
            std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-128..=127)))
        });
        let mut want = [0; 5];
        net.forward_one(&x, &mut want);
        *arena.input(net) = x;
        assert_eq!(*arena.run(net), want, "input {k}");
    }
    // The identity block's input (8 x 8 x 8 bytes), its branch's copy and first output.
    assert_eq!(Int8::ARENA_BYTES, 3 * 512);
}
