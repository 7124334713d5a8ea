//! The convolutions' forward kernels against the definition.

use super::*;

/// Convolutions for the direct kernel: every tile height (1 to 8 filters and more), one and
/// two vectors per tile, rows narrower and wider than a vector (with a partial last
/// vector), padding on every side (masked lanes at both ends, rows wholly in the padding),
/// a kernel as large as the padded image, and several channels.
pub(super) const CONVS: &[Conv] = &[
    crate::kernels::shape::LENET_FIRST,
    Conv {
        channels: 6,
        filters: 16,
        kernel: 5,
        padding: 0,
        height: 14,
        width: 14,
    },
    Conv {
        channels: 3,
        filters: 1,
        kernel: 3,
        padding: 1,
        height: 5,
        width: 5,
    },
    Conv {
        channels: 2,
        filters: 9,
        kernel: 3,
        padding: 1,
        height: 7,
        width: 40,
    },
    Conv {
        channels: 1,
        filters: 3,
        kernel: 1,
        padding: 0,
        height: 1,
        width: 17,
    },
    Conv {
        channels: 4,
        filters: 13,
        kernel: 2,
        padding: 3,
        height: 3,
        width: 33,
    },
    Conv {
        channels: 2,
        filters: 2,
        kernel: 9,
        padding: 3,
        height: 3,
        width: 4,
    },
    Conv {
        channels: 0,
        filters: 2,
        kernel: 1,
        padding: 0,
        height: 2,
        width: 2,
    },
];

fn check_conv<E: Copy + Into<f64>>(
    run: impl Fn(&Conv, &[E], &[E], &[E], &mut [E]),
    from: impl Fn(f64) -> E,
    tolerance: f64,
) {
    for (i, shape) in CONVS.iter().enumerate() {
        let steps = shape.channels * shape.kernel * shape.kernel;
        let x64 = values(shape.channels * shape.height * shape.width, 10 + i as u64);
        let w64 = values(shape.filters * steps, 20 + i as u64);
        let b64 = values(shape.filters, 30 + i as u64);
        let out_len = shape.filters * shape.out_height() * shape.out_width();
        let mut want = std::vec![0.0; out_len];
        crate::kernels::reference::conv2d_stride1(shape, &x64, &w64, &b64, &mut want);
        let cast = |v: &[f64]| v.iter().map(|&x| from(x)).collect::<Vec<E>>();
        // Stale contents must be overwritten.
        let mut got = cast(&values(out_len, 40));
        run(shape, &cast(&x64), &cast(&w64), &cast(&b64), &mut got);
        for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let g: f64 = g.into();
            let bound = tolerance * (1.0 + steps as f64).sqrt() * (1.0 + w.abs());
            assert!(
                (g - w).abs() <= bound,
                "{shape:?}: element {idx} is {g}, expected {w}"
            );
        }
    }
}

#[test]
fn convolutions_match_the_definition_on_every_available_instruction_set() {
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        check_conv::<f32>(
            |s, x, w, b, o| conv2d_stride1(isa, s, x, w, b, as_output(o), Epilogue::Identity),
            |x| x as f32,
            1e-6,
        );
    }
}

/// Shapes with many filters and narrow images, where the kernels put the filters in the
/// lanes: whole vectors of filters, a partial one, several, in f32's and f64's lanes.
pub(super) const MANY_FILTERS: &[Conv] = &[
    Conv {
        channels: 3,
        filters: 16,
        kernel: 3,
        padding: 0,
        height: 6,
        width: 7,
    },
    Conv {
        channels: 2,
        filters: 21,
        kernel: 2,
        padding: 0,
        height: 5,
        width: 17,
    },
    Conv {
        channels: 1,
        filters: 40,
        kernel: 1,
        padding: 0,
        height: 3,
        width: 29,
    },
    Conv {
        channels: 5,
        filters: 3,
        kernel: 4,
        padding: 0,
        height: 4,
        width: 4,
    },
    // Kernels 5 and 3 wide with whole and partial tiles of positions and of filters (LeNet-5's
    // second convolution is in `CONVS`).
    Conv {
        channels: 2,
        filters: 20,
        kernel: 5,
        padding: 0,
        height: 7,
        width: 31,
    },
    Conv {
        channels: 2,
        filters: 19,
        kernel: 3,
        padding: 1,
        height: 5,
        width: 27,
    },
];

/// Every shape as the filters-in-lanes kernels take it: padded beforehand.
pub(super) fn filter_shapes() -> impl Iterator<Item = Conv> {
    CONVS.iter().chain(MANY_FILTERS).map(|s| s.padded())
}

pub(super) fn transposed(w: &[f64], rows: usize) -> Vec<f64> {
    let columns = w.len() / rows.max(1);
    let mut t = std::vec![0.0; w.len()];
    for r in 0..rows {
        for c in 0..columns {
            t[c * rows + r] = w[r * columns + c];
        }
    }
    t
}

#[test]
fn convolutions_of_padded_images_match_the_definition() {
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        for (i, shape) in filter_shapes().enumerate() {
            let steps = shape.channels * shape.kernel * shape.kernel;
            let x = values(shape.image_len(), 80 + i as u64);
            let w = values(shape.filters * steps, 90 + i as u64);
            let bias = values(shape.filters, 100 + i as u64);
            let mut want = std::vec![0.0; shape.output_len()];
            crate::kernels::reference::conv2d_stride1(&shape, &x, &w, &bias, &mut want);
            let wt = transposed(&w, shape.filters);
            let bound =
                |w: f64, tolerance: f64| tolerance * (1.0 + steps as f64).sqrt() * (1.0 + w.abs());
            let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            // Both kernels for padded images: filters in the lanes (transposed weights) and
            // flat positions in the lanes.
            for (kernel, weights) in [("filters", &wt), ("flat", &w)] {
                let (x, weights, bias) = (f32s(&x), f32s(weights), f32s(&bias));
                let mut got = f32s(&values(shape.output_len(), 110));
                match kernel {
                    "filters" => conv2d_filters_in_lanes(
                        isa,
                        &shape.prepadded(),
                        &x,
                        &weights,
                        &bias,
                        as_output(&mut got),
                        ID,
                    ),
                    _ => conv2d_stride1_flat(
                        isa,
                        &shape,
                        &x,
                        &weights,
                        &bias,
                        as_output(&mut got),
                        ID,
                    ),
                }
                for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(g) - w).abs() <= bound(w, 1e-6),
                        "{kernel} {isa:?} {shape:?}: f32 element {idx} is {g}, expected {w}"
                    );
                }
            }
        }
    }
}

/// Every convolution kernel applies ReLU as it stores an output exactly as the scalar rule
/// applied to the output it stores without it: bit for bit, a NaN kept and a `-0.0` made
/// `+0.0`. Filter 0's weights and bias are `-0.0` (outputs of `-0.0` where no product is
/// positive zero) and filter 1's bias is a NaN.
#[test]
fn every_convolution_kernel_applies_relu_as_it_stores_bit_for_bit() {
    /// How many outputs without the epilogue were negative, `-0.0` and NaN.
    #[derive(Default)]
    struct Seen {
        negative: usize,
        negative_zero: usize,
        nan: usize,
    }
    fn operands(shape: &Conv, seed: u64) -> [Vec<f64>; 3] {
        let steps = shape.channels * shape.kernel * shape.kernel;
        let x = values(shape.image_len() * 2, seed);
        let mut w = values(shape.filters * steps, seed + 1);
        let mut bias = values(shape.filters, seed + 2);
        let first = steps.min(w.len());
        w[..first].fill(-0.0);
        if let Some(b) = bias.first_mut() {
            *b = -0.0;
        }
        if let Some(b) = bias.get_mut(1) {
            *b = f64::NAN;
        }
        [x, w, bias]
    }
    /// Runs `kernel` with each epilogue on the operands cast to `E` and compares.
    fn compare<E: Element + crate::Scalar + Into<f64>>(
        what: &str,
        [x, w, bias]: &[Vec<f64>; 3],
        out_len: usize,
        from: impl Fn(f64) -> E,
        kernel: impl Fn(&[E], &[E], &[E], &mut [E], Epilogue),
        seen: &mut Seen,
    ) {
        let cast = |v: &[f64]| v.iter().map(|&v| from(v)).collect::<Vec<E>>();
        let (x, w, bias) = (cast(x), cast(w), cast(bias));
        let mut plain = cast(&values(out_len, 7)); // stale contents
        kernel(&x, &w, &bias, &mut plain, Epilogue::Identity);
        let mut fused = cast(&values(out_len, 8));
        kernel(&x, &w, &bias, &mut fused, Epilogue::Relu);
        for (i, (&p, &f)) in plain.iter().zip(&fused).enumerate() {
            let (p, f, want): (f64, f64, f64) =
                (p.into(), f.into(), Epilogue::Relu.apply(p).into());
            assert_eq!(
                f.to_bits(),
                want.to_bits(),
                "{what}: output {i} is {f:?} with ReLU, {p:?} without"
            );
            seen.negative += usize::from(p < 0.0);
            seen.negative_zero += usize::from(p.to_bits() == (-0.0_f64).to_bits());
            seen.nan += usize::from(p.is_nan());
        }
    }
    fn every_kernel<E: Element + crate::Scalar + Into<f64>>(
        isa: Isa,
        from: impl Fn(f64) -> E + Copy,
        seen: &mut Seen,
    ) {
        for (i, shape) in CONVS.iter().enumerate() {
            let ops = operands(shape, 300 + i as u64);
            let (image, len) = (shape.image_len(), shape.output_len());
            let what = std::format!("{isa:?} positions in the lanes {shape:?}");
            compare(
                &what,
                &ops,
                len,
                from,
                |x, w, b, out, e| conv2d_stride1(isa, shape, &x[..image], w, b, as_output(out), e),
                seen,
            );
        }
        for (i, shape) in filter_shapes().enumerate() {
            let ops = operands(&shape, 400 + i as u64);
            let (image, len) = (shape.image_len(), shape.output_len());
            let what = std::format!("{isa:?} flat {shape:?}");
            compare(
                &what,
                &ops,
                len,
                from,
                |x, w, b, out, e| {
                    conv2d_stride1_flat(isa, &shape, &x[..image], w, b, as_output(out), e)
                },
                seen,
            );
            let [x, w, b] = &ops;
            let transposed_ops = [x.clone(), transposed(w, shape.filters), b.clone()];
            let what = std::format!("{isa:?} filters in the lanes {shape:?}");
            compare(
                &what,
                &transposed_ops,
                len,
                from,
                |x, wt, b, out, e| {
                    conv2d_filters_in_lanes(
                        isa,
                        &shape.prepadded(),
                        &x[..image],
                        wt,
                        b,
                        as_output(out),
                        e,
                    )
                },
                seen,
            );
        }
        let winograd = [
            (6, 16, 5, 0, 14, 14),
            (3, 20, 3, 1, 9, 11),
            (2, 5, 4, 2, 7, 6),
        ];
        for (i, sizes) in winograd.into_iter().enumerate() {
            let shape = conv_of(sizes);
            assert!(winograd_forward_applies(&shape), "{shape:?}");
            let ops = operands(&shape, 500 + i as u64);
            let what = std::format!("{isa:?} Winograd {shape:?}");
            let scratch_len = winograd_forward_scratch(&shape, lanes::<E>(isa));
            compare(
                &what,
                &ops,
                2 * shape.output_len(),
                from,
                |x, w, b, out, e| {
                    let mut scratch = std::vec![MaybeUninit::uninit(); scratch_len];
                    conv2d_stride1_winograd(
                        isa,
                        &shape,
                        2,
                        x,
                        w,
                        b,
                        as_output(out),
                        &mut scratch,
                        e,
                    )
                },
                seen,
            );
        }
    }
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        let mut seen = Seen::default();
        every_kernel::<f32>(isa, |v| v as f32, &mut seen);
        // The cases the rule distinguishes all occurred.
        assert!(seen.negative > 100 && seen.negative_zero > 10 && seen.nan > 10);
    }
}

/// The forward pass's scratch: the weights transposed, the image's share all zeros, even
/// where the stack held other values before (NaNs, left by the call before).
#[test]
fn the_filters_scratch_holds_the_transposed_weights_and_zeros() {
    let w: Vec<f32> = values(16 * 150, 3).iter().map(|&v| v as f32).collect();
    let want: Vec<f32> = transposed(&values(16 * 150, 3), 16)
        .iter()
        .map(|&v| v as f32)
        .collect();
    // Twice: the first call leaves NaNs in the buffer, which the second must not see.
    let mut scratch = [core::mem::MaybeUninit::<f32>::uninit(); 4096];
    for _ in 0..2 {
        with_transposed_filters(&mut scratch, &w, 16, 1024, |wt, zeros| {
            assert_eq!(wt, &want[..]);
            assert!(
                zeros.iter().all(|&z| z.to_bits() == 0),
                "the padding is zeroed"
            );
            assert_eq!((wt.len(), zeros.len()), (2400, 1024));
            zeros.fill(f32::NAN);
        });
    }
}

#[test]
#[should_panic(expected = "3 rows of 4 from a stride of 4 in 12 elements to a stride of 5 in 13")]
fn row_copies_past_the_end_of_their_slices_are_refused() {
    let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
    // The last row would end at 14.
    copy_rows(isa, &[0.0_f32; 12], 4, &mut [0.0; 13], 5, (3, 4));
}

#[test]
#[should_panic(expected = "do not fit")]
fn convolution_operands_of_the_wrong_length_are_refused() {
    let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
    let shape = Conv {
        channels: 1,
        filters: 1,
        kernel: 3,
        padding: 0,
        height: 4,
        width: 4,
    };
    let mut out = [0.0_f32; 4];
    conv2d_stride1(
        isa,
        &shape,
        &[0.0; 15],
        &[0.0; 9],
        &[0.0],
        as_output(&mut out),
        ID,
    );
}

#[test]
#[should_panic(expected = "does not fit")]
fn a_kernel_larger_than_the_padded_image_is_refused() {
    let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
    let shape = Conv {
        channels: 1,
        filters: 1,
        kernel: 5,
        padding: 0,
        height: 4,
        width: 4,
    };
    conv2d_stride1::<f32>(isa, &shape, &[0.0; 16], &[0.0; 25], &[0.0], &mut [], ID);
}

/// The Winograd forward pass of a batch agrees with the definition summed in `f64`, on
/// each instruction set, in `f32`: every kernel size, padded or not (padding
/// larger than the kernel too), partial groups of filters, tiles that overhang the output,
/// images taller and wider than a vector, and 60 shapes drawn at random.
///
/// With AVX-512, `f32` takes tiles of 8 points where [`winograd_forward_points`] says so
/// (every kernel size among the fixed shapes); the test checks that they occurred.
///
/// The bound is relative to the tile, not to the output: the transforms mix the 6 or 8
/// inputs of a tile's row, so an output's rounding error scales with all of them (an output
/// whose own window is all padding is the bias plus an error of the size of its tile's
/// inputs, not the bias exactly). `tolerance` is per unit of
/// `|b| + Σ_(c, ky) max_kx |w| · Σ_j |d_j|`.
#[test]
fn winograd_forward_passes_match_the_definition_on_every_available_instruction_set() {
    let mut shapes = std::vec![
        (6, 16, 5, 0, 14, 14), // LeNet's second convolution
        (3, 20, 3, 1, 7, 9),   // 3x3, padded, 20 filters, a partial tile (9 = 2·4 + 1)
        (2, 5, 4, 2, 18, 19),  // 4x4, padded, taller and wider than a vector
        (1, 33, 5, 0, 6, 20),  // 3 groups of filters with 16 lanes, 5 with 8, 9 with 4
        (4, 8, 3, 0, 35, 6),   // one tile across, three vectors of rows
        (2, 3, 5, 3, 2, 2),    // padding larger than the image
        (1, 16, 3, 7, 3, 8),   // padding more than twice the kernel
        (2, 20, 3, 0, 3, 12),  // one output row: a tile of 1 row (8 points with AVX-512)
        (2, 20, 4, 0, 5, 13),  // two output rows, 4 x 4 (8 points with AVX-512)
    ];
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let mut draw = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n) as usize
    };
    while shapes.len() < 67 {
        let shape = (
            1 + draw(6),
            1 + draw(40),
            3 + draw(3),
            draw(8),
            1 + draw(24),
            1 + draw(24),
        );
        let conv = Conv {
            channels: shape.0,
            filters: shape.1,
            kernel: shape.2,
            padding: shape.3,
            height: shape.4,
            width: shape.5,
        };
        if conv.kernel <= conv.height + 2 * conv.padding
            && conv.kernel <= conv.width + 2 * conv.padding
            && winograd_forward_applies(&conv)
        {
            shapes.push(shape);
        }
    }
    // With AVX-512's 16 lanes of f32 (whether or not this CPU has them), every kernel size
    // among the fixed shapes, and most of the others, take 8 points.
    let eight: Vec<Conv> = shapes
        .iter()
        .map(|&sizes| conv_of(sizes))
        .filter(|shape| winograd_forward_points(shape, 16) == 8)
        .collect();
    std::eprintln!("16 lanes: {} shapes on 8 points", eight.len());
    assert!(eight.len() >= 12, "{} shapes on 8 points", eight.len());
    for kernel in 3..=5 {
        assert!(eight[..6].iter().any(|shape| shape.kernel == kernel));
    }
    let worst = |isa: Isa| {
        let mut worst = 0.0_f64;
        for (i, &sizes) in shapes.iter().enumerate() {
            let shape = conv_of(sizes);
            assert!(winograd_forward_applies(&shape), "{shape:?}");
            worst = worst.max(error::<f32>(isa, &shape, i as u64, |x| x as f32));
        }
        worst
    };
    /// The largest error of a batch of 2, per unit of its tile's size (see above).
    fn error<E: Element + Into<f64>>(
        isa: Isa,
        shape: &Conv,
        seed: u64,
        from: impl Fn(f64) -> E,
    ) -> f64 {
        let batch = 2;
        let Conv {
            channels,
            filters,
            kernel,
            ..
        } = *shape;
        let (image, output) = (shape.image_len(), shape.output_len());
        let (out_height, out_width) = (shape.out_height(), shape.out_width());
        let points = winograd_forward_points(shape, lanes::<E>(isa));
        let m = points + 1 - kernel;
        let x = values(batch * image, 50 + seed);
        let w = values(filters * channels * kernel * kernel, 60 + seed);
        let b = values(filters, 70 + seed);
        let cast = |v: &[f64]| v.iter().map(|&x| from(x)).collect::<Vec<E>>();
        let mut got = cast(&values(batch * output, 80));
        // Scratch filled with NaN: an element read before it is written (or zeroed) gives a
        // NaN output. (Where the filters' transposes, which come first, cover the image's
        // place, such a miss reads a weight instead, and the error bound catches it.)
        let scratch_len = winograd_forward_scratch(shape, lanes::<E>(isa));
        let mut scratch = std::vec![MaybeUninit::new(from(f64::NAN)); scratch_len];
        conv2d_stride1_winograd(
            isa,
            shape,
            batch,
            &cast(&x),
            &cast(&w),
            &cast(&b),
            as_output(&mut got),
            &mut scratch,
            Epilogue::Identity,
        );
        let mut worst = 0.0_f64;
        for n in 0..batch {
            let x = &x[n * image..][..image];
            let mut want = std::vec![0.0; output];
            crate::kernels::reference::conv2d_stride1(shape, x, &w, &b, &mut want);
            let at = |c, row, column| padded_magnitude(shape, x, c, row, column);
            for f in 0..filters {
                for oh in 0..out_height {
                    for ow in 0..out_width {
                        let tile = ow / m * m;
                        let mut size = b[f].abs();
                        for c in 0..channels {
                            for ky in 0..kernel {
                                let row =
                                    &w[((f * channels + c) * kernel + ky) * kernel..][..kernel];
                                let largest = row.iter().fold(0.0_f64, |a, v| a.max(v.abs()));
                                let inputs: f64 =
                                    (0..points).map(|j| at(c, oh + ky, tile + j)).sum();
                                size += largest * inputs;
                            }
                        }
                        let j = (f * out_height + oh) * out_width + ow;
                        let g: f64 = got[n * output + j].into();
                        assert!(g.is_finite(), "{shape:?}: output {j} is {g}");
                        worst = worst.max((g - want[j]).abs() / size);
                    }
                }
            }
        }
        worst
    }
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        let in_f32 = worst(isa);
        std::eprintln!("{isa:?}: worst error per unit of the tile's size: {in_f32:.2e}");
        assert!(in_f32 <= 2e-6, "{isa:?}: error {in_f32:e}");
    }
}

/// With AVX-512, LeNet's second layer in `f32` runs on 8 points, not on the 6 it took
/// before: the outputs differ from the 6-point kernel's in the last bits (which an error
/// bound cannot see), and both are within the bound of the definition. A shape whose
/// 8-point scratch would not fit the stack buffer keeps 6 points.
#[test]
fn lenets_second_layer_runs_on_eight_points_with_avx512() {
    if !isa_available(Isa::Avx512) {
        std::eprintln!("skipping: no AVX-512 on this CPU");
        return;
    }
    let shape = conv_of((6, 16, 5, 0, 14, 14));
    assert_eq!(winograd_forward_points(&shape, 16), 8);
    let taller = conv_of((6, 16, 5, 0, 15, 14));
    assert!(
        winograd_forward_scratch_on(&taller, 16, 8) > crate::kernels::shape::WINOGRAD_STACK_SCRATCH
    );
    assert_eq!(winograd_forward_points(&taller, 16), 6);
    assert!(winograd_forward_scratch(&taller, 16) <= crate::kernels::shape::WINOGRAD_STACK_SCRATCH);
    let cast = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect::<Vec<f32>>();
    let x = cast(values(shape.image_len(), 1));
    let w = cast(values(16 * 6 * 25, 2));
    let b = cast(values(16, 3));
    let len = shape.output_len();
    let mut scratch = std::vec![MaybeUninit::uninit(); 2 * WINOGRAD_TEST_SCRATCH];
    let mut on_eight = std::vec![0.0_f32; len];
    conv2d_stride1_winograd(
        Isa::Avx512,
        &shape,
        1,
        &x,
        &w,
        &b,
        as_output(&mut on_eight),
        &mut scratch,
        Epilogue::Identity,
    );
    #[target_feature(enable = "avx512f")]
    fn on_six(shape: &Conv, x: &[f32], w: &[f32], b: &[f32], out: &mut [f32]) {
        let g = crate::kernels::winograd::filter_transform(5).map(|row| row.map(|g| g as f32));
        let mut scratch = std::vec![MaybeUninit::uninit(); 2 * WINOGRAD_TEST_SCRATCH];
        // SAFETY: AVX-512 is present (the caller checked); the shape is LeNet's second
        // layer, whose 6-point scratch is within the buffer, and the slices fit it.
        unsafe {
            winograd_forward_run::<Avx512F32, 6, 5, 2, 6>(
                shape,
                1,
                x,
                w,
                b,
                as_output(out),
                &SixPoints,
                &g,
                &mut scratch,
                Epilogue::Identity,
            );
        }
    }
    let mut on_six_points = std::vec![0.0_f32; len];
    // SAFETY: AVX-512 is present (checked above).
    unsafe { on_six(&shape, &x, &w, &b, &mut on_six_points) };
    assert_ne!(on_eight, on_six_points);
    let mut want = std::vec![0.0; len];
    let wide = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
    crate::kernels::reference::conv2d_stride1(&shape, &wide(&x), &wide(&w), &wide(&b), &mut want);
    for (got, name) in [(&on_eight, "8 points"), (&on_six_points, "6 points")] {
        let worst = got
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (f64::from(g) - w).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-4, "{name}: {worst:e}");
    }
}

/// Twice the scratch LeNet's second layer needs on either number of points.
const WINOGRAD_TEST_SCRATCH: usize = 9 * 1024;

/// The written-out `Bᵀ·d` and `Aᵀ·m` of the Winograd forward kernel are the Toom-Cook
/// matrices' products, for every kernel size.
#[test]
fn the_winograd_forward_transforms_are_the_matrices() {
    if !isa_available(Isa::Avx2Fma) {
        std::eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    #[target_feature(enable = "avx2,fma")]
    fn run<const M: usize>(d: [f64; 6]) -> ([f64; 6], [f64; M]) {
        // SAFETY: AVX2 and FMA are present (the caller checked); the stores write the
        // arrays' elements.
        unsafe {
            let vectors = d.map(|v| Avx2F64::splat(v));
            let mut z = [0.0; 6];
            for (z, v) in z
                .iter_mut()
                .zip(winograd_input_transform::<Avx2F64>(vectors))
            {
                let mut lanes = [0.0; 4];
                Avx2F64::store(lanes.as_mut_ptr(), v);
                *z = lanes[0];
            }
            let mut y = [[0.0; 4]; M];
            winograd_output_transform::<Avx2F64, M>(&vectors, y.as_mut_ptr().cast(), M);
            (z, y.map(|lanes| lanes[0]))
        }
    }
    let d = [0.3, -1.7, 2.9, 0.55, -0.8, 1.3];
    for r in 3..=5 {
        let [at, bt] = crate::kernels::winograd::output_and_input_transforms(r);
        // SAFETY: AVX2 and FMA are present (checked above).
        let (z, y) = unsafe {
            match r {
                3 => {
                    let (z, y) = run::<4>(d);
                    (z, y.to_vec())
                }
                4 => {
                    let (z, y) = run::<3>(d);
                    (z, y.to_vec())
                }
                _ => {
                    let (z, y) = run::<2>(d);
                    (z, y.to_vec())
                }
            }
        };
        for (j, &z) in z.iter().enumerate() {
            let expected: f64 = (0..6).map(|i| bt[j][i] * d[i]).sum();
            assert!(
                (z - expected).abs() < 1e-12,
                "Bᵀ·d, row {j}: {z} against {expected}"
            );
        }
        for (i, &y) in y.iter().enumerate() {
            let expected: f64 = (0..6).map(|j| at[i][j] * d[j]).sum();
            assert!(
                (y - expected).abs() < 1e-12,
                "Aᵀ·m, r = {r}, row {i}: {y} against {expected}"
            );
        }
    }
}
