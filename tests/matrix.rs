//! Behaviour tests of the `Matrix` API, written once and run for every element type.
//!
//! `common_tests!` runs for `f32`, `f64`, `i32`, `i64` and `u8` with small non-negative values;
//! `signed_tests!` adds negation and negative values for `f32`, `f64`, `i32`, `i64`;
//! `integer_tests!` and `float_tests!` hold what differs between the two (`Debug` text, truncating
//! means, NaN handling, `Display` precision).

use constmat::{LengthError, Matrix, Scalar};

/// The textbook triple loop through indexing, independent of the kernels.
fn naive_mul<T: Scalar, const H: usize, const K: usize, const W: usize>(
    a: &Matrix<T, H, K>,
    b: &Matrix<T, K, W>,
) -> Matrix<T, H, W> {
    Matrix::from_fn(|i, j| {
        let mut acc = T::zero();
        for k in 0..K {
            acc += a[(i, k)] * b[(k, j)];
        }
        acc
    })
}

/// The elements of `m`, row by row, read through `get` (not `as_slice`).
fn elements<T: Scalar, const H: usize, const W: usize>(m: &Matrix<T, H, W>) -> Vec<T> {
    let mut out = Vec::new();
    for r in 0..H {
        for c in 0..W {
            out.push(*m.get(r, c).unwrap());
        }
    }
    out
}

macro_rules! common_tests {
    ($module:ident, $t:ty) => {
        mod $module {
            use super::*;
            #[cfg(feature = "rand")]
            use rand::distr::{Distribution, Uniform};
            #[cfg(feature = "rand")]
            use rand::{SeedableRng, rngs::StdRng};

            type T = $t;

            /// A small number as the element type.
            fn v(x: u8) -> T {
                T::from(x)
            }

            fn vs<const N: usize>(xs: [u8; N]) -> Vec<T> {
                xs.iter().map(|&x| v(x)).collect()
            }

            /// [[1, 2, 3], [4, 5, 6]]
            fn m23() -> Matrix<T, 2, 3> {
                Matrix::from_rows([[v(1), v(2), v(3)], [v(4), v(5), v(6)]])
            }

            /// [[1, 0], [2, 1], [0, 3]]
            fn m32() -> Matrix<T, 3, 2> {
                Matrix::from_rows([[v(1), v(0)], [v(2), v(1)], [v(0), v(3)]])
            }

            // ---- constructors ----

            #[test]
            fn zeros_ones_and_filled_set_every_element() {
                let z = Matrix::<T, 3, 4>::zeros();
                let o = Matrix::<T, 3, 4>::ones();
                let f = Matrix::<T, 3, 4>::filled(v(7));
                assert_eq!(z.as_slice(), &[v(0); 12]);
                assert_eq!(o.as_slice(), &[v(1); 12]);
                assert_eq!(f.as_slice(), &[v(7); 12]);
                assert_eq!(elements(&f), vec![v(7); 12]);
            }

            #[test]
            fn shape_constants_are_the_type_parameters() {
                assert_eq!(Matrix::<T, 3, 4>::ROWS, 3);
                assert_eq!(Matrix::<T, 3, 4>::COLS, 4);
                assert_eq!(Matrix::<T, 3, 4>::LEN, 12);
                assert_eq!(Matrix::<T, 0, 5>::LEN, 0);
            }

            #[test]
            fn identity_has_ones_on_the_diagonal_and_zeros_elsewhere() {
                let i = Matrix::<T, 4, 4>::identity();
                for r in 0..4 {
                    for c in 0..4 {
                        assert_eq!(i[(r, c)], if r == c { v(1) } else { v(0) }, "({r}, {c})");
                    }
                }
                assert_eq!(Matrix::<T, 1, 1>::identity().as_slice(), &[v(1)]);
            }

            #[test]
            fn from_rows_is_row_major() {
                let m = m23();
                assert_eq!(m.as_slice(), &vs([1, 2, 3, 4, 5, 6])[..]);
                assert_eq!(m[(0, 2)], v(3));
                assert_eq!(m[(1, 0)], v(4));
            }

            #[test]
            fn from_fn_gets_each_position_once_in_row_major_order() {
                let mut calls = Vec::new();
                let m = Matrix::<T, 3, 2>::from_fn(|r, c| {
                    calls.push((r, c));
                    v(u8::try_from(10 * r + c).unwrap())
                });
                assert_eq!(calls, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
                assert_eq!(m.as_slice(), &vs([0, 1, 10, 11, 20, 21])[..]);
            }

            #[test]
            fn from_slice_and_from_vec_take_exactly_h_times_w_elements() {
                let data = vs([1, 2, 3, 4, 5, 6]);
                let a = Matrix::<T, 2, 3>::from_slice(&data).unwrap();
                let b = Matrix::<T, 2, 3>::from_vec(data.clone()).unwrap();
                let c = Matrix::<T, 3, 2>::from_slice(&data).unwrap();
                assert_eq!(a, m23());
                assert_eq!(b, m23());
                assert_eq!(
                    c[(1, 0)],
                    v(3),
                    "the same data as 3x2 is read row-major too"
                );
            }

            #[test]
            fn from_slice_too_short_is_an_error_with_a_message() {
                let err = Matrix::<T, 2, 3>::from_slice(&vs([1, 2, 3, 4, 5])).unwrap_err();
                assert_eq!(
                    err,
                    LengthError {
                        rows: 2,
                        cols: 3,
                        found: 5
                    }
                );
                assert_eq!(err.expected(), 6);
                assert_eq!(
                    err.to_string(),
                    "expected 6 elements for a 2x3 matrix, found 5"
                );
            }

            #[test]
            fn from_slice_too_long_is_an_error() {
                let err = Matrix::<T, 2, 3>::from_slice(&vs([1, 2, 3, 4, 5, 6, 7])).unwrap_err();
                assert_eq!(err.found, 7);
                assert_eq!(
                    err.to_string(),
                    "expected 6 elements for a 2x3 matrix, found 7"
                );
                assert!(Matrix::<T, 2, 3>::from_slice(&[]).is_err());
            }

            #[test]
            fn from_vec_wrong_length_is_an_error_with_a_message() {
                let short = Matrix::<T, 2, 3>::from_vec(vs([1, 2, 3, 4, 5])).unwrap_err();
                assert_eq!(
                    short.to_string(),
                    "expected 6 elements for a 2x3 matrix, found 5"
                );
                let long = Matrix::<T, 2, 3>::from_vec(vec![v(0); 12]).unwrap_err();
                assert_eq!(
                    long.to_string(),
                    "expected 6 elements for a 2x3 matrix, found 12"
                );
                let e: Box<dyn std::error::Error> = Box::new(long);
                assert_eq!(
                    e.to_string(),
                    "expected 6 elements for a 2x3 matrix, found 12"
                );
            }

            #[cfg(feature = "rand")]
            #[test]
            fn random_draws_row_major_from_the_distribution_with_the_given_rng() {
                let dist = Uniform::new(v(0), v(10)).unwrap();
                let m = Matrix::<T, 3, 4>::random(&dist, &mut StdRng::seed_from_u64(42));
                // The same draws, one by one, in row-major order.
                let mut rng = StdRng::seed_from_u64(42);
                let expected: Vec<T> = (0..12).map(|_| dist.sample(&mut rng)).collect();
                assert_eq!(m.as_slice(), &expected[..]);
                assert!(m.iter().all(|&x| x >= v(0) && x < v(10)));
                let again = Matrix::<T, 3, 4>::random(&dist, &mut StdRng::seed_from_u64(42));
                assert_eq!(again, m, "same seed, same matrix");
                let other = Matrix::<T, 3, 4>::random(&dist, &mut StdRng::seed_from_u64(43));
                assert_ne!(other, m, "another seed, another matrix");
            }

            #[test]
            fn default_is_zeros() {
                assert_eq!(Matrix::<T, 2, 5>::default(), Matrix::filled(v(0)));
            }

            // ---- access ----

            #[test]
            fn index_reads_and_index_mut_writes_one_element() {
                let mut m = m23();
                assert_eq!(m[(1, 2)], v(6));
                m[(1, 2)] = v(60);
                m[(0, 0)] = v(10);
                assert_eq!(m.as_slice(), &vs([10, 2, 3, 4, 5, 60])[..]);
            }

            #[test]
            #[should_panic(expected = "index (2, 0) out of bounds for a 2x3 matrix")]
            fn index_past_the_last_row_panics() {
                std::hint::black_box(m23()[(2, 0)]);
            }

            #[test]
            #[should_panic(expected = "index (0, 3) out of bounds for a 2x3 matrix")]
            fn index_past_the_last_column_panics() {
                std::hint::black_box(m23()[(0, 3)]);
            }

            #[test]
            #[should_panic(expected = "index (2, 0) out of bounds for a 2x3 matrix")]
            fn index_mut_out_of_bounds_panics() {
                let mut m = m23();
                m[(2, 0)] = v(1);
            }

            #[test]
            fn get_and_get_mut_are_none_out_of_bounds() {
                let mut m = m23();
                assert_eq!(m.get(1, 1), Some(&v(5)));
                assert_eq!(m.get(2, 0), None);
                assert_eq!(m.get(0, 3), None);
                assert_eq!(m.get(usize::MAX, usize::MAX), None);
                assert!(m.get_mut(2, 0).is_none());
                assert!(m.get_mut(0, 3).is_none());
                *m.get_mut(0, 1).unwrap() = v(9);
                assert_eq!(m.as_slice(), &vs([1, 9, 3, 4, 5, 6])[..]);
            }

            #[test]
            fn row_access_and_row_iterators() {
                let mut m = m23();
                assert_eq!(m.row(0), Some(&[v(1), v(2), v(3)]));
                assert_eq!(m.row(1), Some(&[v(4), v(5), v(6)]));
                assert_eq!(m.row(2), None);
                assert!(m.row_mut(2).is_none());
                m.row_mut(0).unwrap()[2] = v(30);
                assert_eq!(m[(0, 2)], v(30));

                let rows: Vec<[T; 3]> = m.rows().copied().collect();
                assert_eq!(rows, [[v(1), v(2), v(30)], [v(4), v(5), v(6)]]);
                assert_eq!(m.rows().len(), 2);
                for row in m.rows_mut() {
                    row[0] = v(0);
                }
                assert_eq!(m.as_slice(), &vs([0, 2, 30, 0, 5, 6])[..]);
            }

            #[test]
            fn column_iterates_top_to_bottom_and_is_none_past_the_width() {
                let m = m23();
                for c in 0..3 {
                    let col = m.column(c).unwrap();
                    assert_eq!(col.len(), 2);
                    let col: Vec<T> = col.copied().collect();
                    assert_eq!(col, [m[(0, c)], m[(1, c)]]);
                }
                let col: Vec<T> = m.column(1).unwrap().copied().collect();
                assert_eq!(col, vs([2, 5]));
                assert!(m.column(3).is_none());
            }

            #[test]
            fn element_iterators_are_row_major() {
                let mut m = m23();
                let all: Vec<T> = m.iter().copied().collect();
                assert_eq!(all, vs([1, 2, 3, 4, 5, 6]));
                let via_into_iter: Vec<T> = IntoIterator::into_iter(&m).copied().collect();
                assert_eq!(via_into_iter, all);
                let mut seen = Vec::new();
                for x in &m {
                    seen.push(*x);
                }
                assert_eq!(seen, all);
                for (i, x) in m.iter_mut().enumerate() {
                    *x = v(u8::try_from(i).unwrap() * 2);
                }
                assert_eq!(m.as_slice(), &vs([0, 2, 4, 6, 8, 10])[..]);
            }

            #[test]
            fn array_and_slice_views_share_the_storage() {
                let mut m = m23();
                assert_eq!(m.as_array(), &[[v(1), v(2), v(3)], [v(4), v(5), v(6)]]);
                let as_ref: &[[T; 3]; 2] = m.as_ref();
                assert_eq!(as_ref[1][2], v(6));
                m.as_array_mut()[1][0] = v(40);
                m.as_mut_slice()[1] = v(20);
                let as_mut: &mut [[T; 3]; 2] = m.as_mut();
                as_mut[0][2] = v(30);
                assert_eq!(m.as_slice(), &vs([1, 20, 30, 40, 5, 6])[..]);

                let boxed = m.clone().into_boxed_array();
                assert_eq!(*boxed, [[v(1), v(20), v(30)], [v(40), v(5), v(6)]]);
                assert_eq!(Matrix::from_boxed_array(boxed), m);
            }

            #[test]
            fn fill_copy_from_and_clone_from_overwrite_everything() {
                let mut m = m23();
                m.fill(v(8));
                assert_eq!(m, Matrix::filled(v(8)));
                m.copy_from(&m23());
                assert_eq!(m, m23());
                let mut n = Matrix::<T, 2, 3>::filled(v(9));
                n.clone_from(&m23());
                assert_eq!(n, m23());
            }

            #[test]
            fn a_clone_is_independent_of_the_original() {
                let original = m23();
                let mut copy = original.clone();
                assert_eq!(copy, original);
                copy[(0, 0)] = v(100);
                copy.row_mut(1).unwrap()[2] = v(100);
                assert_eq!(original, m23(), "the original is unchanged");
                assert_ne!(copy, original);
                let mut copy2 = original.clone();
                copy2.fill(v(0));
                assert_eq!(original, m23());
            }

            // ---- operators ----

            #[test]
            fn add_and_sub_owned_and_borrowed_are_element_wise() {
                let a = m23();
                let b = Matrix::<T, 2, 3>::from_rows([[v(1), v(1), v(0)], [v(2), v(0), v(3)]]);
                let sum = vs([2, 3, 3, 6, 5, 9]);
                let diff = vs([0, 1, 3, 2, 5, 3]);
                assert_eq!((&a + &b).as_slice(), &sum[..]);
                assert_eq!((a.clone() + b.clone()).as_slice(), &sum[..]);
                assert_eq!((&a - &b).as_slice(), &diff[..]);
                assert_eq!((a.clone() - b.clone()).as_slice(), &diff[..]);
                assert_eq!(a, m23(), "borrowed operators leave the operands alone");
            }

            #[test]
            fn add_assign_and_sub_assign_work_in_place() {
                let mut a = m23();
                let b = Matrix::<T, 2, 3>::filled(v(2));
                a += &b;
                assert_eq!(a.as_slice(), &vs([3, 4, 5, 6, 7, 8])[..]);
                a -= &b;
                assert_eq!(a, m23());
                a -= &Matrix::ones();
                assert_eq!(a.as_slice(), &vs([0, 1, 2, 3, 4, 5])[..]);
            }

            #[test]
            fn mul_owned_and_borrowed_is_the_matrix_product() {
                let a = m23();
                let b = m32();
                // [[1,2,3],[4,5,6]] · [[1,0],[2,1],[0,3]] = [[5, 11], [14, 23]]
                let expected = Matrix::<T, 2, 2>::from_rows([[v(5), v(11)], [v(14), v(23)]]);
                assert_eq!(naive_mul(&a, &b), expected);
                assert_eq!(&a * &b, expected);
                assert_eq!(a.matmul(&b), expected);
                assert_eq!(a.clone() * b.clone(), expected);
                let other_way: Matrix<T, 3, 3> = &b * &a;
                assert_eq!(other_way, naive_mul(&b, &a));
                assert_eq!(other_way[(2, 2)], v(18));
            }

            #[test]
            fn transposed_products_match_the_explicit_transpose() {
                let a = m23(); // 2x3
                let b = m32(); // 3x2
                // aᵀ·bᵀ is 3x3 two ways; a·bᵀ needs b as W x 3.
                let c = Matrix::<T, 4, 3>::from_fn(|r, c| v(u8::try_from(r + c).unwrap()));
                let lhs: Matrix<T, 3, 3> = a.matmul_transpose_lhs(&a);
                assert_eq!(lhs, naive_mul(&a.transpose(), &a));
                let rhs: Matrix<T, 2, 4> = a.matmul_transpose_rhs(&c);
                assert_eq!(rhs, naive_mul(&a, &c.transpose()));
                let lhs2: Matrix<T, 2, 2> = b.matmul_transpose_lhs(&b);
                assert_eq!(lhs2, naive_mul(&b.transpose(), &b));
            }

            #[test]
            fn hadamard_forms_multiply_element_wise() {
                let a = m23();
                let b = Matrix::<T, 2, 3>::from_rows([[v(2), v(0), v(1)], [v(3), v(1), v(2)]]);
                let expected = vs([2, 0, 3, 12, 5, 12]);
                assert_eq!(a.hadamard(&b).as_slice(), &expected[..]);
                let mut c = a.clone();
                c.hadamard_assign(&b);
                assert_eq!(c.as_slice(), &expected[..]);
            }

            #[test]
            fn scale_forms_multiply_every_element() {
                let a = m23();
                assert_eq!(a.scale(v(3)).as_slice(), &vs([3, 6, 9, 12, 15, 18])[..]);
                assert_eq!(a.scale(v(0)), Matrix::zeros());
                let mut b = a.clone();
                b.scale_assign(v(2));
                assert_eq!(b.as_slice(), &vs([2, 4, 6, 8, 10, 12])[..]);
            }

            #[test]
            fn add_scaled_adds_alpha_times_x() {
                let mut a = m23();
                let x = Matrix::<T, 2, 3>::from_rows([[v(1), v(0), v(2)], [v(0), v(3), v(1)]]);
                a.add_scaled(v(2), &x);
                assert_eq!(a.as_slice(), &vs([3, 2, 7, 4, 11, 8])[..]);
            }

            #[test]
            fn map_applies_a_function_and_may_change_the_type() {
                let a = m23();
                let doubled = a.map(|x| x + x);
                assert_eq!(doubled.as_slice(), &vs([2, 4, 6, 8, 10, 12])[..]);
                let even: Matrix<bool, 2, 3> = a.map(|x| x == v(2) || x == v(4) || x == v(6));
                assert_eq!(even.as_slice(), &[false, true, false, true, false, true]);
                let mut b = a.clone();
                b.map_in_place(|x| x * x);
                assert_eq!(b.as_slice(), &vs([1, 4, 9, 16, 25, 36])[..]);
            }

            #[test]
            fn zip_map_combines_positions_and_may_change_the_type() {
                let a = m23();
                let b = Matrix::<T, 2, 3>::from_rows([[v(3), v(2), v(1)], [v(6), v(5), v(4)]]);
                let max = a.zip_map(&b, |x, y| if x > y { x } else { y });
                assert_eq!(max.as_slice(), &vs([3, 2, 3, 6, 5, 6])[..]);
                let greater: Matrix<bool, 2, 3> = a.zip_map(&b, |x, y| x > y);
                assert_eq!(
                    greater.as_slice(),
                    &[false, false, true, false, false, true]
                );
            }

            #[test]
            fn into_forms_overwrite_stale_output() {
                let a = m23();
                let b = Matrix::<T, 2, 3>::from_rows([[v(1), v(1), v(0)], [v(2), v(0), v(3)]]);
                let stale = || Matrix::<T, 2, 3>::filled(v(99));

                let mut out = stale();
                a.add_into(&b, &mut out);
                assert_eq!(out.as_slice(), &vs([2, 3, 3, 6, 5, 9])[..], "add_into");
                let mut out = stale();
                a.sub_into(&b, &mut out);
                assert_eq!(out.as_slice(), &vs([0, 1, 3, 2, 5, 3])[..], "sub_into");
                let mut out = stale();
                a.hadamard_into(&b, &mut out);
                assert_eq!(
                    out.as_slice(),
                    &vs([1, 2, 0, 8, 0, 18])[..],
                    "hadamard_into"
                );
                let mut out = stale();
                a.scale_into(v(2), &mut out);
                assert_eq!(out.as_slice(), &vs([2, 4, 6, 8, 10, 12])[..], "scale_into");
                let mut out = stale();
                a.map_into(&mut out, |x| x + v(1));
                assert_eq!(out.as_slice(), &vs([2, 3, 4, 5, 6, 7])[..], "map_into");
                let mut flags = Matrix::<bool, 2, 3>::filled(true);
                a.map_into(&mut flags, |x| x > v(3));
                assert_eq!(flags.as_slice(), &[false, false, false, true, true, true]);
                let mut out = stale();
                a.zip_map_into(&b, &mut out, |x, y| x * v(10) + y);
                assert_eq!(
                    out.as_slice(),
                    &vs([11, 21, 30, 42, 50, 63])[..],
                    "zip_map_into"
                );

                let mut t = Matrix::<T, 3, 2>::filled(v(99));
                a.transpose_into(&mut t);
                assert_eq!(t.as_slice(), &vs([1, 4, 2, 5, 3, 6])[..], "transpose_into");

                let mut p = Matrix::<T, 2, 2>::filled(v(99));
                a.matmul_into(&m32(), &mut p);
                assert_eq!(p, naive_mul(&a, &m32()), "matmul_into");
                let mut p = Matrix::<T, 3, 3>::filled(v(99));
                a.matmul_transpose_lhs_into(&a, &mut p);
                assert_eq!(
                    p,
                    naive_mul(&a.transpose(), &a),
                    "matmul_transpose_lhs_into"
                );
                let mut p = Matrix::<T, 2, 2>::filled(v(99));
                a.matmul_transpose_rhs_into(&a, &mut p);
                assert_eq!(
                    p,
                    naive_mul(&a, &a.transpose()),
                    "matmul_transpose_rhs_into"
                );

                let mut cs = Matrix::<T, 1, 3>::filled(v(99));
                a.column_sums_into(&mut cs);
                assert_eq!(cs.as_slice(), &vs([5, 7, 9])[..], "column_sums_into");
                let mut rs = Matrix::<T, 2, 1>::filled(v(99));
                a.row_sums_into(&mut rs);
                assert_eq!(rs.as_slice(), &vs([6, 15])[..], "row_sums_into");
                let mut am = Matrix::<usize, 2, 1>::filled(99);
                a.row_argmax_into(&mut am);
                assert_eq!(am.as_slice(), &[2, 2], "row_argmax_into");
            }

            #[test]
            fn accumulate_forms_add_to_the_output() {
                let a = m23();
                let start = Matrix::<T, 2, 2>::from_rows([[v(1), v(2)], [v(3), v(4)]]);

                let mut out = start.clone();
                a.matmul_accumulate_into(&m32(), &mut out);
                assert_eq!(out, &start + &naive_mul(&a, &m32()));

                let mut out = start.clone();
                a.matmul_transpose_rhs_accumulate_into(&a, &mut out);
                assert_eq!(out, &start + &naive_mul(&a, &a.transpose()));

                let b = m32();
                let mut out = start.clone();
                b.matmul_transpose_lhs_accumulate_into(&b, &mut out);
                assert_eq!(out, &start + &naive_mul(&b.transpose(), &b));
            }

            // ---- reductions ----

            #[test]
            fn sums_over_everything_columns_and_rows() {
                let a = m23();
                assert_eq!(a.sum(), v(21));
                let cs: Matrix<T, 1, 3> = a.column_sums();
                assert_eq!(cs.as_slice(), &vs([5, 7, 9])[..]);
                let rs: Matrix<T, 2, 1> = a.row_sums();
                assert_eq!(rs.as_slice(), &vs([6, 15])[..]);
            }

            #[test]
            fn means_are_sums_divided_by_the_count() {
                // Column sums 5, 7, 9 over 2 rows; row sums 6, 15 over 3 columns. The expected
                // values use T's own division, so integers truncate (7 / 2 = 3) and floats do not.
                let a = m23();
                let cm = a.column_means();
                assert_eq!(cm.as_slice(), &[v(5) / v(2), v(7) / v(2), v(9) / v(2)]);
                let rm = a.row_means();
                assert_eq!(rm.as_slice(), &[v(6) / v(3), v(15) / v(3)]);
                assert_eq!(rm.as_slice(), &vs([2, 5])[..]);
            }

            #[test]
            fn row_argmax_finds_the_largest_and_takes_the_first_of_ties() {
                let m = Matrix::<T, 4, 3>::from_rows([
                    [v(1), v(7), v(3)],
                    [v(5), v(5), v(2)],
                    [v(0), v(4), v(4)],
                    [v(9), v(9), v(9)],
                ]);
                assert_eq!(m.row_argmax().as_slice(), &[1, 0, 1, 0]);
                let one_column = Matrix::<T, 2, 1>::from_rows([[v(3)], [v(0)]]);
                assert_eq!(one_column.row_argmax().as_slice(), &[0, 0]);
            }

            // ---- broadcasting ----

            #[test]
            fn column_broadcast_adds_the_column_to_every_column() {
                let a = m23();
                let col = Matrix::<T, 2, 1>::from_rows([[v(10)], [v(20)]]);
                let expected = vs([11, 12, 13, 24, 25, 26]);
                assert_eq!(a.add_column_broadcast(&col).as_slice(), &expected[..]);
                let mut b = a.clone();
                b.add_column_broadcast_assign(&col);
                assert_eq!(b.as_slice(), &expected[..]);
                let repeated: Matrix<T, 2, 3> = col.broadcast_column();
                assert_eq!(repeated.as_slice(), &vs([10, 10, 10, 20, 20, 20])[..]);
            }

            #[test]
            fn row_broadcast_adds_the_row_to_every_row() {
                let a = m23();
                let row = Matrix::<T, 1, 3>::from_rows([[v(10), v(20), v(30)]]);
                let expected = vs([11, 22, 33, 14, 25, 36]);
                assert_eq!(a.add_row_broadcast(&row).as_slice(), &expected[..]);
                let mut b = a.clone();
                b.add_row_broadcast_assign(&row);
                assert_eq!(b.as_slice(), &expected[..]);
                let repeated: Matrix<T, 3, 3> = row.broadcast_row();
                assert_eq!(
                    repeated.as_slice(),
                    &vs([10, 20, 30, 10, 20, 30, 10, 20, 30])[..]
                );
            }

            // ---- structure ----

            #[test]
            fn transpose_swaps_rows_and_columns() {
                let t: Matrix<T, 3, 2> = m23().transpose();
                assert_eq!(t.as_slice(), &vs([1, 4, 2, 5, 3, 6])[..]);
                assert_eq!(t.transpose(), m23());
            }

            #[test]
            fn reshape_concat_split_and_submatrix_move_elements_where_expected() {
                let a = m23();
                let r: Matrix<T, 3, 2> = a.clone().reshape();
                assert_eq!(r.as_slice(), a.as_slice());
                assert_eq!(r[(1, 0)], v(3));
                let flat: Matrix<T, 1, 6> = a.clone().reshape();
                assert_eq!(flat.as_slice(), a.as_slice());

                let right = Matrix::<T, 2, 2>::from_rows([[v(7), v(8)], [v(9), v(0)]]);
                let wide: Matrix<T, 2, 5> = a.concat_columns(&right);
                assert_eq!(wide.as_slice(), &vs([1, 2, 3, 7, 8, 4, 5, 6, 9, 0])[..]);
                let (l, rt): (Matrix<T, 2, 3>, Matrix<T, 2, 2>) = wide.split_columns();
                assert_eq!(l, a);
                assert_eq!(rt, right);

                let tall: Matrix<T, 3, 3> = a.concat_rows(&Matrix::<T, 1, 3>::filled(v(7)));
                assert_eq!(tall.as_slice(), &vs([1, 2, 3, 4, 5, 6, 7, 7, 7])[..]);
                let (top, bottom): (Matrix<T, 1, 3>, Matrix<T, 2, 3>) = tall.split_rows();
                assert_eq!(top.as_slice(), &vs([1, 2, 3])[..]);
                assert_eq!(bottom.as_slice(), &vs([4, 5, 6, 7, 7, 7])[..]);

                let block = tall.submatrix::<1, 1, 2, 2>();
                assert_eq!(block.as_slice(), &vs([5, 6, 7, 7])[..]);
            }

            // ---- formatting ----

            #[test]
            fn display_is_a_grid_with_right_aligned_columns() {
                let m = Matrix::<T, 2, 3>::from_rows([[v(1), v(20), v(3)], [v(100), v(5), v(60)]]);
                assert_eq!(format!("{m}"), "[[  1, 20,  3],\n [100,  5, 60]]");
                let row = Matrix::<T, 1, 3>::from_rows([[v(1), v(2), v(3)]]);
                assert_eq!(row.to_string(), "[[1, 2, 3]]");
                let col = Matrix::<T, 3, 1>::from_rows([[v(1)], [v(22)], [v(3)]]);
                assert_eq!(col.to_string(), "[[ 1],\n [22],\n [ 3]]");
            }

            #[test]
            fn display_elides_dimensions_longer_than_ten() {
                let ten = Matrix::<T, 1, 10>::from_fn(|_, c| v(u8::try_from(c).unwrap()));
                assert_eq!(ten.to_string(), "[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]");
                let eleven = Matrix::<T, 1, 11>::from_fn(|_, c| v(u8::try_from(c).unwrap()));
                assert_eq!(eleven.to_string(), "[[0, 1, 2, 3, …, 7, 8, 9, 10]]");
                let tall = Matrix::<T, 11, 1>::from_fn(|r, _| v(u8::try_from(r).unwrap()));
                assert_eq!(
                    tall.to_string(),
                    "[[ 0],\n [ 1],\n [ 2],\n [ 3],\n [ …],\n [ 7],\n [ 8],\n [ 9],\n [10]]"
                );
            }

            // ---- zero-sized shapes ----

            #[test]
            fn matrices_with_zero_rows_work() {
                let z = Matrix::<T, 0, 3>::zeros();
                assert_eq!(z, Matrix::ones());
                assert_eq!(z, Matrix::from_fn(|_, _| unreachable!("no elements")));
                assert_eq!(z, Matrix::from_rows([]));
                assert_eq!(z, Matrix::from_slice(&[]).unwrap());
                assert_eq!(z, Matrix::<T, 0, 3>::from_vec(Vec::new()).unwrap());
                assert_eq!(
                    Matrix::<T, 0, 3>::from_slice(&[v(1)])
                        .unwrap_err()
                        .to_string(),
                    "expected 0 elements for a 0x3 matrix, found 1"
                );
                assert_eq!(z.iter().count(), 0);
                assert_eq!(z.rows().count(), 0);
                assert!(z.row(0).is_none());
                assert!(z.get(0, 0).is_none());
                assert_eq!(z.column(2).unwrap().count(), 0);
                assert!(z.column(3).is_none());
                assert_eq!(z.clone(), z);
                assert_eq!(z.sum(), v(0));
                assert_eq!(z.column_sums(), Matrix::<T, 1, 3>::zeros());
                assert_eq!(z.row_sums().as_slice().len(), 0);
                assert_eq!(z.row_argmax().as_slice().len(), 0);
                assert_eq!(z.transpose().as_slice().len(), 0);
                assert_eq!((&z + &z).as_slice().len(), 0);
                assert_eq!(z.scale(v(2)).as_slice().len(), 0);
                let p: Matrix<T, 0, 2> = &z * &m32();
                assert_eq!(p.as_slice().len(), 0);
                let g: Matrix<T, 3, 3> = z.matmul_transpose_lhs(&z);
                assert_eq!(g, Matrix::zeros(), "an empty sum is zero");
                let b = z.add_row_broadcast(&Matrix::filled(v(1)));
                assert_eq!(b.as_slice().len(), 0);
                let r: Matrix<T, 3, 0> = z.clone().reshape();
                assert_eq!(r.as_slice().len(), 0);
                assert_eq!(z.to_string(), "[]");
                assert_eq!(format!("{z:?}"), "Matrix<0, 3> []");
            }

            #[test]
            fn matrices_with_zero_columns_work() {
                let z = Matrix::<T, 3, 0>::zeros();
                assert_eq!(z, Matrix::from_rows([[], [], []]));
                assert_eq!(z, Matrix::from_slice(&[]).unwrap());
                assert_eq!(z.iter().count(), 0);
                assert_eq!(z.rows().count(), 3);
                assert_eq!(z.row(2), Some(&[]));
                assert!(z.row(3).is_none());
                assert!(z.get(0, 0).is_none());
                assert!(z.column(0).is_none());
                assert_eq!(z.sum(), v(0));
                assert_eq!(z.row_sums(), Matrix::<T, 3, 1>::zeros());
                assert_eq!(z.column_sums().as_slice().len(), 0);
                assert_eq!(z.row_argmax().as_slice(), &[0, 0, 0]);
                let t: Matrix<T, 0, 3> = z.transpose();
                assert_eq!(t.as_slice().len(), 0);
                // An empty inner dimension: (3x0)(0x2) is a 3x2 matrix of zeros.
                let p: Matrix<T, 3, 2> = &z * &Matrix::<T, 0, 2>::zeros();
                assert_eq!(p, Matrix::zeros());
                let mut stale = Matrix::<T, 3, 2>::filled(v(9));
                z.matmul_into(&Matrix::<T, 0, 2>::zeros(), &mut stale);
                assert_eq!(stale, Matrix::zeros(), "matmul_into clears the output");
                let mut stale = Matrix::<T, 3, 3>::filled(v(9));
                z.matmul_transpose_rhs_into(&z, &mut stale);
                assert_eq!(
                    stale,
                    Matrix::zeros(),
                    "matmul_transpose_rhs_into clears it too"
                );
                let b = z.add_column_broadcast(&Matrix::filled(v(1)));
                assert_eq!(b.as_slice().len(), 0);
                assert_eq!(z.to_string(), "[[],\n [],\n []]");
                assert_eq!(format!("{z:?}"), "Matrix<3, 0> [[], [], []]");
            }

            #[test]
            fn the_empty_square_matrix_works() {
                let i = Matrix::<T, 0, 0>::identity();
                assert_eq!(i, Matrix::zeros());
                assert_eq!(&i * &i, i);
                assert_eq!(i.to_string(), "[]");
            }
        }
    };
}

macro_rules! signed_tests {
    ($module:ident, $t:ty) => {
        mod $module {
            use super::*;

            type T = $t;

            fn v(x: i8) -> T {
                T::from(x)
            }

            fn vs<const N: usize>(xs: [i8; N]) -> Vec<T> {
                xs.iter().map(|&x| v(x)).collect()
            }

            fn mixed() -> Matrix<T, 2, 3> {
                Matrix::from_rows([[v(1), v(-2), v(3)], [v(-4), v(0), v(6)]])
            }

            #[test]
            fn unary_minus_owned_and_borrowed_negates_every_element() {
                let a = mixed();
                let expected = vs([-1, 2, -3, 4, 0, -6]);
                assert_eq!((-&a).as_slice(), &expected[..]);
                assert_eq!((-a.clone()).as_slice(), &expected[..]);
                assert_eq!(-(-a.clone()), a);
                assert_eq!(&a + &(-&a), Matrix::zeros());
            }

            #[test]
            fn subtraction_goes_below_zero() {
                let a = Matrix::<T, 1, 3>::from_rows([[v(1), v(2), v(3)]]);
                let b = Matrix::<T, 1, 3>::from_rows([[v(3), v(2), v(1)]]);
                assert_eq!((&a - &b).as_slice(), &vs([-2, 0, 2])[..]);
                let mut c = a.clone();
                c -= &b;
                c -= &b;
                assert_eq!(c.as_slice(), &vs([-5, -2, 1])[..]);
            }

            #[test]
            fn negative_factors_in_scale_add_scaled_and_products() {
                let a = mixed();
                assert_eq!(a.scale(v(-1)), -&a);
                let mut w = a.clone();
                w.add_scaled(v(-2), &Matrix::ones());
                assert_eq!(w.as_slice(), &vs([-1, -4, 1, -6, -2, 4])[..]);
                let b = Matrix::<T, 3, 2>::from_rows([[v(-1), v(2)], [v(0), v(-3)], [v(5), v(1)]]);
                let p = &a * &b;
                assert_eq!(p, naive_mul(&a, &b));
                // Row 0: [1, -2, 3]·[-1, 0, 5] = 14, [1, -2, 3]·[2, -3, 1] = 11.
                assert_eq!(p.row(0), Some(&[v(14), v(11)]));
            }

            #[test]
            fn row_argmax_handles_negative_rows() {
                let m = Matrix::<T, 3, 3>::from_rows([
                    [v(-3), v(-1), v(-2)],
                    [v(-5), v(-5), v(-5)],
                    [v(-1), v(0), v(-1)],
                ]);
                assert_eq!(m.row_argmax().as_slice(), &[1, 0, 1]);
            }

            #[test]
            fn display_aligns_negative_numbers() {
                let m = Matrix::<T, 2, 2>::from_rows([[v(-1), v(2)], [v(10), v(-20)]]);
                assert_eq!(m.to_string(), "[[-1,   2],\n [10, -20]]");
            }
        }
    };
}

macro_rules! integer_tests {
    ($module:ident, $t:ty) => {
        mod $module {
            use super::*;
            use std::collections::HashSet;

            type T = $t;

            fn v(x: u8) -> T {
                T::from(x)
            }

            #[test]
            fn debug_shows_the_shape_and_every_element() {
                let m = Matrix::<T, 2, 2>::from_rows([[v(1), v(2)], [v(3), v(4)]]);
                assert_eq!(format!("{m:?}"), "Matrix<2, 2> [[1, 2], [3, 4]]");
                assert_eq!(
                    format!("{m:#?}"),
                    "Matrix<2, 2> [\n    [\n        1,\n        2,\n    ],\n    [\n        3,\n        4,\n    ],\n]"
                );
                let big = Matrix::<T, 1, 12>::from_fn(|_, c| v(u8::try_from(c).unwrap()));
                assert_eq!(
                    format!("{big:?}"),
                    "Matrix<1, 12> [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]]",
                    "Debug never elides"
                );
            }

            #[test]
            fn display_ignores_a_precision_for_integers() {
                let m = Matrix::<T, 1, 2>::from_rows([[v(1), v(20)]]);
                assert_eq!(format!("{m:.3}"), "[[1, 20]]");
            }

            #[test]
            fn integer_means_truncate() {
                let m = Matrix::<T, 2, 2>::from_rows([[v(1), v(2)], [v(2), v(6)]]);
                assert_eq!(m.row_means().as_slice(), &[v(1), v(4)]);
                assert_eq!(m.column_means().as_slice(), &[v(1), v(4)]);
            }

            #[test]
            fn equal_matrices_hash_alike() {
                let set: HashSet<Matrix<T, 1, 2>> = [
                    Matrix::from_rows([[v(1), v(2)]]),
                    Matrix::from_rows([[v(1), v(2)]]),
                    Matrix::from_rows([[v(2), v(1)]]),
                ]
                .into_iter()
                .collect();
                assert_eq!(set.len(), 2);
            }
        }
    };
}

macro_rules! float_tests {
    ($module:ident, $t:ident) => {
        mod $module {
            use super::*;
            #[cfg(feature = "rand")]
            use rand::distr::Uniform;
            #[cfg(feature = "rand")]
            use rand::{SeedableRng, rngs::StdRng};

            type T = $t;

            #[test]
            fn debug_shows_the_shape_and_every_element() {
                let m = Matrix::<T, 2, 2>::from_rows([[1.0, -2.5], [0.0, 4.0]]);
                assert_eq!(format!("{m:?}"), "Matrix<2, 2> [[1.0, -2.5], [0.0, 4.0]]");
                assert_eq!(
                    format!("{m:.2?}"),
                    "Matrix<2, 2> [[1.00, -2.50], [0.00, 4.00]]"
                );
            }

            #[test]
            fn display_applies_the_precision_to_every_element() {
                let m = Matrix::<T, 2, 3>::from_rows([[1.0, -2.5, 3.0], [10.0, 0.0, 0.25]]);
                assert_eq!(format!("{m}"), "[[ 1, -2.5,    3],\n [10,    0, 0.25]]");
                assert_eq!(
                    format!("{m:.2}"),
                    "[[ 1.00, -2.50, 3.00],\n [10.00,  0.00, 0.25]]"
                );
                assert_eq!(format!("{m:.0}"), "[[ 1, -2, 3],\n [10,  0, 0]]");
            }

            #[test]
            fn display_shows_nan_and_infinities() {
                let m = Matrix::<T, 1, 3>::from_rows([[T::NAN, T::INFINITY, T::NEG_INFINITY]]);
                assert_eq!(m.to_string(), "[[NaN, inf, -inf]]");
            }

            #[test]
            fn row_argmax_points_at_the_first_nan() {
                let m = Matrix::<T, 4, 3>::from_rows([
                    [1.0, T::NAN, 5.0],
                    [T::NAN, 9.0, T::NAN],
                    [0.5, 0.5, T::NAN],
                    [-1.0, T::NEG_INFINITY, -0.5],
                ]);
                assert_eq!(m.row_argmax().as_slice(), &[1, 0, 2, 2]);
            }

            #[test]
            fn row_argmax_treats_signed_zeros_as_a_tie() {
                let m = Matrix::<T, 1, 2>::from_rows([[-0.0, 0.0]]);
                assert_eq!(m.row_argmax().as_slice(), &[0]);
            }

            #[test]
            fn float_means_do_not_truncate() {
                let m = Matrix::<T, 2, 2>::from_rows([[1.0, 2.0], [2.0, 6.0]]);
                assert_eq!(m.row_means().as_slice(), &[1.5, 4.0]);
                assert_eq!(m.column_means().as_slice(), &[1.5, 4.0]);
            }

            #[test]
            fn means_of_empty_dimensions_are_nan() {
                let no_rows = Matrix::<T, 0, 2>::zeros();
                assert!(no_rows.column_means().iter().all(|x| x.is_nan()));
                let no_cols = Matrix::<T, 2, 0>::zeros();
                assert!(no_cols.row_means().iter().all(|x| x.is_nan()));
                assert_eq!(no_cols.row_means().as_slice().len(), 2);
            }

            #[cfg(feature = "rand")]
            #[test]
            fn random_with_a_seeded_rng_stays_in_range_and_varies() {
                let dist = Uniform::new(-1.0, 1.0).unwrap();
                let m = Matrix::<T, 8, 16>::random(&dist, &mut StdRng::seed_from_u64(7));
                assert!(m.iter().all(|x| (-1.0..1.0).contains(x)));
                assert!(m.iter().any(|&x| x < 0.0) && m.iter().any(|&x| x > 0.0));
                let mean = m.sum() / 128.0;
                assert!(mean.abs() < 0.25, "mean {mean} of 128 draws from U(-1, 1)");
                let first = m[(0, 0)];
                assert!(m.iter().any(|&x| x != first));
                assert_eq!(
                    m,
                    Matrix::<T, 8, 16>::random(&dist, &mut StdRng::seed_from_u64(7)),
                    "reproducible from the seed"
                );
            }

            #[test]
            fn scale_and_hadamard_with_fractions() {
                let a = Matrix::<T, 1, 3>::from_rows([[1.0, -2.0, 0.5]]);
                assert_eq!(a.scale(0.5).as_slice(), &[0.5, -1.0, 0.25]);
                assert_eq!(a.hadamard(&a).as_slice(), &[1.0, 4.0, 0.25]);
                let mut w = Matrix::<T, 1, 3>::ones();
                w.add_scaled(-0.25, &a);
                assert_eq!(w.as_slice(), &[0.75, 1.5, 0.875]);
            }

            #[test]
            fn nan_elements_make_matrices_unequal() {
                let m = Matrix::<T, 1, 1>::from_rows([[T::NAN]]);
                assert_ne!(m, m.clone());
            }
        }
    };
}

common_tests!(common_f32, f32);
common_tests!(common_f64, f64);
common_tests!(common_i32, i32);
common_tests!(common_i64, i64);
common_tests!(common_u8, u8);

signed_tests!(signed_f32, f32);
signed_tests!(signed_f64, f64);
signed_tests!(signed_i32, i32);
signed_tests!(signed_i64, i64);

integer_tests!(integer_i32, i32);
integer_tests!(integer_i64, i64);
integer_tests!(integer_u8, u8);

float_tests!(float_f32, f32);
float_tests!(float_f64, f64);
