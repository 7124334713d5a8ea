//! A prediction's memory plan: the samples between layers in one buffer whose space each layer
//! hands on to the next, so that a net needs room for two samples at a time (three inside a
//! residual block), not for all of them.
//!
//! The plan is the layers' own: [`Layer::forward_in_arena`] finds its input at one end of the
//! buffer and leaves its output at an end, and [`Layer::ARENA_BYTES`] says how long the buffer
//! must be. A layer's default runs its [`Layer::forward_one`] with the input at one end and the
//! output at the other. A [`Chain`](super::Chain) runs its first part, then the rest on the
//! first part's output, where the first part's input was before. A residual block keeps its
//! input while the branch runs on a copy, then adds the shortcut into the branch's output.
//!
//! Each sample starts at a multiple of 64 bytes ([`region_bytes`]): the arena is aligned so, and
//! every length the plan cuts it at is a multiple of 64.

use super::{Layer, Sample};

/// An end of an arena: where a layer finds its input and leaves its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The first bytes.
    Start,
    /// The last bytes.
    End,
}

impl Side {
    /// The other end.
    #[must_use]
    pub const fn other(self) -> Self {
        match self {
            Self::Start => Self::End,
            Self::End => Self::Start,
        }
    }

    /// `self` if `flips` is false, else the other end: where a layer whose
    /// [`Layer::ARENA_FLIPS`] is `flips` leaves its output, given its input at `self`.
    #[must_use]
    pub const fn after(self, flips: bool) -> Self {
        if flips { self.other() } else { self }
    }
}

/// The bytes a sample of type `T` takes in an arena: its size, rounded up to a multiple of 64
/// so that the next sample starts aligned.
///
/// ```
/// use constmat::nn::arena_region_bytes;
/// assert_eq!(arena_region_bytes::<[i8; 490]>(), 512);
/// assert_eq!(arena_region_bytes::<[[f32; 16]; 8]>(), 512);
/// ```
#[must_use]
pub const fn region_bytes<T>() -> usize {
    core::mem::size_of::<T>().div_ceil(ALIGN) * ALIGN
}

/// The larger of two sizes, in const code (`Ord::max` is not `const`): a plan's parts that run
/// one after the other need the larger of their sizes.
pub(crate) const fn larger(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// The alignment of an arena and of every sample in it: a cache line, and more than any
/// element type's (SIMD loads of whole registers start aligned where a row does).
const ALIGN: usize = 64;

/// The working memory of predictions with the memory plan: `BYTES` bytes, aligned to 64, for a
/// net whose [`Layer::ARENA_BYTES`] is at most `BYTES`. Write the input with [`Arena::input`],
/// run the net with [`Arena::run`]; the output it returns lives in the arena too.
///
/// A chain's [`Layer::forward`] keeps every sample between its layers on the stack at once
/// (they count in [`Layer::WORKING_BYTES`]); an arena keeps two at a time, three inside a
/// residual block. For the int8 DS-CNN of the MLPerf Tiny benchmark, `ARENA_BYTES` is 16,000
/// and [`Layer::KERNEL_BYTES`] 4,864, where `forward` takes a `WORKING_BYTES` of 103,348. The
/// outputs are `forward_one`'s bit for bit, but where a convolution's fastest kernel needs more
/// scratch than a prediction's stack buffers hold ([`Layer::PREDICT_SCRATCH`], on x86-64): the
/// arena holds that scratch too, and the outputs are [`Layer::forward_with_scratch`]'s, bit
/// for bit.
///
/// `BYTES` is usually the net's own constant, `{ Net::ARENA_BYTES }` (a shorter arena is a
/// compile error, reported by `cargo build`). An arena can live on the stack, in a `static`
/// behind a lock, or on the heap; its contents between predictions do not matter.
///
/// ```
/// use constmat::nn::{Arena, Layer, RandomInit, Relu};
/// use rand::{SeedableRng, rngs::StdRng};
///
/// type Net = constmat::net![
///     Input<f32, 1, 12, 12>,
///     Conv2d<1, 8, 3, 1, 1, Relu>,
///     Conv2d<8, 8, 3, 1, 1, Relu>,
///     Conv2d<8, 8, 3, 1, 1, Relu>,
///     Flatten,
///     Dense<1152, 10>,
/// ];
/// let net = Net::random(&mut StdRng::seed_from_u64(5));
/// // Two samples of 8 x 12 x 12 at a time, not all three.
/// assert_eq!(Net::ARENA_BYTES, 2 * 8 * 12 * 12 * 4);
///
/// let image = [[[0.5_f32; 12]; 12]; 1];
/// let mut arena = Arena::<{ Net::ARENA_BYTES }>::new();
/// *arena.input(&net) = image;
/// let logits = *arena.run(&net);
///
/// let mut expected = [0.0; 10];
/// net.forward_one(&image, &mut expected);
/// assert_eq!(logits, expected);
/// ```
#[derive(Clone)]
#[repr(C, align(64))]
pub struct Arena<const BYTES: usize> {
    bytes: [u8; BYTES],
}

impl<const BYTES: usize> Arena<BYTES> {
    /// An arena of zeros; a `const fn`, so it can initialize a `static`.
    #[must_use]
    pub const fn new() -> Self {
        Self { bytes: [0; BYTES] }
    }

    /// Where [`Arena::run`] reads `net`'s input: write it here first.
    pub fn input<N: Layer>(&mut self, net: &N) -> &mut N::In {
        const { check_arena_bytes(BYTES, N::ARENA_BYTES) };
        let _ = net;
        sample_mut(&mut self.bytes[..N::ARENA_BYTES])
    }

    /// Runs `net` on the input written with [`Arena::input`] and returns its output, which
    /// stays in the arena until the next run. The input is overwritten.
    pub fn run<N: Layer>(&mut self, net: &N) -> &N::Out {
        const { check_arena_bytes(BYTES, N::ARENA_BYTES) };
        let arena = &mut self.bytes[..N::ARENA_BYTES];
        net.forward_in_arena(arena, Side::Start);
        let at = Side::Start.after(N::ARENA_FLIPS);
        sample(region(arena, at, region_bytes::<N::Out>()))
    }
}

impl<const BYTES: usize> Default for Arena<BYTES> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const BYTES: usize> core::fmt::Debug for Arena<BYTES> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Arena<{BYTES}>")
    }
}

/// An arena shorter than the net's plan: a compile error (the message is the panic's; no frame
/// note for this function).
#[track_caller]
const fn check_arena_bytes(bytes: usize, needed: usize) {
    if bytes < needed {
        crate::format::Message::new()
            .str("Arena: the arena holds ")
            .number(bytes)
            .str(" bytes; this net's `ARENA_BYTES` is ")
            .number(needed)
            .panic()
    }
}

/// The sample at the start of `region`.
pub(crate) fn sample<T: Sample>(region: &[u8]) -> &T {
    bytemuck::from_bytes(&region[..core::mem::size_of::<T>()])
}

/// The sample at the start of `region`, to write.
pub(crate) fn sample_mut<T: Sample>(region: &mut [u8]) -> &mut T {
    bytemuck::from_bytes_mut(&mut region[..core::mem::size_of::<T>()])
}

/// The `bytes` at the `side` end of `arena`.
pub(crate) fn region(arena: &[u8], side: Side, bytes: usize) -> &[u8] {
    match side {
        Side::Start => &arena[..bytes],
        Side::End => &arena[arena.len() - bytes..],
    }
}

/// `arena` cut in two: the `bytes` at its `side` end, and the rest.
pub(crate) fn split(arena: &mut [u8], side: Side, bytes: usize) -> (&mut [u8], &mut [u8]) {
    match side {
        Side::Start => arena.split_at_mut(bytes),
        Side::End => {
            let (rest, end) = arena.split_at_mut(arena.len() - bytes);
            (end, rest)
        }
    }
}

/// The default [`Layer::forward_in_arena`]: `layer`'s input at the `input` end of `arena`, its
/// output at the other. Never inlined: the layer's buffers live in this call's frame, which the
/// next layer's call reuses ([`Layer::KERNEL_BYTES`] is the largest, not the sum).
#[inline(never)]
pub(crate) fn forward_one_at_ends<L: Layer + ?Sized>(layer: &L, arena: &mut [u8], input: Side) {
    let (y, rest) = split(arena, input.other(), region_bytes::<L::Out>());
    let x = sample(region(rest, input, region_bytes::<L::In>()));
    layer.forward_one(x, sample_mut(y));
}

/// A layer's input at the `input` end of `arena`, its output at the other end, and the bytes
/// between them: the arena's room for the scratch of a layer whose
/// [`Layer::ARENA_BYTES`] counts some beside its two samples. The middle starts at a multiple
/// of 64 bytes from the arena's start, so it is aligned as the arena is.
pub(crate) fn ends_and_middle<L: Layer + ?Sized>(
    arena: &mut [u8],
    input: Side,
) -> (&L::In, &mut L::Out, &mut [u8]) {
    let (y, rest) = split(arena, input.other(), region_bytes::<L::Out>());
    let (x, middle) = split(rest, input, region_bytes::<L::In>());
    (sample(x), sample_mut(y), middle)
}

/// Copies the sample of `bytes` at the start of `from` to the start of `to`, as bytes: no
/// typed temporary on the stack.
pub(crate) fn copy(from: &[u8], to: &mut [u8], bytes: usize) {
    to[..bytes].copy_from_slice(&from[..bytes]);
}

/// A residual block's [`Layer::ARENA_BYTES`]: its input, kept for the shortcut, beside the
/// branch's plan (which holds the branch's copy of it).
pub(crate) const fn residual_arena_bytes<Br: Layer>() -> usize {
    region_bytes::<Br::In>() + Br::ARENA_BYTES
}

/// A residual block's [`Layer::forward_in_arena`]: the branch on a copy of the input, placed so
/// that the branch's output lands at the arena's other end, then `add(output, input)` there.
pub(crate) fn residual_in_arena<Br: Layer>(
    branch: &Br,
    arena: &mut [u8],
    input: Side,
    add: impl FnOnce(&mut Br::Out, &Br::In),
) {
    let bytes = region_bytes::<Br::In>();
    let (x, rest) = split(arena, input, bytes);
    // The branch's output at the far end either way: from the near end of `rest` if it flips,
    // else from the far end.
    let copy_at = input.other().after(Br::ARENA_FLIPS);
    let to = match copy_at {
        Side::Start => &mut rest[..bytes],
        Side::End => {
            let len = rest.len();
            &mut rest[len - bytes..]
        }
    };
    copy(x, to, core::mem::size_of::<Br::In>());
    branch.forward_in_arena(rest, copy_at);
    let (y, _) = split(rest, input.other(), region_bytes::<Br::Out>());
    add(sample_mut(y), sample(x));
}

/// A residual block with a projection's [`Layer::ARENA_BYTES`]: the branch's plan beside the
/// input, or the shortcut's (on the input itself) beside the branch's output.
pub(crate) const fn projected_residual_arena_bytes<Br: Layer, Sh: Layer>() -> usize {
    larger(
        residual_arena_bytes::<Br>(),
        region_bytes::<Br::Out>() + Sh::ARENA_BYTES,
    )
}

/// A residual block with a projection's [`Layer::forward_in_arena`]: the branch as in
/// [`residual_in_arena`], then the shortcut on the input where it is (the last use of it), and
/// `add(output, shortcut)`.
pub(crate) fn projected_residual_in_arena<Br: Layer, Sh: Layer<In = Br::In, Out = Br::Out>>(
    branch: &Br,
    shortcut: &Sh,
    arena: &mut [u8],
    input: Side,
    add: impl FnOnce(&mut Br::Out, &Br::Out),
) {
    residual_in_arena(branch, arena, input, |_, _| {});
    let (y, rest) = split(arena, input.other(), region_bytes::<Br::Out>());
    shortcut.forward_in_arena(rest, input);
    let s = region(
        rest,
        input.after(Sh::ARENA_FLIPS),
        region_bytes::<Sh::Out>(),
    );
    add(sample_mut(y), sample(s));
}
