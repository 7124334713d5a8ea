// Layers whose windows leave the last rows and columns of their input in no window compile, with
// PyTorch's sizes: ResNet's 1 x 1 stride-2 shortcut on an even size, pooling on an odd one.
use constmat::nn::{Conv2d, Layer, Parameters, Relu};

type Net = constmat::net![
    Input<f32, 8, 8, 8>,
    Conv2d<8, 16, 1, 2, 0, Relu>, // 16 x 4 x 4: the last row and column in no window
    Conv2d<16, 8, 2, Relu>,       // 8 x 3 x 3
    MaxPool2d<2>,                 // 8 x 1 x 1: the last row and column in no window
    Flatten,
    Dense<8, 10>,
];

fn main() {
    let net = Net::zeros();
    let mut out = [0.0_f32; 10];
    net.forward_one(&[[[1.0; 8]; 8]; 8], &mut out);
    assert_eq!(out, [0.0; 10]);
    let _shortcut: Conv2d<f32, 8, 16, 1, 2, 0, 8, 8, 4, 4> = Conv2d::zeros();
}
