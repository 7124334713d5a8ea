// An int8 global average pool over 4,097 x 4,097 values: their sum could overflow the i32
// accumulator (at most 2^24 values of -128).
use constmat::nn::{GlobalAvgPool2d, Layer};

fn main() {
    let images: Vec<[[[i8; 4097]; 4097]; 1]> = Vec::new();
    let mut y = [[[0; 1]; 1]; 1];
    if let Some(x) = images.first() {
        GlobalAvgPool2d::<i8, 1, 4097, 4097>::new().forward_one(x, &mut y);
    }
}
