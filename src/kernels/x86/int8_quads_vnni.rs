//! An int8 convolution with AVX-512 VNNI and VBMI (and BW, VL), four input channels a lane:
//! the positions of up to 16 outputs in the lanes, each lane's four bytes four neighbouring
//! channels of the image at one tap, so every byte of every `vpdpbusd` is a product of the
//! convolution (a kernel 3 wide on the windows' kernel, `int8_windows_vnni.rs`, uses three of
//! four).
//!
//! A lane's four channels must lie in one 32-bit word, and the image lies channels first, so
//! the kernel lays its rows out again, a band of output rows at a time, in the caller's
//! scratch ([`kernels::quads_plan`](crate::kernels::quads_plan) sizes the band and the tile
//! to fit `kernels::QUADS_SCRATCH_QUADS`):
//!
//! - the band's input rows as `[row][channel quad][phase][column / stride]` quads, offset by
//!   128 to be unsigned, the padding written as the pad value, and the columns of a row split
//!   by their remainder modulo the stride (the phase): the 16 positions of a vector then read
//!   16 consecutive quads at every tap, whatever the stride;
//! - a tile's filters as `[filter][channel quad][ky][kx]` quads, once per tile of filters
//!   (the band's rows are laid out again for each tile; a band reuses the rows the last one
//!   laid out that it reads too).
//!
//! The offset's term `128·Σ w[f]`, each filter's sum taken as its weights are laid out, is
//! subtracted at the end (exact modulo `2^32`). Each filter's sums are requantized in the
//! registers that hold them and stored as bytes.

use core::arch::x86_64::*;

use super::int8::add_bias_saturating_avx512;
use super::int8_requantize_avx512::UniformRequantization;
use super::int8_windows_vnni::check_filters;
use crate::kernels::int8::{QuadsPlan, Requantization, WindowShape};

/// One vector of a tile: `rows` output rows from `(oh, ow)`, `len` positions of each
/// (`rows·len <= 16`; several rows only whole: `ow = 0` and `len` the output's width); an
/// empty vector (`rows = 0`) fills a tile's last places.
#[derive(Clone, Copy, Debug, Default)]
struct Vector {
    oh: usize,
    ow: usize,
    rows: usize,
    len: usize,
}

/// Where the quads of a band's input rows lie in the scratch, in quads: `row` a row,
/// `quad` a channel quad of a row (`stride` phases), `phase` a phase; `oh0` is the band's
/// first output row.
#[derive(Clone, Copy, Debug)]
struct Band {
    oh0: usize,
    stride: usize,
    row: usize,
    quad: usize,
    phase: usize,
}

/// The mask of lanes `lo..hi` of 16 (none when `hi <= lo`).
#[inline(always)]
fn lanes(lo: usize, hi: usize) -> u16 {
    let (lo, hi) = (lo.min(16), hi.min(16));
    if hi <= lo {
        0
    } else {
        ((u32::MAX >> (32 - (hi - lo))) << lo) as u16
    }
}

/// `out[f·out_plane + p] = requantize(Σ_{c,ky,kx} weight[f][c][ky][kx] · x[c][oh·s + ky -
/// p][ow·s + kx - p])` for every filter `f` and every output position `p = oh·out_width + ow`,
/// as `conv_windows_i8_vnni` on the whole output, cut as `plan` says
/// ([`quads_plan`](crate::kernels::quads_plan) of `shape` and the filters), the band's rows
/// and the tile's weights laid out in `scratch`.
///
/// # Panics
///
/// When the CPU lacks AVX-512 VNNI or VBMI (with `std`), `plan` is not `quads_plan`'s for
/// the shape and the filters, `shape`'s channels and kernel are not `C` and `KH x KW`, an
/// exponent is outside `-31..=30`, or the sizes do not fit: `image` not
/// `channels·height·width` long, `out` not whole planes of the output, `scratch` shorter than
/// the plan's [`scratch_quads`](QuadsPlan::scratch_quads), or `weight` or the
/// requantization's slices shorter than the filters need.
pub(crate) fn conv_quads_i8_vnni<const C: usize, const KH: usize, const KW: usize>(
    weight: &[i8],
    requantization: &Requantization,
    (image, shape, pad): (&[i8], &WindowShape, i8),
    (plan, scratch): (QuadsPlan, &mut [u32]),
    out: &mut [i8],
) {
    let (out_height, out_width) = shape.output();
    let out_plane = out_height * out_width;
    assert!(
        (shape.channels, shape.kernel) == (C, (KH, KW))
            && image.len() == shape.image_len()
            && out_plane > 0
            && !out.is_empty()
            && out.len().is_multiple_of(out_plane),
        "{shape:?} on an image of {} bytes into {} outputs",
        image.len(),
        out.len(),
    );
    let filters = out.len() / out_plane;
    assert_eq!(
        crate::kernels::quads_plan(shape, filters),
        Some(plan),
        "the plan of {filters} filters on {shape:?}"
    );
    assert!(
        scratch.len() >= plan.scratch_quads(shape),
        "a scratch of {} quads for a plan of {}",
        scratch.len(),
        plan.scratch_quads(shape)
    );
    let l = shape.window_len();
    check_filters((weight, None), requantization, filters, l);
    let (bias, multiplier, exponent) = requantization.parameters;
    let stride = shape.stride;
    let phase = plan.phase_quads(shape);
    let (packed, rows) = scratch.split_at_mut(plan.filters * C.div_ceil(4) * KH * KW);
    let mut f0 = 0;
    while f0 < filters {
        let count = plan.filters.min(filters - f0);
        // SAFETY: the instruction sets are present (detected, or checked above with std;
        // without std, the build targets them); the weights from `f0·l` hold `count` filters
        // of `l = C·KH·KW` (checked above); `packed` holds `plan.filters` filters' quads (the
        // plan's split); the plan takes kernels of at most 16 taps.
        let mut sums = [0_i32; 16];
        unsafe { pack_weights::<C, KH, KW>(&weight[f0 * l..], count, packed, &mut sums) };
        let tile_requantization = Requantization {
            parameters: (&bias[f0..], &multiplier[f0..], &exponent[f0..]),
            zero_and_range: requantization.zero_and_range,
        };
        // The first padded row and the number of rows the last band laid out.
        let mut laid: Option<(usize, usize)> = None;
        let mut oh0 = 0;
        while oh0 < out_height {
            let band_rows = plan.band_rows.min(out_height - oh0);
            let band = Band {
                oh0,
                stride,
                row: plan.row_quads(shape),
                quad: stride * phase,
                phase,
            };
            // The rows the last band of this tile of filters laid out that this one reads
            // too move to the front; the others are laid out.
            let first = oh0 * stride;
            let from = match laid {
                Some((start, count)) if start <= first && first < start + count => {
                    let kept = start + count - first;
                    rows.copy_within((first - start) * band.row..count * band.row, 0);
                    kept
                }
                _ => 0,
            };
            let in_rows = (band_rows - 1) * stride + KH;
            laid = Some((first, in_rows));
            let sizes = (band_rows, from);
            // SAFETY: as above; `rows` holds the band's input rows (the plan sizes the band
            // so that `packed` and the rows fit the scratch, checked above); the stride is
            // from 1 to 4 (the plan's).
            unsafe {
                match stride {
                    1 => lay_out_rows::<C, 1>((image, shape, pad), band, sizes, rows),
                    2 => lay_out_rows::<C, 2>((image, shape, pad), band, sizes, rows),
                    3 => lay_out_rows::<C, 3>((image, shape, pad), band, sizes, rows),
                    _ => lay_out_rows::<C, 4>((image, shape, pad), band, sizes, rows),
                }
            }
            // The band's vectors, `plan.vectors` a tile (the last tile's rest empty).
            let mut vectors = [Vector::default(); 4];
            let mut filled = 0;
            let mut oh = oh0;
            let mut ow = 0;
            while oh < oh0 + band_rows {
                let vector = if plan.rows_per_vector > 1 {
                    Vector {
                        oh,
                        ow: 0,
                        rows: plan.rows_per_vector.min(oh0 + band_rows - oh),
                        len: out_width,
                    }
                } else {
                    Vector {
                        oh,
                        ow,
                        rows: 1,
                        len: 16.min(out_width - ow),
                    }
                };
                ow += vector.len;
                if ow == out_width {
                    (oh, ow) = (oh + vector.rows, 0);
                }
                vectors[filled] = vector;
                filled += 1;
                if filled == plan.vectors || oh == oh0 + band_rows {
                    let o = (&tile_requantization, &sums[..]);
                    let out = (&mut out[f0 * out_plane..], out_plane, out_width);
                    macro_rules! tile {
                        ($r:literal, $v:literal) => {{
                            let v: [Vector; $v] = core::array::from_fn(|i| vectors[i]);
                            if plan.rows_per_vector > 1 {
                                tile::<$r, $v, C, KH, KW, true>(
                                    packed,
                                    (rows, band),
                                    v,
                                    count,
                                    o,
                                    out,
                                )
                            } else {
                                tile::<$r, $v, C, KH, KW, false>(
                                    packed,
                                    (rows, band),
                                    v,
                                    count,
                                    o,
                                    out,
                                )
                            }
                        }};
                    }
                    // SAFETY: the instruction sets are present; `packed` holds the tile's
                    // filters' quads and `rows` the band's rows (laid out above); the
                    // vectors are output positions of the band, at most 16 each; the tile's
                    // `count` filters exist, so the requantization's slices hold `count`
                    // values (the exponents checked above) and the outputs from
                    // `f0·out_plane` `count` whole planes.
                    unsafe {
                        match plan.filters {
                            16 => tile!(16, 1),
                            8 => tile!(8, 2),
                            _ => tile!(4, 4),
                        }
                    }
                    vectors = [Vector::default(); 4];
                    filled = 0;
                }
            }
            oh0 += band_rows;
        }
        f0 += count;
    }
}

/// `packed[f·lq + (q·KH + ky)·KW + kx]` = the weights of filter `f`, channels `4q..4q + 4`, at
/// `(ky, kx)`, one byte each (`lq = ⌈C/4⌉·KH·KW`), for the `count` filters from the start of
/// `weight` (`[filter][channel][ky][kx]`); zero for channels past `C` and for the filters
/// from `count` to `packed.len() / lq`. `sums[f]` = filter `f`'s sum of weights (0 past
/// `count`).
///
/// # Safety
///
/// The CPU has AVX-512BW, VL, VNNI and VBMI; `KH·KW <= 16`; `weight.len() >=
/// count·C·KH·KW`; `packed.len() / lq <= 16`.
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni,avx512vbmi")]
unsafe fn pack_weights<const C: usize, const KH: usize, const KW: usize>(
    weight: &[i8],
    count: usize,
    packed: &mut [u32],
    sums: &mut [i32; 16],
) {
    let taps = KH * KW;
    let lq = C.div_ceil(4) * taps;
    let l = C * taps;
    // Byte `4t + i` of the quads of a channel quad is byte `i·taps + t` of its weights.
    let index: [u8; 64] = core::array::from_fn(|b| ((b % 4) * taps + (b / 4) % taps) as u8);
    // SAFETY (whole body): the instruction sets are present (the contract). Filter `f <
    // count`, quad `q` reads `chans·taps` bytes from `f·l + 4q·taps`, inside its filter's `l`
    // (`chans = min(4, C - 4q)`), inside `weight`; it writes `taps` quads from `f·lq + q·taps`,
    // inside `packed` for `f < packed.len() / lq` (masked stores touch only their lanes).
    unsafe {
        let index = _mm512_loadu_si512(index.as_ptr().cast());
        let quads_mask = lanes(0, taps);
        let ones = _mm512_set1_epi8(1);
        let filters = packed.len() / lq;
        for (f, sum) in sums.iter_mut().enumerate().take(filters) {
            // The filter's weights four a lane, each lane's four summed by `vpdpbusd`.
            let mut total = _mm512_setzero_si512();
            for q in 0..C.div_ceil(4) {
                let to = packed.as_mut_ptr().add(f * lq + q * taps);
                if f >= count {
                    _mm512_mask_storeu_epi32(to.cast(), quads_mask, _mm512_setzero_si512());
                    continue;
                }
                let chans = (C - 4 * q).min(4);
                let bytes = (chans * taps) as u32;
                let mask = u64::MAX >> (64 - bytes);
                let from = weight.as_ptr().add(f * l + 4 * q * taps);
                let raw = _mm512_maskz_loadu_epi8(mask, from);
                total = _mm512_dpbusd_epi32(total, ones, raw);
                let quads = _mm512_permutexvar_epi8(index, raw);
                _mm512_mask_storeu_epi32(to.cast(), quads_mask, quads);
            }
            *sum = _mm512_reduce_add_epi32(total);
        }
    }
}

/// Lays out the input rows `from..` of the band's `band_rows` output rows in `rows` (the
/// rows before `from` are there already): row `r` (image row `oh0·S + r - padding`) at
/// `r·band.row`, its channel quad `q` at `q·band.quad`, its padded column `xp` (image column
/// `xp - padding`) in phase `xp % S` at `xp / S`, each quad the four channels' bytes offset
/// by 128, `pad + 128` outside the image; the bytes of channels past `C` are 128 in the
/// image's columns and `pad + 128` in the padding (their weights are 0, so they add
/// nothing). Rows and phases no tap reads (a kernel shorter or narrower than the stride) are
/// left as they are.
///
/// # Safety
///
/// The CPU has AVX-512BW, VL and VBMI; `image` is `shape`'s (`C` channels, stride `S`);
/// `band` is the layout of `shape`'s plan (`phase = ⌈((out_width - 1)·S + kw) / S⌉`) and
/// `rows.len() >= ((band_rows - 1)·S + kh)·band.row`.
#[target_feature(enable = "avx512bw,avx512vl,avx512vbmi")]
unsafe fn lay_out_rows<const C: usize, const S: usize>(
    (image, shape, pad): (&[i8], &WindowShape, i8),
    band: Band,
    (band_rows, from): (usize, usize),
    rows: &mut [u32],
) {
    let (height, width) = (shape.height, shape.width);
    let (kh, kw, padding) = (shape.kernel.0, shape.kernel.1, shape.padding);
    let plane = height * width;
    let in_rows = (band_rows - 1) * S + kh;
    // The padded columns the windows read, `xp < read`; the image's among them,
    // `padding..padding + columns`.
    let read = (shape.output().1 - 1) * S + shape.kernel.1;
    let columns = width.min(read.saturating_sub(padding));
    let pad_quad = u32::from_ne_bytes([pad as u8 ^ 0x80; 4]);
    // Lanes `k ≡ 0 (mod S)` of 16.
    let every: u16 = (0..16).step_by(S).fold(0, |m, k| m | 1 << k);
    // SAFETY (whole body): the instruction sets are present (the contract). Writes go to
    // row `r < in_rows`, quad `q < ⌈C/4⌉`, phase `ph < S`, index `j < band.phase` (the
    // padding's loop stops there; a chunk's quad `k` has `xp = padding + x0 + k < padding +
    // columns <= read`, so `j = xp / S <= (read - 1) / S < band.phase`), inside the row,
    // inside `rows`. Image row `iy < height` of channel
    // `c < C` is read at the columns `x0..x0 + n`, `x0 + n <= columns <= width`, inside
    // `image`.
    unsafe {
        let fill = _mm512_set1_epi32(pad_quad as i32);
        // Byte `4k + i` of 16 quads is channel `i`'s column `k`: byte `16i + k` of the four
        // channels' 16 columns, one a 128-bit lane.
        let index: [u8; 64] = core::array::from_fn(|b| (16 * (b % 4) + b / 4) as u8);
        let index = _mm512_loadu_si512(index.as_ptr().cast());
        let offset = _mm512_set1_epi8(-128);
        for r in from..in_rows {
            if kh < S && r % S >= kh {
                continue;
            }
            let row = rows.as_mut_ptr().add(r * band.row);
            let Some(iy) = (band.oh0 * S + r)
                .checked_sub(padding)
                .filter(|&iy| iy < height)
            else {
                // A row of padding.
                let mut i = 0;
                while i < band.row {
                    let n = 16.min(band.row - i);
                    _mm512_mask_storeu_epi32(row.add(i).cast(), lanes(0, n), fill);
                    i += n;
                }
                continue;
            };
            for q in 0..C.div_ceil(4) {
                let quad = row.add(q * band.quad);
                // The padding's columns, before and after the image's.
                for ph in 0..S.min(kw) {
                    let phase = quad.add(ph * band.phase);
                    let before = padding.saturating_sub(ph).div_ceil(S);
                    let after = (padding + columns).saturating_sub(ph).div_ceil(S);
                    for j in (0..before.min(band.phase)).chain(after..band.phase) {
                        *phase.add(j) = pad_quad;
                    }
                }
                let mut x0 = 0;
                while x0 < columns {
                    let n = 16.min(columns - x0);
                    let mask = lanes(0, n);
                    let at = |i: usize| -> __m128i {
                        let c = 4 * q + i;
                        if c < C {
                            _mm_maskz_loadu_epi8(
                                mask,
                                image.as_ptr().add(c * plane + iy * width + x0),
                            )
                        } else {
                            _mm_setzero_si128()
                        }
                    };
                    let four = _mm512_inserti32x4::<3>(
                        _mm512_inserti32x4::<2>(
                            _mm512_inserti32x4::<1>(_mm512_castsi128_si512(at(0)), at(1)),
                            at(2),
                        ),
                        at(3),
                    );
                    let quads = _mm512_xor_si512(_mm512_permutexvar_epi8(index, four), offset);
                    let xp0 = x0 + padding;
                    if S == 1 {
                        _mm512_mask_storeu_epi32(quad.add(xp0).cast(), mask, quads);
                    } else {
                        for ph in 0..S.min(kw) {
                            // The chunk's quads in phase `ph`: `k ≡ ph - xp0 (mod S)`.
                            let first = (ph + S - xp0 % S) % S;
                            let picked = (every << first) & mask;
                            if picked == 0 {
                                continue;
                            }
                            let packed = _mm512_maskz_compress_epi32(picked, quads);
                            let to = quad.add(ph * band.phase + (xp0 + first) / S);
                            _mm512_mask_storeu_epi32(
                                to.cast(),
                                lanes(0, picked.count_ones() as usize),
                                packed,
                            );
                        }
                    }
                    x0 += n;
                }
            }
        }
    }
}

/// One tile of [`conv_quads_i8_vnni`]: `R` filters (`count` of them real) at the `V` vectors
/// of positions `vectors` (one row a vector unless `SHORT_ROWS`), their dot products over the
/// band's quads requantized and stored.
///
/// # Safety
///
/// The CPU has AVX-512BW, VL and VNNI; `packed` holds `R` filters' quads of `C` channels of
/// `KH x KW` ([`pack_weights`]); `rows` holds the band's rows laid out as `band` says
/// ([`lay_out_rows`]) and each vector's positions are output positions of the band (`rows
/// == 1` unless `SHORT_ROWS`, `1 <= rows·len <= 16`, or an empty vector); the requantization's
/// slices and `weight_sums` hold `count <= R` values, the exponents in `-31..=30`; `out`
/// holds `count` planes of `out_plane` outputs `out_width` wide.
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni")]
unsafe fn tile<
    const R: usize,
    const V: usize,
    const C: usize,
    const KH: usize,
    const KW: usize,
    const SHORT_ROWS: bool,
>(
    packed: &[u32],
    (rows, band): (&[u32], Band),
    vectors: [Vector; V],
    count: usize,
    (requantization, weight_sums): (&Requantization, &[i32]),
    (out, out_plane, out_width): (&mut [i8], usize, usize),
) {
    let lq = C.div_ceil(4) * KH * KW;
    let s = band.stride;
    // SAFETY (whole body): the instruction sets are present (the contract). A vector's row
    // `j` (output row `oh + j`) reads, at tap `(ky, kx)` of quad `q`, the quads `ow + kx / s`
    // onwards of input row `(oh + j - oh0)·s + ky`, phase `kx % s`, for its `len` lanes:
    // inside the band's rows (the layout's contract); lanes outside a vector's are masked
    // off and not read. Weights are read at `f·lq + t < R·lq`, inside `packed`. Outputs are
    // written at `f·out_plane + oh·out_width + ow` for `f < count` and the vector's lanes,
    // inside `out`.
    unsafe {
        let rp = rows.as_ptr();
        let wp = packed.as_ptr();
        // Each vector's first row's quads at the band's row 0, quad 0, phase 0; and its
        // lanes' mask.
        let starts: [*const u32; V] = core::array::from_fn(|v| {
            let vector = vectors[v];
            if vector.rows == 0 {
                rp
            } else {
                rp.wrapping_add((vector.oh - band.oh0) * s * band.row + vector.ow)
            }
        });
        let masks: [u16; V] = core::array::from_fn(|v| lanes(0, vectors[v].rows * vectors[v].len));
        let mut acc = [[_mm512_setzero_si512(); V]; R];
        for q in 0..C.div_ceil(4) {
            for ky in 0..KH {
                for kx in 0..KW {
                    let tap = ky * band.row + q * band.quad + (kx % s) * band.phase + kx / s;
                    let data: [__m512i; V] = core::array::from_fn(|v| {
                        if SHORT_ROWS {
                            let vector = vectors[v];
                            let mut data = _mm512_setzero_si512();
                            for j in 0..vector.rows {
                                // Row `j`'s lanes start at `j·len`: its pointer, moved back
                                // by as many quads, lines its quads up with them.
                                let row = starts[v]
                                    .wrapping_add(j * s * band.row + tap)
                                    .wrapping_sub(j * vector.len);
                                data = _mm512_mask_loadu_epi32(
                                    data,
                                    lanes(j * vector.len, (j + 1) * vector.len),
                                    row.cast(),
                                );
                            }
                            data
                        } else {
                            _mm512_maskz_loadu_epi32(masks[v], starts[v].wrapping_add(tap).cast())
                        }
                    });
                    let t = (q * KH + ky) * KW + kx;
                    for (f, acc) in acc.iter_mut().enumerate() {
                        let w = _mm512_set1_epi32(*wp.add(f * lq + t) as i32);
                        for (acc, data) in acc.iter_mut().zip(&data) {
                            *acc = _mm512_dpbusd_epi32(*acc, *data, w);
                        }
                    }
                }
            }
        }
        let (bias, multiplier, exponent) = requantization.parameters;
        let range = requantization.zero_and_range;
        for (f, acc) in acc.iter().enumerate().take(count) {
            let correction = _mm512_set1_epi32(weight_sums[f].wrapping_mul(128));
            let requantize = UniformRequantization::new((multiplier[f], exponent[f]), range);
            for (vector, (acc, &mask)) in vectors.iter().zip(acc.iter().zip(&masks)) {
                if mask == 0 {
                    continue;
                }
                let dot = _mm512_sub_epi32(*acc, correction);
                let sum = add_bias_saturating_avx512(dot, bias[f]);
                let q = requantize.apply(sum);
                _mm_mask_storeu_epi8(
                    out.as_mut_ptr()
                        .add(f * out_plane + vector.oh * out_width + vector.ow),
                    mask,
                    _mm512_cvtepi32_epi8(q),
                );
            }
        }
    }
}
