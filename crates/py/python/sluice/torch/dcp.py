"""``torch.distributed.checkpoint`` through sluice: a ``StorageWriter`` and ``StorageReader``
for checkpoints under ``s3://bucket/prefix`` (or ``sluice://bucket/prefix``).

    import torch.distributed.checkpoint as dcp
    from sluice.torch.dcp import StorageReader, StorageWriter

    dcp.save(model.state_dict(), storage_writer=StorageWriter("s3://bucket/ckpt/step-100"))
    dcp.load(state, storage_reader=StorageReader("s3://bucket/ckpt/step-100"))

They are torch's fsspec writer and reader over ``sluice://`` (``sluice.fsspec``): each rank
writes its shard files as streaming multipart uploads, ``thread_count`` files at once
(default 4), and the metadata last (written under a temporary name and renamed, as torch
does); reads are ranged GETs of one version of each file. Options are ``sluice.Config``'s
fields (``endpoint=``, ``profile=``, ...) or ``config=``. ``sync_files`` is off: an object
is durable once its upload completes, there is nothing to fsync.
"""

from __future__ import annotations

from typing import Any

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

    def __init__(self, uri: str, **options: Any):
        super().__init__(_path(uri), **options)
