// Subtract: both operands must have the same shape; here 2x3 and 2x4.
use constmat::Matrix;

fn main() {
    let a = Matrix::<f32, 2, 3>::zeros();
    let b = Matrix::<f32, 2, 4>::zeros();
    let _c = a - b;
}
