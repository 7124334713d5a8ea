//! The shipped MNIST models, and MLPerf Tiny's keyword-spotting DS-CNN imported from TensorFlow
//! Lite, as a C library: `#![no_std]`, no allocator, no operating system.
//!
//! ```c
//! #include <stdint.h>
//! uint8_t constmat_classify_digit_cnn(const uint8_t pixels[static 784]);
//! void constmat_keyword_spotting(const int8_t features[static 490], int8_t probabilities[static 12]);
//! ```
//!
//! `pixels` is a 28x28 grayscale image, row-major, white digit on black as in MNIST. It must
//! point to 784 readable bytes, never NULL: the functions take `&[u8; 784]`, which C passes as
//! a pointer (likewise `features`, 490 bytes, and `probabilities`, 12 writable ones). Building this crate is the test: it fails if anything it links needs a heap (see
//! `Cargo.toml`).
#![no_std]

/// The digit in `pixels` by the LeNet-5 (`models/mnist-cnn-lenet5.safetensors`), in `f32`.
#[unsafe(no_mangle)]
pub extern "C" fn constmat_classify_digit_cnn(pixels: &[u8; 784]) -> u8 {
    no_std_embed::classify_cnn(pixels)
}

/// The digit in `pixels` by the MLP (`models/mnist-784-128-64-10.safetensors`), in `f32`.
#[unsafe(no_mangle)]
pub extern "C" fn constmat_classify_digit_mlp(pixels: &[u8; 784]) -> u8 {
    no_std_embed::classify(pixels)
}

/// The digit in `pixels` by the int8 LeNet-5 (`models/mnist-cnn-lenet5-int8.safetensors`).
#[unsafe(no_mangle)]
pub extern "C" fn constmat_classify_digit_cnn_int8(pixels: &[u8; 784]) -> u8 {
    no_std_embed::classify_int8_cnn(pixels)
}

/// The digit in `pixels` by the int8 MLP (`models/mnist-784-128-64-10-int8.safetensors`).
#[unsafe(no_mangle)]
pub extern "C" fn constmat_classify_digit_mlp_int8(pixels: &[u8; 784]) -> u8 {
    no_std_embed::classify_int8(pixels)
}

/// MLPerf Tiny's keyword-spotting DS-CNN, imported from its `.tflite` file: 490 int8 MFCC
/// features (49 x 10, TensorFlow Lite's order) in, the 12 classes' int8 probabilities out.
#[unsafe(no_mangle)]
pub extern "C" fn constmat_keyword_spotting(features: &[i8; 490], probabilities: &mut [i8; 12]) {
    no_std_embed::kws::invoke(features, probabilities);
}

// The C library's `abort`; firmware provides its own (a reset, say).
unsafe extern "C" {
    safe fn abort() -> !;
}

/// Without std there is no unwinding and nothing to print to: stop the program, so that a test
/// fails rather than hangs. (A prediction has no error to report; this is for a bug.)
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    abort()
}
