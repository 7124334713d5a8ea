//! 2 x 2 max pooling, forward and backward, against the definition bit for bit.

use super::*;

/// Values that make ties, signed zeros and NaNs (with different payloads) meet in pooling
/// windows; and the same without NaNs, which the kernels pool on their faster path.
const POOLED_WITH_NANS: [f32; 9] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.5,
    f32::NAN,
    f32::from_bits(0x7fc0_0001),
    f32::INFINITY,
    f32::NEG_INFINITY,
];
const POOLED_WITHOUT_NANS: [f32; 7] = [0.0, -0.0, 1.0, -1.0, 2.5, f32::INFINITY, f32::NEG_INFINITY];

/// The instruction sets here that have max pooling kernels: AVX-512 and AVX2.
fn pooling_instruction_sets() -> impl Iterator<Item = Isa> {
    [Isa::Avx512, Isa::Avx2Fma]
        .into_iter()
        .filter(|&i| isa_available(i))
}

/// Max pooling's rule: the window's first maximum in its row-major order, or its first NaN.
fn first_maximum(window: [f32; 4]) -> f32 {
    window[1..].iter().fold(window[0], |m, &v| {
        if v > m || (v.is_nan() && !m.is_nan()) {
            v
        } else {
            m
        }
    })
}

/// The bits of a 2 x 2 window's input gradients as the generic code writes them: `0 + dy` to
/// the input that took over last (the first maximum, or the first NaN), 0 to the others.
fn window_gradient_bits(window: [f32; 4], dy: f32) -> [u32; 4] {
    let (mut best, mut at) = (window[0], 0);
    for (p, &v) in window.iter().enumerate().skip(1) {
        if v > best || (v.is_nan() && !best.is_nan()) {
            (best, at) = (v, p);
        }
    }
    let mut bits = [0_u32; 4];
    bits[at] = (0.0 + dy).to_bits();
    bits
}

/// Planes of even sizes with rows of at most 16 (several row pairs per vector), forward
/// and backward, against the definition: each window's first maximum (the first NaN, if
/// any) and the gradient routed to it, bit for bit, whatever the number of row pairs left
/// for the last step.
#[test]
fn max_pooling_of_narrow_planes_matches_the_definition_bit_for_bit() {
    for isa in pooling_instruction_sets() {
        max_pooling_of_narrow_planes_matches_the_definition_bit_for_bit_on(isa);
    }
}

fn max_pooling_of_narrow_planes_matches_the_definition_bit_for_bit_on(isa: Isa) {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    for choices in [&POOLED_WITH_NANS[..], &POOLED_WITHOUT_NANS[..]] {
        for width in (2..=16).step_by(2) {
            for height in [2, 4, 6, 10] {
                for planes in [1, 2, 3, 7] {
                    let x: Vec<f32> = (0..planes * height * width)
                        .map(|_| choices[(next() % choices.len() as u64) as usize])
                        .collect();
                    let (oh, ow) = (height / 2, width / 2);
                    let mut want = std::vec![0_u32; planes * oh * ow];
                    for (o, want) in want.iter_mut().enumerate() {
                        let (pair, j) = (o / ow, o % ow);
                        let top = pair * 2 * width + 2 * j;
                        let window = [x[top], x[top + 1], x[top + width], x[top + width + 1]];
                        *want = first_maximum(window).to_bits();
                    }
                    let mut out = std::vec![7.0_f32; want.len() + 1];
                    let n = want.len();
                    max_pool_2x2_f32(isa, &x, (height, width), as_output(&mut out[..n]));
                    let got: Vec<u32> = out[..n].iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "{planes} planes of {height} x {width}");
                    assert_eq!(out[n], 7.0, "nothing written past the output");

                    // The backward pass, with the same windows.
                    let dy: Vec<f32> = (0..n)
                        .map(|_| [-0.0, 1.5, -2.0][(next() % 3) as usize])
                        .collect();
                    let mut want = std::vec![0_u32; x.len()];
                    for (o, &dy) in dy.iter().enumerate() {
                        let (pair, j) = (o / ow, o % ow);
                        let top = pair * 2 * width + 2 * j;
                        let at = [top, top + 1, top + width, top + width + 1];
                        let window = at.map(|i| x[i]);
                        for (i, bits) in at.into_iter().zip(window_gradient_bits(window, dy)) {
                            want[i] = bits;
                        }
                    }
                    let mut dx = std::vec![9.0_f32; x.len() + 1];
                    let len = x.len();
                    max_pool_2x2_backward_f32(isa, &x, (height, width), &dy, &mut dx[..len]);
                    let got: Vec<u32> = dx[..len].iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "backward, {planes} planes of {height} x {width}");
                    assert_eq!(dx[len], 9.0, "nothing written past the input gradient");
                }
            }
        }
    }
}

/// Planes of fewer than two rows pool into nothing, whatever their width (the kernel for
/// wide rows once cut its output into chunks of 0 elements and panicked).
#[test]
fn max_pooling_of_planes_too_short_for_a_window_writes_nothing() {
    for isa in pooling_instruction_sets() {
        max_pooling_of_planes_too_short_for_a_window_writes_nothing_on(isa);
    }
}

fn max_pooling_of_planes_too_short_for_a_window_writes_nothing_on(isa: Isa) {
    for (planes, height, width) in [(1, 1, 32), (3, 1, 40), (2, 0, 21), (1, 1, 3), (0, 4, 40)] {
        let x = std::vec![1.0_f32; planes * height * width];
        max_pool_2x2_f32(isa, &x, (height, width), as_output(&mut []));
    }
}

#[test]
fn max_pooling_keeps_the_first_maximum_and_the_first_nan_bit_for_bit() {
    for isa in pooling_instruction_sets() {
        max_pooling_keeps_the_first_maximum_and_the_first_nan_bit_for_bit_on(isa);
    }
}

fn max_pooling_keeps_the_first_maximum_and_the_first_nan_bit_for_bit_on(isa: Isa) {
    let mut next = xorshift(0x0123_4567_89ab_cdef);
    for choices in [&POOLED_WITH_NANS[..], &POOLED_WITHOUT_NANS[..]] {
        for n in 0..40 {
            for _ in 0..50 {
                let mut pick = || choices[(next() % choices.len() as u64) as usize];
                let top: Vec<f32> = (0..2 * n + 1).map(|_| pick()).collect();
                let bottom: Vec<f32> = (0..2 * n + 1).map(|_| pick()).collect();
                let want: Vec<u32> = (0..n)
                    .map(|j| {
                        let window = [top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1]];
                        first_maximum(window).to_bits()
                    })
                    .collect();
                // One plane of three rows (the last, odd one left out) and 2n + 1 columns.
                let third: Vec<f32> = (0..2 * n + 1).map(|_| pick()).collect();
                let plane = [&top[..], &bottom[..], &third[..]].concat();
                let size = (3, 2 * n + 1);
                let mut out = std::vec![7.0_f32; n];
                max_pool_2x2_f32(isa, &plane, size, as_output(&mut out));
                let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "{n} windows: {top:?} / {bottom:?}");
                // Two planes in one call: each pooled on its own.
                let mut two = std::vec![7.0_f32; 2 * n];
                max_pool_2x2_f32(
                    isa,
                    &[&plane[..], &plane[..]].concat(),
                    size,
                    as_output(&mut two),
                );
                let got: Vec<u32> = two.iter().map(|v| v.to_bits()).collect();
                assert_eq!(
                    got,
                    [&want[..], &want[..]].concat(),
                    "two planes of {n} windows"
                );

                // The backward pass: the gradient to the window's first maximum as the generic
                // code finds it (the last input that took over), `0 + dy` there, 0 elsewhere.
                let dy: Vec<f32> = (0..n)
                    .map(|_| [-0.0, 1.5, -2.0][(next() % 3) as usize])
                    .collect();
                let (mut want_top, mut want_bottom) =
                    (std::vec![0_u32; 2 * n], std::vec![0_u32; 2 * n]);
                for j in 0..n {
                    let window = [top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1]];
                    let [t0, t1, b0, b1] = window_gradient_bits(window, dy[j]);
                    (want_top[2 * j], want_top[2 * j + 1]) = (t0, t1);
                    (want_bottom[2 * j], want_bottom[2 * j + 1]) = (b0, b1);
                }
                let mut d_plane = std::vec![9.0_f32; plane.len()];
                max_pool_2x2_backward_f32(isa, &plane, size, &dy, &mut d_plane);
                let (d_top, rest) = d_plane.split_at(2 * n + 1);
                let (d_bottom, d_third) = rest.split_at(2 * n + 1);
                assert!(
                    d_third.iter().all(|&v| v == 9.0),
                    "the odd row is left alone"
                );
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
                assert_eq!(bits(&d_top[..2 * n]), want_top, "backward, {n} windows");
                assert_eq!(
                    bits(&d_bottom[..2 * n]),
                    want_bottom,
                    "backward, {n} windows"
                );
                assert_eq!(
                    (d_top[2 * n], d_bottom[2 * n]),
                    (9.0, 9.0),
                    "nothing past the windows"
                );
            }
        }
    }
}
