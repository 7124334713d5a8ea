// An int8 global average pool over 4,097 x 4,097 values: their sum could overflow the i32
// accumulator (at most 2^24 values of -128).
use constmat::nn::GlobalAvgPool2d;

fn main() {
    let _pool = GlobalAvgPool2d::<i8, 1, 4097, 4097>::new();
}
