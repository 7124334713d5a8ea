// A float convolution with a 10 x 4 kernel: only int8 nets take a kernel of its own height and
// width yet.
type Net = constmat::net![Input<f32, 1, 49, 10>, Conv2d<1, 64, (10, 4), 2, 0>, Flatten, Dense<5120, 12>];

fn main() {
    let _net: Option<Net> = None;
}
