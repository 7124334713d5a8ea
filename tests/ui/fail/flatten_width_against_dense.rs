// The width after Flatten is channels x height x width: 16 x 4 x 4 = 256, and the next Dense
// says 784. PyTorch finds this at run time: "mat1 and mat2 shapes cannot be multiplied
// (64x256 and 784x120)".
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 6, 5, Relu>,   // 6 x 24 x 24
    MaxPool2d<2>,            // 6 x 12 x 12
    Conv2d<6, 16, 5, Relu>,  // 16 x 8 x 8
    MaxPool2d<2>,            // 16 x 4 x 4
    Flatten,                 // 256
    Dense<784, 120, Relu>,
    Dense<120, 10>,
];

fn main() {
    let _net = Net::zeros();
}
