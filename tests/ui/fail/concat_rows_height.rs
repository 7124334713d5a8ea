// Concatenating rows: `H + H2 == H3`; 1x2 above 2x2 is 3x2, not 4x2.
use constmat::Matrix;

fn main() {
    let a = Matrix::<f32, 1, 2>::zeros();
    let b = Matrix::<f32, 2, 2>::zeros();
    let _ab: Matrix<f32, 4, 2> = a.concat_rows(&b);
}
