//! The shipped MNIST models as a C library: `#![no_std]`, no allocator, no operating system.
//!
//! ```c
//! #include <stdint.h>
//! uint8_t constmat_classify_digit_cnn(const uint8_t pixels[784]);
//! ```
//!
//! `pixels` is a 28x28 grayscale image, row-major, white digit on black as in MNIST. Building
//! this crate is the test: it fails if anything it links needs a heap (see `Cargo.toml`).
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

/// Without std there is no unwinding and nothing to print to: a microcontroller's firmware
/// would reset here.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
