// A 10 x 12 kernel on an image 10 wide: the kernel's width, not its height, does not fit.
type Net = constmat::net![Input<f32, 1, 49, 10>, Conv2d<1, 64, (10, 12), 2, 0>, Flatten, Dense<5120, 12>];

fn main() {
    let _net: Option<Net> = None;
}
