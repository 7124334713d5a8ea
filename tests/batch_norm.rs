//! `BatchNorm2d`: the training pass's gradients against central differences in f64 (alone,
//! with activations, after a convolution), the running statistics PyTorch keeps, predictions
//! with them, a net with batch normalization against PyTorch's outputs, gradients and running
//! statistics (`tests/fixtures/pytorch_mlperf_layers.py` wrote the fixtures once), `net!`,
//! weights files with `num_batches_tracked` (an `I64` scalar), baking, and training.
#![cfg(all(feature = "safetensors", feature = "rand"))]

use constmat::embed::Baked;
use constmat::io::safetensors as st;
use constmat::nn::{
    BatchNorm2d, Chain, Conv2d, Heap, Identity, Inline, Layer, Momentum, Parameters, RandomInit,
    Relu, SoftmaxCrossEntropy, Tanh, Train, Trainer,
};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/gradient.rs"]
#[allow(dead_code)] // each test file uses some of the helpers
mod gradient;
use gradient::*;
#[path = "common/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
use fixtures::{assert_close, fixture, tensor};

/// A layer with γ, β and running statistics drawn at random (γ away from 0).
fn random_norm<const C: usize, const H: usize, const W: usize, A: constmat::nn::Activation>(
    rng: &mut StdRng,
) -> BatchNorm2d<f64, C, H, W, A> {
    let mut norm = BatchNorm2d::<f64, C, H, W, A>::zeros();
    for k in 0..4 {
        for v in norm.tensor_mut(k) {
            let r: f64 = random_sample(rng);
            *v = if k == 3 || k == 0 { 1.0 + 0.5 * r } else { r };
        }
    }
    norm
}

#[test]
fn the_training_pass_has_the_gradients_of_its_definition() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut worst = 0.0_f64;
    let norm = random_norm::<3, 4, 5, Identity>(&mut rng);
    let x: [[[[f64; 5]; 4]; 3]; 2] = [random_sample(&mut rng), random_sample(&mut rng)];
    worst = worst.max(check_training("BatchNorm2d<3> on 4x5", &norm, &x, &mut rng));
    let inline = norm.to_store::<Inline>();
    worst = worst.max(check_training("inline", &inline, &x, &mut rng));
    let norm = random_norm::<2, 3, 3, Tanh>(&mut rng);
    let x: [[[[f64; 3]; 3]; 2]; 3] = std::array::from_fn(|_| random_sample(&mut rng));
    worst = worst.max(check_training("BatchNorm2d<2, Tanh>", &norm, &x, &mut rng));
    // After a convolution (its gradients through the normalization), batch of 4. (With a
    // tanh between: a bias right before a normalization has no gradient, the mean absorbs it.)
    let net = Chain::new(
        random_layer::<Conv2d<f64, 2, 3, 3, 1, 1, 4, 4, 4, 4, Tanh>>(&mut rng),
        random_norm::<3, 4, 4, Tanh>(&mut rng),
    );
    let x: [[[[f64; 4]; 4]; 2]; 4] = std::array::from_fn(|_| random_sample(&mut rng));
    worst = worst.max(check_training(
        "Conv2d, BatchNorm2d<3, Tanh>",
        &net,
        &x,
        &mut rng,
    ));
    eprintln!("BatchNorm2d: worst relative error {worst:e}");
}

#[test]
fn a_batch_is_normalized_and_its_statistics_are_kept() {
    let mut norm = BatchNorm2d::<f64, 2, 1, 2>::zeros();
    norm.tensor_mut(0).copy_from_slice(&[2.0, 1.0]); // γ
    norm.tensor_mut(1).copy_from_slice(&[0.5, 0.0]); // β
    // Channel 0: 1, 3, 5, 7 (mean 4, variance 5); channel 1: all 2 (variance 0).
    let x = [[[[1.0, 3.0]], [[2.0, 2.0]]], [[[5.0, 7.0]], [[2.0, 2.0]]]];
    let mut ws = Train::<f64, 2>::workspace(&norm);
    let y = *norm.forward_train(&x, &mut ws);
    let s = (5.0_f64 + 1e-5).sqrt();
    assert_close(
        "channel 0",
        &[y[0][0][0][0], y[0][0][0][1], y[1][0][0][0], y[1][0][0][1]],
        &[
            2.0 * -3.0 / s + 0.5,
            -2.0 / s + 0.5,
            2.0 / s + 0.5,
            2.0 * 3.0 / s + 0.5,
        ],
        1e-15,
    );
    assert_eq!(y[0][1], [[0.0, 0.0]], "a constant channel is β");
    Train::<f64, 2>::update_statistics(&mut norm, &ws);
    // PyTorch: 0.9 · old + 0.1 · batch, the variance unbiased (n = 4: x 4/3).
    assert_close("running mean", norm.tensor(2), &[0.4, 0.2], 1e-15);
    assert_close(
        "running var",
        norm.tensor(3),
        &[0.9 + 0.1 * 5.0 * 4.0 / 3.0, 0.9],
        1e-15,
    );
    assert_eq!(norm.num_batches_tracked, 1);
    // A prediction uses the running statistics.
    let mut p = [[[0.0; 2]; 1]; 2];
    norm.forward_one(&x[0], &mut p);
    let want = 2.0 * (1.0 - 0.4) / (norm.tensor(3)[0] + 1e-5).sqrt() + 0.5;
    assert!((p[0][0][0] - want).abs() < 1e-14);
}

/// The batch's statistics keep their precision when the values are far from 0 and their planes'
/// means differ (a sum of squares less the square of the sum would lose them all in f32):
/// against a two-pass computation in f64 of the same f32 values, images and vectors.
#[test]
fn statistics_far_from_zero_keep_their_precision() {
    use constmat::nn::BatchNorm1d;
    let mut rng = StdRng::seed_from_u64(7);
    let norm = BatchNorm2d::<f32, 3, 5, 7>::zeros();
    let x: Box<[[[[f32; 7]; 5]; 3]; 16]> = Box::new(std::array::from_fn(|b| {
        std::array::from_fn(|c| {
            let plane = 1e4 * (c + 1) as f32 + 0.25 * b as f32;
            std::array::from_fn(|_| {
                std::array::from_fn(|_| plane + 0.05 * random_sample::<f64>(&mut rng) as f32)
            })
        })
    }));
    let mut ws = Train::<f32, 16>::workspace(&norm);
    norm.forward_train(&x, &mut ws);
    for c in 0..3 {
        let values: Vec<f64> = x
            .iter()
            .flat_map(|s| s[c].as_flattened())
            .map(|&v| f64::from(v))
            .collect();
        let (mean, variance) = two_pass(&values);
        let got = (f64::from(ws.mean[c]), f64::from(ws.variance[c]));
        assert!(
            (got.0 - mean).abs() <= 1e-6 * mean,
            "channel {c}: mean {got:?}, want {mean}"
        );
        let error = (got.1 - variance).abs() / variance;
        assert!(
            error < 1e-4,
            "channel {c}: variance {} want {variance}",
            got.1
        );
    }
    // Vectors: each channel one value a sample.
    let norm = BatchNorm1d::<f32, 2>::zeros();
    let x: [[f32; 2]; 32] =
        std::array::from_fn(|b| [3e4 + 0.5 * b as f32, -2e4 + 0.01 * (b * b) as f32]);
    let mut ws = Train::<f32, 32>::workspace(&norm);
    norm.forward_train(&x, &mut ws);
    for c in 0..2 {
        let values: Vec<f64> = x.iter().map(|s| f64::from(s[c])).collect();
        let (mean, variance) = two_pass(&values);
        let error = (f64::from(ws.variance[c]) - variance).abs() / variance;
        assert!(
            (f64::from(ws.mean[c]) - mean).abs() <= 1e-6 * mean.abs(),
            "vector channel {c}"
        );
        assert!(
            error < 1e-4,
            "vector channel {c}: variance {}, want {variance}",
            ws.variance[c]
        );
    }
}

/// The mean and the biased variance, two passes in f64.
fn two_pass(values: &[f64]) -> (f64, f64) {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let squares = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>();
    (mean, squares / values.len() as f64)
}

/// The fixture's net (see the script).
type PyTorchNet = constmat::net![
    Input<f64, 2, 8, 8>,
    Conv2d<2, 4, 3, 1, 1>,
    BatchNorm2d<4, Relu>,
    Conv2d<4, 4, 3, 2, 1>,
    BatchNorm2d<4, Relu>,
    AvgPool2d<4>,
    Flatten,
    Dense<4, 3>,
];

static BAKED: Baked<PyTorchNet> = constmat::include_net!("fixtures/batchnorm-f64.safetensors");

#[test]
fn a_net_with_batch_norm_computes_pytorchs_values() {
    let mut net: PyTorchNet = st::load(fixture("batchnorm-f64.safetensors")).unwrap();
    assert_eq!(BAKED.to_store::<Heap>(), net, "baked as loaded");
    assert_eq!(net.rest.first.num_batches_tracked, 3);
    let io = std::fs::read(fixture("batchnorm-f64-io.safetensors")).unwrap();
    let (x_flat, _) = tensor(&io, "x");
    let mut x = [[[[0.0_f64; 8]; 8]; 2]; 3];
    x.as_flattened_mut()
        .as_flattened_mut()
        .as_flattened_mut()
        .copy_from_slice(&x_flat);

    // Training mode: the batch's statistics.
    let mut ws = Train::<f64, 3>::workspace(&net);
    let y = *net.forward_train(&x, &mut ws);
    assert_close("y (training)", y.as_flattened(), &tensor(&io, "y").0, 1e-12);
    let (dy_flat, _) = tensor(&io, "dy");
    let mut dy = [[0.0; 3]; 3];
    dy.as_flattened_mut().copy_from_slice(&dy_flat);
    let mut grads = net.zeros_like();
    let mut dx = [[[[0.0_f64; 8]; 8]; 2]; 3];
    net.backward(&x, &mut ws, &dy, Some(&mut dx), &mut grads);
    for k in 0..net.tensor_count() {
        let name = net.tensor_info(k).name().to_string();
        if name.contains("running") || name.contains("num_batches") {
            continue;
        }
        let (want, _) = tensor(&io, &format!("grad.{name}"));
        assert_close(&format!("d {name}"), grads.tensor(k), &want, 1e-12);
    }
    let flat_dx = dx.as_flattened().as_flattened().as_flattened();
    assert_close("dx", flat_dx, &tensor(&io, "dx").0, 1e-12);

    // The running statistics after that pass, and predictions with them.
    Train::<f64, 3>::update_statistics(&mut net, &ws);
    for k in 0..net.tensor_count() {
        let name = net.tensor_info(k).name().to_string();
        if name.contains("running") {
            let (want, _) = tensor(&io, &format!("after.{name}"));
            assert_close(&name, net.tensor(k), &want, 1e-12);
        }
    }
    let header = constmat::format::parse(&io).unwrap();
    let count = header.find(b"after.1.num_batches_tracked").unwrap();
    assert_eq!(count.data, 4_i64.to_le_bytes(), "as PyTorch counts");
    assert_eq!(net.rest.first.num_batches_tracked, 4);
    let mut y_eval = [[0.0; 3]; 3];
    net.forward(&x, &mut y_eval);
    assert_close(
        "y (evaluation)",
        y_eval.as_flattened(),
        &tensor(&io, "y_eval").0,
        1e-12,
    );

    // Saved with PyTorch's names and dtypes (I64 for the count), loaded back the same.
    let bytes = st::to_bytes(&net, &[]);
    let header = constmat::format::parse(&bytes).unwrap();
    let count = header.find(b"4.num_batches_tracked").unwrap();
    assert_eq!(
        (count.dtype, count.shape.dims()),
        (constmat::format::Dtype::I64, &[][..])
    );
    let again: PyTorchNet = st::from_bytes(&bytes).unwrap();
    assert_eq!(again, net);
}

#[test]
fn a_net_with_batch_norm_trains() {
    type Net = constmat::net![
        Input<f32, 1, 8, 8>,
        Conv2d<1, 4, 3, 1, 1>,
        BatchNorm2d<4, Relu>,
        MaxPool2d<2>,
        Flatten,
        Dense<64, 10>,
    ];
    let mut rng = StdRng::seed_from_u64(5);
    let mut net = Net::random(&mut rng);
    let x: Box<[[[[f32; 8]; 8]; 1]; 16]> = Box::new(std::array::from_fn(|i| {
        std::array::from_fn(|_| {
            std::array::from_fn(|r| {
                std::array::from_fn(|c| ((i * 7 + r * 3 + c) % 10) as f32 / 10.0)
            })
        })
    }));
    let y: [[f32; 10]; 16] =
        std::array::from_fn(|i| std::array::from_fn(|c| f32::from(c == i % 10)));
    let mut trainer = Trainer::<f32, Net, 16>::new(&net);
    let mut optimizer = Momentum::new(&net, 0.9);
    let mut losses = Vec::new();
    for _ in 0..30 {
        losses.push(
            trainer
                .step(&mut net, &mut optimizer, 0.05, &SoftmaxCrossEntropy, &x, &y)
                .unwrap(),
        );
    }
    assert!(losses[29] < 0.5 * losses[0], "{losses:?}");
    assert_eq!(
        net.rest.first.num_batches_tracked, 30,
        "one update per step"
    );
    assert!(
        net.rest
            .first
            .tensor(3)
            .iter()
            .all(|v| v.is_finite() && *v > 0.0)
    );
}

/// `BatchNorm1d` shares `BatchNorm2d`'s code with one value per channel: its training pass's
/// gradients, inside a dense net written with `net!` (its width checked against the `Dense`
/// before it), and PyTorch's names.
#[test]
fn batch_norm_of_vectors_trains_inside_a_dense_net() {
    type Net = constmat::net![
        Input<f64, 1, 3, 3>,
        Flatten,
        BatchNorm1d<9>,
        Dense<9, 4, Tanh>, // (without an activation, the normalization after it would absorb
        BatchNorm1d<4, Tanh>, // any shift: the biases before it would have no gradient)
        Dense<4, 2>,
    ];
    let mut rng = StdRng::seed_from_u64(7);
    let mut net: Net = Net::random(&mut rng);
    for k in 0..net.tensor_count() {
        let info = net.tensor_info(k);
        // The variances, and γ (a normalization's 1-D weight), kept away from 0.
        let positive =
            info.field() == "running_var" || (info.field() == "weight" && info.shape().len() == 1);
        for v in net.tensor_mut(k) {
            let r: f64 = random_sample(&mut rng);
            *v = if positive { 1.0 + 0.5 * r } else { r };
        }
    }
    let x: [[[[f64; 3]; 3]; 1]; 5] = std::array::from_fn(|_| random_sample(&mut rng));
    let worst = check_training(
        "Flatten, BatchNorm1d, Dense<Tanh>, BatchNorm1d<Tanh>",
        &net,
        &x,
        &mut rng,
    );
    eprintln!("BatchNorm1d: worst relative error {worst:e}");
    let names: Vec<String> = (0..net.tensor_count())
        .map(|k| net.tensor_info(k).name().to_string())
        .collect();
    assert_eq!(
        names[..5],
        [
            "1.weight",
            "1.bias",
            "1.running_mean",
            "1.running_var",
            "1.num_batches_tracked"
        ]
    );
    assert_eq!(names[7], "4.weight"); // the second normalization: the dense layer's tanh is 3
}

/// `BatchNorm2d<A>`'s backward pass takes `f'(Z)` from `Z` (`Activation::derivative`), computed
/// again from `X`: its gradients equal, bit for bit, those of the same layer without an
/// activation given `dA ⊙ f'(Z)`, with `f'` from the output as every other layer takes it.
#[test]
fn the_backward_pass_takes_the_activations_derivative_from_z() {
    use constmat::nn::{Activation, Relu6, Sigmoid};
    fn check<A: Activation>(name: &str) {
        const B: usize = 8;
        type Image = [[[f32; 6]; 5]; 4];
        let mut rng = StdRng::seed_from_u64(5);
        let mut with = BatchNorm2d::<f32, 4, 5, 6, A>::zeros();
        let mut without = BatchNorm2d::<f32, 4, 5, 6, Identity>::zeros();
        // γ near 2 and β from -1 to 5: Z crosses 0 and 6 (the kinks of Relu6).
        for k in 0..4 {
            let tensors = with.tensor_mut(k).iter_mut().zip(without.tensor_mut(k));
            for (c, (a, b)) in tensors.enumerate() {
                let r = random_sample::<f64>(&mut rng) as f32;
                *a = match k {
                    0 => 2.0 + 0.5 * r,
                    1 => 2.0 * c as f32 - 1.0,
                    2 => r,
                    _ => 1.0 + 0.25 * r,
                };
                *b = *a;
            }
        }
        let sample = |rng: &mut StdRng| -> Image {
            std::array::from_fn(|_| {
                std::array::from_fn(|_| {
                    std::array::from_fn(|_| 4.0 * random_sample::<f64>(rng) as f32 - 2.0)
                })
            })
        };
        let x: Box<[Image; B]> = Box::new(std::array::from_fn(|_| sample(&mut rng)));
        let da: Box<[Image; B]> = Box::new(std::array::from_fn(|_| sample(&mut rng)));
        let mut ws = Train::<f32, B>::workspace(&with);
        with.forward_train(&x, &mut ws);
        let mut dx = Box::new([[[[f32::NAN; 6]; 5]; 4]; B]);
        let mut grads = BatchNorm2d::<f32, 4, 5, 6, A>::zeros();
        with.backward(&x, &mut ws, &da, Some(&mut dx), &mut grads);
        // The same, through Z and f' from A = f(Z).
        let mut ws_z = Train::<f32, B>::workspace(&without);
        let z = *without.forward_train(&x, &mut ws_z);
        let mut dz = da.clone();
        for (dz, &z) in dz
            .iter_mut()
            .flat_map(|s| s.as_flattened_mut().as_flattened_mut())
            .zip(z.iter().flat_map(|s| s.as_flattened().as_flattened()))
        {
            *dz *= A::derivative_from_output(A::apply(z));
        }
        let mut dx_z = Box::new([[[[f32::NAN; 6]; 5]; 4]; B]);
        let mut grads_z = BatchNorm2d::<f32, 4, 5, 6, Identity>::zeros();
        without.backward(&x, &mut ws_z, &dz, Some(&mut dx_z), &mut grads_z);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for k in 0..2 {
            assert_eq!(
                bits(grads.tensor(k)),
                bits(grads_z.tensor(k)),
                "{name}: gradient of tensor {k}"
            );
        }
        let flat = |d: &[Image; B]| -> Vec<f32> {
            d.iter()
                .flat_map(|s| s.as_flattened().as_flattened())
                .copied()
                .collect()
        };
        assert_eq!(bits(&flat(&dx)), bits(&flat(&dx_z)), "{name}: dX");
        let mut z = z.iter().flat_map(|s| s.as_flattened().as_flattened());
        assert!(z.clone().any(|&z| z < 0.0) && z.any(|&z| z > 6.0));
    }
    check::<Identity>("Identity");
    check::<Relu>("Relu");
    check::<Relu6>("Relu6");
    check::<Sigmoid>("Sigmoid");
    check::<Tanh>("Tanh");
}
