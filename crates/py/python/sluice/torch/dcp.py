"""``torch.distributed.checkpoint`` through sluice: a ``StorageWriter`` and ``StorageReader``
for checkpoints under ``s3://bucket/prefix`` (or ``sluice://bucket/prefix``).

    import torch.distributed.checkpoint as dcp
    from sluice.torch.dcp import StorageReader, StorageWriter

    dcp.save(model.state_dict(), storage_writer=StorageWriter("s3://bucket/ckpt/step-100"))
    dcp.load(state, storage_reader=StorageReader("s3://bucket/ckpt/step-100"))

They are torch's fsspec writer and reader over ``sluice://`` (``sluice.fsspec``): each rank
writes its shard files as streaming multipart uploads, ``thread_count`` files at once
(default 4), and the metadata last (written under a temporary name and renamed, as torch
does). Options are ``sluice.Config``'s fields (``endpoint=``, ``profile=``, ...) or
``config=``. ``sync_files`` is off: an object is durable once its upload completes, there is
nothing to fsync.

The reader fetches what the load plan names and nothing else: the plan's items grouped by
file, each file's byte ranges read by one ``get_ranges`` call (ranges less than 1 MiB apart
merged, long ones read as parallel pieces, all of one version), ``files_in_flight`` files at
once (default 4) ahead of torch's deserialisation, which then reads from memory. A partial
load (a subset of the state dict's keys) fetches only those tensors' bytes.
"""

from __future__ import annotations

import bisect
import io
import os
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

from torch.distributed.checkpoint import FsspecReader, FsspecWriter

import sluice.fsspec  # noqa: F401  (registers sluice://)

__all__ = ["StorageReader", "StorageWriter"]


def _path(uri: str) -> str:
    if uri.startswith("s3://"):
        return "sluice://" + uri[len("s3://") :]
    if uri.startswith("sluice://"):
        return uri
    raise ValueError(
        f"{uri!r}: a checkpoint location is s3://bucket/prefix (or sluice://bucket/prefix)"
    )


class StorageWriter(FsspecWriter):
    """Writes a distributed checkpoint under `uri` (see the module)."""

    def __init__(self, uri: str, thread_count: int = 4, sync_files: bool = False, **options: Any):
        super().__init__(_path(uri), thread_count=thread_count, sync_files=sync_files, **options)


class StorageReader(FsspecReader):
    """Reads a distributed checkpoint under `uri` (see the module)."""

    # torch's file system (swapped for `_Prefetched` during `read_data`).
    fs: Any

    def __init__(self, uri: str, files_in_flight: int = 4, **options: Any):
        if files_in_flight < 1:
            raise ValueError(f"files_in_flight: {files_in_flight} (must be at least 1)")
        super().__init__(_path(uri), **options)
        self.files_in_flight = files_in_flight

    def read_data(self, plan: Any, planner: Any) -> Any:
        # The files in the order torch's read_data visits them (plan order, grouped by
        # file), with the ranges each of its items names.
        ranges: Dict[str, List[Tuple[int, int]]] = {}
        for item in plan.items:
            md = self.storage_data[item.storage_index]
            path = self.fs.concat_path(self.path, md.relative_path)
            ranges.setdefault(str(path), []).append((md.offset, md.offset + md.length))
        sluice_fs = self.fs.fs
        client = sluice_fs.client
        order = list(ranges)
        with ThreadPoolExecutor(self.files_in_flight) as pool:
            ahead: Dict[str, Future] = {}

            def fetch_next() -> None:
                if order:
                    path = order.pop(0)
                    uri = sluice_fs._uri(sluice_fs._strip_protocol(path))
                    ahead[path] = pool.submit(client.get_ranges, uri, ranges[path])

            for _ in range(self.files_in_flight):
                fetch_next()
            outer = self.fs
            self.fs = _Prefetched(outer, ranges, ahead, fetch_next)
            try:
                return super().read_data(plan, planner)
            finally:
                self.fs = outer
                for f in ahead.values():
                    f.cancel()


class _Prefetched:
    """torch's file system, except that a file's stream serves the ranges fetched for it."""

    def __init__(
        self,
        inner: Any,
        ranges: Dict[str, List[Tuple[int, int]]],
        ahead: Dict[str, Future],
        fetch_next: Any,
    ):
        self._inner, self._ranges, self._ahead, self._next = inner, ranges, ahead, fetch_next

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @contextmanager
    def create_stream(self, path: Any, mode: str) -> Iterator[io.RawIOBase]:
        key = str(path)
        fetched = self._ahead.pop(key, None)
        if fetched is None or mode != "rb":
            with self._inner.create_stream(path, mode) as stream:
                yield stream
            return
        parts = fetched.result()
        self._next()  # this file's memory is in hand: the next file may start
        yield _Ranges(list(zip((s for s, _ in self._ranges[key]), parts)))


class _Ranges(io.RawIOBase):
    """A read-only, seekable file of which only the fetched ranges can be read."""

    def __init__(self, parts: List[Tuple[int, Any]]):
        self._parts = sorted(((start, memoryview(p)) for start, p in parts), key=lambda x: x[0])
        self._starts = [start for start, _ in self._parts]
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset += self._pos
        elif whence == os.SEEK_END:
            last = self._parts[-1] if self._parts else (0, memoryview(b""))
            offset += last[0] + len(last[1])
        self._pos = offset
        return offset

    def _part_at(self, pos: int) -> Optional[memoryview]:
        # The part that starts last at or before pos, or an earlier one that still holds it
        # (parts may overlap).
        i = bisect.bisect_right(self._starts, pos)
        for start, data in reversed(self._parts[:i]):
            if pos < start + len(data):
                return data[pos - start :]
        return None

    def readinto(self, b: Any) -> int:
        out = memoryview(b).cast("B")
        if not len(out):
            return 0
        data = self._part_at(self._pos)
        if data is None:
            raise OSError(f"byte {self._pos} of the checkpoint file was not in the load plan")
        n = min(len(out), len(data))
        out[:n] = data[:n]
        self._pos += n
        return n
