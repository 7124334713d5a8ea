// `selfᵀ · rhs`: `(K x H)ᵀ · (K x W)` needs both operands to have K rows; here 3 and 4.
use constmat::Matrix;

fn main() {
    let dz = Matrix::<f32, 3, 2>::zeros();
    let x = Matrix::<f32, 4, 5>::zeros();
    let _dw = dz.matmul_transpose_lhs(&x);
}
