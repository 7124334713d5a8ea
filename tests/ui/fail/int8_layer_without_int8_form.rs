// An int8 net with a depthwise convolution and an average pooling, which have no int8 form yet.
type Net = constmat::net![
    Input<i8, 8, 16, 16>,
    DepthwiseConv2d<8, 8, 3, 1, 1>,
    Flatten,
    Dense<2048, 10>,
];

type Pooled = constmat::net![Input<i8, 8, 16, 16>, AvgPool2d<2>, Flatten, Dense<512, 10>];

fn main() {
    let _net: Option<Net> = None;
    let _pooled: Option<Pooled> = None;
}
