//! Tests of the kernels' typed functions and of the choice of kernel: the products against the
//! triple loop, and each convolution's dispatch against the definitions, bit for bit where the
//! same kernel runs.

mod conv;
mod conv_gradients;

#[cfg(all(feature = "alloc", target_arch = "x86_64"))]
use super::weight_grad_patches;
use super::*;
#[allow(unused_imports)]
use super::{cast::*, conv::*, gemm::*, im2col::*, plan::*, pool::*, shape::*};

/// The textbook triple loop, independent of the kernels' loop orders.
fn naive<const H: usize, const K: usize, const W: usize>(
    a: &[[i64; K]; H],
    b: &[[i64; W]; K],
) -> [[i64; W]; H] {
    let mut out = [[0; W]; H];
    for i in 0..H {
        for j in 0..W {
            for k in 0..K {
                out[i][j] += a[i][k] * b[k][j];
            }
        }
    }
    out
}

fn pattern<const H: usize, const W: usize>(seed: i64) -> [[i64; W]; H] {
    core::array::from_fn(|r| {
        core::array::from_fn(|c| (seed * 7 + r as i64 * 3 - c as i64 * 5) % 11)
    })
}

#[test]
fn products_agree_with_the_triple_loop_on_odd_shapes() {
    let a: [[i64; 5]; 3] = pattern(1);
    let b: [[i64; 7]; 5] = pattern(2);
    let expected = naive(&a, &b);

    let mut out = [[0; 7]; 3];
    matmul_into(&a, &b, &mut out);
    assert_eq!(out, expected);

    let mut a_t = [[0; 3]; 5];
    transpose_into(&a, &mut a_t);
    let mut out_tl = [[0; 7]; 3];
    matmul_transpose_lhs_into(&a_t, &b, &mut out_tl);
    assert_eq!(out_tl, expected);

    let mut b_t = [[0; 5]; 7];
    transpose_into(&b, &mut b_t);
    let mut out_tr = [[0; 7]; 3];
    matmul_transpose_rhs_into(&a, &b_t, &mut out_tr);
    assert_eq!(out_tr, expected);
}

#[test]
fn accumulate_forms_add_to_the_existing_output() {
    let a: [[i64; 4]; 2] = pattern(3);
    let b: [[i64; 3]; 4] = pattern(4);
    let product = naive(&a, &b);
    let start: [[i64; 3]; 2] = pattern(5);
    let expected: [[i64; 3]; 2] =
        core::array::from_fn(|r| core::array::from_fn(|c| start[r][c] + product[r][c]));

    let mut out = start;
    matmul_accumulate_into(&a, &b, &mut out);
    assert_eq!(out, expected);

    let mut a_t = [[0; 2]; 4];
    transpose_into(&a, &mut a_t);
    let mut out = start;
    matmul_transpose_lhs_accumulate_into(&a_t, &b, &mut out);
    assert_eq!(out, expected);

    let mut b_t = [[0; 4]; 3];
    transpose_into(&b, &mut b_t);
    let mut out = start;
    matmul_transpose_rhs_accumulate_into(&a, &b_t, &mut out);
    assert_eq!(out, expected);
}

#[test]
fn overwrite_forms_ignore_what_the_output_held() {
    let a: [[i64; 2]; 2] = pattern(6);
    let b: [[i64; 2]; 2] = pattern(7);
    let mut out = [[99; 2]; 2];
    matmul_into(&a, &b, &mut out);
    assert_eq!(out, naive(&a, &b));
    let mut out = [[99; 2]; 2];
    matmul_transpose_lhs_into(&a, &b, &mut out);
    let mut a_t = [[0; 2]; 2];
    transpose_into(&a, &mut a_t);
    assert_eq!(out, naive(&a_t, &b));
}

#[test]
fn empty_inner_dimension_gives_zeros() {
    let a: [[i64; 0]; 2] = [[], []];
    let b: [[i64; 3]; 0] = [];
    let mut out = [[5; 3]; 2];
    matmul_into(&a, &b, &mut out);
    assert_eq!(out, [[0; 3]; 2]);
}

/// The run-time-sized products against the textbook loop, every layout, every element type
/// with its own path (SIMD for f32 and f64 when the CPU has it, the reference loops for
/// integers), odd sizes on both sides of the SIMD tiles, overwriting and accumulating.
#[test]
fn slice_products_agree_with_the_triple_loop() {
    fn check<T: Scalar + core::fmt::Debug>(to: fn(i64) -> T, close: fn(T, T) -> bool) {
        for (m, n, k) in [
            (1, 1, 1),
            (3, 5, 7),
            (6, 17, 25),
            (16, 33, 9),
            (1, 100, 150),
            (37, 1, 8),
        ] {
            let a: std::vec::Vec<i64> = (0..m * k).map(|i| (i as i64 * 7 + 3) % 13 - 6).collect();
            let b: std::vec::Vec<i64> = (0..k * n).map(|i| (i as i64 * 5 + 1) % 11 - 5).collect();
            let mut want = std::vec![0_i64; m * n];
            for i in 0..m {
                for j in 0..n {
                    for p in 0..k {
                        want[i * n + j] += a[i * k + p] * b[p * n + j];
                    }
                }
            }
            // The same product with each operand stored transposed.
            let a_t: std::vec::Vec<i64> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
            let b_t: std::vec::Vec<i64> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
            let conv = |v: &[i64]| v.iter().map(|&x| to(x)).collect::<std::vec::Vec<T>>();
            for (product, a, b) in [
                (Product::Plain, &a, &b),
                (Product::TransposeLhs, &a_t, &b),
                (Product::TransposeRhs, &a, &b_t),
            ] {
                for accumulate in [false, true] {
                    let mut c = conv(&std::vec![1_i64; m * n]);
                    gemm_slices(product, (m, n, k), &conv(a), &conv(b), &mut c, accumulate);
                    for (i, (&got, &w)) in c.iter().zip(&want).enumerate() {
                        let w = to(w + i64::from(accumulate));
                        assert!(
                            close(got, w),
                            "{product:?} {m}x{n}x{k} [{i}]: {got:?} vs {w:?}"
                        );
                    }
                }
            }
        }
    }
    check::<f32>(
        |x| x as f32,
        |a, b| (a - b).abs() <= 1e-4 * b.abs().max(1.0),
    );
    check::<f64>(
        |x| x as f64,
        |a, b| (a - b).abs() <= 1e-12 * b.abs().max(1.0),
    );
    check::<i64>(|x| x, |a, b| a == b);
}

#[test]
fn the_relu_epilogue_is_relus_rule() {
    let relu = |z: f32| Epilogue::Relu.apply(z).to_bits();
    assert_eq!(relu(2.5), 2.5_f32.to_bits());
    assert_eq!(relu(-2.5), 0.0_f32.to_bits());
    assert_eq!(relu(-0.0), 0.0_f32.to_bits()); // +0.0
    assert!(f32::from_bits(relu(f32::NAN)).is_nan());
    assert_eq!(relu(f32::NEG_INFINITY), 0.0_f32.to_bits());
    for z in [2.5_f32, -2.5, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY] {
        assert_eq!(
            relu(z),
            <crate::nn::Relu as crate::nn::Activation>::apply(z).to_bits(),
            "{z}"
        );
    }
    assert_eq!(
        Epilogue::Identity.apply(-0.0_f32).to_bits(),
        (-0.0_f32).to_bits()
    );
    assert_eq!(Epilogue::Relu.apply(-3_i64), 0);
}
