"""The datasets and loaders of :mod:`sluice.compat.s3dlio`."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Mapping, Optional, Union

import sluice

from ._config import _client, _range_options
from ._errors import _errors
from ._objects import BytesView, _builtin_list, _view, get
from ._uris import native, natives

# --- datasets and loaders


class PyDataset:
    """A list of objects to read. ``PyDataset(uri)`` (s3dlio 0.10) lists the prefix `uri`."""

    def __init__(
        self, source: Union[str, sluice.Dataset], opts: Optional[Mapping[str, Any]] = None
    ):
        if isinstance(source, str):
            source = _errors(sluice.Dataset.from_prefix)(native(source), client=_client())
        self._dataset = source
        self._opts = dict(opts or {})

    @classmethod
    @_errors
    def from_uris(
        cls, uris: Iterable[str], opts: Optional[Mapping[str, Any]] = None
    ) -> "PyDataset":
        return cls(sluice.Dataset.from_uris(natives(_builtin_list(uris))), opts)

    @classmethod
    @_errors
    def from_prefix(cls, uri: str, opts: Optional[Mapping[str, Any]] = None) -> "PyDataset":
        return cls(sluice.Dataset.from_prefix(native(uri), client=_client()), opts)

    def keys(self) -> List[str]:
        return self._dataset.uris

    def uris(self) -> List[str]:
        """The URI of each item, in order (s3dlio 0.10)."""
        return self._dataset.uris

    def get_item(self, index: int) -> Any:
        """The `index`th object's bytes, as an ``asyncio.Future`` of a ``BytesView`` to await
        (s3dlio 0.10's map-style access; a running event loop is needed, as there)."""
        import asyncio

        loop = asyncio.get_running_loop()
        if not 0 <= index < len(self._dataset):
            raise RuntimeError(f"index out of range: {index}")
        return loop.run_in_executor(None, get, self._dataset[index])

    def __len__(self) -> int:
        return len(self._dataset)


# s3dlio loader options that map onto sluice.Loader's; others are accepted and ignored
# (skip_head among them: sluice never sends a HEAD before a GET).
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
    """Reads a PyDataset, ``prefetch`` objects read ahead and waiting to be taken besides
    those being read (as many as the client's controller allows requests; s3dlio's prefetch
    counted requests). ``opts`` keys: prefetch, skip_head, shuffle, seed, shard_rank,
    shard_world_size, ...; unknown keys are tolerated."""

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
