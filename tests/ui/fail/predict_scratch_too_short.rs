// A prediction's scratch of 1,000 values, where the net's fast kernel (Winograd's method for 64
// filters of 3 x 5 x 5 on 32 x 32) takes `Net::PREDICT_SCRATCH` of them. Off x86-64 no kernel
// needs a scratch (`PREDICT_SCRATCH` is 0), and the case says so itself.
use constmat::nn::{Layer, Parameters, Relu};

#[cfg(not(target_arch = "x86_64"))]
compile_error!("the prediction scratch is for the x86-64 kernels");

type Net = constmat::net![Input<f32, 3, 32, 32>, Conv2d<3, 64, 5, 1, 2, Relu>];

fn main() {
    let net = Net::zeros();
    let x = Box::new([[[[0.0_f32; 32]; 32]; 3]; 1]);
    let mut y = Box::new([[[[0.0_f32; 32]; 32]; 64]; 1]);
    let mut scratch = Box::new([0.0_f32; 1_000]);
    net.forward_with_scratch(&x, &mut y, &mut scratch);
}
