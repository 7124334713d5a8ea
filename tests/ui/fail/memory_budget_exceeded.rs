// The MNIST net's 437,568 bytes of parameters do not fit a budget of 256 KiB: the build stops
// and says both numbers.
use constmat::embed::{Baked, check_memory_budget};
use constmat::nn::{Dense, Relu};

type Mnist = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];

const _: () = check_memory_budget::<Baked<Mnist>>(256 * 1024, 4 * 1024);

fn main() {}
