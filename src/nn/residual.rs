//! Residual blocks `A = f(branch(X) + shortcut(X))`: the branch's output added to the input
//! ([`Residual`]) or to a projection of it ([`ProjectedResidual`]), then the activation.
//!
//! Derivation: `docs/backprop.md`, section "Residual blocks". With `Z = branch(X) + S(X)`:
//!
//! ```text
//! forward                               backward
//! Z = branch(X) + S(X)                  dZ = dA ⊙ f'(Z)
//! A = f(Z)                              dX = branch'ᵀ·dZ + S'ᵀ·dZ   (S = identity: + dZ)
//! ```
//!
//! The parts are layers (usually chains) of their own, saved, loaded and baked as PyTorch
//! names a module's children: `{module}.branch.{m}.{field}` and `{module}.shortcut.{m}.{field}`
//! ([`NetSpec::Block`]).

use core::mem::MaybeUninit;

use super::arena::{self, Side};
use super::bake::{PartName, Within};
use super::{
    Activation, Bake, Identity, Layer, NetSpec, Parameters, SafetensorsFile, Store, Values,
};
use crate::format::Part;

/// The part `branch` of a residual block, as a type (see [`Within`]).
#[derive(Debug, Clone, Copy)]
pub struct BranchPart;

impl PartName for BranchPart {
    const NAME: &'static str = "branch";
}

/// The part `shortcut` of a [`ProjectedResidual`], as a type (see [`Within`]).
#[derive(Debug, Clone, Copy)]
pub struct ShortcutPart;

impl PartName for ShortcutPart {
    const NAME: &'static str = "shortcut";
}

/// A residual block with the identity shortcut: `A = f(branch(X) + X)`, ResNet's basic block
/// where the branch keeps the image's channels and size (PyTorch: a module whose `forward` is
/// `self.branch(x) + x`, followed in the `nn.Sequential` by the activation's module, as every
/// constmat layer is). The branch's output must be its input's shape: a branch that
/// changes it needs a [`ProjectedResidual`].
///
/// In [`net!`](crate::net)'s image form: `Residual<[layers], A>` (the activation optional).
/// Its tensors are the branch's, named `{module}.branch.{m}.{field}`; the activation, unless
/// [`Identity`], is the next module, as for any layer.
///
/// ```
/// use constmat::nn::{Layer, Parameters, Relu};
///
/// type Block = constmat::net![
///     Input<f32, 4, 8, 8>,
///     Residual<[Conv2d<4, 4, 3, 1, 1, Relu>, Conv2d<4, 4, 3, 1, 1>], Relu>,
/// ];
/// let block = Block::zeros();
/// let x = [[[0.5_f32; 8]; 8]; 4];
/// let mut y = [[[0.0; 8]; 8]; 4];
/// block.forward_one(&x, &mut y);
/// assert_eq!(y, x); // a zero branch: the input, through ReLU
/// assert_eq!(block.tensor_info(2).name().to_string(), "0.branch.2.weight");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Residual<Br: Layer<Out = <Br as Layer>::In>, A = Identity> {
    /// The layers whose output is added to the input.
    pub branch: Br,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<Br: Layer<Out = <Br as Layer>::In>, A: Activation> Residual<Br, A> {
    /// The block around `branch`; a `const fn`, for `static`s.
    #[must_use]
    pub const fn new(branch: Br) -> Self {
        Self {
            branch,
            activation: A::VALUE,
        }
    }
}

/// A residual block with a projection shortcut: `A = f(branch(X) + shortcut(X))`, ResNet's
/// block where the branch changes the channels or the size (a strided first convolution), and
/// the shortcut (a 1 x 1 convolution of the same stride, perhaps with batch norm) gives the
/// same shape. A shortcut whose output is not the branch's is a compile error.
///
/// In [`net!`](crate::net)'s image form: `Residual<[branch layers], [shortcut layers], A>`.
/// Its tensors are the branch's, then the shortcut's, named `{module}.branch.{m}.{field}` and
/// `{module}.shortcut.{m}.{field}`.
///
/// ```
/// use constmat::nn::{Layer, Parameters, Relu};
///
/// type Block = constmat::net![
///     Input<f32, 8, 8, 8>,
///     Residual<[Conv2d<8, 16, 3, 2, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], [Conv2d<8, 16, 1, 2, 0>], Relu>,
/// ];
/// let block = Block::zeros();
/// let mut y = [[[1.0; 4]; 4]; 16];
/// block.forward_one(&[[[0.5; 8]; 8]; 8], &mut y);
/// assert_eq!(y, [[[0.0; 4]; 4]; 16]);
/// assert_eq!(block.tensor_info(4).name().to_string(), "0.shortcut.0.weight");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedResidual<Br: Layer, Sh: Layer<In = Br::In, Out = Br::Out>, A = Identity> {
    /// The layers whose output is added to the shortcut's.
    pub branch: Br,
    /// The projection of the input to the branch's output shape.
    pub shortcut: Sh,
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<Br: Layer, Sh: Layer<In = Br::In, Out = Br::Out>, A: Activation> ProjectedResidual<Br, Sh, A> {
    /// The block of `branch` and `shortcut`; a `const fn`, for `static`s.
    #[must_use]
    pub const fn new(branch: Br, shortcut: Sh) -> Self {
        Self {
            branch,
            shortcut,
            activation: A::VALUE,
        }
    }
}

/// `y = f(y + s)`, value by value, for each sample.
#[inline]
fn add_and_activate<O: Values, A: Activation, const B: usize>(y: &mut [O; B], s: &[O; B])
where
    O::Value: num_traits::Float,
{
    // Compiled for the widest vectors the CPU has (the loops over a row vectorize).
    crate::kernels::with_wide_vectors(
        #[inline(always)]
        || {
            // One flat loop: nested per row, the rows of 32 values vectorized badly.
            for (y, s) in y.iter_mut().zip(s) {
                for (y, &s) in y.values_mut().iter_mut().zip(s.values()) {
                    *y = A::apply(*y + s);
                }
            }
        },
    );
}

impl<Br, A> Layer for Residual<Br, A>
where
    Br: Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value: num_traits::Float>,
    A: Activation,
{
    type In = Br::In;
    type Out = Br::In;

    /// One module (the block, its branch a child), then the activation's unless it is
    /// [`Identity`].
    const SPEC: NetSpec = NetSpec::Block {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        parts: &[Part {
            name: BranchPart::NAME,
            spec: &Br::SPEC,
        }],
        tensors: &[],
    };

    type WithStore<S: Store> = Residual<Br::WithStore<S>, A>;

    const WORKING_BYTES: usize = Br::WORKING_BYTES;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        self.branch.forward(x, y);
        add_and_activate::<_, A, B>(y, x);
    }

    const KERNEL_BYTES: usize = Br::KERNEL_BYTES;

    const ARENA_BYTES: usize = arena::residual_arena_bytes::<Br>();

    fn forward_in_arena(&self, arena: &mut [u8], input: Side) {
        arena::residual_in_arena(&self.branch, arena, input, |y, x| {
            add_and_activate::<_, A, 1>(core::array::from_mut(y), core::array::from_ref(x));
        });
    }

    const PREDICT_SCRATCH: usize = Br::PREDICT_SCRATCH;

    fn forward_with_scratch<const B: usize, const LEN: usize>(
        &self,
        x: &[Self::In; B],
        y: &mut [Self::Out; B],
        scratch: &mut [f32; LEN],
    ) {
        const { crate::nn::check_predict_scratch(LEN, Self::PREDICT_SCRATCH) };
        self.branch.forward_with_scratch(x, y, scratch);
        add_and_activate::<_, A, B>(y, x);
    }

    fn to_store<S: Store>(&self) -> Self::WithStore<S> {
        Residual::new(self.branch.to_store())
    }
}

impl<Br, Sh, A> Layer for ProjectedResidual<Br, Sh, A>
where
    Br: Layer,
    Br::Out: Values<Value: num_traits::Float>,
    Sh: Layer<In = Br::In, Out = Br::Out>,
    A: Activation,
{
    type In = Br::In;
    type Out = Br::Out;

    /// One module (the block, its branch and shortcut children), then the activation's unless
    /// it is [`Identity`].
    const SPEC: NetSpec = NetSpec::Block {
        modules: 1 + A::TORCH_MODULE.is_some() as usize,
        parts: &[
            Part {
                name: BranchPart::NAME,
                spec: &Br::SPEC,
            },
            Part {
                name: ShortcutPart::NAME,
                spec: &Sh::SPEC,
            },
        ],
        tensors: &[],
    };

    type WithStore<S: Store> = ProjectedResidual<Br::WithStore<S>, Sh::WithStore<S>, A>;

    /// The shortcut's output beside the branch's, and both parts' own (see `Chain`'s).
    const WORKING_BYTES: usize =
        core::mem::size_of::<Br::Out>() + Br::WORKING_BYTES + Sh::WORKING_BYTES;

    fn forward<const B: usize>(&self, x: &[Self::In; B], y: &mut [Self::Out; B]) {
        self.branch.forward(x, y);
        let mut s = MaybeUninit::uninit();
        let s = self.shortcut.forward_uninit(x, &mut s);
        add_and_activate::<_, A, B>(y, s);
    }

    const KERNEL_BYTES: usize = arena::larger(Br::KERNEL_BYTES, Sh::KERNEL_BYTES);

    const ARENA_BYTES: usize = arena::projected_residual_arena_bytes::<Br, Sh>();

    fn forward_in_arena(&self, arena: &mut [u8], input: Side) {
        arena::projected_residual_in_arena(&self.branch, &self.shortcut, arena, input, |y, s| {
            add_and_activate::<_, A, 1>(core::array::from_mut(y), core::array::from_ref(s));
        });
    }

    /// The larger of the two parts': they use the scratch one after the other.
    const PREDICT_SCRATCH: usize = if Br::PREDICT_SCRATCH > Sh::PREDICT_SCRATCH {
        Br::PREDICT_SCRATCH
    } else {
        Sh::PREDICT_SCRATCH
    };

    fn forward_with_scratch<const B: usize, const LEN: usize>(
        &self,
        x: &[Self::In; B],
        y: &mut [Self::Out; B],
        scratch: &mut [f32; LEN],
    ) {
        const { crate::nn::check_predict_scratch(LEN, Self::PREDICT_SCRATCH) };
        self.branch.forward_with_scratch(x, y, scratch);
        let s = &mut MaybeUninit::uninit();
        let s = s.write([<Br::Out as super::Sample>::ZERO; B]);
        self.shortcut.forward_with_scratch(x, s, scratch);
        add_and_activate::<_, A, B>(y, s);
    }

    fn to_store<S: Store>(&self) -> Self::WithStore<S> {
        ProjectedResidual::new(self.branch.to_store(), self.shortcut.to_store())
    }
}

impl<T, Br, A> Parameters<T> for Residual<Br, A>
where
    Br: Parameters<T> + Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value: num_traits::Float>,
    A: Activation,
{
    fn tensor(&self, k: usize) -> &[T] {
        self.branch.tensor(k)
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        self.branch.tensor_mut(k)
    }

    fn zeros() -> Self {
        Self::new(Br::zeros())
    }

    fn zeros_like(&self) -> Self {
        Self::new(self.branch.zeros_like())
    }
}

impl<T, Br, Sh, A> Parameters<T> for ProjectedResidual<Br, Sh, A>
where
    Br: Parameters<T>,
    Br::Out: Values<Value: num_traits::Float>,
    Sh: Parameters<T> + Layer<In = Br::In, Out = Br::Out>,
    A: Activation,
{
    fn tensor(&self, k: usize) -> &[T] {
        let split = Br::SPEC.tensor_count();
        if k < split {
            self.branch.tensor(k)
        } else {
            self.shortcut.tensor(k - split)
        }
    }

    fn tensor_mut(&mut self, k: usize) -> &mut [T] {
        let split = Br::SPEC.tensor_count();
        if k < split {
            self.branch.tensor_mut(k)
        } else {
            self.shortcut.tensor_mut(k - split)
        }
    }

    fn zeros() -> Self {
        Self::new(Br::zeros(), Sh::zeros())
    }

    fn zeros_like(&self) -> Self {
        Self::new(self.branch.zeros_like(), self.shortcut.zeros_like())
    }
}

#[cfg(feature = "alloc")]
impl<Br, A> super::Weights for Residual<Br, A>
where
    Br: super::Weights + Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value: num_traits::Float>,
    A: Activation,
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        self.branch.write_tensor(k, out);
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        Self::new(Br::read_tensors(tensor))
    }
}

#[cfg(feature = "alloc")]
impl<Br, Sh, A> super::Weights for ProjectedResidual<Br, Sh, A>
where
    Br: super::Weights,
    Br::Out: Values<Value: num_traits::Float>,
    Sh: super::Weights + Layer<In = Br::In, Out = Br::Out>,
    A: Activation,
{
    fn write_tensor(&self, k: usize, out: &mut alloc::vec::Vec<u8>) {
        let split = Br::SPEC.tensor_count();
        if k < split {
            self.branch.write_tensor(k, out);
        } else {
            self.shortcut.write_tensor(k - split, out);
        }
    }

    fn read_tensors<'a>(tensor: &mut dyn FnMut(usize) -> &'a [u8]) -> Self {
        let split = Br::SPEC.tensor_count();
        let branch = Br::read_tensors(tensor);
        Self::new(branch, Sh::read_tensors(&mut |k| tensor(k + split)))
    }
}

impl<F, Br, A> Bake<F> for Residual<Br, A>
where
    F: SafetensorsFile,
    Br: Bake<Within<F, BranchPart>> + Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value: num_traits::Float>,
    A: Activation,
{
    const BAKED: Self = Self::new(Br::BAKED);
    const ERROR: Option<crate::format::Error> = Br::ERROR;
}

impl<F, Br, Sh, A> Bake<F> for ProjectedResidual<Br, Sh, A>
where
    F: SafetensorsFile,
    Br: Bake<Within<F, BranchPart>>,
    Br::Out: Values<Value: num_traits::Float>,
    Sh: Bake<Within<F, ShortcutPart>> + Layer<In = Br::In, Out = Br::Out>,
    A: Activation,
{
    const BAKED: Self = Self::new(Br::BAKED, Sh::BAKED);
    /// The first error in tensor order: the branch's, then the shortcut's.
    const ERROR: Option<crate::format::Error> = match Br::ERROR {
        Some(e) => Some(e),
        None => Sh::ERROR,
    };
}

#[cfg(feature = "rand")]
impl<Br, A> super::RandomInit for Residual<Br, A>
where
    Br: super::RandomInit + Layer<Out = <Br as Layer>::In>,
    Br::In: Values<Value: num_traits::Float>,
    A: Activation,
{
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        Self::new(Br::random(rng))
    }
}

#[cfg(feature = "rand")]
impl<Br, Sh, A> super::RandomInit for ProjectedResidual<Br, Sh, A>
where
    Br: super::RandomInit + Layer,
    Br::Out: Values<Value: num_traits::Float>,
    Sh: super::RandomInit + Layer<In = Br::In, Out = Br::Out>,
    A: Activation,
{
    /// The branch first, then the shortcut, from the same `rng`.
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        let branch = Br::random(rng);
        Self::new(branch, Sh::random(rng))
    }
}

#[cfg(feature = "alloc")]
pub use train::{ProjectedResidualWorkspace, ResidualWorkspace};

#[cfg(feature = "alloc")]
mod train {
    use alloc::boxed::Box;

    use super::{ProjectedResidual, Residual};
    use crate::nn::train::zeroed_samples;
    use crate::nn::{Activation, Layer, Train, Values};

    /// The buffers of a [`Residual`] block for a batch of `B`.
    #[derive(Debug, Clone)]
    pub struct ResidualWorkspace<WB, O, const B: usize> {
        /// The branch's buffers.
        pub branch: WB,
        /// `A = f(branch(X) + X)` of each sample.
        pub output: Box<[O; B]>,
        /// `dZ = dA ⊙ f'(Z)` of each sample, written by the backward pass.
        pub d_pre_activation: Box<[O; B]>,
    }

    /// The buffers of a [`ProjectedResidual`] block for a batch of `B`.
    #[derive(Debug, Clone)]
    pub struct ProjectedResidualWorkspace<WB, WS, I, O, const B: usize> {
        /// The branch's buffers.
        pub branch: WB,
        /// The shortcut's buffers.
        pub shortcut: WS,
        /// `A = f(branch(X) + shortcut(X))` of each sample.
        pub output: Box<[O; B]>,
        /// `dZ = dA ⊙ f'(Z)` of each sample, written by the backward pass.
        pub d_pre_activation: Box<[O; B]>,
        /// The shortcut's `dX`, before it is added to the branch's.
        pub d_shortcut_input: Box<[I; B]>,
    }

    /// `dZ = dA ⊙ f'(Z)`, `f'` from the outputs `A`: one flat loop over the batch (nested per
    /// row, as `Values::zip_with` goes, rows of 7 to 32 values vectorized badly).
    fn d_pre_activation<O: Values<Value: num_traits::Float>, A: Activation, const B: usize>(
        output: &[O; B],
        d_output: &[O; B],
        dz: &mut [O; B],
    ) {
        crate::kernels::with_wide_vectors(
            #[inline(always)]
            || {
                let values = output.values().iter().zip(d_output.values());
                for (dz, (&a, &da)) in dz.values_mut().iter_mut().zip(values) {
                    *dz = da * A::derivative_from_output(a);
                }
            },
        );
    }

    /// `d_input += d`, one flat loop over the batch.
    fn add_into<S: Values<Value: num_traits::Float>, const B: usize>(
        d_input: &mut [S; B],
        d: &[S; B],
    ) {
        crate::kernels::with_wide_vectors(
            #[inline(always)]
            || {
                for (dx, &d) in d_input.values_mut().iter_mut().zip(d.values()) {
                    *dx = *dx + d;
                }
            },
        );
    }

    /// `y = f(a + s)`, one flat loop over the batch: the block's output written in one pass
    /// from the branch's and the shortcut's.
    fn sum_and_activate<O: Values<Value: num_traits::Float>, A: Activation, const B: usize>(
        y: &mut [O; B],
        a: &[O; B],
        s: &[O; B],
    ) {
        crate::kernels::with_wide_vectors(
            #[inline(always)]
            || {
                let values = a.values().iter().zip(s.values());
                for (y, (&a, &s)) in y.values_mut().iter_mut().zip(values) {
                    *y = A::apply(a + s);
                }
            },
        );
    }

    impl<T, const B: usize, Br, A> Train<T, B> for Residual<Br, A>
    where
        Br: Train<T, B> + Layer<Out = <Br as Layer>::In>,
        Br::In: Values<Value: num_traits::Float>,
        A: Activation,
    {
        type Workspace = ResidualWorkspace<Br::Workspace, Br::In, B>;

        fn workspace(&self) -> Self::Workspace {
            ResidualWorkspace {
                branch: self.branch.workspace(),
                output: zeroed_samples(),
                d_pre_activation: zeroed_samples(),
            }
        }

        fn forward_train<'w>(
            &self,
            x: &[Br::In; B],
            ws: &'w mut Self::Workspace,
        ) -> &'w [Br::In; B] {
            let branch = self.branch.forward_train(x, &mut ws.branch);
            sum_and_activate::<_, A, B>(&mut ws.output, branch, x);
            &ws.output
        }

        fn output(ws: &Self::Workspace) -> &[Br::In; B] {
            &ws.output
        }

        fn backward(
            &self,
            x: &[Br::In; B],
            ws: &mut Self::Workspace,
            d_output: &[Br::In; B],
            mut d_input: Option<&mut [Br::In; B]>,
            gradients: &mut Self,
        ) {
            d_pre_activation::<_, A, B>(&ws.output, d_output, &mut ws.d_pre_activation);
            // The branch's dX (overwriting d_input), then the shortcut's: dZ itself.
            self.branch.backward(
                x,
                &mut ws.branch,
                &ws.d_pre_activation,
                d_input.as_deref_mut(),
                &mut gradients.branch,
            );
            if let Some(dx) = d_input {
                add_into::<_, B>(dx, &ws.d_pre_activation);
            }
        }

        fn update_statistics(&mut self, ws: &Self::Workspace) {
            self.branch.update_statistics(&ws.branch);
        }
    }

    impl<T, const B: usize, Br, Sh, A> Train<T, B> for ProjectedResidual<Br, Sh, A>
    where
        Br: Train<T, B>,
        Br::In: Values<Value: num_traits::Float>,
        Br::Out: Values<Value: num_traits::Float>,
        Sh: Train<T, B> + Layer<In = Br::In, Out = Br::Out>,
        A: Activation,
    {
        type Workspace =
            ProjectedResidualWorkspace<Br::Workspace, Sh::Workspace, Br::In, Br::Out, B>;

        fn workspace(&self) -> Self::Workspace {
            ProjectedResidualWorkspace {
                branch: self.branch.workspace(),
                shortcut: self.shortcut.workspace(),
                output: zeroed_samples(),
                d_pre_activation: zeroed_samples(),
                d_shortcut_input: zeroed_samples(),
            }
        }

        fn forward_train<'w>(
            &self,
            x: &[Br::In; B],
            ws: &'w mut Self::Workspace,
        ) -> &'w [Br::Out; B] {
            let branch = self.branch.forward_train(x, &mut ws.branch);
            let shortcut = self.shortcut.forward_train(x, &mut ws.shortcut);
            sum_and_activate::<_, A, B>(&mut ws.output, branch, shortcut);
            &ws.output
        }

        fn output(ws: &Self::Workspace) -> &[Br::Out; B] {
            &ws.output
        }

        fn backward(
            &self,
            x: &[Br::In; B],
            ws: &mut Self::Workspace,
            d_output: &[Br::Out; B],
            mut d_input: Option<&mut [Br::In; B]>,
            gradients: &mut Self,
        ) {
            d_pre_activation::<_, A, B>(&ws.output, d_output, &mut ws.d_pre_activation);
            self.branch.backward(
                x,
                &mut ws.branch,
                &ws.d_pre_activation,
                d_input.as_deref_mut(),
                &mut gradients.branch,
            );
            // The shortcut's dX into its own buffer, then added to the branch's.
            let d_shortcut = d_input.is_some().then_some(&mut *ws.d_shortcut_input);
            self.shortcut.backward(
                x,
                &mut ws.shortcut,
                &ws.d_pre_activation,
                d_shortcut,
                &mut gradients.shortcut,
            );
            if let Some(dx) = d_input {
                add_into::<_, B>(dx, &ws.d_shortcut_input);
            }
        }

        fn update_statistics(&mut self, ws: &Self::Workspace) {
            self.branch.update_statistics(&ws.branch);
            self.shortcut.update_statistics(&ws.shortcut);
        }
    }
}
