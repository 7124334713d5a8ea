//! The command line of `examples/embed`: which baked net classifies, and the image.

use std::path::PathBuf;

/// `--help`'s text.
pub const USAGE: &str = "\
Classifies a handwritten digit with the MNIST model baked into this program.

Usage: cargo run --release --example embed -- [--net NAME] IMAGE

IMAGE is a PGM (P2 or P5) or PNG file of any size: one digit, white on black or dark on light.
--net NAME (or --net=NAME, before or after IMAGE) chooses the baked net: the 784-128-64-10 MLP
(mlp, the default) or LeNet-5 (cnn), in f32 or in int8 (mlp-int8, cnn-int8: integer arithmetic
only). -h or --help prints this.
";

/// Which of the baked nets classifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The 784-128-64-10 MLP in f32.
    Mlp,
    /// LeNet-5 in f32.
    Cnn,
    /// The MLP in int8.
    MlpInt8,
    /// LeNet-5 in int8.
    CnnInt8,
}

/// The net and the image named on the command line (options before or after the image), or
/// `None` for `--help`; the error says what is wrong with the command line.
pub fn parse_args(args: &[String]) -> Result<Option<(Which, PathBuf)>, String> {
    let mut which = None;
    let mut path = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let net = match arg.split_once('=') {
            Some(("--net", value)) => Some(value),
            _ if arg == "--net" => Some(
                args.next()
                    .map(String::as_str)
                    .ok_or("--net needs a value: mlp, cnn, mlp-int8 or cnn-int8")?,
            ),
            _ => None,
        };
        if let Some(net) = net {
            let chosen = match net {
                "mlp" => Which::Mlp,
                "cnn" => Which::Cnn,
                "mlp-int8" => Which::MlpInt8,
                "cnn-int8" => Which::CnnInt8,
                other => {
                    return Err(format!(
                        "--net: expected mlp, cnn, mlp-int8 or cnn-int8, found `{other}`"
                    ));
                }
            };
            if which.replace(chosen).is_some() {
                return Err("--net given twice".into());
            }
            continue;
        }
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            option if option.starts_with('-') => {
                return Err(format!("unknown option `{option}`"));
            }
            image => {
                if let Some(first) = path.replace(PathBuf::from(image)) {
                    return Err(format!(
                        "expected one image file, found `{}` and `{image}`",
                        first.display()
                    ));
                }
            }
        }
    }
    let path = path.ok_or("expected an image file")?;
    Ok(Some((which.unwrap_or(Which::Mlp), path)))
}
