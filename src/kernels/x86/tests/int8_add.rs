//! The int8 addition's AVX-512 kernel against the definition, value by value.

use super::*;
use crate::kernels::add_i8::{AddScales, add_i8_fast, add_one};
use crate::kernels::x86::add_i8_avx512;
use crate::quant::Multiplier;

#[test]
fn int8_addition_matches_the_definition_with_avx512() {
    let scales = |inputs: [(i8, f64); 2], output: f64, zero_and_range| {
        let fixed = |m: f64| Multiplier::from_real(m);
        let input = |(zero, m): (i8, f64)| (zero, fixed(m).multiplier, fixed(m).exponent);
        AddScales {
            inputs: [input(inputs[0]), input(inputs[1])],
            output: (fixed(output).multiplier, fixed(output).exponent),
            zero_and_range,
        }
    };
    if !add_i8_fast(&scales([(0, 0.5), (0, 0.25)], 0.001, (0, -128, 127))) {
        std::eprintln!("skipping: no AVX-512BW on this CPU");
        return;
    }
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut byte = move || (next() >> 24) as u8 as i8;
    // The inputs' multipliers of TensorFlow Lite (each scale over twice the larger: 0.5 and
    // below, down to the smallest exponent), the output's below and above 1 (a left shift),
    // zero points at the extremes, the clamps of no activation, ReLU and ReLU6.
    let cases = [
        scales([(0, 0.5), (0, 0.5)], 1.0 / 1024.0 / 1.7, (0, -128, 127)),
        scales([(-128, 0.5), (127, 0.013)], 3.1e-6, (-7, -7, 127)),
        scales([(5, 0.37), (-3, 0.5)], 2.9e-7, (-128, -128, -100)),
        scales([(100, 0.5), (-100, 1e-9)], 1.0, (3, -50, 60)),
        scales([(-20, 0.5), (64, 0.499)], 7.5, (127, -128, 127)),
        scales([(0, 0.5), (0, 0.5)], 3.9e-10, (0, -128, 127)),
    ];
    // Multipliers no converter writes, which the kernel takes: -1 (`i32::MIN` at exponent 0),
    // 0, negative ones, the smallest exponent.
    let fixed = [
        AddScales {
            inputs: [(7, i32::MIN, 0), (-9, 0, -3)],
            output: (1 << 30, -9),
            zero_and_range: (0, -128, 127),
        },
        AddScales {
            inputs: [(-128, -(3 << 29), -1), (127, i32::MAX, -31)],
            output: (i32::MIN + 1, -12),
            zero_and_range: (-3, -60, 100),
        },
        // The output's multiplier 1 (each unit of the scaled sum shows), the inputs' at the
        // largest shifts, of both signs.
        AddScales {
            inputs: [(0, i32::MAX, -31), (3, -(1 << 30), -30)],
            output: (1 << 30, 1),
            zero_and_range: (0, -128, 127),
        },
        AddScales {
            inputs: [(-5, 1 << 30, -29), (0, i32::MAX, -28)],
            output: (1 << 30, 1),
            zero_and_range: (1, -128, 127),
        },
    ];
    for scales in cases.into_iter().chain(fixed) {
        assert!(add_i8_fast(&scales), "{scales:?}");
        for n in [1, 15, 16, 17, 33, 100, 1024, 4099] {
            let a: Vec<i8> = (0..n).map(|_| byte()).collect();
            let b: Vec<i8> = (0..n)
                .map(|i| match i % 7 {
                    0 => -128,
                    1 => 127,
                    _ => byte(),
                })
                .collect();
            let want: Vec<i8> = a
                .iter()
                .zip(&b)
                .map(|(&a, &b)| add_one(a, b, &scales))
                .collect();
            for after_guard in [false, true] {
                let place = |values: &[i8]| Guarded::place(values, after_guard);
                let (mut got, mut b) = (place(&a), place(&b));
                add_i8_avx512(got.slice(), b.slice(), &scales);
                assert_eq!(got.slice(), &want[..], "{n} values, {scales:?}");
            }
        }
        // Every pair of values.
        let mut a: Vec<i8> = (0..1 << 16).map(|i: u32| i as u8 as i8).collect();
        let b: Vec<i8> = (0..1 << 16).map(|i: u32| (i >> 8) as u8 as i8).collect();
        let want: Vec<i8> = a
            .iter()
            .zip(&b)
            .map(|(&a, &b)| add_one(a, b, &scales))
            .collect();
        add_i8_avx512(&mut a, &b, &scales);
        assert_eq!(a, want, "every pair, {scales:?}");
    }
}

#[test]
fn the_int8_addition_takes_no_input_multiplier_of_1_or_more() {
    let scales = AddScales {
        inputs: [(0, 1 << 30, 1), (0, 1 << 30, -1)],
        output: (1 << 30, -10),
        zero_and_range: (0, -128, 127),
    };
    assert!(!add_i8_fast(&scales));
    let result = std::panic::catch_unwind(|| add_i8_avx512(&mut [0; 4], &[0; 4], &scales));
    let message = *result
        .unwrap_err()
        .downcast::<std::string::String>()
        .unwrap();
    assert!(message.contains("from -31 to 0"), "{message}");
}
