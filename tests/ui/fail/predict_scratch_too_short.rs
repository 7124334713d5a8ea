// A prediction's scratch of 1,000 values, where the net's fast kernel (Winograd's method for 64
// filters of 32 x 3 x 3 on 16 x 16) takes `Net::PREDICT_SCRATCH` of them.
use constmat::nn::{Layer, Parameters, Relu};

type Net = constmat::net![Input<f32, 32, 16, 16>, Conv2d<32, 64, 3, 1, 1, Relu>];

fn main() {
    let net = Net::zeros();
    let x = Box::new([[[[0.0_f32; 16]; 16]; 32]; 1]);
    let mut y = Box::new([[[[0.0_f32; 16]; 16]; 64]; 1]);
    let mut scratch = Box::new([0.0_f32; 1_000]);
    net.forward_with_scratch(&x, &mut y, &mut scratch);
}
