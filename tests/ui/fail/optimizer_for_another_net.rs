// An optimizer's state has the shapes of the net it was built for: Adam built for 784-100-10
// cannot train 784-128-10.
use constmat::nn::{Adam, Dense, Parameters, Relu, SoftmaxCrossEntropy, Trainer};

type Small = constmat::net![Dense<f32, 784, 100, Relu>, Dense<f32, 100, 10>];
type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];

fn main() {
    let mut adam = Adam::new(&Small::zeros());
    let mut net = Net::zeros();
    let mut trainer = Trainer::<f32, Net, 1>::new(&net);
    let (x, y) = ([[0.0; 784]], [[0.0; 10]]);
    let _ = trainer.step(&mut net, &mut adam, 0.01, &SoftmaxCrossEntropy, &x, &y);
}
