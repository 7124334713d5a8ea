//! constmat itself: `kernels::matmul_into` for GEMM, and the crate's own typed MLP
//! (`nn::Trainer`, `Sgd`, `SoftmaxCrossEntropy`), exactly as `examples/mnist_static` uses it;
//! one sample through `Layer::forward_one` (the path of a loaded or baked net), 1,000 through
//! `Train::forward_train` (a heap workspace, as `mnist_static` evaluates).

use constmat::data::mnist;
use constmat::nn::{
    Dense, Identity, Inline, Layer, Loss, Parameters, Quantize, Relu, Sgd, SoftmaxCrossEntropy,
    Train, Trainer, quantize,
};
use constmat::{Matrix, kernels};

use crate::common::{
    BATCH, CLASSES, Data, EVAL, GEMM_SHAPES, Gemm, H1, H2, Mlp, PIXEL_MEAN, PIXEL_STD, PIXELS,
    Weights, operand,
};
use crate::peer::RustPeer;

/// The network of `mnist_static`.
pub type Net = constmat::net![
    Dense<f32, PIXELS, H1, Relu>,
    Dense<f32, H1, H2, Relu>,
    Dense<f32, H2, CLASSES, Identity>,
];

pub fn peer(weights: &Weights) -> RustPeer {
    RustPeer {
        name: "constmat",
        mlp: Box::new(ConstmatMlp::new(weights)),
        cnn: Some(Box::new(crate::cnn::ConstmatCnn::new(
            &crate::cnn::initial_weights(),
        ))),
        gemms: GEMM_SHAPES
            .iter()
            .map(|&shape| (shape, crate::gemm_for_shape!(shape, ConstmatGemm)))
            .collect(),
    }
}

/// The weights of `net`, for the other implementations.
pub fn weights_of(net: &Net) -> Weights {
    Weights {
        tensors: std::array::from_fn(|k| net.tensor(k).to_vec()),
    }
}

struct ConstmatGemm<const M: usize, const K: usize, const N: usize> {
    a: Matrix<f32, M, K>,
    b: Matrix<f32, K, N>,
    c: Matrix<f32, M, N>,
}

impl<const M: usize, const K: usize, const N: usize> ConstmatGemm<M, K, N> {
    fn new() -> Self {
        Self {
            a: Matrix::from_fn(|r, c| operand(r, c, 1)),
            b: Matrix::from_fn(|r, c| operand(r, c, 2)),
            c: Matrix::zeros(),
        }
    }
}

impl<const M: usize, const K: usize, const N: usize> Gemm for ConstmatGemm<M, K, N> {
    fn run(&mut self) {
        kernels::matmul_into(self.a.as_array(), self.b.as_array(), self.c.as_array_mut());
    }

    fn result(&self) -> Vec<f32> {
        self.c.as_slice().to_vec()
    }
}

pub struct ConstmatMlp {
    net: Net,
    trainer: Trainer<f32, Net, BATCH>,
    optimizer: Sgd,
    x: Matrix<f32, BATCH, PIXELS>,
    y: Matrix<f32, BATCH, CLASSES>,
    labels: [u8; BATCH],
    x1: [f32; PIXELS],
    x_eval: Matrix<f32, EVAL, PIXELS>,
    ws_eval: <Net as Train<f32, EVAL>>::Workspace,
    /// The int8 form (`nn::quantize`), inline as a baked net, once prepared.
    int8: Option<Box<Int8Net>>,
    /// The batch-1 input, quantized with the int8 net's input quantization.
    int8_input: [i8; PIXELS],
}

/// The int8 form of [`Net`], its parameters inline.
type Int8Net = <<Net as Quantize>::Quantized as Layer>::WithStore<Inline>;

impl ConstmatMlp {
    pub fn new(weights: &Weights) -> Self {
        let mut net = Net::zeros();
        set(&mut net, weights);
        Self {
            trainer: Trainer::new(&net),
            optimizer: Sgd::new(),
            x: Matrix::zeros(),
            y: Matrix::zeros(),
            labels: [0; BATCH],
            x1: [0.0; PIXELS],
            x_eval: Matrix::zeros(),
            ws_eval: Train::<f32, EVAL>::workspace(&net),
            net,
            int8: None,
            int8_input: [0; PIXELS],
        }
    }
}

fn set(net: &mut Net, weights: &Weights) {
    for (k, tensor) in weights.tensors.iter().enumerate() {
        net.tensor_mut(k).copy_from_slice(tensor);
    }
}

impl Mlp for ConstmatMlp {
    fn set_weights(&mut self, weights: &Weights) {
        set(&mut self.net, weights);
    }

    fn load_batch(&mut self, data: &Data, indices: &[usize; BATCH]) {
        // As `mnist_static` does it.
        data.split
            .fill_batch(indices, self.x.as_array_mut(), &mut self.labels);
        self.x.map_in_place(|v| (v - PIXEL_MEAN) / PIXEL_STD);
        mnist::one_hot(&self.labels, self.y.as_array_mut());
    }

    fn step(&mut self, lr: f32) -> f32 {
        self.trainer
            .step(
                &mut self.net,
                &mut self.optimizer,
                lr,
                &SoftmaxCrossEntropy,
                &self.x,
                &self.y,
            )
            .expect("training does not diverge")
    }

    fn loss(&mut self) -> f32 {
        let mut ws = Train::<f32, BATCH>::workspace(&self.net);
        let logits = self.net.forward_train(&self.x, &mut ws);
        SoftmaxCrossEntropy.loss(logits, &self.y)
    }

    fn load_single(&mut self, x: &[f32]) {
        self.x1.copy_from_slice(x);
    }

    fn forward_single(&mut self) -> [f32; CLASSES] {
        let mut logits = [0.0; CLASSES];
        self.net.forward_one(&self.x1, &mut logits);
        logits
    }

    fn load_eval(&mut self, x: &[f32]) {
        self.x_eval.as_mut_slice().copy_from_slice(x);
    }

    fn forward_eval(&mut self) -> f32 {
        self.net.forward_train(&self.x_eval, &mut self.ws_eval)[0][0]
    }

    fn eval_logits(&self) -> Vec<f32> {
        <Net as Train<f32, EVAL>>::output(&self.ws_eval)
            .as_flattened()
            .to_vec()
    }

    fn prepare_int8(&mut self, calibration: &[f32]) -> bool {
        let samples: Vec<[f32; PIXELS]> = calibration
            .chunks_exact(PIXELS)
            .map(|row| row.try_into().expect("rows of 784"))
            .collect();
        let int8 = quantize(&self.net, &samples).expect("the harness's net quantizes");
        // Inline, as a baked net keeps it; the input quantized once, as a caller would.
        self.int8_input = self.x1.map(|v| int8.input.quantize(v));
        self.int8 = Some(Box::new(int8.net.to_store::<Inline>()));
        true
    }

    fn forward_single_int8(&mut self) -> [i8; CLASSES] {
        let mut out = [0; CLASSES];
        let net = self.int8.as_ref().expect("prepared");
        net.forward_one(&self.int8_input, &mut out);
        out
    }
}
