// A projected residual block whose shortcut forgets the stride: the branch gives 16 x 4 x 4,
// the shortcut 16 x 8 x 8.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 8, 8, 8>,
    Residual<[Conv2d<8, 16, 3, 2, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], [Conv2d<8, 16, 1>], Relu>,
    Flatten,
    Dense<256, 10>,
];

fn main() {
    let _net = Net::zeros();
}
