//! Tensors of a safetensors file read in `const` code: their values checked 256 bytes at a
//! time and copied in one block.
//!
//! Baking a net ([`include_net!`](crate::include_net)) runs in the compiler's interpreter,
//! which takes roughly a microsecond per step of `const` code, so a loop over the elements
//! cost about 1 s per 100,000 parameters; and the lint `long_running_const_eval` counts loop
//! iterations and calls (it stops an evaluation after about 2 million), so such a loop stopped
//! the build near a million parameters per layer. Here a loop iteration takes 256 bytes (64
//! `f32`s) as sixteen `u128`s and tests all of their exponents with three integer operations per
//! `u128`, written out rather than looped, and the values are then copied with one
//! `copy_nonoverlapping`, which the interpreter does as one memory copy: about two counted steps
//! per 256 bytes, so the lint is reached only by a tensor of about 250 MB.
//!
//! Two rules make this the same as reading element by element, which the tests compare it
//! against on every position of a bad value:
//! - A float is finite unless its exponent bits are all ones. With the sign bit cleared, adding
//!   one to the lowest exponent bit carries into the sign bit exactly when they were all ones,
//!   and never past it, so each 32-bit (or 64-bit) lane of a `u128` is tested on its own.
//! - The copy and the lanes assume little-endian memory, the byte order of the file; a
//!   big-endian target decodes element by element instead.

#![allow(unsafe_code)]

/// Bytes taken per loop iteration of the checks.
const BLOCK: usize = 256;
/// `u128`s in a block.
const WORDS: usize = BLOCK / 16;

/// The masks of the finiteness test for lanes of `BITS` bits: all bits but the sign, the
/// lowest exponent bit, and the sign bit, repeated across a `u128`.
const fn lane_masks(bits: u32, exponent_bits: u32) -> (u128, u128, u128) {
    let lane: u128 = (1 << bits) - 1;
    let one: u128 = 1 << (bits - 1 - exponent_bits);
    let sign: u128 = 1 << (bits - 1);
    let (mut magnitude, mut lowest, mut signs) = (0, 0, 0);
    let mut shift = 0;
    while shift < 128 {
        magnitude |= (lane ^ sign) << shift;
        lowest |= one << shift;
        signs |= sign << shift;
        shift += bits;
    }
    (magnitude, lowest, signs)
}

const F32_MASKS: (u128, u128, u128) = lane_masks(32, 8);
const F64_MASKS: (u128, u128, u128) = lane_masks(64, 11);

/// Whether any lane of the block holds a NaN or an infinity (see the module's first rule).
#[inline]
const fn block_has_non_finite(
    block: &[u8; BLOCK],
    (magnitude, lowest, signs): (u128, u128, u128),
) -> bool {
    // SAFETY: `[u8; 256]` and `[u128; 16]` have the same size, and every bit pattern is a valid
    // `u128`; `transmute` takes the bytes by value, so the alignment of `block` does not matter.
    let w: [u128; WORDS] = unsafe { core::mem::transmute(*block) };
    // Written out rather than looped: the compiler's interpreter pays for each loop step.
    let carries = ((w[0] & magnitude) + lowest)
        | ((w[1] & magnitude) + lowest)
        | ((w[2] & magnitude) + lowest)
        | ((w[3] & magnitude) + lowest)
        | ((w[4] & magnitude) + lowest)
        | ((w[5] & magnitude) + lowest)
        | ((w[6] & magnitude) + lowest)
        | ((w[7] & magnitude) + lowest)
        | ((w[8] & magnitude) + lowest)
        | ((w[9] & magnitude) + lowest)
        | ((w[10] & magnitude) + lowest)
        | ((w[11] & magnitude) + lowest)
        | ((w[12] & magnitude) + lowest)
        | ((w[13] & magnitude) + lowest)
        | ((w[14] & magnitude) + lowest)
        | ((w[15] & magnitude) + lowest);
    carries & signs != 0
}

/// The index of the first `f32` of `bytes` (little-endian, `bytes.len() / 4` of them) that is a
/// NaN or an infinity.
#[must_use]
pub(crate) const fn first_non_finite_f32(bytes: &[u8]) -> Option<usize> {
    first_non_finite(bytes, 4)
}

/// The index of the first `f64` of `bytes` (little-endian, `bytes.len() / 8` of them) that is a
/// NaN or an infinity.
#[must_use]
pub(crate) const fn first_non_finite_f64(bytes: &[u8]) -> Option<usize> {
    first_non_finite(bytes, 8)
}

/// [`first_non_finite_f32`] or [`first_non_finite_f64`], for elements of `size` bytes.
const fn first_non_finite(bytes: &[u8], size: usize) -> Option<usize> {
    let masks = if size == 4 { F32_MASKS } else { F64_MASKS };
    let mut start = 0;
    if cfg!(target_endian = "little") {
        let (blocks, _) = bytes.as_chunks::<BLOCK>();
        let n = blocks.len();
        let mut b = 0;
        // Whole blocks while they are clean; the one that is not, and the tail, element by
        // element (which finds the index).
        while b < n && !block_has_non_finite(&blocks[b], masks) {
            b += 1;
        }
        start = b * BLOCK;
    }
    let (_, rest) = bytes.split_at(start);
    match first_non_finite_by_element(rest, size) {
        Some(i) => Some(start / size + i),
        None => None,
    }
}

/// The element-by-element definition of [`first_non_finite_f32`] (`size` 4) and
/// [`first_non_finite_f64`] (`size` 8).
const fn first_non_finite_by_element(bytes: &[u8], size: usize) -> Option<usize> {
    let n = bytes.len() / size;
    // The exponent's bits in the byte below the one holding the sign.
    let next_exponent_bits = if size == 4 { 0x80 } else { 0xf0 };
    let mut i = 0;
    while i < n {
        // The byte holding the sign and the highest exponent bits, then the one below it.
        let (high, next) = (bytes[i * size + size - 1], bytes[i * size + size - 2]);
        if high & 0x7f == 0x7f && next & next_exponent_bits == next_exponent_bits {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The index of the first byte of `bytes` that, read as an `i8`, is below `min` or above `max`.
#[must_use]
pub(crate) const fn first_i8_outside(bytes: &[u8], min: i8, max: i8) -> Option<usize> {
    let mut start = 0;
    // The one range a layer asks for (symmetric int8 weights, -127..=127) excludes one value;
    // its blocks are searched for that byte (0x80) whole.
    if min == -127 && max == 127 {
        let (blocks, _) = bytes.as_chunks::<BLOCK>();
        let n = blocks.len();
        let mut b = 0;
        while b < n && !block_has_byte_0x80(&blocks[b]) {
            b += 1;
        }
        start = b * BLOCK;
    }
    let mut i = start;
    while i < bytes.len() {
        let value = bytes[i] as i8;
        if value < min || value > max {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Whether any byte of the block is 0x80 (`i8::MIN`).
#[inline]
const fn block_has_byte_0x80(block: &[u8; BLOCK]) -> bool {
    const HIGHS: u128 = u128::MAX / 255 * 0x80;
    const LOWS: u128 = u128::MAX / 255 * 0x7f;
    // SAFETY: as in `block_has_non_finite`.
    let w: [u128; WORDS] = unsafe { core::mem::transmute(*block) };
    // A byte of `x` is zero where the block's byte was 0x80. Adding 0x7f to its low seven bits
    // carries into its high bit exactly when they are not all zero (and never past it), so
    // `((x & LOWS) + LOWS) | x` has a byte's high bit set exactly when the byte is not zero.
    // Written out, and a macro rather than a function: loop steps and calls are what the
    // compiler's interpreter counts.
    macro_rules! nonzero_bytes {
        ($word:expr) => {{
            let x = $word ^ HIGHS;
            (((x & LOWS) + LOWS) | x) & HIGHS
        }};
    }
    let all_nonzero = nonzero_bytes!(w[0])
        & nonzero_bytes!(w[1])
        & nonzero_bytes!(w[2])
        & nonzero_bytes!(w[3])
        & nonzero_bytes!(w[4])
        & nonzero_bytes!(w[5])
        & nonzero_bytes!(w[6])
        & nonzero_bytes!(w[7])
        & nonzero_bytes!(w[8])
        & nonzero_bytes!(w[9])
        & nonzero_bytes!(w[10])
        & nonzero_bytes!(w[11])
        & nonzero_bytes!(w[12])
        & nonzero_bytes!(w[13])
        & nonzero_bytes!(w[14])
        & nonzero_bytes!(w[15]);
    all_nonzero != HIGHS
}

/// The copies, one per element type. Only for types of which every bit pattern is a value
/// (the SAFETY argument below): integers and floats, never `bool` or `char`.
macro_rules! copies {
    ($($(#[$doc:meta])* $name:ident: $t:ty;)*) => {$(
        $(#[$doc])*
        ///
        /// # Panics
        ///
        /// If `bytes` is shorter than `out` needs (a caller's error: it found the tensor with
        /// its shape first).
        pub(crate) const fn $name(bytes: &[u8], out: &mut [$t]) {
            const SIZE: usize = size_of::<$t>();
            let len = out.len() * SIZE;
            assert!(bytes.len() >= len, "a tensor's data is shorter than its shape");
            if cfg!(target_endian = "little") || SIZE == 1 {
                // SAFETY: `bytes` holds `len` readable bytes (checked above) and `out` as many
                // writable ones; they cannot overlap (`out` is borrowed mutably); every bit
                // pattern is a valid value of the element type, whose bytes in memory are the
                // file's (little-endian) on this target.
                unsafe {
                    core::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), len)
                };
            } else {
                let (chunks, _) = bytes.as_chunks::<SIZE>();
                let mut i = 0;
                while i < out.len() {
                    out[i] = <$t>::from_le_bytes(chunks[i]);
                    i += 1;
                }
            }
        }
    )*};
}

copies! {
    /// Copies `out.len()` little-endian `f32`s from the start of `bytes` into `out`.
    copy_f32: f32;
    /// Copies `out.len()` little-endian `f64`s from the start of `bytes` into `out`.
    copy_f64: f64;
    /// Copies `out.len()` `i8`s from the start of `bytes` into `out`.
    copy_i8: i8;
    /// Copies `out.len()` little-endian `i32`s from the start of `bytes` into `out`.
    copy_i32: i32;
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// Bytes of `n` finite values with varied exponents and signs, little-endian.
    fn finite_f32s(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                let v = ((i as f32) * 0.37 - 50.0) * 10f32.powi(i as i32 % 60 - 30);
                let v = if i % 7 == 0 { f32::MAX } else { v };
                let v = if i % 11 == 0 {
                    -f32::MIN_POSITIVE / 2.0
                } else {
                    v
                };
                v.to_le_bytes()
            })
            .collect()
    }

    fn finite_f64s(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                let v = ((i as f64) * 0.37 - 50.0) * 10f64.powi(i as i32 % 600 - 300);
                let v = if i % 7 == 0 { -f64::MAX } else { v };
                v.to_le_bytes()
            })
            .collect()
    }

    #[test]
    fn finite_floats_pass_and_each_bad_position_is_found() {
        // Lengths around the block size, so that bad values fall in whole blocks, in the tail,
        // and at the edges of both.
        for n in [0, 1, 63, 64, 65, 130, 200] {
            let clean = finite_f32s(n);
            assert_eq!(first_non_finite_f32(&clean), None, "{n} f32s");
            assert_eq!(first_non_finite_by_element(&clean, 4), None);
            for bad in [
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::from_bits(0xff80_0001),
            ] {
                for at in 0..n {
                    let mut bytes = clean.clone();
                    bytes[at * 4..at * 4 + 4].copy_from_slice(&bad.to_le_bytes());
                    assert_eq!(
                        first_non_finite_f32(&bytes),
                        Some(at),
                        "{bad} at {at} of {n}"
                    );
                    assert_eq!(first_non_finite_by_element(&bytes, 4), Some(at));
                    // A second bad value later does not hide the first.
                    if at + 3 < n {
                        bytes[(at + 3) * 4..(at + 3) * 4 + 4].copy_from_slice(&bad.to_le_bytes());
                        assert_eq!(first_non_finite_f32(&bytes), Some(at));
                    }
                }
            }
        }
        for n in [0, 1, 31, 32, 33, 100] {
            let clean = finite_f64s(n);
            assert_eq!(first_non_finite_f64(&clean), None, "{n} f64s");
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                for at in 0..n {
                    let mut bytes = clean.clone();
                    bytes[at * 8..at * 8 + 8].copy_from_slice(&bad.to_le_bytes());
                    assert_eq!(
                        first_non_finite_f64(&bytes),
                        Some(at),
                        "{bad} at {at} of {n}"
                    );
                    assert_eq!(first_non_finite_by_element(&bytes, 8), Some(at));
                }
            }
        }
    }

    #[test]
    fn the_largest_finite_values_and_their_neighbours_are_told_apart() {
        // The carry trick's edge: the largest exponent below all ones, with every mantissa
        // bit set, must not look like an infinity, in any lane of a block.
        let mut bytes = Vec::new();
        for _ in 0..64 {
            bytes.extend_from_slice(&f32::from_bits(0xff7f_ffff).to_le_bytes());
        }
        assert_eq!(first_non_finite_f32(&bytes), None);
        for lane in 0..64 {
            let mut b = bytes.clone();
            b[lane * 4..lane * 4 + 4].copy_from_slice(&0x7f80_0000_u32.to_le_bytes());
            assert_eq!(first_non_finite_f32(&b), Some(lane));
        }
        let bytes: Vec<u8> = (0..32)
            .flat_map(|_| f64::from_bits(0x7fef_ffff_ffff_ffff).to_le_bytes())
            .collect();
        assert_eq!(first_non_finite_f64(&bytes), None);
    }

    #[test]
    fn int8_ranges_find_the_first_value_outside() {
        for n in [0, 1, 255, 256, 257, 600] {
            let clean: Vec<u8> = (0..n).map(|i| ((i * 37) % 255 + 1) as u8 ^ 0x80).collect();
            assert!(clean.iter().all(|&b| b != 0x80));
            assert_eq!(first_i8_outside(&clean, -127, 127), None, "{n} bytes");
            for at in 0..n {
                let mut bytes = clean.clone();
                bytes[at] = 0x80;
                assert_eq!(
                    first_i8_outside(&bytes, -127, 127),
                    Some(at),
                    "at {at} of {n}"
                );
                assert_eq!(first_i8_outside(&bytes, i8::MIN, i8::MAX), None);
            }
        }
        // Other ranges are read element by element.
        let bytes = [0_u8, 5, 250, 3];
        assert_eq!(first_i8_outside(&bytes, -5, 4), Some(1));
        assert_eq!(first_i8_outside(&bytes, -5, 5), Some(2));
        assert_eq!(first_i8_outside(&bytes, -6, 5), None);
    }

    #[test]
    fn copies_give_the_values_of_the_bytes() {
        let values: Vec<f32> = (0..300).map(|i| i as f32 * -1.25).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = vec![0.0_f32; 300];
        copy_f32(&bytes, &mut out);
        assert_eq!(out, values);
        // A shorter `out` takes the first values only.
        let mut head = [0.0_f32; 3];
        copy_f32(&bytes, &mut head);
        assert_eq!(head, [0.0, -1.25, -2.5]);

        let values: Vec<f64> = (0..70).map(|i| i as f64 / 3.0).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = vec![0.0_f64; 70];
        copy_f64(&bytes, &mut out);
        assert_eq!(out, values);

        let mut out = [0_i8; 4];
        copy_i8(&[0x80, 0x7f, 0xff, 1], &mut out);
        assert_eq!(out, [-128, 127, -1, 1]);
    }

    #[test]
    #[should_panic(expected = "shorter than its shape")]
    fn a_copy_from_too_few_bytes_panics() {
        copy_f32(&[0; 7], &mut [0.0; 2]);
    }

    #[test]
    fn the_checks_and_copies_run_at_compile_time() {
        const BYTES: [u8; 8] = {
            let mut b = [0; 8];
            let one = 1.0_f32.to_le_bytes();
            let nan = f32::NAN.to_le_bytes();
            let mut i = 0;
            while i < 4 {
                b[i] = one[i];
                b[4 + i] = nan[i];
                i += 1;
            }
            b
        };
        const FIRST_BAD: Option<usize> = first_non_finite_f32(&BYTES);
        const VALUE: [f32; 1] = {
            let mut out = [0.0];
            copy_f32(&BYTES, &mut out);
            out
        };
        assert_eq!(FIRST_BAD, Some(1));
        assert_eq!(VALUE, [1.0]);
    }
}
