//! Bandwidth: bodies paced per connection and per node, by sleeping, never by spinning.
//!
//! A [`Pacer`] is a virtual clock: each chunk reserves `len / rate` seconds starting where the
//! previous reservation ended. A body waits for the later of its connection's and its node's
//! reservation. The clock may lag real time by at most `SLACK`: a task that wakes late
//! (tokio's timer ticks in milliseconds, and a loaded machine adds more) catches up instead of
//! losing the time, while a link that was idle for longer gains no more credit than that —
//! the same role as a token bucket's burst in `tc tbf`.

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::Instant;

/// A link's width in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth(f64);

impl Bandwidth {
    /// A rate in bytes per second.
    pub fn bytes_per_sec(v: f64) -> Self {
        Self(v)
    }

    /// The rate in bytes per second.
    pub fn as_bytes_per_sec(self) -> f64 {
        self.0
    }

    /// Parses a number, a byte or bit unit and `/s`: `1.5GiB/s`, `25Gbit/s`, `800Mbit/s`. A
    /// unit is required: a bare number is ambiguous between bits and bytes.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let body = s
            .strip_suffix("/s")
            .ok_or_else(|| format!("{s:?} has no unit: write e.g. 90MB/s or 10Gbit/s"))?;
        let split = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{s:?} has no unit: write e.g. 90MB/s or 10Gbit/s"))?;
        let (num, unit) = body.split_at(split);
        let v: f64 = num
            .parse()
            .map_err(|_| format!("{s:?} is not a bandwidth such as 90MB/s"))?;
        let bytes = match unit.trim() {
            "B" => 1.0,
            "KB" | "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            "bit" => 1.0 / 8.0,
            "Kbit" | "kbit" => 1e3 / 8.0,
            "Mbit" => 1e6 / 8.0,
            "Gbit" => 1e9 / 8.0,
            other => {
                return Err(format!(
                    "unknown unit {other:?} in {s:?}: use B, KB, MB, GB, KiB, MiB, GiB, Kbit, Mbit or Gbit, per second (e.g. 90MB/s)"
                ));
            }
        } * v;
        if !(bytes >= 1.0 && bytes.is_finite()) {
            return Err(format!("{s:?}: a bandwidth must be at least 1 B/s"));
        }
        Ok(Self(bytes))
    }
}

/// `none`/`off` → unpaced, else [`Bandwidth::parse`].
pub fn parse_optional(s: &str) -> Result<Option<Bandwidth>, String> {
    match s.trim() {
        "none" | "off" => Ok(None),
        v => Bandwidth::parse(v).map(Some),
    }
}

/// How far a link's clock may fall behind real time (its burst, in time).
const SLACK: Duration = Duration::from_millis(20);

/// One link's virtual clock.
#[derive(Debug)]
pub struct Pacer {
    bytes_per_sec: f64,
    next_free: Mutex<Instant>,
}

impl Pacer {
    /// A pacer at `bw`, its link free now.
    pub fn new(bw: Bandwidth) -> Self {
        Self {
            bytes_per_sec: bw.0,
            next_free: Mutex::new(Instant::now()),
        }
    }

    /// Reserves the link for `len` bytes; returns when they may go.
    fn reserve(&self, len: usize, now: Instant) -> Instant {
        let mut next = self.next_free.lock().unwrap();
        let start = (*next).max(now.checked_sub(SLACK).unwrap_or(now));
        *next = start + Duration::from_secs_f64(len as f64 / self.bytes_per_sec);
        start
    }

    /// Chunks of about 5 ms at this rate, between 16 KiB and 256 KiB: small enough that a
    /// body's rate is even at the scale a client measures, large enough that a connection
    /// at S3's rate wakes a few hundred times a second, not thousands.
    fn chunk(&self) -> usize {
        ((self.bytes_per_sec * 0.005) as usize).clamp(16 << 10, 256 << 10)
    }
}

/// The links a body crosses: its connection's, the node's, either or none.
#[derive(Debug, Clone, Default)]
pub(crate) struct Links {
    pub(crate) connection: Option<Arc<Pacer>>,
    pub(crate) node: Option<Arc<Pacer>>,
}

impl Links {
    fn iter(&self) -> impl Iterator<Item = &Arc<Pacer>> {
        self.connection.iter().chain(self.node.iter())
    }

    fn chunk(&self) -> Option<usize> {
        self.iter().map(|p| p.chunk()).min()
    }

    fn reserve(&self, len: usize) -> Instant {
        let now = Instant::now();
        self.iter()
            .map(|p| p.reserve(len, now))
            .max()
            .unwrap_or(now)
    }
}

/// A body sent (or read) no faster than its links allow, counting its bytes.
pub(crate) struct Paced<B> {
    inner: B,
    links: Links,
    counter: Arc<AtomicU64>,
    /// The rest of the inner frame being paced out.
    pending: Bytes,
    /// A chunk that may go once `sleep` ends.
    due: Option<(Bytes, Pin<Box<tokio::time::Sleep>>)>,
}

impl<B> Paced<B> {
    pub(crate) fn new(inner: B, links: Links, counter: Arc<AtomicU64>) -> Self {
        Self {
            inner,
            links,
            counter,
            pending: Bytes::new(),
            due: None,
        }
    }
}

impl<B> std::fmt::Debug for Paced<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Paced").field("links", &self.links).finish()
    }
}

impl<B> Body for Paced<B>
where
    B: Body + Unpin,
    B::Data: Into<Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some((_, sleep)) = &mut this.due {
                ready!(sleep.as_mut().poll(cx));
                let (chunk, _) = this.due.take().expect("checked above");
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
            if this.pending.has_remaining() {
                let Some(max) = this.links.chunk() else {
                    return Poll::Ready(Some(Ok(Frame::data(std::mem::take(&mut this.pending)))));
                };
                let chunk = this.pending.split_to(max.min(this.pending.len()));
                let at = this.links.reserve(chunk.len());
                if at <= Instant::now() {
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
                this.due = Some((chunk, Box::pin(tokio::time::sleep_until(at))));
                continue;
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let data: Bytes = data.into();
                        this.counter.fetch_add(data.len() as u64, Ordering::Relaxed);
                        this.pending = data;
                    }
                    Err(frame) => {
                        let trailers = frame
                            .into_trailers()
                            .unwrap_or_else(|_| unreachable!("a frame is data or trailers"));
                        return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                    }
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.due.is_none() && !self.pending.has_remaining() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let extra =
            self.pending.len() as u64 + self.due.as_ref().map_or(0, |(c, _)| c.len() as u64);
        let inner = self.inner.size_hint();
        let mut h = SizeHint::new();
        h.set_lower(inner.lower() + extra);
        if let Some(u) = inner.upper() {
            h.set_upper(u + extra);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_parse_with_units_and_not_without() {
        let bps = |s| Bandwidth::parse(s).unwrap().as_bytes_per_sec();
        assert_eq!(bps("90MB/s"), 90e6);
        assert_eq!(bps("25Gbit/s"), 25e9 / 8.0);
        assert_eq!(bps("1MiB/s"), 1048576.0);
        for (input, want) in [
            ("90", "no unit"),
            ("90MB", "no unit"),
            ("90/s", "no unit"),
            ("90XB/s", "unknown unit"),
            ("0MB/s", "at least 1 B/s"),
            ("fast/s", "not a bandwidth such as 90MB/s"),
        ] {
            let e = Bandwidth::parse(input).unwrap_err();
            assert!(e.contains(want), "{input}: {e}");
        }
    }

    // Real time (tokio's paused clock needs a feature the workspace does not build): the
    // lower bounds are exact, the upper ones leave room for a loaded machine.
    #[tokio::test]
    async fn a_paced_body_takes_its_length_over_its_rate() {
        use http_body_util::BodyExt;
        let links = Links {
            connection: Some(Arc::new(Pacer::new(Bandwidth::bytes_per_sec(4e6)))),
            node: None,
        };
        let counter = Arc::new(AtomicU64::new(0));
        let body = http_body_util::Full::new(Bytes::from(vec![7u8; 2_000_000]));
        let t0 = Instant::now();
        let got = Paced::new(body, links, counter.clone())
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!(got.len(), 2_000_000);
        assert!(got.iter().all(|b| *b == 7));
        assert_eq!(counter.load(Ordering::Relaxed), 2_000_000);
        // At most the slack's worth and one 20 kB chunk go at once; the rest takes its time
        // at 4 MB a second: 0.5 s - 20 ms - 5 ms.
        assert!((0.475..=0.6).contains(&secs), "{secs}");
    }

    #[tokio::test]
    async fn a_node_link_is_shared_by_its_connections() {
        use http_body_util::BodyExt;
        let node = Arc::new(Pacer::new(Bandwidth::bytes_per_sec(4e6)));
        let t0 = Instant::now();
        let bodies = (0..2).map(|_| {
            let links = Links {
                connection: None,
                node: Some(node.clone()),
            };
            let body = http_body_util::Full::new(Bytes::from(vec![1u8; 1_000_000]));
            Paced::new(body, links, Arc::default()).collect()
        });
        futures::future::try_join_all(bodies).await.unwrap();
        let secs = t0.elapsed().as_secs_f64();
        assert!(
            (0.475..=0.6).contains(&secs),
            "two 1 MB bodies over 4 MB/s: {secs}"
        );
    }
}
