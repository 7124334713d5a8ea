//! Convolutions whose kernel's height and width differ (`Conv2d`'s last parameter `KW`,
//! `Conv2d<C, OC, (KH, KW), S, P>` in `net!`): outputs against loops written here from the
//! definition, on every forward path (whole patches, pieces of the stack buffer, the training
//! pass), finite-difference gradient checks in f64, a DS-CNN-style net against PyTorch (outputs
//! and every gradient), baked, saved, loaded, and quantized to int8.
#![cfg(all(feature = "safetensors", feature = "rand"))]

use constmat::embed::Baked;
use constmat::io::safetensors as st;
use constmat::nn::{
    Conv2d, Identity, Layer, RandomInit, Relu, Sigmoid, Store, Tanh, Train, quantize,
};
use rand::distr::Distribution;
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/gradient.rs"]
#[allow(dead_code)] // each test file uses some of the helpers
mod gradient;
use gradient::*;

#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::{fixture, matches_pytorch};

/// The convolution from its definition, flattened: `Z[o][i][j] = b[o] + Σ_c Σ_kh Σ_kw
/// w[o][c][kh][kw] · x[c][i·S + kh - P][j·S + kw - P]`, zero outside the image.
#[allow(clippy::needless_range_loop)]
fn definition<
    const C: usize,
    const OC: usize,
    const KH: usize,
    const KW: usize,
    const S: usize,
    const P: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    St: Store,
>(
    layer: &Conv2d<f64, C, OC, KH, S, P, H, W, OH, OW, Identity, St, KW>,
    x: &[[[f64; W]; H]; C],
) -> Vec<f64> {
    let (w, b) = (St::matrix(&layer.weight), St::vector(&layer.bias));
    let mut z = Vec::with_capacity(OC * OH * OW);
    for o in 0..OC {
        for i in 0..OH {
            for j in 0..OW {
                let mut sum = b[o];
                for c in 0..C {
                    for kh in 0..KH {
                        for kw in 0..KW {
                            let ih = (i * S + kh).checked_sub(P).filter(|&ih| ih < H);
                            let iw = (j * S + kw).checked_sub(P).filter(|&iw| iw < W);
                            if let (Some(ih), Some(iw)) = (ih, iw) {
                                sum += w[o][c][kh][kw] * x[c][ih][iw];
                            }
                        }
                    }
                }
                z.push(sum);
            }
        }
    }
    z
}

/// `forward_one` and the training pass of a batch of two against [`definition`]; the two
/// passes agree bit for bit. (A function, not a macro's body, so that each case's arrays are
/// in a frame of their own.)
fn check_definition<
    const C: usize,
    const OC: usize,
    const KH: usize,
    const KW: usize,
    const S: usize,
    const P: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(
    rng: &mut StdRng,
) {
    type L<
        const C: usize,
        const OC: usize,
        const KH: usize,
        const KW: usize,
        const S: usize,
        const P: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > = Conv2d<f64, C, OC, KH, S, P, H, W, OH, OW, Identity, constmat::nn::Heap, KW>;
    let layer: L<C, OC, KH, KW, S, P, H, W, OH, OW> = random_layer(rng);
    let x: Box<[[[[f64; W]; H]; C]; 2]> = vec![random_sample(rng), random_sample(rng)]
        .into_boxed_slice()
        .try_into()
        .unwrap();
    let what = format!("Conv2d<{C}, {OC}, ({KH}, {KW}), {S}, {P}> on {H}x{W}");
    let mut ws = Train::<f64, 2>::workspace(&layer);
    let trained = layer.forward_train(&x, &mut ws);
    for (x, trained) in x.iter().zip(trained) {
        let mut out: Box<[[[f64; OW]; OH]; OC]> = vec![[[0.0; OW]; OH]; OC]
            .into_boxed_slice()
            .try_into()
            .unwrap();
        layer.forward_one(x, &mut out);
        assert!(*out == *trained, "{what}: prediction and training pass");
        let want = definition(&layer, x);
        let got: &[f64] = out.as_flattened().as_flattened();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-12, "{what}: {g} vs {w}");
        }
    }
}

/// Every forward path against the definition: `forward_one` (whole patches, or pieces of the
/// stack buffer for the large case) and the training pass.
#[test]
fn rectangular_kernels_compute_the_definition() {
    let mut rng = StdRng::seed_from_u64(1);
    macro_rules! case {
        ($c:literal, $oc:literal, ($kh:literal, $kw:literal), $s:literal, $p:literal, $h:literal, $w:literal) => {
            check_definition::<
                $c,
                $oc,
                $kh,
                $kw,
                $s,
                $p,
                $h,
                $w,
                { constmat::nn::conv_output_size($h, $kh, $s, $p) },
                { constmat::nn::conv_output_size($w, $kw, $s, $p) },
            >(&mut rng)
        };
    }
    // Stride 1 (which a square kernel would take on the direct kernels), with and without
    // padding; taller and wider kernels.
    case!(1, 2, (3, 1), 1, 0, 5, 4);
    case!(2, 3, (1, 3), 1, 1, 4, 6);
    case!(3, 4, (5, 2), 1, 2, 7, 5);
    // DS-CNN's first layer in small: 10 x 4, stride 2, on 49 x 10 padded by hand (no padding
    // here), and with the layer's own padding.
    case!(1, 4, (10, 4), 2, 0, 58, 13);
    case!(1, 3, (10, 4), 2, 1, 21, 9);
    // Stride 3, a kernel wider than its stride, columns left over.
    case!(2, 2, (2, 5), 3, 1, 9, 11);
    // Too large for the stack buffer of a prediction, which then cuts the product: blocks of
    // whole output rows; blocks of parts of rows (49 positions a row); chunks of the patches'
    // rows (64·10·4 of them).
    case!(16, 64, (10, 4), 2, 0, 58, 13);
    case!(16, 64, (10, 4), 2, 0, 30, 100);
    case!(64, 8, (10, 4), 2, 0, 20, 12);
}

/// The hand-derived backward pass against central differences, on layers alone and in a net.
#[test]
fn rectangular_kernel_gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(2);
    let mut worst = 0.0_f64;
    macro_rules! layer_case {
        ($a:ty, $c:literal, $oc:literal, ($kh:literal, $kw:literal), $s:literal, $p:literal, $h:literal, $w:literal) => {{
            type L = Conv2d<
                f64,
                $c,
                $oc,
                $kh,
                $s,
                $p,
                $h,
                $w,
                { constmat::nn::conv_output_size($h, $kh, $s, $p) },
                { constmat::nn::conv_output_size($w, $kw, $s, $p) },
                $a,
                constmat::nn::Heap,
                $kw,
            >;
            let layer: L = random_layer(&mut rng);
            let x: [_; 2] = std::array::from_fn(|_| random_sample(&mut rng));
            let what = format!(
                "Conv2d<{}, {}, ({}, {}), {}, {}>",
                $c, $oc, $kh, $kw, $s, $p
            );
            worst = worst.max(check(&what, &layer, &x, &mut rng));
        }};
    }
    layer_case!(Identity, 1, 2, (3, 1), 1, 0, 5, 4);
    layer_case!(Tanh, 2, 3, (1, 3), 1, 1, 4, 6);
    layer_case!(Sigmoid, 2, 2, (5, 2), 2, 2, 7, 5);
    layer_case!(Tanh, 1, 3, (10, 4), 2, 1, 21, 9);
    layer_case!(Identity, 2, 2, (2, 5), 3, 1, 9, 11);

    type Net = constmat::net![
        Input<f64, 1, 12, 6>,
        ZeroPad2d<1, 2, 4, 5>,
        Conv2d<1, 3, (10, 4), 2, 0, Tanh>,
        Conv2d<3, 2, (3, 1), 1, 1, Sigmoid>,
        Flatten,
        Dense<60, 2>,
    ];
    let net = Net::random(&mut rng);
    let x: [_; 2] = std::array::from_fn(|_| random_sample(&mut rng));
    worst = worst.max(check("a DS-CNN-style net", &net, &x, &mut rng));
    assert!(worst < 1e-6, "{worst}");
    eprintln!("rectangular Conv2d: worst relative error {worst:e}");
}

/// DS-CNN's first layers in small (`tests/fixtures/pytorch_mlperf_layers.py`): PyTorch's
/// `nn.ZeroPad2d((1, 2, 4, 5))`, `nn.Conv2d(1, 4, (10, 4), stride=2)` and `nn.Conv2d(4, 3,
/// (3, 1), padding=1)`.
type DsCnnStyle = constmat::net![
    Input<f64, 1, 12, 6>,
    ZeroPad2d<1, 2, 4, 5>,
    Conv2d<1, 4, (10, 4), 2, 0, Relu>,
    Conv2d<4, 3, (3, 1), 1, 1, Tanh>,
    Flatten,
    Dense<90, 2>,
];

/// The same net baked at compile time from PyTorch's `state_dict` file.
static BAKED: Baked<DsCnnStyle> = constmat::include_net!("fixtures/rectangular-f64.safetensors");

#[test]
fn a_ds_cnn_style_net_computes_pytorchs_outputs_and_gradients() {
    let net: DsCnnStyle = st::load(fixture("rectangular-f64.safetensors")).unwrap();
    matches_pytorch::<_, 3>(&net, "rectangular-f64-io.safetensors");
    assert_eq!(BAKED.to_store::<constmat::nn::Heap>(), net);

    let dir = std::env::temp_dir().join(format!("constmat-rectangular-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("net.safetensors");
    st::save(&net, &path, &[]).unwrap();
    let again: DsCnnStyle = st::load(&path).unwrap();
    assert_eq!(again, net);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A batch normalization folds into a convolution with a 10 x 4 kernel: the folded layer
/// computes what the two did.
#[test]
fn a_batch_normalization_folds_into_a_rectangular_kernel() {
    use constmat::nn::{BatchNorm2d, Parameters};
    let mut rng = StdRng::seed_from_u64(4);
    type Conv<A> = Conv2d<f64, 1, 3, 10, 2, 1, 21, 9, 7, 4, A, constmat::nn::Heap, 4>;
    let conv: Conv<Identity> = random_layer(&mut rng);
    let mut norm = BatchNorm2d::<f64, 3, 7, 4, Relu>::zeros();
    norm.tensor_mut(0).copy_from_slice(&[1.5, -0.5, 0.75]); // weight
    norm.tensor_mut(1).copy_from_slice(&[0.1, 0.2, -0.3]); // bias
    norm.tensor_mut(2).copy_from_slice(&[0.5, -1.0, 0.25]); // running_mean
    norm.tensor_mut(3).copy_from_slice(&[2.0, 0.5, 1.0]); // running_var
    let folded: Conv<Relu> = norm.fold_into(&conv);
    let x: [[[f64; 9]; 21]; 1] = random_sample(&mut rng);
    let (mut z, mut a, mut b) = ([[[0.0; 4]; 7]; 3], [[[0.0; 4]; 7]; 3], [[[0.0; 4]; 7]; 3]);
    conv.forward_one(&x, &mut z);
    norm.forward_one(&z, &mut a);
    folded.forward_one(&x, &mut b);
    let (a, b) = (
        a.as_flattened().as_flattened(),
        b.as_flattened().as_flattened(),
    );
    assert!(a.iter().any(|&v| v > 0.0) && a.contains(&0.0), "{a:?}");
    for (p, q) in a.iter().zip(b) {
        assert!((p - q).abs() < 1e-12, "{p} vs {q}");
    }
}

/// A float net with a 10 x 4 kernel quantizes to the int8 net `net!` writes for the same
/// layers, whose outputs follow the float net's.
#[test]
fn a_rectangular_kernel_quantizes() {
    type Float = constmat::net![
        Input<f32, 1, 12, 6>,
        ZeroPad2d<1, 2, 4, 5>,
        Conv2d<1, 4, (10, 4), 2, 0, Relu>,
        Conv2d<4, 3, (3, 1), 1, 1, Relu>,
        Flatten,
        Dense<90, 2>,
    ];
    type Int8 = constmat::net![
        Input<i8, 1, 12, 6>,
        ZeroPad2d<1, 2, 4, 5>,
        Conv2d<1, 4, (10, 4), 2, 0, Relu>,
        Conv2d<4, 3, (3, 1), 1, 1, Relu>,
        Flatten,
        Dense<90, 2>,
    ];
    let mut rng = StdRng::seed_from_u64(3);
    let net = Float::random(&mut rng);
    let uniform = uniform();
    let images: Vec<[[[f32; 6]; 12]; 1]> = (0..64)
        .map(|_| {
            std::array::from_fn(|_| {
                std::array::from_fn(|_| std::array::from_fn(|_| uniform.sample(&mut rng) as f32))
            })
        })
        .collect();
    let quantized = quantize(&net, &images).unwrap();
    let _: &Int8 = &quantized.net.to_store::<constmat::nn::Inline>();
    let output = quantized.output;
    let mut worst = 0.0_f32;
    let mut largest = 0.0_f32;
    for image in &images {
        let mut want = [0.0_f32; 2];
        net.forward_one(image, &mut want);
        let got = quantized.forward_float(image);
        for (g, w) in got.iter().zip(want) {
            worst = worst.max((output.dequantize(*g) - w).abs());
            largest = largest.max(w.abs());
        }
    }
    // A few steps of the output's scale at most.
    assert!(
        worst <= 4.0 * output.scale,
        "{worst} against a scale of {}",
        output.scale
    );
    assert!(
        largest > 10.0 * output.scale,
        "outputs too small to test: {largest}"
    );
}
