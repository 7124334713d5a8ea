//! The LeNet-5 of `examples/mnist_cnn` (f32, one thread), on random data.
//!
//! ```text
//! cargo bench --bench cnn
//! ```
//!
//! - `cnn/train_step_batch64`: one `nn::Trainer::step` (forward, softmax cross-entropy,
//!   backward, plain SGD update) on a batch of 64; throughput in samples/s. An epoch of MNIST is
//!   937 such steps (plus assembling the batches, which `benches/peers` includes).
//! - `cnn/forward_batch1`: the forward pass of one image (`Layer::forward_one`, the path of a net
//!   loaded at run time and of a baked net): the latency of classifying one image.
//! - `cnn/forward_batch100`: `Train::<f32, 100>::forward_train` into a heap workspace, the
//!   evaluation batch of `mnist_cnn`; throughput in samples/s.
//!
//! The time does not depend on the pixel values (no layer skips work on zeros except the
//! pooling's comparisons), so random images stand in for MNIST. Side-by-side figures against
//! PyTorch are produced by the separate harness in `benches/peers`.

use std::hint::black_box;
use std::time::Duration;

use constmat::nn::{Layer, RandomInit, Relu, Sgd, SoftmaxCrossEntropy, Train, Trainer};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// The network of `examples/mnist_cnn`.
type LeNet = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 6, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Conv2d<6, 16, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<400, 120, Relu>,
    Dense<120, 84, Relu>,
    Dense<84, 10>,
];

type Image = [[[f32; 28]; 28]; 1];

/// Samples per training step.
const BATCH: usize = 64;
/// Samples per forward pass when evaluating.
const EVAL_BATCH: usize = 100;

/// Images with pixels in `[0, 1)`, on the heap.
fn images<const B: usize>(rng: &mut StdRng) -> Box<[Image; B]> {
    let mut x: Box<[Image; B]> = vec![[[[0.0; 28]; 28]; 1]; B]
        .into_boxed_slice()
        .try_into()
        .expect("B images");
    for p in x.as_flattened_mut().as_flattened_mut().as_flattened_mut() {
        *p = rng.random_range(0.0..1.0);
    }
    x
}

fn train_step(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(1);
    let initial = LeNet::random(&mut rng);
    let x = images::<BATCH>(&mut rng);
    let mut y = [[0.0_f32; 10]; BATCH];
    for row in &mut y {
        row[rng.random_range(0..10)] = 1.0;
    }
    let mut net = initial.clone();
    let mut trainer = Trainer::<f32, LeNet, BATCH>::new(&net);
    let mut optimizer = Sgd::new();

    let mut group = c.benchmark_group("cnn");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("train_step_batch64", |bench| {
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
    let net = LeNet::random(&mut rng);
    let mut group = c.benchmark_group("cnn");

    let x1 = images::<1>(&mut rng);
    let mut logits = [0.0_f32; 10];
    group.throughput(Throughput::Elements(1));
    group.bench_function("forward_batch1", |bench| {
        bench.iter(|| {
            net.forward_one(black_box(&x1[0]), &mut logits);
            black_box(logits[0])
        });
    });

    let x100 = images::<EVAL_BATCH>(&mut rng);
    let mut ws = Train::<f32, EVAL_BATCH>::workspace(&net);
    group.throughput(Throughput::Elements(EVAL_BATCH as u64));
    group.bench_function("forward_batch100", |bench| {
        bench.iter(|| black_box(net.forward_train(black_box(&x100), &mut ws)[0][0]));
    });
    group.finish();
}

/// Short runs: the machine is small and shared. Command-line options override these.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = train_step, forward
}
criterion_main!(benches);
