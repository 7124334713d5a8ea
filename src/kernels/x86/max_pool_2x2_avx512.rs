//! Max pooling over 2 x 2 windows with stride 2, forward and backward, with AVX-512F (`f32`),
//! and the checked entry points that run it or AVX2's kernel (`max_pool_2x2_avx2.rs`) by the
//! instruction set they are given. Other element types take the portable loops.

use super::isa::{Isa, assert_isa};
use super::max_pool_2x2_avx2::{max_pool_2x2_backward_planes_avx2, max_pool_2x2_planes_avx2};
use super::simd::array_from;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

// ---------------------------------------------------------------------------------------------
// Max pooling over 2 x 2 windows with stride 2, in f32.
// ---------------------------------------------------------------------------------------------

/// Max pooling of planes of `height x width` (`x` holds whole planes) with 2 x 2 windows and
/// stride 2 into planes of `height / 2 x width / 2` (an odd last row or column is left out):
/// `out[j]` = the first maximum of `top[2j], top[2j + 1], bottom[2j], bottom[2j + 1]` in that
/// order for each pair of rows, a NaN (the first) if there is one: the generic pooling's result,
/// bit for bit, 16 outputs per step (each pair of rows de-interleaved into even and odd
/// columns). One call for a whole batch: a call per row cost more than the row's work.
///
/// # Panics
///
/// When `x` is not whole planes, `out` not as many pooled planes, or `isa` is not present.
pub(crate) fn max_pool_2x2_f32(
    isa: Isa,
    x: &[f32],
    (height, width): (usize, usize),
    out: &mut [MaybeUninit<f32>],
) {
    let planes = pooled_planes(x.len(), (height, width), out.len());
    assert_isa(isa);
    // SAFETY (both): the instruction set is present (`assert_isa`); the slices are `planes`
    // whole planes.
    match isa {
        Isa::Avx512 => unsafe { max_pool_2x2_planes_avx512(x, (height, width), out, planes) },
        Isa::Avx2Fma => unsafe { max_pool_2x2_planes_avx2(x, (height, width), out, planes) },
    }
}

/// The number of planes of `height x width` in `len` values, checked to be whole and to match
/// `pooled_len` values of pooled planes.
pub(super) fn pooled_planes(
    len: usize,
    (height, width): (usize, usize),
    pooled_len: usize,
) -> usize {
    let planes = len.checked_div(height * width).unwrap_or(0);
    assert!(
        len == planes * height * width && pooled_len == planes * (height / 2) * (width / 2),
        "{len} values of {height} x {width} planes pooled into {pooled_len}"
    );
    planes
}

/// # Safety
///
/// The CPU has AVX-512F; `x` holds `planes` planes of `height x width`, `out` as many of
/// `height / 2 x width / 2`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_pool_2x2_planes_avx512(
    x: &[f32],
    (height, width): (usize, usize),
    out: &mut [MaybeUninit<f32>],
    planes: usize,
) {
    let (out_height, out_width) = (height / 2, width / 2);
    if height % 2 == 0 && width % 2 == 0 && (2..=16).contains(&width) {
        // SAFETY: AVX-512F is present (the contract); the planes have even sizes, so their
        // rows are whole row pairs, and rows of at most 16.
        unsafe { max_pool_2x2_narrow_avx512(x, width, out, planes * out_height) };
        return;
    }
    if out_width == 0 || out_height == 0 {
        return; // nothing to write (and no chunks of 0 elements)
    }
    // Whole row pairs (an odd last row is left out), each a row of outputs: as chunks, so that
    // every row's sizes and masks are the same values, computed once.
    let x_planes = x.chunks_exact(height * width).take(planes);
    for (plane, out_plane) in x_planes.zip(out.chunks_exact_mut(out_height * out_width)) {
        let pairs = plane.chunks_exact(2 * width);
        for (pair, out_row) in pairs.zip(out_plane.chunks_exact_mut(out_width)) {
            let (top, bottom) = pair.split_at(width);
            // SAFETY: AVX-512F is present (the contract); each row holds `2·out_row.len()`
            // values.
            unsafe { max_pool_2x2_avx512(top, bottom, out_row) }
        }
    }
}

/// Max pooling 2 x 2 of rows of at most 16 (LeNet's second pooling: 10), several row pairs
/// per vector: with one row pair per vector, 5 of 16 lanes would be useful. The input is a
/// sequence of `pairs` row pairs (planes of even height, one after the other), `2·width` values
/// each, and the output `width / 2` values per pair. Each step loads the next `⌊32 / width⌋`
/// pairs (at most 64 values, four vectors) and picks each window's four inputs into four
/// vectors with two-source permutes (one per half of the loaded values, blended), then takes
/// their first maximum ([`first_maximum_of_windows`], as the row-by-row kernel does).
///
/// # Safety
///
/// The CPU has AVX-512F; `2 <= width <= 16` and even; `x` holds `pairs · 2·width` values, `out`
/// `pairs · width / 2`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_pool_2x2_narrow_avx512(
    x: &[f32],
    width: usize,
    out: &mut [MaybeUninit<f32>],
    pairs: usize,
) {
    let out_width = width / 2;
    let tables = NarrowPoolTables::of(width);
    // SAFETY (whole body): AVX-512F is present (the contract). Step `g0` reads values
    // `g0·2W .. (g0 + count)·2W` of `x` (`NarrowPoolTables::windows`) and writes outputs
    // `g0·OW .. (g0 + count)·OW` (the store masked to those), `g0 + count <= pairs`.
    unsafe {
        let mut g0 = 0;
        while g0 < pairs {
            let (count, _, best, mask) = tables.step(x, width, g0, pairs);
            let to = out.as_mut_ptr().add(g0 * out_width).cast::<f32>();
            _mm512_mask_storeu_ps(to, mask, best);
            g0 += count;
        }
    }
}

/// Where max pooling's kernels for rows of at most 16 (`2 <= W <= 16`, even) find the
/// windows' inputs, and where the backward pass puts their gradients: each step takes the
/// next `⌊32 / W⌋` row pairs (at most 64 values, four vectors), lane `l` the window `l % OW`
/// of pair `l / OW`.
#[derive(Clone, Copy)]
pub(super) struct NarrowPoolTables {
    /// Row pairs per step: `per_step · OW <= 16` lanes.
    per_step: usize,
    /// For each of a window's four inputs (`top[2j]`, `top[2j + 1]`, `bottom[2j]`,
    /// `bottom[2j + 1]`) and each lane: its place among the step's first or last 32 values.
    gather: [[[i32; 16]; 2]; 4],
    /// For each input, the lanes whose value is among the last 32.
    gather_upper: [u16; 4],
    /// For each of the step's four vectors of values, for each value: the lane of its window,
    /// plus 16 if it is in an odd column (the second input of its row); for the backward
    /// pass.
    scatter: [[i32; 16]; 4],
    /// For each of those vectors, the values in a bottom row.
    scatter_bottom: [u16; 4],
}

impl NarrowPoolTables {
    /// The tables of every even width from 2 to 16 (index `width / 2 - 1`), built at compile
    /// time: built per call, they took 0.6% of a LeNet prediction.
    const ALL: [NarrowPoolTables; 8] = {
        let mut all = [NarrowPoolTables::new(2); 8];
        let mut i = 1;
        while i < 8 {
            all[i] = NarrowPoolTables::new(2 * (i + 1));
            i += 1;
        }
        all
    };

    /// The tables for rows of `width` (even, 2 to 16).
    fn of(width: usize) -> &'static NarrowPoolTables {
        &Self::ALL[width / 2 - 1]
    }

    /// The tables for rows of `width`.
    const fn new(width: usize) -> Self {
        let out_width = width / 2;
        let per_step = 32 / width;
        let mut tables = NarrowPoolTables {
            per_step,
            gather: [[[0; 16]; 2]; 4],
            gather_upper: [0; 4],
            scatter: [[0; 16]; 4],
            scatter_bottom: [0; 4],
        };
        let mut l = 0;
        while l < per_step * out_width {
            let (pair, j) = (l / out_width, l % out_width);
            let top_left = pair * 2 * width + 2 * j;
            let offsets = [0, 1, width, width + 1];
            let mut input = 0;
            while input < 4 {
                let at = top_left + offsets[input];
                tables.gather[input][at / 32][l] = (at % 32) as i32;
                if at >= 32 {
                    tables.gather_upper[input] |= 1 << l;
                }
                let (column_parity, bottom) = (input % 2, input / 2);
                tables.scatter[at / 16][at % 16] = (l + 16 * column_parity) as i32;
                if bottom == 1 {
                    tables.scatter_bottom[at / 16] |= 1 << (at % 16);
                }
                input += 1;
            }
            l += 1;
        }
        tables
    }

    /// The four inputs of the windows of a step's row pairs, `values` of them (at most 64)
    /// from `source`; the lanes past the step's windows belong to no window.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `source` is valid for reading `values <= 64` values.
    #[inline(always)]
    unsafe fn windows(&self, source: *const f32, values: usize) -> [__m512; 4] {
        // SAFETY: AVX-512F is present (the contract); every load is masked to the `values`
        // values (the pointers past them are formed with `wrapping_add` and not read); the
        // tables are read whole.
        unsafe {
            let load = |k: usize| {
                let valid = values.saturating_sub(16 * k).min(16);
                let mask = ((1_u32 << valid) - 1) as __mmask16;
                _mm512_maskz_loadu_ps(mask, source.wrapping_add(16 * k))
            };
            let (a, b, c, d) = (load(0), load(1), load(2), load(3));
            array_from(|i| {
                let index = |h: usize| _mm512_loadu_si512(self.gather[i][h].as_ptr().cast());
                let low = _mm512_permutex2var_ps(a, index(0), b);
                let high = _mm512_permutex2var_ps(c, index(1), d);
                _mm512_mask_blend_ps(self.gather_upper[i], low, high)
            })
        }
    }

    /// The step from row pair `g0` of the `pairs` in `x` (rows of `width`): how many row pairs
    /// it takes, its windows' four inputs ([`Self::windows`]), their first maxima
    /// ([`first_maximum_of_windows`]) and the mask of its outputs' lanes.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `x` holds `pairs` row pairs of `width`, `g0 < pairs`.
    #[inline(always)]
    unsafe fn step(
        &self,
        x: &[f32],
        width: usize,
        g0: usize,
        pairs: usize,
    ) -> (usize, [__m512; 4], __m512, __mmask16) {
        // SAFETY: AVX-512F is present (the contract); the step's `count·2W` values from pair
        // `g0` lie inside `x`, as `g0 + count <= pairs`.
        unsafe {
            let count = self.per_step.min(pairs - g0);
            let inputs = self.windows(x.as_ptr().add(g0 * 2 * width), count * 2 * width);
            let best = first_maximum_of_windows(inputs);
            let mask = ((1_u32 << (count * (width / 2))) - 1) as __mmask16;
            (count, inputs, best, mask)
        }
    }

    /// Writes each window's four input gradients (`gradients`, lanes as [`Self::windows`]
    /// reads them) where its inputs lie: `values` values from `target`.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `target` is valid for writing `values <= 64` values.
    #[inline(always)]
    unsafe fn scatter(&self, [g0, g1, g2, g3]: [__m512; 4], target: *mut f32, values: usize) {
        // SAFETY: AVX-512F is present (the contract); every store is masked to the `values`
        // values (the pointers past them are formed with `wrapping_add` and not written); the
        // tables are read whole.
        unsafe {
            for k in 0..4 {
                let valid = values.saturating_sub(16 * k).min(16);
                if valid == 0 {
                    break;
                }
                let index = _mm512_loadu_si512(self.scatter[k].as_ptr().cast());
                let top = _mm512_permutex2var_ps(g0, index, g1);
                let bottom = _mm512_permutex2var_ps(g2, index, g3);
                let value = _mm512_mask_blend_ps(self.scatter_bottom[k], top, bottom);
                let mask = ((1_u32 << valid) - 1) as __mmask16;
                _mm512_mask_storeu_ps(target.wrapping_add(16 * k), mask, value);
            }
        }
    }
}

/// Up to 16 of a row pair's 2 x 2 windows from window `j0`, as max pooling's kernels read
/// them: each of the four inputs of every window (`top[2j]`, `top[2j + 1]`, `bottom[2j]`,
/// `bottom[2j + 1]`: each pair of rows de-interleaved into even and odd columns), their first
/// maximum (a NaN, the first, if any: `max(v, best)` is `v > best ? v : best`, and a NaN meeting
/// a number is blended in), and the masks of the `2·count` values of each row.
///
/// # Safety
///
/// The CPU has AVX-512F; both rows hold at least `2·(j0 + count)` values, `count <= 16`. The
/// pointer to a row's second vector may lie past its end when `count <= 8` (its mask is then
/// empty): it is formed with `wrapping_add` and not read.
#[inline(always)]
pub(super) unsafe fn pool_windows_2x2(
    (top, bottom): (&[f32], &[f32]),
    j0: usize,
    count: usize,
) -> ([__m512; 4], __m512, (__mmask16, __mmask16)) {
    // SAFETY: as the contract says; the loads are masked to values `2·j0 .. 2·(j0 + count)`.
    unsafe {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let low = ((1_u32 << (2 * count).min(16)) - 1) as __mmask16;
        let high = ((1_u64 << (2 * count).saturating_sub(16)) - 1) as __mmask16;
        let row = |r: &[f32]| {
            let a = _mm512_maskz_loadu_ps(low, r.as_ptr().add(2 * j0));
            let b = _mm512_maskz_loadu_ps(high, r.as_ptr().wrapping_add(2 * j0 + 16));
            (
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
            )
        };
        let (t0, t1) = row(top);
        let (b0, b1) = row(bottom);
        let inputs = [t0, t1, b0, b1];
        (inputs, first_maximum_of_windows(inputs), (low, high))
    }
}

/// Each lane's first maximum of the windows' four inputs `[top[2j], top[2j + 1], bottom[2j],
/// bottom[2j + 1]]` in that order, or its first NaN: max pooling's rule, bit for bit.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
pub(super) unsafe fn first_maximum_of_windows([t0, t1, b0, b1]: [__m512; 4]) -> __m512 {
    // SAFETY: AVX-512F is present (the contract); register operations only.
    unsafe {
        // `v` replaces `best` where `best` is a number and `v` is larger or a NaN: "not less
        // or equal, unordered true" is both, in one comparison, masked to where `best` is
        // ordered.
        let larger = |best: __m512, v: __m512| {
            let best_is_number = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(best, best);
            let take = _mm512_mask_cmp_ps_mask::<_CMP_NLE_UQ>(best_is_number, v, best);
            _mm512_mask_mov_ps(best, take, v)
        };
        // `max(v, best)` keeps `best` on ties, as `larger` does, and differs from it only where
        // a NaN comes after a number: without NaNs (nearly always) three maxima give the
        // windows' first maxima, a chain half as long.
        let any_nan =
            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(t0, t1) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(b0, b1);
        if any_nan == 0 {
            _mm512_max_ps(b1, _mm512_max_ps(b0, _mm512_max_ps(t1, t0)))
        } else {
            larger(larger(larger(t0, t1), b0), b1)
        }
    }
}

/// # Safety
///
/// The CPU has AVX-512F; both rows hold at least `2 · out.len()` values.
#[inline(always)]
pub(super) unsafe fn max_pool_2x2_avx512(
    top: &[f32],
    bottom: &[f32],
    out: &mut [MaybeUninit<f32>],
) {
    // SAFETY (whole body): AVX-512F is present (the contract). Step `j0` reads values
    // `2·j0 .. 2·j0 + 2·count` of each row (`pool_windows_2x2`) and writes outputs
    // `j0 .. j0 + count`, masked to those, `j0 + count <= out.len()`.
    unsafe {
        let mut j0 = 0;
        while j0 < out.len() {
            let count = (out.len() - j0).min(16);
            let (_, best, _) = pool_windows_2x2((top, bottom), j0, count);
            let mask = ((1_u32 << count) - 1) as __mmask16;
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(j0).cast::<f32>(), mask, best);
            j0 += count;
        }
    }
}

/// The backward pass of [`max_pool_2x2_f32`]: each window's gradient `dy[j]` goes to its first
/// maximum (the first value whose bits are the maximum's: the first NaN, if any), the other three
/// inputs get 0, as `0 + dy[j]` and `0` exactly as the generic code writes them. Writes the
/// windows' values of `dx` (planes like `x`'s), not an odd last row or column.
///
/// # Panics
///
/// When `x` and `dx` are not whole planes, `dy` not as many pooled planes, or `isa` is not
/// present.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) fn max_pool_2x2_backward_f32(
    isa: Isa,
    x: &[f32],
    (height, width): (usize, usize),
    dy: &[f32],
    dx: &mut [f32],
) {
    let planes = pooled_planes(x.len(), (height, width), dy.len());
    assert_eq!(
        dx.len(),
        x.len(),
        "the input gradient is not the input's size"
    );
    assert_isa(isa);
    let size = (height, width);
    // SAFETY (both): the instruction set is present (`assert_isa`); the slices are `planes`
    // whole planes.
    match isa {
        Isa::Avx512 => unsafe { max_pool_2x2_backward_planes_avx512(x, size, dy, dx, planes) },
        Isa::Avx2Fma => unsafe { max_pool_2x2_backward_planes_avx2(x, size, dy, dx, planes) },
    }
}

/// # Safety
///
/// The CPU has AVX-512F; `x` and `dx` hold `planes` planes of `height x width`, `dy` as many of
/// `height / 2 x width / 2`.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_pool_2x2_backward_planes_avx512(
    x: &[f32],
    (height, width): (usize, usize),
    dy: &[f32],
    dx: &mut [f32],
    planes: usize,
) {
    let (out_height, out_width) = (height / 2, width / 2);
    if height % 2 == 0 && width % 2 == 0 && (2..=16).contains(&width) {
        // SAFETY: AVX-512F is present (the contract); the planes have even sizes, so their
        // rows are whole row pairs, and rows of at most 16.
        unsafe { max_pool_2x2_backward_narrow_avx512(x, width, dy, dx, planes * out_height) };
        return;
    }
    for p in 0..planes {
        for r in 0..out_height {
            let top = (p * height + 2 * r) * width;
            let rows = (&x[top..][..width], &x[top + width..][..width]);
            let dy = &dy[(p * out_height + r) * out_width..][..out_width];
            let (upper, lower) = dx[top..][..2 * width].split_at_mut(width);
            // SAFETY: AVX-512F is present (the contract); each row holds `2·dy.len()` values.
            unsafe { max_pool_2x2_backward_avx512(rows, dy, (upper, lower)) }
        }
    }
}

/// # Safety
///
/// The CPU has AVX-512F; the four rows hold at least `2 · dy.len()` values.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_pool_2x2_backward_avx512(
    (top, bottom): (&[f32], &[f32]),
    dy: &[f32],
    (d_top, d_bottom): (&mut [f32], &mut [f32]),
) {
    // SAFETY (whole body): AVX-512F is present (the contract). Step `j0` reads values
    // `2·j0 .. 2·j0 + 2·count` of each input row (`pool_windows_2x2`) and `j0 .. j0 + count` of
    // `dy`, and writes the same values of each gradient row, masked to those,
    // `j0 + count <= dy.len()`. The pointer to a gradient row's second vector may lie past its
    // end when `count <= 8` (its mask is then empty): formed with `wrapping_add`, not written.
    unsafe {
        let first_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let second_half =
            _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        let mut j0 = 0;
        while j0 < dy.len() {
            let count = (dy.len() - j0).min(16);
            let (inputs, best, (low, high)) = pool_windows_2x2((top, bottom), j0, count);
            let d = _mm512_maskz_loadu_ps(((1_u32 << count) - 1) as __mmask16, dy.as_ptr().add(j0));
            let [g0, g1, g2, g3] = window_gradients(inputs, best, d);
            let store = |out: &mut [f32], even_values: __m512, odd_values: __m512| {
                let a = _mm512_permutex2var_ps(even_values, first_half, odd_values);
                let b = _mm512_permutex2var_ps(even_values, second_half, odd_values);
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(2 * j0), low, a);
                _mm512_mask_storeu_ps(out.as_mut_ptr().wrapping_add(2 * j0 + 16), high, b);
            };
            store(d_top, g0, g1);
            store(d_bottom, g2, g3);
            j0 += count;
        }
    }
}

/// Each window's gradient `d` to its first input with the maximum's bits (the first maximum,
/// or the first NaN), as `0 + d`; the window's other inputs get 0.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[inline(always)]
pub(super) unsafe fn window_gradients(
    [t0, t1, b0, _]: [__m512; 4],
    best: __m512,
    d: __m512,
) -> [__m512; 4] {
    // SAFETY: AVX-512F is present (the contract); register operations only.
    unsafe {
        let same_bits = |a: __m512, b: __m512| {
            _mm512_cmpeq_epi32_mask(_mm512_castps_si512(a), _mm512_castps_si512(b))
        };
        let (e0, e1, e2) = (
            same_bits(t0, best),
            same_bits(t1, best),
            same_bits(b0, best),
        );
        let takes = [e0, e1 & !e0, e2 & !(e0 | e1), !(e0 | e1 | e2)];
        let zero = _mm512_setzero_ps();
        array_from(|i| _mm512_maskz_add_ps(takes[i], zero, d))
    }
}

/// The backward pass of [`max_pool_2x2_narrow_avx512`] (rows of at most 16, several row pairs
/// per step): each step finds its windows' first maxima again, routes `dy` to them
/// ([`window_gradients`]) and writes each gradient where its input lies in `dx`. With one row
/// pair per step, LeNet-5's second pooling (rows of 10) took five times its forward pass.
///
/// # Safety
///
/// The CPU has AVX-512F; `2 <= width <= 16` and even; `x` and `dx` hold `pairs · 2·width`
/// values, `dy` `pairs · width / 2`.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_pool_2x2_backward_narrow_avx512(
    x: &[f32],
    width: usize,
    dy: &[f32],
    dx: &mut [f32],
    pairs: usize,
) {
    let out_width = width / 2;
    let tables = NarrowPoolTables::of(width);
    // SAFETY (whole body): AVX-512F is present (the contract). Step `g0` reads values
    // `g0·2W .. (g0 + count)·2W` of `x` and writes the same of `dx` (`NarrowPoolTables`'
    // loads and stores are masked to those), and reads outputs `g0·OW .. (g0 + count)·OW` of
    // `dy` (the load masked to those), `g0 + count <= pairs`.
    unsafe {
        let mut g0 = 0;
        while g0 < pairs {
            let (count, inputs, best, mask) = tables.step(x, width, g0, pairs);
            let d = _mm512_maskz_loadu_ps(mask, dy.as_ptr().add(g0 * out_width));
            let gradients = window_gradients(inputs, best, d);
            let values = count * 2 * width;
            tables.scatter(gradients, dx.as_mut_ptr().add(g0 * 2 * width), values);
            g0 += count;
        }
    }
}
