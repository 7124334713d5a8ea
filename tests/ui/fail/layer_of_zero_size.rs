// A layer of 0 output channels (here a constant that integer division made 0) would give a
// constant: every size of a layer is at least 1, in either form of `net!`.
use constmat::nn::{Dense, Parameters, Relu};

const FILTERS: usize = 8 / 16;

type Net = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, FILTERS, 3, 1, 1, Relu>,
    Flatten,
    Dense<0, 10>,
];

type Mlp = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 0>];

fn main() {
    let _net = Net::zeros();
    let _mlp = Mlp::zeros();
}
