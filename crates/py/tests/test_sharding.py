"""Who reads what: rank/world size/worker resolution, with no torch needed."""

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
    assert resolve_shard(dist=FakeDist(1, 2), env={"RANK": "3", "WORLD_SIZE": "4"}) == Shard(
        1, 2, 0, 1
    )
    assert resolve_shard(dist=FakeDist(1, 2, initialized=False), env={}) == Shard(0, 1, 0, 1)
    assert resolve_shard(2, 8, worker(1, 4), FakeDist(1, 2), {}) == Shard(2, 8, 1, 4)
    with pytest.raises(ValueError, match="rank 4"):
        resolve_shard(4, 4, env={})
    with pytest.raises(ValueError, match="RANK"):
        resolve_shard(env={"RANK": "x", "WORLD_SIZE": "2"})
