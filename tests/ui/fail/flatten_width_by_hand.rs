// Written by hand, Flatten's width must be channels x height x width: 16 x 5 x 5 = 400.
use constmat::nn::{Flatten, Layer};

fn main() {
    let flatten = Flatten::<f32, 16, 5, 5, 256>::new();
    let mut out = [0.0; 256];
    flatten.forward_one(&[[[0.0; 5]; 5]; 16], &mut out);
}
