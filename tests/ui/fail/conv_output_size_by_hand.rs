// Written by hand (here in a function generic over the image size), a convolution's output size
// is checked against (H + 2P - K) / S + 1 when the code is generated: 28 + 2 - 3 + 1 = 28, not 26.
use constmat::nn::{Conv2d, Layer, Parameters, Relu};

fn block<const H: usize, const W: usize, const OH: usize, const OW: usize>()
-> Conv2d<f32, 1, 4, 3, 1, 1, H, W, OH, OW, Relu> {
    Conv2d::zeros()
}

fn main() {
    let conv = block::<28, 28, 26, 26>();
    let mut out = [[[0.0; 26]; 26]; 4];
    conv.forward_one(&[[[0.0; 28]; 28]; 1], &mut out);
}
