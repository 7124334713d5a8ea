// Identity: only square matrix types `Matrix<T, N, N>` have one; 3x4 does not.
use constmat::Matrix;

fn main() {
    let _i = Matrix::<f32, 3, 4>::identity();
}
