//! Learning-rate schedules.

use num_traits::Float;

/// How the learning rate changes over training, as a function of the step (or epoch: the unit is
/// whatever the caller counts).
///
/// ```
/// use constmat::nn::Schedule;
///
/// let cosine = Schedule::Cosine { total: 100, floor: 0.0 };
/// assert_eq!(cosine.learning_rate(0.1, 0), 0.1);
/// assert!((cosine.learning_rate(0.1, 50) - 0.05).abs() < 1e-12);
/// assert_eq!(cosine.learning_rate(0.1, 100), 0.0);
///
/// let step = Schedule::StepDecay { every: 10, factor: 0.5 };
/// assert_eq!(step.learning_rate(0.1, 25), 0.025);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// The base rate throughout.
    Constant,
    /// The base rate times `factor` for every completed `every` steps.
    StepDecay {
        /// Steps between decays (0 means never).
        every: usize,
        /// The multiplier applied at each decay.
        factor: f64,
    },
    /// Half a cosine from the base rate down to `floor` over `total` steps, then `floor`.
    Cosine {
        /// Steps over which the rate decays.
        total: usize,
        /// The rate at and after step `total`.
        floor: f64,
    },
}

impl Schedule {
    /// The learning rate at `step` for a base rate of `base`.
    #[must_use]
    pub fn learning_rate(&self, base: f64, step: usize) -> f64 {
        match *self {
            Schedule::Constant => base,
            Schedule::StepDecay { every, factor } => {
                let decays = step.checked_div(every).unwrap_or(0);
                base * factor.powi(i32::try_from(decays).unwrap_or(i32::MAX))
            }
            Schedule::Cosine { total, floor } => {
                if total == 0 || step >= total {
                    return floor;
                }
                let progress = step as f64 / total as f64;
                floor + (base - floor) * 0.5 * (1.0 + Float::cos(core::f64::consts::PI * progress))
            }
        }
    }
}
