//! The int8 depthwise convolution: the portable path's dot products, one channel's plane at a
//! time, through a padded copy of the plane, and the choice of the SIMD kernel
//! (`x86::depthwise_i8_vnni`, which reads the same wide indices, below, four taps a lane).
//!
//! With the padding written out, every tap of every output reads a value, so each tap is one
//! pass of multiply-adds over contiguous memory, which the compiler vectorizes (the loops run
//! under [`super::with_wide_vectors`]: AVX-512 or AVX2 where the CPU has them).
//!
//! With stride 1 the pass runs over the whole padded plane flattened, so an image as narrow as
//! DS-CNN's (5 columns) still fills the vectors: output `(r, ow)` is computed at the "wide"
//! index `r·PW + ow` (`PW` the padded width), where tap `(ky, kx)` reads the padded plane at
//! `r·PW + ow + ky·PW + kx`, the same offset for every output; the `PW - OW` wide columns past
//! each row's end are computed and dropped.

use core::ops::Range;

/// The sizes of one channel's plane: input `h x w`, a `k x k` filter, `stride`, `pad` on
/// every side, output `oh x ow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlaneShape {
    pub h: usize,
    pub w: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
    pub oh: usize,
    pub ow: usize,
}

/// The bytes of the padded rows [`depthwise_dots_i8`] works on: the caller's buffer.
pub(crate) const PADDED_BYTES: usize = 512;

/// The `i32` dot products [`depthwise_dots_i8`] writes per call (wide rows, with stride 1):
/// the caller's buffer.
pub(crate) const DOTS: usize = 256;

impl PlaneShape {
    /// The padded width.
    pub(crate) const fn padded_width(&self) -> usize {
        self.w + 2 * self.pad
    }

    /// The output rows one call of [`depthwise_dots_i8`] computes with buffers of
    /// [`PADDED_BYTES`] and [`DOTS`]; 0 when not even one fits (the caller takes its plain
    /// loops). The same conditions as the kernel's.
    pub(crate) const fn rows_per_call(&self) -> usize {
        let pw = self.padded_width();
        // Padded input rows needed by `r` output rows: (r - 1)·stride + k.
        let by_padded = if PADDED_BYTES / pw < self.k {
            0
        } else {
            (PADDED_BYTES / pw - self.k) / self.stride + 1
        };
        // Wide dot products of `r` rows: (r - 1)·pw + ow with stride 1, r·ow otherwise.
        let by_dots = if self.stride == 1 {
            if DOTS < self.ow {
                0
            } else {
                (DOTS - self.ow) / pw + 1
            }
        } else {
            DOTS / self.ow
        };
        let rows = if by_padded < by_dots {
            by_padded
        } else {
            by_dots
        };
        if rows < self.oh { rows } else { self.oh }
    }
}

/// The bytes of the padded rows the AVX-512 VNNI kernel (`x86::depthwise_i8_vnni`) copies a
/// block of output rows from, and its loads read: its own buffer, on the stack, as large as
/// [`PADDED_BYTES`] and [`DOTS`]'s together.
pub(crate) const VNNI_PADDED_BYTES: usize = PADDED_BYTES + 4 * DOTS;

/// The largest filter the AVX-512 VNNI kernel takes, `k x k`: two groups of four columns a
/// filter row, 16 broadcast weight vectors.
pub(crate) const VNNI_LARGEST_KERNEL: usize = 8;

impl PlaneShape {
    /// The output rows one block of the AVX-512 VNNI kernel computes with
    /// [`VNNI_PADDED_BYTES`]; 0 when the kernel cannot take the shape: a filter wider than
    /// [`VNNI_LARGEST_KERNEL`], a stride outside 1 to 4 (16 windows' four bytes then span more
    /// than one 64-byte load), or not one row fitting the buffer. The kernel's own condition.
    pub(crate) const fn rows_per_call_vnni(&self) -> usize {
        if self.k == 0
            || self.k > VNNI_LARGEST_KERNEL
            || self.stride == 0
            || self.stride > 4
            || self.ow == 0
        {
            return 0;
        }
        let mut rows = self.oh;
        while rows > 0 && self.vnni_bytes(rows) > VNNI_PADDED_BYTES {
            rows -= 1;
        }
        rows
    }

    /// The bytes of `rows` output rows' block in the VNNI kernel: its padded input rows (the
    /// fill's stores rounded up to 64 bytes), and the 64-byte loads of its last vector of 16
    /// wide indices (from `stride·16·v + ky·pw + 4g`).
    const fn vnni_bytes(&self, rows: usize) -> usize {
        let pw = self.padded_width();
        let copied = (((rows - 1) * self.stride + self.k) * pw).next_multiple_of(64);
        let wide = (rows - 1) * pw + self.ow;
        let last_vector = wide.div_ceil(16) - 1;
        let read =
            self.stride * 16 * last_vector + (self.k - 1) * pw + 4 * (self.k.div_ceil(4) - 1) + 64;
        if copied > read { copied } else { read }
    }
}

/// Whether [`depthwise_i8_simd`] runs on a SIMD kernel on this CPU for planes of `shape`: AVX-512
/// VNNI, VBMI and VBMI2 (within the limit of [`super::instruction_set()`]), and the kernel
/// takes the shape ([`PlaneShape::rows_per_call_vnni`]). The int8 depthwise layer takes it
/// then, and its own loops elsewhere.
pub(crate) fn depthwise_i8_fast(shape: PlaneShape) -> bool {
    #[cfg(target_arch = "x86_64")]
    if shape.rows_per_call_vnni() > 0
        && super::x86::detected_isa_i8() == Some(super::x86::IsaI8::Avx512Vnni)
        && super::x86::has_avx512_vbmi2()
    {
        return true;
    }
    let _ = shape;
    false
}

/// `out[o][oh][ow] = requantize_o(Σ_{ky,kx} filters[o][ky][kx] · x[o / (OC / C)][oh·s + ky -
/// p][ow·s + kx - p])`: every output channel of an int8 depthwise convolution, requantized
/// (`requantization`, as `requantize_i8`), the image's `C` planes and the `OC` output planes
/// of `shape`, the padding read as `fill`, on the SIMD kernel where
/// [`depthwise_i8_fast`] says so.
///
/// # Panics
///
/// When [`depthwise_i8_fast`] is false for `shape` (the caller takes its own loops then), or
/// the sizes do not fit (a bug in the caller; see `x86::depthwise_i8_vnni`).
pub(crate) fn depthwise_i8_simd(
    image: (&[i8], PlaneShape, i8),
    filters: &[i8],
    requantization: &super::Requantization,
    out: &mut [i8],
) {
    assert!(
        depthwise_i8_fast(image.1),
        "no SIMD kernel takes the depthwise planes {:?} on this CPU",
        image.1
    );
    #[cfg(target_arch = "x86_64")]
    super::x86::depthwise_i8_vnni(image, filters, requantization, out);
    let _ = (filters, requantization, out);
}

/// `dots[(r - rows.start)·ow + ow] = Σ_{ky,kx} filter[ky·k + kx] · x(r·S + ky - P, ow·S + kx - P)`
/// for the output rows `r` in `rows`, `x` the channel's `plane` (`h x w`, row-major) read as
/// `fill` outside it: one channel of the int8 depthwise convolution, exact in `i32`. `padded`
/// and `dots` are the caller's buffers ([`PADDED_BYTES`], [`DOTS`]); the first
/// `rows.len()·ow` of `dots` hold the result.
///
/// # Panics
///
/// When `rows.len()` is 0 or more than [`PlaneShape::rows_per_call`], or the slices do not
/// have the shape's sizes (bugs in the caller).
// Inlined into the layer, whose shape is constant: the rows' copies and fills are then moves of
// known sizes, not calls of `memcpy` and `memset` (a third of the layer's time, measured).
#[inline(always)]
pub(crate) fn depthwise_dots_i8(
    plane: &[i8],
    filter: &[i8],
    shape: PlaneShape,
    fill: i8,
    rows: Range<usize>,
    (padded, dots): (&mut [i8; PADDED_BYTES], &mut [i32; DOTS]),
) {
    let PlaneShape {
        h,
        w,
        k,
        stride,
        pad,
        ..
    } = shape;
    assert!(
        !rows.is_empty() && rows.len() <= shape.rows_per_call() && rows.end <= shape.oh,
        "output rows {rows:?} of {} in one call of at most {}",
        shape.oh,
        shape.rows_per_call()
    );
    assert!(
        plane.len() == h * w && filter.len() == k * k,
        "a plane of {} values and a filter of {} for {h} x {w} and {k} x {k}",
        plane.len(),
        filter.len()
    );
    let pw = shape.padded_width();
    let count = rows.len();
    // The padded rows the outputs read: from padded row `rows.start·stride`.
    let first = rows.start * stride;
    let padded_rows = (count - 1) * stride + k;
    for (i, line) in padded[..padded_rows * pw].chunks_exact_mut(pw).enumerate() {
        match (first + i).checked_sub(pad).filter(|&iy| iy < h) {
            Some(iy) => {
                line[..pad].fill(fill);
                line[pad..pad + w].copy_from_slice(&plane[iy * w..(iy + 1) * w]);
                line[pad + w..].fill(fill);
            }
            None => line.fill(fill),
        }
    }
    let padded = &padded[..padded_rows * pw];
    // Inlined always into the function compiled for the wide vectors: a closure as large as
    // this is otherwise compiled on its own, for SSE2 (measured).
    super::with_wide_vectors(
        #[inline(always)]
        || accumulate_taps(padded, filter, shape, count, dots),
    );
    if stride == 1 {
        // The wide rows' first `ow` values, moved to rows of `ow` (forward: each row moves
        // left or stays).
        let (pw, ow) = (pw, shape.ow);
        for r in 1..count {
            dots.copy_within(r * pw..r * pw + ow, r * ow);
        }
    }
}

/// The taps' passes of [`depthwise_dots_i8`] over the padded rows.
#[inline(always)]
fn accumulate_taps(
    padded: &[i8],
    filter: &[i8],
    shape: PlaneShape,
    count: usize,
    dots: &mut [i32; DOTS],
) {
    let PlaneShape { k, stride, ow, .. } = shape;
    let pw = shape.padded_width();
    if stride == 1 {
        let n = (count - 1) * pw + ow;
        let wide = &mut dots[..n];
        // The first tap sets the sums (a `fill(0)` first is a call of `memset`).
        let first = i32::from(filter[0]);
        for (dot, &x) in wide.iter_mut().zip(&padded[..n]) {
            *dot = first * i32::from(x);
        }
        for (tap, &weight) in filter.iter().enumerate().skip(1) {
            let (ky, kx) = (tap / k, tap % k);
            let weight = i32::from(weight);
            let source = &padded[ky * pw + kx..ky * pw + kx + n];
            for (dot, &x) in wide.iter_mut().zip(source) {
                *dot += weight * i32::from(x);
            }
        }
    } else {
        let out = &mut dots[..count * ow];
        out.fill(0);
        for (r, out_row) in out.chunks_exact_mut(ow).enumerate() {
            for (tap, &weight) in filter.iter().enumerate() {
                let (ky, kx) = (tap / k, tap % k);
                let weight = i32::from(weight);
                let line = &padded[(r * stride + ky) * pw..(r * stride + ky + 1) * pw];
                for (o, dot) in out_row.iter_mut().enumerate() {
                    *dot += weight * i32::from(line[o * stride + kx]);
                }
            }
        }
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    extern crate alloc;
    use super::*;
    use alloc::vec::Vec;

    /// The definition, one output at a time.
    fn definition(plane: &[i8], filter: &[i8], s: PlaneShape, fill: i8) -> Vec<i32> {
        let mut out = Vec::new();
        for oh in 0..s.oh {
            for ow in 0..s.ow {
                let mut dot = 0;
                for ky in 0..s.k {
                    for kx in 0..s.k {
                        let iy = (oh * s.stride + ky).checked_sub(s.pad).filter(|&i| i < s.h);
                        let ix = (ow * s.stride + kx).checked_sub(s.pad).filter(|&i| i < s.w);
                        let x = match (iy, ix) {
                            (Some(iy), Some(ix)) => plane[iy * s.w + ix],
                            _ => fill,
                        };
                        dot += i32::from(filter[ky * s.k + kx]) * i32::from(x);
                    }
                }
                out.push(dot);
            }
        }
        out
    }

    #[test]
    fn every_row_split_gives_the_definitions_dots() {
        let mut seed = 0x2545_f491_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as i8
        };
        let shapes = [
            (25, 5, 3, 1, 1),
            (1, 1, 3, 1, 1),
            (7, 9, 1, 1, 0),
            (8, 8, 3, 2, 1),
            (9, 7, 5, 1, 2),
            (11, 13, 5, 3, 2),
            (16, 40, 3, 1, 0),
            (6, 6, 4, 2, 1),
            (60, 60, 3, 1, 1),
            (3, 100, 3, 1, 1),
        ];
        for (h, w, k, stride, pad) in shapes {
            let shape = PlaneShape {
                h,
                w,
                k,
                stride,
                pad,
                oh: (h + 2 * pad - k) / stride + 1,
                ow: (w + 2 * pad - k) / stride + 1,
            };
            let plane: Vec<i8> = (0..h * w).map(|_| next()).collect();
            let filter: Vec<i8> = (0..k * k).map(|_| next()).collect();
            for fill in [-128, -3, 0, 127] {
                let expected = definition(&plane, &filter, shape, fill);
                let per_call = shape.rows_per_call();
                assert!(per_call > 0, "{shape:?} fits");
                for step in [1, per_call.div_ceil(2), per_call] {
                    let mut padded = [99; PADDED_BYTES];
                    let mut dots = [-7; DOTS];
                    let mut got = Vec::new();
                    let mut r = 0;
                    while r < shape.oh {
                        let end = (r + step).min(shape.oh);
                        depthwise_dots_i8(
                            &plane,
                            &filter,
                            shape,
                            fill,
                            r..end,
                            (&mut padded, &mut dots),
                        );
                        got.extend_from_slice(&dots[..(end - r) * shape.ow]);
                        r = end;
                    }
                    assert_eq!(got, expected, "{shape:?}, fill {fill}, {step} rows a call");
                }
            }
        }
    }

    #[test]
    fn a_plane_too_wide_for_the_buffers_has_no_rows() {
        let wide = PlaneShape {
            h: 4,
            w: 600,
            k: 3,
            stride: 1,
            pad: 1,
            oh: 4,
            ow: 600,
        };
        assert_eq!(wide.rows_per_call(), 0);
    }
}
