// Zero padding with two numbers: `ZeroPad2d` takes one (every side) or four (PyTorch's left,
// right, top, bottom).
type Net = constmat::net![Input<f32, 1, 4, 4>, ZeroPad2d<1, 2>, Flatten, Dense<42, 10>];

fn main() {
    let _net: Option<Net> = None;
}
