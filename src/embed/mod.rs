//! Nets baked into a program: weights decoded at compile time into a `static`, inference with
//! no heap.
//!
//! A net whose weights are known when the program is built can be part of the program: its
//! type is a chain of [`StaticDense`] layers (inline `[[f32; I]; O]` arrays), and
//! [`include_net!`](crate::include_net) reads a safetensors file at compile time into a
//! `static` of that type. The program then holds only the decoded numbers, in read-only memory:
//! nothing is parsed, allocated or copied when it runs, and this module needs neither `std` nor
//! `alloc` (it is there with `default-features = false`).
//!
//! ```
//! use constmat::embed::{Identity, Infer, Relu, StaticDense};
//!
//! /// The net of `examples/mnist_static`: 28x28 pixels in [0, 1] -> 10 logits.
//! type Mnist = constmat::static_net![
//!     StaticDense<f32, 784, 128, Relu>,
//!     StaticDense<f32, 128, 64, Relu>,
//!     StaticDense<f32, 64, 10, Identity>,
//! ];
//!
//! static NET: Mnist = constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
//!
//! let blank = [0.0_f32; 784];
//! let digit: usize = NET.predict(&blank);                // the most likely class
//! let p: [f32; 10] = NET.predict_proba(&blank);          // softmax of the logits
//! let mut logits = [0.0_f32; 10];
//! NET.forward(&blank, &mut logits);                      // the raw outputs
//! assert!(digit < 10 && (p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
//! ```
//!
//! # Shapes are checked when the program is built
//!
//! Every tensor of the file is checked against the declared type: present, `F32` (or `F64` for
//! `StaticDense<f64, ..>`), the right shape, finite values, no tensor the net lacks. A file that
//! does not fit fails the build (`cargo check` too: a `static` is evaluated before code is
//! generated), and the message names the tensor the way the runtime loader
//! ([`io::safetensors`](crate::io::safetensors)) would. With the second layer declared
//! `StaticDense<f32, 128, 32, Relu>`:
//!
//! ```text
//! error[E0080]: evaluation panicked: tensor 2.weight: expected f32 [32, 128], found f32 [64, 128]
//! ```
//!
//! Names and shapes follow PyTorch's `nn.Sequential` (see [`Parameters`](crate::nn::Parameters)):
//! the net above is `Sequential(Linear(784, 128), ReLU(), Linear(128, 64), ReLU(),
//! Linear(64, 10))`, tensors `0.weight [128, 784]`, `0.bias [128]`, `2.weight`, ... So a file
//! saved by [`io::safetensors::save`](crate::io::safetensors::save) or by PyTorch's
//! `safetensors.torch.save_file(model.state_dict(), path)` bakes in directly.
//!
//! # Running
//!
//! [`Infer`] gives [`forward`](Infer::forward) (one sample) and
//! [`forward_batch`](Infer::forward_batch), [`predict`](Infer::predict) (the class) and
//! [`predict_proba`](Infer::predict_proba) (softmax probabilities). They use the same
//! [`kernels`](crate::kernels) as the heap [`Matrix`](crate::Matrix) types, on the `static`
//! arrays in place, and keep intermediate results in fixed-size arrays on the stack. `nn`'s heap
//! nets implement [`Infer`] too, so a net loaded at run time has the same single-sample path
//! and gives the same numbers; `From` copies one into the static layout.
//!
//! # Cost
//!
//! The weights are in the binary (4 bytes per parameter for `f32`: 427 KiB for the MNIST net);
//! decoding them takes the compiler about a second per 100,000 parameters. `docs/embedding.md`
//! has the measured figures: binary size, build time, time and stack per prediction.

mod header;
mod infer;
mod layer;

pub use infer::{Infer, Vector, argmax, softmax_in_place};
pub use layer::{
    Activation, Bake, Identity, Layout, Relu, SafetensorsFile, Sigmoid, Skip, StaticChain,
    StaticDense, Tanh, bake, check_file,
};

/// The type of a static net made of the given layers, first to last:
/// `static_net![L1, L2, L3]` is `StaticChain<L1, StaticChain<L2, L3>>` (as
/// [`net!`](crate::net) is for heap nets).
///
/// ```
/// use constmat::embed::{Relu, StaticChain, StaticDense};
///
/// type A = constmat::static_net![StaticDense<f32, 4, 3, Relu>, StaticDense<f32, 3, 2>];
/// type B = StaticChain<StaticDense<f32, 4, 3, Relu>, StaticDense<f32, 3, 2>>;
/// let same: fn(A) -> B = |net| net;
/// # let _ = same;
/// ```
#[macro_export]
macro_rules! static_net {
    ($layer:ty $(,)?) => { $layer };
    ($layer:ty, $($rest:ty),+ $(,)?) => {
        $crate::embed::StaticChain<$layer, $crate::static_net!($($rest),+)>
    };
}

/// A static net read at compile time from the safetensors file at `path` (relative to the file
/// that invokes it, as [`include_bytes!`]); its type is taken from the context.
///
/// Use it as the initializer of a `static` (not a `const`, whose value would be copied into
/// every place that uses it). Only the decoded numbers end up in the program. A file that does
/// not fit the type fails the build with a message naming the tensor (see
/// [`embed`](crate::embed)).
///
/// ```
/// use constmat::embed::{Infer, Relu, StaticDense};
///
/// type Mnist = constmat::static_net![
///     StaticDense<f32, 784, 128, Relu>,
///     StaticDense<f32, 128, 64, Relu>,
///     StaticDense<f32, 64, 10>,
/// ];
/// static NET: Mnist = constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
/// assert!(NET.predict(&[0.0; 784]) < 10);
/// ```
///
/// A file whose shapes do not fit the type does not build:
///
/// ```compile_fail,E0080
/// use constmat::embed::{Relu, StaticDense};
///
/// // The shipped model's first layer is 784 -> 128, not 784 -> 100.
/// type Wrong = constmat::static_net![
///     StaticDense<f32, 784, 100, Relu>,
///     StaticDense<f32, 100, 64, Relu>,
///     StaticDense<f32, 64, 10>,
/// ];
/// static NET: Wrong = constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
/// // error[E0080]: evaluation panicked: tensor 0.weight: expected f32 [100, 784], found f32 [128, 784]
/// ```
#[macro_export]
macro_rules! include_net {
    ($path:expr $(,)?) => {
        $crate::net_from_safetensors!(::core::include_bytes!($path))
    };
}

/// A static net read at compile time from safetensors bytes given by a constant expression of
/// type `&'static [u8]`; [`include_net!`](crate::include_net) with the bytes instead of a path.
///
/// ```
/// use constmat::embed::{Relu, StaticDense};
///
/// const FILE: &[u8] = include_bytes!("../../models/mnist-784-128-64-10.safetensors");
/// static LAYERS: constmat::static_net![
///     StaticDense<f32, 784, 128, Relu>,
///     StaticDense<f32, 128, 64, Relu>,
///     StaticDense<f32, 64, 10>,
/// ] = constmat::net_from_safetensors!(FILE);
/// assert_eq!(LAYERS.rest.rest.bias.len(), 10);
/// ```
#[macro_export]
macro_rules! net_from_safetensors {
    ($bytes:expr $(,)?) => {{
        // The bytes reach the `const` constructors through a type (see `SafetensorsFile`).
        struct Weights;
        impl $crate::embed::SafetensorsFile for Weights {
            const BYTES: &'static [u8] = $bytes;
        }
        // What `embed::bake` does, in a function of the calling crate: a build error then
        // points at the `static` being initialized, not only into constmat.
        const fn bake<N: $crate::embed::Bake<Weights>>() -> N {
            $crate::embed::check_file::<Weights, N>();
            N::BAKED
        }
        bake()
    }};
}
