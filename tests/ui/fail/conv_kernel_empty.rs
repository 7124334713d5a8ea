// A kernel of size 0 reads nothing: one error, for the height and width together.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 1, 8, 8>,
    Conv2d<1, 4, 0, Relu>,
    Flatten,
    Dense<324, 10>,
];

fn main() {
    let _net = Net::zeros();
}
