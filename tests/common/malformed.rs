//! A table of weights files, each valid but for one problem (or valid), for the net
//! `Sequential(Linear(4, 3), ReLU(), Linear(3, 2))`, with the verdict both readers must give:
//! the run-time loader (`io::safetensors`) and the compile-time baking (`include_net!`).
//!
//! Shared by `tests/weights_file_rule.rs` (run time, and the reference implementation's
//! verdict) and `tests/embed.rs` (each file baked into a `static` by `cargo check`).

use constmat::format::ErrorKind;

/// The net's tensors in the order our writer puts them, as `(name, shape, first value)`;
/// element `i` of a tensor is `first + i / 4`.
const TENSORS: [(&str, &[usize], f32); 4] = [
    ("0.bias", &[3], 1.0),
    ("0.weight", &[3, 4], -2.0),
    ("2.bias", &[2], 0.5),
    ("2.weight", &[2, 3], 3.0),
];

/// One case: a name (also a file name and a `static`'s name), the bytes, and the verdict:
/// `None` for a file both readers accept.
pub struct Case {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    pub verdict: Option<ErrorKind>,
}

/// The data section of the valid file.
fn data() -> Vec<u8> {
    let mut data = Vec::new();
    for (_, shape, first) in TENSORS {
        let n: usize = shape.iter().product();
        for i in 0..n {
            data.extend_from_slice(&(first + i as f32 / 4.0).to_le_bytes());
        }
    }
    data
}

/// The header of the valid file, as our writer and the reference implementation write it.
pub fn valid_header() -> String {
    let mut header = String::from(r#"{"__metadata__":{"format":"pt"}"#);
    let mut offset = 0;
    for (name, shape, _) in TENSORS {
        let n: usize = shape.iter().product::<usize>() * 4;
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        header.push_str(&format!(
            r#","{name}":{{"dtype":"F32","shape":[{}],"data_offsets":[{offset},{}]}}"#,
            dims.join(","),
            offset + n
        ));
        offset += n;
    }
    header.push('}');
    header
}

/// A file: the header padded with spaces to a multiple of 8 bytes, then `data`.
pub fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header.as_bytes().to_vec();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(data);
    bytes
}

/// The valid file.
pub fn valid() -> Vec<u8> {
    file(&valid_header(), &data())
}

/// The valid header with `from` replaced by `to` (which must occur).
fn edit(from: &str, to: &str) -> String {
    let header = valid_header();
    assert!(header.contains(from), "{from} in {header}");
    header.replacen(from, to, 1)
}

/// Every case.
pub fn cases() -> Vec<Case> {
    use ErrorKind::*;
    let d = data();
    let valid = valid();
    let header_end = valid.len() - d.len();
    let case = |name, bytes, verdict| Case {
        name,
        bytes,
        verdict,
    };
    let mut nan = d.clone();
    nan[12 + 4 * 5..12 + 4 * 6].copy_from_slice(&f32::NAN.to_le_bytes());
    vec![
        case("VALID", valid.clone(), None),
        // The same tensors listed in another order than their data: the reference sorts by
        // offset, so this is valid.
        case(
            "HEADER_ORDER_IS_NOT_DATA_ORDER",
            file(
                &valid_header().replace(
                    r#""0.bias":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"0.weight":{"dtype":"F32","shape":[3,4],"data_offsets":[12,60]}"#,
                    r#""0.weight":{"dtype":"F32","shape":[3,4],"data_offsets":[12,60]},"0.bias":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}"#,
                ),
                &d,
            ),
            None,
        ),
        case(
            "METADATA_NULL_AND_SPACES",
            file(
                &edit(r#"{"__metadata__":{"format":"pt"}"#, "{ \"__metadata__\" : null ")
                    .replace(':', " :\n "),
                &d,
            ),
            None,
        ),
        // A second, empty `0.bias` before the real one: the reference keeps the last copy
        // (and accepts the file), a reader that took the first would read nothing.
        case(
            "DUPLICATE_NAME",
            file(
                &edit(
                    r#""0.bias":{"#,
                    r#""0.bias":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"0.bias":{"#,
                ),
                &d,
            ),
            Some(DuplicateName),
        ),
        case(
            "OVERLAPPING_OFFSETS",
            file(&edit(r#""data_offsets":[60,68]"#, r#""data_offsets":[56,64]"#), &d),
            Some(Offsets),
        ),
        // A 4-byte gap between two tensors, the data 4 bytes longer.
        case(
            "GAP_BETWEEN_TENSORS",
            file(
                &edit(r#""data_offsets":[68,92]"#, r#""data_offsets":[72,96]"#),
                &[&d[..68], &[0; 4], &d[68..]].concat(),
            ),
            Some(Offsets),
        ),
        case(
            "METADATA_NOT_STRINGS",
            file(&edit(r#"{"format":"pt"}"#, r#"{"format":1}"#), &d),
            Some(Metadata),
        ),
        case(
            "BYTES_AFTER_THE_JSON",
            file(&format!("{}x", valid_header()), &d),
            Some(Syntax),
        ),
        case(
            "TRUNCATED_IN_THE_DATA",
            valid[..valid.len() - 4].to_vec(),
            Some(DataLength),
        ),
        case(
            "TRUNCATED_IN_THE_HEADER",
            valid[..header_end - 10].to_vec(),
            Some(Truncated),
        ),
        case("SHORTER_THAN_8_BYTES", valid[..5].to_vec(), Some(Truncated)),
        case(
            "TRAILING_BYTES",
            [&valid[..], &[0; 8]].concat(),
            Some(DataLength),
        ),
        case(
            "HEADER_LENGTH_PAST_THE_END",
            {
                let mut bytes = valid.clone();
                bytes[..8].copy_from_slice(&(valid.len() as u64).to_le_bytes());
                bytes
            },
            Some(Truncated),
        ),
        case(
            "HEADER_LENGTH_OVER_THE_LIMIT",
            {
                let mut bytes = valid.clone();
                bytes[..8].copy_from_slice(&100_000_001_u64.to_le_bytes());
                bytes
            },
            Some(HeaderTooLarge),
        ),
        case(
            "UNKNOWN_DTYPE",
            file(&edit(r#""dtype":"F32""#, r#""dtype":"F33""#), &d),
            Some(UnknownDtype),
        ),
        case(
            "SIZE_NOT_THE_SHAPE",
            file(&edit(r#""shape":[3],"#, r#""shape":[4],"#), &d),
            Some(TensorSize),
        ),
        case(
            "ESCAPED_NAME",
            file(&edit(r#""0.bias""#, r#""0.b\u0069as""#), &d),
            Some(EscapedName),
        ),
        case(
            "WRONG_DTYPE",
            file(
                &edit(
                    r#""2.bias":{"dtype":"F32","shape":[2]"#,
                    r#""2.bias":{"dtype":"I32","shape":[2]"#,
                ),
                &d,
            ),
            Some(Mismatch),
        ),
        case(
            "WRONG_RANK",
            file(&edit(r#""shape":[3,4]"#, r#""shape":[12]"#), &d),
            Some(Mismatch),
        ),
        case(
            "WRONG_SHAPE",
            file(&edit(r#""shape":[3,4]"#, r#""shape":[4,3]"#), &d),
            Some(Mismatch),
        ),
        case(
            "MISSING_TENSOR",
            file(
                &edit(
                    r#","2.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[68,92]}"#,
                    "",
                ),
                &d[..68],
            ),
            Some(Missing),
        ),
        case(
            "UNEXPECTED_TENSOR",
            file(
                &edit(
                    r#""data_offsets":[68,92]}"#,
                    r#""data_offsets":[68,92]},"3.weight":{"dtype":"F32","shape":[1],"data_offsets":[92,96]}"#,
                ),
                &[&d[..], &[0; 4]].concat(),
            ),
            Some(Unexpected),
        ),
        case("NAN", file(&valid_header(), &nan), Some(NonFinite)),
    ]
}
