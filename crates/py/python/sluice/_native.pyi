"""Type stubs of the native extension; the public names are re-exported by ``sluice``."""

import sys
from os import PathLike
from types import TracebackType
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    Type,
    Union,
    final,
)

from typing_extensions import disjoint_base

from ._config import Config
from ._types import (
    BufferPoolStats,
    Congestion,
    EndpointStats,
    LoaderStats,
    StatResult,
    WriteResult,
)

# As the module's own __all__ (PyO3 writes it: every class and function added).
__all__ = [
    "Client",
    "Object",
    "BytesView",
    "ZstdEncoder",
    "Dataset",
    "Loader",
    "TestServer",
    "HostileServer",
    "Writer",
    "ListEntry",
    "Listing",
    "S3Error",
    "get",
    "get_range",
    "get_ranges",
    "get_many",
    "list",
    "list_objects",
    "stat",
    "endpoint_stats",
    "settings",
    "buffer_pools",
    "exists",
    "put",
    "delete",
    "writer",
    "pattern",
    "hostile_cases",
    "write_npz",
    "random_npz",
    "set_runtime_threads",
    "finish_op_log",
    "_next_log",
    "parquet_row_groups",
    "bytes_view",
    "empty_view",
    "parquet_get_rg",
    "parquet_read",
    "parquet_cache_invalidate",
    "parquet_cache_clear",
    "parquet_cache_len",
    "parquet_write_random",
    "aio_get",
    "aio_get_range",
    "aio_get_ranges",
    "aio_get_many",
    "aio_stat",
    "aio_exists",
    "aio_put",
    "aio_delete",
    "aio_list_next",
    "aio_write",
    "aio_close",
    "aio_abort",
    "backends",
    "__version__",
]

backends: List[str]
"""The client stacks compiled in ("hyper", "awssdk", "objectstore")."""
__version__: str
"""The crate's version (the source of ``sluice.__version__`` in a source checkout)."""

class S3Error(OSError):
    """An S3 request failed. ``status``: HTTP status (None when no response came);
    ``code``: S3 error code, or "Transport" / "Integrity" / "Cancelled"; ``request_id``;
    ``uri``: the object or prefix concerned."""

    status: Optional[int]
    code: str
    request_id: Optional[str]
    uri: str

@disjoint_base
class Object:
    """One object's bytes over the loader's memory. Supports the buffer protocol (read-only):
    ``memoryview(obj)`` and ``numpy.frombuffer(obj)`` copy nothing; ``bytes(obj)`` copies.
    The memory is reused once the last reference and view are gone."""

    @property
    def uri(self) -> str: ...
    @property
    def byte_count(self) -> int: ...
    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...
    if sys.version_info >= (3, 12):
        # PEP 688: CPython 3.12+ exposes the buffer slot as __buffer__.
        def __buffer__(self, flags: int, /) -> memoryview: ...
    def to_bytes(self) -> bytes: ...
    def memoryview(self) -> memoryview: ...

@final
class BytesView(Object):
    """s3dlio's name for a zero-copy result (``sluice.compat.s3dlio``): an ``Object``."""

def bytes_view(obj: Object) -> BytesView: ...
def empty_view(uri: str) -> BytesView: ...

@final
class ZstdEncoder:
    """Streamed zstd compression (one frame) for the s3dlio compat module's writers."""

    def __new__(cls, level: int) -> "ZstdEncoder": ...
    def compress(self, data: Any) -> bytes: ...
    def finish(self) -> bytes: ...

@final
class Writer:
    """A streaming upload (``Client.writer``): parts upload while you write; nothing is
    visible before ``close``; ``abort`` leaves nothing behind."""

    @property
    def uri(self) -> str: ...
    @property
    def bytes_written(self) -> int: ...
    def write(self, data: Any) -> int: ...
    def close(self) -> WriteResult:
        """Uploads what remains and makes the object visible."""
    def abort(self) -> None: ...

@final
class ListEntry:
    """One entry of ``list_objects``: an object, or (not recursive) a common prefix."""

    @property
    def uri(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def size(self) -> Optional[int]:
        """Bytes; None for a prefix."""
    @property
    def etag(self) -> Optional[str]: ...
    @property
    def last_modified(self) -> Optional[float]:
        """Seconds since the epoch, when the store said."""
    @property
    def is_prefix(self) -> bool: ...

@final
class Listing:
    """``list_objects``' iterator: lists page by page as you iterate."""

    def __iter__(self) -> Listing: ...
    def __next__(self) -> ListEntry: ...

@final
class Client:
    """A client from the standard AWS environment; arguments override it."""

    def __new__(
        cls,
        backend: Optional[str] = None,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        ca_bundle: Optional[Union[str, PathLike]] = None,
        max_attempts: Optional[int] = None,
        connect_timeout: Optional[float] = None,
        first_byte_timeout: Optional[float] = None,
        endpoints: Optional[Sequence[str]] = None,
        profile: Optional[str] = None,
        unsigned: Optional[bool] = None,
        stall_timeout: Optional[float] = None,
        config: Optional[Config] = None,
    ) -> Client: ...
    @property
    def backend(self) -> str: ...
    @property
    def config(self) -> Config:
        """The settings this client was made with (what it pickles as)."""
    def __reduce__(self) -> Tuple[Callable[[Config], Client], Tuple[Config]]: ...
    def endpoint_stats(self) -> List[EndpointStats]: ...
    def congestion(self) -> Optional[Congestion]: ...
    def get(self, uri: str) -> Object: ...
    def get_range(
        self, uri: str, offset: int, length: Optional[int] = None, etag: Optional[str] = None
    ) -> Object: ...
    def get_ranges(
        self,
        uri: str,
        ranges: Sequence[Tuple[int, int]],
        coalesce: Optional[int] = None,
        etag: Optional[str] = None,
    ) -> List[Object]:
        """Each ``(start, end)`` range (end exclusive) in the order given: ranges at most
        ``coalesce`` bytes apart (1 MiB) read by one request, all at once, of one version."""
    def get_many(
        self, uris: Sequence[str], max_in_flight: Optional[int] = None
    ) -> List[Object]: ...
    def list(self, uri: str, recursive: bool = False) -> List[str]: ...
    def list_objects(self, uri: str, recursive: bool = False) -> Listing: ...
    def stat(self, uri: str) -> StatResult: ...
    def exists(self, uri: str) -> bool: ...
    def put(
        self, uri: str, data: Any, *, mode: str = "overwrite", if_match: Optional[str] = None
    ) -> Optional[str]: ...
    def delete(self, uri: str) -> None: ...
    def writer(
        self,
        uri: str,
        part_size: Optional[int] = None,
        max_in_flight: Optional[int] = None,
        abort_on_drop: bool = True,
        mode: str = "overwrite",
    ) -> Writer: ...

@final
class Dataset:
    @staticmethod
    def from_uris(uris: Sequence[str]) -> Dataset: ...
    @staticmethod
    def from_prefix(
        uri: str,
        suffix: Optional[str] = None,
        client: Optional[Client] = None,
        config: Optional[Config] = None,
    ) -> Dataset: ...
    @property
    def uris(self) -> List[str]: ...
    def __getitem__(self, index: int, /) -> str: ...
    def __len__(self) -> int: ...

@final
class Loader:
    """Reads this reader's shard of a dataset. ``prefetch`` bounds the objects read ahead
    and waiting to be taken, not the requests: as many more objects as the client allows
    requests are being read besides (its controller's limit), so small objects under latency
    keep every request busy and a large object's ranges fill them. None, the default: twice
    the requests the client's controller finds the store answers faster with, 16 to 512
    objects in all (``stats()["window"]`` says how many now).

    ``order``: "completion" (fastest) or "input"; ``shuffle``/``seed``/``epoch``: a seeded
    permutation, new per epoch; ``rank``/``world_size``/``worker_id``/``num_workers``: this
    reader's shard (disjoint, together complete); objects of at least ``range_threshold``
    bytes (32 MiB) are read as parallel ranged GETs of ``chunk_size`` bytes (None, the
    default: 4 to 8 MiB, smaller as the client allows more requests within ``memory_budget``;
    ``stats()["range_size"]`` says the size now), a threshold of 2**64-1 turns that off;
    ``max_requests``: HTTP requests in flight (default 256; the client's controller sends
    fewer where more do not pay); ``memory_budget``: bytes in flight (fetching or waiting to
    be taken; default 256 MiB; None: no bound but the window). Nothing is sent before an
    object's first GET: an object given without a size is counted at the largest size seen
    so far, and one larger than that may read its excess beyond the budget
    (``stats()["over_budget"]``); a listed dataset's sizes are exact;
    ``on_error``: "raise" or "deliver" (failed objects raise from ``__next__`` and reading
    goes on); ``reuse_buffers``: loaders of this process with the same window share a pool,
    so a second epoch reuses the first one's memory (idle memory never exceeds what was
    once alive at once)."""

    def __new__(
        cls,
        dataset: Dataset,
        prefetch: Optional[int] = None,
        order: str = "completion",
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        worker_id: Optional[int] = None,
        num_workers: Optional[int] = None,
        backend: Optional[str] = None,
        client: Optional[Client] = None,
        range_threshold: Optional[int] = None,
        chunk_size: Optional[int] = None,
        max_requests: Optional[int] = None,
        # 268435456 (256 MiB); PyO3's signature shows `...` for a default it cannot spell.
        memory_budget: Optional[int] = ...,
        on_error: str = "raise",
        reuse_buffers: bool = True,
        config: Optional[Config] = None,
    ) -> Loader: ...
    def __iter__(self) -> Loader: ...
    def __next__(self) -> Object: ...
    def __len__(self) -> int: ...
    def collect_batch(self, n: int) -> List[Object]: ...
    def stats(self) -> LoaderStats:
        """The counters so far (``{}`` once closed)."""
    def close(self) -> None: ...
    def __enter__(self) -> Loader: ...
    def __exit__(
        self,
        _ty: Optional[Type[BaseException]],
        _value: Optional[BaseException],
        _tb: Optional[TracebackType],
    ) -> None: ...

@final
class TestServer:
    def __new__(
        cls,
        profile: str = "loopback",
        *,
        synthetic: Optional[str] = None,
        sink: bool = False,
        first_byte_latency: Optional[str] = None,
        get_latency: Optional[str] = None,
        put_latency: Optional[str] = None,
        list_latency: Optional[str] = None,
        request_rate: Optional[str] = None,
        rate_partition: Optional[str] = None,
        connection_bandwidth: Optional[str] = None,
        node_bandwidth: Optional[str] = None,
        latency_seed: Optional[int] = None,
    ) -> TestServer: ...
    def stats(self) -> Dict[str, Any]: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def https_endpoint(self) -> str: ...
    @property
    def ca_bundle(self) -> str: ...
    @property
    def bucket(self) -> str: ...
    @property
    def access_key(self) -> str: ...
    @property
    def secret_key(self) -> str: ...
    @property
    def requests(self) -> int: ...
    @property
    def gets(self) -> int: ...
    @property
    def heads(self) -> int: ...
    def env(self, https: bool = False) -> Dict[str, str]: ...
    def insert(self, key: str, data: Any, bucket: Optional[str] = None) -> None: ...
    def fill(self, prefix: str, count: int, size: int) -> List[str]: ...
    def inject(
        self, kind: str, count: int = 1, after_bytes: int = 0, seconds: float = 0.0
    ) -> None: ...
    def clear_faults(self) -> None: ...
    def stop(self) -> None: ...
    def __enter__(self) -> TestServer: ...
    def __exit__(
        self,
        _ty: Optional[Type[BaseException]],
        _value: Optional[BaseException],
        _tb: Optional[TracebackType],
    ) -> None: ...

@final
class HostileServer:
    """Plays one case of the bad-input catalogue (see ``hostile_cases``)."""
    def __new__(cls, case: str) -> HostileServer: ...
    @property
    def endpoint(self) -> str: ...
    def env(self) -> Dict[str, str]: ...
    @staticmethod
    def secrets() -> List[str]: ...
    def stop(self) -> None: ...

def hostile_cases() -> List[Dict[str, Any]]: ...
def pattern(key: str, length: int) -> bytes: ...
def write_npz(arrays: Sequence[Tuple[str, str, Sequence[int], bytes]]) -> bytes:
    """An .npz as numpy.savez writes it, of (name, dtype descr, shape, C-order content)."""

def random_npz(shape: Sequence[int], descr: str, itemsize: int, num_samples: int) -> bytes:
    """An .npz with ``x`` of ``shape`` incompressible bytes and ``y`` int64 zeros."""

def finish_op_log() -> None:
    """Closes the op-log's open frame (``SLUICE_OP_LOG``); called at exit."""

def set_runtime_threads(threads: int) -> bool:
    """I/O threads of this process; True if set before the runtime started."""

def get(uri: str) -> Object: ...
def get_range(
    uri: str, offset: int, length: Optional[int] = None, etag: Optional[str] = None
) -> Object: ...
def get_ranges(
    uri: str,
    ranges: Sequence[Tuple[int, int]],
    coalesce: Optional[int] = None,
    etag: Optional[str] = None,
) -> List[Object]: ...
def get_many(uris: Sequence[str], max_in_flight: Optional[int] = None) -> List[Object]: ...
def list(uri: str, recursive: bool = False) -> List[str]: ...
def list_objects(uri: str, recursive: bool = False) -> Listing: ...
def stat(uri: str) -> StatResult: ...
def endpoint_stats() -> List[EndpointStats]: ...
def buffer_pools() -> List[BufferPoolStats]: ...
def settings() -> List[Dict[str, Any]]: ...
def exists(uri: str) -> bool: ...
def put(
    uri: str, data: Any, *, mode: str = "overwrite", if_match: Optional[str] = None
) -> Optional[str]: ...
def delete(uri: str) -> None: ...
def writer(
    uri: str,
    part_size: Optional[int] = None,
    max_in_flight: Optional[int] = None,
    abort_on_drop: bool = True,
    mode: str = "overwrite",
) -> Writer: ...
def parquet_row_groups(
    uri: str, footer_cap: int = 4194304, client: Optional[Client] = None
) -> List[Tuple[int, List[Tuple[int, int]]]]:
    """Every row group: (rows, [(offset, length) of each leaf column chunk])."""

def parquet_get_rg(
    uri: str,
    rg_idx: int,
    col_indices: Optional[Sequence[int]] = None,
    footer_cap: int = 4194304,
    decode: str = "arrow",
    client: Optional[Client] = None,
) -> Object:
    """One row group as an Arrow IPC stream ("arrow") or its raw column-chunk bytes."""

def parquet_read(
    uri: str,
    row_groups: Optional[Sequence[int]] = None,
    columns: Optional[Sequence[Union[int, str]]] = None,
    coalesce: Optional[int] = None,
    footer_cap: int = 4194304,
    client: Optional[Client] = None,
) -> Object:
    """The selected row groups and leaf columns as an Arrow IPC stream (only their chunks fetched)."""

def parquet_cache_invalidate(uri: str) -> None: ...
def parquet_cache_clear() -> None: ...
def parquet_cache_len() -> int: ...
def parquet_write_random(
    uri: str,
    columns: Sequence[Tuple[str, int]],
    rows_per_rg: int,
    num_row_groups: int,
    client: Optional[Client] = None,
) -> None:
    """A parquet file of random float32 columns, uploaded row group by row group."""

# sluice.aio's awaitables (asyncio futures of the running loop).
def aio_get(client: Client, uri: str) -> Awaitable[Object]: ...
def aio_get_range(
    client: Client,
    uri: str,
    offset: int,
    length: Optional[int] = None,
    etag: Optional[str] = None,
) -> Awaitable[Object]: ...
def aio_get_ranges(
    client: Client,
    uri: str,
    ranges: Sequence[Tuple[int, int]],
    coalesce: Optional[int] = None,
    etag: Optional[str] = None,
) -> Awaitable[List[Object]]: ...
def aio_get_many(
    client: Client, uris: Sequence[str], max_in_flight: Optional[int] = None
) -> Awaitable[List[Object]]: ...
def aio_stat(client: Client, uri: str) -> Awaitable[StatResult]: ...
def aio_exists(client: Client, uri: str) -> Awaitable[bool]: ...
def aio_put(
    client: Client, uri: str, data: Any, *, mode: str = "overwrite", if_match: Optional[str] = None
) -> Awaitable[Optional[str]]: ...
def aio_delete(client: Client, uri: str) -> Awaitable[None]: ...
def aio_list_next(listing: Listing) -> Awaitable[List[ListEntry]]: ...
def aio_write(writer: Writer, data: Any) -> Awaitable[int]: ...
def aio_close(writer: Writer) -> Awaitable[WriteResult]: ...
def aio_abort(writer: Writer) -> Awaitable[None]: ...
def _next_log(timeout: float) -> Optional[Tuple[int, str, str]]:
    """The next Rust log record (level, target, message), waiting up to `timeout` seconds."""
