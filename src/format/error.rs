//! Why a file was rejected, and the text that says so, written without a heap.

use core::fmt;

use super::Dtype;

/// The kinds of [`Error`]: what a caller matches on.
///
/// ```
/// use constmat::format::{self, ErrorKind};
/// let err = format::parse(b"short").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Truncated);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file ends before its header does: shorter than the 8-byte length, or the length
    /// says more header bytes than the file has.
    Truncated,
    /// The header length is more than [`MAX_HEADER_LEN`](super::MAX_HEADER_LEN).
    HeaderTooLarge,
    /// The header is not UTF-8, not JSON, or not JSON of the safetensors shape.
    Syntax,
    /// Two tensors have the same name.
    DuplicateName,
    /// `__metadata__` is not an object of strings.
    Metadata,
    /// A tensor's dtype is not one the format has.
    UnknownDtype,
    /// A tensor name uses a JSON escape (`\`), which this reader does not decode.
    EscapedName,
    /// A tensor's data offsets do not span what its dtype and shape take.
    TensorSize,
    /// The tensors' data do not follow each other from offset 0 without gaps or overlaps.
    Offsets,
    /// The data section is not as long as the header says.
    DataLength,
    /// More tensors than [`MAX_TENSORS`](super::MAX_TENSORS).
    TooManyTensors,
    /// A tensor the net needs is not in the file.
    Missing,
    /// A tensor has another dtype or shape than the net needs.
    Mismatch,
    /// A tensor holds a NaN or an infinity.
    NonFinite,
    /// An integer tensor holds a value outside the range the net allows (an int8 weight of
    /// -128, a requantization exponent a shift cannot take).
    OutOfRange,
    /// A quantization scale (an int8 layer's `input_scale` or `output_scale`) is not a positive
    /// normal `f32`: zero, negative or subnormal.
    ScaleOutOfRange,
    /// The file holds a tensor the net does not have.
    Unexpected,
}

/// A file rejected by [`parse`](super::parse) or [`check_net`](super::check_net): what was
/// expected and what was found, with sizes in bytes and tensor names.
///
/// It borrows nothing, so a run-time loader can keep it after the file's bytes are gone, and it
/// is `Copy`, so `const` code can return it. [`message`](Self::message) writes it out; `Display`
/// prints the same text.
///
/// ```
/// use constmat::format::{self, Error};
/// let mut file = 1000_u64.to_le_bytes().to_vec();
/// file.extend_from_slice(b"{}");
/// let err = format::parse(&file).unwrap_err();
/// assert_eq!(err, Error::HeaderPastEnd { declared: 1000, available: 2 });
/// assert_eq!(
///     err.to_string(),
///     "not a valid safetensors file: the header length is 1,000 bytes, but only 2 bytes \
///      follow it (truncated?)"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The file is shorter than the 8-byte header length.
    TooShort {
        /// The file's length in bytes.
        len: usize,
    },
    /// The header length exceeds [`MAX_HEADER_LEN`](super::MAX_HEADER_LEN).
    HeaderTooLarge {
        /// The header length the file states.
        declared: u64,
    },
    /// The header length is more than the bytes after it.
    HeaderPastEnd {
        /// The header length the file states.
        declared: u64,
        /// The bytes the file has after the length.
        available: usize,
    },
    /// The header is not what the format allows at byte `at` of the file.
    Syntax {
        /// The offset in the file.
        at: usize,
        /// What the format allows there.
        expected: &'static str,
    },
    /// Two tensors are named `name`.
    DuplicateName {
        /// The name.
        name: TensorName,
    },
    /// `__metadata__` holds something other than a string at byte `at` of the file.
    Metadata {
        /// The offset in the file.
        at: usize,
    },
    /// Tensor `name` has a dtype the format does not have.
    UnknownDtype {
        /// The tensor.
        name: TensorName,
        /// The dtype as written.
        dtype: TensorName,
    },
    /// A tensor name at byte `at` uses a JSON escape.
    EscapedName {
        /// The offset in the file.
        at: usize,
    },
    /// Tensor `name` takes `needed` bytes (its dtype and shape), but its offsets span another
    /// length (`needed` is `None` when the size overflows, or is not a whole number of bytes).
    TensorSize {
        /// The tensor.
        name: TensorName,
        /// Its dtype.
        dtype: Dtype,
        /// Its shape.
        shape: Shape,
        /// The bytes its dtype and shape take.
        needed: Option<usize>,
        /// Its data offsets.
        offsets: (usize, usize),
    },
    /// Tensor `name`'s data is at `offsets`, but the data before it (in offset order) ends at
    /// `expected_begin`.
    Offsets {
        /// The tensor.
        name: TensorName,
        /// Its data offsets.
        offsets: (usize, usize),
        /// Where its data had to begin.
        expected_begin: usize,
    },
    /// The tensors take `declared` bytes of data, but the file has `found` after the header.
    DataLength {
        /// The data the header describes.
        declared: usize,
        /// The data in the file.
        found: usize,
    },
    /// More than [`MAX_TENSORS`](super::MAX_TENSORS) tensors.
    TooManyTensors {
        /// The limit.
        limit: usize,
    },
    /// Tensor `name`, which the net needs, is not in the file.
    Missing {
        /// The tensor.
        name: TensorName,
        /// The dtype the net needs.
        dtype: Dtype,
        /// The shape the net needs.
        shape: Shape,
    },
    /// Tensor `name` has another dtype or shape than the net needs.
    #[non_exhaustive]
    Mismatch {
        /// The tensor.
        name: TensorName,
        /// The dtype the net needs.
        expected_dtype: Dtype,
        /// The shape the net needs.
        expected_shape: Shape,
        /// The dtype in the file.
        found_dtype: Dtype,
        /// The shape in the file.
        found_shape: Shape,
        /// When the tensor is the weight of a dense layer right after a `Flatten` and the file's
        /// has another number of columns (inputs): the `[channels, height, width]` of the images
        /// the net flattens, so that the message can say which images the file's number
        /// implies (`16 x 5 x 5 = 400` against `256 = 16 x 4 x 4`).
        flattened: Option<[usize; 3]>,
    },
    /// Element `index` (row-major) of tensor `name` is NaN or infinite.
    NonFinite {
        /// The tensor.
        name: TensorName,
        /// The element's row-major index.
        index: usize,
    },
    /// Element `index` (row-major) of the integer tensor `name` is `value`, outside
    /// `min..=max`.
    OutOfRange {
        /// The tensor.
        name: TensorName,
        /// The element's row-major index.
        index: usize,
        /// The value found.
        value: i32,
        /// The least value allowed.
        min: i32,
        /// The greatest value allowed.
        max: i32,
    },
    /// Element `index` of the quantization scale `name` (a tensor whose
    /// [`TensorSpec::scale`](super::TensorSpec::scale) is set) is `f32::from_bits(bits)`, which
    /// is not a positive normal number: it is zero, negative or subnormal (a NaN or an infinity
    /// is [`NonFinite`](Self::NonFinite)). A scale is at least
    /// [`f32::MIN_POSITIVE`] (about 1.2e-38): see docs/quantization.md.
    ///
    /// ```
    /// use constmat::format::{Error, ErrorKind, TensorName};
    ///
    /// let err = Error::ScaleOutOfRange {
    ///     name: TensorName::of(0, "input_scale"),
    ///     index: 0,
    ///     bits: (-1.0_f32 / 255.0).to_bits(),
    /// };
    /// assert_eq!(err.kind(), ErrorKind::ScaleOutOfRange);
    /// assert_eq!(
    ///     err.to_string(),
    ///     "tensor 0.input_scale: element 0 is -0.003921569, expected a quantization scale: \
    ///      a positive normal f32, from 1.1754944e-38 to 3.4028235e38"
    /// );
    /// ```
    ScaleOutOfRange {
        /// The tensor.
        name: TensorName,
        /// The element's row-major index.
        index: usize,
        /// The value found, as its bits (`f32::from_bits`), so that the error stays `Eq`.
        bits: u32,
    },
    /// The file holds tensor `name`, which the net does not have.
    Unexpected {
        /// The tensor.
        name: TensorName,
    },
}

impl Error {
    /// What kind of error it is.
    #[must_use]
    pub const fn kind(&self) -> ErrorKind {
        match self {
            Self::TooShort { .. } | Self::HeaderPastEnd { .. } => ErrorKind::Truncated,
            Self::HeaderTooLarge { .. } => ErrorKind::HeaderTooLarge,
            Self::Syntax { .. } => ErrorKind::Syntax,
            Self::DuplicateName { .. } => ErrorKind::DuplicateName,
            Self::Metadata { .. } => ErrorKind::Metadata,
            Self::UnknownDtype { .. } => ErrorKind::UnknownDtype,
            Self::EscapedName { .. } => ErrorKind::EscapedName,
            Self::TensorSize { .. } => ErrorKind::TensorSize,
            Self::Offsets { .. } => ErrorKind::Offsets,
            Self::DataLength { .. } => ErrorKind::DataLength,
            Self::TooManyTensors { .. } => ErrorKind::TooManyTensors,
            Self::Missing { .. } => ErrorKind::Missing,
            Self::Mismatch { .. } => ErrorKind::Mismatch,
            Self::NonFinite { .. } => ErrorKind::NonFinite,
            Self::OutOfRange { .. } => ErrorKind::OutOfRange,
            Self::ScaleOutOfRange { .. } => ErrorKind::ScaleOutOfRange,
            Self::Unexpected { .. } => ErrorKind::Unexpected,
        }
    }

    /// The error in words, as [`Display`](fmt::Display) prints it and as a build that bakes
    /// the file fails with.
    #[must_use]
    pub const fn message(&self) -> Message {
        let m = Message::new();
        match *self {
            Self::TooShort { len } => m
                .str("not a valid safetensors file: it is ")
                .count(len)
                .str(" bytes long, shorter than the 8-byte header length every safetensors file starts with"),
            Self::HeaderTooLarge { declared } => m
                .str("not a valid safetensors file: the header length is ")
                .count_u64(declared)
                .str(" bytes, more than the format's limit of ")
                .count_u64(super::MAX_HEADER_LEN)
                .str(" (corrupt?)"),
            Self::HeaderPastEnd { declared, available } => m
                .str("not a valid safetensors file: the header length is ")
                .count_u64(declared)
                .str(" bytes, but only ")
                .count(available)
                .str(" bytes follow it (truncated?)"),
            Self::Syntax { at, expected } => m
                .str("not a valid safetensors file: expected ")
                .str(expected)
                .str(" at byte ")
                .count(at)
                .str(" of the file"),
            Self::DuplicateName { name } => m
                .str("not a valid safetensors file: the header names tensor ")
                .name(&name)
                .str(" twice"),
            Self::Metadata { at } => m
                .str("not a valid safetensors file: __metadata__ must map strings to strings, ")
                .str("but byte ")
                .count(at)
                .str(" of the file starts something else"),
            Self::UnknownDtype { name, dtype } => m
                .str("not a valid safetensors file: tensor ")
                .name(&name)
                .str(" has the dtype ")
                .name(&dtype)
                .str(", which the format does not have"),
            Self::EscapedName { at } => m
                .str("unsupported safetensors file: the tensor name at byte ")
                .count(at)
                .str(" uses a JSON escape (\\); write names as plain text"),
            Self::TensorSize {
                name,
                dtype,
                shape,
                needed,
                offsets: (begin, end),
            } => {
                let m = m
                    .str("not a valid safetensors file: tensor ")
                    .name(&name)
                    .str(" is ")
                    .dtype(dtype)
                    .str(" ")
                    .shape(&shape);
                let m = match needed {
                    Some(needed) => m.str(", which takes ").count(needed).str(" bytes"),
                    None => m.str(", which is not a whole number of bytes that fits in memory"),
                };
                m.str(", but its data offsets [")
                    .number(begin)
                    .str(", ")
                    .number(end)
                    .str("] span ")
                    .count(end.saturating_sub(begin))
            }
            Self::Offsets {
                name,
                offsets: (begin, end),
                expected_begin,
            } => m
                .str("not a valid safetensors file: the data of tensor ")
                .name(&name)
                .str(" is bytes ")
                .number(begin)
                .str("..")
                .number(end)
                .str(", but the tensors before it end at byte ")
                .number(expected_begin)
                .str(" (each tensor's data must start where the previous one's ends)"),
            Self::DataLength { declared, found } => m
                .str("not a valid safetensors file: the header says the data section is ")
                .count(declared)
                .str(" bytes, the file has ")
                .count(found)
                .str(" after the header"),
            Self::TooManyTensors { limit } => m
                .str("unsupported safetensors file: it holds more than ")
                .count(limit)
                .str(" tensors, the most this reader takes"),
            Self::Missing { name, dtype, shape } => m
                .str("tensor ")
                .name(&name)
                .str(" is missing: expected ")
                .dtype(dtype)
                .str(" ")
                .shape(&shape),
            Self::Mismatch {
                name,
                expected_dtype,
                expected_shape,
                found_dtype,
                found_shape,
                flattened,
            } => {
                let m = m
                    .str("tensor ")
                    .name(&name)
                    .str(": expected ")
                    .dtype(expected_dtype)
                    .str(" ")
                    .shape(&expected_shape)
                    .str(", found ")
                    .dtype(found_dtype)
                    .str(" ")
                    .shape(&found_shape);
                match flattened {
                    Some(images) => flattened_hint(m, images, found_shape.dims()),
                    None => m,
                }
            }
            Self::NonFinite { name, index } => m
                .str("tensor ")
                .name(&name)
                .str(": element ")
                .number(index)
                .str(" is not a finite number"),
            Self::OutOfRange {
                name,
                index,
                value,
                min,
                max,
            } => m
                .str("tensor ")
                .name(&name)
                .str(": element ")
                .number(index)
                .str(" is ")
                .signed(value as i64)
                .str(", outside ")
                .signed(min as i64)
                .str("..=")
                .signed(max as i64),
            Self::ScaleOutOfRange { name, index, bits } => m
                .str("tensor ")
                .name(&name)
                .str(": element ")
                .number(index)
                .str(" is ")
                .float(f32::from_bits(bits))
                .str(", expected a quantization scale: a positive normal f32, from ")
                .float(f32::MIN_POSITIVE)
                .str(" to ")
                .float(f32::MAX),
            Self::Unexpected { name } => m
                .str("the file holds tensor ")
                .name(&name)
                .str(", which the net does not have"),
        }
    }

    /// Panics with the [`message`](Self::message): at compile time, the build error of a file
    /// that does not fit.
    #[track_caller]
    pub const fn panic(&self) -> ! {
        self.message().panic()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message().as_str())
    }
}

impl core::error::Error for Error {}

/// A tensor name (or another short string from a header), kept in a fixed buffer: up to
/// [`TensorName::CAPACITY`] bytes, longer ones cut and marked with `...`. Bytes other than
/// printable ASCII are shown as `?`.
///
/// ```
/// use constmat::format::TensorName;
/// assert_eq!(TensorName::new(b"2.weight").as_str(), "2.weight");
/// assert_eq!(TensorName::new(b"caf\xc3\xa9").as_str(), "caf??");
/// assert_eq!(TensorName::new(&[b'x'; 200]).as_str().len(), TensorName::CAPACITY + 3);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorName {
    buf: [u8; TensorName::CAPACITY + 3],
    len: usize,
}

impl TensorName {
    /// The most bytes kept.
    /// (A name inside nested blocks, `{module}.{path}`, takes up to 21 + [`FieldPath::CAPACITY`](super::FieldPath::CAPACITY) bytes.)
    pub const CAPACITY: usize = 128;

    /// The name `bytes`, cut to [`CAPACITY`](Self::CAPACITY).
    #[must_use]
    pub const fn new(bytes: &[u8]) -> Self {
        let mut name = Self {
            buf: [0; Self::CAPACITY + 3],
            len: 0,
        };
        let mut i = 0;
        while i < bytes.len() && i < Self::CAPACITY {
            name.buf[i] = printable(bytes[i]);
            i += 1;
        }
        name.len = i;
        if bytes.len() > Self::CAPACITY {
            name.buf[i] = b'.';
            name.buf[i + 1] = b'.';
            name.buf[i + 2] = b'.';
            name.len += 3;
        }
        name
    }

    /// `"{module}.{field}"`, as a net names its tensors.
    #[must_use]
    pub const fn of(module: usize, field: &str) -> Self {
        let m = Message::new().number(module).str(".").str(field);
        let (text, _) = m.buf.split_at(m.len);
        Self::new(text)
    }

    /// The name as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        as_text(self.buf.split_at(self.len).0)
    }
}

impl fmt::Debug for TensorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for TensorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tensor's shape: up to [`Shape::MAX_RANK`] dimensions kept, and the rank.
///
/// ```
/// use constmat::format::Shape;
/// let shape = Shape::new(&[128, 784]);
/// assert_eq!((shape.rank(), shape.dims()), (2, &[128, 784][..]));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; Shape::MAX_RANK],
    rank: usize,
}

/// The dimensions as a list, `[120, 400]` (with `...` for those past
/// [`MAX_RANK`](Shape::MAX_RANK)): what an error's `Debug` form shows, as readable as its
/// message.
///
/// ```
/// use constmat::format::Shape;
/// assert_eq!(format!("{:?}", Shape::new(&[120, 400])), "[120, 400]");
/// assert_eq!(format!("{:?}", Shape::new(&[1; 9])), "[1, 1, 1, 1, 1, 1, 1, 1, ...]");
/// ```
impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, dim) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{dim}")?;
        }
        if self.rank > Self::MAX_RANK {
            f.write_str(", ...")?;
        }
        f.write_str("]")
    }
}

impl Shape {
    /// The most dimensions kept (a longer shape is still counted and printed with `...`).
    pub const MAX_RANK: usize = 8;

    /// The shape `dims`.
    #[must_use]
    pub const fn new(dims: &[usize]) -> Self {
        let mut shape = Self::empty();
        let mut i = 0;
        while i < dims.len() {
            shape = shape.push(dims[i]);
            i += 1;
        }
        shape
    }

    pub(crate) const fn empty() -> Self {
        Self {
            dims: [0; Self::MAX_RANK],
            rank: 0,
        }
    }

    pub(crate) const fn push(mut self, dim: usize) -> Self {
        if self.rank < Self::MAX_RANK {
            self.dims[self.rank] = dim;
        }
        self.rank += 1;
        self
    }

    /// The number of dimensions.
    #[must_use]
    pub const fn rank(&self) -> usize {
        self.rank
    }

    /// The dimensions kept (all of them unless the rank exceeds [`MAX_RANK`](Self::MAX_RANK)).
    #[must_use]
    pub const fn dims(&self) -> &[usize] {
        let kept = if self.rank < Self::MAX_RANK {
            self.rank
        } else {
            Self::MAX_RANK
        };
        self.dims.split_at(kept).0
    }

    /// Whether the shape is exactly `dims`.
    #[must_use]
    pub const fn is(&self, dims: &[usize]) -> bool {
        if self.rank != dims.len() || self.rank > Self::MAX_RANK {
            return false;
        }
        let mut i = 0;
        while i < dims.len() {
            if self.dims[i] != dims[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}

/// The second half of a [`Error::Mismatch`] of a dense layer's weight after a `Flatten`: which
/// images each number of inputs implies (`images` the net's `[channels, height, width]`,
/// `found` the file's shape).
const fn flattened_hint(m: Message, images: [usize; 3], found: &[usize]) -> Message {
    let [channels, height, width] = images;
    let m = m
        .str(": the layer reads Flatten's ")
        .number(channels)
        .str(" x ")
        .number(height)
        .str(" x ")
        .number(width)
        .str(" = ")
        .number(channels * height * width)
        .str(" values");
    let [_, columns] = found else {
        return m;
    };
    let columns = *columns;
    if channels == 0 || columns % channels != 0 {
        return m
            .str("; ")
            .number(columns)
            .str(" is not a multiple of its ")
            .number(channels)
            .str(" channels");
    }
    let per_channel = columns / channels;
    let mut side = 0;
    while (side + 1) * (side + 1) <= per_channel {
        side += 1;
    }
    let m = m
        .str("; ")
        .number(columns)
        .str(" would be ")
        .number(channels)
        .str(" x ");
    // A guess at a square image only where the net's images are square.
    if side * side != per_channel || height != width {
        return m.number(per_channel).str(" values a channel");
    }
    m.number(side)
        .str(" x ")
        .number(side)
        .str(", images of ")
        .number(side)
        .str(" x ")
        .number(side)
        .str(" where this net has ")
        .number(height)
        .str(" x ")
        .number(width)
        .str(" (another padding, stride or kernel size?)")
}

/// A message built in a fixed buffer, without a heap: the text of an [`Error`], in `const`
/// code (whose panics print a single `&str`) and at run time alike.
///
/// ```
/// use constmat::format::Message;
/// let m = Message::new().str("header of ").count(401_960).str(" bytes");
/// assert_eq!(m.as_str(), "header of 401,960 bytes");
/// ```
#[derive(Clone, Copy)]
pub struct Message {
    buf: [u8; Message::CAPACITY],
    len: usize,
}

impl Message {
    /// The most bytes a message holds; longer ones are cut.
    pub const CAPACITY: usize = 400;

    /// An empty message.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            buf: [0; Self::CAPACITY],
            len: 0,
        }
    }

    /// Appends `bytes`, showing anything but printable ASCII as `?` (so that the text stays
    /// valid UTF-8 even when cut at the capacity).
    #[must_use]
    pub const fn bytes(mut self, bytes: &[u8]) -> Self {
        let mut i = 0;
        while i < bytes.len() && self.len < Self::CAPACITY {
            self.buf[self.len] = printable(bytes[i]);
            self.len += 1;
            i += 1;
        }
        self
    }

    /// Appends `s`.
    #[must_use]
    pub const fn str(self, s: &str) -> Self {
        self.bytes(s.as_bytes())
    }

    /// Appends `n` in decimal: `401960`.
    #[must_use]
    pub const fn number(self, n: usize) -> Self {
        self.digits(n as u64, false)
    }

    /// Appends `n` in decimal, with its sign when negative: `-31`.
    #[must_use]
    pub const fn signed(self, n: i64) -> Self {
        let m = if n < 0 { self.str("-") } else { self };
        m.digits(n.unsigned_abs(), false)
    }

    /// Appends a count of bytes (or other things) with thousands separators: `401,960`.
    #[must_use]
    pub const fn count(self, n: usize) -> Self {
        self.digits(n as u64, true)
    }

    const fn count_u64(self, n: u64) -> Self {
        self.digits(n, true)
    }

    const fn digits(self, n: u64, grouped: bool) -> Self {
        let mut digits = [0u8; 26];
        let mut start = digits.len();
        let mut n = n;
        let mut written = 0;
        loop {
            if grouped && written > 0 && written % 3 == 0 {
                start -= 1;
                digits[start] = b',';
            }
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            written += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.bytes(digits.split_at(start).1)
    }

    /// Appends `v` with the fewest significant digits (at most 9) that read back as the same
    /// `f32`, as Rust's `{}` and `{:e}` choose them: positionally from 1e-4 to below 1e16
    /// (`-0.003921569`), else with an exponent (`1.1754944e-38`, `1e-45`).
    const fn float(self, v: f32) -> Self {
        if v.is_nan() {
            return self.str("NaN");
        }
        let m = if v.is_sign_negative() {
            self.str("-")
        } else {
            self
        };
        let a = v.abs();
        if a.is_infinite() {
            return m.str("inf");
        }
        if a == 0.0 {
            return m.str("0");
        }
        let (value, count, exponent) = shortest_digits(a);
        let mut digits = [0_u8; 9];
        let mut n = value;
        let mut i = count;
        while i > 0 {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
        let (digits, _) = digits.split_at(count);
        if exponent < -4 || exponent > 15 {
            let (first, rest) = digits.split_at(1);
            let m = m.bytes(first);
            let m = if rest.is_empty() {
                m
            } else {
                m.str(".").bytes(rest)
            };
            return m.str("e").signed(exponent as i64);
        }
        if exponent < 0 {
            let mut m = m.str("0.");
            let mut zeros = -exponent - 1;
            while zeros > 0 {
                m = m.str("0");
                zeros -= 1;
            }
            return m.bytes(digits);
        }
        // `exponent + 1` digits before the point, padded with zeros.
        let whole = exponent as usize + 1;
        if count <= whole {
            let mut m = m.bytes(digits);
            let mut zeros = whole - count;
            while zeros > 0 {
                m = m.str("0");
                zeros -= 1;
            }
            m
        } else {
            let (int, frac) = digits.split_at(whole);
            m.bytes(int).str(".").bytes(frac)
        }
    }

    const fn name(self, name: &TensorName) -> Self {
        self.bytes(name.buf.split_at(name.len).0)
    }

    /// Appends a dtype in lower case, `f32`.
    const fn dtype(mut self, dtype: Dtype) -> Self {
        let start = self.len;
        self = self.str(dtype.name());
        let mut i = start;
        while i < self.len {
            self.buf[i] = self.buf[i].to_ascii_lowercase();
            i += 1;
        }
        self
    }

    /// Appends a shape, `[64, 128]`.
    const fn shape(self, shape: &Shape) -> Self {
        let mut m = self.str("[");
        let dims = shape.dims();
        let mut i = 0;
        while i < dims.len() {
            if i > 0 {
                m = m.str(", ");
            }
            m = m.number(dims[i]);
            i += 1;
        }
        if shape.rank > dims.len() {
            m = m.str(", ...");
        }
        m.str("]")
    }

    /// The text.
    #[must_use]
    pub const fn as_str(&self) -> &str {
        as_text(self.buf.split_at(self.len).0)
    }

    /// Panics with the text (a build error when evaluated at compile time).
    #[track_caller]
    pub const fn panic(self) -> ! {
        panic!("{}", self.as_str())
    }
}

impl Default for Message {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The shortest decimal form of the positive finite `a`: `(digits, count, exponent)` with
/// `a = d.ddd · 10^exponent` to `count` significant digits (at most 9, which always read back
/// as `a`), the fewest that read back as `a` (rounded to nearest).
const fn shortest_digits(a: f32) -> (u64, usize, i32) {
    let x = a as f64;
    // 10^exponent <= x < 10^(exponent + 1)
    let mut exponent = 0_i32;
    while times_pow10(1.0, exponent + 1) <= x {
        exponent += 1;
    }
    while times_pow10(1.0, exponent) > x {
        exponent -= 1;
    }
    let mut count = 1;
    loop {
        let scaled = times_pow10(x, count as i32 - 1 - exponent);
        let mut digits = (scaled + 0.5) as u64;
        let mut e = exponent;
        let limit = times_pow10(1.0, count as i32) as u64;
        if digits >= limit {
            digits /= 10;
            e += 1;
        }
        let back = times_pow10(digits as f64, e - (count as i32 - 1)) as f32;
        if back == a || count == 9 {
            while count > 1 && digits.is_multiple_of(10) {
                digits /= 10;
                count -= 1;
            }
            return (digits, count, e);
        }
        count += 1;
    }
}

/// `x · 10^k` in `f64` (the powers of ten are exact up to `10^22`; beyond, a rounding per
/// factor of `10^22`: far below an `f32`'s precision for the exponents of `f32`s).
const fn times_pow10(x: f64, k: i32) -> f64 {
    let (mut x, mut k) = (x, k);
    while k > 22 {
        x *= 1e22;
        k -= 22;
    }
    while k < -22 {
        x /= 1e22;
        k += 22;
    }
    let mut power = 1.0_f64;
    let mut i = 0;
    while i < k.unsigned_abs() {
        power *= 10.0;
        i += 1;
    }
    if k >= 0 { x * power } else { x / power }
}

/// `b` if it is printable ASCII, else `?`.
const fn printable(b: u8) -> u8 {
    if b >= b' ' && b <= b'~' { b } else { b'?' }
}

/// Text made only of printable ASCII, as every buffer here is.
const fn as_text(bytes: &[u8]) -> &str {
    match core::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => "?",
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use std::format;
    use std::string::{String, ToString};

    use super::Message;

    /// `v` as `Message::float` writes it, by Rust's formatting: the same shortest digits,
    /// positional from 1e-4 to below 1e16, else `{:e}`.
    fn rust(v: f32) -> String {
        let scientific = format!("{v:e}");
        let exponent: i32 = match scientific.split_once('e') {
            Some((_, e)) if v != 0.0 => e.parse().unwrap(),
            _ => 0,
        };
        if (-4..16).contains(&exponent) {
            format!("{v}")
        } else {
            scientific
        }
    }

    #[test]
    fn floats_are_written_as_rust_writes_them() {
        let float = |v: f32| Message::new().float(v).as_str().to_string();
        assert_eq!(float(-1.0 / 255.0), "-0.003921569");
        assert_eq!(float(f32::MIN_POSITIVE), "1.1754944e-38");
        assert_eq!(float(f32::MAX), "3.4028235e38");
        assert_eq!(float(1e-45), "1e-45");
        assert_eq!(float(0.05), "0.05");
        assert_eq!(float(-0.0), "-0");
        assert_eq!(float(1234.5), "1234.5");
        assert_eq!(float(1e15), "1000000000000000");
        assert_eq!(float(1e16), "1e16");
        assert_eq!(float(f32::NAN), "NaN");
        assert_eq!(float(f32::NEG_INFINITY), "-inf");
        // Every exponent, and bit patterns drawn across the whole range.
        let mut bits = 0x9E37_79B9_u32;
        for k in 0..200_000_u32 {
            bits ^= bits << 13;
            bits ^= bits >> 17;
            bits ^= bits << 5;
            let v = f32::from_bits(if k < 256 {
                (k << 23) | (bits & 0x7F_FFFF)
            } else {
                bits
            });
            assert_eq!(float(v), rust(v), "{:#x}", v.to_bits());
        }
    }
}
