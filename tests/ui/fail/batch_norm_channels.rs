// A batch normalization written for the channels of the wrong layer: the convolution before it
// gives 16.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 16, 3, 1, 1>,
    BatchNorm2d<32, Relu>,
    Flatten,
    Dense<16384, 10>,
];

// The same mistake on vectors: a dense layer's 64 outputs normalized as 128.
type Head = constmat::net![
    Input<f32, 1, 8, 8>,
    Flatten,
    Dense<64, 64, Relu>,
    BatchNorm1d<128>,
    Dense<64, 10>,
];

fn main() {
    let _net = Net::zeros();
    let _head = Head::zeros();
}
