//! The memory of a client's streaming uploads' parts, used again: a part's buffer, once its
//! upload has been answered, holds the next part copied in.
//!
//! A part copied into fresh memory is page-faulted in as it is filled, and faulting costs
//! more than the copy: `sluice.torch.save` of a 1 GiB state dict spent about as much CPU
//! faulting in the parts it copied as torch spent serialising (docs/benchmarks.md). The
//! loader's `BufferPool` does the same for reads; this one is smaller because every part of
//! an upload has one size, and lives here because the writers that fill parts are core's.

use bytes::{Bytes, BytesMut};
use std::sync::Mutex;

/// Idle part buffers kept at most: enough for the parts one upload has in flight at the
/// start of the next (8 of the default 16 MiB), not so much that a process that wrote one
/// checkpoint keeps a window's worth of memory between them.
pub(crate) const IDLE_PART_BYTES: usize = 128 << 20;

/// A client's idle part buffers (`PartsWindow::buffers`).
#[derive(Debug, Default)]
pub(crate) struct PartBuffers {
    idle: Mutex<Vec<BytesMut>>,
}

impl PartBuffers {
    /// An empty buffer with room for `len` bytes: an idle one that fits, else a new one.
    pub(crate) fn take(&self, len: usize) -> BytesMut {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        match idle.iter().position(|b| b.capacity() >= len) {
            Some(i) => {
                let mut buf = idle.swap_remove(i);
                buf.clear();
                buf
            }
            None => BytesMut::with_capacity(len),
        }
    }

    /// `part`'s memory, once nothing else holds it (its upload answered), kept for a later
    /// part while the idle bytes stay within [`IDLE_PART_BYTES`]. A part that shares its
    /// memory (a slice of a caller's buffer, sent without a copy) is simply dropped.
    pub(crate) fn give_back(&self, part: Bytes) {
        let Ok(buf) = part.try_into_mut() else {
            return;
        };
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let held: usize = idle.iter().map(BytesMut::capacity).sum();
        if held + buf.capacity() <= IDLE_PART_BYTES {
            idle.push(buf);
        }
    }

    #[cfg(test)]
    fn idle_bytes(&self) -> usize {
        self.idle
            .lock()
            .unwrap()
            .iter()
            .map(BytesMut::capacity)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_answered_lends_its_memory_to_the_next() {
        let buffers = PartBuffers::default();
        let mut first = buffers.take(1 << 20);
        first.extend_from_slice(&[7; 1 << 20]);
        let addr = first.as_ptr();
        let part = first.freeze();
        let in_flight = part.clone();
        // Still held by the request: nothing comes back.
        buffers.give_back(part);
        assert_eq!(buffers.idle_bytes(), 0);
        buffers.give_back(in_flight);
        assert_eq!(buffers.idle_bytes(), 1 << 20);
        let next = buffers.take(1 << 20);
        assert_eq!(
            (next.as_ptr(), next.len()),
            (addr, 0),
            "the same memory, emptied"
        );
        // Smaller than asked for: a new one.
        assert!(buffers.take(2 << 20).capacity() >= 2 << 20);
    }

    #[test]
    fn idle_memory_is_capped() {
        let buffers = PartBuffers::default();
        for _ in 0..(IDLE_PART_BYTES >> 24) + 2 {
            let mut b = BytesMut::with_capacity(16 << 20);
            b.extend_from_slice(&[0; 16]);
            buffers.give_back(b.freeze());
        }
        assert!(buffers.idle_bytes() <= IDLE_PART_BYTES);
        assert!(buffers.idle_bytes() >= IDLE_PART_BYTES - (16 << 20));
    }
}
