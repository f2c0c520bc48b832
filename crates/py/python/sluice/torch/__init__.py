"""PyTorch datasets over sluice. Importing this module imports torch; ``import sluice``
does not.

    from sluice.torch import S3IterableDataset
    ds = S3IterableDataset.from_prefix("s3://bucket/train/", prefetch=16,
                                       transform=lambda o: numpy.frombuffer(o, numpy.uint8))
    loader = torch.utils.data.DataLoader(ds, batch_size=7, num_workers=4, collate_fn=list)

Each DataLoader worker (fork or spawn) reads a disjoint share of the objects: the dataset is
dealt across ``rank × worker`` (rank and world size from torch.distributed when initialised,
else RANK / WORLD_SIZE), so every object is read exactly once per epoch across the job.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import torch.distributed
import torch.utils.data

import sluice
from sluice._sharding import resolve_shard

__all__ = ["S3IterableDataset", "S3MapDataset", "Transform", "load", "save"]

Transform = Callable[[sluice.Object], Any]


def _identity(obj: sluice.Object) -> Any:
    return obj


class S3IterableDataset(torch.utils.data.IterableDataset):
    """Streams objects through ``sluice.Loader``, sharded by rank and DataLoader worker.
    Yields ``transform(obj)`` (the ``sluice.Object`` itself by default: a zero-copy buffer)."""

    def __init__(
        self,
        dataset: sluice.Dataset,
        transform: Optional[Transform] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        **loader_options: Any,
    ):
        super().__init__()
        self._dataset = dataset
        self._transform = transform or _identity
        self._rank = rank
        self._world_size = world_size
        self._options = loader_options
        self._epoch = 0

    @classmethod
    def from_uris(cls, uris: Sequence[str], **kwargs: Any) -> "S3IterableDataset":
        return cls(sluice.Dataset.from_uris(list(uris)), **kwargs)

    @classmethod
    def from_prefix(
        cls, uri: str, suffix: Optional[str] = None, **kwargs: Any
    ) -> "S3IterableDataset":
        """Lists once, here (through ``config=`` when given); workers receive the listing,
        not a new request."""
        return cls(sluice.Dataset.from_prefix(uri, suffix, config=kwargs.get("config")), **kwargs)

    def set_epoch(self, epoch: int) -> None:
        """A new shuffle order per epoch (with ``shuffle=True``), as DistributedSampler."""
        self._epoch = epoch

    def shard(self):
        return resolve_shard(
            self._rank,
            self._world_size,
            torch.utils.data.get_worker_info(),
            torch.distributed,
        )

    def __iter__(self) -> Iterator[Any]:
        s = self.shard()
        loader = sluice.Loader(
            self._dataset,
            rank=s.rank,
            world_size=s.world_size,
            worker_id=s.worker_id,
            num_workers=s.num_workers,
            epoch=self._epoch,
            **self._options,
        )
        with loader:
            for obj in loader:
                yield self._transform(obj)


class S3MapDataset(torch.utils.data.Dataset):
    """Random access by index: ``ds[i]`` GETs the i-th URI (use a sampler for sharding)."""

    def __init__(
        self,
        uris: Union[Sequence[str], sluice.Dataset],
        transform: Optional[Transform] = None,
        backend: Optional[str] = None,
        config: Optional[sluice.Config] = None,
    ):
        super().__init__()
        # A sluice.Dataset holds a million URIs in tens of megabytes; a list of str in
        # about three times that, copied into every worker.
        self._dataset = (
            uris if isinstance(uris, sluice.Dataset) else sluice.Dataset.from_uris(list(uris))
        )
        self._transform = transform or _identity
        self._backend = backend
        self._config = config
        self._client: Optional[sluice.Client] = None
        self._pid = -1

    @classmethod
    def from_prefix(cls, uri: str, suffix: Optional[str] = None, **kwargs: Any) -> "S3MapDataset":
        return cls(sluice.Dataset.from_prefix(uri, suffix, config=kwargs.get("config")), **kwargs)

    def _get_client(self) -> sluice.Client:
        # One client per process: a forked worker must not reuse its parent's connections.
        if self._client is None or self._pid != os.getpid():
            self._client = sluice.Client(backend=self._backend, config=self._config)
            self._pid = os.getpid()
        return self._client

    def __len__(self) -> int:
        return len(self._dataset)

    def __getitem__(self, index: int) -> Any:
        return self._transform(self._get_client().get(self._dataset[index]))

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_client"] = None
        return state


def save(
    obj: Any,
    uri: str,
    client: Optional[sluice.Client] = None,
    crc32: bool = True,
    **kwargs: Any,
) -> None:
    """``torch.save(obj)`` into the object `uri`, streamed as a multipart upload (memory stays
    bounded by the part size); the object appears only once the whole checkpoint is written.
    `kwargs` go to ``torch.save``.

    ``crc32=False`` writes the zip records without their CRC-32 (torch 2.6 and later; older
    ones always write them), saving about 0.2 CPU-seconds per GB on the one core a save runs
    on. ``torch.load`` has not checked them since 2019 (pytorch#28858), and the upload's own
    checksums, checked by the store, cover the bytes; but tools that read the records with a
    zip library that checks them (Python's ``zipfile``, pickle scanners) refuse such a file,
    so the default writes what ``torch.save`` writes."""
    with sluice.open(uri, "wb", client=client) as f, _crc32_records(crc32):
        torch.save(obj, f, **kwargs)


@contextlib.contextmanager
def _crc32_records(on: bool) -> Iterator[None]:
    """``torch.save`` computes the records' CRC-32 (or not) inside this block; torch's
    setting is global, and is put back after."""
    get = getattr(torch.serialization, "get_crc32_options", None)
    put = getattr(torch.serialization, "set_crc32_options", None)
    if get is None or put is None:  # torch < 2.6: always computed
        yield
        return
    before = get()
    put(on)
    try:
        yield
    finally:
        put(before)


def load(
    uri: str, map_location: Any = None, client: Optional[sluice.Client] = None, **kwargs: Any
) -> Any:
    """``torch.load`` from the object `uri`, read with ranged GETs of one version of it.
    `map_location` and `kwargs` (``weights_only``, ...) go to ``torch.load``."""
    with sluice.open(uri, "rb", client=client) as f:
        return torch.load(f, map_location=map_location, **kwargs)
