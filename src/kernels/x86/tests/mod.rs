//! Tests of the x86 kernels: each against its definition (`kernels/reference.rs` or the
//! loops here), on every instruction set the CPU has, and between pages without access.

mod conv;
mod conv_windows;
mod depthwise;
mod gemm;
mod guard_pages;
mod int8;
mod int8_add;
mod int8_depthwise;
mod int8_quads;
mod int8_requantize;
mod layout;
mod pool;
mod weight_grad;

#[allow(unused_imports)]
use super::gemm_packed::Path;
#[allow(unused_imports)]
use super::{
    conv_direct::*, conv_filters::*, conv_winograd_rows::*, gemm::*, input_grad_winograd::*,
    int8::*, int8_columns_vnni::*, int8_quads_vnni::*, int8_windows_vnni::*, isa::*, layout::*,
    max_pool_2x2_avx512::*, simd::*, weight_grad_filters::*, weight_grad_positions::*,
    weight_grad_winograd_rows::*,
};
#[allow(unused_imports)]
use super::{conv_winograd_columns_f32, weight_grad_winograd_5x5_narrow_avx512};
#[allow(unused_imports)]
use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
#[allow(unused_imports)]
use crate::kernels::int8::{Requantization, WindowShape};
#[allow(unused_imports)]
use crate::kernels::shape::{Conv, Epilogue, Product};
#[allow(unused_imports)]
use conv::{CONVS, filter_shapes, transposed};
#[allow(unused_imports)]
use core::arch::x86_64::*;
#[allow(unused_imports)]
use core::mem::MaybeUninit;

pub(super) use std::vec::Vec;

const ID: Epilogue = Epilogue::Identity;

/// The sizes `(channels, filters, kernel, padding, height, width)` of the tests' tables.
pub(super) fn conv_of(
    (channels, filters, kernel, padding, height, width): (usize, usize, usize, usize, usize, usize),
) -> Conv {
    Conv {
        channels,
        filters,
        kernel,
        padding,
        height,
        width,
    }
}

/// `|x|` of the padded image `x` (`shape`'s, unpadded in memory) at `(c, row, column)`, 0
/// outside the image: what the Winograd kernels' error bounds sum over a tile.
pub(super) fn padded_magnitude(
    shape: &Conv,
    x: &[f64],
    c: usize,
    row: usize,
    column: usize,
) -> f64 {
    let (p, height, width) = (shape.padding, shape.height, shape.width);
    match (row.checked_sub(p), column.checked_sub(p)) {
        (Some(y), Some(x0)) if y < height && x0 < width => x[(c * height + y) * width + x0].abs(),
        _ => 0.0,
    }
}

/// `values` as a kernel's output, which the kernels take uninitialized.
pub(super) fn as_output<E>(values: &mut [E]) -> &mut [MaybeUninit<E>] {
    // SAFETY: the kernels write only initialized values (their outputs).
    unsafe { crate::kernels::cast::as_uninit_mut(values) }
}

/// Deterministic values in [-1, 1) that are not round numbers.
pub(super) fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

/// The lanes of `E` for `isa`.
fn lanes_of<E>(isa: Isa) -> usize {
    let bytes = if isa == Isa::Avx512 { 64 } else { 32 };
    bytes / core::mem::size_of::<E>()
}

/// A xorshift generator: the pooling tests' values, the same on every run.
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// `len` values that end where a page without access begins (or, from
/// [`Guarded::after_guard`], begin where one ends): a load past their end or before their
/// start (a mask that lets one lane too many through) faults and fails the test run.
#[cfg(unix)]
pub(super) struct Guarded<T = f32> {
    map: *mut libc::c_void,
    map_len: usize,
    len: usize,
    /// Where the values start in the mapping, in bytes.
    start: usize,
    values: core::marker::PhantomData<T>,
}

#[cfg(unix)]
impl<T: Copy> Guarded<T> {
    /// The values, ending at a page without access.
    pub(super) fn new(values: &[T]) -> Self {
        Self::place(values, false)
    }

    /// The values ending at a page without access, or starting where one ends.
    pub(super) fn place(values: &[T], after_guard: bool) -> Self {
        const PAGE: usize = 1 << 16; // a multiple of every page size in use
        let bytes = core::mem::size_of_val(values);
        let data = bytes.div_ceil(PAGE) * PAGE;
        let map_len = data + PAGE;
        let (guard, start) = if after_guard {
            (0, PAGE)
        } else {
            (data, data - bytes)
        };
        // SAFETY: a fresh private anonymous mapping, checked; one page of it at `guard` made
        // inaccessible; the values copied to the `bytes` at `start`, inside the mapping and
        // outside that page.
        unsafe {
            let map = libc::mmap(
                core::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(map, libc::MAP_FAILED, "mmap");
            let page = map.cast::<u8>().add(guard);
            assert_eq!(libc::mprotect(page.cast(), PAGE, libc::PROT_NONE), 0);
            let first = map.cast::<u8>().add(start).cast::<T>();
            core::ptr::copy_nonoverlapping(values.as_ptr(), first, values.len());
            Self {
                map,
                map_len,
                len: values.len(),
                start,
                values: core::marker::PhantomData,
            }
        }
    }

    pub(super) fn slice(&mut self) -> &mut [T] {
        // SAFETY: the `len` values at `start`, written in `new`, borrowed through `self`.
        unsafe {
            let first = self.map.cast::<u8>().add(self.start).cast::<T>();
            core::slice::from_raw_parts_mut(first, self.len)
        }
    }
}

#[cfg(unix)]
impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, not used after this.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// Each filter's requantization for the int8 kernels' tests, `(bias, multiplier, exponent)`:
/// biases of both signs and at the extremes (the sum saturates), multipliers below and above 1
/// (a left shift, exponents 1 and 2), in turn from the `first`-th.
pub(super) fn requantization_parameters(
    filters: usize,
    first: usize,
    byte: &mut impl FnMut() -> i8,
) -> (Vec<i32>, Vec<i32>, Vec<i32>) {
    let bias = (0..filters)
        .map(|f| match f % 4 {
            0 => i32::MAX - 5,
            1 => i32::MIN + 7,
            _ => i32::from(byte()) * 1000,
        })
        .collect();
    let multipliers: Vec<crate::quant::Multiplier> = (0..filters)
        .map(|f| crate::quant::Multiplier::from_real([0.0007, 0.31, 1.6, 3.9][(f + first) % 4]))
        .collect();
    (
        bias,
        multipliers.iter().map(|m| m.multiplier).collect(),
        multipliers.iter().map(|m| m.exponent).collect(),
    )
}
