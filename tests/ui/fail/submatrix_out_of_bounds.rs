// Submatrix: `ROW + H2 <= H`; a 2x2 block starting at row 2 of a 3x3 matrix ends at row 4.
use constmat::Matrix;

fn main() {
    let m = Matrix::<f32, 3, 3>::zeros();
    let _block = m.submatrix::<2, 0, 2, 2>();
}
