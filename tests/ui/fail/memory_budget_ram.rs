// The net fits the flash, but one prediction's 768 bytes of buffers do not fit 512 bytes of
// stack.
use constmat::embed::{Baked, check_memory_budget};
use constmat::nn::{Dense, Relu};

type Mnist = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];

const _: () = check_memory_budget::<Baked<Mnist>>(512 * 1024, 512);

fn main() {}
