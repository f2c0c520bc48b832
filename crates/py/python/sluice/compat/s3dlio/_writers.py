"""The streaming writers of :mod:`sluice.compat.s3dlio`."""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Dict, Optional, Tuple

from sluice import _native

from ._config import _client
from ._errors import InvalidArgumentError, _errors
from ._objects import _bytes_like
from ._uris import native

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
            native(uri),
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
    def write(self, data: Any, /, *, copy: bool = False) -> int:
        """Appends a bytes-like object; returns its length. ``copy`` (s3dlio 0.10) is
        accepted and changes nothing: a mutable buffer is copied into a part before this
        returns, and ``bytes`` cannot change, so the caller may reuse its buffer either way."""
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
        self._writer = _client().writer(native(uri))
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


def create_azure_writer(uri: str, options: Optional[PyWriterOptions] = None) -> PyObjectWriter:
    return _writer_for(native(uri), options, ("az://",), "create_azure_writer")
