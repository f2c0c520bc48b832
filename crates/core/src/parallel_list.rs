//! Listing a prefix of millions of keys with several requests in flight. ListObjectsV2 pages
//! one after another cost a round trip per 1,000 keys: 1,170 of them for retinanet, minutes
//! at S3's list latency. After the first page, the rest of the key space is listed by
//! workers from `start-after` points; a worker that runs out of work takes the upper half of
//! a range another is listing, split at a key halfway between where that range stands and where
//! it ends (work stealing, as Google's Dataflux lists). Ranges are disjoint and every key is
//! filtered by its range's bounds, so no key is lost or listed twice; the entries come back
//! in key order. Each page goes through the store's `send`, so its retries and its limiter
//! apply.

use crate::error::{Error, Result};
use crate::listing::{ListOptions, Tokens};
use crate::object::{ListEntry, ObjectMeta};
use crate::store::{ObjectStore, ObjectStoreExt};
use crate::uri::ObjectUri;
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Pages a listing has in flight at most (`Dataset::from_prefix`, Python's recursive
/// `list`, `sluice ls -r`): one page after another is bound by the LIST latency, tens of
/// milliseconds a page of 1,000 keys; 16 in flight were still bound by it under S3-like
/// latency, 32 reach what the client's CPU parses (docs/benchmarks.md, "A million objects"),
/// 64 gained nothing more. The client's limiter for metadata requests still decides how
/// many go at once.
pub const LIST_WORKERS: usize = 32;

/// Keys in a range of the listing: after `after` (or from the start), up to and including
/// `until` (or to the end of the prefix).
#[derive(Debug)]
struct Range {
    after: Option<String>,
    /// Moved down when another worker takes the upper part.
    until: Mutex<Option<String>>,
    /// The last key this range's worker has seen: where a split may start.
    reached: Mutex<Option<String>>,
    /// Its last page said more follow. Only such a range is split: one whose first page
    /// has not come back may hold nothing, and splitting it again and again would only make
    /// longer and longer keys in an empty part of the key space.
    more: AtomicBool,
}

impl Range {
    fn new(after: Option<String>, until: Option<String>, more: bool) -> Arc<Self> {
        Arc::new(Self {
            reached: Mutex::new(after.clone()),
            after,
            until: Mutex::new(until),
            more: AtomicBool::new(more),
        })
    }

    fn until(&self) -> Option<String> {
        self.until.lock().expect("range lock").clone()
    }
}

/// Every object under `prefix` (recursively), in key order, listed by up to `workers`
/// requests at once. A store that does not list by pages (the file system) lists as usual.
pub async fn list_parallel(
    store: &dyn ObjectStore,
    prefix: &ObjectUri,
    workers: usize,
) -> Result<Vec<ObjectMeta>> {
    let mut all = Vec::new();
    list_parallel_into(store, prefix, workers, Vec::push, |part| all.extend(part)).await?;
    Ok(all)
}

/// `list_parallel`, each object folded by `add` into its range's `T` as its page arrives,
/// so that a caller keeping a compact form (a loader's dataset, lines of output) never
/// holds millions of `ObjectMeta`s. `emit` gets the ranges' parts in key order, each as soon
/// as every range before it is done: the first keys can be shown while the rest are listed.
/// On an error the parts emitted so far are the start of the listing, never all of it.
pub async fn list_parallel_into<T, F, E>(
    store: &dyn ObjectStore,
    prefix: &ObjectUri,
    workers: usize,
    add: F,
    mut emit: E,
) -> Result<()>
where
    T: Default + Send,
    F: Fn(&mut T, ObjectMeta) + Sync,
    E: FnMut(T) + Send,
{
    let first = match store
        .list_page(prefix, &ListOptions::from(true, None))
        .await
    {
        Err(e) if e.is_unsupported() => {
            let mut all = T::default();
            let mut entries = store.list(prefix, true);
            while let Some(e) = entries.try_next().await? {
                if let Some(m) = object(e) {
                    add(&mut all, m);
                }
            }
            emit(all);
            return Ok(());
        }
        r => r?,
    };
    let mut head = T::default();
    let mut last = None;
    for m in first.entries.into_iter().filter_map(object) {
        last = Some(m.uri.key().to_owned());
        add(&mut head, m);
    }
    emit(head);
    if first.next_token.is_none() {
        return Ok(());
    }
    let Some(last) = last else {
        return Err(Error::transport(
            prefix.to_string(),
            "a listing page without objects said more follow",
        ));
    };
    let ranges = Ranges {
        busy: Mutex::new(Vec::new()),
        done: Mutex::new((BTreeMap::new(), emit)),
    };
    let rest = Range::new(Some(last), None, true);
    let work = (0..workers.max(1)).map(|n| {
        let first = (n == 0).then(|| rest.clone());
        worker(store, prefix, first, &ranges, &add)
    });
    futures::future::try_join_all(work).await?;
    Ok(())
}

fn object(e: ListEntry) -> Option<ObjectMeta> {
    match e {
        ListEntry::Object(m) => Some(m),
        ListEntry::Prefix(_) => None,
    }
}

/// The ranges being listed, and those listed but not emitted yet (a range before them is
/// still being listed), by where each starts.
struct Ranges<T, E> {
    busy: Mutex<Vec<Arc<Range>>>,
    done: Mutex<(BTreeMap<String, T>, E)>,
}

impl<T, E: FnMut(T)> Ranges<T, E> {
    /// `range` is listed: its part is emitted, with those after it that waited for it, once
    /// no range before it is being listed. A range yet to be stolen starts after the one it
    /// is stolen from, which is busy, so it cannot come before a part emitted here.
    fn finish(&self, range: &Arc<Range>, part: T) {
        let mut busy = self.busy.lock().expect("ranges lock");
        busy.retain(|r| !Arc::ptr_eq(r, range));
        let mut done = self.done.lock().expect("done lock");
        let (waiting, emit) = &mut *done;
        waiting.insert(
            range
                .after
                .clone()
                .expect("a worker's range starts after a key"),
            part,
        );
        let first_busy = busy.iter().filter_map(|r| r.after.as_deref()).min();
        while let Some(entry) = waiting.first_entry() {
            if first_busy.is_some_and(|b| b < entry.key().as_str()) {
                break;
            }
            emit(entry.remove());
        }
    }
}

/// Lists `first`, if given, then the upper halves of ranges others are listing (`busy`),
/// until none can be split.
async fn worker<T: Default, F: Fn(&mut T, ObjectMeta), E: FnMut(T)>(
    store: &dyn ObjectStore,
    prefix: &ObjectUri,
    mut first: Option<Arc<Range>>,
    ranges: &Ranges<T, E>,
    add: &F,
) -> Result<()> {
    loop {
        let range = {
            let mut busy = ranges.busy.lock().expect("ranges lock");
            let Some(range) = first.take().or_else(|| steal(prefix, &busy)) else {
                return Ok(());
            };
            busy.push(range.clone());
            range
        };
        let mut part = T::default();
        list_range(store, prefix, &range, |m| add(&mut part, m)).await?;
        ranges.finish(&range, part);
    }
}

/// The upper half of a range being listed, if one can be split: its `until` moves down to
/// the split key, and the new range starts after it.
fn steal(prefix: &ObjectUri, busy: &[Arc<Range>]) -> Option<Arc<Range>> {
    busy.iter().find_map(|r| {
        if !r.more.load(Ordering::Acquire) {
            return None;
        }
        let from = r.reached.lock().expect("range lock").clone()?;
        let mut until = r.until.lock().expect("range lock");
        let end = until
            .clone()
            .unwrap_or_else(|| format!("{}\u{7f}", prefix.key()));
        let mid = midpoint(&from, &end)?;
        let stolen = Range::new(Some(mid.clone()), until.clone(), false);
        *until = Some(mid);
        Some(stolen)
    })
}

/// The objects of one range, page by page from its start, each handed to `add`, until a key
/// passes its bound (which may move down meanwhile) or the listing ends.
async fn list_range(
    store: &dyn ObjectStore,
    prefix: &ObjectUri,
    range: &Range,
    mut add: impl FnMut(ObjectMeta),
) -> Result<()> {
    let mut last: Option<String> = None;
    let mut opts = ListOptions {
        recursive: true,
        start_after: range.after.clone(),
        ..ListOptions::default()
    };
    let mut tokens = Tokens::new();
    loop {
        let page = store.list_page(prefix, &opts).await?;
        let until = range.until();
        let mut ended = false;
        for m in page.entries.into_iter().filter_map(object) {
            let key = m.uri.key();
            // A store that ignores start-after answers from the start: those keys are
            // another range's.
            if range.after.as_deref().is_some_and(|a| key <= a)
                || last.as_deref().is_some_and(|l| key <= l)
            {
                continue;
            }
            if until.as_deref().is_some_and(|u| key > u) {
                ended = true;
                break;
            }
            last = Some(key.to_owned());
            add(m);
        }
        if last.is_some() {
            range.reached.lock().expect("range lock").clone_from(&last);
        }
        let more = page.next_token.is_some() && !ended;
        range.more.store(more, Ordering::Release);
        match page.next_token {
            Some(token) if !ended => {
                tokens.follow(&prefix.to_string(), &token)?;
                opts.token = Some(token);
                opts.start_after = None;
            }
            _ => return Ok(()),
        }
    }
}

/// A key strictly between `a` and `b` (`a < b`), of printable ASCII after their common
/// prefix so any store takes it as `start-after`; `None` when they are too close.
fn midpoint(a: &str, b: &str) -> Option<String> {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    // Eight base-95 digits after the common prefix, printable ASCII (0x20..0x7e) only.
    let digits = |s: &[u8]| -> u64 {
        (0..8).fold(0u64, |n, i| {
            let d = s
                .get(common + i)
                .map_or(0, |&c| u64::from(c.clamp(0x20, 0x7e) - 0x20));
            n * 95 + d
        })
    };
    let (x, y) = (digits(a), digits(b));
    if y <= x + 1 {
        return None;
    }
    let mut m = x + (y - x) / 2;
    let mut tail = [0u8; 8];
    for t in tail.iter_mut().rev() {
        *t = (m % 95) as u8 + 0x20;
        m /= 95;
    }
    let mut key = a[..common].to_vec();
    key.extend_from_slice(&tail);
    while key.len() > common + 1 && key.last() == Some(&0x20) {
        key.pop();
    }
    let key = String::from_utf8(key).ok()?;
    (a < key.as_bytes() && key.as_bytes() < b).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3store::S3Store;
    use crate::testing::{self, MemoryWire, Op};

    #[test]
    fn a_midpoint_lies_between() {
        for (a, b) in [
            ("train/img_1", "train/img_9"),
            ("a", "b"),
            ("train/img_100899_of_1170301.jpeg", "train/\u{7f}"),
            ("k/0", "k/00"),
            ("x", "x\u{7f}"),
        ] {
            if let Some(m) = midpoint(a, b) {
                assert!(a < m.as_str() && m.as_str() < b, "{a} < {m} < {b}");
            }
        }
        assert_eq!(midpoint("a", "a "), None, "nothing between");
        assert!(
            midpoint("train/img_1", "train/img_9")
                .unwrap()
                .starts_with("train/img_5")
        );
    }

    /// Any number of workers lists every key once, in order, with keys clustered in a
    /// corner of the key space (as real datasets are) and spread over it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_key_comes_once_in_order_whatever_the_workers() {
        let wire = MemoryWire::new(testing::config()).with_page_size(7);
        let mut want = Vec::new();
        for i in 0..500 {
            want.push(format!("d/train/img_{i}_of_500.jpeg"));
        }
        for k in ["d/a", "d/train/", "d/zz", "d/\u{e9}t\u{e9}", "d/~"] {
            want.push(k.to_owned());
        }
        want.push("e/outside".to_owned());
        let store = S3Store::over(wire);
        for k in &want {
            store
                .wire()
                .insert(&ObjectUri::new("bkt", k).unwrap(), vec![1u8; 3]);
        }
        want.retain(|k| k.starts_with("d/"));
        want.sort();
        let prefix = ObjectUri::new("bkt", "d/").unwrap();
        for workers in [1, 2, 8, 32] {
            let got = list_parallel(&store, &prefix, workers).await.unwrap();
            let keys: Vec<&str> = got.iter().map(|m| m.uri.key()).collect();
            assert_eq!(keys, want, "{workers} workers");
        }
        let pages = store.wire().calls(Op::ListObjectsV2);
        assert!(pages >= 4 * 73, "every page was asked for: {pages}");
    }

    /// Pages that fail and are retried are asked again from where they stood: every key
    /// comes once, in order, and only the failed attempts are added to the pages asked.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_page_retried_resumes_where_it_stood() {
        let store = S3Store::over(MemoryWire::new(testing::config()).with_page_size(10));
        let mut want = Vec::new();
        for i in 0..300 {
            let uri = ObjectUri::new("bkt", &format!("p/{i:03}")).unwrap();
            store.wire().insert(&uri, vec![0u8; 1]);
            want.push(uri.key().to_owned());
        }
        let prefix = ObjectUri::new("bkt", "p/").unwrap();
        let clean = {
            list_parallel(&store, &prefix, 1).await.unwrap();
            store.wire().calls(Op::ListObjectsV2)
        };
        store.wire().fail(Op::ListObjectsV2, 4, testing::slow_down);
        let got = list_parallel(&store, &prefix, 1).await.unwrap();
        let keys: Vec<&str> = got.iter().map(|m| m.uri.key()).collect();
        assert_eq!(keys, want);
        assert_eq!(
            store.wire().calls(Op::ListObjectsV2),
            2 * clean + 4,
            "four attempts again, not the listing"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_page_that_fails_past_its_retries_fails_the_listing() {
        let store = S3Store::over(MemoryWire::new(testing::config()).with_page_size(5));
        for i in 0..50 {
            let uri = ObjectUri::new("bkt", &format!("p/{i:02}")).unwrap();
            store.wire().insert(&uri, vec![0u8; 1]);
        }
        store
            .wire()
            .fail(Op::ListObjectsV2, 100, testing::slow_down);
        let prefix = ObjectUri::new("bkt", "p/").unwrap();
        let err = list_parallel(&store, &prefix, 4).await.unwrap_err();
        assert!(err.to_string().contains("SlowDown"), "{err}");
    }
}
