"""``sluice.open``: objects as binary files, over real sockets to the test server."""

import io
import os
import random
import time

import pytest
import sluice
from sluice.testing import pattern

SIZES = [0, 1, (5 << 20) - 1, 5 << 20, (5 << 20) + 1, 100 << 20]


def uri(server, prefix, name):
    return f"s3://{server.bucket}/{prefix}{name}"


@pytest.mark.parametrize("size", SIZES, ids=lambda n: f"{n}B")
def test_write_then_read_every_size_class(server, client, prefix, size):
    u = uri(server, prefix, "obj")
    data = pattern(u, size)
    with sluice.open(u, "wb", client=client, part_size=5 << 20) as f:
        # Written in uneven pieces, as a library writing a file would.
        for at in range(0, size, 777_777):
            assert f.write(data[at : at + 777_777]) == len(data[at : at + 777_777])
        assert f.tell() == size
    assert f.result["total_bytes"] == size
    with sluice.open(u, "rb", client=client) as r:
        assert r.size == size and r.seekable() and r.readable()
        assert r.read() == data
        assert r.read() == b"" and r.tell() == size
    assert client.get(u).to_bytes() == data


def test_seeks_and_reads_match_the_local_copy(server, client, prefix):
    u = uri(server, prefix, "seek")
    size = 3_000_001
    data = pattern(u, size)
    client.put(u, data)
    local = io.BytesIO(data)
    rng = random.Random(7)
    with sluice.open(u, "rb", client=client) as r:
        for _ in range(300):
            how = rng.choice(["set", "cur", "end", "read", "readinto", "read1", "past"])
            if how == "set":
                at = rng.randrange(size + 1)
                assert r.seek(at) == local.seek(at)
            elif how == "cur":
                off = rng.randrange(-min(local.tell(), 5000), 5000)
                assert r.seek(off, io.SEEK_CUR) == local.seek(off, io.SEEK_CUR)
            elif how == "end":
                off = -rng.randrange(min(size, 100_000) + 1)
                assert r.seek(off, io.SEEK_END) == local.seek(off, io.SEEK_END)
            elif how == "read":
                n = rng.choice([0, 1, 100, 65_536, 1_500_000, -1])
                assert r.read(n) == local.read(n)
            elif how == "readinto":
                a, b = bytearray(rng.randrange(1, 200_000)), bytearray(0)
                b = bytearray(len(a))
                assert r.readinto(a) == local.readinto(b)
                assert a == b
            elif how == "read1":
                got = r.read1(50_000)
                assert got == local.read(len(got))
                assert got or local.tell() >= size
            else:  # past the end: empty, as a file
                r.seek(size + 10)
                local.seek(size + 10)
                assert r.read(5) == local.read(5) == b""
            assert r.tell() == local.tell()
    with pytest.raises(ValueError, match="closed"):
        r.read(1)


def test_read_ahead_grows_on_sequential_reads_and_restarts_on_a_seek(server, client, prefix):
    u = uri(server, prefix, "ahead")
    client.put(u, pattern(u, 20 << 20))
    r = sluice.open(u, "rb", client=client)
    first = server.gets
    while r.read(64 << 10):
        pass
    sequential = server.gets - first
    # Doubling from 1 MiB: 1+2+4+8+... covers 20 MiB in a handful of GETs, not 320.
    assert sequential <= 6, sequential
    r.seek(0)
    assert r.read(10) == pattern(u, 10)
    r.close()


def test_a_sequential_read_fetches_the_next_window_while_this_one_is_read(server, client, prefix):
    u = uri(server, prefix, "overlap")
    data = pattern(u, 20 << 20)
    client.put(u, data)
    with sluice.open(u, "rb", client=client) as r:
        first = server.gets
        got = r.read(1 << 20)  # the first window: 1 MiB, nothing fetched ahead yet
        got += r.read(1)  # reads follow each other: the next window, and the one after it
        deadline = time.monotonic() + 10
        while server.gets - first < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        # The third GET went out while the caller was not reading.
        assert server.gets - first == 3
        got += r.read()
        assert got == data
        assert server.gets - first <= 6
    # A seek elsewhere drops what was fetched ahead: the bytes are the object's still.
    with sluice.open(u, "rb", client=client) as r:
        r.read(1 << 20)
        r.read(1 << 20)
        r.seek(15 << 20)
        assert r.read(1 << 20) == data[15 << 20 : 16 << 20]
        r.seek(0)
        assert r.read(3 << 20) == data[: 3 << 20]


def test_a_reader_skipping_a_few_bytes_still_reads_ahead(server, client, prefix):
    # torch.load's pattern: a record's data, then a seek a few bytes on to the next header.
    u = uri(server, prefix, "skips")
    data = pattern(u, 20 << 20)
    client.put(u, data)
    with sluice.open(u, "rb", client=client) as r:
        first = server.gets
        at = 0
        while at < len(data):
            assert r.read(1 << 20) == data[at : at + (1 << 20)]
            at = r.seek(r.tell() + 16)
        # Restarting at 1 MiB after every skip would take 20 GETs.
        assert server.gets - first <= 6, server.gets - first


def test_a_long_sequential_read_fetches_its_windows_as_parallel_ranges(server, client, prefix):
    # One GET per window is one connection: ~90 MB/s against S3 however large the window.
    # Windows of 32 MiB and more are read as ranges (4 to 8 MiB) of the version opened.
    u = uri(server, prefix, "long")
    data = pattern(u, 80 << 20)
    client.put(u, data)
    got = bytearray()
    buf = bytearray(32 << 20)
    with sluice.open(u, "rb", client=client) as r:
        first = server.gets
        while n := r.readinto(buf):
            got += buf[:n]
        gets = server.gets - first
    assert got == data
    # Windows of 32, 32 and 16 MiB: 3 GETs as whole windows; the two of 32 MiB in 8 MiB
    # ranges make 9.
    assert gets >= 8, gets


def test_a_reader_opened_before_a_fork_reads_in_the_child(server, client, prefix):
    # The parent's background fetch thread does not exist in a forked child: waiting on
    # what it was given would hang.
    u = uri(server, prefix, "forked")
    data = pattern(u, 12 << 20)
    client.put(u, data)
    # The default client, which a forked child may go on using (an explicit Client may not).
    r = sluice.open(u, "rb")
    head = r.read(1 << 20) + r.read(1 << 20)  # in order: the next window is being fetched
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if head + r.read() == data else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert head + r.read() == data
    r.close()


def test_an_object_replaced_while_open_is_an_error_not_two_versions(server, client, prefix):
    u = uri(server, prefix, "replaced")
    client.put(u, pattern(u, 4 << 20))
    with sluice.open(u, "rb", client=client) as r:
        r.read(10)
        client.put(u, bytes(4 << 20))  # another version, same size
        r.seek(3 << 20)
        with pytest.raises(sluice.S3Error, match="changed"):
            r.read(10)


def test_a_failed_write_leaves_nothing(server, client, prefix):
    u = uri(server, prefix, "never")
    with pytest.raises(RuntimeError, match="boom"):
        with sluice.open(u, "wb", client=client, part_size=5 << 20) as f:
            f.write(bytes(6 << 20))  # a part is already uploaded
            raise RuntimeError("boom")
    assert not client.exists(u)
    assert f.closed
    with pytest.raises(ValueError, match="closed"):
        f.write(b"x")


def test_bad_modes_and_missing_objects_are_named(server, client, prefix):
    u = uri(server, prefix, "nothing-here")
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        sluice.open(u, "rb", client=client)
    for mode in ("r", "w", "ab", "r+b", "xt"):
        with pytest.raises(ValueError, match="mode"):
            sluice.open(u, mode, client=client)
    with pytest.raises(ValueError, match="part_size"):
        sluice.open(u, "rb", part_size=1 << 20)


def test_exclusive_creation_and_conditional_puts(server, client, prefix):
    u = uri(server, prefix, "ckpt")
    with sluice.open(u, "xb", client=client) as f:
        f.write(b"first")
    with pytest.raises(FileExistsError, match="ckpt"):
        sluice.open(u, "xb", client=client)
    # A writer that lost the race after opening: the store refuses it at close.
    w = sluice.open(uri(server, prefix, "race"), "xb", client=client)
    client.put(uri(server, prefix, "race"), b"the other writer")
    w.write(b"mine")
    with pytest.raises(FileExistsError, match="race"):
        w.close()
    assert bytes(client.get(uri(server, prefix, "race"))) == b"the other writer"
    with pytest.raises(FileExistsError, match="ckpt"):
        client.put(u, b"again", mode="create")
    etag = client.stat(u)["etag"]
    client.put(u, b"second", if_match=etag)
    with pytest.raises(sluice.S3Error) as stale:
        client.put(u, b"third", if_match=etag)
    assert stale.value.status == 412 and stale.value.code == "PreconditionFailed"
    assert bytes(client.get(u)) == b"second"
    with pytest.raises(ValueError, match="if_match"):
        client.put(u, b"x", mode="create", if_match=etag)
    with pytest.raises(ValueError, match="mode"):
        client.put(u, b"x", mode="append")
    with pytest.raises(ValueError, match="appended"):
        sluice.open(u, "ab", client=client)


def test_the_default_client_and_numpy_load(server, prefix):
    np = pytest.importorskip("numpy")
    u = uri(server, prefix, "arr.npy")
    arr = np.arange(100_000, dtype=np.float32).reshape(100, 1000)
    with sluice.open(u, "wb") as f:  # the process's client, from the environment
        np.save(f, arr)
    with sluice.open(u, "rb") as f:
        assert np.array_equal(np.load(f), arr)


def test_pil_opens_an_image_object(server, client, prefix):
    Image = pytest.importorskip("PIL.Image")
    u = uri(server, prefix, "img.png")
    img = Image.new("RGB", (640, 480))
    img.putdata([(x % 256, y % 256, (x * y) % 256) for y in range(480) for x in range(640)])
    with sluice.open(u, "wb", client=client) as f:
        img.save(f, format="PNG")
    with sluice.open(u, "rb", client=client) as f:
        back = Image.open(f)
        back.load()
    assert back.size == (640, 480) and back.tobytes() == img.tobytes()


def test_h5py_reads_datasets_from_an_object(server, client, prefix):
    h5py = pytest.importorskip("h5py")
    np = pytest.importorskip("numpy")
    u = uri(server, prefix, "data.h5")
    arr = np.arange(3_000_000, dtype=np.int64).reshape(3000, 1000)
    local = io.BytesIO()
    with h5py.File(local, "w") as h:
        h.create_dataset("x", data=arr, chunks=(100, 1000))
        h.attrs["name"] = "unet"
    client.put(u, local.getvalue())
    # h5py seeks to the superblock, the B-tree and the chunks it needs: ranged reads.
    with sluice.open(u, "rb", client=client) as f, h5py.File(f, "r") as h:
        assert h.attrs["name"] == "unet"
        assert np.array_equal(h["x"][1234], arr[1234])
        assert np.array_equal(h["x"][:], arr)


def test_pyarrow_reads_a_parquet_object(server, client, prefix):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    u = uri(server, prefix, "t.parquet")
    table = pa.table({"a": list(range(200_000)), "b": [str(i) for i in range(200_000)]})
    with sluice.open(u, "wb", client=client) as f:
        pq.write_table(table, f, row_group_size=50_000)
    with sluice.open(u, "rb", client=client) as f:
        assert pq.read_table(f, columns=["b"]).column("b") == table.column("b")


def test_torch_save_and_load_round_trip(server, client, prefix):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import sluice.torch as st

    u = uri(server, prefix, "ckpt.pt")
    state = {"w": torch.randn(256, 1024), "step": 7, "names": ["a", "b"]}
    st.save(state, u, client=client)
    back = st.load(u, map_location="cpu", client=client, weights_only=True)
    assert back["step"] == 7 and back["names"] == ["a", "b"]
    assert torch.equal(back["w"], state["w"])


def test_torch_save_leaves_record_crcs_out_only_when_asked(server, client, prefix):
    import io
    import zipfile

    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not hasattr(torch.serialization, "set_crc32_options"):
        pytest.skip("this torch always writes the records' CRC-32")
    import sluice.torch as st

    state = {"w": torch.arange(100_000, dtype=torch.float32)}
    setting = torch.serialization.get_crc32_options()
    for crc32 in (None, False, True):
        u = uri(server, prefix, f"crc-{crc32}.pt")
        kw = {} if crc32 is None else {"crc32": crc32}
        st.save(state, u, client=client, **kw)
        assert torch.serialization.get_crc32_options() == setting, "torch's setting put back"
        with zipfile.ZipFile(io.BytesIO(client.get(u))) as z:
            crcs = [i.CRC for i in z.infolist() if i.file_size]
            if crc32 is False:
                assert all(c == 0 for c in crcs), crcs
            else:
                assert all(c != 0 for c in crcs), crcs
                assert z.testzip() is None, "every record's CRC-32 is right"
        back = st.load(u, client=client, weights_only=True)
        assert torch.equal(back["w"], state["w"]), crc32


def test_a_writer_dropped_unclosed_publishes_nothing(server, client, prefix):
    import gc

    u = uri(server, prefix, "dropped")
    f = sluice.open(u, "wb", client=client, part_size=5 << 20)
    f.write(bytes(6 << 20))  # a part is already uploaded
    del f
    gc.collect()
    assert not client.exists(u)
