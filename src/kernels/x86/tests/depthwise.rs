//! The depthwise training passes over whole planes (`depthwise_training_planes_f32`) against the
//! definitions.

use super::*;
use crate::kernels::Depthwise;
use crate::kernels::x86::depthwise_training_planes_f32::{
    applies, depthwise_forward_planes, depthwise_input_gradient_planes,
    depthwise_weight_gradient_planes,
};

/// `dW[o][ky][kx] = Σ_b Σ_(oy, ox) dZ[b][o][oy][ox] · X[b][o / m][oy + ky - P_h][ox + kx - P_w]`,
/// the input read as 0 outside the image, in `f64`.
fn definition(g: &Depthwise, batch: usize, x: &[f64], dz: &[f64]) -> Vec<f64> {
    let (kh, kw) = g.kernel;
    let (h, w) = g.input;
    let (oh, ow) = g.output;
    let filters = g.channels * g.multiplier;
    let mut dw = std::vec![0.0; filters * kh * kw];
    for b in 0..batch {
        for o in 0..filters {
            let c = o / g.multiplier;
            for ky in 0..kh {
                for kx in 0..kw {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let (iy, ix) = (oy + ky, ox + kx);
                            if iy < g.padding.0 || ix < g.padding.1 {
                                continue;
                            }
                            let (iy, ix) = (iy - g.padding.0, ix - g.padding.1);
                            if iy >= h || ix >= w {
                                continue;
                            }
                            dw[(o * kh + ky) * kw + kx] += dz
                                [((b * filters + o) * oh + oy) * ow + ox]
                                * x[((b * g.channels + c) * h + iy) * w + ix];
                        }
                    }
                }
            }
        }
    }
    dw
}

/// `dX[b][c][iy][ix] = Σ over the filters o of c and (ky, kx) with oy = iy - ky + P_h and
/// ox = ix - kx + P_w inside the output of w[o][ky][kx] · dZ[b][o][oy][ox]`, in `f64`.
fn input_definition(g: &Depthwise, batch: usize, w: &[f64], dz: &[f64]) -> Vec<f64> {
    let (kh, kw) = g.kernel;
    let (h, wd) = g.input;
    let (oh, ow) = g.output;
    let filters = g.channels * g.multiplier;
    let mut dx = std::vec![0.0; batch * g.channels * h * wd];
    for b in 0..batch {
        for o in 0..filters {
            let c = o / g.multiplier;
            for oy in 0..oh {
                for ox in 0..ow {
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let (iy, ix) = (oy + ky, ox + kx);
                            if iy < g.padding.0 || ix < g.padding.1 {
                                continue;
                            }
                            let (iy, ix) = (iy - g.padding.0, ix - g.padding.1);
                            if iy >= h || ix >= wd {
                                continue;
                            }
                            dx[((b * g.channels + c) * h + iy) * wd + ix] += w
                                [(o * kh + ky) * kw + kx]
                                * dz[((b * filters + o) * oh + oy) * ow + ox];
                        }
                    }
                }
            }
        }
    }
    dx
}

/// `Z[b][o][oy][ox] = bias[o] + Σ_(ky, kx) w[o][ky][kx] · X[b][o / m][oy + ky - P_h][ox + kx -
/// P_w]`, the input read as 0 outside the image, in `f64`.
fn forward_definition(g: &Depthwise, batch: usize, x: &[f64], w: &[f64], bias: &[f64]) -> Vec<f64> {
    let (kh, kw) = g.kernel;
    let (h, wd) = g.input;
    let (oh, ow) = g.output;
    let filters = g.channels * g.multiplier;
    let mut z = std::vec![0.0; batch * filters * oh * ow];
    for b in 0..batch {
        for o in 0..filters {
            let c = o / g.multiplier;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut sum = bias[o];
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let (iy, ix) = (oy + ky, ox + kx);
                            if iy < g.padding.0 || ix < g.padding.1 {
                                continue;
                            }
                            let (iy, ix) = (iy - g.padding.0, ix - g.padding.1);
                            if iy >= h || ix >= wd {
                                continue;
                            }
                            sum += w[(o * kh + ky) * kw + kx]
                                * x[((b * g.channels + c) * h + iy) * wd + ix];
                        }
                    }
                    z[((b * filters + o) * oh + oy) * ow + ox] = sum;
                }
            }
        }
    }
    z
}

/// On every instruction set: DS-CNN's layer (3 x 3 on 25 x 5, 64 channels), 5 x 5 kernels,
/// a channel multiplier of 2, TensorFlow's uneven `SAME` padding (none before, the rest
/// after), paddings that differ between the axes, fewer or more output rows than input rows
/// (some wholly in the padding), a width of 1, 20 filters (a group of 16 and a partial one),
/// planes whose positions fill no whole vector or several with a partial last one,
/// batches of none, one and several; the outputs, `d_weight` and `dx` full of NaN first
/// (overwritten), the forward pass and both gradients against their definitions. Shapes the
/// kernel does not take are said to be so.
#[test]
fn depthwise_training_passes_over_planes_match_the_definitions() {
    let shape =
        |channels, multiplier, k: usize, padding, input: (usize, usize), out_rows| Depthwise {
            channels,
            multiplier,
            kernel: (k, k),
            stride: (1, 1),
            padding,
            input,
            output: (out_rows, input.1),
        };
    let shapes = [
        shape(64, 1, 3, (1, 1), (25, 5), 25),
        shape(3, 1, 3, (1, 1), (4, 3), 4),
        shape(2, 2, 5, (2, 2), (9, 7), 9),
        shape(3, 1, 3, (0, 0), (6, 17), 6),
        shape(2, 1, 3, (1, 1), (6, 17), 7),
        shape(1, 3, 5, (4, 4), (3, 2), 3),
        // Paddings that differ between the axes, fewer output rows than input rows, output
        // rows wholly in the padding, a width of 1, filters past a group of 16.
        shape(2, 1, 3, (0, 2), (6, 7), 4),
        shape(1, 2, 5, (4, 0), (3, 5), 9),
        shape(2, 1, 3, (1, 0), (5, 1), 5),
        shape(20, 1, 3, (1, 1), (4, 6), 4),
    ];
    let mut ran = 0;
    for isa in [Isa::Avx512, Isa::Avx2Fma] {
        if !isa_available(isa) {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        let lanes = super::lanes_of::<f32>(isa);
        for (i, g) in shapes.iter().enumerate() {
            assert!(applies(g, lanes), "{g:?}");
            for batch in [0, 1, 3] {
                let filters = g.channels * g.multiplier;
                let x = values(batch * g.channels * g.input.0 * g.input.1, 900 + i as u64);
                let dz = values(batch * filters * g.output.0 * g.output.1, 950 + i as u64);
                let want = definition(g, batch, &x, &dz);
                let narrow = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<_>>();
                let mut dw = std::vec![f32::NAN; want.len()];
                depthwise_weight_gradient_planes(isa, g, batch, &narrow(&x), &narrow(&dz), &mut dw);
                let terms = (batch * g.output.0 * g.output.1).max(1) as f64;
                for (k, (&got, &want)) in dw.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-6 * terms,
                        "{isa:?}, {g:?}, batch {batch}, weight {k}: {got} against {want}"
                    );
                }
                let w = values(filters * g.kernel.0 * g.kernel.1, 990 + i as u64);
                let bias = values(filters, 995 + i as u64);
                let want = forward_definition(g, batch, &x, &w, &bias);
                let mut z = std::vec![f32::NAN; want.len()];
                let (xs, ws, bs) = (narrow(&x), narrow(&w), narrow(&bias));
                depthwise_forward_planes(isa, g, batch, &xs, &ws, &bs, &mut z);
                let terms = (g.kernel.0 * g.kernel.1 + 1) as f64;
                for (k, (&got, &want)) in z.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-6 * terms,
                        "{isa:?}, {g:?}, batch {batch}, output {k}: {got} against {want}"
                    );
                }
                let want = input_definition(g, batch, &w, &dz);
                let mut dx = std::vec![f32::NAN; want.len()];
                depthwise_input_gradient_planes(isa, g, batch, &narrow(&w), &narrow(&dz), &mut dx);
                let terms = (g.multiplier * g.kernel.0 * g.kernel.1) as f64;
                for (k, (&got, &want)) in dx.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-6 * terms,
                        "{isa:?}, {g:?}, batch {batch}, input {k}: {got} against {want}"
                    );
                }
                ran += 1;
            }
        }
        // Not taken: 4 x 4 and 7 x 7 kernels, stride 2, rows that change length, padding as
        // large as the kernel on either axis, and planes of no rows.
        for g in [
            shape(2, 1, 4, (1, 1), (8, 8), 7),
            Depthwise {
                kernel: (7, 7),
                padding: (3, 3),
                ..shapes[0]
            },
            Depthwise {
                stride: (2, 2),
                output: (13, 3),
                ..shapes[0]
            },
            Depthwise {
                padding: (0, 0),
                output: (23, 3),
                ..shapes[0]
            },
            shape(1, 1, 3, (3, 2), (5, 5), 9),
            shape(1, 1, 3, (1, 3), (5, 5), 5),
            shape(1, 1, 3, (1, 1), (0, 5), 0),
        ] {
            assert!(!applies(&g, lanes), "{g:?}");
        }
    }
    if isa_available(Isa::Avx2Fma) {
        assert!(ran >= 30, "{ran} cases ran");
    }
}

/// A caller's bug, a weight gradient one image short, is a panic that names the pass and the
/// lengths, before any pointer is formed.
#[test]
#[should_panic(expected = "depthwise weight gradient")]
fn wrong_lengths_panic_before_the_kernel_runs() {
    let g = Depthwise {
        channels: 2,
        multiplier: 1,
        kernel: (3, 3),
        stride: (1, 1),
        padding: (1, 1),
        input: (4, 4),
        output: (4, 4),
    };
    let isa = if isa_available(Isa::Avx512) {
        Isa::Avx512
    } else {
        Isa::Avx2Fma
    };
    let mut dw = [0.0_f32; 18];
    depthwise_weight_gradient_planes(isa, &g, 2, &[0.0; 32], &[0.0; 64], &mut dw);
}

/// A shape the kernels do not take (stride 2) is refused by name.
#[test]
#[should_panic(expected = "is not for the whole-planes SIMD kernel")]
fn shapes_the_kernels_do_not_take_panic() {
    let g = Depthwise {
        channels: 1,
        multiplier: 1,
        kernel: (3, 3),
        stride: (2, 2),
        padding: (1, 1),
        input: (4, 4),
        output: (2, 2),
    };
    let isa = if isa_available(Isa::Avx512) {
        Isa::Avx512
    } else {
        Isa::Avx2Fma
    };
    let mut y = [0.0_f32; 4];
    depthwise_forward_planes(isa, &g, 1, &[0.0; 16], &[0.0; 9], &[0.0], &mut y);
}
