"""The shapes of the dicts the native module returns, for annotations and type checkers;
``sluice`` re-exports them. At runtime the values are plain ``dict``s with exactly these
keys (``tests/test_types.py`` checks that against the native module)."""

from typing import List, Optional, TypedDict

__all__ = ["StatResult", "LoaderStats", "WriteResult", "EndpointStats", "Congestion"]


class StatResult(TypedDict):
    """``sluice.stat(uri)`` / ``Client.stat(uri)``: what one HEAD says about an object."""

    uri: str
    """The URI as given."""
    size: int
    """Bytes."""
    etag: Optional[str]
    """The ETag as the service sent it (quotes included), or None when it sent none."""
    last_modified: Optional[float]
    """Seconds since the epoch, or None when the service did not say."""


class LoaderStats(TypedDict):
    """``Loader.stats()``: the loader's counters so far. (A closed loader returns ``{}``.)"""

    objects: int
    """Objects read."""
    bytes: int
    """Bytes read."""
    elapsed_s: float
    """Seconds from the loader's start to its last delivery (to now before the first)."""
    mb_per_s: float
    """``bytes`` / ``elapsed_s``, in MB (10**6 bytes) per second."""
    requests: int
    """HTTP requests made."""
    retries: int
    """Extra HTTP attempts beyond one per request (retries and resumptions)."""
    errors: int
    """Objects that failed."""
    latency_p50_ms: float
    """Median time to read one object, milliseconds (0 before the first)."""
    latency_p99_ms: float
    batch_gap_p50_ms: float
    """Median time between two ``collect_batch`` returns, milliseconds."""
    batch_gap_max_ms: float
    window: int
    """Objects the loader lets be in flight now (being read, or waiting to be taken):
    ``prefetch`` plus the requests its client allows, or (the default) twice those."""
    range_size: int
    """Bytes per ranged GET of an object whose read begins now: ``chunk_size``, or (the
    default) ``memory_budget`` ÷ twice the requests its client allows, 4 to 8 MiB; 0 when
    ``range_threshold`` turns splitting off."""
    over_budget: int
    """The most bytes one object read beyond ``memory_budget``: an object named without a
    size is budgeted at the largest size the loader has seen, and one larger than that reads
    its excess over the budget when none is free. 0 for a dataset listed with its sizes."""
    congestion: Optional["Congestion"]
    """The client's requests in flight (``Client.congestion()``); None for local files."""
    endpoints: List["EndpointStats"]
    """What each endpoint of the loader's client has served (that client's counters, shared
    by its loaders); empty for a client of one endpoint."""


class WriteResult(TypedDict):
    """``Writer.close()``: the object a streaming upload made visible."""

    uri: str
    total_bytes: int
    parts: int
    """Parts uploaded (1 for an object sent in one request)."""
    etag: Optional[str]


class EndpointStats(TypedDict):
    """``Client.endpoint_stats()``: what one endpoint of a client with several has served."""

    url: str
    """The endpoint."""
    requests: int
    """Attempts sent to it."""
    failures: int
    """Attempts that did not reach it (refused, reset, timed out)."""
    bytes_read: int
    """Body bytes received from it."""
    bytes_written: int
    """Body bytes sent to it (PUTs and parts)."""
    in_flight: int
    """Attempts in flight now."""
    down: bool
    """Whether it is being avoided now (after failing to answer)."""


class BufferPoolStats(TypedDict):
    """``sluice.buffer_pools()``: one of this process's shared buffer pools now. Loaders with
    the same prefetch window share one across epochs; ``get``/``get_range``/``get_many``
    share another, capped at 128 MiB idle."""

    pool: str
    """Which pool: ``loader window N[, budget B B]`` (N: the most objects its loaders hold in flight) or ``get/get_many``."""
    idle_buffers: int
    """Buffers kept for the next objects."""
    idle_bytes: int
    """Their capacity: memory kept touched (resident) for reuse."""
    held_bytes: int
    """Bytes of delivered objects not yet dropped (yours, or waiting to be taken)."""
    peak_held_bytes: int
    """The most that were held at once lately (in the last one to two minutes)."""
    idle_cap_bytes: int
    """The most idle bytes the pool keeps now."""


class Congestion(TypedDict):
    """``Client.congestion()``: the client's requests in flight, found at run time (doubling
    while the store's rate follows, held where it stops paying) and cut x0.7 per
    SlowDown/429/503, timeout or reset; fixed when ``SLUICE_MAX_CONNECTIONS`` is set."""

    limit: int
    """Requests allowed in flight now."""
    max: int
    """The bound it never exceeds (``SLUICE_MAX_CONNECTIONS``, default 256)."""
    adaptive: bool
    """Whether the limit is searched for (False: set by ``SLUICE_MAX_CONNECTIONS``)."""
    rate: float
    """Answers per second in the controller's last measured round (0 before the first)."""
    throttled: int
    """Answers that asked the client to slow down."""
    cuts: int
    """Times the limit was cut."""
    last: Optional[str]
    """The last decision about the limit and the rates behind it (``"held at 32: 64 read
    1.05x as fast ..."``); None before the first."""
