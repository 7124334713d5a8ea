//! The convolutions' forward dispatch: which kernel each shape takes, and batches against the
//! definitions (the gradients' in `conv_gradients.rs`).

use super::*;

/// Types without SIMD kernels (here `i64`) take the generic convolution, then the epilogue
/// in a pass of its own: the same outputs as without it, the negative ones made 0.
#[test]
fn the_generic_convolution_applies_the_epilogue_after() {
    let shape = Conv {
        channels: 2,
        filters: 3,
        kernel: 3,
        padding: 1,
        height: 4,
        width: 5,
    };
    let batch = 2;
    let value = |n: usize, seed: usize| -> std::vec::Vec<i64> {
        (0..n)
            .map(|j| ((j * 31 + seed * 17) % 11) as i64 - 5)
            .collect()
    };
    let (x, w, bias) = (
        value(batch * shape.image_len(), 1),
        value(3 * 2 * 9, 2),
        value(3, 3),
    );
    let mut plain = std::vec![7; batch * shape.output_len()];
    conv2d_stride1(&shape, batch, &x, &w, &bias, &mut plain, Epilogue::Identity);
    let mut fused = std::vec![7; batch * shape.output_len()];
    conv2d_stride1(&shape, batch, &x, &w, &bias, &mut fused, Epilogue::Relu);
    assert!(plain.iter().any(|&z| z < 0) && plain.iter().any(|&z| z > 0));
    let want: std::vec::Vec<i64> = plain.iter().map(|&z| z.max(0)).collect();
    assert_eq!(fused, want);
}

/// LeNet-5's second convolution.
#[cfg(target_arch = "x86_64")]
pub(super) const LENET_SECOND: Conv = Conv {
    channels: 6,
    filters: 16,
    kernel: 5,
    padding: 0,
    height: 14,
    width: 14,
};

/// `n` values in [-1, 1], spread out, from `seed`.
#[cfg(target_arch = "x86_64")]
pub(super) fn spread_values(n: usize, seed: usize) -> std::vec::Vec<f32> {
    (0..n)
        .map(|j| ((j * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0)
        .collect()
}

/// On a CPU with AVX2 or AVX-512, LeNet's first layer in `f32` (the positions in the lanes),
/// and one with 20 filters whose transforms need the larger stack buffer, take the forward
/// pass by Winograd's method down the columns: the batch function's outputs are its
/// outputs, bit for bit, and `conv_stack_scratch` counts its buffer; in `f64` they take
/// the portable loops, whose sums are the definition's to a few units in the last place.
#[cfg(target_arch = "x86_64")]
#[test]
#[allow(unsafe_code)] // the kernel's output as it takes it
fn lenets_first_convolution_takes_winograd_down_the_columns_in_f32() {
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let lenet = LENET_FIRST;
    let wider = Conv {
        filters: 20,
        ..lenet
    };
    let lanes = x86::lanes::<f32>(isa);
    for (shape, buffer) in [(lenet, SMALL_STACK_SCRATCH), (wider, STACK_SCRATCH)] {
        let scratch_len = x86::conv_winograd_columns_f32::scratch_len(&shape, lanes);
        assert!(x86::conv_winograd_columns_f32::applies(&shape, lanes));
        assert!(
            scratch_len <= buffer
                && (buffer == SMALL_STACK_SCRATCH || scratch_len > SMALL_STACK_SCRATCH)
        );
        assert_eq!(conv_stack_scratch(&shape, 4), buffer);
        let batch = 2;
        let (x, w, bias) = (
            spread_values(batch * shape.image_len(), 1),
            spread_values(shape.filters * 25, 2),
            spread_values(shape.filters, 3),
        );
        let mut by_dispatch = std::vec![0.0_f32; batch * shape.output_len()];
        conv2d_stride1(
            &shape,
            batch,
            &x,
            &w,
            &bias,
            &mut by_dispatch,
            Epilogue::Relu,
        );
        let mut by_columns = std::vec![0.0_f32; batch * shape.output_len()];
        let mut scratch = std::vec![core::mem::MaybeUninit::uninit(); scratch_len];
        x86::conv_winograd_columns_f32::conv2d_stride1_winograd_columns(
            isa,
            &shape,
            batch,
            &x,
            &w,
            &bias,
            // SAFETY: the kernel writes only initialized values (its outputs).
            unsafe { as_uninit_mut(&mut by_columns) },
            &mut scratch,
            Epilogue::Relu,
        );
        assert_eq!(by_dispatch, by_columns);
        // In f64, the direct sums: the definition's to within a few units in the last place.
        let to_f64 = |v: &[f32]| {
            v.iter()
                .map(|&v| f64::from(v))
                .collect::<std::vec::Vec<_>>()
        };
        let (x, w, bias) = (to_f64(&x), to_f64(&w), to_f64(&bias));
        let mut in_f64 = std::vec![0.0_f64; batch * shape.output_len()];
        conv2d_stride1(
            &shape,
            batch,
            &x,
            &w,
            &bias,
            &mut in_f64,
            Epilogue::Identity,
        );
        let mut direct = std::vec![0.0_f64; shape.output_len()];
        reference::conv2d_stride1(&shape, &x[..shape.image_len()], &w, &bias, &mut direct);
        for (got, want) in in_f64.iter().zip(&direct) {
            assert!(
                (got - want).abs() <= 1e-13 * want.abs().max(1.0),
                "{got} against {want}"
            );
        }
    }
}

/// On a CPU with AVX2 or AVX-512, a stride-1 convolution with the filters in the lanes and a
/// 3 x 3 to 5 x 5 kernel (LeNet's second layer) takes the Winograd forward pass: the batch
/// function's outputs are its outputs, bit for bit (the direct kernel's differ in the last
/// bits), and its stack buffer is what `conv_stack_scratch` counts.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[test]
#[allow(unsafe_code)] // the kernel's output as it takes it
fn lenets_second_convolution_takes_the_winograd_forward_pass() {
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let shape = LENET_SECOND;
    let value = spread_values;
    let batch = 2;
    let (x, w, bias) = (
        value(batch * shape.image_len(), 1),
        value(16 * 6 * 25, 2),
        value(16, 3),
    );
    let mut by_dispatch = std::vec![0.0_f32; batch * shape.output_len()];
    conv2d_stride1(
        &shape,
        batch,
        &x,
        &w,
        &bias,
        &mut by_dispatch,
        Epilogue::Identity,
    );
    let mut by_winograd = std::vec![0.0_f32; batch * shape.output_len()];
    let lanes = x86::lanes::<f32>(isa);
    let scratch_len = x86::winograd_forward_scratch(&shape, lanes);
    assert!(scratch_len <= WINOGRAD_STACK_SCRATCH);
    // With AVX-512, 3 tiles of 8 points across its rows of 10 (9,088 elements of scratch,
    // all but 128 of the buffer); with AVX2, 5 tiles of 6.
    let (points, expected_scratch) = if lanes == 16 { (8, 9088) } else { (6, 7736) };
    assert_eq!(x86::winograd_forward_points(&shape, lanes), points);
    assert_eq!(scratch_len, expected_scratch);
    let mut scratch = std::vec![core::mem::MaybeUninit::uninit(); scratch_len];
    x86::conv2d_stride1_winograd(
        isa,
        &shape,
        batch,
        &x,
        &w,
        &bias,
        // SAFETY: the kernel writes only initialized values (its outputs).
        unsafe { as_uninit_mut(&mut by_winograd) },
        &mut scratch,
        Epilogue::Identity,
    );
    assert_eq!(by_dispatch, by_winograd);
    let mut direct = std::vec![0.0_f32; shape.output_len()];
    reference::conv2d_stride1(&shape, &x[..shape.image_len()], &w, &bias, &mut direct);
    assert_ne!(
        direct[..],
        by_winograd[..shape.output_len()],
        "the direct sums round differently"
    );
    assert_eq!(conv_stack_scratch(&shape, 4), WINOGRAD_STACK_SCRATCH);
}

/// Whichever kernel a batch takes (filters or positions in the lanes, padded or not, with
/// or without the scratch: without it, the generic loops), the batch functions compute each
/// image's convolution and the batch's summed weight gradient as the per-image definitions
/// do, in every element type.
#[test]
fn batches_of_convolutions_match_the_per_image_definitions() {
    let shapes = [
        (1, 6, 5, 2, 28, 28),  // LeNet's first layer: positions in the lanes
        (6, 16, 5, 0, 14, 14), // its second: filters in the lanes
        (2, 20, 3, 1, 5, 6),   // padded, filters in the lanes (a partial vector)
        (8, 70, 3, 0, 9, 9),   // weights too large for the stack buffer: flat
        // Padded image too large for it: the padding masked off (in `f32`, Winograd's
        // method down the columns).
        (1, 3, 3, 1, 70, 70),
        // No padding: flat (in `f32` with AVX2, down the columns).
        (2, 5, 3, 0, 4, 21),
        (0, 2, 1, 0, 2, 2), // no input channels: the bias only
    ];
    for (i, &(channels, filters, kernel, padding, height, width)) in shapes.iter().enumerate() {
        let shape = Conv {
            channels,
            filters,
            kernel,
            padding,
            height,
            width,
        };
        let value = |n: usize, seed: usize| -> std::vec::Vec<i64> {
            (0..n)
                .map(|j| ((j * 7 + seed * 13 + i) % 11) as i64 - 5)
                .collect()
        };
        let steps = channels * kernel * kernel;
        let batch = 3;
        let (x, w, bias) = (
            value(batch * shape.image_len(), 1),
            value(filters * steps, 2),
            value(filters, 3),
        );
        let dz = value(batch * shape.output_len(), 4);
        let padded = shape.padded();
        let mut x_padded = std::vec![0; batch * padded.image_len()];
        for (x, p) in x
            .chunks(shape.image_len().max(1))
            .zip(x_padded.chunks_mut(padded.image_len().max(1)))
        {
            pad(&shape, x, p);
        }
        // The definitions, image by image, in exact integers.
        let mut want_out = std::vec![0; batch * shape.output_len()];
        let mut want_dw = value(filters * steps, 5);
        for b in 0..batch {
            let (xi, oi) = (b * shape.image_len(), b * shape.output_len());
            reference::conv2d_stride1(
                &shape,
                &x[xi..xi + shape.image_len()],
                &w,
                &bias,
                &mut want_out[oi..oi + shape.output_len()],
            );
            let pi = b * padded.image_len();
            reference::conv2d_weight_gradient_stride1(
                &padded,
                &x_padded[pi..pi + padded.image_len()],
                &dz[oi..oi + shape.output_len()],
                &mut want_dw,
                true,
            );
        }
        /// `tolerance`: of the outputs and the weight gradients, per unit of the sum of the
        /// terms' sizes (the Winograd forward pass and weight gradient round their
        /// transforms; everything else is exact here).
        fn check<T: Scalar + Into<f64>>(
            shape: &Conv,
            operands: [&[i64]; 6],
            want_out: &[i64],
            want_dw: &[i64],
            from: impl Fn(i64) -> T,
            tolerance: f64,
        ) {
            let [x, w, bias, dz, x_padded, dw_start] =
                operands.map(|o| o.iter().map(|&v| from(v)).collect::<std::vec::Vec<T>>());
            let batch = 3;
            let mut out = std::vec![from(99); want_out.len()];
            conv2d_stride1(shape, batch, &x, &w, &bias, &mut out, Epilogue::Identity);
            // Every value is at most 5 in size.
            let terms = (shape.channels * shape.kernel * shape.kernel * 25 + 5) as f64;
            for (j, (&g, &e)) in out.iter().zip(want_out).enumerate() {
                let g: f64 = g.into();
                assert!(
                    (g - e as f64).abs() <= tolerance * terms,
                    "{shape:?}: output {j} is {g}, expected {e}"
                );
            }
            let padded = shape.padded();
            let scratch = conv_weight_gradient_scratch::<T>(&padded, batch);
            // The padded images, and where the kernel pads them itself, the images as they
            // are.
            let unpadded =
                (shape.padding > 0 && conv_weight_gradient_pads::<T>(shape)).then_some((shape, &x));
            for (shape, x) in [(&padded, &x_padded)].into_iter().chain(unpadded) {
                for scratch_len in [scratch, 0] {
                    let mut scratch = std::vec![from(0); scratch_len];
                    let mut dw = dw_start.clone();
                    conv2d_weight_gradient_stride1(
                        shape,
                        batch,
                        x,
                        &dz,
                        &mut scratch,
                        &mut dw,
                        true,
                    );
                    // Winograd's weight gradient rounds too (sums at its tiles' points).
                    let terms = (batch * shape.out_height() * shape.out_width() * 25 + 5) as f64;
                    for (j, (&g, &e)) in dw.iter().zip(want_dw).enumerate() {
                        let g: f64 = g.into();
                        assert!(
                            (g - e as f64).abs() <= tolerance * terms,
                            "{shape:?} scratch {scratch_len}: dW {j} is {g}, expected {e}"
                        );
                    }
                }
            }
        }
        let operands = [
            &x[..],
            &w,
            &bias,
            &dz,
            &x_padded,
            &value(filters * steps, 5),
        ];
        // Small integers: every sum is exact in f32 and f64, whatever the order, but for
        // Winograd's forward pass and weight gradient (their transforms have fractions).
        check::<f32>(&shape, operands, &want_out, &want_dw, |v| v as f32, 1e-6);
        check::<f64>(&shape, operands, &want_out, &want_dw, |v| v as f64, 1e-14);
        check::<i32>(&shape, operands, &want_out, &want_dw, |v| v as i32, 0.0);
    }
}

/// Every forward kernel the plan chooses, for either instruction set's vectors, gets the stack
/// buffer its scratch needs: the rule the dispatch and the memory budget share.
#[cfg(target_arch = "x86_64")]
#[test]
fn every_planned_forward_kernel_fits_its_stack_buffer() {
    use super::plan::{ForwardKernel, forward_kernel};
    use super::shape::STACK_SCRATCH;
    let mut seen = std::vec::Vec::new();
    for channels in [1, 3, 6, 16, 32] {
        for filters in [1, 6, 16, 20, 64] {
            for kernel in [1, 3, 5, 7] {
                for padding in [0, 1, 2, 3] {
                    for size in [5, 8, 14, 16, 28, 32] {
                        let shape = Conv {
                            channels,
                            filters,
                            kernel,
                            padding,
                            height: size,
                            width: size,
                        };
                        if kernel > size + 2 * padding {
                            continue;
                        }
                        let padded = if padding > 0 {
                            shape.padded().image_len()
                        } else {
                            0
                        };
                        let mut largest = 0;
                        for lanes in [16, 8] {
                            let plan = forward_kernel(&shape, lanes, STACK_SCRATCH);
                            let needed = match plan {
                                ForwardKernel::WinogradRows => {
                                    x86::winograd_forward_scratch(&shape, lanes)
                                }
                                ForwardKernel::FiltersInLanes { .. } => {
                                    filters * channels * kernel * kernel + padded
                                }
                                ForwardKernel::WinogradColumns { .. } => {
                                    x86::conv_winograd_columns_f32::scratch_len(&shape, lanes)
                                }
                                ForwardKernel::FlatPadded { .. } => padded,
                                ForwardKernel::Flat
                                | ForwardKernel::Direct
                                | ForwardKernel::PointwiseProducts => 0,
                            };
                            assert!(
                                needed <= plan.scratch() && plan.scratch() <= plan.stack_scratch(),
                                "{plan:?} for {shape:?} on {lanes} lanes needs {needed}"
                            );
                            largest = largest.max(plan.stack_scratch());
                            let kind = core::mem::discriminant(&plan);
                            if !seen.contains(&kind) {
                                seen.push(kind);
                            }
                        }
                        assert_eq!(conv_stack_scratch(&shape, 4), largest, "{shape:?}");
                        assert_eq!(conv_stack_scratch(&shape, 8), 0);
                    }
                }
            }
        }
    }
    assert_eq!(seen.len(), 6, "every kernel chosen somewhere");
}

/// With a workspace's scratch, a convolution whose Winograd transforms exceed the stack buffer
/// takes Winograd's method down the columns on it: the columns kernel's bits, within rounding
/// of the direct kernel's; with a shorter scratch, or in `f64`, the stack plan's bits.
#[cfg(target_arch = "x86_64")]
#[test]
#[allow(unsafe_code)] // reading the kernel's outputs, which it takes uninitialized
fn a_workspace_scratch_lets_large_convolutions_take_winograds_method() {
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let lanes = x86::lanes::<f32>(isa);
    // 32 channels, 64 filters, 3 x 3, 16 x 16 padded by 1: direct on the stack.
    let shape = Conv {
        channels: 32,
        filters: 64,
        kernel: 3,
        padding: 1,
        height: 16,
        width: 16,
    };
    assert_eq!(
        forward_kernel(&shape, lanes, STACK_SCRATCH),
        ForwardKernel::Direct
    );
    let needed = workspace_forward_scratch(&shape, lanes, ScratchFor::Training);
    assert!(needed > STACK_SCRATCH, "{needed}");
    let available = conv_forward_workspace_scratch::<f32>(&shape);
    assert!(available >= needed);
    assert_eq!(conv_forward_workspace_scratch::<f64>(&shape), 0);
    let batch = 2;
    let x = spread_values(batch * shape.image_len(), 7);
    let w = spread_values(shape.filters * 32 * 9, 8);
    let bias = spread_values(shape.filters, 9);
    let len = batch * shape.output_len();
    for epilogue in [Epilogue::Identity, Epilogue::Relu] {
        let mut scratch = std::vec![f32::NAN; available];
        let mut with_scratch = std::vec![f32::NAN; len];
        conv2d_stride1_with_scratch(
            &shape,
            batch,
            &x,
            &w,
            &bias,
            &mut with_scratch,
            epilogue,
            &mut scratch,
            ScratchFor::Training,
        );
        let mut columns = std::vec![core::mem::MaybeUninit::new(f32::NAN); len];
        let mut columns_scratch = std::vec![core::mem::MaybeUninit::new(0.0_f32); needed];
        x86::conv_winograd_columns_f32::conv2d_stride1_winograd_columns(
            isa,
            &shape,
            batch,
            &x,
            &w,
            &bias,
            &mut columns,
            &mut columns_scratch,
            epilogue,
        );
        // SAFETY: the kernel wrote every output.
        let columns: std::vec::Vec<f32> =
            columns.iter().map(|v| unsafe { v.assume_init() }).collect();
        assert_eq!(with_scratch, columns);
        let mut direct = std::vec![f32::NAN; len];
        conv2d_stride1(&shape, batch, &x, &w, &bias, &mut direct, epilogue);
        for (i, (&a, &b)) in with_scratch.iter().zip(&direct).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "output {i}: {a} against {b}"
            );
        }
        // A scratch too short: the stack plan, its bits.
        let mut short = std::vec![0.0_f32; needed - 1];
        let mut fallback = std::vec![f32::NAN; len];
        conv2d_stride1_with_scratch(
            &shape,
            batch,
            &x,
            &w,
            &bias,
            &mut fallback,
            epilogue,
            &mut short,
            ScratchFor::Training,
        );
        assert_eq!(fallback, direct);
    }
}

/// With scratch from a workspace, or for a prediction with AVX-512, the plan with no limit
/// takes the direct kernels the stack buffer is too small for: the filters in the lanes on 64
/// filters of 8 x 8 outputs with AVX-512 (in training with AVX2's narrower vectors, Winograd's
/// method down the columns), the flat kernel on a padded 7 x 7 convolution. Each gives the
/// reference loops' outputs from a scratch full of NaNs. A prediction with AVX2 keeps the
/// stack plan's kernel for both (8 x 8 outputs are 2 tiles a filter for Winograd's method
/// down the columns, too few to repay the filters' transforms).
#[cfg(target_arch = "x86_64")]
#[test]
fn a_scratch_lets_direct_kernels_pad_beyond_the_stack_buffer() {
    use super::plan::{ForwardKernel, forward_kernel, scratch_kernel};
    use super::shape::STACK_SCRATCH;
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let lanes = x86::lanes::<f32>(isa);
    let wide_filters = Conv {
        channels: 64,
        filters: 64,
        kernel: 3,
        padding: 1,
        height: 8,
        width: 8,
    };
    let wide_kernel = Conv {
        channels: 32,
        filters: 16,
        kernel: 7,
        padding: 3,
        height: 16,
        width: 16,
    };
    let filters_kernel = |purpose| match (lanes, purpose) {
        (16, _) => ForwardKernel::FiltersInLanes {
            scratch: 64 * 64 * 9 + 64 * 10 * 10,
        },
        (_, ScratchFor::Training) => ForwardKernel::WinogradColumns {
            scratch: x86::conv_winograd_columns_f32::scratch_len(&wide_filters, lanes),
        },
        (_, ScratchFor::Prediction) => ForwardKernel::Direct,
    };
    let padded_kernel = |purpose| match (lanes, purpose) {
        (8, ScratchFor::Prediction) => ForwardKernel::Direct,
        _ => ForwardKernel::FlatPadded {
            scratch: 32 * 22 * 22,
        },
    };
    for purpose in [ScratchFor::Training, ScratchFor::Prediction] {
        let cases = [
            (wide_filters, filters_kernel(purpose)),
            (wide_kernel, padded_kernel(purpose)),
        ];
        for (shape, want) in cases {
            assert_eq!(
                forward_kernel(&shape, lanes, STACK_SCRATCH),
                ForwardKernel::Direct
            );
            assert_eq!(scratch_kernel(&shape, lanes, purpose), want, "{shape:?}");
            assert!(want == ForwardKernel::Direct || want.scratch() > STACK_SCRATCH);
            assert_eq!(
                workspace_forward_scratch(&shape, lanes, purpose),
                want.scratch()
            );
            let batch = 2;
            let x = spread_values(batch * shape.image_len(), 3);
            let w = spread_values(
                shape.filters * shape.channels * shape.kernel * shape.kernel,
                4,
            );
            let bias = spread_values(shape.filters, 5);
            let len = shape.output_len();
            for epilogue in [Epilogue::Identity, Epilogue::Relu] {
                let mut scratch = std::vec![f32::NAN; forward_scratch_any_isa(&shape, 4, purpose)];
                let mut out = std::vec![f32::NAN; batch * len];
                conv2d_stride1_with_scratch(
                    &shape,
                    batch,
                    &x,
                    &w,
                    &bias,
                    &mut out,
                    epilogue,
                    &mut scratch,
                    purpose,
                );
                for b in 0..batch {
                    let mut want = std::vec![0.0_f32; len];
                    let image = &x[b * shape.image_len()..(b + 1) * shape.image_len()];
                    super::reference::conv2d_stride1(&shape, image, &w, &bias, &mut want);
                    for (i, (&a, &z)) in out[b * len..].iter().zip(&want).enumerate() {
                        let z = epilogue.apply(z);
                        assert!(
                            (a - z).abs() <= 1e-4 * (1.0 + z.abs()),
                            "{shape:?}, {purpose:?}, image {b}, output {i}: {a} against {z}"
                        );
                    }
                }
            }
        }
    }
}

/// A prediction with AVX2 takes Winograd's method down the columns where a filter has at
/// least 4 tiles (groups of output rows times vectors of columns) and keeps the stack plan's
/// direct kernel where it has fewer, whatever the kernel; training takes the method on all of
/// them. 3 x 3 layers (groups of 6 rows) on 16 x 16 (3 x 2 tiles), 12 x 16 (2 x 2), 18 x 8
/// (3 x 1) and 7 x 7 (2 x 1) outputs, a 5 x 5 layer (groups of 4 rows) on 8 x 8 (2 x 1).
#[cfg(target_arch = "x86_64")]
#[test]
fn a_prediction_with_avx2_takes_winograds_columns_where_a_filter_has_four_tiles() {
    use super::plan::{ForwardKernel, forward_kernel, scratch_kernel};
    use super::shape::STACK_SCRATCH;
    use x86::conv_winograd_columns_f32::{scratch_len, tiles_per_filter};
    let conv = |kernel, (height, width)| Conv {
        channels: 64,
        filters: 64,
        kernel,
        padding: kernel / 2,
        height,
        width,
    };
    let cases = [
        (conv(3, (16, 16)), 6),
        (conv(3, (12, 16)), 4),
        (conv(3, (18, 8)), 3),
        (conv(3, (7, 7)), 2),
        (conv(5, (8, 8)), 2),
    ];
    for (shape, tiles) in cases {
        assert_eq!(tiles_per_filter(&shape, 8), tiles, "{shape:?}");
        let stack = forward_kernel(&shape, 8, STACK_SCRATCH);
        assert!(
            matches!(
                stack,
                ForwardKernel::Flat | ForwardKernel::FlatPadded { .. } | ForwardKernel::Direct
            ),
            "{shape:?}: {stack:?}"
        );
        let columns = ForwardKernel::WinogradColumns {
            scratch: scratch_len(&shape, 8),
        };
        assert_eq!(scratch_kernel(&shape, 8, ScratchFor::Training), columns);
        let prediction = if tiles >= 4 { columns } else { stack };
        assert_eq!(
            scratch_kernel(&shape, 8, ScratchFor::Prediction),
            prediction,
            "{shape:?}"
        );
    }
}

/// Where the stack plan falls to a direct kernel, a scratch takes Winograd's method down the
/// columns before any other kernel (a 5 x 5 layer whose filters would fill AVX2's lanes better,
/// for training and a prediction alike); a prediction on the image as it is keeps the flat
/// kernel (no weights transposed on every call for a 1 x 1 layer of 256 filters), a training
/// pass's batch takes the products.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_scratch_takes_winograds_method_first_and_leaves_the_flat_kernel() {
    use super::plan::{ForwardKernel, forward_kernel, scratch_kernel};
    use super::shape::STACK_SCRATCH;
    let five = Conv {
        channels: 16,
        filters: 16,
        kernel: 5,
        padding: 2,
        height: 12,
        width: 12,
    };
    let pointwise = Conv {
        channels: 256,
        filters: 256,
        kernel: 1,
        padding: 0,
        height: 7,
        width: 7,
    };
    let columns = ForwardKernel::WinogradColumns {
        scratch: x86::conv_winograd_columns_f32::scratch_len(&five, 8),
    };
    for purpose in [ScratchFor::Training, ScratchFor::Prediction] {
        assert_eq!(scratch_kernel(&five, 8, purpose), columns, "{purpose:?}");
        assert_eq!(
            workspace_forward_scratch(&five, 8, purpose),
            columns.scratch()
        );
        for lanes in [8, 16] {
            assert_eq!(
                forward_kernel(&pointwise, lanes, STACK_SCRATCH),
                ForwardKernel::Flat
            );
            // A batch of a training pass takes the products (see
            // `pointwise_training_passes_take_the_products`).
            let flat = match purpose {
                ScratchFor::Training => ForwardKernel::PointwiseProducts,
                ScratchFor::Prediction => ForwardKernel::Flat,
            };
            assert_eq!(scratch_kernel(&pointwise, lanes, purpose), flat);
            assert_eq!(workspace_forward_scratch(&pointwise, lanes, purpose), 0);
        }
    }
    // The plan with no limit would transpose the weights.
    assert!(matches!(
        forward_kernel(&five, 8, usize::MAX),
        ForwardKernel::FiltersInLanes { .. }
    ));
}

/// Every shape of a sweep whose plan takes a scratch beyond the stack buffer, for training and
/// for a prediction: the kernel on that scratch (full of NaNs) gives the reference loops'
/// outputs, for each epilogue.
#[cfg(target_arch = "x86_64")]
#[test]
fn every_scratch_kernel_gives_the_reference_outputs() {
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let lanes = x86::lanes::<f32>(isa);
    let mut checked = 0;
    for (channels, filters) in [(3, 64), (16, 16), (32, 20), (64, 64)] {
        for kernel in [1, 3, 5, 7] {
            for (padding, size) in [(0, 16), (1, 8), (2, 12), (3, 10)] {
                let shape = Conv {
                    channels,
                    filters,
                    kernel,
                    padding,
                    height: size,
                    width: size,
                };
                if kernel > size + 2 * padding {
                    continue;
                }
                for purpose in [ScratchFor::Training, ScratchFor::Prediction] {
                    if workspace_forward_scratch(&shape, lanes, purpose) == 0 {
                        continue;
                    }
                    checked += 1;
                    let x = spread_values(shape.image_len(), 11);
                    let w = spread_values(filters * channels * kernel * kernel, 12);
                    let bias = spread_values(filters, 13);
                    let mut want = std::vec![0.0_f32; shape.output_len()];
                    super::reference::conv2d_stride1(&shape, &x, &w, &bias, &mut want);
                    for epilogue in [Epilogue::Identity, Epilogue::Relu] {
                        let len = forward_scratch_any_isa(&shape, 4, purpose);
                        let mut scratch = std::vec![f32::NAN; len];
                        let mut out = std::vec![f32::NAN; shape.output_len()];
                        conv2d_stride1_with_scratch(
                            &shape,
                            1,
                            &x,
                            &w,
                            &bias,
                            &mut out,
                            epilogue,
                            &mut scratch,
                            purpose,
                        );
                        for (i, (&a, &z)) in out.iter().zip(&want).enumerate() {
                            let z = epilogue.apply(z);
                            assert!(
                                (a - z).abs() <= 1e-3 * (1.0 + z.abs()),
                                "{shape:?}, {purpose:?}, output {i}: {a} against {z}"
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(checked >= 4, "only {checked} shapes take a scratch");
}

/// A 1 x 1 convolution without padding, a batch of a training pass, takes the products `W·X`
/// image by image (`ForwardKernel::PointwiseProducts`, no scratch) on every instruction set,
/// and gives the reference loops' outputs for each epilogue over stale outputs, the bits of a
/// prediction where that takes the flat kernel; a prediction keeps the stack plan's kernel,
/// and a kernel of 1 with padding is not taken. (Without `std` no SIMD kernel runs.)
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[test]
fn pointwise_training_passes_take_the_products() {
    use crate::kernels::{InstructionSet, with_instruction_set};
    use std::vec::Vec;
    let mut checked = 0;
    let mut flat = 0;
    for set in [InstructionSet::Avx512, InstructionSet::Avx2] {
        with_instruction_set(set, || {
            let Some(isa) = x86::detected_isa() else {
                return;
            };
            let lanes = x86::lanes::<f32>(isa);
            // DS-CNN's pointwise layers; the stem net's; few channels and filters, a width
            // that is no multiple of the lanes.
            for (channels, filters, height, width) in
                [(64, 64, 25, 5), (32, 64, 16, 16), (3, 5, 7, 9)]
            {
                let shape = Conv {
                    channels,
                    filters,
                    kernel: 1,
                    padding: 0,
                    height,
                    width,
                };
                assert_eq!(
                    scratch_kernel(&shape, lanes, ScratchFor::Training),
                    ForwardKernel::PointwiseProducts
                );
                assert_ne!(
                    scratch_kernel(&shape, lanes, ScratchFor::Prediction),
                    ForwardKernel::PointwiseProducts
                );
                let padded = Conv {
                    padding: 1,
                    ..shape
                };
                assert_ne!(
                    scratch_kernel(&padded, lanes, ScratchFor::Training),
                    ForwardKernel::PointwiseProducts
                );
                let batch = 3;
                let x = spread_values(batch * shape.image_len(), 21);
                let w = spread_values(filters * channels, 22);
                let bias = spread_values(filters, 23);
                let mut want = std::vec![0.0_f32; batch * shape.output_len()];
                for (x, want) in x
                    .chunks_exact(shape.image_len())
                    .zip(want.chunks_exact_mut(shape.output_len()))
                {
                    super::reference::conv2d_stride1(&shape, x, &w, &bias, want);
                }
                for epilogue in [Epilogue::Identity, Epilogue::Relu] {
                    let mut out = std::vec![f32::NAN; want.len()];
                    conv2d_stride1_with_scratch(
                        &shape,
                        batch,
                        &x,
                        &w,
                        &bias,
                        &mut out,
                        epilogue,
                        &mut [],
                        ScratchFor::Training,
                    );
                    for (i, (&a, &z)) in out.iter().zip(&want).enumerate() {
                        let z = epilogue.apply(z);
                        assert!(
                            (a - z).abs() <= 1e-5 * (1.0 + z.abs()),
                            "{shape:?}, {isa:?}, {epilogue:?}, output {i}: {a} against {z}"
                        );
                    }
                    let mut predicted = std::vec![f32::NAN; want.len()];
                    conv2d_stride1_with_scratch(
                        &shape,
                        batch,
                        &x,
                        &w,
                        &bias,
                        &mut predicted,
                        epilogue,
                        &mut [],
                        ScratchFor::Prediction,
                    );
                    // The same bits as a prediction on the flat kernel: the bias, then one
                    // multiply-add per channel in order.
                    if forward_kernel(&shape, lanes, STACK_SCRATCH) == ForwardKernel::Flat {
                        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&out), bits(&predicted), "{shape:?}, {isa:?}");
                        flat += 1;
                    }
                }
                checked += 1;
            }
        });
    }
    assert!(checked >= 3, "no instruction set ran");
    assert!(flat >= 2, "no prediction took the flat kernel");
}
