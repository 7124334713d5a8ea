//! The real MNIST files, from the directory in the environment variable `MNIST_DIR`; skipped
//! (with a notice) when it is not set.
//!
//! The expected values are published facts about MNIST, not outputs of this crate: the SHA-256
//! of each decompressed file, the class histograms and the first labels.
#![cfg(feature = "data")]

use std::path::PathBuf;

use constmat::data::mnist::{self, Mnist, Split};
use sha2::{Digest, Sha256};

/// SHA-256 of the decompressed files, as published with the data set.
const TRAIN_IMAGES_SHA256: &str =
    "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db";
const TRAIN_LABELS_SHA256: &str =
    "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5";
const TEST_IMAGES_SHA256: &str = "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7";
const TEST_LABELS_SHA256: &str = "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2";

/// The number of examples of each digit.
const TRAIN_HISTOGRAM: [usize; 10] = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949];
const TEST_HISTOGRAM: [usize; 10] = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009];

fn mnist_dir() -> Option<PathBuf> {
    match std::env::var_os("MNIST_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => {
            println!("skipping: MNIST_DIR is not set");
            None
        }
    }
}

/// The SHA-256, in hex, of an IDX file rebuilt from the header MNIST uses and the data as read.
fn sha256_hex<'a>(header: &[u32], data: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hasher = Sha256::new();
    for word in header {
        hasher.update(word.to_be_bytes());
    }
    for chunk in data {
        hasher.update(chunk);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn histogram(labels: &[u8]) -> [usize; 10] {
    let mut counts = [0; 10];
    for &label in labels {
        counts[usize::from(label)] += 1;
    }
    counts
}

fn check_split(
    name: &str,
    split: &Split,
    count: u32,
    histogram_expected: [usize; 10],
    images_sha256: &str,
    labels_sha256: &str,
) {
    assert_eq!(split.len(), count as usize, "{name}: count");
    assert_eq!(split.images().len(), count as usize, "{name}: images");
    assert_eq!(split.labels().len(), count as usize, "{name}: labels");
    assert!(
        split.labels().iter().all(|&l| l < 10),
        "{name}: labels < 10"
    );
    let counts = histogram(split.labels());
    assert_eq!(counts.iter().sum::<usize>(), count as usize);
    assert_eq!(counts, histogram_expected, "{name}: label histogram");

    let images = split.images();
    assert_eq!(
        sha256_hex(&[0x0803, count, 28, 28], images.iter().map(|im| &im[..])),
        images_sha256,
        "{name}: images differ from the published file"
    );
    assert_eq!(
        sha256_hex(&[0x0801, count], [split.labels()]),
        labels_sha256,
        "{name}: labels differ from the published file"
    );
    // Background and ink both occur.
    assert!(
        images.iter().any(|im| im.contains(&0)),
        "{name}: no background"
    );
    assert!(images.iter().any(|im| im.contains(&255)), "{name}: no ink");
}

#[test]
fn real_mnist() {
    let Some(dir) = mnist_dir() else { return };
    let paths = Mnist::locate(&dir).expect("the four MNIST files");
    println!("reading {paths:?}");
    let mnist = Mnist::load(&dir).unwrap_or_else(|e| panic!("{e}"));

    check_split(
        "train",
        &mnist.train,
        60_000,
        TRAIN_HISTOGRAM,
        TRAIN_IMAGES_SHA256,
        TRAIN_LABELS_SHA256,
    );
    check_split(
        "test",
        &mnist.test,
        10_000,
        TEST_HISTOGRAM,
        TEST_IMAGES_SHA256,
        TEST_LABELS_SHA256,
    );

    // The well-known first labels.
    assert_eq!(&mnist.train.labels()[..10], &[5, 0, 4, 1, 9, 2, 1, 3, 1, 4]);
    assert_eq!(&mnist.test.labels()[..10], &[7, 2, 1, 0, 4, 1, 4, 9, 5, 9]);

    // A batch of the first training image (a 5) and the last test image, scaled to [0, 1].
    let mut x = [[0.0_f32; mnist::PIXELS]; 2];
    let mut y = [0_u8; 2];
    mnist.train.fill_batch(&[0, 0], &mut x, &mut y);
    assert_eq!(y, [5, 5]);
    let ink: f32 = x[0].iter().sum();
    let raw: u32 = mnist.train.image(0).iter().map(|&p| u32::from(p)).sum();
    assert!((ink - raw as f32 / 255.0).abs() < 1e-2, "{ink} vs {raw}");
    assert!(x[0].iter().all(|&v| (0.0..=1.0).contains(&v)));
    mnist.test.fill_batch(&[9_999, 0], &mut x, &mut y);
    assert_eq!(y, [mnist.test.label(9_999), 7]);
}
