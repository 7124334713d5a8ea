// What `net!`'s types allow besides their shapes: a trait implemented for two nets (each net is
// a plain type, not a projection the compiler cannot tell apart from another), and a net whose
// input width is a const parameter (its checks do not wrap the parameter in an expression).
use constmat::nn::{Dense, Layer, Parameters, Relu};

trait Describe {
    const NAME: &'static str;
}

type Lenet = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 6, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<864, 10>,
];
type Small = constmat::net![Input<f32, 1, 8, 8>, Conv2d<1, 2, 3, 1, 1>, Flatten, Dense<128, 10>];
type Mlp = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];

impl Describe for Lenet {
    const NAME: &'static str = "lenet";
}
impl Describe for Small {
    const NAME: &'static str = "small";
}
impl Describe for Mlp {
    const NAME: &'static str = "mlp";
}

type Generic<const N: usize> = constmat::net![Dense<f32, N, 16, Relu>, Dense<f32, 16, 10>];

fn main() {
    assert_eq!([Lenet::NAME, Small::NAME, Mlp::NAME], ["lenet", "small", "mlp"]);
    let net = Generic::<3>::zeros();
    let mut out = [0.0; 10];
    net.forward_one(&[1.0; 3], &mut out);
}
