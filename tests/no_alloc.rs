//! A training step, a forward pass and a prediction allocate nothing once their buffers exist.
//!
//! A counting global allocator wraps the system allocator. Counting is switched on per thread
//! (a thread-local flag) and the counts are per thread too, so the test harness's own threads,
//! and the other tests of this file running in parallel, cannot disturb a measurement.
#![cfg(all(feature = "alloc", feature = "rand"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use constmat::Matrix;
use constmat::nn::{
    Adam, Dense, Identity, Inline, Layer, Momentum, Optimizer, Predict, RandomInit, Relu, Relu6,
    Sgd, SoftmaxCrossEntropy, Train, Trainer, quantize,
};
use rand::{SeedableRng, rngs::StdRng};

struct CountingAllocator;

thread_local! {
    /// Whether this thread's allocations are being counted.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations (`alloc`, `alloc_zeroed`, `realloc`) and deallocations on this thread while
    /// counting. `const`-initialized `Cell`s of `Copy` types: reading them never allocates.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static DEALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn record(counter: &'static std::thread::LocalKey<Cell<usize>>) {
    // `try_with`: during thread teardown the thread-locals may be gone; nothing is counted then.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = counter.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is exactly the one `System` upholds; the bookkeeping around the calls
// only touches `Copy` thread-locals and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(&ALLOCATIONS);
        // SAFETY: the caller upholds `alloc`'s contract (non-zero size), forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(&ALLOCATIONS);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(&DEALLOCATIONS);
        // SAFETY: `ptr` was allocated by `System` (every allocation goes through it) with
        // `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(&ALLOCATIONS);
        // SAFETY: `ptr` was allocated by `System` with `layout`, and `new_size` is valid, as
        // the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Runs `f` with this thread's allocations counted; returns `(allocations, deallocations)`.
fn count_allocations<R>(f: impl FnOnce() -> R) -> (usize, usize, R) {
    ALLOCATIONS.with(|c| c.set(0));
    DEALLOCATIONS.with(|c| c.set(0));
    COUNTING.with(|c| c.set(true));
    let result = f();
    COUNTING.with(|c| c.set(false));
    (
        ALLOCATIONS.with(Cell::get),
        DEALLOCATIONS.with(Cell::get),
        result,
    )
}

type Mnist = constmat::net![
    Dense<f32, 784, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, 10, Identity>,
];
const B: usize = 64;

/// The counter works: otherwise every "0 allocations" below would be meaningless.
#[test]
fn the_counter_counts() {
    let (allocations, deallocations, v) =
        count_allocations(|| std::hint::black_box(vec![1u8; 100]));
    assert_eq!((allocations, deallocations), (1, 0));
    let (allocations, deallocations, ()) = count_allocations(|| drop(v));
    assert_eq!((allocations, deallocations), (0, 1));
    // Building a matrix allocates its buffer.
    let (allocations, _, m) = count_allocations(Matrix::<f32, 64, 784>::zeros);
    assert!(allocations >= 1);
    drop(m);
}

/// A batch of `B` inputs in [0, 1) and one-hot targets of 10 classes.
fn data(rng: &mut StdRng) -> (Matrix<f32, B, 784>, Matrix<f32, B, 10>) {
    let x = Matrix::random(&rand::distr::Uniform::new(0.0, 1.0).unwrap(), rng);
    let y = Matrix::from_fn(|r, c| if r % 10 == c { 1.0 } else { 0.0 });
    (x, y)
}

/// Three training steps of the 784-128-64-10 net with `optimizer`, all buffers built
/// beforehand: not one allocation or deallocation.
fn steps_allocate_nothing<O: Optimizer<f32, Mnist>>(
    net: &mut Mnist,
    learning_rate: f32,
    make_optimizer: impl FnOnce(&Mnist) -> O,
) {
    let mut rng = StdRng::seed_from_u64(1);
    let (x, y) = data(&mut rng);
    let mut trainer = Trainer::<f32, Mnist, B>::new(net);
    let mut optimizer = make_optimizer(net);
    let (allocations, deallocations, losses) = count_allocations(|| {
        let mut losses = [0.0_f32; 3];
        for loss in &mut losses {
            *loss = trainer
                .step(
                    net,
                    &mut optimizer,
                    learning_rate,
                    &SoftmaxCrossEntropy,
                    &x,
                    &y,
                )
                .unwrap();
        }
        losses
    });
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "allocations and deallocations during 3 training steps"
    );
    // The steps did something: the loss on the same batch went down.
    assert!(losses[2] < losses[0], "{losses:?}");
}

#[test]
fn sgd_steps_allocate_nothing() {
    let mut net = Mnist::random(&mut StdRng::seed_from_u64(10));
    steps_allocate_nothing(&mut net, 0.01, |_| Sgd::new());
}

#[test]
fn momentum_steps_allocate_nothing() {
    let mut net = Mnist::random(&mut StdRng::seed_from_u64(11));
    steps_allocate_nothing(&mut net, 0.01, |net| Momentum::new(net, 0.9));
}

#[test]
fn adam_steps_allocate_nothing() {
    let mut net = Mnist::random(&mut StdRng::seed_from_u64(12));
    steps_allocate_nothing(&mut net, 1e-4, Adam::new);
}

#[test]
fn forward_allocates_nothing() {
    let mut rng = StdRng::seed_from_u64(13);
    let net = Mnist::random(&mut rng);
    let (x, _) = data(&mut rng);
    let mut ws = Train::<f32, B>::workspace(&net);
    let (allocations, deallocations, sum) = count_allocations(|| {
        let mut sum = 0.0;
        for _ in 0..2 {
            sum += net
                .forward_train(&x, &mut ws)
                .as_flattened()
                .iter()
                .sum::<f32>();
        }
        sum
    });
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "during 2 forward passes"
    );
    assert!(sum.is_finite());
}

/// The heap net's inference path, as a program that loaded the net would use it: one sample,
/// a small batch on the stack, and the classifier's answers.
#[test]
fn predictions_of_a_heap_net_allocate_nothing() {
    let mut rng = StdRng::seed_from_u64(14);
    let net = Mnist::random(&mut rng);
    let (x, _) = data(&mut rng);
    let one: &[f32; 784] = x.row(0).unwrap();
    let eight: &[[f32; 784]; 8] = x.as_array()[..8].try_into().unwrap();
    let (allocations, deallocations, checksum) = count_allocations(|| {
        let mut checksum = 0.0;
        for _ in 0..2 {
            let mut logits = [0.0; 10];
            net.forward_one(one, &mut logits);
            checksum += logits[3];
            let mut batch = [[0.0; 10]; 8];
            net.forward(eight, &mut batch);
            checksum += batch[7][3];
            checksum += net.predict(one) as f32;
            checksum += net.predict_proba(one)[3];
            let mut classes = [0; 8];
            net.predict_batch(eight, &mut classes);
            checksum += classes[7] as f32;
        }
        checksum
    });
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "during 2 rounds of predictions"
    );
    assert!(checksum.is_finite());
}

/// The LeNet-5 of `examples/mnist_cnn`: convolutions with padding (the direct kernel), pooling,
/// `Flatten` and dense layers.
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

/// A convolution with stride 2: patches unrolled, on the stack when predicting.
type Strided = constmat::net![
    Input<f32, 2, 12, 12>,
    Conv2d<2, 4, 3, 2, 1, Relu>,
    Flatten,
    Dense<144, 10>,
];

/// A depthwise-separable block (MobileNet's): depthwise with stride 2, then pointwise.
type Separable = constmat::net![
    Input<f32, 4, 12, 12>,
    DepthwiseConv2d<4, 8, 3, 2, 1, Relu6>,
    Conv2d<8, 8, 1, Relu>,
    AvgPool2d<6>,
    Flatten,
    Dense<8, 10>,
];

/// Residual blocks, with the identity shortcut and with a strided projection, and batch
/// normalization in both.
type ResNet = constmat::net![
    Input<f32, 4, 8, 8>,
    Residual<[Conv2d<4, 4, 3, 1, 1>, BatchNorm2d<4, Relu>, Conv2d<4, 4, 3, 1, 1>], Relu>,
    Residual<[Conv2d<4, 8, 3, 2, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], [Conv2d<4, 8, 1, 2, 0>, BatchNorm2d<8>], Relu>,
    AvgPool2d<4>,
    Flatten,
    Dense<8, 10>,
];

/// Images of `C x H x W` with pixels in [0, 1), on the heap, and one-hot targets.
#[allow(clippy::type_complexity)]
fn images<const C: usize, const H: usize, const W: usize, const N: usize>(
    rng: &mut StdRng,
) -> (Box<[[[[f32; W]; H]; C]; N]>, [[f32; 10]; N]) {
    use rand::RngExt;
    let mut x: Box<[[[[f32; W]; H]; C]; N]> = vec![[[[0.0; W]; H]; C]; N]
        .into_boxed_slice()
        .try_into()
        .unwrap();
    for p in x.as_flattened_mut().as_flattened_mut().as_flattened_mut() {
        *p = rng.random_range(0.0..1.0);
    }
    let y = std::array::from_fn(|r| std::array::from_fn(|c| if r % 10 == c { 1.0 } else { 0.0 }));
    (x, y)
}

/// Training steps and predictions of the net `N` allocate nothing once their buffers exist.
fn cnn_allocates_nothing<N, const C: usize, const H: usize, const W: usize>(seed: u64)
where
    N: RandomInit
        + Layer<In = [[[f32; W]; H]; C], Out = [f32; 10]>
        + Train<f32, 8>
        + constmat::nn::Parameters<f32>
        + Clone,
    Momentum<f32, N>: Optimizer<f32, N>,
{
    let mut rng = StdRng::seed_from_u64(seed);
    let mut net = N::random(&mut rng);
    let (x, y) = images::<C, H, W, 8>(&mut rng);
    let mut trainer = Trainer::<f32, N, 8>::new(&net);
    let mut optimizer = Momentum::new(&net, 0.9);
    // One step first: with the `threads` feature, the first step of a CNN builds the thread pool
    // (34 allocations), once; the claim is about the steps after it.
    trainer
        .step(&mut net, &mut optimizer, 0.01, &SoftmaxCrossEntropy, &x, &y)
        .unwrap();
    let (allocations, deallocations, losses) = count_allocations(|| {
        let mut losses = [0.0_f32; 3];
        for loss in &mut losses {
            *loss = trainer
                .step(&mut net, &mut optimizer, 0.01, &SoftmaxCrossEntropy, &x, &y)
                .unwrap();
        }
        losses
    });
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "allocations and deallocations during 3 training steps"
    );
    assert!(losses[2] < losses[0], "{losses:?}");

    let four: &[[[[f32; W]; H]; C]; 4] = x[..4].try_into().unwrap();
    let (allocations, deallocations, checksum) = count_allocations(|| {
        let mut logits = [0.0; 10];
        net.forward_one(&x[0], &mut logits);
        let mut batch = [[0.0; 10]; 4];
        net.forward(four, &mut batch);
        let mut classes = [0; 4];
        net.predict_batch(four, &mut classes);
        logits[3]
            + batch[3][3]
            + net.predict(&x[1]) as f32
            + net.predict_proba(&x[2])[3]
            + classes[3] as f32
    });
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "during the predictions"
    );
    assert!(checksum.is_finite());
}

#[test]
fn cnn_steps_and_predictions_allocate_nothing() {
    cnn_allocates_nothing::<LeNet, 1, 28, 28>(15);
}

#[test]
fn strided_cnn_steps_and_predictions_allocate_nothing() {
    cnn_allocates_nothing::<Strided, 2, 12, 12>(16);
}

#[test]
fn depthwise_steps_and_predictions_allocate_nothing() {
    cnn_allocates_nothing::<Separable, 4, 12, 12>(17);
}

#[test]
fn residual_steps_and_predictions_allocate_nothing() {
    cnn_allocates_nothing::<ResNet, 4, 8, 8>(18);
}

/// A prediction with a caller-provided scratch (`Layer::forward_with_scratch`: Winograd's method
/// for a 5 x 5 convolution with 64 filters on x86-64) allocates nothing.
#[test]
fn predictions_with_a_scratch_allocate_nothing() {
    type Net = constmat::net![
        Input<f32, 3, 32, 32>,
        Conv2d<3, 64, 5, 1, 2, Relu>,
        MaxPool2d<4>,
        Flatten,
        Dense<4096, 10>,
    ];
    let mut rng = StdRng::seed_from_u64(17);
    let net = Net::random(&mut rng);
    // One image: the chain keeps the first layer's 256 KiB of outputs on the stack.
    let (x, _) = images::<3, 32, 32, 1>(&mut rng);
    let mut scratch: Box<[f32; Net::PREDICT_SCRATCH]> = vec![0.0; Net::PREDICT_SCRATCH]
        .into_boxed_slice()
        .try_into()
        .unwrap();
    let (allocations, deallocations, checksum) = count_allocations(|| {
        let mut logits = [[0.0_f32; 10]; 1];
        net.forward_with_scratch(&x, &mut logits, &mut scratch);
        logits[0][3]
    });
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "during the prediction"
    );
    assert!(checksum.is_finite());
}

/// An int8 prediction (the MLP and the LeNet, quantized, inline as a baked net keeps them)
/// allocates nothing: the dot products, the requantization and the samples between layers are
/// on the stack.
#[test]
fn int8_predictions_allocate_nothing() {
    let mut rng = StdRng::seed_from_u64(21);
    let mlp = Mnist::random(&mut rng);
    let calibration: Vec<[f32; 784]> = (0..20)
        .map(|i| std::array::from_fn(|j| ((i * 31 + j * 7) % 255) as f32 / 255.0))
        .collect();
    let mlp8 = Box::new(
        quantize(&mlp, &calibration)
            .unwrap()
            .net
            .to_store::<Inline>(),
    );
    let cnn = LeNet::random(&mut rng);
    let images: Vec<[[[f32; 28]; 28]; 1]> = calibration
        .iter()
        .map(|x| {
            [std::array::from_fn(|r| {
                std::array::from_fn(|c| x[r * 28 + c])
            })]
        })
        .collect();
    let cnn8 = Box::new(quantize(&cnn, &images).unwrap().net.to_store::<Inline>());
    let (x, image) = ([7_i8; 784], [[[-3_i8; 28]; 28]; 1]);
    let (allocations, deallocations, outputs) = count_allocations(|| {
        let (mut a, mut b) = ([0_i8; 10], [0_i8; 10]);
        mlp8.forward_one(&x, &mut a);
        cnn8.forward_one(&image, &mut b);
        (a, b)
    });
    std::hint::black_box(outputs);
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "allocations and deallocations during two int8 predictions"
    );
}

/// The int8 forms of the MLPerf Tiny layers (a depthwise convolution with ReLU6, identity and
/// projected residual blocks with their quantized additions, a global average pool, a softmax)
/// predict without allocating either.
#[test]
fn int8_blocks_predictions_allocate_nothing() {
    type Blocks = constmat::net![
        Input<f32, 2, 8, 8>,
        Conv2d<2, 4, 3, 1, 1, Relu>,
        DepthwiseConv2d<4, 8, 3, 1, 1, Relu6>,
        Residual<[Conv2d<8, 8, 3, 1, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], Relu>,
        Residual<[Conv2d<8, 16, 3, 2, 1, Relu>], [Conv2d<8, 16, 1, 2, 0>], Relu>,
        AvgPool2d<4>,
        Flatten,
        Dense<16, 5>,
        Softmax,
    ];
    let mut rng = StdRng::seed_from_u64(39);
    let net = Blocks::random(&mut rng);
    let images: Vec<[[[f32; 8]; 8]; 2]> = (0..20)
        .map(|i| images::<2, 8, 8, 1>(&mut StdRng::seed_from_u64(i)).0[0])
        .collect();
    let int8 = Box::new(quantize(&net, &images).unwrap().net.to_store::<Inline>());
    let image = [[[5_i8; 8]; 8]; 2];
    let (allocations, deallocations, outputs) = count_allocations(|| {
        let mut p = [0_i8; 5];
        int8.forward_one(&image, &mut p);
        p
    });
    std::hint::black_box(outputs);
    assert_eq!(
        (allocations, deallocations),
        (0, 0),
        "allocations and deallocations during an int8 prediction with blocks"
    );
}
