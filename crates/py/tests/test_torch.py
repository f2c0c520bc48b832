"""sluice.torch inside real torch DataLoaders (where torch is installed; CI does not install it)."""

import pytest

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
