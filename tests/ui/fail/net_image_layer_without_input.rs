// A convolution written as in `net!`'s image form, but the net does not start with `Input`: the
// sizes of its images are nowhere, so nothing can be computed.
use constmat::nn::Parameters;

type Net = constmat::net![
    Conv2d<1, 6, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<864, 10>,
];

fn main() {
    let _net = Net::zeros();
}
