// Zero padding written by hand with the wrong output height: 4 rows padded by 1 above give 5.
use constmat::nn::ZeroPad2d;

fn main() {
    let _pad = ZeroPad2d::<f32, 1, 1, 0, 0, 0, 4, 4, 6, 4>::new();
}
