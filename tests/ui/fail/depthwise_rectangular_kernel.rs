// A depthwise convolution with a 3 x 1 kernel: only `Conv2d` takes a kernel of its own height
// and width.
type Net = constmat::net![Input<f32, 4, 8, 8>, DepthwiseConv2d<4, 4, (3, 1), 1, 0>, Flatten, Dense<192, 2>];

fn main() {
    let _net: Option<Net> = None;
}
