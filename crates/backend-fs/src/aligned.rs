//! Buffers aligned for O_DIRECT, pooled so that a read does not fault in fresh memory.

use std::sync::Mutex;

/// O_DIRECT needs offsets, lengths and memory aligned to the device's logical block size:
/// 512 B on most devices, 4 KiB on some; 4 KiB satisfies both.
pub const ALIGN: usize = 4096;
/// Bytes per O_DIRECT read: large enough that a read costs far more than its syscall.
pub const CHUNK: usize = 4 << 20;
/// Buffers kept for reuse (the rest are freed): one per concurrent reader is plenty.
const KEEP: usize = 32;

/// `CHUNK` bytes starting at an `ALIGN` boundary inside a slightly larger allocation (safe
/// code cannot ask the allocator for alignment; moving the `Vec` keeps its heap address).
#[derive(Debug)]
pub struct AlignedBuf {
    mem: Vec<u8>,
    offset: usize,
}

impl AlignedBuf {
    fn new() -> Self {
        let mem = vec![0u8; CHUNK + ALIGN];
        let offset = mem.as_ptr().align_offset(ALIGN);
        Self { mem, offset }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.mem[self.offset..self.offset + CHUNK]
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.mem[self.offset..self.offset + CHUNK]
    }
}

#[derive(Debug, Default)]
pub struct Pool {
    free: Mutex<Vec<AlignedBuf>>,
}

impl Pool {
    pub fn take(&self) -> AlignedBuf {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_else(AlignedBuf::new)
    }

    pub fn give_back(&self, buf: AlignedBuf) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < KEEP {
            free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_sized() {
        let pool = Pool::default();
        let mut b = pool.take();
        assert_eq!(b.as_mut_slice().as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.as_slice().len(), CHUNK);
        let addr = b.as_slice().as_ptr();
        pool.give_back(b);
        assert_eq!(
            pool.take().as_slice().as_ptr(),
            addr,
            "reused, still aligned"
        );
    }
}
