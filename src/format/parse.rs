//! The safetensors rule as `const fn`s: a strict scanner for exactly the JSON a header may hold,
//! then the checks of sizes and offsets, then (for a net) of names, dtypes, shapes and values.
//!
//! Nothing here panics, allocates or recurses on the input: every problem is an [`Error`], and
//! the work is bounded by the file's size and [`MAX_TENSORS`].

use super::error::{Error, Shape, TensorName};
use super::spec::{NetSpec, parse_name};
use super::{Dtype, bytes_eq};

/// The largest header length accepted, in bytes (the reference implementation's limit).
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// The most tensors a file may hold here. The reader keeps its bookkeeping in a fixed-size
/// array (no heap), and checks names and offsets pair by pair, so the limit bounds its work on
/// a hostile file. A net of this crate has two tensors per layer.
pub const MAX_TENSORS: usize = 512;

/// `?` for `const fn`s, which cannot use the `Try` trait.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}

/// A file that follows the format: its header has been checked, its tensors can be looked up.
///
/// ```
/// use constmat::format::{self, Dtype};
/// use constmat::io::safetensors;
/// use constmat::nn::{Dense, Parameters};
///
/// let bytes = safetensors::to_bytes(&Dense::<f32, 3, 2>::zeros(), &[]);
/// let header = format::parse(&bytes)?;
/// assert_eq!(header.tensor_count(), 2);
/// let weight = header.find(b"0.weight").unwrap();
/// assert_eq!((weight.dtype, weight.shape.dims(), weight.data.len()), (Dtype::F32, &[2, 3][..], 24));
/// # Ok::<(), format::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Header<'a> {
    /// The header's JSON.
    json: &'a [u8],
    /// The data after the header.
    data: &'a [u8],
    /// The number of tensors.
    tensors: usize,
}

/// One tensor of a checked file.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a> {
    /// Its name as written.
    pub name: &'a [u8],
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Shape,
    /// Its data offsets, relative to the end of the header.
    pub offsets: (usize, usize),
    /// Its bytes: exactly what its dtype and shape take.
    pub data: &'a [u8],
}

/// Checks `bytes` against the safetensors format (see [the module](super)) and returns its
/// header.
///
/// # Errors
///
/// The first problem found, in the order of the file: the length, then the header from its
/// first byte to its last, then the offsets (in the order of the data).
///
/// ```
/// use constmat::format::{self, ErrorKind};
/// let mut file = 2_u64.to_le_bytes().to_vec();
/// file.extend_from_slice(b"{}");
/// assert_eq!(format::parse(&file)?.tensor_count(), 0);
///
/// file.push(0); // a byte of data that no tensor describes
/// assert_eq!(format::parse(&file).unwrap_err().kind(), ErrorKind::DataLength);
/// # Ok::<(), format::Error>(())
/// ```
pub const fn parse(bytes: &[u8]) -> Result<Header<'_>, Error> {
    parse_recording(bytes, None)
}

/// [`parse`], which also records in `index` each tensor whose name reads as
/// `"{module}.{field}"`, as it meets them (for [`Index::of`], so that the header is read
/// once); `index` is only complete when the parse succeeds.
const fn parse_recording<'a>(
    bytes: &'a [u8],
    mut index: Option<&mut Index<'a>>,
) -> Result<Header<'a>, Error> {
    let Some((length, rest)) = bytes.split_first_chunk::<8>() else {
        return Err(Error::TooShort { len: bytes.len() });
    };
    let declared = u64::from_le_bytes(*length);
    if declared > MAX_HEADER_LEN {
        return Err(Error::HeaderTooLarge { declared });
    }
    if declared > rest.len() as u64 {
        return Err(Error::HeaderPastEnd {
            declared,
            available: rest.len(),
        });
    }
    let (json, data) = rest.split_at(declared as usize);
    if let Err(e) = core::str::from_utf8(json) {
        return Err(Error::Syntax {
            at: 8 + e.valid_up_to(),
            expected: "UTF-8 text",
        });
    }

    // Each tensor's name and data offsets, for the checks that compare tensors with each other.
    let mut slots = [Slot::EMPTY; MAX_TENSORS];
    let mut count = 0;
    let mut members = tri!(Members::start(json));
    while let Some(key) = tri!(members.next_key(json)) {
        // A second tensor of one name is reported before anything about its description: the
        // reference implementation would drop one of the two without reading it.
        if !key.is_metadata() {
            let mut i = 0;
            while i < count {
                if bytes_eq(slots[i].name(json), key.name) {
                    return Err(Error::DuplicateName {
                        name: TensorName::new(key.name),
                    });
                }
                i += 1;
            }
        }
        let Some(info) = tri!(members.value(json, &key)) else {
            continue;
        };
        if count == MAX_TENSORS {
            return Err(Error::TooManyTensors { limit: MAX_TENSORS });
        }
        slots[count] = Slot {
            name: key.span,
            begin: info.begin,
            end: info.end,
        };
        count += 1;
        if let Some(index) = &mut index
            && let Some((module, field)) = parse_name(key.name)
        {
            index.entries[index.count] = IndexEntry {
                module,
                field,
                name: key.name,
                info,
            };
            index.count += 1;
        }
    }

    // The reference implementation's rule: sorted by their offsets, the tensors' data follow
    // each other from 0 without gaps or overlaps, and end where the file does. Sorted in place
    // (insertion sort: no heap, and at most MAX_TENSORS of them).
    let mut i = 1;
    while i < count {
        let mut j = i;
        while j > 0 && slots[j].before(&slots[j - 1]) {
            let swap = slots[j];
            slots[j] = slots[j - 1];
            slots[j - 1] = swap;
            j -= 1;
        }
        i += 1;
    }
    let mut end = 0;
    let mut i = 0;
    while i < count {
        let slot = slots[i];
        if slot.begin != end {
            return Err(Error::Offsets {
                name: TensorName::new(slot.name(json)),
                offsets: (slot.begin, slot.end),
                expected_begin: end,
            });
        }
        end = slot.end;
        i += 1;
    }
    if end != data.len() {
        return Err(Error::DataLength {
            declared: end,
            found: data.len(),
        });
    }
    Ok(Header {
        json,
        data,
        tensors: count,
    })
}

/// Checks the tensors of a parsed file against a net: every tensor of `spec` is present with
/// its dtype and shape and holds finite values, and the file holds no other tensor.
///
/// [`check_layout`], then the values of the net's tensors, in the order of `spec`.
///
/// # Errors
///
/// As [`check_layout`]; then [`Error::NonFinite`] for the first NaN or infinity,
/// [`Error::ScaleOutOfRange`] for the first quantization scale that is not a positive normal
/// number ([`TensorSpec::scale`](super::TensorSpec::scale)), or [`Error::OutOfRange`] for the
/// first integer outside its tensor's [`range`](super::TensorSpec::range).
pub const fn check_net(header: &Header<'_>, spec: &NetSpec) -> Result<(), Error> {
    tri!(check_layout(header, spec));
    let mut k = 0;
    while let Some(tensor) = spec.tensor(k) {
        let expected = tensor.spec;
        if let Some(found) = header.find_module(tensor.module, tensor.field.as_bytes()) {
            tri!(super::values::check_values(
                found.dtype,
                found.data,
                tensor.module,
                tensor.field.as_str(),
                (expected.range, expected.scale),
            ));
        }
        k += 1;
    }
    Ok(())
}

/// Checks the names, dtypes and shapes of a parsed file against a net, but not the values:
/// every tensor of `spec` is present with its dtype and shape, and the file holds no other
/// tensor.
///
/// What a baked net checks before its layers decode the values (which the decoding checks as
/// it goes, in the same order, with the same [`Error::NonFinite`]: see [`decode`](super::decode)).
///
/// # Errors
///
/// For the net's tensors in order, [`Error::Missing`] or [`Error::Mismatch`]; then, for the
/// first tensor of the file that the net lacks, [`Error::Unexpected`].
pub const fn check_layout(header: &Header<'_>, spec: &NetSpec) -> Result<(), Error> {
    check_layout_in(header, Lookup::Header(header), spec)
}

/// Where [`check_layout`] looks the net's tensors up: the header itself (a walk of its JSON per
/// tensor), or a baked file's [`Index`] of it (a compile-time evaluation of a walk per tensor
/// of a net of a hundred tensors would run into the compiler's limit on long evaluations).
#[derive(Clone, Copy)]
enum Lookup<'l, 'a> {
    Header(&'l Header<'a>),
    Index(&'l Index<'a>),
}

impl<'a> Lookup<'_, 'a> {
    const fn find_module(self, module: usize, field: &[u8]) -> Option<Tensor<'a>> {
        match self {
            Self::Header(header) => header.find_module(module, field),
            Self::Index(index) => match index.find_module(module, field) {
                Ok(found) => found,
                Err(_) => None,
            },
        }
    }
}

/// The images `[channels, height, width]` of the `Flatten` before module `module` (with only
/// modules without tensors between them: a dropout, an activation), when `expected` is the
/// weight of a dense layer there (`[outputs, inputs]`) and the file's shape `found` has its
/// outputs but other inputs: the message then says which images each number implies.
const fn flattened_before(
    spec: &NetSpec,
    module: usize,
    expected: &[usize],
    found: &Shape,
) -> Option<[usize; 3]> {
    let (&[outputs, inputs], &[found_outputs, found_inputs]) = (expected, found.dims()) else {
        return None;
    };
    if outputs != found_outputs || inputs == found_inputs {
        return None;
    }
    let mut before = module;
    while before > 0 {
        before -= 1;
        if let Some(images) = spec.flattened(before) {
            return if images[0] * images[1] * images[2] == inputs {
                Some(images)
            } else {
                None
            };
        }
        if has_tensors(spec, before) {
            return None;
        }
    }
    None
}

/// Whether module `module` of the net has tensors (only reached on an error: a walk over them).
const fn has_tensors(spec: &NetSpec, module: usize) -> bool {
    let mut k = 0;
    while let Some(tensor) = spec.tensor(k) {
        if tensor.module == module {
            return true;
        }
        k += 1;
    }
    false
}

/// [`check_layout`], the net's tensors looked up in `lookup` (of `header`).
const fn check_layout_in(
    header: &Header<'_>,
    lookup: Lookup<'_, '_>,
    spec: &NetSpec,
) -> Result<(), Error> {
    let mut k = 0;
    while let Some(tensor) = spec.tensor(k) {
        let (name, expected) = (tensor.name(), tensor.spec);
        let Some(found) = lookup.find_module(tensor.module, tensor.field.as_bytes()) else {
            return Err(Error::Missing {
                name,
                dtype: expected.dtype,
                shape: Shape::new(expected.shape),
            });
        };
        if found.dtype as u8 != expected.dtype as u8 || !found.shape.is(expected.shape) {
            return Err(Error::Mismatch {
                name,
                expected_dtype: expected.dtype,
                expected_shape: Shape::new(expected.shape),
                found_dtype: found.dtype,
                found_shape: found.shape,
                flattened: flattened_before(spec, tensor.module, expected.shape, &found.shape),
            });
        }
        k += 1;
    }
    // One walk over the header (it was checked by `parse`, so the walk cannot fail).
    let Ok(mut members) = Members::start(header.json) else {
        return Ok(());
    };
    while let Ok(Some(member)) = members.next(header.json) {
        if member.tensor.is_none() {
            continue;
        }
        let known = match parse_name(member.name) {
            Some((module, field)) => spec.find(module, field).is_some(),
            None => false,
        };
        if !known {
            return Err(Error::Unexpected {
                name: TensorName::new(member.name),
            });
        }
    }
    Ok(())
}

/// A file's tensors found once, for the compile-time baking of a net: [`parse`]'s verdict and,
/// for each tensor named `"{module}.{field}"`, where the header describes it. Its lookups
/// give what [`Header::find_module`] gives, without reading the header again; a net of `L`
/// layers otherwise reads it about `2L` times while the compiler interprets each step.
///
/// It is large (tens of KiB: [`MAX_TENSORS`] entries), so it is meant for `const` items only;
/// at run time, look tensors up on the [`Header`].
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Index<'a> {
    header: Result<Header<'a>, Error>,
    count: usize,
    entries: [IndexEntry<'a>; MAX_TENSORS],
    /// Where the layers that look tensors up through it sit (see [`Index::within`]).
    scope: super::Scope,
}

/// A tensor of an [`Index`]: its module and field, its name as written, its description.
#[derive(Clone, Copy)]
struct IndexEntry<'a> {
    module: usize,
    field: &'a [u8],
    name: &'a [u8],
    info: Info,
}

impl<'a> Index<'a> {
    /// Parses `bytes` and finds its tensors.
    #[must_use]
    pub const fn of(bytes: &'a [u8]) -> Self {
        const EMPTY: IndexEntry<'static> = IndexEntry {
            module: 0,
            field: &[],
            name: &[],
            info: Info {
                dtype: Dtype::F32,
                shape: Shape::empty(),
                begin: 0,
                end: 0,
            },
        };
        let mut index = Self {
            header: Err(Error::TooShort { len: 0 }),
            count: 0,
            entries: [EMPTY; MAX_TENSORS],
            scope: super::Scope::TOP,
        };
        index.header = parse_recording(bytes, Some(&mut index));
        index
    }

    /// [`validate_layout`] of the indexed file. A file that fits is confirmed from the index
    /// alone: every tensor has a name read as a module and a field (the index holds all of
    /// them), each is one of `spec`'s with its dtype and shape, and there are as many as in
    /// `spec` (names are unique in a parsed file, and two names never read as the same module
    /// and field, so each of `spec`'s tensors is there). Otherwise [`check_layout`] runs, which
    /// reports the first problem in the net's order but reads the header once per tensor.
    ///
    /// # Errors
    ///
    /// As [`validate_layout`].
    pub const fn validate_layout(&self, spec: &NetSpec) -> Result<(), Error> {
        let header = match self.header {
            Ok(header) => header,
            Err(e) => return Err(e),
        };
        if self.count == header.tensors && self.count == spec.tensor_count() {
            let mut i = 0;
            while i < self.count {
                let entry = &self.entries[i];
                match spec.find(entry.module, entry.field) {
                    Some(expected)
                        if entry.info.dtype as u8 == expected.dtype as u8
                            && entry.info.shape.is(expected.shape) => {}
                    _ => break,
                }
                i += 1;
            }
            if i == self.count {
                return Ok(());
            }
        }
        check_layout_in(&header, Lookup::Index(self), spec)
    }

    /// The same index for the layers of part `name` of the block at `module` (of this index's
    /// scope): their tensor `{m}.{field}` is the file's `{module}.{name}.{m}.{field}`.
    #[must_use]
    pub const fn within(mut self, module: usize, name: &str) -> Self {
        self.scope = self.scope.part(module, name);
        self
    }

    /// Where the layers reading through this index sit.
    #[must_use]
    pub const fn scope(&self) -> super::Scope {
        self.scope
    }

    /// [`Header::find_module`] on the parsed file, or [`parse`]'s error.
    ///
    /// # Errors
    ///
    /// [`parse`]'s, when the file is not valid.
    pub const fn find_module(
        &self,
        module: usize,
        field: &[u8],
    ) -> Result<Option<Tensor<'a>>, Error> {
        let header = match self.header {
            Ok(header) => header,
            Err(e) => return Err(e),
        };
        let mut i = 0;
        while i < self.count {
            let entry = &self.entries[i];
            if entry.module == module && bytes_eq(entry.field, field) {
                return Ok(Some(header.entry(entry.name, entry.info)));
            }
            i += 1;
        }
        Ok(None)
    }
}

/// [`parse`], then [`check_net`]: whether `bytes` is a file of the net `spec`, values included.
///
/// What [`io::safetensors`](crate::io::safetensors) evaluates at run time.
/// [`include_net!`](crate::include_net) evaluates [`validate_layout`] at compile time and checks
/// the values as its layers decode them: the same rule, the same errors, one pass over the
/// values.
///
/// # Errors
///
/// The first problem [`parse`] or [`check_net`] finds.
///
/// ```
/// use constmat::format::{self, ErrorKind};
/// use constmat::io::safetensors;
/// use constmat::nn::{Dense, Layer, Parameters};
///
/// let bytes = safetensors::to_bytes(&Dense::<f32, 3, 2>::zeros(), &[]);
/// let err = format::validate(&bytes, &Dense::<f32, 3, 4>::SPEC).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Mismatch);
/// assert_eq!(err.to_string(), "tensor 0.weight: expected f32 [4, 3], found f32 [2, 3]");
/// ```
pub const fn validate<'a>(bytes: &'a [u8], spec: &NetSpec) -> Result<Header<'a>, Error> {
    let header = tri!(parse(bytes));
    tri!(check_net(&header, spec));
    Ok(header)
}

/// [`parse`], then [`check_layout`]: [`validate`] without the values.
///
/// # Errors
///
/// The first problem [`parse`] or [`check_layout`] finds.
pub const fn validate_layout<'a>(bytes: &'a [u8], spec: &NetSpec) -> Result<Header<'a>, Error> {
    let header = tri!(parse(bytes));
    tri!(check_layout(&header, spec));
    Ok(header)
}

impl<'a> Header<'a> {
    /// The number of tensors (`__metadata__` is not one).
    #[must_use]
    pub const fn tensor_count(&self) -> usize {
        self.tensors
    }

    /// The length of the data section, which the tensors' data tile exactly.
    #[must_use]
    pub const fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Tensor `k` in the order of the header, or `None` when `k >= tensor_count()`. (Each call
    /// reads the header from its start: a lookup, not a way to walk many tensors.)
    #[must_use]
    pub const fn tensor(&self, k: usize) -> Option<Tensor<'a>> {
        let Ok(mut members) = Members::start(self.json) else {
            return None;
        };
        let mut seen = 0;
        while let Ok(Some(member)) = members.next(self.json) {
            if let Some(info) = member.tensor {
                if seen == k {
                    return Some(self.entry(member.name, info));
                }
                seen += 1;
            }
        }
        None
    }

    /// The tensor named `name`, if the file holds one.
    #[must_use]
    pub const fn find(&self, name: &[u8]) -> Option<Tensor<'a>> {
        let Ok(mut members) = Members::start(self.json) else {
            return None;
        };
        while let Ok(Some(member)) = members.next(self.json) {
            if let Some(info) = member.tensor
                && bytes_eq(member.name, name)
            {
                return Some(self.entry(member.name, info));
            }
        }
        None
    }

    /// The tensor named `"{module}.{field}"`, if the file holds one.
    #[must_use]
    pub const fn find_module(&self, module: usize, field: &[u8]) -> Option<Tensor<'a>> {
        let Ok(mut members) = Members::start(self.json) else {
            return None;
        };
        while let Ok(Some(member)) = members.next(self.json) {
            if let Some(info) = member.tensor
                && let Some((m, f)) = parse_name(member.name)
                && m == module
                && bytes_eq(f, field)
            {
                return Some(self.entry(member.name, info));
            }
        }
        None
    }

    const fn entry(&self, name: &'a [u8], info: Info) -> Tensor<'a> {
        // The offsets were checked against the data's length by `parse`.
        let (_, from_begin) = self.data.split_at(info.begin);
        let (data, _) = from_begin.split_at(info.end - info.begin);
        Tensor {
            name,
            dtype: info.dtype,
            shape: info.shape,
            offsets: (info.begin, info.end),
            data,
        }
    }
}

/// A tensor's name and offsets, kept while parsing (`name` is a range of the header).
#[derive(Clone, Copy)]
struct Slot {
    name: (usize, usize),
    begin: usize,
    end: usize,
}

impl Slot {
    const EMPTY: Self = Self {
        name: (0, 0),
        begin: 0,
        end: 0,
    };

    const fn name<'a>(&self, json: &'a [u8]) -> &'a [u8] {
        span(json, self.name)
    }

    /// The order of the reference implementation: by begin, then by end.
    const fn before(&self, other: &Self) -> bool {
        self.begin < other.begin || (self.begin == other.begin && self.end < other.end)
    }
}

/// What the header says about one tensor.
#[derive(Clone, Copy)]
struct Info {
    dtype: Dtype,
    shape: Shape,
    begin: usize,
    end: usize,
}

/// One member of the header's object: a tensor, or `__metadata__` (`tensor` is `None`).
struct Member<'a> {
    name: &'a [u8],
    tensor: Option<Info>,
}

/// The key of a member, read up to its `:`.
struct Key<'a> {
    name: &'a [u8],
    span: (usize, usize),
    escaped: bool,
    /// Where the key starts.
    at: usize,
    /// Where its value starts.
    value: usize,
}

impl Key<'_> {
    const fn is_metadata(&self) -> bool {
        !self.escaped && bytes_eq(self.name, b"__metadata__")
    }
}

/// A walk over the members of the header's top-level object, checking each as it goes.
struct Members {
    /// Where the next member starts, or `None` after the closing `}`.
    at: Option<usize>,
    metadata_seen: bool,
}

impl Members {
    /// Checks the opening `{` (and, for an empty object, that nothing follows its `}`).
    const fn start(json: &[u8]) -> Result<Self, Error> {
        let at = tri!(expect(json, skip_ws(json, 0), b'{', "a JSON object (`{`)"));
        let at = if is(json, at, b'}') {
            tri!(end_of_header(json, at + 1));
            None
        } else {
            Some(at)
        };
        Ok(Self {
            at,
            metadata_seen: false,
        })
    }

    /// The next member's key, checked, up to its `:`; `None` after the last member. Its value
    /// is read by [`value`](Self::value).
    const fn next_key<'a>(&mut self, json: &'a [u8]) -> Result<Option<Key<'a>>, Error> {
        let Some(at) = self.at else {
            return Ok(None);
        };
        let (key, after_key) = tri!(string(json, at));
        let value = tri!(expect(json, after_key, b':', "`:` after a name"));
        Ok(Some(Key {
            name: span(json, key.span),
            span: key.span,
            escaped: key.escaped,
            at,
            value,
        }))
    }

    /// The value of `key`, checked: `None` for `__metadata__`, else the tensor's description.
    const fn value(&mut self, json: &[u8], key: &Key<'_>) -> Result<Option<Info>, Error> {
        let (tensor, after_value) = if key.is_metadata() {
            if self.metadata_seen {
                return Err(Error::DuplicateName {
                    name: TensorName::new(key.name),
                });
            }
            self.metadata_seen = true;
            (None, tri!(metadata(json, key.value)))
        } else {
            if key.escaped {
                return Err(Error::EscapedName { at: 8 + key.at });
            }
            let (info, after) = tri!(tensor_info(json, key.value, key.name));
            (Some(info), after)
        };
        if is(json, after_value, b',') {
            self.at = Some(skip_ws(json, after_value + 1));
        } else if is(json, after_value, b'}') {
            self.at = None;
            tri!(end_of_header(json, after_value + 1));
        } else {
            return Err(syntax(after_value, "`,` or `}` after a tensor"));
        }
        Ok(tensor)
    }

    /// The next member, checked; `None` after the last.
    const fn next<'a>(&mut self, json: &'a [u8]) -> Result<Option<Member<'a>>, Error> {
        let Some(key) = tri!(self.next_key(json)) else {
            return Ok(None);
        };
        let tensor = tri!(self.value(json, &key));
        Ok(Some(Member {
            name: key.name,
            tensor,
        }))
    }
}

/// Reads a tensor's description starting at `at`: the fields `dtype`, `shape` and
/// `data_offsets`, each exactly once, and checks that the offsets span what they describe.
const fn tensor_info(json: &[u8], at: usize, name: &[u8]) -> Result<(Info, usize), Error> {
    let mut at = tri!(expect(
        json,
        at,
        b'{',
        "a tensor's description (a JSON object)"
    ));
    let mut dtype = None;
    let mut shape = None;
    let mut offsets = None;
    if !is(json, at, b'}') {
        loop {
            let field_at = at;
            let (key, after_key) = tri!(string(json, at));
            at = tri!(expect(json, after_key, b':', "`:` after a field"));
            let key = if key.escaped {
                b"" as &[u8]
            } else {
                span(json, key.span)
            };
            if bytes_eq(key, b"dtype") && dtype.is_none() {
                let (value, after) = tri!(string(json, at));
                let text = span(json, value.span);
                dtype = match Dtype::from_name(text) {
                    Some(d) if !value.escaped => Some(d),
                    _ => {
                        return Err(Error::UnknownDtype {
                            name: TensorName::new(name),
                            dtype: TensorName::new(text),
                        });
                    }
                };
                at = after;
            } else if bytes_eq(key, b"shape") && shape.is_none() {
                at = tri!(expect(json, at, b'[', "a shape (a JSON array)"));
                let mut dims = Shape::empty();
                let mut count = Some(1_usize);
                if !is(json, at, b']') {
                    loop {
                        let (dim, after) = tri!(integer(json, at));
                        dims = dims.push(dim);
                        count = match count {
                            Some(c) => c.checked_mul(dim),
                            None => None,
                        };
                        if is(json, after, b',') {
                            at = skip_ws(json, after + 1);
                        } else {
                            at = tri!(expect(json, after, b']', "`,` or `]` in a shape"));
                            break;
                        }
                    }
                } else {
                    at = skip_ws(json, at + 1);
                }
                shape = Some((dims, count));
            } else if bytes_eq(key, b"data_offsets") && offsets.is_none() {
                at = tri!(expect(
                    json,
                    at,
                    b'[',
                    "data offsets (a JSON array of two integers)"
                ));
                let (begin, after) = tri!(integer(json, at));
                at = tri!(expect(json, after, b',', "`,` between two data offsets"));
                let (end, after) = tri!(integer(json, at));
                at = tri!(expect(json, after, b']', "`]` after two data offsets"));
                offsets = Some((begin, end));
            } else {
                return Err(syntax(
                    field_at,
                    "one of the fields dtype, shape and data_offsets, each once",
                ));
            }
            if is(json, at, b',') {
                at = skip_ws(json, at + 1);
            } else if is(json, at, b'}') {
                break;
            } else {
                return Err(syntax(at, "`,` or `}` in a tensor's description"));
            }
        }
    }
    let (Some(dtype), Some((shape, elements)), Some((begin, end))) = (dtype, shape, offsets) else {
        return Err(syntax(
            at,
            "all three fields dtype, shape and data_offsets before the end of a tensor's description",
        ));
    };
    let after = skip_ws(json, at + 1);
    // The bytes the tensor takes: elements times bits, a whole number of bytes, no overflow.
    let needed = match elements {
        Some(elements) => match elements.checked_mul(dtype.bits()) {
            Some(bits) if bits % 8 == 0 => Some(bits / 8),
            _ => None,
        },
        None => None,
    };
    let fits = match needed {
        Some(needed) => end >= begin && end - begin == needed,
        None => false,
    };
    if !fits {
        return Err(Error::TensorSize {
            name: TensorName::new(name),
            dtype,
            shape,
            needed,
            offsets: (begin, end),
        });
    }
    Ok((
        Info {
            dtype,
            shape,
            begin,
            end,
        },
        after,
    ))
}

/// A string's contents (between the quotes), and whether it holds escapes.
#[derive(Clone, Copy)]
struct Str {
    span: (usize, usize),
    escaped: bool,
}

/// The bytes of `json` in `range`.
const fn span(json: &[u8], (start, end): (usize, usize)) -> &[u8] {
    let (_, from_start) = json.split_at(start);
    from_start.split_at(end - start).0
}

/// Whether the byte at `at` is `b` (false past the end).
const fn is(json: &[u8], at: usize, b: u8) -> bool {
    at < json.len() && json[at] == b
}

/// A syntax error at `at` of the header (byte `8 + at` of the file).
const fn syntax(at: usize, expected: &'static str) -> Error {
    Error::Syntax {
        at: 8 + at,
        expected,
    }
}

/// The position of the first byte at or after `at` that is not JSON whitespace.
const fn skip_ws(json: &[u8], mut at: usize) -> usize {
    while at < json.len() && matches!(json[at], b' ' | b'\t' | b'\n' | b'\r') {
        at += 1;
    }
    at
}

/// Checks that the byte at `at` is `b`; the position after it and any whitespace.
const fn expect(json: &[u8], at: usize, b: u8, what: &'static str) -> Result<usize, Error> {
    if is(json, at, b) {
        Ok(skip_ws(json, at + 1))
    } else {
        Err(syntax(at, what))
    }
}

/// Checks that nothing but whitespace follows the header's closing `}` (which is before `at`).
const fn end_of_header(json: &[u8], at: usize) -> Result<(), Error> {
    let at = skip_ws(json, at);
    if at == json.len() {
        Ok(())
    } else {
        Err(syntax(at, "the end of the header after its JSON object"))
    }
}

/// The JSON string starting at `at`: its contents, checked (no control characters, valid
/// escapes), and the position after its closing quote and any whitespace.
const fn string(json: &[u8], at: usize) -> Result<(Str, usize), Error> {
    if !is(json, at, b'"') {
        return Err(syntax(at, "a string"));
    }
    let start = at + 1;
    let mut at = start;
    let mut escaped = false;
    loop {
        if at >= json.len() {
            return Err(syntax(at, "the closing `\"` of a string"));
        }
        match json[at] {
            b'"' => break,
            0..=0x1f => return Err(syntax(at, "a printable character in a string")),
            b'\\' => {
                escaped = true;
                if at + 1 >= json.len() {
                    return Err(syntax(at + 1, "an escape sequence"));
                }
                match json[at + 1] {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
                    b'u' => {
                        let mut code: u32 = 0;
                        let mut i = 0;
                        while i < 4 {
                            let digit = if at + 2 + i < json.len() {
                                match json[at + 2 + i] {
                                    c @ b'0'..=b'9' => (c - b'0') as u32,
                                    c @ b'a'..=b'f' => (c - b'a' + 10) as u32,
                                    c @ b'A'..=b'F' => (c - b'A' + 10) as u32,
                                    _ => 16,
                                }
                            } else {
                                16
                            };
                            if digit == 16 {
                                return Err(syntax(
                                    at + 2 + i,
                                    "four hexadecimal digits after `\\u`",
                                ));
                            }
                            code = code * 16 + digit;
                            i += 1;
                        }
                        // Surrogates (halves of characters outside the BMP) are refused rather
                        // than paired: no name or metadata of a net needs them.
                        if code >= 0xd800 && code <= 0xdfff {
                            return Err(syntax(
                                at,
                                "a `\\u` escape that is not a UTF-16 surrogate",
                            ));
                        }
                        at += 6;
                    }
                    _ => return Err(syntax(at + 1, "an escape sequence")),
                }
            }
            _ => at += 1,
        }
    }
    Ok((
        Str {
            span: (start, at),
            escaped,
        },
        skip_ws(json, at + 1),
    ))
}

/// The non-negative integer starting at `at` (JSON digits, no leading zero, no fraction or
/// exponent, fitting in `usize`), and the position after it and any whitespace.
const fn integer(json: &[u8], at: usize) -> Result<(usize, usize), Error> {
    if !(at < json.len() && json[at].is_ascii_digit()) {
        return Err(syntax(at, "a non-negative integer"));
    }
    if json[at] == b'0' && at + 1 < json.len() && json[at + 1].is_ascii_digit() {
        return Err(syntax(at, "an integer without leading zeros"));
    }
    let mut value: usize = 0;
    let mut end = at;
    while end < json.len() && json[end].is_ascii_digit() {
        value = match value.checked_mul(10) {
            Some(v) => match v.checked_add((json[end] - b'0') as usize) {
                Some(v) => v,
                None => return Err(syntax(at, "an integer that fits in 64 bits")),
            },
            None => return Err(syntax(at, "an integer that fits in 64 bits")),
        };
        end += 1;
    }
    if end < json.len() && matches!(json[end], b'.' | b'e' | b'E') {
        return Err(syntax(end, "a whole number (no fraction or exponent)"));
    }
    Ok((value, skip_ws(json, end)))
}

/// Checks the value of `__metadata__` starting at `at` (`null`, or an object whose values are
/// strings); the position after it and any whitespace.
const fn metadata(json: &[u8], at: usize) -> Result<usize, Error> {
    if is(json, at, b'n') && at + 4 <= json.len() && bytes_eq(span(json, (at, at + 4)), b"null") {
        return Ok(skip_ws(json, at + 4));
    }
    if !is(json, at, b'{') {
        return Err(Error::Metadata { at: 8 + at });
    }
    let mut at = skip_ws(json, at + 1);
    if is(json, at, b'}') {
        return Ok(skip_ws(json, at + 1));
    }
    loop {
        let (_, after_key) = tri!(string(json, at));
        at = tri!(expect(
            json,
            after_key,
            b':',
            "`:` after a key of __metadata__"
        ));
        if !is(json, at, b'"') {
            return Err(Error::Metadata { at: 8 + at });
        }
        let (_, after_value) = tri!(string(json, at));
        at = after_value;
        if is(json, at, b',') {
            at = skip_ws(json, at + 1);
        } else if is(json, at, b'}') {
            return Ok(skip_ws(json, at + 1));
        } else {
            return Err(syntax(at, "`,` or `}` in __metadata__"));
        }
    }
}
