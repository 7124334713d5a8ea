//! Placeholder, replaced by the embedding example.
fn main() {}
