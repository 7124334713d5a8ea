// Pooling windows of 2 with stride 2 on a 13x13 image would never read its last row and column
// (PyTorch drops them silently); the sizes must fit.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 4, 3, 2, 1, Relu>, // 4 x 14 x 14
    Conv2d<4, 8, 2, Relu>,       // 8 x 13 x 13
    MaxPool2d<2>,
    Flatten,
    Dense<392, 10>,              // 8 x 7 x 7, as with PyTorch's `ceil_mode`: not a second error
];

fn main() {
    let _net = Net::zeros();
}
