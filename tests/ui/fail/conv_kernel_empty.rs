// A kernel (or a pooling window) of size 0 reads nothing: one error, for the height and width
// together (a pooling's stride, its window unless given, is 0 too: not a second error).
use constmat::nn::{Parameters, Relu};

type Net = constmat::net![
    Input<f32, 1, 8, 8>,
    Conv2d<1, 4, 0, Relu>,
    Flatten,
    Dense<324, 10>,
];

type Pooled = constmat::net![
    Input<f32, 1, 8, 8>,
    MaxPool2d<0>,
    Flatten,
    Dense<64, 10>,
];

fn main() {
    let _net = Net::zeros();
    let _pooled = Pooled::zeros();
}
