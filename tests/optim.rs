//! Optimizers against independently written reference loops, and learning-rate schedules
//! against their formulas.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::Matrix;
use constmat::nn::{
    Adam, Dense, Identity, Momentum, Optimizer, Parameters, Relu, Schedule, Sgd, Tanh,
};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

/// Every parameter, flat, in tensor order.
fn flatten<P: Parameters<f64>>(p: &P) -> Vec<f64> {
    (0..p.tensor_count())
        .flat_map(|k| p.tensor(k).to_vec())
        .collect()
}

/// A value shaped like `p` with every element drawn from `distribution`.
fn random_like<P: Parameters<f64>>(p: &P, distribution: &Uniform<f64>, rng: &mut StdRng) -> P {
    let mut out = p.zeros_like();
    for k in 0..out.tensor_count() {
        out.tensor_mut(k)
            .iter_mut()
            .for_each(|x| *x = distribution.sample(rng));
    }
    out
}

/// A varying learning rate, so that a step using the wrong (or a stale) rate shows.
const LEARNING_RATES: [f64; 6] = [0.1, 0.05, 0.2, 0.01, 0.3, 0.07];

/// Runs `optimizer` on `parameters` for six steps with random gradients (one of which is
/// exactly zero for some elements) and compares every parameter after every step with
/// `reference(θ, g, η)` applied to plain vectors.
fn check_against_reference<P, O>(
    mut parameters: P,
    mut optimizer: O,
    mut reference: impl FnMut(&mut [f64], &[f64], f64),
    seed: u64,
) where
    P: Parameters<f64>,
    O: Optimizer<f64, P>,
{
    let mut rng = StdRng::seed_from_u64(seed);
    let u = Uniform::new(-2.0, 2.0).unwrap();
    let mut theta = flatten(&parameters);
    let initial = theta.clone();
    for (step, &eta) in LEARNING_RATES.iter().enumerate() {
        let mut gradients = random_like(&parameters, &u, &mut rng);
        if step == 2 {
            gradients.tensor_mut(0)[0] = 0.0;
        }
        optimizer.update(&mut parameters, &gradients, eta);
        reference(&mut theta, &flatten(&gradients), eta);
        let got = flatten(&parameters);
        for (i, (&got, &want)) in got.iter().zip(&theta).enumerate() {
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "step {step}, parameter {i}: {got} vs reference {want}"
            );
        }
    }
    // Every parameter moved.
    for (i, (a, b)) in initial.iter().zip(flatten(&parameters)).enumerate() {
        assert!((a - b).abs() > 1e-6, "parameter {i} did not move");
    }
}

/// A 3-in, 2-out layer: a 2x3 weight and a 1x2 bias.
fn tiny_layer(seed: u64) -> Dense<f64, 3, 2, Identity> {
    let mut rng = StdRng::seed_from_u64(seed);
    let u = Uniform::new(-1.0, 1.0).unwrap();
    Dense::new(Matrix::random(&u, &mut rng), Matrix::random(&u, &mut rng))
}

/// Two layers: four tensors of different sizes, so state kept per tensor must line up.
type TinyNet = constmat::net![Dense<f64, 2, 3, Tanh>, Dense<f64, 3, 1, Relu>];

fn tiny_net(seed: u64) -> TinyNet {
    fn random<const R: usize, const C: usize>(rng: &mut StdRng) -> Matrix<f64, R, C> {
        Matrix::random(&Uniform::new(-1.0, 1.0).unwrap(), rng)
    }
    let mut rng = StdRng::seed_from_u64(seed);
    constmat::nn::Chain::new(
        Dense::new(random(&mut rng), random(&mut rng)),
        Dense::new(random(&mut rng), random(&mut rng)),
    )
}

fn sgd_reference() -> impl FnMut(&mut [f64], &[f64], f64) {
    |theta, g, eta| {
        for (t, g) in theta.iter_mut().zip(g) {
            *t -= eta * g;
        }
    }
}

/// PyTorch's form: `v ← μ v + g`, `θ ← θ - η v` (not `v ← μ v - η g`, which differs when η varies).
fn momentum_reference(mu: f64) -> impl FnMut(&mut [f64], &[f64], f64) {
    let mut velocity: Vec<f64> = Vec::new();
    move |theta, g, eta| {
        velocity.resize(theta.len(), 0.0);
        for ((t, v), g) in theta.iter_mut().zip(&mut velocity).zip(g) {
            *v = mu * *v + g;
            *t -= eta * *v;
        }
    }
}

/// Adam as in Kingma & Ba, Algorithm 1, with the bias corrections computed from `powi`.
fn adam_reference(beta1: f64, beta2: f64, epsilon: f64) -> impl FnMut(&mut [f64], &[f64], f64) {
    let (mut m, mut v): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut t = 0;
    move |theta, g, eta| {
        m.resize(theta.len(), 0.0);
        v.resize(theta.len(), 0.0);
        t += 1;
        for i in 0..theta.len() {
            m[i] = beta1 * m[i] + (1.0 - beta1) * g[i];
            v[i] = beta2 * v[i] + (1.0 - beta2) * g[i] * g[i];
            let m_hat = m[i] / (1.0 - beta1.powi(t));
            let v_hat = v[i] / (1.0 - beta2.powi(t));
            theta[i] -= eta * m_hat / (v_hat.sqrt() + epsilon);
        }
    }
}

#[test]
fn sgd_matches_reference() {
    check_against_reference(tiny_layer(1), Sgd::new(), sgd_reference(), 100);
    check_against_reference(tiny_net(2), Sgd::new(), sgd_reference(), 101);
}

#[test]
fn momentum_matches_reference() {
    let layer = tiny_layer(3);
    let opt = Momentum::new(&layer, 0.9);
    check_against_reference(layer, opt, momentum_reference(0.9), 102);
    let net = tiny_net(4);
    let opt = Momentum::new(&net, 0.5);
    check_against_reference(net, opt, momentum_reference(0.5), 103);
}

/// With `μ = 0` momentum is plain SGD.
#[test]
fn momentum_zero_is_sgd() {
    let layer = tiny_layer(5);
    let opt = Momentum::new(&layer, 0.0);
    check_against_reference(layer, opt, sgd_reference(), 104);
}

#[test]
fn adam_matches_reference() {
    let layer = tiny_layer(6);
    let opt = Adam::new(&layer);
    check_against_reference(layer, opt, adam_reference(0.9, 0.999, 1e-8), 105);
    let net = tiny_net(7);
    let opt = Adam::new(&net);
    check_against_reference(net, opt, adam_reference(0.9, 0.999, 1e-8), 106);
}

/// Unusual constants, so that an optimizer ignoring them (using the defaults) would fail, and a
/// large ε whose placement (outside the square root) matters.
#[test]
fn adam_with_constants_matches_reference() {
    let net = tiny_net(8);
    let opt = Adam::with_constants(&net, 0.5, 0.75, 0.1);
    check_against_reference(net, opt, adam_reference(0.5, 0.75, 0.1), 107);
}

/// Two Adam steps on one scalar, worked out by hand (β₁ = 0.9, β₂ = 0.999, ε = 1e-8, η = 0.1):
///
/// ```text
/// t = 1, g = 0.5:  m = 0.05,  v = 0.00025,  m̂ = 0.5,  v̂ = 0.25
///                  θ = 1 - 0.1 · 0.5 / (0.5 + 1e-8) = 0.900000002
/// t = 2, g = -1:   m = 0.045 - 0.1 = -0.055,  v = 0.00024975 + 0.001 = 0.00124975
///                  m̂ = -0.055 / 0.19 = -0.28947368...,  v̂ = 0.00124975 / 0.001999 = 0.62518759...
///                  θ = 0.900000002 + 0.1 · 0.28947368 / (0.79068805 + 1e-8) = 0.93661035424...
/// ```
#[test]
fn adam_by_hand() {
    let mut layer = Dense::<f64, 1, 1, Identity>::new(Matrix::filled(1.0), Matrix::filled(0.0));
    let mut adam = Adam::new(&layer);
    let grads = |g| Dense::new(Matrix::filled(g), Matrix::filled(0.0));
    adam.update(&mut layer, &grads(0.5), 0.1);
    assert!((layer.weight[(0, 0)] - 0.900_000_002).abs() < 1e-15);
    adam.update(&mut layer, &grads(-1.0), 0.1);
    assert!((layer.weight[(0, 0)] - 0.936_610_354_240_565_4).abs() < 1e-12);
    // A zero gradient throughout leaves the bias where it was (0 / (0 + ε) = 0).
    assert_eq!(layer.bias[(0, 0)], 0.0);
}

/// Momentum by hand: v = 1, θ = 1 - 0.1; v = 0.9 + 2 = 2.9, θ = 0.9 - 0.2 · 2.9 = 0.32.
#[test]
fn momentum_by_hand() {
    let mut layer = Dense::<f64, 1, 1, Identity>::new(Matrix::filled(1.0), Matrix::filled(0.0));
    let mut opt = Momentum::new(&layer, 0.9);
    let grads = |g| Dense::new(Matrix::filled(g), Matrix::filled(0.0));
    opt.update(&mut layer, &grads(1.0), 0.1);
    assert!((layer.weight[(0, 0)] - 0.9).abs() < 1e-15);
    opt.update(&mut layer, &grads(2.0), 0.2);
    assert!((layer.weight[(0, 0)] - 0.32).abs() < 1e-15);
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-15 * b.abs().max(1.0)
}

#[test]
fn constant_schedule() {
    for step in [0, 1, 50, 1_000_000, usize::MAX] {
        assert_eq!(Schedule::Constant.learning_rate(0.1, step), 0.1);
    }
}

#[test]
fn step_decay_schedule() {
    let s = Schedule::StepDecay {
        every: 10,
        factor: 0.5,
    };
    let expected = [
        (0, 0.1),
        (1, 0.1),
        (9, 0.1),
        (10, 0.05),
        (19, 0.05),
        (20, 0.025),
        (25, 0.025),
        (30, 0.0125),
    ];
    for (step, rate) in expected {
        assert!(
            close(s.learning_rate(0.1, step), rate),
            "step {step}: {} vs {rate}",
            s.learning_rate(0.1, step)
        );
    }
    let s = Schedule::StepDecay {
        every: 1,
        factor: 0.9,
    };
    assert!(close(s.learning_rate(2.0, 3), 2.0 * 0.729));
    // Far past the end: decays to 0, without overflow or NaN.
    assert_eq!(s.learning_rate(2.0, usize::MAX), 0.0);
    // `every == 0` means never.
    let never = Schedule::StepDecay {
        every: 0,
        factor: 0.5,
    };
    for step in [0, 1, 10, usize::MAX] {
        assert_eq!(never.learning_rate(0.1, step), 0.1);
    }
}

#[test]
fn cosine_schedule() {
    let (base, floor) = (0.1, 0.01);
    let s = Schedule::Cosine { total: 100, floor };
    // Start: the base rate.
    assert!(close(s.learning_rate(base, 0), base));
    // Quarter and middle: floor + (base - floor)(1 + cos(π t / T)) / 2.
    let quarter = floor + (base - floor) * (1.0 + std::f64::consts::FRAC_1_SQRT_2) / 2.0;
    assert!(close(s.learning_rate(base, 25), quarter));
    assert!(close(s.learning_rate(base, 50), (base + floor) / 2.0));
    assert!(close(s.learning_rate(base, 75), base + floor - quarter));
    // Just before the end: just above the floor.
    let last = s.learning_rate(base, 99);
    assert!(last > floor && last < floor + 1e-4, "{last}");
    // End and past the end: the floor.
    for step in [100, 101, 1000, usize::MAX] {
        assert_eq!(s.learning_rate(base, step), floor);
    }
    // Non-increasing throughout.
    let rates: Vec<f64> = (0..=120).map(|t| s.learning_rate(base, t)).collect();
    assert!(rates.windows(2).all(|w| w[1] <= w[0]), "{rates:?}");
    // `total == 0`: no decay phase at all, the floor from the start (no 0/0).
    let empty = Schedule::Cosine { total: 0, floor };
    for step in [0, 1, 10] {
        assert_eq!(empty.learning_rate(base, step), floor);
    }
    // `total == 1`: the base rate at step 0, then the floor.
    let one = Schedule::Cosine { total: 1, floor };
    assert!(close(one.learning_rate(base, 0), base));
    assert_eq!(one.learning_rate(base, 1), floor);
}

/// PyTorch's `SGD(momentum=μ, weight_decay=λ)`: `v ← μ v + (g + λ θ)`, `θ ← θ - η v`.
fn momentum_with_decay_reference(mu: f64, lambda: f64) -> impl FnMut(&mut [f64], &[f64], f64) {
    let mut velocity: Vec<f64> = Vec::new();
    move |theta, g, eta| {
        velocity.resize(theta.len(), 0.0);
        for ((t, v), g) in theta.iter_mut().zip(&mut velocity).zip(g) {
            *v = mu * *v + (g + lambda * *t);
            *t -= eta * *v;
        }
    }
}

#[test]
fn momentum_with_weight_decay_matches_reference() {
    let net = tiny_net(5);
    let opt = Momentum::new(&net, 0.9).with_weight_decay(0.05);
    check_against_reference(net, opt, momentum_with_decay_reference(0.9, 0.05), 104);
}

/// Weight decay shrinks batch normalization's learned scale and shift, not its running
/// statistics (PyTorch's buffers, which its optimizers never see).
#[test]
fn weight_decay_leaves_running_statistics() {
    use constmat::nn::BatchNorm1d;
    let mut norm = BatchNorm1d::<f64, 2, Identity>::zeros();
    for k in 0..4 {
        norm.tensor_mut(k).copy_from_slice(&[2.0, -1.0]);
    }
    let mut gradients = BatchNorm1d::<f64, 2, Identity>::zeros();
    for k in 0..4 {
        gradients.tensor_mut(k).fill(0.0); // (`zeros` holds γ = 1, the layer's identity)
    }
    let mut opt = Momentum::new(&norm, 0.9).with_weight_decay(0.5);
    opt.update(&mut norm, &gradients, 0.1);
    // γ and β: θ - 0.1·(0.5·θ) = 0.95·θ.
    assert_eq!(norm.tensor(0), [1.9, -0.95]);
    assert_eq!(norm.tensor(1), [1.9, -0.95]);
    // The running mean and variance as they were.
    assert_eq!(norm.tensor(2), [2.0, -1.0]);
    assert_eq!(norm.tensor(3), [2.0, -1.0]);
}
