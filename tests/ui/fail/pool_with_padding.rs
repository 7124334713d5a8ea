// PyTorch's `MaxPool2d(3, 2, padding=1)` has no counterpart: max pooling here takes no padding.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 8, 3, 1, 1, Relu>, // 8 x 32 x 32
    MaxPool2d<3, 2, 1>,
    Flatten,
    Dense<2048, 10>,
];

fn main() {
    let _net = Net::zeros();
}
