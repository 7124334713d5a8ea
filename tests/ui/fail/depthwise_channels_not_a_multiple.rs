// A depthwise convolution whose filters cannot be shared out evenly: 12 output channels on 8
// input channels (PyTorch: "out_channels must be divisible by groups").
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 8, 16, 16>,
    DepthwiseConv2d<8, 12, 3, 1, 1, Relu>,
    Flatten,
    Dense<3072, 10>,
];

fn main() {
    let _net = Net::zeros();
}
