//! Convolutional layers (`Conv2d`) and whole CNNs: finite-difference gradient checks in f64
//! (`common/gradient.rs`; the tolerance and its reasoning are those of
//! `tests/gradient_check.rs`), forward values against loops written here from the definition,
//! the blocked and unblocked forward paths against each other, heap and inline storage, a
//! save/load round trip, and `net!`'s image form. Max pooling and `Flatten`: `tests/pool.rs`.
#![cfg(all(feature = "alloc", feature = "rand"))]

use constmat::nn::{
    Chain, Conv2d, Dense, Flatten, Heap, Identity, Inline, Layer, MaxPool2d, Parameters,
    RandomInit, Relu, Relu6, Sample, Sigmoid, Store, Tanh, Train,
};
use rand::distr::{Distribution, Uniform};
use rand::{SeedableRng, rngs::StdRng};

#[path = "common/gradient.rs"]
#[allow(dead_code)] // each test file uses some of the helpers
mod gradient;
use gradient::*;

/// One output of the convolution from its definition: `b[o] + Σ_c Σ_kh Σ_kw w[o][c][kh][kw] ·
/// x[c][i·S + kh - P][j·S + kw - P]`, zero outside the image. (Indices, as in the formula,
/// rather than iterators.)
#[allow(clippy::needless_range_loop)]
fn definition_at<const C: usize, const K: usize, const IH: usize, const IW: usize>(
    (w, b): (&[[[f64; K]; K]; C], f64),
    x: &[[[f64; IW]; IH]; C],
    (stride, padding): (usize, usize),
    (i, j): (usize, usize),
) -> f64 {
    let mut sum = b;
    for c in 0..C {
        for kh in 0..K {
            for kw in 0..K {
                let (ih, iw) = (
                    (i * stride + kh).checked_sub(padding),
                    (j * stride + kw).checked_sub(padding),
                );
                if let (Some(ih), Some(iw)) = (ih, iw)
                    && ih < IH
                    && iw < IW
                {
                    sum += w[c][kh][kw] * x[c][ih][iw];
                }
            }
        }
    }
    sum
}

/// The convolution written from its definition ([`definition_at`] for every output).
fn reference_conv<
    const C: usize,
    const OC: usize,
    const K: usize,
    const S: usize,
    const P: usize,
    const IH: usize,
    const IW: usize,
    const OH: usize,
    const OW: usize,
    St: Store,
>(
    layer: &Conv2d<f64, C, OC, K, S, P, IH, IW, OH, OW, Identity, St>,
    x: &[[[f64; IW]; IH]; C],
) -> [[[f64; OW]; OH]; OC] {
    let (w, b) = (St::matrix(&layer.weight), St::vector(&layer.bias));
    std::array::from_fn(|o| {
        std::array::from_fn(|i| {
            std::array::from_fn(|j| definition_at((&w[o], b[o]), x, (S, P), (i, j)))
        })
    })
}

#[test]
fn convolutions_compute_the_definition() {
    let mut rng = StdRng::seed_from_u64(1);
    // Stride 1 and 2, padding 0 and 1, one and several channels.
    macro_rules! case {
        ($c:literal, $oc:literal, $k:literal, $s:literal, $p:literal, $h:literal, $w:literal) => {{
            type L = Conv2d<
                f64,
                $c,
                $oc,
                $k,
                $s,
                $p,
                $h,
                $w,
                { constmat::nn::conv_output_size($h, $k, $s, $p) },
                { constmat::nn::conv_output_size($w, $k, $s, $p) },
            >;
            let layer: L = random_layer(&mut rng);
            let x = random_sample(&mut rng);
            let mut out = Default::default();
            layer.forward_one(&x, &mut out);
            let want = reference_conv(&layer, &x);
            let got: &[f64] = out.as_flattened().as_flattened();
            for (g, w) in got.iter().zip(want.as_flattened().as_flattened()) {
                assert!(
                    (g - w).abs() < 1e-12,
                    "Conv2d<{}, {}, {}, {}, {}> on {}x{}: {g} vs {w}",
                    $c,
                    $oc,
                    $k,
                    $s,
                    $p,
                    $h,
                    $w
                );
            }
        }};
    }
    case!(1, 1, 3, 1, 0, 5, 5);
    case!(1, 2, 3, 1, 1, 5, 6);
    case!(3, 4, 3, 2, 1, 7, 9);
    case!(2, 3, 2, 2, 0, 6, 4);
    case!(3, 2, 1, 1, 0, 3, 3);
    // Input rows and columns in no window (PyTorch's sizes): 1 x 1 stride 2 on 8 x 8, 3 x 3
    // stride 2 on 8 x 7 without padding, 4 x 4 stride 3 on 10 x 10 with padding 1.
    case!(2, 3, 1, 2, 0, 8, 8);
    case!(2, 3, 3, 2, 0, 8, 7);
    case!(1, 2, 4, 3, 1, 10, 10);
    // Stride 2, larger than the stack buffer of `Layer::forward` (3·3·3 x 16·16 patches): done
    // in blocks.
    case!(3, 5, 3, 2, 1, 32, 32);
    // Stride 1, the direct kernel: rows of two vectors (AVX-512) or four (AVX2), filters in blocks of 8 and more.
    case!(3, 11, 3, 1, 1, 9, 32);
}

/// With a stride other than 1, `Layer::forward` (patches in blocks, on the stack) and
/// `Train::forward_train` (all patches at once, in the workspace; small outputs several images
/// side by side) compute the same outputs, bit for bit; with stride 1 both run the direct
/// kernel.
#[test]
fn the_blocked_and_whole_forward_paths_agree() {
    let mut rng = StdRng::seed_from_u64(2);
    type Big = Conv2d<f32, 3, 8, 5, 2, 2, 32, 32, 16, 16, Relu>;
    let layer: Big = Big::random(&mut rng);
    let x: [[[[f32; 32]; 32]; 3]; 2] = std::array::from_fn(|_| {
        std::array::from_fn(|_| {
            std::array::from_fn(|_| std::array::from_fn(|_| uniform().sample(&mut rng) as f32))
        })
    });
    let mut ws = Train::<f32, 2>::workspace(&layer);
    let whole = *layer.forward_train(&x, &mut ws);
    let mut blocked = Box::new([[[[0.0_f32; 16]; 16]; 8]; 2]);
    layer.forward(&x, &mut blocked);
    assert_eq!(whole, *blocked);
    // 12 x 12 outputs (144 positions): the training pass multiplies two images' patches side by
    // side, a batch of 5 in groups of 2, 2 and 1; a prediction, one image at a time.
    type Grouped = Conv2d<f32, 4, 24, 3, 2, 1, 23, 23, 12, 12, Tanh>;
    let grouped: Grouped = Grouped::random(&mut rng);
    let images: Box<[[[[f32; 23]; 23]; 4]; 5]> = Box::new(std::array::from_fn(|_| {
        std::array::from_fn(|_| {
            std::array::from_fn(|_| std::array::from_fn(|_| uniform().sample(&mut rng) as f32))
        })
    }));
    let mut grouped_ws = Train::<f32, 5>::workspace(&grouped);
    let trained = *grouped.forward_train(&images, &mut grouped_ws);
    let mut one_by_one = Box::new([[[[0.0_f32; 12]; 12]; 24]; 5]);
    for (x, y) in images.iter().zip(one_by_one.iter_mut()) {
        grouped.forward_one(x, y);
    }
    assert_eq!(trained, *one_by_one);
    type Direct = Conv2d<f32, 3, 8, 5, 1, 2, 32, 32, 32, 32, Relu>;
    let layer: Direct = Direct::random(&mut rng);
    let mut ws = Train::<f32, 2>::workspace(&layer);
    let trained = *layer.forward_train(&x, &mut ws);
    let mut direct = Box::new([[[[0.0_f32; 32]; 32]; 8]; 2]);
    layer.forward(&x, &mut direct);
    assert_eq!(trained, *direct);
}

/// `Layer::forward` of a convolution with a stride other than 1 against the definition, on
/// each of the ways its stack buffer (16,384 elements on x86-64, 2,048 elsewhere) cuts the
/// product when the patches do not all fit: whole patches with the filters in groups, in blocks
/// of positions or of whole output rows, and chunks of large patches' rows, with all filters or
/// groups of 64. (Whole patches with all filters: `convolutions_compute_the_definition`.)
#[test]
fn strided_convolutions_too_large_for_the_stack_buffer_compute_the_definition() {
    fn check<
        const C: usize,
        const OC: usize,
        const K: usize,
        const P: usize,
        const IH: usize,
        const IW: usize,
        const OH: usize,
        const OW: usize,
    >(
        what: &str,
        rng: &mut StdRng,
    ) {
        let layer: Conv2d<f64, C, OC, K, 2, P, IH, IW, OH, OW> = random_layer(rng);
        let x: Box<[[[f64; IW]; IH]; C]> = Box::new(random_sample(rng));
        // On the heap, element by element: 1,100 filters' outputs would not fit the stack of a
        // debug build's test thread.
        let mut out: Box<[[[f64; OW]; OH]; OC]> = vec![[[0.0; OW]; OH]; OC]
            .into_boxed_slice()
            .try_into()
            .unwrap();
        layer.forward(std::array::from_ref(&*x), std::array::from_mut(&mut *out));
        let (w, b) = (Heap::matrix(&layer.weight), Heap::vector(&layer.bias));
        for o in 0..OC {
            for i in 0..OH {
                for j in 0..OW {
                    let want = definition_at((&w[o], b[o]), &x, (2, P), (i, j));
                    let got = out[o][i][j];
                    assert!(
                        (got - want).abs() < 1e-10,
                        "{what}, output ({o}, {i}, {j}): {got} vs {want}"
                    );
                }
            }
        }
    }
    let mut rng = StdRng::seed_from_u64(3);
    if cfg!(target_arch = "x86_64") {
        // Two filters of 256·6·6 = 9,216 weights: chunks of 2,729 rows (4 of them), one block
        // of 4 positions.
        check::<256, 2, 6, 0, 8, 8, 2, 2>("filters larger than the buffer", &mut rng);
        // Patches of 240·3·3 = 2,160: groups of 64 and 6 filters, 3 blocks of positions (16,
        // 16, 4), chunks of 192 rows (11 of them and one of 48).
        check::<240, 70, 3, 1, 12, 12, 6, 6>("many filters and channels", &mut rng);
        // Patches of 4: whole, in blocks of 8 positions, the filters in groups of 2,044 (one
        // of them and one of 56).
        check::<1, 2100, 2, 0, 48, 48, 24, 24>("more than 2,000 filters", &mut rng);
        // Patches of 3·7·7 = 147 for 32 filters: blocks of 2 whole output rows of 32 (91
        // positions fit), unrolled row by row.
        check::<3, 32, 7, 3, 64, 64, 32, 32>("whole output rows", &mut rng);
        return;
    }
    // Two filters of 64·6·6 = 2,304 weights: chunks of 340 rows, one block of 4 positions.
    check::<64, 2, 6, 0, 8, 8, 2, 2>("filters larger than the buffer", &mut rng);
    // Patches of 40·3·3 = 360: groups of 64 and 6 filters, 3 blocks of positions (16, 16, 4),
    // 30 chunks of 12 rows.
    check::<40, 70, 3, 1, 12, 12, 6, 6>("many filters and channels", &mut rng);
    // Patches of 4: whole, in blocks of 8 positions, the filters in groups of 252 (4 of them
    // and one of 92).
    check::<1, 1100, 2, 0, 48, 48, 24, 24>("more than 1,000 filters", &mut rng);
    // Patches of 16·3·3 = 144: whole, the filters in groups of 112 (5 of them and one of 40),
    // blocks of 8 positions.
    check::<16, 600, 3, 1, 15, 15, 8, 8>("hundreds of filters", &mut rng);
}

/// One case of the convolution gradient checks: a random `Conv2d` of these sizes and
/// activation, checked on two samples, heap and inline storage.
macro_rules! gradient_case {
    ($rng:ident, $worst:ident; $a:ty, $c:literal, $oc:literal, $k:literal, $s:literal, $p:literal, $h:literal, $w:literal) => {{
        type L = Conv2d<
            f64,
            $c,
            $oc,
            $k,
            $s,
            $p,
            $h,
            $w,
            { constmat::nn::conv_output_size($h, $k, $s, $p) },
            { constmat::nn::conv_output_size($w, $k, $s, $p) },
            $a,
        >;
        let layer: L = random_layer(&mut $rng);
        let x: [<L as Layer>::In; 2] = [random_sample(&mut $rng), random_sample(&mut $rng)];
        let what = format!(
            "Conv2d<{}, {}, {}, stride {}, padding {}> on {}x{}",
            $c, $oc, $k, $s, $p, $h, $w
        );
        $worst = $worst.max(check(&what, &layer, &x, &mut $rng));
        // The same layer with inline storage: the same code, the same gradients.
        let inline = layer.to_store::<Inline>();
        $worst = $worst.max(check(&format!("{what}, inline"), &inline, &x, &mut $rng));
    }};
}

#[test]
fn convolution_gradients_of_small_and_strided_layers() {
    let mut rng = StdRng::seed_from_u64(3);
    let mut worst = 0.0_f64;
    gradient_case!(rng, worst; Identity, 1, 1, 3, 1, 0, 5, 5);
    gradient_case!(rng, worst; Tanh, 1, 2, 3, 1, 1, 5, 5);
    gradient_case!(rng, worst; Sigmoid, 2, 3, 3, 2, 1, 7, 7);
    gradient_case!(rng, worst; Tanh, 3, 2, 2, 2, 0, 6, 4);
    gradient_case!(rng, worst; Identity, 2, 4, 3, 2, 0, 7, 5);
    // Rows and columns left over at the end (8 + 2 - 3 = 7 is odd): the last padding row is in
    // no window.
    gradient_case!(rng, worst; Tanh, 2, 3, 3, 2, 1, 8, 8);
    // Kernels smaller than the stride: whole input rows and columns in no window, whose
    // gradient is 0.
    gradient_case!(rng, worst; Identity, 2, 2, 1, 2, 0, 5, 5);
    gradient_case!(rng, worst; Sigmoid, 1, 2, 2, 3, 0, 8, 8);
    // Stride 3 with padding 2, two padding rows left over.
    gradient_case!(rng, worst; Tanh, 2, 2, 3, 3, 2, 7, 7);
    // Input rows and columns left over at the end, in no window, as PyTorch allows: ResNet's
    // 1 x 1 stride-2 shortcut on an even size, and 10 + 2 - 4 = 8 with stride 3 (two left
    // over, one of them input).
    gradient_case!(rng, worst; Tanh, 2, 3, 1, 2, 0, 8, 8);
    gradient_case!(rng, worst; Identity, 2, 2, 4, 3, 1, 10, 9);
    eprintln!("Conv2d: worst relative error {worst:e}");
}

/// A strided layer's backward pass takes its samples in groups whose patches and `dZ` lie side
/// by side (enough for 256 output positions: 3 of this layer's 11 x 11): at a batch of 5, a
/// whole group and a shorter one, the gradients still pass the finite-difference check.
#[test]
fn convolution_gradients_of_a_strided_layer_over_groups_of_samples() {
    let mut rng = StdRng::seed_from_u64(31);
    type L = Conv2d<f64, 2, 3, 3, 2, 1, 22, 22, 11, 11, Tanh>;
    let layer: L = random_layer(&mut rng);
    let x: [<L as Layer>::In; 5] = core::array::from_fn(|_| random_sample(&mut rng));
    let worst = check(
        "Conv2d<2, 3, 3, stride 2, padding 1> on 22x22, batch 5",
        &layer,
        &x,
        &mut rng,
    );
    eprintln!("Conv2d: worst relative error {worst:e}");
}

/// As [`convolution_gradients_of_small_and_strided_layers`] (a test of its own, so that the two
/// run side by side).
#[test]
fn convolution_gradients_of_the_stride_1_kernels() {
    let mut rng = StdRng::seed_from_u64(4);
    let mut worst = 0.0_f64;
    // LeNet's first layer's kernel and padding.
    gradient_case!(rng, worst; Tanh, 1, 2, 5, 1, 2, 6, 6);
    // Sixteen filters, stride 1: the kernels with the filters in their vector lanes (with
    // AVX-512: the forward pass, and the weight gradient by Winograd's method; with AVX2 they
    // put the positions in them, equally full). The padded cases with few filters take the
    // weight gradient with the positions in the lanes, which pads the images as it copies them.
    gradient_case!(rng, worst; Identity, 3, 16, 3, 1, 1, 4, 4);
    // Stride 1 with kernels other than 3 to 5 takes the product and col2im for dX.
    gradient_case!(rng, worst; Tanh, 2, 3, 2, 1, 0, 5, 6);
    gradient_case!(rng, worst; Identity, 2, 2, 6, 1, 2, 5, 5);
    eprintln!("Conv2d: worst relative error {worst:e}");
}

/// As [`convolution_gradients_of_small_and_strided_layers`], where dX takes Winograd's method.
#[test]
fn convolution_gradients_of_winograds_input_gradient() {
    let mut rng = StdRng::seed_from_u64(5);
    let mut worst = 0.0_f64;
    // Stride 1 with kernels of 3 to 5 takes Winograd's method for dX (on x86-64 with AVX2 or
    // AVX-512); sizes its tiles do not divide, and a 4 x 4 kernel:
    gradient_case!(rng, worst; Tanh, 3, 4, 4, 1, 1, 7, 6);
    gradient_case!(rng, worst; Identity, 6, 5, 5, 1, 0, 7, 9);
    eprintln!("Conv2d: worst relative error {worst:e}");
}

/// A convolution with `Relu6` gives its `Identity` outputs clamped to [0, 6], in `f32` (the SIMD
/// kernels store without an activation, which is then applied). (Its gradient: `dense_relu6` in
/// `tests/gradient_check.rs`; a convolution applies the same `Activation`.)
#[test]
fn relu6_after_a_convolution_clamps_its_outputs() {
    let mut rng = StdRng::seed_from_u64(21);
    type Plain = Conv2d<f32, 3, 16, 3, 1, 1, 12, 12, 12, 12, Identity>;
    type Clamped = Conv2d<f32, 3, 16, 3, 1, 1, 12, 12, 12, 12, Relu6>;
    let random: Plain = Plain::random(&mut rng);
    // The same parameters in both, scaled so that outputs reach past 6.
    let (mut plain, mut clamped) = (Plain::zeros(), Clamped::zeros());
    for k in 0..random.tensor_count() {
        let scaled: Vec<f32> = random.tensor(k).iter().map(|v| 12.0 * v).collect();
        plain.tensor_mut(k).copy_from_slice(&scaled);
        clamped.tensor_mut(k).copy_from_slice(&scaled);
    }
    let x: [[[[f32; 12]; 12]; 3]; 2] = std::array::from_fn(|_| {
        std::array::from_fn(|_| {
            std::array::from_fn(|_| std::array::from_fn(|_| uniform().sample(&mut rng) as f32))
        })
    });
    let (mut z, mut a) = (
        Box::new([[[[0.0_f32; 12]; 12]; 16]; 2]),
        Box::new([[[[0.0_f32; 12]; 12]; 16]; 2]),
    );
    plain.forward(&x, &mut z);
    clamped.forward(&x, &mut a);
    let (z, a) = (
        z.as_flattened().as_flattened().as_flattened(),
        a.as_flattened().as_flattened().as_flattened(),
    );
    let (mut below, mut above) = (0, 0);
    for (z, a) in z.iter().zip(a) {
        assert_eq!(*a, z.clamp(0.0, 6.0));
        below += usize::from(*z < 0.0);
        above += usize::from(*z > 6.0);
    }
    assert!(below > 0 && above > 0, "{below} below 0, {above} above 6");
}

/// How close to ReLU's kink a pre-activation may be, and how close to a tie the two largest
/// inputs of a pooling window (as in `tests/gradient_check.rs`): a perturbation of `h = 1e-6`
/// moves them by far less, so no difference quotient straddles a point where the net is not
/// differentiable.
const KINK_MARGIN: f64 = 1e-3;

/// A small CNN, the shape of LeNet, through `net!`'s image form: every tensor and dX. Its second
/// convolution has stride 2 and leaves a padding row over (4 + 2 - 3 = 3 is odd).
#[test]
fn whole_cnn_gradients() {
    type Cnn = constmat::net![
        Input<f64, 2, 8, 8>,
        Conv2d<2, 3, 3, 1, 1, Tanh>, // 3 x 8 x 8
        MaxPool2d<2>,                // 3 x 4 x 4
        Conv2d<3, 4, 3, 2, 1, Relu>, // 4 x 2 x 2
        Flatten,                     // 16
        Dense<16, 5, Sigmoid>,
        Dense<5, 3>,
    ];
    let mut rng = StdRng::seed_from_u64(6);
    // Resampled until every pooling window has a clear maximum and every pre-activation of the
    // ReLU layer is clear of 0, with both signs present (both branches of ReLU exercised). Two
    // draws do it; a bounded number, so that a forward pass broken into constants fails the
    // test instead of looping.
    let (net, x) = (0..100)
        .find_map(|_| {
            let net: Cnn = random_layer(&mut rng);
            let x: [<Cnn as Layer>::In; 2] = [random_sample(&mut rng), random_sample(&mut rng)];
            let conv1 = &net.first;
            let (pool, conv2) = (&net.rest.first, &net.rest.rest.first);
            let mut a1 = [[[[0.0; 8]; 8]; 3]; 2];
            conv1.forward(&x, &mut a1);
            let mut pooled = [[[[0.0; 4]; 4]; 3]; 2];
            pool.forward(&a1, &mut pooled);
            let windows_clear = a1.iter().flatten().all(|plane| {
                (0..4).all(|i| {
                    (0..4).all(|j| {
                        let mut w = [
                            plane[2 * i][2 * j],
                            plane[2 * i][2 * j + 1],
                            plane[2 * i + 1][2 * j],
                            plane[2 * i + 1][2 * j + 1],
                        ];
                        w.sort_by(f64::total_cmp);
                        w[3] - w[2] > KINK_MARGIN
                    })
                })
            });
            let (w, b) = (Heap::matrix(&conv2.weight), Heap::vector(&conv2.bias));
            let z: Vec<f64> = pooled
                .iter()
                .flat_map(|p| {
                    (0..4).flat_map(move |o| {
                        (0..2).flat_map(move |i| {
                            (0..2).map(move |j| definition_at((&w[o], b[o]), p, (2, 1), (i, j)))
                        })
                    })
                })
                .collect();
            let relu_clear = z.iter().all(|z| z.abs() > KINK_MARGIN)
                && z.iter().any(|&z| z > 0.0)
                && z.iter().any(|&z| z < 0.0);
            (windows_clear && relu_clear).then_some((net, x))
        })
        .expect("100 draws, none clear of ReLU's kink and of ties in the pooling windows");
    let err = check("CNN", &net, &x, &mut rng);
    let inline = net.to_store::<Inline>();
    check("CNN, inline", &inline, &x, &mut rng);
    assert_eq!(inline.to_store::<Heap>(), net);
    eprintln!("CNN: worst relative error {err:e}");
}

/// The LeNet-5 of `examples/mnist_cnn`.
type LeNet = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 6, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Conv2d<6, 16, 5, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<400, 120, Relu>,
    Dense<120, 84, Relu>,
    Dense<84, 10>,
];

#[test]
fn the_image_form_of_net_spells_pytorchs_sequential() {
    type Spelled = Chain<
        Conv2d<f32, 1, 6, 5, 1, 2, 28, 28, 28, 28, Relu>,
        Chain<
            MaxPool2d<f32, 6, 2, 2, 28, 28, 14, 14>,
            Chain<
                Conv2d<f32, 6, 16, 5, 1, 0, 14, 14, 10, 10, Relu>,
                Chain<
                    MaxPool2d<f32, 16, 2, 2, 10, 10, 5, 5>,
                    Chain<
                        Flatten<f32, 16, 5, 5, 400>,
                        constmat::net![
                            Dense<f32, 400, 120, Relu>,
                            Dense<f32, 120, 84, Relu>,
                            Dense<f32, 84, 10>,
                        ],
                    >,
                >,
            >,
        >,
    >;
    let same: fn(LeNet) -> Spelled = |net| net;
    let _ = same;
    let names: Vec<String> = (0..LeNet::SPEC.tensor_count())
        .map(|k| {
            let tensor = LeNet::SPEC.tensor(k).unwrap();
            format!("{} {:?}", tensor.name(), tensor.spec.shape)
        })
        .collect();
    assert_eq!(
        names,
        [
            "0.weight [6, 1, 5, 5]",
            "0.bias [6]",
            "3.weight [16, 6, 5, 5]",
            "3.bias [16]",
            "7.weight [120, 400]",
            "7.bias [120]",
            "9.weight [84, 120]",
            "9.bias [84]",
            "11.weight [10, 84]",
            "11.bias [10]",
        ]
    );
    let _: Relu = Relu;
}

/// A convolution block for any image size: stable Rust cannot compute the output size from the
/// generic `H` and `W`, so the caller names it, and the layer checks it (a wrong size fails the
/// build: `tests/ui/fail/conv_output_size_by_hand.rs`).
type Block<const H: usize, const W: usize, const OH: usize, const OW: usize> =
    Chain<Conv2d<f64, 1, 2, 3, 1, 1, H, W, H, W, Relu>, MaxPool2d<f64, 2, 2, 2, H, W, OH, OW>>;

fn conv_block<const H: usize, const W: usize, const OH: usize, const OW: usize>(
    rng: &mut StdRng,
) -> Block<H, W, OH, OW> {
    Chain::new(Conv2d::random(rng), MaxPool2d::new())
}

#[test]
fn generic_code_over_the_sizes_builds_blocks_of_any_size() {
    let mut rng = StdRng::seed_from_u64(7);
    let square: Block<8, 8, 4, 4> = conv_block(&mut rng);
    let wide: Block<6, 10, 3, 5> = conv_block(&mut rng);
    let mut out = [[[0.0; 4]; 4]; 2];
    square.forward_one(&random_sample(&mut rng), &mut out);
    let mut out = [[[0.0; 5]; 3]; 2];
    wide.forward_one(&random_sample(&mut rng), &mut out);
    assert!(
        out.as_flattened()
            .as_flattened()
            .iter()
            .all(|v| v.is_finite())
    );
}

/// A CNN saved with `io::safetensors` loads back equal (PyTorch's names and shapes), and its
/// inline form computes what the heap net computes, bit for bit: the path of a baked net
/// (`include_net!` decodes with the same rule, `tests/pytorch_cnn.rs` bakes a file).
#[cfg(feature = "safetensors")]
#[test]
fn a_saved_cnn_loads_back_and_its_inline_form_computes_the_same() {
    use constmat::io::safetensors;
    type Cnn = constmat::net![
        Input<f32, 2, 9, 9>,
        Conv2d<2, 3, 3, 2, 1, Relu>, // 3 x 5 x 5 (stride 2: patches)
        Conv2d<3, 4, 3, 1, 1, Tanh>, // 4 x 5 x 5 (stride 1: the direct kernel)
        MaxPool2d<2, 1>,             // 4 x 4 x 4
        Flatten,                     // 64
        Dense<64, 3>,
    ];
    let net = Cnn::random(&mut StdRng::seed_from_u64(9));
    let bytes = safetensors::to_bytes(&net, &[]);
    let loaded: Cnn = safetensors::from_bytes::<Cnn>(&bytes).expect("the file just written");
    assert_eq!(loaded, net);
    let names: Vec<String> = (0..net.tensor_count())
        .map(|k| {
            format!(
                "{} {:?}",
                net.tensor_info(k).name(),
                net.tensor_info(k).shape()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "0.weight [3, 2, 3, 3]",
            "0.bias [3]",
            "2.weight [4, 3, 3, 3]",
            "2.bias [4]",
            "6.weight [3, 64]",
            "6.bias [3]"
        ]
    );
    let inline = net.to_store::<Inline>();
    let mut rng = StdRng::seed_from_u64(10);
    let x: [[[f32; 9]; 9]; 2] = std::array::from_fn(|_| {
        std::array::from_fn(|_| std::array::from_fn(|_| uniform().sample(&mut rng) as f32))
    });
    let (mut heap_out, mut inline_out) = ([0.0; 3], [0.0; 3]);
    net.forward_one(&x, &mut heap_out);
    inline.forward_one(&x, &mut inline_out);
    assert_eq!(heap_out, inline_out);
    assert!(heap_out.iter().all(|v| v.is_finite()));
}

/// `predict_batch` answered for the whole batch in one forward pass, with every hidden layer's
/// outputs for all `B` samples on the stack: a LeNet-5 of 64 images overflowed a test thread's
/// 2 MiB (in release too). It now takes chunks of a few samples, or one at a time for a net
/// whose buffers are large, and gives what `predict` gives for each sample.
#[test]
fn predict_batch_of_a_cnn_fits_the_stack_and_agrees_with_predict() {
    use constmat::nn::{PREDICT_CHUNK, PREDICT_CHUNK_STACK, Predict};
    let mut rng = StdRng::seed_from_u64(12);
    let pixels = Uniform::new(0.0_f32, 1.0).unwrap();
    let cnn = LeNet::random(&mut rng);
    const {
        assert!(
            LeNet::WORKING_BYTES * PREDICT_CHUNK > PREDICT_CHUNK_STACK,
            "one at a time"
        )
    };
    let images: Box<[[[[f32; 28]; 28]; 1]; 64]> = vec![[[[0.0; 28]; 28]; 1]; 64]
        .into_boxed_slice()
        .try_into()
        .unwrap();
    let mut images = images;
    for p in images.iter_mut().flatten().flatten().flatten() {
        *p = pixels.sample(&mut rng);
    }
    let mut classes = [usize::MAX; 64];
    cnn.predict_batch(&images, &mut classes);
    let each: Vec<usize> = images.iter().map(|x| cnn.predict(x)).collect();
    assert_eq!(classes[..], each[..]);

    // A net whose whole batch does not fit but whose chunks do: in chunks of PREDICT_CHUNK,
    // then the samples left one at a time (21 = 2 x 8 + 5), each class as `predict`'s.
    type Mlp = constmat::net![Dense<f32, 12, 1024, Relu>, Dense<f32, 1024, 5>];
    const {
        assert!(
            Mlp::WORKING_BYTES * 21 > PREDICT_CHUNK_STACK,
            "not all at once"
        )
    };
    const {
        assert!(
            Mlp::WORKING_BYTES * PREDICT_CHUNK <= PREDICT_CHUNK_STACK,
            "in chunks"
        )
    };
    let mlp = Mlp::random(&mut rng);
    let xs: [[f32; 12]; 21] =
        std::array::from_fn(|_| std::array::from_fn(|_| pixels.sample(&mut rng)));
    let mut classes = [usize::MAX; 21];
    mlp.predict_batch(&xs, &mut classes);
    let each: Vec<usize> = xs.iter().map(|x| mlp.predict(x)).collect();
    assert_eq!(classes[..], each[..]);
    assert!(
        each.iter().any(|&c| c != each[0]),
        "the classes differ: the test can tell"
    );
    // A batch whose buffers fit: all at once, the same classes.
    let mut first = [usize::MAX; 4];
    mlp.predict_batch(xs[..4].try_into().unwrap(), &mut first);
    assert_eq!(first[..], each[..4]);
}

/// The outputs count too: a one-layer net keeps no buffers between layers (`WORKING_BYTES` is
/// 0), and `predict_batch` of 400,000 samples put 16 MB of outputs on the stack at once.
#[test]
fn predict_batch_of_a_huge_batch_of_a_one_layer_net_fits_the_stack() {
    use constmat::nn::Predict;
    type One = constmat::net![Dense<f32, 4, 10>];
    let net = One::random(&mut StdRng::seed_from_u64(13));
    let xs: Box<[[f32; 4]; 400_000]> = (0..400_000)
        .map(|i| [i as f32 % 7.0 - 3.0, 1.0, -(i as f32 % 5.0), 0.5])
        .collect::<Vec<_>>()
        .into_boxed_slice()
        .try_into()
        .unwrap();
    let mut classes: Box<[usize; 400_000]> =
        vec![0; 400_000].into_boxed_slice().try_into().unwrap();
    net.predict_batch(&xs, &mut classes);
    for k in [0, 1, 12_345, 399_999] {
        assert_eq!(classes[k], net.predict(&xs[k]), "sample {k}");
    }
}

/// A stride-1 convolution with a 3 x 3 to 5 x 5 kernel computes `dX` by Winograd's method on
/// a CPU with AVX2 or AVX-512 (its scratch is in the workspace): the gradient checks above
/// then test that path, not the product and `col2im`.
#[test]
fn stride_1_convolutions_take_winograds_input_gradient_where_the_cpu_has_it() {
    #[cfg(target_arch = "x86_64")]
    let wide = std::is_x86_feature_detected!("avx512f")
        || (std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"));
    #[cfg(not(target_arch = "x86_64"))]
    let wide = false;
    let mut rng = StdRng::seed_from_u64(12);
    let layer: Conv2d<f64, 2, 3, 3, 1, 1, 6, 6, 6, 6> = random_layer(&mut rng);
    assert_eq!(
        !Train::<f64, 2>::workspace(&layer).winograd.is_empty(),
        wide,
        "Winograd's scratch in the workspace of a 3 x 3 stride-1 convolution"
    );
    // Kernels of other sizes and other strides never take it.
    let two: Conv2d<f64, 2, 3, 2, 1, 0, 6, 6, 5, 5> = random_layer(&mut rng);
    assert!(Train::<f64, 2>::workspace(&two).winograd.is_empty());
    let strided: Conv2d<f64, 2, 3, 3, 2, 1, 6, 6, 3, 3> = random_layer(&mut rng);
    assert!(Train::<f64, 2>::workspace(&strided).winograd.is_empty());
}

/// Layers reading an empty input with padding (0 rows or 0 columns; 0 channels or filters are a
/// compile error, `tests/ui/fail/layer_of_zero_size_by_hand.rs`) train without a panic on a
/// batch that is not a multiple of 16, their input gradients are 0, and their bias gradients
/// the sum of `dZ`.
#[test]
fn convolutions_with_a_size_of_0_have_gradients() {
    fn run<
        const C: usize,
        const OC: usize,
        const P: usize,
        const H: usize,
        const W: usize,
        const OH: usize,
        const OW: usize,
    >() {
        const B: usize = 5;
        let layer: Conv2d<f64, C, OC, 3, 1, P, H, W, OH, OW> = Conv2d::zeros();
        let x = [[[[0.5; W]; H]; C]; B];
        let mut ws = Train::<f64, B>::workspace(&layer);
        layer.forward_train(&x, &mut ws);
        let d_output = [[[[1.0; OW]; OH]; OC]; B];
        let mut d_input = [[[[f64::NAN; W]; H]; C]; B];
        let mut gradients = Conv2d::zeros();
        layer.backward(&x, &mut ws, &d_output, Some(&mut d_input), &mut gradients);
        assert!(
            d_input
                .as_flattened()
                .as_flattened()
                .as_flattened()
                .iter()
                .all(|&v| v == 0.0),
            "C {C}, OC {OC}, {H} x {W}"
        );
        // The bias gradient sums dZ = dA = 1 (no activation) over the samples and positions.
        let want = (B * OH * OW) as f64;
        assert!(
            gradients.bias.iter().all(|&db| db == want),
            "C {C}, OC {OC}, {H} x {W}: bias gradient {:?}, expected {want} each",
            gradients.bias
        );
    }
    run::<2, 3, 2, 0, 5, 2, 7>();
    run::<2, 3, 2, 5, 0, 7, 2>();
}

/// `forward_uninit` of `layer` into a buffer holding `stale` values equals `forward` into
/// zeros: every output written, whatever the buffer held (the layers that skip zeroing it) or
/// zeroed first (the others).
fn forward_uninit_is_forward<L, const B: usize>(
    what: &str,
    layer: &L,
    x: &[L::In; B],
    stale: L::Out,
) where
    L: Layer,
    L::Out: std::fmt::Debug,
{
    let mut want = [L::Out::ZERO; B];
    layer.forward(x, &mut want);
    let mut buffer = std::mem::MaybeUninit::new([stale; B]);
    let got = layer.forward_uninit(x, &mut buffer);
    assert_eq!(*got, want, "{what}");
    assert_ne!(want[0], stale, "{what}: the stale values can be told apart");
}

#[test]
fn forward_uninit_writes_every_output_as_forward_does() {
    let mut rng = StdRng::seed_from_u64(21);
    let pixels = Uniform::new(-1.0_f32, 1.0).unwrap();
    let images = |rng: &mut StdRng, c: usize, h: usize, w: usize| -> Vec<f32> {
        (0..2 * c * h * w).map(|_| pixels.sample(rng)).collect()
    };
    macro_rules! batch {
        ($v:expr, $c:literal, $h:literal, $w:literal) => {{
            let v = $v;
            let x: [[[[f32; $w]; $h]; $c]; 2] = std::array::from_fn(|b| {
                std::array::from_fn(|c| {
                    std::array::from_fn(|i| {
                        std::array::from_fn(|j| v[((b * $c + c) * $h + i) * $w + j])
                    })
                })
            });
            x
        }};
    }
    // Stride 1, ReLU applied by the kernel (the first layer of LeNet-5: positions in the lanes).
    let conv: Conv2d<f32, 1, 6, 5, 1, 2, 28, 28, 28, 28, Relu> = RandomInit::random(&mut rng);
    let x = batch!(images(&mut rng, 1, 28, 28), 1, 28, 28);
    forward_uninit_is_forward("conv, stride 1, ReLU", &conv, &x, [[[7.5; 28]; 28]; 6]);
    // Stride 1, the activation after the kernel (LeNet-5's second layer: Winograd's kernel).
    let conv: Conv2d<f32, 6, 16, 5, 1, 0, 14, 14, 10, 10, Tanh> = RandomInit::random(&mut rng);
    let x = batch!(images(&mut rng, 6, 14, 14), 6, 14, 14);
    forward_uninit_is_forward("conv, stride 1, tanh", &conv, &x, [[[7.5; 10]; 10]; 16]);
    // Stride 2: zeroed first, then `forward`.
    let conv: Conv2d<f32, 3, 4, 3, 2, 1, 9, 9, 5, 5, Relu> = RandomInit::random(&mut rng);
    let x = batch!(images(&mut rng, 3, 9, 9), 3, 9, 9);
    forward_uninit_is_forward("conv, stride 2", &conv, &x, [[[7.5; 5]; 5]; 4]);
    // In f64 (the SIMD kernels' other element type).
    let conv: Conv2d<f64, 2, 3, 3, 1, 1, 6, 7, 6, 7, Sigmoid> = RandomInit::random(&mut rng);
    let x: [[[[f64; 7]; 6]; 2]; 2] = [random_sample(&mut rng), random_sample(&mut rng)];
    forward_uninit_is_forward("conv, f64", &conv, &x, [[[7.5; 7]; 6]; 3]);

    // Max pooling 2 x 2 in f32 (the SIMD kernels, where the CPU has them: a row pair at a
    // time, and several per vector for rows of at most 16).
    let x = batch!(images(&mut rng, 6, 28, 28), 6, 28, 28);
    let pool = MaxPool2d::<f32, 6, 2, 2, 28, 28, 14, 14>::new();
    forward_uninit_is_forward("pool 2 x 2", &pool, &x, [[[7.5; 14]; 14]; 6]);
    let x = batch!(images(&mut rng, 3, 6, 10), 3, 6, 10);
    let pool = MaxPool2d::<f32, 3, 2, 2, 6, 10, 3, 5>::new();
    forward_uninit_is_forward("pool 2 x 2, narrow", &pool, &x, [[[7.5; 5]; 3]; 3]);
    // Other windows and f64: zeroed first.
    let x = batch!(images(&mut rng, 3, 7, 9), 3, 7, 9);
    let pool = MaxPool2d::<f32, 3, 3, 2, 7, 9, 3, 4>::new();
    forward_uninit_is_forward("pool 3 x 3", &pool, &x, [[[7.5; 4]; 3]; 3]);
    let x: [[[[f64; 8]; 6]; 2]; 2] = [random_sample(&mut rng), random_sample(&mut rng)];
    let pool = MaxPool2d::<f64, 2, 2, 2, 6, 8, 3, 4>::new();
    forward_uninit_is_forward("pool, f64", &pool, &x, [[[7.5; 4]; 3]; 2]);

    // A whole net: its chain keeps the samples between its layers in buffers not zeroed first.
    let net = LeNet::random(&mut rng);
    let x = batch!(images(&mut rng, 1, 28, 28), 1, 28, 28);
    forward_uninit_is_forward("LeNet-5", &net, &x, [7.5; 10]);
    let mut trained_way = Train::<f32, 2>::workspace(&net);
    let logits = net.forward_train(&x, &mut trained_way);
    let mut y = [[0.0; 10]; 2];
    net.forward(&x, &mut y);
    assert_eq!(
        logits[..],
        y[..],
        "forward and forward_train agree bit for bit"
    );
}

/// A net's first layer, of ReLU in f32 (no `dX` asked for), where a kernel forms
/// `dZ = dA ⊙ ReLU'(A)` as it reads `dA` and `A` and sums the bias gradient there (LeNet-5's
/// first layer on AVX-512): its gradients are those the same layer gives when asked for `dX`
/// too, which forms `dZ` in its own loop first; the weight gradient bit for bit, the bias
/// gradient within rounding of the sums in f64, into gradient buffers holding stale values.
/// A NaN in `dA` where `A = 0` reaches both gradients, as `dA · 0` does in the loop. Where the
/// CPU has no such kernel, both calls take the loop and the test still holds.
#[test]
fn a_first_relu_layers_gradients_are_those_it_gives_when_asked_for_dx() {
    type First = Conv2d<f32, 1, 6, 5, 1, 2, 28, 28, 28, 28, Relu>;
    const B: usize = 3;
    let mut rng = StdRng::seed_from_u64(14);
    let mut value = || uniform().sample(&mut rng) as f32;
    let mut layer = First::zeros();
    for k in 0..layer.tensor_count() {
        layer.tensor_mut(k).iter_mut().for_each(|v| *v = value());
    }
    let x: [[[[f32; 28]; 28]; 1]; B] =
        std::array::from_fn(|_| [std::array::from_fn(|_| std::array::from_fn(|_| value()))]);
    let d_output: [[[[f32; 28]; 28]; 6]; B] = std::array::from_fn(|_| {
        std::array::from_fn(|_| std::array::from_fn(|_| std::array::from_fn(|_| value())))
    });
    let mut ws = Train::<f32, B>::workspace(&layer);
    let output = *layer.forward_train(&x, &mut ws);
    let flat =
        |v: &[[[[f32; 28]; 28]; 6]; B]| v.as_flattened().as_flattened().as_flattened().to_vec();
    let (a, da) = (flat(&output), flat(&d_output));
    assert!(
        a.iter().filter(|&&a| a == 0.0).count() > a.len() / 4,
        "ReLU's zeros, which the derivative must mask"
    );
    // db in f64, and the scale its sums round against.
    let (mut want_bias, mut scale) = ([0.0_f64; 6], [0.0_f64; 6]);
    for (i, (&a, &da)) in a.iter().zip(&da).enumerate() {
        let dz = if a > 0.0 { f64::from(da) } else { 0.0 };
        want_bias[i / (28 * 28) % 6] += dz;
        scale[i / (28 * 28) % 6] += dz.abs();
    }
    let stale = || {
        let mut g = First::zeros();
        for k in 0..g.tensor_count() {
            g.tensor_mut(k).fill(7.0);
        }
        g
    };
    let mut with_dx = stale();
    let mut d_input = [[[[f32::NAN; 28]; 28]; 1]; B];
    layer.backward(&x, &mut ws, &d_output, Some(&mut d_input), &mut with_dx);
    let mut without_dx = stale();
    layer.backward(&x, &mut ws, &d_output, None, &mut without_dx);
    assert_eq!(
        without_dx.tensor(0),
        with_dx.tensor(0),
        "the weight gradient"
    );
    for (f, ((&got, &loop_sum), &want)) in without_dx
        .tensor(1)
        .iter()
        .zip(with_dx.tensor(1))
        .zip(&want_bias)
        .enumerate()
    {
        for (what, got) in [("fused", got), ("loop", loop_sum)] {
            assert!(
                (f64::from(got) - want).abs() <= 1e-6 * (1.0 + scale[f]),
                "{what} bias gradient of filter {f}: {got}, expected {want}"
            );
        }
    }

    // A NaN in dA where A = 0 (masked by ReLU') still reaches both gradients.
    let at = a.iter().position(|&a| a == 0.0).expect("a zero output");
    let mut d_output = d_output;
    d_output
        .as_flattened_mut()
        .as_flattened_mut()
        .as_flattened_mut()[at] = f32::NAN;
    let mut gradients = stale();
    layer.backward(&x, &mut ws, &d_output, None, &mut gradients);
    let filter = at / (28 * 28) % 6;
    assert!(
        gradients.tensor(1)[filter].is_nan(),
        "db of filter {filter}"
    );
    assert!(
        gradients.tensor(0)[filter * 25..(filter + 1) * 25]
            .iter()
            .any(|w| w.is_nan()),
        "dW of filter {filter}"
    );
}

/// A first ReLU layer in f32 whose images are empty (a height or a width of 0) but whose
/// padding leaves outputs: its padded shape is one the fused kernel of the test above takes,
/// its images are not, and it trains on the layer's loops without a panic. The outputs are
/// `ReLU(b)` (no input reaches them), so with positive biases and `dA = 1` the bias gradient
/// counts the outputs and the weight gradient is 0.
#[test]
fn a_first_relu_layer_with_empty_images_trains_without_a_panic() {
    fn run<const H: usize, const W: usize, const OH: usize, const OW: usize>() {
        const B: usize = 2;
        let mut layer: Conv2d<f32, 1, 2, 5, 1, 3, H, W, OH, OW, Relu> = Conv2d::zeros();
        layer.tensor_mut(1).fill(0.5);
        let x = [[[[0.0; W]; H]; 1]; B];
        let mut ws = Train::<f32, B>::workspace(&layer);
        layer.forward_train(&x, &mut ws);
        let mut gradients = Conv2d::zeros();
        gradients.tensor_mut(0).fill(f32::NAN);
        layer.backward(
            &x,
            &mut ws,
            &[[[[1.0; OW]; OH]; 2]; B],
            None,
            &mut gradients,
        );
        let want = (B * OH * OW) as f32;
        assert_eq!(
            gradients.tensor(1),
            [want; 2],
            "{H} x {W}: the bias gradient"
        );
        assert!(
            gradients.tensor(0).iter().all(|&dw| dw == 0.0),
            "{H} x {W}: the weight gradient {:?}",
            gradients.tensor(0)
        );
    }
    run::<0, 10, 2, 12>();
    run::<10, 0, 12, 2>();
}
