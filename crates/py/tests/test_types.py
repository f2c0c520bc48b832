"""The TypedDicts of ``sluice`` describe the dicts the native module really returns: the same
keys (no more, no fewer) and values of the declared types."""

import typing

import pytest
import sluice
from sluice import LoaderStats, StatResult, WriteResult


def assert_shape(d, td):
    assert type(d) is dict
    assert set(d) == set(td.__annotations__), f"{td.__name__}: keys differ"
    assert set(td.__annotations__) == td.__required_keys__, (
        f"{td.__name__}: every key is always there"
    )
    for key, t in typing.get_type_hints(td).items():
        if typing.get_origin(t) is list:  # List[EndpointStats]: a list of such dicts
            assert isinstance(d[key], list), f"{td.__name__}[{key!r}] = {d[key]!r} is not a list"
            (item,) = typing.get_args(t)
            for e in d[key]:
                assert_shape(e, item)
            continue
        allowed = typing.get_args(t) or (t,)  # Optional[str] -> (str, NoneType)
        # `__required_keys__` marks a TypedDict (typing.is_typeddict is 3.10+).
        nested = [a for a in allowed if hasattr(a, "__required_keys__")]
        if nested and d[key] is not None:  # Optional[Congestion]: None or such a dict
            assert_shape(d[key], nested[0])
            continue
        assert isinstance(d[key], allowed), f"{td.__name__}[{key!r}] = {d[key]!r} is not {t}"


def test_public_and_the_same_classes():
    from sluice import _types

    assert (sluice.StatResult, sluice.LoaderStats, sluice.WriteResult) == (
        _types.StatResult,
        _types.LoaderStats,
        _types.WriteResult,
    )


def test_stat(server, client, prefix):
    [uri] = server.fill(prefix, 1, 1234)
    s = client.stat(uri)
    assert_shape(s, StatResult)
    assert s["uri"] == uri and s["size"] == 1234
    assert_shape(sluice.stat(uri), StatResult)  # the module-level function: the default client


def test_loader_stats(server, client, prefix):
    uris = server.fill(prefix, 3, 1000)
    with sluice.Loader(sluice.Dataset.from_uris(uris), client=client) as loader:
        assert_shape(loader.stats(), LoaderStats)  # before the first object
        assert len(loader.collect_batch(3)) == 3
        s = loader.stats()
    assert_shape(s, LoaderStats)
    assert s["objects"] == 3 and s["bytes"] == 3000
    # No prefetch given: the window follows the client's controller, from 16.
    assert s["window"] >= 16 and s["congestion"]["adaptive"] is True
    # Ranges follow it too: 256 MiB ÷ twice a limit of 16 or more, 4 to 8 MiB.
    assert s["range_size"] in (4 << 20, 8 << 20)


@pytest.mark.parametrize("size", [10, 6 << 20], ids=["one-request", "multipart"])
def test_writer_close(server, client, prefix, size):
    uri = f"s3://{server.bucket}/{prefix}obj"
    w = client.writer(uri, part_size=5 << 20)
    w.write(bytes(size))
    info = w.close()
    assert_shape(info, WriteResult)
    assert info["uri"] == uri and info["total_bytes"] == size
