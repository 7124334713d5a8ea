// A layer's type written by hand with a size of 0: refused where its code is generated.
use constmat::nn::{Dense, Parameters, Relu};

fn main() {
    let _layer = Dense::<f32, 784, 0, Relu>::zeros();
}
