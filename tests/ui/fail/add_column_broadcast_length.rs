// Column broadcast: the column added to an H x W matrix must be H x 1; here 3x1 against height 2.
use constmat::Matrix;

fn main() {
    let m = Matrix::<f32, 2, 3>::zeros();
    let column = Matrix::<f32, 3, 1>::zeros();
    let _sum = m.add_column_broadcast(&column);
}
