//! `Layer::forward_with_scratch`: a prediction with a caller-provided scratch of
//! `Layer::PREDICT_SCRATCH` values takes the kernels of a training pass, so its outputs are
//! `Train::forward_train`'s bit for bit, whatever the scratch held, and `Layer::forward`'s up to
//! rounding; the constant is a chain's largest layer's, and 0 where no kernel needs it.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::nn::{Conv2d, Dense, Layer, RandomInit, Relu, Train};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

/// 64 filters of 32 x 3 x 3 on 16 x 16 (the CIFAR-style CNN's second convolution): on x86-64,
/// Winograd's method down the columns needs more scratch than a prediction's stack buffers.
type Cifar = constmat::net![
    Input<f32, 32, 16, 16>,
    Conv2d<32, 64, 3, 1, 1, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<4096, 10>,
];

type Layer2 = Conv2d<f32, 32, 64, 3, 1, 1, 16, 16, 16, 16, Relu>;

fn images<const B: usize>(rng: &mut StdRng) -> Box<[[[[f32; 16]; 16]; 32]; B]> {
    let uniform = Uniform::new(-1.0_f32, 1.0).unwrap();
    let mut x: Box<[[[[f32; 16]; 16]; 32]; B]> = vec![[[[0.0; 16]; 16]; 32]; B]
        .into_boxed_slice()
        .try_into()
        .unwrap();
    for v in x.as_flattened_mut().as_flattened_mut().as_flattened_mut() {
        *v = uniform.sample(rng);
    }
    x
}

fn scratch<const LEN: usize>(fill: f32) -> Box<[f32; LEN]> {
    vec![fill; LEN].into_boxed_slice().try_into().unwrap()
}

#[test]
fn the_constant_is_the_largest_layers_and_0_where_no_kernel_needs_it() {
    assert_eq!(Cifar::PREDICT_SCRATCH, Layer2::PREDICT_SCRATCH);
    #[cfg(target_arch = "x86_64")]
    const {
        assert!(Layer2::PREDICT_SCRATCH > 0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    assert_eq!(Layer2::PREDICT_SCRATCH, 0);
    // Dense layers, f64 (no SIMD convolution kernels), other strides, small convolutions.
    assert_eq!(
        <constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>]>::PREDICT_SCRATCH,
        0
    );
    assert_eq!(
        Conv2d::<f64, 32, 64, 3, 1, 1, 16, 16, 16, 16, Relu>::PREDICT_SCRATCH,
        0
    );
    assert_eq!(
        Conv2d::<f32, 32, 64, 3, 2, 1, 16, 16, 8, 8, Relu>::PREDICT_SCRATCH,
        0
    );
    assert_eq!(
        Conv2d::<f32, 1, 6, 5, 1, 2, 28, 28, 28, 28, Relu>::PREDICT_SCRATCH,
        0
    );
}

#[test]
fn a_prediction_with_the_scratch_is_the_training_pass_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(41);
    let layer = Layer2::random(&mut rng);
    let x = images::<3>(&mut rng);
    let mut ws = Train::<f32, 3>::workspace(&layer);
    let trained = Box::new(*layer.forward_train(&x, &mut ws));
    let mut plain = Box::new([[[[0.0_f32; 16]; 16]; 64]; 3]);
    layer.forward(&x, &mut plain);
    // The scratch's contents do not matter: NaN, then what the first call left.
    let mut scratch = scratch::<{ Layer2::PREDICT_SCRATCH }>(f32::NAN);
    for _ in 0..2 {
        let mut fast = Box::new([[[[f32::NAN; 16]; 16]; 64]; 3]);
        layer.forward_with_scratch(&x, &mut fast, &mut scratch);
        assert_eq!(fast, trained);
        let fast = fast.as_flattened().as_flattened().as_flattened();
        let plain = plain.as_flattened().as_flattened().as_flattened();
        for (a, b) in fast.iter().zip(plain) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} against {b}");
        }
    }
}

#[test]
fn a_whole_nets_prediction_with_the_scratch_is_its_training_pass() {
    let mut rng = StdRng::seed_from_u64(42);
    let net = Cifar::random(&mut rng);
    let x = images::<2>(&mut rng);
    let mut ws = Train::<f32, 2>::workspace(&net);
    let trained = *net.forward_train(&x, &mut ws);
    // A longer scratch than needed is as good.
    let mut scratch = scratch::<{ Cifar::PREDICT_SCRATCH + 5 }>(0.0);
    let mut fast = [[0.0_f32; 10]; 2];
    net.forward_with_scratch(&x, &mut fast, &mut scratch);
    assert_eq!(fast, trained);
    let mut one = [[0.0_f32; 10]; 1];
    net.forward_with_scratch(x[1..].try_into().unwrap(), &mut one, &mut scratch);
    assert_eq!(one[0], trained[1]);
}
