//! What the MNIST examples share: finding (or downloading) the data, the training session, its
//! Ctrl-C handling, and the report. Not an example itself (it has no `main.rs`); each example includes it with
//! `#[path = "../mnist_common/mod.rs"] mod common;`.

pub mod fetch;
pub mod interrupt;
pub mod report;
pub mod training;
