//! Files replaced whole: a file is written under a temporary name in the directory of the one
//! it replaces, flushed to the disk, and renamed over it, so that the path holds either the old
//! complete file or the new complete file, never a fragment (issue 42: a save that failed on a
//! full disk left a truncated weights file where a good one had been).

use std::format;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Writes `bytes` to the file at `path`, replacing it whole or not at all.
///
/// The bytes go to a new file in the same directory, named `.NAME.PID-N.tmp` after the target
/// `NAME`, which is flushed to the disk (`fsync`) and then renamed over `path`. Renaming within a
/// directory is atomic, so `path` holds the old file until the new one is complete, and the new
/// one after: never a fragment, whether the write fails part-way (a full disk) or the process
/// is killed. On failure the temporary file is removed and the old file, if any, is as it was;
/// only a process killed while writing can leave a temporary file behind (the old file is still
/// intact then too).
///
/// A new file takes the permissions of the one it replaces. A `path` that is a symbolic link
/// replaces the file the link points to (the link stays a link). A `path` that exists and is
/// not a regular file (`/dev/null`, a named pipe) is written in place, as [`std::fs::write`]
/// does: there is no file there to keep whole.
///
/// ```
/// let path = std::env::temp_dir().join(format!("constmat-doc-{}.txt", std::process::id()));
/// constmat::io::write_atomically(&path, b"old")?;
/// constmat::io::write_atomically(&path, b"new")?;
/// assert_eq!(std::fs::read(&path)?, b"new");
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
///
/// The first I/O error met: the directory cannot be written (or does not exist), the disk is
/// full, flushing or renaming failed. `path` is then unchanged.
pub fn write_atomically(path: impl AsRef<Path>, bytes: &[u8]) -> io::Result<()> {
    replace_with(path.as_ref(), |file| file.write_all(bytes))
}

/// [`write_atomically`] with the writing done by `write`, given the temporary file (the tests
/// make it fail part-way).
pub(crate) fn replace_with(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let target = resolve_links(path);
    let permissions = match fs::metadata(&target) {
        // A device or a pipe: written in place, as `fs::write` would (a directory fails here
        // with the system's own error, "Is a directory").
        Ok(existing) if !existing.is_file() => {
            let mut file = File::create(&target)?;
            return write(&mut file).and_then(|()| file.flush());
        }
        Ok(existing) => Some(existing.permissions()),
        Err(_) => None,
    };
    let (temp, mut file) = create_temp(&target)?;
    let written = write(&mut file).and_then(|()| file.sync_all());
    drop(file);
    let replaced = written.and_then(|()| {
        if let Some(permissions) = permissions {
            // Best effort: some file systems (FAT) refuse to change permissions.
            let _ = fs::set_permissions(&temp, permissions);
        }
        fs::rename(&temp, &target)
    });
    if let Err(e) = replaced {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    sync_directory(&target);
    Ok(())
}

/// `path` with symbolic links followed, so that the file they point to is replaced rather than
/// the link (a link to a file not there yet: the path it names); `path` itself when it is not a
/// link.
fn resolve_links(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or_else(|_| {
            // `join` keeps an absolute link target as it is.
            fs::read_link(path).map_or_else(|_| path.into(), |to| directory_of(path).join(to))
        }),
        _ => path.into(),
    }
}

/// The directory of `path` (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Creates a new file beside `target`, under a name no other file has (`create_new`: an
/// existing file is never opened, a concurrent save never shares it).
fn create_temp(target: &Path) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let name = target
        .file_name()
        .map_or_else(|| "constmat".into(), |n| n.to_string_lossy());
    let dir = directory_of(target);
    let mut tries = 0;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            // Left by an earlier process of the same id: take the next number.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Flushes the directory entry of a rename to the disk (Unix; best effort: the file's own data
/// was flushed before the rename, so a failure here cannot leave a fragment).
fn sync_directory(target: &Path) {
    #[cfg(unix)]
    if let Ok(dir) = File::open(directory_of(target)) {
        let _ = dir.sync_all();
    }
    #[cfg(not(unix))]
    let _ = target;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::{String, ToString};
    use std::vec;
    use std::vec::Vec;

    /// A writer that accepts `left` bytes and then fails as a full disk does.
    struct FailAfter<'a> {
        file: &'a mut File,
        left: usize,
    }

    impl Write for FailAfter<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    "no space left (injected)",
                ));
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            self.file.write(&buf[..n])
        }

        fn flush(&mut self) -> io::Result<()> {
            self.file.flush()
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("constmat-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// The names in `path`'s directory, sorted.
    fn files_beside(path: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_that_fails_part_way_leaves_the_old_file_and_no_temporary_file() {
        let path = scratch("fails/net.safetensors");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"the old, complete file").unwrap();
        let new = vec![7_u8; 100_000];
        for left in [0, 1, 4096, 99_999] {
            let err =
                replace_with(&path, |file| FailAfter { file, left }.write_all(&new)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::StorageFull);
            assert_eq!(err.to_string(), "no space left (injected)");
            assert_eq!(
                fs::read(&path).unwrap(),
                b"the old, complete file",
                "after {left}"
            );
            assert_eq!(files_beside(&path), ["net.safetensors"], "after {left}");
        }
        // Without an old file: none is left either.
        fs::remove_file(&path).unwrap();
        replace_with(&path, |file| FailAfter { file, left: 10 }.write_all(&new)).unwrap_err();
        assert!(files_beside(&path).is_empty());
    }

    #[test]
    fn a_write_that_succeeds_replaces_the_file_whole_and_keeps_its_permissions() {
        let path = scratch("succeeds/out.svg");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_atomically(&path, b"first").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        }
        write_atomically(&path, b"second, longer").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second, longer");
        assert_eq!(files_beside(&path), ["out.svg"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o640);
        }
    }

    #[test]
    fn a_bare_file_name_is_written_in_the_current_directory() {
        assert_eq!(directory_of(Path::new("net.safetensors")), Path::new("."));
        assert_eq!(directory_of(Path::new("a/net.safetensors")), Path::new("a"));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_stays_a_link_and_its_file_is_replaced() {
        let target = scratch("linked/target.safetensors");
        let link = scratch("linked/link.safetensors");
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(&target, b"old").unwrap();
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(
            files_beside(&target),
            ["link.safetensors", "target.safetensors"]
        );
        // A link to a file not there yet: the file is created where the link points.
        fs::remove_file(&target).unwrap();
        write_atomically(&link, b"created").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"created");
        assert_eq!(
            files_beside(&target),
            ["link.safetensors", "target.safetensors"]
        );
    }

    /// A path that is not a regular file is opened in place (never renamed over: as root, that
    /// would replace `/dev/null`); a directory gets the system's error and stays.
    #[test]
    fn a_directory_is_the_systems_error_and_stays() {
        let dir = scratch("a-directory");
        fs::create_dir_all(&dir).unwrap();
        let err = write_atomically(&dir, b"x").unwrap_err();
        assert_ne!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(dir.is_dir());
        assert!(files_beside(&dir).contains(&"a-directory".to_string()));
    }

    #[test]
    fn a_missing_directory_is_the_systems_error() {
        let path = scratch("no-such-dir/net.safetensors");
        let err = write_atomically(&path, b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!path.parent().unwrap().exists());
    }
}
