// Multiply: `(H x K) * (K x W)` needs the same inner dimension K; here 3 and 4.
use constmat::Matrix;

fn main() {
    let a = Matrix::<f32, 2, 3>::zeros();
    let b = Matrix::<f32, 4, 1>::zeros();
    let _c = &a * &b;
}
