//! The int8 convolution that reads four channels a lane (`int8_quads_vnni.rs`) against the
//! definition, and its plan.

use super::*;
use crate::kernels::int8::{QUADS_SCRATCH_QUADS, QuadsPlan, quads_plan};

#[test]
fn int8_quads_match_the_definition_with_avx512_vnni() {
    let probe = WindowShape {
        channels: 4,
        height: 8,
        width: 8,
        kernel: (3, 3),
        stride: 1,
        padding: 1,
    };
    if crate::kernels::conv_quads_i8_fast(&probe, 16).is_none() {
        std::eprintln!("skipping: no AVX-512 VNNI and VBMI on this CPU");
        return;
    }
    let mut next = xorshift(0x51ed_2701_9f3a_c4b3);
    let mut byte = move || (next() >> 24) as u8 as i8;
    // MLPerf Tiny's ResNet-8 and DS-CNN layers; channels that do not fill their last quad
    // (1, 2, 3, 5, 6, 7, 9); strides 1 to 4; no padding, some, and more than the kernel
    // (rows and columns of padding only, at stride 1 too); 16 taps on whole channel quads;
    // rows of 8 or fewer positions (several a vector),
    // of 9 to 16 (one vector, partly filled) and longer (two or more vectors a row); kernels
    // not square; bands of one row and of several, and a last band shorter.
    macro_rules! shapes {
        ($(($c:literal, $height:literal, $width:literal, ($kh:literal, $kw:literal), $stride:literal, $padding:literal)),* $(,)?) => {
            $(quads_match::<$c, $kh, $kw>(($height, $width, $stride, $padding), &mut byte);)*
        };
    }
    shapes!(
        (3, 32, 32, (3, 3), 1, 1),
        (16, 32, 32, (3, 3), 1, 1),
        (16, 32, 32, (3, 3), 2, 1),
        (32, 16, 16, (3, 3), 1, 1),
        (16, 32, 32, (1, 1), 2, 0),
        (32, 16, 16, (1, 1), 2, 0),
        (64, 25, 5, (1, 1), 1, 0),
        (5, 11, 13, (1, 1), 2, 0),
        (6, 9, 40, (3, 3), 2, 1),
        (7, 7, 37, (2, 5), 3, 2),
        (2, 6, 6, (4, 4), 4, 3),
        (9, 10, 10, (3, 3), 3, 4),
        (1, 3, 3, (3, 3), 1, 0),
        (3, 17, 9, (3, 2), 1, 1),
        (4, 12, 20, (3, 3), 1, 1),
        (8, 5, 70, (1, 3), 1, 0),
        (5, 9, 9, (4, 4), 1, 1),
        (4, 10, 10, (2, 8), 1, 0),
        (3, 6, 6, (1, 2), 1, 3),
    );
}

/// [`int8_quads_match_the_definition_with_avx512_vnni`] on one shape: several numbers of
/// filters (every tile, with a last tile partly filled), random and extreme values, the image,
/// the weights and the scratch each ending at a page without access or starting after one.
fn quads_match<const C: usize, const KH: usize, const KW: usize>(
    (height, width, stride, padding): (usize, usize, usize, usize),
    byte: &mut impl FnMut() -> i8,
) {
    let shape = WindowShape {
        channels: C,
        height,
        width,
        kernel: (KH, KW),
        stride,
        padding,
    };
    let (out_height, out_width) = shape.output();
    let out_plane = out_height * out_width;
    let l = shape.window_len();
    let mut planned = 0;
    for filters in [1, 5, 8, 16, 21, 40] {
        // Few filters take the tile of 4 on four vectors, whose band may not fit.
        let Some(plan) = quads_plan(&shape, filters) else {
            continue;
        };
        planned += 1;
        for extreme in [
            None,
            Some((-128, -128)),
            Some((127, -128)),
            Some((-128, 127)),
        ] {
            let mut weight: Vec<i8> = (0..filters * l).map(|_| byte()).collect();
            let mut image: Vec<i8> = (0..shape.image_len()).map(|_| byte()).collect();
            let pad = byte();
            if let Some((w, v)) = extreme {
                weight.iter_mut().for_each(|x| *x = w);
                image.iter_mut().for_each(|x| *x = v);
            }
            let (bias, multiplier, exponent) = requantization_parameters(filters, 0, byte);
            let requantization = Requantization {
                parameters: (&bias, &multiplier, &exponent),
                zero_and_range: (byte() / 2, -100, 90),
            };
            let stale: Vec<i8> = (0..filters * out_plane).map(|_| byte()).collect();
            let mut want = stale.clone();
            crate::kernels::reference::conv_windows_i8(
                &weight,
                &requantization,
                (&image, &shape, pad),
                (0, out_plane),
                &mut want,
            );
            let garbage: Vec<u32> = (0..plan.scratch_quads(&shape))
                .map(|i| 0xdead_beef_u32.rotate_left(i as u32))
                .collect();
            for after_guard in [false, true] {
                let (mut image, mut weight) = (
                    Guarded::place(&image, after_guard),
                    Guarded::place(&weight, after_guard),
                );
                let mut scratch = Guarded::place(&garbage, after_guard);
                let mut got = Guarded::place(&stale, after_guard);
                conv_quads_i8_vnni::<C, KH, KW>(
                    weight.slice(),
                    &requantization,
                    (image.slice(), &shape, pad),
                    (plan, scratch.slice()),
                    got.slice(),
                );
                assert_eq!(
                    got.slice(),
                    &want[..],
                    "{filters} filters on {shape:?}, plan {plan:?}, extreme {extreme:?}"
                );
            }
        }
    }
    assert!(
        planned >= 3,
        "{planned} numbers of filters planned on {shape:?}"
    );
}

#[test]
fn the_quads_plan_fits_its_scratch_and_takes_the_models_layers() {
    let shape = |channels, (height, width), kernel, stride, padding| WindowShape {
        channels,
        height,
        width,
        kernel,
        stride,
        padding,
    };
    let plan = |filters, vectors, rows_per_vector, band_rows| QuadsPlan {
        filters,
        vectors,
        rows_per_vector,
        band_rows,
    };
    // (shape, filters, plan, whether the int8 convolution takes it): ResNet-8's layers,
    // DS-CNN's 1 x 1 ones, and refusals.
    let cases = [
        (
            shape(3, (32, 32), (3, 3), 1, 1),
            16,
            Some(plan(16, 1, 1, 27)),
            true,
        ),
        (
            shape(16, (32, 32), (3, 3), 1, 1),
            16,
            Some(plan(16, 1, 1, 2)),
            true,
        ),
        (
            shape(32, (16, 16), (3, 3), 1, 1),
            32,
            Some(plan(8, 2, 1, 2)),
            true,
        ),
        (
            shape(16, (32, 32), (3, 3), 2, 1),
            32,
            Some(plan(16, 1, 1, 1)),
            true,
        ),
        (shape(32, (16, 16), (3, 3), 2, 1), 64, None, false),
        (shape(64, (8, 8), (3, 3), 1, 1), 64, None, false),
        (
            shape(16, (32, 32), (1, 1), 2, 0),
            32,
            Some(plan(16, 1, 1, 4)),
            true,
        ),
        (
            shape(32, (16, 16), (1, 1), 2, 0),
            64,
            Some(plan(16, 1, 2, 4)),
            true,
        ),
        (
            shape(64, (25, 5), (1, 1), 1, 0),
            64,
            Some(plan(16, 1, 3, 9)),
            false,
        ),
        (shape(16, (8, 8), (5, 5), 1, 2), 16, None, false),
        (shape(16, (8, 8), (3, 3), 5, 1), 16, None, false),
        (shape(16, (2, 2), (3, 3), 1, 0), 16, None, false),
    ];
    for (shape, filters, want, applies) in cases {
        let got = quads_plan(&shape, filters);
        assert_eq!(got, want, "{filters} filters on {shape:?}");
        assert_eq!(
            crate::kernels::conv_quads_i8_applies(&shape, filters),
            applies,
            "{filters} filters on {shape:?}"
        );
        if let Some(plan) = got {
            assert!(plan.scratch_quads(&shape) <= QUADS_SCRATCH_QUADS);
            assert_eq!(plan.filters * plan.vectors, 16);
        }
    }
}
