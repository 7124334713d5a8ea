//! A statically typed multi-layer perceptron with hand-derived backpropagation.
//!
//! Every intermediate of a training step has its shape in its type, and every backward pass is
//! written out by hand next to its forward pass, with the derivation in `docs/backprop.md`.
//!
//! # Orientation: one sample per row
//!
//! A batch of `B` samples with `N` features is a `Matrix<T, B, N>`: sample `i` is row `i`. This
//! is how data sets are stored (an MNIST image is 784 contiguous bytes, so building a batch is
//! copying rows), and it keeps weights in PyTorch's `out x in` orientation, so trained weights
//! move between the two without transposing. The whole module uses this orientation:
//!
//! | quantity | type | formula |
//! | --- | --- | --- |
//! | input `X` | `Matrix<T, B, I>` | |
//! | weight `W` | `Matrix<T, O, I>` | |
//! | bias `b` | `Matrix<T, 1, O>` | |
//! | output `A` | `Matrix<T, B, O>` | `A = f(X·Wᵀ + b)` |
//! | `dZ` | `Matrix<T, B, O>` | `dZ = dA ⊙ f'(Z)`, with `f'(Z)` computed from `A` |
//! | `dW` | `Matrix<T, O, I>` | `dW = dZᵀ·X` |
//! | `db` | `Matrix<T, 1, O>` | `db = Σ_rows dZ` |
//! | `dX` | `Matrix<T, B, I>` | `dX = dZ·W` |
//!
//! # A network's type spells its architecture
//!
//! Layers compose with [`Chain`]; the [`net!`](crate::net) macro writes the nesting for you:
//!
//! ```
//! use constmat::nn::{Dense, Identity, Relu};
//!
//! type Mlp = constmat::net![
//!     Dense<f32, 784, 128, Relu>,
//!     Dense<f32, 128, 64, Relu>,
//!     Dense<f32, 64, 10, Identity>,
//! ];
//! ```
//!
//! A layer whose input width differs from the previous layer's output width does not compile;
//! the message names the two widths (`expected Matrix<_, _, 128>, found Matrix<_, _, 100>`).
//!
//! # A training step
//!
//! ```
//! use constmat::Matrix;
//! use constmat::nn::{Dense, Identity, RandomInit, Relu, SoftmaxCrossEntropy, Trainer, Sgd};
//! use rand::{SeedableRng, rngs::StdRng};
//!
//! type Net = constmat::net![Dense<f64, 2, 8, Relu>, Dense<f64, 8, 2, Identity>];
//! let mut rng = StdRng::seed_from_u64(1);
//! let mut net = Net::random(&mut rng);
//! let mut trainer = Trainer::<f64, Net, 4>::new(&net);
//! let mut optimizer = Sgd::new();
//! let x = Matrix::<f64, 4, 2>::from_rows([[0., 0.], [0., 1.], [1., 0.], [1., 1.]]);
//! let y = Matrix::<f64, 4, 2>::from_rows([[1., 0.], [0., 1.], [0., 1.], [1., 0.]]);
//! let mut step = || trainer.step(&mut net, &mut optimizer, 0.1, &SoftmaxCrossEntropy, &x, &y);
//! let first = step()?;
//! for _ in 0..500 {
//!     step()?;
//! }
//! let last = step()?;
//! assert!(last < first / 10.0, "XOR is learned: {first} -> {last}");
//! # Ok::<(), constmat::nn::Diverged<f64>>(())
//! ```

mod activation;
mod chain;
mod cross_entropy;
mod dense;
mod init;
mod mse;
mod optim;
mod schedule;
mod trainer;

pub use activation::{Activation, Identity, Relu, Sigmoid, Tanh};
pub use chain::Chain;
pub use chain::ChainWorkspace;
pub use cross_entropy::{SoftmaxCrossEntropy, softmax_rows_into};
pub use dense::{Dense, DenseWorkspace};
pub use init::Init;
#[cfg(feature = "rand")]
pub use init::RandomInit;
pub use mse::MeanSquaredError;
pub use optim::{Adam, Momentum, Optimizer, Sgd, flush_subnormal};
pub use schedule::Schedule;
pub use trainer::{Diverged, Trainer};

use crate::{Matrix, Scalar};

/// A differentiable layer (or a whole network) working on batches of `B` samples.
///
/// Implemented by [`Dense`] and by [`Chain`] of two layers whose widths fit. The forward and
/// backward passes write into a [`Workspace`](Layer::Workspace) allocated once by
/// [`workspace`](Layer::workspace), so a training step allocates nothing.
pub trait Layer<T: Scalar, const B: usize>: Parameters<T> {
    /// The input batch, `Matrix<T, B, I>`.
    type Input;
    /// The output batch, `Matrix<T, B, O>`.
    type Output: Buffer;
    /// Buffers the passes write into: outputs, and the gradients between layers.
    type Workspace;

    /// Allocates the buffers for a batch of `B` samples. Done once, before training.
    fn workspace(&self) -> Self::Workspace;

    /// The forward pass: reads `x`, writes every intermediate into `workspace`, and returns the
    /// output (which lives in `workspace`).
    fn forward<'w>(&self, x: &Self::Input, workspace: &'w mut Self::Workspace) -> &'w Self::Output;

    /// The output of the last [`forward`](Layer::forward) that wrote to `workspace`.
    fn output(workspace: &Self::Workspace) -> &Self::Output;

    /// The backward pass.
    ///
    /// Given `x` and the `workspace` of the forward pass on it, and `d_output` = ∂L/∂output,
    /// writes ∂L/∂(each parameter) into `gradients` (overwriting it) and, when `d_input` is
    /// given, ∂L/∂x into it. The first layer of a net passes `None` and skips that product.
    fn backward(
        &self,
        x: &Self::Input,
        workspace: &mut Self::Workspace,
        d_output: &Self::Output,
        d_input: Option<&mut Self::Input>,
        gradients: &mut Self,
    );
}

/// Something made of parameter tensors: a layer, a network, or a gradient or optimizer state of
/// the same shape.
///
/// Tensors are numbered `0..tensor_count()`, first layer first, weight before bias; optimizers
/// walk them in that order. Each has a name and shape following PyTorch's `nn.Sequential`: the
/// net `Dense<_, 784, 128, Relu>, Dense<_, 128, 10, Identity>` is
/// `Sequential(Linear(784, 128), ReLU(), Linear(128, 10))`, whose tensors are `0.weight`
/// `[128, 784]`, `0.bias` `[128]`, `2.weight` `[10, 128]`, `2.bias` `[10]` (the activation
/// module takes index 1).
///
/// ```
/// use constmat::nn::{Dense, Identity, Parameters, Relu};
///
/// type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10, Identity>];
/// let net = Net::zeros();
/// let names: Vec<String> = (0..net.tensor_count()).map(|k| net.tensor_info(k).name()).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// assert_eq!(net.tensor_info(2).shape(), &[10, 128]);
/// ```
pub trait Parameters<T>: Sized {
    /// The number of tensors.
    fn tensor_count(&self) -> usize;
    /// Tensor `k`, flat and row-major. Panics when `k >= tensor_count()`.
    fn tensor(&self, k: usize) -> &[T];
    /// Tensor `k`, mutable. Panics when `k >= tensor_count()`.
    fn tensor_mut(&mut self, k: usize) -> &mut [T];
    /// The name and shape of tensor `k`. Panics when `k >= tensor_count()`.
    fn tensor_info(&self, k: usize) -> TensorInfo;
    /// How many `nn.Sequential` modules this spans (a dense layer is one `Linear`, plus one for
    /// its activation unless that is [`Identity`]).
    fn module_count(&self) -> usize;
    /// The same structure with every parameter zero.
    fn zeros() -> Self;
    /// A zero value of the same structure: the shape of gradients and optimizer state.
    fn zeros_like(&self) -> Self {
        Self::zeros()
    }
}

/// The name and shape of one parameter tensor (see [`Parameters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorInfo {
    /// The index of the module holding it in PyTorch's `nn.Sequential` numbering.
    pub module: usize,
    /// `"weight"` or `"bias"`.
    pub field: &'static str,
    dims: [usize; 2],
    rank: usize,
}

impl TensorInfo {
    /// A tensor of `module` named `field` with the given shape (at most 2 dimensions).
    ///
    /// # Panics
    ///
    /// When `shape` has more than 2 dimensions.
    #[must_use]
    pub fn new(module: usize, field: &'static str, shape: &[usize]) -> Self {
        assert!(shape.len() <= 2, "tensors here have at most 2 dimensions");
        let mut dims = [0; 2];
        dims[..shape.len()].copy_from_slice(shape);
        Self {
            module,
            field,
            dims,
            rank: shape.len(),
        }
    }

    /// The shape, PyTorch's way: a weight is `[out, in]`, a bias `[out]`.
    #[must_use]
    pub fn shape(&self) -> &[usize] {
        &self.dims[..self.rank]
    }

    /// The number of elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// Whether the tensor has no elements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tensor's name, `"{module}.{field}"`, e.g. `"2.weight"`.
    #[must_use]
    pub fn name(&self) -> alloc::string::String {
        alloc::format!("{}.{}", self.module, self.field)
    }

    /// The same tensor in a module `offset` places later.
    #[must_use]
    pub fn shifted(self, offset: usize) -> Self {
        Self {
            module: self.module + offset,
            ..self
        }
    }
}

/// A buffer that can be created zero-filled: the type of data flowing between layers.
pub trait Buffer {
    /// A zero-filled buffer.
    fn zeros() -> Self;
}

impl<T: Scalar, const H: usize, const W: usize> Buffer for Matrix<T, H, W> {
    fn zeros() -> Self {
        Matrix::zeros()
    }
}

/// The type of a network made of the given layers, first to last: `net![L1, L2, L3]` is
/// `Chain<L1, Chain<L2, L3>>`.
///
/// ```
/// use constmat::nn::{Chain, Dense, Relu, Identity};
///
/// type A = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2, Identity>];
/// type B = Chain<Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2, Identity>>;
/// let same: fn(A) -> B = |net| net;
/// # let _ = same;
/// ```
#[macro_export]
macro_rules! net {
    ($layer:ty $(,)?) => { $layer };
    ($layer:ty, $($rest:ty),+ $(,)?) => { $crate::nn::Chain<$layer, $crate::net!($($rest),+)> };
}

/// A loss over a batch of `B` outputs of width `C`, with its gradient.
///
/// The loss is a **mean** (over the batch for [`SoftmaxCrossEntropy`], over all `B·C` elements
/// for [`MeanSquaredError`], as in PyTorch), so its gradient carries the matching factor
/// (`1/B` or `1/(B·C)`).
pub trait Loss<T: Scalar, const B: usize, const C: usize> {
    /// The mean loss of `output` against `target`.
    fn loss(&self, output: &Matrix<T, B, C>, target: &Matrix<T, B, C>) -> T;

    /// The mean loss, and `gradient = ∂L/∂output` (overwritten; no allocation).
    fn loss_and_gradient(
        &self,
        output: &Matrix<T, B, C>,
        target: &Matrix<T, B, C>,
        gradient: &mut Matrix<T, B, C>,
    ) -> T;
}
