//! Writing downloaded objects under `get -o DIR`, where keys come from a server that may be
//! wrong or hostile: a key becomes a path only if it names a file strictly inside DIR, no
//! directory on the way may be a symlink, and each file appears whole or not at all (written
//! to a temporary name beside it, then renamed over the target, never written through it).
//! `rm -r file:///DIR/` deletes under DIR by the same walk (`remove`).

use rustix::fs::{
    AtFlags, CWD, FileType, Mode, OFlags, mkdirat, openat, renameat, statat, unlinkat,
};
use rustix::io::Errno;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a key relative to the prefix is, as a file under the output directory.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// Segments of a path inside the directory.
    File(Vec<String>),
    /// A "directory marker" (`a/`, or the prefix itself): nothing to write.
    DirMarker,
}

/// Classifies `rel`; `Err` says why the key cannot be a file name under the directory:
/// `..` or `.`, an absolute path, an empty segment (`a//b`), a NUL.
pub fn target(rel: &str) -> Result<Target, String> {
    if rel.is_empty() || rel.ends_with('/') {
        return Ok(Target::DirMarker);
    }
    let why = if rel.starts_with('/') {
        Some("an absolute path")
    } else if rel.contains('\0') {
        Some("a NUL byte")
    } else if rel.split('/').any(|s| s == "..") {
        Some("a `..` segment")
    } else if rel.split('/').any(|s| s == ".") {
        Some("a `.` segment")
    } else if rel.split('/').any(str::is_empty) {
        Some("an empty segment (`//`)")
    } else {
        None
    };
    match why {
        Some(why) => Err(format!("the key has {why}, which is not a safe file name")),
        None => Ok(Target::File(rel.split('/').map(str::to_owned).collect())),
    }
}

/// Refuses a path whose directories under `dir` that exist already are symlinks or not
/// directories (those not there yet will be made as directories). A check before the work
/// starts, to refuse early; the writes themselves (`OutFile`) never follow a symlink either.
pub fn no_symlinks(dir: &Path, segments: &[String]) -> Result<(), String> {
    match open_root(dir) {
        Ok(root) => walk_dirs(root, dir, segments, false).map(drop),
        // Not there yet: nothing under it can be a symlink.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}

/// The output directory itself: the user's choice, which may be (or run through) a symlink.
fn open_root(dir: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(openat(CWD, dir, flags, Mode::empty())?)
}

/// Opens the directory `name` relative to `at` without following a symlink (`O_NOFOLLOW`
/// applies to its last component; every earlier one was opened the same way). One that is
/// missing is made with `create`, else `None`. `shown` names it in errors.
fn open_dir<Fd: AsFd>(
    at: Fd,
    name: &Path,
    shown: &Path,
    create: bool,
) -> Result<Option<OwnedFd>, String> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // Linux answers a symlink under O_DIRECTORY | O_NOFOLLOW with ENOTDIR (ELOOP without
    // O_DIRECTORY): look at what it is to say which.
    let is_link = || {
        statat(&at, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
    };
    let why = |e: Errno| match e {
        Errno::LOOP | Errno::NOTDIR if is_link() => {
            format!("{} is a symlink; not following it", shown.display())
        }
        Errno::NOTDIR => format!("{} exists and is not a directory", shown.display()),
        e => format!("{}: {}", shown.display(), std::io::Error::from(e)),
    };
    match openat(&at, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) if !create => Ok(None),
        Err(Errno::NOENT) => {
            match mkdirat(&at, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => {
                    return Err(format!(
                        "creating {}: {}",
                        shown.display(),
                        std::io::Error::from(e)
                    ));
                }
            }
            openat(&at, name, flags, Mode::empty())
                .map(Some)
                .map_err(why)
        }
        Err(e) => Err(why(e)),
    }
}

/// Walks the directories of `segments` (all but the file name) down from the open directory
/// `root` (which is `dir`), each opened relative to the one before without following a
/// symlink, so that nothing swapped in between a check and a write can redirect it. Missing
/// directories are made when `create`, else the walk ends there. Returns the deepest
/// directory reached and its path.
fn walk_dirs(
    root: OwnedFd,
    dir: &Path,
    segments: &[String],
    create: bool,
) -> Result<(OwnedFd, PathBuf), String> {
    let (mut fd, mut path) = (root, dir.to_path_buf());
    for seg in segments
        .split_last()
        .map_or(&[][..], |(_, parents)| parents)
    {
        let next = path.join(seg);
        match open_dir(&fd, Path::new(seg), &next, create)? {
            Some(opened) => (fd, path) = (opened, next),
            None => break,
        }
    }
    Ok((fd, path))
}

/// Deletes the file `segments` under `dir`, never following a symlink on the way: each
/// directory is opened relative to the one above it with `O_NOFOLLOW`, and the file is
/// unlinked relative to its own (`unlinkat` does not follow its last component). A directory
/// swapped for a symlink since the listing is an error, never a deletion outside `dir`. A
/// file, or a directory on its way, that is gone already is no error (deleting what is not
/// there succeeds, as on S3).
pub fn remove(dir: &Path, segments: &[String]) -> Result<(), String> {
    let Some((name, parents)) = segments.split_last() else {
        return Ok(());
    };
    let root = match open_root(dir) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let (parent, reached) = walk_dirs(root, dir, segments, false)?;
    if reached != parents.iter().fold(dir.to_path_buf(), |p, s| p.join(s)) {
        return Ok(());
    }
    match unlinkat(&parent, name.as_str(), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(format!(
            "{}: {}",
            reached.join(name).display(),
            std::io::Error::from(e)
        )),
    }
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Runs file work `f` on tokio's blocking pool: a slow disk must never hold the runtime's
/// threads, and the GETs in flight on them, into their stall timeouts.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(format!("the writing task failed: {e}")))
}

/// Writes `data` to `segments` under `dir` (see `OutFile`). Returns the final path.
#[cfg(test)]
pub fn write(dir: &Path, segments: &[String], data: &[u8]) -> Result<PathBuf, String> {
    let file = OutFile::create(dir, segments, data.len() as u64)?;
    file.write_at(data, 0)?;
    file.publish()
}

/// A file being written under `dir`: created under a temporary name beside its target
/// (directories made on the way, none of them a symlink), written at any offsets, and
/// renamed over the target by `publish`. Dropped unpublished, the temporary file is removed.
/// Every step after `dir` itself goes through the handle of the file's directory, never a
/// path again.
#[derive(Debug)]
pub struct OutFile {
    file: fs::File,
    /// The directory the file goes in, held open.
    parent: OwnedFd,
    temp: String,
    name: String,
    path: PathBuf,
    published: bool,
}

impl OutFile {
    /// The temporary file of `size` bytes for `segments` under `dir`.
    pub fn create(dir: &Path, segments: &[String], size: u64) -> Result<Self, String> {
        let name = segments.last().ok_or("an empty path")?.clone();
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let root = open_root(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let (parent, at) = walk_dirs(root, dir, segments, true)?;
        let temp = format!(
            ".{name}.sluice-{}-{}",
            std::process::id(),
            TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        // Never through an existing file or symlink.
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            openat(&parent, temp.as_str(), flags, Mode::from_raw_mode(0o666)).map_err(|e| {
                format!(
                    "creating {}: {}",
                    at.join(&temp).display(),
                    std::io::Error::from(e)
                )
            })?;
        let out = Self {
            file: fs::File::from(fd),
            parent,
            temp,
            path: at.join(&name),
            name,
            published: false,
        };
        out.file
            .set_len(size)
            .map_err(|e| format!("sizing {}: {e}", out.path.display()))?;
        Ok(out)
    }

    /// Writes `data` at byte `at` (`pwrite`: ranges may arrive in any order).
    pub fn write_at(&self, data: &[u8], at: u64) -> Result<(), String> {
        use std::os::unix::fs::FileExt;
        self.file
            .write_all_at(data, at)
            .map_err(|e| format!("writing {}: {e}", self.path.display()))
    }

    /// Flushes the file and renames it over its target in the same directory (which
    /// replaces a symlink there, never follows it).
    pub fn publish(mut self) -> Result<PathBuf, String> {
        self.file
            .sync_data()
            .and_then(|()| {
                renameat(
                    &self.parent,
                    self.temp.as_str(),
                    &self.parent,
                    self.name.as_str(),
                )
                .map_err(std::io::Error::from)
            })
            .map_err(|e| format!("writing {}: {e}", self.path.display()))?;
        self.published = true;
        Ok(self.path.clone())
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if !self.published {
            let _ = unlinkat(&self.parent, self.temp.as_str(), AtFlags::empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_paths_only_inside_the_directory() {
        let file = |s: &[&str]| Ok(Target::File(s.iter().map(|s| s.to_string()).collect()));
        assert_eq!(target("a/b.bin"), file(&["a", "b.bin"]));
        assert_eq!(target("a/"), Ok(Target::DirMarker));
        assert_eq!(target(""), Ok(Target::DirMarker));
        for bad in ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\0b"] {
            assert!(target(bad).is_err(), "{bad:?} accepted");
        }
    }

    /// A directory on the way swapped for a symlink after the walk (another process racing
    /// the download): the file still lands in the directory that was checked, never
    /// through the link.
    #[test]
    fn a_directory_swapped_for_a_symlink_after_the_check_is_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let (dir, outside) = (root.path().join("out"), root.path().join("outside"));
        fs::create_dir_all(dir.join("d")).unwrap();
        fs::create_dir(&outside).unwrap();
        let file = OutFile::create(&dir, &["d".into(), "x".into()], 3).unwrap();
        file.write_at(b"new", 0).unwrap();
        fs::rename(dir.join("d"), dir.join("checked")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("d")).unwrap();
        file.publish().unwrap();
        assert_eq!(fs::read(dir.join("checked/x")).unwrap(), b"new");
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            0,
            "nothing written outside"
        );
    }

    #[test]
    fn writes_replace_symlinks_and_refuse_symlinked_directories() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        fs::create_dir(&outside).unwrap();
        let dir = root.path().join("out");
        fs::create_dir(&dir).unwrap();
        // A symlink as the file: replaced, the file it points at untouched.
        fs::write(outside.join("victim"), b"keep").unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dir.join("f")).unwrap();
        write(&dir, &["f".into()], b"new").unwrap();
        assert_eq!(fs::read(outside.join("victim")).unwrap(), b"keep");
        assert_eq!(fs::read(dir.join("f")).unwrap(), b"new");
        // A symlink as a directory on the way: refused.
        std::os::unix::fs::symlink(&outside, dir.join("d")).unwrap();
        let e = write(&dir, &["d".into(), "x".into()], b"x").unwrap_err();
        assert!(e.contains("symlink"), "{e}");
        assert!(!outside.join("x").exists());
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn remove_never_follows_a_directory_swapped_for_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(tree.join("sub")).unwrap();
        fs::create_dir_all(&elsewhere).unwrap();
        fs::write(tree.join("sub/own"), b"mine").unwrap();
        fs::write(elsewhere.join("own"), b"keep").unwrap();
        let segs = |p: &str| p.split('/').map(str::to_owned).collect::<Vec<_>>();
        // Listed, then swapped: tree/sub is now a link to a directory outside the tree.
        fs::rename(tree.join("sub"), dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, tree.join("sub")).unwrap();
        let e = remove(&tree, &segs("sub/own")).unwrap_err();
        assert!(e.contains("symlink"), "{e}");
        assert_eq!(fs::read(elsewhere.join("own")).unwrap(), b"keep");
        // A path by name would have gone through the link (what `remove_file` does).
        assert!(tree.join("sub/own").exists());
        // In place, the file goes; gone already, or its directory gone, is no error.
        fs::remove_file(tree.join("sub")).unwrap();
        fs::rename(dir.path().join("moved"), tree.join("sub")).unwrap();
        remove(&tree, &segs("sub/own")).unwrap();
        assert!(!tree.join("sub/own").exists());
        remove(&tree, &segs("sub/own")).unwrap();
        remove(&tree, &segs("nowhere/own")).unwrap();
    }
}
