//! Saving and loading parameters as safetensors (`constmat::io::safetensors`).
//!
//! Round trips of several architectures and both element types, the tensor names and shapes in
//! the header (PyTorch's `nn.Sequential` numbering), one test per error kind with its exact
//! message, `load_into` leaving the net alone on error, a file laid out as PyTorch writes it,
//! and malformed files that must never panic.
//!
//! Malformed files are built with the `safetensors` crate itself (`serialize` +
//! `TensorView::new`), so each is valid except for the one problem under test.
#![cfg(feature = "safetensors")]

use std::collections::HashMap;
use std::path::PathBuf;

use ::safetensors::tensor::{Dtype, SafeTensors, TensorView};
use constmat::Matrix;
use constmat::format::{self, ErrorKind};
use constmat::io::safetensors::{self as st, Element, WeightsError, WeightsErrorKind};
use constmat::nn::{Dense, Identity, Layer, Parameters, Relu, Sigmoid, Tanh, Train, Weights};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng, rngs::StdRng};

// ---------------------------------------------------------------------------------------------
// Architectures under test, with the names and shapes PyTorch gives their tensors.
// ---------------------------------------------------------------------------------------------

/// The documented MLP: `Sequential(Linear(784,128), ReLU(), Linear(128,64), ReLU(), Linear(64,10))`.
type Mnist = constmat::net![
    Dense<f32, 784, 128, Relu>,
    Dense<f32, 128, 64, Relu>,
    Dense<f32, 64, 10, Identity>,
];
const MNIST_TENSORS: &[(&str, &[usize])] = &[
    ("0.weight", &[128, 784]),
    ("0.bias", &[128]),
    ("2.weight", &[64, 128]),
    ("2.bias", &[64]),
    ("4.weight", &[10, 64]),
    ("4.bias", &[10]),
];

/// `Sequential(Linear(5,4), Tanh(), Linear(4,3), Linear(3,2), Sigmoid())`: the Identity layer
/// takes no activation module, so the third Linear is module 3.
type Mixed64 = constmat::net![
    Dense<f64, 5, 4, Tanh>,
    Dense<f64, 4, 3, Identity>,
    Dense<f64, 3, 2, Sigmoid>,
];
const MIXED64_TENSORS: &[(&str, &[usize])] = &[
    ("0.weight", &[4, 5]),
    ("0.bias", &[4]),
    ("2.weight", &[3, 4]),
    ("2.bias", &[3]),
    ("3.weight", &[2, 3]),
    ("3.bias", &[2]),
];

/// Every activation once: `Linear, Sigmoid, Linear, ReLU, Linear, Tanh, Linear`.
type Every32 = constmat::net![
    Dense<f32, 2, 3, Sigmoid>,
    Dense<f32, 3, 3, Relu>,
    Dense<f32, 3, 3, Tanh>,
    Dense<f32, 3, 2, Identity>,
];
const EVERY32_TENSORS: &[(&str, &[usize])] = &[
    ("0.weight", &[3, 2]),
    ("0.bias", &[3]),
    ("2.weight", &[3, 3]),
    ("2.bias", &[3]),
    ("4.weight", &[3, 3]),
    ("4.bias", &[3]),
    ("6.weight", &[2, 3]),
    ("6.bias", &[2]),
];

/// A single layer (not a `Chain`), f64, with a trailing Sigmoid module.
type Single64 = Dense<f64, 6, 1, Sigmoid>;
const SINGLE64_TENSORS: &[(&str, &[usize])] = &[("0.weight", &[1, 6]), ("0.bias", &[1])];

/// Eleven Identity layers: modules 0 to 10, so `10.weight` sorts before `2.weight` as a string.
type Deep32 = constmat::net![
    Dense<f32, 2, 3, Identity>,
    Dense<f32, 3, 2, Identity>,
    Dense<f32, 2, 2, Identity>,
    Dense<f32, 2, 2, Identity>,
    Dense<f32, 2, 2, Identity>,
    Dense<f32, 2, 2, Identity>,
    Dense<f32, 2, 2, Identity>,
    Dense<f32, 2, 2, Identity>,
    Dense<f32, 2, 2, Identity>,
    Dense<f32, 2, 4, Identity>,
    Dense<f32, 4, 1, Identity>,
];
const DEEP32_TENSORS: &[(&str, &[usize])] = &[
    ("0.weight", &[3, 2]),
    ("0.bias", &[3]),
    ("1.weight", &[2, 3]),
    ("1.bias", &[2]),
    ("2.weight", &[2, 2]),
    ("2.bias", &[2]),
    ("3.weight", &[2, 2]),
    ("3.bias", &[2]),
    ("4.weight", &[2, 2]),
    ("4.bias", &[2]),
    ("5.weight", &[2, 2]),
    ("5.bias", &[2]),
    ("6.weight", &[2, 2]),
    ("6.bias", &[2]),
    ("7.weight", &[2, 2]),
    ("7.bias", &[2]),
    ("8.weight", &[2, 2]),
    ("8.bias", &[2]),
    ("9.weight", &[4, 2]),
    ("9.bias", &[4]),
    ("10.weight", &[1, 4]),
    ("10.bias", &[1]),
];

/// The small net most error tests use: `Sequential(Linear(4,3), ReLU(), Linear(3,2))`.
type Small = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2, Identity>];
type Small64 = constmat::net![Dense<f64, 4, 3, Relu>, Dense<f64, 3, 2, Identity>];

// ---------------------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------------------

/// Element types that can be drawn from random bits: every finite bit pattern is possible
/// (subnormals, -0.0, the extremes), so a round trip that rounds or canonicalizes would show.
trait Sample: Element {
    fn from_random_bits(bits: u64) -> Self;
    fn bits(self) -> u64;
}

impl Sample for f32 {
    fn from_random_bits(bits: u64) -> Self {
        let x = f32::from_bits(bits as u32);
        // Keep the sign and mantissa, pull the exponent into the finite range.
        if x.is_finite() {
            x
        } else {
            f32::from_bits(bits as u32 & 0xFF7F_FFFF)
        }
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl Sample for f64 {
    fn from_random_bits(bits: u64) -> Self {
        let x = f64::from_bits(bits);
        if x.is_finite() {
            x
        } else {
            f64::from_bits(bits & 0xFFEF_FFFF_FFFF_FFFF)
        }
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// A net of type `P` whose every parameter (biases too) is drawn from random bits, with a few
/// special values planted at the front.
fn random_net<T: Sample, P: Parameters<T>>(seed: u64) -> P {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut net = P::zeros();
    for k in 0..net.tensor_count() {
        for x in net.tensor_mut(k).iter_mut() {
            *x = T::from_random_bits(rng.random::<u64>());
        }
    }
    let specials = [0.0_f64, -0.0, 1.0, -1.0, f64::MIN_POSITIVE];
    for (x, &s) in net.tensor_mut(0).iter_mut().zip(&specials) {
        *x = T::from_random_bits(if size_of::<T>() == 4 {
            u64::from((s as f32).to_bits())
        } else {
            s.to_bits()
        });
    }
    net
}

/// The bit patterns of every parameter, tensor by tensor: equality here is exact (it tells
/// -0.0 from 0.0, which `PartialEq` does not).
fn bit_patterns<T: Sample, P: Parameters<T>>(net: &P) -> Vec<Vec<u64>> {
    (0..net.tensor_count())
        .map(|k| net.tensor(k).iter().map(|&x| x.bits()).collect())
        .collect()
}

fn names_of<T, P: Parameters<T>>(net: &P) -> Vec<(String, Vec<usize>)> {
    (0..net.tensor_count())
        .map(|k| {
            let info = net.tensor_info(k);
            (info.name().to_string(), info.shape().to_vec())
        })
        .collect()
}

fn expected(tensors: &[(&str, &[usize])]) -> Vec<(String, Vec<usize>)> {
    tensors
        .iter()
        .map(|(name, shape)| ((*name).to_string(), shape.to_vec()))
        .collect()
}

/// The JSON header of a safetensors file, as text.
fn header_text(bytes: &[u8]) -> &str {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    std::str::from_utf8(&bytes[8..8 + n]).expect("the header is UTF-8")
}

/// Checks the header of `bytes` against the expected tensors: read back with the safetensors
/// crate (names, dtypes, shapes, metadata), and by string search in the raw JSON.
fn check_header(bytes: &[u8], dtype: Dtype, tensors: &[(&str, &[usize])]) {
    let file = SafeTensors::deserialize(bytes).expect("a valid safetensors file");
    let mut names: Vec<&str> = file.names();
    names.sort_unstable();
    let mut want: Vec<&str> = tensors.iter().map(|(n, _)| *n).collect();
    want.sort_unstable();
    assert_eq!(names, want, "the tensor names");
    for (name, shape) in tensors {
        let view = file.tensor(name).unwrap();
        assert_eq!(view.dtype(), dtype, "{name}");
        assert_eq!(view.shape(), *shape, "{name}");
    }
    let (_, metadata) = SafeTensors::read_metadata(bytes).unwrap();
    assert_eq!(
        metadata.metadata().as_ref().and_then(|m| m.get("format")),
        Some(&"pt".to_string())
    );

    // The same, by string search in the JSON text.
    let header = header_text(bytes);
    let dtype_text = format!("{dtype:?}");
    for (name, shape) in tensors {
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        let entry = format!(
            "\"{name}\":{{\"dtype\":\"{dtype_text}\",\"shape\":[{}]",
            dims.join(",")
        );
        assert!(header.contains(&entry), "{entry} in {header}");
    }
    assert!(
        header.contains("\"__metadata__\":{\"format\":\"pt\"}"),
        "{header}"
    );
}

fn tmp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("safetensors-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Round trips `net` through bytes and through a file; checks the header and exact equality.
fn round_trip<T: Sample, P: Parameters<T> + Weights + PartialEq + std::fmt::Debug>(
    net: &P,
    dtype: Dtype,
    tensors: &[(&str, &[usize])],
    file_name: &str,
) {
    assert_eq!(
        names_of(net),
        expected(tensors),
        "the net's own tensor names"
    );

    let bytes = st::to_bytes(net, &[]);
    check_header(&bytes, dtype, tensors);
    let back: P = st::from_bytes(&bytes).unwrap();
    assert_eq!(&back, net);
    assert_eq!(bit_patterns(&back), bit_patterns(net));
    // Writing what was read gives the same bytes.
    assert_eq!(st::to_bytes(&back, &[]), bytes);

    let path = tmp_path(file_name);
    st::save(net, &path, &[]).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "save writes to_bytes");
    let loaded: P = st::load(&path).unwrap();
    assert_eq!(bit_patterns(&loaded), bit_patterns(net));

    // load_into overwrites every parameter.
    let mut other: P = random_net(0xDEAD);
    st::load_into(&mut other, &bytes).unwrap();
    assert_eq!(bit_patterns(&other), bit_patterns(net));
    std::fs::remove_file(&path).unwrap();
}

/// A file holding the given tensors (name, dtype, shape, raw little-endian bytes), written with
/// the safetensors crate, metadata `{"format": "pt"}`.
fn file_with(tensors: &[(&str, Dtype, &[usize], Vec<u8>)]) -> Vec<u8> {
    let views = tensors.iter().map(|(name, dtype, shape, data)| {
        (
            *name,
            TensorView::new(*dtype, shape.to_vec(), data).unwrap(),
        )
    });
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    ::safetensors::serialize(views, Some(metadata)).unwrap()
}

/// The tensors of `net` as `file_with` takes them.
fn tensors_of<T: Element, P: Parameters<T>>(net: &P) -> Vec<(String, Dtype, Vec<usize>, Vec<u8>)> {
    (0..net.tensor_count())
        .map(|k| {
            let info = net.tensor_info(k);
            let mut bytes = Vec::new();
            for &x in net.tensor(k) {
                x.extend_le(&mut bytes);
            }
            (
                info.name().to_string(),
                dtype_of::<T>(),
                info.shape().to_vec(),
                bytes,
            )
        })
        .collect()
}

/// The reference crate's name for `T`'s dtype.
fn dtype_of<T: Element>() -> Dtype {
    match T::DTYPE {
        format::Dtype::F32 => Dtype::F32,
        format::Dtype::F64 => Dtype::F64,
        other => panic!("no test element has dtype {other:?}"),
    }
}

fn build(tensors: &[(String, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let borrowed: Vec<(&str, Dtype, &[usize], Vec<u8>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), *d, s.as_slice(), b.clone()))
        .collect();
    file_with(&borrowed)
}

/// Loads `bytes` into a copy of `net` with `load_into`, checks that the copy is unchanged, and
/// returns the error.
fn load_into_fails<T: Sample, P: Parameters<T> + Weights + Clone>(
    net: &P,
    bytes: &[u8],
) -> WeightsError {
    let mut copy = net.clone();
    let err = st::load_into(&mut copy, bytes).expect_err("the load must fail");
    assert_eq!(
        bit_patterns(&copy),
        bit_patterns(net),
        "load_into changed the net although it failed with: {err}"
    );
    err
}

// ---------------------------------------------------------------------------------------------
// Round trips and names.
// ---------------------------------------------------------------------------------------------

#[test]
fn round_trip_the_documented_mnist_net() {
    let net: Mnist = random_net(1);
    round_trip(&net, Dtype::F32, MNIST_TENSORS, "mnist.safetensors");
}

#[test]
fn round_trip_f64_with_tanh_identity_and_sigmoid() {
    let net: Mixed64 = random_net(2);
    assert_eq!(Mixed64::SPEC.modules(), 5);
    round_trip(&net, Dtype::F64, MIXED64_TENSORS, "mixed64.safetensors");
}

#[test]
fn round_trip_every_activation_f32() {
    let net: Every32 = random_net(3);
    assert_eq!(Every32::SPEC.modules(), 7);
    round_trip(&net, Dtype::F32, EVERY32_TENSORS, "every32.safetensors");
}

#[test]
fn round_trip_a_single_f64_layer() {
    let net: Single64 = random_net(4);
    assert_eq!(Single64::SPEC.modules(), 2);
    round_trip(&net, Dtype::F64, SINGLE64_TENSORS, "single64.safetensors");
}

#[test]
fn round_trip_eleven_identity_layers_numbered_past_nine() {
    let net: Deep32 = random_net(5);
    assert_eq!(Deep32::SPEC.modules(), 11);
    round_trip(&net, Dtype::F32, DEEP32_TENSORS, "deep32.safetensors");
}

#[test]
fn round_trip_small_nets_of_both_element_types() {
    let net: Small = random_net(6);
    let tensors: &[(&str, &[usize])] = &[
        ("0.weight", &[3, 4]),
        ("0.bias", &[3]),
        ("2.weight", &[2, 3]),
        ("2.bias", &[2]),
    ];
    round_trip(&net, Dtype::F32, tensors, "small32.safetensors");
    let net: Small64 = random_net(7);
    round_trip(&net, Dtype::F64, tensors, "small64.safetensors");
}

#[test]
fn metadata_is_written_and_format_pt_is_added() {
    let net: Small = random_net(8);
    let bytes = st::to_bytes(&net, &[("note", "demo"), ("producer", "tests")]);
    let (_, metadata) = SafeTensors::read_metadata(&bytes).unwrap();
    let metadata = metadata.metadata().clone().unwrap();
    assert_eq!(
        metadata,
        HashMap::from([
            ("format".to_string(), "pt".to_string()),
            ("note".to_string(), "demo".to_string()),
            ("producer".to_string(), "tests".to_string()),
        ])
    );
    let back: Small = st::from_bytes(&bytes).unwrap();
    assert_eq!(bit_patterns(&back), bit_patterns(&net));
}

#[test]
fn files_load_whatever_the_order_of_tensors_in_the_file() {
    // The safetensors crate orders tensors by dtype then name; write them with data in another
    // order by hand-building the header, as another writer might.
    let net: Small = random_net(9);
    let tensors = tensors_of(&net);
    let mut header = String::from("{");
    let mut data = Vec::new();
    // Reverse order: 2.bias first.
    for (i, (name, _, shape, bytes)) in tensors.iter().rev().enumerate() {
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"{name}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            dims.join(","),
            data.len(),
            data.len() + bytes.len()
        ));
        data.extend_from_slice(bytes);
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    let back: Small = st::from_bytes(&file).unwrap();
    assert_eq!(bit_patterns(&back), bit_patterns(&net));
}

// ---------------------------------------------------------------------------------------------
// Errors, one kind at a time, with their exact messages.
// ---------------------------------------------------------------------------------------------

/// The format error of a failed load.
fn format_error(err: &WeightsError) -> &format::Error {
    err.format_error()
        .unwrap_or_else(|| panic!("expected a format error, got {err:?}"))
}

#[test]
fn truncated_files_are_reported_with_their_sizes() {
    let net: Small = random_net(10);
    let bytes = st::to_bytes(&net, &[]);
    let n = header_text(&bytes).len();
    let header_end = 8 + n;
    let data = bytes.len() - header_end;
    let cases: Vec<(usize, String)> = vec![
        (
            0,
            "it is 0 bytes long, shorter than the 8-byte header length every safetensors file \
             starts with"
                .into(),
        ),
        (
            7,
            "it is 7 bytes long, shorter than the 8-byte header length every safetensors file \
             starts with"
                .into(),
        ),
        (
            8,
            format!("the header length is {n} bytes, but only 0 bytes follow it (truncated?)"),
        ),
        (
            header_end - 1,
            format!(
                "the header length is {n} bytes, but only {} bytes follow it (truncated?)",
                n - 1
            ),
        ),
        (
            header_end,
            format!(
                "the header says the data section is {data} bytes, the file has 0 after the header"
            ),
        ),
        (
            bytes.len() - 4,
            format!(
                "the header says the data section is {data} bytes, the file has {} after the header",
                data - 4
            ),
        ),
    ];
    for (len, reason) in cases {
        let err = load_into_fails(&net, &bytes[..len]);
        let kind = format_error(&err).kind();
        assert!(
            matches!(kind, ErrorKind::Truncated | ErrorKind::DataLength),
            "truncated at {len}: {kind:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("not a valid safetensors file: {reason}"),
            "truncated at {len}"
        );
        assert!(err.path().is_none());
    }
    // Every other length fails too, as truncated (or, past the header, as a short data section).
    for len in 0..bytes.len() {
        let err = st::from_bytes::<Small>(&bytes[..len]).unwrap_err();
        let want = if len < header_end {
            ErrorKind::Truncated
        } else {
            ErrorKind::DataLength
        };
        assert_eq!(format_error(&err).kind(), want, "truncated at {len}");
    }
}

#[test]
fn a_garbage_header_is_a_syntax_error_at_its_byte() {
    let net: Small = random_net(11);
    let mut garbage = 16_u64.to_le_bytes().to_vec();
    garbage.extend_from_slice(b"this is not json");
    let err = load_into_fails(&net, &garbage);
    assert_eq!(
        err.to_string(),
        "not a valid safetensors file: expected a JSON object (`{`) at byte 8 of the file"
    );

    // Valid JSON, but not a safetensors header.
    let mut wrong = 7_u64.to_le_bytes().to_vec();
    wrong.extend_from_slice(b"[1,2,3]");
    let err = load_into_fails(&net, &wrong);
    assert_eq!(format_error(&err).kind(), ErrorKind::Syntax, "{err}");

    // Not UTF-8.
    let mut binary = 4_u64.to_le_bytes().to_vec();
    binary.extend_from_slice(&[b'{', 0xFF, 0xFE, b'}']);
    let err = load_into_fails(&net, &binary);
    assert_eq!(
        err.to_string(),
        "not a valid safetensors file: expected UTF-8 text at byte 9 of the file"
    );

    // A valid file with its header overwritten by spaces (same length).
    let mut blank = st::to_bytes(&net, &[]);
    let n = header_text(&blank).len();
    blank[8..8 + n].fill(b' ');
    let err = load_into_fails(&net, &blank);
    assert_eq!(
        err.to_string(),
        format!(
            "not a valid safetensors file: expected a JSON object (`{{`) at byte {} of the file",
            8 + n
        )
    );

    // Offsets that do not span what the dtype and shape take.
    let bytes = st::to_bytes(&net, &[]);
    let header = header_text(&bytes).to_string();
    let shifted = header.replacen("\"data_offsets\":[0,", "\"data_offsets\":[4,", 1);
    assert_ne!(shifted, header);
    let mut file = bytes.clone();
    file[8..8 + header.len()].copy_from_slice(shifted.as_bytes());
    let err = load_into_fails(&net, &file);
    assert_eq!(
        err.to_string(),
        "not a valid safetensors file: tensor 0.bias is f32 [3], which takes 12 bytes, but its \
         data offsets [4, 12] span 8"
    );
}

#[test]
fn a_header_length_beyond_the_file_is_reported_with_both_sizes() {
    let net: Small = random_net(12);
    let mut bytes = st::to_bytes(&net, &[]);
    let len = bytes.len() as u64;
    for claimed in [len - 7, len, len + 1, 1 << 20] {
        bytes[..8].copy_from_slice(&claimed.to_le_bytes());
        let err = load_into_fails(&net, &bytes);
        assert_eq!(
            *format_error(&err),
            format::Error::HeaderPastEnd {
                declared: claimed,
                available: bytes.len() - 8
            }
        );
    }
    for claimed in [100_000_001, u64::MAX] {
        bytes[..8].copy_from_slice(&claimed.to_le_bytes());
        let err = load_into_fails(&net, &bytes);
        assert_eq!(format_error(&err).kind(), ErrorKind::HeaderTooLarge);
        assert!(
            err.to_string().starts_with(
                "not a valid safetensors file: the header length is 100,000,001 bytes"
            ) || claimed == u64::MAX,
            "{err}"
        );
    }
}

#[test]
fn a_missing_tensor_is_reported_with_its_expected_dtype_and_shape() {
    let net: Small = random_net(13);
    let all = tensors_of(&net);
    for (k, (name, want)) in [
        ("0.weight", "f32 [3, 4]"),
        ("0.bias", "f32 [3]"),
        ("2.weight", "f32 [2, 3]"),
        ("2.bias", "f32 [2]"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut tensors = all.clone();
        assert_eq!(tensors.remove(k).0, name);
        let err = load_into_fails(&net, &build(&tensors));
        assert_eq!(
            err.to_string(),
            format!("tensor {name} is missing: expected {want}")
        );
        match format_error(&err) {
            format::Error::Missing {
                name: n,
                dtype,
                shape,
            } => {
                assert_eq!(n.as_str(), name);
                assert_eq!(*dtype, format::Dtype::F32);
                assert_eq!(shape.dims(), all[k].2);
            }
            other => panic!("expected Missing, got {other:?}"),
        }
    }
    // A file with no tensors at all: the first tensor is reported.
    let err = load_into_fails(&net, &build(&[]));
    assert_eq!(
        err.to_string(),
        "tensor 0.weight is missing: expected f32 [3, 4]"
    );
}

/// PyTorch's textbook LeNet-5 (no padding: 16 x 4 x 4 at the Flatten) loaded into the padded
/// one of the docs (16 x 5 x 5): the message says which images each number of inputs implies.
#[test]
fn a_dense_layer_after_flatten_says_which_images_the_files_inputs_imply() {
    type Textbook = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 6, 5, Relu>,
        MaxPool2d<2>,
        Conv2d<6, 16, 5, Relu>,
        MaxPool2d<2>,
        Flatten,
        Dense<256, 120, Relu>,
        Dense<120, 84, Relu>,
        Dense<84, 10>,
    ];
    type Padded = constmat::net![
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
    let textbook: Textbook = Parameters::zeros();
    let bytes = st::to_bytes(&textbook, &[]);
    let err = st::from_bytes::<Padded>(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 7.weight: expected f32 [120, 400], found f32 [120, 256]: the layer reads \
         Flatten's 16 x 5 x 5 = 400 values; 256 would be 16 x 4 x 4, images of 4 x 4 where this \
         net has 5 x 5 (another padding, stride or kernel size?)"
    );
    match format_error(&err) {
        format::Error::Mismatch { flattened, .. } => assert_eq!(*flattened, Some([16, 5, 5])),
        other => panic!("expected Mismatch, got {other:?}"),
    }
    // A number of inputs that is no image of 16 channels says so: the textbook file with its
    // dense layer's weight cut to 300 columns.
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let shape = if name == "7.weight" {
                vec![120, 300]
            } else {
                view.shape().to_vec()
            };
            let len = shape.iter().product::<usize>() * 4;
            (name, view.dtype(), shape, vec![0; len])
        })
        .collect();
    let err = st::from_bytes::<Padded>(&build(&tensors)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 7.weight: expected f32 [120, 400], found f32 [120, 300]: the layer reads \
         Flatten's 16 x 5 x 5 = 400 values; 300 is not a multiple of its 16 channels"
    );
    // A dropout between Flatten and the layer (a module without tensors) keeps the hint.
    type WithDropout = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 6, 5, 1, 2, Relu>,
        MaxPool2d<2>,
        Conv2d<6, 16, 5, Relu>,
        MaxPool2d<2>,
        Flatten,
        Dropout<50>,
        Dense<400, 10>,
    ];
    type TextbookWithDropout = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 6, 5, Relu>,
        MaxPool2d<2>,
        Conv2d<6, 16, 5, Relu>,
        MaxPool2d<2>,
        Flatten,
        Dropout<50>,
        Dense<256, 10>,
    ];
    let textbook: TextbookWithDropout = Parameters::zeros();
    let err = st::from_bytes::<WithDropout>(&st::to_bytes(&textbook, &[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 8.weight: expected f32 [10, 400], found f32 [10, 256]: the layer reads \
         Flatten's 16 x 5 x 5 = 400 values; 256 would be 16 x 4 x 4, images of 4 x 4 where this \
         net has 5 x 5 (another padding, stride or kernel size?)"
    );
    // The same mismatch without a Flatten before the layer keeps the plain message.
    let dense: Dense<f32, 256, 120> = Parameters::zeros();
    let err = st::from_bytes::<Dense<f32, 400, 120>>(&st::to_bytes(&dense, &[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 0.weight: expected f32 [120, 400], found f32 [120, 256]"
    );
}

#[test]
fn an_f64_file_loaded_as_f32_is_a_dtype_mismatch() {
    let net64: Small64 = random_net(14);
    let bytes = st::to_bytes(&net64, &[]);
    let net32: Small = random_net(15);
    let err = load_into_fails(&net32, &bytes);
    assert_eq!(
        err.to_string(),
        "tensor 0.weight: expected f32 [3, 4], found f64 [3, 4]"
    );
    // `fn main() -> Result<(), WeightsError>` prints the `Debug` form: as readable, the shapes
    // as lists and the name as a string.
    let debug = format!("{err:?}");
    assert!(
        debug.contains(r#"name: "0.weight""#)
            && debug.contains("expected_shape: [3, 4]")
            && debug.contains("found_shape: [3, 4]")
            && !debug.contains("dims"),
        "{debug}"
    );
    match format_error(&err) {
        format::Error::Mismatch {
            name,
            expected_dtype,
            expected_shape,
            found_dtype,
            found_shape,
            flattened: None,
            ..
        } => {
            assert_eq!(name.as_str(), "0.weight");
            assert_eq!(*expected_dtype, format::Dtype::F32);
            assert_eq!(expected_shape.dims(), &[3, 4]);
            assert_eq!(*found_dtype, format::Dtype::F64);
            assert_eq!(found_shape.dims(), &[3, 4]);
        }
        other => panic!("expected Mismatch, got {other:?}"),
    }
    // And the other way round.
    let err = st::from_bytes::<Small64>(&st::to_bytes(&net32, &[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 0.weight: expected f64 [3, 4], found f32 [3, 4]"
    );

    // One tensor of another dtype of the same size (I32) in an otherwise good f32 file.
    let mut tensors = tensors_of(&net32);
    tensors[3].1 = Dtype::I32;
    let err = load_into_fails(&net32, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "tensor 2.bias: expected f32 [2], found i32 [2]"
    );
    // A half-precision bias (PyTorch .half()).
    let mut tensors = tensors_of(&net32);
    tensors[1] = ("0.bias".into(), Dtype::F16, vec![3], vec![0; 6]);
    let err = load_into_fails(&net32, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "tensor 0.bias: expected f32 [3], found f16 [3]"
    );
}

#[test]
fn a_transposed_weight_is_a_shape_mismatch() {
    let net: Mnist = random_net(16);
    let mut tensors = tensors_of(&net);
    assert_eq!(tensors[2].0, "2.weight");
    tensors[2].2 = vec![128, 64];
    let bytes = build(&tensors);
    let err = load_into_fails(&net, &bytes);
    assert_eq!(
        err.to_string(),
        "tensor 2.weight: expected f32 [64, 128], found f32 [128, 64]"
    );

    // And from a file on disk, where the message starts with the path.
    let path = tmp_path("transposed.safetensors");
    std::fs::write(&path, &bytes).unwrap();
    let err = st::load::<Mnist>(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: tensor 2.weight: expected f32 [64, 128], found f32 [128, 64]",
            path.display()
        )
    );
    assert_eq!(err.path(), Some(path.as_path()));
    std::fs::remove_file(&path).unwrap();

    // Other shapes of the same size: a bias stored [1, 2] or a weight flattened.
    let small: Small = random_net(17);
    let mut tensors = tensors_of(&small);
    tensors[3].2 = vec![1, 2];
    let err = load_into_fails(&small, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "tensor 2.bias: expected f32 [2], found f32 [1, 2]"
    );
    let mut tensors = tensors_of(&small);
    tensors[0].2 = vec![12];
    let err = load_into_fails(&small, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "tensor 0.weight: expected f32 [3, 4], found f32 [12]"
    );
    // The wrong size altogether (data to match).
    let mut tensors = tensors_of(&small);
    tensors[2] = ("2.weight".into(), Dtype::F32, vec![2, 4], vec![0; 32]);
    let err = load_into_fails(&small, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "tensor 2.weight: expected f32 [2, 3], found f32 [2, 4]"
    );
}

#[test]
fn nan_and_infinity_are_reported_at_their_index() {
    let net: Small = random_net(18);
    let cases: [(usize, usize, f32, &str); 4] = [
        (0, 7, f32::NAN, "0.weight"),
        (1, 2, f32::INFINITY, "0.bias"),
        (2, 5, f32::NEG_INFINITY, "2.weight"),
        (3, 0, -f32::NAN, "2.bias"),
    ];
    for (k, index, value, name) in cases {
        let mut tensors = tensors_of(&net);
        tensors[k].3[4 * index..4 * index + 4].copy_from_slice(&value.to_le_bytes());
        // A second bad value later in the same tensor: the first is reported.
        if index + 1 < tensors[k].3.len() / 4 {
            let at = 4 * (index + 1);
            tensors[k].3[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        }
        let err = load_into_fails(&net, &build(&tensors));
        assert_eq!(
            err.to_string(),
            format!("tensor {name}: element {index} is not a finite number")
        );
        match format_error(&err) {
            format::Error::NonFinite { name: n, index: i } => {
                assert_eq!(n.as_str(), name);
                assert_eq!(*i, index);
            }
            other => panic!("expected NonFinite, got {other:?}"),
        }
    }

    // f64, the last element of the last tensor.
    let net64: Small64 = random_net(19);
    let mut tensors = tensors_of(&net64);
    tensors[3].3[8..16].copy_from_slice(&f64::INFINITY.to_le_bytes());
    let err = load_into_fails(&net64, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "tensor 2.bias: element 1 is not a finite number"
    );

    // The largest finite values are fine.
    let mut tensors = tensors_of(&net);
    tensors[0].3[..4].copy_from_slice(&f32::MAX.to_le_bytes());
    tensors[0].3[4..8].copy_from_slice(&f32::MIN.to_le_bytes());
    let back: Small = st::from_bytes(&build(&tensors)).unwrap();
    assert_eq!(&back.first.weight.as_slice()[..2], &[f32::MAX, f32::MIN]);
}

#[test]
fn an_extra_tensor_is_unexpected() {
    let net: Small = random_net(20);
    let mut tensors = tensors_of(&net);
    tensors.push(("4.weight".into(), Dtype::F32, vec![1, 2], vec![0; 8]));
    let err = load_into_fails(&net, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "the file holds tensor 4.weight, which the net does not have"
    );
    match format_error(&err) {
        format::Error::Unexpected { name } => assert_eq!(name.as_str(), "4.weight"),
        other => panic!("expected Unexpected, got {other:?}"),
    }

    // Several extras, of other dtypes: the first in the file is named (the reference writer
    // puts 8-byte dtypes first, then orders by name).
    let mut tensors = tensors_of(&net);
    tensors.push(("running_mean".into(), Dtype::F64, vec![3], vec![0; 24]));
    tensors.push(("1.weight".into(), Dtype::I64, vec![1], vec![0; 8]));
    tensors.push(("num_batches_tracked".into(), Dtype::I64, vec![], vec![0; 8]));
    let err = load_into_fails(&net, &build(&tensors));
    assert_eq!(
        err.to_string(),
        "the file holds tensor 1.weight, which the net does not have"
    );

    // A bigger net's file into a smaller net: the smaller net's tensors are all there.
    let bigger: Every32 = random_net(21);
    let smaller: constmat::net![Dense<f32, 2, 3, Sigmoid>, Dense<f32, 3, 3, Relu>] = random_net(22);
    let err = load_into_fails(&smaller, &st::to_bytes(&bigger, &[]));
    assert_eq!(
        err.to_string(),
        "the file holds tensor 4.bias, which the net does not have"
    );
}

#[test]
fn io_errors_carry_the_path() {
    let path = tmp_path("no-such-file.safetensors");
    let _ = std::fs::remove_file(&path);
    let err = st::load::<Small>(&path).unwrap_err();
    assert!(
        matches!(err.kind(), WeightsErrorKind::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    );
    assert_eq!(err.path(), Some(path.as_path()));
    assert_eq!(
        err.to_string(),
        format!("{}: No such file or directory (os error 2)", path.display())
    );
    assert!(std::error::Error::source(&err).is_some());

    // Saving into a directory that does not exist.
    let path = tmp_path("no-such-dir").join("net.safetensors");
    let net: Small = random_net(23);
    let err = st::save(&net, &path, &[]).unwrap_err();
    assert!(matches!(err.kind(), WeightsErrorKind::Io(_)));
    assert_eq!(err.path(), Some(path.as_path()));
    assert_eq!(
        err.to_string(),
        format!("{}: No such file or directory (os error 2)", path.display())
    );

    // A directory is not a file.
    let dir = tmp_path("");
    let err = st::load::<Small>(&dir).unwrap_err();
    assert!(matches!(err.kind(), WeightsErrorKind::Io(_)));
    assert!(
        err.to_string().starts_with(&format!("{}: ", dir.display())),
        "{err}"
    );

    // A corrupt file on disk: the message starts with the path.
    let path = tmp_path("empty.safetensors");
    std::fs::write(&path, b"").unwrap();
    let err = st::load::<Small>(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: not a valid safetensors file: it is 0 bytes long, shorter than the 8-byte \
             header length every safetensors file starts with",
            path.display()
        )
    );
    assert!(std::error::Error::source(&err).is_some_and(|e| e.is::<format::Error>()));
    std::fs::remove_file(&path).unwrap();
}

/// Issue 42: a save opened its file with truncation, so a save that failed part-way left a
/// fragment where a good file had been. It now writes a temporary file beside the target and
/// renames it over it: the new file is complete, and nothing else is left in the directory.
/// (A write that fails after N bytes, leaving the old file, is tested in `src/io/atomic.rs`.)
#[test]
fn a_save_replaces_the_file_whole_and_leaves_no_temporary_file() {
    let dir = tmp_path("replace-whole");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("net.safetensors");
    let (old, new): (Small, Small) = (random_net(1), random_net(2));
    st::save(&old, &path, &[]).unwrap();
    st::save(&new, &path, &[("note", "second")]).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        st::to_bytes(&new, &[("note", "second")])
    );
    assert_eq!(st::load::<Small>(&path).unwrap(), new);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["net.safetensors"]);

    // A save that fails (the target is a directory) changes nothing and leaves nothing.
    let err = st::save(&new, &dir, &[]).unwrap_err();
    assert!(matches!(err.kind(), WeightsErrorKind::Io(_)), "{err}");
    assert_eq!(err.path(), Some(dir.as_path()));
    assert!(dir.is_dir());
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["net.safetensors"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The issue's case itself: a save onto a file system with 100 KB free, of a net larger than
/// that, over a good smaller file. It used to fail with "No space left on device" and leave a
/// truncated file; now the old file is intact and nothing else is left. The file system is a
/// tmpfs mounted for the test, which needs root (`CAP_SYS_ADMIN`): skipped, with a notice,
/// where mounting is refused.
#[cfg(target_os = "linux")]
#[test]
fn a_save_that_runs_out_of_space_keeps_the_old_file() {
    use std::process::{Command, Stdio};

    /// Unmounts the tmpfs however the test ends.
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }

    let dir = tmp_path("full-disk");
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=100k", "tmpfs"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !mounted {
        eprintln!("skipped: mounting a 100 KB tmpfs needs root (CAP_SYS_ADMIN)");
        return;
    }
    let _unmount = Unmount(dir.clone());
    type Fits = constmat::net![Dense<f32, 100, 50, Relu>]; // 20 KB
    type TooLarge = constmat::net![Dense<f32, 200, 200, Relu>]; // 161 KB
    let path = dir.join("net.safetensors");
    let old: Fits = random_net(31);
    st::save(&old, &path, &[]).unwrap();
    let err = st::save(&random_net::<f32, TooLarge>(32), &path, &[]).unwrap_err();
    assert!(
        matches!(err.kind(), WeightsErrorKind::Io(e) if e.kind() == std::io::ErrorKind::StorageFull),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("{}: No space left on device (os error 28)", path.display())
    );
    assert_eq!(st::load::<Fits>(&path).unwrap(), old);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["net.safetensors"]);
}

#[test]
fn load_into_leaves_the_net_unchanged_on_every_error() {
    let net: Small = random_net(24);
    let good = tensors_of(&random_net::<f32, Small>(25));

    // Problems in the last tensor, found after the others were checked.
    let mut nan_last = good.clone();
    nan_last[3].3[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
    let mut shape_last = good.clone();
    shape_last[3].2 = vec![2, 1];
    let mut missing_last = good.clone();
    missing_last.pop();
    // An extra tensor: every needed tensor is fine, found only at the end.
    let mut extra = good.clone();
    extra.push(("zz".into(), Dtype::F32, vec![1], vec![0; 4]));
    let mut bytes = build(&good);
    bytes.pop();

    for (what, file) in [
        ("nan", build(&nan_last)),
        ("shape", build(&shape_last)),
        ("missing", build(&missing_last)),
        ("extra", build(&extra)),
        ("truncated", bytes),
        ("f64", st::to_bytes(&random_net::<f64, Small64>(26), &[])),
    ] {
        let mut copy = net.clone();
        assert!(st::load_into(&mut copy, &file).is_err(), "{what}");
        assert_eq!(bit_patterns(&copy), bit_patterns(&net), "{what}");
    }

    // And the good file does change it.
    let mut copy = net.clone();
    st::load_into(&mut copy, &build(&good)).unwrap();
    assert_ne!(bit_patterns(&copy), bit_patterns(&net));
}

// ---------------------------------------------------------------------------------------------
// A file as PyTorch writes it.
// ---------------------------------------------------------------------------------------------

/// `safetensors.torch.save_file(nn.Sequential(nn.Linear(4,3), nn.ReLU(), nn.Linear(3,2))
/// .state_dict(), path)`: tensors `0.weight [3, 4]`, `0.bias [3]`, `2.weight [2, 3]`,
/// `2.bias [2]`, F32, metadata `{"format": "pt"}`. Written here with the safetensors crate, with
/// known values; the forward pass pins the orientation (a weight is `[out, in]`, row `o` holds
/// the weights into output `o`).
#[test]
fn a_pytorch_state_dict_file_loads_and_computes_the_same_function() {
    let w1: [[f32; 4]; 3] = [
        [1.0, 2.0, 0.0, -1.0],
        [0.5, -1.0, 3.0, 0.0],
        [-2.0, 0.0, 1.0, 1.0],
    ];
    let b1: [f32; 3] = [0.5, -1.0, 2.0];
    let w2: [[f32; 3]; 2] = [[1.0, -1.0, 2.0], [0.0, 3.0, -0.5]];
    let b2: [f32; 2] = [0.25, -4.0];
    let le = |xs: &[f32]| -> Vec<u8> { xs.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let file = file_with(&[
        ("0.weight", Dtype::F32, &[3, 4], le(w1.as_flattened())),
        ("0.bias", Dtype::F32, &[3], le(&b1)),
        ("2.weight", Dtype::F32, &[2, 3], le(w2.as_flattened())),
        ("2.bias", Dtype::F32, &[2], le(&b2)),
    ]);
    assert!(header_text(&file).contains("\"__metadata__\":{\"format\":\"pt\"}"));

    let net: Small = st::from_bytes(&file).unwrap();
    assert_eq!(net.first.weight, Matrix::from_rows(w1));
    assert_eq!(net.first.bias, Matrix::from_rows([b1]));
    assert_eq!(net.rest.weight, Matrix::from_rows(w2));
    assert_eq!(net.rest.bias, Matrix::from_rows([b2]));

    // y = W2·relu(W1·x + b1) + b2, by hand:
    // x = [1, 2, 3, 4]:  W1·x + b1 = [1+4+0-4+0.5, 0.5-2+9+0-1, -2+0+3+4+2] = [1.5, 6.5, 7]
    //                    y = [1.5-6.5+14+0.25, 0+19.5-3.5-4] = [9.25, 12]
    // x = [0, 1, -1, 2]: W1·x + b1 = [0+2+0-2+0.5, 0-1-3+0-1, 0+0-1+2+2] = [0.5, -5, 3]
    //                    relu = [0.5, 0, 3]; y = [0.5-0+6+0.25, 0+0-1.5-4] = [6.75, -5.5]
    let x = Matrix::<f32, 2, 4>::from_rows([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, -1.0, 2.0]]);
    let mut ws = Train::<f32, 2>::workspace(&net);
    let y = net.forward_train(&x, &mut ws);
    assert_eq!(y, &[[9.25, 12.0], [6.75, -5.5]]);
    // The single-sample path computes the same.
    let mut one = [0.0; 2];
    net.forward_one(x.row(1).unwrap(), &mut one);
    assert_eq!(one, [6.75, -5.5]);

    // Writing the net back gives the same bytes PyTorch's layout had.
    assert_eq!(st::to_bytes(&net, &[]), file);
}

// ---------------------------------------------------------------------------------------------
// Malformed input never panics.
// ---------------------------------------------------------------------------------------------

/// A tiny net for the fuzzing properties.
type Tiny = constmat::net![Dense<f32, 3, 2, Relu>, Dense<f32, 2, 2, Identity>];

fn tiny_file() -> Vec<u8> {
    st::to_bytes(&random_net::<f32, Tiny>(27), &[])
}

/// `from_bytes` returns an error, or a net whose parameters are all finite; never panics.
fn never_panics(bytes: &[u8]) -> Result<(), TestCaseError> {
    match st::from_bytes::<Tiny>(bytes) {
        Ok(net) => {
            for k in 0..net.tensor_count() {
                prop_assert!(net.tensor(k).iter().all(|x| x.is_finite()));
            }
        }
        Err(err) => {
            prop_assert!(!err.to_string().is_empty());
        }
    }
    // load_into agrees, and leaves the net alone when it fails.
    let before: Tiny = random_net(28);
    let mut net = before.clone();
    if st::load_into(&mut net, bytes).is_err() {
        prop_assert_eq!(bit_patterns(&net), bit_patterns(&before));
    }
    // f64 sees the same bytes as the wrong dtype or as corrupt: an error, not a panic.
    let _ =
        st::from_bytes::<constmat::net![Dense<f64, 3, 2, Relu>, Dense<f64, 2, 2, Identity>]>(bytes);
    Ok(())
}

/// Characters a JSON header is made of, to mutate the header into other near-valid headers.
const JSON_CHARS: &[u8] = b"{}[]:,\"0123456789FI_.- abdefhilmoprstwxyz";

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn bit_flips_anywhere(flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8_u8), 1..4)) {
        let mut bytes = tiny_file();
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        never_panics(&bytes)?;
    }

    #[test]
    fn header_characters_replaced(
        edits in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(JSON_CHARS)), 1..4),
    ) {
        let mut bytes = tiny_file();
        let n = header_text(&bytes).len();
        for (at, c) in edits {
            bytes[8 + at.index(n)] = c;
        }
        never_panics(&bytes)?;
    }

    #[test]
    fn truncated_at_any_length(at in any::<prop::sample::Index>()) {
        let bytes = tiny_file();
        let len = at.index(bytes.len());
        prop_assert!(st::from_bytes::<Tiny>(&bytes[..len]).is_err());
        never_panics(&bytes[..len])?;
    }

    #[test]
    fn random_bytes_appended(extra in prop::collection::vec(any::<u8>(), 1..64)) {
        let mut bytes = tiny_file();
        bytes.extend_from_slice(&extra);
        prop_assert!(st::from_bytes::<Tiny>(&bytes).is_err());
        never_panics(&bytes)?;
    }

    #[test]
    fn random_bytes_prepended(extra in prop::collection::vec(any::<u8>(), 1..64)) {
        let mut bytes = extra;
        bytes.extend_from_slice(&tiny_file());
        never_panics(&bytes)?;
    }

    #[test]
    fn random_bytes_entirely(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        never_panics(&bytes)?;
    }

    #[test]
    fn random_bytes_after_a_plausible_length(
        n in 0..300_u64,
        rest in prop::collection::vec(prop::sample::select(JSON_CHARS), 0..300),
    ) {
        let mut bytes = n.to_le_bytes().to_vec();
        bytes.extend_from_slice(&rest);
        never_panics(&bytes)?;
    }

    #[test]
    fn random_parameter_values_round_trip(values in prop::collection::vec(any::<u32>(), 14)) {
        // Any finite f32 bit pattern survives a round trip exactly; any NaN or infinity is
        // rejected at its index.
        let mut net = Tiny::zeros();
        let mut flat = values.iter();
        for k in 0..net.tensor_count() {
            for x in net.tensor_mut(k).iter_mut() {
                *x = f32::from_bits(*flat.next().unwrap());
            }
        }
        let bytes = st::to_bytes(&net, &[]);
        let first_bad = (0..net.tensor_count()).find_map(|k| {
            net.tensor(k).iter().position(|x| !x.is_finite()).map(|i| (k, i))
        });
        match (st::from_bytes::<Tiny>(&bytes), first_bad) {
            (Ok(back), None) => prop_assert_eq!(bit_patterns(&back), bit_patterns(&net)),
            (Err(err), Some((k, i))) => prop_assert_eq!(
                err.to_string(),
                format!("tensor {}: element {i} is not a finite number", net.tensor_info(k).name())
            ),
            (result, bad) => prop_assert!(false, "{:?} with first non-finite value at {:?}", result.map(|_| ()), bad),
        }
    }
}
