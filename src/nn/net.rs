//! `net!`: a chain of layers written as PyTorch's `nn.Sequential` is, every image size computed.

// The items the documentation below links to (the macro itself names every path in full).
#[cfg(doc)]
use super::{
    AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Dense, DepthwiseConv2d, Dropout, Flatten, Heap,
    MaxPool2d, ProjectedResidual, QConv2d, QDense, Residual, Softmax, conv_output_size,
    pool_output_size,
};

/// The type of a network made of the given layers, first to last: `net![L1, L2, L3]` is
/// `Chain<L1, Chain<L2, L3>>`.
///
/// The same type serves training (the layers' default storage is [`Heap`]) and, through
/// [`Baked`](crate::embed::Baked), a net baked into a `static`.
///
/// ```
/// use constmat::nn::{Chain, Dense, Relu, Identity};
///
/// type A = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2, Identity>];
/// type B = Chain<Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2, Identity>>;
/// let same: fn(A) -> B = |net| net;
/// # let _ = same;
/// ```
///
/// # Nets on images
///
/// Started with `Input<T, C, H, W>` (the element type, and the channels, height and width of
/// one image), the layers are written as PyTorch constructs them, and the macro computes every
/// image size (with [`conv_output_size`] and [`pool_output_size`]), so that none is written by
/// hand:
///
/// | in `net!` | PyTorch | the layer |
/// | --- | --- | --- |
/// | `Conv2d<C, OC, K>`, `Conv2d<C, OC, K, A>` | `nn.Conv2d(C, OC, K)` (+ the activation) | [`Conv2d`], stride 1, no padding |
/// | `Conv2d<C, OC, K, S, P>`, `Conv2d<C, OC, K, S, P, A>` | `nn.Conv2d(C, OC, K, stride=S, padding=P)` | [`Conv2d`] |
/// | `DepthwiseConv2d<C, OC, K>`, `DepthwiseConv2d<C, OC, K, S, P[, A]>` (and with `A` after `K`) | `nn.Conv2d(C, OC, K, stride=S, padding=P, groups=C)` | [`DepthwiseConv2d`] |
/// | `Conv2d<C, OC, (KH, KW), S, P[, A]>` | `nn.Conv2d(C, OC, (KH, KW), stride=S, padding=P)` | [`Conv2d`] (or [`QConv2d`]) with `KW` |
/// | `GlobalAvgPool2d` | `nn.AdaptiveAvgPool2d(1)` | [`GlobalAvgPool2d`](super::GlobalAvgPool2d) |
/// | `ZeroPad2d<P>`, `ZeroPad2d<L, R, T, B>` | `nn.ZeroPad2d(P)`, `nn.ZeroPad2d((L, R, T, B))` | [`ZeroPad2d`](super::ZeroPad2d) |
/// | `MaxPool2d<K>`, `MaxPool2d<K, S>` | `nn.MaxPool2d(K)`, `nn.MaxPool2d(K, stride=S)` | [`MaxPool2d`] |
/// | `AvgPool2d<K>`, `AvgPool2d<K, S>` | `nn.AvgPool2d(K)`, `nn.AvgPool2d(K, stride=S)` | [`AvgPool2d`] |
/// | `Flatten` | `nn.Flatten()` | [`Flatten`] |
/// | `Dense<I, O>`, `Dense<I, O, A>` | `nn.Linear(I, O)` (+ the activation) | [`Dense`] |
/// | `Softmax` (after a `Dense`) | `nn.Softmax(dim=1)` | [`Softmax`] |
/// | `BatchNorm2d<C>`, `BatchNorm2d<C, A>` | `nn.BatchNorm2d(C)` (+ the activation) | [`BatchNorm2d`] |
/// | `BatchNorm1d<N>`, `BatchNorm1d<N, A>` (after `Flatten` or a `Dense`) | `nn.BatchNorm1d(N)` (+ the activation) | [`BatchNorm1d`] |
/// | `Dropout<P>` | `nn.Dropout(P / 100)` | [`Dropout`] |
/// | `Residual<[L1, L2, ..]>`, `Residual<[..], A>` | a module computing `A(branch(x) + x)` | [`Residual`] |
/// | `Residual<[L1, ..], [S1, ..]>`, `Residual<[..], [..], A>` | `A(branch(x) + shortcut(x))` | [`ProjectedResidual`] |
///
/// Each argument is one token: a literal, a name, or a `{ .. }` block. The channels and widths
/// a layer is written with are checked against what reaches it, so a mistake is a compile error
/// naming both sizes; PyTorch finds the same mistakes at run time.
///
/// ```
/// use constmat::nn::{Layer, Relu};
///
/// /// LeNet-5 on MNIST: nn.Sequential(Conv2d(1, 6, 5, padding=2), ReLU(), MaxPool2d(2),
/// /// Conv2d(6, 16, 5), ReLU(), MaxPool2d(2), Flatten(), Linear(400, 120), ReLU(),
/// /// Linear(120, 84), ReLU(), Linear(84, 10)).
/// type LeNet = constmat::net![
///     Input<f32, 1, 28, 28>,
///     Conv2d<1, 6, 5, 1, 2, Relu>, // 6 x 28 x 28
///     MaxPool2d<2>,                // 6 x 14 x 14
///     Conv2d<6, 16, 5, Relu>,      // 16 x 10 x 10
///     MaxPool2d<2>,                // 16 x 5 x 5
///     Flatten,                     // 400
///     Dense<400, 120, Relu>,
///     Dense<120, 84, Relu>,
///     Dense<84, 10>,
/// ];
/// assert_eq!(LeNet::SPEC.modules(), 12); // PyTorch's numbering: 0.weight, 3.weight, 7.weight, ...
/// ```
///
/// With an `i8` input, `Input<i8, C, H, W>`, the same layers are spelled the same way and the
/// macro writes their int8 forms ([`QConv2d`], [`QDepthwiseConv2d`](super::QDepthwiseConv2d),
/// [`QDense`], [`QSoftmax`](super::QSoftmax), [`QResidual`](super::QResidual),
/// [`QProjectedResidual`](super::QProjectedResidual); the pooling layers and `Flatten` on `i8`):
/// the type of a quantized net baked, as a `no_std` crate without `alloc` names it (where the
/// quantizer's `<Net as Quantize>::Quantized` is not available). Batch normalization has none:
/// it is folded into the layer before it first.
///
/// ```
/// use constmat::nn::{MaxPool2d, QConv2d, QDense, Relu};
///
/// type Int8 = constmat::net![Input<i8, 1, 8, 8>, Conv2d<1, 2, 3, Relu>, MaxPool2d<2>, Flatten, Dense<18, 4>];
/// type Spelled = constmat::nn::Chain<
///     QConv2d<1, 2, 3, 1, 0, 8, 8, 6, 6, Relu>,
///     constmat::nn::Chain<
///         MaxPool2d<i8, 2, 2, 2, 6, 6, 3, 3>,
///         constmat::nn::Chain<constmat::nn::Flatten<i8, 2, 3, 3, 18>, QDense<18, 4>>,
///     >,
/// >;
/// let same: fn(Int8) -> Spelled = |net| net;
/// # let _ = same;
/// ```
///
/// A `Dense` whose input width is not what `Flatten` gives does not compile:
///
/// ```compile_fail,E0080
/// # use constmat::nn::{Parameters, Relu};
/// type Wrong = constmat::net![
///     Input<f32, 1, 28, 28>,
///     Conv2d<1, 6, 5, Relu>,   // 6 x 24 x 24
///     MaxPool2d<2>,            // 6 x 12 x 12
///     Flatten,                 // 864
///     Dense<784, 10>,          // `Dense<784, 10>` takes 784 inputs, but `Flatten` gives 6 x 12 x 12 = 864
/// ];
/// let _ = Wrong::zeros();
/// ```
///
/// A layer spelled as in the plain form, with its element type, or a stride without its
/// padding, is an error that says so: ``"`Dense<f32, 400, 10>`: in `net!`'s image form a dense
/// layer is `Dense<inputs, outputs>` or `Dense<inputs, outputs, Activation>`; its element type
/// is `Input`'s"``, ``"`Conv2d<1, 6, 5, 2>`: a stride comes with its padding, `Conv2d<in, out,
/// kernel, stride, padding>` (then, optionally, the activation)"``.
///
/// ```compile_fail
/// type Wrong = constmat::net![Input<f32, 1, 20, 20>, Conv2d<1, 1, 3>, Flatten, Dense<f32, 324, 10>];
/// ```
///
/// ```compile_fail
/// type Wrong = constmat::net![Input<f32, 1, 20, 20>, Conv2d<1, 6, 5, 2>, Flatten, Dense<384, 10>];
/// ```
///
/// So is a convolution or a pooling written as in the image form, in a net without `Input`:
/// ``"`Conv2d<1, 6, 5>` in a net without `Input`: a net of images starts with `Input<T,
/// channels, height, width>`, which gives the sizes of its images, as in `net![Input<f32, 1,
/// 28, 28>, Conv2d<1, 6, 5>, ...]`"`` (`tests/ui/fail/net_image_layer_without_input.rs`).
// `Input` is a word of this macro, not a type: a search for it should land here.
#[doc(alias = "Input")]
#[macro_export]
macro_rules! net {
    // The image form's state: the element type, the channels, height and width that reach the
    // next layer, and whether those come straight from `Input`. A layer that fails its size
    // check passes a height and width of 0 on; after the first layer such a 0 is that mistake's
    // consequence, not checked again (a mistake is one error, where it is made), while a 0 of
    // `Input`'s goes through the checks as any size.
    // An int8 net: the same layers in their int8 forms (`QConv2d`, `QDense`).
    (Input<i8, $c:tt, $h:tt, $w:tt> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@image (i8) ($c) ($h) ($w) (true) $($($rest)*)?)
    };
    (Input<$t:ty, $c:tt, $h:tt, $w:tt> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@image ($t) ($c) ($h) ($w) (true) $($($rest)*)?)
    };
    // Image layers in their short forms (sizes written as literals) in a net without `Input`.
    // A type of the same name with other parameters (the full `Conv2d<T, ..>`, a user's alias
    // whose first parameter is a type) is a plain layer.
    (Conv2d<$ci:literal, $co:tt, $k:tt $(, $s:tt $(, $p:tt $(, $a:tt)?)?)?> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input Conv2d<$ci, $co, $k $(, $s $(, $p $(, $a)?)?)?>)
    };
    (DepthwiseConv2d<$ci:literal, $co:tt, $k:tt $(, $s:tt $(, $p:tt $(, $a:tt)?)?)?> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input DepthwiseConv2d<$ci, $co, $k $(, $s $(, $p $(, $a)?)?)?>)
    };
    (BatchNorm2d<$c:literal $(, $a:tt)?> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input BatchNorm2d<$c $(, $a)?>)
    };
    (Residual<[$($b:tt)*] $($x:tt)*) => {
        $crate::__net_image!(@no_input Residual)
    };
    (MaxPool2d<$k:literal $(, $s:tt)?> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input MaxPool2d<$k $(, $s)?>)
    };
    (AvgPool2d<$k:literal $(, $s:tt)?> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input AvgPool2d<$k $(, $s)?>)
    };
    (GlobalAvgPool2d $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input GlobalAvgPool2d)
    };
    (ZeroPad2d<$p:literal $(, $q:tt)*> $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input ZeroPad2d<$p $(, $q)*>)
    };
    (Flatten $(, $($rest:tt)*)?) => {
        $crate::__net_image!(@no_input Flatten)
    };
    // Dense layers whose widths are literals: each one's inputs are checked against the
    // outputs of the one before, where the net is written.
    (Dense<$t:ty, $i:tt, $o:literal $(, $a:ty)?> $(, $($rest:tt)*)?) => {
        $crate::__net_dense!(($o) (Dense<$t, $i,
            { $crate::__net_image!(@nonzero_named ($crate::__net_dense!(@name $t, $i, $o $(, $a)?)) "outputs" $o) }
            $(, $a)?>) $(, $($rest)*)?)
    };
    ($layer:ty $(,)?) => { $layer };
    ($layer:ty, $($rest:ty),+ $(,)?) => { $crate::nn::Chain<$layer, $crate::net!($($rest),+)> };
}

/// The plain form of [`net!`](crate::net) after a `Dense` layer whose output width is the
/// literal `$o`: a next `Dense` written with literal widths has its inputs checked against it
/// (the check returns `$o`, so that the type chains and a mistake is one error, where the net
/// is written). Not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __net_dense {
    // The layer as written, for messages: `Dense<f32, 128, 10>`.
    (@name $t:ty, $i:tt, $o:tt $(, $a:ty)?) => {
        ::core::concat!(
            "Dense<", ::core::stringify!($t), ", ", ::core::stringify!($i), ", ",
            ::core::stringify!($o) $(, ", ", ::core::stringify!($a))?, ">"
        )
    };
    (($o:tt) ($($layer:tt)*) $(,)?) => { $($layer)* };
    (($o:tt) ($($layer:tt)*), Dense<$t:ty, $i:literal, $o2:literal $(, $a:ty)?> $(, $($rest:tt)*)?) => {
        $crate::nn::Chain<$($layer)*, $crate::__net_dense!(($o2) (Dense<$t, {
            $crate::__at!(($i) $crate::nn::__inputs($crate::__net_dense!(@name $t, $i, $o2 $(, $a)?), $i, $o))
        }, { $crate::__net_image!(@nonzero_named ($crate::__net_dense!(@name $t, $i, $o2 $(, $a)?)) "outputs" $o2) } $(, $a)?>) $(, $($rest)*)?)>
    };
    (($o:tt) ($($layer:tt)*), $($rest:tt)+) => {
        $crate::nn::Chain<$($layer)*, $crate::net!($($rest)+)>
    };
}

/// The image form of [`net!`](crate::net): reads one layer, computes the size it gives, and
/// goes on with the rest. Not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __net_image {
    // A size of a layer, written `$v`, checked not to be 0 where it is written (`$name`: the
    // layer as written, from `@name`).
    (@nonzero_named ($name:expr) $what:literal $v:tt) => {
        $crate::__at!(($v) $crate::nn::__nonzero(::core::concat!("`", $name, "`"), $what, $v))
    };
    // Convolutions, plain and depthwise: (in, out, kernel[, stride, padding][, activation]).
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt Conv2d<$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@convolution Conv2d $t $c $h $w $from_input <$($arg),+> $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt DepthwiseConv2d<$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@convolution DepthwiseConv2d $t $c $h $w $from_input <$($arg),+> $($rest)*)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt> $($rest:tt)*) => {
        $crate::__net_image!(@conv $kind $t $c $h $w $from_input ($crate::__net_image!(@name $kind $ci, $co, $k))
            ($ci, $co, $k, 1, 0, $crate::nn::Identity) $($rest)*)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:literal> $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($s) ::core::concat!(
            "`", ::core::stringify!($kind), "<", ::core::stringify!($ci, $co, $k, $s),
            ">`: a stride comes with its padding, `", ::core::stringify!($kind),
            "<in, out, kernel, stride, padding>` (then, optionally, the activation)"
        ))
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $a:tt> $($rest:tt)*) => {
        $crate::__net_image!(@conv $kind $t $c $h $w $from_input ($crate::__net_image!(@name $kind $ci, $co, $k, $a))
            ($ci, $co, $k, 1, 0, $a) $($rest)*)
    };
    // The activation where the padding goes: the built-in activations by name (a padding may
    // be a constant's name too).
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:tt, Relu> $($rest:tt)*) => {
        $crate::__net_image!(@stride_without_padding $kind<$ci, $co, $k, $s, Relu>)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:tt, Relu6> $($rest:tt)*) => {
        $crate::__net_image!(@stride_without_padding $kind<$ci, $co, $k, $s, Relu6>)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:tt, Sigmoid> $($rest:tt)*) => {
        $crate::__net_image!(@stride_without_padding $kind<$ci, $co, $k, $s, Sigmoid>)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:tt, Tanh> $($rest:tt)*) => {
        $crate::__net_image!(@stride_without_padding $kind<$ci, $co, $k, $s, Tanh>)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:tt, Identity> $($rest:tt)*) => {
        $crate::__net_image!(@stride_without_padding $kind<$ci, $co, $k, $s, Identity>)
    };
    (@stride_without_padding $kind:ident<$ci:tt, $co:tt, $k:tt, $s:tt, $a:ident>) => {
        // The activation named, so that its `use` is not reported unused.
        $crate::nn::__Mistake<{
            $crate::__at!(($s) ::core::compile_error!(::core::concat!(
                "`", ::core::stringify!($kind), "<", ::core::stringify!($ci, $co, $k, $s, $a),
                ">`: a stride comes with its padding, `", ::core::stringify!($kind),
                "<in, out, kernel, stride, padding, ", ::core::stringify!($a), ">`"
            )));
            let _ = ::core::marker::PhantomData::<$a>;
            0
        }>
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:tt, $p:tt> $($rest:tt)*) => {
        $crate::__net_image!(@conv $kind $t $c $h $w $from_input ($crate::__net_image!(@name $kind $ci, $co, $k, $s, $p))
            ($ci, $co, $k, $s, $p, $crate::nn::Identity) $($rest)*)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$ci:tt, $co:tt, $k:tt, $s:tt, $p:tt, $a:tt> $($rest:tt)*) => {
        $crate::__net_image!(@conv $kind $t $c $h $w $from_input ($crate::__net_image!(@name $kind $ci, $co, $k, $s, $p, $a))
            ($ci, $co, $k, $s, $p, $a) $($rest)*)
    };
    (@convolution $kind:ident $t:tt $c:tt $h:tt $w:tt $from_input:tt <$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($($arg),+) ::core::concat!(
            "`", ::core::stringify!($kind), "<", ::core::stringify!($($arg),+), ">`: expected `",
            ::core::stringify!($kind), "<in, out, kernel>`, `", ::core::stringify!($kind),
            "<in, out, kernel, stride, padding>`, each optionally followed by the activation"
        ))
    };
    // The input channels are checked against the channels that reach the layer (and the type
    // takes the latter, so that a mistake is one error, here).
    // A kernel of its own height and width, `(KH, KW)`: `Conv2d` (float or int8) takes one.
    (@conv $kind:ident $t:tt ($c:tt) ($h:tt) ($w:tt) ($from_input:tt) ($name:expr) ($ci:tt, $co:tt, ($kh:tt, $kw:tt), $s:tt, $p:tt, $a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::__net_image!(@conv_rect_type $kind $t ($name) ({ $crate::__at!(($ci) $crate::nn::__input_channels($name, $ci, $c)) },
                $co, $kh, $kw, $s, $p, $h, $w,
                { $crate::__at!(($kh) $crate::nn::__conv_output_size(::core::concat!("`", $name, "`"), "height", $from_input, $h, $kh, $s, $p)) },
                { $crate::__at!(($kw) $crate::nn::__conv_output_size(::core::concat!("`", $name, "`"), "width", $from_input, $w, $kw, $s, $p)) }, $a)))
            (@image $t ($co)
                ({ $crate::nn::__output_size_unchecked($from_input, $h, $kh, $s, $p) })
                ({ $crate::nn::__output_size_unchecked($from_input, $w, $kw, $s, $p) })
                (false))
            $($rest)*)
    };
    (@conv_rect_type Conv2d (i8) ($name:expr) ($ci:tt, $co:tt, $kh:tt, $kw:tt, $s:tt, $p:tt, $h:tt, $w:tt, $oh:tt, $ow:tt, $a:ty)) => {
        $crate::nn::QConv2d<$ci, { $crate::__net_image!(@nonzero_named ($name) "output channels" $co) }, $kh, $s, $p, $h, $w, $oh, $ow, $a, $crate::nn::Inline, $kw>
    };
    (@conv_rect_type Conv2d ($t:ty) ($name:expr) ($ci:tt, $co:tt, $kh:tt, $kw:tt, $s:tt, $p:tt, $h:tt, $w:tt, $oh:tt, $ow:tt, $a:ty)) => {
        $crate::nn::Conv2d<$t, $ci, { $crate::__net_image!(@nonzero_named ($name) "output channels" $co) }, $kh, $s, $p, $h, $w, $oh, $ow, $a, $crate::nn::Heap, $kw>
    };
    (@conv_rect_type $kind:ident $t:tt ($name:expr) ($ci:tt, $co:tt, $kh:tt, $($arg:tt)*)) => {
        $crate::__net_image!(@mistake ($kh) ::core::concat!(
            "`", ::core::stringify!($kind), "` with a kernel of its own height and width: only ",
            "`Conv2d` takes one; a depthwise convolution's kernel is square"
        ))
    };
    (@conv $kind:ident $t:tt ($c:tt) ($h:tt) ($w:tt) ($from_input:tt) ($name:expr) ($ci:tt, $co:tt, $k:tt, $s:tt, $p:tt, $a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::__net_image!(@conv_type $kind $t ($name) ({ $crate::__at!(($ci) $crate::nn::__input_channels($name, $ci, $c)) },
                $co, $k, $s, $p, $h, $w,
                { $crate::__at!(($k) $crate::nn::__conv_output_size(::core::concat!("`", $name, "`"), "height", $from_input, $h, $k, $s, $p)) },
                { $crate::__at!(($k) $crate::nn::__conv_output_size(::core::concat!("`", $name, "`"), "width", $from_input, $w, $k, $s, $p)) }, $a)))
            (@image $t ($co)
                ({ $crate::nn::__output_size_unchecked($from_input, $h, $k, $s, $p) })
                ({ $crate::nn::__output_size_unchecked($from_input, $w, $k, $s, $p) })
                (false))
            $($rest)*)
    };
    // Residual blocks: [branch layers][, [shortcut layers]][, activation]. The branch (and
    // the shortcut) read the sizes that reach the block; after it, an identity block gives
    // them unchanged (its type requires it), a projected one gives its branch's output.
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt Residual<[$($b:tt)+], [$($s:tt)+], $a:tt> $($rest:tt)*) => {
        $crate::__net_image!(@projected $t $c $h $w $from_input ($($b)+) ($($s)+) ($a) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt Residual<[$($b:tt)+], [$($s:tt)+]> $($rest:tt)*) => {
        $crate::__net_image!(@projected $t $c $h $w $from_input ($($b)+) ($($s)+) ($crate::nn::Identity) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt Residual<[$($b:tt)+], $a:tt> $($rest:tt)*) => {
        $crate::__net_image!(@residual $t $c $h $w $from_input ($($b)+) ($a) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt Residual<[$($b:tt)+]> $($rest:tt)*) => {
        $crate::__net_image!(@residual $t $c $h $w $from_input ($($b)+) ($crate::nn::Identity) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt Residual $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($($rest)*) ::core::concat!(
            "a residual block is `Residual<[layers]>`, ",
            "`Residual<[layers], Activation>` (the identity shortcut) or ",
            "`Residual<[layers], [shortcut layers]>`, then optionally the activation"
        ))
    };
    // Each block's type carries the check that its two parts give the same shape (evaluated
    // where the net is written, before the type's own bounds are); after it, the next layer
    // reads the branch's output size.
    (@residual $t:tt $c:tt $h:tt $w:tt $from_input:tt ($($b:tt)+) ($a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            (<$crate::__net_image!(@residual_type $t
                ($crate::__net_image!(@image $t $c $h $w $from_input $($b)+)) ($a))
                as $crate::nn::__Checked<{ $crate::__at!(($($b)+) $crate::nn::__residual_shapes(
                    ::core::concat!("Residual<[", ::core::stringify!($($b)+), "], ", ::core::stringify!($a), ">"),
                    "the identity shortcut (the block's input)",
                    $crate::__net_image!(@size $c $h $w $from_input ($($b)+)),
                    ($c, $h, $w),
                )) }>>::Type)
            (@image $t
                ({ $crate::__net_image!(@size_after CHANNELS $c $from_input $($b)+) })
                ({ $crate::__net_image!(@size_after HEIGHT $h $from_input $($b)+) })
                ({ $crate::__net_image!(@size_after WIDTH $w $from_input $($b)+) })
                (false))
            $($rest)*)
    };
    (@projected $t:tt $c:tt $h:tt $w:tt $from_input:tt ($($b:tt)+) ($($s:tt)+) ($a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            (<$crate::__net_image!(@projected_type $t
                ($crate::__net_image!(@image $t $c $h $w $from_input $($b)+))
                ($crate::__net_image!(@image $t $c $h $w $from_input $($s)+))
                ($a)
            ) as $crate::nn::__Checked<{ $crate::__at!(($($b)+) $crate::nn::__residual_shapes(
                    ::core::concat!(
                        "Residual<[", ::core::stringify!($($b)+), "], [", ::core::stringify!($($s)+),
                        "], ", ::core::stringify!($a), ">"
                    ),
                    "the shortcut",
                    $crate::__net_image!(@size $c $h $w $from_input ($($b)+)),
                    $crate::__net_image!(@size $c $h $w $from_input ($($s)+)),
                )) }>>::Type)
            (@image $t
                ({ $crate::__net_image!(@size_after CHANNELS $c $from_input $($b)+) })
                ({ $crate::__net_image!(@size_after HEIGHT $h $from_input $($b)+) })
                ({ $crate::__net_image!(@size_after WIDTH $w $from_input $($b)+) })
                (false))
            $($rest)*)
    };
    // The blocks' types: float, or int8 for an `Input<i8, ..>`.
    (@residual_type (i8) ($br:ty) ($a:ty)) => { $crate::nn::QResidual<$br, $a> };
    (@residual_type $t:tt ($br:ty) ($a:ty)) => { $crate::nn::Residual<$br, $a> };
    (@projected_type (i8) ($br:ty) ($sh:ty) ($a:ty)) => { $crate::nn::QProjectedResidual<$br, $sh, $a> };
    (@projected_type $t:tt ($br:ty) ($sh:ty) ($a:ty)) => { $crate::nn::ProjectedResidual<$br, $sh, $a> };
    // The channels, height and width of the image that a list of layers gives.
    (@size $c:tt $h:tt $w:tt $from_input:tt ($($l:tt)+)) => {
        (
            $crate::__net_image!(@size_after CHANNELS $c $from_input $($l)+),
            $crate::__net_image!(@size_after HEIGHT $h $from_input $($l)+),
            $crate::__net_image!(@size_after WIDTH $w $from_input $($l)+),
        )
    };
    // One size (`CHANNELS`, `HEIGHT` or `WIDTH`) of the image that a list of layers gives:
    // `__size_after` applies the layers' steps, read from the numbers they are written with, to
    // the size `$v`. `$v` is an argument of the function, not of a macro, so that the sizes after
    // a block hold the sizes before it once and unexpanded macros never nest from block to
    // block (read from the branch's type, they grew exponentially with the blocks: a ResNet-8
    // took 50 s to compile).
    (@size_after $dim:ident $v:tt $from_input:tt $($l:tt)+) => {
        $crate::nn::__size_after($v, $from_input, $crate::__net_image!(@steps $dim () $($l)+))
    };
    // The steps of a list of layers for one size. A layer this does not know, or a mistake, ends
    // the list: the layer's type reports it.
    (@steps $dim:ident ($($done:tt)*)) => { &[$($done)*] };
    (@steps $dim:ident ($($done:tt)*) , $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)*) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) Conv2d<$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)* $crate::__net_image!(@conv_step $dim ($($arg),+)),) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) DepthwiseConv2d<$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)* $crate::__net_image!(@conv_step $dim ($($arg),+)),) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) MaxPool2d<$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)* $crate::__net_image!(@pool_step $dim ($($arg),+)),) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) AvgPool2d<$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)* $crate::__net_image!(@pool_step $dim ($($arg),+)),) $($rest)*)
    };
    (@steps CHANNELS ($($done:tt)*) GlobalAvgPool2d $($rest:tt)*) => {
        $crate::__net_image!(@steps CHANNELS ($($done)* $crate::nn::__SizeStep::Keep,) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) GlobalAvgPool2d $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)* $crate::nn::__SizeStep::Set(1),) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) ZeroPad2d<$p:tt> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)*) ZeroPad2d<$p, $p, $p, $p> $($rest)*)
    };
    (@steps CHANNELS ($($done:tt)*) ZeroPad2d<$l:tt, $r:tt, $top:tt, $b:tt> $($rest:tt)*) => {
        $crate::__net_image!(@steps CHANNELS ($($done)* $crate::nn::__SizeStep::Keep,) $($rest)*)
    };
    (@steps HEIGHT ($($done:tt)*) ZeroPad2d<$l:tt, $r:tt, $top:tt, $b:tt> $($rest:tt)*) => {
        $crate::__net_image!(@steps HEIGHT ($($done)* $crate::nn::__SizeStep::Pad($top, $b),) $($rest)*)
    };
    (@steps WIDTH ($($done:tt)*) ZeroPad2d<$l:tt, $r:tt, $top:tt, $b:tt> $($rest:tt)*) => {
        $crate::__net_image!(@steps WIDTH ($($done)* $crate::nn::__SizeStep::Pad($l, $r),) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) BatchNorm2d<$($arg:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)* $crate::nn::__SizeStep::Keep,) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) Dropout<$p:tt> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim ($($done)* $crate::nn::__SizeStep::Keep,) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) Residual<[$($b:tt)+] $(, $part:tt)*> $($rest:tt)*) => {
        $crate::__net_image!(@steps $dim
            ($($done)* $crate::nn::__SizeStep::Block($crate::__net_image!(@steps $dim () $($b)+)),) $($rest)*)
    };
    (@steps $dim:ident ($($done:tt)*) $($rest:tt)+) => { &[$($done)* $crate::nn::__SizeStep::End] };
    // A convolution's step, from its arguments as written (the forms of `@convolution`).
    (@conv_step CHANNELS ($ci:tt, $co:tt $(, $arg:tt)*)) => { $crate::nn::__SizeStep::Set($co) };
    (@conv_step $dim:ident ($ci:tt, $co:tt, $k:tt $(, $a:tt)?)) => {
        $crate::__net_image!(@window_step $dim $k, 1, 0)
    };
    (@conv_step $dim:ident ($ci:tt, $co:tt, $k:tt, $s:tt, Relu)) => { $crate::nn::__SizeStep::End };
    (@conv_step $dim:ident ($ci:tt, $co:tt, $k:tt, $s:tt, Relu6)) => { $crate::nn::__SizeStep::End };
    (@conv_step $dim:ident ($ci:tt, $co:tt, $k:tt, $s:tt, Sigmoid)) => { $crate::nn::__SizeStep::End };
    (@conv_step $dim:ident ($ci:tt, $co:tt, $k:tt, $s:tt, Tanh)) => { $crate::nn::__SizeStep::End };
    (@conv_step $dim:ident ($ci:tt, $co:tt, $k:tt, $s:tt, Identity)) => { $crate::nn::__SizeStep::End };
    (@conv_step $dim:ident ($ci:tt, $co:tt, $k:tt, $s:tt, $p:tt $(, $a:tt)?)) => {
        $crate::__net_image!(@window_step $dim $k, $s, $p)
    };
    (@conv_step $dim:ident ($($arg:tt),+)) => { $crate::nn::__SizeStep::End };
    (@pool_step CHANNELS ($($arg:tt),+)) => { $crate::nn::__SizeStep::Keep };
    (@pool_step $dim:ident ($k:tt)) => { $crate::__net_image!(@window_step $dim $k, $k, 0) };
    (@pool_step $dim:ident ($k:tt, $s:tt)) => { $crate::__net_image!(@window_step $dim $k, $s, 0) };
    (@pool_step $dim:ident ($($arg:tt),+)) => { $crate::nn::__SizeStep::End };
    // A window's step along `$dim`: a kernel of its own height and width is `(KH, KW)`.
    (@window_step HEIGHT ($kh:tt, $kw:tt), $s:tt, $p:tt) => { $crate::nn::__SizeStep::Window($kh, $s, $p) };
    (@window_step WIDTH ($kh:tt, $kw:tt), $s:tt, $p:tt) => { $crate::nn::__SizeStep::Window($kw, $s, $p) };
    (@window_step $dim:ident $k:tt, $s:tt, $p:tt) => { $crate::nn::__SizeStep::Window($k, $s, $p) };
    // Batch normalization: (channels[, activation]), the sizes unchanged.
    (@image (i8) $c:tt $h:tt $w:tt $from_input:tt BatchNorm2d $($rest:tt)*) => {
        $crate::__net_image!(@conv_type BatchNorm2d (i8) ("") ($($rest)*))
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt BatchNorm2d<$ci:tt> $($rest:tt)*) => {
        $crate::__net_image!(@batch_norm $t $c $h $w $from_input ($crate::__net_image!(@name BatchNorm2d $ci))
            ($ci) ($crate::nn::Identity) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt BatchNorm2d<$ci:tt, $a:tt> $($rest:tt)*) => {
        $crate::__net_image!(@batch_norm $t $c $h $w $from_input ($crate::__net_image!(@name BatchNorm2d $ci, $a))
            ($ci) ($a) $($rest)*)
    };
    (@batch_norm ($($t:tt)+) ($c:tt) ($h:tt) ($w:tt) ($from_input:tt) ($name:expr) ($ci:tt) ($a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::BatchNorm2d<$($t)+, { $crate::__at!(($ci) $crate::nn::__input_channels($name, $ci, $c)) }, $h, $w, $a>)
            (@image ($($t)+) ($c) ($h) ($w) ($from_input))
            $($rest)*)
    };
    // The global average pool: the size that reaches it, then 1 x 1.
    (@image ($($t:tt)+) ($c:tt) ($h:tt) ($w:tt) $from_input:tt GlobalAvgPool2d $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::GlobalAvgPool2d<$($t)+, $c, $h, $w>)
            (@image ($($t)+) ($c) (1) (1) (false))
            $($rest)*)
    };
    // Zero padding: every side, or (left, right, top, bottom) as PyTorch's tuple.
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt ZeroPad2d<$p:tt> $($rest:tt)*) => {
        $crate::__net_image!(@image $t $c $h $w $from_input ZeroPad2d<$p, $p, $p, $p> $($rest)*)
    };
    (@image ($($t:tt)+) ($c:tt) ($h:tt) ($w:tt) $from_input:tt ZeroPad2d<$l:tt, $r:tt, $top:tt, $b:tt> $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::__net_image!(@pad_type ($($t)+) ($c, $top, $l, $b, $r, $h, $w,
                { $top + $h + $b }, { $l + $w + $r })))
            (@image ($($t)+) ($c) ({ $top + $h + $b }) ({ $l + $w + $r }) (false))
            $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt ZeroPad2d $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($($rest)*) ::core::concat!(
            "zero padding is `ZeroPad2d<padding>` (every side) or ",
            "`ZeroPad2d<left, right, top, bottom>` (PyTorch's order)"
        ))
    };
    (@pad_type (i8) ($($arg:tt)*)) => { $crate::nn::QZeroPad2d<$($arg)*> };
    (@pad_type ($t:ty) ($($arg:tt)*)) => { $crate::nn::ZeroPad2d<$t, $($arg)*> };
    // Max pooling: (window[, stride]); the stride is the window unless given.
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt MaxPool2d<$k:tt> $($rest:tt)*) => {
        $crate::__net_image!(@pool MaxPool2d $t $c $h $w $from_input ($crate::__net_image!(@name MaxPool2d $k))
            ($k, $k) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt MaxPool2d<$k:tt, $s:tt> $($rest:tt)*) => {
        $crate::__net_image!(@pool MaxPool2d $t $c $h $w $from_input ($crate::__net_image!(@name MaxPool2d $k, $s))
            ($k, $s) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt MaxPool2d<$k:tt, $s:tt, $($more:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($($more),+) ::core::concat!(
            "`MaxPool2d<", ::core::stringify!($k, $s, $($more),+), ">`: max pooling takes no padding, ",
            "`MaxPool2d<window>` or `MaxPool2d<window, stride>` (see `nn::pool_output_size`)"
        ))
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt AvgPool2d<$k:tt> $($rest:tt)*) => {
        $crate::__net_image!(@pool AvgPool2d $t $c $h $w $from_input ($crate::__net_image!(@name AvgPool2d $k))
            ($k, $k) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt AvgPool2d<$k:tt, $s:tt> $($rest:tt)*) => {
        $crate::__net_image!(@pool AvgPool2d $t $c $h $w $from_input ($crate::__net_image!(@name AvgPool2d $k, $s))
            ($k, $s) $($rest)*)
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt AvgPool2d<$k:tt, $s:tt, $($more:tt),+> $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($($more),+) ::core::concat!(
            "`AvgPool2d<", ::core::stringify!($k, $s, $($more),+), ">`: average pooling takes no padding, ",
            "`AvgPool2d<window>` or `AvgPool2d<window, stride>` (see `nn::pool_output_size`)"
        ))
    };
    (@pool $kind:ident ($($t:tt)+) ($c:tt) ($h:tt) ($w:tt) ($from_input:tt) ($name:expr) ($k:tt, $s:tt) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::$kind<$($t)+, $c, $k, $s, $h, $w,
                { $crate::__at!(($k) $crate::nn::__pool_output_size(::core::concat!("`", $name, "`"), "height", $from_input, $h, $k, $s)) },
                { $crate::__at!(($k) $crate::nn::__pool_output_size(::core::concat!("`", $name, "`"), "width", $from_input, $w, $k, $s)) }>)
            (@image ($($t)+) ($c)
                ({ $crate::nn::__output_size_unchecked($from_input, $h, $k, $s, 0) })
                ({ $crate::nn::__output_size_unchecked($from_input, $w, $k, $s, 0) })
                (false))
            $($rest)*)
    };
    // Dropout: the sample as it is, image or vector.
    (@image ($($t:tt)+) ($c:tt) ($h:tt) ($w:tt) ($from_input:tt) Dropout<$p:tt> $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::Dropout<[[[$($t)+; $w]; $h]; $c], $p>)
            (@image ($($t)+) ($c) ($h) ($w) ($from_input))
            $($rest)*)
    };
    (@vector ($($t:tt)+) (flatten $from_input:tt $c:tt $h:tt $w:tt) Dropout<$p:tt> $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::Dropout<[$($t)+; { ($c) * ($h) * ($w) }], $p>)
            (@vector ($($t)+) (flatten $from_input $c $h $w))
            $($rest)*)
    };
    (@vector ($($t:tt)+) (dense $o:tt) Dropout<$p:tt> $($rest:tt)*) => {
        $crate::__net_image!(@emit ($crate::nn::Dropout<[$($t)+; $o], $p>) (@vector ($($t)+) (dense $o)) $($rest)*)
    };
    // Flatten: the image becomes a vector of C·H·W.
    (@image ($($t:tt)+) ($c:tt) ($h:tt) ($w:tt) ($from_input:tt) Flatten $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::Flatten<$($t)+, $c, $h, $w, { ($c) * ($h) * ($w) }>)
            (@vector ($($t)+) (flatten $from_input $c $h $w))
            $($rest)*)
    };
    // Dense layers, on vectors: (in, out[, activation]); the inputs checked against what
    // reaches the layer.
    (@vector $t:tt $given:tt Dense<$i:tt, $o:tt> $($rest:tt)*) => {
        $crate::__net_image!(@dense $t $given ($crate::__net_image!(@name Dense $i, $o))
            ($i, $o, $crate::nn::Identity) $($rest)*)
    };
    (@vector $t:tt $given:tt Dense<$i:tt, $o:tt, $a:ty> $($rest:tt)*) => {
        $crate::__net_image!(@dense $t $given ($crate::__net_image!(@name Dense $i, $o, $a))
            ($i, $o, $a) $($rest)*)
    };
    // A softmax after a dense layer: its width.
    // Batch normalization of vectors: (width[, activation]), checked against what reaches it.
    (@vector (i8) $given:tt BatchNorm1d $($rest:tt)*) => {
        $crate::__net_image!(@conv_type BatchNorm1d (i8) ("") ($($rest)*))
    };
    (@vector $t:tt $given:tt BatchNorm1d<$n:tt> $($rest:tt)*) => {
        $crate::__net_image!(@batch_norm_1d $t $given ($crate::__net_image!(@name BatchNorm1d $n))
            ($n) ($crate::nn::Identity) $($rest)*)
    };
    (@vector $t:tt $given:tt BatchNorm1d<$n:tt, $a:tt> $($rest:tt)*) => {
        $crate::__net_image!(@batch_norm_1d $t $given ($crate::__net_image!(@name BatchNorm1d $n, $a))
            ($n) ($a) $($rest)*)
    };
    (@batch_norm_1d ($($t:tt)+) (dense $o:tt) ($name:expr) ($n:tt) ($a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::BatchNorm1d<$($t)+, { $crate::__at!(($n) $crate::nn::__inputs($name, $n, $o)) }, $a>)
            (@vector ($($t)+) (dense $o))
            $($rest)*)
    };
    (@batch_norm_1d ($($t:tt)+) (flatten $from_input:tt $c:tt $h:tt $w:tt) ($name:expr) ($n:tt) ($a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::nn::BatchNorm1d<$($t)+,
                { $crate::__at!(($n) $crate::nn::__flattened_inputs($name, $from_input, $n, ($c, $h, $w))) }, $a>)
            (@vector ($($t)+) (flatten $from_input $c $h $w))
            $($rest)*)
    };
    (@vector (i8) (dense $o:tt) Softmax $($rest:tt)*) => {
        $crate::__net_image!(@emit ($crate::nn::QSoftmax<$o>) (@vector (i8) (dense $o)) $($rest)*)
    };
    (@vector ($($t:tt)+) (dense $o:tt) Softmax $($rest:tt)*) => {
        $crate::__net_image!(@emit ($crate::nn::Softmax<$($t)+, $o>) (@vector ($($t)+) (dense $o)) $($rest)*)
    };
    (@dense $t:tt $given:tt ($name:expr) ($i:tt, $o:tt, $a:ty) $($rest:tt)*) => {
        $crate::__net_image!(@emit
            ($crate::__net_image!(@dense_type $t
                ({ $crate::__net_image!(@inputs $given $name, $i) },
                 { $crate::__net_image!(@nonzero_named ($name) "outputs" $o) }, $a)))
            (@vector $t (dense $o)) $($rest)*)
    };
    (@inputs (flatten $from_input:tt $c:tt $h:tt $w:tt) $name:expr, $i:tt) => {
        $crate::__at!(($i) $crate::nn::__flattened_inputs($name, $from_input, $i, ($c, $h, $w)))
    };
    (@inputs (dense $o:tt) $name:expr, $i:tt) => {
        $crate::__at!(($i) $crate::nn::__inputs($name, $i, $o))
    };
    // A layer as written, for messages: `Conv2d<8, 16, 5, Relu>`.
    (@name $kind:ident $first:tt $(, $arg:tt)*) => {
        ::core::concat!(
            ::core::stringify!($kind), "<", ::core::stringify!($first)
            $(, ", ", ::core::stringify!($arg))*, ">"
        )
    };
    // The layer types: float, or int8 for an `Input<i8, ..>`; a convolution's output channels
    // checked not to be 0 where written (a depthwise one's with its filters).
    (@conv_type Conv2d (i8) ($name:expr) ($ci:tt, $co:tt, $k:tt, $s:tt, $p:tt, $h:tt, $w:tt, $oh:tt, $ow:tt, $a:ty)) => {
        $crate::nn::QConv2d<$ci, { $crate::__net_image!(@nonzero_named ($name) "output channels" $co) }, $k, $s, $p, $h, $w, $oh, $ow, $a>
    };
    (@conv_type DepthwiseConv2d (i8) ($name:expr) ($ci:tt, $co:tt, $k:tt, $s:tt, $p:tt, $h:tt, $w:tt, $oh:tt, $ow:tt, $a:ty)) => {
        $crate::nn::QDepthwiseConv2d<$ci, { $crate::__at!(($co) $crate::nn::__depthwise_filters($ci, $co)) }, $k, $s, $p, $h, $w, $oh, $ow, $a>
    };
    (@conv_type $kind:ident (i8) ($name:expr) ($($arg:tt)*)) => {
        $crate::__net_image!(@mistake ($($arg)*) ::core::concat!(
            "`", ::core::stringify!($kind), "` has no int8 form: fold it into the layer before it ",
            "(`", ::core::stringify!($kind), "::fold_into`) and write the int8 net without it, as ",
            "TensorFlow Lite does"
        ))
    };
    (@conv_type DepthwiseConv2d ($t:ty) ($name:expr) ($ci:tt, $co:tt, $k:tt, $s:tt, $p:tt, $h:tt, $w:tt, $oh:tt, $ow:tt, $a:ty)) => {
        $crate::nn::DepthwiseConv2d<$t, $ci, { $crate::__at!(($co) $crate::nn::__depthwise_filters($ci, $co)) }, $k, $s, $p, $h, $w, $oh, $ow, $a>
    };
    (@conv_type $kind:ident ($t:ty) ($name:expr) ($ci:tt, $co:tt, $k:tt, $s:tt, $p:tt, $h:tt, $w:tt, $oh:tt, $ow:tt, $a:ty)) => {
        $crate::nn::$kind<$t, $ci, { $crate::__net_image!(@nonzero_named ($name) "output channels" $co) }, $k, $s, $p, $h, $w, $oh, $ow, $a>
    };
    (@dense_type (i8) ($i:tt, $o:tt, $a:ty)) => { $crate::nn::QDense<$i, $o, $a> };
    (@dense_type ($t:ty) ($i:tt, $o:tt, $a:ty)) => { $crate::nn::Dense<$t, $i, $o, $a> };
    // Mistakes of order.
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt Dense $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($($rest)*) "`Dense` takes a vector: put `Flatten` between the image layers and it")
    };
    (@vector $t:tt $given:tt Dense<$t2:ty, $i:tt, $o:tt $(, $a:ty)?> $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($t2) ::core::concat!(
            "`Dense<", ::core::stringify!($t2, $i, $o $(, $a)?), ">`: in `net!`'s image form a dense layer is ",
            "`Dense<inputs, outputs>` or `Dense<inputs, outputs, Activation>`; ",
            "its element type is `Input`'s"
        ))
    };
    (@vector $t:tt $given:tt $layer:ident $($rest:tt)*) => {
        $crate::__net_image!(@mistake ($layer) ::core::concat!(
            "`", ::core::stringify!($layer), "` after `Flatten`: only `Dense` layers (and `Softmax` ",
            "after one, and `Dropout`) take a vector"
        ))
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt) => {
        $crate::__net_image!(@mistake () "a net needs a layer after its `Input`")
    };
    (@no_input $kind:ident $(<$($arg:tt),+>)?) => {
        $crate::__net_image!(@mistake ($($($arg),+)?) ::core::concat!(
            "`", ::core::stringify!($kind) $(, "<", ::core::stringify!($($arg),+), ">")?,
            "` in a net without `Input`: a net of images starts with ",
            "`Input<T, channels, height, width>`, which gives the sizes of its images, ",
            "as in `net![Input<f32, 1, 28, 28>, Conv2d<1, 6, 5>, ...]`"
        ))
    };
    (@image $t:tt $c:tt $h:tt $w:tt $from_input:tt $($rest:tt)+) => {
        $crate::__net_image!(@mistake ($($rest)+) ::core::concat!(
            "expected `Conv2d<..>`, `DepthwiseConv2d<..>`, `MaxPool2d<..>`, `AvgPool2d<..>`, `GlobalAvgPool2d`, `ZeroPad2d<..>`, ",
            "`BatchNorm2d<..>`, `BatchNorm1d<..>`, `Residual<[..]>`, `Dropout<..>`, `Flatten` or ",
            "`Dense<..>`, found `",
            ::core::stringify!($($rest)+), "`"
        ))
    };
    // A mistake of spelling or order: its message, in a type that stands for the net so that
    // the uses of the net add no errors of their own (the type refers to an error).
    // Reported at the first token of `$loc`, which the user wrote (where there is one).
    (@mistake ($($loc:tt)*) $($message:tt)+) => {
        $crate::nn::__Mistake<{ $crate::__at!(($($loc)*) ::core::compile_error!($($message)+)); 0 }>
    };
    // The layer just read: the last one, or the first of a chain.
    (@emit ($layer:ty) ($($state:tt)*) $(,)?) => { $layer };
    (@emit ($layer:ty) ($($state:tt)*) , $($rest:tt)+) => {
        $crate::nn::Chain<$layer, $crate::__net_image!($($state)* $($rest)+)>
    };
}
