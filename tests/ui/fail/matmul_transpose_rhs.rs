// `self · rhsᵀ`: `(H x K) · (W x K)ᵀ` needs both operands to have K columns; here 3 and 4.
use constmat::Matrix;

fn main() {
    let x = Matrix::<f32, 1, 3>::zeros();
    let w = Matrix::<f32, 2, 4>::zeros();
    let _z = x.matmul_transpose_rhs(&w);
}
