//! `AvgPool2d`: forward values against the definition written here (windows of any size and
//! stride, rows in no window, a global pool), the input gradient against central differences in
//! `f64`, and its place in `net!` and in PyTorch's `nn.Sequential` numbering.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::nn::{AvgPool2d, Inline, Layer, Parameters, Relu, Train};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

fn random_image<const C: usize, const H: usize, const W: usize>(
    rng: &mut StdRng,
) -> [[[f64; W]; H]; C] {
    let uniform = Uniform::new(-1.0, 1.0).unwrap();
    std::array::from_fn(|_| std::array::from_fn(|_| std::array::from_fn(|_| uniform.sample(rng))))
}

/// The mean of each window, from the definition.
fn definition<
    const C: usize,
    const K: usize,
    const S: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(
    x: &[[[f64; W]; H]; C],
) -> [[[f64; OW]; OH]; C] {
    std::array::from_fn(|c| {
        std::array::from_fn(|oh| {
            std::array::from_fn(|ow| {
                let mut sum = 0.0;
                for i in 0..K {
                    for j in 0..K {
                        sum += x[c][oh * S + i][ow * S + j];
                    }
                }
                sum / (K * K) as f64
            })
        })
    })
}

/// The forward pass in `f64` against the definition, and in `f32` within rounding; the input
/// gradient of `L = Σ R ⊙ Y` against central differences.
fn check<
    const C: usize,
    const K: usize,
    const S: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
>(
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let pool = AvgPool2d::<f64, C, K, S, H, W, OH, OW>::new();
    let x = [random_image::<C, H, W>(&mut rng)];
    let mut y = [[[[0.0; OW]; OH]; C]];
    pool.forward(&x, &mut y);
    let want = definition::<C, K, S, H, W, OH, OW>(&x[0]);
    for (g, w) in y[0]
        .as_flattened()
        .as_flattened()
        .iter()
        .zip(want.as_flattened().as_flattened())
    {
        assert!(
            (g - w).abs() < 1e-14,
            "AvgPool2d<{K}, {S}> on {H}x{W}: {g} against {w}"
        );
    }
    let narrow = AvgPool2d::<f32, C, K, S, H, W, OH, OW>::new();
    let x32 = [x[0].map(|p| p.map(|r| r.map(|v| v as f32)))];
    let mut y32 = [[[[0.0_f32; OW]; OH]; C]];
    narrow.forward(&x32, &mut y32);
    for (g, w) in y32[0]
        .as_flattened()
        .as_flattened()
        .iter()
        .zip(want.as_flattened().as_flattened())
    {
        assert!((f64::from(*g) - w).abs() < 1e-6, "f32: {g} against {w}");
    }

    let r = [random_image::<C, OH, OW>(&mut rng)];
    let loss = |x: &[[[[f64; W]; H]; C]; 1]| {
        let mut y = [[[[0.0; OW]; OH]; C]];
        pool.forward(x, &mut y);
        let y = y[0].as_flattened().as_flattened();
        y.iter()
            .zip(r[0].as_flattened().as_flattened())
            .map(|(y, r)| y * r)
            .sum::<f64>()
    };
    let mut ws = Train::<f64, 1>::workspace(&pool);
    pool.forward_train(&x, &mut ws);
    let mut dx = [[[[f64::NAN; W]; H]; C]];
    pool.backward(&x, &mut ws, &r, Some(&mut dx), &mut pool.clone());
    let h = 1e-6;
    for c in 0..C {
        for i in 0..H {
            for j in 0..W {
                let (mut up, mut down) = (x, x);
                up[0][c][i][j] += h;
                down[0][c][i][j] -= h;
                let numeric = (loss(&up) - loss(&down)) / (2.0 * h);
                assert!(
                    (dx[0][c][i][j] - numeric).abs() < 1e-8,
                    "AvgPool2d<{K}, {S}> on {H}x{W}: dX[{c}][{i}][{j}] = {} against {numeric}",
                    dx[0][c][i][j]
                );
            }
        }
    }
}

#[test]
fn average_pooling_computes_the_mean_and_its_gradient() {
    // Non-overlapping windows; overlapping ones (3, stride 2); rows and columns in no window
    // (2 on 5 x 7); windows larger than the stride on a wide image; a global pool (8 on 8 x 8).
    check::<2, 2, 2, 4, 6, 2, 3>(1);
    check::<3, 3, 2, 7, 5, 3, 2>(2);
    check::<1, 2, 2, 5, 7, 2, 3>(3);
    check::<2, 3, 1, 4, 20, 2, 18>(4);
    check::<4, 8, 8, 8, 8, 1, 1>(5);
}

/// In `net!`, `AvgPool2d<K>` is `nn.AvgPool2d(K)`: one module of `nn.Sequential`, no tensors;
/// the sizes after it are computed; a baked (inline) net runs the same code.
#[test]
fn average_pooling_in_a_net_is_a_module_of_its_own() {
    type Net = constmat::net![
        Input<f32, 1, 8, 8>,
        Conv2d<1, 4, 3, 1, 1, Relu>, // 4 x 8 x 8
        AvgPool2d<2>,                // 4 x 4 x 4
        AvgPool2d<4>,                // 4 x 1 x 1: global
        Flatten,
        Dense<4, 3>,
    ];
    use rand::RngExt;
    let mut rng = StdRng::seed_from_u64(6);
    let mut net = Net::zeros();
    // nn.Sequential(Conv2d, ReLU, AvgPool2d, AvgPool2d, Flatten, Linear): the linear layer is
    // module 5.
    let names: Vec<String> = (0..net.tensor_count())
        .map(|k| net.tensor_info(k).name().as_str().to_string())
        .collect();
    assert_eq!(names, ["0.weight", "0.bias", "5.weight", "5.bias"]);
    for k in 0..net.tensor_count() {
        for v in net.tensor_mut(k) {
            *v = rng.random_range(-1.0..1.0);
        }
    }
    let x = [[[0.25_f32; 8]; 8]];
    let mut out = [0.0; 3];
    net.forward_one(&x, &mut out);
    let mut baked = [0.0; 3];
    net.to_store::<Inline>().forward_one(&x, &mut baked);
    assert_eq!(out, baked);
    assert!(out.iter().all(|v| v.is_finite()));
}

/// The global average pool of any height and width: each channel's mean, and the gradient
/// shared equally (f64 finite differences); in a net, `GlobalAvgPool2d` takes the size that
/// reaches it; on `i8`, the rounded integer mean.
#[test]
fn the_global_average_pool_takes_any_size() {
    use constmat::nn::GlobalAvgPool2d;

    fn case<const C: usize, const H: usize, const W: usize>(seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let pool = GlobalAvgPool2d::<f64, C, H, W>::new();
        let x = [random_image::<C, H, W>(&mut rng)];
        let mut y = [[[[0.0; 1]; 1]; C]];
        pool.forward(&x, &mut y);
        for c in 0..C {
            let mean = x[0][c].as_flattened().iter().sum::<f64>() / (H * W) as f64;
            assert!((y[0][c][0][0] - mean).abs() < 1e-14, "{H}x{W}, channel {c}");
        }
        let r = [random_image::<C, 1, 1>(&mut rng)];
        let loss = |x: &[[[[f64; W]; H]; C]; 1]| {
            let mut y = [[[[0.0; 1]; 1]; C]];
            pool.forward(x, &mut y);
            (0..C).map(|c| y[0][c][0][0] * r[0][c][0][0]).sum::<f64>()
        };
        let mut ws = Train::<f64, 1>::workspace(&pool);
        pool.forward_train(&x, &mut ws);
        let mut dx = [[[[f64::NAN; W]; H]; C]];
        pool.backward(&x, &mut ws, &r, Some(&mut dx), &mut pool.clone());
        let h = 1e-6;
        for c in 0..C {
            for i in 0..H {
                for j in 0..W {
                    let (mut up, mut down) = (x, x);
                    up[0][c][i][j] += h;
                    down[0][c][i][j] -= h;
                    let numeric = (loss(&up) - loss(&down)) / (2.0 * h);
                    assert!(
                        (dx[0][c][i][j] - numeric).abs() < 1e-8,
                        "{H}x{W}: dX[{c}][{i}][{j}]"
                    );
                }
            }
        }
    }
    case::<3, 25, 5>(1); // DS-CNN's
    case::<2, 8, 8>(2);
    case::<1, 1, 7>(3);

    type Head = constmat::net![Input<f32, 4, 5, 3>, GlobalAvgPool2d, Flatten, Dense<4, 2>];
    let _: fn(&Head) -> &GlobalAvgPool2d<f32, 4, 5, 3> = |net| &net.first;

    // -7.5 rounds away from zero to -8; 2.5 to 3.
    let int8 = GlobalAvgPool2d::<i8, 2, 1, 2>::new();
    let mut y = [[[0_i8]]; 2];
    int8.forward_one(&[[[-7, -8]], [[2, 3]]], &mut y);
    assert_eq!(y, [[[-8]], [[3]]]);
}
