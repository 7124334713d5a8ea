//! The x86-64 instruction sets the kernels are compiled for, found once per process (or as
//! limited by [`crate::kernels::with_instruction_set`]), and how a closure is run compiled for one.

/// The instruction sets these kernels can use, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Avx2Fma,
}

/// The best instruction set this CPU has, detected once (with `std`), or the one the build targets
/// (without `std`, where run-time detection is not available); lowered by the limits of
/// [`crate::kernels::instruction_set()`] (the process's `CONSTMAT_INSTRUCTION_SET`, this thread's
/// `with_instruction_set`).
// Inlined: the kernels' entry points ask once per call, some once per row.
#[inline]
pub(crate) fn detected_isa() -> Option<Isa> {
    // 1: none, 2: AVX2+FMA, 3: AVX-512F (the codes of `InstructionSet`).
    #[cfg(feature = "std")]
    let code = {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not yet detected.
        static DETECTED: AtomicU8 = AtomicU8::new(0);
        #[cold]
        fn detect() -> u8 {
            let code = if std::is_x86_feature_detected!("avx512f") {
                3
            } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
            {
                2
            } else {
                1
            };
            let code = code.min(crate::kernels::instruction_set::process_limit());
            DETECTED.store(code, Ordering::Relaxed);
            code
        }
        match DETECTED.load(Ordering::Relaxed) {
            0 => detect(),
            code => code,
        }
    };
    #[cfg(not(feature = "std"))]
    let code = if cfg!(target_feature = "avx512f") {
        3
    } else if cfg!(all(target_feature = "avx2", target_feature = "fma")) {
        2
    } else {
        1
    };
    match code.min(crate::kernels::instruction_set::thread_limit()) {
        3 => Some(Isa::Avx512),
        2 => Some(Isa::Avx2Fma),
        _ => None,
    }
}

/// Whether `isa` can run on this CPU (always true for what [`detected_isa`] returns; the tests
/// use it to run every instruction set the machine has).
#[cfg(all(test, feature = "std"))]
pub(crate) fn isa_available(isa: Isa) -> bool {
    match isa {
        Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
        Isa::Avx2Fma => {
            std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
        }
    }
}

/// Running a kernel on a CPU without its instruction set would be undefined behaviour, so it is
/// checked on every call (one relaxed atomic load with `std`).
pub(super) fn assert_isa(isa: Isa) {
    #[cfg(feature = "std")]
    let present = match isa {
        Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
        Isa::Avx2Fma => {
            std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
        }
    };
    #[cfg(not(feature = "std"))]
    let present = match isa {
        Isa::Avx512 => cfg!(target_feature = "avx512f"),
        Isa::Avx2Fma => cfg!(all(target_feature = "avx2", target_feature = "fma")),
    };
    assert!(present, "the CPU lacks {isa:?}");
}

/// The lanes of `isa`'s vectors of `E`.
pub(crate) const fn lanes<E>(isa: Isa) -> usize {
    let bytes = match isa {
        Isa::Avx512 => 64,
        Isa::Avx2Fma => 32,
    };
    bytes / core::mem::size_of::<E>()
}

/// Runs `f` compiled with `isa`'s instruction set (see [`crate::kernels::with_wide_vectors`]).
///
/// # Panics
///
/// When the CPU does not have `isa`.
pub(crate) fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    assert_isa(isa);
    match isa {
        // SAFETY (both): the CPU has the instruction set (asserted); `f` is safe code.
        Isa::Avx512 => unsafe { run_with_avx512(f) },
        Isa::Avx2Fma => unsafe { run_with_avx2(f) },
    }
}

/// `f()`, its code inlined here and so compiled with AVX-512F.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn run_with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f()`, its code inlined here and so compiled with AVX2 and FMA.
///
/// # Safety
///
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn run_with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
