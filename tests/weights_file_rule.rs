//! One rule for weights files: the run-time loader (`io::safetensors`) and the compile-time
//! baking (`include_net!`, which evaluates `format::Index::validate_layout` and the layers'
//! `Bake::BAKED`) accept the same files, read the same numbers from them, and reject the rest with the same
//! error. The rule itself is checked against the reference implementation (the `safetensors`
//! crate): a file we accept, it accepts with the same tensors; a file it rejects, we reject.
//!
//! The same table of malformed files is baked by `cargo check` in `tests/embed.rs`.
#![cfg(feature = "safetensors")]
// `format::Error` is a large `Copy` value (it borrows nothing, for `const` code); these helpers
// return it as is.
#![allow(clippy::result_large_err)]

#[path = "common/malformed.rs"]
mod malformed;

use constmat::embed::Baked;
use constmat::format::{self, ErrorKind, decode};
use constmat::io::safetensors as st;
use constmat::nn::{Dense, Inline, Layer, Parameters, Relu};
use malformed::Mutation;
use proptest::prelude::*;

/// `Sequential(Linear(4, 3), ReLU(), Linear(3, 2))`: the net of the table.
type Small = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2>];

/// What the compile-time path computes from `bytes`, run at run time: the check that
/// `include_net!` evaluates (`format::Index::validate_layout`, on the file parsed once), then
/// each layer's `Bake` constants, whose decoding (`format::decode`) checks the values, first
/// layer first. The layers find their tensors through the same index: its lookups must give
/// what the parsed header gives.
fn baked(bytes: &[u8]) -> Result<Baked<Small>, format::Error> {
    // About 70 KB: on the heap, as the compiler would keep it apart from the stack.
    let index = Box::new(format::Index::of(bytes));
    index.validate_layout(&<Baked<Small> as Layer>::SPEC)?;
    let header = format::parse(bytes).expect("a file whose layout fits is valid");
    for (module, field) in [(0, "weight"), (0, "bias"), (2, "weight"), (2, "bias")] {
        let (by_index, by_header) = (
            index.find_module(module, field.as_bytes()).expect("parsed"),
            header.find_module(module, field.as_bytes()),
        );
        assert_eq!(
            by_index.map(|t| (t.name, t.dtype, t.shape, t.offsets, t.data)),
            by_header.map(|t| (t.name, t.dtype, t.shape, t.offsets, t.data)),
            "{module}.{field}: the index and the header find different tensors"
        );
    }
    Ok(constmat::nn::Chain::new(
        Dense::new(
            decode::f32_matrix::<3, 4>(bytes, 0, "weight")?,
            decode::f32_vector::<3>(bytes, 0, "bias")?,
        ),
        Dense::new(
            decode::f32_matrix::<2, 3>(bytes, 2, "weight")?,
            decode::f32_vector::<2>(bytes, 2, "bias")?,
        ),
    ))
}

/// The two paths' verdicts on `bytes`, which must agree; returns it.
fn one_verdict(bytes: &[u8]) -> Result<Small, format::Error> {
    let run_time = st::from_bytes::<Small>(bytes).map_err(|e| {
        *e.format_error()
            .unwrap_or_else(|| panic!("loading from bytes cannot fail with I/O: {e}"))
    });
    let compile_time = baked(bytes);
    match (&run_time, &compile_time) {
        (Ok(net), Ok(baked)) => {
            assert_eq!(
                &net.to_store::<Inline>(),
                baked,
                "the baked net holds the loader's numbers"
            );
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "the same error from both paths"),
        _ => panic!(
            "the paths disagree: at run time {:?}, at compile time {:?}",
            run_time.as_ref().map(|_| ()),
            compile_time.as_ref().map(|_| ())
        ),
    }
    run_time
}

/// A tensor as both readers are compared on: name, dtype name, shape, bytes.
type Read = (String, String, Vec<usize>, Vec<u8>);

/// The reference implementation's reading: every tensor, sorted by name.
fn reference(bytes: &[u8]) -> Result<Vec<Read>, String> {
    let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    let mut tensors: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            (
                name,
                format!("{:?}", view.dtype()),
                view.shape().to_vec(),
                view.data().to_vec(),
            )
        })
        .collect();
    tensors.sort();
    Ok(tensors)
}

/// Our reading, in the reference's terms.
fn ours(bytes: &[u8]) -> Result<Vec<Read>, format::Error> {
    let header = format::parse(bytes)?;
    let mut tensors: Vec<_> = (0..header.tensor_count())
        .map(|k| {
            let t = header.tensor(k).unwrap();
            (
                String::from_utf8(t.name.to_vec()).unwrap(),
                t.dtype.name().to_string(),
                t.shape.dims().to_vec(),
                t.data.to_vec(),
            )
        })
        .collect();
    tensors.sort();
    Ok(tensors)
}

/// Our rule against the reference's on `bytes`: what we accept, it accepts with the same
/// tensors; what it rejects, we reject; and where it accepts what we reject, the reason is one
/// of the documented stricter rules, or the file names a tensor twice (the reference then
/// drops one description unread, so our first complaint may be about that one).
fn agrees_with_the_reference(bytes: &[u8]) {
    match (ours(bytes), reference(bytes)) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the same tensors"),
        (Ok(_), Err(e)) => panic!("the reference rejects a file we accept: {e}"),
        (Err(_), Err(_)) => {}
        (Err(e), Ok(tensors)) => {
            // A header the reference accepts is JSON whose tensors each have one `dtype`.
            let (header, _) = malformed::split(bytes);
            let descriptions = header.matches("\"dtype\"").count();
            assert!(
                descriptions > tensors.len()
                    || matches!(
                        e.kind(),
                        ErrorKind::DuplicateName | ErrorKind::EscapedName | ErrorKind::Syntax
                    ),
                "we reject a file the reference accepts, for a reason of our own: {e}"
            );
        }
    }
}

#[test]
fn every_malformed_file_gets_one_verdict_from_both_paths() {
    for case in malformed::cases() {
        let verdict = one_verdict(&case.bytes);
        assert_eq!(
            verdict.as_ref().err().map(format::Error::kind),
            case.verdict,
            "{}: {:?}",
            case.name,
            verdict.as_ref().err().map(ToString::to_string)
        );
        agrees_with_the_reference(&case.bytes);
    }
}

#[test]
fn the_messages_name_what_was_expected_and_found() {
    let message = |name: &str| {
        let case = malformed::cases()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap();
        one_verdict(&case.bytes).unwrap_err().to_string()
    };
    assert_eq!(
        message("DUPLICATE_NAME"),
        "not a valid safetensors file: the header names tensor 0.bias twice"
    );
    assert_eq!(
        message("OVERLAPPING_OFFSETS"),
        "not a valid safetensors file: the data of tensor 2.bias is bytes 56..64, but the \
         tensors before it end at byte 60 (each tensor's data must start where the previous \
         one's ends)"
    );
    assert_eq!(
        message("TRAILING_BYTES"),
        "not a valid safetensors file: the header says the data section is 92 bytes, the file \
         has 100 after the header"
    );
    assert_eq!(
        message("WRONG_RANK"),
        "tensor 0.weight: expected f32 [3, 4], found f32 [12]"
    );
    assert_eq!(
        message("UNKNOWN_DTYPE"),
        "not a valid safetensors file: tensor 0.bias has the dtype F33, which the format does \
         not have"
    );
    assert!(
        message("METADATA_NOT_STRINGS")
            .starts_with("not a valid safetensors file: __metadata__ must map strings to strings")
    );
    assert_eq!(
        message("NAN"),
        "tensor 0.weight: element 5 is not a finite number"
    );
}

/// The reference implementation silently keeps the last of two tensors of one name; the
/// baked net once kept the first. Both paths now refuse the file.
#[test]
fn a_duplicated_name_is_refused_where_the_reference_would_pick_one() {
    let case = malformed::cases()
        .into_iter()
        .find(|c| c.name == "DUPLICATE_NAME")
        .unwrap();
    assert!(reference(&case.bytes).is_ok(), "the reference accepts it");
    assert_eq!(
        one_verdict(&case.bytes).unwrap_err().kind(),
        ErrorKind::DuplicateName
    );
}

#[test]
fn saving_twice_gives_the_same_bytes() {
    let mut net = Small::zeros();
    for k in 0..net.tensor_count() {
        for (i, x) in net.tensor_mut(k).iter_mut().enumerate() {
            *x = (k * 10 + i) as f32 / 7.0;
        }
    }
    let metadata = [
        ("producer", "tests"),
        ("epochs", "10"),
        ("zeta", "\"quoted\" \\ and\nnewline"),
        ("alpha", "é"),
    ];
    let mut reversed = metadata;
    reversed.reverse();
    let first = st::to_bytes(&net, &metadata);
    for _ in 0..20 {
        assert_eq!(st::to_bytes(&net, &metadata), first);
        assert_eq!(
            st::to_bytes(&net, &reversed),
            first,
            "metadata in any order"
        );
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (a, b) = (
        dir.join("twice-a.safetensors"),
        dir.join("twice-b.safetensors"),
    );
    st::save(&net, &a, &metadata).unwrap();
    st::save(&net, &b, &metadata).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

    // The reference reads back the metadata, escapes and all.
    let (_, read) = safetensors::SafeTensors::read_metadata(&first).unwrap();
    let read = read.metadata().clone().unwrap();
    for (key, value) in metadata {
        assert_eq!(read.get(key).map(String::as_str), Some(value));
    }
    assert_eq!(read.get("format").map(String::as_str), Some("pt"));

    // With only the `format` entry, the file is byte for byte the reference writer's.
    let views: Vec<_> = (0..net.tensor_count())
        .map(|k| {
            let info = net.tensor_info(k);
            let bytes: Vec<u8> = net.tensor(k).iter().flat_map(|x| x.to_le_bytes()).collect();
            (info.name().to_string(), info.shape().to_vec(), bytes)
        })
        .collect();
    let reference = safetensors::serialize(
        views.iter().map(|(name, shape, bytes)| {
            (
                name.as_str(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                    .unwrap(),
            )
        }),
        Some(std::collections::HashMap::from([(
            "format".to_string(),
            "pt".to_string(),
        )])),
    )
    .unwrap();
    assert_eq!(st::to_bytes(&net, &[]), reference);
}

/// The mutated files that `tests/embed.rs` bakes with the compiler (the real `include_net!`):
/// here, the run-time loader and the compile-time functions agree on them too, and so does the
/// reference implementation.
#[test]
fn the_mutated_files_baked_by_the_compiler_get_one_verdict() {
    let mut refused = 0;
    for seed in 0..300 {
        let bytes = malformed::mutated(seed);
        refused += usize::from(one_verdict(&bytes).is_err());
        agrees_with_the_reference(&bytes);
    }
    // Mostly refused, but not all: both verdicts are exercised.
    assert!((150..300).contains(&refused), "{refused} of 300 refused");
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let index = any::<usize>();
    let json_char = prop::sample::select(malformed::JSON_CHARS);
    prop_oneof![
        (index, 0..8_u8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (index, json_char.clone()).prop_map(|(i, c)| Mutation::Replace(i, c)),
        (index, json_char).prop_map(|(i, c)| Mutation::Insert(i, c)),
        index.prop_map(Mutation::Remove),
        index.prop_map(Mutation::Truncate),
        prop::collection::vec(any::<u8>(), 1..16).prop_map(Mutation::Append),
        (index, -12..12_i8).prop_map(|(i, d)| Mutation::Bump(i, d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Mutated files: the run-time loader and the compile-time path agree on every one (the
    /// same error, or the same numbers), and the rule agrees with the reference's.
    #[test]
    fn mutated_files_get_one_verdict(mutations in prop::collection::vec(mutation(), 1..4)) {
        let mut bytes = malformed::valid();
        for m in &mutations {
            if !malformed::has_header(&bytes) {
                break;
            }
            bytes = malformed::apply(bytes, m);
        }
        let _ = one_verdict(&bytes);
        agrees_with_the_reference(&bytes);
    }

    /// Mutations of every table file, valid or not.
    #[test]
    fn mutated_table_files_get_one_verdict(
        case in 0..64_usize,
        m in mutation(),
    ) {
        let cases = malformed::cases();
        let bytes = cases[case % cases.len()].bytes.clone();
        let bytes = if malformed::has_header(&bytes) {
            malformed::apply(bytes, &m)
        } else {
            bytes
        };
        let _ = one_verdict(&bytes);
        agrees_with_the_reference(&bytes);
    }
}
