//! Backpropagation written out by hand, one line per formula, for a two-layer net learning XOR.
//!
//! ```text
//! cargo run --example backprop_by_hand
//! ```
//!
//! Read it beside `docs/backprop.md`, which derives every formula used here, and
//! `src/nn/dense.rs`, `src/nn/cross_entropy.rs` and `src/nn/chain.rs`, which compute the same
//! things without allocating. This file uses only the [`Matrix`] API for the maths: every
//! intermediate of the forward and backward pass is a `let` whose type spells out its shape.
//!
//! The net is `2 → 3 (tanh) → 2 (identity) → softmax + cross-entropy`, trained with plain SGD on
//! the four XOR samples as one batch (`B = 4`), one sample per row:
//!
//! ```text
//! X: 4×2   W1: 3×2   b1: 1×3   Z1 = X·W1ᵀ + b1: 4×3   A1 = tanh(Z1): 4×3
//!          W2: 2×3   b2: 1×2   Z2 = A1·W2ᵀ + b2: 4×2  P = softmax(Z2): 4×2
//! ```
//!
//! At the end it checks the hand-written gradients against `constmat::nn` (`Dense`, `Chain`,
//! `SoftmaxCrossEntropy`) and one entry against a finite difference.

use constmat::Matrix;
use constmat::nn::{Chain, Dense, Identity, Loss, Parameters, SoftmaxCrossEntropy, Tanh, Train};

/// The learning rate of plain SGD.
const LEARNING_RATE: f64 = 0.5;
/// Training steps (each one the whole batch of four samples).
const STEPS: usize = 1000;
/// Print the loss every this many steps.
const REPORT_EVERY: usize = 100;
/// The largest difference allowed between the hand-written gradients and `constmat::nn`'s.
const AGREEMENT: f64 = 1e-12;

/// The parameters of the two layers, in PyTorch's `out × in` orientation.
#[derive(Debug, Clone)]
struct Params {
    /// First layer, 2 inputs → 3 hidden units: `3×2`.
    w1: Matrix<f64, 3, 2>,
    /// `1×3`.
    b1: Matrix<f64, 1, 3>,
    /// Second layer, 3 hidden units → 2 classes: `2×3`.
    w2: Matrix<f64, 2, 3>,
    /// `1×2`.
    b2: Matrix<f64, 1, 2>,
}

/// Everything one forward and backward pass computes, kept so it can be printed and compared.
#[derive(Debug, Clone)]
struct Pass {
    z1: Matrix<f64, 4, 3>,
    a1: Matrix<f64, 4, 3>,
    z2: Matrix<f64, 4, 2>,
    p: Matrix<f64, 4, 2>,
    loss: f64,
    dz2: Matrix<f64, 4, 2>,
    dw2: Matrix<f64, 2, 3>,
    db2: Matrix<f64, 1, 2>,
    da1: Matrix<f64, 4, 3>,
    dz1: Matrix<f64, 4, 3>,
    dw1: Matrix<f64, 3, 2>,
    db1: Matrix<f64, 1, 3>,
    dx: Matrix<f64, 4, 2>,
}

/// One forward and one backward pass over the batch, every step written out.
///
/// Notation of `docs/backprop.md`: `d·` is `∂L/∂·`, `⊙` the element-wise product, `B = 4`.
fn forward_backward(params: &Params, x: &Matrix<f64, 4, 2>, y: &Matrix<f64, 4, 2>) -> Pass {
    let Params { w1, b1, w2, b2 } = params;
    let batch = 4.0;

    // ---------------------------------------------------------------- forward
    // Layer 1.  Z1 = X·W1ᵀ + b1          (4×2)(2×3) + (1×3) -> 4×3
    //           Z1_bh = Σ_i X_bi W1_hi + b1_h   (the bias row is added to every sample's row)
    let z1: Matrix<f64, 4, 3> = x.matmul_transpose_rhs(w1).add_row_broadcast(b1);
    //           A1 = tanh(Z1)             4×3
    let a1: Matrix<f64, 4, 3> = z1.map(f64::tanh);

    // Layer 2.  Z2 = A1·W2ᵀ + b2         (4×3)(3×2) + (1×2) -> 4×2: the logits, no activation
    let z2: Matrix<f64, 4, 2> = a1.matmul_transpose_rhs(w2).add_row_broadcast(b2);

    // Softmax, row by row, made stable by subtracting each row's maximum first.
    //           m_b = max_j Z2_bj         4×1
    let m: Matrix<f64, 4, 1> = Matrix::from_fn(|b, _| {
        z2.as_array()[b]
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    });
    //           S = Z2 - m                4×2   (every entry ≤ 0, so exp(S) ∈ (0, 1])
    let s: Matrix<f64, 4, 2> = &z2 - &m.broadcast_column();
    //           log Σ_j exp(S_bj)         4×1   (the sum is ≥ 1: the row's maximum gives e⁰)
    let log_sum: Matrix<f64, 4, 1> = s.map(f64::exp).row_sums().map(f64::ln);
    //           log P = S - log Σ_j exp(S_bj)   4×2
    let log_p: Matrix<f64, 4, 2> = &s - &log_sum.broadcast_column();
    //           P = exp(log P)            4×2   (each row sums to 1)
    let p: Matrix<f64, 4, 2> = log_p.map(f64::exp);

    // Loss.     L = -(1/B) Σ_bj Y_bj log P_bj      scalar, the mean over the batch
    // (`SoftmaxCrossEntropy` also skips the terms with Y_bj = 0, so that a log P of -∞ cannot
    // make 0·∞ = NaN; here no probability underflows.)
    let loss: f64 = -y.hadamard(&log_p).sum() / batch;

    // ---------------------------------------------------------------- backward
    // Softmax + cross-entropy, fused.  dZ2 = (P - Y) / B      4×2
    //   (the general form is P·Σ_j Y_bj - Y; each one-hot row of Y sums to 1)
    let dz2: Matrix<f64, 4, 2> = (&p - y).scale(1.0 / batch);

    // Layer 2 (identity activation, so dZ2 is already ∂L/∂Z2).
    //           dW2_ch = Σ_b dZ2_bc A1_bh  ->  dW2 = dZ2ᵀ·A1     (2×4)(4×3) -> 2×3
    let dw2: Matrix<f64, 2, 3> = dz2.matmul_transpose_lhs(&a1);
    //           db2_c = Σ_b dZ2_bc         ->  db2 = Σ_rows dZ2  1×2
    let db2: Matrix<f64, 1, 2> = dz2.column_sums();
    //           dA1_bh = Σ_c dZ2_bc W2_ch  ->  dA1 = dZ2·W2      (4×2)(2×3) -> 4×3
    //           (this is what `Chain` keeps in `d_middle`)
    let da1: Matrix<f64, 4, 3> = dz2.matmul(w2);

    // Layer 1.  dZ1 = dA1 ⊙ tanh'(Z1), with tanh'(Z1) = 1 - A1² read from the output   4×3
    let dz1: Matrix<f64, 4, 3> = da1.hadamard(&a1.map(|a| 1.0 - a * a));
    //           dW1 = dZ1ᵀ·X               (3×4)(4×2) -> 3×2
    let dw1: Matrix<f64, 3, 2> = dz1.matmul_transpose_lhs(x);
    //           db1 = Σ_rows dZ1           1×3
    let db1: Matrix<f64, 1, 3> = dz1.column_sums();
    //           dX = dZ1·W1                (4×3)(3×2) -> 4×2
    //           Training never needs it (X is data, not a parameter): `Trainer` passes `None` to
    //           the first layer and skips this product. It is computed here only to compare.
    let dx: Matrix<f64, 4, 2> = dz1.matmul(w1);

    Pass {
        z1,
        a1,
        z2,
        p,
        loss,
        dz2,
        dw2,
        db2,
        da1,
        dz1,
        dw1,
        db1,
        dx,
    }
}

/// One step of plain SGD on every parameter: `θ ← θ - η·∂L/∂θ`.
fn sgd_step(params: &mut Params, pass: &Pass, learning_rate: f64) {
    params.w1.add_scaled(-learning_rate, &pass.dw1);
    params.b1.add_scaled(-learning_rate, &pass.db1);
    params.w2.add_scaled(-learning_rate, &pass.dw2);
    params.b2.add_scaled(-learning_rate, &pass.db2);
}

/// The largest absolute difference between two matrices of the same shape (a `Matrix` derefs
/// to its `H x W` array; the library's buffers are arrays).
fn max_abs_diff<const H: usize, const W: usize>(a: &[[f64; W]; H], b: &[[f64; W]; H]) -> f64 {
    (a.as_flattened().iter())
        .zip(b.as_flattened())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

/// Runs the same net through `constmat::nn` and asserts that every quantity agrees with the
/// hand-written pass. Returns the largest difference seen.
fn check_against_nn(params: &Params, x: &Matrix<f64, 4, 2>, y: &Matrix<f64, 4, 2>) -> f64 {
    let hand = forward_backward(params, x, y);

    // The same net, built from the same parameters.
    let net = Chain::new(
        Dense::<f64, 2, 3, Tanh>::new(params.w1.clone(), params.b1.clone()),
        Dense::<f64, 3, 2, Identity>::new(params.w2.clone(), params.b2.clone()),
    );
    let mut workspace = Train::<f64, 4>::workspace(&net);
    let mut d_logits = Matrix::<f64, 4, 2>::zeros();
    // Forward, then the loss and its gradient dZ2 = (P - Y)/B into `d_logits`.
    let logits: &[[f64; 2]; 4] = net.forward_train(x, &mut workspace);
    let logits_diff = max_abs_diff(logits, &hand.z2);
    let loss = SoftmaxCrossEntropy.loss_and_gradient(logits, y, &mut d_logits);

    // Backward. `Trainer` passes `None` for dX; here `Some`, to compare it too. The gradients
    // have the net's own type: `gradients.first` and `gradients.rest` are `Dense` layers.
    let mut gradients = net.zeros_like();
    let mut dx = Matrix::<f64, 4, 2>::zeros();
    net.backward(x, &mut workspace, &d_logits, Some(&mut dx), &mut gradients);

    let mut worst: f64 = 0.0;
    let comparisons = [
        ("logits Z2", logits_diff),
        ("loss", (loss - hand.loss).abs()),
        ("dZ2 (loss gradient)", max_abs_diff(&d_logits, &hand.dz2)),
        ("dW2", max_abs_diff(&gradients.rest.weight, &hand.dw2)),
        ("db2", max_abs_diff(&gradients.rest.bias, &hand.db2)),
        (
            "dA1 (Chain's d_middle)",
            max_abs_diff(&workspace.d_middle, &hand.da1),
        ),
        (
            "dZ1",
            max_abs_diff(&workspace.first.d_pre_activation, &hand.dz1),
        ),
        ("dW1", max_abs_diff(&gradients.first.weight, &hand.dw1)),
        ("db1", max_abs_diff(&gradients.first.bias, &hand.db1)),
        ("dX", max_abs_diff(&dx, &hand.dx)),
    ];
    for (name, diff) in comparisons {
        assert!(
            diff <= AGREEMENT,
            "{name}: the hand-written value differs from constmat::nn's by {diff:e}"
        );
        worst = worst.max(diff);
    }
    worst
}

fn main() {
    // The four XOR samples, one per row, and their classes as one-hot rows:
    // class 0 when the two inputs are equal, class 1 when they differ.
    let x = Matrix::<f64, 4, 2>::from_rows([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]);
    let y = Matrix::<f64, 4, 2>::from_rows([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]]);

    // Small, fixed, asymmetric starting weights (equal weights would keep the hidden units equal
    // forever: they would receive equal gradients). Biases start at zero.
    let initial = Params {
        w1: Matrix::from_rows([[0.5, -0.4], [-0.3, 0.6], [0.8, 0.7]]),
        b1: Matrix::zeros(),
        w2: Matrix::from_rows([[0.3, -0.5, 0.2], [-0.6, 0.4, 0.1]]),
        b2: Matrix::zeros(),
    };

    println!("A 2-3-2 net (tanh hidden layer, softmax + cross-entropy) learns XOR by hand-written");
    println!("backpropagation. The derivations are in docs/backprop.md.\n");
    println!("X (4×2, one sample per row):\n{x:.0}\n");
    println!("Y (4×2, one-hot classes: 0 = equal inputs, 1 = different):\n{y:.0}\n");

    // The first pass, shown in full.
    let first = forward_backward(&initial, &x, &y);
    println!("== The first forward pass");
    println!("Z1 = X·W1ᵀ + b1 (4×3):\n{:.4}", first.z1);
    println!("A1 = tanh(Z1) (4×3):\n{:.4}", first.a1);
    println!("Z2 = A1·W2ᵀ + b2, the logits (4×2):\n{:.4}", first.z2);
    println!("P = softmax(Z2) (4×2):\n{:.4}", first.p);
    println!(
        "L = -(1/4) Σ Y ⊙ log P = {:.6}  (always answering 50/50 would give ln 2 = {:.6})\n",
        first.loss,
        2f64.ln()
    );
    println!("== The first backward pass, last layer first");
    println!("dZ2 = (P - Y) / 4 (4×2):\n{:.4}", first.dz2);
    println!("dW2 = dZ2ᵀ·A1 (2×3):\n{:.4}", first.dw2);
    println!("db2 = Σ_rows dZ2 (1×2):\n{:.4}", first.db2);
    println!("dA1 = dZ2·W2 (4×3):\n{:.4}", first.da1);
    println!("dZ1 = dA1 ⊙ (1 - A1²) (4×3):\n{:.4}", first.dz1);
    println!("dW1 = dZ1ᵀ·X (3×2):\n{:.4}", first.dw1);
    println!("db1 = Σ_rows dZ1 (1×3):\n{:.4}\n", first.db1);

    // Training: forward, backward, update, on the whole batch each step.
    println!("== Training: plain SGD, learning rate {LEARNING_RATE}, {STEPS} steps");
    let mut params = initial.clone();
    let mut pass = first;
    for step in 0..STEPS {
        if step % REPORT_EVERY == 0 {
            println!("step {step:>5}   loss {:.6}", pass.loss);
        }
        sgd_step(&mut params, &pass, LEARNING_RATE);
        pass = forward_backward(&params, &x, &y);
    }
    println!("step {STEPS:>5}   loss {:.6}\n", pass.loss);

    println!("== Predictions after training");
    let predicted = pass.p.row_argmax();
    for (b, (input, probabilities)) in x.rows().zip(pass.p.rows()).enumerate() {
        println!(
            "x = ({}, {})   P(class 1) = {:.4}   predicted class {}   (target {})",
            input[0],
            input[1],
            probabilities[1],
            predicted[(b, 0)],
            y.row_argmax()[(b, 0)],
        );
    }
    assert_eq!(predicted, y.row_argmax(), "the net has learned XOR");
    println!();

    // The hand-written pass against the library's, before and after training.
    println!("== Checking the hand-written gradients against constmat::nn");
    for (when, p) in [("initial", &initial), ("trained", &params)] {
        let worst = check_against_nn(p, &x, &y);
        let how = if worst == 0.0 {
            "bit for bit".to_string()
        } else {
            format!("largest difference {worst:.1e} ≤ {AGREEMENT:.0e}")
        };
        println!(
            "{when} parameters: logits, loss, dZ2, dW2, db2, dA1, dZ1, dW1, db1, dX agree ({how})"
        );
    }
    println!();

    // One gradient entry, at the initial parameters, against a central finite difference:
    // ∂L/∂θ ≈ (L(θ+ε) - L(θ-ε)) / 2ε, whose error is O(ε²).
    println!("== One entry by finite differences");
    let (row, col, epsilon) = (0, 1, 1e-5);
    let loss_with = |delta: f64| {
        let mut shifted = initial.clone();
        shifted.w1[(row, col)] += delta;
        forward_backward(&shifted, &x, &y).loss
    };
    let numeric = (loss_with(epsilon) - loss_with(-epsilon)) / (2.0 * epsilon);
    let analytic = forward_backward(&initial, &x, &y).dw1[(row, col)];
    let relative = (numeric - analytic).abs() / analytic.abs().max(f64::MIN_POSITIVE);
    println!("∂L/∂W1[{row},{col}] by backprop:           {analytic:+.12}");
    println!("∂L/∂W1[{row},{col}] by finite differences: {numeric:+.12}   (ε = {epsilon:e})");
    println!("relative difference {relative:.1e}");
    assert!(
        relative < 1e-7,
        "backprop and finite differences disagree: {relative:e}"
    );
    println!("\nAll checks passed.");
}
