// Int8 nets with a depthwise convolution, an average pooling and a residual block, which have
// no int8 form yet.
type Net = constmat::net![
    Input<i8, 8, 16, 16>,
    DepthwiseConv2d<8, 8, 3, 1, 1>,
    Flatten,
    Dense<2048, 10>,
];

type Pooled = constmat::net![Input<i8, 8, 16, 16>, AvgPool2d<2>, Flatten, Dense<512, 10>];

type Block = constmat::net![
    Input<i8, 4, 8, 8>,
    Residual<[Conv2d<4, 4, 3, 1, 1>]>,
    Flatten,
    Dense<256, 10>,
];

fn main() {
    let _net: Option<Net> = None;
    let _pooled: Option<Pooled> = None;
    let _block: Option<Block> = None;
}
