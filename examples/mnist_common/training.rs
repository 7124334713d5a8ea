//! The training session of the MNIST examples (`mnist_static`, `mnist_cnn`): the options, the
//! data, the training loop with its progress bar and per-epoch line, the evaluation, the report
//! and saving, and stopping early on Ctrl-C ([`interrupt`]). Each example supplies its net and
//! how a digit becomes its input ([`Model`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use constmat::Matrix;
use constmat::data::mnist::{self, CLASSES, Mnist, Split};
use constmat::nn::{
    Adam, Layer, Momentum, Optimizer, Parameters, Predict, RandomInit, Schedule, Sgd,
    SoftmaxCrossEntropy, StepError, Train, Trainer, zeroed_batch,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};

use super::data_set::{self, DataSet};
use super::interrupt::{self, Interrupt};
use super::report;

/// `println!` to standard output, except that an output closed early (`| head`, `| grep -m1`)
/// is not an error: the run goes on and still writes its files. (`println!` panics there.)
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

#[allow(unused_imports)] // not every example that includes this module prints with it
pub(crate) use say;

/// [`say!`] without the line break, for text that ends with its own.
pub fn say_text(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

/// Samples per training step. A compile-time constant: every buffer of a step has it in its type.
pub const BATCH: usize = 64;

/// What an example trains: its net, and how a digit becomes the net's input.
pub trait Model {
    /// The net. Its type is its architecture.
    type Net: Train<f32, BATCH> + Layer<Out = [f32; CLASSES]> + RandomInit + Parameters<f32> + Clone;
    /// The architecture in words, for the first line.
    const DESCRIPTION: &'static str;
    /// The data set it trains on.
    const DATA: DataSet = data_set::MNIST;
    /// The image at `index` of `split` as the net's input, written into `x`.
    fn fill(split: &Split, index: usize, x: &mut <Self::Net as Layer>::In);
    /// The image at `index` of `split` as a training input: [`fill`](Self::fill) unless the
    /// example varies its training images (with `rng`).
    fn fill_training(
        split: &Split,
        index: usize,
        x: &mut <Self::Net as Layer>::In,
        rng: &mut StdRng,
    ) {
        let _ = rng;
        Self::fill(split, index, x);
    }
    /// Writes the trained net to `path` (safetensors), ready for pixels scaled to [0, 1].
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    fn save(net: &Self::Net, path: &Path) -> Result<(), String>;
    /// Lines reported after the confusion matrix, of the trained net (an example's own
    /// figures, such as its int8 form's accuracy): none unless the example has some.
    fn after_training(net: &Self::Net, train: &Split, test: &Split) -> Vec<String> {
        let _ = (net, train, test);
        Vec::new()
    }
}

/// The command line.
#[derive(Debug, Clone)]
pub struct Options {
    pub data: Option<PathBuf>,
    pub epochs: usize,
    pub lr: f64,
    pub optimizer: String,
    pub schedule: String,
    pub seed: u64,
    pub threads: usize,
    pub save: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    /// The momentum optimizer's weight decay (`--weight-decay`; 0 for none).
    pub weight_decay: f64,
    /// The example's default learning rate (for momentum and SGD), for the hints of errors.
    pub usual_lr: f64,
}

/// The options on the command line, over `defaults`; `None` for `--help`.
pub fn parse_options(defaults: Options) -> Result<Option<Options>, String> {
    parse_args(defaults, std::env::args().skip(1))
}

/// [`parse_options`] on the given arguments (the program's name left out).
pub fn parse_args(
    defaults: Options,
    args: impl IntoIterator<Item = String>,
) -> Result<Option<Options>, String> {
    let mut o = defaults;
    let mut args = args.into_iter();
    let mut seen = Vec::new();
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        // The second of two was taken before, silently: which one the user meant is unknown.
        if flag.starts_with("--") && seen.contains(&flag) {
            return Err(format!("{flag} is given twice"));
        }
        seen.push(flag.clone());
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String, what: &str| format!("{flag}: expected {what}, found `{v}`");
        match flag.as_str() {
            "--data" => o.data = Some(value()?.into()),
            "--epochs" => {
                let v = value()?;
                o.epochs = v
                    .parse()
                    .ok()
                    .filter(|e| (1..=MAX_EPOCHS).contains(e))
                    .ok_or_else(|| {
                        number(
                            v,
                            &format!(
                                "a positive whole number, at most {MAX_EPOCHS} (0 would train \
                                 nothing; more would run for days)"
                            ),
                        )
                    })?;
            }
            "--lr" => {
                let v = value()?;
                // The net trains in f32: a rate that is not a normal f32 would become 0 (below
                // 1.2e-38) or infinite (above 3.4e38) there.
                o.lr = v
                    .parse::<f64>()
                    .ok()
                    .filter(|&lr| lr > 0.0 && (lr as f32).is_normal())
                    .ok_or_else(|| {
                        number(
                            v,
                            &format!(
                                "a positive number from {:e} to {:e} (the net trains in f32)",
                                f32::MIN_POSITIVE,
                                f32::MAX
                            ),
                        )
                    })?;
            }
            "--optimizer" => o.optimizer = value()?,
            "--schedule" => o.schedule = value()?,
            "--seed" => {
                let v = value()?;
                o.seed = v.parse().map_err(|_| number(v, "a whole number"))?;
            }
            "--threads" => {
                let v = value()?;
                o.threads = v
                    .parse()
                    .ok()
                    .filter(|&t| t > 0)
                    .ok_or_else(|| number(v, "a positive whole number"))?;
                let most = max_threads();
                if o.threads > most {
                    return Err(format!(
                        "--threads {}: at most {most} (4 per core of this machine); more only adds overhead",
                        o.threads
                    ));
                }
                if !cfg!(feature = "threads") && o.threads > 1 {
                    return Err(format!(
                        "--threads {}: this build is single-threaded; add `--features threads` to cargo run",
                        o.threads
                    ));
                }
            }
            "--weight-decay" => {
                let v = value()?;
                o.weight_decay = v
                    .parse::<f64>()
                    .ok()
                    .filter(|&l| (0.0..1.0).contains(&l))
                    .ok_or_else(|| number(v, "a number from 0 up to (not including) 1"))?;
            }
            "--save" => o.save = Some(value()?.into()),
            "--plot" => o.plot = Some(value()?.into()),
            other => return Err(format!("unknown option `{other}` (see --help)")),
        }
    }
    if !["sgd", "momentum", "adam"].contains(&o.optimizer.as_str()) {
        return Err(format!(
            "--optimizer: expected sgd, momentum or adam, found `{}`",
            o.optimizer
        ));
    }
    if o.optimizer != "momentum" {
        // The example's default decay is the momentum recipe's; given for another optimizer,
        // it would be silently unused.
        if seen.iter().any(|f| f == "--weight-decay") && o.weight_decay > 0.0 {
            return Err(format!(
                "--weight-decay {}: it applies to the momentum optimizer, not to {}",
                o.weight_decay, o.optimizer
            ));
        }
        o.weight_decay = 0.0;
    }
    if !["cosine", "step", "constant"].contains(&o.schedule.as_str()) {
        return Err(format!(
            "--schedule: expected cosine, step or constant, found `{}`",
            o.schedule
        ));
    }
    // Before any training: a path that cannot be written would lose the run's work at the end.
    if let (Some(save), Some(plot)) = (&o.save, &o.plot)
        && (save == plot || same_file(save, plot))
    {
        return Err(format!(
            "--save and --plot name the same file, {}: the weights would overwrite the curves",
            save.display()
        ));
    }
    for (flag, path) in [("--save", &o.save), ("--plot", &o.plot)] {
        if let Some(path) = path {
            check_writable(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        }
    }
    Ok(Some(o))
}

/// Whether two paths name one file, existing or not (`x` and `./x`, through links or `..`):
/// the path resolved when it exists (a link to a file, too), else its directory resolved and
/// the same name in it.
fn same_file(a: &Path, b: &Path) -> bool {
    let resolved = |p: &Path| {
        p.canonicalize().ok().or_else(|| {
            let dir = match p.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            Some(dir.canonicalize().ok()?.join(p.file_name()?))
        })
    };
    matches!((resolved(a), resolved(b)), (Some(a), Some(b)) if a == b)
}

/// The most epochs `--epochs` accepts: far more than any run needs (the MLP reaches its best
/// in about 10), and few enough that the number of steps cannot overflow.
pub const MAX_EPOCHS: usize = 100_000;

/// What the examples' exit codes mean, printed after their `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
    0  trained, and wrote every file asked for
    1  failed while running: the data, a run that diverged or stalled at chance level (the
       best net it had, if it learned, is written to --save), or a file that could not be
       written at the end (the net is then written to a fallback path, named)
    2  a bad command line (nothing was run), including a --save or --plot path that cannot be
       written
    3  interrupted by Ctrl-C (or SIGTERM): stopped at the end of the training step, evaluated,
       reported, and the best net so far written to --save (the curves to --plot); a file
       that could not be written makes it 1
  130  aborted by a second Ctrl-C (or SIGTERM): stopped at once, nothing more written (a file
       being written keeps its old contents)
Files are written whole: to a temporary file beside the target, renamed over it when complete.
";

/// The most threads `--threads` accepts: 4 per core.
fn max_threads() -> usize {
    4 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Checks that `path` can be written, by opening it for writing (creating it, and removing it
/// again if it did not exist); an existing file is not changed.
fn check_writable(path: &Path) -> Result<(), String> {
    let existed = path.exists();
    if path.is_dir() {
        return Err("is a directory".into());
    }
    // A pipe would block the check (and the run) until something reads it.
    if existed && !path.is_file() {
        return Err("is not a regular file".into());
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("cannot be written ({e})"))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Writes with `write` to `path`, or, when that fails, to a file of the same name in the
/// system's temporary directory; the error names both.
pub fn write_or_fallback(
    what: &str,
    path: &Path,
    write: impl Fn(&Path) -> Result<(), String>,
) -> Result<(), String> {
    let Err(first) = write(path) else {
        return Ok(());
    };
    let fallback = fallback_path(path);
    match write(&fallback) {
        Ok(()) => Err(format!(
            "{first}; the {what} were written to {} instead",
            fallback.display()
        )),
        Err(second) => Err(format!(
            "{first}; writing them to {} failed too: {second}",
            fallback.display()
        )),
    }
}

/// Where [`write_or_fallback`] writes when `path` fails: a file of the same name in the
/// temporary directory, numbered (`weights-2.safetensors`) when one of that name exists, so that
/// nothing there is overwritten (an earlier run's fallback, the other output of this run).
pub fn fallback_path(path: &Path) -> PathBuf {
    let dir = std::env::temp_dir();
    let name = path.file_name().map_or_else(
        || format!("constmat-{}", std::process::id()).into(),
        |n| n.to_os_string(),
    );
    let plain = dir.join(&name);
    if !plain.exists() {
        return plain;
    }
    let name = Path::new(&name);
    let stem = name.file_stem().unwrap_or_default().to_string_lossy();
    let extension = name
        .extension()
        .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
    (2..)
        .map(|n| dir.join(format!("{stem}-{n}{extension}")))
        .find(|p| !p.exists())
        .expect("a free name among unbounded numbers")
}

/// The learning rate this example recommends for the optimizer, for hints.
fn usual_lr(o: &Options) -> f64 {
    if o.optimizer == "adam" {
        0.001
    } else {
        o.usual_lr
    }
}

/// What went wrong with a run, for [`hint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// The loss exploded or became NaN or infinite.
    Diverged,
    /// The loss stayed at chance level.
    Stalled,
}

/// `x` with at most three significant digits, as a person writes it (`0.003`, not
/// `0.0030000000000000005`).
fn short(x: f64) -> String {
    show(format!("{x:.2e}").parse::<f64>().unwrap_or(x))
}

/// A learning rate as a person reads it: `0.03`, but `1.2e-38` rather than 38 zeros.
pub fn show(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e6).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

/// The likely cause of a run that diverged or stalled, from how its learning rate compares
/// with the usual one (the usual range is a tenth of it to ten times it): honest when the
/// learning rate is not the problem.
pub fn hint(o: &Options, trouble: Trouble) -> String {
    let usual = usual_lr(o);
    let (lr, optimizer) = (show(o.lr), &o.optimizer);
    let range = format!("{} to {}", short(usual / 10.0), short(10.0 * usual));
    if o.lr >= 10.0 * usual {
        format!(
            "the learning rate {lr} is far above the usual {usual} for {optimizer}: try --lr {usual}"
        )
    } else if o.lr < usual / 10.0 {
        match trouble {
            Trouble::Stalled if o.lr <= usual / 100.0 => format!(
                "the learning rate {lr} is so small that the weights barely move: try --lr {usual}"
            ),
            Trouble::Stalled => format!(
                "the learning rate {lr} is below the usual range for {optimizer} ({range}): the \
                 weights move too slowly to leave chance level; try --lr {usual}"
            ),
            // A small rate does not make a run explode: the data is the likelier cause.
            Trouble::Diverged => format!(
                "the learning rate {lr} is below the usual range for {optimizer} ({range}), so it \
                 is an unlikely cause: check that the images and labels belong together and are \
                 not corrupt (--data)"
            ),
        }
    } else {
        format!(
            "the learning rate {lr} is in the usual range for {optimizer} ({range}): check that \
             the images and labels belong together and are not corrupt (--data)"
        )
    }
}

/// The mean loss of a net that answers 1/10 for every class: ln 10.
pub const CHANCE_LOSS: f64 = core::f64::consts::LN_10;

/// The fewest training steps after which a run still at chance level is called stalled: on a
/// few hundred images an epoch is a handful of steps, too few to judge. Measured on 640 MNIST
/// images (10 steps an epoch), the MLP leaves chance level within 10 steps at the usual rates,
/// in about 40 with SGD at a tenth of it (0.003) and 90 at a thirtieth (0.001); 500 leaves
/// room, and is still within MNIST's first epoch (937 steps).
pub const MIN_STEPS_BEFORE_STALL: usize = 500;

/// An error when an epoch's results show a run going nowhere: a mean loss that grew far past its
/// start (exploded), or one still at chance level with chance accuracy after at least
/// [`MIN_STEPS_BEFORE_STALL`] steps (`steps` is the number taken so far). `best` is the epoch
/// with the best test accuracy before this one, and that accuracy: a net that had learned and
/// then lost it collapsed, which the data cannot explain and the learning rate can.
pub fn check_progress(
    o: &Options,
    epoch: usize,
    steps: usize,
    (first_loss, train_loss, accuracy): (f64, f64, f64),
    best: Option<(usize, f64)>,
) -> Result<(), String> {
    let start = first_loss.max(CHANCE_LOSS);
    let learned = best.filter(|&(_, best)| best >= LEARNED);
    if !train_loss.is_finite() || train_loss > 10.0 * start {
        let why = match learned {
            Some((best_epoch, best)) => learned_hint(o, best_epoch, best),
            None => hint(o, Trouble::Diverged),
        };
        return Err(format!(
            "training diverged in epoch {epoch}: the mean loss grew from {first_loss:.4} (the first \
             batch) to {train_loss:.4}; {why}"
        ));
    }
    if let Some((best_epoch, best)) = learned
        && at_chance(train_loss, accuracy)
    {
        return Err(format!(
            "training collapsed in epoch {epoch}: the test accuracy fell from {:.2}% (after epoch \
             {best_epoch}) to {:.2}%, and the mean loss is back at chance level ({train_loss:.4}); \
             {}",
            100.0 * best,
            100.0 * accuracy,
            collapse_hint(o)
        ));
    }
    if steps >= MIN_STEPS_BEFORE_STALL && at_chance(train_loss, accuracy) {
        return Err(format!(
            "training is stuck at chance level after epoch {epoch} ({steps} steps): mean loss \
             {train_loss:.4} (guessing gives {CHANCE_LOSS:.4}), test accuracy {:.2}%; {}",
            100.0 * accuracy,
            hint(o, Trouble::Stalled)
        ));
    }
    Ok(())
}

/// Why a training step failed, for its error: a learning rate too small for `f32`, or a step
/// that diverged (the rate, when the net had learned by `best`, the epoch and test accuracy of
/// the best epoch so far; else as [`hint`] places it).
pub fn step_failure_hint(
    o: &Options,
    error: &StepError<f32>,
    best: Option<(usize, f64)>,
) -> String {
    match (error, best) {
        // The schedule took a tiny base rate below what f32 holds.
        (StepError::LearningRate(_), _) => format!(
            "--lr {} is too small for the {} schedule in f32: try --lr {}",
            show(o.lr),
            o.schedule,
            usual_lr(o)
        ),
        // A net that had learned: the rate, not the data (as `check_progress`).
        (_, Some((best_epoch, best))) if best >= LEARNED => learned_hint(o, best_epoch, best),
        _ => hint(o, Trouble::Diverged),
    }
}

/// The test accuracy from which a net is said to have learned: five times chance.
pub const LEARNED: f64 = 0.5;

/// The hint for a run that went wrong after its net had learned (`best`, the test accuracy of
/// epoch `best_epoch`): the data is not the cause, the learning rate is.
fn learned_hint(o: &Options, best_epoch: usize, best: f64) -> String {
    format!(
        "the net had learned (test accuracy {:.2}% after epoch {best_epoch}), so the data is not \
         the cause: {}",
        100.0 * best,
        collapse_hint(o)
    )
}

/// The hint for a net that learned and then lost it: its learning rate is too high for it,
/// whatever range the rate is in.
fn collapse_hint(o: &Options) -> String {
    let usual = usual_lr(o);
    let lr = show(o.lr);
    if o.lr > usual {
        format!(
            "the learning rate {lr} is too high for this net (the default is {usual}): try \
             --lr {usual}"
        )
    } else {
        format!(
            "the learning rate {lr} is too high for this net: try a lower one, such as --lr {}",
            short(o.lr / 3.0)
        )
    }
}

/// Whether an epoch's mean loss and accuracy are those of guessing.
fn at_chance(train_loss: f64, accuracy: f64) -> bool {
    train_loss > 0.98 * CHANCE_LOSS && accuracy < 0.2
}

/// A note for a run that ended at chance level in fewer than [`MIN_STEPS_BEFORE_STALL`] steps,
/// too few to call it stalled: its accuracy is not a verdict on the net or the data. A learning
/// rate outside the usual range is named as well.
pub fn too_short_note(o: &Options, steps: usize, train_loss: f64, accuracy: f64) -> Option<String> {
    (steps < MIN_STEPS_BEFORE_STALL && at_chance(train_loss, accuracy)).then(|| {
        let usual = usual_lr(o);
        let lr_note = if (usual / 10.0..10.0 * usual).contains(&o.lr) {
            String::new()
        } else {
            format!("; also, {}", hint(o, Trouble::Stalled))
        };
        format!(
            "the net is still at chance level after {steps} steps (mean loss {train_loss:.4}, \
             test accuracy {:.2}%): too few steps to tell a stall from a slow start; train longer \
             (--epochs) or on more images{lr_note}",
            100.0 * accuracy
        )
    })
}

/// The optimizer chosen on the command line.
pub enum AnyOptimizer<N> {
    Sgd(Sgd),
    Momentum(Momentum<f32, N>),
    Adam(Adam<f32, N>),
}

impl<N: Parameters<f32>> AnyOptimizer<N> {
    /// The optimizer `--optimizer` names (`sgd`, `adam`; anything else is momentum 0.9, with
    /// the weight decay `weight_decay`), for `net`.
    pub fn new(name: &str, weight_decay: f64, net: &N) -> Self {
        match name {
            "sgd" => Self::Sgd(Sgd::new()),
            "adam" => Self::Adam(Adam::new(net)),
            _ => Self::Momentum(Momentum::new(net, 0.9).with_weight_decay(weight_decay as f32)),
        }
    }
}

impl<N: Parameters<f32>> Optimizer<f32, N> for AnyOptimizer<N> {
    // Each of the three checks; without these two, `Trainer::step` would find an overflow only
    // after the update, with the net already non-finite.
    const CHECKS_OVERFLOW: bool = true;

    fn overflowing_tensor(&self, net: &N, gradients: &N, learning_rate: f32) -> Option<usize> {
        match self {
            AnyOptimizer::Sgd(o) => o.overflowing_tensor(net, gradients, learning_rate),
            AnyOptimizer::Momentum(o) => o.overflowing_tensor(net, gradients, learning_rate),
            AnyOptimizer::Adam(o) => o.overflowing_tensor(net, gradients, learning_rate),
        }
    }

    fn update(&mut self, net: &mut N, gradients: &N, learning_rate: f32) {
        match self {
            AnyOptimizer::Sgd(o) => o.update(net, gradients, learning_rate),
            AnyOptimizer::Momentum(o) => o.update(net, gradients, learning_rate),
            AnyOptimizer::Adam(o) => o.update(net, gradients, learning_rate),
        }
    }
}

/// The number of steps of `epochs` epochs of `batches_per_epoch` batches, or an error naming
/// both when it does not fit (`--epochs` is capped so that it fits for any data set in memory).
pub fn total_steps(batches_per_epoch: usize, epochs: usize) -> Result<usize, String> {
    batches_per_epoch.checked_mul(epochs).ok_or_else(|| {
        format!(
            "--epochs {epochs}: {epochs} epochs of {batches_per_epoch} steps are too many to count"
        )
    })
}

/// Writes the curves and the weights where `plot` and `save` say, each falling back to the
/// temporary directory if it cannot be written (see [`write_or_fallback`]). Both are attempted
/// even if the first fails (the weights are the run's work), and every failure is reported,
/// with where its file went.
pub fn write_results(
    plot: Option<&Path>,
    save: Option<&Path>,
    write_curves: impl Fn(&Path) -> Result<(), String>,
    write_weights: impl Fn(&Path) -> Result<(), String>,
) -> Result<(), String> {
    let outcomes = [
        ("curves", plot, &write_curves as &dyn Fn(&Path) -> _),
        ("weights", save, &write_weights),
    ];
    let mut failures = Vec::new();
    for (what, path, write) in outcomes {
        let Some(path) = path else { continue };
        match write_or_fallback(what, path, write) {
            Ok(()) => say!("{what} written to {}", path.display()),
            Err(e) => failures.push(e),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; and "))
    }
}

/// An example's whole `main`: the options parsed over `defaults` (`--help` prints `usage` and
/// [`EXIT_CODES`]), then [`run`]; an error goes to standard error, with the exit code that
/// [`EXIT_CODES`] gives it.
pub fn main<M: Model, const EVAL: usize>(defaults: Options, usage: &str) -> ExitCode
where
    M::Net: Train<f32, EVAL>,
{
    let options = match parse_options(defaults) {
        Ok(Some(options)) => options,
        Ok(None) => {
            say_text(&format!("{usage}\n{EXIT_CODES}"));
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    match run::<M, EVAL>(&options, &Interrupt::on_signals()) {
        Ok(Ending::Finished) => ExitCode::SUCCESS,
        Ok(Ending::Interrupted) => ExitCode::from(interrupt::INTERRUPTED),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// How a run that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every epoch was trained.
    Finished,
    /// Stopped early by `interrupt` (Ctrl-C): the best net of the run was reported and saved.
    Interrupted,
}

/// Trains `M`'s net as the options say, evaluating it on the test set in batches of `EVAL`, and
/// prints the report; the last line is `test accuracy: NN.NN%`.
///
/// `interrupt` is armed as training starts and checked after every step: once it is set, the
/// run stops there, evaluates the net, and reports and saves the best net of the run (by test
/// accuracy: the net at the stop, or an earlier epoch's), saying that it was interrupted.
pub fn run<M: Model, const EVAL: usize>(
    o: &Options,
    interrupt: &Interrupt,
) -> Result<Ending, String>
where
    M::Net: Train<f32, EVAL>,
{
    let start = Instant::now();
    #[cfg(feature = "threads")]
    constmat::kernels::use_threads(o.threads).map_err(|e| format!("--threads: {e}"))?;
    let dir = data_set::find(&M::DATA, o.data.as_deref())?;
    let data = Mnist::load(&dir).map_err(|e| e.to_string())?;
    say!(
        "{} from {}: {} training, {} test images (loaded in {:.2} s)",
        M::DATA.name,
        dir.display(),
        data.train.len(),
        data.test.len(),
        start.elapsed().as_secs_f64()
    );
    if data.train.len() < BATCH || data.test.is_empty() {
        return Err(format!(
            "need at least {BATCH} training images and one test image, found {} and {}",
            data.train.len(),
            data.test.len()
        ));
    }

    let mut rng = StdRng::seed_from_u64(o.seed);
    let mut net = M::Net::random(&mut rng);
    let mut trainer = Trainer::<f32, M::Net, BATCH>::new(&net);
    let mut optimizer = AnyOptimizer::new(&o.optimizer, o.weight_decay, &net);
    let batches_per_epoch = data.train.len() / BATCH;
    let total = total_steps(batches_per_epoch, o.epochs)?;
    let schedule = match o.schedule.as_str() {
        "constant" => Schedule::Constant,
        "step" => Schedule::StepDecay {
            every: 3 * batches_per_epoch,
            factor: 0.5,
        },
        _ => Schedule::Cosine { total, floor: 0.0 },
    };
    // From here on the run has work to keep: Ctrl-C stops it cleanly (before this line, so that
    // a test that waits for it knows the signal is caught).
    interrupt.arm()?;
    let decay = if o.weight_decay > 0.0 {
        format!(", weight decay {}", show(o.weight_decay))
    } else {
        String::new()
    };
    say!(
        "training {}, batch {BATCH}, {} epochs, {} lr {}{decay} ({} schedule), seed {}, {} thread(s)",
        M::DESCRIPTION,
        o.epochs,
        o.optimizer,
        show(o.lr),
        o.schedule,
        o.seed,
        o.threads
    );

    let mut x = zeroed_batch::<<M::Net as Layer>::In, BATCH>();
    let mut y = Matrix::<f32, BATCH, CLASSES>::zeros();
    let mut labels = [0u8; BATCH];
    let mut order: Vec<usize> = (0..data.train.len()).collect();
    let mut eval = Evaluator::<M, EVAL>::new(&net);
    let mut history = report::History::default();
    let mut step = 0;
    let mut first_loss = CHANCE_LOSS;
    let mut last = (CHANCE_LOSS, 0.0);
    // The epoch with the best test accuracy so far, and its net: what a run that goes wrong
    // later, or is interrupted, still saves.
    let mut best: Option<(usize, f64, M::Net)> = None;
    let saving_best = |best: &Option<(usize, f64, M::Net)>, error: String| {
        save_best::<M>(
            o.save.as_deref(),
            best.as_ref().map(|(e, a, n)| (*e, *a, n)),
            error,
        )
    };
    // Where an interrupt stopped the run: the epoch, and the batches of it trained.
    let mut stopped = None;

    for epoch in 1..=o.epochs {
        let epoch_start = Instant::now();
        // A fresh order every epoch; the last partial batch is left out (it changes each epoch).
        order.shuffle(&mut rng);
        let progress = progress_bar(batches_per_epoch, epoch, o.epochs);
        let mut loss_sum = 0.0_f64;
        let mut trained = 0;
        let (batches, _) = order.as_chunks::<BATCH>();
        for (b, indices) in batches.iter().enumerate() {
            for ((x, label), &index) in x.iter_mut().zip(&mut labels).zip(indices) {
                M::fill_training(&data.train, index, x, &mut rng);
                *label = data.train.label(index);
            }
            mnist::one_hot(&labels, y.as_array_mut());
            let lr = schedule.learning_rate(o.lr, step) as f32;
            let loss = trainer
                .step(&mut net, &mut optimizer, lr, &SoftmaxCrossEntropy, &x, &y)
                .map_err(|error| {
                    progress.abandon();
                    let best_so_far = best.as_ref().map(|&(e, a, _)| (e, a));
                    let why = step_failure_hint(o, &error, best_so_far);
                    saving_best(
                        &best,
                        format!(
                            "training stopped in epoch {epoch}, batch {}/{batches_per_epoch}: \
                             {error}; {why}",
                            b + 1,
                        ),
                    )
                })?;
            if step == 0 {
                first_loss = f64::from(loss);
            }
            loss_sum += f64::from(loss);
            step += 1;
            trained += 1;
            if b % 32 == 0 {
                progress.set_message(format!("loss {:.4}", loss_sum / (b + 1) as f64));
            }
            progress.inc(1);
            if interrupt.requested() {
                break;
            }
        }
        progress.finish_and_clear();
        if interrupt.requested() {
            stopped = Some((epoch, trained));
            let then = match &o.save {
                Some(path) => format!("saving the best net so far to {}", path.display()),
                None => "reporting the best net so far".into(),
            };
            say!(
                "interrupted in epoch {epoch}, after batch {trained}/{batches_per_epoch}: \
                 evaluating, then {then} (Ctrl-C again to stop at once, saving nothing)"
            );
            interrupt.hold_if_asked();
        }
        let train_seconds = epoch_start.elapsed().as_secs_f64();
        let train_loss = loss_sum / trained as f64;
        let accuracy = eval.accuracy(&net, &data.test);
        history.push(train_loss, accuracy);
        let partial = if trained < batches_per_epoch {
            format!("  (interrupted after batch {trained}/{batches_per_epoch})")
        } else {
            String::new()
        };
        say!(
            "epoch {epoch:>2}/{}  train loss {train_loss:.4}  test accuracy {:.2}%  {:>7.0} samples/s  {:.2} s{partial}",
            o.epochs,
            100.0 * accuracy,
            (trained * BATCH) as f64 / train_seconds,
            epoch_start.elapsed().as_secs_f64(),
        );
        let best_so_far = best.as_ref().map(|&(e, a, _)| (e, a));
        // An interrupted epoch is not judged: the run ends with it, and keeps its best net.
        if stopped.is_none() {
            check_progress(
                o,
                epoch,
                step,
                (first_loss, train_loss, accuracy),
                best_so_far,
            )
            .map_err(|error| saving_best(&best, error))?;
        }
        last = (train_loss, accuracy);
        if best_so_far.is_none_or(|(_, a)| accuracy > a) {
            best = Some((epoch, accuracy, net.clone()));
        }
        if stopped.is_some() {
            break;
        }
    }
    let mut interrupted_note = None;
    // The best net of the run (the interrupted epoch was evaluated), which may be an earlier
    // epoch's.
    if let Some((epoch, trained)) = stopped
        && let Some((best_epoch, best_accuracy, best_net)) = best.take()
    {
        let which = if best_epoch == epoch {
            "the net as it was stopped".to_string()
        } else {
            format!("the net of epoch {best_epoch}, the best of the run")
        };
        interrupted_note = Some(format!(
            "interrupted in epoch {epoch}/{}, after batch {trained}/{batches_per_epoch}: the \
             report is of {which} (test accuracy {:.2}%)",
            o.epochs,
            100.0 * best_accuracy,
        ));
        net = best_net;
    } else if let Some(note) = too_short_note(o, step, last.0, last.1) {
        say!("note: {note}");
    }

    let predictions = eval.predict_all(&net, &data.test);
    say!();
    say_text(&report::confusion_matrix(data.test.labels(), &predictions));
    say!();
    say_text(&report::misclassified(&data.test, &predictions, 4));
    for line in M::after_training(&net, &data.train, &data.test) {
        say!("{line}");
    }
    if let Some(note) = &interrupted_note {
        say!("{note}");
    }
    let svg = report::svg(&history);
    write_results(
        o.plot.as_deref(),
        o.save.as_deref(),
        |p| {
            constmat::io::write_atomically(p, svg.as_bytes())
                .map_err(|e| format!("cannot write the plot to {}: {e}", p.display()))
        },
        |p| M::save(&net, p),
    )?;
    say!("total time {:.2} s", start.elapsed().as_secs_f64());
    say!(
        "test accuracy: {:.2}%",
        100.0 * accuracy_of(&predictions, data.test.labels())
    );
    Ok(if interrupted_note.is_some() {
        Ending::Interrupted
    } else {
        Ending::Finished
    })
}

/// `error`, after writing to `save` (if given) the net of `best`, the epoch with the best test
/// accuracy before the run went wrong, when that net had learned: the error then says where it
/// went, so that the work done is not lost.
pub fn save_best<M: Model>(
    save: Option<&Path>,
    best: Option<(usize, f64, &M::Net)>,
    error: String,
) -> String {
    let (Some(path), Some((epoch, accuracy, net))) = (save, best) else {
        return error;
    };
    if accuracy < LEARNED {
        return error;
    }
    let what = format!(
        "the net of epoch {epoch} (test accuracy {:.2}%), the best of this run,",
        100.0 * accuracy
    );
    match write_or_fallback("weights", path, |p| M::save(net, p)) {
        Ok(()) => format!("{error}\n{what} was written to {}", path.display()),
        Err(e) => format!("{error}\n{what}: {e}"),
    }
}

fn accuracy_of(predictions: &[u8], labels: &[u8]) -> f64 {
    let correct = predictions
        .iter()
        .zip(labels)
        .filter(|(p, l)| p == l)
        .count();
    correct as f64 / labels.len().max(1) as f64
}

fn progress_bar(len: usize, epoch: usize, epochs: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "epoch {epoch:>2}/{epochs} [{{bar:30}}] {{pos}}/{{len}} {{msg}} {{per_sec}} eta {{eta}}"
        ))
        .expect("a valid progress template")
        .progress_chars("=> "),
    );
    bar
}

/// Predictions over a whole split in batches of `EVAL` ([`Predict::predict_batch`]: the net in
/// inference, as the saved net runs; batch normalization uses its running statistics, not the
/// batch's).
struct Evaluator<M: Model, const EVAL: usize> {
    x: Box<[<M::Net as Layer>::In; EVAL]>,
    classes: Box<[usize; EVAL]>,
}

impl<M: Model, const EVAL: usize> Evaluator<M, EVAL> {
    fn new(_net: &M::Net) -> Self {
        Self {
            x: zeroed_batch(),
            classes: Box::new([0; EVAL]),
        }
    }

    /// The predicted class of every image of `split`, in order.
    fn predict_all(&mut self, net: &M::Net, split: &Split) -> Vec<u8> {
        let mut predictions = Vec::with_capacity(split.len());
        for start in (0..split.len()).step_by(EVAL) {
            let real = (split.len() - start).min(EVAL);
            // A short last batch is padded by repeating its last image; the padding is ignored.
            for (k, x) in self.x.iter_mut().enumerate() {
                M::fill(split, start + k.min(real - 1), x);
            }
            net.predict_batch(&self.x, &mut self.classes);
            predictions.extend(self.classes.iter().take(real).map(|&class| class as u8));
        }
        predictions
    }

    fn accuracy(&mut self, net: &M::Net, split: &Split) -> f64 {
        let predictions = self.predict_all(net, split);
        accuracy_of(&predictions, split.labels())
    }
}
