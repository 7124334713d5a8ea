// Add: both operands must have the same shape; here 2x3 and 3x2.
use constmat::Matrix;

fn main() {
    let a = Matrix::<f32, 2, 3>::zeros();
    let b = Matrix::<f32, 3, 2>::zeros();
    let _c = &a + &b;
}
