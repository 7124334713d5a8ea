//! The thread pool the matrix products split across, with the `threads` feature.

/// Lets the matrix products use `threads` threads (the `threads` feature), from now on.
///
/// Large products are then split by rows of the output across a pool of that many threads;
/// small ones (under about 16 million multiply-adds) stay on the calling thread, where a split
/// would cost more than it saves. Each output element is computed by one thread in the same
/// order whatever the split, so results are identical for any number of threads.
///
/// It can be called at any time, again and again: each call replaces the pool (products already
/// running finish on the old one). Until the first call, products use rayon's global pool.
///
/// # Errors
///
/// When the operating system cannot start the threads (rayon's error says why); the previous
/// configuration then stays.
///
/// ```
/// use constmat::Matrix;
///
/// let a = Matrix::<f32, 512, 512>::filled(1.0);
/// let _ = &a * &a; // uses rayon's global pool
/// constmat::kernels::use_threads(2).expect("two threads");
/// let two = &a * &a;
/// constmat::kernels::use_threads(1).expect("one thread"); // later calls work too
/// assert_eq!(&a * &a, two);
/// ```
#[cfg(feature = "threads")]
pub fn use_threads(threads: usize) -> Result<(), rayon::ThreadPoolBuildError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    *POOL
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::sync::Arc::new(pool));
    Ok(())
}

/// The pool set by [`use_threads`], if any.
#[cfg(feature = "threads")]
pub(super) static POOL: std::sync::RwLock<Option<std::sync::Arc<rayon::ThreadPool>>> =
    std::sync::RwLock::new(None);

/// Runs `f` in the pool set by [`use_threads`] (so that rayon's calls in it use that pool), or
/// where it is when none was set.
#[cfg(feature = "threads")]
pub(crate) fn in_configured_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pool = POOL
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}
