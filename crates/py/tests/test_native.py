"""The native API against the test server: every call, every backend, errors."""

import ctypes
import gc
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest
import sluice
from sluice.testing import pattern


def test_importing_sluice_does_not_import_torch():
    code = "import sys, sluice, sluice.compat.s3dlio, sluice.testing; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("backend", sluice.backends)
@pytest.mark.parametrize("https", [False, True])
def test_get_every_backend_and_scheme(server, prefix, backend, https):
    uris = server.fill(prefix, 2, 300_000)
    ep = server.https_endpoint if https else server.endpoint
    c = sluice.Client(backend=backend, endpoint=ep, ca_bundle=server.ca_bundle)
    assert c.backend == backend
    for u in uris:
        obj = c.get(u)
        assert obj.uri == u and len(obj) == 300_000 and obj.byte_count == 300_000
        assert bytes(obj) == pattern(u.split("/", 3)[3], 300_000)


def test_ranges_many_list_stat_exists_put_delete(server, client, prefix):
    uris = server.fill(prefix, 5, 10_000)
    key0 = uris[0].split("/", 3)[3]
    full = pattern(key0, 10_000)
    assert bytes(client.get_range(uris[0], 100, 50)) == full[100:150]
    assert bytes(client.get_range(uris[0], 9_990)) == full[9_990:]
    assert len(client.get_range(uris[0], 5, 0)) == 0

    many = client.get_many(list(reversed(uris)), max_in_flight=2)
    assert [o.uri for o in many] == list(reversed(uris))
    assert all(bytes(o) == pattern(o.uri.split("/", 3)[3], 10_000) for o in many)

    base = f"s3://{server.bucket}/{prefix}"
    assert client.list(base, recursive=True) == uris
    server.insert(prefix + "sub/x.bin", b"x")
    assert sorted(client.list(base)) == sorted(uris + [base + "sub/"])
    assert len(client.list(base, recursive=True)) == 6

    st = client.stat(uris[1])
    assert st["size"] == 10_000 and st["uri"] == uris[1]
    assert st["etag"].strip('"') and st["last_modified"] > 1.6e9

    new = base + "new.bin"
    assert not client.exists(new)
    data = np.arange(1000, dtype=np.uint32)
    assert client.put(new, data)  # any buffer; returns the ETag
    assert client.exists(new)
    assert bytes(client.get(new)) == data.tobytes()
    client.delete(new)
    assert not client.exists(new)
    client.delete(new)  # idempotent, as on S3


def test_module_level_functions_use_the_environment(server, prefix):
    uris = server.fill(prefix, 2, 1000)
    assert bytes(sluice.get(uris[0])) == pattern(uris[0].split("/", 3)[3], 1000)
    assert bytes(sluice.get_range(uris[0], 10, 10)) == bytes(sluice.get(uris[0]))[10:20]
    assert [o.uri for o in sluice.get_many(uris)] == uris
    assert sluice.list(f"s3://{server.bucket}/{prefix}") == uris
    assert sluice.stat(uris[1])["size"] == 1000
    assert sluice.exists(uris[1])
    u = f"s3://{server.bucket}/{prefix}put"
    sluice.put(u, b"hello")
    assert bytes(sluice.get(u)) == b"hello"
    sluice.delete(u)
    assert not sluice.exists(u)


def test_errors_are_python_exceptions_naming_the_uri(server, client, prefix, monkeypatch):
    missing = f"s3://{server.bucket}/{prefix}absent"
    with pytest.raises(FileNotFoundError, match=missing):
        client.get(missing)
    with pytest.raises(FileNotFoundError, match=missing):
        client.stat(missing)
    with pytest.raises(ValueError, match="http://nope"):
        client.get("http://nope/x")
    with pytest.raises(ValueError, match="max_in_flight"):
        client.get_many([missing], max_in_flight=0)
    with pytest.raises(ValueError, match="bytes-like"):
        client.put(missing, 12)
    with pytest.raises(ValueError, match="endpoint"):
        sluice.Client(endpoint="not a url")
    with pytest.raises(ValueError, match="nosuch"):
        sluice.Client(backend="nosuch")

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    bad = sluice.Client(endpoint=server.endpoint)
    (uri,) = server.fill(prefix, 1, 10)
    with pytest.raises(PermissionError, match=uri):
        bad.get(uri)
    monkeypatch.undo()

    server.inject("slowdown", count=10)
    try:
        with pytest.raises(sluice.S3Error) as e:
            sluice.Client(endpoint=server.endpoint, max_attempts=2).get(uri)
        assert e.value.status == 503 and e.value.code == "SlowDown" and e.value.uri == uri
        assert isinstance(e.value, OSError)
    finally:
        server.clear_faults()

    monkeypatch.setenv("SLUICE_STALL_TIMEOUT", "300ms")
    (big,) = server.fill(prefix + "big/", 1, 100_000)
    server.inject("stall", count=10, after_bytes=10, seconds=3.0)
    try:
        with pytest.raises(TimeoutError, match=big):
            sluice.Client(endpoint=server.endpoint, max_attempts=2).get(big)
    finally:
        server.clear_faults()


def test_faults_are_retried_and_bytes_stay_right(server, client, prefix):
    (uri,) = server.fill(prefix, 1, 2_000_000)
    server.inject("reset", count=2, after_bytes=500_000)
    try:
        assert bytes(client.get(uri)) == pattern(uri.split("/", 3)[3], 2_000_000)
    finally:
        server.clear_faults()


def test_zero_copy_buffer(server, client, prefix):
    (uri,) = server.fill(prefix, 1, 16 << 20)
    obj = client.get(uri)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        views = [memoryview(obj) for _ in range(4)]
        arrays = [np.frombuffer(obj, dtype=np.uint8) for _ in range(4)]
        after = tracemalloc.take_snapshot()
        grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
        assert grown < 1 << 20, f"{grown} bytes allocated: something copied the object"
        copied = bytes(obj)
        after_copy = tracemalloc.take_snapshot()
        grown = sum(s.size_diff for s in after_copy.compare_to(after, "filename"))
        assert grown >= 16 << 20, "tracemalloc sees a real copy (so it would see one above)"
    finally:
        tracemalloc.stop()
    addrs = {a.__array_interface__["data"][0] for a in arrays}
    assert len(addrs) == 1, "every view is over the same memory"
    assert all(v.readonly and v.nbytes == 16 << 20 for v in views)
    assert arrays[0][:8].tobytes() == copied[:8]
    assert not arrays[0].flags.writeable
    with pytest.raises(TypeError, match="not writable"):
        ctypes.c_char.from_buffer(obj)  # asks for a writable buffer
    with pytest.raises(TypeError, match="read-only"):
        memoryview(obj)[0] = 1
    del views, arrays


def test_gil_is_released_while_waiting(server, client, prefix):
    (uri,) = server.fill(prefix, 1, 1000)
    server.inject("latency", count=1, seconds=0.5)
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    try:
        client.get(uri)
    finally:
        stop.set()
        t.join()
        server.clear_faults()
    # 0.5 s of waiting: a thread that holds the GIL would leave the counter near zero.
    assert ticks > 50, ticks


def test_objects_outlive_the_loader(server, client, prefix):
    uris = server.fill(prefix, 4, 100_000)
    loader = sluice.Loader(sluice.Dataset.from_uris(uris), prefetch=2, client=client)
    kept = [next(loader), next(loader)]
    loader.close()
    del loader
    gc.collect()
    for o in kept:
        assert bytes(memoryview(o)) == pattern(o.uri.split("/", 3)[3], 100_000)


@pytest.mark.parametrize("backend", sluice.backends)
def test_endpoints_spread_and_go_around_one_that_refuses(server, prefix, backend):
    import socket

    uris = server.fill(prefix, 6, 50_000)
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % s.getsockname()[1]
    c = sluice.Client(backend=backend, endpoints=[dead, server.endpoint], max_attempts=3)
    for _ in range(2):
        objs = c.get_many(uris, max_in_flight=4)
        assert [bytes(o) for o in objs] == [pattern(u.split("/", 3)[3], 50_000) for u in uris]
    stats = c.endpoint_stats()
    assert [e["url"].rstrip("/") for e in stats] == [dead, server.endpoint]
    assert set(stats[0]) == set(sluice.EndpointStats.__annotations__)
    assert stats[0]["failures"] >= 1 and stats[0]["bytes_read"] == 0
    assert stats[1]["bytes_read"] == 2 * 6 * 50_000 and stats[1]["failures"] == 0
    # A loader's stats carry its client's counters.
    with sluice.Loader(sluice.Dataset.from_uris(uris), client=c) as loader:
        assert sum(len(o) for o in loader) == 6 * 50_000
        per = loader.stats()["endpoints"]
    assert [e["url"] for e in per] == [e["url"] for e in stats]
    assert per[1]["bytes_read"] == 3 * 6 * 50_000 and per[0]["bytes_read"] == 0
    assert sluice.Client(endpoint=server.endpoint).endpoint_stats() == []
    with pytest.raises(ValueError, match="endpoints"):
        sluice.Client(endpoints=["", " "])


def test_what_is_sent_is_what_was_passed_whatever_the_caller_changes_after(server, client, prefix):
    # `bytes` are shared with the upload (immutable); a bytearray or numpy array is copied,
    # since its owner may change it as soon as the call returns.
    base = f"s3://{server.bucket}/{prefix}"
    data = pattern(base + "a", 12 << 20)
    client.put(base + "a", data)
    assert client.get(base + "a").to_bytes() == data
    w = client.writer(base + "b", part_size=5 << 20)
    mutable = bytearray(data)
    for at in range(0, len(mutable), 3 << 20):
        piece = memoryview(mutable)[at : at + (3 << 20)]
        w.write(piece)
        piece[:] = bytes(len(piece))  # reused at once, as a serializer reuses its buffer
    w.close()
    assert client.get(base + "b").to_bytes() == data
