// An int8 layer sums its products in an i32: 70,000 inputs could overflow it, so the layer's
// code does not build.
use constmat::nn::{Identity, Inline, QDense};
use constmat::quant::{Multiplier, Quantization};

fn main() {
    let weight = vec![[0_i8; 70_000]; 1].into_boxed_slice();
    let weight: Box<[[i8; 70_000]; 1]> = weight.try_into().unwrap();
    let _layer = QDense::<70_000, 1, Identity, Inline>::new(
        *weight,
        [0],
        [Multiplier::from_real(1.0)],
        Quantization { scale: 1.0, zero_point: 0 },
        Quantization { scale: 1.0, zero_point: 0 },
    );
}
