//! The matrix products against their definition, every layout, edge and instruction set.

use super::*;

/// The textbook definition, in f64, independent of both kernel families.
fn expected(layout: Product, m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    let a_at = |i: usize, p: usize| match layout {
        Product::TransposeLhs => a[p * m + i],
        _ => a[i * k + p],
    };
    let b_at = |p: usize, j: usize| match layout {
        Product::TransposeRhs => b[j * k + p],
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
    run: impl Fn(Product, usize, usize, usize, &[E], &[E], &mut [E], bool),
    from: impl Fn(f64) -> E,
    tolerance: f64,
) {
    for layout in [Product::Plain, Product::TransposeLhs, Product::TransposeRhs] {
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
    gemm(
        isa,
        Product::TransposeRhs,
        m,
        n,
        k,
        a,
        b,
        &mut c,
        accumulate,
    );
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
    let sums = expected(Product::TransposeRhs, m, n, k, a, b);
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
            Product::TransposeRhs,
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
    for layout in [Product::Plain, Product::TransposeLhs, Product::TransposeRhs] {
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
        Product::Plain,
        2,
        2,
        2,
        &[0.0; 3],
        &[0.0; 4],
        &mut c,
        false,
    );
}

/// `C (+)= op(A)·op(B)` as one chain of fused multiply-adds per element over `p = 0..k` in
/// order, from `C` or from zero: what the packed and outer-product paths compute, bit for bit.
fn fused_chain<E: num_traits::Float>(
    layout: Product,
    (m, n, k): (usize, usize, usize),
    a: &[E],
    b: &[E],
    c: &mut [E],
    accumulate: bool,
) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = if accumulate { c[i * n + j] } else { E::zero() };
            for p in 0..k {
                let x = match layout {
                    Product::TransposeLhs => a[p * m + i],
                    _ => a[i * k + p],
                };
                let y = match layout {
                    Product::TransposeRhs => b[j * k + p],
                    _ => b[p * n + j],
                };
                acc = x.mul_add(y, acc);
            }
            c[i * n + j] = acc;
        }
    }
}

/// Rows `rows` of the product on `path`, whatever path the product's shape would take.
#[allow(clippy::too_many_arguments)]
fn rows_on_path<E: Element>(
    isa: Isa,
    path: Path,
    layout: Product,
    (m, n, k): (usize, usize, usize),
    rows: core::ops::Range<usize>,
    a: &[E],
    b: &[E],
    c: &mut [E],
    accumulate: bool,
) {
    assert!(a.len() == m * k && b.len() == k * n && rows.end <= m && c.len() == rows.len() * n);
    assert!(k > 0 && n > 0 && !rows.is_empty());
    let isa = if E::AVX512 { isa } else { Isa::Avx2Fma };
    assert!(isa_available(isa));
    // SAFETY: the lengths, `k > 0`, the rows and the instruction set checked above, as `gemm`
    // checks them.
    unsafe { E::run_rows(isa, path, layout, m, n, k, rows, a, b, c, accumulate) }
}

fn check_every_path<E: Element + num_traits::Float + core::fmt::Debug>(
    isa: Isa,
    shapes: &[(usize, usize, usize)],
    from: impl Fn(f64) -> E,
    bits: impl Fn(E) -> u64,
) {
    for (s, &(m, n, k)) in shapes.iter().enumerate() {
        let a: Vec<E> = values(m * k, 11 + s as u64)
            .into_iter()
            .map(&from)
            .collect();
        let b: Vec<E> = values(k * n, 12 + s as u64)
            .into_iter()
            .map(&from)
            .collect();
        let c0: Vec<E> = values(m * n, 13 + s as u64)
            .into_iter()
            .map(&from)
            .collect();
        for layout in [Product::Plain, Product::TransposeLhs, Product::TransposeRhs] {
            let unpacked = if layout == Product::TransposeRhs {
                Path::Dot
            } else {
                Path::Outer
            };
            for accumulate in [false, true] {
                let mut want = c0.clone();
                fused_chain(layout, (m, n, k), &a, &b, &mut want, accumulate);
                for path in [Path::Packed, unpacked] {
                    let mut got = c0.clone();
                    if m > 0 && n > 0 && k > 0 {
                        rows_on_path(
                            isa,
                            path,
                            layout,
                            (m, n, k),
                            0..m,
                            &a,
                            &b,
                            &mut got,
                            accumulate,
                        );
                    } else {
                        gemm(isa, layout, m, n, k, &a, &b, &mut got, accumulate);
                    }
                    for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        let same = if path == Path::Dot {
                            // Another order of summation: within rounding.
                            let scale = (k as f64 + 1.0) * 1e-5;
                            (g - w).abs().to_f64().unwrap()
                                <= scale * (1.0 + w.abs().to_f64().unwrap())
                        } else {
                            bits(g) == bits(w)
                        };
                        assert!(
                            same,
                            "{isa:?} {path:?} {layout:?} {m}x{n}x{k} accumulate={accumulate}: \
                             element {idx} is {g:?}, the fused chain {w:?}"
                        );
                    }
                    // Split into row ranges, as the threads split it: the same bits.
                    if m > 1 && n > 0 && k > 0 && path == Path::Packed {
                        let mut parts = c0.clone();
                        let chunk = (m / 3).max(1);
                        for (t, part) in parts.chunks_mut(chunk * n).enumerate() {
                            let rows = t * chunk..t * chunk + part.len() / n;
                            rows_on_path(
                                isa,
                                path,
                                layout,
                                (m, n, k),
                                rows,
                                &a,
                                &b,
                                part,
                                accumulate,
                            );
                        }
                        assert!(
                            parts.iter().zip(&got).all(|(&x, &y)| bits(x) == bits(y)),
                            "{isa:?} {layout:?} {m}x{n}x{k} split by {chunk} rows"
                        );
                    }
                }
            }
        }
    }
}

/// Every path of the products, forced whatever the shape: the packed micro-kernel and the
/// outer-product tiles are the fused chain bit for bit (so a product's bits do not depend on
/// its path, its blocking or its split into rows), the dot-product tiles within rounding; on
/// sizes at every edge of the tiles (6 and 12 rows, 16 and 32 columns), the packed block's
/// column panels and the k blocks (256, fewer for `Aᵀ·B` with many rows).
#[test]
fn every_product_path_is_the_fused_chain_on_every_edge_in_f32() {
    for isa in [Isa::Avx512, Isa::Avx2Fma]
        .into_iter()
        .filter(|&isa| isa_available(isa))
    {
        check_every_path::<f32>(isa, &edge_shapes(), |x| x as f32, |x| x.to_bits().into());
    }
}

/// As [`every_product_path_is_the_fused_chain_on_every_edge_in_f32`] (a test of its own, so
/// that the two run side by side).
#[test]
fn every_product_path_is_the_fused_chain_on_every_edge_in_f64() {
    for isa in [Isa::Avx512, Isa::Avx2Fma]
        .into_iter()
        .filter(|&isa| isa_available(isa))
    {
        check_every_path::<f64>(isa, &edge_shapes(), |x| x, f64::to_bits);
    }
}

/// As [`every_product_path_is_the_fused_chain_on_every_edge_in_f32`], on products of several
/// blocks.
#[test]
fn every_product_path_is_the_fused_chain_on_large_products_in_f32() {
    for isa in [Isa::Avx512, Isa::Avx2Fma]
        .into_iter()
        .filter(|&isa| isa_available(isa))
    {
        check_every_path::<f32>(isa, &large_shapes(), |x| x as f32, |x| x.to_bits().into());
    }
}

/// As [`every_product_path_is_the_fused_chain_on_large_products_in_f32`], in `f64`.
#[test]
fn every_product_path_is_the_fused_chain_on_large_products_in_f64() {
    for isa in [Isa::Avx512, Isa::Avx2Fma]
        .into_iter()
        .filter(|&isa| isa_available(isa))
    {
        check_every_path::<f64>(isa, &large_shapes(), |x| x, f64::to_bits);
    }
}

/// `(m, n, k)` at every edge of the tiles and of the packed block's panels, and empty ones.
fn edge_shapes() -> std::vec::Vec<(usize, usize, usize)> {
    let sizes = [1, 2, 5, 6, 7, 11, 12, 13, 16, 17, 25, 33];
    let ks = [0, 1, 3, 8, 9, 17, 33];
    let mut shapes = std::vec::Vec::new();
    for &m in &sizes {
        for &n in &sizes {
            for &k in &ks {
                shapes.push((m, n, k));
            }
        }
    }
    shapes.extend([(0, 5, 3), (5, 0, 3)]);
    shapes
}

/// `(m, n, k)` of several k blocks (a `k` of 300 is a whole block of 256 and a partial one) and
/// column panels; several k blocks of `Aᵀ·B` with many rows (cut to fit the TLB), and more rows
/// than an L2 row block holds (256 rows of a 256-step block).
fn large_shapes() -> [(usize, usize, usize); 7] {
    [
        (37, 531, 300),
        (130, 200, 300),
        (97, 100, 257),
        (25, 1025, 27),
        (6, 784, 25),
        (600, 24, 200),
        (500, 20, 300),
    ]
}

/// The micro-kernel's masked rows (an edge tile of more rows than the outer-product tiles
/// take) on AVX2, where the entries' 6-row tile never leaves such an edge: an 8-row instance of
/// the packed path, the fused chain bit for bit on edges of 7 rows, every layout.
#[test]
fn avx2s_micro_kernel_masked_rows_are_the_fused_chain() {
    use super::super::gemm_packed::{PACKED_BLOCK_BYTES, gemm_packed};
    if !isa_available(Isa::Avx2Fma) {
        std::eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    const BLOCK: usize = PACKED_BLOCK_BYTES / 4;
    const { assert!(Avx2F32::OUTER_ROWS < 7) };
    let mut edges = 0;
    for (s, &(m, n, k)) in [(7, 16, 5), (15, 33, 17), (23, 5, 300), (8, 17, 1)]
        .iter()
        .enumerate()
    {
        let a: Vec<f32> = values(m * k, 40 + s as u64)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let b: Vec<f32> = values(k * n, 50 + s as u64)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let c0: Vec<f32> = values(m * n, 60 + s as u64)
            .iter()
            .map(|&v| v as f32)
            .collect();
        if m % 8 > Avx2F32::OUTER_ROWS {
            edges += 1;
        }
        for layout in [Product::Plain, Product::TransposeLhs, Product::TransposeRhs] {
            for accumulate in [false, true] {
                let mut want = c0.clone();
                fused_chain(layout, (m, n, k), &a, &b, &mut want, accumulate);
                let mut got = c0.clone();
                // SAFETY: AVX2 and FMA are present (checked above); the slices hold the
                // whole operands and `c` all `m` rows; `k > 0`.
                unsafe {
                    super::super::isa::run_with_avx2(|| {
                        gemm_packed::<Avx2F32, 8, 2, BLOCK>(
                            layout,
                            m,
                            n,
                            k,
                            0..m,
                            &a,
                            &b,
                            &mut got,
                            accumulate,
                        )
                    })
                };
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        w.to_bits(),
                        "{layout:?} {m}x{n}x{k} accumulate={accumulate}: element {i} is {g}, \
                         the fused chain {w}"
                    );
                }
            }
        }
    }
    assert_eq!(edges, 3, "edges of 7 rows");
}
