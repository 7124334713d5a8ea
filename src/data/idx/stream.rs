//! Reading an IDX stream: recognising gzip, parsing and checking the header, and reading exactly
//! the data it declares (within the limit), with the errors of [`IdxErrorKind`].

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::vec::Vec;

use flate2::read::MultiGzDecoder;

use super::{
    GZIP_LOOK_AHEAD, GZIP_MAGIC, IdxArray, IdxError, IdxErrorKind, MAX_DATA_BYTES,
    PREALLOCATE_AT_MOST, TRAILING_BYTES_COUNTED, TYPE_U8, type_name, u8_magic,
};

/// What a reader checks in a header before it reads the data: nothing, or an image file's size.
pub(crate) type HeaderCheck<'a> = &'a dyn Fn(&[u32]) -> Result<(), IdxErrorKind>;

/// The header check of no check.
pub(crate) const NO_CHECK: HeaderCheck<'static> = &|_| Ok(());

/// Opens `path` and reads it; every error names the path.
pub(super) fn read_path(
    path: &Path,
    want_dims: Option<u8>,
    check: HeaderCheck<'_>,
    limit_bytes: u64,
) -> Result<IdxArray, IdxError> {
    open_path(path, want_dims, check, limit_bytes)?
        .read()
        .map_err(|kind| IdxError::new(kind).with_path(path))
}

/// Opens `path` and reads its header (see [`Opened`]); every error names the path.
pub(crate) fn open_path(
    path: &Path,
    want_dims: Option<u8>,
    check: HeaderCheck<'_>,
    limit_bytes: u64,
) -> Result<Opened<File>, IdxError> {
    File::open(path)
        .map_err(IdxErrorKind::Io)
        .and_then(|file| Opened::new(file, want_dims, check, limit_bytes))
        .map_err(|kind| IdxError::new(kind).with_path(path))
}

/// Reads a whole IDX stream, decompressing it first if it starts with the gzip magic bytes;
/// `check` sees the dimensions before any data is read.
pub(super) fn read_any<R: Read>(
    reader: R,
    want_dims: Option<u8>,
    check: HeaderCheck<'_>,
    limit_bytes: u64,
) -> Result<IdxArray, IdxErrorKind> {
    Opened::new(reader, want_dims, check, limit_bytes)?.read()
}

/// An IDX stream whose header has been read and checked (against the caller's expectations and
/// the limit): nothing of its data has been read yet. Reading the headers of several files
/// before any data lets a caller check them against each other (images against labels) while
/// that still costs nothing.
pub(crate) struct Opened<R> {
    source: Source<R>,
    dims: Vec<u32>,
    header_len: u64,
    data_len: u64,
}

impl<R: Read> Opened<R> {
    /// Reads the header of `reader` (decompressing it if it starts with the gzip magic bytes);
    /// `check`, then the limit, see its dimensions.
    pub(crate) fn new(
        reader: R,
        want_dims: Option<u8>,
        check: HeaderCheck<'_>,
        limit_bytes: u64,
    ) -> Result<Self, IdxErrorKind> {
        let mut source = Source::new(reader)?;
        match read_header(&mut source, want_dims, check, limit_bytes) {
            Ok((dims, header_len, data_len)) => Ok(Self {
                source,
                dims,
                header_len,
                data_len,
            }),
            Err(kind) => Err(source.real_cause(kind)),
        }
    }

    /// The dimensions in the header.
    pub(crate) fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// The real cause of `kind`, an objection to this file's header found by the caller: a
    /// corrupt gzip stream, if the stream turns out to be one, else `kind` itself.
    pub(crate) fn real_cause(mut self, kind: IdxErrorKind) -> IdxErrorKind {
        self.source.real_cause(kind)
    }

    /// Reads the data, to the end of the stream.
    pub(crate) fn read(mut self) -> Result<IdxArray, IdxErrorKind> {
        match read_data(&mut self.source, self.header_len, self.data_len) {
            Ok(data) => Ok(IdxArray {
                dims: self.dims,
                data,
            }),
            Err(kind) => Err(self.source.real_cause(kind)),
        }
    }
}

/// A stream with its first two bytes put back: those that told whether it is gzip.
type Prefixed<R> = io::Chain<io::Take<io::Cursor<[u8; 2]>>, R>;

/// The bytes of an IDX file: as they are, or decompressed on the fly.
enum Source<R> {
    Plain(Prefixed<R>),
    Gzip(MultiGzDecoder<WatchErrors<Prefixed<R>>>),
}

impl<R: Read> Source<R> {
    /// Reads the first two bytes of `reader` to tell gzip from plain data.
    fn new(mut reader: R) -> Result<Self, IdxErrorKind> {
        let mut head = [0; 2];
        let n = read_full(&mut reader, &mut head).map_err(IdxErrorKind::Io)?;
        let is_gzip = n == 2 && head == GZIP_MAGIC;
        let bytes = io::Cursor::new(head).take(n as u64).chain(reader);
        Ok(if is_gzip {
            Self::Gzip(MultiGzDecoder::new(WatchErrors {
                inner: bytes,
                failed: false,
            }))
        } else {
            Self::Plain(bytes)
        })
    }

    /// The real cause of `kind`, an error met reading this stream (or an objection to what was
    /// read). For a gzip stream: an I/O error that did not come from the reader beneath came
    /// from the decoder (corrupt data); and anything else may be nonsense decoded from a corrupt
    /// stream, since a decoder hands out what it decoded before it meets the corruption (more of
    /// it when the reader beneath returns a few bytes per call). So the stream is decoded a
    /// little further: if it turns out corrupt, that is the cause. The look-ahead is bounded,
    /// so a decompression bomb costs little.
    fn real_cause(&mut self, kind: IdxErrorKind) -> IdxErrorKind {
        let Self::Gzip(decoder) = self else {
            return kind;
        };
        match kind {
            IdxErrorKind::Io(e) if !decoder.get_ref().failed => IdxErrorKind::Gzip(e),
            IdxErrorKind::Io(_) | IdxErrorKind::Gzip(_) => kind,
            kind => match io::copy(&mut decoder.take(GZIP_LOOK_AHEAD), &mut io::sink()) {
                Err(e) if !decoder.get_ref().failed => IdxErrorKind::Gzip(e),
                _ => kind,
            },
        }
    }
}

impl<R: Read> Read for Source<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Plain(r) => r.read(buf),
            Self::Gzip(r) => r.read(buf),
        }
    }
}

/// Reads an (uncompressed) IDX header: the dimensions, the header's length and the data's.
/// `check` sees the dimensions first, then the data's length is held to `limit_bytes`.
fn read_header<R: Read>(
    r: &mut R,
    want_dims: Option<u8>,
    check: HeaderCheck<'_>,
    limit_bytes: u64,
) -> Result<(Vec<u32>, u64, u64), IdxErrorKind> {
    let mut magic = [0; 4];
    let n = read_full(r, &mut magic).map_err(IdxErrorKind::Io)?;
    if n < magic.len() {
        return Err(IdxErrorKind::TruncatedHeader {
            expected_bytes: 4,
            found_bytes: n as u64,
        });
    }
    let [zero0, zero1, type_code, ndims] = magic;
    if zero0 != 0 || zero1 != 0 || type_name(type_code).is_none() {
        return Err(IdxErrorKind::InvalidMagic {
            expected: u8_magic(want_dims.unwrap_or(ndims)),
            found: u32::from_be_bytes(magic),
        });
    }
    if type_code != TYPE_U8 {
        return Err(IdxErrorKind::UnsupportedDataType { found: type_code });
    }
    if let Some(expected) = want_dims
        && expected != ndims
    {
        return Err(IdxErrorKind::WrongDimensionCount {
            expected,
            found: ndims,
        });
    }

    let header_len = 4 + 4 * u64::from(ndims);
    let mut raw = std::vec![0; 4 * usize::from(ndims)];
    let n = read_full(r, &mut raw).map_err(IdxErrorKind::Io)?;
    if n < raw.len() {
        return Err(IdxErrorKind::TruncatedHeader {
            expected_bytes: header_len,
            found_bytes: 4 + n as u64,
        });
    }
    let dims: Vec<u32> = raw
        .as_chunks::<4>()
        .0
        .iter()
        .map(|&b| u32::from_be_bytes(b))
        .collect();
    check(&dims)?;

    let limit_bytes = limit_bytes.min(MAX_DATA_BYTES);
    let data_len = if dims.contains(&0) {
        Some(0)
    } else {
        dims.iter()
            .try_fold(1_u64, |acc, &d| acc.checked_mul(u64::from(d)))
            .filter(|&len| len <= limit_bytes)
    };
    match data_len {
        Some(data_len) => Ok((dims, header_len, data_len)),
        None => Err(IdxErrorKind::TooLarge { dims, limit_bytes }),
    }
}

/// Reads the `data_len` bytes of data that follow a header of `header_len` bytes, and checks
/// that nothing follows them.
fn read_data<R: Read>(r: &mut R, header_len: u64, data_len: u64) -> Result<Vec<u8>, IdxErrorKind> {
    let expected_bytes = header_len + data_len;
    // Reserve little up front: the vector grows with the bytes actually present, so a header
    // that lies about the size cannot make us allocate what the file does not hold.
    let mut data = Vec::with_capacity(data_len.min(PREALLOCATE_AT_MOST) as usize);
    let got = r
        .take(data_len)
        .read_to_end(&mut data)
        .map_err(IdxErrorKind::Io)? as u64;
    if got < data_len {
        return Err(IdxErrorKind::Truncated {
            expected_bytes,
            found_bytes: header_len + got,
        });
    }
    // Counted up to a bound: a file (a gzip bomb) can hold far more than it declares.
    let trailing = io::copy(&mut r.take(TRAILING_BYTES_COUNTED + 1), &mut io::sink())
        .map_err(IdxErrorKind::Io)?;
    if trailing > TRAILING_BYTES_COUNTED {
        return Err(IdxErrorKind::ManyTrailingBytes {
            expected_bytes,
            more_than_bytes: expected_bytes.saturating_add(TRAILING_BYTES_COUNTED),
        });
    }
    if trailing > 0 {
        return Err(IdxErrorKind::TrailingBytes {
            expected_bytes,
            found_bytes: expected_bytes.saturating_add(trailing),
        });
    }
    Ok(data)
}

/// Fills as much of `buf` as the reader has; returns how much that was.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A reader that remembers whether its last read failed, to tell the errors of a gzip decoder
/// from those of the reader beneath it.
struct WatchErrors<R> {
    inner: R,
    failed: bool,
}

impl<R: Read> Read for WatchErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let result = self.inner.read(buf);
        self.failed = matches!(&result, Err(e) if e.kind() != io::ErrorKind::Interrupted);
        result
    }
}
