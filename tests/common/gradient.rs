//! The finite-difference check of the convolutional tests (`tests/conv.rs`, `tests/pool.rs`):
//! samples of any nesting as flat `f64`s, random samples and layers, and `check`, which
//! compares every tensor's and the input's gradient of `L = Σ (output ⊙ R)` with central
//! differences.

use constmat::nn::{Parameters, RandomInit, Sample, Train};
use rand::distr::{Distribution, Uniform};
use rand::rngs::StdRng;

/// The step of the central differences.
pub const H: f64 = 1e-6;
/// The largest relative error allowed per element (see `tests/gradient_check.rs`).
pub const TOLERANCE: f64 = 1e-6;
/// The denominator's floor: below it the bound is the absolute `TOLERANCE * FLOOR = 1e-8`.
/// Ten times `tests/gradient_check.rs`'s, because a convolution's forward pass sums longer
/// dot products (150 terms for 6 channels of 5 x 5) in sequence on the portable loops that
/// `f64` takes: the central differences' rounding noise, `ε |L| / h`, reaches 3e-9 here,
/// where a dense net's stays under 3e-10. Still a relative 1e-6 on every derivative above
/// 0.01, where a wrong backward pass is wrong by O(1).
pub const FLOOR: f64 = 1e-2;

/// Element-wise access to a sample of `f64`s of any nesting (`[[[f64; W]; H]; C]`, `[f64; N]`).
pub trait Flat: Sample {
    const LEN: usize;
    fn get(&self, i: usize) -> f64;
    fn get_mut(&mut self, i: usize) -> &mut f64;
}

impl Flat for f64 {
    const LEN: usize = 1;
    fn get(&self, _: usize) -> f64 {
        *self
    }
    fn get_mut(&mut self, _: usize) -> &mut f64 {
        self
    }
}

impl<S: Flat, const N: usize> Flat for [S; N] {
    const LEN: usize = N * S::LEN;
    fn get(&self, i: usize) -> f64 {
        self[i / S::LEN].get(i % S::LEN)
    }
    fn get_mut(&mut self, i: usize) -> &mut f64 {
        self[i / S::LEN].get_mut(i % S::LEN)
    }
}

pub fn uniform() -> Uniform<f64> {
    Uniform::new(-1.0, 1.0).unwrap()
}

/// A sample with every element uniform on [-1, 1).
pub fn random_sample<S: Flat>(rng: &mut StdRng) -> S {
    let mut s = S::ZERO;
    for i in 0..S::LEN {
        *s.get_mut(i) = uniform().sample(rng);
    }
    s
}

/// The worst per-element error `|a - n| / max(FLOOR, |a| + |n|)`, asserted below `TOLERANCE`,
/// and a non-vacuous check (some derivative above 1e-3).
pub fn assert_close(what: &str, analytic: &[f64], numeric: &[f64]) -> f64 {
    assert_eq!(analytic.len(), numeric.len());
    let err = analytic
        .iter()
        .zip(numeric)
        .map(|(&a, &n)| (a - n).abs() / (a.abs() + n.abs()).max(FLOOR))
        .fold(0.0, f64::max);
    assert!(
        err < TOLERANCE,
        "{what}: worst relative error {err:e}\n analytic: {analytic:?}\n numeric:  {numeric:?}"
    );
    assert!(
        analytic.iter().any(|a| a.abs() > 1e-3),
        "{what}: the gradient is (almost) all zero, the check is vacuous"
    );
    err
}

/// `L = Σ output ⊙ R` for a fixed random `R`: checks every parameter tensor of `net` and `dX`
/// against central differences of the forward pass (`Layer::forward`, the pass baked nets run).
/// The backward pass starts from dirty buffers, as in `tests/gradient_check.rs`.
///
/// `R` is uniform on [-1, 1) scaled by `1/√(number of outputs)`, so that `|L|` stays near 1
/// however many outputs the net has: the rounding error of a difference quotient grows with
/// `|L|` (`ε·|L|/h`), and unscaled, a layer with a few hundred outputs came within a factor of
/// two of the tolerance on noise alone.
pub fn check<N, const B: usize>(what: &str, net: &N, x: &[N::In; B], rng: &mut StdRng) -> f64
where
    N: Train<f64, B> + Clone,
    N::In: Flat,
    N::Out: Flat,
{
    check_pass(what, net, x, rng, false)
}

/// [`check`] of the training pass: the central differences of
/// [`Train::forward_train`](constmat::nn::Train::forward_train) (each from a fresh workspace),
/// for layers whose training pass differs from their prediction (batch normalization, with the
/// batch's statistics).
pub fn check_training<N, const B: usize>(
    what: &str,
    net: &N,
    x: &[N::In; B],
    rng: &mut StdRng,
) -> f64
where
    N: Train<f64, B> + Clone,
    N::In: Flat,
    N::Out: Flat,
{
    check_pass(what, net, x, rng, true)
}

fn check_pass<N, const B: usize>(
    what: &str,
    net: &N,
    x: &[N::In; B],
    rng: &mut StdRng,
    training: bool,
) -> f64
where
    N: Train<f64, B> + Clone,
    N::In: Flat,
    N::Out: Flat,
{
    let scale = 1.0 / ((B * N::Out::LEN) as f64).sqrt();
    let r: [N::Out; B] = std::array::from_fn(|_| {
        let mut r: N::Out = random_sample(rng);
        (0..N::Out::LEN).for_each(|i| *r.get_mut(i) *= scale);
        r
    });
    let loss = |net: &N, x: &[N::In; B]| {
        let mut out = [N::Out::ZERO; B];
        if training {
            out = *net.forward_train(x, &mut net.workspace());
        } else {
            net.forward(x, &mut out);
        }
        (0..B)
            .flat_map(|b| (0..N::Out::LEN).map(move |i| (b, i)))
            .map(|(b, i)| out[b].get(i) * r[b].get(i))
            .sum::<f64>()
    };
    // Analytic, from dirty buffers.
    let mut ws = net.workspace();
    let other: [N::In; B] = std::array::from_fn(|_| random_sample(rng));
    net.forward_train(&other, &mut ws);
    net.forward_train(x, &mut ws);
    let mut grads = net.zeros_like();
    for k in 0..grads.tensor_count() {
        grads.tensor_mut(k).iter_mut().for_each(|g| *g = 1e3);
    }
    let mut dx: [N::In; B] = std::array::from_fn(|_| random_sample(rng));
    net.backward(x, &mut ws, &r, Some(&mut dx), &mut grads);

    let mut worst = 0.0_f64;
    let mut probe = net.clone();
    for k in 0..net.tensor_count() {
        // Batch normalization's running statistics: not read by the training pass, not
        // learned by gradients (the backward pass writes 0).
        // (and its integer `num_batches_tracked`, which has no float values).
        if net.tensor(k).is_empty() {
            continue;
        }
        if training && net.tensor_info(k).spec.field.starts_with("running_") {
            assert!(grads.tensor(k).iter().all(|&g| g == 0.0), "{what}: {k}");
            continue;
        }
        let numeric: Vec<f64> = (0..net.tensor(k).len())
            .map(|i| {
                let original = probe.tensor(k)[i];
                probe.tensor_mut(k)[i] = original + H;
                let plus = loss(&probe, x);
                probe.tensor_mut(k)[i] = original - H;
                let minus = loss(&probe, x);
                probe.tensor_mut(k)[i] = original;
                (plus - minus) / (2.0 * H)
            })
            .collect();
        let name = net.tensor_info(k).name();
        worst = worst.max(assert_close(
            &format!("{what}: {name}"),
            grads.tensor(k),
            &numeric,
        ));
    }
    let mut x_probe = *x;
    let numeric: Vec<f64> = (0..B * N::In::LEN)
        .map(|i| {
            let (b, i) = (i / N::In::LEN, i % N::In::LEN);
            let original = x_probe[b].get(i);
            *x_probe[b].get_mut(i) = original + H;
            let plus = loss(net, &x_probe);
            *x_probe[b].get_mut(i) = original - H;
            let minus = loss(net, &x_probe);
            *x_probe[b].get_mut(i) = original;
            (plus - minus) / (2.0 * H)
        })
        .collect();
    let analytic: Vec<f64> = (0..B * N::In::LEN)
        .map(|i| dx[i / N::In::LEN].get(i % N::In::LEN))
        .collect();
    worst.max(assert_close(&format!("{what}: dX"), &analytic, &numeric))
}

/// A random layer (biases too), so that the checks see non-zero biases.
pub fn random_layer<N: RandomInit + Parameters<f64>>(rng: &mut StdRng) -> N {
    let mut net = N::random(rng);
    for k in 0..net.tensor_count() {
        net.tensor_mut(k)
            .iter_mut()
            .for_each(|v| *v = uniform().sample(rng));
    }
    net
}
