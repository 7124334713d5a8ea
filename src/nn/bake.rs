//! Building a net from a safetensors file at compile time: the plumbing of
//! [`include_net!`](crate::include_net).
//!
//! Stable Rust cannot call a trait's methods in `const` code, so the bytes of the file reach
//! each layer through a type ([`SafetensorsFile`]), and each layer kind's value is an
//! associated constant ([`Bake::BAKED`]) computed from it.

use core::marker::PhantomData;

use super::Layer;

/// A safetensors file known at compile time, as a type.
///
/// ```
/// use constmat::embed::Baked;
/// use constmat::nn::{Dense, Predict, Relu, SafetensorsFile};
///
/// // What `include_net!("../../models/mnist-784-128-64-10.safetensors")` writes for you.
/// struct Weights;
/// impl SafetensorsFile for Weights {
///     const BYTES: &'static [u8] = include_bytes!("../../models/mnist-784-128-64-10.safetensors");
/// }
/// type Mnist = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];
/// static NET: Baked<Mnist> = constmat::embed::bake::<Weights, Baked<Mnist>>();
/// assert!(NET.predict(&[0.0; 784]) < 10);
/// ```
pub trait SafetensorsFile {
    /// The whole file.
    const BYTES: &'static [u8];
    /// The `nn.Sequential` index of the module where the layer being read starts: 0 for a
    /// whole net; [`Skip`] sets it for the later layers of a chain.
    const FIRST_MODULE: usize = 0;
    /// The file's tensors, found once for all the layers of a net rather than once per tensor
    /// (the compiler interprets each step of the baking). Not meant to be set.
    #[doc(hidden)]
    const INDEX: crate::format::Index<'static> = crate::format::Index::of(Self::BYTES);
}

/// The same file as `F`, read from the first module after the layers `L`: how a
/// [`Chain`](super::Chain) hands the file on to its `rest`.
#[derive(Debug)]
pub struct Skip<F, L>(PhantomData<fn() -> (F, L)>);

impl<F: SafetensorsFile, L: Layer> SafetensorsFile for Skip<F, L> {
    const BYTES: &'static [u8] = F::BYTES;
    const FIRST_MODULE: usize = F::FIRST_MODULE + L::SPEC.modules();
    const INDEX: crate::format::Index<'static> = F::INDEX;
}

/// The name of a part of a block, as a type (stable Rust takes no `&str` as a const
/// parameter): [`Residual`](super::Residual)'s `branch` and `shortcut`.
pub trait PartName {
    /// The part's name, as PyTorch names the child module.
    const NAME: &'static str;
}

/// The same file as `F`, read by the layers of part `P` of the block that starts at
/// `F::FIRST_MODULE`: their modules are numbered from 0 again, and their tensor
/// `{m}.{field}` is the file's `{block}.{P::NAME}.{m}.{field}`.
#[derive(Debug)]
pub struct Within<F, P>(PhantomData<fn() -> (F, P)>);

impl<F: SafetensorsFile, P: PartName> SafetensorsFile for Within<F, P> {
    const BYTES: &'static [u8] = F::BYTES;
    const FIRST_MODULE: usize = 0;
    const INDEX: crate::format::Index<'static> = F::INDEX.within(F::FIRST_MODULE, P::NAME);
}

/// A layer (or net) whose value can be read from the file `F` at compile time: implemented by
/// each layer kind with [`Inline`](super::Inline) storage, for each element type a file can
/// hold, and by [`Chain`](super::Chain).
///
/// The error is a separate constant rather than a panic (or a `Result` around the value), so
/// that it can be raised where [`include_net!`](crate::include_net) is written, and so that
/// `const` code can take the value without running a generic destructor:
/// [`embed::bake_error`](crate::embed::bake_error) evaluates
/// [`format::validate_layout`](crate::format::validate_layout) against the net's
/// [`SPEC`](Layer::SPEC) (names, dtypes, shapes), then `ERROR` (a value the decoding found not
/// finite, [`format::decode`](crate::format::decode)); [`embed::bake`](crate::embed::bake)
/// panics with that before it takes `BAKED`, and the macro after (outside a generic function,
/// so that the message does not name the net's type; `BAKED` of a file that does not fit is
/// zeros, never a panic). A layer computes both in one pass over its values.
pub trait Bake<F: SafetensorsFile>: Layer + Sized {
    /// The layer read from `F`, starting at module `F::FIRST_MODULE` (zeros where the file
    /// does not fit: then `ERROR` says why).
    const BAKED: Self;
    /// The first problem found while reading the layer's values, in the order of
    /// [`check_net`](crate::format::check_net).
    const ERROR: Option<crate::format::Error>;
}
