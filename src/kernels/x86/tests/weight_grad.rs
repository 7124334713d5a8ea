//! The convolutions' weight-gradient kernels against the definition.

use super::*;

#[test]
fn convolution_weight_gradients_match_the_definition_on_every_available_instruction_set() {
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        // The kernel takes images already padded: the shapes without padding, and the
        // padded ones as their callers pass them.
        let unpadded = CONVS.iter().map(|s| Conv {
            padding: 0,
            height: s.height + 2 * s.padding,
            width: s.width + 2 * s.padding,
            ..*s
        });
        for (i, shape) in unpadded.enumerate() {
            // The kernel sums over the batch: none, one image, several.
            for batch in [0, 1, 3] {
                for accumulate in [false, true] {
                    let run = (batch, accumulate);
                    let seed = 50 + 10 * i as u64;
                    let f32s = (|v| v as f32, f32::NAN, 1e-6);
                    check_weight_gradient_positions::<f32>(isa, &shape, run, f32s, seed);
                }
            }
        }
    }
}

/// The weight gradient with the positions in the lanes (`isa`, element type `E`) of a batch
/// of `batch` images of `shape` (no padding), from gradients `start` on with `accumulate`,
/// against the reference (see [`check_weight_gradient`]). `seed` picks the values.
fn check_weight_gradient_positions<E: Element + Into<f64>>(
    isa: Isa,
    shape: &Conv,
    (batch, accumulate): (usize, bool),
    elements: (impl Fn(f64) -> E, E, f64),
    seed: u64,
) {
    let scratch = weight_grad_images_per_pass::<E>(shape, batch) * shifted_image_len(shape);
    check_weight_gradient(isa, shape, (batch, accumulate), elements, seed, scratch, {
        |x: &[E], dz: &[E], scratch: &mut [E], dw: &mut [E]| {
            conv2d_weight_gradient_positions(isa, shape, batch, x, dz, scratch, dw, accumulate)
        }
    });
}

/// A weight-gradient kernel `kernel(x, dz, scratch, dw)` on a batch of `batch` images of
/// `shape` (element type `E`, from `from_f64`), from gradients `start` on with `accumulate`,
/// against the reference, within `tolerance · √(1 + sums) · (1 + |w|)`; its scratch of
/// `scratch_len` filled with `nan` first, as an earlier call may leave it. `seed` picks the
/// values.
fn check_weight_gradient<E: Copy + Into<f64>>(
    isa: Isa,
    shape: &Conv,
    (batch, accumulate): (usize, bool),
    (from_f64, nan, tolerance): (impl Fn(f64) -> E, E, f64),
    seed: u64,
    scratch_len: usize,
    kernel: impl FnOnce(&[E], &[E], &mut [E], &mut [E]),
) {
    let steps = shape.channels * shape.kernel * shape.kernel;
    let (image, plane) = (shape.image_len(), shape.output_len());
    let x = values(batch * image, seed);
    let dz = values(batch * plane, seed + 1);
    let start = values(shape.filters * steps, seed + 2);
    let mut want = start.clone();
    for b in 0..batch {
        crate::kernels::reference::conv2d_weight_gradient_stride1(
            shape,
            &x[b * image..(b + 1) * image],
            &dz[b * plane..(b + 1) * plane],
            &mut want,
            accumulate || b > 0,
        );
    }
    if batch == 0 && !accumulate {
        want.fill(0.0);
    }
    let cast = |v: &[f64]| v.iter().map(|&v| from_f64(v)).collect::<Vec<E>>();
    let mut scratch = std::vec![nan; scratch_len];
    let mut got = cast(&start);
    kernel(&cast(&x), &cast(&dz), &mut scratch, &mut got);
    let sums = (batch * shape.out_height() * shape.out_width()) as f64;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let g: f64 = g.into();
        assert!(
            (g - w).abs() <= tolerance * (1.0 + sums).sqrt() * (1.0 + w.abs()),
            "{isa:?} {shape:?} batch {batch} accumulate={accumulate}: dW[{i}] is {g}, \
             expected {w}"
        );
    }
}

/// The weight gradient with the positions in the lanes on small shapes of every width
/// around the vector sizes (kernels of 1 to 5, outputs narrower than a vector, images
/// shorter than one), in both element types, batches that take several passes of several
/// images with a shorter last one: each against the definition, the scratch first filled
/// with NaN (left by an earlier call), which no sum may meet.
#[test]
fn weight_gradients_over_passes_of_shifted_images_match_the_definition() {
    let (mut cases, mut shorter_last_passes) = (0_u64, 0);
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        // Padding too: the copies write it, from images without it (zero rows, and the
        // columns a load leaves out, on the left, the right, or both; wider than the
        // kernel too).
        // Kernels of 4 and 5 take the tiles along a kernel column, 3 filters each on
        // AVX-512: 11 filters end on a tile of 2, 1 filter is a tile of 1; the other
        // kernels take two blocks of `OUTER_ROWS` filters for 11.
        for (kernel, padding) in (1..=5).flat_map(|k| [(k, 0), (k, 1), (k, 3)]) {
            for height in [kernel, kernel + 1, kernel + 3] {
                for width in [0, 1, 2, 3, 7, 8, 15, 16, 17].map(|w| kernel + w) {
                    for (channels, filters) in [(1, 1), (2, 3), (1, 11)] {
                        if padding > 0 && (channels, filters) != (2, 3) {
                            continue;
                        }
                        let shape = conv_of((channels, filters, kernel, padding, height, width));
                        for batch in [0, 1, 3, 7] {
                            let per_pass = weight_grad_images_per_pass::<f32>(&shape, batch);
                            if per_pass > 1 && batch > per_pass && batch % per_pass != 0 {
                                shorter_last_passes += 1;
                            }
                            for accumulate in [false, true] {
                                cases += 1;
                                let run = (batch, accumulate);
                                let f32s = (|v| v as f32, f32::NAN, 1e-6);
                                check_weight_gradient_positions::<f32>(
                                    isa, &shape, run, f32s, cases,
                                );
                            }
                        }
                    }
                }
            }
        }
        // Three images a pass in f32: passes of 3 and 1, of 3 and 2.
        let shape = conv_of((2, 3, 3, 0, 18, 19));
        assert_eq!(weight_grad_images_per_pass::<f32>(&shape, 5), 3);
        for batch in [4, 5] {
            for accumulate in [false, true] {
                check_weight_gradient_positions::<f32>(
                    isa,
                    &shape,
                    (batch, accumulate),
                    (|v| v as f32, f32::NAN, 1e-6),
                    7,
                );
            }
        }
    }
    if cases > 0 {
        assert!(
            shorter_last_passes > 0,
            "no batch ended with a shorter pass"
        );
    }
}

/// Shapes for the Winograd weight gradient: every kernel size it takes, outputs as wide as
/// a tile, narrower, and not a multiple of one (the last tile's gradients past the output
/// are zeros), filters fewer than a vector, a whole one, and more than one.
fn winograd_gradient_shapes() -> impl Iterator<Item = Conv> {
    let shape = |(channels, filters, kernel, height, width)| {
        conv_of((channels, filters, kernel, 0, height, width))
    };
    filter_shapes()
        .filter(crate::kernels::winograd::applies)
        .chain(
            [
                (6, 16, 5, 14, 14),
                (2, 3, 5, 5, 5),
                (1, 17, 5, 7, 10),
                (3, 8, 4, 6, 9),
                (2, 33, 4, 4, 4),
                (1, 5, 3, 3, 3),
                (4, 16, 3, 9, 13),
                (3, 20, 3, 5, 8),
                // Many channels and filters, as the plan gives them this kernel.
                (32, 64, 3, 10, 10),
                (40, 33, 5, 9, 12),
            ]
            .map(shape),
        )
}

/// A weight-gradient kernel against the definition (`reference`), on each of `isas` that
/// is here, over `shapes` and `batches`, adding to the gradients or not, within
/// `tolerance · √(terms summed) · (1 + |dw|)`. `f32s` runs the kernel: `(isa, shape, batch,
/// x, dz, dw, accumulate)`, `dz` as the layer holds it.
#[allow(clippy::type_complexity)]
fn check_weight_gradient_kernel(
    isas: &[Isa],
    shapes: &[Conv],
    batches: &[usize],
    seed: u64,
    f32s: &dyn Fn(Isa, &Conv, usize, &[f32], &[f32], &mut [f32], bool),
    tolerance: f64,
) {
    for &isa in isas {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        for (i, &shape) in shapes.iter().enumerate() {
            let steps = shape.channels * shape.kernel * shape.kernel;
            let positions = shape.out_height() * shape.out_width();
            for &batch in batches {
                let seed = seed + 10 * i as u64;
                let x = values(batch * shape.image_len(), seed);
                let dz = values(batch * shape.output_len(), seed + 1);
                let start = values(shape.filters * steps, seed + 2);
                for accumulate in [false, true] {
                    let mut want = start.clone();
                    if !accumulate {
                        want.fill(0.0);
                    }
                    for (x, dz) in x
                        .chunks(shape.image_len().max(1))
                        .zip(dz.chunks(shape.output_len().max(1)))
                    {
                        crate::kernels::reference::conv2d_weight_gradient_stride1(
                            &shape, x, dz, &mut want, true,
                        );
                    }
                    let bound = |w: f64, tolerance: f64| {
                        tolerance * (1.0 + (batch * positions) as f64).sqrt() * (1.0 + w.abs())
                    };
                    let to_f32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                    let mut got = to_f32(&start);
                    f32s(
                        isa,
                        &shape,
                        batch,
                        &to_f32(&x),
                        &to_f32(&dz),
                        &mut got,
                        accumulate,
                    );
                    for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (f64::from(g) - w).abs() <= bound(w, tolerance),
                            "{isa:?} {shape:?} batch {batch} accumulate={accumulate}: f32 dW[{idx}] is {g}, expected {w}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn winograd_weight_gradients_match_the_definition() {
    /// The kernel, its scratch first filled with NaN: it must write what it reads.
    fn run<E: Element + num_traits::Float>(
        isa: Isa,
        shape: &Conv,
        batch: usize,
        x: &[E],
        dz: &[E],
        dw: &mut [E],
        accumulate: bool,
    ) {
        let len = weight_gradient_winograd_scratch(shape, batch, lanes::<E>(isa));
        let mut scratch = std::vec![E::nan(); len];
        conv2d_weight_gradient_winograd(isa, shape, batch, x, dz, &mut scratch, dw, accumulate);
    }
    // 5 and 9 images: groups of WINOGRAD_GRADIENT_IMAGES with a shorter last one. The sums
    // at the points are larger than the gradients they give (the transforms' coefficients
    // reach 5 in `Bᵀ`, 16 in `Aᵀ`): a few bits more rounding than the direct sums'.
    // Measured in f32: at most 2.4e-6 for 5 x 5 kernels, 4.1e-7 for 4 x 4, 2.1e-6 for 3 x
    // 3 (the direct kernel's test allows 1e-6).
    check_weight_gradient_kernel(
        &[Isa::Avx512, Isa::Avx2Fma],
        &winograd_gradient_shapes().collect::<Vec<_>>(),
        &[0, 1, 5, 9],
        150,
        &run::<f32>,
        5e-6,
    );
}

/// The tables of the Winograd weight gradient, in f64 on integers: `Aᵀ` of the evaluated
/// gradients times the input's transform, summed, is each tile's correlation exactly.
#[test]
fn the_winograd_gradient_tables_compute_a_tiles_correlation() {
    for kernel in 3..=5 {
        let m = crate::kernels::winograd::outputs_per_tile(kernel);
        let [evaluate, finish] = crate::kernels::winograd::gradient_transforms(kernel);
        let bt = crate::kernels::winograd::output_and_input_transforms(m)[1];
        for seed in 0..20_u64 {
            let g: Vec<f64> = values(m, 180 + seed)
                .iter()
                .map(|v| (v * 8.0).round())
                .collect();
            let d: Vec<f64> = values(6, 190 + seed)
                .iter()
                .map(|v| (v * 8.0).round())
                .collect();
            let points: Vec<f64> = (0..6)
                .map(|nu| {
                    let e: f64 = (0..m).map(|s| evaluate[nu][s] * g[s]).sum();
                    let v: f64 = (0..6).map(|j| bt[nu][j] * d[j]).sum();
                    e * v
                })
                .collect();
            for kx in 0..kernel {
                let got: f64 = (0..6).map(|nu| finish[kx][nu] * points[nu]).sum();
                let want: f64 = (0..m).map(|s| g[s] * d[s + kx]).sum();
                assert!(
                    (got - want).abs() <= 1e-9 * (1.0 + want.abs()),
                    "kernel {kernel}, output {kx}: {got} against {want}"
                );
            }
        }
    }
}

/// The weight gradient with a row's tiles in the lanes (`weight_grad_winograd_5x5_narrow_avx512`), in f32 on AVX-512,
/// against the definition in f64: LeNet-5's first layer and shapes around the kernel's
/// edges (one output; odd output widths, whose last tile has one output; the widest rows, of
/// 32 columns padded or not; padding wider than the kernel's reach; 1 to 8 filters, so
/// that tiles of 3 end with 1 and 2), over batches of 0 to 3, adding to the gradients or
/// not. The scratch starts as NaN: the kernel must write what it reads.
#[test]
fn weight_gradients_with_a_rows_tiles_in_the_lanes_match_the_definition() {
    /// The kernel, its scratch first filled with NaN: it must write what it reads.
    fn run(
        isa: Isa,
        shape: &Conv,
        batch: usize,
        x: &[f32],
        dz: &[f32],
        dw: &mut [f32],
        accumulate: bool,
    ) {
        assert!(
            weight_grad_winograd_5x5_narrow_avx512::applies(shape),
            "{shape:?}"
        );
        let mut scratch = std::vec![f32::NAN; weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(shape)];
        weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
            isa,
            shape,
            batch,
            x,
            weight_grad_winograd_5x5_narrow_avx512::Gradients::PreActivation(dz),
            &mut scratch,
            dw,
            accumulate,
        );
    }
    let shapes = [
        (1, 6, 5, 2, 28, 28),
        (1, 1, 5, 0, 5, 5),
        (2, 3, 5, 1, 7, 9),
        (1, 7, 5, 0, 9, 32),
        (3, 4, 5, 2, 6, 28),
        (1, 5, 5, 3, 4, 5),
        (2, 2, 5, 0, 5, 6),
        (1, 4, 5, 1, 12, 13),
        (1, 8, 5, 2, 3, 1),
        (2, 1, 5, 4, 1, 24),
    ]
    .map(conv_of);
    // As the Winograd kernel with the filters in the lanes: its sums at the points round
    // a few bits more than the direct sums.
    check_weight_gradient_kernel(&[Isa::Avx512], &shapes, &[0, 1, 3], 400, &run, 5e-6);
}

/// The row tiles reading a ReLU layer's `dA` and `A` (`Gradients::ThroughRelu`), on the
/// shapes of the test above (odd output widths: a last tile of one column, whose second
/// must not reach the bias) over batches of 0 to 3, adding to the gradients or not: `dw` the
/// same bits as with `dZ = dA · ReLU'(A)` formed first (as the layer's loop does), `db` the
/// sums of that `dZ` in f64 within rounding. A quarter of `A` is exactly 0, where ReLU' is 0.
#[test]
fn the_row_tiles_form_dz_through_relu_as_the_layers_loop_does() {
    if !isa_available(Isa::Avx512) {
        std::eprintln!("skipping: no AVX-512 on this CPU");
        return;
    }
    let to_f32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    for (i, shape) in [
        (1, 6, 5, 2, 28, 28),
        (2, 3, 5, 1, 7, 9),
        (1, 7, 5, 0, 9, 32),
        (1, 5, 5, 3, 4, 5),
        (1, 8, 5, 2, 3, 1),
        (2, 1, 5, 4, 1, 24),
    ]
    .map(conv_of)
    .iter()
    .enumerate()
    {
        for batch in [0, 1, 3] {
            let seed = 500 + 10 * i as u64;
            let x = to_f32(&values(batch * shape.image_len(), seed));
            let da = to_f32(&values(batch * shape.output_len(), seed + 1));
            let mut a = to_f32(&values(batch * shape.output_len(), seed + 2));
            a.iter_mut().step_by(4).for_each(|a| *a = 0.0);
            let dz: Vec<f32> = a
                .iter()
                .zip(&da)
                .map(|(&a, &da)| da * if a > 0.0 { 1.0 } else { 0.0 })
                .collect();
            let start = to_f32(&values(shape.filters * shape.channels * 25, seed + 3));
            let bias_start = to_f32(&values(shape.filters, seed + 4));
            let len = weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(shape);
            for accumulate in [false, true] {
                let mut want = start.clone();
                weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
                    Isa::Avx512,
                    shape,
                    batch,
                    &x,
                    weight_grad_winograd_5x5_narrow_avx512::Gradients::PreActivation(&dz),
                    &mut std::vec![f32::NAN; len],
                    &mut want,
                    accumulate,
                );
                let (mut got, mut d_bias) = (start.clone(), bias_start.clone());
                let gradients = weight_grad_winograd_5x5_narrow_avx512::Gradients::ThroughRelu {
                    output: &a,
                    d_output: &da,
                    d_bias: &mut d_bias,
                };
                weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
                    Isa::Avx512,
                    shape,
                    batch,
                    &x,
                    gradients,
                    &mut std::vec![f32::NAN; len],
                    &mut got,
                    accumulate,
                );
                assert_eq!(
                    got, want,
                    "{shape:?} batch {batch} accumulate={accumulate}: dW"
                );
                for (f, (&got, &start)) in d_bias.iter().zip(&bias_start).enumerate() {
                    let dz = dz
                        .chunks(shape.output_len())
                        .flat_map(|image| image.chunks(shape.output_len() / shape.filters).nth(f))
                        .flatten();
                    let (sum, scale) = dz.fold((0.0, 0.0), |(s, m), &v| {
                        (s + f64::from(v), m + f64::from(v).abs())
                    });
                    let want = if accumulate {
                        f64::from(start) + sum
                    } else {
                        sum
                    };
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-6 * (1.0 + scale + want.abs()),
                        "{shape:?} batch {batch} accumulate={accumulate}: db[{f}] is {got}, expected {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn weight_gradients_with_the_filters_in_the_lanes_match_the_definition() {
    /// The kernel, `dz` given position-major as it takes it.
    fn run<E: Element>(
        isa: Isa,
        shape: &Conv,
        batch: usize,
        x: &[E],
        dz: &[E],
        dw: &mut [E],
        accumulate: bool,
    ) {
        let mut dzt = dz.to_vec();
        for (dz, dzt) in dz
            .chunks(shape.output_len().max(1))
            .zip(dzt.chunks_mut(shape.output_len().max(1)))
        {
            transpose(dz, shape.filters, dzt);
        }
        conv2d_weight_gradient_filters(isa, shape, batch, x, &dzt, dw, accumulate);
    }
    check_weight_gradient_kernel(
        &[Isa::Avx512, Isa::Avx2Fma],
        &filter_shapes().collect::<Vec<_>>(),
        &[0, 1, 3],
        120,
        &run::<f32>,
        1e-6,
    );
}

/// The patches' weight gradient (`kernels::weight_grad_patches`) against the definition on
/// every instruction set, in both element types: kernels of 1 to 7, square or not, padding
/// from none to more than half the kernel (rows and columns of patches all zeros), 32 and
/// more filters, images whose patches take several chunks of rows (one 1 x 1, whose planes
/// are its patches), batches of none, one
/// and several, accumulating or not, the scratch filled with NaN first.
#[test]
fn patches_weight_gradients_match_the_definition() {
    use crate::kernels::weight_grad_patches::{applies, conv2d_weight_gradient, scratch_len};
    // (channels, filters, kernel, padding, height, width)
    let shapes = [
        (3, 32, 3, 1, 9, 7),
        (2, 33, 5, 2, 6, 11),
        (4, 40, 1, 0, 5, 5),
        (3, 32, 4, 0, 8, 9),
        (1, 32, 7, 3, 5, 4),
        (2, 32, 5, 4, 1, 2),
        // 18 rows of 16,900 positions: 3 rows a chunk, 6 chunks.
        (2, 32, 3, 1, 130, 130),
        // 1 x 1, the image's planes read where they lie: 6 of 10,000 positions a chunk, then 2.
        (8, 32, 1, 0, 100, 100),
    ];
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        for (i, &sizes) in shapes.iter().enumerate() {
            let shape = conv_of(sizes);
            assert!(applies(&shape), "{shape:?}");
            let batches: &[usize] = if shape.height >= 100 {
                &[2]
            } else {
                &[0, 1, 3]
            };
            for &batch in batches {
                for accumulate in [false, true] {
                    let run = (batch, accumulate);
                    let seed = 700 + 10 * i as u64;
                    check_patches::<f32>(isa, &shape, run, (|v| v as f32, f32::NAN, 1e-6), seed);
                    check_patches::<f64>(isa, &shape, run, (|v| v, f64::NAN, 1e-14), seed);
                }
            }
        }
    }

    /// One case of the test above (see [`check_weight_gradient`]).
    fn check_patches<E: Element + crate::Scalar + Into<f64>>(
        isa: Isa,
        shape: &Conv,
        (batch, accumulate): (usize, bool),
        elements: (impl Fn(f64) -> E, E, f64),
        seed: u64,
    ) {
        let run = (batch, accumulate);
        check_weight_gradient(isa, shape, run, elements, seed, scratch_len(shape), {
            |x: &[E], dz: &[E], scratch: &mut [E], dw: &mut [E]| {
                conv2d_weight_gradient(isa, shape, batch, x, dz, scratch, dw, accumulate)
            }
        });
    }
}

/// The unrolled patches, any rows, against their definition, exactly: kernels of 1 to 6 with
/// padding up to past the kernel, images narrower and shorter than it, the buffer filled with
/// NaN first.
#[test]
fn unrolled_patches_are_the_inputs_each_output_reads() {
    use crate::kernels::weight_grad_patches::unroll_patches;
    let mut cases = 0;
    for kernel in 1..=6 {
        for padding in 0..=kernel {
            for (height, width) in [(1, 1), (1, 5), (4, 2), (7, 9)] {
                let shape = conv_of((2, 32, kernel, padding, height, width));
                if shape.height + 2 * padding < kernel || shape.width + 2 * padding < kernel {
                    continue;
                }
                let (oh, ow) = (shape.out_height(), shape.out_width());
                let x: Vec<f32> = (0..shape.image_len()).map(|i| i as f32 + 1.0).collect();
                let taps = 2 * kernel * kernel;
                for rows in [0..taps, 1..taps.min(4), taps - 1..taps] {
                    let mut out = std::vec![f32::NAN; rows.len() * oh * ow];
                    unroll_patches(&shape, &x, rows.clone(), &mut out);
                    for (r, row) in rows.clone().zip(out.chunks_exact(oh * ow)) {
                        let (c, ky, kx) = (r / (kernel * kernel), r / kernel % kernel, r % kernel);
                        for (position, &got) in row.iter().enumerate() {
                            let (y, x0) = (position / ow + ky, position % ow + kx);
                            let want = match (y.checked_sub(padding), x0.checked_sub(padding)) {
                                (Some(y), Some(x0)) if y < height && x0 < width => {
                                    x[(c * height + y) * width + x0]
                                }
                                _ => 0.0,
                            };
                            assert_eq!(got, want, "{shape:?} row {r} position {position}");
                        }
                    }
                    cases += 1;
                }
            }
        }
    }
    assert!(cases > 100, "{cases} cases");
}
