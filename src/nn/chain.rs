//! Composition: a layer followed by another whose input is the first one's output.
//!
//! Derivation: `docs/backprop.md`, section "The whole net" (the chain rule, one layer at a time).

use super::{Buffer, Layer, Parameters, TensorInfo};
use crate::Scalar;

/// `first` then `rest`: the output of `first` is the input of `rest`.
///
/// The compiler checks that the widths chain: `Chain<A, N>` is a [`Layer`] only when `N`'s
/// input type is `A`'s output type. Nest it for deeper nets, or write the type with
/// [`net!`](crate::net).
///
/// ```
/// use constmat::nn::{Chain, Dense, Identity, Layer, RandomInit, Relu};
/// use rand::{SeedableRng, rngs::StdRng};
///
/// let mut rng = StdRng::seed_from_u64(3);
/// let net = Chain::new(
///     Dense::<f32, 4, 8, Relu>::random(&mut rng),
///     Dense::<f32, 8, 2, Identity>::random(&mut rng),
/// );
/// let x = constmat::Matrix::<f32, 5, 4>::ones();
/// let mut ws = Layer::<f32, 5>::workspace(&net);
/// let y: &constmat::Matrix<f32, 5, 2> = net.forward(&x, &mut ws);
/// assert!(y.iter().all(|v| v.is_finite()));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Chain<A, N> {
    /// The first layer.
    pub first: A,
    /// Everything after it.
    pub rest: N,
}

impl<A, N> Chain<A, N> {
    /// `first` followed by `rest`.
    #[must_use]
    pub fn new(first: A, rest: N) -> Self {
        Self { first, rest }
    }
}

/// The buffers of a [`Chain`]: both parts' workspaces and the gradient that flows between them.
#[derive(Debug, Clone)]
pub struct ChainWorkspace<WA, WN, M> {
    /// The first layer's buffers.
    pub first: WA,
    /// The rest's buffers.
    pub rest: WN,
    /// ∂L/∂(first's output) = ∂L/∂(rest's input), written by the backward pass.
    pub d_middle: M,
}

impl<T, const B: usize, A, N> Layer<T, B> for Chain<A, N>
where
    T: Scalar,
    A: Layer<T, B>,
    N: Layer<T, B, Input = A::Output>,
{
    type Input = A::Input;
    type Output = N::Output;
    type Workspace = ChainWorkspace<A::Workspace, N::Workspace, A::Output>;

    fn workspace(&self) -> Self::Workspace {
        ChainWorkspace {
            first: self.first.workspace(),
            rest: self.rest.workspace(),
            d_middle: A::Output::zeros(),
        }
    }

    fn forward<'w>(&self, x: &A::Input, ws: &'w mut Self::Workspace) -> &'w N::Output {
        let middle = self.first.forward(x, &mut ws.first);
        self.rest.forward(middle, &mut ws.rest)
    }

    fn output(ws: &Self::Workspace) -> &N::Output {
        N::output(&ws.rest)
    }

    fn backward(
        &self,
        x: &A::Input,
        ws: &mut Self::Workspace,
        d_output: &N::Output,
        d_input: Option<&mut A::Input>,
        gradients: &mut Self,
    ) {
        // Backward runs last layer first: the rest turns ∂L/∂output into ∂L/∂middle, which the
        // first layer then turns into its own gradients (and ∂L/∂x if asked for).
        self.rest.backward(
            A::output(&ws.first),
            &mut ws.rest,
            d_output,
            Some(&mut ws.d_middle),
            &mut gradients.rest,
        );
        self.first.backward(
            x,
            &mut ws.first,
            &ws.d_middle,
            d_input,
            &mut gradients.first,
        );
    }
}

#[cfg(feature = "rand")]
impl<A: super::RandomInit, N: super::RandomInit> super::RandomInit for Chain<A, N> {
    /// Each layer initialized in turn, first to last, from the same `rng`.
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        let first = A::random(rng);
        Self::new(first, N::random(rng))
    }
}

impl<T, A: Parameters<T>, N: Parameters<T>> Parameters<T> for Chain<A, N> {
    fn tensor_count(&self) -> usize {
        self.first.tensor_count() + self.rest.tensor_count()
    }

    fn tensor(&self, k: usize) -> &[T] {
        let split = self.first.tensor_count();
        if k < split {
            self.first.tensor(k)
        } else {
            self.rest.tensor(k - split)
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        let split = self.first.tensor_count();
        if k < split {
            self.first.tensor_mut(k)
        } else {
            self.rest.tensor_mut(k - split)
        }
    }

    fn tensor_info(&self, k: usize) -> TensorInfo {
        let split = self.first.tensor_count();
        if k < split {
            self.first.tensor_info(k)
        } else {
            self.rest
                .tensor_info(k - split)
                .shifted(self.first.module_count())
        }
    }

    fn module_count(&self) -> usize {
        self.first.module_count() + self.rest.module_count()
    }

    fn zeros() -> Self {
        Self::new(A::zeros(), N::zeros())
    }
}
