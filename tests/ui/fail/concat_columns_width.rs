// Concatenating columns: `W + W2 == W3`; 2x1 next to 2x2 is 2x3, not 2x4.
use constmat::Matrix;

fn main() {
    let a = Matrix::<f32, 2, 1>::zeros();
    let b = Matrix::<f32, 2, 2>::zeros();
    let _ab: Matrix<f32, 2, 4> = a.concat_columns(&b);
}
