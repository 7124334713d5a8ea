//! What the importer's tests share: where the MLPerf Tiny models are.

use std::path::PathBuf;

/// The bytes of the MLPerf Tiny model `file`, from `$MLPERF_TINY_DIR`, else
/// `../shared/mlperf-tiny` beside the repository. `.ci/run` sets the variable; without it and
/// without the directory the tests say so and pass (a fresh clone elsewhere has no models),
/// and with it a missing model fails them.
pub fn model(file: &str) -> Option<Vec<u8>> {
    let dir = match std::env::var_os("MLPERF_TINY_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/mlperf-tiny");
            if !dir.is_dir() {
                eprintln!(
                    "skipped: no MLPerf Tiny models at {} (set MLPERF_TINY_DIR)",
                    dir.display()
                );
                return None;
            }
            dir
        }
    };
    let path = dir.join(file);
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}
