//! Int8 nets: `QDense` against its definition written out here, the quantizer's errors, a
//! quantized net against its float original, and the shipped MNIST MLP's accuracy in int8
//! (when `MNIST_DIR` names the data set).
#![cfg(all(feature = "safetensors", feature = "data", feature = "rand"))]

use std::path::{Path, PathBuf};

use constmat::Matrix;
use constmat::data::mnist::{self, Mnist};
use constmat::io::safetensors as st;
use constmat::nn::{
    Dense, Identity, Inline, Layer, Parameters, QConv2d, QDense, QDepthwiseConv2d, Quantize,
    QuantizeError, QuantizedActivation, RandomInit, Relu, Train, argmax, quantize,
};
use constmat::quant::{Multiplier, Quantization};
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// `QDense`'s output written from the definition, in 64-bit integers: the dot product, the
/// bias, the requantization, the output zero point, the clamp (at the zero point for ReLU).
fn reference<const I: usize, const O: usize>(
    weight: &[[i8; I]; O],
    bias: &[i32; O],
    multipliers: &[Multiplier; O],
    zero: i8,
    relu: bool,
    x: &[i8; I],
) -> [i8; O] {
    std::array::from_fn(|o| {
        let dot: i64 = weight[o]
            .iter()
            .zip(x)
            .map(|(&w, &x)| i64::from(w) * i64::from(x))
            .sum();
        let acc = i32::try_from(dot + i64::from(bias[o])).expect("no overflow at these sizes");
        let q = i64::from(zero) + i64::from(multipliers[o].apply(acc));
        let low = if relu { i64::from(zero) } else { -128 };
        q.clamp(low, 127) as i8
    })
}

/// A quantization with the zero point `zero_point` (the scale is what the integer forward pass
/// never reads).
fn zero_at(zero_point: i8) -> Quantization {
    Quantization {
        scale: 0.05,
        zero_point,
    }
}

fn random_layer<const I: usize, const O: usize>(
    rng: &mut StdRng,
) -> ([[i8; I]; O], [i32; O], [Multiplier; O], i8) {
    let weight = std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-127..=127)));
    let bias = std::array::from_fn(|_| rng.random_range(-20_000..=20_000));
    let multipliers = std::array::from_fn(|_| Multiplier::from_real(rng.random_range(1e-4..0.02)));
    (weight, bias, multipliers, rng.random_range(-128..=127))
}

#[test]
fn a_quantized_dense_layer_computes_its_definition() {
    let mut rng = StdRng::seed_from_u64(7);
    let (mut saturated_high, mut saturated_low, mut floored) = (0, 0, 0);
    for _ in 0..50 {
        let (weight, bias, multipliers, zero) = random_layer::<37, 9>(&mut rng);
        let identity = QDense::<37, 9, Identity, Inline>::new(
            weight,
            bias,
            multipliers,
            zero_at(0),
            zero_at(zero),
        );
        let relu = QDense::<37, 9, Relu, Inline>::new(
            weight,
            bias,
            multipliers,
            zero_at(0),
            zero_at(zero),
        );
        let x: [[i8; 37]; 4] =
            std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-128..=127)));
        let (mut y, mut y_relu) = ([[0_i8; 9]; 4], [[0_i8; 9]; 4]);
        identity.forward(&x, &mut y);
        relu.forward(&x, &mut y_relu);
        for ((x, y), y_relu) in x.iter().zip(&y).zip(&y_relu) {
            assert_eq!(*y, reference(&weight, &bias, &multipliers, zero, false, x));
            assert_eq!(
                *y_relu,
                reference(&weight, &bias, &multipliers, zero, true, x)
            );
            saturated_high += y.iter().filter(|&&v| v == 127).count();
            saturated_low += y.iter().filter(|&&v| v == -128).count();
            floored += y_relu.iter().filter(|&&v| v == zero).count();
        }
    }
    // The cases that matter were reached: both saturations, and ReLU's floor.
    assert!(saturated_high > 0 && saturated_low > 0 && floored > 0);
}

#[test]
fn the_accumulator_holds_the_largest_sums_the_bound_allows() {
    // The bound (`QDense` refuses more inputs at compile time): I · 128 · 127 + 2^30 fits i32.
    let most_inputs: i64 = (1 << 30) / (128 * 127);
    assert_eq!(most_inputs, 66_052);
    assert!(most_inputs * 128 * 127 + (1 << 30) <= i64::from(i32::MAX));
    // The extreme sums of a wide layer, each way, computed exactly.
    const I: usize = 4096;
    let weight = Box::new([[-127_i8; I], [127; I]]);
    let layer = QDense::<I, 2, Identity, Inline>::new(
        *weight,
        [1 << 29, -(1 << 29)],
        [Multiplier::from_real(1.0 / 8_000_000.0); 2],
        zero_at(0),
        zero_at(0),
    );
    let x = Box::new([-128_i8; I]);
    let mut y = [0_i8; 2];
    layer.forward_one(&x, &mut y);
    // 4096 · 16256 = 66,584,576, plus or minus 2^29, over 8,000,000.
    let want = |sum: f64| (sum / 8_000_000.0).round().clamp(-128.0, 127.0) as i8;
    assert_eq!(
        y,
        [
            want(66_584_576.0 + f64::from(1 << 29)),
            want(-66_584_576.0 - f64::from(1 << 29))
        ]
    );
}

type Mlp = constmat::net![Dense<f32, 12, 16, Relu>, Dense<f32, 16, 8, Relu>, Dense<f32, 8, 4>];

type MnistMlp = constmat::net![
    Dense<f32, 784, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, 10, Identity>,
];

fn samples(rng: &mut StdRng, n: usize) -> Vec<[f32; 12]> {
    (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(-1.0..1.0)))
        .collect()
}

/// A net trained with dropout quantizes as the same net without it: dropout is the identity at
/// inference, and its int8 form passes the integers on with its input's quantization.
#[test]
fn a_net_with_dropout_quantizes_as_the_net_without_it() {
    type WithDropout = constmat::net![
        Input<f32, 12, 1, 1>,
        Flatten,
        Dense<12, 16, Relu>,
        Dropout<30>,
        Dense<16, 4>,
    ];
    type Without = constmat::net![Input<f32, 12, 1, 1>, Flatten, Dense<12, 16, Relu>, Dense<16, 4>];
    let mut rng = StdRng::seed_from_u64(19);
    let with = WithDropout::random(&mut rng);
    let mut without = Without::zeros();
    for k in 0..without.tensor_count() {
        without.tensor_mut(k).copy_from_slice(with.tensor(k));
    }
    let calibration: Vec<[[[f32; 1]; 1]; 12]> = samples(&mut rng, 200)
        .into_iter()
        .map(|x| x.map(|v| [[v]]))
        .collect();
    let a = quantize(&with, &calibration).unwrap();
    let b = quantize(&without, &calibration).unwrap();
    assert_eq!((a.input, a.output), (b.input, b.output));
    for x in &calibration {
        assert_eq!(a.forward_float(x), b.forward_float(x));
    }
}

#[test]
fn a_quantized_net_stays_close_to_its_float_original() {
    let mut rng = StdRng::seed_from_u64(11);
    let net = Mlp::random(&mut rng);
    let calibration = samples(&mut rng, 500);
    let int8 = quantize(&net, &calibration).unwrap();
    // Baked: the same integers inline.
    let baked = int8.net.to_store::<Inline>();
    // On the calibration samples no layer saturates (each range is their min/max), so the
    // error is rounding alone: three layers of it, each about half a step of its own.
    let mut worst = 0.0_f32;
    for x in &calibration {
        let mut want = [0.0; 4];
        net.forward_one(x, &mut want);
        let got = int8.forward_float(x);
        let mut got_baked = [0; 4];
        baked.forward_one(&x.map(|v| int8.input.quantize(v)), &mut got_baked);
        assert_eq!(
            got, got_baked,
            "heap and inline storage compute the same integers"
        );
        for (g, w) in got.iter().zip(want) {
            worst = worst.max((int8.output.dequantize(*g) - w).abs() / int8.output.scale);
        }
    }
    println!("largest error: {worst:.2} steps of the output's quantization");
    assert!(
        worst < 4.0,
        "largest error {worst} steps of the output's quantization"
    );
    // On new samples (which may fall outside the calibrated ranges and saturate), the classes
    // still agree.
    let agree = samples(&mut rng, 500)
        .iter()
        .filter(|x| {
            let mut want = [0.0; 4];
            net.forward_one(x, &mut want);
            int8.predict(*x) == argmax(&want)
        })
        .count();
    println!("{agree} of 500 classes agree");
    assert!(agree >= 475, "{agree} of 500 classes agree");
}

#[test]
fn quantizing_refuses_what_int8_cannot_represent() {
    let mut rng = StdRng::seed_from_u64(3);
    let net = Mlp::random(&mut rng);
    assert_eq!(
        quantize(&net, &[]),
        Err(QuantizeError::NoCalibrationSamples)
    );
    let mut bad = samples(&mut rng, 10);
    bad[3][5] = f32::NAN;
    assert_eq!(
        quantize(&net, &bad),
        Err(QuantizeError::NotFinite {
            layer: 0,
            what: "calibration input"
        })
    );
    let mut broken = net.clone();
    broken.rest.first.weight[(2, 3)] = f32::INFINITY;
    let err = quantize(&broken, &samples(&mut rng, 10)).unwrap_err();
    assert_eq!(
        err,
        QuantizeError::NotFinite {
            layer: 1,
            what: "weight"
        }
    );
    assert_eq!(
        err.to_string(),
        "layer 1: a weight is NaN, infinite or beyond f32's range, which int8 cannot represent"
    );
    // Every output of the last layer's ReLU is 0 (the pre-activations are all negative) while
    // its inputs span thousands: the requantization multiplier is out of range.
    type Dead = constmat::net![Dense<f32, 2, 1, Relu>];
    let dead = Dead::new(
        Matrix::from_rows([[-1e4, -1e4]]),
        Matrix::from_rows([[-1.0]]),
    );
    let wide: Vec<[f32; 2]> = (0..10).map(|i| [i as f32 * 400.0, 0.0]).collect();
    match quantize(&dead, &wide) {
        Err(QuantizeError::Multiplier { layer: 0, value }) => assert!(value >= 2f64.powi(30)),
        other => panic!("expected a multiplier error, got {other:?}"),
    }
    // Blank calibration samples: quantizing the shipped LeNet-5 on blank images succeeded, with
    // an input scale of 1.2e-7, and the int8 net scored 9.74% on MNIST.
    let err = quantize(&net, &[[0.0; 12]; 20]).unwrap_err();
    assert_eq!(err, QuantizeError::BlankCalibration);
    assert_eq!(
        err.to_string(),
        "the calibration samples are all 0, so there is no range to measure (blank images?): \
         calibrate on real inputs"
    );
    // One value that is not 0 is a range.
    let mut nearly_blank = [[0.0; 12]; 20];
    nearly_blank[7][3] = 0.5;
    quantize(&net, &nearly_blank).unwrap();
    // Near-blank samples (issue 44): all 1e-30, or subnormal, quantized to an input scale of
    // 1.2e-7 (every sample on the zero point) and the MNIST MLP scored 10.28%.
    for (tiny, min, max) in [
        (1e-30, 0.0, 1e-30),
        (1e-40, 0.0, 1e-40),
        (-1e-6, -1e-6, 0.0),
    ] {
        let err = quantize(&net, &[[tiny; 12]; 20]).unwrap_err();
        assert_eq!(err, QuantizeError::NarrowCalibration { min, max });
    }
    assert_eq!(
        quantize(&net, &[[1e-30; 12]; 20]).unwrap_err().to_string(),
        "the calibration samples span only [0.0, 1e-30], narrower than 3.0398369e-5 \
         (255 x f32::EPSILON), the narrowest range int8 quantizes onto its 256 levels: calibrate \
         on real inputs, or scale the inputs (to about [0, 1]) before training and quantizing"
    );
    // The threshold: a range of 255 x EPSILON gets its 256 levels and is kept; one step of f32
    // narrower is refused.
    let edge = Quantization::MIN_RANGE;
    assert_eq!(Quantization::from_range(0.0, edge).scale, f32::EPSILON);
    quantize(&net, &[[edge; 12]; 20]).unwrap();
    let below = f32::from_bits(edge.to_bits() - 1);
    assert!(matches!(
        quantize(&net, &[[below; 12]; 20]),
        Err(QuantizeError::NarrowCalibration { .. })
    ));
}

#[test]
fn the_shipped_mlp_in_int8_is_within_0_3_points_of_its_float_accuracy() {
    let dir = match std::env::var_os("MNIST_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            println!("skipping the int8 accuracy check: MNIST_DIR is not set");
            return;
        }
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/mnist-784-128-64-10.safetensors");
    let net: MnistMlp = st::load(path).expect("the shipped model loads");
    let data = Mnist::load(&dir).expect("MNIST_DIR holds MNIST");
    let scale = |image: &[u8; mnist::PIXELS]| image.map(|p| f32::from(p) / 255.0);
    // Calibration: the first 500 training images.
    let calibration: Vec<[f32; mnist::PIXELS]> =
        data.train.images()[..500].iter().map(scale).collect();
    let int8 = quantize(&net, &calibration).expect("the shipped model quantizes");
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/mnist-784-128-64-10-int8.safetensors");
    let shipped: <MnistMlp as Quantize>::Quantized = st::load(file).expect("the int8 MLP loads");
    assert!(
        shipped == int8.net,
        "models/mnist-784-128-64-10-int8.safetensors is what `--example quantize` writes"
    );
    let test = &data.test;
    let (mut float_correct, mut int8_correct) = (0, 0);
    let mut ws = Train::<f32, 1>::workspace(&net);
    for (image, &label) in test.images().iter().zip(test.labels()) {
        let x = scale(image);
        let logits = net.forward_train(&[x], &mut ws);
        float_correct += usize::from(argmax(&logits[0]) == usize::from(label));
        int8_correct += usize::from(int8.predict(&x) == usize::from(label));
    }
    let (f, q) = (
        100.0 * float_correct as f64 / test.len() as f64,
        100.0 * int8_correct as f64 / test.len() as f64,
    );
    println!("shipped MLP: f32 {f:.2}%, int8 {q:.2}%");
    assert!(
        f - q <= 0.3,
        "int8 {q:.2}% is more than 0.3 points below f32 {f:.2}%"
    );
}

/// `QConv2d`'s output written from the definition: each window's terms, the padding read as
/// the input's zero point, in 64-bit integers.
#[allow(clippy::too_many_arguments)]
#[allow(clippy::needless_range_loop)] // indices as in the formula: the point of a reference
fn conv_reference<
    const C: usize,
    const OC: usize,
    const K: usize,
    const H: usize,
    const W: usize,
>(
    weight: &[[[[i8; K]; K]; C]; OC],
    bias: &[i32; OC],
    multipliers: &[Multiplier; OC],
    (stride, pad): (usize, usize),
    (z_in, z_out, relu): (i8, i8, bool),
    x: &[[[i8; W]; H]; C],
    (oh, ow): (usize, usize),
) -> Vec<i8> {
    let mut out = Vec::new();
    for o in 0..OC {
        for i in 0..oh {
            for j in 0..ow {
                let mut dot = i64::from(bias[o]);
                for c in 0..C {
                    for ky in 0..K {
                        for kx in 0..K {
                            let (y, x_) = (
                                (i * stride + ky) as i64 - pad as i64,
                                (j * stride + kx) as i64 - pad as i64,
                            );
                            let v = if (0..H as i64).contains(&y) && (0..W as i64).contains(&x_) {
                                x[c][y as usize][x_ as usize]
                            } else {
                                z_in
                            };
                            dot += i64::from(weight[o][c][ky][kx]) * i64::from(v);
                        }
                    }
                }
                let q = i64::from(z_out) + i64::from(multipliers[o].apply(dot as i32));
                let low = if relu { i64::from(z_out) } else { -128 };
                out.push(q.clamp(low, 127) as i8);
            }
        }
    }
    out
}

/// Input rows and columns in no window, as PyTorch allows: 1 x 1 with stride 2 on 8 x 8
/// (ResNet's shortcut) and 3 x 3 with stride 2 on 8 x 8 without padding, against the
/// definition.
#[test]
fn a_quantized_convolution_leaving_rows_in_no_window_computes_its_definition() {
    fn random<const N: usize, T>(rng: &mut StdRng, f: impl Fn(&mut StdRng) -> T) -> [T; N] {
        std::array::from_fn(|_| f(rng))
    }
    let mut rng = StdRng::seed_from_u64(6);
    let x: [[[i8; 8]; 8]; 2] = random(&mut rng, |r| {
        random(r, |r| random(r, |r| r.random_range(-128..=127)))
    });
    let bias: [i32; 3] = random(&mut rng, |r| r.random_range(-5_000..=5_000));
    let multipliers: [Multiplier; 3] = random(&mut rng, |r| {
        Multiplier::from_real(r.random_range(1e-3..0.02))
    });
    let (z_in, z_out) = (rng.random_range(-128..=127), rng.random_range(-128..=127));
    let w1: [[[[i8; 1]; 1]; 2]; 3] = random(&mut rng, |r| {
        random(r, |r| {
            random(r, |r| random(r, |r| r.random_range(-127..=127)))
        })
    });
    let mut y1 = [[[0_i8; 4]; 4]; 3];
    QConv2d::<2, 3, 1, 2, 0, 8, 8, 4, 4, Identity, Inline>::new(
        w1,
        bias,
        multipliers,
        zero_at(z_in),
        zero_at(z_out),
    )
    .forward_one(&x, &mut y1);
    let want = conv_reference(
        &w1,
        &bias,
        &multipliers,
        (2, 0),
        (z_in, z_out, false),
        &x,
        (4, 4),
    );
    assert_eq!(y1.as_flattened().as_flattened().to_vec(), want);
    let w3: [[[[i8; 3]; 3]; 2]; 3] = random(&mut rng, |r| {
        random(r, |r| {
            random(r, |r| random(r, |r| r.random_range(-127..=127)))
        })
    });
    let mut y3 = [[[0_i8; 3]; 3]; 3];
    QConv2d::<2, 3, 3, 2, 0, 8, 8, 3, 3, Relu, Inline>::new(
        w3,
        bias,
        multipliers,
        zero_at(z_in),
        zero_at(z_out),
    )
    .forward_one(&x, &mut y3);
    let want = conv_reference(
        &w3,
        &bias,
        &multipliers,
        (2, 0),
        (z_in, z_out, true),
        &x,
        (3, 3),
    );
    assert_eq!(y3.as_flattened().as_flattened().to_vec(), want);
}

/// A window of more than 4,608 values (520 channels of 3x3) takes the plain loops instead of
/// the stack buffer of windows, or, with 8 filters or more, (AVX-512 VNNI) the kernel that
/// reads the windows in place: the same definition. The working memory is that kernel's
/// filters' sums (8 `i32`), or nothing.
#[test]
fn a_quantized_convolution_with_a_large_window_computes_its_definition() {
    large_window::<2>(0);
    large_window::<8>(4 * 8);
}

/// [`a_quantized_convolution_with_a_large_window_computes_its_definition`] with `OC` filters.
fn large_window<const OC: usize>(working_bytes: usize) {
    const C: usize = 520;
    let mut rng = StdRng::seed_from_u64(9);
    let weight: Box<[[[[i8; 3]; 3]; C]; OC]> = Box::new(std::array::from_fn(|_| {
        std::array::from_fn(|_| {
            std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-127..=127)))
        })
    }));
    let bias: [i32; OC] = std::array::from_fn(|o| [1_000, -2_000][o % 2]);
    let multipliers: [Multiplier; OC] = std::array::from_fn(|o| {
        Multiplier::from_real([0.001, 0.0004][o % 2] * (1.0 + o as f64 / 16.0))
    });
    let x: Box<[[[i8; 4]; 4]; C]> = Box::new(std::array::from_fn(|_| {
        std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-128..=127)))
    }));
    let layer = Box::new(QConv2d::<
        C,
        OC,
        3,
        1,
        1,
        4,
        4,
        4,
        4,
        Identity,
        constmat::nn::Heap,
    >::new(
        *weight, bias, multipliers, zero_at(-7), zero_at(3)
    ));
    assert_eq!(
        <QConv2d<C, OC, 3, 1, 1, 4, 4, 4, 4> as Layer>::WORKING_BYTES,
        working_bytes
    );
    let mut y = Box::new([[[0_i8; 4]; 4]; OC]);
    layer.forward_one(&x, &mut y);
    let want = conv_reference(
        &weight,
        &bias,
        &multipliers,
        (1, 1),
        (-7, 3, false),
        &x,
        (4, 4),
    );
    assert_eq!(y.as_flattened().as_flattened(), &want[..]);
}

#[test]
fn a_quantized_convolution_computes_its_definition() {
    let mut rng = StdRng::seed_from_u64(5);
    for round in 0..20 {
        let weight: [[[[i8; 3]; 3]; 2]; 4] = std::array::from_fn(|_| {
            std::array::from_fn(|_| {
                std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-127..=127)))
            })
        });
        let bias = std::array::from_fn(|_| rng.random_range(-5_000..=5_000));
        let multipliers =
            std::array::from_fn(|_| Multiplier::from_real(rng.random_range(1e-3..0.02)));
        let (z_in, z_out) = (rng.random_range(-128..=127), rng.random_range(-128..=127));
        let x: [[[i8; 7]; 7]; 2] = std::array::from_fn(|_| {
            std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-128..=127)))
        });
        let params = (&weight, &bias, &multipliers);
        // Stride 1, padding 1: 7x7 out. Stride 2, padding 0: 3x3 out. ReLU every other round.
        let flat = |y: &[[[i8; 7]; 7]; 4]| y.as_flattened().as_flattened().to_vec();
        let flat2 = |y: &[[[i8; 3]; 3]; 4]| y.as_flattened().as_flattened().to_vec();
        let relu = round % 2 == 1;
        // Both layers with the activation `A`: 7x7 out (stride 1, padding 1), 3x3 (stride 2).
        #[allow(clippy::type_complexity)]
        fn both<A: QuantizedActivation>(
            (weight, bias, multipliers): (&[[[[i8; 3]; 3]; 2]; 4], &[i32; 4], &[Multiplier; 4]),
            (z_in, z_out): (i8, i8),
            x: &[[[i8; 7]; 7]; 2],
        ) -> ([[[i8; 7]; 7]; 4], [[[i8; 3]; 3]; 4]) {
            let (mut y1, mut y2) = ([[[0; 7]; 7]; 4], [[[0; 3]; 3]; 4]);
            let (q_in, q_out) = (zero_at(z_in), zero_at(z_out));
            QConv2d::<2, 4, 3, 1, 1, 7, 7, 7, 7, A, Inline>::new(
                *weight,
                *bias,
                *multipliers,
                q_in,
                q_out,
            )
            .forward_one(x, &mut y1);
            QConv2d::<2, 4, 3, 2, 0, 7, 7, 3, 3, A, Inline>::new(
                *weight,
                *bias,
                *multipliers,
                q_in,
                q_out,
            )
            .forward_one(x, &mut y2);
            (y1, y2)
        }
        let (y1, y2) = if relu {
            both::<Relu>(params, (z_in, z_out), &x)
        } else {
            both::<Identity>(params, (z_in, z_out), &x)
        };
        assert_eq!(
            flat(&y1),
            conv_reference(
                params.0,
                params.1,
                params.2,
                (1, 1),
                (z_in, z_out, relu),
                &x,
                (7, 7)
            )
        );
        assert_eq!(
            flat2(&y2),
            conv_reference(
                params.0,
                params.1,
                params.2,
                (2, 0),
                (z_in, z_out, relu),
                &x,
                (3, 3)
            )
        );
    }
}

type Cnn = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 6, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Conv2d<6, 16, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<400, 120, Relu>,
    Dense<120, 84, Relu>,
    Dense<84, 10>,
];

#[test]
fn the_shipped_cnn_in_int8_is_within_0_3_points_of_its_float_accuracy() {
    const BATCH: usize = 100;
    let dir = match std::env::var_os("MNIST_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            println!("skipping the int8 CNN accuracy check: MNIST_DIR is not set");
            return;
        }
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/mnist-cnn-lenet5.safetensors");
    let net: Cnn = st::load(path).expect("the shipped CNN loads");
    let data = Mnist::load(&dir).expect("MNIST_DIR holds MNIST");
    let image = |pixels: &[u8; mnist::PIXELS]| -> [[[f32; 28]; 28]; 1] {
        [std::array::from_fn(|r| {
            std::array::from_fn(|c| f32::from(pixels[r * 28 + c]) / 255.0)
        })]
    };
    let calibration: Vec<_> = data.train.images()[..500].iter().map(image).collect();
    let int8 = quantize(&net, &calibration).expect("the shipped CNN quantizes");
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/mnist-cnn-lenet5-int8.safetensors");
    let shipped: <Cnn as Quantize>::Quantized = st::load(file).expect("the int8 CNN loads");
    assert!(
        shipped == int8.net,
        "models/mnist-cnn-lenet5-int8.safetensors is what `--example quantize` writes"
    );
    let test = &data.test;
    // The whole test set in optimized builds; the first 1,000 images in debug builds, where the
    // int8 convolutions' plain loops take two minutes for all of them. `.ci/run` runs this file
    // in debug: the whole set's figures for the shipped int8 CNN are pinned by
    // `tests/no_std_embed`, which it runs optimized.
    let images = if cfg!(debug_assertions) {
        1000
    } else {
        test.len()
    };
    let (mut float_correct, mut int8_correct) = (0, 0);
    let mut ws = Train::<f32, BATCH>::workspace(&net);
    let mut x = constmat::nn::zeroed_batch::<[[[f32; 28]; 28]; 1], BATCH>();
    for start in (0..images).step_by(BATCH) {
        for (k, x) in x.iter_mut().enumerate() {
            *x = image(test.image(start + k));
        }
        let logits = net.forward_train(&x, &mut ws);
        for (k, (x, logits)) in x.iter().zip(logits.iter()).enumerate() {
            let label = usize::from(test.label(start + k));
            float_correct += usize::from(argmax(logits) == label);
            int8_correct += usize::from(int8.predict(x) == label);
        }
    }
    let (f, q) = (
        100.0 * float_correct as f64 / images as f64,
        100.0 * int8_correct as f64 / images as f64,
    );
    println!("shipped CNN on {images} test images: f32 {f:.2}%, int8 {q:.2}%");
    assert!(
        f - q <= 0.3,
        "int8 {q:.2}% is more than 0.3 points below f32 {f:.2}%"
    );
}

#[test]
fn int8_nets_take_a_quarter_of_the_memory() {
    type Mlp8 = <MnistMlp as constmat::nn::Quantize>::Quantized;
    type Cnn8 = <Cnn as constmat::nn::Quantize>::Quantized;
    // Per layer: the i8 weights, three i32 per output (bias, multiplier, exponent), the input's
    // and output's quantizations (an f32 scale and an i8 zero point, 8 bytes each), padded to
    // 4 bytes.
    assert_eq!(
        <Mlp8 as Layer>::PARAMETER_BYTES,
        (100_352 + 12 * 128 + 16) + (8_192 + 12 * 64 + 16) + (640 + 12 * 10 + 16)
    );
    assert_eq!(
        <Cnn8 as Layer>::PARAMETER_BYTES,
        (150 + 12 * 6 + 16 + 2)
            + (2_400 + 12 * 16 + 16)
            + (48_000 + 12 * 120 + 16)
            + (10_080 + 12 * 84 + 16)
            + (840 + 12 * 10 + 16)
    );
    // The hidden samples, one byte per value, and each dense layer's i32 dot products, 4 bytes
    // per output, added.
    assert_eq!(
        <Mlp8 as Layer>::WORKING_BYTES,
        (128 + 64) + 4 * (128 + 64 + 10)
    );
    // The CNN: plus each convolution's window buffer (4,608 bytes) and a block's dot products
    // (64 positions of one i32).
    let images = 6 * 28 * 28 + 6 * 14 * 14 + 16 * 10 * 10 + 16 * 5 * 5 + 400;
    assert_eq!(
        <Cnn8 as Layer>::WORKING_BYTES,
        images + (120 + 84) + 4 * (120 + 84 + 10) + 2 * (4608 + 64 * 4)
    );
    println!(
        "MLP: f32 {} B, int8 {} B; LeNet: f32 {} B, int8 {} B",
        <MnistMlp as Layer>::PARAMETER_BYTES,
        <Mlp8 as Layer>::PARAMETER_BYTES,
        <Cnn as Layer>::PARAMETER_BYTES,
        <Cnn8 as Layer>::PARAMETER_BYTES
    );
}

/// A bias that does not fit the accumulator in the row's own scale (a row of zeros; an input
/// whose calibrated range is a point, after a ReLU that never fired) makes the row's scale
/// coarser instead of being clamped (the review of issue 11 found both clamped silently).
#[test]
fn biases_that_dwarf_their_rows_are_kept() {
    // A row of zeros with a bias of 1, next to an ordinary row.
    type Two = constmat::net![Dense<f32, 1, 2>];
    let net = Two::new(
        Matrix::from_rows([[0.0], [1.0]]),
        Matrix::from_rows([[1.0, 0.0]]),
    );
    let calibration: Vec<[f32; 1]> = (0..=100).map(|i| [i as f32 / 100.0]).collect();
    let int8 = quantize(&net, &calibration).unwrap();
    for x in [[0.0], [0.5], [1.0]] {
        let mut want = [0.0; 2];
        net.forward_one(&x, &mut want);
        let got = int8.forward_float(&x).map(|q| int8.output.dequantize(q));
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= int8.output.scale,
                "{x:?}: int8 {got:?}, float {want:?}"
            );
        }
    }
    // A ReLU that never fires on the calibration samples, then a layer with a bias.
    type Dead = constmat::net![Dense<f32, 1, 1, Relu>, Dense<f32, 1, 1>];
    let dead = Dead::new(
        Dense::new(Matrix::from_rows([[-1.0]]), Matrix::from_rows([[-1.0]])),
        Dense::new(Matrix::from_rows([[2.0]]), Matrix::from_rows([[0.5]])),
    );
    let int8 = quantize(&dead, &calibration).unwrap();
    let got = int8.output.dequantize(int8.forward_float(&[0.3])[0]);
    assert!(
        (got - 0.5).abs() <= int8.output.scale,
        "{got} instead of 0.5"
    );
}

#[test]
fn f64_values_beyond_f32_are_refused() {
    type Wide = constmat::net![Dense<f64, 1, 1>];
    let net = Wide::new(Matrix::from_rows([[1e40]]), Matrix::from_rows([[0.0]]));
    assert_eq!(
        quantize(&net, &[[0.5], [0.25]]),
        Err(QuantizeError::NotFinite {
            layer: 0,
            what: "weight"
        })
    );
    let net = Wide::new(Matrix::from_rows([[1.0]]), Matrix::from_rows([[0.0]]));
    assert_eq!(
        quantize(&net, &[[1e300]]),
        Err(QuantizeError::NotFinite {
            layer: 0,
            what: "calibration input"
        })
    );
}

/// `docs/quantization.md`'s usage example runs as a doc test (`src/lib.rs`); an edit that cut
/// it (one did) would drop that test silently, so its presence is checked here.
#[test]
fn the_quantization_guide_keeps_its_tested_example() {
    let guide = include_str!("../docs/quantization.md");
    let example = guide
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/quantization.md has a ```rust block");
    assert!(example.contains("quantize(&net, &calibration)"));
    assert!(example.contains("to_store::<Inline>()"));
}

// ---------------------------------------------------------------------------------------------
// The int8 weights file.
// ---------------------------------------------------------------------------------------------

type SmallCnn = constmat::net![
    Input<f32, 1, 8, 8>,
    Conv2d<1, 2, 3, 1, 1, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<32, 3>,
];

/// The names, dtypes and shapes in a file's header, sorted by name.
fn header_of(bytes: &[u8]) -> Vec<(String, String, Vec<usize>)> {
    let file =
        ::safetensors::SafeTensors::deserialize(bytes).expect("the reference crate reads it");
    let mut tensors: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, format!("{:?}", view.dtype()), view.shape().to_vec()))
        .collect();
    tensors.sort();
    tensors
}

#[test]
fn int8_files_hold_the_net_exactly() {
    let mut rng = StdRng::seed_from_u64(21);
    let mlp = quantize(&Mlp::random(&mut rng), &samples(&mut rng, 200)).unwrap();
    let bytes = st::to_bytes(&mlp.net, &[]);
    assert_eq!(
        st::to_bytes(&mlp.net, &[]),
        bytes,
        "the same net, the same bytes"
    );
    let back: <Mlp as Quantize>::Quantized = st::from_bytes(&bytes).unwrap();
    assert!(back == mlp.net);
    // The first layer's input quantization is the net's.
    assert_eq!(back.first.input, mlp.input);
    assert_eq!(back.rest.rest.output, mlp.output);
    let layer: Vec<_> = header_of(&bytes)
        .into_iter()
        .filter(|(n, _, _)| n.starts_with("2."))
        .collect();
    let want = [
        ("2.bias", "I32", vec![8]),
        ("2.exponent", "I32", vec![8]),
        ("2.input_scale", "F32", vec![]),
        ("2.input_zero_point", "I8", vec![]),
        ("2.multiplier", "I32", vec![8]),
        ("2.output_scale", "F32", vec![]),
        ("2.output_zero_point", "I8", vec![]),
        ("2.weight", "I8", vec![8, 16]),
    ]
    .map(|(n, d, s)| (n.to_string(), d.to_string(), s));
    assert_eq!(layer, want);
    // Inline storage writes the same file.
    assert_eq!(st::to_bytes(&mlp.net.to_store::<Inline>(), &[]), bytes);

    let images: Vec<[[[f32; 8]; 8]; 1]> = (0..200)
        .map(|_| {
            [std::array::from_fn(|_| {
                std::array::from_fn(|_| rng.random_range(0.0..1.0))
            })]
        })
        .collect();
    let cnn = quantize(&SmallCnn::random(&mut rng), &images).unwrap();
    let bytes = st::to_bytes(&cnn.net, &[]);
    let back: <SmallCnn as Quantize>::Quantized = st::from_bytes(&bytes).unwrap();
    assert!(back == cnn.net);
    let names: Vec<String> = header_of(&bytes).into_iter().map(|(n, _, _)| n).collect();
    // Conv2d 0, ReLU 1, MaxPool2d 2, Flatten 3, Linear 4: PyTorch's numbering, 8 tensors each.
    assert_eq!(names.len(), 16);
    assert!(
        names.contains(&"0.weight".to_string())
            && names.contains(&"4.output_zero_point".to_string())
    );
    let mut out = [0_i8; 3];
    back.forward_one(
        &images[0].map(|c| c.map(|r| r.map(|v| cnn.input.quantize(v)))),
        &mut out,
    );
    assert_eq!(out, cnn.forward_float(&images[0]));
}

#[test]
fn int8_values_outside_their_ranges_are_refused() {
    type One = QDense<4, 2>;
    let q = zero_at(0);
    let good = One::new([[1; 4]; 2], [0; 2], [Multiplier::from_real(0.5); 2], q, q);
    let mut cases: Vec<(One, &str)> = Vec::new();
    let mut layer = good.clone();
    layer.weight[1][2] = -128;
    cases.push((
        layer,
        "tensor 0.weight: element 6 is -128, outside -127..=127",
    ));
    let mut layer = good.clone();
    layer.exponent[1] = 31;
    cases.push((
        layer,
        "tensor 0.exponent: element 1 is 31, outside -31..=30",
    ));
    let mut layer = good.clone();
    layer.exponent[0] = i32::MIN;
    cases.push((
        layer,
        "tensor 0.exponent: element 0 is -2147483648, outside -31..=30",
    ));
    let mut layer = good.clone();
    layer.multiplier[0] = -5;
    cases.push((
        layer,
        "tensor 0.multiplier: element 0 is -5, outside 0..=2147483647",
    ));
    let mut layer = good.clone();
    layer.output.scale = f32::NAN;
    cases.push((
        layer,
        "tensor 0.output_scale: element 0 is not a finite number",
    ));
    // Scales that are not positive normal numbers (issue 44): each loaded without error.
    let expected = "expected a quantization scale: a positive normal f32, from 1.1754944e-38 \
                    to 3.4028235e38";
    let scales = [
        ("input", -1.0 / 255.0, "-0.003921569"),
        ("input", 0.0, "0"),
        ("input", -0.0, "-0"),
        ("input", 1e-45, "1e-45"),
        ("output", f32::MIN_POSITIVE / 2.0, "5.877472e-39"),
        ("output", -f32::MAX, "-3.4028235e38"),
    ];
    for (which, scale, shown) in scales {
        let mut layer = good.clone();
        *(if which == "input" {
            &mut layer.input
        } else {
            &mut layer.output
        }) = Quantization {
            scale,
            zero_point: 0,
        };
        let message = format!("tensor 0.{which}_scale: element 0 is {shown}, {expected}");
        cases.push((layer, message.leak()));
    }
    for (layer, message) in cases {
        let bytes = st::to_bytes(&layer, &[]);
        let mut net = good.clone();
        let err = st::load_into(&mut net, &bytes).unwrap_err();
        assert_eq!(err.to_string(), message);
        assert!(net == good, "a failed load leaves the net as it was");
        let kind = err.format_error().map(|e| e.kind());
        let want = if message.contains("finite") {
            constmat::format::ErrorKind::NonFinite
        } else if message.contains("scale:") {
            constmat::format::ErrorKind::ScaleOutOfRange
        } else {
            constmat::format::ErrorKind::OutOfRange
        };
        assert_eq!(kind, Some(want), "{message}");
    }
    assert!(st::from_bytes::<One>(&st::to_bytes(&good, &[])).is_ok());
    // The ends of the rule are scales.
    for scale in [f32::MIN_POSITIVE, f32::MAX] {
        let mut layer = good.clone();
        (layer.input.scale, layer.output.scale) = (scale, scale);
        assert!(st::from_bytes::<One>(&st::to_bytes(&layer, &[])).unwrap() == layer);
    }
    // The int8 convolution holds the same tensors to the same rule.
    type Conv = QConv2d<1, 1, 1, 1, 0, 2, 2, 2, 2, Identity, Inline>;
    let q = Quantization {
        scale: -1.0 / 255.0,
        zero_point: 3,
    };
    let conv = Conv::new([[[[1]]]], [0], [Multiplier::from_real(0.5)], zero_at(0), q);
    let err = st::from_bytes::<Conv>(&st::to_bytes(&conv, &[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("tensor 0.output_scale: element 0 is -0.003921569, {expected}")
    );
}

/// `net!` with an `i8` input: the int8 forms of the same layers, the sizes computed as for the
/// float net.
type Int8LeNet = constmat::net![
    Input<i8, 1, 28, 28>,
    Conv2d<1, 6, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Conv2d<6, 16, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<400, 120, Relu>,
    Dense<120, 84, Relu>,
    Dense<84, 10>,
];

#[test]
fn net_spells_int8_nets_like_float_ones() {
    // The same type as the quantizer's output for the float LeNet, baked.
    let same: fn(constmat::embed::Baked<<Cnn as Quantize>::Quantized>) -> Int8LeNet = |net| net;
    let _ = same;
    assert_eq!(Int8LeNet::SPEC, <Cnn as Quantize>::Quantized::SPEC);
    assert_eq!(Int8LeNet::SPEC.modules(), Cnn::SPEC.modules());
}

type Int8Mlp = <MnistMlp as Quantize>::Quantized;
type Int8Cnn = <Cnn as Quantize>::Quantized;

static BAKED_MLP: constmat::embed::Baked<Int8Mlp> =
    constmat::include_net!("../models/mnist-784-128-64-10-int8.safetensors");
static BAKED_CNN: constmat::embed::Baked<Int8Cnn> =
    constmat::include_net!("../models/mnist-cnn-lenet5-int8.safetensors");

#[test]
fn baked_int8_nets_are_the_files_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mlp: Int8Mlp = st::load(root.join("models/mnist-784-128-64-10-int8.safetensors")).unwrap();
    assert!(mlp.to_store::<Inline>() == BAKED_MLP);
    let cnn: Int8Cnn = st::load(root.join("models/mnist-cnn-lenet5-int8.safetensors")).unwrap();
    // Compared layer by layer: the whole inline CNN is too large for a debug build's stack.
    let inline = Box::new(cnn.to_store::<Inline>());
    assert!(inline.first == BAKED_CNN.first);
    assert!(*inline == BAKED_CNN);
    // A baked int8 net runs: the input quantization is the first layer's.
    let input = BAKED_MLP.first.input;
    assert!(input.scale > 0.0);
    let mut out = [0_i8; 10];
    BAKED_MLP.forward_one(&[input.quantize(0.0); 784], &mut out);
}

/// Int8 files with random bytes overwritten in their data: each loads or is refused, and a net
/// that loads predicts without panicking (debug builds check every integer operation).
#[test]
fn corrupted_int8_files_load_or_are_refused_never_panic() {
    let mut rng = StdRng::seed_from_u64(5);
    let int8 = quantize(&Mlp::random(&mut rng), &samples(&mut rng, 100)).unwrap();
    let bytes = st::to_bytes(&int8.net, &[]);
    let data_start =
        8 + usize::try_from(u64::from_le_bytes(bytes[..8].try_into().unwrap())).unwrap();
    let (mut loaded, mut refused) = (0, 0);
    for _ in 0..2000 {
        let mut corrupt = bytes.clone();
        for _ in 0..rng.random_range(1..8) {
            let at = rng.random_range(data_start..corrupt.len());
            corrupt[at] = rng.random();
        }
        match st::from_bytes::<<Mlp as Quantize>::Quantized>(&corrupt) {
            Ok(net) => {
                loaded += 1;
                let mut out = [0_i8; 4];
                net.forward_one(&[rng.random(); 12], &mut out);
            }
            Err(e) => {
                refused += 1;
                let kind = e.format_error().map(|e| e.kind());
                assert!(
                    matches!(
                        kind,
                        Some(
                            constmat::format::ErrorKind::OutOfRange
                                | constmat::format::ErrorKind::NonFinite
                                | constmat::format::ErrorKind::ScaleOutOfRange
                        )
                    ),
                    "{e}"
                );
            }
        }
    }
    println!("{loaded} corrupted files loaded, {refused} refused");
    assert!(loaded > 0 && refused > 0);
}

/// A large int8 layer with heap storage loads on a small stack: its weight is filled where it
/// is stored, not built as a temporary array.
#[test]
fn a_large_int8_layer_loads_on_a_small_stack() {
    use constmat::nn::{Heap, Weights};
    type Big = QDense<2048, 1024, Relu, Heap>;
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let zeros = vec![0_u8; 2048 * 1024];
            let mut layer = Big::read_tensors(&mut |_| &zeros[..]);
            // Scales of 0 are not scales: a file of them is refused.
            (layer.input.scale, layer.output.scale) = (0.1, 0.1);
            let bytes = st::to_bytes(&layer, &[]);
            let back: Big = st::from_bytes(&bytes).expect("a valid file");
            assert!(back == layer);
        })
        .unwrap();
    handle.join().expect("no stack overflow");
}

/// Quantizing gives the same int8 net whichever instruction set the kernels are limited to:
/// the calibration's float sums must not depend on the CPU (on an AVX2 machine the shipped
/// nets' requantization multipliers came out different from an AVX-512 machine's, by up to
/// 528). Synthetic images, so that this runs without MNIST.
#[test]
fn quantizing_gives_the_same_bytes_on_every_instruction_set() {
    use constmat::kernels::{InstructionSet, with_instruction_set};

    fn same_on_every_set<N>(net: &N, calibration: &[N::In], what: &str)
    where
        N: Quantize,
        N::In: constmat::nn::QuantizeSample,
        N::Quantized: PartialEq,
    {
        let sets = [
            InstructionSet::Portable,
            InstructionSet::Avx2,
            InstructionSet::Avx512,
        ];
        let quantized: Vec<_> = sets
            .iter()
            .map(|&set| {
                with_instruction_set(set, || quantize(net, calibration))
                    .unwrap_or_else(|e| panic!("{what} quantizes: {e}"))
            })
            .collect();
        for (set, q) in sets.iter().zip(&quantized).skip(1) {
            assert!(
                q.net == quantized[0].net && q.input == quantized[0].input,
                "{what}: limited to {set}, the int8 net differs from the portable one's"
            );
        }
    }

    let mut rng = StdRng::seed_from_u64(43);
    // Digit-like images: mostly 0, some strokes of values in (0, 1].
    let mut pixel = move || {
        if rng.random_range(0..4) == 0 {
            rng.random_range(0.0_f32..=1.0)
        } else {
            0.0
        }
    };
    let images: Vec<[f32; mnist::PIXELS]> =
        (0..64).map(|_| std::array::from_fn(|_| pixel())).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mlp: MnistMlp = st::load(root.join("models/mnist-784-128-64-10.safetensors")).unwrap();
    same_on_every_set(&mlp, &images, "the shipped MLP");
    let cnn: Cnn = st::load(root.join("models/mnist-cnn-lenet5.safetensors")).unwrap();
    let planes: Vec<[[[f32; 28]; 28]; 1]> = images
        .iter()
        .map(|x| {
            [std::array::from_fn(|r| {
                std::array::from_fn(|c| x[r * 28 + c])
            })]
        })
        .collect();
    same_on_every_set(&cnn, &planes, "the shipped LeNet-5");
}

/// A 1 x 1 convolution of stride 1 without padding (the product of the filters with the image
/// as it lies where the CPU has AVX-512 VNNI) with a channel count not a multiple of 4, a
/// filter count not a multiple of 8 and a block of positions left over (81 of 64), and a
/// depthwise convolution whose planes take several calls of its kernel (30 x 30), against the
/// definition.
#[test]
fn pointwise_and_depthwise_convolutions_of_awkward_sizes_compute_their_definition() {
    fn random<const N: usize, T>(rng: &mut StdRng, f: impl Fn(&mut StdRng) -> T) -> [T; N] {
        std::array::from_fn(|_| f(rng))
    }
    let mut rng = StdRng::seed_from_u64(11);
    let (z_in, z_out) = (rng.random_range(-128..=127), rng.random_range(-128..=127));

    let x: [[[i8; 9]; 9]; 5] = random(&mut rng, |r| {
        random(r, |r| random(r, |r| r.random_range(-128..=127)))
    });
    let weight: [[[[i8; 1]; 1]; 5]; 11] = random(&mut rng, |r| {
        random(r, |r| {
            random(r, |r| random(r, |r| r.random_range(-127..=127)))
        })
    });
    let bias: [i32; 11] = random(&mut rng, |r| r.random_range(-5_000..=5_000));
    let multipliers: [Multiplier; 11] = random(&mut rng, |r| {
        Multiplier::from_real(r.random_range(1e-3..0.05))
    });
    let mut y = [[[0_i8; 9]; 9]; 11];
    QConv2d::<5, 11, 1, 1, 0, 9, 9, 9, 9, Relu, Inline>::new(
        weight,
        bias,
        multipliers,
        zero_at(z_in),
        zero_at(z_out),
    )
    .forward_one(&x, &mut y);
    let want = conv_reference(
        &weight,
        &bias,
        &multipliers,
        (1, 0),
        (z_in, z_out, true),
        &x,
        (9, 9),
    );
    assert_eq!(y.as_flattened().as_flattened().to_vec(), want);

    // Two filters per channel; the same net as a full convolution whose filters are zero on
    // every other channel.
    let x: Box<[[[i8; 30]; 30]; 3]> = Box::new(random(&mut rng, |r| {
        random(r, |r| random(r, |r| r.random_range(-128..=127)))
    }));
    let weight: [[[[i8; 3]; 3]; 1]; 6] = random(&mut rng, |r| {
        random(r, |r| {
            random(r, |r| random(r, |r| r.random_range(-127..=127)))
        })
    });
    let bias: [i32; 6] = random(&mut rng, |r| r.random_range(-5_000..=5_000));
    let multipliers: [Multiplier; 6] = random(&mut rng, |r| {
        Multiplier::from_real(r.random_range(1e-3..0.05))
    });
    let full: [[[[i8; 3]; 3]; 3]; 6] = std::array::from_fn(|o| {
        std::array::from_fn(|c| {
            if c == o / 2 {
                weight[o][0]
            } else {
                [[0; 3]; 3]
            }
        })
    });
    let mut y = Box::new([[[0_i8; 30]; 30]; 6]);
    QDepthwiseConv2d::<3, 6, 3, 1, 1, 30, 30, 30, 30, Identity, Inline>::new(
        weight,
        bias,
        multipliers,
        zero_at(z_in),
        zero_at(z_out),
    )
    .forward_one(&x, &mut y);
    let want = conv_reference(
        &full,
        &bias,
        &multipliers,
        (1, 1),
        (z_in, z_out, false),
        &x,
        (30, 30),
    );
    assert_eq!(y.as_flattened().as_flattened().to_vec(), want);
}
