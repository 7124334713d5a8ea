// A trained net's baked form is `Baked<Net>`; declared by hand with another width, it does not fit.
use constmat::nn::{Dense, Inline, Layer, Parameters, Relu};

type Net = constmat::net![Dense<f32, 4, 8, Relu>, Dense<f32, 8, 2>];
type Wrong = constmat::net![Dense<f32, 4, 6, Relu, Inline>, Dense<f32, 6, 2, constmat::nn::Identity, Inline>];

fn main() {
    let trained = Net::zeros();
    let _baked: Wrong = trained.to_store::<Inline>();
}
