// Reshape: `H * W == H2 * W2`; a 28x28 image has 784 elements and cannot become 700x1.
use constmat::Matrix;

fn main() {
    let image = Matrix::<f32, 28, 28>::zeros();
    let _column: Matrix<f32, 700, 1> = image.reshape();
}
