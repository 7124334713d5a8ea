// `+=`: the right-hand side must have the shape of the left; here 2x3 and 2x2.
use constmat::Matrix;

fn main() {
    let mut a = Matrix::<f32, 2, 3>::zeros();
    let b = Matrix::<f32, 2, 2>::zeros();
    a += &b;
}
