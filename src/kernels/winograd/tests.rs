//! The Winograd input gradient against the direct sums, and its transforms against their
//! matrices.

use super::*;
use alloc::vec;
use alloc::vec::Vec;

/// `1-D: y = Aᵀ[(G g) ⊙ (Bᵀ d)]` is the correlation `y_i = Σ_k g_k d_{i+k}` for every kernel.
#[test]
fn the_transforms_compute_a_correlation() {
    for r in 2..=5 {
        let m = outputs_per_tile(r);
        let t = Transforms::new(r);
        let d: Vec<f64> = (0..TILE).map(|i| (i as f64 * 0.77).sin() + 0.3).collect();
        let g: Vec<f64> = (0..r).map(|k| (k as f64 * 1.3).cos() - 0.2).collect();
        let gg: Vec<f64> = (0..TILE)
            .map(|j| (0..r).map(|k| t.g[j][k] * g[k]).sum())
            .collect();
        let bd: Vec<f64> = (0..TILE)
            .map(|j| (0..TILE).map(|i| t.bt[j][i] * d[i]).sum())
            .collect();
        for i in 0..m {
            let winograd: f64 = (0..TILE).map(|j| t.at[i][j] * gg[j] * bd[j]).sum();
            let direct: f64 = (0..r).map(|k| g[k] * d[i + k]).sum();
            assert!(
                (winograd - direct).abs() < 1e-12,
                "r = {r}, output {i}: {winograd} against {direct}"
            );
        }
    }
}

/// The written-out `A·x` and `B·x` are the Toom-Cook matrices' products.
#[test]
fn the_written_out_transforms_are_the_matrices() {
    let lanes = |v: f64| [v; LANES];
    let x: [f64; TILE] = [0.3, -1.7, 2.9, 0.55, -0.8, 1.3];
    let by_b = b_times(x.map(lanes));
    let by_a: [[Lanes<f64>; TILE]; 4] = [
        evaluate::<f64, 2>([lanes(x[0]), lanes(x[1])]),
        evaluate::<f64, 3>(core::array::from_fn(|p| lanes(x[p]))),
        evaluate::<f64, 4>(core::array::from_fn(|p| lanes(x[p]))),
        evaluate::<f64, 5>(core::array::from_fn(|p| lanes(x[p]))),
    ];
    let bt = Transforms::new(3).bt;
    for a in 0..TILE {
        let expected: f64 = (0..TILE).map(|i| bt[i][a] * x[i]).sum();
        assert!((by_b[a][0] - expected).abs() < 1e-12, "B·x, row {a}");
    }
    for (m, by_a) in (2..=5).zip(by_a) {
        let at = Transforms::new(TILE + 1 - m).at;
        for i in 0..TILE {
            let expected: f64 = (0..m).map(|p| at[p][i] * x[p]).sum();
            assert!(
                (by_a[i][0] - expected).abs() < 1e-12,
                "A·x, m = {m}, row {i}"
            );
        }
    }
}

/// `F(4, 3)` is the matrix set everyone uses (Lavin and Gray's).
#[test]
fn the_transforms_of_a_3x3_kernel_are_the_usual_ones() {
    let t = Transforms::new(3);
    assert_eq!(t.bt[0], [4.0, 0.0, -5.0, 0.0, 1.0, 0.0]);
    assert_eq!(t.bt[3], [0.0, -2.0, -1.0, 2.0, 1.0, 0.0]);
    assert_eq!(t.bt[5], [0.0, 4.0, 0.0, -5.0, 0.0, 1.0]);
    assert_eq!(t.at[3], [0.0, 1.0, -1.0, 8.0, -8.0, 1.0]);
    assert_eq!(t.g[0][..3], [0.25, 0.0, 0.0]);
    assert_eq!(t.g[5][..3], [0.0, 0.0, 1.0]);
}

/// The input gradient summed the plain way: each output's gradient times the weight it met.
pub(in crate::kernels) fn direct(shape: &Conv, batch: usize, dz: &[f64], w: &[f64]) -> Vec<f64> {
    let Conv {
        channels,
        filters,
        kernel,
        padding,
        height,
        width,
    } = *shape;
    let (oh, ow) = (shape.out_height(), shape.out_width());
    let mut dx = vec![0.0; batch * channels * height * width];
    for b in 0..batch {
        for f in 0..filters {
            for y in 0..oh {
                for x in 0..ow {
                    let g = dz[((b * filters + f) * oh + y) * ow + x];
                    for c in 0..channels {
                        for ky in 0..kernel {
                            for kx in 0..kernel {
                                let (iy, ix) = (y + ky, x + kx);
                                if iy < padding || ix < padding {
                                    continue;
                                }
                                let (iy, ix) = (iy - padding, ix - padding);
                                if iy >= height || ix >= width {
                                    continue;
                                }
                                dx[((b * channels + c) * height + iy) * width + ix] +=
                                    g * w[((f * channels + c) * kernel + ky) * kernel + kx];
                            }
                        }
                    }
                }
            }
        }
    }
    dx
}

/// The input gradient of a batch: a way to compute it.
type Way<'a, T> = &'a dyn Fn(&Conv, usize, &[T], &[T], &mut [T], &mut [T]);

/// Runs `check` with the input gradient computed each way this CPU can: the generic code
/// as it is (no fused multiply-add instructions) and compiled for each instruction set.
fn every_way<T: Float + 'static>(mut check: impl FnMut(&str, Way<'_, T>)) {
    check("generic", &|shape, batch, dz, w, dx, scratch| {
        input_gradient(shape, batch, dz, w, dx, scratch)
    });
    check(
        "generic, 2 positions a pass",
        &|shape, batch, dz, w, dx, scratch| {
            input_gradient_by::<T, 2>(shape, batch, dz, w, dx, scratch)
        },
    );
    check(
        "generic, 3 positions a pass",
        &|shape, batch, dz, w, dx, scratch| {
            input_gradient_by::<T, 3>(shape, batch, dz, w, dx, scratch)
        },
    );
    check(
        "generic, 6 positions a pass",
        &|shape, batch, dz, w, dx, scratch| {
            input_gradient_by::<T, 6>(shape, batch, dz, w, dx, scratch)
        },
    );
    for isa in [
        super::super::x86::Isa::Avx512,
        super::super::x86::Isa::Avx2Fma,
    ] {
        if super::super::x86::isa_available(isa) {
            check(
                &alloc::format!("{isa:?}"),
                &|shape, batch, dz, w, dx, scratch| {
                    super::super::x86::winograd_input_gradient(
                        isa, shape, batch, dz, w, dx, scratch,
                    )
                },
            );
        }
    }
}

/// Compares the input gradient computed `way` with [`direct`]'s, in `T`, within
/// `tolerance` times the number of terms summed (each at most 1 in size).
fn agrees_with_the_direct_sums<T: Float + 'static>(name: &str, way: Way<'_, T>, tolerance: f64) {
    let shapes = [
        // LeNet's second convolution, and each kernel size, padded or not, with sizes the
        // tiles do not divide, one and many channels and filters, padding larger than the
        // kernel.
        (6, 16, 5, 0, 14, 14),
        (1, 6, 5, 2, 28, 28),
        (3, 4, 3, 1, 9, 7),
        (2, 3, 4, 0, 6, 11),
        (5, 2, 4, 2, 5, 6),
        (9, 1, 3, 0, 3, 3),
        (1, 1, 5, 0, 5, 5),
        (10, 7, 3, 1, 8, 8),
        (2, 3, 3, 3, 1, 2),
        // More filters than a block of evaluated rows (`EVALUATED_FILTERS`).
        (7, 20, 3, 1, 6, 6),
        (3, 17, 4, 1, 5, 5),
        (1, 2, 5, 5, 3, 3),
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
        // One image, a partial group, a whole group and a partial one.
        for batch in [1, 5, 21] {
            let value = |k: usize, salt: usize| {
                ((k * 7919 + salt * 104_729 + i) % 997) as f64 / 498.5 - 1.0
            };
            let dz: Vec<f64> = (0..batch * filters * shape.out_height() * shape.out_width())
                .map(|k| value(k, 1))
                .collect();
            let w: Vec<f64> = (0..filters * channels * kernel * kernel)
                .map(|k| value(k, 2))
                .collect();
            let expected = direct(&shape, batch, &dz, &w);
            let cast = |v: &[f64]| -> Vec<T> { v.iter().map(|&v| T::from(v).unwrap()).collect() };
            // Garbage in dx first: it is written, not added to.
            let mut dx = vec![T::nan(); batch * channels * height * width];
            let mut scratch = vec![T::nan(); scratch_len(&shape)];
            way(&shape, batch, &cast(&dz), &cast(&w), &mut dx, &mut scratch);
            let scale = (filters * kernel * kernel) as f64;
            for (k, (&got, &want)) in dx.iter().zip(&expected).enumerate() {
                let got = got.to_f64().unwrap();
                assert!(
                    (got - want).abs() <= tolerance * scale,
                    "{name}, {shape:?}, batch {batch}, element {k}: {got} against {want}"
                );
            }
        }
    }
}

#[test]
fn the_input_gradient_is_the_sum_of_products_it_replaces_in_f64() {
    every_way::<f64>(|name, way| agrees_with_the_direct_sums(name, way, 1e-14));
}

#[test]
fn the_input_gradient_is_the_sum_of_products_it_replaces_in_f32() {
    // Measured: at most 1.6e-7 for 5 x 5 kernels, 2.3e-7 for 4 x 4, 4.1e-7 for 3 x 3.
    every_way::<f32>(|name, way| agrees_with_the_direct_sums(name, way, 5e-7));
}

/// The positions a pass of the sums over the filters takes (`input_gradient_by`'s `J`)
/// change which sums are in registers, not the sums: the same bits for 1, 2, 3 and 6, on
/// LeNet's second layer and on channel counts that leave passes of 1 to 6 channels.
#[test]
fn the_positions_a_pass_leave_the_sums_as_they_are() {
    for (channels, filters, kernel, padding) in [
        (6, 16, 5, 0),
        (13, 3, 3, 1),
        (4, 5, 4, 2),
        (11, 2, 5, 1),
        (2, 7, 3, 0),
        (9, 2, 3, 0),
        (8, 35, 3, 1),
        (7, 18, 4, 0),
    ] {
        let shape = Conv {
            channels,
            filters,
            kernel,
            padding,
            height: 9,
            width: 8,
        };
        let batch = 18;
        let value = |k: usize| ((k * 7919 + channels * 31) % 997) as f32 / 498.5 - 1.0;
        let dz: Vec<f32> = (0..batch * shape.output_len()).map(value).collect();
        let w: Vec<f32> = (0..filters * channels * kernel * kernel)
            .map(|k| value(k + 5))
            .collect();
        let mut scratch = vec![0.0; scratch_len(&shape)];
        let run = |way: Way<'_, f32>, scratch: &mut [f32]| {
            let mut dx = vec![f32::NAN; batch * shape.image_len()];
            way(&shape, batch, &dz, &w, &mut dx, scratch);
            dx
        };
        let one = run(
            &|s, b, dz, w, dx, t| input_gradient(s, b, dz, w, dx, t),
            &mut scratch,
        );
        assert!(one.iter().any(|&v| v != 0.0) && one.iter().all(|v| v.is_finite()));
        let two = run(
            &|s, b, dz, w, dx, t| input_gradient_by::<f32, 2>(s, b, dz, w, dx, t),
            &mut scratch,
        );
        let three = run(
            &|s, b, dz, w, dx, t| input_gradient_by::<f32, 3>(s, b, dz, w, dx, t),
            &mut scratch,
        );
        let six = run(
            &|s, b, dz, w, dx, t| input_gradient_by::<f32, 6>(s, b, dz, w, dx, t),
            &mut scratch,
        );
        for (j, other) in [(2, two), (3, three), (6, six)] {
            let same = one
                .iter()
                .zip(&other)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{shape:?}: {j} positions a pass changed the sums");
        }
    }
}

/// The comparison is not vacuous: a gradient computed with every kernel turned by 180° (the
/// textbook form's flip, applied where it does not belong) is caught.
#[test]
#[should_panic(expected = "against")]
fn a_wrong_gradient_is_caught() {
    agrees_with_the_direct_sums::<f64>(
        "unflipped",
        &|shape, batch, dz, w, dx, scratch| {
            let r = shape.kernel;
            let turned: Vec<f64> = w
                .chunks_exact(r * r)
                .flat_map(|kernel| kernel.iter().rev().copied())
                .collect();
            input_gradient(shape, batch, dz, &turned, dx, scratch)
        },
        1e-14,
    );
}

/// Layers with a size of 0 take the product and `col2im` (which handles them).
#[test]
fn sizes_of_zero_are_left_to_the_product() {
    let layer = |channels, filters, height, width| Conv {
        channels,
        filters,
        kernel: 3,
        padding: 1,
        height,
        width,
    };
    assert!(applies(&layer(2, 3, 5, 5)));
    for shape in [
        layer(0, 3, 5, 5),
        layer(2, 0, 5, 5),
        layer(2, 3, 0, 5),
        layer(2, 3, 5, 0),
    ] {
        assert!(!applies(&shape), "{shape:?}");
    }
}
