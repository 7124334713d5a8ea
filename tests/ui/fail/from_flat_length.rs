// An array's length is known to the compiler: 5 elements cannot fill a 2x3 matrix.
use constmat::Matrix;

fn main() {
    let _m = Matrix::<f32, 2, 3>::from_flat([1.0, 2.0, 3.0, 4.0, 5.0]);
}
