// An int8 convolution sums C x K x K products per output in an i32: 8,000 channels of 3x3
// (72,000 products) could overflow it, so the layer's code does not build.
use constmat::nn::{Identity, Inline, QConv2d};
use constmat::quant::{Multiplier, Quantization};

type Wide = QConv2d<8000, 1, 3, 1, 0, 3, 3, 1, 1, Identity, Inline>;

fn main() {
    let weight = vec![[[[0_i8; 3]; 3]; 8000]; 1].into_boxed_slice();
    let weight: Box<[[[[i8; 3]; 3]; 8000]; 1]> = weight.try_into().unwrap();
    let q = Quantization { scale: 1.0, zero_point: 0 };
    let _layer = Wide::new(*weight, [0], [Multiplier::from_real(1.0)], q, q);
}
