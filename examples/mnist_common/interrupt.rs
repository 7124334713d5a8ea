//! Ctrl-C and SIGTERM during training (issue 42): the first stops the run at the end of the
//! current step, and the run then ends as a finished one does (evaluated, reported, its best
//! net written to `--save`), with exit code [`INTERRUPTED`]; a second ends the process at once,
//! with [`ABORTED`]. Shared by every training example through [`training::run`](super::training::run).
//!
//! The signals are caught only from [`Interrupt::arm`] on, which the run calls as training
//! starts: before that (loading or downloading MNIST) there is no work to keep, and Ctrl-C ends
//! the program at once as usual.
//!
//! One hidden switch, for the test of the second signal (`tests/exit_codes.rs`): with the
//! environment variable `CONSTMAT_EXAMPLES_HOLD_ON_INTERRUPT` set, the run waits (up to a
//! minute) after it has said that it stops, so that the test's second signal arrives while the
//! run still has work to lose, however slow the machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The exit code of a run stopped by a first Ctrl-C or SIGTERM, its files written.
pub const INTERRUPTED: u8 = 3;

/// The exit code of a run aborted by a second Ctrl-C or SIGTERM: nothing more is written.
/// 130 = 128 + SIGINT, what a shell reports for a program ended by Ctrl-C.
pub const ABORTED: u8 = 130;

/// The environment variable that makes a run wait after a first signal (tests only).
pub const HOLD_VARIABLE: &str = "CONSTMAT_EXAMPLES_HOLD_ON_INTERRUPT";

/// Whether the run has been asked to stop: by a signal, once [armed](Self::arm), or by
/// [`request`](Self::request).
#[derive(Debug)]
pub struct Interrupt {
    requested: Arc<AtomicBool>,
    catches_signals: bool,
    armed: AtomicBool,
}

impl Interrupt {
    /// Stopped by Ctrl-C (SIGINT) or SIGTERM, caught from [`arm`](Self::arm) on.
    pub fn on_signals() -> Self {
        Self {
            requested: Arc::new(AtomicBool::new(false)),
            catches_signals: true,
            armed: AtomicBool::new(false),
        }
    }

    /// Stopped only by [`request`](Self::request): for runs inside another program (the tests),
    /// whose signals are not the run's to take.
    #[allow(dead_code)] // for the tests that include this module
    pub fn on_request() -> Self {
        Self {
            catches_signals: false,
            ..Self::on_signals()
        }
    }

    /// Asks the run to stop at the end of its current step, as a first signal does.
    #[allow(dead_code)] // for the tests that include this module
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
    }

    /// Whether the run has been asked to stop.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// From now on (for the rest of the process), the first SIGINT or SIGTERM asks the run to
    /// stop, and a second ends the process at once with [`ABORTED`]. Nothing for an interrupt
    /// [`on_request`](Self::on_request); arming twice is arming once.
    ///
    /// # Errors
    ///
    /// When the system refuses a signal handler.
    pub fn arm(&self) -> Result<(), String> {
        if !self.catches_signals || self.armed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        use signal_hook::consts::{SIGINT, SIGTERM};
        use signal_hook::flag;
        for signal in [SIGINT, SIGTERM] {
            // The exit first: it fires only when the flag is already set, by an earlier signal
            // (signal-hook runs a signal's actions in the order they were registered).
            flag::register_conditional_shutdown(
                signal,
                i32::from(ABORTED),
                Arc::clone(&self.requested),
            )
            .and_then(|_| flag::register(signal, Arc::clone(&self.requested)))
            .map_err(|e| format!("cannot catch Ctrl-C and SIGTERM (signal {signal}): {e}"))?;
        }
        Ok(())
    }

    /// With [`HOLD_VARIABLE`] set, waits up to a minute (a second signal ends the process
    /// meanwhile); else returns at once.
    pub fn hold_if_asked(&self) {
        if std::env::var_os(HOLD_VARIABLE).is_none() {
            return;
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
