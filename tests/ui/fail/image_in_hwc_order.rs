// An RGB image stored height, width, channels (HWC, as an image decoder or TensorFlow gives it)
// passed to a net of CHW images: the sizes are in the other order.
use constmat::nn::{Parameters, Predict, Relu};

type Net = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 8, 3, 1, 1, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<2048, 10>,
];

fn main() {
    let net = Net::zeros();
    let hwc: [[[f32; 3]; 32]; 32] = [[[0.5; 3]; 32]; 32];
    let _class = net.predict(&hwc);
}
