//! Reading a byte range of a file into a segment: `pread` straight into it, or O_DIRECT
//! through aligned buffers.

use crate::aligned::{ALIGN, CHUNK, Pool};
use crate::{etag_of, file_meta, open_for_read};
use sluice_core::changed;
use sluice_core::same_etag;
use sluice_core::{Error, GetInfo, GetOptions, ObjectUri, Result, Segment};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub fn read_into(
    uri: &ObjectUri,
    path: &Path,
    direct: bool,
    pool: &Pool,
    opts: &GetOptions,
    seg: &mut Segment,
) -> Result<GetInfo> {
    let range = opts.range;
    // Before opening: O_DIRECT refuses directories with the same EINVAL as tmpfs.
    file_meta(uri, path)?;
    let file = open_for_read(uri, path, direct)?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(uri.to_string(), "stat", e))?;
    let size = meta.len();
    if opts
        .if_match
        .as_ref()
        .is_some_and(|tag| !same_etag(tag, &etag_of(&meta)))
    {
        return Err(changed(uri));
    }
    let start = range.map_or(0, |r| r.start());
    // As S3: a range running past the end is clipped; one starting past it is refused.
    let end = range.and_then(|r| r.end()).map_or(size, |e| e.min(size));
    if start > 0 && start >= size {
        return Err(Error::from_service(
            uri.to_string(),
            416,
            "InvalidRange",
            format!("range starts at {start}, past the end of the {size}-byte file"),
            None,
        ));
    }
    let len = end.saturating_sub(start);
    seg.expect_more(len)
        .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))?;
    if direct {
        read_direct(uri, &file, pool, start, end, seg)?;
    } else {
        read_buffered(uri, &file, start, end, seg)?;
    }
    Ok(GetInfo {
        bytes: len,
        object_size: Some(size),
        etag: Some(etag_of(&meta)),
        attempts: 1,
    })
}

fn shrank(uri: &ObjectUri, at: u64) -> Error {
    Error::integrity(
        uri.to_string(),
        format!(
            "the file ended at byte {at}, before the size it had when the read began: it changed while being read"
        ),
    )
}

/// Retries `read` after a signal interrupted it.
fn retrying(uri: &ObjectUri, mut read: impl FnMut() -> std::io::Result<usize>) -> Result<usize> {
    loop {
        match read() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r.map_err(|e| Error::io(uri.to_string(), "read", e)),
        }
    }
}

fn read_buffered(
    uri: &ObjectUri,
    file: &File,
    start: u64,
    end: u64,
    seg: &mut Segment,
) -> Result<()> {
    let mut pos = start;
    while pos < end {
        let want = usize::try_from(end - pos).unwrap_or(usize::MAX).min(CHUNK);
        let n = retrying(uri, || seg.read_at(file, pos, want))?;
        if n == 0 {
            return Err(shrank(uri, pos));
        }
        pos += n as u64;
    }
    Ok(())
}

/// Aligned reads covering `start..end`; the bytes outside it (the unaligned head of the
/// first block, the tail of the last) are read but not kept.
fn read_direct(
    uri: &ObjectUri,
    file: &File,
    pool: &Pool,
    start: u64,
    end: u64,
    seg: &mut Segment,
) -> Result<()> {
    let align = ALIGN as u64;
    let mut pos = start / align * align;
    let mut buf = pool.take();
    let result = (|| {
        while pos < end {
            let want = (end - pos).div_ceil(align) * align;
            let want = usize::try_from(want).unwrap_or(usize::MAX).min(CHUNK);
            let n = retrying(uri, || file.read_at(&mut buf.as_mut_slice()[..want], pos))?;
            let got_to = pos + n as u64;
            let (from, to) = (start.max(pos), end.min(got_to));
            if from < to {
                seg.write(&buf.as_slice()[(from - pos) as usize..(to - pos) as usize])
                    .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))?;
            }
            // No bytes, or an unaligned count (only the end of a file gives one), before
            // `end`: the file shrank. An aligned short read (network file systems return
            // them) just goes on from where it stopped.
            if got_to < end && (n == 0 || n % ALIGN != 0) {
                return Err(shrank(uri, got_to));
            }
            pos = got_to;
        }
        Ok(())
    })();
    pool.give_back(buf);
    result
}
