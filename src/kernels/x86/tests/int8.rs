//! The int8 dot products and requantization against the definition.

use super::*;

#[test]
fn int8_dot_products_match_the_definition_on_every_available_instruction_set() {
    let available = [
        (
            IsaI8::Avx512Vnni,
            std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512vnni"),
        ),
        (
            IsaI8::Avx512Bw,
            std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512vl"),
        ),
        (IsaI8::Avx2, std::is_x86_feature_detected!("avx2")),
    ];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8 as i8
    };
    for (isa, present) in available {
        if !present {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        for n in [
            0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 784,
        ] {
            for rows in [1, 3, 4, 5, 9, 10] {
                // Random values, and the extremes (-128 x -128 is the largest product).
                let mut weight: Vec<i8> = (0..rows * n).map(|_| next()).collect();
                let mut x: Vec<i8> = (0..n).map(|_| next()).collect();
                if rows == 9 {
                    weight.iter_mut().for_each(|w| *w = -127);
                    x.iter_mut().for_each(|v| *v = -128);
                }
                if rows == 10 {
                    weight.iter_mut().for_each(|w| *w = -128);
                    x.iter_mut().for_each(|v| *v = 127);
                }
                let want: Vec<i32> = (0..rows)
                    .map(|r| {
                        weight[r * n..(r + 1) * n]
                            .iter()
                            .zip(&x)
                            .map(|(&w, &v)| i32::from(w) * i32::from(v))
                            .sum()
                    })
                    .collect();
                let mut got = std::vec![i32::MIN; rows]; // stale contents
                dot_rows_i8(isa, &weight, &x, &mut got);
                assert_eq!(got, want, "{isa:?}: {rows} rows of {n}");
            }
        }
    }
}

#[test]
fn int8_requantization_refuses_exponents_no_multiplier_has() {
    let isas = [
        (
            IsaI8::Avx512Vnni,
            std::is_x86_feature_detected!("avx512vnni"),
        ),
        (IsaI8::Avx512Bw, std::is_x86_feature_detected!("avx512bw")),
        (IsaI8::Avx2, std::is_x86_feature_detected!("avx2")),
    ];
    for (isa, present) in isas {
        if !present {
            continue;
        }
        // The bad exponent at the last lane of AVX2's first group of 8, of its second, of
        // AVX-512's group of 16, and in the tail of 4 AVX2 does one at a time.
        for (bad, at) in [31, -32, i32::MIN, i32::MAX]
            .into_iter()
            .flat_map(|bad| [7, 15, 19].map(|at| (bad, at)))
        {
            let mut exponent = std::vec![-5; 20];
            exponent[at] = bad;
            let ones = std::vec![1 << 30; 20];
            let result = std::panic::catch_unwind(|| {
                let mut out = [0_i8; 20];
                requantize_i8(
                    isa,
                    &ones,
                    (&ones, &ones, &exponent),
                    (0, -128, 127),
                    &mut out,
                );
            });
            assert!(result.is_err(), "{isa:?} took the exponent {bad} at {at}");
        }
    }
}

#[test]
fn int8_requantization_matches_the_definition_on_every_available_instruction_set() {
    let available = [
        (
            IsaI8::Avx512Vnni,
            std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512vnni"),
        ),
        (
            IsaI8::Avx512Bw,
            std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512vl"),
        ),
        (IsaI8::Avx2, std::is_x86_feature_detected!("avx2")),
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let edges = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
    for (isa, present) in available {
        if !present {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        for n in [1, 7, 16, 17, 40, 128] {
            for round in 0..200 {
                let pick = |v: u64, small: bool| -> i32 {
                    match v % 4 {
                        0 => edges[(v >> 8) as usize % edges.len()],
                        1 if small => ((v >> 8) % 4001) as i32 - 2000,
                        _ => (v >> 16) as u32 as i32,
                    }
                };
                let dots: Vec<i32> = (0..n).map(|_| pick(next(), true)).collect();
                let bias: Vec<i32> = (0..n).map(|_| pick(next(), true)).collect();
                let multiplier: Vec<i32> = (0..n)
                    .map(|_| match next() % 5 {
                        0 => i32::MIN,
                        1 => 0,
                        _ => (1 << 30) + (next() % (1 << 30)) as i32,
                    })
                    .collect();
                // Exponents from -31 to 0, and in some rounds positive ones up to 30 (a
                // multiplier of 1 or more, the accumulator shifted left first, saturating).
                let exponent: Vec<i32> = (0..n)
                    .map(|_| {
                        if round % 4 == 0 && next() % 3 == 0 {
                            [1, 2, 5, 17, 30][(next() % 5) as usize]
                        } else {
                            -((next() % 32) as i32)
                        }
                    })
                    .collect();
                let zero = (next() % 256) as u8 as i8;
                // The three activations' clamps: none, ReLU's, ReLU6's (an upper end too).
                let (low, high) = match round % 3 {
                    0 => (-128, 127),
                    1 => (zero, 127),
                    _ => (zero, zero.saturating_add((next() % 100) as i8)),
                };
                let mut want = std::vec![0_i8; n];
                crate::kernels::reference::requantize_i8(
                    &dots,
                    (&bias, &multiplier, &exponent),
                    (zero, low, high),
                    &mut want,
                );
                let mut got = std::vec![99_i8; n]; // stale contents
                requantize_i8(
                    isa,
                    &dots,
                    (&bias, &multiplier, &exponent),
                    (zero, low, high),
                    &mut got,
                );
                assert_eq!(got, want, "{isa:?}, {n} outputs, round {round}");
            }
        }
    }
}

#[test]
fn uniform_int8_requantization_matches_the_definition_on_every_available_instruction_set() {
    let available = [
        (
            IsaI8::Avx512Bw,
            std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512vl"),
        ),
        (IsaI8::Avx2, std::is_x86_feature_detected!("avx2")),
    ];
    let mut state = 0x5851_f42d_4c95_7f2d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let edges = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
    for (isa, present) in available {
        if !present {
            std::eprintln!("skipping {isa:?}: not on this CPU");
            continue;
        }
        // Every exponent, so that both the left-shifting steps (exponent > 0) and the ones
        // without them run, at lengths with and without a tail.
        for exponent in -31..=30 {
            for n in [1, 7, 8, 16, 17, 40, 125] {
                let pick = |v: u64| -> i32 {
                    match v % 4 {
                        0 => edges[(v >> 8) as usize % edges.len()],
                        1 => ((v >> 8) % 4001) as i32 - 2000,
                        _ => (v >> 16) as u32 as i32,
                    }
                };
                let dots: Vec<i32> = (0..n).map(|_| pick(next())).collect();
                let bias = pick(next());
                let multiplier = match next() % 5 {
                    0 => i32::MIN,
                    1 => 0,
                    _ => (1 << 30) + (next() % (1 << 30)) as i32,
                };
                let zero = (next() % 256) as u8 as i8;
                let (low, high) = match next() % 3 {
                    0 => (-128, 127),
                    1 => (zero, 127),
                    _ => (zero, zero.saturating_add((next() % 100) as i8)),
                };
                let want: Vec<i8> = dots
                    .iter()
                    .map(|&d| {
                        crate::kernels::reference::requantize_one(
                            d,
                            (bias, multiplier, exponent),
                            (zero, low, high),
                        )
                    })
                    .collect();
                let mut got = std::vec![99_i8; n]; // stale contents
                requantize_uniform_i8(
                    isa,
                    &dots,
                    (bias, multiplier, exponent),
                    (zero, low, high),
                    &mut got,
                );
                assert_eq!(got, want, "{isa:?}, {n} outputs, exponent {exponent}");
            }
        }
        for bad in [31, -32, i32::MIN, i32::MAX] {
            let result = std::panic::catch_unwind(|| {
                let mut out = [0_i8; 20];
                requantize_uniform_i8(isa, &[1; 20], (1, 1 << 30, bad), (0, -128, 127), &mut out);
            });
            assert!(result.is_err(), "{isa:?} took the exponent {bad}");
        }
    }
}

#[test]
fn int8_columns_match_the_definition_with_avx512_vnni() {
    if !(std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("avx512vnni"))
    {
        std::eprintln!("skipping: no AVX-512 VNNI on this CPU");
        return;
    }
    let mut state = 0x27d4_eb2f_1656_67c5_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8 as i8
    };
    // Filters: whole tiles of 16 and of 8, single filters after them; channels: whole groups
    // of 4 and tails; positions: whole groups of 16, tails, and rows longer than `n` (a
    // stride).
    for filters in [1, 7, 8, 9, 16, 17, 25, 33] {
        for l in [1, 3, 4, 5, 64, 67] {
            for (n, stride) in [(1, 1), (15, 15), (16, 16), (17, 20), (64, 64), (125, 125)] {
                for extreme in [None, Some((-128, -128)), Some((127, -128))] {
                    let mut weight: Vec<i8> = (0..filters * l).map(|_| next()).collect();
                    // `x` exactly as long as the contract needs: a read past it would fault
                    // under a sanitizer and differ here.
                    let mut x: Vec<i8> = (0..(l - 1) * stride + n).map(|_| next()).collect();
                    if let Some((w, v)) = extreme {
                        weight.iter_mut().for_each(|x| *x = w);
                        x.iter_mut().for_each(|x| *x = v);
                    }
                    let sums = filter_sums(&weight, l);
                    let mut want = std::vec![0; filters * n];
                    crate::kernels::reference::dot_columns_i8(
                        &weight,
                        (&x, stride),
                        (l, n),
                        &mut want,
                    );
                    let mut got = std::vec![i32::MIN; filters * n]; // stale contents
                    dot_columns_i8_vnni((&weight, &sums), (&x, stride), (l, n), &mut got);
                    assert_eq!(got, want, "{filters} filters, {l} channels, {n} positions");
                }
            }
        }
    }
}

#[test]
fn int8_windows_match_the_definition_with_avx512_vnni() {
    if !crate::kernels::conv_windows_i8_fast(1, 3, 16) {
        std::eprintln!("skipping: no AVX-512 VNNI and VBMI on this CPU");
        return;
    }
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut byte = move || (next() >> 24) as u8 as i8;
    // Kernels 1 to 10 wide (one, two and three groups of four columns, the last partial),
    // strides 1 to 4, no padding, some, and more than the kernel (whole windows and rows of
    // padding); rows of 8 or fewer positions, several a vector, at every stride and with two
    // groups of columns; filters in every tile (16, 8, 4, 2, 1) and positions in one and two
    // vectors, with tails; windows of fewer than 3 bytes, whose every quad is read byte by
    // byte.
    macro_rules! shapes {
        ($(($c:literal, $height:literal, $width:literal, ($kh:literal, $kw:literal), $stride:literal, $padding:literal)),* $(,)?) => {
            $(windows_match::<$c, $kh, $kw>(($height, $width, $stride, $padding), &mut byte);)*
        };
    }
    shapes!(
        (3, 32, 32, (3, 3), 1, 1),
        (16, 8, 8, (3, 3), 1, 1),
        (2, 9, 40, (3, 3), 2, 1),
        (1, 49, 10, (10, 4), 2, 0),
        (1, 58, 12, (10, 4), 2, 4),
        (5, 11, 13, (1, 1), 2, 0),
        (4, 7, 37, (2, 5), 3, 2),
        (2, 12, 70, (7, 9), 4, 3),
        (3, 6, 6, (5, 5), 1, 2),
        (1, 3, 3, (3, 3), 1, 0),
        (1, 5, 9, (1, 2), 1, 0),
        (2, 20, 20, (5, 6), 3, 1),
        (2, 30, 30, (3, 3), 4, 1),
        (1, 4, 4, (1, 1), 1, 2),
        (3, 10, 10, (3, 3), 3, 4),
    );
}

/// [`int8_windows_match_the_definition_with_avx512_vnni`] on one shape.
fn windows_match<const C: usize, const KH: usize, const KW: usize>(
    (height, width, stride, padding): (usize, usize, usize, usize),
    byte: &mut impl FnMut() -> i8,
) {
    let shape = WindowShape {
        channels: C,
        height,
        width,
        kernel: (KH, KW),
        stride,
        padding,
    };
    let (out_height, out_width) = shape.output();
    let out_plane = out_height * out_width;
    let l = shape.window_len();
    for filters in [1, 5, 6, 8, 10, 16, 21] {
        for extreme in [None, Some((-128, -128)), Some((127, -128))] {
            let mut weight: Vec<i8> = (0..filters * l).map(|_| byte()).collect();
            let mut image: Vec<i8> = (0..shape.image_len()).map(|_| byte()).collect();
            let pad = byte();
            if let Some((w, v)) = extreme {
                weight.iter_mut().for_each(|x| *x = w);
                image.iter_mut().for_each(|x| *x = v);
            }
            let sums = filter_sums(&weight, l);
            // And a narrow clamp.
            let (bias, multiplier, exponent) = requantization_parameters(filters, 0, byte);
            let requantization = Requantization {
                parameters: (&bias, &multiplier, &exponent),
                zero_and_range: (byte() / 2, -100, 90),
            };
            // Whole rows, runs that start and end inside rows, the whole output.
            for (p0, n) in [
                (0, out_width),
                ((out_height / 2) * out_width + out_width / 3, out_width),
                (out_plane - out_width, out_width),
                (out_width / 2, out_plane - out_width / 2),
            ] {
                let stale: Vec<i8> = (0..filters * out_plane).map(|_| byte()).collect();
                let mut want = stale.clone();
                crate::kernels::reference::conv_windows_i8(
                    &weight,
                    &requantization,
                    (&image, &shape, pad),
                    (p0, n),
                    &mut want,
                );
                // The image and the weights end at a page without access, then start where
                // one ends.
                for after_guard in [false, true] {
                    let place = |values: &[i8]| Guarded::place(values, after_guard);
                    let (mut image, mut weight) = (place(&image), place(&weight));
                    // The positions outside `p0..p0 + n` keep their stale bytes.
                    let mut got = place(&stale);
                    conv_windows_i8_vnni::<C, KH, KW>(
                        (weight.slice(), &sums),
                        &requantization,
                        (image.slice(), &shape, pad),
                        (p0, n),
                        got.slice(),
                    );
                    assert_eq!(
                        got.slice(),
                        &want[..],
                        "{filters} filters on {shape:?}, positions {p0}..{}",
                        p0 + n
                    );
                }
            }
        }
    }
}

/// Each filter's sum of weights (filters of `l` weights one after another): the SIMD kernels'
/// offset terms.
fn filter_sums(weight: &[i8], l: usize) -> Vec<i32> {
    weight
        .chunks_exact(l)
        .map(|f| f.iter().map(|&w| i32::from(w)).sum())
        .collect()
}
