"""``sluice.open``: an object as a binary file, for libraries that want one (``torch.load``,
``numpy.load``, ``PIL.Image.open``, pyarrow, h5py).

Reading: ranged GETs of one version of the object (each carries ``If-Match`` with the ETag
its ``stat`` gave, so an object replaced while open is an error, never two versions spliced),
with read-ahead that adapts to the access pattern: it starts at ``MIN_READAHEAD`` (a footer
read or a random access fetches little) and doubles, up to ``MAX_READAHEAD``, while reads
follow each other; a seek elsewhere starts it over. Once reads follow each other, the next
window is fetched in the background while the caller consumes this one, so a sequential
reader (``torch.load``, ``numpy.load``) overlaps the network with its own work instead of
waiting for each window in turn: at most two windows are held.

Writing: a streaming multipart upload (``Client.writer``): memory stays bounded by the part
size and the parts in flight, whatever the object's size; the object appears on ``close``
and not at all if the ``with`` block raises or the file is dropped unclosed (the upload is
aborted).
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any, Optional, Tuple, Union

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from ._native import Client

__all__ = ["open", "ObjectReader", "ObjectWriter"]

MIN_READAHEAD = 1 << 20
"""First read-ahead after open or a seek: enough for a header or footer in one request."""
MAX_READAHEAD = 64 << 20
"""Read-ahead of a long sequential read: windows of 64 MiB, each read as 8 parallel ranged
GETs (`get_range` of a pinned version), two in flight while the caller reads a third."""

SKIP_IN_ORDER = 64 << 10
"""A seek forward by at most this much past what was read still counts as reading in order."""

_open = open


def _client(client: Optional["Client"]) -> Any:
    """`client`, or the process's default client (the module-level functions, which take
    the same arguments as its methods)."""
    if client is not None:
        return client
    from . import _native

    return _native


class ObjectReader(io.BufferedIOBase):
    """An object opened for reading (``sluice.open(uri, "rb")``): seekable, one version."""

    def __init__(self, uri: str, client: Optional["Client"] = None):
        super().__init__()
        # Everything close() and repr() use is set before the first call that can fail: a
        # failed open is still closed (and printed) by the garbage collector.
        self.name = uri
        self._size = 0
        self._pos = 0
        self._buf = memoryview(b"")
        self._buf_start = 0
        self._readahead = MIN_READAHEAD
        # The next window of a sequential read, being fetched: (start, length, future).
        self._next: Optional[Tuple[int, int, "Future[Any]"]] = None
        self._fetcher: Optional["ThreadPoolExecutor"] = None
        self._fetcher_pid = 0
        self._client = _client(client)
        st = self._client.stat(uri)
        self._size = st["size"]
        self._etag: Optional[str] = st["etag"]

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"{self.name}: whence must be 0, 1 or 2, not {whence!r}")
        if pos < 0:
            raise OSError(22, f"{self.name}: cannot seek to {pos} (before the start)")
        self._pos = pos
        return pos

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{self.name}: I/O operation on a closed file")

    def _fill(self, want: int) -> None:
        """Makes the buffer hold the position: the window fetched ahead when it holds it,
        else a GET of at least `want` bytes from there (or to the end of the object)."""
        end = self._buf_start + len(self._buf)
        ahead, self._next = self._next, None
        if self._fetcher is not None and self._fetcher_pid != os.getpid():
            # Opened before a fork: the parent's fetching thread does not exist here, so
            # what it was given would never finish.
            self._fetcher, ahead = None, None
        if ahead is not None and not (ahead[0] <= self._pos < ahead[0] + ahead[1]):
            # After a seek elsewhere what is in flight is not this, and is dropped (an
            # error it may end in concerns no read).
            ahead = None
        # A reader that skips a few bytes (torch.load: from a tensor's data to the next
        # record's header) still reads in order.
        sequential = ahead is not None or (
            len(self._buf) > 0 and self._buf_start <= self._pos <= end + SKIP_IN_ORDER
        )
        # The window grows to the reads asked for, so the next is fetched as one while this
        # one is consumed (a 32 MiB tensor read does not wait for 32 MiB each time).
        grown = min(max(self._readahead * 2, want), MAX_READAHEAD)
        self._readahead = grown if sequential else MIN_READAHEAD
        if ahead is not None:
            start, length = ahead[0], ahead[1]
            # The window after goes out before this one is waited for: under S3's latency
            # one window at a time leaves the link idle between them.
            self._read_ahead(start + length)
            obj = ahead[2].result()
        else:
            start, length = self._pos, min(max(want, self._readahead), self._size - self._pos)
            obj = self._fetch(start, length)
            if sequential:
                self._read_ahead(start + length)
        self._buf = memoryview(obj)
        self._buf_start = start

    def _read_ahead(self, at: int) -> None:
        """Starts fetching the window at `at` in the background, when the object goes on."""
        if at >= self._size:
            return
        following = min(self._readahead * 2, MAX_READAHEAD, self._size - at)
        if self._fetcher is None:
            # Imported here: `import sluice` stays free of threads and logging.
            from concurrent.futures import ThreadPoolExecutor

            self._fetcher = ThreadPoolExecutor(2, thread_name_prefix="sluice-readahead")
            self._fetcher_pid = os.getpid()
        self._next = (at, following, self._fetcher.submit(self._fetch, at, following))

    def _fetch(self, start: int, length: int) -> Any:
        """`length` bytes at `start`, of the version opened (the GIL is released meanwhile)."""
        obj = self._client.get_range(self.name, start, length, etag=self._etag)
        if len(obj) != length:
            raise OSError(f"{self.name}: asked for {length} bytes at {start}, got {len(obj)}")
        return obj

    def _available(self, n: int) -> memoryview:
        """Up to `n` bytes at the position, fetching when the buffer has none of them."""
        if self._pos >= self._size or n == 0:
            return memoryview(b"")
        at = self._pos - self._buf_start
        if not (0 <= at < len(self._buf)):
            self._fill(n)
            at = self._pos - self._buf_start
        return self._buf[at : at + n]

    def readinto(self, b: Any) -> int:
        self._check_open()
        out = memoryview(b).cast("B")
        done = 0
        while done < len(out):
            chunk = self._available(len(out) - done)
            if not chunk:
                break
            out[done : done + len(chunk)] = chunk
            done += len(chunk)
            self._pos += len(chunk)
        return done

    def read(self, size: Optional[int] = -1) -> bytes:
        self._check_open()
        if size is None or size < 0:
            size = max(self._size - self._pos, 0)
        buf = bytearray(min(size, max(self._size - self._pos, 0)))
        n = self.readinto(buf)
        return bytes(buf[:n])

    def read1(self, size: int = -1) -> bytes:
        self._check_open()
        chunk = self._available(self._readahead if size is None or size < 0 else size)
        self._pos += len(chunk)
        return bytes(chunk)

    def readinto1(self, b: Any) -> int:
        return self.readinto(b)

    def close(self) -> None:
        self._buf = memoryview(b"")
        self._next = None
        if self._fetcher is not None:
            # A window still being fetched finishes on its own; nothing waits for it.
            self._fetcher.shutdown(wait=False, cancel_futures=True)
            self._fetcher = None
        super().close()

    def __repr__(self) -> str:
        return f"<sluice.ObjectReader {self.name} size={self._size}>"


class ObjectWriter(io.BufferedIOBase):
    """An object opened for writing (``sluice.open(uri, "wb")``): a streaming multipart
    upload that becomes visible on ``close``; leaving a ``with`` block by an exception, or
    ``abort()``, leaves nothing behind."""

    def __init__(
        self,
        uri: str,
        client: Optional["Client"] = None,
        part_size: Optional[int] = None,
        mode: str = "overwrite",
    ):
        super().__init__()
        self.name = uri
        self._written = 0
        try:
            self._writer = _client(client).writer(uri, part_size=part_size, mode=mode)
        except BaseException:
            # Closed now, so that the garbage collector's close() has nothing to finish.
            super().close()
            raise
        self.result: Optional[dict] = None
        """What ``close`` made visible (``sluice.WriteResult``)."""

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._written

    def write(self, b: Any) -> int:
        if self.closed:
            raise ValueError(f"{self.name}: write to a closed file")
        n = self._writer.write(b)
        self._written += n
        return n

    def flush(self) -> None:
        # Parts go out as they fill; nothing is visible before close, as S3 allows no more.
        if self.closed:
            return

    def close(self) -> None:
        if not self.closed:
            try:
                self.result = self._writer.close()
            finally:
                super().close()

    def abort(self) -> None:
        """Ends the upload without making the object visible."""
        if not self.closed:
            try:
                self._writer.abort()
            finally:
                super().close()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        # A writer dropped unclosed (an error in a library writing through it) must not
        # publish what it had: io's own __del__ would close, that is, complete the upload.
        if not self.closed and hasattr(self, "_writer"):
            try:
                self.abort()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<sluice.ObjectWriter {self.name} written={self._written}>"


def open(  # noqa: A001 - the name users expect, as in fsspec and smart_open
    uri: str,
    mode: str = "rb",
    client: Optional["Client"] = None,
    part_size: Optional[int] = None,
) -> Union[ObjectReader, ObjectWriter]:
    """Opens the object `uri` as a binary file: ``"rb"`` (seekable, read-ahead), ``"wb"``
    (streaming upload) or ``"xb"`` (exclusive creation: ``FileExistsError`` if the object
    exists, checked when opened and again, atomically, by the store when closed — S3's
    ``If-None-Match: *``). `client`: the client to use (default: one from the environment);
    `part_size`: bytes per uploaded part when writing. Appending (``"ab"``) is refused: an S3
    object cannot be appended to, only rewritten whole."""
    if mode == "rb":
        if part_size is not None:
            raise ValueError(f"part_size: only for writing, not mode {mode!r}")
        return ObjectReader(uri, client)
    if mode == "wb":
        return ObjectWriter(uri, client, part_size)
    if mode == "xb":
        c = _client(client)
        if c.exists(uri):
            raise FileExistsError(f"{uri}: the object exists (mode 'xb')")
        return ObjectWriter(uri, c, part_size, mode="create")
    if mode == "ab":
        raise ValueError(
            f"mode: {mode!r}: an S3 object cannot be appended to, only rewritten whole; "
            "read it and write it back with 'wb'"
        )
    raise ValueError(
        f"mode: {mode!r} is not supported; use 'rb', 'wb' or 'xb' (objects are binary)"
    )
