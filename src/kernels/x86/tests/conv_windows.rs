//! The filters-in-lanes kernel on strided windows and kernels that are not square, against
//! the definition, and between pages without access.

use super::*;
use crate::kernels::shape::PrepaddedConv;

/// `(channels, filters, kernel_height, kernel_width, stride, height, width)`: strides 1 and 2;
/// kernels 1 x 1 (ResNet's projection), 3 x 3, 7 x 7 (a stem), 10 x 4 and 4 x 10 (DS-CNN's
/// first layer and its transpose); whole and partial vectors of filters (8 to 70) and tiles of
/// positions; rows and columns left over at the end, in no window; one output.
const SHAPES: &[(usize, usize, usize, usize, usize, usize, usize)] = &[
    (16, 32, 3, 3, 2, 33, 33),
    (16, 32, 1, 1, 2, 32, 32),
    (32, 64, 3, 3, 2, 17, 17),
    (3, 24, 7, 7, 2, 37, 38),
    (1, 64, 10, 4, 2, 58, 12),
    (2, 9, 4, 10, 2, 11, 30),
    (5, 17, 3, 3, 2, 8, 9),
    (7, 70, 2, 3, 1, 6, 29),
    (3, 8, 3, 3, 2, 3, 3),
    (4, 16, 5, 1, 1, 9, 4),
];

fn prepadded(
    (channels, filters, kernel_height, kernel_width, stride, height, width): (
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
    ),
) -> PrepaddedConv {
    PrepaddedConv {
        channels,
        filters,
        kernel_height,
        kernel_width,
        stride,
        height,
        width,
    }
}

/// The convolution written out in `f64`, every window's products summed in order.
fn definition(shape: &PrepaddedConv, x: &[f64], w: &[f64], bias: &[f64]) -> Vec<f64> {
    let (oh, ow) = (shape.out_height(), shape.out_width());
    let (kh, kw, s) = (shape.kernel_height, shape.kernel_width, shape.stride);
    let mut out = std::vec![0.0; shape.output_len()];
    for f in 0..shape.filters {
        for (r, c) in (0..oh).flat_map(|r| (0..ow).map(move |c| (r, c))) {
            let mut sum = bias[f];
            for ch in 0..shape.channels {
                for ky in 0..kh {
                    for kx in 0..kw {
                        let input = x[(ch * shape.height + r * s + ky) * shape.width + c * s + kx];
                        sum += w[((f * shape.channels + ch) * kh + ky) * kw + kx] * input;
                    }
                }
            }
            out[(f * oh + r) * ow + c] = sum;
        }
    }
    out
}

#[test]
fn strided_windows_with_the_filters_in_the_lanes_match_the_definition() {
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        for (i, &sizes) in SHAPES.iter().enumerate() {
            let shape = prepadded(sizes);
            let steps = shape.channels * shape.kernel_height * shape.kernel_width;
            let seed = 200 + 10 * i as u64;
            let x = values(shape.image_len(), seed);
            let w = values(shape.weights_len(), seed + 1);
            let bias = values(shape.filters, seed + 2);
            let want = definition(&shape, &x, &w, &bias);
            let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let (xf, wt, bf) = (f32s(&x), f32s(&transposed(&w, shape.filters)), f32s(&bias));
            for epilogue in [Epilogue::Identity, Epilogue::Relu] {
                let mut got = std::vec![f32::NAN; shape.output_len()];
                conv2d_filters_in_lanes(isa, &shape, &xf, &wt, &bf, as_output(&mut got), epilogue);
                for (at, (&g, &z)) in got.iter().zip(&want).enumerate() {
                    let z = f64::from(epilogue.apply(z as f32));
                    let bound = 1e-6 * (1.0 + steps as f64).sqrt() * (1.0 + z.abs());
                    assert!(
                        (f64::from(g) - z).abs() <= bound,
                        "{isa:?} {shape:?} {epilogue:?}: output {at} is {g}, expected {z}"
                    );
                }
            }
        }
    }
}

/// Which shapes the plan gives the kernel, and the scratch it sizes: the weights transposed,
/// and the padded image where there is padding.
#[test]
fn the_plan_reads_windows_in_place_where_it_measured_faster() {
    use crate::kernels::plan::{windows_in_place_scratch, windows_in_place_scratch_any_isa};
    let (avx512, avx2) = (16, 8);
    // ResNet-8's 3 x 3 stride 2 on 16 channels, padded by 1: AVX-512 only.
    let resnet = prepadded((16, 32, 3, 3, 2, 34, 34));
    assert_eq!(
        windows_in_place_scratch(&resnet, 1, avx512),
        Some(32 * 144 + 16 * 34 * 34)
    );
    assert_eq!(windows_in_place_scratch(&resnet, 1, avx2), None);
    assert_eq!(windows_in_place_scratch(&resnet, 0, avx512), Some(32 * 144));
    // A 7 x 7 stem: either instruction set.
    let stem = prepadded((3, 32, 7, 7, 2, 70, 70));
    for lanes in [avx512, avx2] {
        assert_eq!(
            windows_in_place_scratch(&stem, 3, lanes),
            Some(32 * 147 + 3 * 70 * 70)
        );
    }
    // Too few steps (1 x 1 stride 2, DS-CNN's 10 x 4 on one channel), too few filters, a
    // stride without a copy: the unrolled patches.
    for (shape, padding) in [
        (prepadded((32, 64, 1, 1, 2, 16, 16)), 0),
        (prepadded((1, 64, 10, 4, 2, 58, 12)), 0),
        (prepadded((16, 4, 3, 3, 2, 34, 34)), 1),
        (prepadded((16, 32, 3, 3, 3, 34, 34)), 1),
    ] {
        for lanes in [avx512, avx2] {
            assert_eq!(
                windows_in_place_scratch(&shape, padding, lanes),
                None,
                "{shape:?}"
            );
        }
        assert_eq!(windows_in_place_scratch_any_isa(&shape, padding, 4), 0);
    }
    // The layers' constant: the larger of the two, and none for `f64`.
    assert_eq!(
        windows_in_place_scratch_any_isa(&resnet, 1, 4),
        32 * 144 + 16 * 34 * 34
    );
    assert_eq!(windows_in_place_scratch_any_isa(&resnet, 1, 8), 0);
}

/// A stride the kernel has no copy for is refused, not run.
#[test]
fn a_stride_of_3_is_refused() {
    let Some(isa) = detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let shape = prepadded((1, 8, 3, 3, 3, 9, 9));
    let refused = std::panic::catch_unwind(|| {
        let (x, wt, bias) = (
            std::vec![0.0_f32; shape.image_len()],
            std::vec![0.0_f32; shape.weights_len()],
            std::vec![0.0_f32; 8],
        );
        let mut out = std::vec![0.0_f32; shape.output_len()];
        let out = as_output(&mut out);
        conv2d_filters_in_lanes(isa, &shape, &x, &wt, &bias, out, Epilogue::Identity);
    })
    .expect_err("a stride of 3 ran");
    let message = refused.downcast_ref::<std::string::String>().unwrap();
    assert_eq!(
        message,
        "the filters-in-lanes kernel takes strides [1, 2], not 3"
    );
}

/// The entry point reads the windows in place exactly where the plan takes the shape for
/// this CPU's instruction set and the scratch holds what the plan sizes: with one element
/// fewer, or a shape the plan leaves to the unrolled patches, it returns `false` and writes
/// nothing.
#[test]
fn the_entry_point_runs_the_kernel_only_with_the_scratch_the_plan_sizes() {
    use crate::kernels::conv2d_windows_in_place;
    use crate::kernels::plan::windows_in_place_scratch;
    let Some(isa) = detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let lanes = lanes_of::<f32>(isa);
    // A stem on the padded image (padding 3), and a 1 x 1 projection the plan leaves.
    let (stem, padding) = (prepadded((3, 32, 7, 7, 2, 26, 26)), 3);
    let needed = windows_in_place_scratch(&stem, padding, lanes).unwrap();
    assert_eq!(needed, 32 * 147 + 3 * 26 * 26);
    let batch = 2;
    let x = std::vec![0.5_f32; batch * 3 * 20 * 20];
    let w = std::vec![0.25_f32; stem.weights_len()];
    let bias = std::vec![1.0_f32; 32];
    for (len, runs) in [(needed, true), (needed - 1, false)] {
        let mut scratch = std::vec![f32::NAN; len];
        let mut out = std::vec![f32::NAN; batch * stem.output_len()];
        let ran = conv2d_windows_in_place(
            &stem,
            padding,
            batch,
            &x,
            &w,
            &bias,
            &mut out,
            Epilogue::Identity,
            &mut scratch,
        );
        assert_eq!(ran, runs, "a scratch of {len}");
        // Every output written when it ran (the centre's window is whole: 1 + 147·0.125),
        // none when it did not.
        assert_eq!(out.iter().all(|v| !v.is_nan()), runs, "a scratch of {len}");
        assert_eq!(out.iter().all(|v| v.is_nan()), !runs, "a scratch of {len}");
        if runs {
            let centre = (5 * 10) + 5;
            assert_eq!(out[centre], 1.0 + 147.0 * 0.125);
        }
    }
    let projection = prepadded((32, 64, 1, 1, 2, 16, 16));
    assert_eq!(windows_in_place_scratch(&projection, 0, lanes), None);
    let mut out = std::vec![f32::NAN; projection.output_len()];
    let ran = conv2d_windows_in_place(
        &projection,
        0,
        1,
        &std::vec![1.0_f32; projection.image_len()],
        &std::vec![1.0_f32; projection.weights_len()],
        &std::vec![0.0_f32; 64],
        &mut out,
        Epilogue::Identity,
        &mut std::vec![0.0_f32; 100_000],
    );
    assert!(!ran && out.iter().all(|v| v.is_nan()));
}

/// The image, the weights and the outputs each end at a page without access (the last
/// window's last input, the last vector of filters masked, the last output), on every
/// instruction set here.
#[cfg(unix)]
#[test]
fn strided_windows_read_and_write_nothing_past_their_slices() {
    let mut next = xorshift(0x5eed_5717_0000_0002);
    let mut values = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| (next() % 1000) as f32 / 100.0 - 5.0)
            .collect()
    };
    for &sizes in SHAPES {
        let shape = prepadded(sizes);
        let mut x = Guarded::new(&values(shape.image_len()));
        let mut wt = Guarded::new(&values(shape.weights_len()));
        let mut bias = Guarded::new(&values(shape.filters));
        let mut out = Guarded::new(&std::vec![0.0; shape.output_len()]);
        for isa in [Isa::Avx512, Isa::Avx2Fma]
            .into_iter()
            .filter(|&i| isa_available(i))
        {
            conv2d_filters_in_lanes(
                isa,
                &shape,
                x.slice(),
                wt.slice(),
                bias.slice(),
                as_output(out.slice()),
                Epilogue::Relu,
            );
        }
    }
}
