// Layers chain: each layer's input width is the previous layer's output width; here 128 and 100.
use constmat::Matrix;
use constmat::nn::{Chain, Dense, Identity, Relu, Trainer};

type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 100, 10, Identity>];

fn main() {
    let net: Net = Chain::new(
        Dense::new(Matrix::zeros(), Matrix::zeros()),
        Dense::new(Matrix::zeros(), Matrix::zeros()),
    );
    let _trainer = Trainer::<f32, Net, 64>::new(&net);
}
