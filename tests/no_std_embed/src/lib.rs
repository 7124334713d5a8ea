//! A `#![no_std]` library without `alloc` that classifies handwritten digits with the MNIST
//! models shipped in `models/` (the MLP and the convolutional net, each in f32 and in int8),
//! baked into the library at compile time.
//!
//! Nothing here allocates, reads a file or needs an operating system: the weights are a
//! `static` in read-only memory, decoded by the compiler from the safetensors file, and a
//! prediction uses nothing but its stack. This crate exists to prove that
//! (`cargo build --manifest-path tests/no_std_embed/Cargo.toml`); its test, run on the host,
//! checks it against the heap net on the MNIST test set.
#![no_std]

use constmat::embed::Baked;
use constmat::nn::{Dense, Layer, Predict, QDense, Relu, Relu6, argmax};
use constmat::quant::Quantization;

/// The shipped model's type, as it was trained: 28x28 pixels in [0, 1] -> logits of the digits
/// 0-9. Its layers' default storage is the heap, which this crate does not have: the type can
/// be named all the same, and `Baked<Mnist>` is its form without a heap.
pub type Mnist = constmat::net![
    Dense<f32, 784, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, 10>,
];

/// The shipped model, decoded at compile time.
pub static NET: Baked<Mnist> =
    constmat::include_net!("../../../models/mnist-784-128-64-10.safetensors");

/// The shipped convolutional net (`examples/mnist_cnn`): LeNet-5, 1x28x28 pixels in [0, 1] ->
/// logits of the digits 0-9.
pub type Cnn = constmat::net![
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

/// The shipped convolutional net, decoded at compile time.
pub static CNN: Baked<Cnn> = constmat::include_net!("../../../models/mnist-cnn-lenet5.safetensors");

/// The digit shown in a 28x28 grayscale image, by the convolutional net.
#[must_use]
pub fn classify_cnn(pixels: &[u8; 784]) -> u8 {
    let image: [[[f32; 28]; 28]; 1] = [core::array::from_fn(|r| {
        core::array::from_fn(|c| f32::from(pixels[r * 28 + c]) / 255.0)
    })];
    CNN.predict(&image) as u8
}

/// The model's input for a 28x28 grayscale image, row-major: pixels scaled to [0, 1].
#[must_use]
pub fn input(pixels: &[u8; 784]) -> [f32; 784] {
    core::array::from_fn(|i| f32::from(pixels[i]) / 255.0)
}

/// The digit shown in a 28x28 grayscale image (row-major, white digit on black, as MNIST).
#[must_use]
pub fn classify(pixels: &[u8; 784]) -> u8 {
    // `predict` returns an index below 10.
    NET.predict(&input(pixels)) as u8
}

/// The probability of each digit 0-9 for a 28x28 grayscale image.
#[must_use]
pub fn probabilities(pixels: &[u8; 784]) -> [f32; 10] {
    NET.predict_proba(&input(pixels))
}

/// The shipped MLP in int8 (`cargo run --release --example quantize -- --out models` writes its
/// file):
/// `i8` pixels in, `i8` logits out, integers only in between.
pub type Int8Mnist = constmat::net![QDense<784, 128, Relu>, QDense<128, 64, Relu>, QDense<64, 10>];

/// The int8 MLP, decoded at compile time.
pub static INT8: Baked<Int8Mnist> =
    constmat::include_net!("../../../models/mnist-784-128-64-10-int8.safetensors");

/// LeNet-5 in int8: `net!` with an `i8` input gives each layer its int8 form (`QConv2d`,
/// `QDense`) and computes the image sizes, as for the float net.
pub type Int8Cnn = constmat::net![
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

/// The int8 LeNet-5, decoded at compile time.
pub static INT8_CNN: Baked<Int8Cnn> =
    constmat::include_net!("../../../models/mnist-cnn-lenet5-int8.safetensors");

/// The int8 forms of the MLPerf Tiny layers, baked without alloc: a depthwise convolution with
/// ReLU6, an identity and a projected residual block (their quantized additions), a global
/// average pool and the int8 softmax (`tests/fixtures/int8-blocks.safetensors`, which
/// `tests/quantize_blocks.rs` writes from a seeded random net).
pub type Int8Blocks = constmat::net![
    Input<i8, 2, 8, 8>,
    Conv2d<2, 4, 3, 1, 1, Relu>,
    DepthwiseConv2d<4, 8, 3, 1, 1, Relu6>,
    Residual<[Conv2d<8, 8, 3, 1, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], Relu>,
    Residual<[Conv2d<8, 16, 3, 2, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], [Conv2d<8, 16, 1, 2, 0>], Relu>,
    AvgPool2d<4>,
    Flatten,
    Dense<16, 5>,
    Softmax,
];

/// The int8 blocks net, decoded at compile time.
pub static INT8_BLOCKS: Baked<Int8Blocks> =
    constmat::include_net!("../../fixtures/int8-blocks.safetensors");

/// The int8 blocks net's probabilities (in 1/256 above -128) for an int8 image.
#[must_use]
pub fn int8_blocks_probabilities(image: &[[[i8; 8]; 8]; 2]) -> [i8; 5] {
    let mut p = [0; 5];
    INT8_BLOCKS.forward_one(image, &mut p);
    p
}

/// What each pixel value 0-255 (the real `p / 255`) quantizes to, with the input quantization
/// of a net's first layer: computed by the compiler, so that classifying needs no float.
#[must_use]
pub const fn pixel_table(input: Quantization) -> [i8; 256] {
    let mut table = [0; 256];
    let mut p = 0;
    while p < 256 {
        // As `Quantization::quantize`: the real value over the scale in f64, rounded half away
        // from zero (the value is not negative), plus the zero point, clamped.
        let steps = (p as f32 / 255.0) as f64 / input.scale as f64;
        let q = (steps + 0.5) as i64 + input.zero_point as i64;
        table[p] = if q > 127 { 127 } else { q as i8 };
        p += 1;
    }
    table
}

/// Pixels to the int8 MLP's input.
static PIXELS_INT8: [i8; 256] = pixel_table(INT8.first.input);

/// Pixels to the int8 CNN's input.
static PIXELS_INT8_CNN: [i8; 256] = pixel_table(INT8_CNN.first.input);

/// The digit shown in a 28x28 grayscale image, by the int8 MLP: no floating point at all.
#[must_use]
pub fn classify_int8(pixels: &[u8; 784]) -> u8 {
    let x: [i8; 784] = core::array::from_fn(|i| PIXELS_INT8[usize::from(pixels[i])]);
    let mut logits = [0; 10];
    INT8.forward_one(&x, &mut logits);
    argmax(&logits) as u8
}

/// The digit shown in a 28x28 grayscale image, by the int8 CNN: no floating point at all.
#[must_use]
pub fn classify_int8_cnn(pixels: &[u8; 784]) -> u8 {
    let image: [[[i8; 28]; 28]; 1] = [core::array::from_fn(|r| {
        core::array::from_fn(|c| PIXELS_INT8_CNN[usize::from(pixels[r * 28 + c])])
    })];
    let mut logits = [0; 10];
    INT8_CNN.forward_one(&image, &mut logits);
    argmax(&logits) as u8
}

/// MLPerf Tiny's int8 keyword-spotting DS-CNN (`kws_ref_model.tflite`) as `constmat-import`
/// wrote it (the module `examples/keyword_spotting` runs, unchanged): `kws::invoke` takes 49 x 10
/// int8 MFCC features in TensorFlow Lite's order and gives the 12 classes' int8 probabilities,
/// in an arena on the stack (`kws::WORKING_BYTES`).
#[path = "../../../examples/keyword_spotting/kws.rs"]
pub mod kws;

#[cfg(test)]
mod tests {
    // The tests run on the host, with std.
    extern crate std;

    use std::path::Path;
    use std::println;

    use constmat::Matrix;
    use constmat::data::{idx, mnist};
    use constmat::io::safetensors;
    use constmat::nn::{Layer, Train, argmax};

    use super::{Cnn, Mnist};

    fn heap_net() -> Mnist {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/mnist-784-128-64-10.safetensors");
        safetensors::load(&path).unwrap()
    }

    #[test]
    fn probabilities_are_a_distribution_whose_largest_is_the_class() {
        let pixels: [u8; 784] = core::array::from_fn(|i| ((i * 37) % 256) as u8);
        let p = super::probabilities(&pixels);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{p:?}");
        assert_eq!(usize::from(super::classify(&pixels)), argmax(&p));
    }

    /// Every MNIST test image: the baked net's class is the heap net's (`Train::forward_train`,
    /// batches of 500, loaded at run time from the same file), and 98.10% of them are right.
    #[test]
    fn classifies_the_mnist_test_set_as_the_heap_net_does() {
        const BATCH: usize = 500;
        let Some(dir) = std::env::var_os("MNIST_DIR").filter(|d| !d.is_empty()) else {
            println!("skipping: MNIST_DIR is not set");
            return;
        };
        let [_, _, images, labels] = mnist::Mnist::locate(&dir).unwrap();
        let test = mnist::Split::new(
            idx::read_images_from_path(images).unwrap(),
            idx::read_labels_from_path(labels).unwrap(),
        )
        .unwrap();
        assert_eq!(test.len() % BATCH, 0);

        let heap = heap_net();
        let mut workspace = Train::<f32, BATCH>::workspace(&heap);
        let mut x = Matrix::<f32, BATCH, 784>::zeros();
        let mut correct = 0;
        for start in (0..test.len()).step_by(BATCH) {
            for (row, image) in x.rows_mut().zip(&test.images()[start..start + BATCH]) {
                *row = super::input(image);
            }
            let logits = heap.forward_train(&x, &mut workspace);
            for (k, row) in logits.iter().enumerate() {
                let index = start + k;
                let class = super::classify(test.image(index));
                assert_eq!(usize::from(class), argmax(row), "test image {index}");
                correct += usize::from(class == test.label(index));
            }
        }
        // 9810 measured here; another CPU's rounding may flip a near-tie or two.
        assert_eq!(test.len(), 10_000);
        assert!(
            correct.abs_diff(9810) <= 3 && correct >= 9800,
            "{correct} correct"
        );
    }

    /// Every MNIST test image through the baked convolutional net: its class is the heap net's
    /// (loaded at run time from the same file, batches of 100), and 99.42% are right (what
    /// `mnist_cnn --save` reported).
    #[test]
    fn the_cnn_classifies_the_mnist_test_set_as_its_heap_net_does() {
        const BATCH: usize = 100;
        let Some(dir) = std::env::var_os("MNIST_DIR").filter(|d| !d.is_empty()) else {
            println!("skipping: MNIST_DIR is not set");
            return;
        };
        let [_, _, images, labels] = mnist::Mnist::locate(&dir).unwrap();
        let test = mnist::Split::new(
            idx::read_images_from_path(images).unwrap(),
            idx::read_labels_from_path(labels).unwrap(),
        )
        .unwrap();
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/mnist-cnn-lenet5.safetensors");
        let heap: Cnn = safetensors::load(&path).unwrap();
        let mut workspace = Train::<f32, BATCH>::workspace(&heap);
        let mut x = constmat::nn::zeroed_batch::<[[[f32; 28]; 28]; 1], BATCH>();
        let mut correct = 0;
        for start in (0..test.len()).step_by(BATCH) {
            for (image, pixels) in x.iter_mut().zip(&test.images()[start..start + BATCH]) {
                for (dst, &p) in image
                    .as_flattened_mut()
                    .as_flattened_mut()
                    .iter_mut()
                    .zip(pixels)
                {
                    *dst = f32::from(p) / 255.0;
                }
            }
            let logits = heap.forward_train(&x, &mut workspace);
            for (k, row) in logits.iter().enumerate() {
                let index = start + k;
                let class = super::classify_cnn(test.image(index));
                assert_eq!(usize::from(class), argmax(row), "test image {index}");
                correct += usize::from(class == test.label(index));
            }
        }
        assert_eq!(test.len(), 10_000);
        assert!(
            correct.abs_diff(9942) <= 3 && correct >= 9920,
            "{correct} correct"
        );
    }

    /// The compile-time pixel tables are `Quantization::quantize` of `p / 255`, exactly.
    #[test]
    fn the_pixel_tables_quantize_as_the_library_does() {
        for net_input in [super::INT8.first.input, super::INT8_CNN.first.input] {
            let table = super::pixel_table(net_input);
            for p in 0..=255_u8 {
                assert_eq!(
                    table[usize::from(p)],
                    net_input.quantize(f32::from(p) / 255.0),
                    "pixel {p}"
                );
            }
        }
    }

    /// Every MNIST test image through both int8 nets: the classes of the integer-only baked nets
    /// are those of the int8 nets loaded at run time from the same files, and as accurate as
    /// `cargo run --release --example quantize` reports (98.16% and 99.42%).
    #[test]
    fn the_int8_nets_classify_the_mnist_test_set_as_their_files_say() {
        type HeapInt8 = constmat::net![
            constmat::nn::QDense<784, 128, constmat::nn::Relu, constmat::nn::Heap>,
            constmat::nn::QDense<128, 64, constmat::nn::Relu, constmat::nn::Heap>,
            constmat::nn::QDense<64, 10, constmat::nn::Identity, constmat::nn::Heap>,
        ];
        let Some(dir) = std::env::var_os("MNIST_DIR").filter(|d| !d.is_empty()) else {
            println!("skipping: MNIST_DIR is not set");
            return;
        };
        let [_, _, images, labels] = mnist::Mnist::locate(&dir).unwrap();
        let test = mnist::Split::new(
            idx::read_images_from_path(images).unwrap(),
            idx::read_labels_from_path(labels).unwrap(),
        )
        .unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
        let heap: HeapInt8 =
            safetensors::load(root.join("mnist-784-128-64-10-int8.safetensors")).unwrap();
        let input = heap.first.input;
        let (mut mlp, mut cnn) = (0, 0);
        for (index, (pixels, &label)) in test.images().iter().zip(test.labels()).enumerate() {
            let x = pixels.map(|p| input.quantize(f32::from(p) / 255.0));
            let mut logits = [0; 10];
            heap.forward_one(&x, &mut logits);
            let class = super::classify_int8(pixels);
            assert_eq!(usize::from(class), argmax(&logits), "test image {index}");
            mlp += usize::from(class == label);
            cnn += usize::from(super::classify_int8_cnn(pixels) == label);
        }
        println!("int8 MLP {mlp} / 10000, int8 CNN {cnn} / 10000");
        assert_eq!((mlp, cnn), (9816, 9942));
    }

    /// The imported DS-CNN gives TensorFlow Lite Micro's outputs, bit for bit, on the 64 inputs
    /// of `tests/fixtures/mlperf-dscnn-int8-io.safetensors`, within TensorFlow Lite Micro's
    /// arena (24,272 bytes).
    #[test]
    fn the_imported_dscnn_gives_tflms_outputs() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/mlperf-dscnn-int8-io.safetensors");
        let bytes = std::fs::read(&path).unwrap();
        let header = constmat::format::parse(&bytes).unwrap();
        let tensor = |name: &str| -> std::vec::Vec<i8> {
            let t = header.find(name.as_bytes()).unwrap();
            t.data.iter().map(|&b| b as i8).collect()
        };
        let (inputs, outputs) = (tensor("input"), tensor("output"));
        assert_eq!(inputs.len(), 64 * super::kws::INPUT_LEN);
        for (input, want) in inputs
            .chunks_exact(super::kws::INPUT_LEN)
            .zip(outputs.chunks_exact(super::kws::OUTPUT_LEN))
        {
            let mut got = [0; super::kws::OUTPUT_LEN];
            super::kws::invoke(input.try_into().unwrap(), &mut got);
            assert_eq!(got, want);
        }
        const { assert!(super::kws::WORKING_BYTES <= 24_272) };
    }

    /// The baked int8 blocks net computes what the same file loaded at run time computes.
    #[test]
    fn the_baked_int8_blocks_net_is_the_loaded_one() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let loaded: super::Int8Blocks =
            safetensors::load(root.join("int8-blocks.safetensors")).unwrap();
        for seed in 0..8_i32 {
            let image = core::array::from_fn(|c| {
                core::array::from_fn(|r| {
                    core::array::from_fn(|k| {
                        ((seed * 37 + (c as i32) * 11 + (r as i32) * 5 + (k as i32) * 3) % 256
                            - 128) as i8
                    })
                })
            });
            let mut want = [0; 5];
            loaded.forward_one(&image, &mut want);
            assert_eq!(super::int8_blocks_probabilities(&image), want);
        }
    }
}
