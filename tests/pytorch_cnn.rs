//! Convolutional nets against PyTorch: the fixtures in `tests/fixtures/` were written once by
//! `tests/fixtures/pytorch_cnn.py` (the script says how to run it again); these tests need no
//! Python.
//!
//! - A small float64 CNN with every kind of layer (stride 1 and 2, padding 0 and 1, several
//!   channels): its output, and the gradients of every parameter and of the input that PyTorch's
//!   autograd computes, against constmat's forward and hand-written backward passes.
//! - LeNet-5 in float32, trained by PyTorch: loaded at run time and baked at compile time from
//!   PyTorch's `state_dict` file, it reproduces PyTorch's logits within 1e-4.
#![cfg(feature = "safetensors")]

use std::path::{Path, PathBuf};

use constmat::embed::Baked;
use constmat::format;
use constmat::io::safetensors as st;
use constmat::nn::{Layer, Parameters, Relu, Tanh, Train};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Tensor `name` of the safetensors file `bytes`, as `f64`s (from `F64` or `F32`), with its
/// shape.
fn tensor(bytes: &[u8], name: &str) -> (Vec<f64>, Vec<usize>) {
    let header = format::parse(bytes).unwrap();
    let t = header
        .find(name.as_bytes())
        .unwrap_or_else(|| panic!("the fixture has no tensor {name}"));
    let values = match t.dtype {
        format::Dtype::F64 => t
            .data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        format::Dtype::F32 => t
            .data
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        other => panic!("{name}: unexpected dtype {other:?}"),
    };
    (values, t.shape.dims().to_vec())
}

/// Asserts `|a - b| <= tolerance · max(1, |b|)` element by element.
fn assert_close(what: &str, got: &[f64], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max);
    assert!(
        worst <= tolerance,
        "{what}: worst difference {worst:e} > {tolerance:e}\n got:  {got:?}\n want: {want:?}"
    );
}

/// The fixture's small CNN (see the script), through `net!`'s image form.
type Small = constmat::net![
    Input<f64, 2, 8, 8>,
    Conv2d<2, 3, 3, 1, 1, Tanh>,
    MaxPool2d<2>,
    Conv2d<3, 4, 3, 2, 1, Relu>,
    Conv2d<4, 2, 1>,
    Flatten,
    Dense<8, 5>,
];

#[test]
fn a_small_cnn_computes_pytorchs_outputs_and_gradients() {
    let net: Small = st::load(fixture("cnn-f64.safetensors")).unwrap();
    let io = std::fs::read(fixture("cnn-f64-io.safetensors")).unwrap();
    let (x_flat, x_shape) = tensor(&io, "x");
    assert_eq!(x_shape, [3, 2, 8, 8]);
    let mut x = [[[[0.0_f64; 8]; 8]; 2]; 3];
    for (dst, &v) in x
        .as_flattened_mut()
        .as_flattened_mut()
        .as_flattened_mut()
        .iter_mut()
        .zip(&x_flat)
    {
        *dst = v;
    }

    // Forward: the training path and the inference path.
    let mut ws = Train::<f64, 3>::workspace(&net);
    let y = *net.forward_train(&x, &mut ws);
    let (want_y, y_shape) = tensor(&io, "y");
    assert_eq!(y_shape, [3, 5]);
    assert_close("y", y.as_flattened(), &want_y, 1e-12);
    let mut y_inference = [[0.0; 5]; 3];
    net.forward(&x, &mut y_inference);
    assert_close(
        "y (Layer::forward)",
        y_inference.as_flattened(),
        &want_y,
        1e-12,
    );

    // Backward, with PyTorch's output gradient.
    let (dy_flat, _) = tensor(&io, "dy");
    let mut dy = [[0.0; 5]; 3];
    dy.as_flattened_mut().copy_from_slice(&dy_flat);
    let mut grads = net.zeros_like();
    let mut dx = [[[[0.0_f64; 8]; 8]; 2]; 3];
    net.backward(&x, &mut ws, &dy, Some(&mut dx), &mut grads);
    for k in 0..net.tensor_count() {
        let name = net.tensor_info(k).name().to_string();
        let (want, shape) = tensor(&io, &format!("grad.{name}"));
        assert_eq!(shape, net.tensor_info(k).shape(), "{name}");
        assert_close(&format!("d {name}"), grads.tensor(k), &want, 1e-12);
    }
    let (want_dx, _) = tensor(&io, "dx");
    assert_close(
        "dx",
        dx.as_flattened().as_flattened().as_flattened(),
        &want_dx,
        1e-12,
    );
}

/// LeNet-5, the net of `examples/mnist_cnn`.
type LeNet = constmat::net![
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

/// PyTorch's LeNet, baked at compile time from its `state_dict` file.
static BAKED: Baked<LeNet> = constmat::include_net!("fixtures/lenet-f32.safetensors");

#[test]
fn a_lenet_trained_by_pytorch_loads_bakes_and_gives_pytorchs_logits() {
    let io = std::fs::read(fixture("lenet-f32-io.safetensors")).unwrap();
    let (x_flat, x_shape) = tensor(&io, "x");
    assert_eq!(x_shape, [8, 1, 28, 28]);
    let (want, _) = tensor(&io, "logits");
    let mut x = Box::new([[[[0.0_f32; 28]; 28]; 1]; 8]);
    for (dst, &v) in x
        .as_flattened_mut()
        .as_flattened_mut()
        .as_flattened_mut()
        .iter_mut()
        .zip(&x_flat)
    {
        *dst = v as f32;
    }

    let loaded: LeNet = st::load(fixture("lenet-f32.safetensors")).unwrap();
    let mut logits = [[0.0_f32; 10]; 8];
    loaded.forward(&x, &mut logits);
    let got: Vec<f64> = logits
        .as_flattened()
        .iter()
        .map(|&v| f64::from(v))
        .collect();
    assert_close("logits, loaded at run time", &got, &want, 1e-4);

    let mut baked_logits = [[0.0_f32; 10]; 8];
    BAKED.forward(&x, &mut baked_logits);
    assert_eq!(
        baked_logits, logits,
        "the baked net computes what the loaded one does"
    );
    assert_eq!(BAKED.to_store::<constmat::nn::Heap>(), loaded);

    // The logits are a trained net's, not noise: they differ between the images.
    assert!(want.chunks(10).any(|row| row != &want[..10]));
}
