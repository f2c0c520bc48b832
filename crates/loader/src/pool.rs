//! Reused buffers. A fresh 140 MiB allocation page-faults on each of its 4 KiB pages the
//! first time it is written, which costs more CPU than the copy itself (2–3× here); a buffer
//! that comes back to the pool when its last reader drops it is already mapped.

use bytes::{Bytes, BytesMut};
use std::sync::{Arc, Mutex, Weak};

#[derive(Debug)]
pub struct BufferPool {
    free: Mutex<Vec<BytesMut>>,
    /// Keep at most this many idle buffers...
    max_idle: usize,
    /// ...and at most this many bytes of them.
    max_idle_bytes: usize,
}

impl BufferPool {
    /// A loader sizes `max_idle` to its prefetch window: in a steady epoch every buffer
    /// that comes back is taken again by the next fetch, so the pool never holds more than
    /// the window's worth and peak memory stays that of the buffers in flight.
    pub fn new(max_idle: usize, max_idle_bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            free: Mutex::default(),
            max_idle,
            max_idle_bytes,
        })
    }

    /// The pool a loader with this prefetch window (and memory budget) needs: the window,
    /// plus what a consumer typically holds (a batch; DLIO takes 7), so that every buffer of
    /// one epoch is still there for the next. Idle buffers were all alive at once before, so
    /// keeping them never raises the peak.
    pub fn for_prefetch(prefetch: usize, memory_budget: Option<u64>) -> Arc<Self> {
        Self::new(
            2 * prefetch + 8,
            memory_budget.map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX)),
        )
    }

    /// For a body of unknown size: the largest idle buffer (the likeliest to fit; a growable
    /// segment reallocates only if it does not), else an empty one.
    pub fn take_largest(&self) -> BytesMut {
        let mut free = self.free.lock().unwrap();
        let largest = free
            .iter()
            .enumerate()
            .max_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        largest.map_or_else(BytesMut::new, |i| free.swap_remove(i))
    }

    /// A cleared buffer with at least `len` bytes of capacity: the smallest idle one that
    /// fits, else a new allocation. `None` when the system cannot provide it (the caller
    /// reports the object; an impossible size must not abort the process).
    pub fn try_take(&self, len: usize) -> Option<BytesMut> {
        let mut free = self.free.lock().unwrap();
        let best = free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let mut b = free.swap_remove(i);
                b.clear();
                Some(b)
            }
            None => {
                drop(free);
                // BytesMut cannot report a failed allocation (it aborts): ask a Vec first.
                // Unmapped memory costs nothing, so the probe is an mmap/munmap pair.
                Vec::<u8>::new().try_reserve_exact(len).ok()?;
                let buf = BytesMut::with_capacity(len);
                crate::hugepages::advise(&buf);
                Some(buf)
            }
        }
    }

    /// As `try_take`, for sizes known to be reasonable (tests).
    pub fn take(&self, len: usize) -> BytesMut {
        self.try_take(len)
            .expect("allocation of a test-sized buffer")
    }

    pub(crate) fn give_back(&self, mut buf: BytesMut) {
        buf.clear();
        let mut free = self.free.lock().unwrap();
        let idle: usize = free.iter().map(BytesMut::capacity).sum();
        if free.len() < self.max_idle && idle + buf.capacity() <= self.max_idle_bytes {
            free.push(buf);
        }
    }

    /// Bytes currently idle in the pool.
    pub fn idle_bytes(&self) -> usize {
        self.free
            .lock()
            .unwrap()
            .iter()
            .map(BytesMut::capacity)
            .sum()
    }

    /// Wraps a finished buffer so that when the last `Bytes` handle to it (a Python object
    /// included) is dropped, its memory returns here instead of to the allocator.
    pub fn share(self: &Arc<Self>, data: Bytes) -> Bytes {
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
        if let (Some(data), Some(pool)) = (self.data.take(), self.pool.upgrade())
            && let Ok(buf) = data.try_into_mut()
        {
            pool.give_back(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn idle_memory_is_capped() {
        let pool = BufferPool::new(4, 1500);
        let a = pool.share(pool.take(1000).freeze());
        let b = pool.share(BytesMut::with_capacity(1000).freeze());
        drop(a);
        drop(b);
        assert!(pool.idle_bytes() <= 1500);
    }
}
