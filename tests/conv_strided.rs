//! Convolutions that do not take the stride-1 kernels (stride 2, or a kernel that is not
//! square) read their windows in place with the filters in the vector lanes where the plan
//! takes them (x86-64, `f32`, at least 8 filters and 64 steps a window; with AVX2 windows of
//! 25 and more): `Layer::forward` (its stack buffer), `forward_with_scratch`, an arena and a
//! training pass each give the definition's outputs, on every instruction set the CPU has, and
//! the unrolled patches' products bit for bit (each output one chain of fused multiply-adds in
//! the same order, the bias added last).
#![cfg(all(feature = "alloc", feature = "rand"))]
// The definition indexes by position, as it is written.
#![allow(clippy::needless_range_loop)]

use constmat::kernels::{InstructionSet, with_instruction_set};
use constmat::nn::{Arena, Conv2d, Conv2dWorkspace, Heap, Layer, RandomInit, Relu, Store, Train};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/instruction_sets.rs"]
mod instruction_sets;
use instruction_sets::instruction_sets;

/// `B` images of values in [-1, 1).
fn images<const C: usize, const H: usize, const W: usize, const B: usize>(
    rng: &mut StdRng,
) -> Box<[[[[f32; W]; H]; C]; B]> {
    let uniform = Uniform::new(-1.0_f32, 1.0).unwrap();
    let values: Vec<[[[f32; W]; H]; C]> = (0..B)
        .map(|_| {
            core::array::from_fn(|_| {
                core::array::from_fn(|_| core::array::from_fn(|_| uniform.sample(rng)))
            })
        })
        .collect();
    values.into_boxed_slice().try_into().unwrap()
}

/// Checks the layer's outputs by every path against the definition (summed in `f64` from the
/// same `f32` weights, ReLU after), on two images.
#[allow(clippy::type_complexity)]
fn check<
    const C: usize,
    const OC: usize,
    const K: usize,
    const KW: usize,
    const S: usize,
    const P: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(
    what: &str,
    seed: u64,
    reads_in_place: &[InstructionSet],
) where
    Conv2d<f32, C, OC, K, S, P, H, W, OH, OW, Relu, Heap, KW>: Layer<In = [[[f32; W]; H]; C], Out = [[[f32; OW]; OH]; OC]>
        + Train<f32, 2, Workspace = Conv2dWorkspace<f32, [[[f32; OW]; OH]; OC], 2>>,
{
    type L<
        const C: usize,
        const OC: usize,
        const K: usize,
        const KW: usize,
        const S: usize,
        const P: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    > = Conv2d<f32, C, OC, K, S, P, H, W, OH, OW, Relu, Heap, KW>;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut layer = L::<C, OC, K, KW, S, P, H, W, OH, OW>::random(&mut rng);
    // Biases that are not 0, so that the bit-for-bit checks below would catch a kernel that
    // took the bias into its sums at another point than the unrolled patches' product, which
    // adds it last (with biases of 0, either order gives the same bits).
    let uniform = Uniform::new(-0.5_f32, 0.5).unwrap();
    for b in Heap::vector_mut(&mut layer.bias) {
        *b = uniform.sample(&mut rng);
    }
    let x = images::<C, H, W, 2>(&mut rng);
    let (weight, bias) = (Heap::matrix(&layer.weight), Heap::vector(&layer.bias));
    let definition = |b: usize, o: usize, i: usize, j: usize| -> f64 {
        let mut sum = f64::from(bias[o]);
        for c in 0..C {
            for ky in 0..K {
                for kx in 0..KW {
                    let (Some(y), Some(xx)) =
                        ((i * S + ky).checked_sub(P), (j * S + kx).checked_sub(P))
                    else {
                        continue;
                    };
                    if y < H && xx < W {
                        sum += f64::from(weight[o][c][ky][kx]) * f64::from(x[b][c][y][xx]);
                    }
                }
            }
        }
        sum.max(0.0)
    };
    let close = |got: &[[[[f32; OW]; OH]; OC]], path: &str, isa: InstructionSet| {
        for (b, out) in got.iter().enumerate() {
            for o in 0..OC {
                for i in 0..OH {
                    for j in 0..OW {
                        let (g, z) = (f64::from(out[o][i][j]), definition(b, o, i, j));
                        assert!(
                            (g - z).abs() <= 1e-5 * (1.0 + z.abs()),
                            "{what}, {path}, {isa:?}: image {b}, output ({o}, {i}, {j}) is {g}, expected {z}"
                        );
                    }
                }
            }
        }
    };
    let flat = |y: &[[[[f32; OW]; OH]; OC]]| -> Vec<u32> {
        y.iter()
            .flat_map(|y| y.as_flattened().as_flattened().iter().map(|v| v.to_bits()))
            .collect()
    };
    for isa in instruction_sets() {
        with_instruction_set(isa, || {
            let mut plain = Box::new([[[[f32::NAN; OW]; OH]; OC]; 2]);
            layer.forward(&x, &mut plain);
            close(&plain[..], "forward", isa);

            let mut ws = Train::<f32, 2>::workspace(&layer);
            let trained = layer.forward_train(&x, &mut ws);
            close(&trained[..], "forward_train", isa);
            let trained = flat(&trained[..]);
            // The weights transposed (`[C·K·KW][OC]`): what the scratch of the windows read in
            // place begins with after a call.
            let transposed: Vec<u32> = (0..C * K * KW)
                .flat_map(|step| (0..OC).map(move |o| (o, step)))
                .map(|(o, step)| weight[o][step / (K * KW)][step / KW % K][step % KW].to_bits())
                .collect();
            let holds_weights = |scratch: &[f32]| {
                scratch.len() >= transposed.len()
                    && scratch
                        .iter()
                        .zip(&transposed)
                        .all(|(a, &b)| a.to_bits() == b)
            };
            // The workspace's patches buffer is that scratch in training: it holds the
            // weights where the plan reads the windows in place (the patches otherwise).
            assert_eq!(
                holds_weights(&ws.patches),
                reads_in_place.contains(&isa),
                "{what}, {isa:?}: whether training read the windows in place"
            );

            const LEN: usize = 40_000;
            assert!(L::<C, OC, K, KW, S, P, H, W, OH, OW>::PREDICT_SCRATCH <= LEN);
            let mut scratch = vec![f32::NAN; LEN].into_boxed_slice();
            let scratch: &mut [f32; LEN] = (&mut *scratch).try_into().unwrap();
            let mut fast = Box::new([[[[f32::NAN; OW]; OH]; OC]; 2]);
            layer.forward_with_scratch(&x, &mut fast, scratch);
            close(&fast[..], "forward_with_scratch", isa);
            // The windows read in place are the unrolled patches' product, bit for bit.
            assert!(
                flat(&fast[..]) == flat(&plain[..]),
                "{what}, {isa:?}: forward_with_scratch is not forward bit for bit"
            );
            // Where the plan reads the windows in place and the stack buffer is too small for
            // it, the prediction's scratch holds the weights transposed after the call: that
            // kernel ran (the unrolled patches would hold the patches there; with
            // `PREDICT_SCRATCH` 0, `forward`'s stack buffer serves and the scratch is not
            // touched).
            assert_eq!(
                holds_weights(&scratch[..]),
                reads_in_place.contains(&isa)
                    && L::<C, OC, K, KW, S, P, H, W, OH, OW>::PREDICT_SCRATCH > 0,
                "{what}, {isa:?}: whether the windows were read in place"
            );
            // The scratch and the workspace take the same kernel, one image or a batch.
            assert!(
                flat(&fast[..]) == trained,
                "{what}, {isa:?}: forward_with_scratch is not the training pass bit for bit"
            );
        });
    }
}

#[test]
fn strided_and_rectangular_convolutions_compute_the_definition_by_every_path() {
    // Where the windows are read in place (on x86-64; elsewhere nowhere).
    let (avx512, both): (&[InstructionSet], &[InstructionSet]) = if cfg!(target_arch = "x86_64") {
        (
            &[InstructionSet::Avx512],
            &[InstructionSet::Avx512, InstructionSet::Avx2],
        )
    } else {
        (&[], &[])
    };
    // ResNet's 3 x 3 stride 2 (AVX-512 reads its windows in place, AVX2 unrolls them), on
    // an odd size.
    check::<16, 32, 3, 3, 2, 1, 15, 15, 8, 8>("16 -> 32, 3 x 3, stride 2", 1, avx512);
    // Weights and a padded image larger than `forward`'s stack buffer (a scratch of
    // `PREDICT_SCRATCH` holds them); the padded image's last row and column are in no window.
    check::<32, 64, 3, 3, 2, 1, 16, 16, 8, 8>("32 -> 64, 3 x 3, stride 2", 2, avx512);
    // A 7 x 7 stem on either instruction set; filters in a vector and a part of one.
    check::<3, 24, 7, 7, 2, 3, 20, 21, 10, 11>("3 -> 24, 7 x 7, stride 2", 3, both);
    // Stride 1 with a kernel that is not square.
    check::<4, 16, 5, 7, 1, 1, 12, 13, 10, 9>("4 -> 16, 5 x 7, stride 1", 4, both);
    // More weights than patches (64 filters, 16 outputs): the workspace is sized for the
    // weights transposed and the padded image, not only the patches.
    check::<32, 64, 3, 3, 2, 1, 8, 8, 4, 4>("32 -> 64, 3 x 3, stride 2, on 8 x 8", 7, avx512);
    // A 7 x 7 kernel whose weights and padded image exceed the stack buffer, on either
    // instruction set.
    check::<8, 32, 7, 7, 2, 3, 20, 20, 10, 10>("8 -> 32, 7 x 7, stride 2", 6, both);
    // Too few steps: the unrolled patches on every instruction set.
    check::<16, 32, 1, 1, 2, 0, 16, 16, 8, 8>("16 -> 32, 1 x 1, stride 2", 5, &[]);
}

/// The scratch a prediction takes where the weights and the padded image exceed the stack
/// buffer, held by an arena: `Arena::run` gives `forward_with_scratch`'s outputs bit for bit.
#[test]
fn a_strided_convolutions_scratch_lives_in_the_arena() {
    type Net = constmat::net![
        Input<f32, 32, 16, 16>,
        Conv2d<32, 64, 3, 2, 1, Relu>,
        GlobalAvgPool2d,
        Flatten,
        Dense<64, 4>,
    ];
    type Strided = Conv2d<f32, 32, 64, 3, 2, 1, 16, 16, 8, 8, Relu>;
    #[cfg(target_arch = "x86_64")]
    const {
        // 64 filters of 32 x 3 x 3 and a padded image of 32 x 18 x 18.
        assert!(Strided::PREDICT_SCRATCH == 64 * 32 * 9 + 32 * 18 * 18);
        assert!(Net::PREDICT_SCRATCH == Strided::PREDICT_SCRATCH);
    };
    #[cfg(not(target_arch = "x86_64"))]
    assert_eq!(Strided::PREDICT_SCRATCH, 0);
    let mut rng = StdRng::seed_from_u64(7);
    let net = Net::random(&mut rng);
    let x = images::<32, 16, 16, 3>(&mut rng);
    let mut scratch = vec![f32::NAN; Net::PREDICT_SCRATCH].into_boxed_slice();
    let scratch: &mut [f32; Net::PREDICT_SCRATCH] = (&mut *scratch).try_into().unwrap();
    let mut arena = Box::new(Arena::<{ Net::ARENA_BYTES }>::new());
    for isa in instruction_sets() {
        with_instruction_set(isa, || {
            for (k, x) in x.iter().enumerate() {
                let mut want = [[0.0_f32; 4]];
                net.forward_with_scratch(
                    core::slice::from_ref(x).try_into().unwrap(),
                    &mut want,
                    scratch,
                );
                *arena.input(&net) = *x;
                assert_eq!(*arena.run(&net), want[0], "{isa:?}, image {k}");
            }
        });
    }
}
