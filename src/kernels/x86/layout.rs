//! Moving data without arithmetic, or with additions only: row copies, transposes, the
//! finiteness check, and `col2im` (AVX-512).

use super::isa::{Isa, assert_isa, detected_isa};
use super::simd::{Avx2F32, Avx2F64, Avx512F32, Avx512F64, Simd};
use super::transpose_block::transpose8_ps;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

use crate::kernels::cast::assume_init_mut;
use crate::kernels::cast::{same_type_slice, same_type_slice_mut};
use crate::kernels::shape::Conv;

/// The rows of [`copy_rows`]: each row's whole vectors, then its last vector ending at the
/// row's end (over lanes the one before it already copied, the same values again); only a row
/// narrower than a vector is loaded and stored masked. (AVX2's masked stores are slow on AMD's
/// cores: with every vector masked, the row copies took 8.5% of ResNet-8's training step on
/// the AVX2 path, against 3.5% with AVX-512.)
///
/// # Safety
///
/// The CPU has `S`'s instruction set; the slices hold the rows as [`copy_rows`] checks.
#[inline(always)]
pub(super) unsafe fn copy_rows_run<S: Simd>(
    from: &[S::E],
    from_stride: usize,
    to: &mut [S::E],
    to_stride: usize,
    (rows, width): (usize, usize),
) {
    let lanes = S::LANES;
    let (from, to) = (from.as_ptr(), to.as_mut_ptr());
    // SAFETY (whole body): the instruction set is present (the caller's contract); row `i`
    // reads `from[i·from_stride..][..width]` and writes `to[i·to_stride..][..width]`, both in
    // bounds (checked by `copy_rows`): the whole vectors start at each `v` with `v + lanes <
    // width`, and at `width - lanes` (>= 0, as `width >= lanes`); the masked ones cover
    // `..width`.
    unsafe {
        for i in 0..rows {
            let (source, target) = (from.add(i * from_stride), to.add(i * to_stride));
            if width >= lanes {
                let mut v = 0;
                while v + lanes < width {
                    S::store(target.add(v), S::load(source.add(v)));
                    v += lanes;
                }
                let last = width - lanes;
                S::store(target.add(last), S::load(source.add(last)));
            } else if width > 0 {
                let mask = S::mask(width);
                S::store_masked(target, mask, S::load_masked(source, mask));
            }
        }
    }
}

macro_rules! copy_rows_entry {
    ($name:ident, $simd:ty, $e:ty, $features:literal) => {
        /// # Safety
        ///
        /// The CPU has the instruction set named in `target_feature`; the slices checked by
        /// [`copy_rows`].
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(
            from: &[$e],
            from_stride: usize,
            to: &mut [$e],
            to_stride: usize,
            size: (usize, usize),
        ) {
            // SAFETY: forwarded from this function's contract.
            unsafe { copy_rows_run::<$simd>(from, from_stride, to, to_stride, size) }
        }
    };
}
#[allow(unused_imports)]
pub(super) use copy_rows_entry;

copy_rows_entry!(copy_rows_avx512_f32, Avx512F32, f32, "avx512f");
copy_rows_entry!(copy_rows_avx512_f64, Avx512F64, f64, "avx512f");
copy_rows_entry!(copy_rows_avx2_f32, Avx2F32, f32, "avx2,fma");
copy_rows_entry!(copy_rows_avx2_f64, Avx2F64, f64, "avx2,fma");

/// Copies `rows` rows of `width` elements, row `i` from `from[i·from_stride..]` to
/// `to[i·to_stride..]`, with `isa`, leaving the rest of each stride as it was. Vector moves,
/// masked only for rows narrower than a vector (see [`copy_rows_run`]): `copy_from_slice`
/// called `memmove` once per row, and for rows of 28 `f32`s (LeNet-5's first layer) the calls
/// cost more than the copies.
/// Returns `false`, writing nothing, unless `E` is `f32` or `f64`.
///
/// # Panics
///
/// When a row falls outside its slice, or the CPU does not have `isa`.
pub(crate) fn copy_rows<E: 'static>(
    isa: Isa,
    from: &[E],
    from_stride: usize,
    to: &mut [E],
    to_stride: usize,
    (rows, width): (usize, usize),
) -> bool {
    let last = |stride: usize| (rows > 0).then(|| (rows - 1) * stride + width);
    let in_from = last(from_stride).is_none_or(|n| n <= from.len());
    let in_to = last(to_stride).is_none_or(|n| n <= to.len());
    assert!(
        in_from && in_to,
        "{rows} rows of {width} from a stride of {from_stride} in {} elements to a stride of \
         {to_stride} in {}",
        from.len(),
        to.len()
    );
    assert_isa(isa);
    let size = (rows, width);
    macro_rules! run {
        ($e:ty, $avx512:ident, $avx2:ident) => {
            if let (Some(from), Some(to)) =
                (same_type_slice::<E, $e>(from), same_type_slice_mut::<E, $e>(to))
            {
                // SAFETY (both): bounds and instruction set checked above.
                match isa {
                    Isa::Avx512 => unsafe { $avx512(from, from_stride, to, to_stride, size) },
                    Isa::Avx2Fma => unsafe { $avx2(from, from_stride, to, to_stride, size) },
                }
                return true;
            }
        };
    }
    run!(f32, copy_rows_avx512_f32, copy_rows_avx2_f32);
    run!(f64, copy_rows_avx512_f64, copy_rows_avx2_f64);
    false
}

/// `to = fromᵀ` for `from` of `rows` rows (row-major both; `to` as long as `from`): how the
/// filters-in-lanes kernels get their weights (`[filters][C·K·K]` to `[C·K·K][filters]`) and
/// the weight gradient its `dZ`.
///
/// # Panics
///
/// When `rows` does not divide `from.len()` or `to` is not as long as `from`.
#[cfg(any(feature = "alloc", test))]
pub(crate) fn transpose<E: Copy + 'static>(from: &[E], rows: usize, to: &mut [E]) {
    assert_eq!(from.len(), to.len(), "a transpose keeps every element");
    // SAFETY: `to` is as long as `from` (asserted), and initialized values are written to it.
    unsafe { transpose_raw(from, rows, to.as_mut_ptr()) }
}

/// [`transpose`] into a buffer that is not initialized yet: every element of `to` is written,
/// and returned initialized. The buffer of a prediction is not zeroed first (at LeNet's second
/// layer, zeroing it cost more than the convolution's bias and activation together).
///
/// # Panics
///
/// As [`transpose`].
pub(crate) fn transpose_uninit<'a, E: Copy + 'static>(
    from: &[E],
    rows: usize,
    to: &'a mut [MaybeUninit<E>],
) -> &'a mut [E] {
    assert_eq!(from.len(), to.len(), "a transpose keeps every element");
    // SAFETY: `to` is as long as `from` (asserted), so `transpose_raw` writes every one of its
    // elements (`MaybeUninit<E>` has `E`'s layout); after it they are all initialized.
    unsafe {
        transpose_raw(from, rows, to.as_mut_ptr().cast::<E>());
        assume_init_mut(to)
    }
}

/// # Safety
///
/// `to` is valid for writes of `from.len()` elements. Every one of them is written.
pub(super) unsafe fn transpose_raw<E: Copy + 'static>(from: &[E], rows: usize, to: *mut E) {
    // SAFETY: forwarded from this function's contract; the instruction set is the detected one.
    unsafe { transpose_raw_on(detected_isa(), from, rows, to) }
}

/// [`transpose`] with `isa`'s blocks (or none): what the tests run on each instruction set.
///
/// # Panics
///
/// As [`transpose`], and when the CPU does not have `isa`.
#[cfg(all(test, feature = "std"))]
pub(crate) fn transpose_on<E: Copy + 'static>(
    isa: Option<Isa>,
    from: &[E],
    rows: usize,
    to: &mut [E],
) {
    assert_eq!(from.len(), to.len(), "a transpose keeps every element");
    // SAFETY: `to` is as long as `from` (asserted), and initialized values are written to it.
    unsafe { transpose_raw_on(isa, from, rows, to.as_mut_ptr()) }
}

/// [`transpose_raw`] with `isa`'s blocks of rows for `f32` (16 rows with AVX-512, 8 with
/// AVX2), the rows left over element by element.
///
/// # Safety
///
/// As [`transpose_raw`].
unsafe fn transpose_raw_on<E: Copy + 'static>(
    isa: Option<Isa>,
    from: &[E],
    rows: usize,
    to: *mut E,
) {
    let columns = from.len().checked_div(rows).unwrap_or(0);
    assert!(
        rows * columns == from.len(),
        "{} elements are not {rows} whole rows",
        from.len()
    );
    // Rows `..done` transposed by the SIMD blocks (whole blocks of 16 `f32` rows on AVX-512,
    // of 8 on AVX2).
    let mut done = 0;
    if core::any::TypeId::of::<E>() == core::any::TypeId::of::<f32>()
        && columns > 0
        && let Some(isa) = isa
    {
        assert_isa(isa);
        let (from, to) = (from.as_ptr().cast::<f32>(), to.cast::<f32>());
        let block = match isa {
            Isa::Avx512 => 16,
            Isa::Avx2Fma => 8,
        };
        while done + block <= rows {
            // SAFETY (all): the instruction set is present (asserted); `E` is `f32`, so the
            // pointers are to `f32`s; rows `done..done + block` are inside `from` (`done +
            // block <= rows`), and the block writes their elements' places in `to` (the
            // caller's contract covers all of them).
            let (from, to) = unsafe { (from.add(done * columns), to.add(done)) };
            match isa {
                Isa::Avx512 => unsafe { transpose_16_rows_avx512(from, columns, rows, to) },
                Isa::Avx2Fma => unsafe { transpose_8_rows_avx2(from, columns, rows, to) },
            }
            done += block;
        }
    }
    for (r, row) in from.chunks_exact(columns.max(1)).enumerate().skip(done) {
        for (c, &v) in row.iter().enumerate() {
            // SAFETY: c·rows + r < columns·rows = from.len(), inside `to` (the contract).
            unsafe { to.add(c * rows + r).write(v) };
        }
    }
}

/// Transposes 16 rows of `columns` `f32`s at `from` into `to`, where column `c` of them goes to
/// `to[c·stride..][..16]`. Four columns at a time: the four 4-element pieces of each group of four
/// rows are loaded as one 4 x 4 block per vector, and two rounds of two-source permutes make each
/// vector one column of all 16 rows: 8 permutes per 64 elements, where an element-by-element
/// copy needs 64 stores.
///
/// # Safety
///
/// The CPU has AVX-512F; `from` holds 16 rows of `columns`, `to` is valid for writes at
/// `c·stride + i` for every `c < columns`, `i < 16`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose_16_rows_avx512(
    from: *const f32,
    columns: usize,
    stride: usize,
    to: *mut f32,
) {
    // SAFETY (whole body): the instruction set is present (the contract); the loads read
    // elements `r·columns + c .. + 4` with `r < 16`, `c + 4 <= columns` (then single elements
    // for the last columns); the stores write `c·stride .. + 16` for `c < columns`.
    unsafe {
        // Rows r..r + 4, columns c..c + 4: [row r: c..c+4, row r+1: c..c+4, ...].
        let block = |r: usize, c: usize| {
            let piece = |i: usize| _mm_loadu_ps(from.add((r + i) * columns + c));
            let v = _mm512_broadcast_f32x4(piece(0));
            let v = _mm512_mask_broadcast_f32x4(v, 0x00f0, piece(1));
            let v = _mm512_mask_broadcast_f32x4(v, 0x0f00, piece(2));
            _mm512_mask_broadcast_f32x4(v, 0xf000, piece(3))
        };
        // From blocks `a` (rows 0-3) and `b` (rows 4-7): columns 0 and 1 of rows 0-7, or 2 and 3.
        let columns_01 =
            _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
        let columns_23 =
            _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
        // From those of rows 0-7 and of rows 8-15: one column of all 16 rows.
        let first = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        let second =
            _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
        let mut c = 0;
        while c + 4 <= columns {
            let (a, b) = (block(0, c), block(4, c));
            let (d, e) = (block(8, c), block(12, c));
            let (top_01, top_23) = (
                _mm512_permutex2var_ps(a, columns_01, b),
                _mm512_permutex2var_ps(a, columns_23, b),
            );
            let (bottom_01, bottom_23) = (
                _mm512_permutex2var_ps(d, columns_01, e),
                _mm512_permutex2var_ps(d, columns_23, e),
            );
            let out = to.add(c * stride);
            _mm512_storeu_ps(out, _mm512_permutex2var_ps(top_01, first, bottom_01));
            _mm512_storeu_ps(
                out.add(stride),
                _mm512_permutex2var_ps(top_01, second, bottom_01),
            );
            _mm512_storeu_ps(
                out.add(2 * stride),
                _mm512_permutex2var_ps(top_23, first, bottom_23),
            );
            _mm512_storeu_ps(
                out.add(3 * stride),
                _mm512_permutex2var_ps(top_23, second, bottom_23),
            );
            c += 4;
        }
        for c in c..columns {
            for r in 0..16 {
                to.add(c * stride + r).write(*from.add(r * columns + c));
            }
        }
    }
}

/// Transposes 8 rows of `columns` `f32`s at `from` into `to`, where column `c` of them goes to
/// `to[c·stride..][..8]`, with AVX2: eight columns at a time, each 8 x 8 block transposed in
/// registers (`transpose_block::transpose8_ps`, as the packed products pack `Bᵀ`); the last
/// columns element by element.
///
/// # Safety
///
/// The CPU has AVX2; `from` holds 8 rows of `columns`, `to` is valid for writes at
/// `c·stride + i` for every `c < columns`, `i < 8`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn transpose_8_rows_avx2(
    from: *const f32,
    columns: usize,
    stride: usize,
    to: *mut f32,
) {
    // SAFETY (whole body): the instruction set is present (the contract); a block reads
    // elements `r·columns + c .. + 8` with `r < 8`, `c + 8 <= columns`, and writes
    // `(c + k)·stride .. + 8` for `k < 8` (then single elements for the last columns).
    unsafe {
        let mut c = 0;
        while c + 8 <= columns {
            transpose8_ps(from.add(c), columns, to.add(c * stride), stride);
            c += 8;
        }
        for c in c..columns {
            for r in 0..8 {
                to.add(c * stride + r).write(*from.add(r * columns + c));
            }
        }
    }
}

macro_rules! all_finite_entry {
    ($name:ident, $e:ty, $features:literal) => {
        /// [`crate::kernels::reference::all_finite`] compiled for the instruction set: the same loop, in
        /// the instruction set's vectors.
        #[target_feature(enable = $features)]
        #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
        fn $name(values: &[$e]) -> bool {
            crate::kernels::reference::all_finite(values)
        }
    };
}
#[allow(unused_imports)]
pub(super) use all_finite_entry;

all_finite_entry!(all_finite_avx512_f32, f32, "avx512f");
all_finite_entry!(all_finite_avx512_f64, f64, "avx512f");
all_finite_entry!(all_finite_avx2_f32, f32, "avx2,fma");
all_finite_entry!(all_finite_avx2_f64, f64, "avx2,fma");

/// The element types [`all_finite`] has entry points for.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) trait FiniteCheck: Sized {
    /// [`all_finite`] for this type.
    fn all_finite(isa: Isa, values: &[Self]) -> bool;
}

impl FiniteCheck for f32 {
    fn all_finite(isa: Isa, values: &[f32]) -> bool {
        assert_isa(isa);
        // SAFETY (both): the CPU has the instruction set (checked just above); the functions
        // only read the slice, through safe code.
        match isa {
            Isa::Avx512 => unsafe { all_finite_avx512_f32(values) },
            Isa::Avx2Fma => unsafe { all_finite_avx2_f32(values) },
        }
    }
}

impl FiniteCheck for f64 {
    fn all_finite(isa: Isa, values: &[f64]) -> bool {
        assert_isa(isa);
        // SAFETY (both): as for `f32`.
        match isa {
            Isa::Avx512 => unsafe { all_finite_avx512_f64(values) },
            Isa::Avx2Fma => unsafe { all_finite_avx2_f64(values) },
        }
    }
}

/// Whether every value is finite, with `isa`.
///
/// # Panics
///
/// When the CPU does not have `isa`.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) fn all_finite<E: FiniteCheck>(isa: Isa, values: &[E]) -> bool {
    E::all_finite(isa, values)
}

// ---------------------------------------------------------------------------------------------
// col2im of a stride-1 convolution's backward pass.
// ---------------------------------------------------------------------------------------------

/// `dx += col2im(d_patches)` for a stride-1 convolution with AVX-512: each input row is loaded
/// once, a vector of columns at a time, every patch row that met it (`(c, ky, kx)` at output
/// row `ih + padding - ky`) is added to it, shifted by `kx - padding` and masked to the columns
/// it reaches, and it is stored once. Each input value receives its terms in the generic code's
/// order (by `ky`, then `kx`), so the sums are the same bit for bit; and no load reads back a
/// value just stored (a masked store does not forward to a load: it stalls until it retires).
macro_rules! col2im_entry {
    ($name:ident, $e:ty, $lanes:expr, $mask:ty, $load:ident, $add:ident, $store:ident) => {
        /// # Safety
        ///
        /// The CPU has AVX-512F; `d_patches` holds `C·K·K·OH·OW` values and `dx` `C·H·W`, and
        /// the kernel is at most [`COL2IM_MAX_KERNEL`] wide (checked by
        /// [`col2im_stride1_avx512`]).
        #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn $name(shape: &Conv, d_patches: &[$e], dx: &mut [$e]) {
            let Conv {
                channels,
                kernel: k,
                padding: pad,
                height: h,
                width: w,
                ..
            } = *shape;
            let (out_height, out_width) = (shape.out_height(), shape.out_width());
            let positions = out_height * out_width;
            let lanes_between = |lo: isize, hi: isize, n: usize| -> $mask {
                let (lo, hi) = (lo.clamp(0, n as isize) as u32, hi.clamp(0, n as isize) as u32);
                if lo >= hi {
                    0
                } else {
                    (((1_u32 << hi) - 1) & !((1_u32 << lo) - 1)) as $mask
                }
            };
            // Each kernel column's lanes and offset depend on `kx` and the block `j0` only:
            // computed once per block, not once per patch row (the scalar bookkeeping cost
            // several times the adds).
            let mut reach: [$mask; COL2IM_MAX_KERNEL] = [0; COL2IM_MAX_KERNEL];
            let mut offset = [0_isize; COL2IM_MAX_KERNEL];
            // SAFETY (whole body): AVX-512F is present (the contract); `k <= COL2IM_MAX_KERNEL`
            // (checked by the caller). Each load or store of `dx` covers lanes `0..n` at
            // `(c·H + ih)·W + j0` with `ih < H`, `j0 + n <= W`. Each load of `d_patches` is masked
            // to the lanes `l` whose output column `j0 + l + pad - kx` lies in `0..OW`, at row
            // `(c, ky, kx)` and output row `oh < OH` (filtered): inside the patch row; the
            // pointer to lane 0 may lie outside it and is formed with `wrapping_offset`, never
            // read there.
            unsafe {
                let (dp, xp) = (d_patches.as_ptr(), dx.as_mut_ptr());
                let mut j0 = 0;
                while j0 < w {
                    let n = (w - j0).min($lanes);
                    let all = ((1_u32 << n) - 1) as $mask;
                    for kx in 0..k {
                        let shift = kx as isize - pad as isize - j0 as isize;
                        reach[kx] = lanes_between(shift, shift + out_width as isize, n);
                        offset[kx] = (kx * positions) as isize - shift;
                    }
                    for c in 0..channels {
                        for ih in 0..h {
                            let row = xp.add((c * h + ih) * w + j0);
                            let mut acc = $load(all, row);
                            // The output rows that met input row `ih`: `oh = ih + pad - ky`.
                            for ky in 0..k {
                                let Some(oh) = (ih + pad).checked_sub(ky).filter(|&oh| oh < out_height)
                                else {
                                    continue;
                                };
                                let first = dp.wrapping_add((c * k + ky) * k * positions + oh * out_width);
                                for (&reach, &offset) in reach[..k].iter().zip(&offset[..k]) {
                                    if reach != 0 {
                                        acc = $add(acc, $load(reach, first.wrapping_offset(offset)));
                                    }
                                }
                            }
                            $store(row, all, acc);
                        }
                    }
                    j0 += n;
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(super) use col2im_entry;

/// The largest kernel the AVX-512 `col2im` takes (its per-column masks live in fixed arrays);
/// larger ones take the generic loop.
pub(super) const COL2IM_MAX_KERNEL: usize = 16;

col2im_entry!(
    col2im_stride1_avx512_f32,
    f32,
    16,
    __mmask16,
    _mm512_maskz_loadu_ps,
    _mm512_add_ps,
    _mm512_mask_storeu_ps
);
col2im_entry!(
    col2im_stride1_avx512_f64,
    f64,
    8,
    __mmask8,
    _mm512_maskz_loadu_pd,
    _mm512_add_pd,
    _mm512_mask_storeu_pd
);

/// [`crate::kernels::col2im_stride1`] for `f32` (`E = f32`) or `f64` on AVX-512.
///
/// # Panics
///
/// When the lengths do not fit `shape`, or the CPU lacks AVX-512F.
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) fn col2im_stride1_avx512<E: 'static>(
    shape: &Conv,
    d_patches: &[E],
    dx: &mut [E],
) -> bool {
    let taps = shape.channels * shape.kernel * shape.kernel;
    assert!(
        d_patches.len() == taps * shape.out_height() * shape.out_width()
            && dx.len() == shape.channels * shape.height * shape.width,
        "col2im: {} patch values and {} input values for {shape:?}",
        d_patches.len(),
        dx.len()
    );
    assert_isa(Isa::Avx512);
    if shape.kernel > COL2IM_MAX_KERNEL {
        return false;
    }
    if let (Some(d), Some(x)) = (
        same_type_slice::<E, f32>(d_patches),
        same_type_slice_mut::<E, f32>(&mut *dx),
    ) {
        // SAFETY: AVX-512F is present (`assert_isa`) and the lengths were checked above.
        unsafe { col2im_stride1_avx512_f32(shape, d, x) };
        return true;
    }
    if let (Some(d), Some(x)) = (
        same_type_slice::<E, f64>(d_patches),
        same_type_slice_mut::<E, f64>(&mut *dx),
    ) {
        // SAFETY: as above.
        unsafe { col2im_stride1_avx512_f64(shape, d, x) };
        return true;
    }
    false
}
