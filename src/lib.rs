//! # constmat: matrices whose shapes are checked by the compiler
//!
//! [`Matrix<T, H, W>`](Matrix) carries its height `H` and width `W` in its type. Multiplying
//! matrices whose inner dimensions differ, adding two different shapes, or storing a result in a
//! binding of the wrong shape is a compile error that names the dimensions involved:
//!
//! ```
//! use constmat::Matrix;
//!
//! let a = Matrix::<f32, 2, 3>::from_rows([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
//! let b = Matrix::<f32, 3, 1>::from_rows([[1.0], [0.0], [-1.0]]);
//! let c: Matrix<f32, 2, 1> = &a * &b; // (2x3) * (3x1) -> 2x1
//! assert_eq!(c.as_slice(), &[-2.0, -2.0]);
//! ```
//!
//! ```compile_fail,E0308
//! # use constmat::Matrix;
//! let a = Matrix::<f32, 2, 3>::zeros();
//! let b = Matrix::<f32, 4, 1>::zeros();
//! let c = &a * &b; // error[E0308]: mismatched types: expected `3`, found `4`
//! ```
//!
//! The catalogue of every shape rule and the exact message the compiler gives for it is in
//! `docs/shape-errors.md`; `cargo run --example shape_errors` shows each one on your own toolchain.
//!
//! ## Layers of the crate
//!
//! | module | what it holds | needs |
//! | --- | --- | --- |
//! | [`kernels`] | the arithmetic (matrix products, transposes) on borrowed row-major arrays; SIMD for `f32`/`f64` | `core` only |
//! | [`format`] | the safetensors format as `const fn`s: the one rule every weights file is held to | `core` only |
//! | [`nn`] | statically typed nets: one definition per layer for training, inference and baked nets; losses, optimizers, hand-written backprop | `core`; training needs `alloc` |
//! | [`embed`] | nets baked into a `static` at compile time (`include_net!`, `Baked<Net>`) | `core` only |
//! | [`Matrix`] | the owning, heap-backed matrix, its operators and shape rules | `alloc` |
//! | `data` | the IDX / MNIST reader | feature `data` |
//! | `io` | saving and loading weights files at run time (safetensors) | feature `safetensors` |
//!
//! ## Borrowed views
//!
//! A borrowed view of an `H x W` matrix is simply `&[[T; W]; H]` (or `&mut`): row-major, shape in
//! the type, no heap. A [`Matrix`] derefs to one, and a `static` array is one already, so the
//! [`kernels`] and the [`nn`] layers run on heap matrices and on weights baked into read-only
//! memory alike.
//!
//! ## Shape rules checked at build time
//!
//! Most rules (`*`, `+`, assignment, broadcasting, the transposed products) are type errors and
//! show up in `cargo check` and in an editor. The structural operations whose rule is an equation
//! between dimensions ([`Matrix::reshape`], [`Matrix::concat_columns`], [`Matrix::concat_rows`],
//! [`Matrix::split_columns`], [`Matrix::split_rows`], [`Matrix::submatrix`],
//! [`Matrix::from_flat`]) check it with
//! `const { assert!(..) }`. Rust evaluates such assertions after type checking, when the code is
//! generated, so **these errors are reported by `cargo build` (and `cargo test`, `cargo run`), not
//! by `cargo check` or an editor's live check**.
//!
//! ## Features
//!
//! - `std` (default): implies `alloc`; use the standard library's float functions.
//! - `alloc`: the owning [`Matrix`] type, heap storage for layers and training. Without it,
//!   [`kernels`], [`format`], [`nn`]'s layers (with inline storage), [`embed`] and [`Scalar`]
//!   remain, usable on `&[[T; W]; H]` arrays and `static` nets with no heap at all.
//! - `threads` (opt-in): large matrix products split across rayon's pool
//!   (`kernels::use_threads`).
//! - `rand` (default): [`Matrix::random`] from any `rand` distribution, weight initialization.
//! - `data` (default): the IDX / MNIST reader ([`data`]).
//! - `safetensors` (default): saving and loading weights ([`io::safetensors`]).
//!
//! Without `std`, float functions (`exp`, `sqrt`, ...) come from `libm` through `num-traits`.
#![no_std]
#![deny(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
// The tests run on a host, with `std` whichever features the library has.
#[cfg(any(feature = "std", test))]
extern crate std;

#[cfg(feature = "data")]
pub mod data;
pub mod embed;
pub mod format;
#[cfg(feature = "safetensors")]
pub mod io;
pub mod kernels;
pub mod nn;
pub mod quant;
mod scalar;

#[cfg(feature = "alloc")]
mod error;
#[cfg(feature = "alloc")]
mod matrix;

#[cfg(feature = "alloc")]
pub use error::LengthError;
#[cfg(feature = "alloc")]
pub use matrix::Matrix;
pub use scalar::Scalar;

// `net!`'s size checks, placed at the layer that fails them (see `constmat_macros::at`).
#[doc(hidden)]
pub use constmat_macros::at as __at;

// The code blocks of `docs/embedding.md` run as doc tests, as a user would copy them (paths in
// them are relative to this file, as they would be to a user's `src/main.rs`); a block that
// names another file (`// src/bin/with_model.rs`) is `ignore`d here and built at that path by
// `tests/embedding_guide.rs`, which builds every block as a user's crate.
#[cfg(doctest)]
#[doc = include_str!("../docs/embedding.md")]
struct EmbeddingGuide;

// The same for `docs/quantization.md`.
#[cfg(all(doctest, feature = "rand"))]
#[doc = include_str!("../docs/quantization.md")]
struct QuantizationGuide;
