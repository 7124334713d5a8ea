//! Max pooling and `Flatten`: finite-difference gradient checks in f64 (`common/gradient.rs`),
//! ties and NaN, the `f32` kernels against the `f64` loops, and `Flatten`'s order.
#![cfg(all(feature = "alloc", feature = "rand"))]

#[path = "common/gradient.rs"]
#[allow(dead_code)] // each test file uses some of the helpers
mod gradient;
use gradient::*;

use constmat::nn::{Chain, Dense, Flatten, Layer, MaxPool2d, Tanh, Train};
use rand::{SeedableRng, rngs::StdRng};

#[test]
fn max_pooling_gradients() {
    let mut rng = StdRng::seed_from_u64(4);
    // Non-overlapping windows, and overlapping ones (window 3, stride 2), where one input can be
    // the maximum of two windows and receives both gradients. Random inputs: no ties.
    let pool = MaxPool2d::<f64, 2, 2, 2, 6, 4, 3, 2>::new();
    let x = [random_sample(&mut rng), random_sample(&mut rng)];
    let a = check("MaxPool2d<2>", &pool, &x, &mut rng);
    let pool = MaxPool2d::<f64, 3, 3, 2, 7, 5, 3, 2>::new();
    let x = [random_sample(&mut rng)];
    let b = check("MaxPool2d<3, stride 2>", &pool, &x, &mut rng);
    // Rows and columns in no window, as PyTorch allows: 5 - 2 and 6 - 3 are odd.
    let pool = MaxPool2d::<f64, 2, 2, 2, 5, 5, 2, 2>::new();
    let x = [random_sample(&mut rng)];
    let c = check("MaxPool2d<2> on 5 x 5", &pool, &x, &mut rng);
    let pool = MaxPool2d::<f64, 1, 3, 2, 6, 7, 2, 3>::new();
    let x = [random_sample(&mut rng)];
    let d = check("MaxPool2d<3, stride 2> on 6 x 7", &pool, &x, &mut rng);
    eprintln!(
        "MaxPool2d: worst relative error {:e}",
        a.max(b).max(c).max(d)
    );
}

/// Ties go to the first maximum in the window's row-major order, as in PyTorch; a NaN is its
/// window's maximum.
type TwoWindows = MaxPool2d<f64, 1, 2, 2, 2, 4, 1, 2>;

/// `dX` of [`TwoWindows`] for output gradients 1 and 2, after `forward_train` on `x`.
fn input_gradient(
    pool: &TwoWindows,
    x: &[[[[f64; 4]; 2]; 1]; 1],
    ws: &mut <TwoWindows as Train<f64, 1>>::Workspace,
) -> [[[[f64; 4]; 2]; 1]; 1] {
    let mut dx = [[[[0.0; 4]; 2]; 1]; 1];
    pool.backward(x, ws, &[[[[1.0, 2.0]]]], Some(&mut dx), &mut pool.clone());
    dx
}

#[test]
fn max_pooling_ties_and_nan() {
    let pool = TwoWindows::new();
    let x = [[[[5.0, 5.0, 1.0, f64::NAN], [5.0, 2.0, 9.0, 9.0]]]];
    let mut ws = Train::<f64, 1>::workspace(&pool);
    let y = *pool.forward_train(&x, &mut ws);
    assert_eq!(y[0][0][0][0], 5.0);
    assert!(y[0][0][0][1].is_nan());
    let dx = input_gradient(&pool, &x, &mut ws);
    assert_eq!(dx[0][0], [[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]]);

    // The value is the first maximum's, bit for bit, in the window's row-major order: +0.0
    // before -0.0 (equal, but the sign is kept), and the first of two NaNs (its payload kept).
    let (nan1, nan2) = (
        f64::from_bits(0x7ff8_0000_0000_0001),
        f64::from_bits(0x7ff8_0000_0000_0002),
    );
    let x = [[[[-1.0, 0.0, nan1, nan2], [-0.0, -1.0, 0.0, 0.0]]]];
    for y in [*pool.forward_train(&x, &mut ws), {
        let mut y = [[[[0.0; 2]; 1]; 1]; 1];
        pool.forward(&x, &mut y);
        y
    }] {
        assert_eq!(y[0][0][0][0].to_bits(), 0.0_f64.to_bits(), "+0.0, not -0.0");
        assert_eq!(y[0][0][0][1].to_bits(), nan1.to_bits(), "the first NaN");
    }
    let dx = input_gradient(&pool, &x, &mut ws);
    assert_eq!(dx[0][0], [[0.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]]);
}

/// The `f32` backward pass of 2 x 2 pooling (on AVX-512, a kernel that writes only the inputs
/// its windows read) against the generic `f64` code on the same values: every element of the
/// input gradient written, from a buffer full of NaNs.
#[test]
fn max_pooling_backward_in_f32_overwrites_the_whole_input_gradient() {
    fn case<const H: usize, const W: usize, const OH: usize, const OW: usize>(rng: &mut StdRng) {
        let wide: [[[[f64; W]; H]; 3]; 2] = [random_sample(rng), random_sample(rng)];
        let d_out: [[[[f64; OW]; OH]; 3]; 2] = [random_sample(rng), random_sample(rng)];
        // Values that f32 holds exactly, so that both passes see the same ones.
        let narrow = |v: f64| f64::from(v as f32);
        let (x, d_out) = (wide.map(|s| s.map(|p| p.map(|r| r.map(narrow)))), d_out);
        let d_out = d_out.map(|s| s.map(|p| p.map(|r| r.map(narrow))));

        let pool = MaxPool2d::<f64, 3, 2, 2, H, W, OH, OW>::new();
        let mut ws = Train::<f64, 2>::workspace(&pool);
        pool.forward_train(&x, &mut ws);
        let mut want = [[[[f64::NAN; W]; H]; 3]; 2];
        pool.backward(&x, &mut ws, &d_out, Some(&mut want), &mut pool.clone());

        let to_f32 = |s: [[[f64; W]; H]; 3]| s.map(|p| p.map(|r| r.map(|v| v as f32)));
        let pool = MaxPool2d::<f32, 3, 2, 2, H, W, OH, OW>::new();
        let x = x.map(to_f32);
        let d_out = d_out.map(|s| s.map(|p| p.map(|r| r.map(|v| v as f32))));
        let mut ws = Train::<f32, 2>::workspace(&pool);
        pool.forward_train(&x, &mut ws);
        let mut got = [[[[f32::NAN; W]; H]; 3]; 2];
        pool.backward(&x, &mut ws, &d_out, Some(&mut got), &mut pool.clone());
        assert_eq!(got, want.map(to_f32), "{H} x {W}");
    }
    let mut rng = StdRng::seed_from_u64(11);
    case::<4, 6, 2, 3>(&mut rng);
    case::<2, 34, 1, 17>(&mut rng);
    case::<10, 10, 5, 5>(&mut rng);
    // Odd sizes: the last row and column are in no window, their gradient 0 (the 2 x 2 kernels
    // take even sizes only).
    case::<5, 7, 2, 3>(&mut rng);
    case::<9, 34, 4, 17>(&mut rng);
}

#[test]
fn flatten_is_pytorchs_order_and_its_gradient_the_reshape() {
    let mut rng = StdRng::seed_from_u64(5);
    let flatten = Flatten::<f64, 2, 3, 2, 12>::new();
    let x: [[[f64; 2]; 3]; 2] = random_sample(&mut rng);
    let mut y = [0.0; 12];
    flatten.forward_one(&x, &mut y);
    for (i, &v) in y.iter().enumerate() {
        assert_eq!(
            v,
            x[i / 6][i / 2 % 3][i % 2],
            "element {i}: channel, then row, then column"
        );
    }
    // Flatten has no parameters, so only dX is checked: the loss needs one weighted layer.
    type Net = Chain<Flatten<f64, 2, 3, 2, 12>, Dense<f64, 12, 3, Tanh>>;
    let net: Net = random_layer(&mut rng);
    let err = check("Flatten then Dense", &net, &[x], &mut rng);
    eprintln!("Flatten: worst relative error {err:e}");
}
