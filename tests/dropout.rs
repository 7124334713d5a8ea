//! `Dropout`: the identity at inference; in training, a mask of zeros (with the layer's
//! probability) and `1 / (1 - p)` elsewhere, drawn from a seeded generator, and the input
//! gradient through the same mask; in `net!`, on images and on vectors, a module of its own.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::nn::{
    Dropout, Layer, Momentum, Parameters, RandomInit, Relu, SoftmaxCrossEntropy, Train, Trainer,
    zeroed_batch,
};
use rand::{SeedableRng, rngs::StdRng};

type Vector = Dropout<[f64; 100], 20>;

#[test]
fn inference_is_the_identity() {
    let x = [[[1.5_f32, -2.0], [0.25, 3.0]], [[4.0, 5.0], [-6.0, 7.0]]];
    let mut y = [[[0.0; 2]; 2]; 2];
    Dropout::<[[f32; 2]; 2], 50>::new().forward(&x, &mut y);
    assert_eq!(y, x);
}

/// Each value is 0 or `x / (1 - p)`; about `p` of them are 0 (1,000 samples of 100 values, p =
/// 0.2: the fraction's standard deviation is 0.0013, and the seed is fixed); the gradient
/// passes where the value was kept, scaled the same way.
#[test]
fn training_drops_p_of_the_values_and_the_gradient_follows_the_mask() {
    let layer = Vector::new();
    let x: Box<[[f64; 100]; 1000]> = {
        let mut x = zeroed_batch::<[f64; 100], 1000>();
        for (i, v) in x.as_flattened_mut().iter_mut().enumerate() {
            *v = 1.0 + (i % 7) as f64;
        }
        x
    };
    let mut ws = Train::<f64, 1000>::workspace(&layer);
    let y = *layer.forward_train(&x, &mut ws);
    let mut dropped = 0;
    for (&x, &y) in x.as_flattened().iter().zip(y.as_flattened()) {
        if y == 0.0 {
            dropped += 1;
        } else {
            assert_eq!(y, x * 1.25, "kept values are scaled by 1 / (1 - 0.2)");
        }
    }
    let fraction = dropped as f64 / 100_000.0;
    assert!((fraction - 0.2).abs() < 0.006, "{fraction} dropped");

    let d_output: Box<[[f64; 100]; 1000]> = {
        let mut d = zeroed_batch::<[f64; 100], 1000>();
        for (i, v) in d.as_flattened_mut().iter_mut().enumerate() {
            *v = (i % 5) as f64 - 2.0;
        }
        d
    };
    let mut dx = zeroed_batch::<[f64; 100], 1000>();
    dx.as_flattened_mut().fill(f64::NAN);
    layer.backward(&x, &mut ws, &d_output, Some(&mut dx), &mut layer.clone());
    for ((&dx, &dy), &y) in dx
        .as_flattened()
        .iter()
        .zip(d_output.as_flattened())
        .zip(y.as_flattened())
    {
        let want = if y == 0.0 { 0.0 } else { dy * 1.25 };
        assert_eq!(dx, want);
    }
}

/// The same seed gives the same masks; each forward pass draws a new one.
#[test]
fn the_masks_are_seeded() {
    let layer = Vector::new();
    let x = [[1.0_f64; 100]; 4];
    let mut a = Train::<f64, 4>::workspace(&layer);
    let mut b = Train::<f64, 4>::workspace(&layer);
    let first = *layer.forward_train(&x, &mut a);
    assert_eq!(first, *layer.forward_train(&x, &mut b));
    let second = *layer.forward_train(&x, &mut a);
    assert_ne!(first, second);
    b.seed(7);
    let other = *layer.forward_train(&x, &mut b);
    a.seed(7);
    assert_eq!(other, *layer.forward_train(&x, &mut a));
}

/// In `net!` on images and vectors; a net with dropout trains, and its predictions do not drop.
#[test]
fn a_net_with_dropout_trains_and_predicts_without_it() {
    type Net = constmat::net![
        Input<f32, 1, 6, 6>,
        Conv2d<1, 4, 3, 1, 1, Relu>,
        Dropout<10>, // on 4 x 6 x 6 images
        Flatten,
        Dropout<10>, // on 144 values
        Dense<144, 16, Relu>,
        Dropout<25>, // on 16 values
        Dense<16, 3>,
    ];
    // nn.Sequential(Conv2d, ReLU, Dropout, Flatten, Dropout, Linear, ReLU, Dropout, Linear).
    let mut net = Net::random(&mut StdRng::seed_from_u64(3));
    let names: Vec<String> = (0..net.tensor_count())
        .map(|k| net.tensor_info(k).name().as_str().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "0.weight", "0.bias", "5.weight", "5.bias", "8.weight", "8.bias"
        ]
    );
    let mut x = zeroed_batch::<[[[f32; 6]; 6]; 1], 8>();
    for (i, v) in x
        .as_flattened_mut()
        .as_flattened_mut()
        .as_flattened_mut()
        .iter_mut()
        .enumerate()
    {
        *v = ((i * 37) % 11) as f32 / 11.0;
    }
    let y: [[f32; 3]; 8] = std::array::from_fn(|r| std::array::from_fn(|c| f32::from(r % 3 == c)));
    let mut trainer = Trainer::<f32, Net, 8>::new(&net);
    let mut optimizer = Momentum::new(&net, 0.9);
    let mut losses = Vec::new();
    for _ in 0..60 {
        losses.push(
            trainer
                .step(&mut net, &mut optimizer, 0.05, &SoftmaxCrossEntropy, &x, &y)
                .unwrap(),
        );
    }
    assert!(losses[59] < 0.5 * losses[0], "{losses:?}");
    // Inference: the same logits every time.
    let (mut a, mut b) = ([0.0; 3], [0.0; 3]);
    net.forward_one(&x[0], &mut a);
    net.forward_one(&x[0], &mut b);
    assert_eq!(a, b);
}
