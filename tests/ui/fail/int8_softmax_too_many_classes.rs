// An int8 softmax of 5000 classes: the sum of their probabilities' fixed-point exponentials
// holds at most 4096.
use constmat::nn::{Layer, QSoftmax};
use constmat::quant::Quantization;

fn main() {
    let softmax = QSoftmax::<5000>::new(Quantization { scale: 0.1, zero_point: 0 });
    softmax.forward_one(&[0; 5000], &mut [0; 5000]);
}
