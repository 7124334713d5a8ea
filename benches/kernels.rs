//! Matrix products of `constmat::kernels` on `f32`, one thread.
//!
//! ```text
//! cargo bench --bench kernels            # everything (about a minute)
//! cargo bench --bench kernels -- gemm    # only the plain products
//! ```
//!
//! Every benchmark's throughput is declared in floating-point operations (`2·M·K·N` for an
//! `M x K` times `K x N` product), so criterion's `thrpt` line reads `Gelem/s` where it means
//! **GFLOP/s**.
//!
//! - `gemm/MxKxN`: `kernels::matmul_into`, `(M x K)·(K x N)`, on the four shapes of the MNIST MLP
//!   (784-128-64-10, batch 64) named in the performance issue, and 256³.
//! - `step/...`: the three products of each layer of a training step of that MLP, in the form
//!   the crate's `nn::Dense` calls them (one sample per row, weights `out x in`):
//!   forward `Z = X·Wᵀ` (`matmul_transpose_rhs_into`), weight gradient `dW = dZᵀ·X`
//!   (`matmul_transpose_lhs_into`) and input gradient `dX = dZ·W` (`matmul_into`; the first
//!   layer has none). Their sum is the arithmetic of one training step (29.1 MFLOP).
//!
//! Operands are `Matrix` values (heap-allocated: the largest is 784 x 256 floats, too big for
//! comfort on a thread's stack) passed to the kernels with `as_array()`.

use std::hint::black_box;
use std::time::Duration;

use constmat::{Matrix, kernels};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};

/// Deterministic values in `[-0.5, 0.5)`: the timing does not depend on them, but zeros or
/// subnormal numbers could make it unrepresentative.
fn operand<const H: usize, const W: usize>(seed: usize) -> Matrix<f32, H, W> {
    Matrix::from_fn(|r, c| ((r * 31 + c * 17 + seed * 7) % 23) as f32 / 23.0 - 0.5)
}

/// The floating-point operations of an `(M x K)·(K x N)` product: a multiply and an add for
/// each of the `K` terms of each of the `M·N` outputs.
fn flops(m: usize, k: usize, n: usize) -> u64 {
    (2 * m * k * n) as u64
}

/// `kernels::matmul_into`: `(M x K)·(K x N) -> M x N`.
fn matmul<const M: usize, const K: usize, const N: usize>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
) {
    let a = operand::<M, K>(1);
    let b = operand::<K, N>(2);
    let mut out = Matrix::<f32, M, N>::zeros();
    group.throughput(Throughput::Elements(flops(M, K, N)));
    group.bench_function(name, |bench| {
        bench.iter(|| {
            kernels::matmul_into(black_box(a.as_array()), b.as_array(), out.as_array_mut());
            black_box(&out);
        });
    });
}

/// `kernels::matmul_transpose_rhs_into`: `(M x K)·(N x K)ᵀ -> M x N`.
fn matmul_transpose_rhs<const M: usize, const K: usize, const N: usize>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
) {
    let a = operand::<M, K>(3);
    let b = operand::<N, K>(4);
    let mut out = Matrix::<f32, M, N>::zeros();
    group.throughput(Throughput::Elements(flops(M, K, N)));
    group.bench_function(name, |bench| {
        bench.iter(|| {
            kernels::matmul_transpose_rhs_into(
                black_box(a.as_array()),
                b.as_array(),
                out.as_array_mut(),
            );
            black_box(&out);
        });
    });
}

/// `kernels::matmul_transpose_lhs_into`: `(K x M)ᵀ·(K x N) -> M x N`.
fn matmul_transpose_lhs<const K: usize, const M: usize, const N: usize>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
) {
    let a = operand::<K, M>(5);
    let b = operand::<K, N>(6);
    let mut out = Matrix::<f32, M, N>::zeros();
    group.throughput(Throughput::Elements(flops(M, K, N)));
    group.bench_function(name, |bench| {
        bench.iter(|| {
            kernels::matmul_transpose_lhs_into(
                black_box(a.as_array()),
                b.as_array(),
                out.as_array_mut(),
            );
            black_box(&out);
        });
    });
}

/// The plain product on the MLP's four shapes and 256³ (names are `MxKxN`).
fn gemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm");
    matmul::<128, 784, 64>(&mut group, "128x784x64");
    matmul::<64, 128, 64>(&mut group, "64x128x64");
    matmul::<128, 64, 784>(&mut group, "128x64x784");
    matmul::<784, 64, 128>(&mut group, "784x64x128");
    matmul::<256, 256, 256>(&mut group, "256x256x256");
    group.finish();
}

/// Batch size of a training step.
const B: usize = 64;

/// Every product of one training step of the 784-128-64-10 MLP, as `nn::Dense` calls them.
///
/// Names: `layerL_pass`, where layer 1 is 784 -> 128, layer 2 is 128 -> 64, layer 3 is 64 -> 10.
fn step(c: &mut Criterion) {
    let mut group = c.benchmark_group("step");
    // Forward, Z = X·Wᵀ: (B x I)·(O x I)ᵀ -> B x O.
    matmul_transpose_rhs::<B, 784, 128>(&mut group, "layer1_forward_XWt_64x784x128");
    matmul_transpose_rhs::<B, 128, 64>(&mut group, "layer2_forward_XWt_64x128x64");
    matmul_transpose_rhs::<B, 64, 10>(&mut group, "layer3_forward_XWt_64x64x10");
    // Weight gradient, dW = dZᵀ·X: (B x O)ᵀ·(B x I) -> O x I.
    matmul_transpose_lhs::<B, 128, 784>(&mut group, "layer1_dW_dZtX_128x64x784");
    matmul_transpose_lhs::<B, 64, 128>(&mut group, "layer2_dW_dZtX_64x64x128");
    matmul_transpose_lhs::<B, 10, 64>(&mut group, "layer3_dW_dZtX_10x64x64");
    // Input gradient, dX = dZ·W: (B x O)·(O x I) -> B x I (layer 1 does not compute it).
    matmul::<B, 64, 128>(&mut group, "layer2_dX_dZW_64x64x128");
    matmul::<B, 10, 64>(&mut group, "layer3_dX_dZW_64x10x64");
    group.finish();
}

/// Short runs: the machine is small and shared, and the full suite should take about a minute.
/// Command-line options (`--measurement-time`, `--sample-size`, ...) override these.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = gemm, step
}
criterion_main!(benches);
