//! The suite's checks: what constmat and PyTorch compute from a net's initial weights and data
//! ([`NetReport`]), and their comparison.

use serde_json::Value;

use super::runner::SuiteNet;
use super::{CHECK_STEPS, LR};
use crate::check::relative_difference;
use crate::common::EVAL;

/// What an implementation computed from a net's initial weights and data.
pub(super) struct NetReport {
    /// The mean loss of the training batch.
    loss_first: f32,
    /// The same after one SGD step on it.
    loss_after_step: f32,
    /// The same after [`CHECK_STEPS`] SGD steps on it.
    loss_after_steps: f32,
    logits_single: Vec<f32>,
    logits_eval: Vec<f32>,
}

pub(super) fn constmat_report(net: &mut dyn SuiteNet) -> NetReport {
    net.reset();
    let loss_first = net.loss();
    net.step(LR);
    let loss_after_step = net.loss();
    for _ in 1..CHECK_STEPS {
        net.step(LR);
    }
    let loss_after_steps = net.loss();
    net.reset();
    let logits_single = net.forward_single().to_vec();
    net.forward_eval();
    let logits_eval = net.eval_logits();
    net.release_eval();
    NetReport {
        loss_first,
        loss_after_step,
        loss_after_steps,
        logits_single,
        logits_eval,
    }
}

pub(super) fn python_report(value: &Value) -> Result<NetReport, String> {
    let float = |key: &str| {
        value[key]
            .as_f64()
            .map(|v| v as f32)
            .ok_or_else(|| format!("no {key} in peers.py's check report"))
    };
    let floats = |key: &str| {
        value[key]
            .as_str()
            .ok_or_else(|| format!("no {key} in peers.py's check report"))
            .and_then(crate::python::hex_f32)
    };
    Ok(NetReport {
        loss_first: float("loss_first")?,
        loss_after_step: float("loss_after_step")?,
        loss_after_steps: float("loss_after_steps")?,
        logits_single: floats("logits_single")?,
        logits_eval: floats("logits_eval")?,
    })
}

/// Compares PyTorch's report with constmat's, one line per result; whether all passed.
///
/// Tolerances as the harness's other checks: f32 sums in different orders agree to about 1e-6
/// relative; training steps amplify that a little.
pub(super) fn compare(key: &str, torch: &NetReport, constmat: &NetReport) -> bool {
    let mut all = true;
    let mut line = |what: &str, detail: String, diff: f64, tolerance: f64| {
        let ok = diff <= tolerance;
        all &= ok;
        println!(
            "check {key:<9} {what:<32} {detail:<22} rel. diff {diff:8.1e} (tol {tolerance:.0e}) {}",
            if ok { "ok" } else { "FAILED" }
        );
    };
    let scalar = |a: f32, b: f32| relative_difference(&[a], &[b]);
    line(
        "loss of the training batch",
        format!("{:.6} vs {:.6}", torch.loss_first, constmat.loss_first),
        scalar(torch.loss_first, constmat.loss_first),
        1e-5,
    );
    line(
        "loss after 1 SGD step",
        format!(
            "{:.6} vs {:.6}",
            torch.loss_after_step, constmat.loss_after_step
        ),
        scalar(torch.loss_after_step, constmat.loss_after_step),
        1e-4,
    );
    line(
        &format!("loss after {CHECK_STEPS} SGD steps"),
        format!(
            "{:.6} vs {:.6}",
            torch.loss_after_steps, constmat.loss_after_steps
        ),
        scalar(torch.loss_after_steps, constmat.loss_after_steps),
        1e-3,
    );
    line(
        "logits, forward batch 1",
        format!("{} values", torch.logits_single.len()),
        relative_difference(&torch.logits_single, &constmat.logits_single),
        1e-4,
    );
    line(
        &format!("logits, forward batch {EVAL}"),
        format!("{} values", torch.logits_eval.len()),
        relative_difference(&torch.logits_eval, &constmat.logits_eval),
        1e-4,
    );
    all
}
