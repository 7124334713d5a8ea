//! What a net expects to find in a file: its tensors' names, dtypes and shapes, as constants.

use super::{Dtype, bytes_eq};
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
/// let (module, tensor) = spec.tensor(2).unwrap();
/// assert_eq!((module, tensor.field, tensor.shape), (2, "weight", &[10, 128][..]));
/// ```
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
}

impl NetSpec {
    /// How many `nn.Sequential` modules the net spans.
    #[must_use]
    pub const fn modules(&self) -> usize {
        match self {
            Self::Layer { modules, .. } => *modules,
            Self::Chain(first, rest) => first.modules() + rest.modules(),
        }
    }

    /// How many tensors the net has.
    #[must_use]
    pub const fn tensor_count(&self) -> usize {
        match self {
            Self::Layer { tensors, .. } => tensors.len(),
            Self::Chain(first, rest) => first.tensor_count() + rest.tensor_count(),
        }
    }

    /// Tensor `k` (first layer first, in each layer's order) with its absolute module index,
    /// or `None` when `k >= tensor_count()`.
    #[must_use]
    pub const fn tensor(&self, k: usize) -> Option<(usize, &'static TensorSpec)> {
        match self {
            Self::Layer { tensors, .. } => {
                let tensors: &'static [TensorSpec] = tensors;
                if k < tensors.len() {
                    Some((tensors[k].module, &tensors[k]))
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
                        Some((module, spec)) => Some((module + first.modules(), spec)),
                        None => None,
                    }
                }
            }
        }
    }

    /// The tensor named `{module}.{field}`, if the net has one.
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
        }
    }
}
