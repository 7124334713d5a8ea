//! An int8 depthwise convolution's outputs, every channel's plane, with AVX-512 VNNI, VBMI and
//! VBMI2 (and BW, VL), kernels up to 8 x 8, strides up to 4: 16 outputs of a plane in the
//! lanes, up to four neighbouring taps of a filter row in each lane's four bytes.
//!
//! Each block of output rows reads a padded copy of the input rows it needs (the padding
//! written out as the pad value, the bytes offset by 128 to be unsigned). Output `(r, ow)`
//! is computed at the "wide" index `j = r·PW + ow` (`PW` the padded width), whose window
//! starts at byte `S·j` of the copy (`S` the stride) for every row alike: 16 consecutive wide
//! indices take one 64-byte load per filter row and group of four columns, one `vpermb` that
//! puts lane `i`'s four bytes `S·i .. S·i + 4` in its lane, and one `vpdpbusd` with the
//! filter's four weights of that row (zero past the filter's width). The offset's term
//! `128·Σ w` is subtracted at the end (exact modulo `2^32`). The sums are requantized in the
//! registers that hold them (the channel's bias, multiplier and clamp), and `vpcompressb`
//! drops the wide indices past each row's `OW` outputs before the bytes are stored, so the
//! outputs land in their plane in order.

use core::arch::x86_64::*;

use super::int8::add_bias_saturating_avx512;
use super::int8_requantize_avx512::UniformRequantization;
use crate::kernels::depthwise_i8::{PlaneShape, VNNI_PADDED_BYTES};
use crate::kernels::shape::Requantization;

/// The bits `lo..hi` of a 16-bit mask (none when `hi <= lo`).
#[inline(always)]
fn bits16(lo: isize, hi: isize) -> u16 {
    let (lo, hi) = (lo.clamp(0, 16) as u32, hi.clamp(0, 16) as u32);
    if hi <= lo {
        0
    } else {
        ((u32::MAX >> (32 - (hi - lo))) << lo) as u16
    }
}

/// The lanes of the 16 wide indices from `j0` that are outputs: those whose column
/// `(j0 + i) % pw` (`column` is `j0 % pw`) is under `ow`, and `i < left` (`left = n - j0`).
#[inline(always)]
fn output_lanes(column: usize, (pw, ow): (usize, usize), left: usize) -> u16 {
    let mut lanes = 0;
    // Lane of the first index of each row the vector touches.
    let mut start = -(column as isize);
    while start < 16 {
        lanes |= bits16(start, start + ow as isize);
        start += pw as isize;
    }
    lanes & bits16(0, left as isize)
}

/// One channel's fixed values for [`vectors`]: the filter rows' weights broadcast (`[ky·G + g]`
/// the columns `4g..4g + 4` of row `ky`, 0 past the width), the offset's correction, and the
/// requantization.
struct Channel {
    weights: [__m512i; 16],
    correction: __m512i,
    bias: i32,
    requantization: UniformRequantization,
}

/// `V` vectors of wide indices from vector `v`: their sums over the filter, requantized, the
/// outputs among them (`lanes[t]` of vector `v + t`) stored at `out[*cursor..]`, `*cursor`
/// advanced past them.
///
/// # Safety
///
/// The CPU has AVX-512BW, VL, VNNI, VBMI and VBMI2; `padded` holds at least
/// `S·16·(v + V - 1) + (k - 1)·pw + 4·(G - 1) + 64` bytes (`G = ceil(k / 4)`, `k <= 8`); the
/// outputs `lanes` counts fit `out` from `*cursor`; `channel`'s exponent is in `-31..=30`.
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512vbmi2")]
unsafe fn vectors<const V: usize>(
    (padded, index, shape): (&[u8], __m512i, &PlaneShape),
    channel: &Channel,
    (v, lanes): (usize, &[u16]),
    (out, cursor): (&mut [i8], &mut usize),
) {
    let PlaneShape { k, stride, .. } = *shape;
    let pw = shape.padded_width();
    let groups = k.div_ceil(4);
    // SAFETY (whole body): the instruction sets are present (the contract). Every load reads
    // 64 bytes from `stride·16·(v + t) + ky·pw + 4g`, `t < V`, `ky < k`, `g < G`: inside
    // `padded` (the contract). Each store writes the `popcnt(lanes)` outputs of a vector at
    // `out[*cursor..]`, inside `out` (the contract); the exponent is in range.
    unsafe {
        let base = padded.as_ptr();
        let mut acc = [_mm512_setzero_si512(); V];
        for ky in 0..k {
            for g in 0..groups {
                let w = channel.weights[ky * groups + g];
                for (t, acc) in acc.iter_mut().enumerate() {
                    let at = stride * 16 * (v + t) + ky * pw + 4 * g;
                    let data = _mm512_loadu_si512(base.add(at).cast());
                    *acc = _mm512_dpbusd_epi32(*acc, _mm512_permutexvar_epi8(index, data), w);
                }
            }
        }
        for (acc, &lanes) in acc.iter().zip(lanes) {
            let dot = _mm512_sub_epi32(*acc, channel.correction);
            let sum = add_bias_saturating_avx512(dot, channel.bias);
            let q = channel.requantization.apply(sum);
            let outputs = _mm_maskz_compress_epi8(lanes, _mm512_cvtepi32_epi8(q));
            let count = lanes.count_ones();
            _mm_mask_storeu_epi8(
                out.as_mut_ptr().add(*cursor).cast(),
                ((1_u32 << count) - 1) as u16,
                outputs,
            );
            *cursor += count as usize;
        }
    }
}

/// The most vectors of 16 wide indices in one block: the last one's loads start at
/// [`VNNI_PADDED_BYTES`]` - 64` at most, at `16·v` or more.
const MOST_VECTORS: usize = (VNNI_PADDED_BYTES - 64) / 16 + 1;

/// The output lanes of each vector of a block of `rows` output rows (the same for every
/// channel): [`output_lanes`] from index 0, 16 at a time.
fn block_lanes(shape: &PlaneShape, rows: usize) -> [u16; MOST_VECTORS] {
    let pw = shape.padded_width();
    let n = (rows - 1) * pw + shape.ow;
    let mut lanes = [0; MOST_VECTORS];
    let mut column = 0;
    for (v, lanes) in lanes.iter_mut().take(n.div_ceil(16)).enumerate() {
        *lanes = output_lanes(column, (pw, shape.ow), n - 16 * v);
        column = (column + 16) % pw;
    }
    lanes
}

/// The chunks of [`VNNI_PADDED_BYTES`] that a block's padded rows are written in, 64 bytes
/// each.
const CHUNKS: usize = VNNI_PADDED_BYTES / 64;

/// How to write one block's padded input rows, the same for every channel: for each chunk of
/// 64 bytes, which of its bytes are inside the image (the others are padding), and where in
/// the plane the first of them is (those inside the image are consecutive bytes of the plane,
/// row after row).
struct BlockCopy {
    chunks: usize,
    inside: [u64; CHUNKS],
    from: [usize; CHUNKS],
}

impl BlockCopy {
    /// The copy of the padded rows `first..first + count` of `shape`'s planes.
    fn new(shape: &PlaneShape, (first, count): (usize, usize)) -> Self {
        let PlaneShape { h, w, pad, .. } = *shape;
        let pw = shape.padded_width();
        let bytes = count * pw;
        let mut copy = Self {
            chunks: bytes.div_ceil(64),
            inside: [0; CHUNKS],
            from: [0; CHUNKS],
        };
        for c in 0..copy.chunks {
            let start = 64 * c;
            let mut from = None;
            // Each padded row the chunk touches: its bytes inside the image.
            for row in start / pw..=((start + 63) / pw).min(count - 1) {
                let Some(iy) = (first + row).checked_sub(pad).filter(|&iy| iy < h) else {
                    continue;
                };
                let at = (row * pw + pad) as isize - start as isize;
                let bits = super::int8_windows_vnni::bits(at, at + w as isize);
                if bits != 0 && from.is_none() {
                    // The first byte inside the image in this chunk.
                    let skipped = (start as isize - (row * pw + pad) as isize).max(0) as usize;
                    from = Some(iy * w + skipped);
                }
                copy.inside[c] |= bits;
            }
            copy.from[c] = from.unwrap_or(0);
        }
        copy
    }

    /// Writes the block's padded rows of `plane` into `padded`, each byte offset by 128, the
    /// padding as `fill` offset likewise: per chunk, one masked load of the bytes inside the
    /// image and one `vpexpandb` that puts them in their places.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512BW and VBMI2; `plane.len() == h·w` of the shape `self` was made for;
    /// `padded.len() >= 64·chunks`.
    #[target_feature(enable = "avx512bw,avx512vbmi2")]
    unsafe fn write(&self, plane: &[i8], fill: i8, padded: &mut [u8]) {
        // SAFETY: the instruction sets are present (the contract). Chunk `c`'s load reads
        // the `popcnt(inside[c])` bytes from `from[c]`: the image's bytes under the chunk,
        // consecutive in the plane, so inside it (`new`); its store writes `padded[64c..][..64]`,
        // inside `padded` (the contract).
        unsafe {
            let offset = _mm512_set1_epi8(-128);
            let fill = _mm512_xor_si512(_mm512_set1_epi8(fill), offset);
            for c in 0..self.chunks {
                let inside = self.inside[c];
                let count = inside.count_ones();
                let load = if count == 64 {
                    u64::MAX
                } else {
                    (1_u64 << count) - 1
                };
                let bytes = _mm512_maskz_loadu_epi8(load, plane.as_ptr().add(self.from[c]).cast());
                let row = _mm512_mask_expand_epi8(fill, inside, _mm512_xor_si512(bytes, offset));
                _mm512_storeu_si512(padded.as_mut_ptr().add(64 * c).cast(), row);
            }
        }
    }
}

/// `out[o][oh][ow] = requantize_o(Σ_{ky,kx} filters[o][ky][kx] · x[o / (OC / C)][oh·s + ky -
/// p][ow·s + kx - p])` for every output channel `o < OC` (`OC = out.len() / (oh·ow)`, a multiple
/// of the image's channels `C = image.len() / (h·w)`), the planes of `shape` (`s` its stride,
/// `p` its padding, the padding read as `fill`), the dot products exact in `i32` (callers
/// bound the filter so that no sum overflows), then channel `o`'s bias, multiplier and clamp
/// (`requantization`, as `requantize_i8`): an int8 depthwise convolution, with AVX-512 VNNI,
/// VBMI and VBMI2.
///
/// # Panics
///
/// When the CPU lacks an instruction set (with `std`), the shape has no rows for the buffer
/// ([`PlaneShape::rows_per_call_vnni`] is 0), an exponent is outside `-31..=30`, or the sizes
/// do not fit: `image` not whole planes, `filters` not `OC` filters of `k x k`, `out` not whole
/// output planes, `OC` not a multiple of `C`, the requantization's slices shorter than `OC`.
pub(crate) fn depthwise_i8_vnni(
    (image, shape, fill): (&[i8], PlaneShape, i8),
    filters: &[i8],
    requantization: &Requantization,
    out: &mut [i8],
) {
    let PlaneShape {
        h, w, k, oh, ow, ..
    } = shape;
    let rows = shape.rows_per_call_vnni();
    let (plane, out_plane, window) = (h * w, oh * ow, k * k);
    let (bias, multiplier, exponent) = requantization.parameters;
    let channels = image.len() / plane.max(1);
    let filter_count = out.len() / out_plane.max(1);
    assert!(
        rows > 0
            && plane > 0
            && out_plane > 0
            && image.len() == channels * plane
            && out.len() == filter_count * out_plane
            && channels > 0
            && filter_count.is_multiple_of(channels)
            && filters.len() == filter_count * window
            && bias.len() >= filter_count
            && multiplier.len() >= filter_count
            && exponent.len() >= filter_count,
        "{shape:?} on an image of {} bytes into {} outputs with {} weights, {} biases, {} \
         multipliers, {} exponents",
        image.len(),
        out.len(),
        filters.len(),
        bias.len(),
        multiplier.len(),
        exponent.len(),
    );
    assert!(
        exponent[..filter_count]
            .iter()
            .all(|e| (-31..=30).contains(e)),
        "a multiplier's exponent is from -31 to 30"
    );
    #[cfg(feature = "std")]
    assert!(
        std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512vbmi")
            && std::is_x86_feature_detected!("avx512vbmi2"),
        "the CPU lacks AVX-512BW, AVX-512VL, AVX-512 VNNI, VBMI or VBMI2"
    );
    // SAFETY: the CPU has the instruction sets (asserted with `std`, the build's target
    // without: the dispatcher's check); the sizes are checked above.
    unsafe { depthwise_channels(image, shape, fill, filters, requantization, out, rows) }
}

/// [`depthwise_i8_vnni`] once its sizes are checked, `rows` output rows a block.
///
/// # Safety
///
/// [`depthwise_i8_vnni`]'s checks hold and the CPU has its instruction sets; `rows` is
/// [`PlaneShape::rows_per_call_vnni`].
#[target_feature(enable = "avx512bw,avx512vl,avx512vnni,avx512vbmi,avx512vbmi2")]
unsafe fn depthwise_channels(
    image: &[i8],
    shape: PlaneShape,
    fill: i8,
    filters: &[i8],
    requantization: &Requantization,
    out: &mut [i8],
    rows: usize,
) {
    let PlaneShape {
        h,
        w,
        k,
        stride,
        oh,
        ow,
        ..
    } = shape;
    let (plane, out_plane, window) = (h * w, oh * ow, k * k);
    let pw = shape.padded_width();
    let groups = k.div_ceil(4);
    let (bias, multiplier, exponent) = requantization.parameters;
    let per_channel = out.len() / out_plane / (image.len() / plane);
    let mut padded = [0_u8; VNNI_PADDED_BYTES];
    // SAFETY (whole body): the instruction sets are present (the contract). `padded` holds
    // `vnni_bytes(rows)` bytes or more (`rows_per_call_vnni`), which covers every block's
    // copied rows and every vector's loads; a block's outputs are the plane's rows
    // `r0..r0 + count`, inside `out`.
    unsafe {
        let index: [u8; 64] = core::array::from_fn(|b| ((b / 4) * stride + b % 4) as u8);
        let index = _mm512_loadu_si512(index.as_ptr().cast());
        // Each filter's weights broadcast and its requantization, set in place for each
        // channel (the 1 KiB of vectors are not moved).
        let mut channel = Channel {
            weights: [_mm512_setzero_si512(); 16],
            correction: _mm512_setzero_si512(),
            bias: 0,
            requantization: UniformRequantization::new((0, 0), requantization.zero_and_range),
        };
        let set_channel = |channel: &mut Channel, o: usize, filter: &[i8]| {
            for ky in 0..k {
                for g in 0..groups {
                    let mut quad = [0_u8; 4];
                    for (b, byte) in quad.iter_mut().enumerate() {
                        if 4 * g + b < k {
                            *byte = filter[ky * k + 4 * g + b] as u8;
                        }
                    }
                    channel.weights[ky * groups + g] = _mm512_set1_epi32(i32::from_le_bytes(quad));
                }
            }
            let mut sum = 0_i32;
            for &w in filter {
                sum += i32::from(w);
            }
            channel.correction = _mm512_set1_epi32(sum.wrapping_mul(128));
            channel.bias = bias[o];
            channel.requantization = UniformRequantization::new(
                (multiplier[o], exponent[o]),
                requantization.zero_and_range,
            );
        };
        let mut r0 = 0;
        while r0 < oh {
            // A block of output rows, every channel: its copies and output lanes are the same
            // for each.
            let count = rows.min(oh - r0);
            let copy = BlockCopy::new(&shape, (r0 * stride, (count - 1) * stride + k));
            let lanes = block_lanes(&shape, count);
            let vectors_in_block = ((count - 1) * pw + ow).div_ceil(16);
            // The bound `rows_per_call_vnni` keeps: the last vector's loads inside `padded`
            // (an over-read of the stack buffer would not fault).
            assert!(
                stride * 16 * (vectors_in_block - 1) + (k - 1) * pw + 4 * (groups - 1) + 64
                    <= padded.len()
                    && copy.chunks <= CHUNKS
                    && vectors_in_block <= MOST_VECTORS,
                "a block of {count} rows of {shape:?} outgrows the kernel's buffer"
            );
            for (o, (filter, out)) in filters
                .chunks_exact(window)
                .zip(out.chunks_exact_mut(out_plane))
                .enumerate()
            {
                copy.write(
                    &image[o / per_channel * plane..][..plane],
                    fill,
                    &mut padded,
                );
                set_channel(&mut channel, o, filter);
                let mut cursor = r0 * ow;
                let mut v = 0;
                while v + 4 <= vectors_in_block {
                    let lanes = (v, &lanes[v..v + 4]);
                    vectors::<4>(
                        (&padded, index, &shape),
                        &channel,
                        lanes,
                        (out, &mut cursor),
                    );
                    v += 4;
                }
                while v < vectors_in_block {
                    let lanes = (v, &lanes[v..=v]);
                    vectors::<1>(
                        (&padded, index, &shape),
                        &channel,
                        lanes,
                        (out, &mut cursor),
                    );
                    v += 1;
                }
                debug_assert_eq!(cursor, (r0 + count) * ow);
            }
            r0 += count;
        }
    }
}
