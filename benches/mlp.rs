//! The 784-128-64-10 ReLU MLP of `examples/mnist_static` (f32, one thread), on random data.
//!
//! ```text
//! cargo bench --bench mlp
//! ```
//!
//! - `mlp/train_step_batch64`: one `nn::Trainer::step` (forward, softmax cross-entropy, backward,
//!   plain SGD update) on a batch of 64. Throughput in samples, so `thrpt` is samples/s; an
//!   epoch of MNIST is 937 such steps (60,000 images, the last partial batch left out), so
//!   seconds per epoch ≈ 937 × the step time (plus assembling the batches, which
//!   `benches/peers` includes).
//! - `mlp/forward_batch1`: the forward pass of one sample (`Layer::forward_one` on the heap net,
//!   the path of a net loaded at run time, and the same code a baked net runs): the latency of
//!   classifying one image.
//! - `mlp/forward_batch1000`: the forward pass of 1,000 samples (`Train::<f32, 1000>::forward_train`,
//!   into a heap workspace), the evaluation batch of `mnist_static`; throughput in samples/s.
//!
//! The numbers do not depend on the data's values (the products are dense), only on the
//! shapes, so random inputs stand in for MNIST. Side-by-side figures against nalgebra,
//! matrixmultiply, NumPy and PyTorch are produced by the separate harness in `benches/peers`.

use std::hint::black_box;
use std::time::Duration;

use constmat::Matrix;
use constmat::nn::{
    Dense, Identity, Layer, RandomInit, Relu, Sgd, SoftmaxCrossEntropy, Train, Trainer,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::distr::Uniform;
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// The network of `examples/mnist_static`.
type Net = constmat::net![
    Dense<f32, 784, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, 10, Identity>,
];

/// Samples per training step.
const BATCH: usize = 64;
/// Samples per forward pass when evaluating.
const EVAL_BATCH: usize = 1000;

/// Inputs in `[0, 1)`, like scaled pixels.
fn inputs<const B: usize>(rng: &mut StdRng) -> Matrix<f32, B, 784> {
    Matrix::random(&Uniform::new(0.0, 1.0).expect("a valid range"), rng)
}

/// One-hot rows of random classes.
fn one_hot<const B: usize>(rng: &mut StdRng) -> Matrix<f32, B, 10> {
    let mut y = Matrix::zeros();
    for row in y.rows_mut() {
        row[rng.random_range(0..10)] = 1.0;
    }
    y
}

fn train_step(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(1);
    let initial = Net::random(&mut rng);
    let x = inputs::<BATCH>(&mut rng);
    let y = one_hot::<BATCH>(&mut rng);
    let mut net = initial.clone();
    let mut trainer = Trainer::<f32, Net, BATCH>::new(&net);
    let mut optimizer = Sgd::new();

    let mut group = c.benchmark_group("mlp");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("train_step_batch64", |bench| {
        // Every sample starts again from the same weights, so a long run cannot drift towards a
        // degenerate net (the fixed batch is learned by heart, and gradients shrink).
        net.clone_from(&initial);
        bench.iter(|| {
            let loss = trainer
                .step(&mut net, &mut optimizer, 0.01, &SoftmaxCrossEntropy, &x, &y)
                .expect("a small learning rate does not diverge");
            black_box(loss)
        });
    });
    group.finish();
}

fn forward(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(2);
    let net = Net::random(&mut rng);
    let mut group = c.benchmark_group("mlp");

    let x1 = inputs::<1>(&mut rng);
    let mut logits = [0.0_f32; 10];
    group.throughput(Throughput::Elements(1));
    group.bench_function("forward_batch1", |bench| {
        bench.iter(|| {
            net.forward_one(black_box(&x1[0]), &mut logits);
            black_box(logits[0])
        });
    });

    let x1000 = inputs::<EVAL_BATCH>(&mut rng);
    let mut ws1000 = Train::<f32, EVAL_BATCH>::workspace(&net);
    group.throughput(Throughput::Elements(EVAL_BATCH as u64));
    group.bench_function("forward_batch1000", |bench| {
        bench.iter(|| black_box(net.forward_train(black_box(&x1000), &mut ws1000)[0][0]));
    });
    group.finish();
}

/// Short runs: the machine is small and shared. Command-line options override these.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = train_step, forward
}
criterion_main!(benches);
