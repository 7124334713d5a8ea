//! The example's MNIST finder and downloader (`examples/mnist_common/fetch.rs`), against HTTP
//! servers on 127.0.0.1 serving small synthetic MNIST files built here: download and checksum,
//! fallback between mirrors, the message when every mirror fails, and files found on disk without
//! any request. Nothing here touches the real network.
#![cfg(feature = "data")]

#[allow(dead_code)]
#[path = "../mnist_common/fetch.rs"]
mod fetch;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use constmat::data::mnist::{self, Mnist};
use fetch::{AttemptError, DirState, Failure, RemoteFile, Source};
use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

/// A minimal HTTP/1.1 server on 127.0.0.1: `GET /<name>` answers the bytes stored under `name`,
/// anything else 404. It records the requested names, and stops when dropped.
struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `files`; for the names in `truncated`, announces the full length but sends only
    /// half of the bytes, then closes the connection.
    fn start(files: HashMap<String, Vec<u8>>, truncated: HashSet<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (requests, stop) = (Arc::clone(&requests), Arc::clone(&stop));
            move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        // A broken connection only fails that request, which the test sees.
                        let _ = serve(&stream, &files, &truncated, &requests);
                    }
                }
            }
        });
        Self {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// The base URL, ending with `/`.
    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The names requested so far, in order.
    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking `accept` so that the thread sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one request on `stream`, then closes it.
fn serve(
    stream: &TcpStream,
    files: &HashMap<String, Vec<u8>>,
    truncated: &HashSet<String>,
    requests: &Mutex<Vec<String>>,
) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    let name = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .trim_start_matches('/')
        .to_owned();
    requests.lock().unwrap().push(name.clone());
    let mut out = stream;
    match files.get(&name) {
        Some(body) => {
            let sent = if truncated.contains(&name) {
                &body[..body.len() / 2]
            } else {
                &body[..]
            };
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/x-gzip\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            out.write_all(sent)?;
        }
        None => {
            let body = b"not found";
            write!(
                out,
                "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            out.write_all(body)?;
        }
    }
    out.flush()
}

/// Four small valid gzipped MNIST files (3 training images, 2 test images), by `<name>.gz`.
fn synthetic_mnist() -> HashMap<String, Vec<u8>> {
    fn images(count: u8) -> Vec<u8> {
        let mut bytes = vec![0, 0, 8, 3, 0, 0, 0, count, 0, 0, 0, 28, 0, 0, 0, 28];
        for i in 0..count {
            bytes.extend([i * 40; mnist::PIXELS]);
        }
        bytes
    }
    fn labels(count: u8) -> Vec<u8> {
        let mut bytes = vec![0, 0, 8, 1, 0, 0, 0, count];
        bytes.extend((0..count).map(|i| (i * 3) % 10));
        bytes
    }
    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }
    let contents = [images(3), labels(3), images(2), labels(2)];
    mnist::FILES
        .iter()
        .zip(contents)
        .map(|(name, bytes)| (format!("{name}.gz"), gzip(&bytes)))
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The files to fetch, with the checksums of `served` (leaked: `RemoteFile` holds `'static`).
fn remote_files(served: &HashMap<String, Vec<u8>>) -> Vec<RemoteFile> {
    mnist::FILES
        .iter()
        .map(|&name| RemoteFile {
            name,
            sha256: sha256_hex(&served[&format!("{name}.gz")]).leak(),
        })
        .collect()
}

/// A fresh, empty directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mnist_download")
        .join(test);
    if dir.exists() {
        fs::remove_dir_all(&dir).unwrap();
    }
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The names of the entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A URL on which nothing listens: connections are refused at once.
fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/")
}

fn all_gz_names() -> Vec<String> {
    let mut names: Vec<String> = mnist::FILES.iter().map(|n| format!("{n}.gz")).collect();
    names.sort();
    names
}

#[test]
fn mnist_files_are_the_loader_files_with_sha256_checksums() {
    let names: Vec<&str> = fetch::MNIST_FILES.iter().map(|f| f.name).collect();
    assert_eq!(names, mnist::FILES);
    for file in fetch::MNIST_FILES {
        assert_eq!(file.sha256.len(), 64, "{}", file.name);
        assert!(
            file.sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{}",
            file.name
        );
    }
    assert!(fetch::MIRRORS.iter().all(|url| url.starts_with("https://")));
}

#[test]
fn downloads_missing_files_verifies_them_and_the_loader_reads_them() {
    let served = synthetic_mnist();
    let files = remote_files(&served);
    let server = Server::start(served.clone(), HashSet::new());
    let default = scratch("download").join("data").join("mnist");

    let dir = fetch::find_or_fetch(None, None, &default, &[&server.url()], &files).unwrap();

    assert_eq!(dir, default);
    // Only the four files under their final names: no temporary file left behind.
    assert_eq!(entries(&dir), all_gz_names());
    for (name, bytes) in &served {
        assert_eq!(&fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
    let mut requested = server.requests();
    requested.sort();
    assert_eq!(requested, all_gz_names());
    let mnist = Mnist::load(&dir).unwrap();
    assert_eq!((mnist.train.len(), mnist.test.len()), (3, 2));
    assert_eq!(mnist.train.labels(), &[0, 3, 6]);
}

#[test]
fn a_wrong_checksum_is_rejected_and_leaves_no_file() {
    let served = synthetic_mnist();
    let mut files = remote_files(&served);
    let bad = "0000000000000000000000000000000000000000000000000000000000000000";
    files[1].sha256 = bad;
    let found = sha256_hex(&served["train-labels-idx1-ubyte.gz"]);
    let server = Server::start(served, HashSet::new());
    let default = scratch("checksum");

    let err = fetch::find_or_fetch(None, None, &default, &[&server.url()], &files).unwrap_err();

    let Failure::AllMirrorsFailed { file, attempts } = &err.failure else {
        panic!("expected AllMirrorsFailed, got {err:?}");
    };
    assert_eq!(file, "train-labels-idx1-ubyte.gz");
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].url,
        format!("{}train-labels-idx1-ubyte.gz", server.url())
    );
    match &attempts[0].reason {
        AttemptError::Checksum {
            expected,
            found: got,
        } => assert_eq!((*expected, got), (bad, &found)),
        other => panic!("expected a checksum mismatch, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "Download from {}train-labels-idx1-ubyte.gz failed: \
             checksum mismatch: expected sha256 {bad}, found {found}\n",
            server.url()
        )),
        "{message}"
    );
    // The first file, verified, is kept; the rejected one is nowhere, not even half-written.
    assert_eq!(entries(&default), ["train-images-idx3-ubyte.gz"]);
}

#[test]
fn a_404_on_the_first_mirror_falls_back_to_the_second() {
    let served = synthetic_mnist();
    let files = remote_files(&served);
    let empty = Server::start(HashMap::new(), HashSet::new());
    let full = Server::start(served.clone(), HashSet::new());
    let default = scratch("fallback_404");

    let mirrors = [empty.url(), full.url()];
    let mirrors: Vec<&str> = mirrors.iter().map(String::as_str).collect();
    let dir = fetch::find_or_fetch(None, None, &default, &mirrors, &files).unwrap();

    assert_eq!(entries(&dir), all_gz_names());
    for (name, bytes) in &served {
        assert_eq!(&fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
    // Every file was asked of the first mirror, then fetched from the second.
    let wanted: Vec<String> = mnist::FILES.iter().map(|n| format!("{n}.gz")).collect();
    assert_eq!(empty.requests(), wanted);
    assert_eq!(full.requests(), wanted);
}

#[test]
fn a_transfer_cut_short_falls_back_to_the_next_mirror() {
    let served = synthetic_mnist();
    let files = remote_files(&served);
    let cut: HashSet<String> = served.keys().cloned().collect();
    let broken = Server::start(served.clone(), cut);
    let full = Server::start(served.clone(), HashSet::new());
    let default = scratch("truncated");

    let mirrors = [broken.url(), full.url()];
    let mirrors: Vec<&str> = mirrors.iter().map(String::as_str).collect();
    let dir = fetch::find_or_fetch(None, None, &default, &mirrors, &files).unwrap();

    assert_eq!(entries(&dir), all_gz_names());
    for (name, bytes) in &served {
        assert_eq!(&fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
    assert_eq!(broken.requests().len(), 4);

    // With no second mirror, the cut is the reported reason.
    let alone = scratch("truncated_alone");
    let err = fetch::find_or_fetch(None, None, &alone, &[&broken.url()], &files).unwrap_err();
    let Failure::AllMirrorsFailed { attempts, .. } = &err.failure else {
        panic!("expected AllMirrorsFailed, got {err:?}");
    };
    assert!(
        matches!(attempts[0].reason, AttemptError::Read(_)),
        "{:?}",
        attempts[0].reason
    );
    assert_eq!(entries(&alone), Vec::<String>::new());
}

#[test]
fn when_every_mirror_fails_the_message_says_what_is_needed_where_and_how() {
    let files = remote_files(&synthetic_mnist());
    let empty = Server::start(HashMap::new(), HashSet::new());
    let closed = closed_port_url();
    let base = scratch("all_fail");
    let explicit = base.join("given");
    let default = base.join("data").join("mnist");

    let mirrors = [closed.as_str(), &empty.url()];
    let start = Instant::now();
    let err = fetch::find_or_fetch(Some(&explicit), None, &default, &mirrors, &files).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );

    assert_eq!(
        err.looked,
        [
            fetch::Place {
                source: Source::DataArg,
                dir: Some(explicit.clone()),
                state: DirState::Missing,
            },
            fetch::Place {
                source: Source::EnvVar,
                dir: None,
                state: DirState::NotGiven,
            },
            fetch::Place {
                source: Source::Default,
                dir: Some(default.clone()),
                state: DirState::Missing,
            },
        ]
    );
    let Failure::AllMirrorsFailed { attempts, .. } = &err.failure else {
        panic!("expected AllMirrorsFailed, got {err:?}");
    };
    assert!(
        matches!(attempts[0].reason, AttemptError::Transport(_)),
        "{:?}",
        attempts[0].reason
    );
    assert!(matches!(attempts[1].reason, AttemptError::Status(404)));

    let message = err.to_string();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 6, "{message}");
    assert_eq!(lines[0], "MNIST not found, and downloading it failed.");
    assert_eq!(
        lines[1],
        "Needed files (gzipped or not): train-images-idx3-ubyte, train-labels-idx1-ubyte, \
         t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte"
    );
    assert_eq!(
        lines[2],
        format!(
            "Looked in: --data {} (missing), $MNIST_DIR (not set), {} (missing)",
            explicit.display(),
            default.display()
        )
    );
    let prefix = format!("Download from {closed}train-images-idx3-ubyte.gz failed: ");
    assert!(lines[3].starts_with(&prefix), "{message}");
    assert!(lines[3].len() > prefix.len(), "{message}");
    assert_eq!(
        lines[4],
        format!(
            "Download from {}train-images-idx3-ubyte.gz failed: HTTP status 404",
            empty.url()
        )
    );
    assert_eq!(
        lines[5],
        format!(
            "To supply them: download the .gz files from one of {closed}, {} into {}/, \
             or pass --data DIR, or set MNIST_DIR=DIR.",
            empty.url(),
            default.display()
        )
    );
    // Nothing half-downloaded is left behind.
    assert_eq!(entries(&default), Vec::<String>::new());
}

#[test]
fn an_unwritable_download_directory_is_reported() {
    let files = remote_files(&synthetic_mnist());
    let base = scratch("unwritable");
    let default = base.join("not-a-dir");
    fs::write(&default, b"a file").unwrap();
    let empty = Server::start(HashMap::new(), HashSet::new());

    let err = fetch::find_or_fetch(None, None, &default, &[&empty.url()], &files).unwrap_err();

    assert!(
        matches!(&err.failure, Failure::Io { path, .. } if *path == default),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("{} (not a directory)", default.display())),
        "{message}"
    );
    assert!(
        message.contains(&format!("Could not write {}: ", default.display())),
        "{message}"
    );
    assert_eq!(empty.requests(), Vec::<String>::new());
}

/// Writes the synthetic files into `dir`: those of `gzipped` as `<name>.gz`, the others
/// decompressed under their base name.
fn install(dir: &Path, names: &[&str], gzipped: bool) {
    let served = synthetic_mnist();
    fs::create_dir_all(dir).unwrap();
    for name in names {
        let gz = &served[&format!("{name}.gz")];
        if gzipped {
            fs::write(dir.join(format!("{name}.gz")), gz).unwrap();
        } else {
            let mut plain = Vec::new();
            io::copy(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).unwrap();
            fs::write(dir.join(name), plain).unwrap();
        }
    }
}

#[test]
fn files_on_disk_are_found_in_order_without_any_request() {
    let files = remote_files(&synthetic_mnist());
    // Any request would get a 404 (and fail the call), and would be recorded.
    let server = Server::start(HashMap::new(), HashSet::new());
    let mirrors = [server.url()];
    let mirrors: Vec<&str> = mirrors.iter().map(String::as_str).collect();
    let base = scratch("on_disk");
    let explicit = base.join("explicit");
    let env = base.join("env");
    let partial = base.join("partial");
    let default = base.join("default");
    // Mixed: two gzipped, two plain.
    install(&explicit, &mnist::FILES[..2], true);
    install(&explicit, &mnist::FILES[2..], false);
    install(&env, &mnist::FILES, true);
    install(&partial, &mnist::FILES[..3], true);
    let find = |explicit: Option<&Path>, env: Option<&Path>| {
        fetch::find_or_fetch(explicit, env, &default, &mirrors, &files).unwrap()
    };

    assert_eq!(find(Some(&explicit), Some(&env)), explicit);
    assert_eq!(find(None, Some(&env)), env);
    assert_eq!(find(Some(&partial), Some(&env)), env);
    assert_eq!(find(Some(&base.join("nowhere")), Some(&env)), env);
    assert_eq!(Mnist::load(&explicit).unwrap().train.len(), 3);

    assert_eq!(server.requests(), Vec::<String>::new());
    assert!(!default.exists(), "nothing was downloaded");

    install(&default, &mnist::FILES, false);
    assert_eq!(find(Some(&partial), None), default);
    assert_eq!(server.requests(), Vec::<String>::new());
}

#[test]
fn a_named_place_passed_over_is_named_in_a_note() {
    let place = |source, dir: Option<&str>, state| fetch::Place {
        source,
        dir: dir.map(PathBuf::from),
        state,
    };
    let found = Path::new("/data/env");
    // A mistyped --data, then $MNIST_DIR, which has the files.
    let looked = [place(
        Source::DataArg,
        Some("/data/typo"),
        DirState::Missing,
    )];
    assert_eq!(
        fetch::passed_over_note(&looked, found).as_deref(),
        Some("note: MNIST is not in --data /data/typo (missing); using /data/env")
    );
    // Both named places lacking the files, the default directory used: both named.
    let looked = [
        place(
            Source::DataArg,
            Some("/data/partial"),
            DirState::Lacks(vec![mnist::FILES[3]]),
        ),
        place(Source::EnvVar, Some("/data/empty"), DirState::NoFiles),
    ];
    assert_eq!(
        fetch::passed_over_note(&looked, Path::new("data/mnist")).as_deref(),
        Some(
            "note: MNIST is not in --data /data/partial (lacks t10k-labels-idx1-ubyte), \
             $MNIST_DIR=/data/empty (none of the files); using data/mnist"
        )
    );
    // Nothing named, or the first place named holds the files: no note.
    let looked = [
        place(Source::DataArg, None, DirState::NotGiven),
        place(Source::EnvVar, None, DirState::NotGiven),
    ];
    assert_eq!(fetch::passed_over_note(&looked, found), None);
    assert_eq!(fetch::passed_over_note(&[], found), None);
}

#[test]
fn only_the_files_missing_from_the_default_directory_are_downloaded() {
    let served = synthetic_mnist();
    let files = remote_files(&served);
    let server = Server::start(served, HashSet::new());
    let base = scratch("partial_default");
    let explicit = base.join("explicit");
    let default = base.join("default");
    install(&explicit, &mnist::FILES[..1], true);
    install(&default, &mnist::FILES[..2], false);

    let dir =
        fetch::find_or_fetch(Some(&explicit), None, &default, &[&server.url()], &files).unwrap();

    assert_eq!(dir, default);
    assert_eq!(
        server.requests(),
        ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    );
    assert_eq!(Mnist::load(&dir).unwrap().test.len(), 2);

    // How each place is described, when it lacks some files or all of them.
    let empty = base.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let closed = closed_port_url();
    let err = fetch::find_or_fetch(Some(&explicit), None, &empty, &[&closed], &files).unwrap_err();
    let looked = err.to_string().lines().nth(2).unwrap().to_owned();
    assert_eq!(
        looked,
        format!(
            "Looked in: --data {} (lacks train-labels-idx1-ubyte, t10k-images-idx3-ubyte, \
             t10k-labels-idx1-ubyte), $MNIST_DIR (not set), {} (none of the files)",
            explicit.display(),
            empty.display()
        )
    );
}

#[test]
fn without_curl_the_message_says_so_and_how_to_supply_the_files() {
    // PATH is the process's: the case runs in a child process of this test binary.
    let empty = scratch("no_curl_path");
    fs::create_dir_all(&empty).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "curl_missing_child", "--nocapture"])
        .env("PATH", &empty)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// Run by the test above with an empty `PATH`.
#[test]
#[ignore = "run by without_curl_the_message_says_so_and_how_to_supply_the_files"]
fn curl_missing_child() {
    let served = synthetic_mnist();
    let files = remote_files(&served);
    let server = Server::start(served, HashSet::new());
    let default = scratch("no_curl");

    let err = fetch::find_or_fetch(None, None, &default, &[&server.url()], &files).unwrap_err();

    assert!(matches!(&err.failure, Failure::Curl { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("Could not run curl, which downloads them: "),
        "{message}"
    );
    assert!(
        message.ends_with("or pass --data DIR, or set MNIST_DIR=DIR."),
        "{message}"
    );
    assert_eq!(server.requests(), Vec::<String>::new());
    assert_eq!(entries(&default), Vec::<String>::new());
}
