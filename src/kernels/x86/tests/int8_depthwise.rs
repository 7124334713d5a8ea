//! The int8 depthwise kernel against the definition: each channel a convolution of one channel
//! and one filter (`reference::conv_windows_i8`).

use super::*;
use crate::kernels::depthwise_i8::{PlaneShape, depthwise_i8_fast};
use crate::kernels::x86::depthwise_i8_vnni;

#[test]
fn int8_depthwise_matches_the_definition_with_avx512_vnni() {
    let ds_cnn = PlaneShape {
        h: 25,
        w: 5,
        k: 3,
        stride: 1,
        pad: 1,
        oh: 25,
        ow: 5,
    };
    if !depthwise_i8_fast(ds_cnn) {
        std::eprintln!("skipping: no AVX-512 VNNI, VBMI and VBMI2 on this CPU");
        return;
    }
    let mut next = xorshift(0x5851_f42d_4c95_7f2d);
    let mut byte = move || (next() >> 24) as u8 as i8;
    // `(channels, multiplier, h, w, k, stride, pad)`: DS-CNN's planes (one block, rows of 5
    // in 7 padded columns); MobileNet's first (48 x 48, several blocks and a last one
    // shorter); a depth multiplier of 2 and 3; no padding, padding wider than the filter
    // (whole rows and windows of padding), SAME's; filters 1 to 8 wide (one and two groups
    // of four columns), strides 1 to 4; one output; rows too wide for the buffer (refused),
    // blocks of one row filling the buffer to its last byte, several blocks at stride 3.
    let shapes = [
        (64, 1, 25, 5, 3, 1, 1),
        (8, 1, 48, 48, 3, 1, 1),
        (4, 2, 6, 6, 3, 1, 1),
        (3, 3, 7, 3, 3, 2, 0),
        (2, 1, 11, 13, 5, 3, 2),
        (3, 1, 9, 7, 1, 1, 0),
        (2, 1, 10, 10, 3, 1, 4),
        (2, 1, 16, 17, 8, 2, 3),
        (1, 1, 12, 12, 6, 4, 1),
        (2, 1, 9, 9, 4, 2, 1),
        (1, 1, 1, 1, 3, 1, 1),
        (1, 1, 5, 3, 7, 1, 3),
        (2, 1, 40, 150, 3, 1, 1),
        (1, 1, 3, 700, 3, 1, 1),
        (1, 1, 3, 490, 3, 1, 1),
        (1, 1, 20, 200, 3, 3, 1),
        (1, 1, 30, 60, 5, 2, 2),
    ];
    for (channels, multiplier, h, w, k, stride, pad) in shapes {
        let shape = PlaneShape {
            h,
            w,
            k,
            stride,
            pad,
            oh: (h + 2 * pad - k) / stride + 1,
            ow: (w + 2 * pad - k) / stride + 1,
        };
        if shape.rows_per_call_vnni() == 0 {
            assert!(!depthwise_i8_fast(shape), "{shape:?}");
            assert!(w >= 700, "{shape:?} fits the kernel's buffer");
            continue;
        }
        depthwise_matches(shape, (channels, multiplier), &mut byte);
    }
}

/// [`int8_depthwise_matches_the_definition_with_avx512_vnni`] on one shape.
fn depthwise_matches(
    shape: PlaneShape,
    (channels, depth): (usize, usize),
    byte: &mut impl FnMut() -> i8,
) {
    let filters = channels * depth;
    let (plane, out_plane, l) = (shape.h * shape.w, shape.oh * shape.ow, shape.k * shape.k);
    let window = WindowShape {
        channels: 1,
        height: shape.h,
        width: shape.w,
        kernel: (shape.k, shape.k),
        stride: shape.stride,
        padding: shape.pad,
    };
    for extreme in [
        None,
        Some((-128, -128)),
        Some((127, -128)),
        Some((-128, 127)),
    ] {
        let mut weight: Vec<i8> = (0..filters * l).map(|_| byte()).collect();
        let mut image: Vec<i8> = (0..channels * plane).map(|_| byte()).collect();
        let fill = byte();
        if let Some((w, v)) = extreme {
            weight.iter_mut().for_each(|x| *x = w);
            image.iter_mut().for_each(|x| *x = v);
        }
        // And a narrow clamp.
        let (bias, multiplier, exponent) = requantization_parameters(filters, 2, byte);
        let requantization = Requantization {
            parameters: (&bias, &multiplier, &exponent),
            zero_and_range: (byte() / 2, -100, 90),
        };
        let mut want: Vec<i8> = (0..filters * out_plane).map(|_| byte()).collect();
        let stale = want.clone();
        for (o, out) in want.chunks_exact_mut(out_plane).enumerate() {
            crate::kernels::reference::conv_windows_i8(
                &weight[o * l..(o + 1) * l],
                &Requantization {
                    parameters: (&bias[o..=o], &multiplier[o..=o], &exponent[o..=o]),
                    zero_and_range: requantization.zero_and_range,
                },
                (&image[o / depth * plane..][..plane], &window, fill),
                (0, out_plane),
                out,
            );
        }
        // The image and the weights end at a page without access, then start where one
        // ends; every output is written (the stale bytes are gone).
        for after_guard in [false, true] {
            let place = |values: &[i8]| Guarded::place(values, after_guard);
            let (mut image, mut weight, mut got) = (place(&image), place(&weight), place(&stale));
            depthwise_i8_vnni(
                (image.slice(), shape, fill),
                weight.slice(),
                &requantization,
                got.slice(),
            );
            assert_eq!(
                got.slice(),
                &want[..],
                "{channels} x {depth} filters on {shape:?}, extreme {extreme:?}"
            );
        }
    }
}
