// A convolution's input channels are the previous layer's output channels: 6, not 8.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 6, 5, Relu>,   // 6 x 24 x 24
    MaxPool2d<2>,            // 6 x 12 x 12
    Conv2d<8, 16, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<256, 10>,
];

fn main() {
    let _net = Net::zeros();
}
