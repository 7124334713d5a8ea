//! Trains the 784-128-64-10 net on real MNIST for a short run and checks a test-accuracy floor.
//!
//! Reads MNIST from `$MNIST_DIR` (`.ci/run` sets it); skipped with a notice when it is unset.
//! Short enough for a debug build: 120 batches of 64 (7,680 images, an eighth of an epoch), then
//! 2,000 test images.
#![cfg(all(feature = "data", feature = "rand"))]

use constmat::Matrix;
use constmat::data::mnist::{self, CLASSES, Mnist, PIXELS};
use constmat::nn::{
    Dense, Identity, Momentum, RandomInit, Relu, Schedule, SoftmaxCrossEntropy, Train, Trainer,
    argmax,
};
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};

type Net = constmat::net![
    Dense<f32, PIXELS, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, CLASSES, Identity>,
];

const BATCH: usize = 64;
const STEPS: usize = 120;
const EVAL_BATCH: usize = 500;
const EVAL_BATCHES: usize = 4;
/// Measured: 89.55% with these settings (seed 7, AVX2); the floor leaves room for other platforms'
/// float rounding. A net that learns nothing scores about 10%.
const ACCURACY_FLOOR: f64 = 0.88;

#[test]
fn a_short_run_on_real_mnist_reaches_the_accuracy_floor() {
    let Some(dir) = std::env::var_os("MNIST_DIR") else {
        eprintln!("skipping: MNIST_DIR is not set (point it at the four MNIST files to run this)");
        return;
    };
    let data = Mnist::load(&dir).unwrap_or_else(|e| panic!("cannot load MNIST: {e}"));

    let mut rng = StdRng::seed_from_u64(7);
    let mut net = Net::random(&mut rng);
    let mut trainer = Trainer::<f32, Net, BATCH>::new(&net);
    let mut optimizer = Momentum::new(&net, 0.9);
    let schedule = Schedule::Cosine {
        total: STEPS,
        floor: 0.0,
    };
    let mut order: Vec<usize> = (0..data.train.len()).collect();
    order.shuffle(&mut rng);

    let mut x = Matrix::<f32, BATCH, PIXELS>::zeros();
    let mut y = Matrix::<f32, BATCH, CLASSES>::zeros();
    let mut labels = [0u8; BATCH];
    let (batches, _) = order.as_chunks::<BATCH>();
    let mut first_loss = None;
    let mut last_loss = 0.0;
    for (step, indices) in batches.iter().take(STEPS).enumerate() {
        data.train
            .fill_batch(indices, x.as_array_mut(), &mut labels);
        mnist::one_hot(&labels, y.as_array_mut());
        let lr = schedule.learning_rate(0.1, step) as f32;
        last_loss = trainer
            .step(&mut net, &mut optimizer, lr, &SoftmaxCrossEntropy, &x, &y)
            .expect("training does not diverge at lr 0.1");
        first_loss.get_or_insert(last_loss);
    }
    let first_loss = first_loss.expect("at least one step");
    assert!(
        last_loss < first_loss / 4.0,
        "the loss falls: {first_loss} -> {last_loss}"
    );

    let mut workspace = Train::<f32, EVAL_BATCH>::workspace(&net);
    let mut x = Matrix::<f32, EVAL_BATCH, PIXELS>::zeros();
    let mut labels = [0u8; EVAL_BATCH];
    let mut correct = 0;
    for b in 0..EVAL_BATCHES {
        let indices: [usize; EVAL_BATCH] = std::array::from_fn(|k| b * EVAL_BATCH + k);
        data.test
            .fill_batch(&indices, x.as_array_mut(), &mut labels);
        let logits = net.forward_train(&x, &mut workspace);
        correct += logits
            .iter()
            .zip(&labels)
            .filter(|&(row, &l)| argmax(row) == usize::from(l))
            .count();
    }
    let accuracy = correct as f64 / (EVAL_BATCH * EVAL_BATCHES) as f64;
    eprintln!(
        "short MNIST run: loss {first_loss:.3} -> {last_loss:.3}, test accuracy {accuracy:.4}"
    );
    assert!(
        accuracy >= ACCURACY_FLOOR,
        "test accuracy {accuracy:.4} is below the floor {ACCURACY_FLOOR}"
    );
}
