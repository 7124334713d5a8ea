//! One filter's requantization in one fused 64-bit step against the definition.

use super::*;
use crate::kernels::x86::int8_requantize_avx512::UniformRequantization;

#[test]
fn the_fused_requantization_matches_the_definition_with_avx512() {
    if !(std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512vl")) {
        std::eprintln!("skipping: no AVX-512BW on this CPU");
        return;
    }
    let mut next = xorshift(0x0bad_cafe_1234_5678);
    // Sums near 0 one by one (every remainder of the small shifts, ties among them), near the
    // sign change of the product (`a·m` about `-2^30`), at the extremes, and at random.
    let mut sums: Vec<i32> = (-2048..2048).collect();
    sums.extend([
        i32::MIN,
        i32::MIN + 1,
        -1 << 30,
        (1 << 30) - 1,
        i32::MAX - 1,
        i32::MAX,
    ]);
    sums.extend((0..4096).map(|_| next() as i32));
    sums.extend((0..1024).map(|_| (next() as i32) >> (next() % 31)));
    let multipliers = [
        1 << 30,
        (1 << 30) + 1,
        i32::MAX,
        1_518_500_250,
        0,
        1,
        -(1 << 30),
        i32::MIN,
        i32::MIN + 1,
        next() as i32,
    ];
    let ranges = [
        (0, -128, 127),
        (-7, -7, 127),
        (100, -50, 60),
        (-128, -128, -100),
    ];
    for &multiplier in &multipliers {
        for exponent in -31..=30 {
            // The sums around `a·m = -2^30` for this multiplier.
            let near: Vec<i32> = if multiplier != 0 {
                let a = -((1_i64 << 30) / i64::from(multiplier));
                (a - 3..=a + 3)
                    .filter_map(|a| i32::try_from(a).ok())
                    .collect()
            } else {
                Vec::new()
            };
            for &range in &ranges {
                // SAFETY: AVX-512BW and VL are present (checked above); the exponent is in
                // range.
                let requantize =
                    unsafe { UniformRequantization::new((multiplier, exponent), range) };
                for chunk in sums.chunks(16).chain(near.chunks(16)) {
                    let mut lanes = [0_i32; 16];
                    lanes[..chunk.len()].copy_from_slice(chunk);
                    let mut got = [0_i32; 16];
                    // SAFETY: as above; the loads and the store are of 16 lanes of arrays of
                    // 16.
                    unsafe {
                        let y = requantize.apply(_mm512_loadu_si512(lanes.as_ptr().cast()));
                        _mm512_storeu_si512(got.as_mut_ptr().cast(), y);
                    }
                    for (&sum, &got) in lanes.iter().zip(&got).take(chunk.len()) {
                        let want = crate::kernels::reference::requantize_one(
                            sum,
                            (0, multiplier, exponent),
                            range,
                        );
                        assert_eq!(
                            got,
                            i32::from(want),
                            "{sum} by ({multiplier}, {exponent}) onto {range:?}"
                        );
                    }
                }
            }
        }
    }
}
