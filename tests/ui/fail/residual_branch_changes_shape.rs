// A residual block with the identity shortcut whose branch doubles the channels: its output
// (16 x 8 x 8) cannot be added to its input (8 x 8 x 8). A projection shortcut is needed.
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 8, 8, 8>,
    Residual<[Conv2d<8, 16, 3, 1, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], Relu>,
    Flatten,
    Dense<1024, 10>,
];

fn main() {
    let _net = Net::zeros();
}
