"""Sharding resolution (no torch needed) and the torch datasets (where torch is installed)."""

import types

import pytest

from sluice._sharding import Shard, resolve_shard


class FakeDist:
    """torch.distributed's query surface: pure logic, no I/O."""

    def __init__(self, rank, world, initialized=True):
        self.r, self.w, self.init = rank, world, initialized

    def is_available(self):
        return True

    def is_initialized(self):
        return self.init

    def get_rank(self):
        return self.r

    def get_world_size(self):
        return self.w


def worker(i, n):
    return types.SimpleNamespace(id=i, num_workers=n)


def test_resolution_order():
    assert resolve_shard(env={}) == Shard(0, 1, 0, 1)
    assert resolve_shard(env={"RANK": "3", "WORLD_SIZE": "4"}) == Shard(3, 4, 0, 1)
    assert resolve_shard(dist=FakeDist(1, 2), env={"RANK": "3", "WORLD_SIZE": "4"}) == Shard(1, 2, 0, 1)
    assert resolve_shard(dist=FakeDist(1, 2, initialized=False), env={}) == Shard(0, 1, 0, 1)
    assert resolve_shard(2, 8, worker(1, 4), FakeDist(1, 2), {}) == Shard(2, 8, 1, 4)
    with pytest.raises(ValueError, match="rank 4"):
        resolve_shard(4, 4, env={})
    with pytest.raises(ValueError, match="RANK"):
        resolve_shard(env={"RANK": "x", "WORLD_SIZE": "2"})


torch = pytest.importorskip("torch", reason="torch is not installed (pip install sluice[torch])")


def test_iterable_dataset_in_dataloader_workers(server, prefix):
    import sluice
    from sluice.torch import S3IterableDataset

    uris = server.fill(prefix, 10, 4096)
    ds = S3IterableDataset.from_prefix(
        f"s3://{server.bucket}/{prefix}",
        transform=lambda o: (o.uri, len(o)),
        client=None,
    )
    for ctx in ["fork", "spawn"]:
        dl = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=2, collate_fn=list, multiprocessing_context=ctx)
        got = [u for batch in dl for (u, n) in batch]
        assert sorted(got) == uris


def test_map_dataset(server, prefix):
    from sluice.torch import S3MapDataset

    uris = server.fill(prefix, 4, 100)
    ds = S3MapDataset(uris, transform=len)
    assert len(ds) == 4 and [ds[i] for i in range(4)] == [100] * 4
