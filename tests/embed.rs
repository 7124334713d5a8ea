//! Baked nets (`constmat::embed`): built at compile time from safetensors files, run without
//! a heap, by the same layer code as heap nets.
//!
//! The fixtures in `tests/fixtures/` are tiny nets written by `io::safetensors::to_bytes`, baked
//! in with `include_net!`. Their weights come from [`fill`], and
//! `fixtures_are_what_the_generator_writes` checks that the committed files are exactly what it
//! writes; `CONSTMAT_BLESS_FIXTURES=1 cargo test --test embed fixtures` rewrites them.
#![cfg(feature = "safetensors")]

use std::path::{Path, PathBuf};

use constmat::embed::Baked;
use constmat::io::safetensors as st;
use constmat::nn::{self, Dense, Heap, Inline, Layer, Parameters, Predict, Train};

/// `tests/fixtures/tiny-f32.safetensors`: every activation, and an Identity layer in the middle
/// (which takes no activation module): `Sequential(Linear(5,4), ReLU(), Linear(4,3),
/// Linear(3,3), Tanh(), Linear(3,3), Sigmoid(), Linear(3,2))`, tensors 0.*, 2.*, 3.*, 5.*, 7.*.
type HeapTiny32 = constmat::net![
    Dense<f32, 5, 4, nn::Relu>,
    Dense<f32, 4, 3, nn::Identity>,
    Dense<f32, 3, 3, nn::Tanh>,
    Dense<f32, 3, 3, nn::Sigmoid>,
    Dense<f32, 3, 2, nn::Identity>,
];

/// `tests/fixtures/tiny-f64.safetensors`: `Sequential(Linear(3,4), Sigmoid(), Linear(4,2),
/// Tanh())`, f64.
type HeapTiny64 = constmat::net![Dense<f64, 3, 4, nn::Sigmoid>, Dense<f64, 4, 2, nn::Tanh>];

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Deterministic weights in [-1, 1], different for every element of every tensor (a Knuth
/// multiplicative hash of the position, so nothing about them is special).
fn fill<T: st::Element, P: Parameters<T>>(net: &mut P) {
    for k in 0..net.tensor_count() {
        for (i, x) in net.tensor_mut(k).iter_mut().enumerate() {
            let h = ((k * 1000 + i) as u64).wrapping_mul(2_654_435_761) % 2001;
            *x = T::from(h as f64 / 1000.0 - 1.0).unwrap();
        }
    }
}

fn heap_tiny32() -> HeapTiny32 {
    let mut net = HeapTiny32::zeros();
    fill(&mut net);
    net
}

fn heap_tiny64() -> HeapTiny64 {
    let mut net = HeapTiny64::zeros();
    fill(&mut net);
    net
}

/// The fixture files, as the generator writes them.
fn fixtures() -> [(&'static str, Vec<u8>); 2] {
    [
        ("tiny-f32.safetensors", st::to_bytes(&heap_tiny32(), &[])),
        ("tiny-f64.safetensors", st::to_bytes(&heap_tiny64(), &[])),
    ]
}

#[test]
fn fixtures_are_what_the_generator_writes() {
    let bless = std::env::var_os("CONSTMAT_BLESS_FIXTURES").is_some();
    for (name, bytes) in fixtures() {
        let path = fixture_path(name);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (CONSTMAT_BLESS_FIXTURES=1 writes it)",
                path.display()
            )
        });
        assert!(
            committed == bytes,
            "{} differs from what the generator writes; CONSTMAT_BLESS_FIXTURES=1 rewrites it",
            path.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The same nets, baked in.
// ---------------------------------------------------------------------------------------------

type HeapMnist = constmat::net![
    Dense<f32, 784, 128, nn::Relu>,
    Dense<f32, 128, 64, nn::Relu>,
    Dense<f32, 64, 10, nn::Identity>,
];

mod baked {
    use super::{Baked, HeapMnist, HeapTiny32, HeapTiny64};

    pub type Tiny32 = Baked<HeapTiny32>;
    pub static TINY32: Tiny32 = constmat::include_net!("fixtures/tiny-f32.safetensors");

    pub type Tiny64 = Baked<HeapTiny64>;
    pub static TINY64: Tiny64 = constmat::include_net!("fixtures/tiny-f64.safetensors");

    /// The shipped model.
    pub type Mnist = Baked<HeapMnist>;
    pub static MNIST: Mnist = constmat::include_net!("../models/mnist-784-128-64-10.safetensors");
}

fn heap_mnist() -> HeapMnist {
    st::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("models/mnist-784-128-64-10.safetensors"))
        .unwrap()
}

/// A deterministic input in [-1, 1) (or [0, 1) for `unit`), different for each `seed`.
fn input<T: st::Element, const N: usize>(seed: u64, unit: bool) -> [T; N] {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    std::array::from_fn(|_| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = (state >> 11) as f64 / (1u64 << 53) as f64;
        T::from(if unit { u } else { 2.0 * u - 1.0 }).unwrap()
    })
}

#[test]
fn baked_weights_are_the_files_numbers() {
    let heap = heap_mnist();
    let net = &baked::MNIST;
    assert_eq!(&net.first.weight, heap.first.weight.as_array());
    assert_eq!(net.first.bias, heap.first.bias.as_array()[0]);
    assert_eq!(&net.rest.first.weight, heap.rest.first.weight.as_array());
    assert_eq!(net.rest.first.bias, heap.rest.first.bias.as_array()[0]);
    assert_eq!(&net.rest.rest.weight, heap.rest.rest.weight.as_array());
    assert_eq!(net.rest.rest.bias, heap.rest.rest.bias.as_array()[0]);

    let heap = heap_tiny64();
    assert_eq!(&baked::TINY64.first.weight, heap.first.weight.as_array());
    assert_eq!(baked::TINY64.rest.bias, heap.rest.bias.as_array()[0]);

    // The same through the conversion from heap nets, every layer at once, and back.
    assert_eq!(heap.to_store::<Inline>(), baked::TINY64);
    assert_eq!(heap_tiny32().to_store::<Inline>(), baked::TINY32);
    assert_eq!(baked::TINY32.to_store::<Heap>(), heap_tiny32());
    assert_eq!(baked::MNIST.to_store::<Heap>(), heap_mnist());
    // The MNIST net converted is 437,568 bytes, built on the stack: on a thread with room.
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(|| assert!(heap_mnist().to_store::<Inline>() == baked::MNIST))
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn baked_weights_start_on_cache_lines() {
    let net = &baked::MNIST;
    for (layer, address) in [
        net.first.weight.as_ptr() as usize,
        net.rest.first.weight.as_ptr() as usize,
        net.rest.rest.weight.as_ptr() as usize,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(address % 64, 0, "layer {layer} at {address:#x}");
    }
    // And so does every row of 784 floats (3,136 bytes, 49 lines).
    assert_eq!(net.first.weight[1].as_ptr() as usize % 64, 0);
}

#[test]
fn baked_nets_compute_what_heap_nets_compute() {
    // Bit for bit against the heap net: one definition of each layer, the same kernel calls.
    let heap32 = heap_tiny32();
    let heap64 = heap_tiny64();
    let mnist = heap_mnist();
    for seed in 0..50 {
        let x = input::<f32, 5>(seed, false);
        let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
        baked::TINY32.forward_one(&x, &mut a);
        heap32.forward_one(&x, &mut b);
        assert_eq!(a, b, "tiny f32 net, input {x:?}");

        let x = input::<f64, 3>(seed, false);
        let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
        baked::TINY64.forward_one(&x, &mut a);
        heap64.forward_one(&x, &mut b);
        assert_eq!(a, b, "tiny f64 net, input {x:?}");

        let x = input::<f32, 784>(seed, true);
        let (mut a, mut b) = ([0.0; 10], [0.0; 10]);
        baked::MNIST.forward_one(&x, &mut a);
        mnist.forward_one(&x, &mut b);
        assert_eq!(a, b, "MNIST net, seed {seed}");
    }

    // A batch of 16 through the training path (`Train::forward_train`, the same forward pass
    // into a heap workspace) and through the baked net: the same numbers, bit for bit.
    const B: usize = 16;
    let xs: [[f32; 784]; B] = std::array::from_fn(|k| input(100 + k as u64, true));
    let x = constmat::Matrix::<f32, B, 784>::from_rows(xs);
    let mut workspace = Train::<f32, B>::workspace(&mnist);
    let batch = mnist.forward_train(&x, &mut workspace);
    let mut baked_batch = [[0.0; 10]; B];
    baked::MNIST.forward(&xs, &mut baked_batch);
    assert_eq!(batch, &baked_batch);
    // One sample at a time takes the matrix-vector path, which sums in its own order: close.
    let mut classes = [0; B];
    baked::MNIST.predict_batch(&xs, &mut classes);
    for (k, (row, &class)) in batch.iter().zip(&classes).enumerate() {
        let mut single = [0.0; 10];
        baked::MNIST.forward_one(&xs[k], &mut single);
        for (s, r) in single.iter().zip(row) {
            assert!(
                (s - r).abs() <= 1e-4 * r.abs().max(1.0),
                "{single:?} vs {row:?}"
            );
        }
        assert_eq!(class, nn::argmax(row));
    }
}

#[test]
fn a_batch_gives_each_sample_its_own_output() {
    const B: usize = 7;
    let xs: [[f32; 5]; B] = std::array::from_fn(|k| input(k as u64, false));
    let mut batch = [[0.0; 2]; B];
    baked::TINY32.forward(&xs, &mut batch);
    for (x, row) in xs.iter().zip(&batch) {
        let mut single = [0.0; 2];
        baked::TINY32.forward_one(x, &mut single);
        for (s, r) in single.iter().zip(row) {
            assert!((s - r).abs() <= 1e-6, "{single:?} vs {row:?}");
        }
    }
    // The samples differ, and so do their outputs: the batch is not one sample repeated.
    assert_ne!(batch[0], batch[1]);
}

#[test]
fn predict_proba_is_the_softmax_of_the_logits() {
    for seed in 0..20 {
        let x = input::<f32, 784>(seed, true);
        let mut logits = [0.0; 10];
        baked::MNIST.forward_one(&x, &mut logits);
        let p = baked::MNIST.predict_proba(&x);
        let sum: f32 = p.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "{p:?} sums to {sum}");
        assert!(p.iter().all(|&v| (0.0..=1.0).contains(&v)));
        // p_j / p_k = e^(z_j - z_k): compare against the first class.
        for j in 1..10 {
            let expected = (logits[j] - logits[0]).exp();
            let ratio = p[j] / p[0];
            assert!(
                (ratio - expected).abs() <= 1e-3 * expected.max(1e-3),
                "class {j}"
            );
        }
        assert_eq!(baked::MNIST.predict(&x), nn::argmax(&p));
    }
}

#[test]
fn softmax_and_argmax_edge_cases() {
    use constmat::nn::{argmax, softmax_in_place};

    // Logits far beyond exp's range: no overflow, no NaN.
    let mut z = [1000.0_f32, -1000.0, 999.0];
    softmax_in_place(&mut z);
    assert!(z.iter().all(|v| v.is_finite()), "{z:?}");
    assert!((z[0] - 1.0 / (1.0 + (-1.0_f32).exp())).abs() < 1e-6);
    assert_eq!(z[1], 0.0);
    let mut z = [-1e30_f64; 4];
    softmax_in_place(&mut z);
    assert_eq!(z, [0.25; 4]);
    let mut empty: [f32; 0] = [];
    softmax_in_place(&mut empty);

    assert_eq!(argmax(&[0.0, 2.0, 2.0]), 1, "the first of equals");
    assert_eq!(
        argmax(&[3.0, f32::NAN, 5.0]),
        1,
        "a NaN is reported, not skipped"
    );
    assert_eq!(argmax::<f32>(&[]), 0);
}

#[test]
fn predictions_run_on_a_small_stack() {
    // An optimized build needs little stack for a prediction: the intermediate results (128 +
    // 64 + 10 floats) and the kernels' frames, under 20 KiB (docs/embedding.md). An
    // unoptimized build keeps every local of the SIMD kernels in its own stack slot, which
    // takes a few hundred KiB. An overflow aborts the test binary.
    let stack = if cfg!(debug_assertions) { 1024 } else { 32 } * 1024;
    let x = input::<f32, 784>(7, true);
    let (class, p) = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || (baked::MNIST.predict(&x), baked::MNIST.predict_proba(&x)))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(class, nn::argmax(&p));
}

// ---------------------------------------------------------------------------------------------
// No allocation: a counting global allocator.
// ---------------------------------------------------------------------------------------------

mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct CountingAllocator;

    thread_local! {
        /// Whether this thread's allocations are being counted.
        static COUNTING: Cell<bool> = const { Cell::new(false) };
        /// Allocations and deallocations on this thread while counting. `const`-initialized
        /// `Cell`s of `Copy` types: reading them never allocates.
        static EVENTS: Cell<usize> = const { Cell::new(0) };
    }

    fn record() {
        // `try_with`: during thread teardown the thread-locals may be gone; nothing is counted.
        if COUNTING.try_with(Cell::get).unwrap_or(false) {
            let _ = EVENTS.try_with(|c| c.set(c.get() + 1));
        }
    }

    // SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
    // `GlobalAlloc` contract is exactly the one `System` upholds; the bookkeeping around the
    // calls only touches `Copy` thread-locals and never allocates.
    unsafe impl GlobalAlloc for CountingAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            record();
            // SAFETY: the caller upholds `alloc`'s contract (non-zero size), forwarded as is.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            record();
            // SAFETY: as for `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            record();
            // SAFETY: `ptr` was allocated by `System` (every allocation goes through it) with
            // `layout`, as the caller guarantees.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            record();
            // SAFETY: `ptr` was allocated by `System` with `layout`, and `new_size` is valid,
            // as the caller guarantees.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    /// Runs `f` with this thread's heap events (allocations, reallocations, deallocations)
    /// counted.
    pub fn heap_events<R>(f: impl FnOnce() -> R) -> (usize, R) {
        EVENTS.with(|c| c.set(0));
        COUNTING.with(|c| c.set(true));
        let result = f();
        COUNTING.with(|c| c.set(false));
        (EVENTS.with(Cell::get), result)
    }
}

#[global_allocator]
static GLOBAL: counting::CountingAllocator = counting::CountingAllocator;

#[test]
fn the_counter_counts() {
    let (events, v) = counting::heap_events(|| std::hint::black_box(vec![1u8; 100]));
    assert_eq!(events, 1);
    let (events, ()) = counting::heap_events(|| drop(v));
    assert_eq!(events, 1);
}

#[test]
fn predictions_allocate_nothing() {
    use std::hint::black_box;

    let heap = heap_mnist();
    let x = input::<f32, 784>(3, true);
    let xs: [[f32; 784]; 8] = std::array::from_fn(|k| input(k as u64, true));
    let (events, checksum) = counting::heap_events(|| {
        let mut checksum = 0.0;
        for _ in 0..3 {
            checksum += baked::MNIST.predict(black_box(&x)) as f32;
            checksum += baked::MNIST.predict_proba(black_box(&x))[0];
            let mut logits = [0.0; 10];
            baked::MNIST.forward_one(black_box(&x), &mut logits);
            checksum += logits[0];
            let mut batch = [[0.0; 10]; 8];
            baked::MNIST.forward(black_box(&xs), &mut batch);
            checksum += batch[7][0];
            let mut classes = [0; 8];
            baked::MNIST.predict_batch(black_box(&xs), &mut classes);
            checksum += classes[7] as f32;
            // The heap net, the same code: its weights were allocated before.
            checksum += heap.predict(black_box(&x)) as f32;
            checksum += heap.predict_proba(black_box(&x))[0];
            heap.forward(black_box(&xs), &mut batch);
            checksum += batch[0][0];
        }
        checksum
    });
    assert_eq!(events, 0, "heap events during 3 rounds of predictions");
    assert!(checksum.is_finite());
}

// ---------------------------------------------------------------------------------------------
// Build errors: a crate whose baked files do not fit its types does not compile. The error is
// the run-time loader's (one rule, `format::validate`), and it points at the `include_net!`.
// ---------------------------------------------------------------------------------------------

#[path = "common/malformed.rs"]
mod malformed;

/// The net of the table of malformed files.
type Small = constmat::net![Dense<f32, 4, 3, nn::Relu>, Dense<f32, 3, 2>];

/// Types that do not fit good files: a `static`'s name, its net type, the file it bakes, and
/// the message its build error must carry.
const TYPE_CASES: &[(&str, &str, &str, &str)] = &[
    (
        "A_LAYER_OF_ANOTHER_SHAPE",
        "constmat::net![
            Dense<f32, 5, 4, Relu>,
            Dense<f32, 4, 3>,
            Dense<f32, 3, 4, Tanh>,
            Dense<f32, 4, 3, Sigmoid>,
            Dense<f32, 3, 2>,
        ]",
        "tiny-f32.safetensors",
        "tensor 3.weight: expected f32 [4, 3], found f32 [3, 3]",
    ),
    (
        "WRONG_ELEMENT_TYPE",
        "constmat::net![Dense<f32, 3, 4, Sigmoid>, Dense<f32, 4, 2, Tanh>]",
        "tiny-f64.safetensors",
        "tensor 0.weight: expected f32 [4, 3], found f64 [4, 3]",
    ),
    (
        "ONE_LAYER_TOO_MANY",
        "constmat::net![Dense<f64, 3, 4, Sigmoid>, Dense<f64, 4, 2, Tanh>, Dense<f64, 2, 2>]",
        "tiny-f64.safetensors",
        "tensor 4.weight is missing: expected f64 [2, 2]",
    ),
    (
        "ONE_LAYER_TOO_FEW",
        "Dense<f64, 3, 4, Sigmoid>",
        "tiny-f64.safetensors",
        "the file holds tensor 2.bias, which the net does not have",
    ),
    (
        // A net of 86 tensors whose file has more: the problem is found in the file's index
        // (a walk of the header per tensor would run into the compiler's limit on long
        // evaluations, reported instead of the file's problem).
        "A_NET_OF_MANY_TENSORS_WITHOUT_ITS_LAST_LAYER",
        "constmat::net![
            Input<i8, 2, 8, 8>,
            Conv2d<2, 4, 3, 1, 1, Relu>,
            DepthwiseConv2d<4, 8, 3, 1, 1, Relu6>,
            Residual<[Conv2d<8, 8, 3, 1, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], Relu>,
            Residual<[Conv2d<8, 16, 3, 2, 1, Relu>, Conv2d<16, 16, 3, 1, 1>], [Conv2d<8, 16, 1, 2, 0>], Relu>,
            AvgPool2d<4>,
            Flatten,
            Dense<16, 5>,
        ]",
        "int8-blocks.safetensors",
        "the file holds tensor 11.exponent, which the net does not have",
    ),
    (
        "NOT_SAFETENSORS",
        "Dense<f32, 1, 1>",
        "hello.txt",
        "not a valid safetensors file: it is 5 bytes long, shorter than the 8-byte header \
         length every safetensors file starts with",
    ),
];

/// How many mutated files `files_that_do_not_fit_fail_the_build_at_the_users_line` bakes
/// (`malformed::mutated(0..MUTATED_FILES)`; `tests/weights_file_rule.rs` loads the same ones).
const MUTATED_FILES: u64 = 300;

/// What the build reports for the `static` on `line` of `src/lib.rs`: the error's message, if
/// the error's primary location is that line.
fn error_at(stderr: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    lines.windows(2).find_map(|pair| {
        let message = pair[0].strip_prefix("error[E0080]: evaluation panicked: ")?;
        let location = pair[1].trim_start().strip_prefix("--> src/lib.rs:")?;
        (location.split(':').next()? == line.to_string()).then(|| message.to_string())
    })
}

#[test]
fn files_that_do_not_fit_fail_the_build_at_the_users_line() {
    use std::fmt::Write as _;
    use std::process::Command;

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = Path::new(env!("CARGO_TARGET_TMPDIR")).join("embed-build-errors");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(krate.join("hello.txt"), "hello").unwrap();
    for fixture in [
        "tiny-f32.safetensors",
        "tiny-f64.safetensors",
        "int8-blocks.safetensors",
    ] {
        std::fs::copy(fixture_path(fixture), krate.join(fixture)).unwrap();
    }
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"embed-build-errors\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             publish = false\n\n[dependencies]\nconstmat = {{ path = {:?}, default-features = false }}\n\n\
             [lints.rust]\nunexpected_cfgs = \"allow\"\n\n[workspace]\n",
            root.display().to_string()
        ),
    )
    .unwrap();
    // The same dependency versions as this build, so that `--offline` finds them.
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    // One `static` per case: the table of malformed files baked as `Small`, and the types
    // that do not fit good files. Each case's expected message is the run-time loader's.
    let mut main = String::from(
        "#![no_std]\n\
         use constmat::embed::Baked;\n\
         use constmat::nn::{Dense, Relu, Relu6, Sigmoid, Tanh};\n\n\
         type Small = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2>];\n\n",
    );
    let mut expected: Vec<(String, Option<String>)> = Vec::new();
    for case in malformed::cases() {
        let file = format!("{}.safetensors", case.name);
        std::fs::write(krate.join(&file), &case.bytes).unwrap();
        writeln!(
            main,
            "#[cfg(not(any(let_only, bake_only, large_only, large_nan_only)))]\npub static {}: Baked<Small> = constmat::include_net!(\"../{file}\");\n",
            case.name
        )
        .unwrap();
        let loaded = st::from_bytes::<Small>(&case.bytes);
        assert_eq!(loaded.is_err(), case.verdict.is_some(), "{}", case.name);
        expected.push((case.name.to_string(), loaded.err().map(|e| e.to_string())));
    }
    // Mutated files (the kinds of `tests/weights_file_rule.rs`'s property test, drawn from
    // fixed seeds): the real `include_net!`, expanded and evaluated by the compiler, gives the
    // run-time loader's verdict and message on every one.
    for seed in 0..MUTATED_FILES {
        let bytes = malformed::mutated(seed);
        let name = format!("MUTATED_{seed}");
        std::fs::write(krate.join(format!("{name}.safetensors")), &bytes).unwrap();
        writeln!(
            main,
            "#[cfg(not(any(let_only, bake_only, large_only, large_nan_only)))]\npub static {name}: Baked<Small> = constmat::include_net!(\"../{name}.safetensors\");\n"
        )
        .unwrap();
        expected.push((
            name,
            st::from_bytes::<Small>(&bytes).err().map(|e| e.to_string()),
        ));
    }
    // Int8 files holding an exponent no shift can take, and scales that are not positive
    // normal numbers (issue 44): the same rules both ways.
    let q = constmat::quant::Quantization {
        scale: 0.1,
        zero_point: 0,
    };
    let good = nn::QDense::<4, 2>::new(
        [[1; 4]; 2],
        [0; 2],
        [constmat::quant::Multiplier::from_real(0.5); 2],
        q,
        q,
    );
    let scale = "expected a quantization scale: a positive normal f32, from 1.1754944e-38 to \
                 3.4028235e38";
    type Spoil = fn(&mut nn::QDense<4, 2>);
    let int8_cases: [(&str, Spoil, String); 4] = [
        (
            "INT8_EXPONENT",
            |layer| layer.exponent[1] = 40,
            "tensor 0.exponent: element 1 is 40, outside -31..=30".to_string(),
        ),
        (
            "INT8_NEGATIVE_SCALE",
            |layer| layer.input.scale = -1.0 / 255.0,
            format!("tensor 0.input_scale: element 0 is -0.003921569, {scale}"),
        ),
        (
            "INT8_ZERO_SCALE",
            |layer| layer.output.scale = 0.0,
            format!("tensor 0.output_scale: element 0 is 0, {scale}"),
        ),
        (
            "INT8_SUBNORMAL_SCALE",
            |layer| layer.input.scale = 1e-45,
            format!("tensor 0.input_scale: element 0 is 1e-45, {scale}"),
        ),
    ];
    for (name, spoil, want) in int8_cases {
        let mut layer = good.clone();
        spoil(&mut layer);
        let int8 = st::to_bytes(&layer, &[]);
        std::fs::write(krate.join(format!("{name}.safetensors")), &int8).unwrap();
        writeln!(
            main,
            "#[cfg(not(any(let_only, bake_only, large_only, large_nan_only)))]\npub static {name}: Baked<constmat::nn::QDense<4, 2>> = \
             constmat::include_net!(\"../{name}.safetensors\");\n"
        )
        .unwrap();
        let message = st::from_bytes::<nn::QDense<4, 2>>(&int8)
            .unwrap_err()
            .to_string();
        assert_eq!(message, want);
        expected.push((name.to_string(), Some(message)));
    }
    for (name, ty, file, message) in TYPE_CASES {
        writeln!(
            main,
            "#[cfg(not(any(let_only, bake_only, large_only, large_nan_only)))]\npub static {name}: Baked<{ty}> = constmat::include_net!(\"../{file}\");\n"
        )
        .unwrap();
        expected.push(((*name).to_string(), Some((*message).to_string())));
    }
    // Outside a `static`: still evaluated at compile time (by `cargo build`), not at run time.
    main.push_str(
        "#[cfg(let_only)]\npub fn in_a_let() -> usize {\n    \
         let net: Baked<Small> = constmat::include_net!(\"../MISSING_TENSOR.safetensors\");\n    \
         net.first.bias.len()\n}\n",
    );
    // `embed::bake` called by hand in a `let`, on a file whose values (not layout) are bad:
    // a build error too, not a panic when the program runs.
    main.push_str(
        "#[cfg(bake_only)]\nstruct NanFile;\n\
         #[cfg(bake_only)]\nimpl constmat::nn::SafetensorsFile for NanFile {\n    \
         const BYTES: &'static [u8] = include_bytes!(\"../NAN.safetensors\");\n}\n\
         #[cfg(bake_only)]\npub fn bake_by_hand() -> usize {\n    \
         let net: Baked<Small> = constmat::embed::bake::<NanFile, Baked<Small>>();\n    \
         net.first.bias.len()\n}\n",
    );
    // A layer of 1.2 million parameters, past the 950,000 at which the lint
    // `long_running_const_eval` used to stop the build (no `allow` here), and the same file with
    // a NaN deep inside a block of values that the check takes whole.
    let mut large = Dense::<f32, LARGE_IN, LARGE_OUT>::zeros();
    for (i, w) in large.weight.as_mut_slice().iter_mut().enumerate() {
        *w = (i % 1000) as f32 * 1e-3 - 0.5;
    }
    std::fs::write(krate.join("LARGE.safetensors"), st::to_bytes(&large, &[])).unwrap();
    large.weight.as_mut_slice()[LARGE_NAN_AT] = f32::NAN;
    let large_nan = st::to_bytes(&large, &[]);
    std::fs::write(krate.join("LARGE_NAN.safetensors"), &large_nan).unwrap();
    let large_nan_message = st::from_bytes::<Dense<f32, LARGE_IN, LARGE_OUT>>(&large_nan)
        .unwrap_err()
        .to_string();
    assert_eq!(
        large_nan_message,
        format!("tensor 0.weight: element {LARGE_NAN_AT} is not a finite number")
    );
    writeln!(
        main,
        "#[cfg(large_only)]\npub static LARGE: Baked<Dense<f32, {LARGE_IN}, {LARGE_OUT}>> = \
         constmat::include_net!(\"../LARGE.safetensors\");\n\
         #[cfg(large_nan_only)]\npub static LARGE_NAN: Baked<Dense<f32, {LARGE_IN}, {LARGE_OUT}>> = \
         constmat::include_net!(\"../LARGE_NAN.safetensors\");"
    )
    .unwrap();
    // The other whole-block checks, baked by the compiler: an infinity in a whole block of
    // `f64`s of a chain's second layer (found through the file's index at the right module),
    // and an int8 weight of -128 in the second block of 256.
    type F64Chain = constmat::net![Dense<f64, 40, 30, nn::Relu>, Dense<f64, 30, 20>];
    let mut chain = F64Chain::zeros();
    chain.rest.weight.as_mut_slice()[100] = f64::NEG_INFINITY;
    let mut int8_weight = [[1_i8; 256]; 2];
    int8_weight[1][44] = i8::MIN;
    let int8 = nn::QDense::<256, 2>::new(
        int8_weight,
        [0; 2],
        [constmat::quant::Multiplier::from_real(0.5); 2],
        constmat::quant::Quantization {
            scale: 0.1,
            zero_point: 0,
        },
        constmat::quant::Quantization {
            scale: 0.1,
            zero_point: 0,
        },
    );
    let mut block_cases = Vec::new();
    for (name, ty, bytes, message) in [
        (
            "F64_BLOCK",
            "constmat::net![Dense<f64, 40, 30, Relu>, Dense<f64, 30, 20>]",
            st::to_bytes(&chain, &[]),
            st::from_bytes::<F64Chain>(&st::to_bytes(&chain, &[]))
                .unwrap_err()
                .to_string(),
        ),
        (
            "INT8_BLOCK",
            "constmat::nn::QDense<256, 2>",
            st::to_bytes(&int8, &[]),
            st::from_bytes::<nn::QDense<256, 2>>(&st::to_bytes(&int8, &[]))
                .unwrap_err()
                .to_string(),
        ),
    ] {
        std::fs::write(krate.join(format!("{name}.safetensors")), &bytes).unwrap();
        writeln!(
            main,
            "#[cfg(large_nan_only)]\npub static {name}: Baked<{ty}> = \
             constmat::include_net!(\"../{name}.safetensors\");"
        )
        .unwrap();
        block_cases.push((name, message));
    }
    assert_eq!(
        block_cases[0].1,
        "tensor 2.weight: element 100 is not a finite number"
    );
    assert_eq!(
        block_cases[1].1,
        "tensor 0.weight: element 300 is -128, outside -127..=127"
    );
    std::fs::write(krate.join("src/lib.rs"), &main).unwrap();
    // The line of the first `include_net!` at or after the line holding `needle`.
    let line_of = |needle: &str| {
        let lines: Vec<&str> = main.lines().collect();
        let start = lines.iter().position(|line| line.contains(needle)).unwrap();
        start
            + 1
            + (lines[start..].iter())
                .position(|line| line.contains("include_net!"))
                .unwrap()
    };

    let cargo = || {
        let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        command
            .current_dir(&krate)
            .env("CARGO_TARGET_DIR", krate.join("target"));
        command
    };
    // `cargo check` suffices for statics: they are evaluated during analysis.
    let output = cargo()
        .args(["check", "--offline", "--quiet", "--color", "never"])
        .output()
        .expect("running cargo");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the scratch crate built:\n{stderr}"
    );
    let mut errors = 0;
    for (name, message) in &expected {
        let line = line_of(&format!("pub static {name}:"));
        assert_eq!(
            error_at(&stderr, line),
            message.clone(),
            "{name}: the error whose first location is src/lib.rs:{line}:\n{stderr}"
        );
        errors += usize::from(message.is_some());
    }
    assert!(
        stderr.contains(&format!("due to {errors} previous errors")),
        "one error per bad file:\n{stderr}"
    );

    // In a `let`, the same error at the same kind of place, from `cargo build`.
    let output = cargo()
        .args(["rustc", "--offline", "--quiet", "--color", "never", "--lib"])
        .args(["--", "--cfg", "let_only"])
        .output()
        .expect("running cargo");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let missing = expected
        .iter()
        .find(|(name, _)| name == "MISSING_TENSOR")
        .and_then(|(_, message)| message.clone());
    assert_eq!(
        error_at(&stderr, line_of("let net:")),
        missing,
        "the `let` case:\n{stderr}"
    );
    let output = cargo()
        .args(["rustc", "--offline", "--quiet", "--color", "never", "--lib"])
        .args(["--", "--cfg", "bake_only"])
        .output()
        .expect("running cargo");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let nan = expected
        .iter()
        .find(|(name, _)| name == "NAN")
        .and_then(|(_, message)| message.clone())
        .expect("the NAN case is an error");
    assert!(
        stderr.contains(&nan),
        "`embed::bake` on a file with a NaN must fail the build with {nan:?}:\n{stderr}"
    );

    let check_with = |cfg: &str| {
        cargo()
            .args(["rustc", "--offline", "--quiet", "--color", "never", "--lib"])
            .args(["--profile", "check", "--", "--cfg", cfg])
            .output()
            .expect("running cargo")
    };
    let output = check_with("large_only");
    assert!(
        output.status.success(),
        "a layer of {} parameters must bake:\n{}",
        LARGE_IN * LARGE_OUT,
        String::from_utf8_lossy(&output.stderr)
    );
    let output = check_with("large_nan_only");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        error_at(&stderr, line_of("pub static LARGE_NAN:")),
        Some(large_nan_message),
        "{stderr}"
    );
    for (name, message) in block_cases {
        assert_eq!(
            error_at(&stderr, line_of(&format!("pub static {name}:"))),
            Some(message),
            "{stderr}"
        );
    }
}

/// The large layer of `files_that_do_not_fit_fail_the_build_at_the_users_line`, and where its
/// NaN is: in a whole block of 64 values, not in the tail that is read value by value.
const LARGE_IN: usize = 1000;
const LARGE_OUT: usize = 1200;
const LARGE_NAN_AT: usize = 700_001;

// ---------------------------------------------------------------------------------------------
// The shipped model on real MNIST (skipped with a notice when MNIST_DIR is unset).
// ---------------------------------------------------------------------------------------------

/// The MNIST test split, from the directory in `MNIST_DIR`.
#[cfg(feature = "data")]
fn mnist_test_split() -> Option<constmat::data::mnist::Split> {
    use constmat::data::{idx, mnist};

    let Some(dir) = std::env::var_os("MNIST_DIR").filter(|d| !d.is_empty()) else {
        println!("skipping: MNIST_DIR is not set");
        return None;
    };
    let [_, _, images, labels] = mnist::Mnist::locate(&dir).unwrap();
    let images = idx::read_images_from_path(images).unwrap();
    let labels = idx::read_labels_from_path(labels).unwrap();
    Some(mnist::Split::new(images, labels).unwrap())
}

#[cfg(feature = "data")]
#[test]
fn the_baked_model_scores_98_10_percent_like_the_heap_net() {
    let Some(test) = mnist_test_split() else {
        return;
    };
    let heap = heap_mnist();
    let mut correct = 0;
    for (index, (image, &label)) in test.images().iter().zip(test.labels()).enumerate() {
        let x: [f32; 784] = std::array::from_fn(|i| f32::from(image[i]) / 255.0);
        let class = baked::MNIST.predict(&x);
        assert_eq!(class, heap.predict(&x), "test image {index}");
        correct += usize::from(class == usize::from(label));
    }
    // What `mnist_static --save` printed when it wrote the file: 98.10% (9810). Another CPU's
    // rounding may flip a near-tie or two; never below 98%.
    assert_eq!(test.len(), 10_000);
    assert!(
        correct.abs_diff(9810) <= 3 && correct >= 9800,
        "{correct} correct"
    );
}

// ---------------------------------------------------------------------------------------------
// Memory budgets: what a baked net takes, known when it compiles.
// ---------------------------------------------------------------------------------------------

mod lenet {
    use constmat::nn::Relu;

    pub type LeNet = constmat::net![
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
}
use lenet::LeNet;

#[test]
fn memory_budgets_of_the_shipped_nets() {
    // The read-only memory is the static's size: `nm -S` gives 437,568 and 246,976 bytes for the
    // two shipped nets baked into a program (docs/embedding.md).
    assert_eq!(<Baked<HeapMnist> as Layer>::PARAMETER_BYTES, 437_568);
    assert_eq!(<Baked<LeNet> as Layer>::PARAMETER_BYTES, 246_976);
    assert_eq!(
        std::mem::size_of_val(&baked::MNIST),
        <Baked<HeapMnist> as Layer>::PARAMETER_BYTES
    );
    // Working memory: the hidden layers' outputs and the kernels' buffers, added.
    assert_eq!(<Baked<HeapMnist> as Layer>::WORKING_BYTES, (128 + 64) * 4);
    // LeNet's outputs in bytes, and the convolutions' stack buffers on x86-64 (the first pads
    // its image into 1,024 values, the second transposes its 2,400 weights into 4,096).
    let (conv1, pool1, conv2, pool2, flat, d1, d2) = (
        6 * 28 * 28 * 4,
        6 * 14 * 14 * 4,
        16 * 10 * 10 * 4,
        16 * 5 * 5 * 4,
        400 * 4,
        120 * 4,
        84 * 4,
    );
    // On x86-64: the first layer's padded image; the second layer's Winograd scratch.
    let (buffer1, buffer2) = if cfg!(target_arch = "x86_64") {
        (1024 * 4, 9216 * 4)
    } else {
        (0, 0)
    };
    assert_eq!(
        <Baked<LeNet> as Layer>::WORKING_BYTES,
        conv1 + pool1 + conv2 + pool2 + flat + d1 + d2 + buffer1 + buffer2
    );
    // The documented budget check, in a const: these fit.
    const _: () = constmat::embed::check_memory_budget::<Baked<HeapMnist>>(440_000, 1024);
    const _: () = constmat::embed::check_memory_budget::<Baked<LeNet>>(256 * 1024, 80 * 1024);
}

/// A strided convolution's prediction without the caller's scratch takes a stack buffer of what
/// its kernel reads, rounded up to a multiple of 1,024 values and at most 16,384 on x86-64
/// (2,048 elsewhere): the whole patches, or on x86-64 the weights transposed and the image
/// padded where the windows are read in place. On x86-64 a product with 40 filters or more
/// (and more than 32 steps) takes the packed products, whose 48 KiB block of `B` is on the
/// stack too: both are in `WORKING_BYTES`.
#[test]
fn strided_convolutions_count_their_stack_buffer_and_the_packed_products_buffer() {
    use constmat::nn::{Conv2d, Relu};
    let x86 = cfg!(target_arch = "x86_64");
    let (packed, other) = if x86 { (48 * 1024, 0) } else { (0, 2048 * 4) };
    let or_other = |x86_bytes: usize| if x86 { x86_bytes } else { other };
    // 64 filters of 16 x 3 x 3 on 14 x 14: products of 64 filters x 144 steps (whole patches
    // on x86-64, pieces elsewhere), packed. The windows in place: 64 x 144 weights and a padded
    // image of 16 x 16 x 16, 13,312 values (the whole patches are 144 x 49 = 7,056).
    type Many = Conv2d<f32, 16, 64, 3, 2, 1, 14, 14, 7, 7, Relu>;
    let many = or_other(13 * 1024 * 4);
    assert_eq!(<Many as Layer>::WORKING_BYTES, many + packed);
    // 16 filters of 1 x 3 x 3 on 28 x 28: one product of 16 x 196 x 9 (1,764 values of
    // patches, too few steps to read the windows in place), too few rows to pack;
    type Few = Conv2d<f32, 1, 16, 3, 2, 1, 28, 28, 14, 14, Relu>;
    let few = or_other(2 * 1024 * 4);
    assert_eq!(<Few as Layer>::WORKING_BYTES, few);
    // 32 of 16 x 3 x 3 (below the 40 rows from which products pack): 32 x 144 weights and the
    // padded image, 8,704 values.
    type ThirtyTwo = Conv2d<f32, 16, 32, 3, 2, 1, 14, 14, 7, 7, Relu>;
    assert_eq!(<ThirtyTwo as Layer>::WORKING_BYTES, or_other(9 * 1024 * 4));
    // A net of both adds them up with its layers' outputs.
    type Net = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 16, 3, 2, 1, Relu>,
        Conv2d<16, 64, 3, 2, 1, Relu>,
    ];
    assert_eq!(
        <Net as Layer>::WORKING_BYTES,
        16 * 14 * 14 * 4 + few + many + packed
    );
}
