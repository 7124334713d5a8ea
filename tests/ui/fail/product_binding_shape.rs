// Binding: a (2x3) * (3x5) product is 2x5 and cannot be stored in a 2x4 binding.
use constmat::Matrix;

fn main() {
    let a = Matrix::<f32, 2, 3>::zeros();
    let b = Matrix::<f32, 3, 5>::zeros();
    let _c: Matrix<f32, 2, 4> = &a * &b;
}
