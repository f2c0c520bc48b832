"""sluice.Loader and sluice.Dataset from Python."""

import multiprocessing as mp
import pickle

import pytest
import sluice
import sluice.testing
from sluice.testing import pattern


def key(uri):
    return uri.split("/", 3)[3]


def check(obj, size):
    assert len(obj) == size
    assert bytes(obj) == pattern(key(obj.uri), size), obj.uri


def test_every_object_every_byte(server, client, prefix):
    uris = server.fill(prefix, 12, 200_000)
    ds = sluice.Dataset.from_prefix(f"s3://{server.bucket}/{prefix}", client=client)
    assert len(ds) == 12 and ds.uris == uris
    heads = server.heads
    loader = sluice.Loader(ds, prefetch=4, client=client)
    assert len(loader) == 12
    seen = []
    for obj in loader:
        check(obj, 200_000)
        seen.append(obj.uri)
    assert sorted(seen) == uris
    assert server.heads == heads, "a listed dataset needs no HEAD"
    s = loader.stats()
    assert s["objects"] == 12 and s["bytes"] == 12 * 200_000 and s["errors"] == 0


def test_large_objects_are_split_into_ranges(server, client, prefix):
    uris = server.fill(prefix, 2, 5_000_000)
    gets = server.gets
    loader = sluice.Loader(
        sluice.Dataset.from_uris(uris), client=client, range_threshold=1 << 20, chunk_size=1 << 20
    )
    for obj in loader:
        check(obj, 5_000_000)
    assert server.gets - gets == 2 * 5, "5 ranged GETs per 5 MB object"


def test_batches_order_and_shuffle(server, client, prefix):
    uris = server.fill(prefix, 10, 1000)
    ds = sluice.Dataset.from_uris(uris)
    it = sluice.Loader(ds, prefetch=3, client=client)
    sizes = []
    while batch := it.collect_batch(4):
        sizes.append(len(batch))
    assert sizes == [4, 4, 2]
    assert it.collect_batch(4) == []

    ordered = [o.uri for o in sluice.Loader(ds, order="input", client=client)]
    assert ordered == uris
    a = [o.uri for o in sluice.Loader(ds, order="input", shuffle=True, seed=7, client=client)]
    b = [o.uri for o in sluice.Loader(ds, order="input", shuffle=True, seed=7, client=client)]
    c = [
        o.uri
        for o in sluice.Loader(ds, order="input", shuffle=True, seed=7, epoch=1, client=client)
    ]
    assert a == b and sorted(a) == uris and a != uris and c != a


def test_sharding_is_disjoint_and_complete(server, client, prefix):
    uris = server.fill(prefix, 23, 100)
    ds = sluice.Dataset.from_uris(uris)
    got = []
    for rank in range(2):
        for worker in range(3):
            l = sluice.Loader(
                ds,
                rank=rank,
                world_size=2,
                worker_id=worker,
                num_workers=3,
                shuffle=True,
                seed=1,
                client=client,
            )
            got += [o.uri for o in l]
    assert sorted(got) == uris


def test_bad_options_name_the_option(server, client):
    ds = sluice.Dataset.from_uris([f"s3://{server.bucket}/x"])
    for kwargs, name in [
        ({"order": "sideways"}, "order"),
        ({"prefetch": 0}, "prefetch"),
        ({"rank": 2, "world_size": 2}, "rank"),
        ({"on_error": "ignore"}, "on_error"),
        ({"chunk_size": 0}, "chunk_size"),
    ]:
        with pytest.raises(ValueError, match=name):
            sluice.Loader(ds, client=client, **kwargs)
    with pytest.raises(ValueError, match="s3://"):
        sluice.Dataset.from_uris(["bucket/key"])
    with pytest.raises(ValueError, match="backend"):
        sluice.Loader(ds, client=client, backend="hyper")


def test_errors_raise_or_are_delivered(server, client, prefix):
    uris = server.fill(prefix, 3, 100)
    missing = f"s3://{server.bucket}/{prefix}missing"
    ds = sluice.Dataset.from_uris([uris[0], missing, uris[1]])
    with pytest.raises(FileNotFoundError, match=missing):
        for _ in sluice.Loader(ds, order="input", client=client):
            pass
    l = sluice.Loader(ds, order="input", on_error="deliver", client=client)
    assert next(l).uri == uris[0]
    with pytest.raises(FileNotFoundError, match=missing):
        next(l)
    assert next(l).uri == uris[1]


def test_a_batch_with_a_failure_loses_no_object(server, client, prefix):
    """collect_batch returns the objects before a failure, raises it on the next call, and
    returns the rest after: each object once (the fault soak found the rest dropped)."""
    uris = server.fill(prefix, 6, 1000)
    missing = f"s3://{server.bucket}/{prefix}missing"
    ds = sluice.Dataset.from_uris(uris[:2] + [missing] + uris[2:])
    l = sluice.Loader(ds, order="input", on_error="deliver", client=client)
    first = l.collect_batch(5)
    assert [o.uri for o in first] == uris[:2]
    with pytest.raises(FileNotFoundError, match=missing):
        l.collect_batch(5)
    rest = l.collect_batch(5)
    assert [o.uri for o in rest] == uris[2:]
    assert all(bytes(o) == pattern(o.uri.split("/", 3)[3], 1000) for o in first + rest)
    assert l.collect_batch(5) == []
    # A failure first in a batch raises at once; next() takes what is held, in order.
    l = sluice.Loader(
        sluice.Dataset.from_uris([missing] + uris[:3]),
        order="input",
        on_error="deliver",
        client=client,
    )
    with pytest.raises(FileNotFoundError):
        l.collect_batch(2)
    assert next(l).uri == uris[0]
    assert [o.uri for o in l.collect_batch(5)] == uris[1:3]


def test_dataset_pickles_with_sizes(server, client, prefix):
    server.fill(prefix, 3, 100)
    ds = sluice.Dataset.from_prefix(f"s3://{server.bucket}/{prefix}", client=client)
    back = pickle.loads(pickle.dumps(ds))
    assert back.uris == ds.uris
    gets = server.gets
    assert sum(len(o) for o in sluice.Loader(back, client=client)) == 300
    assert server.gets - gets == 3, "sizes survived pickling: one plain GET each"


def test_dataset_indexes_and_refuses_a_corrupt_pickle():
    uris = [f"s3://bkt/k{i}" for i in range(5)] + ["file:///data/x"]
    ds = sluice.Dataset.from_uris(uris)
    assert [ds[i] for i in range(len(ds))] == uris and ds[-1] == "file:///data/x"
    with pytest.raises(IndexError, match="6 out of range for 6"):
        ds[6]
    back = pickle.loads(pickle.dumps(ds))
    assert back.uris == uris
    with pytest.raises(ValueError, match="Dataset pickle.*truncated"):
        sluice.Dataset._from_pickle(ds.__reduce__()[1][0][:10])


def _read_shard(args):
    endpoint, uris, worker, workers = args
    import sluice as s
    from sluice.testing import pattern as p

    client = s.Client(endpoint=endpoint)
    out = []
    for o in s.Loader(
        s.Dataset.from_uris(uris), worker_id=worker, num_workers=workers, client=client
    ):
        assert bytes(o) == p(o.uri.split("/", 3)[3], len(o))
        out.append(o.uri)
    # The module-level default client works in the worker too.
    assert s.exists(uris[0])
    return out


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_processes(server, client, prefix, method):
    uris = server.fill(prefix, 9, 50_000)
    # Use the runtime and default client in the parent first: a forked child must rebuild both.
    assert len(list(sluice.Loader(sluice.Dataset.from_uris(uris[:2]), client=client))) == 2
    assert sluice.exists(uris[0])
    ctx = mp.get_context(method)
    with ctx.Pool(3) as pool:
        shards = pool.map(_read_shard, [(server.endpoint, uris, w, 3) for w in range(3)])
    assert sorted(u for s in shards for u in s) == uris
    assert all(len(s) == 3 for s in shards)


def test_a_loader_from_the_parent_fails_clearly_in_a_fork(server, client, prefix):
    uris = server.fill(prefix, 2, 100)
    loader = sluice.Loader(sluice.Dataset.from_uris(uris), client=client)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_use_inherited, args=(loader, q))
    p.start()
    msg = q.get(timeout=30)
    p.join(timeout=30)
    assert "cannot be used after fork" in msg
    # Objects a batch held back (after a failure) are the parent's too: refused the same way.
    missing = f"s3://{server.bucket}/{prefix}missing"
    loader = sluice.Loader(
        sluice.Dataset.from_uris([uris[0], missing, uris[1]]),
        order="input",
        on_error="deliver",
        client=client,
    )
    assert [o.uri for o in loader.collect_batch(3)] == uris[:1]
    p = ctx.Process(target=_use_inherited, args=(loader, q))
    p.start()
    msg = q.get(timeout=30)
    p.join(timeout=30)
    assert "cannot be used after fork" in msg


def _use_inherited(loader, q):
    try:
        next(loader)
        q.put("no error")
    except RuntimeError as e:
        q.put(str(e))


def test_a_second_epoch_reuses_the_first_epochs_memory(server, client, prefix):
    import numpy as np

    uris = server.fill(prefix, 3, 1 << 20)
    ds = sluice.Dataset.from_uris(uris)

    def addresses(loader):
        # Every object is kept until the epoch ends, so that an epoch holds a buffer per
        # object: one dropped mid-epoch lets the loader reuse its buffer within the epoch,
        # and a second epoch fetching more at once then needs one the first never had.
        # On return every object (and view) is dropped: the buffers go back to the pool.
        objects = list(loader)
        return {np.frombuffer(o, dtype=np.uint8).__array_interface__["data"][0] for o in objects}

    # Loaders of one window share the process's pool: a window no other test uses (its
    # budget), so that buffers other tests return meanwhile cannot take part.
    def loader(budget, **kw):
        return sluice.Loader(ds, prefetch=5, client=client, memory_budget=budget, **kw)

    first = addresses(loader(123_456_789, range_threshold=2**64 - 1))
    second = addresses(loader(123_456_789, range_threshold=2**64 - 1))
    assert second <= first, "the second loader read into the first one's buffers"
    # The same with sizes unknown and ranges on: the first ranged GET reads into a pooled buffer too.
    first = addresses(loader(123_456_790))
    second = addresses(loader(123_456_790))
    assert second <= first


def test_buffer_pools_show_what_a_window_keeps_and_what_objects_hold(server, client, prefix):
    uris = server.fill(prefix, 4, 1 << 20)
    ds = sluice.Dataset.from_uris(uris)
    # A window no other test uses (its budget), so the pool is this test's alone.
    name = "loader window 259, budget 98765432 B"  # prefetch 3 + 256 requests

    def pool():
        [p] = [p for p in sluice.buffer_pools() if p["pool"] == name]
        return p

    objects = list(sluice.Loader(ds, prefetch=3, client=client, memory_budget=98_765_432))
    held = pool()
    assert held["held_bytes"] == 4 << 20, held
    assert held["peak_held_bytes"] >= 4 << 20, held
    assert held["idle_cap_bytes"] == 98_765_432, held
    del objects
    idle = pool()
    assert idle["held_bytes"] == 0, idle
    # Every buffer came back to be reused: 4 of at least 1 MiB each.
    assert idle["idle_buffers"] == 4 and idle["idle_bytes"] >= 4 << 20, idle
    # One-call reads have a pool of their own, capped at 128 MiB idle.
    client.get_many(uris[:2])
    [many] = [p for p in sluice.buffer_pools() if p["pool"] == "get/get_many"]
    assert many["idle_cap_bytes"] == 128 << 20 and many["held_bytes"] == 0, many


def test_ctrl_c_interrupts_a_stalled_wait(prefix):
    import _thread
    import signal
    import threading
    import time

    # A shell starting the suite in the background (`cmd &`) starts Python with SIGINT
    # ignored, and then Ctrl-C (interrupt_main) raises nothing: this test failed in every
    # such run and never in the foreground. Python's own handler for the test's duration.
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_interrupts_a_stalled_wait(prefix, _thread, threading, time)
    finally:
        signal.signal(signal.SIGINT, old)


def _ctrl_c_interrupts_a_stalled_wait(prefix, _thread, threading, time):
    # A server of its own: no other test's traffic can take its injected stalls.
    with sluice.testing.TestServer() as server, sluice.testing.environment(server):
        client = sluice.Client(max_attempts=3)
        uris = server.fill(prefix, 1, 100_000)
        server.inject("stall", count=3, after_bytes=0, seconds=8.0)
        loader = sluice.Loader(sluice.Dataset.from_uris(uris), client=client)
        threading.Timer(0.3, _thread.interrupt_main).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            next(loader)
        # The stall lasts 8 s; the interrupt is seen within the 100 ms signal check.
        assert time.monotonic() - t0 < 4
        loader.close()
        server.clear_faults()
        # The same for a single call.
        server.inject("stall", count=3, after_bytes=0, seconds=8.0)
        threading.Timer(0.3, _thread.interrupt_main).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.get(uris[0])
        assert time.monotonic() - t0 < 4
        server.clear_faults()
