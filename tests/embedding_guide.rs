//! `docs/embedding.md` as a new user reads it: each program of the guide, copied into a fresh
//! crate with the `[dependencies]` line the guide gives for it, builds.
//!
//! (The guide's code blocks also run as doc tests, from `src/lib.rs`; those use this crate's
//! own features, so they cannot tell whether the documented feature list is enough.)
#![cfg(feature = "std")]

use std::path::Path;
use std::process::Command;

/// The fenced blocks of `text` whose info string starts with `lang`, in order.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&format!("```{lang}")) {
        let body_start = start + rest[start..].find('\n').unwrap() + 1;
        let end = body_start + rest[body_start..].find("```").unwrap();
        found.push(&rest[body_start..end]);
        rest = &rest[end + 3..];
    }
    found
}

/// A program of the guide as a user copies it: the lines rustdoc hides (`# `) left out, a `main`
/// added if the snippet has none. Returns its path in the crate, which a first line
/// `// src/bin/name.rs` names (`src/main.rs` otherwise), and its code.
fn program(block: &str) -> (String, String) {
    let mut code: String = block
        .lines()
        .filter(|line| !line.starts_with("# "))
        .collect::<Vec<_>>()
        .join("\n");
    if !code.contains("fn main") {
        code.push_str("\nfn main() {}\n");
    }
    let path = block
        .lines()
        .next()
        .and_then(|first| first.strip_prefix("// "))
        .filter(|path| path.starts_with("src/") && path.ends_with(".rs"))
        .unwrap_or("src/main.rs");
    (path.to_string(), code)
}

/// The guide's `[dependencies]` block whose features are exactly `features`, with the crate's
/// path in place of its version.
fn dependencies(guide: &str, features: &str, root: &Path) -> String {
    let block = blocks(guide, "toml")
        .into_iter()
        .find(|b| b.contains(&format!("features = {features} }}")))
        .unwrap_or_else(|| panic!("no toml block of the guide has features = {features}"));
    block.replace(
        "version = \"0.1\"",
        &format!("path = {:?}", root.display().to_string()),
    )
}

/// Builds the program `code` at `path` of a fresh crate named `name` with `dependencies` (all
/// such crates share one target directory, so constmat is built once per feature set); panics
/// with the compiler's output if it does not build.
fn builds(name: &str, dependencies: &str, (path, code): &(String, String)) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let source = krate.join(path);
    std::fs::create_dir_all(source.parent().unwrap()).unwrap();
    std::fs::create_dir_all(krate.join("models")).unwrap();
    for model in [
        "mnist-784-128-64-10.safetensors",
        "mnist-cnn-lenet5.safetensors",
        "mnist-cnn-lenet5-int8.safetensors",
    ] {
        std::fs::copy(
            root.join("models").join(model),
            krate.join("models").join(model),
        )
        .unwrap();
    }
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = {name:?}\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
             {dependencies}\n[workspace]\n"
        ),
    )
    .unwrap();
    // The same dependency versions as this build, so that `--offline` finds them.
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    std::fs::write(&source, code).unwrap();
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "check",
            "--offline",
            "--quiet",
            "--color",
            "never",
            "--all-targets",
        ])
        .current_dir(&krate)
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("guide-target"),
        )
        .output()
        .expect("running cargo");
    assert!(
        output.status.success(),
        "{name}: the guide's program does not build with its [dependencies]:\n{dependencies}\n{path}:\n{code}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_guides_programs_build_with_the_guides_dependencies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/embedding.md")).unwrap();
    let programs = blocks(&guide, "rust");
    // Every Rust block of the guide is a whole program a user can copy, with the
    // `[dependencies]` line the guide gives for what it uses.
    assert!(programs.len() >= 6, "{} programs", programs.len());
    for (k, block) in programs.iter().enumerate() {
        let features = if block.contains("safetensors::") {
            r#"["std", "safetensors"]"#
        } else {
            r#"["std"]"#
        };
        builds(
            &format!("guide-program-{k}"),
            &dependencies(&guide, features, root),
            &program(block),
        );
    }
}
