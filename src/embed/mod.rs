//! Nets baked into a program: weights decoded at compile time into a `static`, inference with
//! no heap.
//!
//! A net whose weights are known when the program is built can be part of the program. Its
//! type is the one it was trained as (a [`net!`](crate::net) of [`nn`](crate::nn) layers),
//! with its parameters stored inline: [`Baked<Net>`](Baked). [`include_net!`](crate::include_net)
//! reads a safetensors file at compile time into a `static` of that type. The program then
//! holds only the decoded numbers, in read-only memory: nothing is parsed, allocated or copied
//! when it runs, and none of this needs `std` or `alloc` (it is there with
//! `default-features = false`).
//!
//! ```
//! use constmat::embed::Baked;
//! use constmat::nn::{Dense, Layer, Predict, Relu};
//!
//! /// The net of `examples/mnist_static`: 28x28 pixels in [0, 1] -> 10 logits.
//! type Mnist = constmat::net![
//!     Dense<f32, 784, 128, Relu>,
//!     Dense<f32, 128, 64, Relu>,
//!     Dense<f32, 64, 10>,
//! ];
//!
//! static NET: Baked<Mnist> = constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
//!
//! let blank = [0.0_f32; 784];
//! let digit: usize = NET.predict(&blank);                // the most likely class
//! let p: [f32; 10] = NET.predict_proba(&blank);          // softmax of the logits
//! let mut logits = [0.0_f32; 10];
//! NET.forward_one(&blank, &mut logits);                  // the raw outputs
//! assert!(digit < 10 && (p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
//! ```
//!
//! A convolutional net bakes the same way. Its type is `net!`'s image form, which starts with
//! `Input<T, channels, height, width>` and computes every layer's output size; a sample is an
//! image, `[[[T; W]; H]; C]`:
//!
//! ```
//! use constmat::embed::Baked;
//! use constmat::nn::{Predict, Relu};
//!
//! /// The LeNet-5 of `examples/mnist_cnn`: 1 x 28 x 28 pixels in [0, 1] -> 10 logits.
//! type LeNet = constmat::net![
//!     Input<f32, 1, 28, 28>,
//!     Conv2d<1, 6, 5, 1, 2, Relu>, // 6 filters of 5 x 5, stride 1, padding 2
//!     MaxPool2d<2>,
//!     Conv2d<6, 16, 5, Relu>,
//!     MaxPool2d<2>,
//!     Flatten,                     // 16 x 5 x 5 = 400, computed
//!     Dense<400, 120, Relu>,
//!     Dense<120, 84, Relu>,
//!     Dense<84, 10>,
//! ];
//!
//! static CNN: Baked<LeNet> = constmat::include_net!("../../models/mnist-cnn-lenet5.safetensors");
//!
//! /// A 28 x 28 grayscale image, row-major, white on black as in MNIST.
//! fn classify(pixels: &[u8; 784]) -> usize {
//!     let image = [core::array::from_fn(|r| {
//!         core::array::from_fn(|c| f32::from(pixels[r * 28 + c]) / 255.0)
//!     })];
//!     CNN.predict(&image)
//! }
//! assert!(classify(&[0; 784]) < 10);
//! ```
//!
//! # Shapes are checked when the program is built
//!
//! The file is held to the same rule as a file loaded at run time
//! ([`format::validate`](crate::format::validate), the one implementation both use): valid
//! safetensors, every tensor of the net present with its dtype and shape, finite values, no
//! tensor the net lacks. A file that does not fit fails the build at the `include_net!` that
//! reads it, with the run-time loader's message. With the second layer declared
//! `Dense<f32, 128, 32, Relu>`:
//!
//! ```text
//! error[E0080]: evaluation panicked: tensor 2.weight: expected f32 [32, 128], found f32 [64, 128]
//!  --> src/main.rs:9:28
//!   |
//! 9 | static NET: Baked<Wrong> = constmat::include_net!("../models/mnist-784-128-64-10.safetensors");
//!   |                            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ evaluation of `NET::bake::<...>::{constant#0}` failed here
//! ```
//!
//! (The compiler writes the net's type out in full where this shows `...`, and adds a
//! `note: erroneous constant encountered` at the same line.) The tensor is named as in PyTorch's
//! `nn.Sequential`, where activations count as modules: `2.weight` is the weight of the second
//! `Dense` here, and in the LeNet above `0`, `3`, `7`, `9` and `11` are the layers with weights.
//!
//! In a `static`, the error appears in `cargo check` (and an editor) as well as in `cargo
//! build`, since the compiler evaluates a `static` while checking the crate. Elsewhere (a
//! `let`, a function's return value) the macro is still evaluated at compile time, by `cargo
//! build`; `cargo check` does not evaluate constants inside function bodies.
//!
//! Names and shapes follow PyTorch's `nn.Sequential` (see [`Parameters`](crate::nn::Parameters)):
//! the net above is `Sequential(Linear(784, 128), ReLU(), Linear(128, 64), ReLU(),
//! Linear(64, 10))`, tensors `0.weight [128, 784]`, `0.bias [128]`, `2.weight`, ... So a file
//! saved by [`io::safetensors::save`](crate::io::safetensors::save) or by PyTorch's
//! `safetensors.torch.save_file(model.state_dict(), path)` bakes in directly.
//!
//! # Running
//!
//! A baked net is a [`Layer`] like any other: [`forward`](crate::nn::Layer::forward)
//! (a batch), [`forward_one`](crate::nn::Layer::forward_one), and through
//! [`Predict`](crate::nn::Predict) the class and the class probabilities. They run the same
//! code as the heap net, on the `static` arrays in place, and keep intermediate results in
//! fixed-size arrays on the stack. [`Layer::to_store`] converts
//! between a baked net and its heap form.
//!
//! # Cost
//!
//! The weights are in the binary (4 bytes per parameter for `f32`: 427 KiB for the MNIST net);
//! checking and copying them takes the compiler about 0.1 s per 100,000 parameters, and only a
//! tensor of about 250 MB reaches the compiler's limit on a constant's evaluation.
//! `docs/embedding.md` has the measured figures: binary size, build time, time and stack per
//! prediction.

use crate::format::Message;
use crate::nn::{Bake, Inline, Layer, SafetensorsFile};

/// The net `N` with its parameters stored inline: the type of a baked `static`.
///
/// `N` is written as for training ([`Heap`](crate::nn::Heap) storage, the default); `Baked<N>`
/// is the same layers with [`Inline`] storage.
///
/// ```
/// use constmat::embed::Baked;
/// use constmat::nn::{Dense, Inline, Relu};
///
/// type Net = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2>];
/// type Spelled = constmat::net![Dense<f32, 4, 3, Relu, Inline>, Dense<f32, 3, 2, constmat::nn::Identity, Inline>];
/// let same: fn(Baked<Net>) -> Spelled = |net| net;
/// # let _ = same;
/// ```
pub type Baked<N> = <N as Layer>::WithStore<Inline>;

/// The net `N` stored in the safetensors file `F`, with the file checked against `N`'s type;
/// what [`include_net!`](crate::include_net) does, for a caller that names the file's type
/// itself.
///
/// The check ([`bake_error`]) is a `const` block evaluated where this function is
/// instantiated, so a file that does not fit fails the build, in a `static` or in a `let`.
/// [`include_net!`](crate::include_net) writes the same check into the caller's crate, so that
/// the error points there and does not name the net's whole type.
///
/// See [`SafetensorsFile`] for an example.
#[must_use]
pub const fn bake<F: SafetensorsFile, N: Bake<F>>() -> N {
    const {
        if let Some(e) = bake_error::<F, N>() {
            e.panic()
        }
    };
    N::BAKED
}

/// Why the file `F` does not fit the net `N`, if it does not: the layout (names, dtypes,
/// shapes; [`format::validate_layout`](crate::format::validate_layout) on the file's tensors as
/// found once for the layers) first, then the values ([`Bake::ERROR`]). The check behind
/// [`bake`] and [`include_net!`](crate::include_net).
#[must_use]
pub const fn bake_error<F: SafetensorsFile, N: Bake<F>>() -> Option<crate::format::Error> {
    match F::INDEX.validate_layout(&N::SPEC) {
        Err(e) => Some(e),
        Ok(()) => N::ERROR,
    }
}

/// A baked net read at compile time from the safetensors file at `path` (relative to the file
/// that invokes it, as [`include_bytes!`]); its type, [`Baked<Net>`](Baked), is taken from the
/// context.
///
/// Use it as the initializer of a `static` (not a `const`, whose value would be copied into
/// every place that uses it). Only the decoded numbers end up in the program. A file that does
/// not fit the type fails the build here, with a message naming the tensor (see
/// [`embed`](crate::embed)).
///
/// ```
/// use constmat::embed::Baked;
/// use constmat::nn::{Dense, Predict, Relu};
///
/// type Mnist = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];
/// static NET: Baked<Mnist> = constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
/// assert!(NET.predict(&[0.0; 784]) < 10);
/// ```
///
/// A file whose shapes do not fit the type does not build:
///
/// ```compile_fail,E0080
/// use constmat::embed::Baked;
/// use constmat::nn::{Dense, Relu};
///
/// // The shipped model's first layer is 784 -> 128, not 784 -> 100.
/// type Wrong = constmat::net![Dense<f32, 784, 100, Relu>, Dense<f32, 100, 64, Relu>, Dense<f32, 64, 10>];
/// static NET: Baked<Wrong> = constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
/// // error[E0080]: evaluation panicked: tensor 0.weight: expected f32 [100, 784], found f32 [128, 784]
/// ```
#[macro_export]
macro_rules! include_net {
    ($path:expr $(,)?) => {
        $crate::net_from_safetensors!(::core::include_bytes!($path))
    };
}

/// A baked net read at compile time from safetensors bytes given by a constant expression of
/// type `&'static [u8]`; [`include_net!`](crate::include_net) with the bytes instead of a path.
///
/// ```
/// use constmat::embed::Baked;
/// use constmat::nn::{Dense, Relu};
///
/// const FILE: &[u8] = include_bytes!("../../models/mnist-784-128-64-10.safetensors");
/// type Mnist = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];
/// static LAYERS: Baked<Mnist> = constmat::net_from_safetensors!(FILE);
/// assert_eq!(LAYERS.rest.rest.bias.len(), 10);
/// ```
#[macro_export]
macro_rules! net_from_safetensors {
    ($bytes:expr $(,)?) => {{
        // The bytes reach the layers' `const` values through a type (see `SafetensorsFile`).
        struct Weights;
        impl $crate::nn::SafetensorsFile for Weights {
            const BYTES: &'static [u8] = $bytes;
        }
        // The net is taken in a generic function and checked here, outside it, so that a file
        // that does not fit fails the build at this line with a short message: a panic inside
        // a generic function would name the net's whole type.
        const fn baked<N: $crate::nn::Bake<Weights>>() -> N {
            <N as $crate::nn::Bake<Weights>>::BAKED
        }
        const fn error<N: $crate::nn::Bake<Weights>>(
            _: &N,
        ) -> ::core::option::Option<$crate::format::Error> {
            $crate::embed::bake_error::<Weights, N>()
        }
        // Evaluated at compile time wherever the macro is written.
        const {
            let net = baked();
            if let ::core::option::Option::Some(e) = error(&net) {
                e.panic()
            }
            net
        }
    }};
}

/// Fails the build when the net `N` does not fit a memory budget: `rom` bytes of read-only
/// memory for its parameters ([`Layer::PARAMETER_BYTES`]) and `ram` bytes of working memory for
/// one prediction ([`Layer::WORKING_BYTES`]). Call it in a `const`, next to the `static`:
///
/// ```
/// use constmat::embed::{Baked, check_memory_budget};
/// use constmat::nn::{Dense, Layer, Relu};
///
/// type Mnist = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 64, Relu>, Dense<f32, 64, 10>];
/// // 512 KiB of flash and 4 KiB of stack for the net: it fits (437,568 and 768 bytes).
/// const _: () = check_memory_budget::<Baked<Mnist>>(512 * 1024, 4 * 1024);
/// ```
///
/// A net that does not fit is a build error naming both numbers (`tests/ui/fail`):
///
/// ```text
/// error[E0080]: evaluation panicked: the net's parameters take 437568 bytes of read-only memory, more than the budget of 262144
/// ```
///
/// # Panics
///
/// (At compile time, in a `const`.) When the net takes more than either budget.
// `track_caller`: the compiler's note on a failed budget then names no frame in this crate, and
// so not the net's whole type.
#[track_caller]
pub const fn check_memory_budget<N: Layer>(rom: usize, ram: usize) {
    if N::PARAMETER_BYTES > rom {
        Message::new()
            .str("the net's parameters take ")
            .number(N::PARAMETER_BYTES)
            .str(" bytes of read-only memory, more than the budget of ")
            .number(rom)
            .panic()
    }
    if N::WORKING_BYTES > ram {
        Message::new()
            .str("a prediction of the net takes ")
            .number(N::WORKING_BYTES)
            .str(" bytes of working memory, more than the budget of ")
            .number(ram)
            .panic()
    }
}
