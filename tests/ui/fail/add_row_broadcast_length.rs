// Row broadcast: the row added to an H x W matrix must be 1 x W; here 1x4 against width 3.
use constmat::Matrix;

fn main() {
    let m = Matrix::<f32, 2, 3>::zeros();
    let row = Matrix::<f32, 1, 4>::zeros();
    let _sum = m.add_row_broadcast(&row);
}
