//! Weights in and out.
//!
//! [`safetensors`](mod@safetensors): save and load a net's parameters in the format PyTorch, JAX
//! and Hugging Face tools read and write, with every tensor's presence, dtype and shape checked
//! against the net's type. Saving replaces a file whole ([`write_atomically`]): a save that fails
//! part-way leaves the file that was there.

mod atomic;
pub mod safetensors;

pub use atomic::write_atomically;
