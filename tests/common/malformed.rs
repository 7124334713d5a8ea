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
            "METADATA_A_STRING",
            file(&edit(r#"{"format":"pt"}"#, r#""pt""#), &d),
            Some(Metadata),
        ),
        case(
            "METADATA_AN_ARRAY",
            file(&edit(r#"{"format":"pt"}"#, r#"["format","pt"]"#), &d),
            Some(Metadata),
        ),
        case(
            "METADATA_A_NESTED_MAP",
            file(&edit(r#"{"format":"pt"}"#, r#"{"format":{"name":"pt"}}"#), &d),
            Some(Metadata),
        ),
        // The end before the start: no tensor can be read from it.
        case(
            "REVERSED_OFFSETS",
            file(&edit(r#""data_offsets":[0,12]"#, r#""data_offsets":[12,0]"#), &d),
            Some(TensorSize),
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

/// Characters a JSON header is made of, to mutate a header into other near-valid headers.
pub const JSON_CHARS: &[u8] = b"{}[]:,\"\\0123456789FIU_.-e abdfhilmnoprstuwxyz";

/// A mutation of the valid file.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Flip one bit of the byte at this index (of the whole file).
    Flip(usize, u8),
    /// Replace a header byte.
    Replace(usize, u8),
    /// Insert a byte into the header (the length prefix adjusted).
    Insert(usize, u8),
    /// Remove a header byte (the length prefix adjusted).
    Remove(usize),
    /// Cut the file.
    Truncate(usize),
    /// Append bytes to the data.
    Append(Vec<u8>),
    /// Add a number to one of the numbers of the header.
    Bump(usize, i8),
}

/// The header (JSON, without padding) and data of a file.
pub fn split(bytes: &[u8]) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8_lossy(&bytes[8..8 + n]).into_owned();
    (header, bytes[8 + n..].to_vec())
}

/// A header and data put back together, the length prefix recomputed (no padding added).
fn join(header: &[u8], data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(data);
    bytes
}

/// `bytes` (a file whose header length fits it) with the mutation `m` applied.
pub fn apply(mut bytes: Vec<u8>, m: &Mutation) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    match m {
        Mutation::Flip(i, bit) => {
            let i = index(*i, bytes.len());
            bytes[i] ^= 1 << bit;
            bytes
        }
        Mutation::Replace(i, c) => {
            bytes[8 + index(*i, n)] = *c;
            bytes
        }
        Mutation::Insert(i, c) => {
            let mut header = bytes[8..8 + n].to_vec();
            header.insert(index(*i, n + 1), *c);
            join(&header, &bytes[8 + n..])
        }
        Mutation::Remove(i) => {
            let mut header = bytes[8..8 + n].to_vec();
            header.remove(index(*i, n));
            join(&header, &bytes[8 + n..])
        }
        Mutation::Truncate(i) => {
            bytes.truncate(index(*i, bytes.len()));
            bytes
        }
        Mutation::Append(extra) => {
            bytes.extend_from_slice(extra);
            bytes
        }
        Mutation::Bump(i, delta) => {
            let (header, data) = split(&bytes);
            // The numbers of the header, as (start, end) byte ranges.
            let mut numbers = Vec::new();
            let mut start = None;
            for (at, c) in header.char_indices() {
                match (c.is_ascii_digit(), start) {
                    (true, None) => start = Some(at),
                    (false, Some(s)) => {
                        numbers.push((s, at));
                        start = None;
                    }
                    _ => {}
                }
            }
            if numbers.is_empty() {
                return bytes;
            }
            let (s, e) = numbers[index(*i, numbers.len())];
            let value: i64 = header[s..e].parse().unwrap_or(0);
            let bumped = (value + i64::from(*delta)).max(0).to_string();
            let header = format!("{}{}{}", &header[..s], bumped, &header[e..]);
            join(header.as_bytes(), &data)
        }
    }
}

/// `i` scaled into `0..len` (`len` > 0): how a mutation's random index picks a position.
fn index(i: usize, len: usize) -> usize {
    i % len
}

/// Whether `bytes` starts with a header length that fits the file: what a mutation needs.
pub fn has_header(bytes: &[u8]) -> bool {
    bytes.len() >= 8
        && u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize <= bytes.len() - 8
}

/// The valid file with one to three mutations drawn from `seed` (SplitMix64: the same files on
/// every machine): what `tests/embed.rs` bakes with the compiler, `tests/weights_file_rule.rs`
/// draws the same kinds of mutations with proptest.
pub fn mutated(seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as usize
    };
    let mut bytes = valid();
    for _ in 0..1 + next() % 3 {
        if !has_header(&bytes) {
            break;
        }
        let (i, byte) = (next(), JSON_CHARS[next() % JSON_CHARS.len()]);
        let m = match next() % 7 {
            0 => Mutation::Flip(i, (next() % 8) as u8),
            1 => Mutation::Replace(i, byte),
            2 => Mutation::Insert(i, byte),
            3 => Mutation::Remove(i),
            4 => Mutation::Truncate(i),
            5 => Mutation::Append((0..1 + next() % 15).map(|_| next() as u8).collect()),
            _ => Mutation::Bump(i, (next() % 24) as i8 - 12),
        };
        bytes = apply(bytes, &m);
    }
    bytes
}
