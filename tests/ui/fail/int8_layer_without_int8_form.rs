// Int8 nets with batch normalization, which has no int8 form: it is folded into the layer
// before it for inference.
type Net = constmat::net![
    Input<i8, 8, 16, 16>,
    Conv2d<8, 8, 3, 1, 1>,
    BatchNorm2d<8>,
    Flatten,
    Dense<2048, 10>,
];

type Vector = constmat::net![Input<i8, 8, 4, 4>, Flatten, Dense<128, 10>, BatchNorm1d<10>];

fn main() {
    let _net: Option<Net> = None;
    let _vector: Option<Vector> = None;
}
