//! Finite-difference checks of every hand-written backward pass in `constmat::nn`, in f64.
//!
//! Each analytic derivative is compared with the central difference
//! `(L(θ + h) - L(θ - h)) / 2h`, `h = 1e-6`, computed from forward passes only.
//!
//! # The error bound
//!
//! Per element, with `a` the analytic and `n` the numeric derivative:
//!
//! ```text
//! err = |a - n| / max(FLOOR, |a| + |n|)  <  TOLERANCE = 1e-6,   with FLOOR = 1e-3
//! ```
//!
//! Why these numbers: the central difference has a truncation error of about `h² |L'''| / 6`
//! (~1e-13 here) and a rounding error of about `ε |L| / h` per evaluation (ε = 2.2e-16 and
//! |L| ~ 1, so a few 1e-10 in absolute terms; up to 2.6e-10 is observed on the 4-layer net).
//! Relative to derivatives of size 1e-2 to 1 that is 1e-10 to 1e-8, far under 1e-6. For
//! derivatives that are tiny or exactly zero (a ReLU that is off, a saturated sigmoid) that
//! absolute noise would dominate a pure relative error, so the denominator is floored at 1e-3:
//! below it the bound becomes the absolute `|a - n| < 1e-9`, a few times the noise and still
//! orders of magnitude tighter than any real mistake. A wrong backward pass (a missing activation
//! derivative, a transposed or mis-scaled weight gradient, a gradient accumulated instead of
//! overwritten) is wrong by O(1) in relative terms on the large elements, and
//! `broken_backward_passes_are_caught` checks that such mistakes exceed the bound by orders of
//! magnitude. Each check also requires some derivative above 1e-3, so that it is not vacuous.
//!
//! Every check also starts from dirty buffers (a workspace used on another input, gradients and
//! `dX` filled with garbage) so that a backward pass that accumulates into, or reads stale
//! values from, its buffers fails too.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::Matrix;
use constmat::nn::{
    Activation, Dense, Heap, Identity, Inline, Layer, Loss, MeanSquaredError, Parameters,
    RandomInit, Relu, Relu6, Sigmoid, Softmax, SoftmaxCrossEntropy, Store, Tanh, Train,
};
use rand::distr::{Distribution, Uniform};
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// The step of the central differences.
const H: f64 = 1e-6;
/// The largest relative error allowed per element (see the module documentation).
const TOLERANCE: f64 = 1e-6;
/// The denominator's floor: below it the bound is an absolute one of `TOLERANCE * FLOOR`.
const FLOOR: f64 = 1e-3;
/// How close to the ReLU kink a pre-activation may be.
const KINK_MARGIN: f64 = 1e-3;

fn uniform() -> Uniform<f64> {
    Uniform::new(-1.0, 1.0).unwrap()
}

fn random<const R: usize, const C: usize>(rng: &mut StdRng) -> Matrix<f64, R, C> {
    Matrix::random(&uniform(), rng)
}

/// The worst per-element error (as defined in the module documentation).
fn worst_error(analytic: &[f64], numeric: &[f64]) -> f64 {
    assert_eq!(analytic.len(), numeric.len());
    analytic
        .iter()
        .zip(numeric)
        .map(|(&a, &n)| {
            assert!(
                a.is_finite() && n.is_finite(),
                "non-finite derivative: {a} vs {n}"
            );
            (a - n).abs() / (a.abs() + n.abs()).max(FLOOR)
        })
        .fold(0.0, f64::max)
}

/// Asserts the bound for one tensor and returns its worst error.
fn assert_close(what: &str, analytic: &[f64], numeric: &[f64]) -> f64 {
    let err = worst_error(analytic, numeric);
    assert!(
        err < TOLERANCE,
        "{what}: worst relative error {err:e} >= {TOLERANCE:e}\n analytic: {analytic:?}\n numeric:  {numeric:?}"
    );
    // The check must compare something: an all-zero gradient would pass trivially.
    assert!(
        analytic.iter().any(|a| a.abs() > 1e-3),
        "{what}: the gradient is (almost) all zero, the check is vacuous: {analytic:?}"
    );
    err
}

/// The central difference of `f(state)` with respect to each of the `len` numbers that
/// `slot(state, i)` points at.
fn central_differences<S>(
    state: &mut S,
    len: usize,
    slot: impl Fn(&mut S, usize) -> &mut f64,
    mut f: impl FnMut(&S) -> f64,
) -> Vec<f64> {
    (0..len)
        .map(|i| {
            let original = *slot(state, i);
            *slot(state, i) = original + H;
            let plus = f(state);
            *slot(state, i) = original - H;
            let minus = f(state);
            *slot(state, i) = original;
            (plus - minus) / (2.0 * H)
        })
        .collect()
}

/// The analytic and numeric gradients of `loss(net(x))` for every parameter tensor and for `x`.
struct Gradients {
    /// `(analytic, numeric)` per parameter tensor, in `Parameters` order.
    tensors: Vec<(Vec<f64>, Vec<f64>)>,
    /// `(analytic, numeric)` for the input.
    input: (Vec<f64>, Vec<f64>),
}

/// Runs the analytic backward pass of `net` on `x` with `d_output = loss_gradient(output)`, and
/// the finite differences of `loss(forward(x))` with respect to every parameter and input.
fn gradients<N, const B: usize, const I: usize, const C: usize>(
    net: &N,
    x: &Matrix<f64, B, I>,
    loss: impl Fn(&[[f64; C]; B]) -> f64,
    loss_gradient: impl Fn(&[[f64; C]; B]) -> Matrix<f64, B, C>,
    rng: &mut StdRng,
) -> Gradients
where
    N: Train<f64, B> + Layer<In = [f64; I], Out = [f64; C]> + Clone,
{
    // Analytic, from dirty buffers: the workspace has seen another input, and the gradient
    // outputs hold garbage. `backward` must overwrite all of them.
    let mut ws = net.workspace();
    net.forward_train(&random::<B, I>(rng), &mut ws);
    let output = *net.forward_train(x, &mut ws);
    let d_output = loss_gradient(&output);
    let mut grads = net.zeros_like();
    for k in 0..grads.tensor_count() {
        grads
            .tensor_mut(k)
            .iter_mut()
            .for_each(|g| *g = 1e3 * uniform().sample(rng));
    }
    let mut dx = Matrix::<f64, B, I>::filled(-777.0);
    net.backward(x, &mut ws, &d_output, Some(&mut dx), &mut grads);

    // Numeric, from forward passes only: `Layer::forward`, the pass inference and baked nets
    // run, so the check covers it too.
    let forward_loss = |net: &N, x: &Matrix<f64, B, I>| {
        let mut out = [[0.0; C]; B];
        net.forward(x, &mut out);
        loss(&out)
    };
    let mut tensors = Vec::new();
    let mut probe = net.clone();
    for k in 0..net.tensor_count() {
        let len = net.tensor(k).len();
        let numeric = central_differences(
            &mut probe,
            len,
            |p, i| &mut p.tensor_mut(k)[i],
            |p| forward_loss(p, x),
        );
        assert_eq!(probe.tensor(k), net.tensor(k), "the probe is restored");
        tensors.push((grads.tensor(k).to_vec(), numeric));
    }
    let mut x_probe = x.clone();
    let numeric_dx = central_differences(
        &mut x_probe,
        B * I,
        |x, i| &mut x.as_mut_slice()[i],
        |x| forward_loss(net, x),
    );
    Gradients {
        tensors,
        input: (dx.as_slice().to_vec(), numeric_dx),
    }
}

impl Gradients {
    /// Asserts the bound on every tensor and on the input; returns the worst error.
    fn assert_close(&self, what: &str) -> f64 {
        let mut worst = 0.0_f64;
        for (k, (analytic, numeric)) in self.tensors.iter().enumerate() {
            let name = if k % 2 == 0 { "weight" } else { "bias" };
            worst = worst.max(assert_close(
                &format!("{what}: tensor {k} ({}.{name})", k / 2),
                analytic,
                numeric,
            ));
        }
        worst.max(assert_close(
            &format!("{what}: dX"),
            &self.input.0,
            &self.input.1,
        ))
    }
}

/// `L = Σ (output ⊙ R)`: a scalar loss whose gradient with respect to the output is `R`.
fn weighted_sum<const B: usize, const C: usize>(
    r: &Matrix<f64, B, C>,
) -> impl Fn(&[[f64; C]; B]) -> f64 + '_ {
    move |out| {
        out.as_flattened()
            .iter()
            .zip(r.iter())
            .map(|(o, r)| o * r)
            .sum()
    }
}

/// `X·Wᵀ + b`, computed here without the layer's code.
fn pre_activation<const B: usize, const I: usize, const O: usize, A: Activation, S: Store>(
    layer: &Dense<f64, I, O, A, S>,
    x: &[[f64; I]; B],
) -> Matrix<f64, B, O> {
    let (w, b) = (S::matrix(&layer.weight), S::vector(&layer.bias));
    Matrix::from_fn(|r, o| b[o] + (0..I).map(|i| x[r][i] * w[o][i]).sum::<f64>())
}

/// True when no pre-activation is within `KINK_MARGIN` of 0, and both signs occur (so that
/// both branches of ReLU are exercised).
fn away_from_kink<const B: usize, const O: usize>(z: &Matrix<f64, B, O>) -> bool {
    z.iter().all(|z| z.abs() > KINK_MARGIN)
        && z.iter().any(|&z| z > 0.0)
        && z.iter().any(|&z| z < 0.0)
}

/// Checks one dense layer with `L = Σ (output ⊙ R)`: dW, db and dX. Returns the worst error.
///
/// Inputs, weights and biases are uniform on [-1, 1), so every activation sees pre-activations
/// in its interesting range (both sides of ReLU's kink, the curved part of sigmoid and tanh).
/// For ReLU the derivative does not exist at 0, and a finite difference across the kink is
/// meaningless: parameters and inputs are resampled until every pre-activation is at least
/// `KINK_MARGIN` = 1e-3 away from 0. A perturbation of `h = 1e-6` moves a pre-activation by at
/// most `h · max(|x|, |w|, 1) · 1 ≤ 1e-6`, so no difference quotient straddles the kink.
///
/// The layer is checked with both storages: heap (`Matrix` parameters) and inline (arrays, as a
/// baked net has them), which run the same code and must give the same gradients.
fn check_dense<A: Activation, const B: usize, const I: usize, const O: usize>(seed: u64) -> f64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let (layer, x) = loop {
        let layer = Dense::<f64, I, O, A>::new(random(&mut rng), random(&mut rng));
        let x = random::<B, I>(&mut rng);
        if away_from_kink(&pre_activation(&layer, &x)) {
            break (layer, x);
        }
    };
    let r = random::<B, O>(&mut rng);
    let grads = gradients(&layer, &x, weighted_sum(&r), |_| r.clone(), &mut rng);
    let worst = grads.assert_close(&format!("Dense<{I}, {O}, {:?}>", A::default()));
    let inline = layer.to_store::<Inline>();
    let inline_grads = gradients(&inline, &x, weighted_sum(&r), |_| r.clone(), &mut rng);
    inline_grads.assert_close(&format!("Dense<{I}, {O}, {:?}, Inline>", A::default()));
    assert_eq!(
        inline_grads.tensors, grads.tensors,
        "the same gradients, bit for bit"
    );
    assert_eq!(inline_grads.input, grads.input);
    worst
}

#[test]
fn dense_identity() {
    let err = check_dense::<Identity, 4, 5, 3>(1);
    eprintln!("Dense Identity: worst relative error {err:e}");
}

#[test]
fn dense_relu() {
    let err = check_dense::<Relu, 4, 5, 3>(2);
    eprintln!("Dense Relu: worst relative error {err:e}");
}

/// ReLU6 has two kinks, at 0 and at 6: the weights are scaled by 8, so that pre-activations
/// reach past 6, and resampled until every one is `KINK_MARGIN` away from both kinks and each of
/// the three pieces is taken.
#[test]
fn dense_relu6() {
    let mut rng = StdRng::seed_from_u64(12);
    let (layer, x) = loop {
        let weight = random::<3, 5>(&mut rng).map(|w| 8.0 * w);
        let layer = Dense::<f64, 5, 3, Relu6>::new(weight, random(&mut rng));
        let x = random::<6, 5>(&mut rng);
        let z = pre_activation(&layer, &x);
        if z.iter()
            .all(|z| z.abs() > KINK_MARGIN && (z - 6.0).abs() > KINK_MARGIN)
            && z.iter().any(|&z| z > 6.0)
            && z.iter().any(|&z| 0.0 < z && z < 6.0)
            && z.iter().any(|&z| z < 0.0)
        {
            break (layer, x);
        }
    };
    let r = random::<6, 3>(&mut rng);
    let grads = gradients(&layer, &x, weighted_sum(&r), |_| r.clone(), &mut rng);
    let err = grads.assert_close("Dense<5, 3, Relu6>");
    eprintln!("Dense Relu6: worst relative error {err:e}");
}

/// The softmax layer's input gradient, alone and after a dense layer (whose parameter gradients
/// then pass through it), with `L = Σ (output ⊙ R)`.
#[test]
fn softmax_layer() {
    let mut rng = StdRng::seed_from_u64(13);
    let x = random::<4, 5>(&mut rng).map(|v| 3.0 * v);
    let r = random::<4, 5>(&mut rng);
    let alone = Softmax::<f64, 5>::new();
    let grads = gradients(&alone, &x, weighted_sum(&r), |_| r.clone(), &mut rng);
    let a = grads.assert_close("Softmax<5>");
    type Net = constmat::net![Dense<f64, 5, 3, Tanh>, Softmax<f64, 3>];
    let net = Net::random(&mut rng);
    let r = random::<4, 3>(&mut rng);
    let grads = gradients(&net, &x, weighted_sum(&r), |_| r.clone(), &mut rng);
    let b = grads.assert_close("Dense<5, 3, Tanh>, Softmax<3>");
    eprintln!("Softmax: worst relative error {:e}", a.max(b));
}

#[test]
fn dense_sigmoid() {
    let err = check_dense::<Sigmoid, 4, 5, 3>(3);
    eprintln!("Dense Sigmoid: worst relative error {err:e}");
}

#[test]
fn dense_tanh() {
    let err = check_dense::<Tanh, 4, 5, 3>(4);
    eprintln!("Dense Tanh: worst relative error {err:e}");
}

/// A square weight and a batch equal to the width: shapes that cannot catch a transposed dW
/// or a swapped product at compile time, so the values must.
#[test]
fn dense_square_shapes() {
    let mut worst = 0.0_f64;
    worst = worst.max(check_dense::<Tanh, 4, 4, 4>(5));
    worst = worst.max(check_dense::<Relu, 4, 4, 4>(6));
    worst = worst.max(check_dense::<Sigmoid, 4, 4, 4>(7));
    worst = worst.max(check_dense::<Identity, 4, 4, 4>(8));
    // One sample: dX = dZ·W with B = 1, db = dZ.
    worst = worst.max(check_dense::<Tanh, 1, 3, 2>(9));
    eprintln!("Dense, square shapes and B = 1: worst relative error {worst:e}");
}

/// The gradient of `loss` with respect to the output, against central differences of
/// `Loss::loss`; also checks that `loss_and_gradient` returns the same value as `loss`.
fn check_loss<L: Loss<f64, B, C>, const B: usize, const C: usize>(
    what: &str,
    loss: &L,
    output: &Matrix<f64, B, C>,
    target: &Matrix<f64, B, C>,
) -> f64 {
    let mut gradient = Matrix::filled(123.0);
    let value = loss.loss_and_gradient(output, target, &mut gradient);
    let plain = loss.loss(output, target);
    assert!(
        (value - plain).abs() <= 1e-14 * plain.abs().max(1.0),
        "{what}: {value} vs {plain}"
    );
    let mut probe = output.clone();
    let numeric = central_differences(
        &mut probe,
        B * C,
        |o, i| &mut o.as_mut_slice()[i],
        |o| loss.loss(o, target),
    );
    assert_close(what, gradient.as_slice(), &numeric)
}

/// Target rows drawn at random and scaled to sum to `row_sum`.
fn distributions<const B: usize, const C: usize>(
    rng: &mut StdRng,
    row_sum: f64,
) -> Matrix<f64, B, C> {
    let mut t = Matrix::<f64, B, C>::random(&Uniform::new(0.05, 1.0).unwrap(), rng);
    for row in t.rows_mut() {
        let s: f64 = row.iter().sum();
        row.iter_mut().for_each(|v| *v *= row_sum / s);
    }
    t
}

fn one_hot<const B: usize, const C: usize>(rng: &mut StdRng) -> Matrix<f64, B, C> {
    let mut t = Matrix::zeros();
    for row in t.rows_mut() {
        row[rng.random_range(0..C)] = 1.0;
    }
    t
}

/// `-1/B Σ_rows Σ_j y_j log softmax(z)_j`, written naively (no max subtraction): the reference
/// for moderate logits.
fn naive_cross_entropy<const B: usize, const C: usize>(
    z: &Matrix<f64, B, C>,
    y: &Matrix<f64, B, C>,
) -> f64 {
    let mut total = 0.0;
    for (z, y) in z.rows().zip(y.rows()) {
        let sum: f64 = z.iter().map(|z| z.exp()).sum();
        for (z, y) in z.iter().zip(y) {
            total -= y * (z.exp() / sum).ln();
        }
    }
    total / B as f64
}

#[test]
fn mean_squared_error() {
    let mut rng = StdRng::seed_from_u64(10);
    let output = random::<4, 3>(&mut rng);
    let target = random::<4, 3>(&mut rng);
    let err = check_loss("MSE", &MeanSquaredError, &output, &target);
    // The value, independently: the mean over all 12 elements.
    let expected = output
        .iter()
        .zip(target.iter())
        .map(|(o, t)| (o - t) * (o - t))
        .sum::<f64>()
        / 12.0;
    assert!((MeanSquaredError.loss(&output, &target) - expected).abs() < 1e-15);
    eprintln!("MSE: worst relative error {err:e}");
}

#[test]
fn softmax_cross_entropy_one_hot() {
    let mut rng = StdRng::seed_from_u64(11);
    let logits = random::<4, 5>(&mut rng).scale(3.0);
    let target = one_hot::<4, 5>(&mut rng);
    let err = check_loss(
        "softmax CE, one-hot",
        &SoftmaxCrossEntropy,
        &logits,
        &target,
    );
    let value = SoftmaxCrossEntropy.loss(&logits, &target);
    assert!((value - naive_cross_entropy(&logits, &target)).abs() < 1e-12);
    eprintln!("softmax CE, one-hot targets: worst relative error {err:e}");
}

#[test]
fn softmax_cross_entropy_soft_targets() {
    let mut rng = StdRng::seed_from_u64(12);
    let logits = random::<4, 5>(&mut rng).scale(3.0);
    let target = distributions::<4, 5>(&mut rng, 1.0);
    let err = check_loss(
        "softmax CE, soft targets",
        &SoftmaxCrossEntropy,
        &logits,
        &target,
    );
    let value = SoftmaxCrossEntropy.loss(&logits, &target);
    assert!((value - naive_cross_entropy(&logits, &target)).abs() < 1e-12);
    eprintln!("softmax CE, soft targets: worst relative error {err:e}");
}

/// Targets whose rows do not sum to 1: the gradient is then `p Σy - y`, not `p - y`.
#[test]
fn softmax_cross_entropy_unnormalized_targets() {
    let mut rng = StdRng::seed_from_u64(13);
    let logits = random::<4, 5>(&mut rng).scale(3.0);
    let mut worst = 0.0_f64;
    for row_sum in [0.3, 2.5] {
        let target = distributions::<4, 5>(&mut rng, row_sum);
        let what = format!("softmax CE, targets summing to {row_sum}");
        worst = worst.max(check_loss(&what, &SoftmaxCrossEntropy, &logits, &target));
        let value = SoftmaxCrossEntropy.loss(&logits, &target);
        assert!((value - naive_cross_entropy(&logits, &target)).abs() < 1e-12);
    }
    // Arbitrary non-negative rows, one of them with a zero entry.
    let mut target = Matrix::<f64, 4, 5>::random(&Uniform::new(0.0, 2.0).unwrap(), &mut rng);
    target[(2, 1)] = 0.0;
    worst = worst.max(check_loss(
        "softmax CE, arbitrary targets",
        &SoftmaxCrossEntropy,
        &logits,
        &target,
    ));
    eprintln!("softmax CE, targets not summing to 1: worst relative error {worst:e}");
}

/// Large logits: the fused loss stays finite and its gradient still matches the differences.
#[test]
fn softmax_cross_entropy_large_logits() {
    let mut rng = StdRng::seed_from_u64(14);
    let mut logits = random::<4, 5>(&mut rng).scale(3.0);
    logits.iter_mut().for_each(|z| *z += 800.0); // e^800 overflows f64
    let target = distributions::<4, 5>(&mut rng, 1.0);
    let err = check_loss(
        "softmax CE, logits near 800",
        &SoftmaxCrossEntropy,
        &logits,
        &target,
    );
    // Shifting every logit of a row leaves softmax, hence the loss, unchanged.
    let shifted = logits.map(|z| z - 800.0);
    let reference = naive_cross_entropy(&shifted, &target);
    assert!((SoftmaxCrossEntropy.loss(&logits, &target) - reference).abs() < 1e-9);
    eprintln!("softmax CE, large logits: worst relative error {err:e}");
}

type Mlp = constmat::net![
    Dense<f64, 5, 7, Tanh>,
    Dense<f64, 7, 6, Relu>,
    Dense<f64, 6, 4, Sigmoid>,
    Dense<f64, 4, 3, Identity>,
];

/// A random net with random (non-zero) biases and an input whose ReLU layer is away from the
/// kink (see `check_dense`): resampled until every pre-activation of layer 1 is at least 1e-3
/// from 0. A perturbation of `h` moves those pre-activations by ~1e-6 at most.
fn mlp_and_input(rng: &mut StdRng) -> (Mlp, Matrix<f64, 4, 5>) {
    loop {
        let mut net = Mlp::random(rng);
        for k in (1..net.tensor_count()).step_by(2) {
            net.tensor_mut(k)
                .iter_mut()
                .for_each(|b| *b = 0.5 * uniform().sample(rng));
        }
        let x = random::<4, 5>(rng).scale(2.0);
        let mut a0 = [[0.0; 7]; 4];
        net.first.forward(&x, &mut a0);
        if away_from_kink(&pre_activation(&net.rest.first, &a0)) {
            return (net, x);
        }
    }
}

/// The whole 4-layer net with softmax cross-entropy on a batch of 4: every parameter tensor
/// (8 of them) and dX.
#[test]
fn whole_net_softmax_cross_entropy() {
    let mut rng = StdRng::seed_from_u64(20);
    let (net, x) = mlp_and_input(&mut rng);
    assert_eq!(net.tensor_count(), 8);
    let target = one_hot::<4, 3>(&mut rng);
    let grads = gradients(
        &net,
        &x,
        |out| SoftmaxCrossEntropy.loss(out, &target),
        |out| {
            let mut g = Matrix::zeros();
            SoftmaxCrossEntropy.loss_and_gradient(out, &target, &mut g);
            g
        },
        &mut rng,
    );
    assert_eq!(grads.tensors.len(), 8);
    let err = grads.assert_close("4-layer net, softmax CE");
    eprintln!("4-layer net, softmax CE: worst relative error {err:e}");
}

/// The same net with its parameters inline, as a baked net holds them: the same gradients.
#[test]
fn whole_net_with_inline_storage() {
    let mut rng = StdRng::seed_from_u64(22);
    let (net, x) = mlp_and_input(&mut rng);
    let target = one_hot::<4, 3>(&mut rng);
    let loss = |out: &[[f64; 3]; 4]| SoftmaxCrossEntropy.loss(out, &target);
    let loss_gradient = |out: &[[f64; 3]; 4]| {
        let mut g = Matrix::zeros();
        SoftmaxCrossEntropy.loss_and_gradient(out, &target, &mut g);
        g
    };
    let inline = net.to_store::<Inline>();
    let grads = gradients(&inline, &x, loss, loss_gradient, &mut rng);
    let err = grads.assert_close("4-layer net, inline storage");
    let heap = gradients(&net, &x, loss, loss_gradient, &mut rng);
    assert_eq!(grads.tensors, heap.tensors);
    assert_eq!(grads.input, heap.input);
    assert_eq!(inline.to_store::<Heap>(), net);
    eprintln!("4-layer net, inline storage: worst relative error {err:e}");
}

/// The same net with mean squared error and soft targets.
#[test]
fn whole_net_mean_squared_error() {
    let mut rng = StdRng::seed_from_u64(21);
    let (net, x) = mlp_and_input(&mut rng);
    let target = random::<4, 3>(&mut rng);
    let grads = gradients(
        &net,
        &x,
        |out| MeanSquaredError.loss(out, &target),
        |out| {
            let mut g = Matrix::zeros();
            MeanSquaredError.loss_and_gradient(out, &target, &mut g);
            g
        },
        &mut rng,
    );
    let err = grads.assert_close("4-layer net, MSE");
    eprintln!("4-layer net, MSE: worst relative error {err:e}");
}

/// The bound has teeth: gradients with the usual mistakes fail it by orders of magnitude.
#[test]
fn broken_backward_passes_are_caught() {
    let mut rng = StdRng::seed_from_u64(30);
    let (layer, x) = loop {
        let layer = Dense::<f64, 4, 4, Relu>::new(random(&mut rng), random(&mut rng));
        let x = random::<4, 4>(&mut rng);
        if away_from_kink(&pre_activation(&layer, &x)) {
            break (layer, x);
        }
    };
    let r = random::<4, 4>(&mut rng);
    let good = gradients(&layer, &x, weighted_sum(&r), |_| r.clone(), &mut rng);
    good.assert_close("the correct layer");
    let (dw, numeric_dw) = &good.tensors[0];

    // A transposed dW (XᵀdZ instead of dZᵀX): same shape for a square layer.
    let transposed: Vec<f64> = (0..16).map(|i| dw[(i % 4) * 4 + i / 4]).collect();
    assert!(worst_error(&transposed, numeric_dw) > 1e3 * TOLERANCE);

    // A dropped activation derivative: the identity layer's backward with the same parameters.
    let linear = Dense::<f64, 4, 4, Identity>::new(layer.weight.clone(), layer.bias.clone());
    let mut ws = Train::<f64, 4>::workspace(&linear);
    linear.forward_train(&x, &mut ws);
    let mut grads = linear.zeros_like();
    let mut dx = Matrix::zeros();
    linear.backward(&x, &mut ws, &r, Some(&mut dx), &mut grads);
    assert!(worst_error(grads.weight.as_slice(), numeric_dw) > 1e3 * TOLERANCE);
    assert!(worst_error(dx.as_slice(), &good.input.1) > 1e3 * TOLERANCE);

    // A forgotten 1/B (or any scale) on the loss gradient.
    let doubled: Vec<f64> = dw.iter().map(|g| 2.0 * g).collect();
    assert!(worst_error(&doubled, numeric_dw) > 1e3 * TOLERANCE);

    // A gradient accumulated over two backward passes instead of overwritten.
    let mut ws = Train::<f64, 4>::workspace(&layer);
    layer.forward_train(&x, &mut ws);
    let mut grads = layer.zeros_like();
    layer.backward(&x, &mut ws, &r, None, &mut grads);
    let once = grads.weight.clone();
    layer.backward(&x, &mut ws, &r, None, &mut grads);
    assert_eq!(grads.weight, once, "backward overwrites the gradients");
    let accumulated: Vec<f64> = once.iter().map(|g| 2.0 * g).collect();
    assert!(worst_error(&accumulated, numeric_dw) > 1e3 * TOLERANCE);
}
