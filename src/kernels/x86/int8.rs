//! Int8 dot products (AVX-512BW, AVX-512 VNNI or AVX2) and requantization (AVX-512 or AVX2):
//! the hot loops of the int8 layers.

use super::simd::array_from;
use core::arch::x86_64::*;

use super::int8_requantize_avx512::{UniformRequantization, requantize_group_avx512};

// ---------------------------------------------------------------------------------------------
// Int8 dot products: the hot loop of the int8 layers.
// ---------------------------------------------------------------------------------------------

/// The instruction sets of the int8 kernels, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IsaI8 {
    /// AVX-512 VNNI (with BW and VL): `vpdpbusd` multiplies 64 unsigned by 64 signed bytes and
    /// adds them in fours into 16 `i32` sums, one instruction (the weights offset by 128 to
    /// make them unsigned, the offset's term `128·Σx` subtracted at the end).
    Avx512Vnni,
    /// AVX-512BW (with VL, for the masked 32-byte loads of a row's tail): 32 `i8` widened to
    /// `i16` per vector, `vpmaddwd` into 16 `i32` sums.
    Avx512Bw,
    /// AVX2: 16 `i8` widened to `i16` per vector, `vpmaddwd` into 8 `i32` sums.
    Avx2,
}

/// The best int8 instruction set this CPU has, detected once (with `std`), or the one the build
/// targets (without `std`); lowered, as [`detected_isa`](super::isa::detected_isa), by the limits of
/// [`crate::kernels::instruction_set()`] (`avx2` keeps AVX2, `portable` none).
pub(crate) fn detected_isa_i8() -> Option<IsaI8> {
    // 1: none, 2: AVX2, 3: AVX-512BW, 4: AVX-512 VNNI.
    #[cfg(feature = "std")]
    let code = {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not yet detected.
        static DETECTED: AtomicU8 = AtomicU8::new(0);
        match DETECTED.load(Ordering::Relaxed) {
            0 => {
                let bw = std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl");
                let code = if bw && std::is_x86_feature_detected!("avx512vnni") {
                    4
                } else if bw {
                    3
                } else if std::is_x86_feature_detected!("avx2") {
                    2
                } else {
                    1
                };
                let code = code.min(i8_code(crate::kernels::instruction_set::process_limit()));
                DETECTED.store(code, Ordering::Relaxed);
                code
            }
            code => code,
        }
    };
    #[cfg(not(feature = "std"))]
    let code = if cfg!(all(
        target_feature = "avx512bw",
        target_feature = "avx512vl",
        target_feature = "avx512vnni"
    )) {
        4
    } else if cfg!(all(
        target_feature = "avx512bw",
        target_feature = "avx512vl"
    )) {
        3
    } else if cfg!(target_feature = "avx2") {
        2
    } else {
        1
    };
    match code.min(i8_code(crate::kernels::instruction_set::thread_limit())) {
        4 => Some(IsaI8::Avx512Vnni),
        3 => Some(IsaI8::Avx512Bw),
        2 => Some(IsaI8::Avx2),
        _ => None,
    }
}

/// Whether this CPU has AVX-512 VBMI (`vpermb`, which [`super::conv_windows_i8_vnni`] and
/// [`super::depthwise_i8_vnni`] lay out their windows with), detected once (with `std`),
/// or whether the build targets it (without). Read together with [`detected_isa_i8`], which
/// holds the limits of [`crate::kernels::instruction_set()`].
pub(crate) fn has_avx512_vbmi() -> bool {
    byte_permutes() >= 1
}

/// Whether this CPU has AVX-512 VBMI and VBMI2 (`vpcompressb`, which
/// [`super::depthwise_i8_vnni`] gathers a vector's outputs with), as [`has_avx512_vbmi`].
pub(crate) fn has_avx512_vbmi2() -> bool {
    byte_permutes() >= 2
}

/// 0: no AVX-512 VBMI, 1: VBMI, 2: VBMI and VBMI2; detected once (with `std`), else what the
/// build targets.
#[inline]
fn byte_permutes() -> u8 {
    #[cfg(feature = "std")]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not yet detected, else the answer plus 1.
        static DETECTED: AtomicU8 = AtomicU8::new(0);
        match DETECTED.load(Ordering::Relaxed) {
            0 => {
                let vbmi = std::is_x86_feature_detected!("avx512vbmi");
                let vbmi2 = vbmi && std::is_x86_feature_detected!("avx512vbmi2");
                let level = u8::from(vbmi) + u8::from(vbmi2);
                DETECTED.store(level + 1, Ordering::Relaxed);
                level
            }
            code => code - 1,
        }
    }
    #[cfg(not(feature = "std"))]
    {
        u8::from(cfg!(target_feature = "avx512vbmi"))
            + u8::from(cfg!(all(
                target_feature = "avx512vbmi",
                target_feature = "avx512vbmi2"
            )))
    }
}

/// A limit of [`crate::kernels::instruction_set()`] (1 portable, 2 AVX2, 3 AVX-512, more: none) as the
/// highest int8 code it allows.
#[inline]
pub(super) fn i8_code(limit: u8) -> u8 {
    match limit {
        ..=1 => 1,
        2 => 2,
        _ => u8::MAX,
    }
}

/// Rows of the weight per pass of the int8 kernels: each chunk of `x`, widened once, meets this
/// many rows.
pub(super) const I8_ROWS: usize = crate::kernels::int8::DOT_ROWS_TILE;

/// `R` rows of the int8 dot products from row `r0`, with AVX-512BW: per chunk of 32 inputs, `x`
/// widened to 16 bits once, and per row the weights widened and multiplied-and-added in pairs
/// into 16 lanes of 32-bit sums (`R` accumulators in registers); the tail of fewer than 32
/// inputs with masked loads.
///
/// # Safety
///
/// The CPU has AVX-512BW; `weight.len() == sums.len() · x.len()`; `r0 + R <= sums.len()`.
#[inline(always)]
pub(super) unsafe fn dot_tile_i8_avx512<const R: usize>(
    weight: &[i8],
    x: &[i8],
    sums: &mut [i32],
    r0: usize,
) {
    let n = x.len();
    let whole = n - n % 32;
    let tail = n % 32;
    // SAFETY (whole body): AVX-512BW is present (the contract). Every load reads 32 bytes at
    // `i` with `i + 32 <= whole <= n`, or at `whole` the `tail` bytes a mask selects (the
    // others are not read), of `x` or of a row `r0 + r < sums.len()` of `weight`, which exists
    // since `weight.len() == sums.len() · n`.
    unsafe {
        let (wp, xp) = (weight.as_ptr(), x.as_ptr());
        let rows: [*const i8; R] = array_from(|r| wp.add((r0 + r) * n));
        let mut acc = [_mm512_setzero_si512(); R];
        let mut i = 0;
        while i < whole {
            let xv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(xp.add(i).cast()));
            for (acc_r, &row) in acc.iter_mut().zip(&rows) {
                let wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(row.add(i).cast()));
                *acc_r = _mm512_add_epi32(*acc_r, _mm512_madd_epi16(xv, wv));
            }
            i += 32;
        }
        if tail > 0 {
            let mask: __mmask32 = (1_u32 << tail) - 1;
            let xv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, xp.add(whole)));
            for (acc_r, &row) in acc.iter_mut().zip(&rows) {
                let wv = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(mask, row.add(whole)));
                *acc_r = _mm512_add_epi32(*acc_r, _mm512_madd_epi16(xv, wv));
            }
        }
        store_lane_sums(&acc, sums.as_mut_ptr().add(r0));
    }
}

/// Writes the sum of the 16 lanes of each of the `R` vectors to `out[0..R]`: for 8 vectors
/// at once, halves added and `vphaddd` in a tree (about 20 instructions for the 8 sums, where
/// summing each vector on its own takes about 9 per vector).
///
/// # Safety
///
/// The CPU has AVX-512F; `out` is valid for `R` writes.
#[inline(always)]
pub(super) unsafe fn store_lane_sums<const R: usize>(v: &[__m512i; R], out: *mut i32) {
    // SAFETY: AVX-512F (and so AVX2) is present and `out` holds `R` values (the contract).
    unsafe {
        if R == 8 {
            let half = |z: __m512i| {
                _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64::<1>(z))
            };
            let a: [__m256i; 8] = array_from(|r| half(v[r]));
            // [a0 lanes 0+1, 2+3, a1 lanes 0+1, 2+3 | the same of lanes 4-7], and so on.
            let b01 = _mm256_hadd_epi32(a[0], a[1]);
            let b23 = _mm256_hadd_epi32(a[2], a[3]);
            let b45 = _mm256_hadd_epi32(a[4], a[5]);
            let b67 = _mm256_hadd_epi32(a[6], a[7]);
            // [a0..a3 summed over lanes 0-3 | a0..a3 over lanes 4-7], and for a4..a7.
            let c0123 = _mm256_hadd_epi32(b01, b23);
            let c4567 = _mm256_hadd_epi32(b45, b67);
            let low = _mm256_permute2x128_si256::<0x20>(c0123, c4567);
            let high = _mm256_permute2x128_si256::<0x31>(c0123, c4567);
            _mm256_storeu_si256(out.cast(), _mm256_add_epi32(low, high));
        } else {
            for (r, v) in v.iter().enumerate() {
                *out.add(r) = _mm512_reduce_add_epi32(*v);
            }
        }
    }
}

/// Defines `$name`: `sums[r] = Σ_i weight[r·n + i] · x[i]` for the rows `r` of `weight`
/// (`n = x.len()`) with `$tile`: tiles of [`I8_ROWS`] rows sharing each chunk of `x`, then
/// single rows.
macro_rules! dot_rows_i8_driver {
    ($name:ident, $tile:ident, $features:literal, $isa:literal) => {
        #[doc = concat!("The int8 dot products of every row with ", $isa, ".")]
        ///
        /// # Safety
        ///
        #[doc = concat!("The CPU has ", $isa, "; `weight.len() == sums.len() · x.len()`.")]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(weight: &[i8], x: &[i8], sums: &mut [i32]) {
            let mut r0 = 0;
            // SAFETY: every tile's rows exist (r0 + rows <= sums.len()); the rest is the
            // contract.
            unsafe {
                while r0 + I8_ROWS <= sums.len() {
                    $tile::<I8_ROWS>(weight, x, sums, r0);
                    r0 += I8_ROWS;
                }
                while r0 < sums.len() {
                    $tile::<1>(weight, x, sums, r0);
                    r0 += 1;
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(super) use dot_rows_i8_driver;

dot_rows_i8_driver!(
    dot_rows_i8_avx512,
    dot_tile_i8_avx512,
    "avx512bw,avx512vl",
    "AVX-512BW and VL"
);
dot_rows_i8_driver!(
    dot_rows_i8_vnni,
    dot_tile_i8_vnni,
    "avx512bw,avx512vl,avx512vnni",
    "AVX-512BW, VL and VNNI"
);
dot_rows_i8_driver!(dot_rows_i8_avx2, dot_tile_i8_avx2, "avx2", "AVX2");

/// `R` rows of the int8 dot products from row `r0`, with AVX-512 VNNI: per chunk of 64 inputs
/// and per row, the weights offset by 128 to be unsigned (`w ^ 0x80`, one `vpxord`) and one
/// `vpdpbusd` adding `(w + 128) · x` in fours into 16 lanes of 32-bit sums; at the end
/// `Σ w·x = Σ (w + 128)·x - 128·Σ x`, where `Σ x` (one more `vpdpbusd` per chunk, for all the
/// rows) is shared by every row. The sums wrap modulo `2^32` (`vpdpbusd` does not saturate),
/// so the result is exact whenever the true dot product fits an `i32`, whatever the values.
///
/// # Safety
///
/// The CPU has AVX-512BW, VL and VNNI; `weight.len() == sums.len() · x.len()`;
/// `r0 + R <= sums.len()`.
#[inline(always)]
pub(super) unsafe fn dot_tile_i8_vnni<const R: usize>(
    weight: &[i8],
    x: &[i8],
    sums: &mut [i32],
    r0: usize,
) {
    let n = x.len();
    let whole = n - n % 64;
    let tail = n % 64;
    // SAFETY (whole body): the instruction sets are present (the contract). Every load reads 64
    // bytes at `i` with `i + 64 <= whole <= n`, or at `whole` the `tail` bytes a mask selects
    // (the others are not read), of `x` or of a row `r0 + r < sums.len()` of `weight`, which
    // exists since `weight.len() == sums.len() · n`.
    unsafe {
        let (wp, xp) = (weight.as_ptr(), x.as_ptr());
        let rows: [*const i8; R] = array_from(|r| wp.add((r0 + r) * n));
        let offset = _mm512_set1_epi8(-128);
        let ones = _mm512_set1_epi8(1);
        let mut acc = [_mm512_setzero_si512(); R];
        let mut x_sum = _mm512_setzero_si512();
        let mut i = 0;
        while i < whole {
            let xv = _mm512_loadu_si512(xp.add(i).cast());
            x_sum = _mm512_dpbusd_epi32(x_sum, ones, xv);
            for r in 0..R {
                let u = _mm512_xor_si512(_mm512_loadu_si512(rows[r].add(i).cast()), offset);
                acc[r] = _mm512_dpbusd_epi32(acc[r], u, xv);
            }
            i += 64;
        }
        if tail > 0 {
            let mask: __mmask64 = (1_u64 << tail) - 1;
            // Masked-off inputs load as 0, adding nothing whatever the weight's offset.
            let xv = _mm512_maskz_loadu_epi8(mask, xp.add(whole));
            x_sum = _mm512_dpbusd_epi32(x_sum, ones, xv);
            for r in 0..R {
                let w = _mm512_maskz_loadu_epi8(mask, rows[r].add(whole));
                acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_xor_si512(w, offset), xv);
            }
        }
        // Σ (w + 128)·x - 128·Σ x, lane by lane, then the lanes summed.
        let correction = _mm512_slli_epi32(x_sum, 7);
        let dots: [__m512i; R] = array_from(|r| _mm512_sub_epi32(acc[r], correction));
        store_lane_sums(&dots, sums.as_mut_ptr().add(r0));
    }
}

/// [`dot_tile_i8_avx512`] with AVX2: chunks of 16 inputs, 8 lanes of 32-bit sums; the tail of
/// fewer than 16 inputs in plain code.
///
/// # Safety
///
/// The CPU has AVX2; `weight.len() == sums.len() · x.len()`; `r0 + R <= sums.len()`.
#[inline(always)]
pub(super) unsafe fn dot_tile_i8_avx2<const R: usize>(
    weight: &[i8],
    x: &[i8],
    sums: &mut [i32],
    r0: usize,
) {
    let n = x.len();
    let whole = n - n % 16;
    // SAFETY (whole body): AVX2 is present (the contract). Every vector load reads 16 bytes at
    // `i` with `i + 16 <= whole <= n`, of `x` or of a row `r0 + r < sums.len()` of `weight`,
    // which exists since `weight.len() == sums.len() · n`.
    unsafe {
        let (wp, xp) = (weight.as_ptr(), x.as_ptr());
        let rows: [*const i8; R] = array_from(|r| wp.add((r0 + r) * n));
        let mut acc = [_mm256_setzero_si256(); R];
        let mut i = 0;
        while i < whole {
            let xv = _mm256_cvtepi8_epi16(_mm_loadu_si128(xp.add(i).cast()));
            for (acc_r, &row) in acc.iter_mut().zip(&rows) {
                let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(row.add(i).cast()));
                *acc_r = _mm256_add_epi32(*acc_r, _mm256_madd_epi16(xv, wv));
            }
            i += 16;
        }
        for (r, acc_r) in acc.iter().enumerate() {
            let mut lanes = [0_i32; 8];
            _mm256_storeu_si256(lanes.as_mut_ptr().cast(), *acc_r);
            let row = &weight[(r0 + r) * n..(r0 + r + 1) * n];
            let rest: i32 = row[whole..]
                .iter()
                .zip(&x[whole..])
                .map(|(&w, &x)| i32::from(w) * i32::from(x))
                .sum();
            sums[r0 + r] = lanes.iter().sum::<i32>() + rest;
        }
    }
}

/// `out[o] = clamp(zero + M[o]·(dots[o] + bias[o]), low, high)` for 16 outputs at a time with
/// AVX-512F, `M[o]` the fixed-point multiplier `(multiplier[o], exponent[o])`: the same integers
/// as [`crate::quant::Multiplier::apply`], lane by lane. The steps, per lane:
/// `acc = dots + bias` (saturating); for a positive exponent, `acc` shifted left by it
/// (saturating); the doubling high product, its 64-bit products in even and odd lanes, rounded
/// as gemmlowp's; the rounding right shift by `-exponent`; the zero point and the clamp.
///
/// # Safety
///
/// The CPU has AVX-512BW and VL; every slice has `out.len()` elements.
///
/// # Panics
///
/// When an exponent is outside `-31..=30` (checked 16 at a time, as the group is loaded).
#[target_feature(enable = "avx512bw,avx512vl")]
pub(super) unsafe fn requantize_i8_avx512(
    dots: &[i32],
    (bias, multiplier, exponent): (&[i32], &[i32], &[i32]),
    (zero, low, top): (i8, i8, i8),
    out: &mut [i8],
) {
    let n = out.len();
    // SAFETY (whole body): AVX-512BW and VL are present (the contract). Each group reads and
    // writes lanes `o0..o0 + count` of slices of `n` elements, `count <= 16` and
    // `o0 + count <= n`, the other lanes masked off.
    unsafe {
        let mut o0 = 0;
        while o0 < n {
            let count = 16.min(n - o0);
            let mask: __mmask16 = if count == 16 {
                0xFFFF
            } else {
                (1 << count) - 1
            };
            let load = |s: &[i32]| _mm512_maskz_loadu_epi32(mask, s.as_ptr().add(o0));
            let (d, b, m, e) = (load(dots), load(bias), load(multiplier), load(exponent));
            let out_of_range = _mm512_mask_cmpgt_epi32_mask(mask, e, _mm512_set1_epi32(30))
                | _mm512_mask_cmplt_epi32_mask(mask, e, _mm512_set1_epi32(-31));
            assert!(
                out_of_range == 0,
                "a multiplier's exponent is from -31 to 30"
            );
            let acc = saturating_add_avx512(d, b);
            let q = requantize_group_avx512::<true>((acc, m, e), (zero, low, top));
            _mm_mask_storeu_epi8(out.as_mut_ptr().add(o0), mask, _mm512_cvtepi32_epi8(q));
            o0 += count;
        }
    }
}

/// `d + b` per lane, saturating: an overflow has both operands' sign and the other result sign.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn saturating_add_avx512(d: __m512i, b: __m512i) -> __m512i {
    // SAFETY: the instruction set is present (the contract); no memory is touched.
    unsafe {
        let sum = _mm512_add_epi32(d, b);
        let overflow = _mm512_cmplt_epi32_mask(
            _mm512_and_si512(_mm512_xor_si512(d, sum), _mm512_xor_si512(b, sum)),
            _mm512_setzero_si512(),
        );
        let saturated = _mm512_xor_si512(_mm512_srai_epi32(d, 31), _mm512_set1_epi32(i32::MAX));
        _mm512_mask_blend_epi32(overflow, sum, saturated)
    }
}

/// [`requantize_i8_avx512`] with the same parameters for every output: they are broadcast
/// once, the exponent checked once, and the requantization takes one fused step
/// ([`UniformRequantization`]).
///
/// # Safety
///
/// The CPU has AVX-512BW and VL; `dots.len() == out.len()`.
///
/// # Panics
///
/// When the exponent is outside `-31..=30`.
#[target_feature(enable = "avx512bw,avx512vl")]
pub(super) unsafe fn requantize_uniform_i8_avx512(
    dots: &[i32],
    (bias, multiplier, exponent): (i32, i32, i32),
    range: (i8, i8, i8),
    out: &mut [i8],
) {
    assert!(
        (-31..=30).contains(&exponent),
        "a multiplier's exponent is from -31 to 30"
    );
    let n = out.len();
    // SAFETY (whole body): AVX-512BW and VL are present (the contract). Each group reads and
    // writes lanes `o0..o0 + count` of slices of `n` elements, `count <= 16` and
    // `o0 + count <= n`, the other lanes masked off; the exponent is checked above.
    unsafe {
        let requantization = UniformRequantization::new((multiplier, exponent), range);
        let mut o0 = 0;
        while o0 < n {
            let count = 16.min(n - o0);
            let mask: __mmask16 = if count == 16 {
                0xFFFF
            } else {
                (1 << count) - 1
            };
            let d = _mm512_maskz_loadu_epi32(mask, dots.as_ptr().add(o0));
            let acc = add_bias_saturating_avx512(d, bias);
            let q = requantization.apply(acc);
            _mm_mask_storeu_epi8(out.as_mut_ptr().add(o0), mask, _mm512_cvtepi32_epi8(q));
            o0 += count;
        }
    }
}

/// `d + bias` in every lane, saturating: `d` first held where the sum cannot overflow (one
/// filter's bias, broadcast).
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
pub(super) unsafe fn add_bias_saturating_avx512(d: __m512i, bias: i32) -> __m512i {
    // SAFETY: the instruction set is present (the contract); no memory is touched.
    unsafe {
        let b = _mm512_set1_epi32(bias);
        if bias >= 0 {
            _mm512_add_epi32(_mm512_min_epi32(d, _mm512_set1_epi32(i32::MAX - bias)), b)
        } else {
            _mm512_add_epi32(_mm512_max_epi32(d, _mm512_set1_epi32(i32::MIN - bias)), b)
        }
    }
}

/// [`requantize_i8_avx512`] with AVX2, 8 outputs at a time, the same steps lane by lane (AVX2
/// has no 64-bit arithmetic shift: the high product's low 32 bits, all that is kept, are the
/// same after a logical one); the last `n % 8` outputs one at a time.
///
/// # Safety
///
/// The CPU has AVX2; every slice has `out.len()` elements.
///
/// # Panics
///
/// When an exponent is outside `-31..=30` (checked 8 at a time, as the group is loaded).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn requantize_i8_avx2(
    dots: &[i32],
    (bias, multiplier, exponent): (&[i32], &[i32], &[i32]),
    (zero, low, top): (i8, i8, i8),
    out: &mut [i8],
) {
    let n = out.len();
    let whole = n / 8 * 8;
    // SAFETY (whole body): AVX2 is present (the contract). Each group reads lanes
    // `o0..o0 + 8` of slices of `n` elements and writes 8 bytes of `out` there,
    // `o0 + 8 <= whole <= n`.
    unsafe {
        let mut o0 = 0;
        while o0 < whole {
            let load = |s: &[i32]| _mm256_loadu_si256(s.as_ptr().add(o0).cast());
            let (d, b, m, e) = (load(dots), load(bias), load(multiplier), load(exponent));
            let out_of_range = _mm256_or_si256(
                _mm256_cmpgt_epi32(e, _mm256_set1_epi32(30)),
                _mm256_cmpgt_epi32(_mm256_set1_epi32(-31), e),
            );
            assert!(
                _mm256_movemask_epi8(out_of_range) == 0,
                "a multiplier's exponent is from -31 to 30"
            );
            let acc = saturating_add_avx2(d, b);
            let q = requantize_group_avx2::<true>((acc, m, e), (zero, low, top));
            store_low_bytes_avx2(q, out.as_mut_ptr().add(o0));
            o0 += 8;
        }
    }
    for o in whole..n {
        assert!(
            (-31..=30).contains(&exponent[o]),
            "a multiplier's exponent is from -31 to 30"
        );
        out[o] = requantize_one(
            dots[o],
            (bias[o], multiplier[o], exponent[o]),
            (zero, low, top),
        );
    }
}

/// `d + b` per lane, saturating, as [`saturating_add_avx512`].
///
/// # Safety
///
/// The CPU has AVX2.
#[inline(always)]
unsafe fn saturating_add_avx2(d: __m256i, b: __m256i) -> __m256i {
    // SAFETY: AVX2 is present (the contract); no memory is touched.
    unsafe {
        let sum = _mm256_add_epi32(d, b);
        let overflow = _mm256_srai_epi32(
            _mm256_and_si256(_mm256_xor_si256(d, sum), _mm256_xor_si256(b, sum)),
            31,
        );
        let saturated = _mm256_xor_si256(_mm256_srai_epi32(d, 31), _mm256_set1_epi32(i32::MAX));
        _mm256_blendv_epi8(sum, saturated, overflow)
    }
}

/// One group of 8 lanes of [`requantize_i8_avx2`] after the bias: `clamp(zero + M·acc, low,
/// top)` per lane, as `i32`. Without `LEFT`, every exponent is at most 0 (no left shift).
///
/// # Safety
///
/// The CPU has AVX2; every exponent is in `-31..=30` (at most 0 without `LEFT`).
#[inline(always)]
unsafe fn requantize_group_avx2<const LEFT: bool>(
    (acc, m, e): (__m256i, __m256i, __m256i),
    (zero, low, top): (i8, i8, i8),
) -> __m256i {
    // SAFETY: AVX2 is present (the contract); no memory is touched.
    unsafe {
        let zeros = _mm256_setzero_si256();
        let ones = _mm256_set1_epi32(1);
        let max = _mm256_set1_epi32(i32::MAX);
        let min = _mm256_set1_epi32(i32::MIN);
        // A multiplier of 1 or more (exponent > 0) first shifts acc left, saturating (the
        // shift undone differs from acc exactly when bits or the sign were lost).
        let acc = if LEFT {
            let left = _mm256_max_epi32(e, zeros);
            let shifted = _mm256_sllv_epi32(acc, left);
            let kept = _mm256_cmpeq_epi32(_mm256_srav_epi32(shifted, left), acc);
            let limit = _mm256_xor_si256(_mm256_srai_epi32(acc, 31), max);
            _mm256_blendv_epi8(limit, shifted, kept)
        } else {
            acc
        };
        // The doubling high product: round(acc·m / 2^31), ties up; MIN·MIN saturates.
        /// The doubling high product's 64-bit step, for the products in 64-bit lanes.
        #[inline(always)]
        unsafe fn high64(p: __m256i) -> __m256i {
            // SAFETY: the caller's instruction sets; no memory is touched.
            // As in `requantize_group_avx512`: (p + 2^30) >> 31 for either sign; bits 31..62,
            // which the logical shift brings down as the arithmetic one would.
            unsafe { _mm256_srli_epi64(_mm256_add_epi64(p, _mm256_set1_epi64x(1 << 30)), 31) }
        }
        let even = high64(_mm256_mul_epi32(acc, m));
        let odd = high64(_mm256_mul_epi32(
            _mm256_srli_epi64(acc, 32),
            _mm256_srli_epi64(m, 32),
        ));
        let high = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0b1010_1010);
        let both_min = _mm256_and_si256(_mm256_cmpeq_epi32(acc, min), _mm256_cmpeq_epi32(m, min));
        let high = _mm256_blendv_epi8(high, max, both_min);
        // The rounding right shift by r = max(-exponent, 0): (x >> r) + (remainder >
        // threshold).
        let r = _mm256_max_epi32(_mm256_sub_epi32(zeros, e), zeros);
        let low_bits = _mm256_sub_epi32(_mm256_sllv_epi32(ones, r), ones);
        let remainder = _mm256_and_si256(high, low_bits);
        let negative = _mm256_cmpgt_epi32(zeros, high);
        let threshold = _mm256_sub_epi32(_mm256_srai_epi32(low_bits, 1), negative);
        let up = _mm256_cmpgt_epi32(remainder, threshold);
        let y = _mm256_sub_epi32(_mm256_srav_epi32(high, r), up);
        // zero + y clamped to [low, top], as y clamped to [low - zero, top - zero] (no
        // overflow), then zero added.
        let zero = i32::from(zero);
        let y = _mm256_max_epi32(
            _mm256_min_epi32(y, _mm256_set1_epi32(i32::from(top) - zero)),
            _mm256_set1_epi32(i32::from(low) - zero),
        );
        _mm256_add_epi32(y, _mm256_set1_epi32(zero))
    }
}

/// Each lane's low byte (the lanes hold values in -128..=127), eight in a row, stored at `out`.
///
/// # Safety
///
/// The CPU has AVX2; `out` is valid for 8 writes.
#[inline(always)]
unsafe fn store_low_bytes_avx2(q: __m256i, out: *mut i8) {
    // SAFETY: AVX2 is present and `out` holds 8 bytes (the contract).
    unsafe {
        // Byte 0 of each i32 of a 128-bit half to its first four bytes.
        let first_bytes = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, //
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let bytes = _mm256_shuffle_epi8(q, first_bytes);
        let eight = _mm_unpacklo_epi32(
            _mm256_castsi256_si128(bytes),
            _mm256_extracti128_si256(bytes, 1),
        );
        _mm_storel_epi64(out.cast(), eight);
    }
}

/// [`requantize_i8_avx2`] with the same parameters for every output, as
/// [`requantize_uniform_i8_avx512`]; the last `n % 8` outputs one at a time.
///
/// # Safety
///
/// The CPU has AVX2; `dots.len() == out.len()`.
///
/// # Panics
///
/// When the exponent is outside `-31..=30`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn requantize_uniform_i8_avx2(
    dots: &[i32],
    parameters: (i32, i32, i32),
    range: (i8, i8, i8),
    out: &mut [i8],
) {
    let (bias, multiplier, exponent) = parameters;
    assert!(
        (-31..=30).contains(&exponent),
        "a multiplier's exponent is from -31 to 30"
    );
    let n = out.len();
    let whole = n / 8 * 8;
    // SAFETY (whole body): AVX2 is present (the contract). Each group reads lanes
    // `o0..o0 + 8` of `dots` and writes 8 bytes of `out` there, `o0 + 8 <= whole <= n`; the
    // exponent is checked above.
    unsafe {
        let (b, m, e) = (
            _mm256_set1_epi32(bias),
            _mm256_set1_epi32(multiplier),
            _mm256_set1_epi32(exponent),
        );
        let bound = _mm256_set1_epi32(if bias >= 0 {
            i32::MAX - bias
        } else {
            i32::MIN - bias
        });
        let mut o0 = 0;
        while o0 < whole {
            let d = _mm256_loadu_si256(dots.as_ptr().add(o0).cast());
            // d + bias, saturating: d first held where the sum cannot overflow.
            let acc = if bias >= 0 {
                _mm256_add_epi32(_mm256_min_epi32(d, bound), b)
            } else {
                _mm256_add_epi32(_mm256_max_epi32(d, bound), b)
            };
            let q = if exponent > 0 {
                requantize_group_avx2::<true>((acc, m, e), range)
            } else {
                requantize_group_avx2::<false>((acc, m, e), range)
            };
            store_low_bytes_avx2(q, out.as_mut_ptr().add(o0));
            o0 += 8;
        }
    }
    for o in whole..n {
        out[o] = requantize_one(dots[o], parameters, range);
    }
}

/// One output of [`requantize_i8`], the definition: `clamp(zero + M·(dot + bias), low, high)`.
#[inline]
pub(super) fn requantize_one(dot: i32, parameters: (i32, i32, i32), range: (i8, i8, i8)) -> i8 {
    crate::kernels::reference::requantize_one(dot, parameters, range)
}

/// `out[o] = clamp(zero + M[o]·(dots[o] + bias[o]), low, high)`: the int8 layers'
/// requantization, 16 outputs at a time with AVX-512, 8 with AVX2.
///
/// # Panics
///
/// When the slices' lengths differ, or an exponent is outside `-31..=30` (no
/// [`crate::quant::Multiplier`] has one).
pub(crate) fn requantize_i8(
    isa: IsaI8,
    dots: &[i32],
    (bias, multiplier, exponent): (&[i32], &[i32], &[i32]),
    range: (i8, i8, i8),
    out: &mut [i8],
) {
    let n = out.len();
    assert!(
        (dots.len(), bias.len(), multiplier.len(), exponent.len()) == (n, n, n, n),
        "requantizing {n} outputs from slices of other lengths"
    );
    match isa {
        IsaI8::Avx512Vnni | IsaI8::Avx512Bw => {
            #[cfg(feature = "std")]
            assert!(
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl"),
                "the CPU lacks AVX-512BW or AVX-512VL"
            );
            // SAFETY: lengths checked above; AVX-512BW and VL are present (detected, or
            // checked above with std; without std, the build targets them). The kernel checks
            // the exponents itself.
            unsafe { requantize_i8_avx512(dots, (bias, multiplier, exponent), range, out) }
        }
        IsaI8::Avx2 => {
            #[cfg(feature = "std")]
            assert!(std::is_x86_feature_detected!("avx2"), "the CPU lacks AVX2");
            // SAFETY: lengths checked above; AVX2 is present (detected, or checked above with
            // std; without std, the build targets it). The kernel checks the exponents itself.
            unsafe { requantize_i8_avx2(dots, (bias, multiplier, exponent), range, out) }
        }
    }
}

/// `out[o] = clamp(zero + M·(dots[o] + bias), low, high)`, the same parameters for every
/// output: [`requantize_i8`] for one filter's outputs.
///
/// # Panics
///
/// When the slices' lengths differ, or the exponent is outside `-31..=30`.
pub(crate) fn requantize_uniform_i8(
    isa: IsaI8,
    dots: &[i32],
    parameters: (i32, i32, i32),
    range: (i8, i8, i8),
    out: &mut [i8],
) {
    let n = out.len();
    assert!(
        dots.len() == n,
        "requantizing {n} outputs from {} dot products",
        dots.len()
    );
    match isa {
        IsaI8::Avx512Vnni | IsaI8::Avx512Bw => {
            #[cfg(feature = "std")]
            assert!(
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl"),
                "the CPU lacks AVX-512BW or AVX-512VL"
            );
            // SAFETY: lengths checked above; AVX-512BW and VL are present (detected, or
            // checked above with std; without std, the build targets them). The kernel checks
            // the exponent itself.
            unsafe { requantize_uniform_i8_avx512(dots, parameters, range, out) }
        }
        IsaI8::Avx2 => {
            #[cfg(feature = "std")]
            assert!(std::is_x86_feature_detected!("avx2"), "the CPU lacks AVX2");
            // SAFETY: as above, for AVX2.
            unsafe { requantize_uniform_i8_avx2(dots, parameters, range, out) }
        }
    }
}

/// `sums[r] = Σ_i weight[r·n + i] · x[i]` with `isa`: the int8 layers' dot products.
///
/// # Panics
///
/// When `weight.len() != sums.len() · x.len()`, or the CPU does not have `isa`.
pub(crate) fn dot_rows_i8(isa: IsaI8, weight: &[i8], x: &[i8], sums: &mut [i32]) {
    assert_eq!(
        weight.len(),
        sums.len() * x.len(),
        "a weight of {} values does not have {} rows of {}",
        weight.len(),
        sums.len(),
        x.len()
    );
    match isa {
        IsaI8::Avx512Vnni => {
            #[cfg(feature = "std")]
            assert!(
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512vnni"),
                "the CPU lacks AVX-512BW, AVX-512VL or AVX-512 VNNI"
            );
            // SAFETY: lengths checked above; the instruction sets are present (detected, or
            // checked above with std; without std, the build targets them).
            unsafe { dot_rows_i8_vnni(weight, x, sums) }
        }
        IsaI8::Avx512Bw => {
            #[cfg(feature = "std")]
            assert!(
                std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl"),
                "the CPU lacks AVX-512BW or AVX-512VL"
            );
            // SAFETY: lengths checked above; the instruction set is present (detected, or
            // checked above with std; without std, the build targets it).
            unsafe { dot_rows_i8_avx512(weight, x, sums) }
        }
        IsaI8::Avx2 => {
            #[cfg(feature = "std")]
            assert!(std::is_x86_feature_detected!("avx2"), "the CPU lacks AVX2");
            // SAFETY: as above, for AVX2.
            unsafe { dot_rows_i8_avx2(weight, x, sums) }
        }
    }
}
