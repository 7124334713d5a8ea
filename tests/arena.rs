//! The memory plan (`nn::Arena`): a prediction in an arena gives `forward_one`'s outputs bit for
//! bit (`forward_with_scratch`'s where a convolution takes its scratch from the arena), for chains of every parity, residual blocks of both kinds, nested chains and blocks
//! (the int8 blocks: `tests/quantize_blocks.rs`; MLPerf Tiny's int8 nets: `tests/mlperf_*.rs`), and an arena reused from one prediction to the next or longer than the
//! plan; and `ARENA_BYTES` is the most the plan keeps alive at once, worked out here by hand.
#![cfg(all(feature = "safetensors", feature = "rand"))]

use constmat::embed::Baked;
use constmat::kernels::with_instruction_set;
use constmat::nn::{Arena, Dense, Layer, RandomInit, Relu, arena_region_bytes};
use rand::{RngExt, SeedableRng, rngs::StdRng};

#[path = "common/instruction_sets.rs"]
mod instruction_sets;
use instruction_sets::instruction_sets;

/// Runs `net` on `inputs`, one arena for all, each output against `forward_one`'s.
fn arena_matches_forward_one<N: Layer, const BYTES: usize>(
    net: &N,
    inputs: &[N::In],
    arena: &mut Arena<BYTES>,
) {
    for (k, x) in inputs.iter().enumerate() {
        let mut want = <N::Out as constmat::nn::Sample>::ZERO;
        net.forward_one(x, &mut want);
        *arena.input(net) = *x;
        assert_eq!(*arena.run(net), want, "input {k}");
    }
}

fn images<const C: usize, const H: usize, const W: usize>(
    seed: u64,
    n: usize,
) -> Vec<[[[f32; W]; H]; C]> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            core::array::from_fn(|_| {
                core::array::from_fn(|_| core::array::from_fn(|_| rng.random_range(-1.0..1.0)))
            })
        })
        .collect()
}

const fn bytes<T>() -> usize {
    arena_region_bytes::<T>()
}

#[test]
fn chains_of_odd_and_even_length_give_forward_ones_outputs() {
    type One = constmat::net![Input<f32, 2, 9, 9>, Conv2d<2, 3, 3, 1, 1, Relu>];
    type Two = constmat::net![Input<f32, 2, 9, 9>, Conv2d<2, 3, 3, 1, 1, Relu>, MaxPool2d<3>];
    type Five = constmat::net![
        Input<f32, 2, 9, 9>,
        Conv2d<2, 3, 3, 1, 1, Relu>,
        Conv2d<3, 5, 3, 2, 1, Relu>,
        Flatten,
        Dense<125, 7, Relu>,
        Dense<7, 4>,
    ];
    let mut rng = StdRng::seed_from_u64(1);
    let inputs = images::<2, 9, 9>(2, 5);
    arena_matches_forward_one(
        &One::random(&mut rng),
        &inputs,
        &mut Arena::<{ One::ARENA_BYTES }>::new(),
    );
    arena_matches_forward_one(
        &Two::random(&mut rng),
        &inputs,
        &mut Arena::<{ Two::ARENA_BYTES }>::new(),
    );
    let five = Five::random(&mut rng);
    arena_matches_forward_one(&five, &inputs, &mut Arena::<{ Five::ARENA_BYTES }>::new());
    // Longer than the plan: the net takes the first `ARENA_BYTES`.
    arena_matches_forward_one(
        &five,
        &inputs,
        &mut Arena::<{ Five::ARENA_BYTES + 192 }>::new(),
    );
    // Baked, its parameters inline.
    let baked: Baked<Five> = five.to_store();
    arena_matches_forward_one(&baked, &inputs, &mut Arena::<{ Five::ARENA_BYTES }>::new());

    // The largest pair of neighbours: a convolution's input and output (2 and 3 x 9 x 9).
    assert_eq!(
        One::ARENA_BYTES,
        bytes::<[[[f32; 9]; 9]; 2]>() + bytes::<[[[f32; 9]; 9]; 3]>()
    );
    assert_eq!(One::ARENA_BYTES, 704 + 1_024);
    // The first convolution holds the most: the second's output (5 x 5 x 5, 512 bytes) is
    // smaller than its input.
    assert_eq!(Five::ARENA_BYTES, 704 + 1_024);
}

type Blocks = constmat::net![
    Input<f32, 4, 8, 8>,
    Residual<[Conv2d<4, 4, 3, 1, 1, Relu>, Conv2d<4, 4, 3, 1, 1>], Relu>,
    Residual<[Conv2d<4, 4, 3, 1, 1, Relu>], Relu>,
    Residual<[Conv2d<4, 8, 3, 2, 1, Relu>, Conv2d<8, 8, 3, 1, 1>], [Conv2d<4, 8, 1, 2, 0>], Relu>,
    Residual<[Conv2d<8, 8, 3, 1, 1, Relu>], [Conv2d<8, 8, 1, 1, 0, Relu>, Conv2d<8, 8, 1, 1, 0>]>,
    Flatten,
    Dense<128, 3>,
];

#[test]
fn residual_blocks_give_forward_ones_outputs() {
    // Branches of two layers (the output at the input's end of the branch's arena) and of one
    // (at the other), shortcuts of one and two layers, and the arena reused after each input.
    let net = Blocks::random(&mut StdRng::seed_from_u64(3));
    let inputs = images::<4, 8, 8>(4, 6);
    arena_matches_forward_one(&net, &inputs, &mut Arena::<{ Blocks::ARENA_BYTES }>::new());

    // Inside the first block: its input (4 x 8 x 8 f32, 1,024 bytes) kept, and the branch's
    // copy of it beside the first convolution's output.
    assert_eq!(Blocks::ARENA_BYTES, 3 * 1_024);
}

#[test]
fn a_residual_block_in_a_branch_gives_forward_ones_outputs() {
    type Nested = constmat::net![
        Input<f32, 2, 6, 6>,
        Residual<[Conv2d<2, 2, 3, 1, 1, Relu>, Residual<[Conv2d<2, 2, 3, 1, 1>], Relu>], Relu>,
        Flatten,
        Dense<72, 2>,
    ];
    let net = Nested::random(&mut StdRng::seed_from_u64(5));
    let inputs = images::<2, 6, 6>(6, 4);
    arena_matches_forward_one(&net, &inputs, &mut Arena::<{ Nested::ARENA_BYTES }>::new());
    // The outer block's input, the inner block's input and the inner branch's input and output:
    // four samples of 2 x 6 x 6 (288 bytes, 320 in the arena).
    assert_eq!(Nested::ARENA_BYTES, 4 * 320);
}

/// An arena in a `static`: `Arena::new` is a `const fn`.
#[test]
fn an_arena_can_be_a_static() {
    type Net = constmat::net![Dense<f32, 3, 4, Relu>, Dense<f32, 4, 2>];
    static ARENA: std::sync::Mutex<Arena<{ Net::ARENA_BYTES }>> =
        std::sync::Mutex::new(Arena::new());
    let net = Net::random(&mut StdRng::seed_from_u64(9));
    let mut arena = ARENA.lock().unwrap();
    let inputs = [[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]];
    arena_matches_forward_one(&net, &inputs, &mut arena);
    assert_eq!(format!("{:?}", *arena), "Arena<128>");
}

/// Convolutions whose kernel wants more scratch than the stack buffers hold
/// (`Layer::PREDICT_SCRATCH` > 0 on x86-64) find it in the arena, beside their two samples: the
/// outputs are `forward_with_scratch`'s bit for bit (the same kernel), and `forward_one`'s up to
/// the rounding of another order of sums.
#[test]
fn a_convolutions_scratch_lives_in_the_arena() {
    // Two of them: the second finds its input at the arena's far end.
    type Wide = constmat::net![
        Input<f32, 16, 32, 32>,
        Conv2d<16, 16, 3, 1, 1, Relu>,
        Conv2d<16, 16, 3, 1, 1>,
        GlobalAvgPool2d,
        Flatten,
        Dense<16, 4>,
    ];
    type First = constmat::nn::Conv2d<f32, 16, 16, 3, 1, 1, 32, 32, 32, 32, Relu>;
    let net = Wide::random(&mut StdRng::seed_from_u64(9));
    let inputs = images::<16, 32, 32>(10, 3);
    let mut scratch = vec![f32::NAN; Wide::PREDICT_SCRATCH].into_boxed_slice();
    let scratch: &mut [f32; Wide::PREDICT_SCRATCH] = (&mut *scratch).try_into().unwrap();
    let mut arena = Box::new(Arena::<{ Wide::ARENA_BYTES }>::new());
    // Every instruction set the CPU has: the kernels differ, the arena's plan does not.
    for isa in instruction_sets() {
        with_instruction_set(isa, || {
            for (k, x) in inputs.iter().enumerate() {
                let mut want = [[0.0_f32; 4]];
                let x_one = core::slice::from_ref(x).try_into().unwrap();
                net.forward_with_scratch(x_one, &mut want, scratch);
                let mut plain = [0.0_f32; 4];
                net.forward_one(x, &mut plain);
                *arena.input(&net) = *x;
                let got = *arena.run(&net);
                assert_eq!(got, want[0], "{isa:?}, input {k}");
                for (a, b) in got.iter().zip(&plain) {
                    let close = (a - b).abs() <= 1e-4 * (1.0 + b.abs());
                    assert!(close, "{isa:?}, input {k}: {a} against {b}");
                }
            }
        });
    }
    assert_eq!(Wide::PREDICT_SCRATCH, First::PREDICT_SCRATCH);
    // A convolution's input and output (64 KiB each) and its scratch.
    assert_eq!(
        Wide::ARENA_BYTES,
        2 * 65_536 + (4 * First::PREDICT_SCRATCH).next_multiple_of(64_usize)
    );
    #[cfg(target_arch = "x86_64")]
    const {
        assert!(First::PREDICT_SCRATCH > 4_096)
    };
    #[cfg(not(target_arch = "x86_64"))]
    assert_eq!(First::PREDICT_SCRATCH, 0);
}
