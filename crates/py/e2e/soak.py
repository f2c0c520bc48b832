"""Fault soak of the Python bindings: mixed reads and writes for MINUTES with faults on.

    scripts/soak MINUTES [VENV]          (5 minutes in CI, 30 for a full soak)
    python crates/py/e2e/soak.py --minutes 30 [--seed N]

The test server runs in a process of its own (so that the RSS, file descriptors and threads
measured here are the client's alone) and injects a fault every fraction of a second for the
whole run: connection resets and truncated bodies after some bytes, body stalls shorter and
longer than the client's stall timeout, 503 SlowDown, 500 InternalError, latency around the
first-byte timeout, and now and then a burst long enough to exhaust the client's attempts.

This process loops over four workloads in turn until the time is up:
  loader   sluice.Loader over the dataset (shuffled, large objects as ranged GETs, errors
           delivered), one pass per round;
  many     get_many (module-level and Client) over random batches, plus Client.get_range;
  compat   sluice.compat.s3dlio: get, get_range, get_many, its loader, put_bytes;
  writer   streaming uploads (sluice.writer, Client.writer, sluice.open "wb") of 1-24 MiB,
           read back (Client.get or sluice.open "rb") and deleted.
Every byte read is checked: the dataset against ``sluice.testing.pattern`` (by SHA-256 of
what it should be), written objects against the bytes written. An operation that fails after
its retries is counted by the kind of error (faults make some of that legitimate); a wrong
byte, a lost or duplicated object, an exception that is not an OSError (sluice's errors all
are) and a hang (no operation completing for HANG_S seconds: the run is aborted with every
thread's stack) are failures.

Once a minute (and at the end) one line: elapsed minutes, operations per workload, bytes
verified, wrong bytes, errors by kind, RSS, open fds and threads. Checked at the end: no wrong
bytes, no hang, no unexpected exception, faults did fire, and for runs of at least
FLAT_MIN_MINUTES minutes that RSS and fds stayed flat: the average of the last samples against
the sample after warm-up (minute 2, or a third into a longer run), within 5% plus a little slack. The last line is
``soak: N passed, M failed``; the exit status 0 when nothing failed, else 1.

SOAK_SERVER_CPU / SOAK_CLIENT_CPU (CPU lists as taskset takes them: "0", "0-3", "1,3") pin
the server and this process; unset, nothing is pinned. SOAK_SEED (or --seed) makes the
faults and the workloads' choices repeat (timing still varies).
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import gc
import hashlib
import json
import logging
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, cast

KiB = 1 << 10
MiB = 1 << 20

# The client's settings: short enough that faults cost seconds, not minutes. The injected
# faults are sized from these same numbers (stalls and latencies on both sides of them).
STALL_TIMEOUT_S = 2.0
FIRST_BYTE_TIMEOUT_S = 5.0
MAX_ATTEMPTS = 5
CLIENT_ENV = {
    "SLUICE_STALL_TIMEOUT": str(STALL_TIMEOUT_S),
    "SLUICE_FIRST_BYTE_TIMEOUT": str(FIRST_BYTE_TIMEOUT_S),
    "SLUICE_CONNECT_TIMEOUT": "2",
    "SLUICE_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
}

HANG_S = 120.0
"""No operation completing for this long is a hang: far above the worst legitimate wait
(MAX_ATTEMPTS attempts, each at most a timeout, plus backoff)."""

# RSS and fds are judged flat only over runs this long: glibc's heap fills for the first
# several minutes (a 30-minute run: RSS beyond the heap in use averaged 86 MiB over minutes
# 2-10 and 130 after), so a short run's verdict would be noise; CI's 5-minute run prints
# them and checks bytes, deliveries, hangs and exceptions.
FLAT_MIN_MINUTES = 10.0
BASELINE_MINUTE = 2.0
"""Warm-up ends at this minute, or a third into a longer run, whichever is later: the heap's
freed pages settle at what is touched again between trims, which a long run reaches later."""
LAST_SAMPLES = 3
RSS_GROWTH, RSS_SLACK = 0.05, 16 * MiB
# Idle pooled connections come and go with the faults (54-60 fds sample to sample in a
# 5-minute run): the slack covers that churn, not a leak, which grows without bound.
FD_GROWTH, FD_SLACK = 0.05, 8

# The dataset: (count, smallest, largest) per size class, sizes drawn per object so that none
# is a round number. About 200 MiB: a loader pass takes seconds.
SIZE_CLASSES = [
    (48, 64 * KiB, 256 * KiB),
    (24, 256 * KiB, 2 * MiB),
    (12, 2 * MiB, 8 * MiB),
    (6, 12 * MiB, 24 * MiB),
]
DATA_PREFIX = "soak/data/"
WRITE_PREFIX = "soak/written/"

# Loader settings: objects of RANGE_THRESHOLD bytes or more are read as ranged GETs, so the
# largest class exercises ranges (and resumption inside them).
RANGE_THRESHOLD = 8 * MiB
CHUNK_SIZE = 3 * MiB + 12_345
LOADER_MEMORY_BUDGET = 128 * MiB
MANY_BATCH_BYTES = 48 * MiB
PART_SIZE = 5 * MiB  # S3's smallest part: writes of 1-24 MiB are 1 to 5 parts


def log(msg: str) -> None:
    print(msg, flush=True)


def cpu_list(spec: str) -> Set[int]:
    """taskset's CPU list syntax ("0", "0-3", "1,3,5-6") as a set of CPU numbers."""
    cpus: Set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pin(env_var: str) -> None:
    """Pins this process to the CPUs in `env_var`, when set (before any thread starts, so
    every thread inherits it)."""
    spec = os.environ.get(env_var, "").strip()
    if spec:
        os.sched_setaffinity(0, cpu_list(spec))


def layout(seed: int) -> List[Tuple[str, int]]:
    """The dataset's (key, size) pairs for `seed`."""
    rng = random.Random(seed)
    out = []
    for c, (count, lo, hi) in enumerate(SIZE_CLASSES):
        for i in range(count):
            out.append((f"{DATA_PREFIX}c{c}/obj_{i:05}.bin", rng.randint(lo, hi)))
    return out


# --------------------------------------------------------------------------- server process


@dataclass
class FaultPlan:
    """One injection: `count` requests get `kind` (TestServer.inject's arguments)."""

    label: str
    kind: str
    count: int = 1
    after_bytes: int = 0
    seconds: float = 0.0

    @property
    def body(self) -> bool:
        # Body faults fire on a GET's body (counted by `gets`), the rest on any request.
        return self.kind in ("reset", "truncate", "stall")


def some_bytes(rng: random.Random) -> int:
    """Where in a body a fault strikes: at once, early, or well into it."""
    return rng.choice([0, rng.randint(1, 64 * KiB), rng.randint(64 * KiB, 6 * MiB)])


def next_fault(rng: random.Random) -> FaultPlan:
    """A random fault, weighted towards the ones a real store produces most."""
    short_stall = rng.uniform(0.2, STALL_TIMEOUT_S * 0.6)
    long_stall = rng.uniform(STALL_TIMEOUT_S * 1.3, STALL_TIMEOUT_S * 2)
    choices: List[Tuple[int, Callable[[], FaultPlan]]] = [
        (20, lambda: FaultPlan("reset", "reset", after_bytes=some_bytes(rng))),
        (15, lambda: FaultPlan("truncate", "truncate", after_bytes=some_bytes(rng))),
        (
            10,
            lambda: FaultPlan(
                "stall<timeout", "stall", after_bytes=some_bytes(rng), seconds=short_stall
            ),
        ),
        (
            8,
            lambda: FaultPlan(
                "stall>timeout", "stall", after_bytes=some_bytes(rng), seconds=long_stall
            ),
        ),
        (15, lambda: FaultPlan("slowdown", "slowdown", count=rng.randint(1, 3))),
        (12, lambda: FaultPlan("internal", "internal", count=rng.randint(1, 2))),
        (
            6,
            lambda: FaultPlan(
                "latency<timeout", "latency", seconds=rng.uniform(0.1, FIRST_BYTE_TIMEOUT_S / 3)
            ),
        ),
        (3, lambda: FaultPlan("latency>timeout", "latency", seconds=FIRST_BYTE_TIMEOUT_S + 1)),
        # More failures in a row than a request has attempts: some operation runs out of
        # retries, so the error paths (delivered errors, aborted uploads) get soaked too.
        (2, lambda: FaultPlan("burst:internal", "internal", count=2 * MAX_ATTEMPTS)),
        (
            2,
            lambda: FaultPlan(
                "burst:reset", "reset", count=2 * MAX_ATTEMPTS, after_bytes=some_bytes(rng)
            ),
        ),
    ]
    weights = [w for w, _ in choices]
    return rng.choices([make for _, make in choices], weights)[0]()


class Injector(threading.Thread):
    """Arms one fault at a time at random intervals and waits until it has fired before the
    next, so faults never pile up while the client is busy checking bytes, and the count of
    fired faults is exact (TestServer does not expose its own)."""

    def __init__(self, server: Any, seed: int, stop: threading.Event):
        super().__init__(name="injector", daemon=True)
        self.server, self.rng, self.stop = server, random.Random(seed ^ 0x5EED), stop
        self.injected: Counter = Counter()
        self.fired: Counter = Counter()

    def counter(self, plan: FaultPlan) -> int:
        return self.server.gets if plan.body else self.server.requests

    def run(self) -> None:
        while not self.stop.wait(self.rng.uniform(0.02, 0.4)):
            plan = next_fault(self.rng)
            self.server.inject(plan.kind, plan.count, plan.after_bytes, plan.seconds)
            self.injected[plan.label] += plan.count
            # Read after arming: every request counted from here on looks for it.
            start = self.counter(plan)
            while not self.stop.is_set() and self.counter(plan) < start + plan.count:
                time.sleep(0.01)
            done = min(self.counter(plan) - start, plan.count)
            self.fired[plan.label] += done


def serve_main(seed: int) -> int:
    """The server process: fills the dataset, prints one JSON line (the client's environment
    and the dataset), injects faults until its stdin closes, then prints its counters."""
    pin("SOAK_SERVER_CPU")
    from sluice.testing import TestServer, pattern

    # The server logs every injected 5xx (s3s, through sluice's log bridge): counted, not
    # printed, or they would bury the client's lines.
    logs = quiet_sluice_logs()

    server = TestServer()
    objects = []
    for key, size in layout(seed):
        server.insert(key, pattern(key, size))
        objects.append([f"s3://{server.bucket}/{key}", size])
    print(
        json.dumps({"env": dict(server.env()), "bucket": server.bucket, "objects": objects}),
        flush=True,
    )

    stop = threading.Event()
    injector = Injector(server, seed, stop)
    injector.start()
    sys.stdin.buffer.read()  # until the client closes it, or dies
    stop.set()
    injector.join()
    server.clear_faults()
    stats = {
        "injected": dict(injector.injected),
        "fired": dict(injector.fired),
        "requests": server.requests,
        "gets": server.gets,
        "heads": server.heads,
        "log_records": dict(logs.counts),
    }
    try:
        print(json.dumps(stats), flush=True)
    except BrokenPipeError:
        # The client is gone (the watchdog aborted it): nobody to tell, and nothing for the
        # interpreter to flush at exit either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    server.stop()
    return 0


class ServerProcess:
    """The client's handle on the server process."""

    def __init__(self, seed: int):
        cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--seed", str(seed)]
        # stderr is inherited: whatever the server says shows up in the run's output.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(
                f"soak: the server process exited ({self.proc.wait()}) before it started; its stderr is above"
            )
        self.info = json.loads(line)

    def check_alive(self) -> None:
        rc = self.proc.poll()
        if rc is not None:
            raise SystemExit(
                f"soak: the server process died (exit status {rc}) mid-run; its stderr is above"
            )

    def stop(self) -> Dict[str, Any]:
        """Closes its stdin (the signal to stop) and returns the counters it prints."""
        try:
            out, _ = self.proc.communicate(timeout=60)  # closes its stdin first
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return {}
        lines = out.strip().splitlines()
        return json.loads(lines[-1]) if lines else {}


# --------------------------------------------------------------------------- bookkeeping


def count_wrong(got: Any, want: Any) -> Tuple[int, Optional[int]]:
    """(bytes that differ, counting a length difference as wrong bytes; first offset)."""
    g, w = memoryview(got).cast("B"), memoryview(want).cast("B")
    n = min(len(g), len(w))
    try:
        import numpy as np

        diff = np.flatnonzero(np.frombuffer(g[:n], np.uint8) != np.frombuffer(w[:n], np.uint8))
        wrong, first = int(diff.size), (int(diff[0]) if diff.size else None)
    except ImportError:
        idx = [i for i in range(n) if g[i] != w[i]]
        wrong, first = len(idx), (idx[0] if idx else None)
    if len(g) != len(w) and first is None:
        first = n
    return wrong + abs(len(g) - len(w)), first


def is_sluice_error(e: BaseException) -> bool:
    """sluice's errors are OSErrors (S3Error, TimeoutError, FileNotFoundError, ...; the
    compat module's RuntimeError subclasses derive from them too). Anything else (a
    PanicException, a TypeError from the bindings) is a bug."""
    return isinstance(e, OSError)


def error_kind(e: BaseException) -> str:
    code = getattr(e, "code", None)
    status = getattr(e, "status", None)
    name = type(e).__name__
    if code:
        return f"{name}:{code}" + (f":{status}" if status else "")
    return name


class Stats:
    """Everything counted, shared with the watchdog (plain increments under the GIL)."""

    def __init__(self) -> None:
        self.ops: Counter = Counter()
        self.bytes_verified = 0
        self.wrong_bytes = 0
        self.wrong_objects: List[str] = []
        self.bad_deliveries: List[str] = []
        self.errors: Counter = Counter()
        self.unexpected: List[str] = []
        self.notes: Counter = Counter()
        self.retries = 0

    def ok(self, workload: str, nbytes: int) -> None:
        self.ops[workload] += 1
        self.bytes_verified += nbytes

    def wrong(
        self,
        workload: str,
        what: str,
        wrong: int,
        first: Optional[int],
        got_len: int,
        want_len: int,
    ) -> None:
        self.ops[workload] += 1
        self.wrong_bytes += wrong
        msg = f"{workload}: {what}: {wrong} wrong bytes (first at {first}; got {got_len} bytes, want {want_len})"
        self.wrong_objects.append(msg)
        log(f"soak: WRONG BYTES: {msg}")

    def bad_delivery(self, workload: str, msg: str) -> None:
        self.bad_deliveries.append(f"{workload}: {msg}")
        log(f"soak: BAD DELIVERY: {workload}: {msg}")

    def error(self, workload: str, what: str, e: BaseException) -> None:
        """Counts a failed operation by workload, operation (the first word of `what`) and
        kind; the first of each kind is shown with its message."""
        kind = f"{workload}.{what.split(' ', 1)[0]}/{error_kind(e)}"
        if kind not in self.errors:
            log(f"soak: first {kind}: {what}: {str(e)[:300]}")
        self.errors[kind] += 1
        if not is_sluice_error(e):
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            self.unexpected.append(
                f"{workload}: {what}: {type(e).__module__}.{type(e).__name__}: {e}"
            )
            log(f"soak: UNEXPECTED EXCEPTION in {workload} ({what}):\n{tb}")


def verify(
    stats: Stats,
    workload: str,
    what: str,
    got: Any,
    want_len: int,
    want_digest: bytes,
    regen: Callable[[], Any],
) -> None:
    """Checks `got` (any buffer: a sluice.Object copies nothing) by length and SHA-256; on a
    mismatch regenerates the expected bytes to count the wrong ones."""
    mv = memoryview(got)
    if mv.nbytes == want_len and hashlib.sha256(mv).digest() == want_digest:
        stats.ok(workload, want_len)
        return
    wrong, first = count_wrong(mv, regen())
    stats.wrong(workload, what, wrong, first, mv.nbytes, want_len)


def verify_bytes(stats: Stats, workload: str, what: str, got: Any, want: Any) -> None:
    """Checks `got` against bytes held in memory (written objects)."""
    g, w = memoryview(got).cast("B"), memoryview(want).cast("B")
    if g.nbytes == w.nbytes and g == w:
        stats.ok(workload, w.nbytes)
        return
    wrong, first = count_wrong(g, w)
    stats.wrong(workload, what, wrong, first, g.nbytes, w.nbytes)


class Watchdog(threading.Thread):
    """Aborts the run when no operation has completed for HANG_S seconds: prints what was in
    progress and every Python thread's stack, then exits 1 (the server process follows, its
    stdin closing)."""

    def __init__(self, report: Callable[[str], None]):
        super().__init__(name="watchdog", daemon=True)
        self.last = time.monotonic()
        self.current = "starting"
        self.report = report

    def doing(self, what: str) -> None:
        self.current = what

    def done(self) -> None:
        self.last = time.monotonic()

    def run(self) -> None:
        while True:
            time.sleep(1.0)
            idle = time.monotonic() - self.last
            if idle > HANG_S:
                log(
                    f"soak: HANG: no operation completed for {idle:.0f} s (limit {HANG_S:.0f} s); in progress: {self.current}"
                )
                log(f"soak: pid {os.getpid()}; Python stacks of every thread:")
                faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
                sys.stdout.flush()
                self.report("hang")
                log("soak: 0 passed, 1 failed (hang)")
                os._exit(1)


class SluiceLogCounter(logging.Handler):
    """Counts sluice's log records (retries, resumed reads, aborted uploads) instead of
    printing thousands of them; keeps the first few warnings to show."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: Counter = Counter()
        self.first_warnings: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[f"{record.levelname} {record.name}"] += 1
        if record.levelno >= logging.WARNING and len(self.first_warnings) < 5:
            self.first_warnings.append(f"{record.name}: {record.getMessage()}")


def quiet_sluice_logs() -> SluiceLogCounter:
    """Routes sluice's log records to a counter instead of stderr."""
    logs = SluiceLogCounter()
    logger = logging.getLogger("sluice")
    logger.addHandler(logs)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logs


# --------------------------------------------------------------------------- samples


def proc_status() -> Dict[str, int]:
    """VmRSS (bytes) and Threads of this process."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == "VmRSS":
                out["rss"] = int(v.split()[0]) * KiB
            elif k == "Threads":
                out["threads"] = int(v)
    return out


def heap() -> Optional[Tuple[int, int]]:
    """glibc's heap: bytes in use (mallinfo2's uordblks, plus hblkhd: chunks mapped on their
    own, as large buffers are) and bytes held free (fordblks), resident or not: sluice's
    trimmer hands their pages back to the kernel but they stay counted here. None off
    glibc."""
    try:
        libc = ctypes.CDLL(None)
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = Mallinfo2
    m = fn()
    return int(m.uordblks + m.hblkhd), int(m.fordblks)


def pools() -> Tuple[int, int, int, str]:
    """Idle, held and peak-held bytes of the process's shared buffer pools, summed, and each
    pool's idle/held MiB. Sampled between rounds, when the soak holds no object: bytes still
    held are objects something kept."""
    import sluice

    ps = sluice.buffer_pools()
    by_pool = ", ".join(
        f"{p['pool']}: {p['idle_bytes'] / MiB:.1f}/{p['held_bytes'] / MiB:.1f}" for p in ps
    )
    return (
        sum(p["idle_bytes"] for p in ps),
        sum(p["held_bytes"] for p in ps),
        sum(p["peak_held_bytes"] for p in ps),
        by_pool,
    )


class Mallinfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (ten size_t fields)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@dataclass
class Sample:
    minutes: float
    rss: int
    fds: int
    threads: int
    heap: Optional[Tuple[int, int]]
    pools: Tuple[int, int, int, str]
    held_before_gc: int


def sample(start: float) -> Sample:
    # Objects in reference cycles (collected only when the collector runs) are garbage, not
    # kept: bytes held before and after a collection tell the two apart.
    held_before_gc = pools()[1]
    gc.collect()
    st = proc_status()
    return Sample(
        (time.monotonic() - start) / 60,
        st["rss"],
        len(os.listdir("/proc/self/fd")),
        st["threads"],
        heap(),
        pools(),
        held_before_gc,
    )


def status_line(stats: Stats, s: Sample, label: str = "") -> str:
    ops = " ".join(f"{w}={stats.ops[w]}" for w in WORKLOADS)
    errs = ", ".join(f"{k} {n}" for k, n in sorted(stats.errors.items())) or "none"
    return (
        f"soak: {s.minutes:5.2f} min{label}  ops {ops}  verified {stats.bytes_verified / 1e9:.2f} GB"
        f"  wrong {stats.wrong_bytes}  errors {sum(stats.errors.values())} ({errs})"
        f"  rss {s.rss / MiB:.1f} MiB  fds {s.fds}  threads {s.threads}"
        + (
            ""
            if s.heap is None
            else f"  heap used {s.heap[0] / MiB:.1f} free {s.heap[1] / MiB:.1f} MiB"
        )
        + "  pools idle {:.1f} held {:.1f} (before gc {:.1f}) peak {:.1f} MiB".format(
            s.pools[0] / MiB, s.pools[1] / MiB, s.held_before_gc / MiB, s.pools[2] / MiB
        )
        + (f" (idle/held by pool: {s.pools[3]})" if s.pools[3] else "")
    )


# --------------------------------------------------------------------------- workloads


@dataclass
class Entry:
    uri: str
    key: str
    size: int
    digest: bytes = b""

    def expected(self) -> bytes:
        from sluice.testing import pattern

        return pattern(self.key, self.size)

    def expected_range(self, offset: int, length: int) -> bytes:
        from sluice.testing import pattern

        # pattern() has no offset: generate up to the end of the range and slice.
        return pattern(self.key, offset + length)[offset:]


@dataclass
class Ctx:
    """What every workload shares."""

    stats: Stats
    watchdog: Watchdog
    entries: List[Entry]
    by_uri: Dict[str, Entry]
    prefix_uri: str
    client: Any
    rng: random.Random
    source: bytes  # random bytes that written objects are slices of
    write_seq: List[int] = field(default_factory=lambda: [0])

    def op(self, what: str) -> None:
        self.watchdog.doing(what)

    def done(self) -> None:
        self.watchdog.done()

    def attempt(self, workload: str, what: str, fn: Callable[[], Any]) -> Tuple[bool, Any]:
        """Runs one operation: (True, its result), or (False, None) with the error counted."""
        self.op(f"{workload}: {what}")
        try:
            return True, fn()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # PanicException is a BaseException
            self.stats.error(workload, what, e)
            return False, None
        finally:
            self.done()

    def check_entry(self, workload: str, obj: Any, e: Entry) -> None:
        verify(self.stats, workload, e.uri, obj, e.size, e.digest, e.expected)
        self.done()

    def check_delivery(self, workload: str, obj: Any, delivered: Counter) -> None:
        """Counts an object a loader delivered and checks its bytes; one that is not in the
        dataset is a bad delivery."""
        delivered[obj.uri] += 1
        entry = self.by_uri.get(obj.uri)
        if entry is None:
            self.stats.bad_delivery(workload, f"delivered {obj.uri}, which is not in the dataset")
            return
        self.check_entry(workload, obj, entry)

    def batch(self, max_bytes: int) -> List[Entry]:
        """Random distinct dataset objects adding up to about `max_bytes`."""
        picked: List[Entry] = []
        total = 0
        for e in self.rng.sample(self.entries, len(self.entries)):
            if total + e.size > max_bytes and picked:
                break
            picked.append(e)
            total += e.size
        return picked


def uri_of_error(e: BaseException, candidates: Sequence[str]) -> Optional[str]:
    """The object an error is about: S3Error's `uri`, else the URI its message names."""
    uri = getattr(e, "uri", None)
    if uri:
        return uri
    text = str(e)
    for u in sorted(candidates, key=len, reverse=True):
        if u in text:
            return u
    return None


def loader_round(ctx: Ctx, rnd: int) -> None:
    """One pass of sluice.Loader over the dataset: every object delivered once, or failed
    once (on_error="deliver"), and every delivered byte right."""
    import sluice

    if rnd % 2:
        # Listing sizes the objects with no HEADs; it can fail under faults like any request.
        ok, ds = ctx.attempt(
            "loader",
            "Dataset.from_prefix",
            lambda: sluice.Dataset.from_prefix(ctx.prefix_uri, client=ctx.client),
        )
        if not ok:
            return
    else:
        ds = sluice.Dataset.from_uris([e.uri for e in ctx.entries])
    loader = sluice.Loader(
        ds,
        prefetch=8,
        shuffle=True,
        seed=rnd,
        epoch=rnd,
        client=ctx.client,
        range_threshold=RANGE_THRESHOLD,
        chunk_size=CHUNK_SIZE,
        memory_budget=LOADER_MEMORY_BUDGET,
        on_error="deliver",
    )
    delivered: Counter = Counter()
    failed: List[str] = []
    with loader:
        # Both ways of taking objects, alternately.
        mode = "next()" if rnd % 4 < 2 else "collect_batch(5)"
        take = (lambda: next(loader)) if mode == "next()" else (lambda: loader.collect_batch(5))
        while len(failed) <= len(ctx.entries):
            ctx.op(f"loader: pass {rnd}, after {sum(delivered.values())} objects")
            try:
                got = take()
            except StopIteration:
                break
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:
                ctx.stats.error("loader", "next", e)  # with on_error="deliver": one object failed
                failed.append(uri_of_error(e, list(ctx.by_uri)) or "?")
                ctx.done()
                continue
            objs = got if isinstance(got, list) else [got]
            if not objs:
                break  # collect_batch: [] once everything was delivered
            for obj in objs:
                ctx.check_delivery("loader", obj, delivered)
            del objs, got
        ctx.stats.retries += loader.stats().get("retries", 0)
    account(
        ctx,
        f"loader (pass {rnd}, on_error=deliver, objects taken with {mode})",
        [e.uri for e in ctx.entries],
        delivered,
        failed,
    )


def account(
    ctx: Ctx, workload: str, uris: Sequence[str], delivered: Counter, failed: List[str]
) -> None:
    """Every object of a pass delivered exactly once, or failed (never both, never lost)."""
    dups = [u for u, n in delivered.items() if n > 1]
    if dups:
        ctx.stats.bad_delivery(workload, f"delivered more than once: {dups[:3]}")
    both = [u for u in failed if u in delivered]
    if both:
        ctx.stats.bad_delivery(workload, f"delivered and also failed: {both[:3]}")
    missing = len(uris) - len(delivered) - len(failed)
    if missing > 0:
        lost = [u for u in uris if u not in delivered and u not in failed]
        ctx.stats.bad_delivery(
            workload,
            f"{missing} objects neither delivered nor failed ({len(failed)} failed), e.g. {lost[:3]}",
        )


def many_round(ctx: Ctx, rnd: int) -> None:
    """get_many over random batches about a dataset's worth in all (module-level and a
    Client's, alternately, returned in input order), and a few Client.get_range."""
    import sluice

    total = sum(e.size for e in ctx.entries)
    done_bytes = 0
    i = 0
    while done_bytes < total:
        entries = ctx.batch(MANY_BATCH_BYTES)
        uris = [e.uri for e in entries]
        inflight = ctx.rng.randint(1, 8)
        fn = sluice.get_many if i % 2 else ctx.client.get_many
        ok, objs = ctx.attempt(
            "many", f"get_many of {len(uris)}", lambda: fn(uris, max_in_flight=inflight)
        )
        if ok:
            if [o.uri for o in objs] != uris:
                ctx.stats.bad_delivery(
                    "many", f"get_many returned {[o.uri for o in objs][:3]}... for {uris[:3]}..."
                )
            for o, e in zip(objs, entries):
                ctx.check_entry("many", o, e)
        del objs
        done_bytes += sum(e.size for e in entries)
        i += 1
    for _ in range(4):
        ranged_read(ctx, "many", ctx.client.get_range)


def ranged_read(ctx: Ctx, workload: str, get_range: Callable[..., Any]) -> None:
    """One random range of a random object (sometimes to its end) checked against pattern."""
    e = ctx.rng.choice(ctx.entries)
    offset = ctx.rng.randrange(e.size)
    length = ctx.rng.randint(1, min(e.size - offset, 2 * MiB))
    to_end = ctx.rng.random() < 0.25
    if to_end:
        length = e.size - offset
    what = f"get_range {e.uri} {offset}+{length}"
    ok, obj = ctx.attempt(
        workload, what, lambda: get_range(e.uri, offset, None if to_end else length)
    )
    if ok:
        verify_bytes(ctx.stats, workload, what, obj, e.expected_range(offset, length))
        ctx.done()


def compat_round(ctx: Ctx, rnd: int) -> None:
    """The s3dlio-compatible calls a DLIO run makes: get, get_range, get_many, its loader
    with collect_batch, put_bytes."""
    from sluice.compat import s3dlio

    for e in ctx.batch(24 * MiB):
        ok, obj = ctx.attempt("compat", f"s3dlio.get {e.uri}", lambda: s3dlio.get(e.uri))
        if ok:
            ctx.check_entry("compat", obj, e)
    for _ in range(3):
        ranged_read(ctx, "compat", s3dlio.get_range)

    entries = ctx.batch(32 * MiB)
    ok, pairs = ctx.attempt(
        "compat",
        f"s3dlio.get_many of {len(entries)}",
        lambda: s3dlio.get_many([e.uri for e in entries], max_in_flight=4),
    )
    if ok:
        if [u for u, _ in pairs] != [e.uri for e in entries]:
            ctx.stats.bad_delivery("compat", "s3dlio.get_many: pairs not in input order")
        for (u, data), e in zip(pairs, entries):
            ctx.check_entry("compat", data, e)
    del pairs

    compat_loader(ctx, rnd)
    compat_put(ctx)


def compat_loader(ctx: Ctx, rnd: int) -> None:
    """DLIO's loop: `while batch := it.collect_batch(7)`. s3dlio's loader has no
    on_error option: an error ends the pass (DLIO retries the step)."""
    from sluice.compat import s3dlio

    entries = ctx.batch(64 * MiB)
    uris = [e.uri for e in entries]
    ok, it = ctx.attempt(
        "compat",
        "PyBytesAsyncDataLoader.items",
        lambda: s3dlio.PyBytesAsyncDataLoader(
            s3dlio.PyDataset.from_uris(uris), {"prefetch": 4, "shuffle": True, "seed": rnd}
        ).items(),
    )
    if not ok:
        return
    delivered: Counter = Counter()
    while True:
        ok, batch = ctx.attempt(
            "compat", f"collect_batch after {sum(delivered.values())}", lambda: it.collect_batch(7)
        )
        if not ok:
            return  # the pass ended in an error (counted): nothing more to account for
        if not batch:
            break
        for obj in batch:
            ctx.check_delivery("compat", obj, delivered)
        del batch
    account(ctx, "compat", uris, delivered, [])


def new_write_uri(ctx: Ctx, what: str) -> str:
    ctx.write_seq[0] += 1
    return f"{ctx.prefix_uri.rsplit(DATA_PREFIX, 1)[0]}{WRITE_PREFIX}{what}-{os.getpid()}-{ctx.write_seq[0]:06}.bin"


def source_slice(ctx: Ctx, size: int) -> memoryview:
    """`size` random bytes at a random place in the source: every object written differs,
    so bytes from another object would not pass."""
    at = ctx.rng.randrange(len(ctx.source) - size + 1)
    return memoryview(ctx.source)[at : at + size]


def compat_put(ctx: Ctx) -> None:
    from sluice.compat import s3dlio

    data = source_slice(ctx, ctx.rng.randint(64 * KiB, 20 * MiB))
    uri = new_write_uri(ctx, "put_bytes")
    ok, _ = ctx.attempt("compat", f"put_bytes {uri}", lambda: s3dlio.put_bytes(uri, data))
    read_back(ctx, "compat", uri, data, put_ok=ok, reader=lambda: s3dlio.get(uri))


def read_back(
    ctx: Ctx, workload: str, uri: str, data: Any, put_ok: bool, reader: Callable[[], Any]
) -> None:
    """Reads a written object back and compares it; then deletes it. After a failed write
    the object may be absent or (a completion that worked though its answer was lost)
    present: present, it must be whole."""
    import sluice

    if not put_ok:
        ok, there = ctx.attempt(
            workload, f"exists {uri} after a failed write", lambda: ctx.client.exists(uri)
        )
        if not (ok and there):
            return
        ctx.stats.notes["failed write left a visible object"] += 1
    ok, got = ctx.attempt(workload, f"read_back {uri}", reader)
    if ok:
        verify_bytes(ctx.stats, workload, f"read_back {uri}", got, data)
        ctx.done()
    del got
    ctx.attempt(workload, f"delete {uri}", lambda: sluice.delete(uri))


def chunks(rng: random.Random, data: memoryview) -> List[memoryview]:
    """`data` in uneven pieces (1 byte to 3 MiB), as a library writing a file would."""
    out, at = [], 0
    while at < len(data):
        n = rng.choice([1, rng.randint(1, 64 * KiB), rng.randint(64 * KiB, 3 * MiB)])
        out.append(data[at : at + n])
        at += n
    return out


def write_streaming(ctx: Ctx, how: str, uri: str, data: memoryview) -> None:
    """Uploads `data` through one of the streaming writers; on an error the upload is
    aborted (an abort failing too is left to abort_on_drop)."""
    import sluice

    pieces = chunks(ctx.rng, data)
    if how == "sluice.open":
        # sluice.open's return type is a Union of reader and writer whatever the mode.
        with cast(
            sluice.ObjectWriter, sluice.open(uri, "wb", client=ctx.client, part_size=PART_SIZE)
        ) as f:
            for p in pieces:
                f.write(p)
        total = f.result["total_bytes"] if f.result else None
    else:
        w = (
            sluice.writer(uri, part_size=PART_SIZE)
            if how == "sluice.writer"
            else ctx.client.writer(uri, part_size=PART_SIZE)
        )
        try:
            for p in pieces:
                w.write(p)
            total = w.close()["total_bytes"]
        except BaseException:
            try:
                w.abort()
            except Exception:
                pass
            raise
    if total != len(data):
        raise AssertionError(f"{uri}: the writer reported {total} bytes, {len(data)} were written")


def read_whole(ctx: Ctx, how: str, uri: str) -> Any:
    """The object through Client.get, or sluice.open "rb" read in uneven pieces."""
    import sluice

    if how == "get":
        return ctx.client.get(uri)
    with cast(sluice.ObjectReader, sluice.open(uri, "rb", client=ctx.client)) as f:
        buf = bytearray(f.size)
        view, at = memoryview(buf), 0
        while at < len(buf):
            n = f.readinto(view[at : at + ctx.rng.randint(1, 4 * MiB)])
            if n == 0:
                break
            at += n
        return view[:at]


def writer_round(ctx: Ctx, rnd: int) -> None:
    """A few streaming uploads of 1-24 MiB (1 to 5 parts), each read back and deleted."""
    for i in range(4):
        how = ["sluice.writer", "Client.writer", "sluice.open"][(rnd + i) % 3]
        size = ctx.rng.choice(
            [ctx.rng.randint(1 * MiB, PART_SIZE), ctx.rng.randint(PART_SIZE, 24 * MiB)]
        )
        data = source_slice(ctx, size)
        uri = new_write_uri(ctx, how.replace(".", "_").lower())
        ok, _ = ctx.attempt(
            "writer", f"{how} {uri} ({size} bytes)", lambda: write_streaming(ctx, how, uri, data)
        )
        back = "get" if ctx.rng.random() < 0.5 else "open"
        read_back(ctx, "writer", uri, data, put_ok=ok, reader=lambda: read_whole(ctx, back, uri))


WORKLOADS: Dict[str, Callable[[Ctx, int], None]] = {
    "loader": loader_round,
    "many": many_round,
    "compat": compat_round,
    "writer": writer_round,
}


# --------------------------------------------------------------------------- the run


def client_env(server_env: Dict[str, str]) -> None:
    """Points this process at the server and sets the short client timeouts. Endpoint
    variables that would win over the server's (S3_ENDPOINT_URIS; AWS_ENDPOINT_URL, which the
    compat module prefers) are removed, as sluice.testing.environment does."""
    os.environ.update(server_env)
    os.environ.update(CLIENT_ENV)
    for k in ("S3_ENDPOINT_URIS", "AWS_ENDPOINT_URL"):
        os.environ.pop(k, None)
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


def load_entries(objects: List[List[Any]], bucket: str) -> List[Entry]:
    """The dataset with the SHA-256 of every object's expected bytes (computed once, so RSS
    does not hold a copy of the dataset)."""
    from sluice.testing import pattern

    out = []
    prefix = f"s3://{bucket}/"
    for uri, size in objects:
        key = uri[len(prefix) :]
        out.append(Entry(uri, key, size, hashlib.sha256(pattern(key, size)).digest()))
    return out


def flat_check(
    name: str,
    samples: List[Sample],
    get: Callable[[Sample], float],
    growth: float,
    slack: float,
    unit: Callable[[float], str],
) -> Tuple[bool, str]:
    """The average of the last samples against the average of as many samples from the end
    of warm-up: with the heap trimmed, RSS moves down as well as up from minute to minute
    (±50 MiB in a 30-minute run), so one sample is no baseline; a leak moves the average."""
    warm = max(BASELINE_MINUTE, samples[-1].minutes / 3) if samples else BASELINE_MINUTE
    after_warm = [s for s in samples if s.minutes >= warm]
    first = after_warm[:LAST_SAMPLES]
    last = after_warm[LAST_SAMPLES:][-LAST_SAMPLES:]
    if not first or not last:
        return False, f"{name}: too few samples after minute {warm:g} to compare"

    def avg(group: List[Sample]) -> float:
        return sum(get(s) for s in group) / len(group)

    def minutes(group: List[Sample]) -> str:
        return ", ".join(f"{s.minutes:.2f}" for s in group)

    limit = avg(first) * (1 + growth) + slack
    ok = avg(last) <= limit
    return ok, (
        f"{name}: average of minutes {minutes(first)} {unit(avg(first))}; of minutes {minutes(last)} "
        f"{unit(avg(last))}; limit {unit(limit)} (+{growth:.0%} + {unit(slack)})"
    )


def summary(
    stats: Stats,
    samples: List[Sample],
    server_stats: Dict[str, Any],
    minutes: float,
    seed: int,
    logs: SluiceLogCounter,
) -> int:
    """Prints the summary and the checks; returns the exit status."""
    log(f"soak: summary of {samples[-1].minutes:.2f} minutes (seed {seed}, client {CLIENT_ENV})")
    log(f"  operations: {dict(stats.ops)}; bytes verified {stats.bytes_verified / 1e9:.2f} GB")
    log(
        f"  errors (operations that failed after their retries), by workload/kind: {dict(sorted(stats.errors.items())) or 'none'}"
    )
    if stats.notes:
        log(f"  notes: {dict(stats.notes)}")
    log(f"  loader retries (Loader.stats): {stats.retries}")
    fired = server_stats.get("fired", {})
    log(
        f"  server: {sum(fired.values())} faults fired of {sum(server_stats.get('injected', {}).values())} injected "
        f"({', '.join(f'{k} {v}' for k, v in sorted(fired.items()))}); "
        f"{server_stats.get('requests', '?')} requests, {server_stats.get('gets', '?')} GETs, {server_stats.get('heads', '?')} HEADs"
    )
    log(
        f"  sluice log records, client: {dict(logs.counts) or 'none'}; server: {server_stats.get('log_records') or 'none'}"
    )
    for w in logs.first_warnings:
        log(f"    e.g. {w}")
    log(
        "  samples (minute: rss MiB / fds / threads): "
        + "; ".join(f"{s.minutes:.2f}: {s.rss / MiB:.0f}/{s.fds}/{s.threads}" for s in samples)
    )

    checks: List[Tuple[str, Optional[bool], str]] = []
    ok: Optional[bool]
    checks.append(
        (
            "wrong bytes or lost objects",
            stats.wrong_bytes == 0 and not stats.wrong_objects and not stats.bad_deliveries,
            f"{stats.wrong_bytes} wrong bytes ({len(stats.wrong_objects)} reads with any); {len(stats.bad_deliveries)} lost, duplicated or misdirected deliveries",
        )
    )
    checks.append(
        (
            "hangs",
            True,
            f"none: no operation took over {HANG_S:.0f} s (the watchdog aborts the run on one)",
        )
    )
    checks.append(
        (
            "unexpected exceptions",
            not stats.unexpected,
            f"{len(stats.unexpected)} errors that are not OSErrors"
            + (f": {stats.unexpected[:3]}" if stats.unexpected else ""),
        )
    )
    checks.append(
        (
            "faults fired",
            sum(fired.values()) > 0,
            f"{sum(fired.values())} faults fired in the server",
        )
    )
    if minutes >= FLAT_MIN_MINUTES:
        ok, msg = flat_check(
            "RSS", samples, lambda s: s.rss, RSS_GROWTH, RSS_SLACK, lambda v: f"{v / MiB:.1f} MiB"
        )
        checks.append(("RSS flat", ok, msg))
        ok, msg = flat_check(
            "fds", samples, lambda s: s.fds, FD_GROWTH, FD_SLACK, lambda v: f"{v:.1f}"
        )
        checks.append(("fds flat", ok, msg))
    else:
        why = f"the run is shorter than {FLAT_MIN_MINUTES:g} minutes"
        checks.append(("RSS flat", None, why))
        checks.append(("fds flat", None, why))

    for name, ok, msg in checks:
        log(f"soak: check {name}: {'ok' if ok else 'skipped' if ok is None else 'FAILED'}: {msg}")
    for m in stats.wrong_objects[:10] + stats.bad_deliveries[:10]:
        log(f"  {m}")
    passed = sum(1 for _, ok, _ in checks if ok)
    failed = sum(1 for _, ok, _ in checks if ok is False)
    skipped = sum(1 for _, ok, _ in checks if ok is None)
    log(f"soak: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


def client_main(minutes: float, seed: int) -> int:
    log(f"soak: {minutes:g} minutes, seed {seed}; starting the server process")
    server = ServerProcess(seed)
    pin("SOAK_CLIENT_CPU")  # after the server started: it must not inherit this pinning
    client_env(server.info["env"])

    import sluice

    logs = quiet_sluice_logs()

    entries = load_entries(server.info["objects"], server.info["bucket"])
    stats = Stats()
    start = time.monotonic()
    samples: List[Sample] = []
    watchdog = Watchdog(lambda why: log(status_line(stats, sample(start), f" ({why})")))
    watchdog.start()
    ctx = Ctx(
        stats=stats,
        watchdog=watchdog,
        entries=entries,
        by_uri={e.uri: e for e in entries},
        prefix_uri=f"s3://{server.info['bucket']}/{DATA_PREFIX}",
        client=sluice.Client(),
        rng=random.Random(seed),
        source=os.urandom(32 * MiB),
    )
    log(
        f"soak: {len(entries)} objects, {sum(e.size for e in entries) / MiB:.0f} MiB, at {server.info['env']['AWS_ENDPOINT_URL_S3']}; "
        f"server pid {server.proc.pid}, client pid {os.getpid()}; watchdog {HANG_S:.0f} s"
    )

    deadline = start + minutes * 60
    next_report = 1.0
    rnd = samples_at_round = 0
    while time.monotonic() < deadline:
        for name, round_fn in WORKLOADS.items():
            if time.monotonic() >= deadline:
                break
            round_fn(ctx, rnd)
            server.check_alive()
        rnd += 1
        # Sampled between rounds, with no operation in flight: the same point each time, so
        # the numbers compare (connections in use come and go within a round).
        if (time.monotonic() - start) / 60 >= next_report:
            s = sample(start)
            samples.append(s)
            samples_at_round = rnd
            log(status_line(stats, s))
            next_report = int(s.minutes) + 1.0
    if not samples or samples_at_round != rnd:
        # Rounds ran since the last minute's line: one more line for the end.
        s = sample(start)
        samples.append(s)
        log(status_line(stats, s, f" (end, {rnd} rounds)"))
    ctx.op("stopping the server")
    server_stats = server.stop()
    return summary(stats, samples, server_stats, minutes, seed, logs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, help="how long to run (fractions allowed)")
    p.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1 << 31)),
    )
    p.add_argument(
        "--serve", action="store_true", help=argparse.SUPPRESS
    )  # internal: the server process
    args = p.parse_args()
    if args.serve:
        return serve_main(args.seed)
    if args.minutes is None or args.minutes <= 0:
        p.error("--minutes: a positive number of minutes is required")
    return client_main(args.minutes, args.seed)


if __name__ == "__main__":
    sys.exit(main())
