// The valid side of the element-wise and broadcasting rules: equal shapes, 1 x W, H x 1.
use constmat::Matrix;

fn main() {
    let a = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    let b = Matrix::<i32, 2, 3>::ones();

    assert_eq!((&a + &b).as_slice(), &[2, 3, 4, 5, 6, 7]);
    assert_eq!((a.clone() - b.clone()).as_slice(), &[0, 1, 2, 3, 4, 5]);
    assert_eq!(a.hadamard(&a).as_slice(), &[1, 4, 9, 16, 25, 36]);

    let mut acc = a.clone();
    acc += &b;
    assert_eq!(acc, &a + &b);

    let row = Matrix::<i32, 1, 3>::from_rows([[10, 20, 30]]);
    assert_eq!(
        a.add_row_broadcast(&row).as_slice(),
        &[11, 22, 33, 14, 25, 36]
    );
    let column = Matrix::<i32, 2, 1>::from_rows([[10], [20]]);
    assert_eq!(
        a.add_column_broadcast(&column).as_slice(),
        &[11, 12, 13, 24, 25, 26]
    );
}
