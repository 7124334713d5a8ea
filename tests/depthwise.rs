//! `DepthwiseConv2d`: forward values against a `Conv2d` whose weight is zero outside each
//! filter's own input channel (what `groups = C` means), finite-difference gradient checks in
//! f64 (`common/gradient.rs`) alone and inside a net, `net!`'s spelling, storage and save/load
//! round trips, a net baked by `include_net!`, and a MobileNet-style net against PyTorch's
//! outputs and autograd gradients (`tests/fixtures/pytorch_mlperf_layers.py` wrote the
//! fixtures once; no Python here).
#![cfg(all(feature = "safetensors", feature = "rand"))]

use constmat::embed::Baked;
use constmat::io::safetensors as st;
use constmat::nn::{
    Chain, Conv2d, DepthwiseConv2d, Flatten, Identity, Inline, Layer, Parameters, RandomInit, Relu,
    Relu6, Tanh, conv_output_size,
};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/gradient.rs"]
#[allow(dead_code)] // each test file uses some of the helpers
mod gradient;
use gradient::*;
#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::{fixture, matches_pytorch};

/// The depthwise layer as the plain convolution it is: filter `o`'s weight on input channel
/// `o / (OC / C)`, zero on the others.
macro_rules! forward_case {
    ($rng:ident; $a:ty, $c:literal, $oc:literal, $k:literal, $s:literal, $p:literal, $h:literal, $w:literal) => {{
        const OH: usize = conv_output_size($h, $k, $s, $p);
        const OW: usize = conv_output_size($w, $k, $s, $p);
        let depthwise: DepthwiseConv2d<f64, $c, $oc, $k, $s, $p, $h, $w, OH, OW, $a> =
            random_layer(&mut $rng);
        let mut full = Conv2d::<f64, $c, $oc, $k, $s, $p, $h, $w, OH, OW, $a>::zeros();
        for o in 0..$oc {
            full.weight[o][o / ($oc / $c)] = depthwise.weight[o][0];
        }
        full.bias = depthwise.bias.clone();
        let x: [[[[f64; $w]; $h]; $c]; 3] = std::array::from_fn(|_| random_sample(&mut $rng));
        let (mut got, mut want) = ([[[[0.0; OW]; OH]; $oc]; 3], [[[[0.0; OW]; OH]; $oc]; 3]);
        depthwise.forward(&x, &mut got);
        full.forward(&x, &mut want);
        let what = format!(
            "DepthwiseConv2d<{}, {}, {}, stride {}, padding {}> on {}x{}",
            $c, $oc, $k, $s, $p, $h, $w
        );
        let (got, want) = (
            got.as_flattened().as_flattened().as_flattened(),
            want.as_flattened().as_flattened().as_flattened(),
        );
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12,
                "{what}: output {i}: {g} against {w}"
            );
        }
        // f32 within rounding of the f64 values.
        let narrow = depthwise.clone();
        let mut narrow32 = DepthwiseConv2d::<f32, $c, $oc, $k, $s, $p, $h, $w, OH, OW, $a>::zeros();
        for k in 0..2 {
            for (n, &v) in narrow32.tensor_mut(k).iter_mut().zip(narrow.tensor(k)) {
                *n = v as f32;
            }
        }
        let x32 = x.map(|x| x.map(|p| p.map(|r| r.map(|v| v as f32))));
        let mut y32 = [[[[0.0_f32; OW]; OH]; $oc]; 3];
        narrow32.forward(&x32, &mut y32);
        for (g, w) in y32
            .as_flattened()
            .as_flattened()
            .as_flattened()
            .iter()
            .zip(want)
        {
            assert!(
                (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{what}, f32"
            );
        }
    }};
}

#[test]
fn a_depthwise_convolution_is_a_convolution_with_one_input_channel_per_filter() {
    let mut rng = StdRng::seed_from_u64(1);
    forward_case!(rng; Identity, 1, 1, 3, 1, 1, 5, 5);
    forward_case!(rng; Relu, 3, 3, 3, 1, 1, 6, 7);
    // A channel multiplier of 2 and 3 (MobileNet's depth multiplier).
    forward_case!(rng; Tanh, 2, 4, 3, 1, 0, 6, 6);
    forward_case!(rng; Relu6, 2, 6, 5, 1, 2, 7, 5);
    // Stride 2, with rows left over in no window, and the padding row after the last window.
    forward_case!(rng; Identity, 4, 4, 3, 2, 1, 8, 8);
    forward_case!(rng; Relu, 3, 3, 3, 2, 0, 9, 8);
    // 1 x 1 with stride 2 on an even size; a kernel larger than the stride and the image.
    forward_case!(rng; Identity, 2, 2, 1, 2, 0, 8, 8);
    forward_case!(rng; Identity, 2, 4, 7, 3, 3, 5, 6);
}

macro_rules! gradient_case {
    ($rng:ident, $worst:ident; $a:ty, $c:literal, $oc:literal, $k:literal, $s:literal, $p:literal, $h:literal, $w:literal) => {{
        type L = DepthwiseConv2d<
            f64,
            $c,
            $oc,
            $k,
            $s,
            $p,
            $h,
            $w,
            { conv_output_size($h, $k, $s, $p) },
            { conv_output_size($w, $k, $s, $p) },
            $a,
        >;
        let layer: L = random_layer(&mut $rng);
        let x: [<L as Layer>::In; 2] = [random_sample(&mut $rng), random_sample(&mut $rng)];
        let what = format!(
            "DepthwiseConv2d<{}, {}, {}, stride {}, padding {}> on {}x{}",
            $c, $oc, $k, $s, $p, $h, $w
        );
        $worst = $worst.max(check(&what, &layer, &x, &mut $rng));
        let inline = layer.to_store::<Inline>();
        $worst = $worst.max(check(&format!("{what}, inline"), &inline, &x, &mut $rng));
    }};
}

#[test]
fn depthwise_gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(2);
    let mut worst = 0.0_f64;
    gradient_case!(rng, worst; Identity, 1, 1, 3, 1, 1, 5, 5);
    gradient_case!(rng, worst; Tanh, 2, 4, 3, 1, 1, 5, 6);
    gradient_case!(rng, worst; Tanh, 3, 3, 3, 2, 1, 8, 8);
    gradient_case!(rng, worst; Identity, 2, 6, 2, 2, 0, 7, 6);
    gradient_case!(rng, worst; Tanh, 2, 2, 1, 2, 0, 6, 6);
    gradient_case!(rng, worst; Identity, 1, 2, 5, 3, 2, 7, 7);
    eprintln!("DepthwiseConv2d: worst relative error {worst:e}");
}

/// A MobileNet block, depthwise then pointwise, inside a net with a dense head: the gradients
/// through the chain.
#[test]
fn a_depthwise_separable_block_trains_inside_a_net() {
    type Block = constmat::net![
        Input<f64, 2, 6, 6>,
        DepthwiseConv2d<2, 4, 3, 2, 1, Tanh>, // 4 x 3 x 3
        Conv2d<4, 3, 1, Tanh>,                // 3 x 3 x 3
        Flatten,
        Dense<27, 2>,
    ];
    let mut rng = StdRng::seed_from_u64(3);
    let net: Block = Chain::new(
        random_layer(&mut rng),
        Chain::new(
            random_layer(&mut rng),
            Chain::new(Flatten::new(), random_layer(&mut rng)),
        ),
    );
    let x = [random_sample(&mut rng), random_sample(&mut rng)];
    let worst = check("depthwise, pointwise, dense", &net, &x, &mut rng);
    eprintln!("block: worst relative error {worst:e}");
}

#[test]
fn net_writes_the_depthwise_layer_out() {
    type Written = constmat::net![
        Input<f32, 8, 16, 16>,
        DepthwiseConv2d<8, 8, 3, 1, 1, Relu6>,
        DepthwiseConv2d<8, 16, 3, 2, 1>,
        DepthwiseConv2d<16, 16, 3>,
        DepthwiseConv2d<16, 32, 1, Relu>,
    ];
    type Spelled = Chain<
        DepthwiseConv2d<f32, 8, 8, 3, 1, 1, 16, 16, 16, 16, Relu6>,
        Chain<
            DepthwiseConv2d<f32, 8, 16, 3, 2, 1, 16, 16, 8, 8, Identity>,
            Chain<
                DepthwiseConv2d<f32, 16, 16, 3, 1, 0, 8, 8, 6, 6, Identity>,
                DepthwiseConv2d<f32, 16, 32, 1, 1, 0, 6, 6, 6, 6, Relu>,
            >,
        >,
    >;
    let same: fn(Written) -> Spelled = |net| net;
    let _ = same;
    // PyTorch's numbering: each layer's module, then its activation's (none for Identity).
    assert_eq!(Written::SPEC.modules(), 6);
    let net = Written::random(&mut StdRng::seed_from_u64(4));
    let names: Vec<String> = (0..net.tensor_count())
        .map(|k| net.tensor_info(k).name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias", "4.weight", "4.bias"
        ]
    );
    assert_eq!(net.tensor_info(2).shape(), [16, 1, 3, 3]);
}

/// The fixture's net (see the script).
type MobileNetStyle = constmat::net![
    Input<f64, 2, 8, 8>,
    DepthwiseConv2d<2, 4, 3, 1, 1, Relu6>,
    DepthwiseConv2d<4, 4, 3, 2, 1, Relu>,
    Conv2d<4, 6, 1>,
    AvgPool2d<4>,
    Flatten,
    Dense<6, 3>,
];

/// The same net baked at compile time from PyTorch's `state_dict` file.
static BAKED: Baked<MobileNetStyle> = constmat::include_net!("fixtures/depthwise-f64.safetensors");

#[test]
fn a_mobilenet_style_net_computes_pytorchs_outputs_and_gradients() {
    let net: MobileNetStyle = st::load(fixture("depthwise-f64.safetensors")).unwrap();
    matches_pytorch::<_, 3>(&net, "depthwise-f64-io.safetensors");

    // Baked at compile time, the same net.
    assert_eq!(BAKED.to_store::<constmat::nn::Heap>(), net);

    // Saved by constmat, the file loads back to the same net.
    let dir = std::env::temp_dir().join(format!("constmat-depthwise-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("net.safetensors");
    st::save(&net, &path, &[]).unwrap();
    let again: MobileNetStyle = st::load(&path).unwrap();
    assert_eq!(again, net);
    std::fs::remove_dir_all(&dir).unwrap();
}
