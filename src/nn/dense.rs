//! The dense (fully connected) layer `A = f(X·Wᵀ + b)`: its one definition, forward and
//! backward side by side, for every storage.
//!
//! Derivation: `docs/backprop.md`, section "Dense layer". Shapes, for a batch of `B` samples,
//! `I` inputs and `O` outputs:
//!
//! ```text
//! forward                               backward
//! Z = X·Wᵀ + b    (BxI)(IxO)+(O)        dZ = dA ⊙ f'(Z)   (BxO), f'(Z) computed from A
//! A = f(Z)        (BxO)                 dW = dZᵀ·X        (OxB)(BxI) = OxI
//!                                       db = Σ_rows dZ    (O)
//!                                       dX = dZ·W         (BxO)(OxI) = BxI
//! ```

use num_traits::Float;

#[cfg(feature = "rand")]
use super::Init;
use super::shape::check_nonzero;
use super::{
    Activation, Bake, Heap, Identity, Inline, Layer, Parameters, SafetensorsFile, Sample, Store,
};
use crate::format::decode::{self, Source};
use crate::format::{Element, NetSpec, TensorSpec};
use crate::kernels;

/// A dense layer with `I` inputs, `O` outputs and activation `A`: `A(X·Wᵀ + b)`, its parameters
/// kept in the storage `S` ([`Heap`] unless said otherwise).
///
/// The weight is stored `O x I` (PyTorch's `nn.Linear` orientation), the bias has `O`
/// elements. With [`Heap`] storage they are a [`Matrix<T, O, I>`](crate::Matrix) and a
/// `Matrix<T, 1, O>`; with [`Inline`] storage an `[[T; I]; O]` and an `[T; O]`, which a
/// `static` holds in read-only memory.
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Dense, Layer, Relu};
///
/// let layer = Dense::<f32, 3, 2, Relu>::new(
///     Matrix::from_rows([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]),
///     Matrix::from_rows([[0.5, 0.5]]),
/// );
/// let mut out = [0.0; 2];
/// layer.forward_one(&[2.0, 3.0, 4.0], &mut out);
/// assert_eq!(out, [2.5, 0.0]); // relu(2 + 0.5), relu(-3 + 0.5)
/// ```
///
/// The layer is aligned to 64 bytes, with the weight first, so that an [`Inline`] weight
/// starts on a cache line, and so does every row when it is a multiple of 64 bytes long (784
/// `f32`s are): the SIMD kernels then never load a vector that straddles two lines, which makes
/// a prediction of the MNIST net about a quarter faster (`docs/embedding.md`). It costs at most
/// 63 bytes of padding per layer.
#[derive(Debug, Clone, PartialEq)]
#[repr(C, align(64))]
pub struct Dense<T: Sample, const I: usize, const O: usize, A = Identity, S: Store = Heap> {
    /// `O x I`: row `o` holds the weights into output `o`.
    pub weight: S::Matrix<T, O, I>,
    /// One bias per output.
    pub bias: S::Vector<T, O>,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<T: Sample, const I: usize, const O: usize, A: Activation, S: Store> Dense<T, I, O, A, S> {
    /// The shape rule, evaluated when the layer's code is generated: neither width is 0.
    const SHAPE: () = {
        check_nonzero("Dense", "inputs", I);
        check_nonzero("Dense", "outputs", O);
    };

    /// A layer with the given parameters; a `const fn`, so an [`Inline`] layer can initialize
    /// a `static`.
    ///
    /// ```
    /// use constmat::nn::{Dense, Identity, Inline};
    /// static HALF: Dense<f64, 2, 1, Identity, Inline> = Dense::new([[0.5, 0.5]], [0.0]);
    /// assert_eq!(HALF.weight, [[0.5, 0.5]]);
    /// ```
    #[must_use]
    pub const fn new(weight: S::Matrix<T, O, I>, bias: S::Vector<T, O>) -> Self {
        // Checked where the layer is made (the error's last note points at the caller), and
        // again in the forward pass for layers built field by field.
        let () = Self::SHAPE;
        Self {
            weight,
            bias,
            activation: A::VALUE,
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
        let () = Self::SHAPE; // checked here too, so that the error points at the caller
        let mut weight = S::matrix_filled(T::ZERO);
        init.fill(S::matrix_mut(&mut weight).as_flattened_mut(), I, O, rng);
        Self::new(weight, S::vector_filled(T::ZERO))
    }
}

impl<T, const I: usize, const O: usize, A, S> Layer for Dense<T, I, O, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    type In = [T; I];
    type Out = [T; O];

    /// `Linear(I, O)`, then the activation's module unless it is [`Identity`]: tensors
    /// `0.weight` `[O, I]` and `0.bias` `[O]`.
    const SPEC: NetSpec = NetSpec::Layer {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        tensors: &[
            TensorSpec {
                module: 0,
                field: "weight",
                dtype: T::DTYPE,
                shape: &[O, I],
                range: None,
                scale: false,
                buffer: false,
            },
            TensorSpec {
                module: 0,
                field: "bias",
                dtype: T::DTYPE,
                shape: &[O],
                range: None,
                scale: false,
                buffer: false,
            },
        ],
    };

    type WithStore<S2: Store> = Dense<T, I, O, A, S2>;

    #[inline]
    fn forward<const B: usize>(&self, x: &[[T; I]; B], y: &mut [[T; O]; B]) {
        let () = Self::SHAPE;
        // Z = X·Wᵀ                    (BxI)(IxO) -> BxO; one sample is a matrix-vector product
        kernels::matmul_transpose_rhs_into(x, S::matrix(&self.weight), y);
        // A = f(Z + b), in place      BxO
        let bias = S::vector(&self.bias);
        kernels::with_wide_vectors(|| {
            for row in y.iter_mut() {
                for (a, &b) in row.iter_mut().zip(bias) {
                    *a = A::apply(*a + b);
                }
            }
        });
    }

    fn to_store<S2: Store>(&self) -> Dense<T, I, O, A, S2> {
        Dense::new(
            S2::matrix_copied(S::matrix(&self.weight)),
            S2::vector_copied(S::vector(&self.bias)),
        )
    }
}

#[cfg(feature = "alloc")]
pub use train::DenseWorkspace;

#[cfg(feature = "alloc")]
mod train {
    use num_traits::Float;

    use super::Dense;
    use crate::format::Element;
    use crate::nn::{Activation, Layer, Sample, Store, Train};
    use crate::{Matrix, kernels};

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

    impl<T, const B: usize, const I: usize, const O: usize, A, S> Train<T, B> for Dense<T, I, O, A, S>
    where
        T: Element + Sample + Float,
        A: Activation,
        S: Store,
    {
        type Workspace = DenseWorkspace<T, B, O>;

        fn workspace(&self) -> Self::Workspace {
            DenseWorkspace {
                output: Matrix::zeros(),
                d_pre_activation: Matrix::zeros(),
            }
        }

        fn forward_train<'w>(
            &self,
            x: &[[T; I]; B],
            ws: &'w mut Self::Workspace,
        ) -> &'w [[T; O]; B] {
            // The layer's one forward pass, into the workspace, where backward finds A.
            self.forward(x, ws.output.as_array_mut());
            ws.output.as_array()
        }

        fn output(ws: &Self::Workspace) -> &[[T; O]; B] {
            ws.output.as_array()
        }

        fn backward(
            &self,
            x: &[[T; I]; B],
            ws: &mut Self::Workspace,
            d_output: &[[T; O]; B],
            d_input: Option<&mut [[T; I]; B]>,
            gradients: &mut Self,
        ) {
            // dZ = dA ⊙ f'(Z), with f'(Z) computed from A     BxO
            kernels::with_wide_vectors(|| {
                for ((dz, a), da) in ws
                    .d_pre_activation
                    .rows_mut()
                    .zip(ws.output.rows())
                    .zip(d_output)
                {
                    for ((dz, &a), &da) in dz.iter_mut().zip(a).zip(da) {
                        *dz = da * A::derivative_from_output(a);
                    }
                }
            });
            let dz = ws.d_pre_activation.as_array();
            // dW = dZᵀ·X                                      (OxB)(BxI) -> OxI
            kernels::matmul_transpose_lhs_into(dz, x, S::matrix_mut(&mut gradients.weight));
            // db = Σ over the batch of dZ                     O
            let db = S::vector_mut(&mut gradients.bias);
            db.fill(T::zero());
            for row in dz {
                for (b, &d) in db.iter_mut().zip(row) {
                    *b += d;
                }
            }
            // dX = dZ·W                                       (BxO)(OxI) -> BxI
            if let Some(dx) = d_input {
                kernels::matmul_into(dz, S::matrix(&self.weight), dx);
            }
        }
    }
}

#[cfg(feature = "rand")]
impl<T, const I: usize, const O: usize, A, S> super::RandomInit for Dense<T, I, O, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    /// Weights drawn by the activation's [`Init`] (He for ReLU, Xavier otherwise), zero biases.
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        Self::with_init(A::INIT, rng)
    }
}

impl<T, const I: usize, const O: usize, A, S> Parameters<T> for Dense<T, I, O, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    fn tensor(&self, k: usize) -> &[T] {
        match k {
            0 => S::matrix(&self.weight).as_flattened(),
            1 => S::vector(&self.bias),
            _ => panic!("a dense layer has 2 tensors (weight, bias); asked for tensor {k}"),
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        match k {
            0 => S::matrix_mut(&mut self.weight).as_flattened_mut(),
            1 => S::vector_mut(&mut self.bias),
            _ => panic!("a dense layer has 2 tensors (weight, bias); asked for tensor {k}"),
        }
    }

    fn zeros() -> Self {
        let () = Self::SHAPE; // checked here too, so that the error points at the caller
        Self::new(S::matrix_filled(T::ZERO), S::vector_filled(T::ZERO))
    }
}

#[cfg(feature = "alloc")]
impl<T, const I: usize, const O: usize, A, S> super::Weights for Dense<T, I, O, A, S>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        super::write_parameters::<T, _>(self, k, out);
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        super::read_parameters::<T, _>(tensor)
    }
}

/// A baked dense layer's weight, bias and first problem, decoded from the file `F` in one
/// pass; `Bake::BAKED` and `Bake::ERROR` read this one (memoized) constant.
struct Decoded<F, T, const I: usize, const O: usize>(core::marker::PhantomData<fn() -> (F, T)>);

/// The dense layer baked, one implementation per element type (`const` code cannot call the
/// element type's methods).
macro_rules! bake {
    ($t:ty, $matrix:ident, $vector:ident) => {
        impl<F: SafetensorsFile, const I: usize, const O: usize> Decoded<F, $t, I, O> {
            const PARTS: ([[$t; I]; O], [$t; O], Option<crate::format::Error>) =
                match decode::$matrix(Source::Index(&F::INDEX), F::FIRST_MODULE, "weight") {
                    Err(e) => ([[0.0; I]; O], [0.0; O], Some(e)),
                    Ok(weight) => {
                        match decode::$vector(Source::Index(&F::INDEX), F::FIRST_MODULE, "bias") {
                            Err(e) => (weight, [0.0; O], Some(e)),
                            Ok(bias) => (weight, bias, None),
                        }
                    }
                };
        }

        impl<F: SafetensorsFile, const I: usize, const O: usize, A: Activation> Bake<F>
            for Dense<$t, I, O, A, Inline>
        {
            const BAKED: Self = Self::new(
                Decoded::<F, $t, I, O>::PARTS.0,
                Decoded::<F, $t, I, O>::PARTS.1,
            );
            const ERROR: Option<crate::format::Error> = Decoded::<F, $t, I, O>::PARTS.2;
        }
    };
}
bake!(f32, f32_matrix_from, f32_vector_from);
bake!(f64, f64_matrix_from, f64_vector_from);
