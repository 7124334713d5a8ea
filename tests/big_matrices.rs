//! Large matrices on a small stack, in a debug build.
//!
//! Every test runs on a thread with a 1 MiB stack. A single `[[f32; 784]; 128]` is 392 KiB, so a
//! few full-size temporaries on the stack (a debug build keeps them all) would overflow it; the
//! matrices must be built in place on the heap. The shapes are those of a dense layer trained on a
//! 64-sample MNIST batch: `X: 64x784`, `W1: 128x784`, `Z = X·W1ᵀ: 64x128`, `dW = dZᵀ·X: 128x784`,
//! `dX = dZ·W1: 64x784`.
//!
//! Inputs are separable, `m[r][c] = u(r) · v(c)` with small integers, so every product has a closed
//! form (`(u ⊗ v)·(s ⊗ t)ᵀ = (v·t) u ⊗ s`) that the tests evaluate with plain loops over vectors.
//! All values are small integers, exact in `f32`.

use std::fmt::Write as _;
use std::thread;

use constmat::Matrix;

const STACK: usize = 1 << 20;

/// Runs `f` on a fresh thread with a 1 MiB stack and re-raises its panic, if any.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    let handle = thread::Builder::new()
        .name("1 MiB stack".into())
        .stack_size(STACK)
        .spawn(f)
        .expect("spawn a thread");
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Small integer patterns that give the separable factors, with some zeros and negatives.
fn u(i: usize) -> f32 {
    (i % 5) as f32 - 2.0 // -2..=2
}
fn v(i: usize) -> f32 {
    (i % 3) as f32 + 1.0 // 1..=3
}
fn s(i: usize) -> f32 {
    (i % 4) as f32 - 1.0 // -1..=2
}
fn t(i: usize) -> f32 {
    ((i * 7) % 5) as f32 // 0..=4
}

/// `Σ_{i < n} f(i) g(i)`, computed directly.
fn dot_of(n: usize, f: fn(usize) -> f32, g: fn(usize) -> f32) -> f32 {
    (0..n).map(|i| f(i) * g(i)).sum()
}

/// A separable matrix `m[r][c] = f(r) g(c)`.
fn outer<const H: usize, const W: usize>(
    f: fn(usize) -> f32,
    g: fn(usize) -> f32,
) -> Matrix<f32, H, W> {
    Matrix::from_fn(|r, c| f(r) * g(c))
}

/// Checks every element of `m` against `expected(r, c)`.
fn assert_every_element<const H: usize, const W: usize>(
    m: &Matrix<f32, H, W>,
    what: &str,
    expected: impl Fn(usize, usize) -> f32,
) {
    for (r, row) in m.rows().enumerate() {
        for (c, &x) in row.iter().enumerate() {
            let e = expected(r, c);
            assert!(x == e, "{what}: element ({r}, {c}) is {x}, expected {e}");
        }
    }
}

#[test]
fn dense_layer_forward_and_backward_products_on_a_1_mib_stack() {
    on_small_stack(|| {
        // X: 64 samples of 784 features; W1: 128 x 784 (out x in).
        let x = outer::<64, 784>(u, v);
        let w1 = outer::<128, 784>(s, t);

        // Forward: Z = X · W1ᵀ, Z[n][j] = u(n) s(j) Σ_p v(p) t(p).
        let vt = dot_of(784, v, t);
        let z: Matrix<f32, 64, 128> = x.matmul_transpose_rhs(&w1);
        assert_every_element(&z, "X·W1ᵀ", |n, j| u(n) * s(j) * vt);
        let mut z_into = Matrix::<f32, 64, 128>::filled(f32::NAN);
        x.matmul_transpose_rhs_into(&w1, &mut z_into);
        assert_eq!(z_into, z, "matmul_transpose_rhs_into overwrites the output");

        // Backward: dZ is an outer product of its own: dZ[n][j] = v(n) t(j).
        let dz = outer::<64, 128>(v, t);

        // dW = dZᵀ · X: dW[j][p] = Σ_n t(j) v(n) u(n) v(p) = t(j) v(p) Σ_n v(n) u(n).
        let vu = dot_of(64, v, u);
        let dw: Matrix<f32, 128, 784> = dz.matmul_transpose_lhs(&x);
        assert_every_element(&dw, "dZᵀ·X", |j, p| t(j) * v(p) * vu);
        let mut dw_into = Matrix::<f32, 128, 784>::filled(-1.0);
        dz.matmul_transpose_lhs_into(&x, &mut dw_into);
        assert_eq!(
            dw_into, dw,
            "matmul_transpose_lhs_into overwrites the output"
        );

        // dX = dZ · W1: dX[n][p] = Σ_j v(n) t(j) s(j) t(p) = v(n) t(p) Σ_j t(j) s(j).
        let ts = dot_of(128, t, s);
        let dx: Matrix<f32, 64, 784> = &dz * &w1;
        assert_every_element(&dx, "dZ·W1", |n, p| v(n) * t(p) * ts);
        let mut dx_into = Matrix::<f32, 64, 784>::filled(7.0);
        dz.matmul_into(&w1, &mut dx_into);
        assert_eq!(dx_into, dx, "matmul_into overwrites the output");
        assert_eq!(dz.matmul(&w1), dx);
    });
}

#[test]
fn products_of_784x128_and_128x784_on_a_1_mib_stack() {
    on_small_stack(|| {
        let a = outer::<784, 128>(u, s); // 784 x 128
        let b = outer::<128, 784>(t, v); // 128 x 784

        // (784x128)(128x784): P[i][j] = u(i) v(j) Σ_k s(k) t(k).
        let st = dot_of(128, s, t);
        let big: Matrix<f32, 784, 784> = &a * &b;
        assert_every_element(&big, "(784x128)(128x784)", |i, j| u(i) * v(j) * st);

        // (128x784)(784x128): Q[i][j] = t(i) s(j) Σ_k v(k) u(k).
        let vu = dot_of(784, v, u);
        let small: Matrix<f32, 128, 128> = b.clone() * a.clone();
        assert_every_element(&small, "(128x784)(784x128)", |i, j| t(i) * s(j) * vu);

        // The transposed forms with big operands: aᵀ·a (128x128) and b·bᵀ (128x128).
        let uu = dot_of(784, u, u);
        let ata: Matrix<f32, 128, 128> = a.matmul_transpose_lhs(&a);
        assert_every_element(&ata, "aᵀ·a", |i, j| s(i) * s(j) * uu);
        let vv = dot_of(784, v, v);
        let bbt: Matrix<f32, 128, 128> = b.matmul_transpose_rhs(&b);
        assert_every_element(&bbt, "b·bᵀ", |i, j| t(i) * t(j) * vv);
    });
}

#[test]
fn allocation_free_forms_clone_and_reshape_on_a_1_mib_stack() {
    on_small_stack(|| {
        let a = Matrix::<f32, 784, 128>::from_fn(|r, c| (r * 128 + c) as f32);
        let b = Matrix::<f32, 784, 128>::from_fn(|r, c| (r % 7) as f32 - (c % 3) as f32);
        assert_eq!(a[(783, 127)], (784 * 128 - 1) as f32);

        let zeros = Matrix::<f32, 784, 128>::zeros();
        assert!(zeros.iter().all(|&x| x == 0.0));
        assert_eq!(zeros.iter().count(), 784 * 128);

        let mut out = Matrix::<f32, 784, 128>::filled(f32::NAN);
        a.add_into(&b, &mut out);
        assert_every_element(&out, "add_into", |r, c| {
            (r * 128 + c) as f32 + ((r % 7) as f32 - (c % 3) as f32)
        });

        let mut out = Matrix::<f32, 784, 128>::filled(f32::NAN);
        b.scale_into(-0.5, &mut out);
        assert_every_element(&out, "scale_into", |r, c| {
            -0.5 * ((r % 7) as f32 - (c % 3) as f32)
        });

        let mut t = Matrix::<f32, 128, 784>::filled(f32::NAN);
        a.transpose_into(&mut t);
        assert_every_element(&t, "transpose_into", |r, c| (c * 128 + r) as f32);
        assert_eq!(a.transpose(), t);

        // A clone is a separate buffer with equal contents.
        let mut copy = a.clone();
        assert_eq!(copy, a);
        copy[(0, 0)] = -1.0;
        assert_eq!(a[(0, 0)], 0.0, "mutating the clone left the original alone");

        // Reshape keeps the row-major order: element (r, c) of the 128x784 view is flat r*784+c.
        let reshaped: Matrix<f32, 128, 784> = a.clone().reshape();
        assert_eq!(reshaped.as_slice(), a.as_slice());
        assert_every_element(&reshaped, "reshape", |r, c| (r * 784 + c) as f32);
        let back: Matrix<f32, 784, 128> = reshaped.reshape();
        assert_eq!(back, a);
    });
}

#[test]
fn display_of_a_big_matrix_is_elided_on_a_1_mib_stack() {
    on_small_stack(|| {
        let m = Matrix::<u32, 784, 128>::from_fn(|r, c| (r * 1000 + c) as u32);
        let mut text = String::new();
        write!(text, "{m}").unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 9, "4 rows, an ellipsis row, 4 rows:\n{text}");
        // Widest entry of every shown column is 6 digits (row 783), so all cells are 6 wide.
        assert_eq!(
            lines[0],
            "[[     0,      1,      2,      3, …,    124,    125,    126,    127],"
        );
        assert_eq!(
            lines[4],
            " [     …,      …,      …,      …, …,      …,      …,      …,      …],"
        );
        assert_eq!(
            lines[8],
            " [783000, 783001, 783002, 783003, …, 783124, 783125, 783126, 783127]]"
        );
    });
}

#[test]
fn zeros_and_clone_of_4096x4096_on_a_1_mib_stack() {
    on_small_stack(|| {
        // 64 MiB each.
        let m = Matrix::<f32, 4096, 4096>::zeros();
        let mut copy = m.clone();
        copy[(4095, 4095)] = 1.0;
        assert_eq!(m.iter().filter(|&&x| x != 0.0).count(), 0);
        assert_eq!(copy.as_slice().len(), 4096 * 4096);
        assert_eq!(copy.sum(), 1.0);
        assert_eq!(m[(4095, 4095)], 0.0);
    });
}
