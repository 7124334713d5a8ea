//! Decoding tensors in `const` code: how a layer's [`Bake`](crate::nn::Bake) implementation
//! turns the bytes of a file into the arrays of a `static`.
//!
//! `const` code cannot call trait methods, so there is one set of functions per element type.
//! Each returns zeros when the file does not hold the tensor with that dtype and shape: the
//! file is checked, with a message, by [`validate`](super::validate) where
//! [`include_net!`](crate::include_net) is written, so that a build error points at the
//! user's code rather than into a layer.
//!
//! ```
//! use constmat::format::decode;
//! use constmat::io::safetensors;
//! use constmat::nn::{Dense, Parameters};
//!
//! let mut layer = Dense::<f32, 2, 1>::zeros();
//! layer.weight.as_mut_slice().copy_from_slice(&[0.5, -2.0]);
//! let bytes = safetensors::to_bytes(&layer, &[]);
//! assert_eq!(decode::f32_matrix::<1, 2>(&bytes, 0, "weight"), [[0.5, -2.0]]);
//! assert_eq!(decode::f32_matrix::<2, 1>(&bytes, 0, "weight"), [[0.0], [0.0]]); // not that shape
//! ```

use super::{Dtype, Tensor, parse};

/// The tensor `{module}.{field}` of `bytes` if the file is valid and holds it with `dtype` and
/// `shape`.
const fn find<'a>(
    bytes: &'a [u8],
    module: usize,
    field: &str,
    dtype: Dtype,
    shape: &[usize],
) -> Option<Tensor<'a>> {
    let Ok(header) = parse(bytes) else {
        return None;
    };
    match header.find_module(module, field.as_bytes()) {
        Some(tensor) if tensor.dtype as u8 == dtype as u8 && tensor.shape.is(shape) => Some(tensor),
        _ => None,
    }
}

macro_rules! decoders {
    ($t:ty, $dtype:ident, $matrix:ident, $vector:ident, $fill:ident, |$b:ident| $assemble:expr) => {
        #[doc = concat!(
            "The `", stringify!($dtype), "` tensor `{module}.{field}` of shape `[H, W]` in the ",
            "safetensors file `bytes`, or zeros when the file does not hold it.",
        )]
        #[must_use]
        pub const fn $matrix<const H: usize, const W: usize>(
            bytes: &[u8],
            module: usize,
            field: &str,
        ) -> [[$t; W]; H] {
            let mut out = [[0.0; W]; H];
            if let Some(tensor) = find(bytes, module, field, Dtype::$dtype, &[H, W]) {
                let mut row = 0;
                while row < H {
                    let (_, rest) = tensor.data.split_at(row * W * size_of::<$t>());
                    $fill(rest, &mut out[row]);
                    row += 1;
                }
            }
            out
        }

        #[doc = concat!(
            "The `", stringify!($dtype), "` tensor `{module}.{field}` of shape `[N]` in the ",
            "safetensors file `bytes`, or zeros when the file does not hold it.",
        )]
        #[must_use]
        pub const fn $vector<const N: usize>(bytes: &[u8], module: usize, field: &str) -> [$t; N] {
            let mut out = [0.0; N];
            if let Some(tensor) = find(bytes, module, field, Dtype::$dtype, &[N]) {
                $fill(tensor.data, &mut out);
            }
            out
        }

        /// Decodes `out.len()` little-endian values from the start of `bytes` (which holds at
        /// least that many: the caller found the tensor with its shape).
        const fn $fill(bytes: &[u8], out: &mut [$t]) {
            let (chunks, _) = bytes.as_chunks::<{ size_of::<$t>() }>();
            // The bound is computed once: the compiler interprets this loop step by step, and a
            // call per element (`len()`) would cost as much as the decoding.
            let n = if out.len() < chunks.len() {
                out.len()
            } else {
                chunks.len()
            };
            let mut i = 0;
            while i < n {
                // Assembled by hand: `from_le_bytes` would be a call, and calls are what costs
                // most when the compiler interprets this loop (it halves the build time).
                let $b = chunks[i];
                out[i] = <$t>::from_bits($assemble);
                i += 1;
            }
        }
    };
}

decoders!(f32, F32, f32_matrix, f32_vector, fill_f32, |b| {
    (b[0] as u32) | (b[1] as u32) << 8 | (b[2] as u32) << 16 | (b[3] as u32) << 24
});
decoders!(f64, F64, f64_matrix, f64_vector, fill_f64, |b| {
    (b[0] as u64)
        | (b[1] as u64) << 8
        | (b[2] as u64) << 16
        | (b[3] as u64) << 24
        | (b[4] as u64) << 32
        | (b[5] as u64) << 40
        | (b[6] as u64) << 48
        | (b[7] as u64) << 56
});
