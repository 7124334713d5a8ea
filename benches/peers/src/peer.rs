//! What a Rust implementation provides to the harness, and how one round measures it.

use std::hint::black_box;
use std::time::Instant;

use crate::cnn::{Cnn, measure_cnn};
use crate::common::{
    Context, EPOCH_LR, Gemm, Mlp, PIXELS, STEP_LR, Shape, Times, Workload, measure,
};

/// What a Rust implementation provides to the harness.
pub struct RustPeer {
    pub name: &'static str,
    pub mlp: Box<dyn Mlp>,
    pub gemms: Vec<(Shape, Box<dyn Gemm>)>,
    /// The CNN, for the implementations that have convolutions.
    pub cnn: Option<Box<dyn Cnn>>,
}

impl RustPeer {
    /// Measures every workload once (one round).
    pub fn measure(&mut self, ctx: &Context) -> Times {
        let budget = ctx.budget.per_workload;
        let mut times = Vec::new();
        for (shape, gemm) in &mut self.gemms {
            let (m, k, n) = *shape;
            times.push((Workload::Gemm(m, k, n), measure(budget, || gemm.run())));
        }
        let mlp = &mut self.mlp;

        // Steps on one fixed batch, starting from the shared initial weights.
        mlp.set_weights(&ctx.weights);
        mlp.load_batch(&ctx.data, &ctx.data.indices(0));
        times.push((
            Workload::TrainStep,
            measure(budget, || {
                black_box(mlp.step(STEP_LR));
            }),
        ));

        // The beginning of an epoch: 3 warm-up steps, then the timed ones from the start again.
        mlp.set_weights(&ctx.weights);
        for step in 0..3 {
            mlp.load_batch(&ctx.data, &ctx.data.indices(step));
            mlp.step(EPOCH_LR);
        }
        mlp.set_weights(&ctx.weights);
        let start = Instant::now();
        for step in 0..ctx.budget.epoch_steps {
            mlp.load_batch(&ctx.data, &ctx.data.indices(step));
            black_box(mlp.step(EPOCH_LR));
        }
        let per_step = start.elapsed().as_secs_f64() / ctx.budget.epoch_steps as f64;
        times.push((Workload::Epoch, per_step));

        mlp.load_single(&ctx.eval_inputs[..PIXELS]);
        times.push((
            Workload::Forward1,
            measure(budget, || {
                black_box(mlp.forward_single());
            }),
        ));
        mlp.load_eval(&ctx.eval_inputs);
        times.push((
            Workload::Forward1000,
            measure(budget, || {
                black_box(mlp.forward_eval());
            }),
        ));
        if mlp.prepare_int8(&ctx.eval_inputs) {
            times.push((
                Workload::Int8Forward1,
                measure(budget, || {
                    black_box(mlp.forward_single_int8());
                }),
            ));
        }
        if let Some(cnn) = &mut self.cnn {
            measure_cnn(cnn.as_mut(), ctx, &mut times);
        }
        times
    }
}
