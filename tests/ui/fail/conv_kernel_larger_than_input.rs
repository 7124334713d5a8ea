// A convolution's kernel must fit in its padded input: 5x5 on a 3x3 image does not.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 1, 3, 3>,
    Conv2d<1, 4, 5, Relu>,
    Flatten,
    Dense<4, 10>,
];

fn main() {
    let _net = Net::zeros();
}
