//! Listing by directory walk, with S3's semantics: keys that start with the prefix, in byte
//! order; without `recursive`, directories below the prefix's level become common prefixes.
//!
//! Only regular files are objects (a link to one counts as the file). A recursive walk does
//! not descend into a symbolic link to a directory, as `find` and `rm -r` do not: `sluice rm
//! -r file:///tree/` must never delete outside the tree. The walk's own starting directory
//! may be (or run through) a link, so naming `file:///tree/link/` lists through it.

use crate::{TMP_MARKER, object_meta};
use sluice_core::{Error, ListEntry, ObjectUri, Result};
use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;

pub fn walk(prefix: &ObjectUri, recursive: bool) -> Result<Vec<ListEntry>> {
    let key = prefix.key();
    let io = |op: &'static str| move |e| Error::io(prefix.to_string(), op, e);
    // The walk starts at the directory the prefix names or ends in.
    let root = key.rfind('/').map_or("", |i| &key[..=i]).to_owned();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    if let Ok(m) = std::fs::metadata(if root.is_empty() { "." } else { &root }) {
        seen.insert((m.dev(), m.ino()));
    }
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        let entries = match std::fs::read_dir(if dir.is_empty() { "." } else { &dir }) {
            // A prefix that matches nothing lists nothing, as on S3.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => continue,
            r => r.map_err(io("read directory"))?,
        };
        for entry in entries {
            let entry = entry.map_err(io("read directory"))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue; // not UTF-8: not representable as a key
            };
            if name.contains(TMP_MARKER) {
                continue;
            }
            let child = format!("{dir}{name}");
            let is_link = entry
                .file_type()
                .map_err(io("read directory"))?
                .is_symlink();
            // A link to a file is listed as the file (datasets are often links into other
            // mounts); see the module's doc for links to directories.
            let meta = match std::fs::metadata(entry.path()) {
                // Gone since the directory was read, a dangling link, or a link loop.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => continue,
                r => r.map_err(io("stat"))?,
            };
            if meta.is_dir() {
                let sub = child + "/";
                if !sub.starts_with(key) {
                    continue;
                }
                if !recursive {
                    out.push(ListEntry::Prefix(prefix.with_key(sub)));
                } else if !is_link && seen.insert((meta.dev(), meta.ino())) {
                    // Each directory once: a bind mount of a directory above cannot loop it.
                    dirs.push(sub);
                }
            } else if !meta.is_file() {
                // A FIFO, socket or device is no object: a read of a FIFO would block.
                continue;
            } else if child.starts_with(key) {
                out.push(ListEntry::Object(object_meta(
                    prefix.with_key(child),
                    &meta,
                )));
            }
        }
    }
    out.sort_by(|a, b| a.uri().key().cmp(b.uri().key()));
    Ok(out)
}
