//! The IDX reader and the MNIST loader on synthetic files built here: round trips, one test per
//! error kind (fields and message), and property tests on random and mutated input.
#![cfg(feature = "data")]

use std::error::Error as _;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use constmat::Matrix;
use constmat::data::idx::{
    self, DEFAULT_LIMIT_BYTES, IdxArray, IdxError, IdxErrorKind, MAX_DATA_BYTES,
};
use constmat::data::mnist::{self, Mnist, MnistError, Split};
use flate2::Compression;
use flate2::write::GzEncoder;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Building files

/// An IDX file: magic `00 00 type ndims`, the sizes big-endian, then `data`.
fn idx_bytes(type_code: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, type_code, u8::try_from(dims.len()).unwrap()];
    for d in dims {
        out.extend(d.to_be_bytes());
    }
    out.extend(data);
    out
}

fn images_bytes(count: u32, rows: u32, cols: u32, pixels: &[u8]) -> Vec<u8> {
    idx_bytes(0x08, &[count, rows, cols], pixels)
}

fn labels_bytes(labels: &[u8]) -> Vec<u8> {
    idx_bytes(0x08, &[u32::try_from(labels.len()).unwrap()], labels)
}

/// `n` pixels that differ from one another and from their neighbours' positions.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A fresh, empty directory for one test under Cargo's temporary directory for tests.
fn temp_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("idx-tests")
        .join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// An independent reading of the format: `Some((dims, data))` exactly when `bytes` is a valid
/// IDX file of unsigned bytes within the size limit.
fn reference(bytes: &[u8]) -> Option<(Vec<u32>, Vec<u8>)> {
    let (magic, rest) = bytes.split_first_chunk::<4>()?;
    if magic[..3] != [0, 0, 8] {
        return None;
    }
    let ndims = usize::from(magic[3]);
    if rest.len() < 4 * ndims {
        return None;
    }
    let (raw, data) = rest.split_at(4 * ndims);
    let dims: Vec<u32> = raw
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
        .collect();
    let mut len: u128 = 1;
    for &d in &dims {
        len = len.saturating_mul(u128::from(d));
    }
    if dims.contains(&0) {
        len = 0;
    }
    if len > u128::from(MAX_DATA_BYTES) || data.len() as u128 != len {
        return None;
    }
    Some((dims, data.to_vec()))
}

fn parts(array: &IdxArray) -> (Vec<u32>, Vec<u8>) {
    (array.dims().to_vec(), array.data().to_vec())
}

/// A reader that hands out at most one byte per call and is `Interrupted` every other call.
struct Trickle<'a> {
    bytes: &'a [u8],
    interrupt: bool,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.interrupt = !self.interrupt;
        if self.interrupt {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(1).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// A reader that yields `bytes` and then fails (not at end of file).
struct FailAfter<'a> {
    bytes: &'a [u8],
}

impl Read for FailAfter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.bytes.is_empty() {
            return Err(io::Error::other("disk on fire"));
        }
        self.bytes.read(buf)
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips

#[test]
fn images_round_trip_plain_and_gzipped() {
    let pixels = pattern(5 * 3 * 4);
    let plain = images_bytes(5, 3, 4, &pixels);
    for bytes in [plain.clone(), gzip(&plain)] {
        let images = idx::read_images(&bytes[..]).unwrap();
        assert_eq!((images.count(), images.rows(), images.cols()), (5, 3, 4));
        assert_eq!(images.pixels_per_image(), 12);
        assert_eq!(images.pixels(), &pixels[..]);
        assert_eq!(images.image(0), &pixels[..12]);
        assert_eq!(images.image(4), &pixels[48..]);
        assert_eq!(images.get(5), None);
        assert_eq!(images.iter().len(), 5);
        assert_eq!(images.iter().flatten().copied().collect::<Vec<_>>(), pixels);
        assert_eq!(images.into_pixels(), pixels);
    }
}

#[test]
fn labels_round_trip_plain_and_gzipped() {
    let labels = [5, 0, 4, 1, 9, 2, 1, 3, 1, 4, 255];
    let plain = labels_bytes(&labels);
    assert_eq!(idx::read_labels(&plain[..]).unwrap(), labels);
    assert_eq!(idx::read_labels(&gzip(&plain)[..]).unwrap(), labels);
}

#[test]
fn any_number_of_dimensions_round_trips() {
    // No dimensions: a scalar, one byte.
    let a = idx::read_idx(&idx_bytes(8, &[], &[42])[..]).unwrap();
    assert_eq!(parts(&a), (vec![], vec![42]));
    // Four dimensions.
    let data = pattern(30); // 2 x 3 x 1 x 5
    let a = idx::read_idx(&gzip(&idx_bytes(8, &[2, 3, 1, 5], &data))[..]).unwrap();
    assert_eq!(parts(&a), (vec![2, 3, 1, 5], data.clone()));
    assert_eq!(a.into_data(), data);
    // A zero size: no data, whatever the other sizes (even if their product overflows).
    let a = idx::read_idx(&idx_bytes(8, &[u32::MAX, u32::MAX, u32::MAX, 0], &[])[..]).unwrap();
    assert_eq!(parts(&a), (vec![u32::MAX, u32::MAX, u32::MAX, 0], vec![]));
}

#[test]
fn zero_images_are_a_valid_file() {
    let images = idx::read_images(&images_bytes(0, 28, 28, &[])[..]).unwrap();
    assert_eq!((images.count(), images.rows(), images.cols()), (0, 28, 28));
    assert_eq!(images.iter().count(), 0);
    assert_eq!(
        idx::read_labels(&labels_bytes(&[])[..]).unwrap(),
        Vec::<u8>::new()
    );
}

#[test]
fn from_path_plain_and_gzipped_detected_by_content_not_name() {
    let dir = temp_dir("from_path");
    let pixels = pattern(2 * 2 * 2);
    let plain = images_bytes(2, 2, 2, &pixels);
    // Gzip in a file without .gz, plain in a file named .gz: the content decides.
    let paths = [
        write(&dir, "a-idx3-ubyte", &plain),
        write(&dir, "b-idx3-ubyte", &gzip(&plain)),
        write(&dir, "c-idx3-ubyte.gz", &plain),
        write(&dir, "d-idx3-ubyte.gz", &gzip(&plain)),
    ];
    for path in &paths {
        let images = idx::read_images_from_path(path).unwrap();
        assert_eq!(images.pixels(), &pixels[..], "{}", path.display());
        assert_eq!(parts(&idx::read_idx_from_path(path).unwrap()).1, pixels);
    }
    let labels = write(&dir, "l", &gzip(&labels_bytes(&[3, 1, 4])));
    assert_eq!(idx::read_labels_from_path(&labels).unwrap(), [3, 1, 4]);
}

#[test]
fn multi_member_gzip_is_read_whole() {
    // `cat a.gz b.gz` is a valid gzip file holding both parts.
    let pixels = pattern(4 * 5 * 6);
    let plain = images_bytes(4, 5, 6, &pixels);
    let (first, second) = plain.split_at(37);
    let mut bytes = gzip(first);
    bytes.extend(gzip(second));
    assert_eq!(idx::read_images(&bytes[..]).unwrap().pixels(), &pixels[..]);
}

#[test]
fn slow_and_interrupted_readers_read_the_same() {
    let pixels = pattern(3 * 4 * 4);
    let plain = images_bytes(3, 4, 4, &pixels);
    for bytes in [plain.clone(), gzip(&plain)] {
        let trickle = Trickle {
            bytes: &bytes,
            interrupt: false,
        };
        assert_eq!(idx::read_images(trickle).unwrap().pixels(), &pixels[..]);
    }
}

#[test]
fn reader_by_mutable_reference() {
    let bytes = labels_bytes(&[1, 2]);
    let mut reader = &bytes[..];
    assert_eq!(idx::read_labels(&mut reader).unwrap(), [1, 2]);
    assert!(reader.is_empty());
}

// ---------------------------------------------------------------------------------------------
// One test per error kind

#[test]
fn invalid_magic() {
    // Nonzero first bytes.
    let mut bytes = images_bytes(1, 1, 1, &[0]);
    bytes[0] = 0x12;
    bytes[1] = 0x34;
    let err = idx::read_images(&bytes[..]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::InvalidMagic {
            expected: 0x0000_0803,
            found: 0x1234_0803
        }
    ));
    assert_eq!(
        err.to_string(),
        "invalid IDX magic number: expected 0x00000803, found 0x12340803"
    );
    assert!(err.source().is_none());

    // Not an IDX type code.
    let err = idx::read_labels(&idx_bytes(0x07, &[1], &[0])[..]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::InvalidMagic {
            expected: 0x0000_0801,
            found: 0x0000_0701
        }
    ));

    // Text; `read_idx` expects the u8 magic with whatever number of dimensions it found.
    let err = idx::read_idx(&b"hello, world"[..]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::InvalidMagic {
            expected: 0x0000_086c,
            found: 0x6865_6c6c
        }
    ));
    assert_eq!(
        err.to_string(),
        "invalid IDX magic number: expected 0x0000086c, found 0x68656c6c"
    );
}

#[test]
fn unsupported_data_type() {
    for (code, name) in [
        (0x09, "signed byte"),
        (0x0B, "16-bit integer"),
        (0x0C, "32-bit integer"),
        (0x0D, "32-bit float"),
        (0x0E, "64-bit float"),
    ] {
        let bytes = idx_bytes(code, &[1, 1, 1], &[0, 0, 0, 0]);
        let err = idx::read_images(&bytes[..]).unwrap_err();
        match err.kind() {
            IdxErrorKind::UnsupportedDataType { found } => assert_eq!(*found, code),
            other => panic!("expected UnsupportedDataType, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!(
                "unsupported IDX data type: expected 0x08 (unsigned byte), found {code:#04x} \
                 ({name})"
            )
        );
        // The same through gzip and `read_idx`.
        let err = idx::read_idx(&gzip(&bytes)[..]).unwrap_err();
        assert!(
            matches!(err.kind(), IdxErrorKind::UnsupportedDataType { found } if *found == code)
        );
    }
}

#[test]
fn wrong_dimension_count() {
    let labels = labels_bytes(&[1, 2, 3]);
    let err = idx::read_images(&labels[..]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::WrongDimensionCount {
            expected: 3,
            found: 1
        }
    ));
    assert_eq!(
        err.to_string(),
        "wrong number of IDX dimensions: expected 3, found 1"
    );

    let images = images_bytes(1, 2, 2, &[0; 4]);
    let err = idx::read_labels(&gzip(&images)[..]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::WrongDimensionCount {
            expected: 1,
            found: 3
        }
    ));
}

#[test]
fn truncated_header() {
    let bytes = images_bytes(2, 2, 2, &[0; 8]);
    for (len, expected) in [(0, 4), (1, 4), (3, 4), (4, 16), (9, 16), (15, 16)] {
        for input in [bytes[..len].to_vec(), gzip(&bytes[..len])] {
            let err = idx::read_images(&input[..]).unwrap_err();
            match err.kind() {
                IdxErrorKind::TruncatedHeader {
                    expected_bytes,
                    found_bytes,
                } => assert_eq!((*expected_bytes, *found_bytes), (expected, len as u64)),
                other => panic!("length {len}: expected TruncatedHeader, got {other:?}"),
            }
            assert_eq!(
                err.to_string(),
                format!("truncated IDX header: expected {expected} bytes, found {len}")
            );
        }
    }
}

#[test]
fn truncated_data() {
    let dir = temp_dir("truncated_data");
    let bytes = images_bytes(10, 28, 28, &pattern(7840));
    let cut = &bytes[..bytes.len() - 1016];
    let path = write(&dir, "t10k-images-idx3-ubyte.gz", &gzip(cut));
    let err = idx::read_images_from_path(&path).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::Truncated {
            expected_bytes: 7856,
            found_bytes: 6840
        }
    ));
    assert_eq!(err.path(), Some(path.as_path()));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: truncated IDX data: expected 7856 bytes, found 6840",
            path.display()
        )
    );

    // Labels, plain, from a reader: no path.
    let labels = labels_bytes(&[1, 2, 3]);
    let err = idx::read_labels(&labels[..10]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::Truncated {
            expected_bytes: 11,
            found_bytes: 10
        }
    ));
    assert_eq!(err.path(), None);
}

#[test]
fn a_huge_declared_size_with_little_data_is_truncated_not_allocated() {
    // One billion declared bytes (allowed by the limit), ten present: a Truncated error,
    // quickly.
    let bytes = images_bytes(1_000_000_000, 1, 1, &[7; 10]);
    let err = idx::read_images_with_limit(&bytes[..], MAX_DATA_BYTES).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::Truncated {
            expected_bytes: 1_000_000_016,
            found_bytes: 26
        }
    ));
}

#[test]
fn trailing_bytes() {
    let mut bytes = labels_bytes(&[1, 2, 3]);
    bytes.extend([0; 5]);
    for input in [bytes.clone(), gzip(&bytes)] {
        let err = idx::read_labels(&input[..]).unwrap_err();
        assert!(matches!(
            err.kind(),
            IdxErrorKind::TrailingBytes {
                expected_bytes: 11,
                found_bytes: 16
            }
        ));
        assert_eq!(
            err.to_string(),
            "trailing bytes after IDX data: expected 11 bytes, found 16"
        );
    }
}

#[test]
fn too_large() {
    let bytes = idx_bytes(8, &[u32::MAX, u32::MAX, u32::MAX], &[]);
    for limit in [None, Some(MAX_DATA_BYTES), Some(u64::MAX)] {
        let err = match limit {
            None => idx::read_images(&bytes[..]),
            Some(limit) => idx::read_images_with_limit(&bytes[..], limit),
        }
        .unwrap_err();
        // A limit above the largest counts as the largest.
        let limit = limit.map_or(DEFAULT_LIMIT_BYTES, |l| l.min(MAX_DATA_BYTES));
        match err.kind() {
            IdxErrorKind::TooLarge { dims, limit_bytes } => {
                assert_eq!(dims, &[u32::MAX; 3]);
                assert_eq!(*limit_bytes, limit);
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!(
                "IDX data too large: dimensions 4294967295 x 4294967295 x 4294967295 exceed the \
                 limit of {limit} bytes"
            )
        );
    }

    // At the limit: accepted as a size (and then truncated, without allocating it); one
    // element more: refused before reading. The default limit, then the largest one.
    assert_eq!(DEFAULT_LIMIT_BYTES, 1 << 28);
    let err = idx::read_idx(&idx_bytes(8, &[2, 1 << 27], &[1, 2])[..]).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            IdxErrorKind::Truncated { expected_bytes, found_bytes: 14 }
                if *expected_bytes == (1 << 28) + 12
        ),
        "{err:?}"
    );
    let err = idx::read_idx(&idx_bytes(8, &[2, (1 << 27) + 1], &[1, 2])[..]).unwrap_err();
    assert!(
        matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes, .. } if *limit_bytes == DEFAULT_LIMIT_BYTES),
        "{err:?}"
    );
    #[cfg(target_pointer_width = "64")]
    {
        assert_eq!(MAX_DATA_BYTES, 1 << 32);
        let at_max = idx_bytes(8, &[2, 1 << 31], &[1, 2]);
        let err = idx::read_idx_with_limit(&at_max[..], MAX_DATA_BYTES).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                IdxErrorKind::Truncated { expected_bytes, found_bytes: 14 }
                    if *expected_bytes == (1 << 32) + 12
            ),
            "{err:?}"
        );
        let over = idx_bytes(8, &[2, (1 << 31) + 1], &[1, 2]);
        let err = idx::read_idx_with_limit(&over[..], u64::MAX).unwrap_err();
        assert!(
            matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes, .. } if *limit_bytes == MAX_DATA_BYTES),
            "{err:?}"
        );
    }

    // Labels: a count above the limit is refused from the header, by every label reader.
    let labels = idx_bytes(8, &[(1 << 28) + 1], &[]);
    let err = idx::read_labels(&labels[..]).unwrap_err();
    assert!(
        matches!(err.kind(), IdxErrorKind::TooLarge { .. }),
        "{err:?}"
    );
    let err = idx::read_labels_with_limit(&idx_bytes(8, &[3], &[1, 2, 3])[..], 2).unwrap_err();
    assert!(
        matches!(err.kind(), IdxErrorKind::TooLarge { limit_bytes: 2, .. }),
        "{err:?}"
    );

    // No images, but each image would be too large to index: fine as IDX, refused as images.
    let bytes = images_bytes(0, 65_536, 65_537, &[]);
    assert!(idx::read_idx(&bytes[..]).is_ok());
    let err = idx::read_images(&bytes[..]).unwrap_err();
    assert!(
        matches!(err.kind(), IdxErrorKind::TooLarge { dims, .. } if dims == &[0, 65_536, 65_537])
    );
}

#[test]
fn wrong_image_size() {
    let images = idx::read_images(&images_bytes(1, 32, 30, &[0; 960])[..]).unwrap();
    images.check_size(32, 30).unwrap();
    let err = images.check_size(28, 28).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::WrongImageSize {
            expected: (28, 28),
            found: (32, 30)
        }
    ));
    assert_eq!(
        err.to_string(),
        "wrong image size: expected 28x28, found 32x30"
    );
    // Rows and columns are not interchangeable.
    let err = Split::new(
        idx::read_images(&images_bytes(1, 14, 56, &[0; 784])[..]).unwrap(),
        vec![0],
    )
    .unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::WrongImageSize {
            expected: (28, 28),
            found: (14, 56)
        }
    ));
}

#[test]
fn count_mismatch() {
    let images = idx::read_images(&images_bytes(3, 28, 28, &[0; 3 * 784])[..]).unwrap();
    idx::check_counts(&images, &[1, 2, 3]).unwrap();
    let err = idx::check_counts(&images, &[1, 2]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::CountMismatch {
            images: 3,
            labels: 2
        }
    ));
    assert_eq!(
        err.to_string(),
        "image and label counts differ: 3 images, 2 labels"
    );
    let err = Split::new(images, vec![0; 4]).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::CountMismatch {
            images: 3,
            labels: 4
        }
    ));
}

#[test]
fn label_out_of_range() {
    idx::check_labels(&[0, 9, 9, 0], 10).unwrap();
    let err = idx::check_labels(&[0, 9, 10, 255], 10).unwrap_err();
    assert!(matches!(
        err.kind(),
        IdxErrorKind::LabelOutOfRange {
            index: 2,
            label: 10,
            classes: 10
        }
    ));
    assert_eq!(
        err.to_string(),
        "label out of range at index 2: expected a label below 10, found 10"
    );
    // Other class counts.
    idx::check_labels(&[0, 1], 2).unwrap();
    assert!(idx::check_labels(&[0, 1], 1).is_err());
    assert!(idx::check_labels(&[], 0).is_ok());
}

#[test]
fn corrupt_gzip() {
    let plain = images_bytes(4, 8, 8, &pattern(256));
    let good = gzip(&plain);

    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    // A changed CRC32 in the trailer.
    let mut bad_crc = good.clone();
    let n = bad_crc.len();
    bad_crc[n - 8] ^= 0x01;
    cases.push(("bad crc", bad_crc));
    // A changed size in the trailer.
    let mut bad_size = good.clone();
    bad_size[n - 4] ^= 0x01;
    cases.push(("bad size", bad_size));
    // Cut inside the deflate stream and inside the trailer.
    cases.push(("cut in body", good[..n / 2].to_vec()));
    cases.push(("cut in trailer", good[..n - 3].to_vec()));
    // A gzip header and nothing else; an unknown compression method.
    cases.push(("header only", good[..10].to_vec()));
    cases.push((
        "bad method",
        [0x1f, 0x8b, 0x07, 0, 0, 0, 0, 0, 0, 0].to_vec(),
    ));
    // Garbage after the gzip member.
    let mut garbage = good.clone();
    garbage.extend(b"garbage!");
    cases.push(("trailing garbage", garbage));

    for (what, bytes) in cases {
        let err = idx::read_images(&bytes[..]).unwrap_err();
        assert!(
            matches!(err.kind(), IdxErrorKind::Gzip(_)),
            "{what}: expected Gzip, got {err:?}"
        );
        assert!(
            err.to_string().starts_with("corrupt gzip data: "),
            "{what}: {err}"
        );
        assert!(err.source().is_some(), "{what}");
    }

    // A flipped bit in the compressed body: the decoder or the CRC catches it.
    let mut detected = 0;
    for i in 10..n - 8 {
        let mut bytes = good.clone();
        bytes[i] ^= 0x10;
        match idx::read_images(&bytes[..]) {
            // A flip in the padding bits after the last deflate block changes nothing.
            Ok(images) => assert_eq!(images.pixels(), &pattern(256)[..], "flip at {i}"),
            Err(err) => detected += usize::from(matches!(err.kind(), IdxErrorKind::Gzip(_))),
        }
    }
    assert!(detected > 0);
}

#[test]
fn missing_file() {
    let dir = temp_dir("missing_file");
    let path = dir.join("no-such-file-idx1-ubyte");
    let err = idx::read_labels_from_path(&path).unwrap_err();
    assert_eq!(err.path(), Some(path.as_path()));
    let io_err = err
        .source()
        .and_then(|e| e.downcast_ref::<io::Error>())
        .expect("source is the io::Error");
    assert_eq!(io_err.kind(), io::ErrorKind::NotFound);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: I/O error: ", path.display())),
        "{text}"
    );
    match err.into_kind() {
        IdxErrorKind::Io(e) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
        other => panic!("expected Io, got {other:?}"),
    }
    // The same for the other readers.
    assert!(matches!(
        idx::read_images_from_path(&path).unwrap_err().kind(),
        IdxErrorKind::Io(_)
    ));
    assert!(matches!(
        idx::read_idx_from_path(&path).unwrap_err().kind(),
        IdxErrorKind::Io(_)
    ));
}

#[test]
fn a_failing_reader_is_io_even_under_gzip() {
    let plain = images_bytes(2, 4, 4, &pattern(32));
    for bytes in [plain.clone(), gzip(&plain)] {
        // Fail halfway: the reader's error, not a gzip or truncation error.
        let err = idx::read_images(FailAfter {
            bytes: &bytes[..bytes.len() / 2],
        })
        .unwrap_err();
        match err.kind() {
            IdxErrorKind::Io(e) => assert_eq!(e.to_string(), "disk on fire"),
            other => panic!("expected Io, got {other:?}"),
        }
        assert_eq!(err.to_string(), "I/O error: disk on fire");
    }
}

#[test]
fn error_constructors_and_conversion() {
    let err: IdxError = IdxErrorKind::UnsupportedDataType { found: 0x0D }.into();
    assert_eq!(err.path(), None);
    let err = err.with_path("a").with_path("b/c.idx");
    assert_eq!(err.path(), Some(Path::new("b/c.idx")));
    assert!(
        err.to_string()
            .starts_with("b/c.idx: unsupported IDX data type")
    );
    let err = IdxError::new(IdxErrorKind::CountMismatch {
        images: 1,
        labels: 0,
    });
    assert!(err.source().is_none());
}

// ---------------------------------------------------------------------------------------------
// MNIST on synthetic directories

/// Writes an MNIST directory: `train` and `test` as (labels, image size), pixels from
/// `pattern`, each file gzipped or not as `gz` says.
fn write_mnist(dir: &Path, sets: [(&[u8], (u32, u32)); 2], gz: [bool; 4]) -> [PathBuf; 4] {
    let mut files = Vec::new();
    for (labels, (rows, cols)) in sets {
        let n = u32::try_from(labels.len()).unwrap();
        let pixels = pattern(labels.len() * (rows * cols) as usize);
        files.push(images_bytes(n, rows, cols, &pixels));
        files.push(labels_bytes(labels));
    }
    let mut paths = Vec::new();
    for ((name, bytes), gz) in mnist::FILES.iter().zip(files).zip(gz) {
        paths.push(if gz {
            write(dir, &format!("{name}.gz"), &gzip(&bytes))
        } else {
            write(dir, name, &bytes)
        });
    }
    paths.try_into().unwrap()
}

#[test]
fn mnist_loads_plain_and_gzipped_files() {
    let dir = temp_dir("mnist_loads");
    let train_labels = [5, 0, 4];
    let test_labels = [7, 2];
    let paths = write_mnist(
        &dir,
        [(&train_labels, (28, 28)), (&test_labels, (28, 28))],
        [true, false, false, true],
    );
    assert_eq!(Mnist::locate(&dir).unwrap(), paths);

    let mnist = Mnist::load(&dir).unwrap();
    assert_eq!(mnist.train.len(), 3);
    assert_eq!(mnist.test.len(), 2);
    assert!(!mnist.test.is_empty());
    assert_eq!(mnist.train.labels(), &train_labels);
    assert_eq!(mnist.test.label(1), 2);
    let pixels = pattern(3 * 784);
    assert_eq!(mnist.train.images().len(), 3);
    assert_eq!(&mnist.train.image(2)[..], &pixels[2 * 784..]);
    assert_eq!(&mnist.test.image(0)[..], &pixels[..784]);
}

#[test]
fn mnist_prefers_the_plain_file_when_both_exist() {
    let dir = temp_dir("mnist_prefers_plain");
    write_mnist(
        &dir,
        [(&[1], (28, 28)), (&[2], (28, 28))],
        [false, false, false, false],
    );
    // A broken .gz next to a good plain file is never opened.
    write(&dir, "train-labels-idx1-ubyte.gz", b"not gzip");
    assert_eq!(Mnist::load(&dir).unwrap().train.labels(), &[1]);
}

#[test]
fn mnist_missing_files_are_all_listed() {
    let dir = temp_dir("mnist_missing");
    let paths = write_mnist(
        &dir,
        [(&[1], (28, 28)), (&[2], (28, 28))],
        [false, true, false, true],
    );
    std::fs::remove_file(&paths[1]).unwrap();
    std::fs::remove_file(&paths[2]).unwrap();
    let err = Mnist::load(&dir).unwrap_err();
    match &err {
        MnistError::MissingFiles { dir: d, missing } => {
            assert_eq!(d, &dir);
            assert_eq!(
                missing,
                &["train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"]
            );
        }
        other => panic!("expected MissingFiles, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "MNIST files missing in {}: train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz] \
             (the directory needs all four of train-images-idx3-ubyte, train-labels-idx1-ubyte, \
             t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each plain or gzipped with .gz \
             appended)",
            dir.display()
        )
    );
    assert!(err.source().is_none());

    let empty = temp_dir("mnist_missing_all");
    match Mnist::load(&empty).unwrap_err() {
        MnistError::MissingFiles { missing, .. } => assert_eq!(missing, mnist::FILES),
        other => panic!("expected MissingFiles, got {other:?}"),
    }
}

#[test]
fn mnist_wrong_image_size_names_the_image_file() {
    let dir = temp_dir("mnist_wrong_size");
    let paths = write_mnist(
        &dir,
        [(&[1], (28, 28)), (&[2], (28, 27))],
        [false, false, true, false],
    );
    let err = Mnist::load(&dir).unwrap_err();
    let MnistError::Idx(inner) = &err else {
        panic!("expected Idx, got {err:?}")
    };
    assert!(matches!(
        inner.kind(),
        IdxErrorKind::WrongImageSize {
            expected: (28, 28),
            found: (28, 27)
        }
    ));
    assert_eq!(inner.path(), Some(paths[2].as_path()));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: wrong image size: expected 28x28, found 28x27",
            paths[2].display()
        )
    );
}

#[test]
fn mnist_label_out_of_range_names_the_label_file() {
    let dir = temp_dir("mnist_label_range");
    let paths = write_mnist(
        &dir,
        [(&[1, 2, 10], (28, 28)), (&[2], (28, 28))],
        [false, false, false, false],
    );
    let err = Mnist::load(&dir).unwrap_err();
    let MnistError::Idx(inner) = &err else {
        panic!("expected Idx, got {err:?}")
    };
    assert!(matches!(
        inner.kind(),
        IdxErrorKind::LabelOutOfRange {
            index: 2,
            label: 10,
            classes: 10
        }
    ));
    assert_eq!(inner.path(), Some(paths[1].as_path()));
}

#[test]
fn mnist_count_mismatch_names_the_label_file() {
    let dir = temp_dir("mnist_count_mismatch");
    let paths = write_mnist(
        &dir,
        [(&[1, 2], (28, 28)), (&[2, 3], (28, 28))],
        [false, false, false, true],
    );
    // Replace the test labels by three labels.
    std::fs::write(&paths[3], gzip(&labels_bytes(&[2, 3, 4]))).unwrap();
    let err = Mnist::load(&dir).unwrap_err();
    let MnistError::Idx(inner) = &err else {
        panic!("expected Idx, got {err:?}")
    };
    assert!(matches!(
        inner.kind(),
        IdxErrorKind::CountMismatch {
            images: 2,
            labels: 3
        }
    ));
    assert_eq!(inner.path(), Some(paths[3].as_path()));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: image and label counts differ: 2 images, 3 labels",
            paths[3].display()
        )
    );
}

#[test]
fn mnist_corrupt_file_error_keeps_its_source() {
    let dir = temp_dir("mnist_corrupt");
    let paths = write_mnist(
        &dir,
        [(&[1], (28, 28)), (&[2], (28, 28))],
        [true, false, false, false],
    );
    let mut bytes = std::fs::read(&paths[0]).unwrap();
    bytes.truncate(bytes.len() - 2);
    std::fs::write(&paths[0], bytes).unwrap();
    let err = Mnist::load(&dir).unwrap_err();
    let MnistError::Idx(inner) = &err else {
        panic!("expected Idx, got {err:?}")
    };
    assert!(matches!(inner.kind(), IdxErrorKind::Gzip(_)));
    assert!(
        err.to_string()
            .starts_with(&format!("{}: corrupt gzip data: ", paths[0].display()))
    );
    // `Display` is the inner error's; the chain goes on to the gzip decoder's error.
    assert!(err.source().unwrap().downcast_ref::<io::Error>().is_some());
}

#[test]
fn fill_batch_scales_and_copies_the_chosen_rows() {
    let pixels = pattern(4 * 784);
    let images = idx::read_images(&images_bytes(4, 28, 28, &pixels)[..]).unwrap();
    let split = Split::new(images, vec![3, 1, 4, 1]).unwrap();

    let mut x = Matrix::<f32, 3, { mnist::PIXELS }>::zeros();
    let mut y = [99_u8; 3];
    split.fill_batch(&[2, 0, 2], x.as_array_mut(), &mut y);
    assert_eq!(y, [4, 3, 4]);
    for (row, index) in x.as_array().iter().zip([2, 0, 2]) {
        for (k, &v) in row.iter().enumerate() {
            assert_eq!(v, f32::from(pixels[index * 784 + k]) / 255.0);
        }
    }
    assert!(x.as_slice().iter().all(|&v| (0.0..=1.0).contains(&v)));
    assert!(x.as_slice().contains(&1.0) || !pixels.contains(&255));

    // f64, and a second fill overwrites everything.
    let mut x64 = [[-1.0_f64; mnist::PIXELS]; 2];
    let mut y = [0_u8; 2];
    split.fill_batch(&[1, 3], &mut x64, &mut y);
    assert_eq!(y, [1, 1]);
    assert_eq!(x64[1][5], f64::from(pixels[3 * 784 + 5]) / 255.0);
    split.fill_batch(&[0, 0], &mut x64, &mut y);
    assert_eq!(x64[0], x64[1]);
    assert_eq!(y, [3, 3]);
}

#[test]
fn fill_batch_writes_images_for_a_convolutional_net_row_by_row() {
    let pixels = pattern(3 * 784);
    let images = idx::read_images(&images_bytes(3, 28, 28, &pixels)[..]).unwrap();
    let split = Split::new(images, vec![7, 8, 9]).unwrap();

    let mut flat = [[0.0_f32; mnist::PIXELS]; 2];
    let mut image = [[[[-1.0_f32; mnist::COLS]; mnist::ROWS]; 1]; 2];
    let (mut y_flat, mut y_image) = ([0_u8; 2], [0_u8; 2]);
    split.fill_batch(&[2, 1], &mut flat, &mut y_flat);
    split.fill_batch(&[2, 1], &mut image, &mut y_image);
    assert_eq!(y_image, [9, 8]);
    assert_eq!(y_image, y_flat);
    for (k, index) in [2, 1].into_iter().enumerate() {
        for row in 0..mnist::ROWS {
            for col in 0..mnist::COLS {
                let expected = f32::from(pixels[index * 784 + row * 28 + col]) / 255.0;
                assert_eq!(
                    image[k][0][row][col], expected,
                    "image {k} at ({row}, {col})"
                );
                assert_eq!(flat[k][row * 28 + col], expected);
            }
        }
    }
}

#[test]
#[should_panic(expected = "index out of bounds")]
fn fill_batch_panics_on_an_index_out_of_range() {
    let images = idx::read_images(&images_bytes(1, 28, 28, &[0; 784])[..]).unwrap();
    let split = Split::new(images, vec![0]).unwrap();
    let mut x = [[0.0_f32; mnist::PIXELS]; 1];
    split.fill_batch(&[1], &mut x, &mut [0]);
}

#[test]
fn one_hot_rows() {
    let mut out = [[7.0_f32; mnist::CLASSES]; 3];
    mnist::one_hot(&[0, 9, 4], &mut out);
    for (row, label) in out.iter().zip([0, 9, 4]) {
        for (k, &v) in row.iter().enumerate() {
            assert_eq!(v, if k == label { 1.0 } else { 0.0 });
        }
    }
}

#[test]
#[should_panic(expected = "label 10 out of range")]
fn one_hot_panics_on_a_label_out_of_range() {
    mnist::one_hot(&[10], &mut [[0.0_f32; mnist::CLASSES]; 1]);
}

// ---------------------------------------------------------------------------------------------
// Property tests

/// A valid IDX file: up to four small dimensions and its data.
fn valid_idx() -> impl Strategy<Value = (Vec<u32>, Vec<u8>)> {
    prop::collection::vec(0_u32..5, 0..=4).prop_flat_map(|dims| {
        let len = dims.iter().product::<u32>() as usize;
        (Just(dims), prop::collection::vec(any::<u8>(), len))
    })
}

/// A valid image file: count, rows, cols and the pixels.
fn valid_images() -> impl Strategy<Value = (Vec<u32>, Vec<u8>)> {
    (0_u32..6, 1_u32..5, 1_u32..5).prop_flat_map(|(n, r, c)| {
        (
            Just(vec![n, r, c]),
            prop::collection::vec(any::<u8>(), (n * r * c) as usize),
        )
    })
}

/// Calls every reader; a panic fails the property test.
fn read_all_ways(bytes: &[u8]) -> Result<IdxArray, IdxError> {
    let _ = idx::read_images(bytes);
    let _ = idx::read_labels(bytes);
    idx::read_idx(bytes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic_and_agree_with_the_reference(
        bytes in prop::collection::vec(any::<u8>(), 0..300)
    ) {
        let result = read_all_ways(&bytes);
        prop_assert_eq!(result.ok().as_ref().map(parts), reference(&bytes));
    }

    #[test]
    fn random_bytes_after_an_idx_or_gzip_prefix_never_panic(
        prefix in prop_oneof![
            Just(vec![0x1f, 0x8b]),
            Just(vec![0x1f, 0x8b, 0x08, 0x00]),
            Just(vec![0, 0, 8, 1]),
            Just(vec![0, 0, 8, 3]),
            (0_u8..=255).prop_map(|n| vec![0, 0, 8, n]),
        ],
        rest in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut bytes = prefix;
        bytes.extend(rest);
        let result = read_all_ways(&bytes);
        if bytes[..2] != [0x1f, 0x8b] {
            prop_assert_eq!(result.ok().as_ref().map(parts), reference(&bytes));
        }
    }

    #[test]
    fn random_bytes_inside_gzip_agree_with_the_reference(
        bytes in prop::collection::vec(any::<u8>(), 0..300)
    ) {
        let result = read_all_ways(&gzip(&bytes));
        prop_assert_eq!(result.ok().as_ref().map(parts), reference(&bytes));
    }

    #[test]
    fn valid_files_round_trip((dims, data) in valid_idx()) {
        let plain = idx_bytes(8, &dims, &data);
        let a = idx::read_idx(&plain[..]).unwrap();
        prop_assert_eq!(parts(&a), (dims.clone(), data.clone()));
        let a = idx::read_idx(&gzip(&plain)[..]).unwrap();
        prop_assert_eq!(parts(&a), (dims, data));
    }

    #[test]
    fn bit_flips_read_the_flipped_file_or_fail(
        (dims, data) in valid_images(),
        position in any::<prop::sample::Index>(),
        bit in 0_u8..8,
    ) {
        // Plain: IDX has no checksum, so a flip in the data reads as the flipped data; any
        // result must be exactly what the bytes say.
        let plain = idx_bytes(8, &dims, &data);
        let mut flipped = plain.clone();
        flipped[position.index(plain.len())] ^= 1 << bit;
        // (Images also refuse a single image larger than the limit, even when there are none.)
        let expected = reference(&flipped).filter(|(d, _)| {
            d.len() == 3 && u64::from(d[1]) * u64::from(d[2]) <= DEFAULT_LIMIT_BYTES
        });
        let result = idx::read_images(&flipped[..]);
        let got = result.ok().map(|im| {
            (
                vec![im.count() as u32, im.rows() as u32, im.cols() as u32],
                im.into_pixels(),
            )
        });
        prop_assert_eq!(got, expected);

        // Gzipped: the CRC protects the data, so a flip reads the original or fails.
        let gz = gzip(&plain);
        let mut flipped = gz.clone();
        flipped[position.index(gz.len())] ^= 1 << bit;
        if let Ok(images) = idx::read_images(&flipped[..]) {
            prop_assert_eq!(images.pixels(), &data[..]);
            prop_assert_eq!(images.count() as u32, dims[0]);
            prop_assert_eq!((images.rows() as u32, images.cols() as u32), (dims[1], dims[2]));
        }
    }

    #[test]
    fn every_truncation_fails(
        (dims, data) in valid_images(),
        labels in prop::collection::vec(any::<u8>(), 0..20),
    ) {
        let plain = idx_bytes(8, &dims, &data);
        let full = plain.len() as u64;
        for len in 0..plain.len() {
            let err = idx::read_images(&plain[..len]).unwrap_err();
            let found = len as u64;
            match err.kind() {
                IdxErrorKind::TruncatedHeader { found_bytes, .. } => {
                    prop_assert!(len < 16);
                    prop_assert_eq!(*found_bytes, found);
                }
                IdxErrorKind::Truncated { expected_bytes, found_bytes } => {
                    prop_assert!(len >= 16);
                    prop_assert_eq!((*expected_bytes, *found_bytes), (full, found));
                }
                other => prop_assert!(false, "length {}: {:?}", len, other),
            }
        }
        let gz = gzip(&plain);
        for len in 0..gz.len() {
            prop_assert!(idx::read_images(&gz[..len]).is_err(), "gzip cut at {}", len);
        }
        let plain = labels_bytes(&labels);
        for len in 0..plain.len() {
            prop_assert!(idx::read_labels(&plain[..len]).is_err());
        }
    }

    #[test]
    fn appended_bytes_fail(
        (dims, data) in valid_idx(),
        extra in prop::collection::vec(any::<u8>(), 1..40),
    ) {
        let plain = idx_bytes(8, &dims, &data);
        let full = plain.len() as u64;
        let mut longer = plain.clone();
        longer.extend(&extra);
        // Appended inside the IDX data (plain, or gzipped together).
        for bytes in [longer.clone(), gzip(&longer)] {
            let err = idx::read_idx(&bytes[..]).unwrap_err();
            prop_assert!(
                matches!(
                    err.kind(),
                    IdxErrorKind::TrailingBytes { expected_bytes, found_bytes }
                        if *expected_bytes == full && *found_bytes == full + extra.len() as u64
                ),
                "{:?}", err
            );
        }
        // Appended after the gzip stream: not gzip, so a gzip error.
        let mut gz = gzip(&plain);
        gz.extend(&extra);
        let err = idx::read_idx(&gz[..]).unwrap_err();
        prop_assert!(matches!(err.kind(), IdxErrorKind::Gzip(_)), "{:?}", err);
    }
}
