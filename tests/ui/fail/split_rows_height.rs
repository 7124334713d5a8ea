// Splitting rows: `H1 + H2 == H`; a height of 3 cannot split into heights 2 and 2.
use constmat::Matrix;

fn main() {
    let m = Matrix::<f32, 3, 2>::zeros();
    let (_top, _bottom): (Matrix<f32, 2, 2>, Matrix<f32, 2, 2>) = m.split_rows();
}
