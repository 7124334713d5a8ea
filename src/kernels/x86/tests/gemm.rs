//! The matrix products against their definition, every layout, edge and instruction set.

use super::*;

/// The textbook definition, in f64, independent of both kernel families.
fn expected(layout: Layout, m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    let a_at = |i: usize, p: usize| match layout {
        Layout::TransposeLhs => a[p * m + i],
        _ => a[i * k + p],
    };
    let b_at = |p: usize, j: usize| match layout {
        Layout::TransposeRhs => b[j * k + p],
        _ => b[p * n + j],
    };
    let mut c = std::vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a_at(i, p) * b_at(p, j)).sum();
        }
    }
    c
}

/// Shapes that hit full tiles, every edge case of both tile kinds, `k` across block and
/// vector boundaries, and empty dimensions.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (3, 5, 7),
    (8, 32, 16),
    (9, 33, 17),
    (17, 13, 129),
    (6, 16, 300),
    (64, 128, 784),
    (13, 70, 5),
    (4, 4, 0),
    (0, 5, 3),
    (5, 0, 3),
    (1, 10, 64),
    // Packed A·Bᵀ (32 rows or more) with edge columns and k across a block boundary.
    (37, 45, 300),
    (1, 130, 784),
    // Matrix-vector products whose width leaves every remainder after tiles of 8 and 4.
    (1, 5, 9),
    (1, 6, 17),
    (1, 7, 3),
    (1, 13, 300),
    // An empty inner dimension with outputs wider and taller than a tile.
    (40, 100, 0),
];

fn check<E: Copy + Into<f64>>(
    run: impl Fn(Layout, usize, usize, usize, &[E], &[E], &mut [E], bool),
    from: impl Fn(f64) -> E,
    tolerance: f64,
) {
    for layout in [Layout::Plain, Layout::TransposeLhs, Layout::TransposeRhs] {
        for &(m, n, k) in SHAPES {
            let a64 = values(m * k, 1 + m as u64);
            let b64 = values(k * n, 2 + n as u64);
            let start64 = values(m * n, 3 + k as u64);
            let (a, b): (Vec<E>, Vec<E>) = (
                a64.iter().map(|&x| from(x)).collect(),
                b64.iter().map(|&x| from(x)).collect(),
            );
            let want = expected(layout, m, n, k, &a64, &b64);
            for accumulate in [false, true] {
                // Stale contents must be overwritten (or added to, when accumulating).
                let mut c: Vec<E> = start64.iter().map(|&x| from(x)).collect();
                run(layout, m, n, k, &a, &b, &mut c, accumulate);
                for (idx, (&got, &w)) in c.iter().zip(&want).enumerate() {
                    let w = if accumulate { w + start64[idx] } else { w };
                    let got: f64 = got.into();
                    let bound = tolerance * (1.0 + k as f64).sqrt() * (1.0 + w.abs());
                    assert!(
                        (got - w).abs() <= bound,
                        "{layout:?} {m}x{n}x{k} accumulate={accumulate}: element {idx} is \
                         {got}, expected {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_available_instruction_set_matches_the_definition_in_f32() {
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        check::<f32>(
            |l, m, n, k, a, b, c, acc| gemm(isa, l, m, n, k, a, b, c, acc),
            |x| x as f32,
            1e-6,
        );
    }
}

#[test]
fn every_available_instruction_set_matches_the_definition_in_f64() {
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        check::<f64>(
            |l, m, n, k, a, b, c, acc| gemm(isa, l, m, n, k, a, b, c, acc),
            |x| x,
            1e-13,
        );
    }
}

/// `C (+)= A·Bᵀ` with `B` at `offset` elements past a 64-byte boundary, `C` starting as
/// `start`.
fn product_with_rhs_at<E: Element>(
    isa: Isa,
    (m, n, k): (usize, usize, usize),
    (a, b): (&[E], &[E]),
    (start, accumulate): (&[E], bool),
    offset: usize,
) -> Vec<E> {
    let mut storage = std::vec![E::default(); b.len() + 64];
    let at = storage.as_ptr().align_offset(64) + offset;
    storage[at..at + b.len()].copy_from_slice(b);
    let mut c = start.to_vec();
    let b = &storage[at..at + b.len()];
    gemm(isa, Layout::TransposeRhs, m, n, k, a, b, &mut c, accumulate);
    c
}

/// Values whose sums depend on their order (magnitudes from 2^-24 to 2^24, both signs),
/// `B`'s first row with NaNs of different payloads (which one a sum keeps depends on the
/// order too), its second row products that underflow to `-0.0` (a lane that adds a `+0.0`
/// turns the sum into `+0.0`).
fn order_sensitive<E: Copy>(
    (m, n, k): (usize, usize, usize),
    seed: u64,
    from: impl Fn(f64) -> E,
    nan: impl Fn(u32) -> E,
    tiny: f64,
) -> (Vec<E>, Vec<E>) {
    let mut next = xorshift(seed);
    let mut value = || {
        let r = next();
        let magnitude =
            2.0_f64.powi((r % 49) as i32 - 24) * (1.0 + (r >> 8) as f64 / 2.0_f64.powi(56));
        if r & 1 << 7 == 0 {
            magnitude
        } else {
            -magnitude
        }
    };
    let mut a: Vec<E> = (0..m * k).map(|_| from(value())).collect();
    let mut b: Vec<E> = (0..n * k).map(|_| from(value())).collect();
    for (p, v) in b[..k].iter_mut().enumerate() {
        if p % 3 == 1 {
            *v = nan(p as u32 + 1);
        }
    }
    if n > 1 {
        for p in 0..k {
            b[k + p] = from(-tiny);
        }
        for v in &mut a[..k] {
            *v = from(tiny);
        }
    }
    (a, b)
}

/// `got` (`C` after `C (+)= A·Bᵀ`, one row of `A` per row of `C`) against the definition
/// in `f64`: a NaN where a NaN is due, else within `tolerance` of the sum of the products'
/// magnitudes (the values' sums cancel), plus `smallest`, the element type's smallest
/// normal value (for products that underflow in it).
fn assert_near_definition(
    (m, n, k): (usize, usize, usize),
    (a, b, start): (&[f64], &[f64], &[f64]),
    accumulate: bool,
    got: &[f64],
    (tolerance, smallest): (f64, f64),
    what: &str,
) {
    let sums = expected(Layout::TransposeRhs, m, n, k, a, b);
    for i in 0..m {
        for j in 0..n {
            let base = if accumulate { start[i * n + j] } else { 0.0 };
            let want = base + sums[i * n + j];
            let magnitudes = (0..k).map(|p| (a[i * k + p] * b[j * k + p]).abs());
            let scale = magnitudes.fold(base.abs(), |s, v| s + v);
            let got = got[i * n + j];
            assert!(
                if want.is_nan() {
                    got.is_nan()
                } else {
                    (got - want).abs() <= tolerance * scale + smallest
                },
                "{what}: C[{i}][{j}] is {got}, expected {want}"
            );
        }
    }
}

/// One element type's part of the test below: `C (+)= A·Bᵀ` for `dims` (values from
/// [`order_sensitive`]) near the definition, its underflowing row `-0.0`, and the same bits
/// with `B` at every offset from a 64-byte boundary.
#[allow(clippy::type_complexity)]
fn check_matvec_at_every_offset<E: Element>(
    isa: Isa,
    (dims, seed): ((usize, usize, usize), u64),
    (from, nan, tiny): (&dyn Fn(f64) -> E, &dyn Fn(u32) -> E, f64),
    (widen, bits): (&dyn Fn(E) -> f64, &dyn Fn(E) -> u64),
    tolerance: (f64, f64),
) {
    let (m, n, k) = dims;
    let (a, b) = order_sensitive(dims, seed, from, nan, tiny);
    let start: Vec<E> = (0..m * n).map(|i| from(i as f64 - 3.5)).collect();
    let wide = |v: &[E]| v.iter().map(|&x| widen(x)).collect::<Vec<_>>();
    let lanes = lanes_of::<E>(isa);
    for accumulate in [false, true] {
        let what = std::format!("{isa:?} {dims:?}, accumulate {accumulate}");
        let run = |offset| {
            let c = product_with_rhs_at(isa, dims, (&a, &b), (&start, accumulate), offset);
            c.into_iter().map(bits).collect::<Vec<u64>>()
        };
        let aligned = run(0);
        let mut c = start.clone();
        gemm(
            isa,
            Layout::TransposeRhs,
            m,
            n,
            k,
            &a,
            &b,
            &mut c,
            accumulate,
        );
        let c_bits: Vec<u64> = c.iter().map(|&v| bits(v)).collect();
        assert_eq!(c_bits, aligned, "{what}, B where the allocator put it");
        let operands = (&wide(&a)[..], &wide(&b)[..], &wide(&start)[..]);
        assert_near_definition(dims, operands, accumulate, &wide(&c), tolerance, &what);
        if n > 1 && !accumulate {
            // The underflowing row's sum is -0.0.
            assert_eq!(aligned[1], bits(from(-0.0)), "{what}");
        }
        for offset in 1..lanes {
            assert_eq!(run(offset), aligned, "{what}, B {offset} past a line");
        }
    }
}

#[test]
fn matrix_vector_products_do_not_depend_on_where_the_matrix_lies() {
    // Rows a whole number of vectors long take the aligned loop from any starting lane; one
    // row of A (and, with AVX2's tiles of 2 rows, the third of 3) is a matrix-vector
    // product. Every tile width (8, 4, and 1-3 rows of B), C written and added to.
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        for m in [1, 3] {
            for n in [1, 2, 3, 4, 7, 8, 13, 20] {
                for vectors in [1, 2, 25] {
                    let dims = (m, n, vectors * lanes_of::<f32>(isa));
                    check_matvec_at_every_offset::<f32>(
                        isa,
                        (dims, 7 + n as u64),
                        (&|v| v as f32, &|p| f32::from_bits(0x7fc0_0000 | p), 1e-30),
                        (&f64::from, &|v| u64::from(v.to_bits())),
                        (1e-6, f64::from(f32::MIN_POSITIVE)),
                    );
                    let dims = (m, n, vectors * lanes_of::<f64>(isa));
                    check_matvec_at_every_offset::<f64>(
                        isa,
                        (dims, 9 + n as u64),
                        (
                            &|v| v,
                            &|p| f64::from_bits(0x7ff8_0000_0000_0000 | u64::from(p)),
                            1e-200,
                        ),
                        (&|v| v, &f64::to_bits),
                        (1e-14, f64::MIN_POSITIVE),
                    );
                }
            }
        }
    }
}

#[cfg(feature = "threads")]
#[test]
fn splitting_across_threads_gives_the_same_bits() {
    let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
    // Above the split threshold (2^24 multiply-adds). With 2 threads the 64 rows split into
    // 48 + 16: the 16-row chunk alone is below the packing threshold, so this catches a path
    // chosen per chunk instead of per product.
    let (m, n, k) = (64, 512, 600);
    let a: Vec<f32> = values(m * k, 7).iter().map(|&x| x as f32).collect();
    let b: Vec<f32> = values(k * n, 8).iter().map(|&x| x as f32).collect();
    for layout in [Layout::Plain, Layout::TransposeLhs, Layout::TransposeRhs] {
        let run_with = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool");
            let mut c = std::vec![0.0_f32; m * n];
            pool.install(|| gemm(isa, layout, m, n, k, &a, &b, &mut c, false));
            c
        };
        let one = run_with(1);
        for threads in [2, 3] {
            let many = run_with(threads);
            assert!(
                one.iter()
                    .zip(&many)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{layout:?} with {threads} threads differs from one thread"
            );
        }
    }
}

#[test]
#[should_panic(expected = "do not fit")]
fn wrong_lengths_are_refused_before_any_access() {
    let isa = detected_isa().expect("this test needs AVX2 or AVX-512");
    let mut c = [0.0_f32; 4];
    gemm::<f32>(
        isa,
        Layout::Plain,
        2,
        2,
        2,
        &[0.0; 3],
        &[0.0; 4],
        &mut c,
        false,
    );
}
