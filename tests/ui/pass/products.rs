// The valid side of the product rules: matching inner dimensions, output shapes, identity.
use constmat::Matrix;

fn main() {
    let a = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    let b = Matrix::<i32, 3, 5>::ones();

    // (2x3) * (3x5) -> 2x5, borrowed and owned.
    let c: Matrix<i32, 2, 5> = &a * &b;
    assert_eq!(c.as_slice(), &[6, 6, 6, 6, 6, 15, 15, 15, 15, 15]);
    assert_eq!(a.clone() * b.clone(), c);

    // (2x3)ᵀ(2x5) -> 3x5 and (2x5)(3x5)ᵀ -> 2x3.
    let g: Matrix<i32, 3, 5> = a.matmul_transpose_lhs(&c);
    assert_eq!(g, a.transpose().matmul(&c));
    let z: Matrix<i32, 2, 3> = c.matmul_transpose_rhs(&b);
    assert_eq!(z, c.matmul(&b.transpose()));

    let mut out = Matrix::<i32, 2, 5>::zeros();
    a.matmul_into(&b, &mut out);
    assert_eq!(out, c);

    let i = Matrix::<i32, 3, 3>::identity();
    assert_eq!(&a * &i, a);
}
