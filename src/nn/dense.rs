//! The dense (fully connected) layer `A = f(X·Wᵀ + b)`: forward and backward side by side.
//!
//! Derivation: `docs/backprop.md`, section "Dense layer". Shapes, for a batch of `B` samples,
//! `I` inputs and `O` outputs:
//!
//! ```text
//! forward                               backward
//! Z = X·Wᵀ + b    (BxI)(IxO)+(1xO)      dZ = dA ⊙ f'(Z)   (BxO), f'(Z) computed from A
//! A = f(Z)        (BxO)                 dW = dZᵀ·X        (OxB)(BxI) = OxI
//!                                       db = Σ_rows dZ    (1xO)
//!                                       dX = dZ·W         (BxO)(OxI) = BxI
//! ```

#[cfg(feature = "rand")]
use super::Init;
use super::{Activation, Identity, Layer, Parameters, TensorInfo};
use crate::{Matrix, Scalar};
use num_traits::Float;

/// A dense layer with `I` inputs, `O` outputs and activation `A`: `A(X·Wᵀ + b)`.
///
/// The weight is stored `O x I` (PyTorch's `nn.Linear` orientation), the bias `1 x O`.
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Dense, Layer, Relu};
///
/// let layer = Dense::<f32, 3, 2, Relu>::new(
///     Matrix::from_rows([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]),
///     Matrix::from_rows([[0.5, 0.5]]),
/// );
/// let x = Matrix::<f32, 1, 3>::from_rows([[2.0, 3.0, 4.0]]);
/// let mut workspace = Layer::<f32, 1>::workspace(&layer);
/// let out = layer.forward(&x, &mut workspace);
/// assert_eq!(out.as_slice(), &[2.5, 0.0]); // relu(2 + 0.5), relu(-3 + 0.5)
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Dense<T, const I: usize, const O: usize, A = Identity> {
    /// `O x I`: row `o` holds the weights into output `o`.
    pub weight: Matrix<T, O, I>,
    /// `1 x O`.
    pub bias: Matrix<T, 1, O>,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<T: Scalar, const I: usize, const O: usize, A: Activation> Dense<T, I, O, A> {
    /// A layer with the given parameters.
    #[must_use]
    pub fn new(weight: Matrix<T, O, I>, bias: Matrix<T, 1, O>) -> Self {
        Self {
            weight,
            bias,
            activation: A::default(),
        }
    }

    /// A layer with weights drawn by `init` and zero biases.
    ///
    /// ```
    /// use constmat::nn::{Dense, Init, Relu};
    /// use rand::{SeedableRng, rngs::StdRng};
    ///
    /// let layer = Dense::<f64, 784, 128, Relu>::with_init(Init::He, &mut StdRng::seed_from_u64(0));
    /// let n = layer.weight.as_slice().len() as f64;
    /// let variance = layer.weight.iter().map(|w| w * w).sum::<f64>() / n;
    /// assert!((variance - 2.0 / 784.0).abs() < 0.1 * 2.0 / 784.0);
    /// ```
    #[cfg(feature = "rand")]
    #[must_use]
    pub fn with_init<R: rand::Rng + ?Sized>(init: Init, rng: &mut R) -> Self
    where
        T: Float,
    {
        use rand::distr::{Distribution, Uniform};
        let (fan_in, fan_out) = (I as f64, O as f64);
        let weight = match init {
            Init::He => {
                let normal = rand_distr::Normal::new(0.0, (2.0 / fan_in).sqrt())
                    .expect("a finite, positive standard deviation");
                Matrix::from_fn(|_, _| to_t(normal.sample(rng)))
            }
            Init::Xavier => {
                let limit = (6.0 / (fan_in + fan_out)).sqrt();
                let uniform = Uniform::new_inclusive(-limit, limit).expect("a finite range");
                Matrix::from_fn(|_, _| to_t(uniform.sample(rng)))
            }
        };
        Self::new(weight, Matrix::zeros())
    }
}

#[cfg(feature = "rand")]
fn to_t<T: Float>(x: f64) -> T {
    T::from(x).expect("every float type holds an f64 initial weight, perhaps rounded")
}

/// The buffers of one [`Dense`] layer for a batch of `B`: its output and its pre-activation
/// gradient.
#[derive(Debug, Clone)]
pub struct DenseWorkspace<T, const B: usize, const O: usize> {
    /// `A = f(Z)`, written by the forward pass. `Z` itself is not kept: every activation's
    /// derivative is computed from `A`.
    pub output: Matrix<T, B, O>,
    /// `dZ = dA ⊙ f'(Z)` (with `f'(Z)` computed from `A`), written by the backward pass.
    pub d_pre_activation: Matrix<T, B, O>,
}

impl<T, const B: usize, const I: usize, const O: usize, A> Layer<T, B> for Dense<T, I, O, A>
where
    T: Scalar + Float,
    A: Activation,
{
    type Input = Matrix<T, B, I>;
    type Output = Matrix<T, B, O>;
    type Workspace = DenseWorkspace<T, B, O>;

    fn workspace(&self) -> Self::Workspace {
        DenseWorkspace {
            output: Matrix::zeros(),
            d_pre_activation: Matrix::zeros(),
        }
    }

    fn forward<'w>(&self, x: &Matrix<T, B, I>, ws: &'w mut Self::Workspace) -> &'w Matrix<T, B, O> {
        // Z = X·Wᵀ + b                                    (BxI)(IxO) + (1xO) -> BxO
        x.matmul_transpose_rhs_into(&self.weight, &mut ws.output);
        ws.output.add_row_broadcast_assign(&self.bias);
        // A = f(Z), in place                              BxO
        ws.output.map_in_place(A::apply);
        &ws.output
    }

    fn output(ws: &Self::Workspace) -> &Matrix<T, B, O> {
        &ws.output
    }

    fn backward(
        &self,
        x: &Matrix<T, B, I>,
        ws: &mut Self::Workspace,
        d_output: &Matrix<T, B, O>,
        d_input: Option<&mut Matrix<T, B, I>>,
        gradients: &mut Self,
    ) {
        // dZ = dA ⊙ f'(Z), with f'(Z) computed from A     BxO
        ws.output
            .zip_map_into(d_output, &mut ws.d_pre_activation, |a, da| {
                da * A::derivative_from_output(a)
            });
        let dz = &ws.d_pre_activation;
        // dW = dZᵀ·X                                      (OxB)(BxI) -> OxI
        dz.matmul_transpose_lhs_into(x, &mut gradients.weight);
        // db = Σ over the batch of dZ                     1xO
        dz.column_sums_into(&mut gradients.bias);
        // dX = dZ·W                                       (BxO)(OxI) -> BxI
        if let Some(dx) = d_input {
            dz.matmul_into(&self.weight, dx);
        }
    }
}

#[cfg(feature = "rand")]
impl<T: Scalar + Float, const I: usize, const O: usize, A: Activation> super::RandomInit
    for Dense<T, I, O, A>
{
    /// Weights drawn by the activation's [`Init`] (He for ReLU, Xavier otherwise), zero biases.
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        Self::with_init(A::INIT, rng)
    }
}

impl<T: Scalar, const I: usize, const O: usize, A: Activation> Parameters<T> for Dense<T, I, O, A> {
    fn tensor_count(&self) -> usize {
        2
    }

    fn tensor(&self, k: usize) -> &[T] {
        match k {
            0 => self.weight.as_slice(),
            1 => self.bias.as_slice(),
            _ => panic!("a dense layer has 2 tensors (weight, bias); asked for tensor {k}"),
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        match k {
            0 => self.weight.as_mut_slice(),
            1 => self.bias.as_mut_slice(),
            _ => panic!("a dense layer has 2 tensors (weight, bias); asked for tensor {k}"),
        }
    }

    fn tensor_info(&self, k: usize) -> TensorInfo {
        match k {
            0 => TensorInfo::new(0, "weight", &[O, I]),
            1 => TensorInfo::new(0, "bias", &[O]),
            _ => panic!("a dense layer has 2 tensors (weight, bias); asked for tensor {k}"),
        }
    }

    fn module_count(&self) -> usize {
        1 + usize::from(A::TORCH_MODULE.is_some())
    }

    fn zeros() -> Self {
        Self::new(Matrix::zeros(), Matrix::zeros())
    }
}
