"""sluice.torch inside real torch DataLoaders (where torch is installed; CI does not install it)."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install sluice[torch])")


def uri_and_len(obj):
    # Module level: spawned workers unpickle the transform.
    return obj.uri, len(obj)


def test_iterable_dataset_in_dataloader_workers(server, prefix):
    from sluice.torch import S3IterableDataset

    uris = server.fill(prefix, 10, 4096)
    ds = S3IterableDataset.from_prefix(
        f"s3://{server.bucket}/{prefix}",
        transform=uri_and_len,
        prefetch=4,
    )
    for ctx in ["fork", "spawn"]:
        dl = torch.utils.data.DataLoader(
            ds, batch_size=3, num_workers=2, collate_fn=list, multiprocessing_context=ctx
        )
        got = [(u, n) for batch in dl for (u, n) in batch]
        assert sorted(got) == [(u, 4096) for u in uris], ctx
    # Two ranks of two workers each: disjoint, complete.
    seen = []
    for rank in range(2):
        ds = S3IterableDataset.from_uris(uris, transform=uri_and_len, rank=rank, world_size=2)
        dl = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2, collate_fn=list)
        seen += [u for batch in dl for (u, n) in batch]
    assert sorted(seen) == uris


def test_map_dataset(server, prefix):
    from sluice.torch import S3MapDataset

    uris = server.fill(prefix, 4, 100)
    ds = S3MapDataset(uris, transform=len)
    assert len(ds) == 4 and [ds[i] for i in range(4)] == [100] * 4


DLIO_MODEL = """
# DLIO's process model, reduced: this script is one rank (RANK in the environment); its
# DataLoader reads with `spawn` workers that call s3dlio's loader as DLIO's reader does, and
# a `forkserver` process writes a checkpoint with s3dlio's multipart writer, as mlpstorage's
# streaming checkpoint does. Every byte read is checked.
import multiprocessing as mp, os, sys
import torch

URIS = {uris!r}
CKPT = {ckpt!r}

class Reader(torch.utils.data.IterableDataset):
    def __iter__(self):
        import s3dlio
        assert s3dlio.__name__ == "sluice.compat.s3dlio", s3dlio.__name__
        info = torch.utils.data.get_worker_info()
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        mine = URIS[rank::world][info.id::info.num_workers]
        it = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(mine), {{"prefetch": 4, "skip_head": False}}).items()
        from sluice.testing import pattern
        while batch := it.collect_batch(7):
            for item in batch:
                assert bytes(item) == pattern(item.uri.split("/", 3)[3], len(item))
                yield item.uri

def write_checkpoint(uri):
    import s3dlio
    w = s3dlio.MultipartUploadWriter.from_uri(uri, part_size=5 << 20, max_in_flight=2, abort_on_drop=True)
    for i in range(3):
        w.write(bytes([i]) * (4 << 20))
    info = w.close()
    assert info["total_bytes"] == 12 << 20, info

if __name__ == "__main__":
    import s3dlio  # the rank itself
    dl = torch.utils.data.DataLoader(Reader(), batch_size=None, num_workers=2, multiprocessing_context="spawn")
    seen = sorted(dl)
    writer = mp.get_context("forkserver").Process(target=write_checkpoint, args=(CKPT + os.environ["RANK"],))
    writer.start()
    writer.join(120)
    assert writer.exitcode == 0, writer.exitcode
    print(" ".join(seen))
"""


def test_dlio_process_model_through_the_alias(server, prefix, tmp_path):
    import os
    import subprocess
    import sys

    from sluice.compat import s3dlio

    uris = server.fill(prefix, 12, 50_000)
    ckpt = f"s3://{server.bucket}/{prefix}ckpt-rank"
    prog = tmp_path / "rank.py"
    prog.write_text(DLIO_MODEL.format(uris=uris, ckpt=ckpt))
    stand_in = tmp_path / "stand_in" / "s3dlio"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text(
        'raise ImportError("the alias did not reach this process")\n'
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(stand_in.parent), os.environ.get("PYTHONPATH", "")]),
    }
    ranks = [
        subprocess.Popen(
            [sys.executable, "-m", "sluice.compat.alias", str(prog)],
            env={**env, "RANK": str(r), "WORLD_SIZE": "2"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    seen = []
    for p in ranks:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        seen += out.split()
    assert sorted(seen) == uris, "two ranks x two spawn workers: every object once"
    for r in range(2):
        data = bytes(s3dlio.get(f"{ckpt}{r}"))
        assert data == b"".join(bytes([i]) * (4 << 20) for i in range(3))


def test_distributed_checkpoint_save_and_load(server, prefix):
    import sluice
    import torch.distributed.checkpoint as dcp
    from sluice.torch.dcp import StorageReader, StorageWriter

    uri = f"s3://{server.bucket}/{prefix}ckpt"
    state = {"w": torch.randn(256, 512), "b": torch.arange(1000), "nested": {"x": torch.ones(3, 3)}}
    dcp.save(state, storage_writer=StorageWriter(uri, endpoint=server.endpoint))
    names = [u.rsplit("/", 1)[1] for u in sluice.list(uri + "/", recursive=True)]
    assert ".metadata" in names and any(n.endswith(".distcp") for n in names), names
    assert not any(n.endswith(".tmp") for n in names), "the metadata was renamed into place"
    back = {
        "w": torch.empty(256, 512),
        "b": torch.empty(1000, dtype=torch.long),
        "nested": {"x": torch.empty(3, 3)},
    }
    dcp.load(back, storage_reader=StorageReader(uri, endpoint=server.endpoint))
    assert torch.equal(back["w"], state["w"]) and torch.equal(back["b"], state["b"])
    assert torch.equal(back["nested"]["x"], state["nested"]["x"])
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        StorageWriter("/local/path")


def test_distributed_checkpoint_partial_load_reads_only_its_bytes(server, prefix):
    import torch.distributed.checkpoint as dcp
    from sluice.torch.dcp import StorageReader, StorageWriter

    uri = f"s3://{server.bucket}/{prefix}ckpt"
    state = {f"layer{i}": torch.randn(512, 512) for i in range(8)}  # 1 MiB each
    state["step"] = torch.tensor(7)
    dcp.save(state, storage_writer=StorageWriter(uri, endpoint=server.endpoint, thread_count=2))
    back = {"layer3": torch.empty(512, 512), "step": torch.tensor(0)}
    reader = StorageReader(uri, endpoint=server.endpoint, files_in_flight=2)
    sent = server.stats()["bytes_sent"]
    dcp.load(back, storage_reader=reader)
    fetched = server.stats()["bytes_sent"] - sent
    assert torch.equal(back["layer3"], state["layer3"]) and int(back["step"]) == 7
    # One tensor of 1 MiB, the step and the metadata: not the other 7 MiB.
    assert (1 << 20) <= fetched < (3 << 19), fetched
    everything = {k: torch.empty_like(v) for k, v in state.items()}
    dcp.load(everything, storage_reader=StorageReader(uri, endpoint=server.endpoint))
    assert all(torch.equal(everything[k], v) for k, v in state.items())
    with pytest.raises(ValueError, match="files_in_flight"):
        StorageReader(uri, files_in_flight=0)


def _dcp_rank(rank, world, init, uri, endpoint):
    # Module level: torch.multiprocessing.spawn pickles it.
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from sluice.torch.dcp import StorageReader, StorageWriter

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        mine = {f"rank{rank}": torch.full((100_000,), float(rank))}
        dcp.save(mine, storage_writer=StorageWriter(uri, endpoint=endpoint))
        back = {f"rank{rank}": torch.empty(100_000)}
        dcp.load(back, storage_reader=StorageReader(uri, endpoint=endpoint))
        assert torch.equal(back[f"rank{rank}"], mine[f"rank{rank}"])
    finally:
        dist.destroy_process_group()


def test_distributed_checkpoint_two_ranks_write_their_own_shards(server, prefix, tmp_path):
    import sluice
    import torch.multiprocessing as mp

    uri = f"s3://{server.bucket}/{prefix}ckpt"
    init = f"file://{tmp_path / 'pg'}"
    mp.spawn(_dcp_rank, args=(2, init, uri, server.endpoint), nprocs=2, join=True)
    names = sorted(u.rsplit("/", 1)[1] for u in sluice.list(uri + "/", recursive=True))
    assert names[0] == ".metadata", names
    # Each rank wrote its shard, in files written by several threads at once (__rank_thread).
    shards = names[1:]
    assert all(n.startswith(("__0_", "__1_")) and n.endswith(".distcp") for n in shards), names
    assert {n[:4] for n in shards} == {"__0_", "__1_"}, names
    assert len(shards) > 2, f"files written in parallel: {names}"
