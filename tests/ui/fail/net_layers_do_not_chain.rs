// Layers chain: each layer's input width is the previous layer's output width; here 128 and 100.
use constmat::nn::{Dense, Parameters, Relu, Trainer};

type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 100, 10>];

fn main() {
    let net = Net::zeros();
    let _trainer = Trainer::<f32, Net, 64>::new(&net);
}
