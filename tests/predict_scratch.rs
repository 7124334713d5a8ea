//! `Layer::forward_with_scratch`: a prediction with a caller-provided scratch of
//! `Layer::PREDICT_SCRATCH` values takes the kernel the plan gives a scratch (Winograd's
//! method, or a direct kernel on the padded image or the transposed weights) where
//! `Layer::forward`'s stack buffers are too small for it. On 5 x 5 layers, which take
//! Winograd's method down the columns for a prediction and for training alike, its outputs are
//! `Train::forward_train`'s bit for bit, whatever the scratch held, on every instruction set,
//! and `Layer::forward`'s up to rounding;
//! the constant is a chain's largest layer's, and 0 where no kernel needs it.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::kernels::{InstructionSet, with_instruction_set};
use constmat::nn::{Conv2d, Dense, Layer, RandomInit, Relu, Train};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/instruction_sets.rs"]
mod instruction_sets;
use instruction_sets::instruction_sets;

/// 64 filters of 3 x 5 x 5 on 32 x 32, padded: on x86-64, Winograd's method down the columns
/// needs more scratch than a prediction's stack buffers.
type First = Conv2d<f32, 3, 64, 5, 1, 2, 32, 32, 32, 32, Relu>;

/// 64 filters of 64 x 5 x 5 on 16 x 16 (the suite's 5 x 5 net's second convolution).
type Second = Conv2d<f32, 64, 64, 5, 1, 2, 16, 16, 16, 16, Relu>;

/// The two, pooled between: the second needs the most scratch.
type Net = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 64, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Conv2d<64, 64, 5, 1, 2, Relu>,
];

fn images<const C: usize, const H: usize, const W: usize, const B: usize>(
    rng: &mut StdRng,
) -> Box<[[[[f32; W]; H]; C]; B]> {
    let uniform = Uniform::new(-1.0_f32, 1.0).unwrap();
    let mut x: Box<[[[[f32; W]; H]; C]; B]> = vec![[[[0.0; W]; H]; C]; B]
        .into_boxed_slice()
        .try_into()
        .unwrap();
    for v in x.as_flattened_mut().as_flattened_mut().as_flattened_mut() {
        *v = uniform.sample(rng);
    }
    x
}

/// A batch filled with `fill`, made on the heap (the arrays are too large for a test thread's
/// stack in a debug build).
fn filled<const C: usize, const H: usize, const W: usize, const B: usize>(
    fill: f32,
) -> Box<[[[[f32; W]; H]; C]; B]> {
    vec![[[[fill; W]; H]; C]; B]
        .into_boxed_slice()
        .try_into()
        .unwrap()
}

/// The values of a batch, flat.
fn flat<const C: usize, const H: usize, const W: usize>(batch: &[[[[f32; W]; H]; C]]) -> Vec<f32> {
    batch.as_flattened().as_flattened().as_flattened().to_vec()
}

fn scratch<const LEN: usize>(fill: f32) -> Box<[f32; LEN]> {
    vec![fill; LEN].into_boxed_slice().try_into().unwrap()
}

#[test]
fn the_constant_is_the_largest_layers_and_0_where_no_kernel_needs_it() {
    assert_eq!(Net::PREDICT_SCRATCH, Second::PREDICT_SCRATCH);
    #[cfg(target_arch = "x86_64")]
    const {
        assert!(First::PREDICT_SCRATCH > 0);
        // The chain's constant comes from its last layer: a chain that read only its first
        // would be short.
        assert!(Second::PREDICT_SCRATCH > First::PREDICT_SCRATCH);
    };
    #[cfg(not(target_arch = "x86_64"))]
    assert_eq!(Net::PREDICT_SCRATCH, 0);
    // Dense layers; f64 (no SIMD convolution kernels); a strided convolution whose kernel's
    // scratch fits the stack buffer; convolutions whose kernels fit the stack (LeNet-5's).
    assert_eq!(
        <constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>]>::PREDICT_SCRATCH,
        0
    );
    assert_eq!(
        Conv2d::<f64, 64, 64, 5, 1, 2, 16, 16, 16, 16, Relu>::PREDICT_SCRATCH,
        0
    );
    assert_eq!(
        Conv2d::<f32, 16, 32, 3, 2, 1, 15, 15, 8, 8, Relu>::PREDICT_SCRATCH,
        0
    );
    // A strided convolution whose weights, transposed, and padded image exceed the stack
    // buffer of 16,384 values: its windows read in place need them in the scratch.
    #[cfg(target_arch = "x86_64")]
    const {
        assert!(
            Conv2d::<f32, 64, 64, 5, 2, 2, 16, 16, 8, 8, Relu>::PREDICT_SCRATCH
                == 64 * 64 * 25 + 64 * 20 * 20
        )
    };
    // 3 x 3 kernels too, where Winograd's method down the columns needs more than the stack
    // buffer (with either instruction set: 6 tiles a filter with AVX2, 3 with AVX-512).
    #[cfg(target_arch = "x86_64")]
    const {
        assert!(
            Conv2d::<f32, 32, 64, 3, 1, 1, 16, 16, 16, 16, Relu>::PREDICT_SCRATCH >= 32 * 18 * 18
        )
    };
    assert_eq!(
        Conv2d::<f32, 1, 6, 5, 1, 2, 28, 28, 28, 28, Relu>::PREDICT_SCRATCH,
        0
    );
}

#[test]
fn a_prediction_with_the_scratch_is_the_training_pass_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(41);
    let layer = First::random(&mut rng);
    let x = images::<3, 32, 32, 2>(&mut rng);
    for isa in instruction_sets() {
        with_instruction_set(isa, || {
            let mut ws = Train::<f32, 2>::workspace(&layer);
            let trained = flat(layer.forward_train(&x, &mut ws));
            let mut plain = filled::<64, 32, 32, 2>(0.0);
            layer.forward(&x, &mut plain);
            let plain = flat(&plain[..]);
            if isa != InstructionSet::Portable {
                // Another kernel than `forward`'s: the scratch is used, not ignored.
                assert!(trained != plain, "{isa:?}: the same kernel as `forward`");
            }
            // The scratch's contents do not matter: NaN, then what the first call left.
            let mut scratch = scratch::<{ First::PREDICT_SCRATCH }>(f32::NAN);
            for _ in 0..2 {
                let mut fast = filled::<64, 32, 32, 2>(f32::NAN);
                layer.forward_with_scratch(&x, &mut fast, &mut scratch);
                let fast = flat(&fast[..]);
                assert!(fast == trained, "{isa:?}: not the training pass's bits");
                for (a, b) in fast.iter().zip(&plain) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} against {b}");
                }
            }
        });
    }
}

#[test]
fn a_whole_nets_prediction_with_the_scratch_is_its_training_pass() {
    let mut rng = StdRng::seed_from_u64(42);
    let net = Net::random(&mut rng);
    let x = images::<3, 32, 32, 1>(&mut rng);
    for isa in instruction_sets() {
        with_instruction_set(isa, || {
            let mut ws = Train::<f32, 1>::workspace(&net);
            let trained = flat(net.forward_train(&x, &mut ws));
            // A longer scratch than needed is as good.
            let mut scratch = scratch::<{ Net::PREDICT_SCRATCH + 5 }>(0.0);
            let mut fast = filled::<64, 16, 16, 1>(0.0);
            net.forward_with_scratch(&x, &mut fast, &mut scratch);
            assert!(
                flat(&fast[..]) == trained,
                "{isa:?}: not the training pass's bits"
            );
        });
    }
}
