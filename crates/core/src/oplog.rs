//! The op-log: one line for every request sent (`SLUICE_OP_LOG=FILE`, `--op-log FILE`), so
//! that a run can be studied afterwards or replayed against another store (`sluice bench
//! --replay`). Storage teams record a workload once and replay it on each system they test,
//! as with s3dlio's op-log and warp's replay.
//!
//! The file is zstd-compressed TSV: a header line naming the columns ([`COLUMNS`]), then one
//! line per request, attempts and resumptions included, as [`Entry`] describes. It is
//! written as a run of zstd frames, each closed by the first line written a second or a MiB
//! of text after it opened, so a killed process loses at most the frame then open (a
//! second's requests, or those since it last sent one); a process that ends normally
//! closes its last frame (the CLI on exit; Python at interpreter exit and in each
//! multiprocessing child). Lines are written in the order requests end; `start_unix_us`
//! orders them.
//!
//! Several processes never share a file: `{pid}` in the name is replaced by the process id,
//! and a process that finds the file already there (another rank of the run, a forked
//! DataLoader worker, an earlier run) writes `NAME.<pid>.EXT` beside it and says so once.
//! `sluice bench --replay` takes them all.

// One `unsafe` call: registering the fork hook (`fork_generation`).
#![allow(unsafe_code)]

use crate::error::{Error, Result};
use crate::uri::ObjectUri;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The columns, in order; the file's first line is them joined by tabs.
pub const COLUMNS: [&str; 11] = [
    "start_unix_us",
    "op",
    "uri",
    "range",
    "bytes",
    "object_size",
    "status",
    "first_byte_us",
    "duration_us",
    "attempt",
    "error",
];

/// zstd's level: the fastest of the levels that compress these lines best (level 3, the
/// default, is a third slower for no smaller a file; docs/benchmarks.md).
const LEVEL: i32 = 1;
/// A frame is closed after this much text...
const FRAME_TEXT: usize = 1 << 20;
/// ...or this long after it opened, whichever comes first.
const FRAME_TIME: Duration = Duration::from_secs(1);

/// One request, as a line of the log says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// When the request was sent, in microseconds since the UNIX epoch.
    pub start_unix_us: u64,
    /// The S3 operation (`GetObject`, `PutObject`, `UploadPart`, `ListObjectsV2`, ...).
    pub op: String,
    /// The object, or the bucket and prefix of a listing (`s3://bucket/key`).
    pub uri: String,
    /// A GET's byte range (`start..end`, end exclusive; `start..` to the end). For a
    /// listing, `/` when it was grouped by a delimiter.
    pub range: Option<String>,
    /// Body bytes moved: received for a GET, sent for a PUT or a part.
    pub bytes: u64,
    /// The whole object's size, where the answer said it (GET, HEAD) or the request made it
    /// (PUT).
    pub object_size: Option<u64>,
    /// The HTTP status; 0 when no answer came (a timeout, a broken connection).
    pub status: u16,
    /// Microseconds from sending to the answer's head (GETs).
    pub first_byte_us: Option<u64>,
    /// Microseconds from sending to the end of the body.
    pub duration_us: u64,
    /// 1 for a call's first request, 2 for its first retry or resumption, ...
    pub attempt: u32,
    /// Empty on success, else the failure's kind (`HTTP 503 SlowDown`, `timeout first-byte`).
    pub error: String,
}

tokio::task_local! {
    static ATTEMPT: u32;
}

/// Runs `f` as attempt `n` of its call: what the log's `attempt` column says of the request
/// it sends (the retry and resumption loops number their attempts this way).
pub fn as_attempt<F: std::future::Future>(
    n: u32,
    f: F,
) -> tokio::task::futures::TaskLocalFuture<u32, F> {
    ATTEMPT.scope(n, f)
}

fn attempt() -> u32 {
    ATTEMPT.try_with(|n| *n).unwrap_or(1)
}

/// A request being timed for the log.
#[derive(Debug, Clone, Copy)]
pub struct Timer {
    at: Instant,
}

impl Timer {
    /// Starts timing a request sent now.
    pub fn start() -> Self {
        Self { at: Instant::now() }
    }
}

/// Forks this process has gone through, counted in each child by a `pthread_atfork` hook: a
/// log opened at another count was inherited from the parent. (Asking the process id on each
/// request is a system call: a sixth of what a line cost.)
fn fork_generation() -> u64 {
    static FORKS: AtomicU64 = AtomicU64::new(0);
    static HOOK: Once = Once::new();
    extern "C" fn forked() {
        FORKS.fetch_add(1, Ordering::Relaxed);
    }
    HOOK.call_once(|| {
        // SAFETY: registers a child handler that only bumps an atomic (async-signal-safe);
        // no pointers are passed.
        unsafe { libc::pthread_atfork(None, None, Some(forked)) };
    });
    FORKS.load(Ordering::Relaxed)
}

/// What a finished request's line says beside its timing.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// The S3 operation's name.
    pub op: &'static str,
    /// What it was about.
    pub uri: Option<&'a ObjectUri>,
    /// The range asked, or `/` for a grouped listing.
    pub range: Option<String>,
    /// Body bytes moved.
    pub bytes: u64,
    /// The object's size, where known.
    pub object_size: Option<u64>,
    /// When the answer's head came (GETs).
    pub first_byte: Option<Instant>,
    /// The answer: the success status, or the error.
    pub result: std::result::Result<u16, &'a Error>,
}

/// An open op-log of this process: where its lines go.
pub struct OpLog {
    path: PathBuf,
    /// The process that opened it, and its fork count then (`fork_generation`): a forked
    /// child inherits the handle, never writes through it and never closes its frame (the
    /// parent's bytes in it are the parent's to write).
    owner: u32,
    generation: u64,
    /// The wall clock at `opened`: a line's start is `wall + (start - opened)`, one clock
    /// read per request fewer.
    wall: SystemTime,
    opened: Instant,
    sink: Mutex<Sink>,
}

impl std::fmt::Debug for OpLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpLog").field("path", &self.path).finish()
    }
}

struct Sink {
    /// The frame being written; `None` between frames.
    frame: Option<zstd::stream::write::Encoder<'static, File>>,
    /// The file, between frames.
    file: Option<File>,
    frame_text: usize,
    frame_opened: Instant,
    /// Set after a write failed: the log stops (once said), the requests go on.
    broken: bool,
    line: String,
}

impl OpLog {
    /// The log for `template` in this process: opened on first use, shared by every client
    /// of the process after that. `{pid}` in the name is the process id; a file that is
    /// already there is never overwritten (see the module's doc).
    pub fn shared(template: &Path) -> Result<Arc<OpLog>> {
        static OPEN: Mutex<Vec<(PathBuf, Arc<OpLog>)>> = Mutex::new(Vec::new());
        let pid = std::process::id();
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        // Logs of the process this one was forked from are its parent's, not this one's.
        open.retain(|(_, log)| log.owner == pid);
        if let Some((_, log)) = open.iter().find(|(t, _)| t == template) {
            return Ok(log.clone());
        }
        let log = Arc::new(Self::create(template, pid)?);
        open.push((template.to_owned(), log.clone()));
        ALL.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&log));
        Ok(log)
    }

    fn create(template: &Path, pid: u32) -> Result<Self> {
        let text = template.to_string_lossy();
        let has_pid = text.contains("{pid}");
        let path = PathBuf::from(text.replace("{pid}", &pid.to_string()));
        let refuse = |p: &Path, e: std::io::Error| {
            Error::config(
                "SLUICE_OP_LOG",
                format!("cannot create the op-log {}: {e}", p.display()),
            )
        };
        let (path, file) = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => (path, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && !has_pid => {
                let beside = with_pid(&path, pid);
                let f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&beside)
                    .map_err(|e| refuse(&beside, e))?;
                tracing::warn!(
                    "op-log {} already exists (another process of this run, or an earlier \
                     run): this process logs to {}",
                    path.display(),
                    beside.display()
                );
                (beside, f)
            }
            Err(e) => return Err(refuse(&path, e)),
        };
        let mut sink = Sink {
            frame: None,
            file: Some(file),
            frame_text: 0,
            frame_opened: Instant::now(),
            broken: false,
            line: COLUMNS.join("\t") + "\n",
        };
        // The header in a frame of its own: a log is readable from its first line.
        sink.flush_line(&path, true);
        Ok(Self {
            path,
            owner: pid,
            generation: fork_generation(),
            wall: SystemTime::now(),
            opened: Instant::now(),
            sink: Mutex::new(sink),
        })
    }

    /// Where this process's lines go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sink(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this process opened the log (not a child that inherited it).
    fn mine(&self) -> bool {
        fork_generation() == self.generation
    }

    /// Writes the line of a request timed by `t`.
    pub fn record(&self, t: &Timer, o: Outcome<'_>) {
        if !self.mine() {
            return;
        }
        let micros = |d: Duration| d.as_micros() as u64;
        let since = |i: Instant| micros(i.saturating_duration_since(t.at));
        let duration = since(Instant::now());
        let start = self.wall + t.at.saturating_duration_since(self.opened);
        let start = start.duration_since(UNIX_EPOCH).map_or(0, micros);
        let (status, error) = match o.result {
            Ok(status) => (status, String::new()),
            Err(e) => (e.http_status().unwrap_or(0), e.kind_label()),
        };
        let mut sink = self.sink();
        if sink.broken {
            return;
        }
        let l = &mut sink.line;
        l.clear();
        // The columns, in `COLUMNS`' order; numbers by itoa (core::fmt's are a tenth of a
        // line's cost).
        let mut n = itoa::Buffer::new();
        let mut num = |l: &mut String, v: Option<u64>| {
            if let Some(v) = v {
                l.push_str(n.format(v));
            }
            l.push('\t');
        };
        num(l, Some(start));
        l.push_str(o.op);
        l.push('\t');
        if let Some(u) = o.uri {
            let at = l.len();
            let _ = write!(l, "{u}");
            escape_from(l, at);
        }
        l.push('\t');
        if let Some(r) = &o.range {
            escape(l, r);
        }
        l.push('\t');
        num(l, Some(o.bytes));
        num(l, o.object_size);
        num(l, Some(u64::from(status)));
        num(l, o.first_byte.map(since));
        num(l, Some(duration));
        num(l, Some(u64::from(attempt())));
        escape(l, &error);
        l.push('\n');
        sink.flush_line(&self.path, false);
    }

    /// Closes the frame being written, so that everything logged so far is readable.
    pub fn finish_frame(&self) {
        if self.mine() {
            self.sink().close_frame(&self.path);
        }
    }
}

impl Sink {
    /// Writes `self.line` into the frame (opening one if none is open), closing the frame
    /// when it is full or old; `close` closes it in any case.
    fn flush_line(&mut self, path: &Path, close: bool) {
        let result = (|| -> std::io::Result<()> {
            if self.frame.is_none() {
                let file = self.file.take().expect("a file between frames");
                self.frame = Some(zstd::stream::write::Encoder::new(file, LEVEL)?);
                self.frame_text = 0;
                self.frame_opened = Instant::now();
            }
            let frame = self.frame.as_mut().expect("a frame was just opened");
            frame.write_all(self.line.as_bytes())?;
            self.frame_text += self.line.len();
            Ok(())
        })();
        self.fail_on(path, result);
        if close || self.frame_text >= FRAME_TEXT || self.frame_opened.elapsed() >= FRAME_TIME {
            self.close_frame(path);
        }
    }

    fn close_frame(&mut self, path: &Path) {
        if let Some(frame) = self.frame.take() {
            let result = frame.finish().and_then(|mut f| {
                f.flush()?;
                self.file = Some(f);
                Ok(())
            });
            self.fail_on(path, result);
        }
    }

    fn fail_on(&mut self, path: &Path, result: std::io::Result<()>) {
        if let Err(e) = result {
            if !self.broken {
                tracing::warn!(
                    "op-log {}: {e}; no more requests are logged",
                    path.display()
                );
            }
            self.broken = true;
            self.frame = None;
        }
    }
}

impl Drop for OpLog {
    fn drop(&mut self) {
        let mine = self.mine();
        let sink = self.sink.get_mut().unwrap_or_else(|p| p.into_inner());
        if mine {
            sink.close_frame(&self.path);
        } else if let Some(frame) = sink.frame.take() {
            // The parent's unwritten bytes: dropping the encoder would write them.
            std::mem::forget(frame);
        }
    }
}

/// Every log this process opened (weakly: the clients own them).
static ALL: Mutex<Vec<std::sync::Weak<OpLog>>> = Mutex::new(Vec::new());

/// Closes the frame of every op-log this process writes: call at exit (the CLI does;
/// `sluice` registers it for Python's exit and for multiprocessing children).
pub fn finish_all() {
    let logs: Vec<Arc<OpLog>> = ALL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    logs.iter().for_each(|l| l.finish_frame());
}

/// `dir/run.tsv.zst` as `dir/run.<pid>.tsv.zst`.
fn with_pid(path: &Path, pid: u32) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    let renamed = match name.split_once('.') {
        Some((stem, ext)) => format!("{stem}.{pid}.{ext}"),
        None => format!("{name}.{pid}"),
    };
    path.with_file_name(renamed)
}

/// Whether `b` is written as `%XX`: `%`, tab, newline, carriage return (a key may hold any).
fn escaped(b: u8) -> bool {
    matches!(b, b'%' | b'\t' | b'\n' | b'\r')
}

/// Escapes what was written into `out` from `at` on, in place (most keys need nothing).
fn escape_from(out: &mut String, at: usize) {
    if out.as_bytes()[at..].iter().any(|b| escaped(*b)) {
        let tail = out.split_off(at);
        escape(out, &tail);
    }
}

/// Writes `s` with `%`, tab, newline and carriage return as `%XX`.
fn escape(out: &mut String, s: &str) {
    if !s.bytes().any(escaped) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '%' | '\t' | '\n' | '\r' => {
                let _ = write!(out, "%{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
}

fn unescape(s: &str) -> std::result::Result<String, String> {
    if !s.contains('%') {
        return Ok(s.to_owned());
    }
    let mut out = Vec::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad escape at {:?}", &s[i..]))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "an escape that is not UTF-8".to_owned())
}

/// Reads a whole op-log. A file that is not one, a line that does not parse, or a file cut
/// short (a process killed mid-frame) is an error naming the file and the line.
pub fn read(path: &Path) -> std::result::Result<Vec<Entry>, String> {
    let at = |line: usize, why: String| format!("op-log {} line {line}: {why}", path.display());
    let file = File::open(path).map_err(|e| format!("op-log {}: {e}", path.display()))?;
    let decoder = zstd::stream::read::Decoder::new(file)
        .map_err(|e| format!("op-log {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(decoder).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| {
            at(
                n,
                format!(
                    "not readable: {e} (cut short or corrupt; the {} lines before it are whole)",
                    n - 1
                ),
            )
        })?;
        if n == 1 {
            if line != COLUMNS.join("\t") {
                return Err(at(
                    1,
                    "not a sluice op-log (its header is not the columns)".into(),
                ));
            }
            continue;
        }
        out.push(parse_line(&line).map_err(|why| at(n, why))?);
    }
    if out.is_empty() && std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) == 0 {
        return Err(at(1, "empty (no header)".into()));
    }
    Ok(out)
}

fn parse_line(line: &str) -> std::result::Result<Entry, String> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != COLUMNS.len() {
        return Err(format!(
            "{} columns, expected {} ({})",
            f.len(),
            COLUMNS.len(),
            COLUMNS.join(" ")
        ));
    }
    fn num<T: std::str::FromStr>(f: &[&str], i: usize) -> std::result::Result<T, String> {
        f[i].parse()
            .map_err(|_| format!("{}: expected a whole number, got {:?}", COLUMNS[i], f[i]))
    }
    let opt = |i: usize| -> std::result::Result<Option<u64>, String> {
        if f[i].is_empty() {
            Ok(None)
        } else {
            num(&f, i).map(Some)
        }
    };
    if f[1].is_empty() {
        return Err("op: empty".into());
    }
    Ok(Entry {
        start_unix_us: num(&f, 0)?,
        op: f[1].to_owned(),
        uri: unescape(f[2]).map_err(|e| format!("uri: {e}"))?,
        range: (!f[3].is_empty())
            .then(|| unescape(f[3]))
            .transpose()
            .map_err(|e| format!("range: {e}"))?,
        bytes: num(&f, 4)?,
        object_size: opt(5)?,
        status: num(&f, 6)?,
        first_byte_us: opt(7)?,
        duration_us: num(&f, 8)?,
        attempt: num(&f, 9)?,
        error: unescape(f[10]).map_err(|e| format!("error: {e}"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u64) -> Entry {
        Entry {
            start_unix_us: 1_700_000_000_000_000_000 + i,
            op: "GetObject".into(),
            uri: format!("s3://b/dir/k%\t\n{i}"),
            range: Some("0..100".into()),
            bytes: 100,
            object_size: Some(1000),
            status: 206,
            first_byte_us: Some(5),
            duration_us: 9,
            attempt: 1,
            error: String::new(),
        }
    }

    #[test]
    fn fields_round_trip_through_escapes() {
        let e = entry(1);
        let mut l = String::new();
        escape(&mut l, &e.uri);
        assert!(!l.contains('\t') && !l.contains('\n'), "{l}");
        assert_eq!(unescape(&l).unwrap(), e.uri);
    }

    #[test]
    fn a_second_process_writes_beside_and_a_pid_template_is_filled() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.tsv.zst");
        std::fs::write(&p, b"x").unwrap();
        let log = OpLog::create(&p, 42).unwrap();
        assert_eq!(log.path(), dir.path().join("run.42.tsv.zst"));
        let t = OpLog::create(&dir.path().join("r-{pid}.zst"), 7).unwrap();
        assert_eq!(t.path(), dir.path().join("r-7.zst"));
        assert_eq!(std::fs::read(&p).unwrap(), b"x", "never overwritten");
    }

    #[test]
    fn bad_lines_and_cut_files_are_refused_with_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
            p
        };
        let header = COLUMNS.join("\t");
        let good = "1\tGetObject\ts3://b/k\t\t5\t5\t200\t1\t2\t1\t";
        let p = write("ok", &format!("{header}\n{good}\n{good}\n"));
        assert_eq!(read(&p).unwrap().len(), 2);
        let p = write(
            "bad",
            &format!("{header}\n{good}\n1\tGetObject\ts3://b/k\t\tx\t5\t200\t1\t2\t1\t\n"),
        );
        let e = read(&p).unwrap_err();
        assert!(
            e.contains("line 3") && e.contains("bytes") && e.contains("\"x\""),
            "{e}"
        );
        let p = write("short", &format!("{header}\n1\tGetObject\n"));
        assert!(read(&p).unwrap_err().contains("line 2"));
        let p = write("other", "idx\tthread\top\n");
        assert!(read(&p).unwrap_err().contains("not a sluice op-log"));
        // A frame cut short: everything before the cut is whole, the cut is named.
        let full = zstd::encode_all(format!("{header}\n{good}\n{good}\n").as_bytes(), 3).unwrap();
        let p = dir.path().join("cut");
        std::fs::write(&p, &full[..full.len() - 4]).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("cut short or corrupt"), "{e}");
    }
}
