//! Imports the MLPerf Tiny models for `--imported` (`src/imported.rs`): each `.tflite` file
//! becomes, through `constmat_import::import`, a module `OUT_DIR/KEY.rs` and its weights
//! `OUT_DIR/KEY.safetensors`, as a user of `constmat-import` would write them beside their code.
//! `OUT_DIR/imported.rs`, which `src/imported.rs` includes, declares those modules (by absolute
//! `#[path]`, so that each keeps its inner attributes and finds its weights beside it) and lists
//! every model with its compiled form, or why there is none: a missing model or a failed import
//! does not fail the build, the run says so. Without any model, the cfg `no_imported_model` is
//! set.
//!
//! The models come from `$MLPERF_TINY_DIR`, else `../../../shared/mlperf-tiny` beside this
//! crate's manifest (`/work/shared/mlperf-tiny` on the project's machine).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The models: module name, file, label in the table.
const MODELS: [(&str, &str, &str); 3] = [
    ("dscnn_int8", "kws_ref_model.tflite", "DS-CNN int8"),
    (
        "resnet8_int8",
        "pretrainedResnet_quant.tflite",
        "ResNet-8 int8",
    ),
    ("resnet8_f32", "pretrainedResnet.tflite", "ResNet-8 f32"),
];

const DIR_VARIABLE: &str = "MLPERF_TINY_DIR";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    // Set when no model was imported: what runs a module is then unused (`src/imported.rs`).
    println!("cargo::rustc-check-cfg=cfg(no_imported_model)");
    println!("cargo::rerun-if-env-changed={DIR_VARIABLE}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = match std::env::var_os(DIR_VARIABLE) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"))
            .join("../../../shared/mlperf-tiny"),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    // The directory when it exists (a model added to it reruns this script), and each model
    // found. A path that does not exist would rerun the script, and rebuild the harness, at
    // every build: without the directory, only the variable and this script are watched.
    if dir.is_dir() {
        println!("cargo::rerun-if-changed={}", dir.display());
    }

    let mut modules = String::new();
    let mut imported = 0;
    let mut entries = String::new();
    for (key, file, label) in MODELS {
        let path = dir.join(file);
        let compiled = match import(&path, file, key, &out) {
            Ok(module) => {
                imported += 1;
                println!("cargo::rerun-if-changed={}", path.display());
                writeln!(modules, "#[path = {:?}]\npub mod {key};", module.display()).unwrap();
                format!(
                    "Ok(super::module({key}::invoke, {key}::PARAMETER_BYTES, {key}::WORKING_BYTES))"
                )
            }
            Err(Skip::Missing(why)) => {
                println!("cargo::warning=--imported will skip {label}: {why}");
                format!("Err(super::Skip::Missing({why:?}))")
            }
            Err(Skip::Failed(why)) => {
                println!("cargo::rerun-if-changed={}", path.display());
                println!("cargo::warning=--imported will skip {label}: {why}");
                format!("Err(super::Skip::Failed({why:?}))")
            }
        };
        writeln!(
            entries,
            "        super::Model {{\n            key: {key:?},\n            label: {label:?},\n            \
             path: {:?},\n            compiled: {compiled},\n        }},",
            path.display().to_string()
        )
        .unwrap();
    }
    let generated = format!(
        "// Written by build.rs: the MLPerf Tiny models imported by constmat-import.\n\n\
         {modules}\n\
         /// Every model, with its module's `invoke` or why the build has none.\n\
         pub fn models() -> Vec<super::Model> {{\n    vec![\n{entries}    ]\n}}\n"
    );
    write(&out.join("imported.rs"), generated.as_bytes());
    if imported == 0 {
        println!("cargo::rustc-cfg=no_imported_model");
    }
}

/// Why a model has no module.
enum Skip {
    /// Its file is not there.
    Missing(String),
    /// It is there, and could not be read or imported.
    Failed(String),
}

/// Imports the model at `path` as the module `key`: writes `KEY.rs` and `KEY.safetensors` to
/// `out` and returns the module's path.
fn import(path: &Path, file: &str, key: &str, out: &Path) -> Result<PathBuf, Skip> {
    if !path.is_file() {
        return Err(Skip::Missing(format!(
            "{} not found (set {DIR_VARIABLE} to the directory of the MLPerf Tiny models)",
            path.display()
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| Skip::Failed(format!("{}: {e}", path.display())))?;
    let imported = constmat_import::import(&bytes, file, key)
        .map_err(|e| Skip::Failed(format!("constmat-import cannot import {file}: {e}")))?;
    let module = out.join(format!("{key}.rs"));
    write(&module, imported.source.as_bytes());
    write(&out.join(format!("{key}.safetensors")), &imported.weights);
    Ok(module)
}

/// Writes `bytes` to `path` unless it already holds them, so that an unchanged model leaves
/// the file's time alone.
fn write(path: &Path, bytes: &[u8]) {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
