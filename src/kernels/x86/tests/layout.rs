//! Row copies, transposes, the finiteness check and `col2im` against their definitions.

use super::*;

#[test]
fn transposed_stores_in_registers_match_the_lane_by_lane_ones() {
    if detected_isa() != Some(Isa::Avx512) {
        std::eprintln!("skipping: no AVX-512 on this CPU");
        return;
    }
    let values: Vec<f32> = (0..256).map(|i| i as f32 + 0.5).collect();
    for n in 0..=16 {
        for count in 0..=16 {
            let mut want = std::vec![-1.0_f32; 16 * 17];
            let mut got = want.clone();
            // SAFETY: AVX-512F is present (checked above); the loads read 16 of the 256
            // values, and the stores write lanes l < 16 of rows i < 16 at l·17 + i < 16·17.
            unsafe {
                let rows: Vec<__m512> = (0..n)
                    .map(|i| _mm512_loadu_ps(values[16 * i..].as_ptr()))
                    .collect();
                store_transposed_lanes::<Avx512F32>(&rows, want.as_mut_ptr(), 17, count);
                Avx512F32::store_transposed(&rows, got.as_mut_ptr(), 17, count);
            }
            assert_eq!(got, want, "{n} rows, {count} lanes");
        }
    }
}

/// AVX2's transposed store, eight rows at a time, up to the 16 rows a caller passes (the
/// filters-in-lanes tile's 12 positions), against the lane-by-lane one; nothing written past
/// the rows and lanes asked for.
#[test]
fn avx2_transposed_stores_in_registers_match_the_lane_by_lane_ones() {
    if !isa_available(Isa::Avx2Fma) {
        std::eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    let values: Vec<f32> = (0..128).map(|i| i as f32 + 0.5).collect();
    for n in 0..=16 {
        for count in 0..=8 {
            let mut want = std::vec![-1.0_f32; 8 * 17];
            let mut got = want.clone();
            // SAFETY: AVX2 is present (checked above); the loads read 8 of the 128 values,
            // and the stores write lanes l < 8 of rows i < 16 at l·17 + i < 8·17.
            unsafe {
                let rows: Vec<__m256> = (0..n)
                    .map(|i| _mm256_loadu_ps(values[8 * i..].as_ptr()))
                    .collect();
                store_transposed_lanes::<Avx2F32>(&rows, want.as_mut_ptr(), 17, count);
                Avx2F32::store_transposed(&rows, got.as_mut_ptr(), 17, count);
            }
            assert_eq!(got, want, "{n} rows, {count} lanes");
        }
    }
}

#[test]
fn col2im_adds_each_patch_value_to_the_input_it_came_from() {
    if detected_isa() != Some(Isa::Avx512) {
        std::eprintln!("skipping: no AVX-512 on this CPU");
        return;
    }
    for (channels, kernel, padding, height, width) in [
        (1, 5, 2, 28, 28),
        (6, 5, 0, 14, 14),
        (2, 3, 1, 5, 7),
        (3, 1, 0, 4, 19),
        (2, 4, 3, 3, 2),
    ] {
        let shape = Conv {
            channels,
            filters: 1,
            kernel,
            padding,
            height,
            width,
        };
        let (oh, ow) = (shape.out_height(), shape.out_width());
        let d_patches: Vec<f64> = (0..channels * kernel * kernel * oh * ow)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 8.0)
            .collect();
        let start: Vec<f64> = (0..channels * height * width)
            .map(|i| i as f64 / 3.0)
            .collect();
        // The definition, one value at a time, in the generic code's order.
        fn definition<T: Copy + core::ops::AddAssign>(shape: &Conv, d_patches: &[T], dx: &mut [T]) {
            let (oh, ow) = (shape.out_height(), shape.out_width());
            let (k, p) = (shape.kernel as isize, shape.padding as isize);
            let (h, w) = (shape.height as isize, shape.width as isize);
            for (row, patch) in d_patches.chunks_exact(oh * ow).enumerate() {
                let (c, ky, kx) = (
                    row as isize / (k * k),
                    row as isize / k % k,
                    row as isize % k,
                );
                for y in 0..oh as isize {
                    for x in 0..ow as isize {
                        let (iy, ix) = (y + ky - p, x + kx - p);
                        if (0..h).contains(&iy) && (0..w).contains(&ix) {
                            dx[((c * h + iy) * w + ix) as usize] +=
                                patch[(y * ow as isize + x) as usize];
                        }
                    }
                }
            }
        }
        let mut want = start.clone();
        definition(&shape, &d_patches, &mut want);
        let mut got = start.clone();
        assert!(col2im_stride1_avx512(&shape, &d_patches, &mut got));
        assert_eq!(got, want, "{shape:?}");
        let d32: Vec<f32> = d_patches.iter().map(|&v| v as f32).collect();
        let mut got32: Vec<f32> = start.iter().map(|&v| v as f32).collect();
        assert!(col2im_stride1_avx512(&shape, &d32, &mut got32));
        let mut want32: Vec<f32> = start.iter().map(|&v| v as f32).collect();
        definition(&shape, &d32, &mut want32);
        assert_eq!(got32, want32, "{shape:?}, f32");
    }
    // A kernel wider than the per-column arrays is left to the generic loop.
    let wide = Conv {
        channels: 1,
        filters: 1,
        kernel: COL2IM_MAX_KERNEL + 1,
        padding: 0,
        height: COL2IM_MAX_KERNEL + 1,
        width: COL2IM_MAX_KERNEL + 1,
    };
    let (d_patches, mut dx) = (
        std::vec![1.0_f32; wide.kernel * wide.kernel],
        std::vec![0.0_f32; wide.kernel * wide.kernel],
    );
    assert!(!col2im_stride1_avx512(&wide, &d_patches, &mut dx));
    assert!(dx.iter().all(|&v| v == 0.0));
}

/// The SIMD blocks (16 rows of `f32`, four columns at a time, with AVX-512; 8 rows, eight
/// columns at a time, with AVX2) and the element-by-element rest against the definition, on
/// each instruction set here and without one, for row counts around the blocks' 8 and 16 and
/// column counts around their 4 and 8; through the detected instruction set, into a zeroed
/// buffer and into one never initialized.
#[test]
fn transposes_match_the_definition_for_every_block_edge() {
    for rows in [1, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 48] {
        for columns in [0, 1, 3, 4, 5, 7, 8, 9, 16, 150, 151] {
            let from: Vec<f32> = values(rows * columns, (rows * 1000 + columns) as u64)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let want = transposed(
                &from.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
                rows,
            );
            for isa in [None, Some(Isa::Avx512), Some(Isa::Avx2Fma)] {
                if isa.is_some_and(|isa| !isa_available(isa)) {
                    continue;
                }
                let mut to = std::vec![f32::NAN; from.len()];
                crate::kernels::x86::layout::transpose_on(isa, &from, rows, &mut to);
                let to: Vec<f64> = to.iter().map(|&v| f64::from(v)).collect();
                assert_eq!(to, want, "{isa:?}: {rows} x {columns}");
            }
        }
    }
    for rows in [1, 5, 15, 16, 17, 31, 32, 48] {
        for columns in [0, 1, 3, 4, 5, 8, 150, 151] {
            let from64 = values(rows * columns, (rows * 1000 + columns) as u64);
            let from: Vec<f32> = from64.iter().map(|&v| v as f32).collect();
            let want: Vec<f32> = transposed(&from64, rows)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let mut to = std::vec![0.0_f32; from.len()];
            transpose(&from, rows, &mut to);
            assert_eq!(to, want, "{rows} x {columns}");
            let mut uninit = std::vec![MaybeUninit::<f32>::uninit(); from.len()];
            assert_eq!(transpose_uninit(&from, rows, &mut uninit), &want[..]);
            let mut to64 = std::vec![0.0; from64.len()];
            transpose(&from64, rows, &mut to64);
            assert_eq!(to64, transposed(&from64, rows), "f64 {rows} x {columns}");
        }
    }
}

/// Row copies against the definition, for widths around the vector sizes, both strides
/// larger than the width (and equal): the values of each row copied, nothing else written.
#[test]
fn row_copies_move_each_row_and_nothing_else() {
    fn check<E: Element + PartialEq + std::fmt::Debug>(isa: Isa, from_f64: impl Fn(f64) -> E) {
        let stale = from_f64(7.5);
        for width in [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 28, 33] {
            for (rows, from_gap, to_gap) in [(0, 0, 0), (1, 0, 0), (3, 0, 4), (5, 2, 0), (4, 3, 17)]
            {
                {
                    let (from_stride, to_stride) = (width + from_gap, width + to_gap);
                    let from: Vec<E> = values(rows * from_stride, width as u64)
                        .into_iter()
                        .map(&from_f64)
                        .collect();
                    let mut to = std::vec![stale; rows * to_stride + 3];
                    let mut want = to.clone();
                    for i in 0..rows {
                        for j in 0..to_stride {
                            if j < width {
                                want[i * to_stride + j] = from[i * from_stride + j];
                            }
                        }
                    }
                    let size = (rows, width);
                    assert!(copy_rows(isa, &from, from_stride, &mut to, to_stride, size,));
                    assert_eq!(
                        to, want,
                        "{isa:?}: {rows} rows of {width}, strides {from_stride} and {to_stride}"
                    );
                }
            }
        }
    }
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        check::<f32>(isa, |v| v as f32);
        check::<f64>(isa, |v| v);
        // Other element types: nothing written, the caller copies.
        let mut to = [1_i32; 4];
        assert!(!copy_rows(isa, &[2_i32; 4], 2, &mut to, 2, (2, 2)));
        assert_eq!(to, [1; 4]);
    }
}

#[test]
fn the_finiteness_check_finds_every_nan_and_infinity() {
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            continue;
        }
        for len in [0_usize, 1, 15, 16, 17, 63, 64, 65, 100, 1000] {
            let ok: Vec<f32> = (0..len).map(|i| (i % 61) as f32 * 1e36 - 3e37).collect();
            assert!(all_finite(isa, &ok), "{isa:?} {len}");
            let ok64: Vec<f64> = ok.iter().map(|&v| f64::from(v) * 1e270).collect();
            assert!(all_finite(isa, &ok64), "{isa:?} {len}");
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                for at in [0, len / 2, len.saturating_sub(1)]
                    .into_iter()
                    .filter(|&i| i < len)
                {
                    let mut v = ok.clone();
                    v[at] = bad;
                    assert!(!all_finite(isa, &v), "{isa:?} {len} {bad} at {at}");
                    let mut v: Vec<f64> = ok64.clone();
                    v[at] = f64::from(bad);
                    assert!(!all_finite(isa, &v), "{isa:?} {len} {bad} at {at}");
                }
            }
        }
    }
}
