//! Writing downloaded objects under `get -o DIR`, where keys come from a server that may be
//! wrong or hostile: a key becomes a path only if it names a file strictly inside DIR, no
//! directory on the way may be a symlink, and each file appears whole or not at all (written
//! to a temporary name beside it, then renamed over the target, never written through it).

use std::fs::{self, OpenOptions};
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
/// directories (those not there yet will be made as directories).
pub fn no_symlinks(dir: &Path, segments: &[String]) -> Result<(), String> {
    walk_dirs(dir, segments, false).map(drop)
}

/// Walks the directories of `segments` (all but the file name) under `dir`, refusing a
/// symlink or a non-directory on the way; those missing are made when `create`, else the
/// walk ends there. Returns the deepest directory reached.
fn walk_dirs(dir: &Path, segments: &[String], create: bool) -> Result<PathBuf, String> {
    let mut at = dir.to_path_buf();
    for seg in segments
        .split_last()
        .map_or(&[][..], |(_, parents)| parents)
    {
        at.push(seg);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("{} is a symlink; not following it", at.display()));
            }
            Ok(m) if !m.is_dir() => {
                return Err(format!("{} exists and is not a directory", at.display()));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                fs::create_dir(&at).map_err(|e| format!("creating {}: {e}", at.display()))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(at),
            Err(e) => return Err(format!("{}: {e}", at.display())),
        }
    }
    Ok(at)
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

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
#[derive(Debug)]
pub struct OutFile {
    file: fs::File,
    temp: PathBuf,
    path: PathBuf,
    published: bool,
}

impl OutFile {
    /// The temporary file of `size` bytes for `segments` under `dir`.
    pub fn create(dir: &Path, segments: &[String], size: u64) -> Result<Self, String> {
        let name = segments.last().ok_or("an empty path")?;
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let at = walk_dirs(dir, segments, true)?;
        let path = at.join(name);
        let temp = at.join(format!(
            ".{name}.sluice-{}-{}",
            std::process::id(),
            TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true) // never through an existing file or symlink
            .open(&temp)
            .map_err(|e| format!("creating {}: {e}", temp.display()))?;
        let out = Self {
            file,
            temp,
            path,
            published: false,
        };
        out.file
            .set_len(size)
            .map_err(|e| format!("sizing {}: {e}", out.temp.display()))?;
        Ok(out)
    }

    /// Writes `data` at byte `at` (`pwrite`: ranges may arrive in any order).
    pub fn write_at(&self, data: &[u8], at: u64) -> Result<(), String> {
        use std::os::unix::fs::FileExt;
        self.file
            .write_all_at(data, at)
            .map_err(|e| format!("writing {}: {e}", self.path.display()))
    }

    /// Flushes the file and renames it over its target (which replaces a symlink there,
    /// never follows it).
    pub fn publish(mut self) -> Result<PathBuf, String> {
        self.file
            .sync_data()
            .and_then(|()| fs::rename(&self.temp, &self.path))
            .map_err(|e| format!("writing {}: {e}", self.path.display()))?;
        self.published = true;
        Ok(self.path.clone())
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_file(&self.temp);
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
}
