//! A convolution without an activation (`Identity`, as before batch normalization) reads `dZ`
//! as `dA` where it lies instead of writing `dA ⊙ f'(Z)` into its workspace: its gradients
//! (`dW`, `db`, `dX`, with `dX` asked for and not, in `f32` and `f64`) are bit for bit those of the same layer with an activation that is the
//! identity under another name (which takes the general path), on every instruction set, for
//! each backward path: stride 1 (the planned kernels), stride 2 (unrolled patches), 1 x 1, and
//! depthwise. And its workspace's `d_pre_activation` is left as it was.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::kernels::with_instruction_set;
use constmat::nn::{
    Activation, Conv2d, DepthwiseConv2d, Identity, Init, Layer, Parameters, RandomInit, Train,
    zeroed_batch,
};
use num_traits::Float;
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/instruction_sets.rs"]
mod instruction_sets;
use instruction_sets::instruction_sets;

/// `f(z) = z` under a name the layers do not recognize, so they form `dZ = dA ⊙ 1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Linear;

impl Activation for Linear {
    const VALUE: Self = Linear;
    const INIT: Init = Init::Xavier;
    const TORCH_MODULE: Option<&'static str> = None;

    fn apply<T: Float>(z: T) -> T {
        z
    }

    fn derivative_from_output<T: Float>(_a: T) -> T {
        T::one()
    }
}

const B: usize = 5;

/// The layer `$identity` (random) and `$linear` (the same tensors), of elements `$t`: one
/// training pass each on the same batch and `dA`, on every instruction set, with `dX` asked
/// for and not (as of a net's first layer); the gradients compared bit for bit.
macro_rules! check {
    ($what:literal, $t:ty, $identity:ty, $linear:ty) => {{
        let mut rng = StdRng::seed_from_u64(11);
        let identity = <$identity>::random(&mut rng);
        let mut linear = <$linear>::zeros();
        for k in 0..identity.tensor_count() {
            linear.tensor_mut(k).copy_from_slice(identity.tensor(k));
        }
        let values = Uniform::new(-1.0 as $t, 1.0).unwrap();
        let mut x: Box<[<$identity as Layer>::In; B]> = zeroed_batch();
        for v in x
            .iter_mut()
            .flat_map(|s| s.as_flattened_mut().as_flattened_mut())
        {
            *v = values.sample(&mut rng);
        }
        let mut da: Box<[<$identity as Layer>::Out; B]> = zeroed_batch();
        for v in da
            .iter_mut()
            .flat_map(|s| s.as_flattened_mut().as_flattened_mut())
        {
            *v = values.sample(&mut rng);
        }
        for (isa, ask_dx) in instruction_sets()
            .into_iter()
            .flat_map(|isa| [(isa, true), (isa, false)])
        {
            with_instruction_set(isa, || {
                let mut ws = Train::<$t, B>::workspace(&identity);
                for v in ws
                    .d_pre_activation
                    .iter_mut()
                    .flat_map(|s| s.as_flattened_mut().as_flattened_mut())
                {
                    *v = <$t>::NAN;
                }
                let mut g = identity.zeros_like();
                let mut dx: Box<[<$identity as Layer>::In; B]> = zeroed_batch();
                identity.forward_train(&x, &mut ws);
                let dx_asked = if ask_dx { Some(&mut *dx) } else { None };
                identity.backward(&x, &mut ws, &da, dx_asked, &mut g);
                let untouched = ws
                    .d_pre_activation
                    .iter()
                    .flat_map(|s| s.as_flattened().as_flattened())
                    .all(|v| v.is_nan());
                assert!(
                    untouched,
                    "{} ({isa:?}): d_pre_activation was written",
                    $what
                );

                let mut ws = Train::<$t, B>::workspace(&linear);
                let mut want = linear.zeros_like();
                let mut want_dx: Box<[<$identity as Layer>::In; B]> = zeroed_batch();
                linear.forward_train(&x, &mut ws);
                let dx_asked = if ask_dx { Some(&mut *want_dx) } else { None };
                linear.backward(&x, &mut ws, &da, dx_asked, &mut want);
                for k in 0..g.tensor_count() {
                    let (got, want) = (g.tensor(k), want.tensor(k));
                    let same = got
                        .iter()
                        .zip(want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "{} ({isa:?}, dX asked: {ask_dx}): tensor {k} differs",
                        $what
                    );
                }
                let flat = |d: &[<$identity as Layer>::In; B]| -> Vec<_> {
                    d.iter()
                        .flat_map(|s| s.as_flattened().as_flattened())
                        .map(|v| v.to_bits())
                        .collect()
                };
                assert_eq!(
                    flat(&dx),
                    flat(&want_dx),
                    "{} ({isa:?}, dX asked: {ask_dx}): dX differs",
                    $what
                );
            });
        }
    }};
}

#[test]
fn a_convolution_without_activation_reads_da_as_dz() {
    check!(
        "3 x 3, stride 1",
        f32,
        Conv2d<f32, 8, 16, 3, 1, 1, 10, 10, 10, 10, Identity>,
        Conv2d<f32, 8, 16, 3, 1, 1, 10, 10, 10, 10, Linear>
    );
    check!(
        "3 x 3, stride 2",
        f32,
        Conv2d<f32, 4, 8, 3, 2, 1, 11, 11, 6, 6, Identity>,
        Conv2d<f32, 4, 8, 3, 2, 1, 11, 11, 6, 6, Linear>
    );
    check!(
        "1 x 1",
        f32,
        Conv2d<f32, 16, 24, 1, 1, 0, 7, 5, 7, 5, Identity>,
        Conv2d<f32, 16, 24, 1, 1, 0, 7, 5, 7, 5, Linear>
    );
    check!(
        "1 x 1, stride 2",
        f32,
        Conv2d<f32, 8, 16, 1, 2, 0, 8, 8, 4, 4, Identity>,
        Conv2d<f32, 8, 16, 1, 2, 0, 8, 8, 4, 4, Linear>
    );
    check!(
        "depthwise 3 x 3",
        f32,
        DepthwiseConv2d<f32, 16, 16, 3, 1, 1, 9, 6, 9, 6, Identity>,
        DepthwiseConv2d<f32, 16, 16, 3, 1, 1, 9, 6, 9, 6, Linear>
    );
    check!(
        "depthwise 3 x 3, stride 2",
        f32,
        DepthwiseConv2d<f32, 4, 8, 3, 2, 1, 9, 9, 5, 5, Identity>,
        DepthwiseConv2d<f32, 4, 8, 3, 2, 1, 9, 9, 5, 5, Linear>
    );
    check!(
        "3 x 3, stride 1, one channel (a first layer)",
        f32,
        Conv2d<f32, 1, 16, 3, 1, 1, 12, 12, 12, 12, Identity>,
        Conv2d<f32, 1, 16, 3, 1, 1, 12, 12, 12, 12, Linear>
    );
    check!(
        "3 x 3, stride 1, f64",
        f64,
        Conv2d<f64, 8, 16, 3, 1, 1, 10, 10, 10, 10, Identity>,
        Conv2d<f64, 8, 16, 3, 1, 1, 10, 10, 10, 10, Linear>
    );
    check!(
        "3 x 3, stride 2, f64",
        f64,
        Conv2d<f64, 4, 8, 3, 2, 1, 11, 11, 6, 6, Identity>,
        Conv2d<f64, 4, 8, 3, 2, 1, 11, 11, 6, 6, Linear>
    );
    check!(
        "depthwise 3 x 3, f64",
        f64,
        DepthwiseConv2d<f64, 16, 16, 3, 1, 1, 9, 6, 9, 6, Identity>,
        DepthwiseConv2d<f64, 16, 16, 3, 1, 1, 9, 6, 9, 6, Linear>
    );
}
