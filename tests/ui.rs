//! Compile-fail cases for every shape rule (`tests/ui/fail`), with the compiler's message pinned in
//! a `.stderr` snapshot, and the valid side of the rules (`tests/ui/pass`).
//!
//! Compiler messages change between releases, so the snapshots are compared only on the rustc
//! named in `tests/ui/RUSTC_VERSION`, on x86-64. On any other compiler or target every fail case
//! must still fail to compile; only its message goes unchecked. The same holds with the `threads` feature: the
//! compiler's suggestions list items of every crate in the build, and rayon's brings its own
//! (`cargo test --all-features` would otherwise fail on a message the default build pins).
//!
//! To regenerate the snapshots (on the pinned compiler, or after updating `RUSTC_VERSION`), run
//! `TRYBUILD=overwrite cargo test --test ui`, review them, and copy them into the catalogue with
//! `CONSTMAT_BLESS_DOC=1 cargo test --test shape_errors_doc`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

/// Names the scratch directory of snapshot-less fail cases, for the subprocess that checks them.
const UNPINNED_DIR_VAR: &str = "CONSTMAT_UI_UNPINNED_DIR";

#[test]
fn ui() {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pinned = fs::read_to_string(manifest_dir.join("tests/ui/RUSTC_VERSION"))
        .expect("tests/ui/RUSTC_VERSION holds the `rustc --version` the snapshots were made with");
    let pinned = pinned.trim();
    let current = rustc_version();
    // The snapshots hold for the default features' dependencies (see the module's comment), on
    // x86-64 (where a prediction's scratch exists: `predict_scratch_too_short.rs`).
    let comparable = !cfg!(feature = "threads") && cfg!(target_arch = "x86_64");

    if current == pinned && comparable {
        // Pass and compile-fail cases share one `TestCases`: only then does trybuild run
        // `cargo build` rather than `cargo check`, and the `const { assert!(..) }` rules are
        // evaluated only when code is generated.
        let cases = trybuild::TestCases::new();
        cases.pass("tests/ui/pass/*.rs");
        cases.compile_fail("tests/ui/fail/*.rs");
        return;
    }

    // Written to stderr directly rather than with `eprintln!`, which the test harness captures
    // and shows only when the test fails.
    let _ = writeln!(
        io::stderr(),
        "note: the shape-error snapshots in tests/ui/fail are compared only on `{pinned}` \
         on x86-64 without the `threads` feature; this is `{current}`{}{}, so the cases are \
         only checked to fail to compile",
        if cfg!(feature = "threads") {
            " with `threads`"
        } else {
            ""
        },
        if cfg!(target_arch = "x86_64") {
            ""
        } else {
            " off x86-64"
        }
    );
    let scratch = copy_fail_cases_without_snapshots(manifest_dir);
    // trybuild decides whether to compare or write snapshots from the `TRYBUILD` variable, which
    // this process cannot change safely; a child process gets it from the start. In `overwrite`
    // mode a missing snapshot is written instead of compared, but a case that compiles still fails.
    let output = Command::new(env::current_exe().expect("the path of this test binary"))
        .args(["unpinned_compile_fail", "--exact"])
        .env("TRYBUILD", "overwrite")
        .env(UNPINNED_DIR_VAR, &scratch)
        .output()
        .expect("re-running this test binary");
    assert!(
        output.status.success(),
        "a shape-error case compiled, or a pass case failed, on `{current}`:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

/// The second half of [`ui`] on an unpinned compiler; does nothing unless [`ui`] started it.
#[test]
fn unpinned_compile_fail() {
    let Some(scratch) = env::var_os(UNPINNED_DIR_VAR) else {
        return;
    };
    // With a pass case, as in `ui`, so that the `const { assert!(..) }` cases are built.
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail(Path::new(&scratch).join("*.rs"));
}

/// `$RUSTC --version` (or `rustc --version`): the compiler cargo uses to build the cases.
fn rustc_version() -> String {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .arg("--version")
        .output()
        .unwrap_or_else(|err| panic!("running `{} --version`: {err}", rustc.display()));
    assert!(
        output.status.success(),
        "`{} --version` failed",
        rustc.display()
    );
    String::from_utf8(output.stdout)
        .expect("`rustc --version` prints UTF-8")
        .trim()
        .to_owned()
}

/// Copies `tests/ui/fail/*.rs`, without their snapshots, into a fresh directory under cargo's
/// scratch space for integration tests, so that trybuild's overwrite mode writes there only.
fn copy_fail_cases_without_snapshots(manifest_dir: &Path) -> PathBuf {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-unpinned");
    if scratch.exists() {
        fs::remove_dir_all(&scratch).expect("removing the previous scratch copies");
    }
    fs::create_dir_all(&scratch).expect("creating the scratch directory");
    let fail_dir = manifest_dir.join("tests/ui/fail");
    for entry in fs::read_dir(&fail_dir).expect("listing tests/ui/fail") {
        let path = entry.expect("reading tests/ui/fail").path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            let name = path.file_name().expect("a file name");
            fs::copy(&path, scratch.join(name)).expect("copying a fail case");
        }
    }
    scratch
}
