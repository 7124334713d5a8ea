//! Which instruction set the kernels use: the CPU's best, or less when asked.
//!
//! The kernels pick, on each call, the widest instruction set the CPU has
//! ([`InstructionSet::Avx512`], else [`InstructionSet::Avx2`], else the portable loops). Two
//! switches lower that ceiling, never raise it:
//!
//! - for a whole process, the environment variable `CONSTMAT_INSTRUCTION_SET` (`portable`,
//!   `avx2` or `avx512`), read once, at the first kernel call: how one AVX-512 machine runs the
//!   test suite or a benchmark on the AVX2 path too;
//! - for the calling thread, for the duration of a closure, [`with_instruction_set`]: how
//!   [`nn::quantize`](crate::nn::quantize) calibrates on the portable loops, so that an int8 net
//!   has the same bytes whatever CPU quantized it.
//!
//! The instruction sets compute the same values up to floating-point rounding (the order of
//! the sums differs); integer kernels give the same bits on every one.

/// An instruction set the kernels can be limited to, from the plainest to the widest.
///
/// The order is the derived one: `Portable < Avx2 < Avx512`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum InstructionSet {
    /// The reference loops: plain Rust, the same sums in the same order on every target.
    Portable,
    /// AVX2 with FMA on x86-64 (and AVX2 for the int8 kernels).
    Avx2,
    /// AVX-512F on x86-64 (and AVX-512BW, with VNNI where the CPU has it, for the int8 kernels).
    Avx512,
}

impl InstructionSet {
    /// The name `CONSTMAT_INSTRUCTION_SET` takes: `portable`, `avx2` or `avx512`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::Avx2 => "avx2",
            Self::Avx512 => "avx512",
        }
    }

    /// The instruction set called `name` (as [`InstructionSet::name`] spells it, in any case).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Portable, Self::Avx2, Self::Avx512]
            .into_iter()
            .find(|set| set.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The code the detection functions store: 1 portable, 2 AVX2, 3 AVX-512.
    const fn code(self) -> u8 {
        match self {
            Self::Portable => 1,
            Self::Avx2 => 2,
            Self::Avx512 => 3,
        }
    }
}

impl core::fmt::Display for InstructionSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of the environment variable that limits the kernels of a whole process.
pub const INSTRUCTION_SET_VARIABLE: &str = "CONSTMAT_INSTRUCTION_SET";

/// The instruction set the kernels use on this thread now: the CPU's best, lowered by
/// `CONSTMAT_INSTRUCTION_SET` and by any [`with_instruction_set`] this call is inside.
///
/// ```
/// use constmat::kernels::{self, InstructionSet};
///
/// let best = kernels::instruction_set();
/// kernels::with_instruction_set(InstructionSet::Portable, || {
///     assert_eq!(kernels::instruction_set(), InstructionSet::Portable);
/// });
/// assert_eq!(kernels::instruction_set(), best);
/// ```
#[must_use]
pub fn instruction_set() -> InstructionSet {
    #[cfg(target_arch = "x86_64")]
    {
        match super::x86::detected_isa() {
            Some(super::x86::Isa::Avx512) => InstructionSet::Avx512,
            Some(super::x86::Isa::Avx2Fma) => InstructionSet::Avx2,
            None => InstructionSet::Portable,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        InstructionSet::Portable
    }
}

/// Runs `f` with this thread's kernels limited to `at_most` (or less, if the CPU or an outer
/// limit has less), then restores the limit it had, also when `f` panics.
///
/// Other threads are not affected. Without `std` there are no threads to tell apart and the limit
/// holds for the whole program while `f` runs.
///
/// ```
/// use constmat::kernels::{self, InstructionSet};
///
/// let a = [[1.0_f32, 2.0], [3.0, 4.0]];
/// let mut portable = [[0.0; 2]; 2];
/// kernels::with_instruction_set(InstructionSet::Portable, || {
///     kernels::matmul_into(&a, &a, &mut portable)
/// });
/// let mut best = [[0.0; 2]; 2];
/// kernels::matmul_into(&a, &a, &mut best);
/// assert_eq!(portable, best); // small integers: exact on every path
/// ```
pub fn with_instruction_set<R>(at_most: InstructionSet, f: impl FnOnce() -> R) -> R {
    struct Restore(u8);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_thread_limit(self.0);
        }
    }
    let outer = thread_limit();
    let _restore = Restore(outer);
    set_thread_limit(outer.min(at_most.code()));
    f()
}

#[cfg(feature = "std")]
std::thread_local! {
    /// This thread's limit as a code of [`InstructionSet::code`]; `u8::MAX`: none.
    static THREAD_LIMIT: core::cell::Cell<u8> = const { core::cell::Cell::new(u8::MAX) };
}

/// Without `std`: one limit for the program (see [`with_instruction_set`]).
#[cfg(not(feature = "std"))]
static PROGRAM_LIMIT: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(u8::MAX);

/// The limit [`with_instruction_set`] set on this thread, as a code of
/// [`InstructionSet::code`] (`u8::MAX` when none is set). Read on every kernel call: one
/// thread-local load.
#[inline]
pub(crate) fn thread_limit() -> u8 {
    #[cfg(feature = "std")]
    {
        THREAD_LIMIT.with(core::cell::Cell::get)
    }
    #[cfg(not(feature = "std"))]
    {
        PROGRAM_LIMIT.load(core::sync::atomic::Ordering::Relaxed)
    }
}

fn set_thread_limit(code: u8) {
    #[cfg(feature = "std")]
    THREAD_LIMIT.with(|limit| limit.set(code));
    #[cfg(not(feature = "std"))]
    PROGRAM_LIMIT.store(code, core::sync::atomic::Ordering::Relaxed);
}

/// The process's limit from `CONSTMAT_INSTRUCTION_SET`, as a code of [`InstructionSet::code`]
/// (`u8::MAX` when the variable is unset). Called once, when the CPU is first detected. A value
/// that names no instruction set is reported on standard error, once, and ignored.
#[cfg(feature = "std")]
pub(crate) fn process_limit() -> u8 {
    let Some(value) = std::env::var_os(INSTRUCTION_SET_VARIABLE) else {
        return u8::MAX;
    };
    match value.to_str().and_then(InstructionSet::from_name) {
        Some(set) => set.code(),
        None => {
            std::eprintln!(
                "constmat: {INSTRUCTION_SET_VARIABLE} is {value:?}, which names no instruction \
                 set (expected portable, avx2 or avx512); the kernels use the CPU's best"
            );
            u8::MAX
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_any_case() {
        for set in [
            InstructionSet::Portable,
            InstructionSet::Avx2,
            InstructionSet::Avx512,
        ] {
            assert_eq!(InstructionSet::from_name(set.name()), Some(set));
            assert_eq!(
                InstructionSet::from_name(&set.name().to_ascii_uppercase()),
                Some(set)
            );
            assert_eq!(std::format!("{set}"), set.name());
        }
        assert_eq!(InstructionSet::from_name("sse2"), None);
        assert_eq!(InstructionSet::from_name(""), None);
    }

    #[test]
    fn limits_nest_lower_only_and_are_restored_after_a_panic() {
        let best = instruction_set();
        with_instruction_set(InstructionSet::Avx2, || {
            let two = instruction_set();
            assert!(two <= InstructionSet::Avx2 && two <= best);
            // An inner limit above the outer one does not raise it.
            with_instruction_set(InstructionSet::Avx512, || {
                assert_eq!(instruction_set(), two);
            });
            with_instruction_set(InstructionSet::Portable, || {
                assert_eq!(instruction_set(), InstructionSet::Portable);
            });
            assert_eq!(instruction_set(), two);
        });
        let caught = std::panic::catch_unwind(|| {
            with_instruction_set(InstructionSet::Portable, || panic!("inside"));
        });
        assert!(caught.is_err());
        assert_eq!(instruction_set(), best);
    }

    #[test]
    fn other_threads_keep_their_own_limit() {
        let best = instruction_set();
        with_instruction_set(InstructionSet::Portable, || {
            let other = std::thread::spawn(instruction_set).join().unwrap();
            assert_eq!(other, best);
        });
    }
}
