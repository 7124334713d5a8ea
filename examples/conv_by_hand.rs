//! A convolution's forward and backward pass written out by hand, one line per formula, with the
//! shape of every intermediate in its type.
//!
//! ```text
//! cargo run --example conv_by_hand
//! ```
//!
//! Read it beside `docs/backprop.md`, section "Convolution", which derives every formula used
//! here, and `src/nn/conv.rs`, which computes the same things without allocating (and, for
//! stride 1, without unrolling the patches). The layer is small enough to print, and has what
//! makes a convolution harder than a dense layer: several channels, a stride of 2 and a padding
//! of 1. Its inputs are a batch of two images, its loss `L = ½ Σ (A - T)²` for fixed targets `T`:
//!
//! ```text
//! X: 2 images of C×H×W = 2×5×5     w: OC×C×K×K = 3×2×3×3, stride S = 2, padding P = 1
//! OH = OW = ⌊(5 + 2·1 - 3)/2⌋ + 1 = 3
//! X̂ = im2col(X): (C·K·K)×(OH·OW) = 18×9     Ŵ: OC×(C·K·K) = 3×18     b: OC×1 = 3×1
//! Z = Ŵ·X̂ + b: 3×9     A = tanh(Z): 3×9 (= OC×OH×OW)
//! ```
//!
//! The convolution is a matrix product of the weight and the unrolled patches, so the shapes of
//! its backward pass are those of a dense layer's, and the compiler checks them the same way:
//! `Ŵ·X̂` with the factors swapped, or `dZ·X̂` without the transpose, does not compile. At the end
//! it checks every value against `constmat::nn::Conv2d` and one weight and one pixel against
//! finite differences.

use constmat::Matrix;
use constmat::nn::{Conv2d, Heap, Parameters, RandomInit, Store, Tanh, Train};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

/// Input channels.
const C: usize = 2;
/// Filters (output channels).
const OC: usize = 3;
/// Kernel size.
const K: usize = 3;
/// Stride.
const S: usize = 2;
/// Zero padding on every side.
const P: usize = 1;
/// Image height and width.
const H: usize = 5;
const W: usize = 5;
/// Output height and width: `(H + 2P - K) / S + 1`.
const OH: usize = (H + 2 * P - K) / S + 1;
const OW: usize = (W + 2 * P - K) / S + 1;
/// Rows of `X̂`: one per weight position `(c, kh, kw)`.
const CKK: usize = C * K * K;
/// Columns of `X̂`: one per output position `(oh, ow)`.
const Q: usize = OH * OW;
/// Images in the batch.
const B: usize = 2;
/// The largest difference allowed between the hand-written values and `constmat::nn`'s.
const AGREEMENT: f64 = 1e-12;

/// One image, channels first (PyTorch's CHW).
type Image = [[[f64; W]; H]; C];
/// The library's layer with the same sizes: `Conv2d<T, C, OC, K, S, P, H, W, OH, OW, A>`.
type Conv = Conv2d<f64, C, OC, K, S, P, H, W, OH, OW, Tanh>;

/// Unrolls the patches: `X̂[r][q] = X[c][oh·S + kh - P][ow·S + kw - P]` with
/// `r = (c·K + kh)·K + kw` and `q = oh·OW + ow`, and 0 where that falls in the padding.
fn im2col(x: &Image) -> Matrix<f64, CKK, Q> {
    Matrix::from_fn(|r, q| match input_position(r, q) {
        Some((c, ih, iw)) => x[c][ih][iw],
        None => 0.0,
    })
}

/// The transpose of [`im2col`] (not its inverse): every entry of `dX̂` is added to the input
/// pixel it was copied from, so a pixel read by `n` windows gets `n` terms; entries copied from
/// the padding are dropped.
fn col2im(d_patches: &Matrix<f64, CKK, Q>) -> Image {
    let mut dx = [[[0.0; W]; H]; C];
    for r in 0..CKK {
        for q in 0..Q {
            if let Some((c, ih, iw)) = input_position(r, q) {
                dx[c][ih][iw] += d_patches[(r, q)];
            }
        }
    }
    dx
}

/// The input pixel `(c, ih, iw)` that row `r`, column `q` of `X̂` reads, or `None` for padding.
fn input_position(r: usize, q: usize) -> Option<(usize, usize, usize)> {
    let (c, kh, kw) = (r / (K * K), r / K % K, r % K);
    let (oh, ow) = (q / OW, q % OW);
    let ih = (oh * S + kh).checked_sub(P).filter(|&ih| ih < H)?;
    let iw = (ow * S + kw).checked_sub(P).filter(|&iw| iw < W)?;
    Some((c, ih, iw))
}

/// Everything the hand-written pass computes.
struct Pass {
    loss: f64,
    /// `A` of each image, `OC × OH·OW`.
    a: [Matrix<f64, OC, Q>; B],
    /// `dŴ = Σ_batch dZ·X̂ᵀ`, `OC × C·K·K`.
    dw_hat: Matrix<f64, OC, CKK>,
    /// `db = Σ_batch Σ_q dZ`, `OC × 1`.
    db: Matrix<f64, OC, 1>,
    /// `dX = col2im(Ŵᵀ·dZ)` of each image.
    dx: [Image; B],
}

/// The forward and backward pass, one image at a time, every step a `let` with its shape.
fn forward_backward(
    w_hat: &Matrix<f64, OC, CKK>,
    b: &Matrix<f64, OC, 1>,
    x: &[Image; B],
    t: &[Matrix<f64, OC, Q>; B],
) -> Pass {
    let mut loss = 0.0;
    let mut dw_hat = Matrix::<f64, OC, CKK>::zeros();
    let mut db = Matrix::<f64, OC, 1>::zeros();
    let mut a_all = [Matrix::zeros(), Matrix::zeros()];
    let mut dx_all = [[[[0.0; W]; H]; C]; B];
    for i in 0..B {
        // Forward.
        let x_hat: Matrix<f64, CKK, Q> = im2col(&x[i]);
        let z: Matrix<f64, OC, Q> = (w_hat * &x_hat).add_column_broadcast(b);
        let a: Matrix<f64, OC, Q> = z.map(f64::tanh);
        // The loss and its gradient: L = ½ Σ (A - T)², dA = A - T. (Not `MeanSquaredError`,
        // whose mean would scale dA by 2/(B·OC·OH·OW): the ½ and the sum keep dA plain.)
        let da: Matrix<f64, OC, Q> = &a - &t[i];
        loss += 0.5 * da.iter().map(|d| d * d).sum::<f64>();
        // Backward. dZ = dA ⊙ tanh'(Z), with tanh'(Z) = 1 - A² read from the output   OC×Q
        let dz: Matrix<f64, OC, Q> = da.hadamard(&a.map(|a| 1.0 - a * a));
        // dŴ += dZ·X̂ᵀ                  (OC×Q)(Q×CKK) -> OC×CKK
        dw_hat += &dz.matmul_transpose_rhs(&x_hat);
        // db += the sum of dZ over the positions     OC×1
        db += &dz.row_sums();
        // dX̂ = Ŵᵀ·dZ                   (CKK×OC)(OC×Q) -> CKK×Q, then folded back
        let dx_hat: Matrix<f64, CKK, Q> = w_hat.matmul_transpose_lhs(&dz);
        dx_all[i] = col2im(&dx_hat);
        a_all[i] = a;
    }
    Pass {
        loss,
        a: a_all,
        dw_hat,
        db,
        dx: dx_all,
    }
}

fn max_abs_diff<'a>(
    a: impl IntoIterator<Item = &'a f64>,
    b: impl IntoIterator<Item = &'a f64>,
) -> f64 {
    a.into_iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

fn main() {
    let mut rng = StdRng::seed_from_u64(7);
    let uniform = Uniform::new(-1.0, 1.0).unwrap();

    // The library's layer, random weights and biases; the hand-written pass reads the same
    // numbers as the matrix Ŵ (its [OC][C][K][K] storage with the rows flattened) and b.
    let mut layer = Conv::random(&mut rng);
    // `random` leaves the biases at 0, which would hide a missing `+ b`.
    Heap::vector_mut(&mut layer.bias)
        .iter_mut()
        .for_each(|b| *b = uniform.sample(&mut rng));
    let weight: &[[[[f64; K]; K]; C]; OC] = Heap::matrix(&layer.weight);
    let w_hat = Matrix::<f64, OC, CKK>::from_fn(|o, r| weight[o][r / (K * K)][r / K % K][r % K]);
    let b = Matrix::<f64, OC, 1>::from_fn(|o, _| Heap::vector(&layer.bias)[o]);
    let x: [Image; B] = std::array::from_fn(|_| {
        std::array::from_fn(|_| {
            std::array::from_fn(|_| std::array::from_fn(|_| uniform.sample(&mut rng)))
        })
    });
    let t: [Matrix<f64, OC, Q>; B] = std::array::from_fn(|_| Matrix::random(&uniform, &mut rng));

    println!("== Shapes");
    println!("X: {B} images of {C}×{H}×{W}; filters {OC}×{C}×{K}×{K}, stride {S}, padding {P}");
    println!("OH = OW = ⌊({H} + 2·{P} - {K}) / {S}⌋ + 1 = {OH}");
    println!("X̂ = im2col(X): {CKK}×{Q}   Ŵ: {OC}×{CKK}   Z = Ŵ·X̂ + b: {OC}×{Q}");
    println!(
        "dŴ = Σ dZ·X̂ᵀ: {OC}×{CKK}   db: {OC}×1   dX̂ = Ŵᵀ·dZ: {CKK}×{Q} -> col2im -> {C}×{H}×{W}"
    );
    println!();

    let hand = forward_backward(&w_hat, &b, &x, &t);
    println!(
        "== The first image's patches X̂ (row r = (c, kh, kw), column q = (oh, ow); · = padding)"
    );
    let x_hat = im2col(&x[0]);
    for r in 0..CKK {
        let row: Vec<String> = (0..Q)
            .map(|q| match input_position(r, q) {
                Some(_) => format!("{:+.2}", x_hat[(r, q)]),
                None => "    ·".to_string(),
            })
            .collect();
        let (c, kh, kw) = (r / (K * K), r / K % K, r % K);
        println!("r = {r:2} ({c}, {kh}, {kw}): {}", row.join(" "));
    }
    println!("loss L = ½ Σ (A - T)² = {:.6}", hand.loss);
    println!();

    // The same pass by constmat::nn: forward_train, the loss gradient, backward.
    println!("== Checking the hand-written pass against constmat::nn::Conv2d");
    let mut workspace = Train::<f64, B>::workspace(&layer);
    let a_lib = *layer.forward_train(&x, &mut workspace);
    let d_out: [[[[f64; OW]; OH]; OC]; B] = std::array::from_fn(|i| {
        std::array::from_fn(|o| {
            std::array::from_fn(|oh| {
                std::array::from_fn(|ow| a_lib[i][o][oh][ow] - t[i][(o, oh * OW + ow)])
            })
        })
    });
    let mut gradients = layer.zeros_like();
    let mut dx_lib = [[[[0.0; W]; H]; C]; B];
    layer.backward(
        &x,
        &mut workspace,
        &d_out,
        Some(&mut dx_lib),
        &mut gradients,
    );
    let comparisons = [
        (
            "A",
            max_abs_diff(
                a_lib.iter().flatten().flatten().flatten(),
                hand.a.iter().flat_map(|a| a.iter()),
            ),
        ),
        (
            "dŴ",
            max_abs_diff(
                Heap::matrix(&gradients.weight)
                    .iter()
                    .flatten()
                    .flatten()
                    .flatten(),
                hand.dw_hat.iter(),
            ),
        ),
        (
            "db",
            max_abs_diff(Heap::vector(&gradients.bias), hand.db.iter()),
        ),
        (
            "dX",
            max_abs_diff(
                dx_lib.iter().flatten().flatten().flatten(),
                hand.dx.iter().flatten().flatten().flatten(),
            ),
        ),
    ];
    for (name, diff) in comparisons {
        println!("{name:>2}: largest difference {diff:.1e}");
        assert!(
            diff <= AGREEMENT,
            "{name}: the hand-written value differs from constmat::nn's by {diff:e}"
        );
    }
    println!();

    // One weight and one pixel against central finite differences, (L(θ+ε) - L(θ-ε)) / 2ε.
    println!("== One weight and one pixel by finite differences");
    let epsilon = 1e-5;
    let (o, r) = (1, 13); // filter 1, channel 1, kernel row 1, kernel column 1
    let loss_with_weight = |delta: f64| {
        let mut shifted = w_hat.clone();
        shifted[(o, r)] += delta;
        forward_backward(&shifted, &b, &x, &t).loss
    };
    let numeric = (loss_with_weight(epsilon) - loss_with_weight(-epsilon)) / (2.0 * epsilon);
    report(&format!("∂L/∂Ŵ[{o},{r}]"), hand.dw_hat[(o, r)], numeric);
    // A pixel read by four windows, three of them also reading the padding: col2im adds four
    // terms into its gradient.
    let (i, c, ih, iw) = (1, 0, 1, 1);
    let loss_with_pixel = |delta: f64| {
        let mut shifted = x;
        shifted[i][c][ih][iw] += delta;
        forward_backward(&w_hat, &b, &shifted, &t).loss
    };
    let numeric = (loss_with_pixel(epsilon) - loss_with_pixel(-epsilon)) / (2.0 * epsilon);
    report(
        &format!("∂L/∂X[{i}][{c}][{ih}][{iw}]"),
        hand.dx[i][c][ih][iw],
        numeric,
    );
    println!("\nAll checks passed.");
}

/// Prints a derivative by backprop and by finite differences, and asserts that they agree.
fn report(what: &str, analytic: f64, numeric: f64) {
    let relative = (numeric - analytic).abs() / analytic.abs().max(f64::MIN_POSITIVE);
    println!("{what} by backprop:           {analytic:+.12}");
    println!("{what} by finite differences: {numeric:+.12}   (relative difference {relative:.1e})");
    assert!(
        relative < 1e-7,
        "{what}: backprop and finite differences disagree: {relative:e}"
    );
}
