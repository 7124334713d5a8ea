// A trainer for batches of 0 samples: its step's mean loss would be NaN, reported as divergence.
use constmat::nn::{Dense, Parameters, Relu, Trainer};

type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];

fn main() {
    let net = Net::zeros();
    let _trainer = Trainer::<f32, Net, 0>::new(&net);
}
