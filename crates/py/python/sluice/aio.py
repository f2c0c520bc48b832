"""sluice for asyncio: the blocking API's calls as coroutines.

    import sluice.aio

    data = await sluice.aio.get("s3://bucket/key")
    parts = await sluice.aio.get_ranges("s3://bucket/x.parquet", [(0, 4096), (1 << 20, 2 << 20)])
    async for entry in sluice.aio.list("s3://bucket/train/", recursive=True):
        ...
    client = sluice.aio.Client(endpoint="http://...")   # or Client(sluice.Client(...))

Each call runs on sluice's own I/O threads (tokio), as the blocking calls do, and hands its
result to the event loop through ``call_soon_threadsafe``: no thread waits per call, and the
loop polls nothing, so thousands of calls in flight cost what their requests cost. Cancel a
task and its request stops and its buffer is freed. Works under any asyncio loop (uvloop
too); a call made outside a running loop raises ``RuntimeError``.

Why a module and not ``async`` methods on ``sluice.Client``: the names stay those of the
blocking API (``await sluice.aio.get(uri)`` for ``sluice.get(uri)``), and an
``aio.Client`` shares its ``sluice.Client``'s connections and request limits, so blocking
and async code in one process draw on one pool.
"""

from __future__ import annotations

import asyncio
import builtins
import os
from typing import Any, AsyncIterator, List, Optional, Sequence, Tuple

import sluice
from sluice import _native
from sluice._native import ListEntry, Object
from sluice._types import StatResult, WriteResult

# Read-ahead of a reader: from 1 MiB, doubling while reads are sequential, to 64 MiB (as
# sluice.open's).
_AHEAD_MIN = 1 << 20
_AHEAD_MAX = 64 << 20

__all__ = [
    "Client",
    "Reader",
    "Writer",
    "open",
    "delete",
    "exists",
    "get",
    "get_many",
    "get_range",
    "get_ranges",
    "list",
    "put",
    "stat",
]


class Client:
    """A ``sluice.Client`` for asyncio: ``Client(**options)`` builds one as ``sluice.Client``
    does, ``Client(client)`` wraps one you have (sharing its connections)."""

    def __init__(self, client: Optional[sluice.Client] = None, **options: Any):
        if client is not None and options:
            raise ValueError("give a sluice.Client or its options, not both")
        self.client = client if client is not None else sluice.Client(**options)

    async def get(self, uri: str) -> Object:
        """The whole object."""
        return await _native.aio_get(self.client, uri)

    async def get_range(
        self, uri: str, offset: int, length: Optional[int] = None, etag: Optional[str] = None
    ) -> Object:
        """``length`` bytes from ``offset`` (to the end when None), of version ``etag``."""
        return await _native.aio_get_range(self.client, uri, offset, length, etag)

    async def get_ranges(
        self,
        uri: str,
        ranges: Sequence[Tuple[int, int]],
        coalesce: Optional[int] = None,
        etag: Optional[str] = None,
    ) -> List[Object]:
        """Each ``(start, end)`` range, as ``sluice.get_ranges``."""
        return await _native.aio_get_ranges(self.client, uri, builtins.list(ranges), coalesce, etag)

    async def get_many(
        self, uris: Sequence[str], max_in_flight: Optional[int] = None
    ) -> List[Object]:
        """Every object, in the order given, as ``sluice.get_many``."""
        return await _native.aio_get_many(self.client, builtins.list(uris), max_in_flight)

    async def stat(self, uri: str) -> StatResult:
        """{"uri", "size", "etag", "last_modified"} (HEAD)."""
        return await _native.aio_stat(self.client, uri)

    async def exists(self, uri: str) -> bool:
        """Whether the object exists (HEAD; other failures raise)."""
        return await _native.aio_exists(self.client, uri)

    async def put(
        self, uri: str, data: Any, *, mode: str = "overwrite", if_match: Optional[str] = None
    ) -> Optional[str]:
        """Uploads a bytes-like object, as ``sluice.put``; returns the ETag."""
        return await _native.aio_put(self.client, uri, data, mode=mode, if_match=if_match)

    async def delete(self, uri: str) -> None:
        """Deletes the object (a missing key succeeds, as on S3)."""
        await _native.aio_delete(self.client, uri)

    async def list(self, uri: str, recursive: bool = False) -> AsyncIterator[ListEntry]:
        """The entries under ``uri``, listed page by page as you iterate
        (``async for e in client.list(...)``)."""
        listing = self.client.list_objects(uri, recursive)
        while True:
            batch = await _native.aio_list_next(listing)
            if not batch:
                return
            for entry in batch:
                yield entry

    async def open(self, uri: str, mode: str = "rb", **writer_options: Any) -> Any:
        """``"rb"``: a ``Reader`` of one version of the object; ``"wb"`` (or ``"xb"``: only if
        the key is free, decided by the store on close): a ``Writer`` whose upload appears on
        ``close``. ``writer_options`` are ``sluice.Client.writer``'s (``part_size``,
        ``max_in_flight``)."""
        if mode == "rb":
            st = await self.stat(uri)
            return Reader(self, uri, st["size"], st["etag"])
        if mode in ("wb", "xb"):
            create = "create" if mode == "xb" else "overwrite"
            return Writer(self.client.writer(uri, mode=create, **writer_options))
        raise ValueError(f"mode {mode!r}: sluice.aio.open reads ('rb') or writes ('wb', 'xb')")


class Reader:
    """An object read with ranged GETs of one version (``async with await open(uri) as f``):
    ``await f.read(n)``; ``seek`` and ``tell`` do no I/O. Reads ahead from 1 MiB, doubling
    while reads are sequential, up to 64 MiB."""

    def __init__(self, client: Client, uri: str, size: int, etag: Optional[str]):
        self.uri, self.size, self._client, self._etag = uri, size, client, etag
        self._pos = 0
        self._buf_at, self._buf = 0, memoryview(b"")
        self._ahead = _AHEAD_MIN

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"seek to {base + offset}: before the start of {self.uri}")
        self._pos = base + offset
        return self._pos

    async def read(self, n: int = -1) -> bytes:
        if n < 0 or self._pos + n > self.size:
            n = max(0, self.size - self._pos)
        out = bytearray()
        while len(out) < n:
            at = self._pos - self._buf_at
            if 0 <= at < len(self._buf):
                take = self._buf[at : at + n - len(out)]
                out += take
                self._pos += len(take)
                continue
            # Sequential reads double the read-ahead; a jump starts it again.
            sequential = self._pos == self._buf_at + len(self._buf)
            self._ahead = min(self._ahead * 2, _AHEAD_MAX) if sequential else _AHEAD_MIN
            length = min(max(self._ahead, n - len(out)), self.size - self._pos)
            got = await self._client.get_range(self.uri, self._pos, length, self._etag)
            self._buf_at, self._buf = self._pos, memoryview(got)
        return bytes(out)

    async def close(self) -> None:
        self._buf = memoryview(b"")

    async def __aenter__(self) -> "Reader":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Writer:
    """A streaming upload (``async with await open(uri, "wb") as f``): ``await f.write(b)``
    uploads parts while you produce the next; the object appears on ``close`` and not at all
    if the block raises (``abort``). One call at a time: a write or close made while another
    is in flight raises ``RuntimeError`` (bytes must reach the object in the order written),
    and after a cancelled write or close only ``abort`` is accepted (what it sent is not
    known)."""

    def __init__(self, writer: sluice.Writer):
        self._w = writer
        self._busy: Optional[str] = None
        self._cancelled: Optional[str] = None

    @property
    def uri(self) -> str:
        return self._w.uri

    async def _one(self, what: str, start: Any) -> Any:
        if self._cancelled is not None:
            raise RuntimeError(f"{self.uri}: {what} after a cancelled {self._cancelled}; abort it")
        if self._busy is not None:
            raise RuntimeError(
                f"{self.uri}: {what} while a {self._busy} is in flight; await it first"
            )
        self._busy = what
        try:
            return await start()
        except asyncio.CancelledError:
            self._cancelled = what
            raise
        finally:
            self._busy = None

    async def write(self, data: Any) -> int:
        return await self._one("write", lambda: _native.aio_write(self._w, data))

    async def close(self) -> WriteResult:
        return await self._one("close", lambda: _native.aio_close(self._w))

    async def abort(self) -> None:
        await _native.aio_abort(self._w)

    async def __aenter__(self) -> "Writer":
        return self

    async def __aexit__(self, kind: Any, *exc: Any) -> None:
        if kind is None:
            await self.close()
        else:
            await self.abort()


_default: Optional[Client] = None
_default_pid = 0


def _client() -> Client:
    """The environment's client, one per process (a forked child builds its own)."""
    global _default, _default_pid
    if _default is None or _default_pid != os.getpid():
        _default, _default_pid = Client(), os.getpid()
    return _default


async def get(uri: str) -> Object:
    """``sluice.get`` as a coroutine (the environment's client)."""
    return await _client().get(uri)


async def get_range(
    uri: str, offset: int, length: Optional[int] = None, etag: Optional[str] = None
) -> Object:
    return await _client().get_range(uri, offset, length, etag)


async def get_ranges(
    uri: str,
    ranges: Sequence[Tuple[int, int]],
    coalesce: Optional[int] = None,
    etag: Optional[str] = None,
) -> List[Object]:
    return await _client().get_ranges(uri, ranges, coalesce, etag)


async def get_many(uris: Sequence[str], max_in_flight: Optional[int] = None) -> List[Object]:
    return await _client().get_many(uris, max_in_flight)


async def stat(uri: str) -> StatResult:
    return await _client().stat(uri)


async def exists(uri: str) -> bool:
    return await _client().exists(uri)


async def put(
    uri: str, data: Any, *, mode: str = "overwrite", if_match: Optional[str] = None
) -> Optional[str]:
    return await _client().put(uri, data, mode=mode, if_match=if_match)


async def delete(uri: str) -> None:
    await _client().delete(uri)


async def list(uri: str, recursive: bool = False) -> AsyncIterator[ListEntry]:
    """``sluice.list_objects`` as an async iterator (the environment's client)."""
    async for entry in _client().list(uri, recursive):
        yield entry


async def open(uri: str, mode: str = "rb", **writer_options: Any) -> Any:
    """``Client.open`` on the environment's client."""
    return await _client().open(uri, mode, **writer_options)
