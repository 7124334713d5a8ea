//! The convolutions' gradients' dispatch: which weight-gradient and input-gradient kernel each
//! shape takes, and their outputs against the kernels called directly and the definitions.

#[cfg(target_arch = "x86_64")]
use super::conv::LENET_SECOND;
use super::conv::spread_values;
use super::*;
/// The weight gradient's dispatch: LeNet-5's second layer by Winograd's method (its
/// workspace sized for it, and the same bits as the kernel called directly), its first
/// by Winograd's method with a row's tiles in the lanes on AVX-512 (the same), with the
/// positions in the lanes on AVX2.
#[cfg(target_arch = "x86_64")]
#[test]
fn lenets_weight_gradients_take_the_kernels_measured_for_them() {
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let first = LENET_FIRST;
    let second = LENET_SECOND;
    // Both kernels pad the images as they read them: the layer does not pad them first.
    assert!(conv_weight_gradient_pads::<f32>(&first));
    // f64 takes the portable loops, on images the layer pads first.
    assert!(!conv_weight_gradient_pads::<f64>(&first));
    assert_eq!(conv_weight_gradient_scratch::<f64>(&first, 64), 0);
    if isa == x86::Isa::Avx512 {
        assert_eq!(
            weight_gradient_kernel::<f32>(isa, &first.padded()),
            WeightGradientKernel::RowTilesInLanes
        );
        let batch = 3;
        let (x, dz) = (
            spread_values(batch * first.image_len(), 3),
            spread_values(batch * first.output_len(), 4),
        );
        let scratch_len = conv_weight_gradient_scratch::<f32>(&first, batch);
        assert_eq!(
            scratch_len,
            x86::weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(&first)
        );
        let mut scratch = std::vec![0.0_f32; scratch_len];
        let mut by_dispatch = std::vec![0.0_f32; 6 * 25];
        conv2d_weight_gradient_stride1(
            &first,
            batch,
            &x,
            &dz,
            &mut scratch,
            &mut by_dispatch,
            false,
        );
        let mut by_kernel = std::vec![0.0_f32; 6 * 25];
        x86::weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
            isa,
            &first,
            batch,
            &x,
            x86::weight_grad_winograd_5x5_narrow_avx512::Gradients::PreActivation(&dz),
            &mut scratch,
            &mut by_kernel,
            false,
        );
        assert_eq!(by_dispatch, by_kernel);
        // A ReLU layer's dA and A, read by the same kernel (A > 0 everywhere: dZ = dA).
        let (a, mut db) = (std::vec![1.0_f32; dz.len()], [0.0_f32; 6]);
        let mut through_relu = std::vec![0.0_f32; 6 * 25];
        assert!(conv2d_weight_and_bias_gradients_through_relu(
            &first,
            batch,
            &x,
            &a,
            &dz,
            &mut scratch,
            &mut through_relu,
            &mut db,
        ));
        assert_eq!(through_relu, by_kernel);
    } else {
        assert_eq!(
            weight_gradient_kernel::<f32>(isa, &first.padded()),
            WeightGradientKernel::PositionsInLanes
        );
    }
    // Not in f64, nor for the second layer (the filters in the lanes): the caller forms dZ.
    let first_f64 = (
        std::vec![0.0_f64; first.image_len()],
        std::vec![0.0_f64; first.output_len()],
    );
    let f64_scratch = conv_weight_gradient_scratch::<f64>(&first, 1);
    assert!(!conv2d_weight_and_bias_gradients_through_relu(
        &first,
        1,
        &first_f64.0,
        &first_f64.1,
        &first_f64.1,
        &mut std::vec![0.0; f64_scratch],
        &mut [0.0; 6 * 25],
        &mut [0.0; 6],
    ));
    let second_scratch = conv_weight_gradient_scratch::<f32>(&second, 1);
    assert!(!conv2d_weight_and_bias_gradients_through_relu(
        &second,
        1,
        &std::vec![0.0_f32; second.image_len()],
        &std::vec![0.0_f32; second.output_len()],
        &std::vec![0.0_f32; second.output_len()],
        &mut std::vec![0.0; second_scratch],
        &mut std::vec![0.0; 16 * 6 * 25],
        &mut [0.0; 16],
    ));
    assert_eq!(
        weight_gradient_kernel::<f32>(isa, &second),
        WeightGradientKernel::WinogradRows
    );
    let batch = 5;
    let value = spread_values;
    let (x, dz) = (
        value(batch * second.image_len(), 1),
        value(batch * second.output_len(), 2),
    );
    let scratch_len = conv_weight_gradient_scratch::<f32>(&second, batch);
    assert_eq!(
        scratch_len,
        x86::weight_gradient_winograd_scratch(&second, batch, x86::lanes::<f32>(isa))
    );
    let mut by_dispatch = std::vec![0.0_f32; 16 * 6 * 25];
    let mut scratch = std::vec![0.0_f32; scratch_len];
    conv2d_weight_gradient_stride1(
        &second,
        batch,
        &x,
        &dz,
        &mut scratch,
        &mut by_dispatch,
        false,
    );
    let mut by_winograd = std::vec![0.0_f32; 16 * 6 * 25];
    x86::conv2d_weight_gradient_winograd(
        isa,
        &second,
        batch,
        &x,
        &dz,
        &mut scratch,
        &mut by_winograd,
        false,
    );
    assert_eq!(by_dispatch, by_winograd);
}

/// A convolution of 32 filters or more takes the patches' products for its weight gradient
/// where Winograd's method does not apply (a 7 x 7 kernel, on either instruction set): the
/// images unpadded (the kernel unrolls the padding), a scratch of the kernel's length, and the
/// same bits as the kernel called directly; 31 filters do not.
#[cfg(target_arch = "x86_64")]
#[test]
fn many_filters_weight_gradients_take_the_patches_products() {
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let shape = Conv {
        channels: 3,
        filters: 32,
        kernel: 7,
        padding: 3,
        height: 12,
        width: 12,
    };
    let kernel = weight_gradient_kernel::<f32>(isa, &shape.padded());
    assert_eq!(kernel, WeightGradientKernel::Patches);
    assert!(conv_weight_gradient_pads::<f32>(&shape));
    let batch = 2;
    let scratch_len = conv_weight_gradient_scratch::<f32>(&shape, batch);
    assert_eq!(scratch_len, weight_grad_patches::scratch_len(&shape));
    dispatch_gives_the_kernels_bits(&shape, batch, scratch_len, |x, dz, scratch, dw| {
        weight_grad_patches::conv2d_weight_gradient(isa, &shape, batch, x, dz, scratch, dw, false);
    });
    let fewer = Conv {
        filters: weight_grad_patches::MIN_FILTERS - 1,
        ..shape
    };
    assert_ne!(
        weight_gradient_kernel::<f32>(isa, &fewer.padded()),
        WeightGradientKernel::Patches
    );
}

/// Where Winograd's method applies, a convolution of 32 filters or more takes it along the
/// rows for its weight gradient in `f32` instead of the patches' products, as measured: with
/// AVX-512 on every such shape, with AVX2 on kernels of 3 and 4 from 8 channels (not 7, nor
/// 5 x 5). The image is padded first (the kernel reads no padding), the scratch is the
/// kernel's, and the bits are the kernel's called directly. The CIFAR-style net's second
/// layer (32 x 16 x 16, 64 filters, 3 x 3, padding 1).
#[cfg(target_arch = "x86_64")]
#[test]
fn many_filters_weight_gradients_take_winograds_method_where_it_measured_faster() {
    let Some(isa) = x86::detected_isa() else {
        std::eprintln!("skipping: no AVX2 or AVX-512 on this CPU");
        return;
    };
    let shape = Conv {
        channels: 32,
        filters: 64,
        kernel: 3,
        padding: 1,
        height: 16,
        width: 16,
    };
    let padded = shape.padded();
    for isa in [x86::Isa::Avx512, x86::Isa::Avx2Fma] {
        assert_eq!(
            weight_gradient_kernel::<f32>(isa, &padded),
            WeightGradientKernel::WinogradRows,
            "{isa:?}"
        );
        // A 4 x 4 kernel on 8 channels: both.
        let four = Conv {
            channels: 8,
            kernel: 4,
            padding: 0,
            ..shape
        };
        assert_eq!(
            weight_gradient_kernel::<f32>(isa, &four.padded()),
            WeightGradientKernel::WinogradRows,
            "{isa:?}"
        );
        // A 5 x 5 kernel, and 7 channels: AVX-512 only.
        for other in [
            Conv {
                kernel: 5,
                padding: 2,
                ..shape
            },
            Conv {
                channels: 7,
                ..shape
            },
        ] {
            let expected = match isa {
                x86::Isa::Avx512 => WeightGradientKernel::WinogradRows,
                x86::Isa::Avx2Fma => WeightGradientKernel::Patches,
            };
            assert_eq!(
                weight_gradient_kernel::<f32>(isa, &other.padded()),
                expected,
                "{isa:?} {other:?}"
            );
        }
    }
    assert!(!conv_weight_gradient_pads::<f32>(&shape));
    let batch = 3;
    let scratch_len = conv_weight_gradient_scratch::<f32>(&shape, batch);
    assert_eq!(
        scratch_len,
        x86::weight_gradient_winograd_scratch(&padded, batch, x86::lanes::<f32>(isa))
    );
    dispatch_gives_the_kernels_bits(&padded, batch, scratch_len, |x, dz, scratch, dw| {
        x86::conv2d_weight_gradient_winograd(isa, &padded, batch, x, dz, scratch, dw, false);
    });
}

/// [`conv2d_weight_gradient_stride1`] on `shape` (a scratch of `scratch_len`, NaN-filled)
/// gives the bits of `kernel` (`x, dz, scratch, dw`) on the same operands.
#[cfg(target_arch = "x86_64")]
fn dispatch_gives_the_kernels_bits(
    shape: &Conv,
    batch: usize,
    scratch_len: usize,
    kernel: impl Fn(&[f32], &[f32], &mut [f32], &mut [f32]),
) {
    let (x, dz) = (
        spread_values(batch * shape.image_len(), 5),
        spread_values(batch * shape.output_len(), 6),
    );
    let weights = shape.filters * shape.channels * shape.kernel * shape.kernel;
    let mut scratch = std::vec![f32::NAN; scratch_len];
    let mut by_dispatch = std::vec![0.0_f32; weights];
    conv2d_weight_gradient_stride1(shape, batch, &x, &dz, &mut scratch, &mut by_dispatch, false);
    let mut by_kernel = std::vec![0.0_f32; weights];
    kernel(&x, &dz, &mut scratch, &mut by_kernel);
    assert_eq!(by_dispatch, by_kernel, "{shape:?}");
}

/// [`conv2d_input_gradient_stride1`] on every instruction set the CPU has: each shape takes
/// the kernel the plan names for it (the transposed forward pass or Winograd's method for the
/// gradient, told apart by their bits), gives the sums written out, writes `dx` over stale
/// values from a NaN-filled scratch of the workspace's length, and leaves everything as it was
/// with a scratch one element shorter than the instruction set's kernel takes; in `f64`,
/// Winograd's method on the workspace's `f64` scratch.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[test]
fn input_gradients_take_the_planned_kernel_on_every_instruction_set() {
    use crate::kernels::{InstructionSet, with_instruction_set};
    let mut taken = std::collections::BTreeSet::new();
    for set in [InstructionSet::Avx512, InstructionSet::Avx2] {
        with_instruction_set(set, || {
            let Some(isa) = x86::detected_isa() else {
                return;
            };
            let lanes = x86::lanes::<f32>(isa);
            // Same padding 3 x 3 and 5 x 5 (few and many channels, sizes the tiles do not
            // divide), no padding (LeNet-5's second layer), padding beyond `kernel - 1`.
            for (channels, filters, kernel, padding, size) in [
                (16, 16, 3, 1, 28),
                (3, 20, 3, 1, 9),
                (64, 64, 3, 1, 7),
                (32, 64, 3, 1, 16),
                (64, 64, 5, 2, 16),
                (5, 7, 5, 2, 11),
                (6, 16, 5, 0, 14),
                (2, 3, 3, 3, 4),
            ] {
                let shape = Conv {
                    channels,
                    filters,
                    kernel,
                    padding,
                    height: size,
                    width: size,
                };
                let batch = 3;
                let dz = spread_values(batch * shape.output_len(), 7);
                let w = spread_values(filters * channels * kernel * kernel, 8);
                let wide = |v: &[f32]| {
                    v.iter()
                        .map(|&v| f64::from(v))
                        .collect::<std::vec::Vec<_>>()
                };
                let want = super::winograd::tests::direct(&shape, batch, &wide(&dz), &wide(&w));
                let len = conv_input_gradient_scratch::<f32>(&shape);
                let needed = input_gradient_scratch::<f32>(&shape, lanes);
                assert!(needed <= len, "{shape:?}: the workspace's scratch is short");
                let mut short = std::vec![f32::NAN; needed - 1];
                let mut dx = std::vec![7.0_f32; batch * shape.image_len()];
                assert!(
                    !conv2d_input_gradient_stride1(&shape, batch, &dz, &w, &mut dx, &mut short),
                    "{shape:?}, {isa:?}: a short scratch"
                );
                assert!(dx.iter().all(|&v| v == 7.0), "{shape:?}: dx changed");
                let mut scratch = std::vec![f32::NAN; len];
                dx.fill(f32::NAN);
                assert!(conv2d_input_gradient_stride1(
                    &shape,
                    batch,
                    &dz,
                    &w,
                    &mut dx,
                    &mut scratch
                ));
                let scale = (filters * kernel * kernel) as f64;
                for (i, (&got, &want)) in dx.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(got) - want).abs() <= 5e-7 * scale,
                        "{shape:?}, {isa:?}, element {i}: {got} against {want}"
                    );
                }
                // The kernel the plan names gives these bits.
                let kernel_taken = input_gradient_kernel(&shape, lanes);
                let mut by_kernel = std::vec![f32::NAN; dx.len()];
                match kernel_taken {
                    Some(InputGradientKernel::Winograd) => x86::winograd_input_gradient(
                        isa,
                        &shape,
                        batch,
                        &dz,
                        &w,
                        &mut by_kernel,
                        &mut scratch,
                    ),
                    Some(InputGradientKernel::TransposedForward) => {
                        let transposed = shape.transposed().expect("a transposed shape");
                        let mut flipped = std::vec![0.0_f32; w.len()];
                        for o in 0..filters {
                            for c in 0..channels {
                                for k in 0..kernel * kernel {
                                    flipped[(c * filters + o) * kernel * kernel + k] =
                                        w[(o * channels + c) * kernel * kernel + kernel * kernel
                                            - 1
                                            - k];
                                }
                            }
                        }
                        let zeros = std::vec![0.0_f32; channels];
                        let mut forward_scratch = std::vec![
                            f32::NAN;
                            forward_scratch_any_isa(&transposed, 4, ScratchFor::Training)
                        ];
                        conv2d_stride1_with_scratch(
                            &transposed,
                            batch,
                            &dz,
                            &flipped,
                            &zeros,
                            &mut by_kernel,
                            Epilogue::Identity,
                            &mut forward_scratch,
                            ScratchFor::Training,
                        );
                    }
                    None => panic!("{shape:?}: no kernel planned"),
                }
                assert_eq!(
                    dx.iter().map(|v| v.to_bits()).collect::<std::vec::Vec<_>>(),
                    by_kernel
                        .iter()
                        .map(|v| v.to_bits())
                        .collect::<std::vec::Vec<_>>(),
                    "{shape:?}, {isa:?}: not {kernel_taken:?}'s bits"
                );
                taken.insert(std::format!("{isa:?} {kernel_taken:?}"));
                // In f64, Winograd's method on the workspace's scratch for f64.
                let dz = wide(&dz);
                let w = wide(&w);
                let mut scratch = std::vec![f64::NAN; conv_input_gradient_scratch::<f64>(&shape)];
                let mut dx = std::vec![f64::NAN; batch * shape.image_len()];
                assert!(
                    conv2d_input_gradient_stride1(&shape, batch, &dz, &w, &mut dx, &mut scratch),
                    "{shape:?}, {isa:?}: f64 not taken"
                );
                for (i, (&got, &want)) in dx.iter().zip(&want).enumerate() {
                    assert!(
                        (got - want).abs() <= 1e-14 * scale,
                        "{shape:?}, {isa:?}, f64 element {i}: {got} against {want}"
                    );
                }
            }
        });
    }
    if x86::detected_isa() == Some(x86::Isa::Avx512) {
        assert_eq!(
            taken.len(),
            4,
            "each kernel on each instruction set: {taken:?}"
        );
    }
}
