//! Finding the MNIST files on disk, or downloading them (checksums verified) when they are not.
//!
//! [`mnist_dir`] is what the example calls. It looks, in order, in the `--data DIR` argument, in
//! the directory named by the `MNIST_DIR` environment variable, then in [`DEFAULT_DIR`]
//! (`data/mnist`, relative to the current directory), and returns the first of them that holds
//! all four files, each plain or gzipped (the rule of
//! [`Mnist::locate`](constmat::data::mnist::Mnist::locate)). A place the user named that was
//! passed over is named in a note on stderr ([`passed_over_note`]).
//!
//! When none does, the files missing from [`DEFAULT_DIR`] are downloaded into it (creating it),
//! even if `--data` or `MNIST_DIR` was given: a note on stderr names the places that lacked
//! files, and the error, if the download fails too, lists them. Each file is fetched as
//! `<name>.gz`, with `curl`, from the first mirror that serves it with the right SHA-256: [`MIRRORS`], or the
//! base URLs listed (separated by commas or spaces) in the `MNIST_MIRROR` environment variable,
//! e.g. `MNIST_MIRROR=http://localhost:8000/`. A file is written under a temporary name and
//! renamed only once its checksum matches, so a file under its final name is always complete.
//!
//! Without network every mirror fails within seconds (connect and resolve timeouts of 10 s, a
//! stalled transfer after 30 s), and [`FetchError`] says which files are needed, where they were
//! looked for and how to supply them; so it does when `curl` is not installed.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use constmat::data::mnist::FILES;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sha2::{Digest, Sha256};

/// A file to download: fetched as `<name>.gz`, whose SHA-256 must be `sha256`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteFile {
    /// The base name, without `.gz`; on disk the file may be `name` or `name.gz`.
    pub name: &'static str,
    /// The SHA-256 of `name.gz`, in lowercase hexadecimal.
    pub sha256: &'static str,
}

/// The four MNIST files (in the order of [`FILES`]) with the SHA-256 of their official `.gz`.
pub const MNIST_FILES: [RemoteFile; 4] = [
    RemoteFile {
        name: FILES[0],
        sha256: "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    },
    RemoteFile {
        name: FILES[1],
        sha256: "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    },
    RemoteFile {
        name: FILES[2],
        sha256: "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    },
    RemoteFile {
        name: FILES[3],
        sha256: "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    },
];

/// Public mirrors of the official `.gz` files, tried in order: the one torchvision uses, then
/// the one TensorFlow used.
pub const MIRRORS: [&str; 2] = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
];

/// Where the files are looked for last, and downloaded to.
pub const DEFAULT_DIR: &str = "data/mnist";

/// The largest download accepted: the biggest MNIST file is 9.9 MB, so more is a wrong file.
const MAX_BYTES: u64 = 64 << 20;

/// The directory holding MNIST, for the example: [`find_or_fetch`] with `--data` (`data_arg`),
/// `$MNIST_DIR` (unset when empty), [`DEFAULT_DIR`], and the mirrors of `$MNIST_MIRROR` (when set
/// and not blank) or [`MIRRORS`].
///
/// # Errors
///
/// As [`find_or_fetch`].
pub fn mnist_dir(data_arg: Option<&Path>) -> Result<PathBuf, Box<FetchError>> {
    let env_dir = std::env::var_os("MNIST_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from);
    let mirror_var = std::env::var("MNIST_MIRROR").unwrap_or_default();
    let mut mirrors: Vec<&str> = mirror_var
        .split([',', ' '])
        .filter(|url| !url.is_empty())
        .collect();
    if mirrors.is_empty() {
        mirrors = MIRRORS.to_vec();
    }
    find_or_fetch(
        data_arg,
        env_dir.as_deref(),
        Path::new(DEFAULT_DIR),
        &mirrors,
        &MNIST_FILES,
    )
}

/// Returns the first of `explicit`, `env_dir` and `default_dir` that holds every file of `files`
/// (each as `name` or `name.gz`); if none does, downloads the files missing from `default_dir`
/// into it and returns it.
///
/// Each missing file is requested as `<mirror><name>.gz` from each of `mirrors` in turn (a `/` is
/// added to a mirror not ending with one) until one serves it with the expected SHA-256. A
/// mirror on the loopback interface (`127.*`, `localhost`, `[::1]`) is reached directly, never
/// through a proxy set in the environment.
///
/// # Errors
///
/// A [`FetchError`] (boxed, as it is large) if `default_dir` cannot be created or written, or
/// if some file could be downloaded from no mirror (its HTTP status was an error, the connection
/// failed, or the checksum did not match). Files downloaded before the failure are kept: they
/// are verified.
pub fn find_or_fetch(
    explicit: Option<&Path>,
    env_dir: Option<&Path>,
    default_dir: &Path,
    mirrors: &[&str],
    files: &[RemoteFile],
) -> Result<PathBuf, Box<FetchError>> {
    let candidates = [
        (Source::DataArg, explicit),
        (Source::EnvVar, env_dir),
        (Source::Default, Some(default_dir)),
    ];
    let mut looked = Vec::new();
    for (source, dir) in candidates {
        let state = dir.map_or(DirState::NotGiven, |dir| inspect(dir, files));
        if let (Some(dir), DirState::Complete) = (dir, &state) {
            if let Some(note) = passed_over_note(&looked, dir) {
                eprintln!("{note}");
            }
            return Ok(dir.to_path_buf());
        }
        looked.push(Place {
            source,
            dir: dir.map(Path::to_path_buf),
            state,
        });
    }

    let error = |failure| {
        Box::new(FetchError {
            needed: files.iter().map(|file| file.name).collect(),
            looked: looked.clone(),
            target: default_dir.to_path_buf(),
            mirrors: mirrors.iter().map(|&url| url.to_owned()).collect(),
            failure,
        })
    };
    eprintln!(
        "MNIST not found in {}; downloading it into {}",
        List(&looked),
        default_dir.display()
    );
    fs::create_dir_all(default_dir).map_err(|source| {
        error(Failure::Io {
            path: default_dir.to_path_buf(),
            source,
        })
    })?;
    for file in files.iter().filter(|file| !present(default_dir, file.name)) {
        download(mirrors, file, default_dir).map_err(error)?;
    }
    Ok(default_dir.to_path_buf())
}

/// The note printed when MNIST is found in `found` after places the user named (`--data`,
/// `$MNIST_DIR`) that lack it, so that a mistyped `--data` is not passed over in silence; `None`
/// when nothing the user named was passed over.
pub fn passed_over_note(looked: &[Place], found: &Path) -> Option<String> {
    let named: Vec<&Place> = looked
        .iter()
        .filter(|place| place.state != DirState::NotGiven && place.source != Source::Default)
        .collect();
    (!named.is_empty()).then(|| {
        format!(
            "note: MNIST is not in {}; using {}",
            List(&named),
            found.display()
        )
    })
}

/// Whether `dir` holds `name` or `name.gz`. A path whose existence cannot be decided counts as
/// present, so that opening it reports why (as [`Mnist::locate`] does).
///
/// [`Mnist::locate`]: constmat::data::mnist::Mnist::locate
fn present(dir: &Path, name: &str) -> bool {
    [dir.join(name), dir.join(format!("{name}.gz"))]
        .iter()
        .any(|path| !matches!(path.try_exists(), Ok(false)))
}

/// What `dir` holds of `files`.
fn inspect(dir: &Path, files: &[RemoteFile]) -> DirState {
    if !dir.exists() {
        return DirState::Missing;
    }
    if !dir.is_dir() {
        return DirState::NotADirectory;
    }
    let lacking: Vec<&'static str> = files
        .iter()
        .filter(|file| !present(dir, file.name))
        .map(|file| file.name)
        .collect();
    match lacking.len() {
        0 => DirState::Complete,
        n if n == files.len() => DirState::NoFiles,
        _ => DirState::Lacks(lacking),
    }
}

/// Downloads `file` into `dir` from the first mirror that works.
fn download(mirrors: &[&str], file: &RemoteFile, dir: &Path) -> Result<(), Failure> {
    let gz_name = format!("{}.gz", file.name);
    let final_path = dir.join(&gz_name);
    // Unique per process, hidden, and never the final name: a crash leaves no half file there.
    let temp_path = dir.join(format!(".{gz_name}.{}.part", std::process::id()));
    let mut attempts = Vec::new();
    for mirror in mirrors {
        let sep = if mirror.ends_with('/') { "" } else { "/" };
        let url = format!("{mirror}{sep}{gz_name}");
        eprintln!("downloading {url}");
        let result = fetch_to(&url, &temp_path, file.sha256);
        if result.is_err() {
            // Best effort: the file may not even have been created.
            let _ = fs::remove_file(&temp_path);
        }
        match result {
            Ok(()) => {
                return fs::rename(&temp_path, &final_path).map_err(|source| Failure::Io {
                    path: final_path,
                    source,
                });
            }
            Err(Step::Remote(reason)) => {
                eprintln!("  failed: {reason}");
                attempts.push(Attempt { url, reason });
            }
            Err(Step::Local(source)) => {
                return Err(Failure::Io {
                    path: temp_path,
                    source,
                });
            }
            Err(Step::NoCurl(source)) => return Err(Failure::Curl { source }),
        }
    }
    Err(Failure::AllMirrorsFailed {
        file: gz_name,
        attempts,
    })
}

/// How one attempt ended badly: the mirror's fault (try the next) or ours (stop).
enum Step {
    Remote(AttemptError),
    /// The temporary file could not be written or read back.
    Local(io::Error),
    /// curl could not be run.
    NoCurl(io::Error),
}

/// Downloads `url` into `path` (created or truncated) with curl, with a progress bar, then
/// checks its SHA-256.
fn fetch_to(url: &str, path: &Path, expected: &'static str) -> Result<(), Step> {
    let mut child = curl_command(url, path).spawn().map_err(Step::NoCurl)?;
    let bar = progress_bar(url);
    // curl writes the file; the bar follows its size until curl exits.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if let Ok(meta) = fs::metadata(path) {
                    bar.set_position(meta.len());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(source) => {
                let _ = child.kill();
                bar.finish_and_clear();
                return Err(Step::NoCurl(source));
            }
        }
    };
    bar.finish_and_clear();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    // What curl printed: the HTTP status (`--write-out`) and its error message. Unreadable
    // output leaves them empty, and the exit code still decides.
    if let Some(out) = child.stdout.as_mut() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(err) = child.stderr.as_mut() {
        let _ = err.read_to_string(&mut stderr);
    }
    if !status.success() {
        return Err(attempt_error(status.code(), &stdout, &stderr));
    }
    let found = sha256_of(path).map_err(Step::Local)?;
    if found.eq_ignore_ascii_case(expected) {
        Ok(())
    } else {
        Err(Step::Remote(AttemptError::Checksum { expected, found }))
    }
}

/// The curl command that fetches `url` into `path`: fails on an HTTP error status, follows
/// redirects, gives up quickly without network, and reaches loopback mirrors directly.
///
/// curl rather than an HTTP crate: a Rust HTTPS client (rustls and ring) took longer to build
/// than constmat itself, and delayed every first `cargo run` for a download most users make once;
/// curl ships with macOS, Windows 10 and later, and the usual Linux images (rustup's installer
/// uses it).
fn curl_command(url: &str, path: &Path) -> Command {
    let host = url.split_once("://").map_or(url, |(_, rest)| rest);
    let loopback = ["127.", "localhost", "[::1]"]
        .iter()
        .any(|prefix| host.starts_with(prefix));
    let mut curl = Command::new("curl");
    curl.args([
        "--fail",
        "--location",
        "--silent",
        "--show-error",
        // Resolving and connecting; then a transfer stalled for 30 s; then the whole call.
        "--connect-timeout",
        "10",
        "--speed-limit",
        "1",
        "--speed-time",
        "30",
        "--max-time",
        "600",
        "--max-filesize",
        &MAX_BYTES.to_string(),
        // The checksums are of the bytes as stored: no transparent decompression.
        "--header",
        "Accept-Encoding: identity",
        "--write-out",
        "%{http_code}",
        "--output",
    ]);
    curl.arg(path);
    if loopback {
        curl.args(["--noproxy", "*"]);
    }
    curl.arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    curl
}

/// Why curl failed, from its exit code (see `man curl`, "EXIT CODES"), the HTTP status it
/// printed, and its message: the mirror's fault, or the temporary file's (23, a write error).
fn attempt_error(code: Option<i32>, stdout: &str, stderr: &str) -> Step {
    let message = stderr.trim().to_owned();
    let message = if message.is_empty() {
        format!("curl exited with {code:?}")
    } else {
        message
    };
    Step::Remote(match code {
        // --fail: the server answered with an error status, which --write-out printed.
        Some(22) => match stdout.trim().parse::<u16>() {
            Ok(status) if status >= 400 => AttemptError::Status(status),
            _ => AttemptError::Transport(message),
        },
        Some(23) => return Step::Local(io::Error::other(message)),
        // A partial file, a failure while receiving, or more than --max-filesize.
        Some(18 | 56 | 63) => AttemptError::Read(message),
        _ => AttemptError::Transport(message),
    })
}

/// The SHA-256 of the file at `path`, in lowercase hexadecimal.
fn sha256_of(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0_u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// A spinner with the bytes so far on stderr (drawn only on a terminal).
fn progress_bar(url: &str) -> ProgressBar {
    let name = url.rsplit('/').next().unwrap_or(url).to_owned();
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg} {spinner} {bytes} {bytes_per_sec}") {
        bar.set_style(style);
    }
    bar.set_message(name);
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// Why MNIST could be neither found nor downloaded. Its `Display` is the full message for the
/// user: the files needed, where they were looked for, what failed, and how to supply them.
#[derive(Debug)]
pub struct FetchError {
    /// The base names of the files needed.
    pub needed: Vec<&'static str>,
    /// The places looked in, in order, with what each held.
    pub looked: Vec<Place>,
    /// The directory the files were being downloaded into.
    pub target: PathBuf,
    /// The mirrors tried, in order.
    pub mirrors: Vec<String>,
    /// What failed.
    pub failure: Failure,
}

/// What stopped the download.
#[derive(Debug)]
pub enum Failure {
    /// A local file or directory could not be created or written.
    Io {
        /// The path that could not be created or written.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// curl, which downloads the files, could not be run (it is not installed, say).
    Curl {
        /// Why.
        source: io::Error,
    },
    /// No mirror served this file correctly.
    AllMirrorsFailed {
        /// The name requested, `<name>.gz`.
        file: String,
        /// One per mirror, in order.
        attempts: Vec<Attempt>,
    },
}

/// One failed request to one mirror.
#[derive(Debug)]
pub struct Attempt {
    /// The URL requested.
    pub url: String,
    /// Why it failed.
    pub reason: AttemptError,
}

/// Why a request to a mirror failed.
#[derive(Debug)]
pub enum AttemptError {
    /// The server answered with this HTTP error status (404, say).
    Status(u16),
    /// No answer: name resolution, connection, TLS or timeout (curl's message).
    Transport(String),
    /// The transfer broke off, or exceeded the size limit, while reading the body (curl's
    /// message).
    Read(String),
    /// The whole file arrived but its SHA-256 is not the expected one.
    Checksum {
        /// The expected SHA-256, hexadecimal.
        expected: &'static str,
        /// The SHA-256 of what arrived, lowercase hexadecimal.
        found: String,
    },
}

/// Which of the three places a directory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The `--data DIR` argument.
    DataArg,
    /// The `MNIST_DIR` environment variable.
    EnvVar,
    /// The default directory, where downloads go.
    Default,
}

/// A place looked in, and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// Where the directory came from.
    pub source: Source,
    /// The directory; `None` if the argument was not given or the variable not set.
    pub dir: Option<PathBuf>,
    /// What it held.
    pub state: DirState,
}

/// What a place held of the needed files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirState {
    /// No directory: `--data` not given, or `MNIST_DIR` not set.
    NotGiven,
    /// The directory does not exist.
    Missing,
    /// The path exists but is not a directory.
    NotADirectory,
    /// The directory holds none of the files.
    NoFiles,
    /// The directory lacks these files (base names).
    Lacks(Vec<&'static str>),
    /// The directory holds every file.
    Complete,
}

impl fmt::Display for AttemptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(code) => write!(f, "HTTP status {code}"),
            Self::Transport(e) => write!(f, "{e}"),
            Self::Read(e) => write!(f, "transfer interrupted: {e}"),
            Self::Checksum { expected, found } => write!(
                f,
                "checksum mismatch: expected sha256 {expected}, found {found}"
            ),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.source, &self.dir) {
            (Source::DataArg, None) => return f.write_str("--data (not given)"),
            (Source::EnvVar, None) => return f.write_str("$MNIST_DIR (not set)"),
            (Source::DataArg, Some(dir)) => write!(f, "--data {}", dir.display())?,
            (Source::EnvVar, Some(dir)) => write!(f, "$MNIST_DIR={}", dir.display())?,
            (Source::Default, Some(dir)) => write!(f, "{}", dir.display())?,
            (Source::Default, None) => f.write_str("default directory")?,
        }
        match &self.state {
            DirState::NotGiven => f.write_str(" (not given)"),
            DirState::Missing => f.write_str(" (missing)"),
            DirState::NotADirectory => f.write_str(" (not a directory)"),
            DirState::NoFiles => f.write_str(" (none of the files)"),
            DirState::Lacks(names) => write!(f, " (lacks {})", List(names)),
            DirState::Complete => f.write_str(" (complete)"),
        }
    }
}

/// Displays items separated by `", "`.
struct List<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{item}")?;
        }
        Ok(())
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = self.target.display();
        writeln!(f, "MNIST not found, and downloading it failed.")?;
        writeln!(f, "Needed files (gzipped or not): {}", List(&self.needed))?;
        writeln!(f, "Looked in: {}", List(&self.looked))?;
        match &self.failure {
            Failure::Io { path, source } => {
                writeln!(f, "Could not write {}: {source}", path.display())?;
            }
            Failure::Curl { source } => {
                writeln!(f, "Could not run curl, which downloads them: {source}")?;
            }
            Failure::AllMirrorsFailed { file, attempts } if attempts.is_empty() => {
                writeln!(f, "No mirror to download {file} from.")?;
            }
            Failure::AllMirrorsFailed { attempts, .. } => {
                for Attempt { url, reason } in attempts {
                    writeln!(f, "Download from {url} failed: {reason}")?;
                }
            }
        }
        f.write_str("To supply them: download the .gz files")?;
        if !self.mirrors.is_empty() {
            write!(f, " from one of {}", List(&self.mirrors))?;
        }
        write!(
            f,
            " into {target}/, or pass --data DIR, or set MNIST_DIR=DIR."
        )
    }
}

impl std::error::Error for FetchError {}
