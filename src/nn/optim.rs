//! Optimizers: each updates parameters in place from their gradients, one pass per tensor.
//!
//! All three walk the tensors of a [`Parameters`] value (`0.weight`, `0.bias`, ...) and their
//! gradients in lockstep; the stateful ones keep their state in values of the net's own type, so
//! it has the right shapes by construction.

use num_traits::Float;

use super::Parameters;
use crate::Scalar;

/// Updates parameters from gradients.
///
/// A stateful optimizer is built for one net type (its state has the net's shapes), and
/// updates only nets of that type: using it with another is a compile error naming both.
///
/// # Overflow
///
/// [`Trainer::step`](super::Trainer::step) never leaves a net with a NaN or an infinity after
/// an error, with one exception, which this trait decides. An optimizer that sets
/// [`CHECKS_OVERFLOW`](Self::CHECKS_OVERFLOW) and answers
/// [`overflowing_tensor`](Self::overflowing_tensor) ([`Sgd`], [`Momentum`] and [`Adam`] do) is
/// asked before each update, and an update that would overflow is refused with the net and the
/// optimizer unchanged. One that does not (the provided defaults) is checked only after its
/// update: the step then returns [`StepError::Update`](super::StepError::Update) with the
/// update applied, the net holding a non-finite value and the optimizer's state moved. An
/// optimizer that wraps others (an enum choosing one at run time, say) should forward both
/// items:
///
/// ```
/// use constmat::nn::{Adam, Optimizer, Parameters, Sgd};
///
/// enum Either<N> {
///     Sgd(Sgd),
///     Adam(Adam<f32, N>),
/// }
///
/// impl<N: Parameters<f32>> Optimizer<f32, N> for Either<N> {
///     const CHECKS_OVERFLOW: bool = true; // both parts check
///
///     fn overflowing_tensor(&self, net: &N, gradients: &N, lr: f32) -> Option<usize> {
///         match self {
///             Either::Sgd(o) => o.overflowing_tensor(net, gradients, lr),
///             Either::Adam(o) => o.overflowing_tensor(net, gradients, lr),
///         }
///     }
///
///     fn update(&mut self, net: &mut N, gradients: &N, lr: f32) {
///         match self {
///             Either::Sgd(o) => o.update(net, gradients, lr),
///             Either::Adam(o) => o.update(net, gradients, lr),
///         }
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` was not built for the net `{P}`",
    label = "this optimizer's state has the shapes of another net",
    note = "build the optimizer from the net it trains: `Adam::new(&net)`, `Momentum::new(&net, 0.9)`"
)]
pub trait Optimizer<T, P: Parameters<T>> {
    /// One update of `parameters` from `gradients` with the given learning rate (which a
    /// [`Schedule`](super::Schedule) may vary from step to step).
    fn update(&mut self, parameters: &mut P, gradients: &P, learning_rate: T);

    /// Whether [`overflowing_tensor`](Self::overflowing_tensor) answers for this optimizer.
    /// [`Trainer::step`](super::Trainer::step) then asks it before updating, and refuses an
    /// update that would overflow with the net and the optimizer unchanged; otherwise it can
    /// only check the parameters after the update, which then stays applied (see
    /// [Overflow](Self#overflow)). True for [`Sgd`], [`Momentum`] and [`Adam`].
    const CHECKS_OVERFLOW: bool = false;

    /// The first tensor (in [`Parameters`] order) of which [`update`](Self::update) with these
    /// arguments would make a value NaN or infinite, in the parameters or the optimizer's state,
    /// worked out without changing anything; `None` when the update stays finite. The provided
    /// version answers `None` (see [`CHECKS_OVERFLOW`](Self::CHECKS_OVERFLOW)).
    fn overflowing_tensor(&self, parameters: &P, gradients: &P, learning_rate: T) -> Option<usize> {
        let _ = (parameters, gradients, learning_rate);
        None
    }
}

/// Whether `f(θ, s, g)` is finite for every parameter `θ` with its optimizer state `s` and
/// gradient `g`, with `f` what an update would write. `x - x` is 0 for a finite `x` and NaN
/// otherwise, and a NaN stays in a sum: 16 independent sums of it, no comparison and no early
/// exit, over chunks that the compiler vectorizes (it runs on every training step).
#[inline(always)]
fn stays_finite<T: Scalar>(
    theta: &[T],
    state: [&[T]; 2],
    g: &[T],
    f: impl Fn(T, [T; 2], T) -> T,
) -> bool {
    // On the wide vectors: compiled into the generic caller, this ran on SSE2's 4 lanes.
    crate::kernels::with_wide_vectors(
        #[inline(always)]
        || stays_finite_on(theta, state, g, f),
    )
}

/// [`stays_finite`]'s loops.
#[inline(always)]
#[allow(clippy::eq_op)] // `v - v` is the point: 0, or NaN for a value that is not finite
fn stays_finite_on<T: Scalar>(
    theta: &[T],
    state: [&[T]; 2],
    g: &[T],
    f: impl Fn(T, [T; 2], T) -> T,
) -> bool {
    let mut sums = [T::zero(); 16];
    let (t, s0, s1, gc) = (
        theta.chunks_exact(16),
        state[0].chunks_exact(16),
        state[1].chunks_exact(16),
        g.chunks_exact(16),
    );
    let mut rest = T::zero();
    for (((&t, &s0), &s1), &g) in t
        .remainder()
        .iter()
        .zip(s0.remainder())
        .zip(s1.remainder())
        .zip(gc.remainder())
    {
        let v = f(t, [s0, s1], g);
        rest += v - v;
    }
    for (((t, s0), s1), g) in t.zip(s0).zip(s1).zip(gc) {
        for ((((sum, &t), &s0), &s1), &g) in sums.iter_mut().zip(t).zip(s0).zip(s1).zip(g) {
            let v = f(t, [s0, s1], g);
            *sum += v - v;
        }
    }
    sums.iter().fold(rest, |acc, &s| acc + s) == T::zero()
}

/// Plain stochastic gradient descent: `θ ← θ - η·g`.
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Dense, Identity, Optimizer, Sgd};
///
/// let mut layer = Dense::<f64, 1, 1, Identity>::new(Matrix::filled(1.0), Matrix::filled(0.0));
/// let grads = Dense::new(Matrix::filled(2.0), Matrix::filled(-1.0));
/// Sgd::new().update(&mut layer, &grads, 0.1);
/// assert_eq!((layer.weight[(0, 0)], layer.bias[(0, 0)]), (0.8, 0.1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sgd;

impl Sgd {
    /// Plain SGD (it has no state).
    #[must_use]
    pub fn new() -> Self {
        Self
    }
}

impl<T: Scalar, P: Parameters<T>> Optimizer<T, P> for Sgd {
    fn update(&mut self, parameters: &mut P, gradients: &P, learning_rate: T) {
        for k in 0..parameters.tensor_count() {
            let g = gradients.tensor(k);
            for (theta, &g) in parameters.tensor_mut(k).iter_mut().zip(g) {
                *theta -= learning_rate * g;
            }
        }
    }

    const CHECKS_OVERFLOW: bool = true;

    fn overflowing_tensor(&self, parameters: &P, gradients: &P, learning_rate: T) -> Option<usize> {
        (0..parameters.tensor_count()).find(|&k| {
            let (theta, g) = (parameters.tensor(k), gradients.tensor(k));
            // No state: the parameters stand in for it, unused.
            !stays_finite(theta, [theta, theta], g, |theta, _, g| {
                theta - learning_rate * g
            })
        })
    }
}

/// SGD with momentum, PyTorch's formulation: `v ← μ·v + g`, `θ ← θ - η·v`; with a weight decay
/// `λ` ([`with_weight_decay`](Self::with_weight_decay)), `g + λ·θ` in place of `g` (PyTorch's
/// `SGD(momentum=μ, weight_decay=λ)`), except for running statistics (batch normalization's,
/// [`TensorSpec::buffer`](crate::format::TensorSpec::buffer)), which are not learned.
///
/// A velocity that decays below the smallest normal float is set to zero (see
/// [`flush_subnormal`]).
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Dense, Identity, Momentum, Optimizer};
///
/// let mut layer = Dense::<f64, 1, 1, Identity>::new(Matrix::filled(1.0), Matrix::filled(0.0));
/// let grads = Dense::new(Matrix::filled(1.0), Matrix::filled(0.0));
/// let mut opt = Momentum::new(&layer, 0.9);
/// opt.update(&mut layer, &grads, 0.1); // v = 1,   θ = 1 - 0.1
/// opt.update(&mut layer, &grads, 0.1); // v = 1.9, θ = 0.9 - 0.19
/// assert!((layer.weight[(0, 0)] - 0.71).abs() < 1e-12);
/// ```
#[derive(Debug, Clone)]
pub struct Momentum<T, P> {
    momentum: T,
    weight_decay: T,
    velocity: P,
}

impl<T: Scalar, P: Parameters<T>> Momentum<T, P> {
    /// Momentum `μ` (0.9 is the usual choice) for parameters shaped like `parameters`, no
    /// weight decay.
    #[must_use]
    pub fn new(parameters: &P, momentum: T) -> Self {
        Self {
            momentum,
            weight_decay: T::zero(),
            velocity: parameters.zeros_like(),
        }
    }

    /// The same optimizer with the weight decay `λ` (L2 regularization: `λ·θ` added to each
    /// learned parameter's gradient; `5e-4` is usual for image nets).
    ///
    /// ```
    /// use constmat::Matrix;
    /// use constmat::nn::{Dense, Identity, Momentum, Optimizer};
    ///
    /// let mut layer = Dense::<f64, 1, 1, Identity>::new(Matrix::filled(2.0), Matrix::filled(0.0));
    /// let no_gradient = Dense::new(Matrix::filled(0.0), Matrix::filled(0.0));
    /// let mut opt = Momentum::new(&layer, 0.9).with_weight_decay(0.01);
    /// opt.update(&mut layer, &no_gradient, 0.5); // v = 0.01·2, θ = 2 - 0.5·0.02
    /// assert!((layer.weight[(0, 0)] - 1.99).abs() < 1e-12);
    /// ```
    #[must_use]
    pub fn with_weight_decay(mut self, weight_decay: T) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// `λ` for tensor `k`: the weight decay, or 0 for a running statistic.
    fn decay_of(&self, k: usize) -> T {
        match P::SPEC.tensor(k) {
            Some(tensor) if !tensor.spec.buffer => self.weight_decay,
            _ => T::zero(),
        }
    }
}

impl<T: Scalar + Float, P: Parameters<T>> Optimizer<T, P> for Momentum<T, P> {
    fn update(&mut self, parameters: &mut P, gradients: &P, learning_rate: T) {
        for k in 0..parameters.tensor_count() {
            let decay = self.decay_of(k);
            let g = gradients.tensor(k);
            let v = self.velocity.tensor_mut(k);
            let theta = parameters.tensor_mut(k);
            if decay == T::zero() {
                for ((theta, v), &g) in theta.iter_mut().zip(v).zip(g) {
                    *v = flush_subnormal(self.momentum * *v + g);
                    *theta -= learning_rate * *v;
                }
            } else {
                for ((theta, v), &g) in theta.iter_mut().zip(v).zip(g) {
                    *v = flush_subnormal(self.momentum * *v + (g + decay * *theta));
                    *theta -= learning_rate * *v;
                }
            }
        }
    }

    const CHECKS_OVERFLOW: bool = true;

    fn overflowing_tensor(&self, parameters: &P, gradients: &P, learning_rate: T) -> Option<usize> {
        // θ - η·(μ·v + g + λ·θ): a velocity that overflows makes the parameter infinite too.
        (0..parameters.tensor_count()).find(|&k| {
            let decay = self.decay_of(k);
            let (theta, v, g) = (
                parameters.tensor(k),
                self.velocity.tensor(k),
                gradients.tensor(k),
            );
            !stays_finite(theta, [v, v], g, |theta, [v, _], g| {
                theta - learning_rate * (self.momentum * v + (g + decay * theta))
            })
        })
    }
}

/// Adam (Kingma & Ba 2015) with bias correction:
///
/// ```text
/// m ← β₁·m + (1-β₁)·g        v ← β₂·v + (1-β₂)·g²
/// θ ← θ - η · (m / (1-β₁ᵗ)) / (√(v / (1-β₂ᵗ)) + ε)
/// ```
///
/// ```
/// use constmat::Matrix;
/// use constmat::nn::{Adam, Dense, Identity, Optimizer};
///
/// let mut layer = Dense::<f64, 1, 1, Identity>::new(Matrix::filled(1.0), Matrix::filled(0.0));
/// let grads = Dense::new(Matrix::filled(0.5), Matrix::filled(0.0));
/// let mut adam = Adam::new(&layer);
/// adam.update(&mut layer, &grads, 0.01);
/// // The first step of Adam moves each parameter by about η, whatever the gradient's scale.
/// assert!((layer.weight[(0, 0)] - 0.99).abs() < 1e-6);
/// ```
#[derive(Debug, Clone)]
pub struct Adam<T, P> {
    beta1: T,
    beta2: T,
    epsilon: T,
    first_moment: P,
    second_moment: P,
    /// β₁ᵗ and β₂ᵗ, updated each step rather than recomputed with `powi`.
    beta1_power: T,
    beta2_power: T,
}

impl<T: Scalar + Float, P: Parameters<T>> Adam<T, P> {
    /// Adam with the usual constants β₁ = 0.9, β₂ = 0.999, ε = 1e-8.
    #[must_use]
    pub fn new(parameters: &P) -> Self {
        let c = |x: f64| T::from(x).expect("a float holds Adam's constants");
        Self::with_constants(parameters, c(0.9), c(0.999), c(1e-8))
    }

    /// Adam with the given `β₁`, `β₂` and `ε`.
    #[must_use]
    pub fn with_constants(parameters: &P, beta1: T, beta2: T, epsilon: T) -> Self {
        Self {
            beta1,
            beta2,
            epsilon,
            first_moment: parameters.zeros_like(),
            second_moment: parameters.zeros_like(),
            beta1_power: T::one(),
            beta2_power: T::one(),
        }
    }
}

impl<T: Scalar + Float, P: Parameters<T>> Optimizer<T, P> for Adam<T, P> {
    fn update(&mut self, parameters: &mut P, gradients: &P, learning_rate: T) {
        let one = T::one();
        self.beta1_power *= self.beta1;
        self.beta2_power *= self.beta2;
        let m_correction = one / (one - self.beta1_power);
        let v_correction = one / (one - self.beta2_power);
        for k in 0..parameters.tensor_count() {
            let g = gradients.tensor(k);
            let m = self.first_moment.tensor_mut(k);
            let v = self.second_moment.tensor_mut(k);
            let theta = parameters.tensor_mut(k);
            for (((theta, m), v), &g) in theta.iter_mut().zip(m).zip(v).zip(g) {
                *m = flush_subnormal(self.beta1 * *m + (one - self.beta1) * g);
                *v = flush_subnormal(self.beta2 * *v + (one - self.beta2) * g * g);
                let m_hat = *m * m_correction;
                let v_hat = *v * v_correction;
                *theta -= learning_rate * m_hat / (v_hat.sqrt() + self.epsilon);
            }
        }
    }

    const CHECKS_OVERFLOW: bool = true;

    fn overflowing_tensor(&self, parameters: &P, gradients: &P, learning_rate: T) -> Option<usize> {
        // The next step's moments and parameter, as `update` computes them; a second moment
        // that overflows leaves the parameter finite (m / ∞ = 0) but the state unusable, so both
        // are checked (`v - v` is NaN for an infinite `v`).
        let one = T::one();
        let m_correction = one / (one - self.beta1_power * self.beta1);
        let v_correction = one / (one - self.beta2_power * self.beta2);
        (0..parameters.tensor_count()).find(|&k| {
            let state = [self.first_moment.tensor(k), self.second_moment.tensor(k)];
            #[allow(clippy::eq_op)] // v - v: 0, or NaN for a second moment that overflowed
            !stays_finite(
                parameters.tensor(k),
                state,
                gradients.tensor(k),
                |theta, [m, v], g| {
                    let m = self.beta1 * m + (one - self.beta1) * g;
                    let v = self.beta2 * v + (one - self.beta2) * g * g;
                    theta
                        - learning_rate * (m * m_correction)
                            / ((v * v_correction).sqrt() + self.epsilon)
                        + (v - v)
                },
            )
        })
    }
}

/// `x`, or zero when `|x|` is below the smallest normal float (a subnormal).
///
/// Optimizer state that stops receiving gradient (a dead ReLU's weights, say) decays
/// geometrically and ends up subnormal. Arithmetic on subnormals is up to ~100 times slower on
/// x86 CPUs: measured here, one momentum update of the 784-128-64-10 net took 2.76 ms with
/// decayed velocities against 35 µs otherwise. A value that small cannot move any parameter
/// anyway (`θ - η·v == θ`), so flushing it changes no result that matters. The comparison and
/// select vectorize, unlike a branch.
///
/// ```
/// use constmat::nn::flush_subnormal;
/// assert_eq!(flush_subnormal(1e-40_f32), 0.0);
/// assert_eq!(flush_subnormal(-1e-40_f32), 0.0);
/// assert_eq!(flush_subnormal(1e-30_f32), 1e-30);
/// ```
#[inline]
#[must_use]
pub fn flush_subnormal<T: Float>(x: T) -> T {
    if x.abs() < T::min_positive_value() {
        T::zero()
    } else {
        x
    }
}
