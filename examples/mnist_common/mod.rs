//! What the MNIST and Fashion-MNIST examples share: finding (or downloading) the data, the training session, varied training images, its
//! Ctrl-C handling, and the report. Not an example itself (it has no `main.rs`); each example includes it with
//! `#[path = "../mnist_common/mod.rs"] mod common;`.

pub mod augment;
pub mod data_set;
pub mod fetch;
pub mod interrupt;
pub mod report;
pub mod training;
