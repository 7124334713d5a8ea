//! The suite's figures: a training step, the batch-1 and batch-1000 forward passes, with their
//! goals and units.

use crate::common::EVAL;
use crate::format_figure;

/// A figure of a net.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    TrainStep,
    Forward1,
    Forward1000,
}

pub(super) const FIGURES: [Figure; 3] = [Figure::TrainStep, Figure::Forward1, Figure::Forward1000];

impl Figure {
    /// The key in `peers.py suite`'s JSON.
    pub(super) fn key(self) -> &'static str {
        match self {
            Figure::TrainStep => "train_step",
            Figure::Forward1 => "forward_batch1",
            Figure::Forward1000 => "forward_batch1000",
        }
    }

    pub(super) fn label(self, batch: usize) -> String {
        match self {
            Figure::TrainStep => format!("training step, batch {batch}"),
            Figure::Forward1 => "forward, batch 1".into(),
            Figure::Forward1000 => format!("forward, batch {EVAL}"),
        }
    }

    /// The goal for PyTorch's time over constmat's.
    pub(super) fn goal(self) -> f64 {
        match self {
            Figure::TrainStep => 2.0,
            Figure::Forward1 => 4.0,
            Figure::Forward1000 => 1.3,
        }
    }

    /// A time in this figure's unit: ms per step, µs per pass, ms per pass.
    pub(super) fn format(self, seconds: f64) -> String {
        match self {
            Figure::TrainStep | Figure::Forward1000 => {
                format!("{} ms", format_figure(seconds * 1e3))
            }
            Figure::Forward1 => format!("{} µs", format_figure(seconds * 1e6)),
        }
    }
}
