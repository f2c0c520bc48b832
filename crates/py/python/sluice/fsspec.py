"""fsspec over sluice: ``sluice://bucket/key`` for pandas, pyarrow, dask and everything else
that opens files through fsspec.

    import pandas
    df = pandas.read_parquet("sluice://bucket/x.parquet")            # the environment's store
    df = pandas.read_parquet("sluice://bucket/x.parquet",
                             storage_options={"endpoint": "http://...", "profile": "training"})

The protocol is registered by the package's entry point (``fsspec.specs``) when sluice is
installed, and by importing this module. Options are ``sluice.Config``'s fields (or
``config=`` a ``Config``); a filesystem pickles as them, and builds its client in each
process that uses it. Files are ``sluice.open``'s: reads are ranged GETs of one version with
adaptive read-ahead, writes stream a multipart upload that appears on close.

Where S3 is not a file system: ``open(path, "xb")`` and ``pipe_file(path, data,
mode="create")`` are S3's conditional writes (``If-None-Match: *``: ``FileExistsError`` when
the key is taken, decided by the store, so two writers cannot both create it); ``"ab"`` is
refused (an object cannot be appended to); ``mkdir``/``makedirs`` create no bucket and no
key (a prefix exists while keys are under it; create buckets with your store's tools):
``mkdir`` of a bare bucket raises ``FileExistsError`` if it exists (as s3fs) and
``FileNotFoundError`` if not; ``modified`` is the
object's Last-Modified; transactions (``autocommit=False``) are not supported.
"""

from __future__ import annotations

import os
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

import fsspec
from fsspec.spec import AbstractFileSystem

import sluice

__all__ = ["SluiceFileSystem"]

_CONFIG_FIELDS = {f.name for f in fields(sluice.Config)}


class SluiceFileSystem(AbstractFileSystem):
    """Buckets and keys of an S3-compatible store as a file system (``sluice://``)."""

    protocol = ("sluice",)
    root_marker = ""

    def __init__(self, config: Optional[sluice.Config] = None, **options: Any):
        settings = {k: options.pop(k) for k in list(options) if k in _CONFIG_FIELDS}
        if config is not None and settings:
            raise ValueError(
                f"give config= or its fields ({', '.join(sorted(settings))}), not both"
            )
        super().__init__(**options)
        self.config = config if config is not None else sluice.Config(**settings)
        self._client: Optional[sluice.Client] = None
        self._pid = -1

    @property
    def client(self) -> sluice.Client:
        # One client per process: one made before a fork must not be used after it.
        if self._client is None or self._pid != os.getpid():
            self._client = sluice.Client(config=self.config)
            self._pid = os.getpid()
        return self._client

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]  # type: ignore[return-value]
        path = str(path)
        for prefix in ("sluice://", "sluice::"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
        return path.rstrip("/")

    @staticmethod
    def _uri(path: str) -> str:
        if not path:
            raise ValueError("sluice://: a path needs a bucket (sluice://bucket/key)")
        return f"s3://{path}"

    @staticmethod
    def _entry(e: Any) -> Dict[str, Any]:
        name = e.uri[len("s3://") :].rstrip("/")
        if e.is_prefix:
            return {"name": name, "size": 0, "type": "directory"}
        return {
            "name": name,
            "size": e.size,
            "type": "file",
            "etag": e.etag,
            "mtime": e.last_modified,
        }

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> List[Any]:
        path = self._strip_protocol(path)
        entries = [self._entry(e) for e in self.client.list_objects(self._uri(path) + "/")]
        if not entries:
            info = self.info(path)  # a file lists as itself; nothing there raises
            entries = [info]
        return entries if detail else [e["name"] for e in entries]

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        path = self._strip_protocol(path)
        if "/" in path:
            try:
                st = self.client.stat(self._uri(path))
                return {
                    "name": path,
                    "size": st["size"],
                    "type": "file",
                    "etag": st["etag"],
                    "mtime": st["last_modified"],
                }
            except FileNotFoundError:
                pass
        # A "directory": any key under path/; a bucket is one even when empty (listing a
        # bucket that does not exist raises FileNotFoundError).
        for _ in self.client.list_objects(self._uri(path) + "/"):
            return {"name": path, "size": 0, "type": "directory"}
        if "/" not in path:
            self.client.list(self._uri(path) + "/")
            return {"name": path, "size": 0, "type": "directory"}
        raise FileNotFoundError(f"sluice://{path}: no such object or prefix")

    def find(
        self,
        path: str,
        maxdepth: Optional[int] = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ):
        if maxdepth is not None or withdirs:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        path = self._strip_protocol(path)
        # One recursive listing rather than a walk, one request per directory.
        found = {
            e["name"]: e
            for e in map(
                self._entry, self.client.list_objects(self._uri(path) + "/", recursive=True)
            )
        }
        if not found:
            try:
                info = self.info(path)
                if info["type"] == "file":
                    found = {path: info}
            except FileNotFoundError:
                pass
        return found if detail else sorted(found)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Any = None,
        autocommit: bool = True,
        **kwargs: Any,
    ):
        if not autocommit:
            raise NotImplementedError(
                "sluice://: transactions (autocommit=False) are not supported"
            )
        return sluice.open(self._uri(self._strip_protocol(path)), mode, client=self.client)

    def modified(self, path: str) -> datetime:
        """The object's Last-Modified (UTC); a prefix has none (``IsADirectoryError``)."""
        info = self.info(path)
        if info["type"] != "file" or info.get("mtime") is None:
            raise IsADirectoryError(
                f"sluice://{self._strip_protocol(path)}: a prefix has no modification time"
            )
        return datetime.fromtimestamp(info["mtime"], tz=timezone.utc)

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        uri = self._uri(self._strip_protocol(path))
        if start is None and end is None:
            return bytes(self.client.get(uri))
        if (start or 0) < 0 or (end is not None and end < 0):
            # Offsets from the end need the size.
            size = self.client.stat(uri)["size"]
            start = max(size + start, 0) if start is not None and start < 0 else start
            end = max(size + end, 0) if end is not None and end < 0 else end
        start = start or 0
        if end is not None and end <= start:
            return b""
        # A range past the end is clipped by the store, as a file read is.
        return bytes(self.client.get_range(uri, start, None if end is None else end - start))

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copies through this machine (read, then uploaded), a range at a time; what
        ``mv``/``rename`` use."""
        src = self._uri(self._strip_protocol(path1))
        dst = self._uri(self._strip_protocol(path2))
        with (
            sluice.open(src, "rb", client=self.client) as r,
            sluice.open(dst, "wb", client=self.client) as w,
        ):
            while chunk := r.read(32 << 20):
                w.write(chunk)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """Writes `value`; ``mode="create"`` only if the key is free (``FileExistsError``)."""
        self.client.put(self._uri(self._strip_protocol(path)), value, mode=mode)

    def rm_file(self, path: str) -> None:
        self.client.delete(self._uri(self._strip_protocol(path)))

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """A prefix exists while keys are under it: nothing to make. A bare bucket is not
        made either (sluice creates no buckets): ``FileExistsError`` if it exists, as s3fs
        raises, ``FileNotFoundError`` if it does not."""
        bucket, _, key = self._strip_protocol(path).partition("/")
        if key:
            return
        try:
            next(iter(self.client.list_objects(self._uri(bucket) + "/")), None)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"sluice://{bucket}: no such bucket, and sluice creates none (use the store's tools)"
            ) from None
        raise FileExistsError(f"sluice://{bucket}: the bucket exists")

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        try:
            self.mkdir(path)
        except FileExistsError:
            if not exist_ok:
                raise

    def rmdir(self, path: str) -> None:
        pass


fsspec.register_implementation("sluice", SluiceFileSystem, clobber=True)
