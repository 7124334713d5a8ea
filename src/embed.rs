//! Nets baked into a program: weights in a `static`, inference with no heap.
