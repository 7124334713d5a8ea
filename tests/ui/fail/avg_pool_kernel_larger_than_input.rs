// A global average pool written for 8 x 8 after a layer that leaves 4 x 4: the window does not
// fit.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 3, 8, 8>,
    Conv2d<3, 8, 3, 2, 1, Relu>, // 8 x 4 x 4
    AvgPool2d<8>,
    Flatten,
    Dense<8, 10>,
];

fn main() {
    let _net = Net::zeros();
}
