// `matmul_into`: the output of `(H x K) · (K x W)` is H x W; (2x3)(3x4) gives 2x4, not 2x3.
use constmat::Matrix;

fn main() {
    let a = Matrix::<f32, 2, 3>::zeros();
    let b = Matrix::<f32, 3, 4>::zeros();
    let mut out = Matrix::<f32, 2, 3>::zeros();
    a.matmul_into(&b, &mut out);
}
