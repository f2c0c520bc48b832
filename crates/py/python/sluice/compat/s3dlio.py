"""The s3dlio API that the MLPerf Storage benchmark (DLIO) and mlpstorage use, on sluice.

    from sluice.compat import s3dlio
    it = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), {"prefetch": 4}).items()
    while batch := it.collect_batch(7):
        total += sum(len(b) for b in batch)

To run an unmodified program that does ``import s3dlio`` — in every process it starts — use
the alias (nothing is installed under the name ``s3dlio``)::

    python -m sluice.compat.alias -m dlio_benchmark.main workload=unet3d ...
    sluice-dlio workload=unet3d ...

Behaviour follows s3dlio 0.9.106 where programs depend on it: ``get_many`` returns
``(uri, data)`` pairs in input order; ``list`` splits the URI at its last ``/`` into a prefix
and a regular expression searched in the rest of each key, and ``pattern`` is searched in
each URI relative to ``uri``; ``exists`` is False on any error; ``stat`` has s3dlio's 16 keys;
every error is a ``RuntimeError`` (the classes below also keep their Python meaning, so
``except FileNotFoundError`` works too). Schemes: ``s3://``, ``file://``, ``direct://``.

Configuration is read when the first call is made (DLIO sets variables after importing):
AWS_ENDPOINT_URL (s3dlio's variable; before AWS_ENDPOINT_URL_S3), S3DLIO_MAX_RETRY_ATTEMPTS
(attempts in total), S3DLIO_CONNECT_TIMEOUT_SECS, S3DLIO_OPERATION_TIMEOUT_SECS (bounds the
wait for a response), S3DLIO_RT_THREADS (I/O threads, at least one per CPU; only before the
first call of the process), S3DLIO_RANGE_THRESHOLD_MB (objects this large are read as parallel ranges),
S3DLIO_ENABLE_RANGE_OPTIMIZATION (0/false/no/off/disable(d) turn that off), S3DLIO_CHUNK_SIZE
(bytes per range), S3DLIO_PUT_VERIFY (check an object's size after a put).
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import math
import os
import re
import threading
import time
import zlib
from builtins import open as builtins_open
from datetime import datetime, timezone
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

import sluice
from sluice import _native

__all__ = [
    "BytesView",
    "PyDataset",
    "PyBytesAsyncDataLoader",
    "MultipartUploadWriter",
    "PyWriterOptions",
    "PyObjectWriter",
    "create_s3_writer",
    "create_filesystem_writer",
    "create_direct_filesystem_writer",
    "create_azure_writer",
    "create_multi_endpoint_store",
    "MultiEndpointStore",
    "configure_tokio_threads",
    "PyParquetIndex",
    "parquet_get_rg",
    "parquet_rg_row_offsets",
    "parquet_cache_invalidate",
    "parquet_cache_clear",
    "parquet_cache_len",
    "generate_and_write_parquet_schema_streaming",
    "get",
    "get_range",
    "get_many",
    "list",
    "stat",
    "exists",
    "put_bytes",
    "put_bytes_async",
    "put_many",
    "put_many_async",
    "create_multi_endpoint_store_from_template",
    "create_multi_endpoint_store_from_file",
    "create_multi_endpoint_store_from_env",
    "delete",
    "generate_npz_bytes",
    "ObjectNotFoundError",
    "AccessDeniedError",
    "RequestTimeoutError",
    "InvalidArgumentError",
    "StorageError",
    "LocalIOError",
]

_builtin_list = list
_T = TypeVar("_T")

# --- errors: s3dlio raises RuntimeError for everything, and DLIO's retry loops catch
# RuntimeError; these keep the specific meaning as well. Module-level classes, so they pickle
# (DataLoader workers send their exceptions to the main process).


class ObjectNotFoundError(FileNotFoundError, RuntimeError):
    """The object or file does not exist."""


class AccessDeniedError(PermissionError, RuntimeError):
    """Credentials missing or refused."""


class RequestTimeoutError(TimeoutError, RuntimeError):
    """A network wait ran out."""


class InvalidArgumentError(ValueError, RuntimeError):
    """A URI, option or argument is not valid."""


class StorageError(sluice.S3Error, RuntimeError):
    """An S3 request failed (``status``, ``code``, ``request_id``, ``uri``)."""


class LocalIOError(OSError, RuntimeError):
    """A file system call failed (``errno`` set)."""


# Most specific first.
_ERROR_CLASSES = (
    (FileNotFoundError, ObjectNotFoundError),
    (PermissionError, AccessDeniedError),
    (TimeoutError, RequestTimeoutError),
    (sluice.S3Error, StorageError),
    (OSError, LocalIOError),
    (ValueError, InvalidArgumentError),
)


def _as_runtime_error(e: Exception) -> Exception:
    if isinstance(e, RuntimeError):
        return e
    for base, cls in _ERROR_CLASSES:
        if isinstance(e, base):
            new = cls(*e.args)
            new.__dict__.update(getattr(e, "__dict__", {}))
            return new
    return e


def _errors(fn: Callable[..., _T]) -> Callable[..., _T]:
    """Raises sluice's errors as the RuntimeError subclasses above."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> _T:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            new = _as_runtime_error(e)
            if new is e:
                raise
            raise new.with_traceback(e.__traceback__) from None

    return wrapper


# --- configuration, read at first use in each process


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v.strip() if v is not None and v.strip() != "" else None


def _env_number(name: str, kind: Callable[[str], Any], minimum: float) -> Any:
    v = _env(name)
    if v is None:
        return None
    try:
        n = kind(v)
    except ValueError:
        raise InvalidArgumentError(f"{name}={v!r} is not a number") from None
    if n < minimum:
        raise InvalidArgumentError(f"{name}={v!r} must be at least {minimum}")
    return n


_OFF = {"0", "false", "no", "off", "disable", "disabled"}
_ON = {"1", "true", "yes", "on", "enable", "enabled"}

# By process id: a forked child makes its own client and keeps the parent's untouched (the
# native side leaks an inherited client rather than tear it down without its threads).
_clients: Dict[int, sluice.Client] = {}
_clients_lock = threading.Lock()


def _reset_lock_in_child() -> None:
    global _clients_lock
    _clients_lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_reset_lock_in_child)


def _client() -> sluice.Client:
    """This process's client, made from the environment on first use (and after a fork)."""
    pid = os.getpid()
    c = _clients.get(pid)
    if c is not None:
        return c
    with _clients_lock:
        c = _clients.get(pid)
        if c is None:
            c = _clients[pid] = _make_client()
    return c


def _make_client() -> sluice.Client:
    threads = _env_number("S3DLIO_RT_THREADS", int, 1)
    if threads is not None:
        # It can add threads, never take them below one per CPU: s3dlio's loaders run on a
        # runtime of their own with a thread per CPU whatever it says, and DLIO exports 1 to
        # its DataLoader workers in training runs.
        _native.set_runtime_threads(max(threads, os.cpu_count() or 1))
    # s3dlio reads AWS_ENDPOINT_URL; sluice alone would prefer AWS_ENDPOINT_URL_S3. DLIO
    # sets both from one setting, so this only matters when they differ.
    return sluice.Client(**_client_options(endpoint=_env("AWS_ENDPOINT_URL")))


def _client_options(**given: Any) -> Dict[str, Any]:
    """``given`` and the client settings s3dlio's variables make, those that are set."""
    options: Dict[str, Any] = {
        **given,
        "max_attempts": _env_number("S3DLIO_MAX_RETRY_ATTEMPTS", int, 1),
        "connect_timeout": _env_number("S3DLIO_CONNECT_TIMEOUT_SECS", float, 0.001),
        "first_byte_timeout": _env_number("S3DLIO_OPERATION_TIMEOUT_SECS", float, 0.001),
    }
    return {k: v for k, v in options.items() if v is not None}


def _range_options() -> dict:
    opts: dict = {}
    flag = _env("S3DLIO_ENABLE_RANGE_OPTIMIZATION")
    if flag is not None and flag.lower() in _OFF:
        opts["range_threshold"] = 2**64 - 1  # RangePlanner::NEVER: never split
    else:
        mb = _env_number("S3DLIO_RANGE_THRESHOLD_MB", int, 1)
        if mb is not None:
            opts["range_threshold"] = mb * 1024 * 1024
    chunk = _env_number("S3DLIO_CHUNK_SIZE", int, 1)
    if chunk is not None:
        opts["chunk_size"] = chunk
    return opts


@_errors
def configure_tokio_threads(n: int = 0) -> None:
    """Sets the I/O threads of this process before its first call; ``0``: the CPUs divided
    by the ranks on this host (OMPI_COMM_WORLD_SIZE, PMI_SIZE or WORLD_SIZE)."""
    if n < 0:
        raise InvalidArgumentError(f"configure_tokio_threads: n={n} must not be negative")
    if n == 0:
        world = 1
        for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"):
            w = _env_number(name, int, 1)
            if w is not None:
                world = w
                break
        n = max(1, (os.cpu_count() or 1) // world)
    _native.set_runtime_threads(n)


# --- objects


BytesView = _native.BytesView
"""s3dlio's zero-copy result: a ``sluice.Object`` (buffer protocol, ``memoryview()``,
``to_bytes()``, ``len``) named and printed as s3dlio's."""
_view = _native.bytes_view


@_errors
def get(uri: str) -> BytesView:
    """The whole object, as a read-only buffer (``len``, ``bytes()``, ``memoryview()``)."""
    return _view(_client().get(uri))


@_errors
def get_range(uri: str, offset: int, length: Optional[int] = None) -> BytesView:
    """``length`` bytes from ``offset``; to the end when ``length`` is None or 0 (as s3dlio)."""
    return _view(_client().get_range(uri, offset, length or None))


@_errors
def get_many(uris: Sequence[str], max_in_flight: int = 64) -> List[Tuple[str, BytesView]]:
    """``(uri, data)`` for every URI, in input order, ``max_in_flight`` at a time."""
    uris = _builtin_list(uris)
    return [(u, _view(o)) for u, o in zip(uris, _client().get_many(uris, max_in_flight))]


def _truthy(name: str) -> bool:
    v = _env(name)
    return v is not None and v.lower() in _ON


def _bytes_like(data: Any) -> Any:
    """`data` as something with the buffer protocol: itself when it has one (no copy),
    else what its ``__bytes__`` returns. Anything else is a ``TypeError`` — not, as
    s3dlio's ``bytes(data)`` fallback does, an integer turned into that many zero bytes."""
    try:
        memoryview(data)
        return data
    except TypeError:
        pass
    to_bytes = getattr(type(data), "__bytes__", None)
    if to_bytes is not None:
        out = to_bytes(data)
        if isinstance(out, bytes):
            return out
    raise TypeError(
        f"Cannot convert data to bytes: {type(data).__name__}. Expected bytes-like object "
        "(bytes, bytearray, memoryview, BytesView, a numpy array) or one with __bytes__"
    )


@_errors
def put_bytes(uri: str, data: Any) -> None:
    """Uploads a bytes-like object, or one with ``__bytes__`` (multipart when large). With
    S3DLIO_PUT_VERIFY on, the stored size is checked afterwards."""
    data = _bytes_like(data)
    client = _client()
    client.put(uri, data)
    if _truthy("S3DLIO_PUT_VERIFY"):
        want = memoryview(data).nbytes
        got = client.stat(uri)["size"]
        if got != want:
            raise StorageError(
                f"{uri}: stored {got} bytes after a put of {want} (S3DLIO_PUT_VERIFY)"
            )


def put_bytes_async(uri: str, data: Any) -> Any:
    """``put_bytes`` on a thread of the running event loop: returns an ``asyncio.Future`` to
    await (as s3dlio's, a plain function; bad data raises here, not when awaited)."""
    import asyncio

    data = _bytes_like(data)
    return asyncio.get_running_loop().run_in_executor(None, put_bytes, uri, data)


@_errors
def put_many(items: Iterable[Tuple[str, Any]], max_in_flight: int = 64) -> None:
    """Uploads every ``(uri, data)``, ``max_in_flight`` at a time; the first error is raised
    once the others have finished."""
    from concurrent.futures import ThreadPoolExecutor

    pairs = [(uri, _bytes_like(data)) for uri, data in items]
    if max_in_flight < 1:
        raise InvalidArgumentError(f"max_in_flight must be at least 1, got {max_in_flight}")
    client = _client()
    with ThreadPoolExecutor(max_workers=min(max_in_flight, max(len(pairs), 1))) as pool:
        for f in [pool.submit(client.put, uri, data) for uri, data in pairs]:
            f.result()


def put_many_async(items: Iterable[Tuple[str, Any]], max_in_flight: int = 64) -> Any:
    """``put_many`` on a thread of the running event loop: an ``asyncio.Future``."""
    import asyncio

    items = _builtin_list(items)
    return asyncio.get_running_loop().run_in_executor(None, put_many, items, max_in_flight)


def _split_prefix(uri: str) -> Tuple[str, str]:
    """s3dlio's listing rule: up to the last ``/`` is the prefix; the rest is a regular
    expression searched in each key below it. A local path naming a directory (or an S3 URI
    of a bare bucket) is that whole directory."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        raise InvalidArgumentError(
            f"invalid URI {uri!r}: expected s3://bucket/key, file:///path or direct:///path"
        )
    if scheme == "s3" and "/" not in rest:
        return uri + "/", ""
    if scheme in ("file", "direct") and not rest.endswith("/") and os.path.isdir(rest):
        return uri + "/", ""
    cut = uri.rfind("/") + 1
    return uri[:cut], uri[cut:]


def _regex(text: str, what: str) -> "re.Pattern[str]":
    try:
        return re.compile(text)
    except re.error as e:
        raise InvalidArgumentError(
            f"{what} {text!r} is not a valid regular expression: {e}"
        ) from None


@_errors
def list(uri: str, recursive: bool = False, pattern: Optional[str] = None) -> List[str]:  # noqa: A001
    """Full URIs under ``uri``, sorted. Without ``recursive``, sub-prefixes come as URIs
    ending in ``/``. The part of ``uri`` after its last ``/`` and ``pattern`` are regular
    expressions, searched in each key relative to the prefix and to ``uri`` respectively."""
    base, tail = _split_prefix(uri)
    entries = _client().list(base, recursive)
    if tail:
        rx = _regex(tail, "the last part of the URI")
        entries = [e for e in entries if e.endswith("/") or rx.search(e[len(base) :])]
    if pattern is not None:
        prx = _regex(pattern, "pattern")
        root = uri if uri.endswith("/") else uri + "/"
        entries = [e for e in entries if prx.search(e[len(root) :] if e.startswith(root) else e)]
    return sorted(entries)


@_errors
def delete(uri: str, recursive: bool = False) -> None:
    """Deletes the object; with ``recursive``, a URI ending in ``/`` or a glob (``*``, ``?``
    in the last part), every object it matches. Missing objects are not an error."""
    client = _client()
    last = uri[uri.rfind("/") + 1 :]
    if not (recursive or uri.endswith("/") or "*" in last or "?" in last):
        client.delete(uri)
        return
    if recursive and not uri.endswith("/") and "*" not in last and "?" not in last:
        # A "directory" named without its slash: it and what is below it, not its siblings
        # that share the prefix (p2/ for p).
        client.delete(uri)
        uri += "/"
        last = ""
    base = uri[: uri.rfind("/") + 1]
    matches = fnmatch.fnmatchcase if ("*" in last or "?" in last) else None
    for u in client.list(base if matches else uri, True):
        if u.endswith("/"):
            continue
        rel = u[len(base) :]
        # A glob matches within its directory, as in a shell: `*` does not cross `/`.
        if matches is None or ("/" not in rel and matches(rel, last)):
            client.delete(u)


_STAT_KEYS = (
    "content_type",
    "content_language",
    "content_encoding",
    "cache_control",
    "content_disposition",
    "expires",
    "storage_class",
    "server_side_encryption",
    "ssekms_key_id",
    "sse_customer_algorithm",
    "version_id",
    "replication_status",
)


@_errors
def stat(uri: str) -> dict:
    """s3dlio's 16 keys: size, last_modified (RFC 3339, UTC), etag, the header fields sluice
    does not track (None) and metadata ({})."""
    d = _client().stat(uri)
    lm = d.get("last_modified")
    out: Dict[str, Any] = {
        "size": d["size"],
        "last_modified": None
        if lm is None
        else datetime.fromtimestamp(lm, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "etag": d.get("etag"),
    }
    out.update({k: None for k in _STAT_KEYS})
    if not uri.startswith("s3://"):
        out["storage_class"] = "STANDARD"
    out["metadata"] = {}
    return out


def exists(uri: str) -> bool:
    """Whether the object can be stat'ed: False on any error, as in s3dlio."""
    try:
        _client().stat(uri)
        return True
    except Exception:
        return False


@_errors
def generate_npz_bytes(shape: Sequence[int], dtype: str = "<f4", num_samples: int = 1) -> bytes:
    """A valid .npz as s3dlio generates it: ``x`` of exactly ``shape`` (DLIO passes the
    sample count inside it), incompressible pseudo-random bytes, the same on every call;
    ``y``, ``num_samples`` int64 zeros."""
    dims = _builtin_list(shape)
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims):
        raise InvalidArgumentError(f"shape {dims!r} must be non-negative integers")
    if num_samples < 0:
        raise InvalidArgumentError(f"num_samples must not be negative, got {num_samples}")
    m = re.fullmatch(r"([<>|=]?)([biufc])(\d+)", dtype)
    if m is None:
        raise InvalidArgumentError(
            f"dtype {dtype!r} is not a numpy type string such as '<f4' or '|u1'"
        )
    order, kind, size = m.groups()
    itemsize = int(size)
    descr = ("|" if itemsize == 1 else (order if order in "<>" and order else "<")) + kind + size
    return _native.random_npz(dims, descr, itemsize, num_samples)


# --- datasets and loaders


class PyDataset:
    """A list of objects to read."""

    def __init__(self, dataset: sluice.Dataset, opts: Optional[Mapping[str, Any]] = None):
        self._dataset = dataset
        self._opts = dict(opts or {})

    @classmethod
    @_errors
    def from_uris(
        cls, uris: Iterable[str], opts: Optional[Mapping[str, Any]] = None
    ) -> "PyDataset":
        return cls(sluice.Dataset.from_uris(_builtin_list(uris)), opts)

    @classmethod
    @_errors
    def from_prefix(cls, uri: str, opts: Optional[Mapping[str, Any]] = None) -> "PyDataset":
        return cls(sluice.Dataset.from_prefix(uri, client=_client()), opts)

    def keys(self) -> List[str]:
        return self._dataset.uris

    def __len__(self) -> int:
        return len(self._dataset)


# s3dlio loader options that map onto sluice.Loader's; others (skip_head among them: sluice
# sends a HEAD only to size an object named without one, so that its memory budget holds) are
# accepted and ignored.
_LOADER_KEYS = {
    "prefetch": "prefetch",
    "shuffle": "shuffle",
    "seed": "seed",
    "epoch": "epoch",
    "rank": "rank",
    "world_size": "world_size",
    "shard_rank": "rank",
    "shard_world_size": "world_size",
    "worker_id": "worker_id",
    "num_workers_pytorch": "num_workers",
    "max_in_flight": "max_requests",
    "range_threshold": "range_threshold",
    "chunk_size": "chunk_size",
}


class _Items:
    """What ``PyBytesAsyncDataLoader.items()`` returns: an iterator of objects (``.uri``,
    ``len()``, buffer protocol) that can also hand out batches."""

    def __init__(self, loader: sluice.Loader):
        self._loader = loader

    def __iter__(self) -> "_Items":
        return self

    @_errors
    def __next__(self) -> BytesView:
        return _view(next(self._loader))

    @_errors
    def collect_batch(self, n: int) -> List[BytesView]:
        """Up to ``n`` objects; ``[]`` once everything was delivered."""
        return [_view(o) for o in self._loader.collect_batch(n)]

    def stats(self) -> sluice.LoaderStats:
        return self._loader.stats()


class PyBytesAsyncDataLoader:
    """Reads a PyDataset with ``prefetch`` objects in flight. ``opts`` keys: prefetch,
    skip_head, shuffle, seed, shard_rank, shard_world_size, ...; unknown keys are tolerated."""

    def __init__(self, dataset: PyDataset, opts: Optional[Mapping[str, Any]] = None):
        if not isinstance(dataset, PyDataset):
            raise TypeError(f"expected a PyDataset, got {type(dataset).__name__}")
        merged = {**dataset._opts, **(opts or {})}
        self._dataset = dataset
        self._kwargs = {k: v for k, v in merged.items() if k in _LOADER_KEYS and v is not None}

    @_errors
    def items(self) -> _Items:
        """A fresh pass over the dataset."""
        kwargs = _range_options()
        for key, value in self._kwargs.items():
            kwargs[_LOADER_KEYS[key]] = value
        if kwargs.get("prefetch") == 0:
            kwargs["prefetch"] = 1  # s3dlio: 0 means one at a time
        return _Items(sluice.Loader(self._dataset._dataset, client=_client(), **kwargs))

    def __iter__(self) -> Iterator[sluice.Object]:
        return iter(self.items())


# --- writers

_MIB = 1024 * 1024


class MultipartUploadWriter:
    """Streams one object: parts of ``part_size`` bytes (default 16 MiB) upload while you
    write, ``max_in_flight`` at a time (default max(32, 512 MiB / part_size)), so memory stays
    within about ``part_size × max_in_flight`` whatever the object's size. ``close()`` makes
    the object visible and returns {"etag", "total_bytes", "parts", "started_at",
    "completed_at"}; ``abort()`` (also on an exception in a ``with`` block, and when dropped
    unfinished with ``abort_on_drop``) leaves nothing behind. Safe to use from several
    threads, one writer per object."""

    def __init__(
        self,
        bucket: str,
        key: str,
        part_size: Optional[int] = None,
        max_in_flight: Optional[int] = None,
        content_type: Optional[str] = None,
        abort_on_drop: Optional[bool] = None,
    ):
        self._init(f"s3://{bucket}/{key}", part_size, max_in_flight, abort_on_drop)

    @_errors
    def _init(
        self,
        uri: str,
        part_size: Optional[int],
        max_in_flight: Optional[int],
        abort_on_drop: Optional[bool],
    ) -> None:
        part_size = 16 * _MIB if part_size is None else part_size
        if max_in_flight is None:
            max_in_flight = max(32, math.ceil(512 * _MIB / max(part_size, 1)))
        self._uri = uri
        self._writer = _client().writer(
            uri,
            part_size=part_size,
            max_in_flight=max_in_flight,
            abort_on_drop=True if abort_on_drop is None else bool(abort_on_drop),
        )
        self._reserved: Optional[bytearray] = None
        self._started_at = time.time()
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_uri(
        cls,
        uri: str,
        part_size: Optional[int] = None,
        max_in_flight: Optional[int] = None,
        content_type: Optional[str] = None,
        abort_on_drop: Optional[bool] = None,
    ) -> "MultipartUploadWriter":
        self = cls.__new__(cls)
        self._init(uri, part_size, max_in_flight, abort_on_drop)
        return self

    @_errors
    def write(self, data: Any) -> int:
        """Appends a bytes-like object; returns its length."""
        with self._lock:
            return self._writer.write(data)

    def reserve(self, size: int) -> memoryview:
        """A writable buffer of ``size`` bytes to fill; ``commit(n)`` then writes its first n."""
        if self._reserved is not None:
            raise RuntimeError(
                "reserve() called while a previous buffer is pending; commit() it first"
            )
        self._reserved = bytearray(size)
        return memoryview(self._reserved)

    def commit(self, nbytes: int) -> None:
        if self._reserved is None:
            raise RuntimeError("no pending buffer; call reserve() first")
        if nbytes > len(self._reserved):
            raise ValueError(
                f"commit({nbytes}) is more than the {len(self._reserved)} bytes reserved"
            )
        buf, self._reserved = self._reserved, None
        self.write(memoryview(buf)[:nbytes])

    def flush(self) -> None:
        """Parts are sent as they fill; the rest is sent by ``close``. Nothing to do."""

    @_errors
    def close(self) -> dict:
        with self._lock:
            info = self._writer.close()
            self._closed = True
        out: Dict[str, Any] = {
            "total_bytes": info["total_bytes"],
            "parts": info["parts"],
            "started_at": self._started_at,
            "completed_at": time.time(),
        }
        if info.get("etag") is not None:
            out["etag"] = info["etag"]
        return out

    def abort(self) -> None:
        """Discards the upload; harmless after close or a failed close."""
        try:
            self._writer.abort()
        except Exception:
            pass

    def __enter__(self) -> "MultipartUploadWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()


class PyWriterOptions:
    """Options of ``create_*_writer``: a buffer size (accepted; sluice streams at its own
    part size) and compression: ``with_compression("zstd", level)`` writes one zstd frame,
    streamed, under the name with ``.zst`` appended (as s3dlio: always for files, unless the
    name already ends in ``.zst`` for S3), and nothing decompresses it on read."""

    def __init__(self) -> None:
        self.buffer_size: Optional[int] = None
        self.compression: Optional[int] = None
        """The zstd level, or None for no compression."""

    def with_buffer_size(self, size: int) -> "PyWriterOptions":
        if size <= 0:
            raise InvalidArgumentError(f"buffer size must be positive, got {size}")
        self.buffer_size = size
        return self

    def with_compression(
        self, compression_type: str, level: Optional[int] = None
    ) -> "PyWriterOptions":
        kind = compression_type.lower()
        if kind == "none":
            self.compression = None
        elif kind == "zstd":
            self.compression = 3 if level is None else int(level)
            try:
                _native.ZstdEncoder(self.compression)  # a level zstd refuses fails here, named
            except ValueError as e:
                raise InvalidArgumentError(str(e)) from None
        else:
            raise InvalidArgumentError(
                f"Unsupported compression type: {compression_type} (zstd or none)"
            )
        return self


class PyObjectWriter:
    """A streaming writer from ``create_*_writer``: ``write_chunk`` as often as needed, then
    ``finalize()`` → (bytes_written, compressed_bytes)."""

    def __init__(self, uri: str, compression: Optional[int] = None):
        if compression is not None and (
            uri.startswith(("file://", "direct://")) or not uri.endswith(".zst")
        ):
            uri += ".zst"
        self._uri = uri
        self._zstd = None if compression is None else _native.ZstdEncoder(compression)
        self._writer = _client().writer(uri)
        self._raw = 0
        self._final: Optional[Tuple[int, int]] = None
        self._lock = threading.Lock()

    @_errors
    def write_chunk(self, data: Any) -> None:
        with self._lock:
            if self._final is not None:
                raise RuntimeError(f"{self._uri}: writer already finalized")
            data = _bytes_like(data)
            self._raw += memoryview(data).nbytes
            if self._zstd is not None:
                data = self._zstd.compress(data)
                if not data:
                    return
            self._writer.write(data)

    write_owned_bytes = write_chunk

    @_errors
    def finalize(self) -> Tuple[int, int]:
        with self._lock:
            if self._final is not None:
                raise RuntimeError("Writer already finalized")
            if self._zstd is not None:
                self._writer.write(self._zstd.finish())
            info = self._writer.close()
            self._final = (self._raw, info["total_bytes"])
        return self._final

    def bytes_written(self) -> int:
        """Bytes given to ``write_chunk`` (before compression)."""
        return self._raw

    def compressed_bytes(self) -> int:
        """Bytes stored: as written, or the zstd frame's so far."""
        return self._final[1] if self._final is not None else self._writer.bytes_written

    def abort(self) -> None:
        self._writer.abort()


def _writer_for(
    uri: str, options: Optional[PyWriterOptions], schemes: Tuple[str, ...], what: str
) -> PyObjectWriter:
    if not uri.startswith(schemes):
        raise InvalidArgumentError(f"{what} needs a {' or '.join(schemes)} URI, got {uri!r}")
    return PyObjectWriter(uri, None if options is None else options.compression)


@_errors
def create_s3_writer(uri: str, options: Optional[PyWriterOptions] = None) -> PyObjectWriter:
    return _writer_for(uri, options, ("s3://",), "create_s3_writer")


@_errors
def create_filesystem_writer(uri: str, options: Optional[PyWriterOptions] = None) -> PyObjectWriter:
    return _writer_for(uri, options, ("file://",), "create_filesystem_writer")


@_errors
def create_direct_filesystem_writer(
    uri: str, options: Optional[PyWriterOptions] = None
) -> PyObjectWriter:
    return _writer_for(uri, options, ("direct://",), "create_direct_filesystem_writer")


_STRATEGIES = ("round_robin", "least_connections")
_MAX_ENDPOINTS = 32


class MultiEndpointStore:
    """s3dlio's store over several endpoints of one storage system (``create_multi_endpoint_store``).

    Its I/O methods are coroutines, as s3dlio's are. sluice sends each request to the
    endpoint with the fewest in flight whichever strategy is named (round robin is that, when
    requests take equally long), and one that stops answering is avoided while the retry goes
    to another. Endpoints are ``http(s)://host:port`` or s3dlio's ``s3://host:port/bucket/``;
    with the latter, a relative path or a URI under any endpoint's prefix names the same
    object on every endpoint, as in s3dlio.

    Endpoints may also be directories (``file://`` or ``direct://``, one scheme for all): each
    is a store of its own. A URI under one goes to that one, unchanged; a relative name goes
    to the directory a hash of the name picks, so that every call on it (put, get, delete)
    finds the same file. s3dlio moves every request to the endpoint its strategy picks, so
    an object put under one directory is read from another (four of its own tests fail on
    that); here an object is always where its name says, and the strategy is only reported.
    """

    def __init__(self, uris: Sequence[str], strategy: Optional[str]) -> None:
        uris = [u.strip() for u in uris if u and u.strip()]
        strategy = strategy or "round_robin"
        if strategy not in _STRATEGIES:
            raise InvalidArgumentError(
                f"Invalid strategy '{strategy}'. Use 'round_robin' or 'least_connections'"
            )
        if not uris:
            raise InvalidArgumentError(
                "Failed to create multi-endpoint store: requires at least one endpoint"
            )
        if len(uris) > _MAX_ENDPOINTS:
            raise InvalidArgumentError(
                f"Failed to create multi-endpoint store: {len(uris)} endpoints exceed the maximum of {_MAX_ENDPOINTS}"
            )
        schemes = {u.split("://", 1)[0] if "://" in u else "" for u in uris}
        if len(schemes - {"http", "https"}) > 0 and len(schemes) > 1:
            raise InvalidArgumentError(
                f"Failed to create multi-endpoint store: all endpoints must use the same URI scheme, not {sorted(schemes)}"
            )
        self._uris = uris
        self._strategy = strategy
        self._clients: Dict[int, sluice.Client] = {}
        self._local = all(u.startswith(("file://", "direct://")) for u in uris)
        if self._local:
            self._roots = [u.rstrip("/") for u in uris]
            self._counts = [
                {"requests": 0, "bytes_read": 0, "bytes_written": 0, "failures": 0, "in_flight": 0}
                for _ in uris
            ]
            self._lock = threading.Lock()
            self._kwargs = {}
            return
        # s3://host:port/bucket/prefix → (s3://host:port/, "bucket/prefix")
        self._prefixes = [u for u in uris if u.startswith("s3://")]
        self._kwargs = _client_options(endpoints=uris)
        self._client  # a bad endpoint fails here, not at the first request

    @property
    def _client(self) -> sluice.Client:
        """This process's client for the endpoints (a forked child makes its own)."""
        pid = os.getpid()
        c = self._clients.get(pid)
        if c is None:
            c = self._clients[pid] = _errors(sluice.Client)(**self._kwargs)
        return c

    def _uri(self, uri: str) -> str:
        """The object's ``s3://bucket/key``: a relative path is under the first endpoint's
        prefix; an endpoint's prefix (``s3://host:port/``) is dropped."""
        for p in self._prefixes:
            host = p[len("s3://") :].split("/", 1)[0]
            if uri.startswith(f"s3://{host}/"):
                return "s3://" + uri[len(f"s3://{host}/") :]
        if "://" not in uri and self._prefixes:
            _, _, rest = self._prefixes[0][len("s3://") :].partition("/")
            return "s3://" + rest.rstrip("/") + "/" + uri.lstrip("/")
        return uri

    def _local_target(self, uri: str) -> Tuple[int, str]:
        """The directory endpoint `uri` is under (unchanged), or for a relative name the one
        its hash picks and the path under it."""
        for i, root in enumerate(self._roots):
            if uri == root or uri.startswith(root + "/"):
                return i, uri
        if "://" in uri:
            raise InvalidArgumentError(f"{uri!r} is under none of the endpoints {self._roots}")
        name = uri.lstrip("/")
        i = zlib.crc32(name.encode()) % len(self._roots)
        return i, f"{self._roots[i]}/{name}"

    async def _run(self, fn: Callable[..., _T], uri: str, *args: Any, sent: int = 0) -> _T:
        import asyncio

        if not self._local:
            return await asyncio.to_thread(_errors(fn), self._uri(uri), *args)
        i, target = self._local_target(uri)
        c = self._counts[i]
        with self._lock:
            c["requests"] += 1
            c["in_flight"] += 1
            c["bytes_written"] += sent
        try:
            out = await asyncio.to_thread(_errors(fn), target, *args)
        except BaseException:
            with self._lock:
                c["failures"] += 1
            raise
        finally:
            with self._lock:
                c["in_flight"] -= 1
        if isinstance(out, sluice.Object):
            with self._lock:
                c["bytes_read"] += len(out)
        return out

    async def get(self, uri: str) -> Any:
        return _view(await self._run(self._client.get, uri))

    async def get_range(self, uri: str, offset: int, length: Optional[int] = None) -> Any:
        # As s3dlio (and this module's get_range): a length of 0 means to the end.
        return _view(await self._run(self._client.get_range, uri, offset, length or None))

    async def put(self, uri: str, data: Any) -> None:
        data = _bytes_like(data)
        await self._run(self._client.put, uri, data, sent=memoryview(data).nbytes)

    async def list(self, prefix: str, recursive: bool = False) -> List[str]:
        return await self._run(self._client.list, prefix, recursive)

    async def delete(self, uri: str) -> None:
        await self._run(self._client.delete, uri)

    def _endpoint_counts(self) -> List[Any]:
        if self._local:
            with self._lock:
                return [{"url": root, **c} for root, c in zip(self._roots, self._counts)]
        return self._client.endpoint_stats()

    def get_endpoint_stats(self) -> List[Dict[str, Any]]:
        """Per endpoint, with s3dlio's keys."""
        return [
            {
                "uri": e["url"],
                "total_requests": e["requests"],
                "bytes_read": e["bytes_read"],
                "bytes_written": e["bytes_written"],
                "error_count": e["failures"],
                "active_requests": e["in_flight"],
            }
            for e in self._endpoint_counts()
        ]

    def get_total_stats(self) -> Dict[str, Any]:
        per = self.get_endpoint_stats()
        keys = ("total_requests", "bytes_read", "bytes_written", "error_count", "active_requests")
        return {k: sum(e[k] for e in per) for k in keys}

    # mlpstorage's checkpoint writer asks for this name.
    get_stats = get_total_stats

    def endpoint_count(self) -> int:
        return len(self._uris)

    def strategy(self) -> str:
        return self._strategy


def create_multi_endpoint_store(
    uris: Sequence[str], strategy: Optional[str] = None
) -> MultiEndpointStore:
    """A store over several endpoints of one storage system (see `MultiEndpointStore`)."""
    return MultiEndpointStore(uris, strategy)


_RANGE = re.compile(r"\{(\d+)\.\.\.(\d+)\}")


def _expand_template(template: str) -> List[str]:
    """s3dlio's endpoint template: each ``{N...M}`` (inclusive, numbers unpadded) expands,
    the first varying slowest; other braces are literal."""
    m = _RANGE.search(template)
    if m is None:
        return [template]
    start, end = int(m.group(1)), int(m.group(2))
    if start > end:
        raise InvalidArgumentError(
            f"Template expansion failed: Invalid range: start ({start}) > end ({end})"
        )
    head, tail = template[: m.start()], template[m.end() :]
    return [head + str(n) + rest for n in range(start, end + 1) for rest in _expand_template(tail)]


def create_multi_endpoint_store_from_template(
    uri_template: str, strategy: Optional[str] = None
) -> MultiEndpointStore:
    """Endpoints from a template such as ``http://10.0.0.{1...4}:9000`` (see `MultiEndpointStore`)."""
    uris = _expand_template(uri_template)
    bad = [u for u in uris if "://" not in u]
    if bad:
        raise InvalidArgumentError(
            f"Template expansion failed: {bad[0]!r} is not a URI (scheme://...)"
        )
    return MultiEndpointStore(uris, strategy)


def create_multi_endpoint_store_from_file(
    file_path: str, strategy: Optional[str] = None
) -> MultiEndpointStore:
    """Endpoints from a file: one URI per line; blank lines and lines starting with ``#`` skipped."""
    try:
        with builtins_open(file_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InvalidArgumentError(
            f"Failed to load URIs from file: Failed to read URI file: {file_path}: {e}"
        ) from e
    uris = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    if not uris:
        raise InvalidArgumentError(
            f"Failed to load URIs from file: No URIs found in file: {file_path}"
        )
    return MultiEndpointStore(uris, strategy)


def create_multi_endpoint_store_from_env(strategy: Optional[str] = None) -> MultiEndpointStore:
    """Endpoints from ``S3_ENDPOINT_URIS`` (comma-separated)."""
    value = _env("S3_ENDPOINT_URIS") or ""
    uris = [u.strip() for u in value.split(",") if u.strip()]
    if not uris:
        raise InvalidArgumentError("S3_ENDPOINT_URIS is not set or lists no URI")
    return MultiEndpointStore(uris, strategy)


def create_azure_writer(uri: str, options: Optional[PyWriterOptions] = None) -> PyObjectWriter:
    raise InvalidArgumentError(
        f"{uri!r}: Azure is not supported by sluice (s3://, file://, direct:// are)"
    )


# --- parquet (DLIO's dlrm workload)

_FOOTER_CAP = 4 * _MIB


@_errors
def parquet_get_rg(
    uri: str,
    rg_idx: int,
    col_indices: Optional[Sequence[int]] = None,
    footer_cap: int = _FOOTER_CAP,
    decode: str = "arrow",
) -> BytesView:
    """Row group ``rg_idx`` (its ``col_indices`` leaf columns, or all): an Arrow IPC stream
    with ``decode="arrow"``, else the raw bytes of its column chunks."""
    cols = None if col_indices is None else _builtin_list(col_indices)
    return _view(_native.parquet_get_rg(uri, rg_idx, cols, footer_cap, decode, client=_client()))


@_errors
def parquet_rg_row_offsets(uri: str) -> List[int]:
    """[0, rows of group 0, + rows of group 1, ..., total rows]."""
    out = [0]
    for rows, _ in _native.parquet_row_groups(uri, _FOOTER_CAP, client=_client()):
        out.append(out[-1] + rows)
    return out


def parquet_cache_invalidate(uri: str) -> None:
    _native.parquet_cache_invalidate(uri)


def parquet_cache_clear() -> None:
    _native.parquet_cache_clear()


def parquet_cache_len() -> int:
    return _native.parquet_cache_len()


@_errors
def generate_and_write_parquet_schema_streaming(
    uri: str, columns: Sequence[Tuple[str, int]], rows_per_rg: int, num_row_groups: int
) -> None:
    """A parquet file of float32 columns (``(name, 1)`` scalar, ``(name, n)`` a list of n)
    with random values, uploaded row group by row group."""
    _native.parquet_write_random(
        uri, [(str(n), int(w)) for n, w in columns], rows_per_rg, num_row_groups, client=_client()
    )


class PyParquetIndex:
    """Row groups of parquet files: which one holds a sample, where its bytes are, and which
    were fetched in an epoch. Footers are read with ranged GETs, ``batch_size`` at a time."""

    def __init__(self, col_indices: Optional[Sequence[int]] = None, footer_cap: int = _FOOTER_CAP):
        self._cols = None if col_indices is None else _builtin_list(col_indices)
        self._footer_cap = footer_cap
        self._files: Dict[str, Tuple[List[int], List[Tuple[int, int]]]] = {}
        self._fetched: set = set()
        self._lock = threading.Lock()

    def _index_one(self, uri: str) -> Tuple[List[int], List[Tuple[int, int]]]:
        groups = _native.parquet_row_groups(uri, self._footer_cap, client=_client())
        starts, ranges = [0], []
        for rows, chunks in groups:
            picked = (
                chunks if self._cols is None else [chunks[i] for i in self._cols if i < len(chunks)]
            )
            lo = min((o for o, _ in picked), default=0)
            hi = max((o + n for o, n in picked), default=0)
            ranges.append((lo, hi - lo))
            starts.append(starts[-1] + rows)
        return starts, ranges

    @_errors
    def ensure_indexed(self, uris: Sequence[str], epoch: int = 1, batch_size: int = 16) -> None:
        todo = [u for u in dict.fromkeys(uris) if u not in self._files]
        if not todo:
            return
        # Here, not at import: concurrent.futures (and the logging it imports) costs every
        # new DataLoader worker ~5 ms of CPU, and only parquet readers index.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(batch_size, len(todo)))) as pool:
            for uri, entry in zip(todo, pool.map(self._index_one, todo)):
                with self._lock:
                    self._files[uri] = entry

    def _entry(self, uri: str) -> Tuple[List[int], List[Tuple[int, int]]]:
        try:
            return self._files[uri]
        except KeyError:
            raise RuntimeError(f"{uri}: not indexed; call ensure_indexed first") from None

    def rg_for_sample(self, uri: str, sample_idx: int) -> int:
        starts, _ = self._entry(uri)
        if not 0 <= sample_idx < starts[-1]:
            raise RuntimeError(f"{uri}: sample {sample_idx} out of range ({starts[-1]} rows)")
        return bisect.bisect_right(starts, sample_idx) - 1

    def rg_range(self, uri: str, rg_idx: int) -> Tuple[int, int]:
        _, ranges = self._entry(uri)
        if not 0 <= rg_idx < len(ranges):
            raise RuntimeError(
                f"rg_idx {rg_idx} out of range for '{uri}' ({len(ranges)} row groups)"
            )
        return ranges[rg_idx]

    def rg_lookup(self, uri: str, sample_idx: int) -> Tuple[int, int, int]:
        rg = self.rg_for_sample(uri, sample_idx)
        return (rg, *self.rg_range(uri, rg))

    def was_fetched(self, uri: str, rg_idx: int, epoch: int) -> bool:
        return (uri, rg_idx, epoch) in self._fetched

    def mark_fetched(self, uri: str, rg_idx: int, epoch: int) -> None:
        with self._lock:
            self._fetched.add((uri, rg_idx, epoch))

    def check_and_mark(self, uri: str, rg_idx: int, epoch: int) -> bool:
        """True when it was already fetched in this epoch; marks it either way."""
        with self._lock:
            key = (uri, rg_idx, epoch)
            seen = key in self._fetched
            self._fetched.add(key)
            return seen

    def is_indexed(self, uri: str) -> bool:
        return uri in self._files

    def file_rg_count(self, uri: str) -> Optional[int]:
        entry = self._files.get(uri)
        return None if entry is None else len(entry[1])

    def __len__(self) -> int:
        return sum(len(r) for _, r in self._files.values())

    def file_count(self) -> int:
        return len(self._files)

    def invalidate_uri(self, uri: str) -> None:
        with self._lock:
            self._files.pop(uri, None)
            self._fetched = {k for k in self._fetched if k[0] != uri}
        _native.parquet_cache_invalidate(uri)

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self._fetched.clear()

    def __repr__(self) -> str:
        return f"PyParquetIndex(files={self.file_count()}, rgs={len(self)}, col_indices={self._cols}, footer_cap={self._footer_cap})"
