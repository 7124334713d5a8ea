//! Which data set of MNIST's four IDX files an example trains on, and where it looks for it:
//! MNIST (downloaded when no directory has it, [`super::fetch`]) or Fashion-MNIST (installed by
//! the Debian package `dataset-fashion-mnist`, never downloaded).

use std::path::{Path, PathBuf};

use constmat::data::mnist::{FILES, Mnist};

/// A data set in MNIST's format: the same four files (`train-images-idx3-ubyte[.gz]`, ...), 28 x
/// 28 images of 10 classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSet {
    /// Its name in messages: `MNIST`, `Fashion-MNIST`.
    pub name: &'static str,
    /// The environment variable naming its directory: `MNIST_DIR`.
    pub env_var: &'static str,
    /// Where it is looked for after `--data` and the variable.
    pub default_dir: &'static str,
    /// How to get it when no directory has it: `None` for MNIST, which is downloaded.
    pub install: Option<&'static str>,
}

/// MNIST's digits.
pub const MNIST: DataSet = DataSet {
    name: "MNIST",
    env_var: "MNIST_DIR",
    default_dir: super::fetch::DEFAULT_DIR,
    install: None,
};

/// Zalando's Fashion-MNIST: clothes in MNIST's format, from the Debian package.
#[allow(dead_code)] // the examples on MNIST include this module too
pub const FASHION_MNIST: DataSet = DataSet {
    name: "Fashion-MNIST",
    env_var: "FASHION_MNIST_DIR",
    default_dir: "/usr/share/datasets/fashion-mnist",
    install: Some("sudo apt-get install dataset-fashion-mnist"),
};

/// The directory holding `set`: the first of `--data` (`data_arg`), `$env_var` (unset when
/// empty) and the default directory that holds the four files, each plain or gzipped; MNIST is
/// downloaded when none does ([`super::fetch::mnist_dir`]).
///
/// # Errors
///
/// A message naming the files, the places looked in and how to supply them.
pub fn find(set: &DataSet, data_arg: Option<&Path>) -> Result<PathBuf, String> {
    let Some(install) = set.install else {
        return super::fetch::mnist_dir(data_arg).map_err(|e| e.to_string());
    };
    let env_dir = std::env::var_os(set.env_var)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from);
    let candidates = [
        ("--data", data_arg.map(Path::to_path_buf)),
        (set.env_var, env_dir),
        ("default", Some(PathBuf::from(set.default_dir))),
    ];
    let mut looked = Vec::new();
    for (source, dir) in candidates {
        match dir {
            None => looked.push(format!("{source} (not given)")),
            Some(dir) => match Mnist::locate(&dir) {
                Ok(_) => return Ok(dir),
                Err(e) => looked.push(format!("{}: {e}", dir.display())),
            },
        }
    }
    Err(format!(
        "{} not found.\nNeeded files (gzipped or not): {}\nLooked in:\n  {}\nTo supply them: \
         `{install}` (which puts them in {}), or pass --data DIR, or set {}=DIR.",
        set.name,
        FILES.join(", "),
        looked.join("\n  "),
        set.default_dir,
        set.env_var,
    ))
}
