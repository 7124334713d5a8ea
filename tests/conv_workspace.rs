//! A convolution's training workspace serves whichever instruction set the thread that trains
//! with it is limited to (`kernels::with_instruction_set`), not only the one it was made on:
//! the kernel plan sizes its scratch and padded images for every set, and each set's kernel
//! takes its part. Made on one set and used on another, the backward pass neither panics nor
//! drops to another kernel's sums: it gives the gradients of a workspace made on the set that
//! runs, bit for bit.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::kernels::{InstructionSet, with_instruction_set};
use constmat::nn::{Conv2d, Parameters, RandomInit, Relu, Train};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/instruction_sets.rs"]
mod instruction_sets;
use instruction_sets::instruction_sets;

const B: usize = 3;

/// Every pair of instruction sets this CPU has (and the portable loops): the workspace made on
/// the first, the passes run on the second; the gradients (`dW`, `db`, `dX`) against those of a
/// workspace made on the second.
macro_rules! check_layer {
    ($what:literal, $c:literal, $oc:literal, $k:literal, $p:literal, $h:literal) => {{
        type L = Conv2d<
            f32,
            $c,
            $oc,
            $k,
            1,
            $p,
            $h,
            $h,
            { $h + 2 * $p + 1 - $k },
            { $h + 2 * $p + 1 - $k },
            Relu,
        >;
        const OH: usize = $h + 2 * $p + 1 - $k;
        let mut rng = StdRng::seed_from_u64(7);
        let layer = L::random(&mut rng);
        let uniform = Uniform::new(-1.0_f32, 1.0).unwrap();
        let mut x = Box::new([[[[0.0_f32; $h]; $h]; $c]; B]);
        for v in x.as_flattened_mut().as_flattened_mut().as_flattened_mut() {
            *v = uniform.sample(&mut rng);
        }
        let mut d_output = Box::new([[[[0.0_f32; OH]; OH]; $oc]; B]);
        for v in d_output
            .as_flattened_mut()
            .as_flattened_mut()
            .as_flattened_mut()
        {
            *v = uniform.sample(&mut rng);
        }
        // dW, db and dX as bits, from a workspace made on `made`, the passes run on `run`.
        let gradients = |made: InstructionSet, run: InstructionSet| -> Vec<u32> {
            let mut ws = with_instruction_set(made, || Train::<f32, B>::workspace(&layer));
            with_instruction_set(run, || {
                let mut gradients = layer.zeros_like();
                let mut dx = Box::new([[[[f32::NAN; $h]; $h]; $c]; B]);
                layer.forward_train(&x, &mut ws);
                layer.backward(&x, &mut ws, &d_output, Some(&mut dx), &mut gradients);
                let mut bits: Vec<u32> = (0..gradients.tensor_count())
                    .flat_map(|k| gradients.tensor(k).iter().map(|v| v.to_bits()))
                    .collect();
                bits.extend(
                    dx.as_flattened()
                        .as_flattened()
                        .as_flattened()
                        .iter()
                        .map(|v| v.to_bits()),
                );
                bits
            })
        };
        let sets = instruction_sets();
        for &run in &sets {
            let expected = gradients(run, run);
            for &made in &sets {
                assert!(
                    gradients(made, run) == expected,
                    "{}: a workspace made on {made:?}, trained on {run:?}",
                    $what
                );
            }
        }
    }};
}

#[test]
fn a_workspace_made_on_one_instruction_set_trains_on_another() {
    // 3 channels into 32 filters, 3 x 3: Winograd's weight gradient with AVX-512 (on the
    // padded images), the patches with AVX2 (which pad as they read).
    check_layer!("3 -> 32, 3 x 3", 3, 32, 3, 1, 10);
    // 5 x 5 on 32 filters: the same split, from 8 channels.
    check_layer!("8 -> 32, 5 x 5", 8, 32, 5, 2, 9);
    // LeNet's first layer: the row tiles with AVX-512, the positions in the lanes with AVX2,
    // each with its own scratch.
    check_layer!("1 -> 6, 5 x 5", 1, 6, 5, 2, 12);
    // 16 filters, 3 x 3: Winograd's weight gradient on both, 16 lanes against 8.
    check_layer!("4 -> 16, 3 x 3", 4, 16, 3, 1, 8);
}
