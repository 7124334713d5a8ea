// Batch normalization of a dense layer's outputs trained one sample at a time: each channel
// has one value per batch, whose variance is 0.
use constmat::nn::{Parameters, Relu, Train};

type Net = constmat::net![
    Input<f32, 1, 4, 4>,
    Flatten,
    Dense<16, 8>,
    BatchNorm1d<8, Relu>,
    Dense<8, 2>,
];

fn main() {
    let net = Net::zeros();
    let _workspace = Train::<f32, 1>::workspace(&net);
}
