//! The static layer types, their activations, and building them from safetensors in `const`.

use core::fmt::Debug;
use core::marker::PhantomData;

use num_traits::Float;

use super::header::{File, Message, Name, bytes_eq, parse_name, unexpected};

// The activation markers. With a heap, they are `nn`'s own types, so that `embed::Relu` and
// `nn::Relu` are one type (a heap net's and a static net's types then name the same
// activations, and the compiler's messages can keep calling it `Relu`). Without a heap, `nn`
// does not exist and this module defines them.
#[cfg(feature = "alloc")]
pub use crate::nn::{Identity, Relu, Sigmoid, Tanh};
#[cfg(not(feature = "alloc"))]
pub use markers::{Identity, Relu, Sigmoid, Tanh};

#[cfg(not(feature = "alloc"))]
mod markers {
    //! The activation markers when `nn` is not there (no `alloc`).

    /// `f(z) = z`: no activation (a classifier's last layer, whose outputs are logits).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Identity;

    /// `f(z) = max(z, 0)`, with NaN passed through.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Relu;

    /// `f(z) = 1 / (1 + e^-z)`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Sigmoid;

    /// `f(z) = tanh z`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Tanh;
}

/// An element-wise activation of a [`StaticDense`] layer: [`Identity`], [`Relu`], [`Sigmoid`]
/// or [`Tanh`].
///
/// The markers are `nn`'s (`embed::Relu` is [`nn::Relu`](crate::nn::Relu)) when the crate has a
/// heap, and this module's own without one; the functions are the same, bit for bit, as
/// [`nn::Activation::apply`](crate::nn::Activation::apply).
///
/// ```
/// use constmat::embed::{Activation, Identity, Relu, Sigmoid, Tanh};
///
/// assert_eq!(<Identity as Activation>::apply(-2.0_f32), -2.0);
/// assert_eq!(<Relu as Activation>::apply(-2.0_f32), 0.0);
/// assert!(<Relu as Activation>::apply(f32::NAN).is_nan());
/// assert_eq!(<Sigmoid as Activation>::apply(0.0_f64), 0.5);
/// assert_eq!(<Sigmoid as Activation>::apply(-1000.0_f64), 0.0); // no overflow
/// assert_eq!(<Tanh as Activation>::apply(0.0_f64), 0.0);
/// assert_eq!(<Relu as Activation>::TORCH_MODULE, Some("ReLU"));
/// ```
pub trait Activation: Copy + Default + Debug + Send + Sync + 'static {
    /// The marker value, for building a layer in a `const fn` (where `Default` cannot be
    /// called).
    const VALUE: Self;

    /// The name of the matching PyTorch module, or `None` when PyTorch has none (the
    /// identity). A layer with a module takes one more index in `nn.Sequential` numbering.
    const TORCH_MODULE: Option<&'static str>;

    /// `f(z)`.
    fn apply<T: Float>(z: T) -> T;
}

impl Activation for Identity {
    const VALUE: Self = Identity;
    const TORCH_MODULE: Option<&'static str> = None;

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        z
    }
}

impl Activation for Relu {
    const VALUE: Self = Relu;
    const TORCH_MODULE: Option<&'static str> = Some("ReLU");

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        // `z > 0` rather than `max`, so that a NaN propagates instead of turning into 0.
        if z > T::zero() || z.is_nan() {
            z
        } else {
            T::zero()
        }
    }
}

impl Activation for Sigmoid {
    const VALUE: Self = Sigmoid;
    const TORCH_MODULE: Option<&'static str> = Some("Sigmoid");

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        // Two branches so that neither exp overflows: e^-z for z >= 0, e^z for z < 0.
        if z >= T::zero() {
            T::one() / (T::one() + (-z).exp())
        } else {
            let e = z.exp();
            e / (T::one() + e)
        }
    }
}

impl Activation for Tanh {
    const VALUE: Self = Tanh;
    const TORCH_MODULE: Option<&'static str> = Some("Tanh");

    #[inline]
    fn apply<T: Float>(z: T) -> T {
        z.tanh()
    }
}

/// A dense layer with `I` inputs, `O` outputs and activation `A`, stored inline: `A(W·x + b)`.
///
/// The counterpart of [`nn::Dense`](crate::nn::Dense) without a heap: the weight is an
/// `[[T; I]; O]` array (PyTorch's `out x in` orientation), so a `static` of this type lives in
/// read-only memory and is used in place. Build one at compile time from a safetensors file
/// with [`from_safetensors`](Self::from_safetensors) (one layer) or
/// [`include_net!`](crate::include_net) (a whole net), or from arrays with
/// [`new`](Self::new); run it through [`Infer`](super::Infer).
///
/// The layer is aligned to 64 bytes, with the weight first, so that the weight starts on a
/// cache line, and so does every row when it is a multiple of 64 bytes long (784 `f32`s are):
/// the SIMD kernels then never load a vector that straddles two lines, which makes a
/// prediction of the MNIST net about a quarter faster (`docs/embedding.md`). It costs at most
/// 63 bytes of padding per layer. Not `Copy`: a layer can be hundreds of kilobytes, so a copy
/// has to be asked for (`clone`).
///
/// ```
/// use constmat::embed::{Infer, Relu, StaticDense};
///
/// static LAYER: StaticDense<f32, 3, 2, Relu> =
///     StaticDense::new([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0]], [0.5, 0.5]);
/// let mut out = [0.0; 2];
/// LAYER.forward(&[2.0, 3.0, 4.0], &mut out);
/// assert_eq!(out, [2.5, 0.0]); // relu(2 + 0.5), relu(-3 + 0.5)
/// ```
#[derive(Debug, Clone, PartialEq)]
#[repr(C, align(64))]
pub struct StaticDense<T, const I: usize, const O: usize, A = Identity> {
    /// `O x I`: row `o` holds the weights into output `o`.
    pub weight: [[T; I]; O],
    /// One bias per output.
    pub bias: [T; O],
    /// The activation (a zero-sized marker).
    pub activation: A,
}

impl<T, const I: usize, const O: usize, A: Activation> StaticDense<T, I, O, A> {
    /// A layer with the given parameters; usable in a `static` initializer.
    ///
    /// ```
    /// use constmat::embed::{Identity, StaticDense};
    /// const HALF: StaticDense<f64, 2, 1, Identity> = StaticDense::new([[0.5, 0.5]], [0.0]);
    /// assert_eq!(HALF.weight, [[0.5, 0.5]]);
    /// ```
    #[must_use]
    pub const fn new(weight: [[T; I]; O], bias: [T; O]) -> Self {
        Self {
            weight,
            bias,
            activation: A::VALUE,
        }
    }
}

/// The decoding of one element type: `from_safetensors` for `f32` (`F32`) and `f64` (`F64`).
macro_rules! from_safetensors {
    ($t:ty, $dtype:literal, $lower:literal, $bits:ty, $exponent_mask:expr, |$chunk:ident| $assemble:expr) => {
        impl<const I: usize, const O: usize, A: Activation> StaticDense<$t, I, O, A> {
            #[doc = concat!(
                "The layer stored in the safetensors file `bytes` as the tensors ",
                "`{module}.weight` (`", $dtype, "`, shape `[O, I]`) and `{module}.bias` (`",
                $dtype, "`, shape `[O]`): [`nn.Sequential`](crate::nn::Parameters) naming.\n\n",
                "A `const fn`: called in a `static` or `const` initializer, it runs while the ",
                "program is compiled, and the program holds only the decoded numbers. (Called ",
                "at run time, it builds the layer on the stack.) Only this layer's tensors are ",
                "read; [`bake`](crate::embed::bake) also checks the rest of the file.\n\n",
                "# Panics\n\n",
                "(At compile time, as a build error, when called in a `static` or `const`.) ",
                "With a message naming the tensor, worded as the runtime loader's ",
                "([`io::safetensors`](crate::io::safetensors)), when the file is not valid ",
                "safetensors, when a tensor is missing, has another dtype or shape, or holds a ",
                "NaN or infinity, or when the file holds another tensor of this module (or of ",
                "the activation's module that follows it).\n\n",
                "```\n",
                "use constmat::embed::{Relu, StaticDense};\n",
                "use constmat::io::safetensors;\n",
                "use constmat::nn::{Dense, Parameters};\n\n",
                "// A file with one zero layer (at run time here, to have bytes to show).\n",
                "let bytes = safetensors::to_bytes(&Dense::<", stringify!($t),
                ", 3, 2, constmat::nn::Relu>::zeros(), &[]);\n",
                "let layer = StaticDense::<", stringify!($t),
                ", 3, 2, Relu>::from_safetensors(&bytes, 0);\n",
                "assert_eq!(layer.weight, [[0.0; 3]; 2]);\n\n",
                "let wrong = std::panic::catch_unwind(|| {\n",
                "    StaticDense::<", stringify!($t), ", 4, 2, Relu>::from_safetensors(&bytes, 0)\n",
                "});\n",
                "let message = *wrong.unwrap_err().downcast::<String>().unwrap();\n",
                "assert_eq!(message, \"tensor 0.weight: expected ", $lower,
                " [2, 4], found ", $lower, " [2, 3]\");\n",
                "```",
            )]
            #[must_use]
            pub const fn from_safetensors(bytes: &[u8], module: usize) -> Self {
                const SIZE: usize = size_of::<$t>();
                let file = File::new(bytes);
                let weight_name = Name {
                    module,
                    field: "weight",
                };
                let bias_name = Name {
                    module,
                    field: "bias",
                };
                let weight_bytes = tensor(&file, weight_name, $dtype.as_bytes(), &[O, I], SIZE);
                let bias_bytes = tensor(&file, bias_name, $dtype.as_bytes(), &[O], SIZE);
                no_other_tensors(&file, module, A::TORCH_MODULE.is_some());

                let mut weight = [[0.0; I]; O];
                let mut o = 0;
                while o < O {
                    let (_, row) = weight_bytes.split_at(o * I * SIZE);
                    decode(row, &mut weight[o], weight_name, o * I);
                    o += 1;
                }
                let mut bias = [0.0; O];
                decode(bias_bytes, &mut bias, bias_name, 0);
                Self::new(weight, bias)
            }
        }

        /// Decodes `out.len()` little-endian values from the start of `bytes`, rejecting NaN
        /// and infinities (whose exponent bits are all ones). `first` is the row-major index
        /// of `out[0]` in the tensor `name`, for the message.
        const fn decode(bytes: &[u8], out: &mut [$t], name: Name<'_>, first: usize) {
            let (chunks, _) = bytes.as_chunks::<{ size_of::<$t>() }>();
            let n = out.len();
            let mut i = 0;
            while i < n {
                // Assembled by hand: `from_le_bytes` would be a call, and calls are what costs
                // most when the compiler interprets this loop (it halves the build time).
                let $chunk = chunks[i];
                let bits: $bits = $assemble;
                if bits & $exponent_mask == $exponent_mask {
                    Message::new()
                        .str("tensor ")
                        .name(name)
                        .str(": element ")
                        .number(first + i)
                        .str(" is not a finite number")
                        .fail()
                }
                out[i] = <$t>::from_bits(bits);
                i += 1;
            }
        }
    };
}

mod decode_f32 {
    use super::*;
    from_safetensors!(f32, "F32", "f32", u32, 0x7f80_0000, |b| {
        (b[0] as u32) | (b[1] as u32) << 8 | (b[2] as u32) << 16 | (b[3] as u32) << 24
    });
}
mod decode_f64 {
    use super::*;
    from_safetensors!(f64, "F64", "f64", u64, 0x7ff0_0000_0000_0000, |b| {
        (b[0] as u64)
            | (b[1] as u64) << 8
            | (b[2] as u64) << 16
            | (b[3] as u64) << 24
            | (b[4] as u64) << 32
            | (b[5] as u64) << 40
            | (b[6] as u64) << 48
            | (b[7] as u64) << 56
    });
}

/// The data bytes of tensor `name`, after checking that it exists with `dtype` and `shape` and
/// that its offsets are consistent.
const fn tensor<'a>(
    file: &File<'a>,
    name: Name<'_>,
    dtype: &[u8],
    shape: &[usize],
    element_size: usize,
) -> &'a [u8] {
    let Some(entry) = file.find(name) else {
        Message::new()
            .str("tensor ")
            .name(name)
            .str(" is missing: expected ")
            .dtype(dtype)
            .str(" ")
            .shape(shape, shape.len())
            .fail()
    };
    let found_dtype = file.bytes_of(entry.dtype);
    let mut same_shape = entry.rank == shape.len();
    let mut i = 0;
    while same_shape && i < shape.len() {
        same_shape = entry.dims[i] == shape[i];
        i += 1;
    }
    if !same_shape || !bytes_eq(found_dtype, dtype) {
        Message::new()
            .str("tensor ")
            .name(name)
            .str(": expected ")
            .dtype(dtype)
            .str(" ")
            .shape(shape, shape.len())
            .str(", found ")
            .dtype(found_dtype)
            .str(" ")
            .shape(&entry.dims, entry.rank)
            .fail()
    }
    file.check_extent(name, &entry);
    let mut elements = 1;
    let mut i = 0;
    while i < shape.len() {
        elements *= shape[i];
        i += 1;
    }
    if entry.end - entry.begin != elements * element_size {
        Message::new()
            .str("not a valid safetensors file: tensor ")
            .name(name)
            .str(" has ")
            .number(entry.end - entry.begin)
            .str(" data bytes, but its shape needs ")
            .number(elements * element_size)
            .fail()
    }
    file.data(&entry)
}

/// Fails if the file holds a tensor of module `module` other than its weight and bias, or (when
/// `activation_module`) any tensor of the activation's module `module + 1`.
const fn no_other_tensors(file: &File<'_>, module: usize, activation_module: bool) {
    let mut members = file.members();
    while let Some((key, _)) = members.next(file) {
        let key = file.bytes_of(key);
        if let Some(name) = parse_name(key) {
            let field = name.field.as_bytes();
            let stray =
                (name.module == module && !bytes_eq(field, b"weight") && !bytes_eq(field, b"bias"))
                    || (activation_module && name.module == module + 1);
            if stray {
                unexpected(key)
            }
        }
    }
}

/// `first` then `rest`: the output of `first` is the input of `rest`.
///
/// The counterpart of [`nn::Chain`](crate::nn::Chain) for static layers. Write a net's type with
/// [`static_net!`](crate::static_net) rather than nesting it by hand; build it with
/// [`include_net!`](crate::include_net) or [`new`](Self::new). It runs through
/// [`Infer`](super::Infer) only when the widths chain (`rest`'s input is `first`'s output).
///
/// ```
/// use constmat::embed::{Identity, Infer, Relu, StaticChain, StaticDense};
///
/// static NET: constmat::static_net![StaticDense<f32, 2, 2, Relu>, StaticDense<f32, 2, 1>] =
///     StaticChain::new(
///         StaticDense::new([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]),
///         StaticDense::new([[1.0, -1.0]], [0.0]),
///     );
/// let mut out = [0.0];
/// NET.forward(&[3.0, -5.0], &mut out);
/// assert_eq!(out, [3.0]); // relu leaves 3 and 0; 3 - 0
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StaticChain<A, N> {
    /// The first layer.
    pub first: A,
    /// Everything after it.
    pub rest: N,
}

impl<A, N> StaticChain<A, N> {
    /// `first` followed by `rest`; usable in a `static` initializer.
    ///
    /// ```
    /// use constmat::embed::{Identity, StaticChain, StaticDense};
    /// const NET: StaticChain<StaticDense<f32, 1, 1>, StaticDense<f32, 1, 1>> =
    ///     StaticChain::new(StaticDense::new([[2.0]], [0.0]), StaticDense::new([[3.0]], [1.0]));
    /// assert_eq!(NET.rest.bias, [1.0]);
    /// ```
    #[must_use]
    pub const fn new(first: A, rest: N) -> Self {
        Self { first, rest }
    }
}

/// A heap layer's parameters copied into the static layout (with the `alloc` feature).
///
/// For a net loaded or trained at run time that should run like a baked one. The value is as
/// large as the weights (437,568 bytes for the MNIST net) and is built on the stack; put it in
/// a `Box` (or a `static` through [`include_net!`](crate::include_net)) rather than keeping
/// large ones in local variables.
///
/// ```
/// use constmat::embed::{Infer, Relu, StaticDense};
/// use constmat::nn::{Dense, Parameters};
///
/// let mut heap = Dense::<f32, 3, 2, Relu>::zeros();
/// heap.bias.as_mut_slice().copy_from_slice(&[1.0, -1.0]);
/// let layer = StaticDense::from(&heap);
/// assert_eq!(layer.bias, [1.0, -1.0]);
/// assert_eq!(layer.predict(&[0.0; 3]), 0);
/// ```
#[cfg(feature = "alloc")]
impl<T: Copy, const I: usize, const O: usize, A: Activation> From<&crate::nn::Dense<T, I, O, A>>
    for StaticDense<T, I, O, A>
{
    fn from(dense: &crate::nn::Dense<T, I, O, A>) -> Self {
        Self::new(*dense.weight.as_array(), dense.bias.as_array()[0])
    }
}

/// A heap net's parameters copied into the static layout, layer by layer (with the `alloc`
/// feature); see the [`StaticDense`] conversion.
///
/// ```
/// use constmat::embed::{Relu, StaticDense};
/// use constmat::nn::{Dense, Identity, Parameters};
///
/// type Heap = constmat::net![Dense<f64, 2, 3, Relu>, Dense<f64, 3, 1, Identity>];
/// type Static = constmat::static_net![StaticDense<f64, 2, 3, Relu>, StaticDense<f64, 3, 1>];
/// let baked: Static = (&Heap::zeros()).into();
/// assert_eq!(baked.rest.weight, [[0.0; 3]]);
/// ```
#[cfg(feature = "alloc")]
impl<'a, A, N, SA, SN> From<&'a crate::nn::Chain<A, N>> for StaticChain<SA, SN>
where
    SA: From<&'a A>,
    SN: From<&'a N>,
{
    fn from(chain: &'a crate::nn::Chain<A, N>) -> Self {
        Self::new(SA::from(&chain.first), SN::from(&chain.rest))
    }
}

/// How a static net is laid out in PyTorch's `nn.Sequential` numbering (see
/// [`Parameters`](crate::nn::Parameters)): a dense layer is one `Linear` module, plus one for
/// its activation unless that is [`Identity`].
///
/// ```
/// use constmat::embed::{Identity, Layout, Relu, StaticDense};
///
/// type Net = constmat::static_net![StaticDense<f32, 4, 3, Relu>, StaticDense<f32, 3, 2, Identity>];
/// assert_eq!(Net::MODULES, 3); // Linear, ReLU, Linear: tensors 0.* and 2.*
/// ```
pub trait Layout {
    /// How many `nn.Sequential` modules the net spans.
    const MODULES: usize;
}

impl<T, const I: usize, const O: usize, A: Activation> Layout for StaticDense<T, I, O, A> {
    const MODULES: usize = 1 + A::TORCH_MODULE.is_some() as usize;
}

impl<A: Layout, N: Layout> Layout for StaticChain<A, N> {
    const MODULES: usize = A::MODULES + N::MODULES;
}

/// A safetensors file known at compile time, as a type: the plumbing of
/// [`include_net!`](crate::include_net) and [`net_from_safetensors!`](crate::net_from_safetensors).
///
/// The bytes have to reach the layers' `const` constructors through types, because stable Rust
/// cannot call a trait's methods in `const` code: each layer type instead has an associated
/// constant [`Bake::BAKED`], computed from the file it is given as a type parameter.
///
/// ```
/// use constmat::embed::{Infer, Relu, SafetensorsFile, StaticDense};
///
/// // What `include_net!("../../models/mnist-784-128-64-10.safetensors")` writes for you.
/// struct Weights;
/// impl SafetensorsFile for Weights {
///     const BYTES: &'static [u8] = include_bytes!("../../models/mnist-784-128-64-10.safetensors");
/// }
/// type Mnist = constmat::static_net![
///     StaticDense<f32, 784, 128, Relu>,
///     StaticDense<f32, 128, 64, Relu>,
///     StaticDense<f32, 64, 10>,
/// ];
/// static NET: Mnist = constmat::embed::bake::<Weights, Mnist>();
/// assert!(NET.predict(&[0.0; 784]) < 10);
/// ```
pub trait SafetensorsFile {
    /// The whole file.
    const BYTES: &'static [u8];
    /// The `nn.Sequential` index of the module where the net being read starts: 0 for a whole
    /// net; [`Skip`] sets it for the later layers of a chain.
    const FIRST_MODULE: usize = 0;
}

/// The same file as `F`, read from the first module after the layers `L`: how a
/// [`StaticChain`] hands the file on to its `rest`.
#[derive(Debug)]
pub struct Skip<F, L>(PhantomData<fn() -> (F, L)>);

impl<F: SafetensorsFile, L: Layout> SafetensorsFile for Skip<F, L> {
    const BYTES: &'static [u8] = F::BYTES;
    const FIRST_MODULE: usize = F::FIRST_MODULE + L::MODULES;
}

/// A static net whose value can be read from the file `F` at compile time.
///
/// Implemented by [`StaticDense`] for `f32` and `f64`, and by [`StaticChain`] of such layers.
/// Use [`bake`] (or the macros built on it), which also checks that the file holds no tensor
/// the net lacks.
pub trait Bake<F: SafetensorsFile>: Layout + Sized {
    /// The net read from `F`, starting at module `F::FIRST_MODULE`.
    const BAKED: Self;
}

impl<F: SafetensorsFile, const I: usize, const O: usize, A: Activation> Bake<F>
    for StaticDense<f32, I, O, A>
{
    const BAKED: Self = Self::from_safetensors(F::BYTES, F::FIRST_MODULE);
}

impl<F: SafetensorsFile, const I: usize, const O: usize, A: Activation> Bake<F>
    for StaticDense<f64, I, O, A>
{
    const BAKED: Self = Self::from_safetensors(F::BYTES, F::FIRST_MODULE);
}

impl<F: SafetensorsFile, A: Bake<F>, N: Bake<Skip<F, A>>> Bake<F> for StaticChain<A, N> {
    const BAKED: Self = Self::new(A::BAKED, N::BAKED);
}

/// The net `N` stored in the safetensors file `F`, with every tensor checked against `N`'s
/// type; what [`include_net!`](crate::include_net) expands to.
///
/// In a `static` initializer this runs at compile time, and a file that does not fit `N` fails
/// the build with the tensor named: each layer checks its own tensors (see
/// [`StaticDense::from_safetensors`]), and [`check_file`] the rest of the file.
///
/// The layers' values are associated constants ([`Bake::BAKED`]), so the compiler computes
/// them even when `bake` itself is called at run time; the run-time call only copies them.
/// See [`SafetensorsFile`] for an example.
#[must_use]
pub const fn bake<F: SafetensorsFile, N: Bake<F>>() -> N {
    check_file::<F, N>();
    N::BAKED
}

/// Checks what no layer of `N` reads in the file `F`: that the file holds no tensor outside the
/// net (none named other than `{module}.{field}`, `__metadata__` aside; none before module
/// `F::FIRST_MODULE` or past the net's last module), that every tensor's description is
/// well-formed and its bytes inside the file, and that the file ends where its tensors do.
/// (The tensors inside the net's range are checked by its layers.)
///
/// # Panics
///
/// With the runtime loader's wording: `the file holds tensor {name}, which the net does not
/// have`, or `not a valid safetensors file: ...` (a build error when called in a `static`
/// initializer).
///
/// ```
/// use constmat::embed::{Relu, SafetensorsFile, StaticDense, check_file};
///
/// struct Weights;
/// impl SafetensorsFile for Weights {
///     const BYTES: &'static [u8] = include_bytes!("../../models/mnist-784-128-64-10.safetensors");
/// }
/// type FirstTwo = constmat::static_net![StaticDense<f32, 784, 128, Relu>, StaticDense<f32, 128, 64, Relu>];
/// let check = std::panic::catch_unwind(|| check_file::<Weights, FirstTwo>());
/// let message = *check.unwrap_err().downcast::<String>().unwrap();
/// assert_eq!(message, "the file holds tensor 4.bias, which the net does not have");
/// ```
pub const fn check_file<F: SafetensorsFile, N: Layout>() {
    File::new(F::BYTES).check_all(F::FIRST_MODULE, N::MODULES);
}
