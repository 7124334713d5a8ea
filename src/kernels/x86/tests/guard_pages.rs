//! Every kernel between pages without access: nothing read or written past its slices.

use super::*;

/// Max pooling (forward and backward) and the transposes never read past their input, nor
/// write past their output: both end at a page without access, for every shape around the
/// kernels' vector and step sizes (the masks of the last, partial vectors are what this
/// checks).
#[cfg(unix)]
#[test]
fn no_kernel_reads_or_writes_past_the_end_of_its_slices() {
    let mut next = xorshift(0x5eed_1234_abcd_0001);
    let mut values = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| (next() % 1000) as f32 / 100.0 - 5.0)
            .collect()
    };
    for isa in [Isa::Avx512, Isa::Avx2Fma]
        .into_iter()
        .filter(|&i| isa_available(i))
    {
        for planes in 1..4 {
            for height in 2..9 {
                for width in 2..41 {
                    let x = values(planes * height * width);
                    let n = planes * (height / 2) * (width / 2);
                    let (mut x, mut out) = (Guarded::new(&x), Guarded::new(&std::vec![0.0; n]));
                    max_pool_2x2_f32(isa, x.slice(), (height, width), as_output(out.slice()));
                    // The backward pass: the input, the gradients and the input gradient
                    // each end at the guard page.
                    let mut dy = Guarded::new(&values(n));
                    let mut dx = Guarded::new(&std::vec![0.0; planes * height * width]);
                    max_pool_2x2_backward_f32(
                        isa,
                        x.slice(),
                        (height, width),
                        dy.slice(),
                        dx.slice(),
                    );
                }
            }
        }
    }
    // The weight gradient, positions in the lanes (each plane's last vector masked), two
    // images: the second image, its gradients and the last shifted copy in the scratch end
    // at the guard page.
    fn positions_weight_gradient(shape: &Conv, x: &[f32], dz: &[f32]) {
        let batch = 2;
        let scratch = weight_grad_images_per_pass::<f32>(shape, batch) * shifted_image_len(shape);
        let (mut x, mut dz, mut scratch) = (
            Guarded::new(x),
            Guarded::new(dz),
            Guarded::new(&std::vec![0.0; scratch]),
        );
        let kernel = shape.kernel;
        let mut dw = std::vec![0.0; shape.filters * shape.channels * kernel * kernel];
        for isa in [Isa::Avx512, Isa::Avx2Fma]
            .into_iter()
            .filter(|&i| isa_available(i))
        {
            conv2d_weight_gradient_positions(
                isa,
                shape,
                batch,
                x.slice(),
                dz.slice(),
                scratch.slice(),
                &mut dw,
                false,
            );
        }
    }
    // The flat convolution kernel, positions dense where the output is at least a vector
    // wide (each vector's last lanes loaded from the next row), flat where it is not: the
    // image and the output end at the guard page. Then the weight gradient, positions in
    // the lanes, of these and of padded images (the copies load each row's columns masked,
    // before the row's start where the padding is on the left).
    for sizes in [
        (1, 6, 5, 0, 32, 32),
        (2, 3, 3, 0, 18, 19),
        (1, 1, 1, 0, 1, 16),
        (1, 2, 3, 0, 7, 9),
        (3, 9, 2, 0, 5, 40),
        // Shorter than a vector: the images, the gradients, the shifted copies.
        (1, 2, 2, 0, 2, 3),
        (1, 1, 1, 0, 1, 3),
        // Padded: the weight gradient only.
        (1, 6, 5, 2, 28, 28),
        (2, 3, 3, 1, 5, 17),
        (1, 2, 2, 3, 2, 3),
    ] {
        let shape = conv_of(sizes);
        if shape.padding == 0 {
            flat_convolution(&shape, &mut values);
        }
        let batch = 2;
        let (x, dz) = (
            values(batch * shape.image_len()),
            values(batch * shape.output_len()),
        );
        positions_weight_gradient(&shape, &x, &dz);
    }
    // The weight gradient with a row's tiles in the lanes: the images (their rows loaded
    // masked, two vectors each), the gradients and the scratch end at the guard page, for
    // rows of 1 to 32 columns (one vector and a partial one, or a partial one alone),
    // padded or not, 1 to 6 filters (tiles of 3 and their rest).
    if isa_available(Isa::Avx512) {
        for (channels, filters, padding, height, width) in [
            (1, 6, 2, 28, 28),
            (1, 1, 0, 5, 5),
            (2, 4, 0, 6, 32),
            (1, 2, 1, 5, 17),
            (2, 3, 2, 2, 1),
            (1, 5, 0, 9, 16),
        ] {
            let shape = conv_of((channels, filters, 5, padding, height, width));
            let batch = 2;
            let (mut x, mut dz, mut a, mut scratch) = (
                Guarded::new(&values(batch * shape.image_len())),
                Guarded::new(&values(batch * shape.output_len())),
                Guarded::new(&values(batch * shape.output_len())),
                Guarded::new(
                    &std::vec![0.0; weight_grad_winograd_5x5_narrow_avx512::weight_gradient_scratch(&shape)],
                ),
            );
            let mut dw = Guarded::new(&std::vec![0.0; filters * channels * 25]);
            let mut db = Guarded::new(&std::vec![0.0; filters]);
            weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
                Isa::Avx512,
                &shape,
                batch,
                x.slice(),
                weight_grad_winograd_5x5_narrow_avx512::Gradients::PreActivation(dz.slice()),
                scratch.slice(),
                dw.slice(),
                false,
            );
            // And with dZ formed from dA and A as they are read, db written.
            let gradients = weight_grad_winograd_5x5_narrow_avx512::Gradients::ThroughRelu {
                output: a.slice(),
                d_output: dz.slice(),
                d_bias: db.slice(),
            };
            weight_grad_winograd_5x5_narrow_avx512::conv2d_weight_gradient(
                Isa::Avx512,
                &shape,
                batch,
                x.slice(),
                gradients,
                scratch.slice(),
                dw.slice(),
                false,
            );
        }
    }
    // The flat convolution of `shape` (no padding) on every instruction set here.
    fn flat_convolution(shape: &Conv, values: &mut impl FnMut(usize) -> Vec<f32>) {
        let Conv {
            channels,
            filters,
            kernel,
            ..
        } = *shape;
        let x = values(shape.image_len());
        let w = values(filters * channels * kernel * kernel);
        let bias = values(filters);
        let (mut x, mut out) = (
            Guarded::new(&x),
            Guarded::new(&std::vec![0.0; shape.output_len()]),
        );
        for isa in [Isa::Avx512, Isa::Avx2Fma]
            .into_iter()
            .filter(|&i| isa_available(i))
        {
            let out = as_output(out.slice());
            conv2d_stride1_flat(isa, shape, x.slice(), &w, &bias, out, Epilogue::Relu);
        }
    }
    // The weight gradient by Winograd's method: the images, their gradients and the
    // scratch end at the guard page (the image's rows and `dZ`'s filters are loaded
    // masked at their ends).
    for sizes in [
        (6, 16, 5, 0, 14, 14),
        (2, 3, 4, 0, 5, 7),
        (1, 17, 3, 0, 3, 4),
    ] {
        let shape = conv_of(sizes);
        for batch in [1, 5] {
            let (x, dz) = (
                values(batch * shape.image_len()),
                values(batch * shape.output_len()),
            );
            let kernel = shape.kernel;
            let mut dw = std::vec![0.0; shape.filters * shape.channels * kernel * kernel];
            for isa in [Isa::Avx512, Isa::Avx2Fma]
                .into_iter()
                .filter(|&i| isa_available(i))
            {
                let scratch = weight_gradient_winograd_scratch(&shape, batch, lanes::<f32>(isa));
                let (mut x, mut dz, mut scratch) = (
                    Guarded::new(&x),
                    Guarded::new(&dz),
                    Guarded::new(&std::vec![0.0; scratch]),
                );
                conv2d_weight_gradient_winograd(
                    isa,
                    &shape,
                    batch,
                    x.slice(),
                    dz.slice(),
                    scratch.slice(),
                    &mut dw,
                    false,
                );
            }
        }
    }
    for rows in [1, 2, 5] {
        for width in [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 28, 33] {
            let (from_stride, to_stride) = (width + 1, width + 2);
            let from = values((rows - 1) * from_stride + width);
            let to_len = (rows - 1) * to_stride + width;
            let (mut from, mut to) = (Guarded::new(&from), Guarded::new(&std::vec![0.0; to_len]));
            // And in `f64`, whose vectors hold half as many.
            let from64: Vec<f64> = from.slice().iter().map(|&v| f64::from(v)).collect();
            let (mut from64, mut to64) = (
                Guarded::new(&from64),
                Guarded::new(&std::vec![0.0_f64; to_len]),
            );
            let size = (rows, width);
            for isa in [Isa::Avx512, Isa::Avx2Fma]
                .into_iter()
                .filter(|&i| isa_available(i))
            {
                copy_rows(isa, from.slice(), from_stride, to.slice(), to_stride, size);
                copy_rows(
                    isa,
                    from64.slice(),
                    from_stride,
                    to64.slice(),
                    to_stride,
                    size,
                );
            }
        }
    }
    for rows in [1, 7, 8, 9, 15, 16, 17, 32, 33] {
        for columns in [1, 3, 4, 5, 7, 8, 9, 150] {
            let from = values(rows * columns);
            let (mut from, mut to) = (
                Guarded::new(&from),
                Guarded::new(&std::vec![0.0; rows * columns]),
            );
            for isa in [Isa::Avx512, Isa::Avx2Fma]
                .into_iter()
                .filter(|&i| isa_available(i))
            {
                crate::kernels::x86::layout::transpose_on(
                    Some(isa),
                    from.slice(),
                    rows,
                    to.slice(),
                );
            }
            transpose(from.slice(), rows, to.slice());
            assert_eq!(
                to.slice()[..],
                transposed(
                    &from
                        .slice()
                        .iter()
                        .map(|&v| f64::from(v))
                        .collect::<Vec<_>>(),
                    rows
                )
                .iter()
                .map(|&v| v as f32)
                .collect::<Vec<_>>()[..]
            );
        }
    }
}

/// The products, packed and unpacked, never read past `A` or `B` nor write past `C`: each
/// ends at a page without access, on shapes around every tile and packing edge (the masked
/// loads of the last columns, the packed panel's zero padding, the transposing copy of `Bᵀ`).
#[cfg(unix)]
#[test]
fn no_product_reads_or_writes_past_the_end_of_its_operands() {
    let mut next = xorshift(0x5eed_1234_abcd_0002);
    let mut values = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| (next() % 1000) as f32 / 100.0 - 5.0)
            .collect()
    };
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            continue;
        }
        // 9 to 11 and 23 rows: AVX-512's 12-row tiles with masked rows.
        for m in [1, 5, 6, 7, 9, 11, 12, 13, 23, 25] {
            for n in [1, 7, 8, 15, 16, 17, 33] {
                for k in [1, 7, 8, 9, 17] {
                    let (mut a, mut b) =
                        (Guarded::new(&values(m * k)), Guarded::new(&values(k * n)));
                    let mut c = Guarded::new(&values(m * n));
                    for layout in [Product::Plain, Product::TransposeLhs, Product::TransposeRhs] {
                        let unpacked = if layout == Product::TransposeRhs {
                            Path::Dot
                        } else {
                            Path::Outer
                        };
                        for path in [Path::Packed, unpacked] {
                            // SAFETY: the lengths, `k > 0`, the rows and the instruction set
                            // as `gemm` checks them.
                            unsafe {
                                <f32 as Element>::run_rows(
                                    isa,
                                    path,
                                    layout,
                                    m,
                                    n,
                                    k,
                                    0..m,
                                    a.slice(),
                                    b.slice(),
                                    c.slice(),
                                    true,
                                )
                            };
                        }
                    }
                }
            }
        }
    }
}
