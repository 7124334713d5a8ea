//! The same MLP written by hand on nalgebra's static matrices (`SMatrix<f32, R, C>`).
//!
//! # Orientation
//!
//! nalgebra is column-major, so the natural layout puts **one sample per column**: a batch is
//! `SMatrix<f32, 784, B>` (each sample's 784 pixels contiguous, the same bytes as constmat's
//! `Matrix<f32, B, 784>`), a weight is `SMatrix<f32, O, I>`, and a layer is `Z = W·X + b`.
//! The backward pass is then `dW = dZ·Xᵀ` (a sum of `B` rank-1 updates, nalgebra's `ger`, since
//! nalgebra has no `A·Bᵀ` product that does not build the transpose) and `dX = Wᵀ·dZ`
//! (`tr_mul_to`).
//!
//! # Allocation
//!
//! The matrices are boxed static matrices, `Box<SMatrix<f32, 128, 784>>` and so on. A `Box::new`
//! of a 400 KB value may build it on the stack first; instead, nalgebra's `bytemuck` feature
//! makes `SMatrix<f32, R, C>` `Zeroable`, and `bytemuck::zeroed_box` allocates it zero-filled
//! directly on the heap (no stack temporary, and no `unsafe` in this crate). The values are
//! then written in place.
//!
//! # What nalgebra does with them
//!
//! For statically sized matrices nalgebra multiplies with its own generic code (a matrix-vector
//! product per output column, each an `axpy` over the columns of the left operand); it hands
//! only dynamically sized ones to the `matrixmultiply` crate. So this peer measures nalgebra's
//! static-size code path, not matrixmultiply (which has its own column).

use nalgebra::{SMatrix, SVector};

use crate::common::{
    BATCH, CLASSES, Data, EVAL, GEMM_SHAPES, Gemm, H1, H2, Mlp, PIXELS, Weights, operand,
    standardize,
};
use crate::peer::RustPeer;

type M<const R: usize, const C: usize> = SMatrix<f32, R, C>;

/// A zero-filled static matrix, allocated directly on the heap.
fn zeros<const R: usize, const C: usize>() -> Box<M<R, C>> {
    bytemuck::zeroed_box()
}

pub fn peer(weights: &Weights) -> RustPeer {
    RustPeer {
        cnn: None,
        name: "nalgebra",
        mlp: Box::new(NalgebraMlp::new(weights)),
        gemms: GEMM_SHAPES
            .iter()
            .map(|&shape| (shape, crate::gemm_for_shape!(shape, NalgebraGemm)))
            .collect(),
    }
}

struct NalgebraGemm<const MM: usize, const K: usize, const N: usize> {
    a: Box<M<MM, K>>,
    b: Box<M<K, N>>,
    c: Box<M<MM, N>>,
}

impl<const MM: usize, const K: usize, const N: usize> NalgebraGemm<MM, K, N> {
    fn new() -> Self {
        let mut a = zeros::<MM, K>();
        let mut b = zeros::<K, N>();
        for ((r, c), v) in indexed(&mut a) {
            *v = operand(r, c, 1);
        }
        for ((r, c), v) in indexed(&mut b) {
            *v = operand(r, c, 2);
        }
        Self {
            a,
            b,
            c: zeros::<MM, N>(),
        }
    }
}

impl<const MM: usize, const K: usize, const N: usize> Gemm for NalgebraGemm<MM, K, N> {
    fn run(&mut self) {
        self.a.mul_to(&*self.b, &mut *self.c);
    }

    fn result(&self) -> Vec<f32> {
        // Column-major storage: read it back in row-major order.
        let mut out = Vec::with_capacity(MM * N);
        for r in 0..MM {
            out.extend(self.c.row(r).iter());
        }
        out
    }
}

/// Every element of `m` with its `(row, column)`.
fn indexed<const R: usize, const C: usize>(
    m: &mut M<R, C>,
) -> impl Iterator<Item = ((usize, usize), &mut f32)> {
    // Column-major: element `i` of the storage is row `i % R` of column `i / R`.
    m.as_mut_slice()
        .iter_mut()
        .enumerate()
        .map(|(i, v)| ((i % R, i / R), v))
}

/// One dense layer's parameters and gradients: `W` is `O x I`, `b` has `O` elements.
struct DenseParams<const I: usize, const O: usize> {
    w: Box<M<O, I>>,
    b: Box<SVector<f32, O>>,
    dw: Box<M<O, I>>,
    db: Box<SVector<f32, O>>,
}

impl<const I: usize, const O: usize> DenseParams<I, O> {
    fn new() -> Self {
        Self {
            w: zeros(),
            b: zeros(),
            dw: zeros(),
            db: zeros(),
        }
    }

    /// Copies a row-major `O x I` weight and a bias.
    fn set(&mut self, w: &[f32], b: &[f32]) {
        for ((r, c), v) in indexed(&mut self.w) {
            *v = w[r * I + c];
        }
        self.b.as_mut_slice().copy_from_slice(b);
    }

    /// `out = f(W·x + b)`, one sample per column.
    fn forward<const B: usize>(&self, x: &M<I, B>, out: &mut M<O, B>, relu: bool) {
        self.w.mul_to(x, out);
        for mut column in out.column_iter_mut() {
            column += &*self.b;
            if relu {
                column.apply(|v| *v = v.max(0.0));
            }
        }
    }

    /// From `dz` (`O x B`) and the layer's input `x`: `dW = dZ·Xᵀ`, `db = Σ_columns dZ`, and
    /// `dX = Wᵀ·dZ` when asked for.
    fn backward<const B: usize>(&mut self, x: &M<I, B>, dz: &M<O, B>, dx: Option<&mut M<I, B>>) {
        for (k, (dz_k, x_k)) in dz.column_iter().zip(x.column_iter()).enumerate() {
            let beta = if k == 0 { 0.0 } else { 1.0 };
            self.dw.ger(1.0, &dz_k, &x_k, beta);
        }
        self.db.fill(0.0);
        for column in dz.column_iter() {
            *self.db += column;
        }
        if let Some(dx) = dx {
            self.w.tr_mul_to(dz, dx);
        }
    }

    fn sgd(&mut self, lr: f32) {
        self.w.zip_apply(&*self.dw, |w, g| *w -= lr * g);
        self.b.zip_apply(&*self.db, |b, g| *b -= lr * g);
    }
}

/// The intermediates of a batch of `B`: the layers' outputs (one sample per column).
struct Activations<const B: usize> {
    x: Box<M<PIXELS, B>>,
    a1: Box<M<H1, B>>,
    a2: Box<M<H2, B>>,
    z3: Box<M<CLASSES, B>>,
}

impl<const B: usize> Activations<B> {
    fn new() -> Self {
        Self {
            x: zeros(),
            a1: zeros(),
            a2: zeros(),
            z3: zeros(),
        }
    }
}

/// The three layers.
struct Params {
    l1: DenseParams<PIXELS, H1>,
    l2: DenseParams<H1, H2>,
    l3: DenseParams<H2, CLASSES>,
}

impl Params {
    fn forward<const B: usize>(&self, act: &mut Activations<B>) {
        self.l1.forward(&act.x, &mut act.a1, true);
        self.l2.forward(&act.a1, &mut act.a2, true);
        self.l3.forward(&act.a2, &mut act.z3, false);
    }
}

pub struct NalgebraMlp {
    params: Params,
    train: Activations<BATCH>,
    labels: [u8; BATCH],
    dz3: Box<M<CLASSES, BATCH>>,
    dz2: Box<M<H2, BATCH>>,
    dz1: Box<M<H1, BATCH>>,
    single: Activations<1>,
    eval: Activations<EVAL>,
}

impl NalgebraMlp {
    pub fn new(weights: &Weights) -> Self {
        let mut mlp = Self {
            params: Params {
                l1: DenseParams::new(),
                l2: DenseParams::new(),
                l3: DenseParams::new(),
            },
            train: Activations::new(),
            labels: [0; BATCH],
            dz3: zeros(),
            dz2: zeros(),
            dz1: zeros(),
            single: Activations::new(),
            eval: Activations::new(),
        };
        mlp.set_weights(weights);
        mlp
    }

    /// Forward pass and mean softmax cross-entropy of the training batch; with `gradient`,
    /// also writes `dZ3 = (softmax(Z3) - Y) / B`.
    fn forward_loss(&mut self, gradient: bool) -> f32 {
        self.params.forward(&mut self.train);
        let inv_batch = 1.0 / BATCH as f32;
        let mut total = 0.0;
        for (j, z) in self.train.z3.column_iter().enumerate() {
            let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let log_sum = z.iter().map(|&v| (v - max).exp()).sum::<f32>().ln();
            let label = usize::from(self.labels[j]);
            total -= z[label] - max - log_sum;
            if gradient {
                let mut dz = self.dz3.column_mut(j);
                for (c, (g, &v)) in dz.iter_mut().zip(z.iter()).enumerate() {
                    let target = if c == label { 1.0 } else { 0.0 };
                    *g = ((v - max - log_sum).exp() - target) * inv_batch;
                }
            }
        }
        total * inv_batch
    }
}

/// `dz = da ⊙ relu'(a)`, in place on `da`.
fn relu_backward<const R: usize, const B: usize>(da: &mut M<R, B>, a: &M<R, B>) {
    da.zip_apply(a, |d, a| {
        if a <= 0.0 {
            *d = 0.0;
        }
    });
}

impl Mlp for NalgebraMlp {
    fn set_weights(&mut self, weights: &Weights) {
        self.params.l1.set(weights.w(0), weights.b(0));
        self.params.l2.set(weights.w(1), weights.b(1));
        self.params.l3.set(weights.w(2), weights.b(2));
    }

    fn load_batch(&mut self, data: &Data, indices: &[usize; BATCH]) {
        // Column j is sample j: 784 contiguous floats.
        for ((mut column, &index), label) in self
            .train
            .x
            .column_iter_mut()
            .zip(indices)
            .zip(&mut self.labels)
        {
            for (v, &p) in column.iter_mut().zip(data.split.image(index)) {
                *v = standardize(p);
            }
            *label = data.split.label(index);
        }
    }

    fn step(&mut self, lr: f32) -> f32 {
        let loss = self.forward_loss(true);
        let NalgebraMlp {
            params: Params { l1, l2, l3 },
            train,
            dz3,
            dz2,
            dz1,
            ..
        } = self;
        l3.backward(&train.a2, dz3, Some(dz2));
        relu_backward(dz2, &train.a2);
        l2.backward(&train.a1, dz2, Some(dz1));
        relu_backward(dz1, &train.a1);
        l1.backward(&train.x, dz1, None);
        l1.sgd(lr);
        l2.sgd(lr);
        l3.sgd(lr);
        loss
    }

    fn loss(&mut self) -> f32 {
        self.forward_loss(false)
    }

    fn load_single(&mut self, x: &[f32]) {
        self.single.x.as_mut_slice().copy_from_slice(x);
    }

    fn forward_single(&mut self) -> [f32; CLASSES] {
        self.params.forward(&mut self.single);
        std::array::from_fn(|c| self.single.z3[c])
    }

    fn load_eval(&mut self, x: &[f32]) {
        // Row-major 1000 x 784 is column-major 784 x 1000: the same bytes.
        self.eval.x.as_mut_slice().copy_from_slice(x);
    }

    fn forward_eval(&mut self) -> f32 {
        self.params.forward(&mut self.eval);
        self.eval.z3[0]
    }

    fn eval_logits(&self) -> Vec<f32> {
        // Column j holds sample j's 10 logits: column-major 10 x 1000 is row-major 1000 x 10.
        self.eval.z3.as_slice().to_vec()
    }
}
