//! Keeps the catalogue `docs/shape-errors.md` in sync with the compile-fail cases in
//! `tests/ui/fail`: each case is named in it and shown with its code (`.rs`) and its exact message
//! (`.stderr`), and every case it names exists.
//!
//! Both sides are files in the repository, so this compares on every compiler. After the
//! snapshots change, `CONSTMAT_BLESS_DOC=1 cargo test --test shape_errors_doc` copies each case's
//! code and message into the code blocks that follow its name in the catalogue.

use std::fs;
use std::path::{Path, PathBuf};

const DOC: &str = "docs/shape-errors.md";
const FAIL_DIR: &str = "tests/ui/fail";

#[test]
fn catalogue_matches_the_snapshots() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc_path = root.join(DOC);
    let mut doc = read(&doc_path);
    let cases = fail_cases(&root.join(FAIL_DIR));
    assert!(!cases.is_empty(), "no compile-fail cases in {FAIL_DIR}");
    let bless = std::env::var_os("CONSTMAT_BLESS_DOC").is_some();

    let mut problems = Vec::new();
    for case in &cases {
        let name = file_name(case);
        let snapshot = case.with_extension("stderr");
        let mention = format!("`{FAIL_DIR}/{name}`");
        let Some(at) = doc.find(&mention) else {
            problems.push(format!("{name} is not mentioned (as {mention})"));
            continue;
        };
        for (lang, file) in [("rust", case), ("text", &snapshot)] {
            let body = read(file);
            if bless {
                if let Err(err) = replace_block_after(&mut doc, at, lang, &body) {
                    problems.push(format!("{name}: {err}"));
                }
            } else if !doc.contains(&format!("```{lang}\n{body}```\n")) {
                problems.push(format!(
                    "the contents of {} do not appear verbatim in a ```{lang} block",
                    file_name(file)
                ));
            }
        }
    }

    for named in named_cases(&doc) {
        if !root.join(FAIL_DIR).join(&named).exists() {
            problems.push(format!("it names {FAIL_DIR}/{named}, which does not exist"));
        }
    }

    if bless && problems.is_empty() {
        fs::write(&doc_path, &doc).expect("writing the catalogue");
        return;
    }
    assert!(
        problems.is_empty(),
        "{DOC} is out of sync with {FAIL_DIR}:\n  - {}\n\n\
         To regenerate: on the compiler named in tests/ui/RUSTC_VERSION, run \
         `TRYBUILD=overwrite cargo test --test ui` to rewrite the snapshots, then \
         `CONSTMAT_BLESS_DOC=1 cargo test --test shape_errors_doc` to copy each case's code and \
         message into the blocks after its name in {DOC}. A new case needs a section naming it \
         (`{FAIL_DIR}/<case>.rs`) followed by an empty ```rust and ```text block.",
        problems.join("\n  - "),
    );
}

/// The messages stay readable: no line over 300 characters (a net's whole type, spelled out by
/// the compiler, runs to 400-900), and an error raised by `net!` points at the layer that is
/// wrong, in the case's own file, not at the whole `net![...]` block.
#[test]
fn messages_are_short_and_point_at_the_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    for case in fail_cases(&root.join(FAIL_DIR)) {
        let name = file_name(&case).to_owned();
        let stderr = read(&case.with_extension("stderr"));
        for (number, line) in stderr.lines().enumerate() {
            let length = line.chars().count();
            if length > 300 {
                problems.push(format!(
                    "{name}: line {} has {length} characters",
                    number + 1
                ));
            }
        }
        // One diagnostic per block: from an `error` line to the next.
        let mut blocks: Vec<Vec<&str>> = Vec::new();
        for line in stderr.lines() {
            if line.starts_with("error") || blocks.is_empty() {
                blocks.push(Vec::new());
            }
            blocks.last_mut().expect("pushed above").push(line);
        }
        for block in blocks {
            let text = block.join("\n");
            if !text.contains("the macro `constmat::net`") {
                continue;
            }
            let at = block
                .iter()
                .find_map(|line| line.trim_start().strip_prefix("--> "));
            let in_case = at.is_some_and(|at| at.starts_with(&format!("{FAIL_DIR}/{name}:")));
            if !in_case || text.contains("|  ___") {
                problems.push(format!(
                    "{name}: an error of `net!` is not at one layer of the case: {}",
                    block[0]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `tests/ui/fail/*.rs`, sorted.
fn fail_cases(dir: &Path) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("listing {}: {err}", dir.display()))
        .map(|entry| entry.expect("reading a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    cases.sort();
    cases
}

/// The file names of the cases the catalogue mentions as `` `tests/ui/fail/<name>.rs` ``.
fn named_cases(doc: &str) -> Vec<String> {
    let prefix = format!("`{FAIL_DIR}/");
    doc.match_indices(&prefix)
        .filter_map(|(at, _)| {
            let rest = &doc[at + prefix.len()..];
            rest.find('`').map(|end| rest[..end].to_owned())
        })
        .filter(|name| !name.contains('*'))
        .collect()
}

/// Replaces the body of the first ```` ```lang ```` block between byte `from` and the next
/// `## ` heading.
fn replace_block_after(
    doc: &mut String,
    from: usize,
    lang: &str,
    body: &str,
) -> Result<(), String> {
    let open = format!("```{lang}\n");
    let section_end = doc[from..].find("\n## ").map_or(doc.len(), |i| from + i);
    let start = doc[from..section_end]
        .find(&open)
        .map(|i| from + i + open.len())
        .ok_or_else(|| format!("no ```{lang} block after its mention in its section"))?;
    let end = doc[start..]
        .find("```\n")
        .map(|i| start + i)
        .ok_or_else(|| format!("the ```{lang} block after its mention is not closed"))?;
    doc.replace_range(start..end, body);
    Ok(())
}

fn file_name(path: &Path) -> &str {
    path.file_name()
        .and_then(|name| name.to_str())
        .expect("a UTF-8 file name")
}

/// A file's text with `\r\n` line ends made `\n`, as trybuild compares snapshots.
fn read(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
        .replace("\r\n", "\n")
}
