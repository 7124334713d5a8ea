//! The same MLP written by hand on the `matrixmultiply` crate: `sgemm` on flat `Vec<f32>`.
//!
//! Same layout as constmat: one sample per row, weights `out x in`, all row-major. The
//! transposed operands of the three products of a layer (`Z = X·Wᵀ`, `dW = dZᵀ·X`,
//! `dX = dZ·W`) are expressed through `sgemm`'s strides, as a BLAS user would, so nothing is
//! ever transposed in memory. `matrixmultiply` packs its operands into cache-sized blocks and
//! runs a vectorized micro-kernel chosen at run time (AVX2/FMA here); its `threading` feature is
//! off, so it uses one thread.

use crate::common::{
    BATCH, CLASSES, Data, EVAL, GEMM_SHAPES, Gemm, H1, H2, Mlp, PIXELS, Weights, operand,
    standardize,
};
use crate::peer::RustPeer;

pub fn peer(weights: &Weights) -> RustPeer {
    RustPeer {
        cnn: None,
        name: "matrixmultiply",
        mlp: Box::new(MmMlp::new(weights)),
        gemms: GEMM_SHAPES
            .iter()
            .map(|&(m, k, n)| {
                let gemm: Box<dyn Gemm> = Box::new(MmGemm::new(m, k, n));
                ((m, k, n), gemm)
            })
            .collect(),
    }
}

/// An operand of [`sgemm`]: a row-major matrix, used as is or transposed.
#[derive(Clone, Copy)]
enum Op<'a> {
    /// The slice is the `rows x cols` operand itself.
    N(&'a [f32]),
    /// The slice is the transpose of the operand (`cols x rows`, row-major).
    T(&'a [f32]),
}

/// `c = op(a)·op(b) + beta·c`, with `op(a)` `m x k`, `op(b)` `k x n` and `c` `m x n`, all
/// row-major: a safe wrapper that checks the lengths `matrixmultiply::sgemm` trusts.
fn sgemm(m: usize, k: usize, n: usize, a: Op<'_>, b: Op<'_>, beta: f32, c: &mut [f32]) {
    // (slice, row stride, column stride) of op(a) and op(b).
    let (a, rsa, csa) = match a {
        Op::N(a) => (a, k, 1),
        Op::T(a) => (a, 1, m),
    };
    let (b, rsb, csb) = match b {
        Op::N(b) => (b, n, 1),
        Op::T(b) => (b, 1, k),
    };
    assert_eq!(a.len(), m * k, "left operand of {m}x{k}x{n}");
    assert_eq!(b.len(), k * n, "right operand of {m}x{k}x{n}");
    assert_eq!(c.len(), m * n, "output of {m}x{k}x{n}");
    // SAFETY: with the strides above, every element read, `(i, l)` of op(a) for i < m, l < k
    // (and likewise for b) and written, `(i, j)` of c, lies inside the slice whose length was
    // just checked; `c` is a unique borrow, so it does not overlap `a` or `b`.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

struct MmGemm {
    shape: (usize, usize, usize),
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

impl MmGemm {
    fn new(m: usize, k: usize, n: usize) -> Self {
        let matrix = |rows: usize, cols: usize, seed: usize| -> Vec<f32> {
            (0..rows * cols)
                .map(|i| operand(i / cols, i % cols, seed))
                .collect()
        };
        Self {
            shape: (m, k, n),
            a: matrix(m, k, 1),
            b: matrix(k, n, 2),
            c: vec![0.0; m * n],
        }
    }
}

impl Gemm for MmGemm {
    fn run(&mut self) {
        let (m, k, n) = self.shape;
        sgemm(m, k, n, Op::N(&self.a), Op::N(&self.b), 0.0, &mut self.c);
    }

    fn result(&self) -> Vec<f32> {
        self.c.clone()
    }
}

/// A dense layer `I -> O`: weight `O x I`, bias, and their gradients.
struct Dense {
    inputs: usize,
    outputs: usize,
    w: Vec<f32>,
    b: Vec<f32>,
    dw: Vec<f32>,
    db: Vec<f32>,
}

impl Dense {
    fn new(inputs: usize, outputs: usize) -> Self {
        Self {
            inputs,
            outputs,
            w: vec![0.0; outputs * inputs],
            b: vec![0.0; outputs],
            dw: vec![0.0; outputs * inputs],
            db: vec![0.0; outputs],
        }
    }

    /// `out = f(X·Wᵀ + b)` for `rows` samples.
    fn forward(&self, rows: usize, x: &[f32], out: &mut [f32], relu: bool) {
        sgemm(
            rows,
            self.inputs,
            self.outputs,
            Op::N(x),
            Op::T(&self.w),
            0.0,
            out,
        );
        for row in out.chunks_exact_mut(self.outputs) {
            for (v, &b) in row.iter_mut().zip(&self.b) {
                *v += b;
                if relu {
                    *v = v.max(0.0);
                }
            }
        }
    }

    /// `dW = dZᵀ·X`, `db = Σ_rows dZ`, and `dX = dZ·W` when asked for.
    fn backward(&mut self, x: &[f32], dz: &[f32], dx: Option<&mut [f32]>) {
        let (i, o) = (self.inputs, self.outputs);
        sgemm(o, BATCH, i, Op::T(dz), Op::N(x), 0.0, &mut self.dw);
        self.db.fill(0.0);
        for row in dz.chunks_exact(o) {
            for (s, &v) in self.db.iter_mut().zip(row) {
                *s += v;
            }
        }
        if let Some(dx) = dx {
            sgemm(BATCH, o, i, Op::N(dz), Op::N(&self.w), 0.0, dx);
        }
    }

    fn sgd(&mut self, lr: f32) {
        for (w, &g) in self.w.iter_mut().zip(&self.dw) {
            *w -= lr * g;
        }
        for (b, &g) in self.b.iter_mut().zip(&self.db) {
            *b -= lr * g;
        }
    }
}

/// The layers' outputs for a batch of `rows` samples.
struct Activations {
    rows: usize,
    x: Vec<f32>,
    a1: Vec<f32>,
    a2: Vec<f32>,
    z3: Vec<f32>,
}

impl Activations {
    fn new(rows: usize) -> Self {
        Self {
            rows,
            x: vec![0.0; rows * PIXELS],
            a1: vec![0.0; rows * H1],
            a2: vec![0.0; rows * H2],
            z3: vec![0.0; rows * CLASSES],
        }
    }
}

struct Layers {
    l1: Dense,
    l2: Dense,
    l3: Dense,
}

impl Layers {
    fn forward(&self, act: &mut Activations) {
        self.l1.forward(act.rows, &act.x, &mut act.a1, true);
        self.l2.forward(act.rows, &act.a1, &mut act.a2, true);
        self.l3.forward(act.rows, &act.a2, &mut act.z3, false);
    }
}

pub struct MmMlp {
    layers: Layers,
    train: Activations,
    labels: [u8; BATCH],
    dz3: Vec<f32>,
    dz2: Vec<f32>,
    dz1: Vec<f32>,
    single: Activations,
    eval: Activations,
}

impl MmMlp {
    pub fn new(weights: &Weights) -> Self {
        let mut mlp = Self {
            layers: Layers {
                l1: Dense::new(PIXELS, H1),
                l2: Dense::new(H1, H2),
                l3: Dense::new(H2, CLASSES),
            },
            train: Activations::new(BATCH),
            labels: [0; BATCH],
            dz3: vec![0.0; BATCH * CLASSES],
            dz2: vec![0.0; BATCH * H2],
            dz1: vec![0.0; BATCH * H1],
            single: Activations::new(1),
            eval: Activations::new(EVAL),
        };
        mlp.set_weights(weights);
        mlp
    }

    /// Forward pass and mean softmax cross-entropy of the training batch; with `gradient`,
    /// also writes `dZ3 = (softmax(Z3) - Y) / B`.
    fn forward_loss(&mut self, gradient: bool) -> f32 {
        self.layers.forward(&mut self.train);
        let inv_batch = 1.0 / BATCH as f32;
        let mut total = 0.0;
        let rows = self.train.z3.chunks_exact(CLASSES);
        for ((z, g), &label) in rows
            .zip(self.dz3.chunks_exact_mut(CLASSES))
            .zip(&self.labels)
        {
            let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let log_sum = z.iter().map(|&v| (v - max).exp()).sum::<f32>().ln();
            let label = usize::from(label);
            total -= z[label] - max - log_sum;
            if gradient {
                for (c, (g, &v)) in g.iter_mut().zip(z).enumerate() {
                    let target = if c == label { 1.0 } else { 0.0 };
                    *g = ((v - max - log_sum).exp() - target) * inv_batch;
                }
            }
        }
        total * inv_batch
    }
}

/// `dz = da ⊙ relu'(a)`, in place on `da`.
fn relu_backward(da: &mut [f32], a: &[f32]) {
    for (d, &a) in da.iter_mut().zip(a) {
        if a <= 0.0 {
            *d = 0.0;
        }
    }
}

impl Mlp for MmMlp {
    fn set_weights(&mut self, weights: &Weights) {
        for (k, layer) in [
            &mut self.layers.l1,
            &mut self.layers.l2,
            &mut self.layers.l3,
        ]
        .into_iter()
        .enumerate()
        {
            layer.w.copy_from_slice(weights.w(k));
            layer.b.copy_from_slice(weights.b(k));
        }
    }

    fn load_batch(&mut self, data: &Data, indices: &[usize; BATCH]) {
        for ((row, &index), label) in self
            .train
            .x
            .chunks_exact_mut(PIXELS)
            .zip(indices)
            .zip(&mut self.labels)
        {
            for (v, &p) in row.iter_mut().zip(data.split.image(index)) {
                *v = standardize(p);
            }
            *label = data.split.label(index);
        }
    }

    fn step(&mut self, lr: f32) -> f32 {
        let loss = self.forward_loss(true);
        let Layers { l1, l2, l3 } = &mut self.layers;
        let t = &self.train;
        l3.backward(&t.a2, &self.dz3, Some(&mut self.dz2));
        relu_backward(&mut self.dz2, &t.a2);
        l2.backward(&t.a1, &self.dz2, Some(&mut self.dz1));
        relu_backward(&mut self.dz1, &t.a1);
        l1.backward(&t.x, &self.dz1, None);
        l1.sgd(lr);
        l2.sgd(lr);
        l3.sgd(lr);
        loss
    }

    fn loss(&mut self) -> f32 {
        self.forward_loss(false)
    }

    fn load_single(&mut self, x: &[f32]) {
        self.single.x.copy_from_slice(x);
    }

    fn forward_single(&mut self) -> [f32; CLASSES] {
        self.layers.forward(&mut self.single);
        std::array::from_fn(|c| self.single.z3[c])
    }

    fn load_eval(&mut self, x: &[f32]) {
        self.eval.x.copy_from_slice(x);
    }

    fn forward_eval(&mut self) -> f32 {
        self.layers.forward(&mut self.eval);
        self.eval.z3[0]
    }

    fn eval_logits(&self) -> Vec<f32> {
        self.eval.z3.clone()
    }
}
