//! Square blocks transposed in registers: what the packed matrix product uses to pack `Bᵀ`
//! (an 8 x 8 `f32` or 4 x 4 `f64` block with AVX2; AVX-512's 16 x 16 and 8 x 8 blocks as four
//! AVX2 blocks, which every AVX-512 CPU runs).

use core::arch::x86_64::*;

/// An 8 x 8 `f32` block transposed in registers: 8 loads, 24 shuffles, 8 stores.
///
/// # Safety
///
/// As [`Simd::transpose_block`] with 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn transpose8_ps(src: *const f32, src_row: usize, dst: *mut f32, dst_row: usize) {
    // SAFETY: rows 0..8 of src and dst, 8 elements each, are valid (the caller's contract).
    unsafe {
        let r: [__m256; 8] = core::array::from_fn(|i| _mm256_loadu_ps(src.add(i * src_row)));
        for (j, v) in transpose8_registers_ps(r).into_iter().enumerate() {
            _mm256_storeu_ps(dst.add(j * dst_row), v);
        }
    }
}

/// Eight vectors of 8 `f32` transposed: lane `i` of vector `j` becomes lane `j` of vector `i`
/// (24 shuffles).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn transpose8_registers_ps(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

/// A 4 x 4 `f64` block transposed in registers.
///
/// # Safety
///
/// As [`Simd::transpose_block`] with 4 lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn transpose4_pd(src: *const f64, src_row: usize, dst: *mut f64, dst_row: usize) {
    // SAFETY: rows 0..4 of src and dst, 4 elements each, are valid (the caller's contract).
    unsafe {
        let r: [__m256d; 4] = core::array::from_fn(|i| _mm256_loadu_pd(src.add(i * src_row)));
        let t0 = _mm256_unpacklo_pd(r[0], r[1]);
        let t1 = _mm256_unpackhi_pd(r[0], r[1]);
        let t2 = _mm256_unpacklo_pd(r[2], r[3]);
        let t3 = _mm256_unpackhi_pd(r[2], r[3]);
        let out = [
            _mm256_permute2f128_pd::<0x20>(t0, t2),
            _mm256_permute2f128_pd::<0x20>(t1, t3),
            _mm256_permute2f128_pd::<0x31>(t0, t2),
            _mm256_permute2f128_pd::<0x31>(t1, t3),
        ];
        for (j, v) in out.into_iter().enumerate() {
            _mm256_storeu_pd(dst.add(j * dst_row), v);
        }
    }
}

/// A 16 x 16 `f32` block transposed as four 8 x 8 blocks (the AVX2 transpose, which this
/// machine's tests run).
///
/// # Safety
///
/// As [`Simd::transpose_block`] with 16 lanes; the CPU has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn transpose16_ps(
    src: *const f32,
    src_row: usize,
    dst: *mut f32,
    dst_row: usize,
) {
    // SAFETY: the four 8 x 8 quarters are inside the 16 x 16 block the caller vouches for.
    unsafe {
        for (i, j) in [(0, 0), (0, 8), (8, 0), (8, 8)] {
            transpose8_ps(
                src.add(i * src_row + j),
                src_row,
                dst.add(j * dst_row + i),
                dst_row,
            );
        }
    }
}

/// An 8 x 8 `f64` block transposed as four 4 x 4 blocks.
///
/// # Safety
///
/// As [`Simd::transpose_block`] with 8 lanes; the CPU has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn transpose8_pd(src: *const f64, src_row: usize, dst: *mut f64, dst_row: usize) {
    // SAFETY: the four 4 x 4 quarters are inside the 8 x 8 block the caller vouches for.
    unsafe {
        for (i, j) in [(0, 0), (0, 4), (4, 0), (4, 4)] {
            transpose4_pd(
                src.add(i * src_row + j),
                src_row,
                dst.add(j * dst_row + i),
                dst_row,
            );
        }
    }
}
