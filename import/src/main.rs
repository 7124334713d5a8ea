//! `constmat-import MODEL.tflite --out DIR --name NAME`: writes `DIR/NAME.rs` and
//! `DIR/NAME.safetensors`, or nothing and one error (exit code 2 for a model it cannot import,
//! 1 for a file it cannot read or write).

use std::path::PathBuf;
use std::process::ExitCode;

const HELP: &str = "\
Turns a TensorFlow Lite model into a typed constmat net.

Usage: cargo run --release -p constmat-import -- MODEL.tflite --out DIR --name NAME

Writes DIR/NAME.rs (the net's type with net!, a static baked with include_net!, and
invoke(), which takes and gives the model's tensors as TensorFlow Lite lays them out) and
DIR/NAME.safetensors (its weights). Put both in your crate's src/ and declare `mod NAME;`.

Options:
  --out DIR     where the two files are written (created if need be)
  --name NAME   the module's name, a Rust identifier (default: the model's file name)
  -h, --help    this text

Exit codes:
  0  written
  1  a file could not be read or written
  2  a bad command line, or a model that cannot be imported (nothing is written)
";

struct Options {
    model: PathBuf,
    out: PathBuf,
    name: String,
}

fn parse() -> Result<Option<Options>, String> {
    let (mut model, mut out, mut name) = (None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or(format!("{what} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--name" => name = Some(value("--name")?),
            flag if flag.starts_with('-') => {
                return Err(format!("unknown option {flag} (see --help)"));
            }
            _ if model.is_none() => model = Some(PathBuf::from(arg)),
            _ => return Err(format!("one model at a time; {arg:?} is a second")),
        }
    }
    let model = model.ok_or("no model given (see --help)")?;
    let out = out.ok_or("no --out DIR given")?;
    let name = match name {
        Some(name) => name,
        None => model
            .file_stem()
            .and_then(|s| s.to_str())
            .map(|s| s.replace(['-', '.', ' '], "_").to_lowercase())
            .ok_or("no --name given, and the model's file name is not one")?,
    };
    let identifier = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !identifier {
        return Err(format!(
            "--name {name:?} is not a module name (lowercase letters, digits and _)"
        ));
    }
    Ok(Some(Options { model, out, name }))
}

fn main() -> ExitCode {
    let options = match parse() {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let bytes = match std::fs::read(&options.model) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("error: {}: {e}", options.model.display());
            return ExitCode::from(1);
        }
    };
    let file_name = options
        .model
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("model.tflite");
    let imported = match constmat_import::import(&bytes, file_name, &options.name) {
        Ok(imported) => imported,
        Err(e) => {
            eprintln!("error: {}: {e}", options.model.display());
            return ExitCode::from(2);
        }
    };
    let written = std::fs::create_dir_all(&options.out)
        .and_then(|()| {
            std::fs::write(
                options.out.join(format!("{}.safetensors", options.name)),
                &imported.weights,
            )
        })
        .and_then(|()| {
            std::fs::write(
                options.out.join(format!("{}.rs", options.name)),
                &imported.source,
            )
        });
    match written {
        Ok(()) => {
            println!(
                "wrote {0}/{1}.rs and {0}/{1}.safetensors ({2} bytes)",
                options.out.display(),
                options.name,
                imported.weights.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: writing to {}: {e}", options.out.display());
            ExitCode::from(1)
        }
    }
}
