//! What a net expects to find in a file: its tensors' names, dtypes and shapes, as constants.

use super::{Dtype, TensorName, bytes_eq};
use crate::Scalar;

/// An element type that a weights file stores: `f32` (`F32`) or `f64` (`F64`).
///
/// ```
/// use constmat::format::{Dtype, Element};
/// assert_eq!(<f32 as Element>::DTYPE, Dtype::F32);
/// let mut bytes = Vec::new();
/// 1.5_f64.extend_le(&mut bytes);
/// assert_eq!(f64::from_le(&bytes), 1.5);
/// ```
pub trait Element: Scalar {
    /// The dtype a file names it by.
    const DTYPE: Dtype;

    /// Appends the little-endian bytes of `self` (with the `alloc` feature).
    #[cfg(feature = "alloc")]
    fn extend_le(self, out: &mut alloc::vec::Vec<u8>);

    /// Reads a value from the first `size_of::<Self>()` little-endian bytes.
    ///
    /// # Panics
    ///
    /// When `bytes` is shorter than that.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $dtype:ident) => {
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$dtype;

            #[cfg(feature = "alloc")]
            fn extend_le(self, out: &mut alloc::vec::Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }

            fn from_le(bytes: &[u8]) -> Self {
                let (chunk, _) = bytes
                    .split_first_chunk::<{ size_of::<$t>() }>()
                    .expect("at least one element's bytes");
                <$t>::from_le_bytes(*chunk)
            }
        }
    };
}
element!(f32, F32);
element!(f64, F64);

/// One tensor a layer reads: `{module}.{field}`, its dtype and its shape.
///
/// `module` counts from the layer's first `nn.Sequential` module (see [`NetSpec`]).
///
/// ```
/// use constmat::format::{Dtype, NetSpec};
/// use constmat::nn::{Dense, Layer, Relu};
///
/// let NetSpec::Layer { modules, tensors } = <Dense<f32, 784, 128, Relu> as Layer>::SPEC else {
///     unreachable!("a dense layer is one layer")
/// };
/// assert_eq!(modules, 2); // Linear, then ReLU
/// assert_eq!((tensors[0].field, tensors[0].dtype, tensors[0].shape), ("weight", Dtype::F32, &[128, 784][..]));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorSpec {
    /// The module holding it, counted from the layer's first module.
    pub module: usize,
    /// The field, e.g. `"weight"`.
    pub field: &'static str,
    /// The dtype it must have.
    pub dtype: Dtype,
    /// The shape it must have, PyTorch's way (`[out, in]` for a dense weight).
    pub shape: &'static [usize],
    /// For an integer tensor, the least and greatest values it may hold (an int8 weight is in
    /// `-127..=127`); `None` for any value of its dtype. (Float tensors must be finite.)
    pub range: Option<(i32, i32)>,
    /// Whether the tensor holds quantization scales (an `F32` tensor: an int8 layer's
    /// `input_scale` and `output_scale`): then each value must be a positive normal number,
    /// `f32::MIN_POSITIVE..=f32::MAX`, not only finite ([`Error::ScaleOutOfRange`](super::Error::ScaleOutOfRange)).
    /// `false` for every other tensor.
    pub scale: bool,
    /// Whether the tensor is a statistic that training keeps but does not learn (PyTorch's
    /// buffers: batch normalization's `running_mean`, `running_var` and `num_batches_tracked`):
    /// an optimizer's weight decay leaves it. `false` for every learned tensor.
    pub buffer: bool,
}

/// The tensors of a net, in order, named as PyTorch's `nn.Sequential` names them: a layer of a
/// net and its activation are modules numbered from 0, and a tensor is `"{module}.{field}"`.
///
/// A layer's spec lists its own tensors; a chain joins two specs, numbering the second part's
/// modules after the first's. It is a constant of every [`Layer`](crate::nn::Layer), so the
/// compile-time baking, the run-time loader and saving all read the same description.
///
/// ```
/// use constmat::format::NetSpec;
/// use constmat::nn::{Dense, Layer, Relu};
///
/// type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];
/// let spec: NetSpec = Net::SPEC;
/// assert_eq!((spec.modules(), spec.tensor_count()), (3, 4));
/// let tensor = spec.tensor(2).unwrap();
/// assert_eq!((tensor.module, tensor.field.as_str(), tensor.spec.shape), (2, "weight", &[10, 128][..]));
/// ```
///
/// A block (a residual block's branches) is one module whose tensors are named after its
/// parts, as PyTorch names a module's children: `"{module}.{part}.{inner module}.{field}"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetSpec {
    /// One layer: how many `nn.Sequential` modules it spans (a `Linear` and its activation
    /// are two), and its tensors.
    Layer {
        /// The number of modules.
        modules: usize,
        /// The tensors, modules counted from the layer's first.
        tensors: &'static [TensorSpec],
    },
    /// The first part, then the rest (whose modules are numbered after the first part's).
    Chain(&'static NetSpec, &'static NetSpec),
    /// A module made of named parts, each numbered from 0 inside it (PyTorch: a module whose
    /// children are `nn.Sequential`s, as a residual block's `branch` and `shortcut`): tensor
    /// `{inner module}.{field}` of part `name` is `{module}.{name}.{inner module}.{field}`.
    /// The block's own tensors (an int8 block's addition) follow its parts', named
    /// `{module}.{field}`.
    Block {
        /// The number of modules it spans in the net (1, or 2 with an activation after it).
        modules: usize,
        /// Its parts, in the order of their tensors.
        parts: &'static [Part],
        /// Its own tensors (`module` 0), after the parts'.
        tensors: &'static [TensorSpec],
    },
    /// A `Flatten` module: images of `channels x height x width` in, one row of their values
    /// out; no tensors. Recorded so that a file whose next layer reads another number of
    /// values can be told which image size that number implies ([`NetSpec::flattened`]).
    Flatten {
        /// The images' channels.
        channels: usize,
        /// Their height.
        height: usize,
        /// Their width.
        width: usize,
    },
}

/// A named part of a [`NetSpec::Block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Its name in the block: `"branch"`, `"shortcut"`.
    pub name: &'static str,
    /// Its tensors, modules numbered from 0.
    pub spec: &'static NetSpec,
}

/// The part of a tensor's name after its module: the field (`weight`), or inside a block the
/// path to it (`branch.0.weight`). Built in `const fn`s, at most [`CAPACITY`](Self::CAPACITY)
/// bytes.
///
/// ```
/// use constmat::format::FieldPath;
/// let path = FieldPath::new("branch").then_module(3).then("weight");
/// assert_eq!(path.as_str(), "branch.3.weight");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FieldPath {
    bytes: [u8; FieldPath::CAPACITY],
    len: usize,
}

impl FieldPath {
    /// The most bytes a path holds: enough for blocks nested a few deep.
    pub const CAPACITY: usize = 96;

    /// The path of one field.
    ///
    /// # Panics
    ///
    /// When `field` is longer than [`CAPACITY`](Self::CAPACITY) (at compile time, an error).
    #[must_use]
    pub const fn new(field: &str) -> Self {
        Self {
            bytes: [0; Self::CAPACITY],
            len: 0,
        }
        .push(field.as_bytes())
    }

    const fn push(mut self, bytes: &[u8]) -> Self {
        assert!(
            self.len + bytes.len() <= Self::CAPACITY,
            "a tensor's name inside nested blocks is longer than 96 bytes: nest fewer blocks"
        );
        let mut i = 0;
        while i < bytes.len() {
            self.bytes[self.len + i] = bytes[i];
            i += 1;
        }
        self.len += bytes.len();
        self
    }

    /// This path, then `.{module}`: the module of a part.
    #[must_use]
    pub const fn then_module(self, module: usize) -> Self {
        let mut digits = [0; 20];
        let (mut n, mut at) = (module, digits.len());
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(b".").push(digits.split_at(at).1)
    }

    /// This path, then `.{field}`.
    #[must_use]
    pub const fn then(self, field: &str) -> Self {
        self.push(b".").push(field.as_bytes())
    }

    /// The path's bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8] {
        self.bytes.split_at(self.len).0
    }

    /// The path as text (it is built from `&str`s and digits).
    #[must_use]
    pub const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.as_bytes()) {
            Ok(text) => text,
            Err(_) => "",
        }
    }
}

impl core::fmt::Debug for FieldPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the layers being read from a file sit: at the top of the net's `nn.Sequential`, or
/// inside a part of a block (whose modules are numbered from 0 again). What a baked
/// [`Residual`](crate::nn::Residual) hands its branches. Not for direct use.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    module: usize,
    prefix: Option<FieldPath>,
}

impl Scope {
    /// The top of the net.
    pub const TOP: Self = Self {
        module: 0,
        prefix: None,
    };

    /// The net's module and the rest of the name of tensor `{module}.{field}` of this scope.
    #[must_use]
    pub const fn key(&self, module: usize, field: &str) -> (usize, FieldPath) {
        match self.prefix {
            None => (module, FieldPath::new(field)),
            Some(prefix) => (self.module, prefix.then_module(module).then(field)),
        }
    }

    /// The scope of part `name` of the block at `module` of this scope.
    #[must_use]
    pub const fn part(&self, module: usize, name: &str) -> Self {
        let (module, path) = self.key(module, name);
        Self {
            module,
            prefix: Some(path),
        }
    }
}

/// One tensor of a net, found by [`NetSpec::tensor`]: its module in the net, the rest of its
/// name, and what it must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorAt {
    /// The net's module (`nn.Sequential` index) holding it.
    pub module: usize,
    /// The rest of its name: `weight`, or `branch.0.weight` inside a block.
    pub field: FieldPath,
    /// Its dtype, shape and value rules.
    pub spec: &'static TensorSpec,
}

impl TensorAt {
    /// Its full name, `"{module}.{field}"`.
    #[must_use]
    pub const fn name(&self) -> TensorName {
        TensorName::of(self.module, self.field.as_str())
    }
}

impl NetSpec {
    /// How many `nn.Sequential` modules the net spans.
    #[must_use]
    pub const fn modules(&self) -> usize {
        match self {
            Self::Layer { modules, .. } => *modules,
            Self::Chain(first, rest) => first.modules() + rest.modules(),
            Self::Block { modules, .. } => *modules,
            Self::Flatten { .. } => 1,
        }
    }

    /// How many tensors the net has.
    #[must_use]
    pub const fn tensor_count(&self) -> usize {
        match self {
            Self::Layer { tensors, .. } => tensors.len(),
            Self::Chain(first, rest) => first.tensor_count() + rest.tensor_count(),
            Self::Block { parts, tensors, .. } => {
                let parts: &'static [Part] = parts;
                let (mut count, mut i) = (tensors.len(), 0);
                while i < parts.len() {
                    count += parts[i].spec.tensor_count();
                    i += 1;
                }
                count
            }
            Self::Flatten { .. } => 0,
        }
    }

    /// The images `[channels, height, width]` that module `module` flattens, when it is a
    /// `Flatten` (outside a block).
    ///
    /// ```
    /// use constmat::nn::Layer;
    ///
    /// type Net = constmat::net![Input<f32, 2, 4, 4>, Conv2d<2, 3, 3>, Flatten, Dense<12, 5>];
    /// assert_eq!(Net::SPEC.flattened(1), Some([3, 2, 2]));
    /// assert_eq!(Net::SPEC.flattened(2), None);
    /// ```
    #[must_use]
    pub const fn flattened(&self, module: usize) -> Option<[usize; 3]> {
        match self {
            Self::Flatten {
                channels,
                height,
                width,
            } if module == 0 => Some([*channels, *height, *width]),
            Self::Chain(first, rest) => {
                let split = first.modules();
                if module < split {
                    first.flattened(module)
                } else {
                    rest.flattened(module - split)
                }
            }
            _ => None,
        }
    }

    /// Tensor `k` (first layer first, in each layer's order) with its module in the net and the
    /// rest of its name, or `None` when `k >= tensor_count()`.
    #[must_use]
    pub const fn tensor(&self, k: usize) -> Option<TensorAt> {
        match self {
            Self::Layer { tensors, .. } => {
                let tensors: &'static [TensorSpec] = tensors;
                if k < tensors.len() {
                    Some(TensorAt {
                        module: tensors[k].module,
                        field: FieldPath::new(tensors[k].field),
                        spec: &tensors[k],
                    })
                } else {
                    None
                }
            }
            Self::Chain(first, rest) => {
                let split = first.tensor_count();
                if k < split {
                    first.tensor(k)
                } else {
                    match rest.tensor(k - split) {
                        Some(mut tensor) => {
                            tensor.module += first.modules();
                            Some(tensor)
                        }
                        None => None,
                    }
                }
            }
            Self::Block { parts, tensors, .. } => {
                let parts: &'static [Part] = parts;
                let tensors: &'static [TensorSpec] = tensors;
                let (mut k, mut i) = (k, 0);
                while i < parts.len() {
                    let count = parts[i].spec.tensor_count();
                    if k < count {
                        return match parts[i].spec.tensor(k) {
                            Some(inner) => Some(TensorAt {
                                module: 0,
                                field: FieldPath::new(parts[i].name)
                                    .then_module(inner.module)
                                    .then(inner.field.as_str()),
                                spec: inner.spec,
                            }),
                            None => None,
                        };
                    }
                    k -= count;
                    i += 1;
                }
                if k < tensors.len() {
                    Some(TensorAt {
                        module: tensors[k].module,
                        field: FieldPath::new(tensors[k].field),
                        spec: &tensors[k],
                    })
                } else {
                    None
                }
            }
            Self::Flatten { .. } => None,
        }
    }

    /// The tensor named `{module}.{field}` (`field` a path inside a block), if the net has one.
    #[must_use]
    pub const fn find(&self, module: usize, field: &[u8]) -> Option<&'static TensorSpec> {
        match self {
            Self::Layer { tensors, .. } => {
                let tensors: &'static [TensorSpec] = tensors;
                let mut i = 0;
                while i < tensors.len() {
                    if tensors[i].module == module && bytes_eq(tensors[i].field.as_bytes(), field) {
                        return Some(&tensors[i]);
                    }
                    i += 1;
                }
                None
            }
            Self::Chain(first, rest) => {
                let split = first.modules();
                if module < split {
                    first.find(module, field)
                } else {
                    rest.find(module - split, field)
                }
            }
            Self::Block { parts, tensors, .. } => {
                let parts: &'static [Part] = parts;
                let tensors: &'static [TensorSpec] = tensors;
                if module != 0 {
                    return None;
                }
                let mut i = 0;
                while i < tensors.len() {
                    if tensors[i].module == module && bytes_eq(tensors[i].field.as_bytes(), field) {
                        return Some(&tensors[i]);
                    }
                    i += 1;
                }
                i = 0;
                while i < parts.len() {
                    let name = parts[i].name.as_bytes();
                    if field.len() > name.len()
                        && field[name.len()] == b'.'
                        && bytes_eq(field.split_at(name.len()).0, name)
                    {
                        let rest = field.split_at(name.len() + 1).1;
                        return match parse_name(rest) {
                            Some((inner, field)) => parts[i].spec.find(inner, field),
                            None => None,
                        };
                    }
                    i += 1;
                }
                None
            }
            Self::Flatten { .. } => None,
        }
    }
}

/// `name` read as `"{module}.{field}"`: the module in decimal without leading zeros, a dot, a
/// non-empty field. `None` for any other name (`fc1.weight`, `01.bias`).
pub(crate) const fn parse_name(name: &[u8]) -> Option<(usize, &[u8])> {
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
    if at == 0 || (at > 1 && name[0] == b'0') || at + 1 >= name.len() || name[at] != b'.' {
        return None;
    }
    Some((module, name.split_at(at + 1).1))
}
