//! Residual blocks (`Residual`, `ProjectedResidual`): finite-difference gradient checks in f64
//! (`common/gradient.rs`), `net!`'s spelling and PyTorch's nested names
//! (`{module}.branch.{m}.{field}`), save/load and `include_net!` round trips, and a small ResNet
//! against PyTorch's outputs and autograd gradients (`tests/fixtures/pytorch_mlperf_layers.py`
//! wrote the fixtures once; no Python here).
#![cfg(all(feature = "safetensors", feature = "rand"))]

use constmat::embed::Baked;
use constmat::io::safetensors as st;
use constmat::nn::{
    Chain, Conv2d, Flatten, Heap, Identity, Inline, Layer, Parameters, ProjectedResidual,
    RandomInit, Relu, Residual, Tanh,
};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/gradient.rs"]
#[allow(dead_code)] // each test file uses some of the helpers
mod gradient;
use gradient::*;
#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::{fixture, matches_pytorch};

/// A block with the identity shortcut, then one with a strided projection, then a dense head.
type Small = constmat::net![
    Input<f64, 2, 6, 6>,
    Residual<[Conv2d<2, 2, 3, 1, 1, Tanh>, Conv2d<2, 2, 3, 1, 1>], Tanh>,
    Residual<[Conv2d<2, 3, 3, 2, 1, Tanh>, Conv2d<3, 3, 3, 1, 1>], [Conv2d<2, 3, 1, 2, 0>], Tanh>,
    Flatten,
    Dense<27, 2>,
];

fn random_net<N: RandomInit + Parameters<f64>>(seed: u64) -> N {
    random_layer(&mut StdRng::seed_from_u64(seed))
}

#[test]
fn residual_gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(1);
    let net: Small = random_net(2);
    let x = [random_sample(&mut rng), random_sample(&mut rng)];
    let worst = check("two residual blocks", &net, &x, &mut rng);
    let inline = net.to_store::<Inline>();
    let worst = worst.max(check("inline", &inline, &x, &mut rng));
    eprintln!("residual: worst relative error {worst:e}");

    // Alone, and the block first in a net (no dX asked of it): its own gradients.
    type Block = Residual<
        Chain<
            Conv2d<f64, 2, 2, 3, 1, 1, 4, 4, 4, 4, Tanh>,
            Conv2d<f64, 2, 2, 1, 1, 0, 4, 4, 4, 4, Identity>,
        >,
        Identity,
    >;
    let block: Block = random_net(3);
    let x = [random_sample(&mut rng), random_sample(&mut rng)];
    check("identity block, no activation", &block, &x, &mut rng);
}

#[test]
fn net_writes_residual_blocks_with_pytorchs_nested_names() {
    type Written = constmat::net![
        Input<f32, 4, 8, 8>,
        Conv2d<4, 8, 3, 1, 1, Relu>,
        Residual<[Conv2d<8, 8, 3, 1, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], Relu>,
        Residual<[Conv2d<8, 16, 3, 2, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], [Conv2d<8, 16, 1, 2, 0>]>,
        Conv2d<16, 4, 1>, // 4 x 4 x 4: the size the projected block gives
        Flatten,
        Dense<64, 10>,
    ];
    type Branch<const C: usize, const O: usize, const S: usize, const H: usize, const OH: usize> =
        Chain<
            Conv2d<f32, C, O, 3, S, 1, H, H, OH, OH, Relu>,
            Conv2d<f32, O, O, 3, 1, 1, OH, OH, OH, OH, Identity>,
        >;
    type Spelled = Chain<
        Conv2d<f32, 4, 8, 3, 1, 1, 8, 8, 8, 8, Relu>,
        Chain<
            Residual<Branch<8, 8, 1, 8, 8>, Relu>,
            Chain<
                ProjectedResidual<
                    Branch<8, 16, 2, 8, 4>,
                    Conv2d<f32, 8, 16, 1, 2, 0, 8, 8, 4, 4, Identity>,
                    Identity,
                >,
                Chain<
                    Conv2d<f32, 16, 4, 1, 1, 0, 4, 4, 4, 4, Identity>,
                    Chain<Flatten<f32, 4, 4, 4, 64>, constmat::nn::Dense<f32, 64, 10>>,
                >,
            >,
        >,
    >;
    let same: fn(Written) -> Spelled = |net| net;
    let _ = same;
    let net = Written::zeros();
    let names: Vec<String> = (0..net.tensor_count())
        .map(|k| net.tensor_info(k).name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "0.weight",
            "0.bias",
            "2.branch.0.weight",
            "2.branch.0.bias",
            "2.branch.2.weight",
            "2.branch.2.bias",
            "4.branch.0.weight",
            "4.branch.0.bias",
            "4.branch.2.weight",
            "4.branch.2.bias",
            "4.shortcut.0.weight",
            "4.shortcut.0.bias",
            "5.weight",
            "5.bias",
            "7.weight",
            "7.bias",
        ]
    );
    assert_eq!(net.tensor_info(10).field(), "shortcut.0.weight");
    assert_eq!(Written::SPEC.modules(), 8);
}

/// `net!` computes the size a block gives from the numbers its layers are written with: every
/// kind of layer that changes a size, in branches and shortcuts and in a block within a block.
/// A size computed wrongly would give the next layer an input its type refuses (`Chain`), or a
/// `Flatten` width that `Dense<4, 2>` refuses.
#[test]
fn net_computes_the_sizes_after_blocks_of_every_layer_kind() {
    type Written = constmat::net![
        Input<f32, 3, 12, 10>,
        // Padded to 15 x 11, then a 4 x 2 kernel: 6 x 12 x 10.
        Residual<[ZeroPad2d<1, 0, 2, 1>, Conv2d<3, 6, (4, 2), 1, 0, Relu>, BatchNorm2d<6>], [Conv2d<3, 6, 1>]>,
        // Stride 2 (6 x 5), then a window of 2 with stride 1: 12 x 5 x 4.
        Residual<
            [DepthwiseConv2d<6, 12, 3, 2, 1>, MaxPool2d<2, 1>, Dropout<10>],
            [Conv2d<6, 12, 3, 2, 1>, AvgPool2d<2, 1>]
        >,
        // A block within a block, then a 2 x 2 kernel: 8 x 4 x 3.
        Residual<[Residual<[Conv2d<12, 12, 3, 1, 1>], Relu>, Conv2d<12, 8, 2>], [Conv2d<12, 8, 2>]>,
        // 8 x 1 x 1.
        Residual<[Conv2d<8, 8, 1>, GlobalAvgPool2d], [GlobalAvgPool2d]>,
        Conv2d<8, 4, 1>,
        Flatten,
        Dense<4, 2>,
    ];
    let net = Written::zeros();
    let mut y = [1.0; 2];
    net.forward_one(&[[[0.5; 10]; 12]; 3], &mut y);
    assert_eq!(y, [0.0; 2]);
}

/// Twelve blocks in a row compile in a moment: the sizes after a block hold the sizes before it
/// once (read from the branch's type, as `net!` once did, they grew exponentially with the
/// blocks, and this net would not have compiled).
#[test]
fn a_net_of_many_blocks_compiles() {
    type Deep = constmat::net![
        Input<f32, 2, 6, 6>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], Relu>,
        Residual<[Conv2d<2, 2, 3, 2, 1, Relu>, Conv2d<2, 2, 3, 1, 1>], [Conv2d<2, 2, 1, 2, 0>], Relu>,
        Flatten,
        Dense<18, 2>,
    ];
    // A block and its activation are two modules, as in PyTorch's numbering.
    assert_eq!(Deep::SPEC.modules(), 2 * 12 + 2);
    assert_eq!(Deep::zeros().tensor_count(), 2 * 2 * 12 + 2 + 2);
}

/// The fixture's net (see the script).
type PyTorchNet = constmat::net![
    Input<f64, 2, 8, 8>,
    Conv2d<2, 4, 3, 1, 1, Relu>,
    Residual<[Conv2d<4, 4, 3, 1, 1, Tanh>, Conv2d<4, 4, 3, 1, 1>], Relu>,
    Residual<[Conv2d<4, 6, 3, 2, 1, Relu>, Conv2d<6, 6, 3, 1, 1>], [Conv2d<4, 6, 1, 2, 0>], Relu>,
    AvgPool2d<4>,
    Flatten,
    Dense<6, 3>,
];

/// The same net baked at compile time from PyTorch's `state_dict` file: the branches' and the
/// shortcut's tensors found under their nested names.
static BAKED: Baked<PyTorchNet> = constmat::include_net!("fixtures/residual-f64.safetensors");

#[test]
fn a_small_resnet_computes_pytorchs_outputs_and_gradients() {
    let net: PyTorchNet = st::load(fixture("residual-f64.safetensors")).unwrap();
    matches_pytorch::<_, 3>(&net, "residual-f64-io.safetensors");
    assert_eq!(BAKED.to_store::<Heap>(), net);
    let x = [[[0.25; 8]; 8]; 2];
    let (mut a, mut b) = ([0.0; 3], [0.0; 3]);
    BAKED.forward_one(&x, &mut a);
    net.forward_one(&x, &mut b);
    assert_eq!(a, b);

    // Saved by constmat, the file loads back to the same net; the names are PyTorch's.
    let bytes = st::to_bytes(&net, &[]);
    let again: PyTorchNet = st::from_bytes(&bytes).unwrap();
    assert_eq!(again, net);
    let original = std::fs::read(fixture("residual-f64.safetensors")).unwrap();
    let names = |bytes: &[u8]| {
        let header = constmat::format::parse(bytes).unwrap();
        let mut names: Vec<String> = (0..net.tensor_count())
            .map(|k| net.tensor_info(k).name().to_string())
            .filter(|name| header.find(name.as_bytes()).is_some())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&bytes).len(), 14);
    assert_eq!(names(&bytes), names(&original));
}

#[test]
fn a_file_without_a_shortcut_tensor_is_refused_naming_it() {
    let original = std::fs::read(fixture("residual-f64.safetensors")).unwrap();
    let net: PyTorchNet = st::from_bytes(&original).unwrap();
    // The same tensors, the shortcut's weight misspelt (`4.shortcut.0.Weight`).
    let bytes = st::to_bytes(&net, &[]);
    let mut renamed = bytes.clone();
    let name = b"4.shortcut.0.weight";
    let at = renamed
        .windows(name.len())
        .position(|w| w == name)
        .expect("the header names the shortcut's weight");
    renamed[at + 13] = b'W';
    let err = st::from_bytes::<PyTorchNet>(&renamed).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 4.shortcut.0.weight is missing: expected f64 [6, 4, 1, 1]"
    );
}

/// The ResNet-8 of `examples/fashion_resnet` (MLPerf Tiny's, one input channel).
type ResNet8 = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 16, 3, 1, 1>,
    BatchNorm2d<16, Relu>,
    Residual<[
        Conv2d<16, 16, 3, 1, 1>, BatchNorm2d<16, Relu>,
        Conv2d<16, 16, 3, 1, 1>, BatchNorm2d<16>,
    ], Relu>,
    Residual<[
        Conv2d<16, 32, 3, 2, 1>, BatchNorm2d<32, Relu>,
        Conv2d<32, 32, 3, 1, 1>, BatchNorm2d<32>,
    ], [Conv2d<16, 32, 1, 2, 0>], Relu>,
    Residual<[
        Conv2d<32, 64, 3, 2, 1>, BatchNorm2d<64, Relu>,
        Conv2d<64, 64, 3, 1, 1>, BatchNorm2d<64>,
    ], [Conv2d<32, 64, 1, 2, 0>], Relu>,
    AvgPool2d<7>,
    Flatten,
    Dense<64, 10>,
];

/// PyTorch's ResNet-8 state_dict (the script's `resnet8()`) loads into constmat's type, which
/// refuses a file with a tensor missing, of another dtype or shape, or one too many; and what
/// constmat saves has exactly PyTorch's names (so `load_state_dict(strict=True)` takes it).
#[test]
fn pytorchs_resnet8_state_dict_is_constmats_resnet8() {
    let original = std::fs::read(fixture("resnet8-f32.safetensors")).unwrap();
    let net: ResNet8 = st::from_bytes(&original).unwrap();
    let saved = st::to_bytes(&net, &[]);
    let names = |bytes: &[u8]| {
        let header = constmat::format::parse(bytes).unwrap();
        let mut names: Vec<String> = (0..header.tensor_count())
            .map(|k| header.tensor(k).unwrap())
            .map(|t| {
                let name = String::from_utf8_lossy(t.name);
                format!("{name} {:?} {:?}", t.dtype, t.shape.dims())
            })
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&saved), names(&original));
    assert_eq!(names(&saved).len(), net.tensor_count());
    assert_eq!(
        net.tensor_info(11).name().to_string(),
        "3.branch.1.running_mean"
    );
}
