"""The s3dlio calls the MLPerf Storage benchmark (DLIO) makes, on sluice.

    from sluice.compat import s3dlio
    it = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), {"prefetch": 4}).items()
    while batch := it.collect_batch(7):
        total += sum(len(b) for b in batch)

To run an unmodified program that does ``import s3dlio``, start it through the opt-in alias
(nothing is installed under the name ``s3dlio``)::

    python -m sluice.compat.alias train.py --args ...
    python -m sluice.compat.alias -m dlio_benchmark.main workload=unet3d ...

Environment: the S3DLIO_* variables with a meaning here are honoured unless the matching
SLUICE_* variable is set — S3DLIO_RT_THREADS (runtime threads), S3DLIO_MAX_RETRIES (retries
after the first attempt), S3DLIO_TIMEOUT_SECS (first-byte timeout),
S3DLIO_ENABLE_RANGE_OPTIMIZATION (0 disables ranged GETs of large objects),
S3DLIO_CONCURRENT_THRESHOLD (bytes from which objects are read as parallel ranges) and
S3DLIO_CHUNK_SIZE (bytes per range).
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Sequence

import sluice
from sluice import _native

__all__ = [
    "PyDataset",
    "PyBytesAsyncDataLoader",
    "MultipartUploadWriter",
    "get",
    "get_range",
    "get_many",
    "list",
    "stat",
    "exists",
    "put_bytes",
    "generate_npz_bytes",
]

_builtin_list = list


def _apply_env() -> None:
    """Maps S3DLIO_* settings onto sluice's own variables (which win when both are set)."""
    env = os.environ
    if "S3DLIO_RT_THREADS" in env:
        env.setdefault("SLUICE_THREADS", env["S3DLIO_RT_THREADS"])
    if "S3DLIO_MAX_RETRIES" in env:
        try:
            attempts = int(env["S3DLIO_MAX_RETRIES"]) + 1
        except ValueError:
            raise ValueError(
                f"S3DLIO_MAX_RETRIES={env['S3DLIO_MAX_RETRIES']!r} is not an integer"
            ) from None
        env.setdefault("SLUICE_MAX_ATTEMPTS", str(attempts))
    if "S3DLIO_TIMEOUT_SECS" in env:
        env.setdefault("SLUICE_FIRST_BYTE_TIMEOUT", env["S3DLIO_TIMEOUT_SECS"])


_apply_env()


def _env_bytes(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not a number of bytes") from None
    if n <= 0:
        raise ValueError(f"{name}={v!r} must be positive")
    return n


def _range_options() -> dict:
    opts: dict = {}
    if os.environ.get("S3DLIO_ENABLE_RANGE_OPTIMIZATION", "").strip() == "0":
        opts["range_threshold"] = 2**64 - 1  # RangePlanner::NEVER: never split
    else:
        t = _env_bytes("S3DLIO_CONCURRENT_THRESHOLD")
        if t is not None:
            opts["range_threshold"] = t
    c = _env_bytes("S3DLIO_CHUNK_SIZE")
    if c is not None:
        opts["chunk_size"] = c
    return opts


class PyDataset:
    """A list of objects to read."""

    def __init__(self, dataset: sluice.Dataset, opts: Optional[Mapping[str, Any]] = None):
        self._dataset = dataset
        self._opts = dict(opts or {})

    @classmethod
    def from_uris(cls, uris: Iterable[str], opts: Optional[Mapping[str, Any]] = None) -> "PyDataset":
        return cls(sluice.Dataset.from_uris(_builtin_list(uris)), opts)

    @classmethod
    def from_prefix(cls, uri: str, opts: Optional[Mapping[str, Any]] = None) -> "PyDataset":
        return cls(sluice.Dataset.from_prefix(uri), opts)

    def __len__(self) -> int:
        return len(self._dataset)


# s3dlio loader options that map onto sluice.Loader's; others (skip_head among them: sluice
# never sends HEAD requests for a dataset) are accepted and ignored.
_LOADER_KEYS = {
    "prefetch": "prefetch",
    "shuffle": "shuffle",
    "seed": "seed",
    "epoch": "epoch",
    "rank": "rank",
    "world_size": "world_size",
    "worker_id": "worker_id",
    "num_workers": "num_workers",
    "max_in_flight": "max_requests",
    "range_threshold": "range_threshold",
    "chunk_size": "chunk_size",
}


class _Items:
    """What ``PyBytesAsyncDataLoader.items()`` returns: an iterator of objects that can
    also hand out batches."""

    def __init__(self, loader: sluice.Loader):
        self._loader = loader

    def __iter__(self) -> "_Items":
        return self

    def __next__(self) -> sluice.Object:
        return next(self._loader)

    def collect_batch(self, n: int) -> List[sluice.Object]:
        """Up to ``n`` objects; ``[]`` once everything was delivered."""
        return self._loader.collect_batch(n)

    def stats(self) -> dict:
        return self._loader.stats()


class PyBytesAsyncDataLoader:
    """Reads a PyDataset with ``prefetch`` objects in flight. ``opts`` keys: prefetch,
    skip_head, shuffle, seed, rank, world_size, ...; unknown keys are tolerated."""

    def __init__(self, dataset: PyDataset, opts: Optional[Mapping[str, Any]] = None):
        if not isinstance(dataset, PyDataset):
            raise TypeError(f"expected a PyDataset, got {type(dataset).__name__}")
        merged = {**dataset._opts, **(opts or {})}
        kwargs = _range_options()
        for key, value in merged.items():
            if key in _LOADER_KEYS and value is not None:
                kwargs[_LOADER_KEYS[key]] = value
        self._dataset = dataset
        self._kwargs = kwargs

    def items(self) -> _Items:
        """A fresh pass over the dataset."""
        return _Items(sluice.Loader(self._dataset._dataset, **self._kwargs))

    def __iter__(self) -> Iterator[sluice.Object]:
        return iter(self.items())


def get(uri: str) -> sluice.Object:
    return sluice.get(uri)


def get_range(uri: str, offset: int, length: Optional[int] = None) -> sluice.Object:
    return sluice.get_range(uri, offset, length)


def get_many(uris: Sequence[str], max_in_flight: int = 64) -> List[sluice.Object]:
    return sluice.get_many(_builtin_list(uris), max_in_flight)


def list(uri: str, recursive: bool = False, pattern: Optional[str] = None) -> List[str]:  # noqa: A001
    """Full URIs under ``uri``; ``pattern`` is a regular expression searched in each URI."""
    uris = sluice.list(uri, recursive)
    if pattern is None:
        return uris
    rx = re.compile(pattern)
    return [u for u in uris if rx.search(u)]


def stat(uri: str) -> dict:
    """{"size", "etag", "last_modified" (ISO 8601, UTC), "uri"}."""
    d = sluice.stat(uri)
    lm = d.get("last_modified")
    if lm is not None:
        d["last_modified"] = datetime.fromtimestamp(lm, tz=timezone.utc).isoformat()
    return d


def exists(uri: str) -> bool:
    return sluice.exists(uri)


def put_bytes(uri: str, data: Any) -> None:
    sluice.put(uri, data)


class MultipartUploadWriter:
    """Streams writes into one object. The parts are kept in memory until ``close``, which
    uploads them (as a multipart upload when large); ``abort`` discards them. Nothing is
    visible in the store before ``close`` returns."""

    def __init__(self, uri: str, client: Optional[sluice.Client] = None):
        self._uri = uri
        self._client = client
        self._parts: List[bytes] = []
        self._size = 0
        self._state = "open"

    @classmethod
    def from_uri(cls, uri: str, **_options: Any) -> "MultipartUploadWriter":
        """``part_size``, ``max_in_flight`` and other s3dlio options are accepted; sizes come
        from SLUICE_MULTIPART_PART_SIZE."""
        sluice.Dataset.from_uris([uri])  # validates the URI now, not at close
        return cls(uri)

    def _check_open(self) -> None:
        if self._state != "open":
            raise ValueError(f"{self._uri}: writer is {self._state}")

    def write(self, data: Any) -> int:
        self._check_open()
        b = bytes(data)
        self._parts.append(b)
        self._size += len(b)
        return len(b)

    @property
    def bytes_written(self) -> int:
        return self._size

    def close(self) -> dict:
        self._check_open()
        body = b"".join(self._parts)
        self._parts = []
        client = self._client or sluice
        etag = client.put(self._uri, body)
        self._state = "closed"
        return {"uri": self._uri, "size": len(body), "etag": etag}

    def abort(self) -> None:
        self._parts = []
        self._state = "aborted"

    def __enter__(self) -> "MultipartUploadWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._state != "open":
            return
        if exc_type is None:
            self.close()
        else:
            self.abort()


_DTYPE_SIZES = {"b1": 1, "i1": 1, "u1": 1, "i2": 2, "u2": 2, "f2": 2, "i4": 4, "u4": 4, "f4": 4, "i8": 8, "u8": 8, "f8": 8}


def _array(name: str, shape: Sequence[int], dtype: str, fill: int) -> tuple:
    """(name, descr, shape, content) of one array with deterministic non-zero content."""
    code = dtype.lstrip("<>|=")
    if code not in _DTYPE_SIZES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(_DTYPE_SIZES)}")
    if any((not isinstance(d, int)) or d < 0 for d in shape):
        raise ValueError(f"shape {tuple(shape)!r} must be non-negative integers")
    descr = dtype if dtype[0] in "<>|" else "<" + dtype
    if _DTYPE_SIZES[code] == 1:
        descr = "|" + code
    n = _DTYPE_SIZES[code]
    for d in shape:
        n *= d
    body = bytes((fill + i) & 0xFF for i in range(min(n, 4096)))
    body = (body * (n // max(len(body), 1) + 1))[:n] if n else b""
    return (name, descr, _builtin_list(shape), body)


def generate_npz_bytes(shape: Sequence[int], dtype: str = "<f4", num_samples: int = 1) -> bytes:
    """A valid .npz (as ``numpy.savez``) holding ``x`` of shape (num_samples, *shape) and
    ``y``, one int64 label per sample, like DLIO's generated records."""
    if num_samples < 1:
        raise ValueError(f"num_samples must be at least 1, got {num_samples}")
    return _native.write_npz(
        [_array("x", [num_samples, *shape], dtype, 1), _array("y", [num_samples], "<i8", 0)]
    )
