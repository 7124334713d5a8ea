// The valid side of the `const { assert!(..) }` rules: reshape, concat, split, submatrix.
use constmat::Matrix;

fn main() {
    let image = Matrix::<u16, 28, 28>::from_fn(|r, c| (28 * r + c) as u16);
    let column: Matrix<u16, 784, 1> = image.clone().reshape();
    assert_eq!(column.as_slice(), image.as_slice());

    let a = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    let b = Matrix::<i32, 2, 2>::from_rows([[3, 4], [5, 6]]);
    let ab: Matrix<i32, 2, 3> = a.concat_columns(&b);
    assert_eq!(ab.as_slice(), &[1, 3, 4, 2, 5, 6]);
    let (left, right): (Matrix<i32, 2, 1>, Matrix<i32, 2, 2>) = ab.split_columns();
    assert_eq!((left, right), (a, b));

    let top = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    let bottom = Matrix::<i32, 2, 2>::from_rows([[3, 4], [5, 6]]);
    let stacked: Matrix<i32, 3, 2> = top.concat_rows(&bottom);
    let (t, rest): (Matrix<i32, 1, 2>, Matrix<i32, 2, 2>) = stacked.split_rows();
    assert_eq!((t, rest), (top, bottom));

    let m = Matrix::<i32, 3, 3>::from_fn(|r, c| (3 * r + c) as i32);
    let block: Matrix<i32, 2, 2> = m.submatrix::<1, 1, 2, 2>();
    assert_eq!(block.as_slice(), &[4, 5, 7, 8]);
}
