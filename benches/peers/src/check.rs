//! Do the implementations compute the same thing? Each one computes the same results from the
//! same weights and data, and each result is compared with constmat's.

use crate::cnn::Cnn;
use crate::common::{Context, EPOCH_LR, Mlp, PIXELS, Shape};
use crate::peer::RustPeer;

/// Steps of the checks' training run (also used by the Rust implementations).
pub const CHECK_STEPS: usize = 100;

/// What an implementation computed.
pub struct Report {
    /// `C = A·B` of each GEMM shape on the deterministic operands, row-major.
    pub gemm: Vec<(Shape, Vec<f32>)>,
    /// The MLP's results.
    pub mlp: NetReport,
    /// The CNN's results, when the implementation has one.
    pub cnn: Option<NetReport>,
}

/// What a net computed from the shared initial weights and images.
pub struct NetReport {
    /// The mean loss of the first batch from the initial weights.
    pub loss_first: f32,
    /// The mean loss of the same batch after one SGD step on it (checks backward and update).
    pub loss_after_step: f32,
    /// The mean training loss of the first [`CHECK_STEPS`] steps of an epoch from the initial
    /// weights (learning rate [`EPOCH_LR`]).
    pub mean_loss: f32,
    /// The logits of the batch-1 forward pass.
    pub logits_single: Vec<f32>,
    /// The logits of the batch-1000 forward pass, 1000 x 10 row-major.
    pub logits_eval: Vec<f32>,
}

/// The checks' computations, on the MLP or the CNN (the two traits have the same methods).
macro_rules! net_report {
    ($net:expr, $weights:expr, $ctx:expr) => {{
        let net = $net;
        let data = &$ctx.data;
        net.set_weights($weights);
        net.load_batch(data, &data.indices(0));
        let loss_first = net.loss();
        net.step(EPOCH_LR);
        let loss_after_step = net.loss();

        net.set_weights($weights);
        let mut total = 0.0_f64;
        for step in 0..CHECK_STEPS {
            net.load_batch(data, &data.indices(step));
            total += f64::from(net.step(EPOCH_LR));
        }
        let mean_loss = (total / CHECK_STEPS as f64) as f32;

        net.set_weights($weights);
        net.load_single(&$ctx.eval_inputs[..PIXELS]);
        let logits_single = net.forward_single().to_vec();
        net.load_eval(&$ctx.eval_inputs);
        net.forward_eval();
        let logits_eval = net.eval_logits();
        NetReport {
            loss_first,
            loss_after_step,
            mean_loss,
            logits_single,
            logits_eval,
        }
    }};
}

/// Runs the checks' computations on a Rust implementation.
pub fn rust_report(peer: &mut RustPeer, ctx: &Context) -> Report {
    let mlp: &mut dyn Mlp = peer.mlp.as_mut();
    let mlp = net_report!(mlp, &ctx.weights, ctx);
    let cnn = peer.cnn.as_mut().map(|cnn| {
        let cnn: &mut dyn Cnn = cnn.as_mut();
        net_report!(cnn, &ctx.cnn_weights, ctx)
    });
    let gemm = peer
        .gemms
        .iter_mut()
        .map(|(shape, gemm)| {
            gemm.run();
            (*shape, gemm.result())
        })
        .collect();
    Report { gemm, mlp, cnn }
}

/// `max |a - b| / max |b|`: the largest difference relative to the reference's scale.
pub fn relative_difference(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let scale = b.iter().fold(0.0_f64, |m, &v| m.max(f64::from(v).abs()));
    let diff = a.iter().zip(b).fold(0.0_f64, |m, (&x, &y)| {
        m.max((f64::from(x) - f64::from(y)).abs())
    });
    if diff.is_nan() {
        f64::INFINITY
    } else {
        diff / scale.max(f64::MIN_POSITIVE)
    }
}

/// Compares `report` with constmat's `reference`, printing one line per check; returns
/// whether all passed.
///
/// Tolerances: the implementations add the same terms in different orders (blocked, vectorized,
/// fused multiply-add or not), so f32 results differ in the last bits, more so after training
/// steps amplify them.
pub fn compare(name: &str, report: &Report, reference: &Report) -> bool {
    let mut all = true;
    let mut line = |what: String, detail: String, diff: f64, tolerance: f64| {
        let ok = diff <= tolerance;
        all &= ok;
        println!(
            "check {name:<14} {what:<40} {detail:<22} rel. diff {diff:8.1e} (tol {tolerance:.0e}) {}",
            if ok { "ok" } else { "FAILED" }
        );
    };
    for ((shape, c), (_, c_ref)) in report.gemm.iter().zip(&reference.gemm) {
        let (m, k, n) = shape;
        line(
            format!("GEMM {m}x{k}x{n}: C = A·B"),
            format!("{} elements", c.len()),
            relative_difference(c, c_ref),
            1e-4,
        );
    }
    let mut nets = vec![("", &report.mlp, &reference.mlp)];
    if let (Some(cnn), Some(cnn_ref)) = (&report.cnn, &reference.cnn) {
        nets.push(("CNN: ", cnn, cnn_ref));
    }
    for (prefix, net, net_ref) in nets {
        let scalar = |a: f32, b: f32| relative_difference(&[a], &[b]);
        line(
            format!("{prefix}loss of the first batch"),
            format!("{:.6} vs {:.6}", net.loss_first, net_ref.loss_first),
            scalar(net.loss_first, net_ref.loss_first),
            1e-5,
        );
        line(
            format!("{prefix}loss after one SGD step on it"),
            format!(
                "{:.6} vs {:.6}",
                net.loss_after_step, net_ref.loss_after_step
            ),
            scalar(net.loss_after_step, net_ref.loss_after_step),
            1e-4,
        );
        line(
            format!("{prefix}mean loss, first {CHECK_STEPS} steps"),
            format!("{:.6} vs {:.6}", net.mean_loss, net_ref.mean_loss),
            scalar(net.mean_loss, net_ref.mean_loss),
            // A hundred steps amplify rounding. With Winograd's dX, constmat's CNN loss after
            // one step differs from PyTorch's by 1.2e-7 and its mean loss over the first 100
            // steps by 1.2e-3 (both were 0 before: the two computed the same floats). The
            // one-step checks above are the tight ones; the MLP's sums are unchanged.
            if prefix.is_empty() { 1e-3 } else { 1e-2 },
        );
        line(
            format!("{prefix}logits, forward batch 1"),
            format!("{} values", net.logits_single.len()),
            relative_difference(&net.logits_single, &net_ref.logits_single),
            1e-4,
        );
        line(
            format!("{prefix}logits, forward batch 1000"),
            format!("{} values", net.logits_eval.len()),
            relative_difference(&net.logits_eval, &net_ref.logits_eval),
            1e-4,
        );
    }
    all
}
