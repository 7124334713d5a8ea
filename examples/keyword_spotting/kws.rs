//! `kws`: the TensorFlow Lite model `kws_ref_model.tflite` as a typed constmat net, written by
//! constmat-import 0.1.0. Its weights are `kws.safetensors`, beside this file.
//! Do not edit: import the model again.
//!
//! `invoke` runs it on one input laid out as TensorFlow Lite lays it out, and gives its
//! output likewise. No allocation, no `std`.

// A program need not use every constant.
#![allow(dead_code)]

use constmat::embed::Baked;
use constmat::nn::{Arena, Layer, Relu};

/// The net's type: its layers and every size between them.
pub type Net = constmat::net![
    Input<i8, 1, 49, 10>,
    ZeroPad2d<1, 1, 4, 5>,
    Conv2d<1, 64, (10, 4), 2, 0, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, 1, 0, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, 1, 0, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, 1, 0, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1, Relu>,
    Conv2d<64, 64, 1, 1, 0, Relu>,
    GlobalAvgPool2d,
    Flatten,
    Dense<64, 12>,
    Softmax,
];

/// The net, its weights baked in at compile time.
pub static NET: Baked<Net> = constmat::include_net!("kws.safetensors");

/// The input's length.
pub const INPUT_LEN: usize = 490;
/// The output's length.
pub const OUTPUT_LEN: usize = 12;
/// The bytes of read-only memory the parameters take.
pub const PARAMETER_BYTES: usize = <Baked<Net> as Layer>::PARAMETER_BYTES;
/// The bytes of working memory (stack) one `invoke` takes: the arena that holds the
/// samples between the layers (the input and output among them), and the kernels' buffers.
pub const WORKING_BYTES: usize =
    <Baked<Net> as Layer>::ARENA_BYTES + <Baked<Net> as Layer>::KERNEL_BYTES;

/// Runs the net on `input` (49 x 10 x 1 values, channels last, as TensorFlow Lite's input tensor) and writes
/// its 12 outputs.
pub fn invoke(input: &[i8; INPUT_LEN], output: &mut [i8; OUTPUT_LEN]) {
    let mut arena = Arena::<{ <Baked<Net> as Layer>::ARENA_BYTES }>::new();
    // TensorFlow Lite's order (height, width, channels) to constmat's (channels first).
    let image = arena.input(&NET);
    for (i, &value) in input.iter().enumerate() {
        image[0][i / 10][i % 10] = value;
    }
    *output = *arena.run(&NET);
}
