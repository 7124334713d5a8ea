// A stride with an activation but no padding: the fifth size of `Conv2d` is its padding, so the
// activation is read there. `net!` says what it expected instead.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 8, 3, 2, Relu>,
    Flatten,
    Dense<1800, 10>,
];

fn main() {
    let _net = Net::zeros();
}
