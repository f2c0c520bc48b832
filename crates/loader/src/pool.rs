//! Reused buffers. A fresh 140 MiB allocation page-faults on each of its 4 KiB pages the
//! first time it is written, which costs more CPU than the copy itself (2–3× here); a buffer
//! that comes back to the pool when its last reader drops it is already mapped.

use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Buffers kept for reuse across objects and epochs, so that an object's bytes land in
/// memory the process has already touched. A fetch takes a buffer (`try_take`), and the
/// bytes it delivers (`share`) hand their memory back here when the last handle to them is
/// dropped. Idle memory is bounded by a buffer count and a byte cap (see `new`). Loaders
/// with the same prefetch window and budget share one pool per process by default
/// (`shared`).
#[derive(Debug)]
pub struct BufferPool {
    state: Mutex<State>,
    /// Keep at most this many idle buffers...
    max_idle: usize,
    /// ...and at most this many bytes of them, or what the consumer held at once lately,
    /// if more and the cap is not `hard`.
    max_idle_bytes: usize,
    hard: bool,
}

/// Idle bytes the pool of one-call reads (`get_one`, `get_many`) keeps: one call of 1,000
/// objects of 128 KiB, the small-object regime where fresh pages cost most per byte.
pub const GET_MANY_IDLE: usize = 128 << 20;

/// Which of a process's pools (`BufferPool::per_process`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// Loaders with this window (objects in flight at most) and memory budget.
    Window(usize, Option<u64>),
    GetMany,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Window(window, None) => write!(f, "loader window {window}"),
            Kind::Window(window, Some(budget)) => {
                write!(f, "loader window {window}, budget {budget} B")
            }
            Kind::GetMany => f.write_str("get/get_many"),
        }
    }
}

/// Runs `f` on this process's pools, by kind. After a fork the child starts a map of its
/// own; the parent's is forgotten, never dropped (its pools may be mid-use by threads the
/// child lacks).
fn with_process_pools<R>(f: impl FnOnce(&mut HashMap<Kind, Arc<BufferPool>>) -> R) -> R {
    type Pools = HashMap<Kind, Arc<BufferPool>>;
    static POOLS: Mutex<Option<(u32, Pools)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    if slot.as_ref().is_none_or(|(owner, _)| *owner != pid) {
        if let Some(inherited) = slot.take() {
            std::mem::forget(inherited);
        }
        *slot = Some((pid, HashMap::new()));
    }
    let (_, pools) = slot.as_mut().expect("set above");
    f(pools)
}

/// What a pool holds at one moment ([`BufferPool::stats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStats {
    /// Which pool: `loader window N[, budget B]` or `get/get_many`.
    pub name: String,
    /// Buffers kept for reuse.
    pub idle_buffers: usize,
    /// Their capacity in bytes: memory the process keeps touched for the next objects.
    pub idle_bytes: usize,
    /// Bytes of delivered objects not yet dropped (the consumer's, or waiting for it).
    pub held_bytes: usize,
    /// The most held at once lately: in the last one to two minutes (`RecentPeak`).
    pub peak_held_bytes: usize,
    /// The most idle bytes the pool keeps now (its byte cap, or the peak held if more and
    /// the cap is not hard).
    pub idle_cap_bytes: usize,
}

#[derive(Debug, Default)]
struct State {
    free: Vec<Idle>,
    /// Buffers taken so far: the clock idle buffers age by. Counted in takes rather than
    /// time, so that a pause between epochs ages nothing.
    takes: u64,
    /// Bytes of finished objects not yet dropped (waiting to be taken, or held by the
    /// consumer), and the most there were at once lately.
    held: usize,
    peak_held: RecentPeak,
}

impl State {
    fn idle_bytes(&self) -> usize {
        self.free.iter().map(|i| i.buf.capacity()).sum()
    }

    /// Idle buffer `i`, taken.
    fn take_idle(&mut self, i: usize) -> BytesMut {
        self.free.swap_remove(i).buf
    }

    /// One more take: the clock moves on, and idle buffers that no take chose in the last
    /// `horizon` takes leave the pool (for the caller to free outside the lock). Only a take
    /// moves the clock, so this is the one place buffers grow stale.
    ///
    /// Without this, the idle buffers drift towards the largest sizes when objects differ
    /// in size, until they fill the caps: each take picks the smallest that fits, so the
    /// largest sit idle, and whenever none fits a larger one joins them. In the 30-minute
    /// fault soak (objects of 64 KiB to 24 MiB) the pools' idle memory grew from 324 to 396
    /// MiB while the most held at once stayed at 200-225 MiB.
    fn tick(&mut self, horizon: u64) -> Vec<Idle> {
        self.takes += 1;
        let now = self.takes;
        self.free
            .extract_if(.., |i| now - i.returned_at > horizon)
            .collect()
    }

    /// `held` changed (or the cap is about to be read): the window moves on to now.
    fn held_now(&mut self) {
        self.peak_held.roll(Instant::now(), self.held);
    }
}

/// A buffer in the pool, and when it came back (`State::takes` then).
#[derive(Debug)]
struct Idle {
    buf: BytesMut,
    returned_at: u64,
}

/// How long one window of `RecentPeak` lasts: many batch cycles of a training loop (so the
/// peak a steady epoch reaches is always in it), short enough that what the consumer held
/// at one rare moment stops setting what the pool keeps within two minutes.
const PEAK_WINDOW: Duration = Duration::from_secs(60);

/// The most bytes held at once lately: the larger of this window's peak and the previous
/// window's. An all-time peak only ever rises, with the rarest coincidence of large objects
/// in flight together; in a 30-minute fault soak the loader pool's idle memory followed it
/// from 213 to 250 MiB, and RSS with it, with no more held at any one time than before.
#[derive(Debug, Default, Clone, Copy)]
struct RecentPeak {
    current: usize,
    previous: usize,
    /// When the current window began (`None` before the first bytes were held).
    since: Option<Instant>,
}

impl RecentPeak {
    /// `held` bytes are held at `now`.
    fn roll(&mut self, now: Instant, held: usize) {
        let since = *self.since.get_or_insert(now);
        let elapsed = now.saturating_duration_since(since);
        if elapsed >= PEAK_WINDOW {
            // Two windows on, nothing was noted for a whole window: what was held through it
            // is what is held now.
            self.previous = if elapsed >= 2 * PEAK_WINDOW {
                held
            } else {
                self.current
            };
            self.current = held;
            self.since = Some(now);
        }
        self.current = self.current.max(held);
    }

    fn get(&self) -> usize {
        self.current.max(self.previous)
    }
}

impl BufferPool {
    /// A loader sizes `max_idle` to its prefetch window: in a steady epoch every buffer
    /// that comes back is taken again by the next fetch, so the pool never holds more than
    /// the window's worth and peak memory stays that of the buffers in flight. Idle bytes
    /// are capped by `max_idle_bytes`, or by the most the consumer ever held at once if
    /// that is more: a consumer that keeps batches (DLIO's loop holds two of 7) returns them
    /// together, and keeping them spares the next batch fresh pages without raising the
    /// peak (they were all alive at once before).
    pub fn new(max_idle: usize, max_idle_bytes: usize) -> Arc<Self> {
        Self::build(max_idle, max_idle_bytes, false)
    }

    /// As `new`, but idle bytes never exceed `max_idle_bytes`, whatever the consumer once
    /// held: for a consumer that keeps everything it asks for (`get_many`), whose peak says
    /// nothing about what the next call will want.
    pub fn capped(max_idle: usize, max_idle_bytes: usize) -> Arc<Self> {
        Self::build(max_idle, max_idle_bytes, true)
    }

    fn build(max_idle: usize, max_idle_bytes: usize, hard: bool) -> Arc<Self> {
        // What the pool frees goes back to the kernel, not only to glibc (see `trim`).
        crate::trim::start();
        Arc::new(Self {
            state: Mutex::default(),
            max_idle,
            max_idle_bytes,
            hard,
        })
    }

    /// The pool a loader with this prefetch window (and memory budget) needs: the window,
    /// plus what a consumer typically holds (a batch; DLIO takes 7), so that every buffer of
    /// one epoch is still there for the next.
    pub fn for_prefetch(prefetch: usize, memory_budget: Option<u64>) -> Arc<Self> {
        Self::new(
            2 * prefetch + 8,
            memory_budget.map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX)),
        )
    }

    /// This process's pool for a window of `prefetch` objects (and `memory_budget`): the
    /// one every loader with the same window shares, so that the loader of the next epoch
    /// (a new [`Loader`](crate::Loader), as each front end makes per epoch) lands its bytes in the memory the
    /// previous one already touched. After a fork the child starts its own pools; the
    /// parent's copies are left alone (they may be mid-use by threads the child lacks).
    pub fn shared(prefetch: usize, memory_budget: Option<u64>) -> Arc<Self> {
        Self::per_process(Kind::Window(prefetch, memory_budget), || {
            Self::for_prefetch(prefetch, memory_budget)
        })
    }

    /// This process's pool for reads a caller asks for one call at a time (`get_one`,
    /// `get_many` in `many.rs`: Python's `get`, `get_range`, `get_many`): hard-capped at
    /// `GET_MANY_IDLE` bytes, so the bytes of one call land in memory the previous call
    /// touched while what a caller once kept is never held on to beyond that. (A pool of
    /// its own per call put every object in fresh pages: 0.67× the Rust rate at 128 KiB;
    /// following the caller's peak, as loaders' pools do, doubled a soak's RSS.)
    pub fn for_get_many() -> Arc<Self> {
        Self::per_process(Kind::GetMany, || Self::capped(4096, GET_MANY_IDLE))
    }

    fn per_process(kind: Kind, make: impl FnOnce() -> Arc<Self>) -> Arc<Self> {
        with_process_pools(|pools| pools.entry(kind).or_insert_with(make).clone())
    }

    /// What each of this process's shared pools (loaders' windows, one-call reads) holds
    /// now, for a caller watching its memory (Python's `sluice.buffer_pools()`, the soak).
    /// Pools of a loader's own (`LoaderOptions::with_own_pool`) are not listed.
    pub fn process_pools() -> Vec<PoolStats> {
        let mut out: Vec<PoolStats> = with_process_pools(|pools| {
            pools
                .iter()
                .map(|(kind, pool)| pool.stats(kind.to_string()))
                .collect()
        });
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Takes after which an idle buffer none of them chose is freed (`State::tick`): four
    /// times the buffers the pool keeps, so that a buffer that serves any object of a
    /// regular mix (an epoch's largest) stays while one that serves none goes.
    fn horizon(&self) -> u64 {
        u64::try_from(self.max_idle).unwrap_or(u64::MAX / 4) * 4
    }

    /// What this pool holds now, under `name`.
    pub fn stats(&self, name: String) -> PoolStats {
        let mut state = self.state.lock().unwrap();
        state.held_now();
        PoolStats {
            name,
            idle_buffers: state.free.len(),
            idle_bytes: state.idle_bytes(),
            held_bytes: state.held,
            peak_held_bytes: state.peak_held.get(),
            idle_cap_bytes: self.idle_cap(&state),
        }
    }

    /// For a body of unknown size: the largest idle buffer (the likeliest to fit; a growable
    /// segment reallocates only if it does not), else an empty one.
    pub fn take_largest(&self) -> BytesMut {
        let mut state = self.state.lock().unwrap();
        let stale = state.tick(self.horizon());
        let largest = state
            .free
            .iter()
            .enumerate()
            .max_by_key(|(_, b)| b.buf.capacity())
            .map(|(i, _)| i);
        let buf = largest.map_or_else(BytesMut::new, |i| state.take_idle(i));
        drop(state);
        drop(stale); // freed outside the lock
        buf
    }

    /// A cleared buffer with at least `len` bytes of capacity: the smallest idle one that
    /// fits, else a new allocation. `None` when the system cannot provide it (the caller
    /// reports the object; an impossible size must not abort the process).
    pub fn try_take(&self, len: usize) -> Option<BytesMut> {
        let mut state = self.state.lock().unwrap();
        let stale = state.tick(self.horizon());
        let best = state
            .free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.buf.capacity() >= len)
            .min_by_key(|(_, b)| b.buf.capacity())
            .map(|(i, _)| i);
        if let Some(i) = best {
            let mut b = state.take_idle(i);
            drop(state);
            drop(stale); // freed outside the lock
            b.clear();
            return Some(b);
        }
        // Idle buffers too small for this one make way for it, smallest first, so that idle
        // and new memory together stay within what was held at once.
        state.held_now();
        let cap = self.idle_cap(&state);
        state
            .free
            .sort_unstable_by_key(|b| std::cmp::Reverse(b.buf.capacity()));
        let mut evicted = stale;
        while state.idle_bytes() + len > cap
            && let Some(b) = state.free.pop()
        {
            evicted.push(b);
        }
        drop(state);
        drop(evicted); // freed outside the lock
        // BytesMut cannot report a failed allocation (it aborts): ask a Vec first.
        // Unmapped memory costs nothing, so the probe is an mmap/munmap pair.
        Vec::<u8>::new().try_reserve_exact(len).ok()?;
        // From the shared-memory arena when one is configured (`shm`): pages an earlier
        // process already faulted in.
        let buf = crate::shm::pool_alloc(|| BytesMut::with_capacity(len));
        crate::fresh::prepare(&buf);
        Some(buf)
    }

    /// As `try_take`, for the bytes of `uri`: no memory is an error naming it.
    pub fn take_for(
        &self,
        uri: &sluice_core::ObjectUri,
        len: usize,
    ) -> sluice_core::Result<BytesMut> {
        self.try_take(len).ok_or_else(|| {
            sluice_core::Error::integrity(
                uri.to_string(),
                format!("cannot allocate {len} bytes for this object"),
            )
        })
    }

    /// As `try_take`, for sizes known to be reasonable (tests).
    pub fn take(&self, len: usize) -> BytesMut {
        self.try_take(len)
            .expect("allocation of a test-sized buffer")
    }

    /// A buffer taken and never delivered, back for reuse; one without memory (a counting
    /// segment's) is not kept.
    pub fn give_back(&self, buf: BytesMut) {
        if buf.capacity() > 0 {
            self.returned(0, Some(buf));
        }
    }

    /// A delivered buffer of `len` bytes came back (`buf`: its memory, when reusable).
    fn returned(&self, len: usize, buf: Option<BytesMut>) {
        let mut state = self.state.lock().unwrap();
        state.held = state.held.saturating_sub(len);
        state.held_now();
        let Some(mut buf) = buf else { return };
        if state.free.len() < self.max_idle
            && state.idle_bytes() + buf.capacity() <= self.idle_cap(&state)
        {
            buf.clear();
            let returned_at = state.takes;
            state.free.push(Idle { buf, returned_at });
        } else {
            drop(state); // a buffer not kept is freed outside the lock
        }
    }

    /// The most idle memory to keep: the configured bytes, or what was held at once lately if
    /// more.
    /// (`held` counts object lengths, idle counts capacities, which may be larger: the cap
    /// errs on the side of keeping less.)
    fn idle_cap(&self, state: &State) -> usize {
        if self.hard {
            self.max_idle_bytes
        } else {
            self.max_idle_bytes.max(state.peak_held.get())
        }
    }

    /// Bytes currently idle in the pool.
    pub fn idle_bytes(&self) -> usize {
        self.state.lock().unwrap().idle_bytes()
    }

    /// Wraps a finished buffer so that when the last `Bytes` handle to it (a Python object
    /// included) is dropped, its memory returns here instead of to the allocator.
    pub fn share(self: &Arc<Self>, data: Bytes) -> Bytes {
        {
            let mut state = self.state.lock().unwrap();
            state.held += data.len();
            state.held_now();
        }
        Bytes::from_owner(Pooled {
            data: Some(data),
            pool: Arc::downgrade(self),
        })
    }
}

struct Pooled {
    data: Option<Bytes>,
    pool: Weak<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        self.data.as_deref().unwrap_or_default()
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let (Some(data), Some(pool)) = (self.data.take(), self.pool.upgrade()) {
            let len = data.len();
            pool.returned(len, data.try_into_mut().ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaders_of_one_window_share_the_process_pool() {
        let a = BufferPool::shared(7, Some(1 << 20));
        assert!(Arc::ptr_eq(&a, &BufferPool::shared(7, Some(1 << 20))));
        assert!(!Arc::ptr_eq(&a, &BufferPool::shared(7, None)));
        assert!(!Arc::ptr_eq(&a, &BufferPool::shared(8, Some(1 << 20))));
    }

    #[test]
    fn memory_returns_when_the_last_handle_drops() {
        let pool = BufferPool::new(4, 1 << 20);
        let mut b = pool.take(1000);
        let addr = b.as_ptr() as usize;
        b.extend_from_slice(&[1; 1000]);
        let shared = pool.share(b.freeze());
        let clone = shared.clone();
        drop(shared);
        assert_eq!(pool.idle_bytes(), 0, "still referenced");
        assert_eq!(clone[999], 1);
        drop(clone);
        assert!(pool.idle_bytes() >= 1000);
        let again = pool.take(500);
        assert_eq!(again.as_ptr() as usize, addr, "the same memory is reused");
    }

    #[test]
    fn idle_memory_never_exceeds_what_was_held_at_once() {
        // One object of 1000 B, then one of 2000 B that the idle 1000 cannot hold: both
        // buffers come back, but they were never alive together, so only one stays.
        let pool = BufferPool::new(4, 1000);
        drop(filled(&pool, 1000));
        assert_eq!(pool.idle_bytes(), 1000);
        drop(filled(&pool, 2000));
        assert!(
            pool.idle_bytes() <= 2000,
            "idle {} B, more than the 2000 B ever held at once",
            pool.idle_bytes()
        );
    }

    #[test]
    fn a_capped_pool_keeps_no_more_than_its_cap_whatever_was_held() {
        // Ten buffers of 1000 B alive at once, then all dropped: a pool following the peak
        // would keep all ten, a capped one keeps three.
        let pool = BufferPool::capped(64, 3000);
        let held: Vec<_> = (0..10).map(|_| filled(&pool, 1000)).collect();
        drop(held);
        assert_eq!(pool.idle_bytes(), 3000);
        // And the idle ones serve the next objects: nothing new until they are used up.
        let again: Vec<_> = (0..3).map(|_| pool.take(1000)).collect();
        assert_eq!(pool.idle_bytes(), 0);
        drop(again);
        let follows = BufferPool::new(64, 3000);
        drop((0..10).map(|_| filled(&follows, 1000)).collect::<Vec<_>>());
        assert_eq!(
            follows.idle_bytes(),
            10_000,
            "an uncapped pool keeps its peak"
        );
    }

    #[test]
    fn a_new_size_evicts_idle_buffers_it_cannot_use() {
        // The consumer held two 1000 B objects at once; then objects of 2000 B arrive. The
        // idle 2000 B cannot hold one: they make way rather than sit beside the new buffer.
        let pool = BufferPool::new(8, 0);
        let two = [filled(&pool, 1000), filled(&pool, 1000)];
        drop(two);
        assert_eq!(pool.idle_bytes(), 2000);
        let big = pool.take(2000);
        assert!(
            pool.idle_bytes() + big.capacity() <= 2000,
            "idle {} B beside a new {} B buffer, more than the 2000 B ever held",
            pool.idle_bytes(),
            big.capacity()
        );
    }

    #[test]
    fn the_peak_that_sets_the_cap_is_the_last_windows_not_the_all_time_one() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut peak = RecentPeak::default();
        peak.roll(at(0), 100);
        peak.roll(at(1), 10);
        assert_eq!(peak.get(), 100, "within the window");
        peak.roll(at(61), 20);
        assert_eq!(peak.get(), 100, "the previous window still counts");
        peak.roll(at(125), 30);
        assert_eq!(peak.get(), 30, "two windows on, the burst no longer counts");
        // A quiet stretch: nothing noted for minutes, 5 bytes held throughout.
        peak.roll(at(126), 5);
        peak.roll(at(400), 5);
        assert_eq!(peak.get(), 5, "what was held through the quiet windows");
        // A clock that reads earlier (another thread's Instant) never panics or rolls.
        peak.roll(at(300), 7);
        assert_eq!(peak.get(), 7);
    }

    #[test]
    fn a_buffer_no_take_chooses_for_a_while_is_let_go() {
        // One large and one small object alive at once, then both back.
        let pool = BufferPool::new(4, usize::MAX);
        drop([filled(&pool, 10_000), filled(&pool, 100)]);
        assert_eq!(pool.idle_bytes(), 10_100);
        // Small objects, with a large one every 10th: the large buffer serves it each time.
        for i in 1..=40 {
            drop(filled(&pool, if i % 10 == 0 { 10_000 } else { 100 }));
        }
        assert_eq!(pool.idle_bytes(), 10_100, "both buffers still in use");
        // Small objects only: the small buffer serves every one, the large one sits idle
        // and goes once 16 takes (4 × the 4 buffers kept) have passed it by.
        for _ in 0..10 {
            drop(filled(&pool, 100));
        }
        assert_eq!(pool.idle_bytes(), 10_100, "within the horizon");
        for _ in 0..10 {
            drop(filled(&pool, 100));
        }
        assert_eq!(pool.idle_bytes(), 100, "the large buffer is freed");
    }

    fn filled(pool: &Arc<BufferPool>, len: usize) -> Bytes {
        let mut b = pool.take(len);
        b.resize(len, 7);
        pool.share(b.freeze())
    }

    #[test]
    fn what_a_consumer_held_at_once_is_kept_for_its_next_batch() {
        // A budget of one object; the consumer holds three at once, then returns them.
        let pool = BufferPool::new(8, 1000);
        let batch: Vec<Bytes> = (0..3).map(|_| filled(&pool, 1000)).collect();
        let addrs: Vec<usize> = batch.iter().map(|b| b.as_ptr() as usize).collect();
        drop(batch);
        assert_eq!(
            pool.idle_bytes(),
            3000,
            "all three kept: they were alive at once"
        );
        let again: Vec<Bytes> = (0..3).map(|_| filled(&pool, 1000)).collect();
        let mut reused: Vec<usize> = again.iter().map(|b| b.as_ptr() as usize).collect();
        reused.sort();
        let mut addrs = addrs;
        addrs.sort();
        assert_eq!(reused, addrs, "the next batch lands in the same memory");
    }
}
