// PyTorch's LeNet-5 with padding (16 x 5 x 5 at the Flatten) baked into the textbook type
// without it (16 x 4 x 4): the dense layer after Flatten reads 256 values, the file's 400.
use constmat::embed::Baked;
use constmat::nn::Relu;

type Textbook = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 6, 5, Relu>,
    MaxPool2d<2>,
    Conv2d<6, 16, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<256, 120, Relu>,
    Dense<120, 84, Relu>,
    Dense<84, 10>,
];

static NET: Baked<Textbook> = constmat::include_net!("../../fixtures/lenet-f32.safetensors");

fn main() {
    let _ = &NET;
}
