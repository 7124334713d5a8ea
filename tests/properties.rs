//! Property tests of the algebra of `Matrix`: product identities, the transposed products against
//! an explicit `transpose()`, structural round trips, reductions as products, and broadcasting.
//!
//! Integers (`i64`, small values) check the identities exactly; `f64` checks them with a tolerance.
//! Every property runs on several shapes, including odd ones (1x1, 3x5x7, 17x13x9, 33x1x65) that
//! divide no block size a faster kernel might use, and an empty inner dimension.

use constmat::Matrix;
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Few enough cases that the whole file stays fast in a debug build.
fn config() -> Config {
    Config {
        cases: 24,
        ..Config::default()
    }
}

/// A strategy for an `H x W` matrix whose elements come from `element`, built from a `Vec` of
/// exactly `H * W` elements through `Matrix::from_vec`.
fn matrix<T, S, const H: usize, const W: usize>(
    element: S,
) -> impl Strategy<Value = Matrix<T, H, W>>
where
    T: constmat::Scalar,
    S: Strategy<Value = T>,
{
    proptest::collection::vec(element, H * W)
        .prop_map(|v| Matrix::from_vec(v).expect("the Vec has exactly H * W elements"))
}

/// Small integers: products of sums stay far from overflow, so identities hold exactly.
fn int_matrix<const H: usize, const W: usize>() -> impl Strategy<Value = Matrix<i64, H, W>> {
    matrix(-50_i64..=50)
}

fn float_matrix<const H: usize, const W: usize>() -> impl Strategy<Value = Matrix<f64, H, W>> {
    matrix(-10.0_f64..10.0)
}

/// The textbook triple loop over flat row-major slices, independent of the kernels.
fn naive_matmul<T: constmat::Scalar, const H: usize, const K: usize, const W: usize>(
    a: &Matrix<T, H, K>,
    b: &Matrix<T, K, W>,
) -> Matrix<T, H, W> {
    let (a, b) = (a.as_slice(), b.as_slice());
    let mut out = vec![T::zero(); H * W];
    for i in 0..H {
        for j in 0..W {
            let mut acc = T::zero();
            for k in 0..K {
                acc += a[i * K + k] * b[k * W + j];
            }
            out[i * W + j] = acc;
        }
    }
    Matrix::from_vec(out).unwrap()
}

/// The transpose by index arithmetic, independent of the library's `transpose`.
fn naive_transpose<T: constmat::Scalar, const H: usize, const W: usize>(
    a: &Matrix<T, H, W>,
) -> Matrix<T, W, H> {
    let s = a.as_slice();
    Matrix::from_fn(|r, c| s[c * W + r])
}

/// Element-wise closeness with an absolute floor and a relative part.
fn assert_close<const H: usize, const W: usize>(
    actual: &Matrix<f64, H, W>,
    expected: &Matrix<f64, H, W>,
) -> Result<(), TestCaseError> {
    for (i, (&x, &y)) in actual.iter().zip(expected.iter()).enumerate() {
        let tolerance = 1e-9 * (1.0 + x.abs().max(y.abs()));
        prop_assert!(
            (x - y).abs() <= tolerance,
            "element {} (row {}, col {}): {} vs {}",
            i,
            i / W.max(1),
            i % W.max(1),
            x,
            y
        );
    }
    Ok(())
}

/// Product properties for `A: H x K`, `B: K x W`.
macro_rules! product_properties {
    ($name:ident, $h:literal, $k:literal, $w:literal) => {
        mod $name {
            use super::*;

            const H: usize = $h;
            const K: usize = $k;
            const W: usize = $w;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn matmul_matches_the_naive_triple_loop_exactly_for_integers(
                    a in int_matrix::<H, K>(),
                    b in int_matrix::<K, W>(),
                ) {
                    prop_assert_eq!(a.matmul(&b), naive_matmul(&a, &b));
                }

                #[test]
                fn matmul_matches_the_naive_triple_loop_for_floats(
                    a in float_matrix::<H, K>(),
                    b in float_matrix::<K, W>(),
                ) {
                    assert_close(&a.matmul(&b), &naive_matmul(&a, &b))?;
                    assert_close(&(&a * &b), &naive_matmul(&a, &b))?;
                }

                #[test]
                fn transpose_of_a_product_is_the_reversed_product_of_transposes(
                    a in int_matrix::<H, K>(),
                    b in int_matrix::<K, W>(),
                ) {
                    let lhs: Matrix<i64, W, H> = (&a * &b).transpose();
                    let rhs: Matrix<i64, W, H> = &b.transpose() * &a.transpose();
                    prop_assert_eq!(lhs, rhs);
                }

                #[test]
                fn transpose_of_a_float_product_is_the_reversed_product_of_transposes(
                    a in float_matrix::<H, K>(),
                    b in float_matrix::<K, W>(),
                ) {
                    assert_close(&(&a * &b).transpose(), &(&b.transpose() * &a.transpose()))?;
                }

                #[test]
                fn product_distributes_over_a_sum_on_the_right(
                    a in int_matrix::<H, K>(),
                    b in int_matrix::<K, W>(),
                    c in int_matrix::<K, W>(),
                ) {
                    prop_assert_eq!(&a * &(&b + &c), &(&a * &b) + &(&a * &c));
                }

                #[test]
                fn product_distributes_over_a_sum_on_the_left(
                    a in int_matrix::<H, K>(),
                    b in int_matrix::<H, K>(),
                    c in int_matrix::<K, W>(),
                ) {
                    prop_assert_eq!(&(&a + &b) * &c, &(&a * &c) + &(&b * &c));
                }

                #[test]
                fn float_products_distribute_over_sums(
                    a in float_matrix::<H, K>(),
                    b in float_matrix::<H, K>(),
                    c in float_matrix::<K, W>(),
                    d in float_matrix::<K, W>(),
                ) {
                    assert_close(&(&a * &(&c + &d)), &(&(&a * &c) + &(&a * &d)))?;
                    assert_close(&(&(&a + &b) * &c), &(&(&a * &c) + &(&b * &c)))?;
                }

                #[test]
                fn matmul_into_equals_the_operator_and_overwrites_the_output(
                    a in int_matrix::<H, K>(),
                    b in int_matrix::<K, W>(),
                    stale in int_matrix::<H, W>(),
                ) {
                    let mut out = stale;
                    a.matmul_into(&b, &mut out);
                    prop_assert_eq!(&out, &(&a * &b));
                    prop_assert_eq!(&out, &(a.clone() * b.clone()));
                }

                #[test]
                fn matmul_accumulate_into_adds_the_product(
                    a in int_matrix::<H, K>(),
                    b in int_matrix::<K, W>(),
                    start in int_matrix::<H, W>(),
                ) {
                    let mut out = start.clone();
                    a.matmul_accumulate_into(&b, &mut out);
                    prop_assert_eq!(out, &start + &naive_matmul(&a, &b));
                }

                #[test]
                fn matmul_transpose_lhs_forms_equal_an_explicit_transpose(
                    // `a` is K x H, so aᵀ·b is H x W.
                    a in int_matrix::<K, H>(),
                    b in int_matrix::<K, W>(),
                    stale in int_matrix::<H, W>(),
                ) {
                    let expected = naive_matmul(&naive_transpose(&a), &b);
                    prop_assert_eq!(&a.transpose().matmul(&b), &expected);
                    prop_assert_eq!(&a.matmul_transpose_lhs(&b), &expected);

                    let mut out = stale.clone();
                    a.matmul_transpose_lhs_into(&b, &mut out);
                    prop_assert_eq!(&out, &expected);

                    let mut out = stale.clone();
                    a.matmul_transpose_lhs_accumulate_into(&b, &mut out);
                    prop_assert_eq!(out, &stale + &expected);
                }

                #[test]
                fn matmul_transpose_rhs_forms_equal_an_explicit_transpose(
                    // `b` is W x K, so a·bᵀ is H x W.
                    a in int_matrix::<H, K>(),
                    b in int_matrix::<W, K>(),
                    stale in int_matrix::<H, W>(),
                ) {
                    let expected = naive_matmul(&a, &naive_transpose(&b));
                    prop_assert_eq!(&a.matmul(&b.transpose()), &expected);
                    prop_assert_eq!(&a.matmul_transpose_rhs(&b), &expected);

                    let mut out = stale.clone();
                    a.matmul_transpose_rhs_into(&b, &mut out);
                    prop_assert_eq!(&out, &expected);

                    let mut out = stale.clone();
                    a.matmul_transpose_rhs_accumulate_into(&b, &mut out);
                    prop_assert_eq!(out, &stale + &expected);
                }

                #[test]
                fn float_transposed_products_equal_an_explicit_transpose(
                    a_kh in float_matrix::<K, H>(),
                    a_hk in float_matrix::<H, K>(),
                    b_kw in float_matrix::<K, W>(),
                    b_wk in float_matrix::<W, K>(),
                    stale in float_matrix::<H, W>(),
                ) {
                    let lhs_expected = naive_matmul(&naive_transpose(&a_kh), &b_kw);
                    assert_close(&a_kh.matmul_transpose_lhs(&b_kw), &lhs_expected)?;
                    let mut out = stale.clone();
                    a_kh.matmul_transpose_lhs_into(&b_kw, &mut out);
                    assert_close(&out, &lhs_expected)?;
                    let mut out = stale.clone();
                    a_kh.matmul_transpose_lhs_accumulate_into(&b_kw, &mut out);
                    assert_close(&out, &(&stale + &lhs_expected))?;

                    let rhs_expected = naive_matmul(&a_hk, &naive_transpose(&b_wk));
                    assert_close(&a_hk.matmul_transpose_rhs(&b_wk), &rhs_expected)?;
                    let mut out = stale.clone();
                    a_hk.matmul_transpose_rhs_into(&b_wk, &mut out);
                    assert_close(&out, &rhs_expected)?;
                    let mut out = stale.clone();
                    a_hk.matmul_transpose_rhs_accumulate_into(&b_wk, &mut out);
                    assert_close(&out, &(&stale + &rhs_expected))?;
                }

                #[test]
                fn multiplying_by_the_identity_changes_nothing(
                    a in int_matrix::<H, K>(),
                    f in float_matrix::<H, K>(),
                ) {
                    prop_assert_eq!(&(&a * &Matrix::<i64, K, K>::identity()), &a);
                    prop_assert_eq!(&(&Matrix::<i64, H, H>::identity() * &a), &a);
                    // Exact for floats too: every sum is x*1 plus zeros.
                    prop_assert_eq!(&(&f * &Matrix::<f64, K, K>::identity()), &f);
                    prop_assert_eq!(&(&Matrix::<f64, H, H>::identity() * &f), &f);
                }

                #[test]
                fn transposing_twice_is_the_identity(a in int_matrix::<H, K>(), f in float_matrix::<K, W>()) {
                    let t: Matrix<i64, K, H> = a.transpose();
                    prop_assert_eq!(&t, &naive_transpose(&a));
                    prop_assert_eq!(&t.transpose(), &a);
                    prop_assert_eq!(&f.transpose().transpose(), &f);
                }

                #[test]
                fn column_sums_are_a_row_of_ones_times_the_matrix(
                    a in int_matrix::<H, W>(),
                    f in float_matrix::<H, W>(),
                ) {
                    prop_assert_eq!(a.column_sums(), &Matrix::<i64, 1, H>::ones() * &a);
                    assert_close(&f.column_sums(), &(&Matrix::<f64, 1, H>::ones() * &f))?;
                }

                #[test]
                fn row_sums_are_the_matrix_times_a_column_of_ones(
                    a in int_matrix::<H, W>(),
                    f in float_matrix::<H, W>(),
                ) {
                    prop_assert_eq!(a.row_sums(), &a * &Matrix::<i64, W, 1>::ones());
                    assert_close(&f.row_sums(), &(&f * &Matrix::<f64, W, 1>::ones()))?;
                }

                #[test]
                fn sum_is_the_sum_of_the_row_sums_and_of_the_column_sums(a in int_matrix::<H, W>()) {
                    let total: i64 = a.as_slice().iter().sum();
                    prop_assert_eq!(a.sum(), total);
                    prop_assert_eq!(a.row_sums().sum(), total);
                    prop_assert_eq!(a.column_sums().sum(), total);
                }

                #[test]
                fn row_broadcast_add_equals_adding_an_explicitly_repeated_row(
                    a in int_matrix::<H, W>(),
                    row in int_matrix::<1, W>(),
                    f in float_matrix::<H, W>(),
                    frow in float_matrix::<1, W>(),
                ) {
                    let repeated = Matrix::<i64, H, W>::from_fn(|_, c| row[(0, c)]);
                    prop_assert_eq!(&row.broadcast_row::<H>(), &repeated);
                    let expected = &a + &repeated;
                    prop_assert_eq!(&a.add_row_broadcast(&row), &expected);
                    let mut in_place = a.clone();
                    in_place.add_row_broadcast_assign(&row);
                    prop_assert_eq!(&in_place, &expected);

                    let frepeated = Matrix::<f64, H, W>::from_fn(|_, c| frow[(0, c)]);
                    // One addition per element on both sides: exact.
                    prop_assert_eq!(f.add_row_broadcast(&frow), &f + &frepeated);
                }

                #[test]
                fn column_broadcast_add_equals_adding_an_explicitly_repeated_column(
                    a in int_matrix::<H, W>(),
                    column in int_matrix::<H, 1>(),
                    f in float_matrix::<H, W>(),
                    fcolumn in float_matrix::<H, 1>(),
                ) {
                    let repeated = Matrix::<i64, H, W>::from_fn(|r, _| column[(r, 0)]);
                    prop_assert_eq!(&column.broadcast_column::<W>(), &repeated);
                    let expected = &a + &repeated;
                    prop_assert_eq!(&a.add_column_broadcast(&column), &expected);
                    let mut in_place = a.clone();
                    in_place.add_column_broadcast_assign(&column);
                    prop_assert_eq!(&in_place, &expected);

                    let frepeated = Matrix::<f64, H, W>::from_fn(|r, _| fcolumn[(r, 0)]);
                    prop_assert_eq!(f.add_column_broadcast(&fcolumn), &f + &frepeated);
                }
            }
        }
    };
}

product_properties!(shape_1x1x1, 1, 1, 1);
product_properties!(shape_3x5x7, 3, 5, 7);
product_properties!(shape_17x13x9, 17, 13, 9);
product_properties!(shape_33x1x65, 33, 1, 65);
product_properties!(shape_8x16x4, 8, 16, 4);
product_properties!(shape_2x0x3, 2, 0, 3);

/// Reshape `H x W -> H2 x W2 -> H x W`.
macro_rules! reshape_properties {
    ($name:ident, $h:literal x $w:literal => $h2:literal x $w2:literal) => {
        mod $name {
            use super::*;

            const H: usize = $h;
            const W: usize = $w;
            const H2: usize = $h2;
            const W2: usize = $w2;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn reshape_keeps_the_row_major_order_and_round_trips(a in int_matrix::<H, W>()) {
                    let flat: Vec<i64> = a.as_slice().to_vec();
                    let reshaped: Matrix<i64, H2, W2> = a.clone().reshape();
                    prop_assert_eq!(reshaped.as_slice(), &flat[..]);
                    // Element (r, c) of the new shape is flat element r * W2 + c.
                    for (r, row) in reshaped.rows().enumerate() {
                        for (c, &x) in row.iter().enumerate() {
                            prop_assert_eq!(x, flat[r * W2 + c]);
                        }
                    }
                    let back: Matrix<i64, H, W> = reshaped.reshape();
                    prop_assert_eq!(back, a);
                }
            }
        }
    };
}

reshape_properties!(reshape_1x1, 1 x 1 => 1 x 1);
reshape_properties!(reshape_3x5, 3 x 5 => 5 x 3);
reshape_properties!(reshape_3x5_column, 3 x 5 => 15 x 1);
reshape_properties!(reshape_17x13, 17 x 13 => 1 x 221);
reshape_properties!(reshape_33x65, 33 x 65 => 65 x 33);
reshape_properties!(reshape_12x10, 12 x 10 => 8 x 15);
reshape_properties!(reshape_0x4, 0 x 4 => 2 x 0);

/// Concatenation and splitting for parts `H x W1` and `H x W2` (columns) or `H1 x W` and `H2 x W`
/// (rows), with `W1 + W2 = W3` and `H1 + H2 = H3`.
macro_rules! concat_properties {
    ($name:ident, h = $h:literal, w1 = $w1:literal, w2 = $w2:literal, w3 = $w3:literal) => {
        mod $name {
            use super::*;

            const H: usize = $h;
            const W1: usize = $w1;
            const W2: usize = $w2;
            const W3: usize = $w3;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn concat_columns_then_split_columns_gives_back_the_parts(
                    left in int_matrix::<H, W1>(),
                    right in int_matrix::<H, W2>(),
                ) {
                    let joined: Matrix<i64, H, W3> = left.concat_columns(&right);
                    for r in 0..H {
                        for c in 0..W3 {
                            let expected = if c < W1 { left[(r, c)] } else { right[(r, c - W1)] };
                            prop_assert_eq!(joined[(r, c)], expected);
                        }
                    }
                    let (l, rt): (Matrix<i64, H, W1>, Matrix<i64, H, W2>) = joined.split_columns();
                    prop_assert_eq!(l, left);
                    prop_assert_eq!(rt, right);
                }

                #[test]
                fn concat_rows_then_split_rows_gives_back_the_parts(
                    // Rows: the parts are W1 x H and W2 x H, joined into W3 x H.
                    top in int_matrix::<W1, H>(),
                    bottom in int_matrix::<W2, H>(),
                ) {
                    let joined: Matrix<i64, W3, H> = top.concat_rows(&bottom);
                    let mut expected = top.as_slice().to_vec();
                    expected.extend_from_slice(bottom.as_slice());
                    prop_assert_eq!(joined.as_slice(), &expected[..]);
                    let (t, b): (Matrix<i64, W1, H>, Matrix<i64, W2, H>) = joined.split_rows();
                    prop_assert_eq!(t, top);
                    prop_assert_eq!(b, bottom);
                }

                #[test]
                fn split_then_concat_gives_back_the_whole(
                    whole in int_matrix::<H, W3>(),
                    tall in int_matrix::<W3, H>(),
                ) {
                    let (l, r): (Matrix<i64, H, W1>, Matrix<i64, H, W2>) = whole.split_columns();
                    prop_assert_eq!(l.concat_columns::<W2, W3>(&r), whole);
                    let (t, b): (Matrix<i64, W1, H>, Matrix<i64, W2, H>) = tall.split_rows();
                    prop_assert_eq!(t.concat_rows::<W2, W3>(&b), tall);
                }
            }
        }
    };
}

concat_properties!(concat_1_1_0, h = 1, w1 = 1, w2 = 0, w3 = 1);
concat_properties!(concat_3_5_7, h = 3, w1 = 5, w2 = 7, w3 = 12);
concat_properties!(concat_17_13_9, h = 17, w1 = 13, w2 = 9, w3 = 22);
concat_properties!(concat_33_1_65, h = 33, w1 = 1, w2 = 65, w3 = 66);
concat_properties!(concat_2_0_3, h = 2, w1 = 0, w2 = 3, w3 = 3);
