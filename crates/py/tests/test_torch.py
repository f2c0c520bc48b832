"""sluice.torch inside real torch DataLoaders (where torch is installed; CI does not install it)."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install sluice[torch])")


def uri_and_len(obj):
    # Module level: spawned workers unpickle the transform.
    return obj.uri, len(obj)


def test_iterable_dataset_in_dataloader_workers(server, prefix):
    import sluice
    from sluice.torch import S3IterableDataset

    uris = server.fill(prefix, 10, 4096)
    ds = S3IterableDataset.from_prefix(
        f"s3://{server.bucket}/{prefix}",
        transform=uri_and_len,
        prefetch=4,
    )
    for ctx in ["fork", "spawn"]:
        dl = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=2, collate_fn=list, multiprocessing_context=ctx)
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
