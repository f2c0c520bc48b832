"""Who reads what: the (rank, world size) of a distributed job and the (worker, workers)
of a DataLoader, resolved without importing torch so the logic is testable anywhere."""

from __future__ import annotations

import os
from typing import Any, Mapping, NamedTuple, Optional


class Shard(NamedTuple):
    rank: int
    world_size: int
    worker_id: int
    num_workers: int


def _env_int(env: Mapping[str, str], name: str) -> Optional[int]:
    v = env.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not an integer") from None


def resolve_shard(
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
    worker_info: Any = None,
    dist: Any = None,
    env: Optional[Mapping[str, str]] = None,
) -> Shard:
    """The shard of this reader.

    rank / world_size: given, else from an initialised ``torch.distributed`` (``dist``),
    else from the RANK / WORLD_SIZE variables torchrun and mpirun wrappers set, else 0 / 1.
    worker_info: ``torch.utils.data.get_worker_info()`` (None in the main process).
    """
    env = os.environ if env is None else env
    if rank is None or world_size is None:
        if dist is not None and dist.is_available() and dist.is_initialized():
            r, w = dist.get_rank(), dist.get_world_size()
        else:
            r = _env_int(env, "RANK")
            w = _env_int(env, "WORLD_SIZE")
        rank = (r if r is not None else 0) if rank is None else rank
        world_size = (w if w is not None else 1) if world_size is None else world_size
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
    if worker_info is None:
        return Shard(rank, world_size, 0, 1)
    return Shard(rank, world_size, int(worker_info.id), int(worker_info.num_workers))
