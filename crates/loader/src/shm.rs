//! Buffer memory that outlives the process (`SLUICE_SHM_POOL=DIR`).
//!
//! DLIO, like any PyTorch DataLoader without persistent workers, starts new worker processes
//! every epoch, so every epoch is a first pass: each byte in flight or held by the consumer
//! lands in memory the process has never touched, which the kernel must zero (and on a VM
//! whose balloon reports free pages, the host must back again): fresh memory costs a
//! varying and often large CPU per GB, pages an earlier process left in a `/dev/shm` file a
//! small and steady one (docs/benchmarks.md, "Why the defaults").
//!
//! So with `SLUICE_SHM_POOL` naming a directory (on a tmpfs such as `/dev/shm`), the buffer
//! pool's large buffers come from an arena: a file `slot-N` in that directory, claimed by
//! this process alone (`flock`, released when the process ends), mapped shared, its pages
//! pre-faulted, grown as needed up to `SLUICE_SHM_POOL_SIZE` (4 GiB by default). The next
//! process to claim the slot (the next epoch's worker) finds those pages already there. The
//! files stay until the directory is removed: whoever sets the variable owns the directory
//! (`sluice-dlio` makes one per run and removes it at exit).
//!
//! The buffers stay `BytesMut`, so the rest of the loader is unchanged: `PoolAlloc`, the
//! global allocator of sluice's binaries and Python module, serves an allocation from the
//! arena only while the pool asks for a buffer (`pool_alloc`), and hands memory back to the
//! arena it came from; everything else goes to the system allocator.
//!
//! A process that forks keeps its arena to itself: the mapping is not inherited
//! (`MADV_DONTFORK`), the child claims another slot, and never allocates from or frees into
//! the parent's. Objects the parent read from its arena cannot be read in a forked child (a
//! fault, never bytes the parent has since reused); DataLoader workers load their own. The
//! hole the parent's mapping leaves in the child is filled at once (a `pthread_atfork` child
//! handler) with an inaccessible reservation of the same range: otherwise the kernel places
//! the child's next large mapping there, the parent's arena record claims it, inherited
//! buffers read and write the child's new memory, and the child's frees of it are skipped.
//!
//! A slot keeps the most it ever held (its file never shrinks, and the pages stay after the
//! process ends): that is the point, and the reason for the size cap.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::os::fd::IntoRawFd;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicUsize, Ordering};

/// Arena memory is handed out in runs of this many bytes (aligned to it).
const CHUNK: usize = 2 << 20;
/// The alignment arena memory is guaranteed (mmap's).
const PAGE: usize = 4096;
/// Smaller allocations are not worth a run of chunks.
const MIN_LEN: usize = 4 << 20;
/// The most an arena may be: the bitmap's size.
const MAX_CHUNKS: usize = 32 * 1024; // 64 GiB
const WORDS: usize = MAX_CHUNKS / 64;
/// Arenas one process can know of: its own, and those of the processes it was forked from.
const SLOTS: usize = 4;
/// Slot files tried in a directory before giving up (processes holding one at once).
const MAX_FILES: usize = 1024;
/// `SLUICE_SHM_POOL_SIZE` when unset.
pub const DEFAULT_SIZE: usize = 4 << 30;

/// Where each known arena is mapped (0: none), how long it is, and the process it serves.
static BASE: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static OWNER: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];
static STATE: [Mutex<Chunks>; SLOTS] = [const { Mutex::new(Chunks::EMPTY) }; SLOTS];
/// Serialises setting arenas up (never held by the allocator).
static SETUP: Mutex<()> = Mutex::new(());
/// Whether `SLUICE_SHM_POOL` was found unusable in this process (0 unknown, 1 off).
static DISABLED: AtomicU8 = AtomicU8::new(0);

thread_local! {
    /// Set while the buffer pool allocates: only those allocations may come from the arena.
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
}

/// Which chunks of an arena are in use, and how long its file is.
struct Chunks {
    used: [u64; WORDS],
    chunks: usize,
    file_len: usize,
    fd: i32,
}

impl Chunks {
    const EMPTY: Self = Self {
        used: [0; WORDS],
        chunks: 0,
        file_len: 0,
        fd: -1,
    };

    fn is_used(&self, i: usize) -> bool {
        self.used[i / 64] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, from: usize, n: usize, used: bool) {
        for i in from..from + n {
            if used {
                self.used[i / 64] |= 1 << (i % 64);
            } else {
                self.used[i / 64] &= !(1 << (i % 64));
            }
        }
    }

    /// The first run of `n` free chunks, lowest first, so that the pages in use stay at the
    /// start of the file, where the next process finds them.
    fn first_fit(&self, n: usize) -> Option<usize> {
        let mut run = 0;
        for i in 0..self.chunks {
            run = if self.is_used(i) { 0 } else { run + 1 };
            if run == n {
                return Some(i + 1 - n);
            }
        }
        None
    }
}

/// The global allocator that lets pool buffers live in the arena (see the module's doc).
/// Without `SLUICE_SHM_POOL` it is the system allocator plus one size check per
/// allocation and four atomic loads per free.
#[derive(Debug, Default)]
pub struct PoolAlloc;

fn pid() -> u32 {
    std::process::id()
}

/// The indices of the arenas set up, with their bases. `set_up` takes the first free index
/// and none is ever released, so the first empty one ends the list: a process without a
/// pool pays one atomic load per free.
fn arenas() -> impl Iterator<Item = (usize, usize)> {
    (0..SLOTS)
        .map(|i| (i, BASE[i].load(Ordering::Acquire)))
        .take_while(|&(_, base)| base != 0)
}

/// The arena index holding `ptr`, if any.
fn arena_of(ptr: *mut u8) -> Option<usize> {
    let p = ptr as usize;
    arenas()
        .find(|&(i, base)| p >= base && p < base + LEN[i].load(Ordering::Relaxed))
        .map(|(i, _)| i)
}

/// Runs in a forked child, inside `fork`, before anything else can map memory: every arena
/// this process knows of belongs to an ancestor. Each range becomes (or stays) an
/// inaccessible reservation: no memory behind it, nothing new placed in it, a fault for a
/// read through an inherited pointer. Only syscalls and atomics: no allocation, no lock.
extern "C" fn reserve_inherited_arenas() {
    for (i, base) in arenas() {
        OWNER[i].store(0, Ordering::Relaxed);
        let len = LEN[i].load(Ordering::Relaxed);
        // SAFETY: the range is this arena's, which `MADV_DONTFORK` left unmapped here (or a
        // reservation inherited from an earlier fork, which NOREPLACE leaves as it is).
        let p = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_NORESERVE
                    | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        // A kernel older than 4.17 takes the flag as a hint and may map elsewhere. Failing
        // (EEXIST) leaves what is there: an earlier fork's reservation (a grandchild), or,
        // should another fork handler have mapped into the hole, that mapping, which the
        // arena record then covers as in a child without this handler.
        if p != libc::MAP_FAILED && p as usize != base {
            // SAFETY: the mapping just made, which nothing else knows of.
            unsafe { libc::munmap(p, len) };
        }
    }
}

/// This process's arena, if it has one.
fn own_arena() -> Option<usize> {
    let me = pid();
    arenas()
        .find(|&(i, _)| OWNER[i].load(Ordering::Relaxed) == me)
        .map(|(i, _)| i)
}

/// `size` bytes of arena `i`, or `None` when it is full (or its file cannot grow).
fn arena_alloc(i: usize, size: usize) -> Option<*mut u8> {
    let n = size.div_ceil(CHUNK);
    let mut st = STATE[i].lock().unwrap_or_else(|p| p.into_inner());
    let first = st.first_fit(n)?;
    let end = (first + n) * CHUNK;
    if end > st.file_len {
        // The file grows with its pages reserved: a tmpfs page first written after the
        // filesystem filled up would be a SIGBUS, a failed fallocate is only "no room"
        // (private memory then). Pages beyond the file's end are never handed out.
        let (from, len) = (
            st.file_len as libc::off_t,
            (end - st.file_len) as libc::off_t,
        );
        // SAFETY: fallocate on the arena's own descriptor touches no memory.
        if unsafe { libc::fallocate(st.fd, 0, from, len) } != 0 {
            return None;
        }
        st.file_len = end;
    }
    st.set(first, n, true);
    Some((BASE[i].load(Ordering::Relaxed) + first * CHUNK) as *mut u8)
}

fn arena_free(i: usize, ptr: *mut u8, size: usize) {
    let first = (ptr as usize - BASE[i].load(Ordering::Relaxed)) / CHUNK;
    let mut st = STATE[i].lock().unwrap_or_else(|p| p.into_inner());
    st.set(first, size.div_ceil(CHUNK), false);
}

/// Arena memory for a pool buffer's allocation, when this process has an arena with room.
fn from_arena(layout: Layout) -> Option<*mut u8> {
    // Runs start at multiples of CHUNK from a page-aligned mapping: page alignment at most.
    if layout.size() < MIN_LEN || layout.align() > PAGE || !IN_POOL.with(Cell::get) {
        return None;
    }
    own_arena().and_then(|i| arena_alloc(i, layout.size()))
}

// SAFETY: every pointer handed out is either the system allocator's, under the same
// layout, or a chunk-aligned run of an arena mapping that stays mapped for the process's
// life and is marked used until freed; frees and reallocations are routed by address to
// whichever gave the pointer out.
unsafe impl GlobalAlloc for PoolAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(p) = from_arena(layout) {
            return p;
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if let Some(p) = from_arena(layout) {
            // SAFETY: a fresh run of the arena, `layout.size()` bytes long; it may hold an
            // earlier process's bytes, so it is zeroed.
            unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
            return p;
        }
        // SAFETY: forwarded unchanged (the system's memory comes zeroed).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match arena_of(ptr) {
            // A parent's arena (inherited at fork) is the parent's to manage.
            Some(i) if OWNER[i].load(Ordering::Relaxed) == pid() => {
                arena_free(i, ptr, layout.size());
            }
            Some(_) => {}
            // SAFETY: the system allocator gave this pointer out, with this layout.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if arena_of(ptr).is_none() {
            // SAFETY: the system allocator's pointer and layout, forwarded.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: a new block under the caller's alignment, the overlapping bytes copied,
        // the old block freed by its own rule: the contract of realloc.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

/// Runs `f` (the pool allocating a buffer) so that a large allocation in it may come from
/// this process's arena, setting the arena up first if `SLUICE_SHM_POOL` asks for one.
pub fn pool_alloc<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the flag however `f` ends (a panic included).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_POOL.with(|c| c.set(self.0));
        }
    }
    if own_arena().is_none() && DISABLED.load(Ordering::Relaxed) == 0 {
        set_up_from_env();
    }
    let _restore = Restore(IN_POOL.with(|c| c.replace(true)));
    f()
}

fn set_up_from_env() {
    use sluice_core::settings::{SHM_POOL, SHM_POOL_SIZE};
    let dir = match SHM_POOL.from_env() {
        Ok(Some(d)) if d != "off" && d != "0" => d,
        _ => {
            DISABLED.store(1, Ordering::Relaxed);
            return;
        }
    };
    // A size that does not parse is refused when the process's client is made
    // (`settings::check`); the allocator itself can only go without the pool.
    let size = match SHM_POOL_SIZE.from_env() {
        Ok(Some(n)) => usize::try_from(n).unwrap_or(usize::MAX),
        Ok(None) => DEFAULT_SIZE,
        Err(e) => {
            tracing::warn!(error = %e, "shared-memory pool off");
            DISABLED.store(1, Ordering::Relaxed);
            return;
        }
    };
    if let Err(e) = set_up(Path::new(&dir), size) {
        tracing::warn!(dir = %dir, error = %e, "shared-memory pool off");
        DISABLED.store(1, Ordering::Relaxed);
    }
}

/// Claims a free slot file in `dir` for this process and maps up to `size` bytes of it;
/// pages an earlier holder left are pre-faulted. A process that already has an arena
/// keeps it.
pub fn set_up(dir: &Path, size: usize) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    // Before any arena is known: a fork from another thread must never find one without
    // the handler that reserves it in the child.
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a handler that only makes syscalls (see its doc).
    AT_FORK.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(reserve_inherited_arenas));
    });
    // Waited for a while only: a fork while another thread was setting up leaves the lock
    // held in the child forever (then this process goes without).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let _setup = loop {
        match SETUP.try_lock() {
            Ok(g) => break g,
            Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(std::io::Error::other(
                    "another thread is still setting the pool up",
                ));
            }
        }
    };
    if own_arena().is_some() {
        return Ok(());
    }
    let size = size.min(MAX_CHUNKS * CHUNK) / CHUNK * CHUNK;
    if size == 0 {
        return Err(std::io::Error::other(
            "the pool size is below one 2 MiB chunk",
        ));
    }
    let index = (0..SLOTS)
        .find(|&i| BASE[i].load(Ordering::Acquire) == 0)
        .ok_or_else(|| std::io::Error::other("too many arenas in one process"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // Object bytes live here: only a directory of our own that nobody else can enter.
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} must be a directory of this user's, closed to others (mode 700)",
            dir.display()
        )));
    }
    for n in 0..MAX_FILES {
        let path = dir.join(format!("slot-{n}"));
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&path)
        else {
            continue; // a symlink, a directory, another user's file: not a slot
        };
        if file
            .metadata()
            .map_or(true, |m| m.uid() != me || !m.is_file())
        {
            continue;
        }
        // SAFETY: flock on a descriptor we own; a slot held by another process is skipped.
        if unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        } != 0
        {
            continue;
        }
        let mut file_len = usize::try_from(file.metadata()?.len())
            .unwrap_or(usize::MAX)
            .min(size)
            / CHUNK
            * CHUNK;
        // The lock lives as long as the process: the descriptor is never closed.
        let fd = file.into_raw_fd();
        // SAFETY: a fresh shared mapping of our own file; pages past the file's end are
        // never handed out (the file grows first, in `arena_alloc`).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            // SAFETY: closing our own descriptor, which releases the slot.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        // SAFETY: fallocate and ftruncate on our own descriptor. The pages an earlier
        // holder left are reserved (a hole it left, written after tmpfs filled up, would be
        // a SIGBUS); if they cannot all be, the slot starts empty.
        if file_len > 0 && unsafe { libc::fallocate(fd, 0, 0, file_len as libc::off_t) } != 0 {
            // SAFETY: as above, our own descriptor.
            unsafe { libc::ftruncate(fd, 0) };
            file_len = 0;
        }
        // SAFETY: advice on our own mapping. Not inherited by a fork: a child must never
        // see the pages its parent reuses (it faults instead of reading wrong bytes); then
        // one call maps what an earlier holder left, instead of a fault per 4 KiB page
        // (failure only means faults later).
        unsafe {
            libc::madvise(base, size, libc::MADV_DONTFORK);
            if file_len > 0 {
                libc::madvise(base, file_len, libc::MADV_POPULATE_WRITE);
            }
        }
        {
            let mut st = STATE[index].lock().unwrap_or_else(|p| p.into_inner());
            *st = Chunks::EMPTY;
            st.chunks = size / CHUNK;
            st.file_len = file_len;
            st.fd = fd;
        }
        LEN[index].store(size, Ordering::Relaxed);
        OWNER[index].store(pid(), Ordering::Relaxed);
        BASE[index].store(base as usize, Ordering::Release);
        tracing::debug!(path = %path.display(), reused = file_len, "shared-memory pool slot claimed");
        return Ok(());
    }
    Err(std::io::Error::other(format!(
        "all {MAX_FILES} slots of {} are held",
        dir.display()
    )))
}

/// Whether `ptr` lies in an arena this process knows of.
pub fn in_arena(ptr: *const u8) -> bool {
    arena_of(ptr.cast_mut()).is_some()
}

/// Bytes of this process's arena in use, and its file's length (0, 0 without one).
pub fn usage() -> (usize, usize) {
    own_arena().map_or((0, 0), |i| {
        let st = STATE[i].lock().unwrap_or_else(|p| p.into_inner());
        let used = (0..st.chunks).filter(|&c| st.is_used(c)).count() * CHUNK;
        (used, st.file_len)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_takes_the_lowest_run_and_frees_merge() {
        let mut c = Chunks::EMPTY;
        c.chunks = 10;
        c.set(0, 2, true);
        c.set(3, 1, true);
        assert_eq!(c.first_fit(1), Some(2));
        assert_eq!(c.first_fit(2), Some(4));
        assert_eq!(c.first_fit(7), None);
        c.set(3, 1, false);
        assert_eq!(c.first_fit(8), Some(2));
    }
}
