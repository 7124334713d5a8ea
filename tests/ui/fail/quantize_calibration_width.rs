// Calibration samples are the net's inputs: 5 values for a net that takes 4 do not compile.
use constmat::nn::{Dense, Parameters, Relu, quantize};

type Net = constmat::net![Dense<f32, 4, 8, Relu>, Dense<f32, 8, 3>];

fn main() {
    let net = Net::zeros();
    let calibration = vec![[0.5_f32; 5]; 300];
    let _ = quantize(&net, &calibration);
}
