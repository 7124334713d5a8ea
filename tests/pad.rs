//! `ZeroPad2d`: its outputs against the definition, finite-difference gradient checks in f64
//! alone and before a convolution (TensorFlow's `SAME` padding with one more row and column
//! after), `net!`'s spelling, and its int8 form inside a quantized net. The int8 form against
//! TensorFlow Lite Micro's `PAD` is in `tests/tflm_int8.rs`.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::nn::{Conv2d, Layer, QZeroPad2d, RandomInit, Tanh, ZeroPad2d, quantize};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/gradient.rs"]
#[allow(dead_code)] // each test file uses some of the helpers
mod gradient;
use gradient::{check, random_sample};

#[test]
fn padding_surrounds_the_image_with_zeros() {
    let mut rng = StdRng::seed_from_u64(1);
    let x: [[[f64; 4]; 3]; 2] = random_sample(&mut rng);
    // 1 above, 2 on the left, 0 below, 3 on the right: 4 x 9.
    let pad = ZeroPad2d::<f64, 2, 1, 2, 0, 3, 3, 4, 4, 9>::new();
    let mut y = [[[f64::NAN; 9]; 4]; 2];
    pad.forward_one(&x, &mut y);
    for (c, (plane, image)) in y.iter().zip(&x).enumerate() {
        for (r, row) in plane.iter().enumerate() {
            for (k, &got) in row.iter().enumerate() {
                let want = match (r.checked_sub(1), k.checked_sub(2)) {
                    (Some(i), Some(j)) if j < 4 => image[i][j],
                    _ => 0.0,
                };
                assert_eq!(got, want, "channel {c}, row {r}, column {k}");
            }
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(2);
    let pad = ZeroPad2d::<f64, 2, 0, 1, 2, 1, 3, 4, 5, 6>::new();
    let x: [[[[f64; 4]; 3]; 2]; 3] = std::array::from_fn(|_| random_sample(&mut rng));
    let worst = check("zero padding", &pad, &x, &mut rng);
    assert!(worst < 1e-6, "{worst}");

    // TensorFlow's SAME for a 3 x 3 stride-2 convolution on 8 x 8: 0 before, 1 after.
    type Same = constmat::net![
        Input<f64, 2, 8, 8>,
        ZeroPad2d<0, 1, 0, 1>,
        Conv2d<2, 3, 3, 2, 0, Tanh>,
        ZeroPad2d<1>,
        Conv2d<3, 2, 3, 1, 0>,
    ];
    let net = Same::random(&mut rng);
    let x: [[[[f64; 8]; 8]; 2]; 2] = std::array::from_fn(|_| random_sample(&mut rng));
    let worst = check("zero padding before convolutions", &net, &x, &mut rng);
    assert!(worst < 1e-6, "{worst}");
    // ZeroPad2d<1> then a convolution of padding 0 is the convolution of padding 1.
    let padded = &net.rest.rest;
    let conv: Conv2d<f64, 3, 2, 3, 1, 1, 4, 4, 4, 4> =
        Conv2d::new(padded.rest.weight.clone(), padded.rest.bias.clone());
    let z: [[[f64; 4]; 4]; 3] = random_sample(&mut rng);
    let (mut a, mut b) = ([[[0.0; 4]; 4]; 2], [[[0.0; 4]; 4]; 2]);
    padded.forward_one(&z, &mut a);
    conv.forward_one(&z, &mut b);
    assert_eq!(a, b);
}

#[test]
fn the_int8_form_pads_with_the_zero_point() {
    type Float = constmat::net![Input<f32, 1, 4, 4>, ZeroPad2d<0, 1, 0, 1>, Conv2d<1, 2, 3, 2, 0>];
    type Int8 = constmat::net![Input<i8, 1, 4, 4>, ZeroPad2d<0, 1, 0, 1>, Conv2d<1, 2, 3, 2, 0>];
    let net = Float::random(&mut StdRng::seed_from_u64(3));
    let calibration: Vec<[[[f32; 4]; 4]; 1]> =
        (0..50).map(|i| [[[i as f32 / 50.0 - 0.3; 4]; 4]]).collect();
    let int8 = quantize(&net, &calibration).unwrap();
    let inline: Int8 = int8.net.to_store::<constmat::nn::Inline>();
    let pad: &QZeroPad2d<1, 0, 0, 1, 1, 4, 4, 5, 5> = &inline.first;
    assert_eq!(pad.input, int8.input);
    let mut y = [[[0_i8; 5]; 5]; 1];
    pad.forward_one(&[[[3; 4]; 4]], &mut y);
    assert_eq!(y[0][4], [int8.input.zero_point; 5]);
    assert_eq!(y[0][0], [3, 3, 3, 3, int8.input.zero_point]);
}

/// The int8 padding in a weights file: written, loaded and baked (`include_net!`) into the same
/// net. `tests/fixtures/int8-pad.safetensors` is what `quantize` writes for the seeded net below
/// (checked byte for byte; `CONSTMAT_BLESS_FIXTURES=1` writes it again after an intended
/// change).
#[cfg(feature = "safetensors")]
mod file {
    use constmat::embed::Baked;
    use constmat::io::safetensors as st;
    use constmat::nn::{Inline, Layer, RandomInit, quantize};
    use rand::{SeedableRng, rngs::StdRng};

    type Float = constmat::net![Input<f32, 2, 6, 6>, ZeroPad2d<1, 0, 2, 1>, Conv2d<2, 3, 3, 2, 0>];
    type Int8 = constmat::net![Input<i8, 2, 6, 6>, ZeroPad2d<1, 0, 2, 1>, Conv2d<2, 3, 3, 2, 0>];

    static BAKED: Baked<Int8> = constmat::include_net!("fixtures/int8-pad.safetensors");

    #[test]
    fn the_int8_padding_saves_loads_and_bakes() {
        let net = Float::random(&mut StdRng::seed_from_u64(4));
        let calibration: Vec<[[[f32; 6]; 6]; 2]> = (0..40)
            .map(|i| {
                [
                    [[(i % 7) as f32 / 3.0 - 1.0; 6]; 6],
                    [[0.5 - (i % 5) as f32 / 4.0; 6]; 6],
                ]
            })
            .collect();
        let int8 = quantize(&net, &calibration).unwrap();
        let inline: Int8 = int8.net.to_store::<Inline>();
        let bytes = st::to_bytes(&int8.net, &[]);
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/int8-pad.safetensors");
        if std::env::var_os("CONSTMAT_BLESS_FIXTURES").is_some() {
            std::fs::write(&path, &bytes).unwrap();
        }
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "int8-pad.safetensors is not what quantize writes"
        );
        let loaded: Int8 = st::from_bytes(&bytes).unwrap();
        assert_eq!(loaded, inline);
        let baked: &Int8 = &BAKED;
        assert_eq!(baked, &inline);
        assert_eq!(baked.first.input, int8.input);
    }
}
