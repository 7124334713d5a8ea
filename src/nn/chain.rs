//! Composition: a layer followed by another whose input is the first one's output.
//!
//! Derivation: `docs/backprop.md`, section "The whole net" (the chain rule, one layer at a time).

use core::mem::MaybeUninit;

use super::arena::{self, Side};
use super::{Bake, Layer, NetSpec, Parameters, SafetensorsFile, Skip, Store};

/// `first` then `rest`: the output of `first` is the input of `rest`.
///
/// The type itself requires that the widths chain (`rest`'s input is `first`'s output), so a
/// net whose layers do not fit is an error wherever its type is used, naming both widths
/// (`expected an array with a size of 8, found one with a size of 6`). Nest it for deeper
/// nets, or write the type with [`net!`](crate::net).
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
/// let mut y = [[0.0; 2]; 5];
/// net.forward(&[[1.0; 4]; 5], &mut y);
/// assert!(y.as_flattened().iter().all(|v| v.is_finite()));
/// ```
///
/// ```compile_fail,E0271
/// use constmat::nn::{Chain, Dense, Identity, Inline};
/// // 8 outputs into 6 inputs.
/// static NET: Chain<Dense<f32, 2, 8, Identity, Inline>, Dense<f32, 6, 1, Identity, Inline>> =
///     Chain::new(Dense::new([[0.0; 2]; 8], [0.0; 8]), Dense::new([[0.0; 6]], [0.0]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Chain<A: Layer, N: Layer<In = A::Out>> {
    /// The first layer.
    pub first: A,
    /// Everything after it.
    pub rest: N,
}

impl<A: Layer, N: Layer<In = A::Out>> Chain<A, N> {
    /// `first` followed by `rest`; a `const fn`, so it can initialize a `static`.
    #[must_use]
    pub const fn new(first: A, rest: N) -> Self {
        Self { first, rest }
    }
}

impl<A: Layer, N: Layer<In = A::Out>> Layer for Chain<A, N> {
    type In = A::In;
    type Out = N::Out;

    /// The first part's modules, then the rest's, numbered after them.
    const SPEC: NetSpec = NetSpec::Chain(&A::SPEC, &N::SPEC);

    type WithStore<S: Store> = Chain<A::WithStore<S>, N::WithStore<S>>;

    /// The first layer's output and both parts' own, added: an optimized build may keep a
    /// part's buffers while the other part runs (the frames are merged when inlined), so the
    /// sum is the bound that holds.
    const WORKING_BYTES: usize =
        core::mem::size_of::<A::Out>() + A::WORKING_BYTES + N::WORKING_BYTES;

    /// The larger of the two parts': their layers run one after another.
    const KERNEL_BYTES: usize = arena::larger(A::KERNEL_BYTES, N::KERNEL_BYTES);

    /// The larger of the two parts': the rest runs where the first part's input was.
    const ARENA_BYTES: usize = arena::larger(A::ARENA_BYTES, N::ARENA_BYTES);

    const ARENA_FLIPS: bool = A::ARENA_FLIPS != N::ARENA_FLIPS;

    /// The first part, then the rest on its output, in the whole arena again.
    #[inline]
    fn forward_in_arena(&self, arena: &mut [u8], input: Side) {
        self.first.forward_in_arena(arena, input);
        self.rest
            .forward_in_arena(arena, input.after(A::ARENA_FLIPS));
    }

    /// The first layer's outputs into a buffer that is not zeroed first
    /// ([`Layer::forward_uninit`]), then the rest's.
    #[inline]
    fn forward<const B: usize>(&self, x: &[A::In; B], y: &mut [N::Out; B]) {
        let mut middle = MaybeUninit::uninit();
        let middle = self.first.forward_uninit(x, &mut middle);
        self.rest.forward(middle, y);
    }

    #[inline]
    fn forward_uninit<'y, const B: usize>(
        &self,
        x: &[A::In; B],
        y: &'y mut MaybeUninit<[N::Out; B]>,
    ) -> &'y mut [N::Out; B] {
        let mut middle = MaybeUninit::uninit();
        let middle = self.first.forward_uninit(x, &mut middle);
        self.rest.forward_uninit(middle, y)
    }

    /// The larger of the two parts': they use the scratch one after the other.
    const PREDICT_SCRATCH: usize = if A::PREDICT_SCRATCH > N::PREDICT_SCRATCH {
        A::PREDICT_SCRATCH
    } else {
        N::PREDICT_SCRATCH
    };

    #[inline]
    fn forward_with_scratch<const B: usize, const LEN: usize>(
        &self,
        x: &[A::In; B],
        y: &mut [N::Out; B],
        scratch: &mut [f32; LEN],
    ) {
        const { crate::nn::check_predict_scratch(LEN, Self::PREDICT_SCRATCH) };
        if Self::PREDICT_SCRATCH == 0 {
            self.forward(x, y);
            return;
        }
        // As `forward`: the middle samples not zeroed first where the first part needs no
        // scratch.
        let mut middle = MaybeUninit::uninit();
        let middle = if A::PREDICT_SCRATCH == 0 {
            self.first.forward_uninit(x, &mut middle)
        } else {
            let middle = middle.write([<A::Out as crate::nn::Sample>::ZERO; B]);
            self.first.forward_with_scratch(x, middle, scratch);
            middle
        };
        self.rest.forward_with_scratch(middle, y, scratch);
    }

    fn to_store<S: Store>(&self) -> Self::WithStore<S> {
        Chain::new(self.first.to_store(), self.rest.to_store())
    }
}

#[cfg(feature = "alloc")]
pub use train::ChainWorkspace;

#[cfg(feature = "alloc")]
mod train {
    use alloc::boxed::Box;

    use super::Chain;
    use crate::nn::train::zeroed_samples;
    use crate::nn::{Layer, Train};

    /// The buffers of a [`Chain`]: both parts' workspaces and the gradient that flows between
    /// them.
    #[derive(Debug, Clone)]
    pub struct ChainWorkspace<WA, WN, M> {
        /// The first layer's buffers.
        pub first: WA,
        /// The rest's buffers.
        pub rest: WN,
        /// ∂L/∂(first's output) = ∂L/∂(rest's input), written by the backward pass.
        pub d_middle: M,
    }

    impl<T, const B: usize, A, N> Train<T, B> for Chain<A, N>
    where
        A: Train<T, B>,
        N: Train<T, B> + Layer<In = A::Out>,
    {
        type Workspace = ChainWorkspace<A::Workspace, N::Workspace, Box<[A::Out; B]>>;

        fn workspace(&self) -> Self::Workspace {
            ChainWorkspace {
                first: self.first.workspace(),
                rest: self.rest.workspace(),
                d_middle: zeroed_samples(),
            }
        }

        fn forward_train<'w>(
            &self,
            x: &[A::In; B],
            ws: &'w mut Self::Workspace,
        ) -> &'w [N::Out; B] {
            let middle = self.first.forward_train(x, &mut ws.first);
            self.rest.forward_train(middle, &mut ws.rest)
        }

        fn output(ws: &Self::Workspace) -> &[N::Out; B] {
            N::output(&ws.rest)
        }

        fn backward(
            &self,
            x: &[A::In; B],
            ws: &mut Self::Workspace,
            d_output: &[N::Out; B],
            d_input: Option<&mut [A::In; B]>,
            gradients: &mut Self,
        ) {
            // Backward runs last layer first: the rest turns ∂L/∂output into ∂L/∂middle, which
            // the first layer then turns into its own gradients (and ∂L/∂x if asked for).
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

        fn update_statistics(&mut self, ws: &Self::Workspace) {
            self.first.update_statistics(&ws.first);
            self.rest.update_statistics(&ws.rest);
        }
    }
}

#[cfg(feature = "rand")]
impl<A, N> super::RandomInit for Chain<A, N>
where
    A: super::RandomInit + Layer,
    N: super::RandomInit + Layer<In = A::Out>,
{
    /// Each layer initialized in turn, first to last, from the same `rng`.
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        let first = A::random(rng);
        Self::new(first, N::random(rng))
    }
}

impl<T, A: Parameters<T>, N: Parameters<T> + Layer<In = A::Out>> Parameters<T> for Chain<A, N> {
    fn tensor(&self, k: usize) -> &[T] {
        let split = A::SPEC.tensor_count();
        if k < split {
            self.first.tensor(k)
        } else {
            self.rest.tensor(k - split)
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        let split = A::SPEC.tensor_count();
        if k < split {
            self.first.tensor_mut(k)
        } else {
            self.rest.tensor_mut(k - split)
        }
    }

    fn zeros() -> Self {
        Self::new(A::zeros(), N::zeros())
    }

    fn zeros_like(&self) -> Self {
        Self::new(self.first.zeros_like(), self.rest.zeros_like())
    }
}

#[cfg(feature = "alloc")]
impl<A: super::Weights, N: super::Weights + Layer<In = A::Out>> super::Weights for Chain<A, N> {
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        let split = A::SPEC.tensor_count();
        if k < split {
            self.first.write_tensor(k, out);
        } else {
            self.rest.write_tensor(k - split, out);
        }
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let split = A::SPEC.tensor_count();
        let first = A::read_tensors(tensor);
        Self::new(first, N::read_tensors(&mut |k| tensor(k + split)))
    }
}

impl<F, A, N> Bake<F> for Chain<A, N>
where
    F: SafetensorsFile,
    A: Bake<F>,
    N: Bake<Skip<F, A>> + Layer<In = A::Out>,
{
    const BAKED: Self = Self::new(A::BAKED, N::BAKED);
    /// The first error in layer order, as [`format::check_net`](crate::format::check_net)
    /// reports it.
    const ERROR: Option<crate::format::Error> = match A::ERROR {
        Some(e) => Some(e),
        None => N::ERROR,
    };
}
