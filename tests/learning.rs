//! End-to-end learning: small nets trained with `Trainer` reach a good accuracy or a low loss on
//! synthetic tasks, and a diverging step is reported without touching the parameters.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::Matrix;
use constmat::nn::{
    Adam, Dense, Diverged, Identity, Loss, MeanSquaredError, Momentum, Parameters, RandomInit,
    Relu, Schedule, Sgd, SoftmaxCrossEntropy, StepError, Tanh, Train, Trainer, argmax,
};
use rand::distr::{Distribution, Uniform};
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};
use rand_distr::Normal;

/// Two interleaved half-circles (scikit-learn's `make_moons`) with Gaussian noise: class 0 is the
/// upper moon `(cos t, sin t)`, class 1 the lower `(1 - cos t, 0.5 - sin t)`, `t ∈ [0, π]`.
/// Not linearly separable: a linear classifier gets about 85% of it right.
fn two_moons(n: usize, noise: f64, rng: &mut StdRng) -> Vec<([f64; 2], usize)> {
    let t = Uniform::new_inclusive(0.0, core::f64::consts::PI).unwrap();
    let noise = Normal::new(0.0, noise).unwrap();
    (0..n)
        .map(|i| {
            let class = i % 2;
            let t = t.sample(rng);
            let (x, y) = if class == 0 {
                (t.cos(), t.sin())
            } else {
                (1.0 - t.cos(), 0.5 - t.sin())
            };
            ([x + noise.sample(rng), y + noise.sample(rng)], class)
        })
        .collect()
}

/// Rows `indices` of `points` as an input batch and one-hot targets.
fn batch<const B: usize>(
    points: &[([f64; 2], usize)],
    indices: &[usize],
) -> (Matrix<f64, B, 2>, Matrix<f64, B, 2>) {
    let x = Matrix::from_fn(|r, c| points[indices[r]].0[c]);
    let y = Matrix::from_fn(|r, c| f64::from(u8::from(points[indices[r]].1 == c)));
    (x, y)
}

type MoonNet = constmat::net![
    Dense<f64, 2, 16, Tanh>,
    Dense<f64, 16, 16, Relu>,
    Dense<f64, 16, 2, Identity>,
];

/// The fraction of `points` whose predicted class (the larger logit) is right.
fn accuracy(net: &MoonNet, points: &[([f64; 2], usize)]) -> f64 {
    const B: usize = 32;
    assert_eq!(points.len() % B, 0);
    let mut ws = Train::<f64, B>::workspace(net);
    let mut correct = 0;
    for chunk in (0..points.len()).collect::<Vec<_>>().chunks(B) {
        let (x, _) = batch::<B>(points, chunk);
        let logits = net.forward_train(&x, &mut ws);
        correct += chunk
            .iter()
            .zip(logits)
            .filter(|&(&i, row)| points[i].1 == argmax(row))
            .count();
    }
    correct as f64 / points.len() as f64
}

#[test]
fn two_moons_are_classified() {
    const B: usize = 32;
    let mut rng = StdRng::seed_from_u64(2024);
    let train = two_moons(512, 0.15, &mut rng);
    let test = two_moons(512, 0.15, &mut StdRng::seed_from_u64(7)); // held out
    let mut net = MoonNet::random(&mut rng);
    let initial = accuracy(&net, &test);
    let mut trainer = Trainer::<f64, MoonNet, B>::new(&net);
    let mut adam = Adam::new(&net);
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut first_epoch_loss = 0.0;
    let mut last_epoch_loss = 0.0;
    let epochs = 60;
    for epoch in 0..epochs {
        order.shuffle(&mut rng);
        let mut total = 0.0;
        for chunk in order.chunks(B) {
            let (x, y) = batch::<B>(&train, chunk);
            total += trainer
                .step(&mut net, &mut adam, 0.01, &SoftmaxCrossEntropy, &x, &y)
                .expect("training does not diverge");
        }
        let mean = total / (train.len() / B) as f64;
        if epoch == 0 {
            first_epoch_loss = mean;
        }
        last_epoch_loss = mean;
    }
    let train_accuracy = accuracy(&net, &train);
    let test_accuracy = accuracy(&net, &test);
    eprintln!(
        "two moons: test accuracy {initial:.3} -> {test_accuracy:.3} (train {train_accuracy:.3}), \
         mean loss {first_epoch_loss:.4} -> {last_epoch_loss:.4}"
    );
    assert!(last_epoch_loss < first_epoch_loss / 5.0);
    assert!(test_accuracy >= 0.95, "test accuracy {test_accuracy}");
}

/// XOR with momentum: the four corners, each with its own class, all learned.
#[test]
fn xor_is_learned_with_momentum() {
    type Net = constmat::net![Dense<f64, 2, 8, Tanh>, Dense<f64, 8, 2, Identity>];
    let mut rng = StdRng::seed_from_u64(3);
    let mut net = Net::random(&mut rng);
    let x = Matrix::<f64, 4, 2>::from_rows([[0., 0.], [0., 1.], [1., 0.], [1., 1.]]);
    let y = Matrix::<f64, 4, 2>::from_rows([[1., 0.], [0., 1.], [0., 1.], [1., 0.]]);
    let mut trainer = Trainer::<f64, Net, 4>::new(&net);
    let mut momentum = Momentum::new(&net, 0.9);
    let mut loss = f64::INFINITY;
    for _ in 0..500 {
        loss = trainer
            .step(&mut net, &mut momentum, 0.05, &SoftmaxCrossEntropy, &x, &y)
            .unwrap();
    }
    let mut ws = Train::<f64, 4>::workspace(&net);
    let predicted: Vec<usize> = net
        .forward_train(&x, &mut ws)
        .iter()
        .map(|r| argmax(r))
        .collect();
    assert_eq!(predicted, [0, 1, 1, 0], "final loss {loss}");
    assert!(loss < 0.05, "final loss {loss}");
}

/// MSE regression of `sin x` on `[-π, π]`: the loss on a fixed grid drops far below its start.
#[test]
fn sine_is_fitted() {
    type Net = constmat::net![
        Dense<f64, 1, 32, Tanh>,
        Dense<f64, 32, 32, Tanh>,
        Dense<f64, 32, 1, Identity>,
    ];
    const B: usize = 32;
    let pi = core::f64::consts::PI;
    let grid = Matrix::<f64, 64, 1>::from_fn(|r, _| -pi + 2.0 * pi * r as f64 / 63.0);
    let grid_target = grid.map(f64::sin);
    let grid_loss = |net: &Net| {
        let mut ws = Train::<f64, 64>::workspace(net);
        MeanSquaredError.loss(net.forward_train(&grid, &mut ws), &grid_target)
    };

    let mut rng = StdRng::seed_from_u64(11);
    let mut net = Net::random(&mut rng);
    let initial = grid_loss(&net);
    let mut trainer = Trainer::<f64, Net, B>::new(&net);
    let mut adam = Adam::new(&net);
    let u = Uniform::new(-pi, pi).unwrap();
    let steps = 800;
    let schedule = Schedule::Cosine {
        total: steps,
        floor: 1e-4,
    };
    for step in 0..steps {
        let x = Matrix::<f64, B, 1>::random(&u, &mut rng);
        let y = x.map(f64::sin);
        let learning_rate = schedule.learning_rate(0.02, step);
        trainer
            .step(
                &mut net,
                &mut adam,
                learning_rate,
                &MeanSquaredError,
                &x,
                &y,
            )
            .unwrap();
    }
    let last = grid_loss(&net);
    eprintln!("sin x: grid MSE {initial:.4} -> {last:.6}");
    assert!(last < initial / 50.0, "{initial} -> {last}");
    assert!(last < 0.005, "{initial} -> {last}");
}

type SmallNet = constmat::net![Dense<f64, 2, 4, Relu>, Dense<f64, 4, 2, Identity>];

/// Every parameter of `net`, flat.
fn snapshot<P: Parameters<f64>>(net: &P) -> Vec<f64> {
    (0..net.tensor_count())
        .flat_map(|k| net.tensor(k).to_vec())
        .collect()
}

#[test]
fn nan_input_is_reported_and_skips_the_update() {
    let mut rng = StdRng::seed_from_u64(5);
    let mut net = SmallNet::random(&mut rng);
    let mut trainer = Trainer::<f64, SmallNet, 2>::new(&net);
    let mut adam = Adam::new(&net);
    let y = Matrix::<f64, 2, 2>::from_rows([[1., 0.], [0., 1.]]);
    let good = Matrix::<f64, 2, 2>::from_rows([[0.5, -0.5], [1.0, 2.0]]);
    trainer
        .step(&mut net, &mut adam, 0.01, &SoftmaxCrossEntropy, &good, &y)
        .unwrap();

    let before = net.clone();
    let bad = Matrix::<f64, 2, 2>::from_rows([[f64::NAN, 0.0], [1.0, 2.0]]);
    let err = trainer
        .step(&mut net, &mut adam, 0.01, &SoftmaxCrossEntropy, &bad, &y)
        .unwrap_err();
    assert!(
        matches!(err, StepError::Diverged(Diverged { loss }) if loss.is_nan()),
        "{err:?}"
    );
    assert_eq!(net, before, "the failed step changed the parameters");
    let message = err.to_string();
    // The library does not guess the cause (here the data, not the learning rate).
    assert!(!message.contains("learning rate"), "{message}");
    assert!(message.contains("NaN"), "{message}");

    // The trainer is still usable, and the optimizer's state was not advanced by the failure:
    // the next good step does what it would have done without the bad one.
    let mut reference = before.clone();
    let mut reference_trainer = Trainer::<f64, SmallNet, 2>::new(&reference);
    let mut reference_adam = adam.clone();
    reference_trainer
        .step(
            &mut reference,
            &mut reference_adam,
            0.01,
            &SoftmaxCrossEntropy,
            &good,
            &y,
        )
        .unwrap();
    trainer
        .step(&mut net, &mut adam, 0.01, &SoftmaxCrossEntropy, &good, &y)
        .unwrap();
    assert_eq!(snapshot(&net), snapshot(&reference));
}

/// An absurd learning rate blows the parameters up within a few steps; the step that sees the
/// non-finite loss reports it and leaves the (huge but finite) parameters as they were.
#[test]
fn absurd_learning_rate_diverges() {
    let mut rng = StdRng::seed_from_u64(6);
    let mut net = SmallNet::random(&mut rng);
    let mut trainer = Trainer::<f64, SmallNet, 2>::new(&net);
    let x = Matrix::<f64, 2, 2>::from_rows([[0.5, -0.5], [1.0, 2.0]]);
    let y = Matrix::<f64, 2, 2>::from_rows([[3., -1.], [0., 7.]]);
    let mut sgd = Sgd::new();
    let mut outcome = None;
    for step in 0..20 {
        let before = net.clone();
        match trainer.step(&mut net, &mut sgd, 1e80, &MeanSquaredError, &x, &y) {
            Ok(loss) => assert!(loss.is_finite()),
            Err(err) => {
                assert_eq!(net, before, "the failed step changed the parameters");
                assert!(snapshot(&net).iter().all(|p| p.is_finite()));
                outcome = Some((step, err));
                break;
            }
        }
    }
    let (step, err): (usize, StepError<f64>) = outcome.expect("a learning rate of 1e80 diverges");
    assert!(step > 0, "the first loss is finite");
    let StepError::Diverged(Diverged { loss }) = err else {
        panic!("expected a diverged loss, found {err:?}");
    };
    assert!(!loss.is_finite());
    let message = err.to_string();
    assert!(message.contains("diverged"), "{message}");
    assert!(message.contains("not finite"), "{message}");
}

/// An infinite loss (finite outputs, a target so large its square overflows) is reported too.
#[test]
fn infinite_loss_is_reported() {
    let mut rng = StdRng::seed_from_u64(8);
    let mut net = SmallNet::random(&mut rng);
    let mut trainer = Trainer::<f64, SmallNet, 2>::new(&net);
    let before = net.clone();
    let x = Matrix::<f64, 2, 2>::ones();
    let y = Matrix::<f64, 2, 2>::filled(1e200);
    let err = trainer
        .step(&mut net, &mut Sgd::new(), 0.1, &MeanSquaredError, &x, &y)
        .unwrap_err();
    assert_eq!(
        err,
        StepError::Diverged(Diverged {
            loss: f64::INFINITY
        })
    );
    assert_eq!(net, before);
    assert!(err.to_string().contains("inf"), "{err}");
}

/// A learning rate that is not a positive, finite number is refused before anything runs, with
/// every optimizer; the parameters and the optimizer's state stay as they were, all finite.
#[test]
fn learning_rates_that_are_not_positive_finite_numbers_are_refused() {
    let mut rng = StdRng::seed_from_u64(9);
    let x = Matrix::<f64, 2, 2>::from_rows([[0.5, -0.5], [1.0, 2.0]]);
    let y = Matrix::<f64, 2, 2>::from_rows([[3., -1.], [0., 7.]]);
    for lr in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.0, -0.01] {
        let mut net = SmallNet::random(&mut rng);
        let before = net.clone();
        let mut trainer = Trainer::<f64, SmallNet, 2>::new(&net);
        let mut adam = Adam::new(&net);
        let mut momentum = Momentum::new(&net, 0.9);
        let errors = [
            trainer.step(&mut net, &mut Sgd::new(), lr, &MeanSquaredError, &x, &y),
            trainer.step(&mut net, &mut momentum, lr, &MeanSquaredError, &x, &y),
            trainer.step(&mut net, &mut adam, lr, &MeanSquaredError, &x, &y),
        ];
        for err in errors {
            let err = err.expect_err("a bad learning rate is an error");
            assert!(matches!(err, StepError::LearningRate(v) if v.to_bits() == lr.to_bits()));
            assert!(err.to_string().contains("positive, finite"), "{err}");
        }
        assert_eq!(net, before, "lr {lr}: the parameters changed");
        assert!(snapshot(&net).iter().all(|p| p.is_finite()));
        // The optimizers' state is untouched too: a good step afterwards is the first one.
        let mut fresh = before.clone();
        let mut fresh_trainer = Trainer::<f64, SmallNet, 2>::new(&fresh);
        let mut fresh_adam = Adam::new(&fresh);
        trainer
            .step(&mut net, &mut adam, 0.01, &MeanSquaredError, &x, &y)
            .unwrap();
        fresh_trainer
            .step(&mut fresh, &mut fresh_adam, 0.01, &MeanSquaredError, &x, &y)
            .unwrap();
        assert_eq!(net, fresh);
    }
}

/// A gradient that overflows although the loss is finite is reported as such, before the
/// update: the parameters are untouched.
#[test]
fn a_non_finite_gradient_leaves_the_net_as_it_was() {
    // The first input is huge, but its weights are zero, so the outputs (and the loss) are
    // finite; the first layer's weight gradient, input times output gradient, overflows.
    let mut net = SmallNet::zeros();
    net.tensor_mut(0)
        .copy_from_slice(&[0.0, 0.5, 0.0, 0.5, 0.0, 0.5, 0.0, 0.5]); // W1, 4 x 2
    net.tensor_mut(1).fill(1.0); // b1
    net.tensor_mut(2).fill(0.5); // W2, 2 x 4
    let before = net.clone();
    let mut trainer = Trainer::<f64, SmallNet, 2>::new(&net);
    let x = Matrix::<f64, 2, 2>::from_rows([[1e300, 1.0], [1e300, 1.0]]);
    let y = Matrix::<f64, 2, 2>::filled(-1e10);
    let err = trainer
        .step(&mut net, &mut Sgd::new(), 0.1, &MeanSquaredError, &x, &y)
        .unwrap_err();
    let StepError::Gradient { tensor, loss } = err else {
        panic!("expected a gradient error, found {err:?}");
    };
    assert_eq!(tensor, 0, "the first layer's weight");
    assert!(loss.is_finite() && loss > 1e19, "{loss}");
    assert!(err.to_string().contains("gradient of tensor 0"), "{err}");
    assert_eq!(net, before);
}

/// An update that would overflow (a finite but absurd learning rate times a finite gradient)
/// is refused before anything is written, with each of the crate's optimizers: the net and the
/// optimizer's state stay as they were, all finite, and the error names the tensor.
#[test]
fn an_update_that_would_overflow_is_refused_with_the_net_unchanged() {
    let mut net = SmallNet::zeros();
    net.tensor_mut(0).fill(0.5);
    net.tensor_mut(2).fill(0.5);
    let before = net.clone();
    let mut trainer = Trainer::<f64, SmallNet, 2>::new(&net);
    let x = Matrix::<f64, 2, 2>::ones();
    let y = Matrix::<f64, 2, 2>::filled(-1e10);
    let mut sgd = Sgd::new();
    let mut momentum = Momentum::new(&net, 0.9);
    let mut adam = Adam::new(&net);
    let errors = [
        trainer.step(&mut net, &mut sgd, 1e300, &MeanSquaredError, &x, &y),
        trainer.step(&mut net, &mut momentum, 1e300, &MeanSquaredError, &x, &y),
        trainer.step(&mut net, &mut adam, f64::MAX, &MeanSquaredError, &x, &y),
    ];
    for err in errors {
        let err = err.expect_err("the update overflows");
        assert!(matches!(err, StepError::Update { tensor: 0 }), "{err:?}");
        assert!(err.to_string().contains("tensor 0"), "{err}");
    }
    assert_eq!(net, before);
    assert!(snapshot(&net).iter().all(|p| p.is_finite()));
    // The optimizers' state did not move: a sane step now is each one's first.
    let mut fresh = before.clone();
    let (mut fresh_momentum, mut fresh_adam) = (Momentum::new(&fresh, 0.9), Adam::new(&fresh));
    let mut fresh_trainer = Trainer::<f64, SmallNet, 2>::new(&fresh);
    let y = Matrix::<f64, 2, 2>::filled(1.0);
    for _ in 0..2 {
        trainer
            .step(&mut net, &mut momentum, 0.01, &MeanSquaredError, &x, &y)
            .unwrap();
        fresh_trainer
            .step(
                &mut fresh,
                &mut fresh_momentum,
                0.01,
                &MeanSquaredError,
                &x,
                &y,
            )
            .unwrap();
        trainer
            .step(&mut net, &mut adam, 0.01, &MeanSquaredError, &x, &y)
            .unwrap();
        fresh_trainer
            .step(&mut fresh, &mut fresh_adam, 0.01, &MeanSquaredError, &x, &y)
            .unwrap();
    }
    assert_eq!(net, fresh);
}

/// An optimizer of one's own that does not predict overflow: an overflowing update is still
/// reported at once (found after the update), naming the tensor, with the update applied, as
/// `Trainer::step` documents: the one case where the net is left non-finite after an `Err`.
#[test]
fn a_custom_optimizer_that_overflows_is_reported_after_the_update() {
    struct Doubling;
    impl constmat::nn::Optimizer<f64, SmallNet> for Doubling {
        fn update(&mut self, parameters: &mut SmallNet, _: &SmallNet, learning_rate: f64) {
            for v in parameters.tensor_mut(1) {
                *v += learning_rate * 1e300;
            }
        }
    }
    let mut net = SmallNet::zeros();
    let mut trainer = Trainer::<f64, SmallNet, 2>::new(&net);
    let x = Matrix::<f64, 2, 2>::ones();
    let err = trainer
        .step(&mut net, &mut Doubling, 1e10, &MeanSquaredError, &x, &x)
        .unwrap_err();
    assert!(matches!(err, StepError::Update { tensor: 1 }), "{err:?}");
    assert!(net.tensor(1).iter().all(|v| v.is_infinite()));
    assert!(net.tensor(0).iter().all(|v| v.is_finite()));
}
