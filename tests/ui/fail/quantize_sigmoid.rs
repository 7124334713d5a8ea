// A sigmoid is not a clamp of the requantized output: a net with one has no int8 form.
use constmat::nn::{Dense, Parameters, Sigmoid, quantize};

type Net = constmat::net![Dense<f32, 4, 8, Sigmoid>, Dense<f32, 8, 3>];

fn main() {
    let net = Net::zeros();
    let _ = quantize(&net, &[[0.5_f32; 4]]);
}
