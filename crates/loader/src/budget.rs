//! The loader's memory budget: bytes of objects being read or waiting to be taken.
//!
//! An object's memory is taken as its requests go out, not all at admission: the first
//! piece when the object is admitted, then each range just before its GET. With whole
//! objects reserved up front, a budget smaller than two objects (the default 256 MiB against
//! 146 MB unet3d records) read one object at a time, stop and go: the next object's GETs
//! waited until the last range of the one before had arrived and been taken. Taken range by
//! range, the next object's first ranges go out while the last ones of the object before
//! are still arriving (measured in docs/benchmarks.md: the Python [`Loader`]'s first pass).
//!
//! One object takes memory at a time, in dataset order: an admitted object holds the *turn*
//! until it holds all the memory it will need, and the next admission waits for the turn.
//! So the only object that may hold part of its memory while waiting for more is the one
//! with the turn, and every object before it holds all of its own: those finish, are taken
//! and give their memory back, whatever order the consumer takes them in. No deadlock.
//!
//! An object named without a size is budgeted at a guess (the largest size the loader has
//! seen) and gives up the turn at once when the guess says one request will read it, so that
//! small objects are not admitted one round trip at a time. One that turns out larger than
//! its guess holds no turn, so it never waits: it takes what memory is free and reads the
//! rest over the budget ([`Reservation::over`]). Only objects larger than every object seen
//! before their admission can do so; a dataset listed with its sizes never does. One that
//! turns out smaller gives back the difference ([`Reservation::learned`]).
//!
//! The budget holds the bytes set plus one object of the largest size seen. An object is
//! handed out whole, so it holds the memory of every range that has arrived until its last
//! one has; with objects of half the budget or more, the bytes set were mostly held by
//! objects being finished, and the ranges they left room for could not fill a link (the
//! Python `Loader` of 146.6 MB objects under `s3-standard`, docs/benchmarks.md). The bytes
//! set bound the ranges in flight and the objects waiting; the one object beyond them is
//! the one being finished.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Memory permits count 64 KiB units so any object size fits a `u32` permit count.
const MEMORY_UNIT: u64 = 64 * 1024;

/// The units of `bytes` (at least one).
fn to_units(bytes: u64) -> u32 {
    bytes.div_ceil(MEMORY_UNIT).clamp(1, u64::from(u32::MAX)) as u32
}

/// Bytes of memory as permits of a semaphore, shared by clones: what the loader's budget
/// and `sluice get`'s GETs in flight take before they hold bytes.
#[derive(Debug, Clone)]
pub struct MemoryUnits {
    units: Arc<Semaphore>,
    /// Units in all: it only grows (`grow_to`).
    total: Arc<AtomicU32>,
}

impl MemoryUnits {
    /// `bytes` of memory (at least one unit).
    pub fn new(bytes: u64) -> Self {
        let total = to_units(bytes);
        Self {
            units: Arc::new(Semaphore::new(total as usize)),
            total: Arc::new(AtomicU32::new(total)),
        }
    }

    /// The units that hold `bytes`: all of them for more than the whole, so that a piece
    /// larger than the budget waits for all of it rather than for ever.
    fn units_for(&self, bytes: u64) -> u32 {
        bytes
            .div_ceil(MEMORY_UNIT)
            .clamp(1, u64::from(self.total.load(Ordering::Relaxed))) as u32
    }

    /// At least `bytes` in all from now on: the difference is free at once.
    fn grow_to(&self, bytes: u64) {
        let want = to_units(bytes);
        let before = self.total.fetch_max(want, Ordering::Relaxed);
        if want > before {
            self.units.add_permits((want - before) as usize);
        }
    }

    /// Waits until `bytes` fit; given back when the permit is dropped.
    pub async fn hold(&self, bytes: u64) -> OwnedSemaphorePermit {
        self.take(self.units_for(bytes)).await
    }

    async fn take(&self, units: u32) -> OwnedSemaphorePermit {
        let semaphore = self.units.clone();
        semaphore
            .acquire_many_owned(units)
            .await
            .expect("never closed")
    }

    /// Up to `units` of those free now, without waiting (`None` when none are).
    fn take_free(&self, units: u32) -> Option<OwnedSemaphorePermit> {
        let free = u32::try_from(self.units.available_permits()).unwrap_or(u32::MAX);
        match units.min(free) {
            0 => None,
            n => self.units.clone().try_acquire_many_owned(n).ok(),
        }
    }

    #[cfg(test)]
    pub(crate) fn available(&self) -> u64 {
        self.units.available_permits() as u64 * MEMORY_UNIT
    }
}

/// A loader's budget: the bytes set, and room for one object of the largest size seen
/// besides (see the module's doc).
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    memory: MemoryUnits,
    turn: Arc<Semaphore>,
    bytes: u64,
}

impl Budget {
    pub(crate) fn new(bytes: u64) -> Self {
        Self {
            memory: MemoryUnits::new(bytes),
            turn: Arc::new(Semaphore::new(1)),
            bytes,
        }
    }

    /// An object of `size` bytes was seen: from now on the budget has room for one of them
    /// beyond the bytes set.
    pub(crate) fn room_for(&self, size: u64) {
        self.memory.grow_to(self.bytes.saturating_add(size));
    }

    /// Waits for the turn, then for memory for the object's first `first` bytes. Cancel-safe:
    /// what was taken before a cancellation is given back.
    pub(crate) async fn admit(&self, first: u64) -> Reservation {
        let turn = self
            .turn
            .clone()
            .acquire_owned()
            .await
            .expect("never closed");
        let mut r = Reservation {
            budget: self.clone(),
            held: None,
            turn: Some(turn),
            over: 0,
        };
        r.cover(first).await;
        r
    }
}

/// The memory one admitted object holds (given back when dropped), and while it may still
/// need more, the turn.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Budget,
    held: Option<OwnedSemaphorePermit>,
    turn: Option<OwnedSemaphorePermit>,
    /// Bytes covered beyond what could be held, without the turn (see the module's doc).
    over: u64,
}

impl Reservation {
    /// Holds memory for the object's first `bytes` bytes. With the turn it waits for that
    /// memory as needed; an object larger than the whole budget holds all of it and reads
    /// the rest under that. Without the turn it never waits: what is not free now is
    /// counted in [`over`](Self::over) instead.
    pub(crate) async fn cover(&mut self, bytes: u64) {
        let memory = &self.budget.memory;
        let want = memory.units_for(bytes);
        let have = self.held_units();
        if want <= have {
            return;
        }
        let more = if self.turn.is_some() {
            Some(memory.take(want - have).await)
        } else {
            memory.take_free(want - have)
        };
        if let Some(more) = more {
            match &mut self.held {
                Some(held) => held.merge(more),
                None => self.held = Some(more),
            }
        }
        let short = want.saturating_sub(self.held_units());
        self.over = self.over.max(u64::from(short) * MEMORY_UNIT);
    }

    /// The object turned out `bytes` long: what it holds beyond them goes back, and the
    /// budget has room for one object of its size from now on.
    pub(crate) fn learned(&mut self, bytes: u64) {
        self.budget.room_for(bytes);
        let excess = self
            .held_units()
            .saturating_sub(self.budget.memory.units_for(bytes));
        if let Some(held) = &mut self.held {
            drop(held.split(excess as usize));
        }
    }

    fn held_units(&self) -> u32 {
        self.held.as_ref().map_or(0, |p| p.num_permits() as u32)
    }

    /// Bytes this object reads beyond the memory it holds: read without the turn, it was
    /// larger than its guess when the budget had no more free.
    pub(crate) fn over(&self) -> u64 {
        self.over
    }

    /// Whether the object still has the turn (it may wait for memory).
    pub(crate) fn has_turn(&self) -> bool {
        self.turn.is_some()
    }

    /// All the memory the object will need is held: the next object's turn.
    pub(crate) fn complete(&mut self) {
        self.turn = None;
    }

    /// The memory held, to travel with the object until the consumer takes it (the turn,
    /// if still held, goes with the rest of `self`).
    pub(crate) fn into_held(mut self) -> Option<OwnedSemaphorePermit> {
        self.held.take()
    }

    #[cfg(test)]
    fn held_bytes(&self) -> u64 {
        self.held
            .as_ref()
            .map_or(0, |p| p.num_permits() as u64 * MEMORY_UNIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::timeout;

    const MIB: u64 = 1 << 20;

    /// Would `fut` finish soon? (It waits on a semaphore, or it does not.)
    async fn finishes<T>(fut: impl std::future::Future<Output = T>) -> Option<T> {
        timeout(Duration::from_millis(50), fut).await.ok()
    }

    #[tokio::test]
    async fn pieces_held_fit_the_memory_and_one_larger_takes_all_of_it() {
        let memory = MemoryUnits::new(10 * MIB);
        let a = memory.hold(8 * MIB).await;
        // 4 MiB more do not fit beside 8 MiB in 10: the piece waits until the first is done.
        assert!(
            finishes(memory.hold(4 * MIB)).await.is_none(),
            "12 MiB in 10"
        );
        drop(a);
        let b = memory.hold(4 * MIB).await;
        let c = memory.hold(4 * MIB).await;
        assert_eq!(memory.available(), 2 * MIB);
        drop((b, c));
        // Larger than the whole: all of it, rather than waiting for ever.
        let all = finishes(memory.hold(1 << 30)).await.expect("held");
        assert_eq!(memory.available(), 0);
        drop(all);
        assert_eq!(memory.available(), 10 * MIB);
    }

    #[tokio::test]
    async fn the_next_object_starts_while_the_one_before_still_takes_memory() {
        let budget = Budget::new(256 * MIB);
        let mut first = budget.admit(8 * MIB).await;
        assert_eq!(first.held_bytes(), 8 * MIB);
        // The first object's turn: the next admission waits for it.
        assert!(finishes(budget.admit(8 * MIB)).await.is_none());
        first.cover(146 * MIB).await;
        first.complete();
        // 110 MiB left: the second object's first ranges fit, though the whole would not.
        let mut second = finishes(budget.admit(8 * MIB)).await.expect("admitted");
        second.cover(100 * MIB).await;
        assert!(finishes(second.cover(146 * MIB)).await.is_none());
        // The first taken by the consumer: its memory comes back, the second completes.
        drop(first.into_held());
        finishes(second.cover(146 * MIB)).await.expect("covered");
        assert_eq!(second.held_bytes(), 146 * MIB);
    }

    #[tokio::test]
    async fn an_object_larger_than_the_budget_holds_all_of_it() {
        let budget = Budget::new(64 * MIB);
        let mut big = budget.admit(8 * MIB).await;
        big.cover(1 << 40).await;
        assert_eq!(big.held_bytes(), 64 * MIB);
        // Dropped without completing (a failed fetch): the turn and the memory come back.
        drop(big);
        let next = finishes(budget.admit(64 * MIB)).await.expect("admitted");
        assert_eq!(next.held_bytes(), 64 * MIB);
    }

    #[tokio::test]
    async fn without_the_turn_an_object_takes_what_is_free_and_never_waits() {
        let budget = Budget::new(16 * MIB);
        let mut guessed = budget.admit(MIB).await;
        guessed.complete();
        let mut other = budget.admit(12 * MIB).await;
        other.complete();
        // 3 MiB free: a guess of 1 MiB that turns out 6 MiB takes them and is 2 MiB over.
        finishes(guessed.cover(6 * MIB)).await.expect("never waits");
        assert_eq!(guessed.held_bytes(), 4 * MIB);
        assert_eq!(guessed.over(), 2 * MIB);
        assert_eq!(budget.memory.available(), 0);
        // Nothing free: nothing more held, all of the rest over.
        finishes(guessed.cover(10 * MIB))
            .await
            .expect("never waits");
        assert_eq!(guessed.over(), 6 * MIB);
        drop((guessed, other));
        assert_eq!(budget.memory.available(), 16 * MIB);
    }

    #[tokio::test]
    async fn an_admission_given_up_gives_back_what_it_took() {
        let budget = Budget::new(16 * MIB);
        let mut held = budget.admit(8 * MIB).await;
        held.complete();
        // Waits for memory the first holds, then is cancelled.
        assert!(finishes(budget.admit(16 * MIB)).await.is_none());
        drop(held);
        let again = finishes(budget.admit(16 * MIB)).await.expect("admitted");
        assert_eq!(again.held_bytes(), 16 * MIB);
    }

    #[tokio::test]
    async fn an_object_learned_gives_back_its_excess_and_makes_room_for_its_size() {
        let budget = Budget::new(16 * MIB);
        let mut guessed = budget.admit(12 * MIB).await;
        guessed.complete();
        // Guessed at 12 MiB, it is 5: 7 go back; the budget keeps room for one of 5 more.
        guessed.learned(5 * MIB);
        assert_eq!(guessed.held_bytes(), 5 * MIB);
        assert_eq!(budget.memory.available(), 16 * MIB);
        // A larger one raises the room to its size, never lowers it.
        budget.room_for(10 * MIB);
        budget.room_for(MIB);
        assert_eq!(budget.memory.available(), 21 * MIB);
        drop(guessed);
        assert_eq!(budget.memory.available(), 26 * MIB);
    }
}
