// Splitting columns: `W1 + W2 == W`; a width of 3 cannot split into widths 1 and 1.
use constmat::Matrix;

fn main() {
    let m = Matrix::<f32, 2, 3>::zeros();
    let (_left, _right): (Matrix<f32, 2, 1>, Matrix<f32, 2, 1>) = m.split_columns();
}
