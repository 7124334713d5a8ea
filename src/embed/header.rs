//! A safetensors reader that runs at compile time: every function here is a `const fn`.
//!
//! A safetensors file is an 8-byte little-endian header length `n`, a JSON header of `n` bytes,
//! and the tensors' raw bytes. The header is one JSON object mapping each tensor's name to
//! `{"dtype":"F32","shape":[O,I],"data_offsets":[begin,end]}` (offsets into the data that
//! follows the header), plus an optional `"__metadata__"` object of strings:
//!
//! ```text
//! {"__metadata__":{"format":"pt"},"0.weight":{"dtype":"F32","shape":[3,4],"data_offsets":[0,48]},...}
//! ```
//!
//! `serde_json` and the `safetensors` crate cannot run in a `const` context, so this is a small
//! hand-written scanner for exactly that grammar: objects, arrays, strings (escapes are skipped
//! over, not decoded: tensor names that matter here are plain ASCII), non-negative integers, and
//! any other JSON value skipped as a whole. Whatever it rejects fails with a message naming what
//! is wrong; [`Message`] builds those messages in a fixed buffer, since a `const` panic can only
//! print one `&str`.

/// How many dimensions of a tensor's shape are kept (a longer shape is still counted, and
/// printed with `...`). The nets here have at most 2.
pub(crate) const MAX_RANK: usize = 4;

/// A safetensors file whose header has been located.
#[derive(Clone, Copy)]
pub(crate) struct File<'a> {
    /// The whole file.
    bytes: &'a [u8],
    /// Where the JSON header ends and the data begins: `8 + n`.
    data_start: usize,
}

/// A byte range `start..end` of the file (a string's contents, without the quotes).
#[derive(Clone, Copy)]
pub(crate) struct Span {
    start: usize,
    end: usize,
}

/// What the header says about one tensor.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    /// The dtype string, e.g. `F32`.
    pub dtype: Span,
    /// The first [`MAX_RANK`] dimensions.
    pub dims: [usize; MAX_RANK],
    /// The number of dimensions (may exceed [`MAX_RANK`]).
    pub rank: usize,
    /// Offsets of the tensor's bytes, relative to the start of the data.
    pub begin: usize,
    /// The end offset, exclusive.
    pub end: usize,
}

/// A tensor's name as the nets here spell it: `"{module}.{field}"`.
#[derive(Clone, Copy)]
pub(crate) struct Name<'n> {
    /// The index of the `nn.Sequential` module.
    pub module: usize,
    /// `"weight"` or `"bias"`.
    pub field: &'n str,
}

/// Fails with `not a valid safetensors file: {reason}` (the wording of the runtime loader).
const fn corrupt(reason: &str) -> ! {
    Message::new()
        .str("not a valid safetensors file: ")
        .str(reason)
        .fail()
}

impl<'a> File<'a> {
    /// Locates the header of `bytes`, checking that the length prefix fits the file and that
    /// the header is a JSON object.
    pub(crate) const fn new(bytes: &'a [u8]) -> Self {
        let Some((prefix, _)) = bytes.split_first_chunk::<8>() else {
            corrupt("the file is shorter than its 8-byte header length")
        };
        let header_len = u64::from_le_bytes(*prefix);
        let available = (bytes.len() - 8) as u64;
        if header_len > available {
            Message::new()
                .str("not a valid safetensors file: the header length is ")
                .number(header_len as usize)
                .str(" bytes but only ")
                .number(available as usize)
                .str(" bytes follow it (truncated?)")
                .fail()
        }
        let file = Self {
            bytes,
            data_start: 8 + header_len as usize,
        };
        let first = file.skip_whitespace(8);
        if first >= file.data_start || bytes[first] != b'{' {
            corrupt("the header is not a JSON object")
        }
        file
    }

    /// The number of data bytes after the header.
    pub(crate) const fn data_len(&self) -> usize {
        self.bytes.len() - self.data_start
    }

    /// The data bytes of `entry`. The caller has checked its offsets with
    /// [`check_extent`](Self::check_extent).
    pub(crate) const fn data(&self, entry: &Entry) -> &'a [u8] {
        let (_, after_header) = self.bytes.split_at(self.data_start);
        let (_, from_begin) = after_header.split_at(entry.begin);
        from_begin.split_at(entry.end - entry.begin).0
    }

    /// The bytes of `span`.
    pub(crate) const fn bytes_of(&self, span: Span) -> &'a [u8] {
        let (_, from_start) = self.bytes.split_at(span.start);
        from_start.split_at(span.end - span.start).0
    }

    /// The header byte at `at`; running into the data means the header was cut short.
    const fn byte(&self, at: usize) -> u8 {
        if at >= self.data_start {
            corrupt("the JSON header ends in the middle of a value")
        }
        self.bytes[at]
    }

    const fn skip_whitespace(&self, mut at: usize) -> usize {
        while at < self.data_start && matches!(self.bytes[at], b' ' | b'\t' | b'\n' | b'\r') {
            at += 1;
        }
        at
    }

    /// Checks that byte `at` is `expected`; returns the position after it and any whitespace.
    const fn expect(&self, at: usize, expected: u8, what: &str) -> usize {
        if self.byte(at) != expected {
            Message::new()
                .str("not a valid safetensors file: expected ")
                .str(what)
                .str(" at byte ")
                .number(at)
                .str(" of the file")
                .fail()
        }
        self.skip_whitespace(at + 1)
    }

    /// The string starting at `at` (which must be `"`): its contents, and the position after the
    /// closing quote and any whitespace.
    const fn string(&self, at: usize) -> (Span, usize) {
        if self.byte(at) != b'"' {
            Message::new()
                .str("not a valid safetensors file: expected a string at byte ")
                .number(at)
                .str(" of the file")
                .fail()
        }
        let start = at + 1;
        let mut end = start;
        loop {
            match self.byte(end) {
                b'"' => break,
                // An escape: skip the escaped character so that `\"` does not end the string.
                b'\\' => end += 2,
                _ => end += 1,
            }
        }
        (Span { start, end }, self.skip_whitespace(end + 1))
    }

    /// The non-negative integer starting at `at`, and the position after it and any whitespace.
    const fn integer(&self, at: usize) -> (usize, usize) {
        let mut at = at;
        if !self.byte(at).is_ascii_digit() {
            corrupt("expected a non-negative integer in a tensor's shape or offsets")
        }
        let mut value: usize = 0;
        while self.byte(at).is_ascii_digit() {
            let digit = (self.byte(at) - b'0') as usize;
            value = match value.checked_mul(10) {
                Some(v) => match v.checked_add(digit) {
                    Some(v) => v,
                    None => corrupt("an integer in the header does not fit in usize"),
                },
                None => corrupt("an integer in the header does not fit in usize"),
            };
            at += 1;
        }
        (value, self.skip_whitespace(at))
    }

    /// The position after the JSON value starting at `at` (any kind) and any whitespace.
    const fn skip_value(&self, at: usize) -> usize {
        match self.byte(at) {
            b'"' => self.string(at).1,
            b'{' | b'[' => {
                // Nested objects and arrays: track the depth; strings may hold brackets.
                let mut depth = 0usize;
                let mut at = at;
                loop {
                    match self.byte(at) {
                        b'"' => {
                            at = self.string(at).0.end + 1;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return self.skip_whitespace(at + 1);
                            }
                        }
                        _ => {}
                    }
                    at += 1;
                }
            }
            // A number, `true`, `false` or `null`: up to the next delimiter.
            _ => {
                let mut at = at;
                while !matches!(
                    self.byte(at),
                    b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                ) {
                    at += 1;
                }
                self.skip_whitespace(at)
            }
        }
    }

    /// The members of the header's top-level object, in order (`__metadata__` included).
    pub(crate) const fn members(&self) -> Members {
        Members {
            at: self.skip_whitespace(self.skip_whitespace(8) + 1),
            done: false,
        }
    }

    /// Reads the tensor description (the value of a top-level member) starting at `at`.
    pub(crate) const fn entry(&self, at: usize) -> Entry {
        let mut entry = Entry {
            dtype: Span { start: 0, end: 0 },
            dims: [0; MAX_RANK],
            rank: 0,
            begin: 0,
            end: 0,
        };
        let (mut has_dtype, mut has_shape, mut has_offsets) = (false, false, false);
        let mut at = self.expect(at, b'{', "a tensor's description (a JSON object)");
        if self.byte(at) == b'}' {
            corrupt("a tensor's description is empty")
        }
        loop {
            let (key, after_key) = self.string(at);
            at = self.expect(after_key, b':', "`:` after a key");
            let key = self.bytes_of(key);
            if bytes_eq(key, b"dtype") {
                let (dtype, next) = self.string(at);
                entry.dtype = dtype;
                has_dtype = true;
                at = next;
            } else if bytes_eq(key, b"shape") {
                at = self.expect(at, b'[', "a shape (a JSON array)");
                while self.byte(at) != b']' {
                    let (dim, next) = self.integer(at);
                    if entry.rank < MAX_RANK {
                        entry.dims[entry.rank] = dim;
                    }
                    entry.rank += 1;
                    at = next;
                    if self.byte(at) == b',' {
                        at = self.skip_whitespace(at + 1);
                    } else if self.byte(at) != b']' {
                        corrupt("expected `,` or `]` in a shape")
                    }
                }
                at = self.skip_whitespace(at + 1);
                has_shape = true;
            } else if bytes_eq(key, b"data_offsets") {
                at = self.expect(at, b'[', "data offsets (a JSON array)");
                let (begin, next) = self.integer(at);
                at = self.expect(next, b',', "`,` between two data offsets");
                let (end, next) = self.integer(at);
                at = self.expect(next, b']', "`]` after two data offsets");
                entry.begin = begin;
                entry.end = end;
                has_offsets = true;
            } else {
                at = self.skip_value(at);
            }
            match self.byte(at) {
                b',' => at = self.skip_whitespace(at + 1),
                b'}' => break,
                _ => corrupt("expected `,` or `}` in a tensor's description"),
            }
        }
        if !(has_dtype && has_shape && has_offsets) {
            corrupt("a tensor's description lacks its dtype, shape or data_offsets")
        }
        entry
    }

    /// The description of the tensor named `name`, if the header has one.
    pub(crate) const fn find(&self, name: Name<'_>) -> Option<Entry> {
        let mut members = self.members();
        while let Some((key, value)) = members.next(self) {
            if let Some(found) = parse_name(self.bytes_of(key))
                && found.module == name.module
                && bytes_eq(found.field.as_bytes(), name.field.as_bytes())
            {
                return Some(self.entry(value));
            }
        }
        None
    }

    /// Checks that `entry`'s offsets are ordered and inside the data.
    pub(crate) const fn check_extent(&self, name: Name<'_>, entry: &Entry) {
        if entry.begin > entry.end || entry.end > self.data_len() {
            Message::new()
                .str("not a valid safetensors file: the data of tensor ")
                .name(name)
                .str(" is bytes ")
                .number(entry.begin)
                .str("..")
                .number(entry.end)
                .str(", but the file holds ")
                .number(self.data_len())
                .str(" data bytes (truncated?)")
                .fail()
        }
    }
}

impl File<'_> {
    /// The whole-file checks (see `embed::check_file`) for a net spanning `modules` modules
    /// from `first_module`.
    pub(crate) const fn check_all(&self, first_module: usize, modules: usize) {
        let mut tensors_end = 0;
        let mut members = self.members();
        while let Some((key, value)) = members.next(self) {
            let key = self.bytes_of(key);
            if bytes_eq(key, b"__metadata__") {
                continue;
            }
            let Some(name) = parse_name(key) else {
                unexpected(key)
            };
            if name.module < first_module || name.module - first_module >= modules {
                unexpected(key)
            }
            let entry = self.entry(value);
            self.check_extent(name, &entry);
            if entry.end > tensors_end {
                tensors_end = entry.end;
            }
        }
        if tensors_end != self.data_len() {
            Message::new()
                .str("not a valid safetensors file: ")
                .number(self.data_len())
                .str(" data bytes follow the header, but the tensors take ")
                .number(tensors_end)
                .fail()
        }
    }
}

/// Fails with the runtime loader's message for a tensor the net does not have.
pub(crate) const fn unexpected(name: &[u8]) -> ! {
    Message::new()
        .str("the file holds tensor ")
        .bytes(name)
        .str(", which the net does not have")
        .fail()
}

/// A walk over the members of the header's top-level object.
pub(crate) struct Members {
    at: usize,
    done: bool,
}

impl Members {
    /// The next member: its key, and the position of its value.
    pub(crate) const fn next(&mut self, file: &File<'_>) -> Option<(Span, usize)> {
        if self.done || file.byte(self.at) == b'}' {
            self.done = true;
            return None;
        }
        let (key, after_key) = file.string(self.at);
        let value = file.expect(after_key, b':', "`:` after a tensor's name");
        let after_value = file.skip_value(value);
        match file.byte(after_value) {
            b',' => self.at = file.skip_whitespace(after_value + 1),
            b'}' => self.done = true,
            _ => corrupt("expected `,` or `}` after a tensor's description"),
        }
        Some((key, value))
    }
}

/// `name` read as `"{module}.{field}"` (module in canonical decimal, field non-empty), or
/// `None` for any other name (such as `__metadata__` or `fc1.weight`).
pub(crate) const fn parse_name(name: &[u8]) -> Option<Name<'_>> {
    let mut at = 0;
    let mut module: usize = 0;
    while at < name.len() && name[at].is_ascii_digit() {
        module = match module.checked_mul(10) {
            Some(m) => match m.checked_add((name[at] - b'0') as usize) {
                Some(m) => m,
                None => return None,
            },
            None => return None,
        };
        at += 1;
    }
    // No digits, a leading zero (`01.weight` is not module 1), or no `.` and field after them.
    if at == 0 || (at > 1 && name[0] == b'0') || at + 1 >= name.len() || name[at] != b'.' {
        return None;
    }
    let (_, field) = name.split_at(at + 1);
    match core::str::from_utf8(field) {
        Ok(field) => Some(Name { module, field }),
        Err(_) => None,
    }
}

/// Byte-wise equality (`==` on slices is a trait method, which a `const fn` cannot call).
pub(crate) const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A message built at compile time in a fixed buffer, then raised as a panic: a `const` panic
/// prints a single `&str` (`panic!("{}", s)`), so formatting has to happen before.
pub(crate) struct Message {
    buf: [u8; Self::CAPACITY],
    len: usize,
}

impl Message {
    const CAPACITY: usize = 320;

    pub(crate) const fn new() -> Self {
        Self {
            buf: [0; Self::CAPACITY],
            len: 0,
        }
    }

    /// Appends `bytes`, replacing anything but printable ASCII by `?` (header bytes may be
    /// anything, and a message must stay valid UTF-8 even when cut at the capacity).
    pub(crate) const fn bytes(mut self, bytes: &[u8]) -> Self {
        let mut i = 0;
        while i < bytes.len() && self.len < Self::CAPACITY {
            let b = bytes[i];
            self.buf[self.len] = if b >= b' ' && b <= b'~' { b } else { b'?' };
            self.len += 1;
            i += 1;
        }
        self
    }

    pub(crate) const fn str(self, s: &str) -> Self {
        self.bytes(s.as_bytes())
    }

    /// Appends `n` in decimal.
    pub(crate) const fn number(self, n: usize) -> Self {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        let mut n = n;
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.bytes(digits.split_at(start).1)
    }

    /// Appends `"{module}.{field}"`.
    pub(crate) const fn name(self, name: Name<'_>) -> Self {
        self.number(name.module).str(".").str(name.field)
    }

    /// Appends a shape the way the runtime loader prints one: `[64, 128]`.
    pub(crate) const fn shape(self, dims: &[usize], rank: usize) -> Self {
        let mut message = self.str("[");
        let mut i = 0;
        while i < rank && i < dims.len() {
            if i > 0 {
                message = message.str(", ");
            }
            message = message.number(dims[i]);
            i += 1;
        }
        if rank > dims.len() {
            message = message.str(", ...");
        }
        message.str("]")
    }

    /// Appends a dtype in lower case, as the runtime loader prints it (`F32` -> `f32`).
    pub(crate) const fn dtype(mut self, dtype: &[u8]) -> Self {
        let start = self.len;
        self = self.bytes(dtype);
        let mut i = start;
        while i < self.len {
            self.buf[i] = self.buf[i].to_ascii_lowercase();
            i += 1;
        }
        self
    }

    /// Panics with the message.
    #[track_caller]
    pub(crate) const fn fail(self) -> ! {
        let (text, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(text) {
            Ok(text) => panic!("{}", text),
            // Unreachable: only printable ASCII is ever written.
            Err(_) => panic!("invalid safetensors file"),
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::borrow::ToOwned;
    use std::string::String;
    use std::vec::Vec;

    /// A safetensors file with the given header (padded as the format asks) and `data` bytes.
    fn file(header: &str, data: usize) -> Vec<u8> {
        let mut header = header.as_bytes().to_vec();
        while !header.len().is_multiple_of(8) {
            header.push(b' ');
        }
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(&header);
        bytes.resize(bytes.len() + data, 0);
        bytes
    }

    fn failure(f: impl FnOnce() + std::panic::UnwindSafe) -> Option<String> {
        std::panic::catch_unwind(f)
            .err()
            .map(|payload| match payload.downcast::<String>() {
                Ok(s) => *s,
                Err(payload) => (*payload.downcast::<&str>().unwrap()).to_owned(),
            })
    }

    const TWO: &str = r#"{"__metadata__":{"format":"pt"},"0.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"0.weight":{"data_offsets":[8,24],"shape":[2,2],"dtype":"F32"}}"#;

    #[test]
    fn finds_tensors_whatever_the_key_order_and_spacing() {
        let spaced = TWO
            .replace(',', " ,\n ")
            .replace(':', " : ")
            .replace('{', "{ ");
        for header in [TWO.to_owned(), spaced] {
            let bytes = file(&header, 24);
            let f = File::new(&bytes);
            let weight = f
                .find(Name {
                    module: 0,
                    field: "weight",
                })
                .unwrap();
            assert_eq!(f.bytes_of(weight.dtype), b"F32");
            assert_eq!(
                (weight.rank, weight.dims[..2].to_vec()),
                (2, [2, 2].to_vec())
            );
            assert_eq!((weight.begin, weight.end), (8, 24));
            assert!(
                f.find(Name {
                    module: 1,
                    field: "weight"
                })
                .is_none()
            );
            f.check_all(0, 1);
        }
    }

    #[test]
    fn the_whole_file_check_catches_what_no_layer_reads() {
        let ok = file(TWO, 24);
        assert_eq!(failure(|| File::new(&ok).check_all(0, 1)), None);
        assert_eq!(
            failure(|| File::new(&file(TWO, 20)).check_all(0, 1)).unwrap(),
            "not a valid safetensors file: the data of tensor 0.weight is bytes 8..24, but the \
             file holds 20 data bytes (truncated?)"
        );
        assert_eq!(
            failure(|| File::new(&file(TWO, 30)).check_all(0, 1)).unwrap(),
            "not a valid safetensors file: 30 data bytes follow the header, but the tensors take 24"
        );
        // The net starts at module 1 (a later part of a chain): module 0 is not its.
        assert_eq!(
            failure(|| File::new(&ok).check_all(1, 2)).unwrap(),
            "the file holds tensor 0.bias, which the net does not have"
        );
        for name in ["fc.weight", "00.bias", "0.", ".weight", "0x.bias"] {
            let header = TWO.replace("0.bias", name);
            assert_eq!(
                failure(|| File::new(&file(&header, 24)).check_all(0, 1)).unwrap(),
                std::format!("the file holds tensor {name}, which the net does not have")
            );
        }
    }

    #[test]
    fn names_are_module_dot_field() {
        let parse = |s: &str| parse_name(s.as_bytes()).map(|n| (n.module, n.field.to_owned()));
        assert_eq!(parse("12.weight"), Some((12, "weight".to_owned())));
        assert_eq!(parse("0.bias"), Some((0, "bias".to_owned())));
        assert_eq!(
            parse("0.running_mean"),
            Some((0, "running_mean".to_owned()))
        );
        for bad in [
            "",
            ".",
            "1",
            "1.",
            "01.weight",
            "a.weight",
            "99999999999999999999999.bias",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn messages_print_shapes_and_numbers_like_the_runtime_loader() {
        let m = Message::new()
            .dtype(b"F32")
            .str(" ")
            .shape(&[64, 128], 2)
            .str(" ")
            .shape(&[], 0)
            .str(" ")
            .shape(&[1, 2, 3, 4], 6)
            .str(" ")
            .number(0)
            .str(" ")
            .number(usize::MAX)
            .bytes(b" \xff\n");
        assert_eq!(
            failure(move || m.fail()).unwrap(),
            "f32 [64, 128] [] [1, 2, 3, 4, ...] 0 18446744073709551615 ??"
        );
        // Longer messages are cut at the capacity rather than overflowing the buffer.
        let long = Message::new().bytes(&[b'x'; 1000]);
        assert_eq!(
            failure(move || long.fail()).unwrap().len(),
            Message::CAPACITY
        );
    }
}
