"""sluice.compat.s3dlio, driven as the MLPerf Storage benchmark (DLIO) drives s3dlio."""

import io
import os
import pickle
import subprocess
import sys
import textwrap
import time
import zipfile
import zlib

import numpy as np
import pytest
from sluice.compat import s3dlio
from sluice.testing import pattern


def test_the_dlio_loop_exactly(server, prefix):
    uris = server.fill(prefix, 17, 123_457)
    total = 0
    it = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), {"prefetch": 4}).items()
    while batch := it.collect_batch(7):
        total += sum(len(b) for b in batch)
    assert total == 17 * 123_457


def test_the_dlio_loop_and_the_loader_send_one_get_per_object_and_no_head(server, prefix):
    # DLIO names its objects (file lists, skip_listing): nothing but the GET may be sent.
    import sluice

    uris = server.fill(prefix, 500, 4096)
    for read in (
        lambda: s3dlio.PyBytesAsyncDataLoader(
            s3dlio.PyDataset.from_uris(uris), {"prefetch": 16}
        ).items(),
        lambda: sluice.Loader(sluice.Dataset.from_uris(uris)),
    ):
        gets, heads = server.gets, server.heads
        assert sum(len(o) for o in read()) == 500 * 4096
        assert server.heads - heads == 0
        assert server.gets - gets == 500


def test_items_behave_like_s3dlio_items(server, prefix):
    uris = server.fill(prefix, 3, 1000)
    opts = {"prefetch": 2, "skip_head": True, "some_future_option": 1}
    items = list(s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), opts).items())
    assert sorted(i.uri for i in items) == uris
    for i in items:
        assert i.byte_count == len(i) == 1000
        assert bytes(i) == pattern(i.uri.split("/", 3)[3], 1000)
        assert np.frombuffer(i, dtype=np.uint8).nbytes == 1000


def test_get_get_range_and_get_many(server, prefix):
    uris = server.fill(prefix, 3, 5000)
    key0 = uris[0].split("/", 3)[3]
    obj = s3dlio.get(uris[0])
    assert bytes(obj) == obj.to_bytes() == pattern(key0, 5000)
    assert obj.memoryview().readonly and obj.memoryview().nbytes == 5000
    assert len(s3dlio.get_range(uris[0], 4000)) == 1000
    assert bytes(s3dlio.get_range(uris[0], offset=10, length=10)) == pattern(key0, 20)[10:]
    gets = server.gets
    empty = s3dlio.get_range(uris[0], 4000, 0)
    assert len(empty) == 0 and isinstance(empty, s3dlio.BytesView), "length 0: no bytes (0.10)"
    assert server.gets == gets, "and no request"
    pairs = s3dlio.get_many(list(reversed(uris)), max_in_flight=2)
    assert [u for u, _ in pairs] == list(reversed(uris)), "(uri, data) in input order"
    for uri, data in pairs:
        assert bytes(data) == pattern(uri.split("/", 3)[3], 5000)


def test_list_follows_s3dlio_rules(server, prefix):
    base = f"s3://{server.bucket}/{prefix}"
    keys = ["dir", "dir/a", "dir/b", "dir/sub/c", "dir2/x", "dirx", "img_1.npz", "img_10.npz"]
    for key in keys:
        server.insert(prefix + key, b"abc")
    assert s3dlio.list(base, recursive=True) == sorted(base + k for k in keys)
    # Not recursive: sub-prefixes as URIs ending in "/".
    assert s3dlio.list(base) == [
        base + k for k in ["dir", "dir/", "dir2/", "dirx", "img_1.npz", "img_10.npz"]
    ]
    assert s3dlio.list(base + "dir/") == [base + k for k in ["dir/a", "dir/b", "dir/sub/"]]
    # No trailing slash (s3dlio 0.10): an exact name, the object and what lies below name/...
    assert s3dlio.list(base + "dir") == [base + "dir", base + "dir/"]
    assert s3dlio.list(base + "dir", recursive=True) == [
        base + k for k in ["dir", "dir/a", "dir/b", "dir/sub/c"]
    ]
    assert s3dlio.list(base + "dir/a") == [base + "dir/a"]
    # ...never a bare prefix...
    assert s3dlio.list(base + "di") == [] and s3dlio.list(base + "img_1") == []
    assert s3dlio.list(base + "dir/s", recursive=True) == []
    # ...or a glob over its directory: `*` within a level, `**` across.
    assert s3dlio.list(base + "dir*", recursive=True) == [base + "dir", base + "dirx"]
    assert s3dlio.list(base + "img_?.npz") == [base + "img_1.npz"]
    assert s3dlio.list(base + "dir/**") == [base + k for k in ["dir/a", "dir/b", "dir/sub/c"]]
    # pattern: searched in the URI relative to `uri`, so anchors work.
    assert s3dlio.list(base, recursive=True, pattern=r"^img_1") == [
        base + "img_1.npz",
        base + "img_10.npz",
    ]
    assert s3dlio.list(base, recursive=True, pattern=r"^dir/") == [
        base + k for k in ["dir/a", "dir/b", "dir/sub/c"]
    ]
    assert s3dlio.list(base + "nothing-here/") == []
    with pytest.raises(RuntimeError, match="regular expression|unterminated|missing"):
        s3dlio.list(base, pattern="[")


def test_version_and_mkdir_are_s3dlio_010s(server, prefix, tmp_path):
    assert s3dlio.__version__ == "0.10.0"
    before = server.requests
    assert s3dlio.mkdir(f"s3://{server.bucket}/{prefix}newdir/") is None
    assert server.requests == before, "no marker object on S3"
    s3dlio.mkdir(f"file://{tmp_path}/a/b")
    assert (tmp_path / "a" / "b").is_dir()
    with pytest.raises(RuntimeError, match="not-a-uri"):
        s3dlio.mkdir("not-a-uri")


def test_local_files_through_the_same_calls(tmp_path):
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "a.npz").write_bytes(b"A" * 10)
    (root / "sub" / "b.npz").write_bytes(b"B" * 20)
    for scheme in ("file://", "direct://"):
        base = f"{scheme}{root}"
        # A directory named without a trailing slash is listed whole, as s3dlio does.
        assert s3dlio.list(base, recursive=True) == [f"{base}/a.npz", f"{base}/sub/b.npz"]
        assert s3dlio.list(base + "/") == [f"{base}/a.npz", f"{base}/sub/"]
        assert bytes(s3dlio.get(f"{base}/sub/b.npz")) == b"B" * 20
        assert bytes(s3dlio.get_range(f"{base}/a.npz", 2, 3)) == b"AAA"
        assert [len(d) for _, d in s3dlio.get_many([f"{base}/a.npz", f"{base}/sub/b.npz"])] == [
            10,
            20,
        ]
        st = s3dlio.stat(f"{base}/a.npz")
        assert st["size"] == 10 and st["storage_class"] == "STANDARD"
    s3dlio.put_bytes(f"file://{root}/new/c.bin", b"xyz")
    assert (root / "new" / "c.bin").read_bytes() == b"xyz"
    assert s3dlio.exists(f"file://{root}/new/c.bin")
    s3dlio.delete(f"file://{root}/new/c.bin")
    assert not (root / "new" / "c.bin").exists()


def test_stat_has_s3dlios_keys(server, prefix):
    [uri] = server.fill(prefix, 1, 777)
    st = s3dlio.stat(uri)
    assert list(st) == [
        "size",
        "last_modified",
        "etag",
        "content_type",
        "content_language",
        "content_encoding",
        "cache_control",
        "content_disposition",
        "expires",
        "storage_class",
        "server_side_encryption",
        "ssekms_key_id",
        "sse_customer_algorithm",
        "version_id",
        "replication_status",
        "metadata",
    ]
    assert st["size"] == 777 and st["etag"] and st["metadata"] == {}
    assert st["last_modified"].endswith("Z") and "T" in st["last_modified"]


def test_exists_is_false_on_any_error(server, prefix):
    [uri] = server.fill(prefix, 1, 10)
    assert s3dlio.exists(uri)
    assert not s3dlio.exists(uri + "-missing")
    assert not s3dlio.exists("not a uri")
    assert not s3dlio.exists("gs://bucket/unsupported-scheme")


def test_delete_is_exact_unless_recursive(server, prefix):
    base = f"s3://{server.bucket}/{prefix}"
    for key in ["a.npz", "b.npz", "c.txt", "sub/d.npz", "sub2/e"]:
        server.insert(prefix + key, b"x")
    s3dlio.delete(base + "missing-is-fine")
    # Not recursive (s3dlio 0.10): exactly one key; `/`, `*` and `?` are part of it.
    s3dlio.delete(base + "*.npz")
    s3dlio.delete(base + "sub/")
    assert len(s3dlio.list(base, recursive=True)) == 5
    s3dlio.delete(base + "c.txt")
    assert base + "c.txt" not in s3dlio.list(base, recursive=True)
    # Recursive: a glob's matches within its directory...
    s3dlio.delete(base + "*.npz", recursive=True)
    assert s3dlio.list(base, recursive=True) == [base + "sub/d.npz", base + "sub2/e"]
    # ...a name and what lies below name/, not its sibling sub2/...
    s3dlio.delete(base + "sub", recursive=True)
    assert s3dlio.list(base, recursive=True) == [base + "sub2/e"]
    # ...a directory's contents.
    s3dlio.delete(base, recursive=True)
    assert s3dlio.list(base, recursive=True) == []


def test_errors_are_runtime_errors_that_keep_their_type(server, prefix):
    missing = f"s3://{server.bucket}/{prefix}missing"
    with pytest.raises(RuntimeError, match=missing) as caught:
        s3dlio.get(missing)
    assert isinstance(caught.value, FileNotFoundError)
    again = pickle.loads(pickle.dumps(caught.value))  # DataLoader workers send exceptions
    assert isinstance(again, FileNotFoundError) and isinstance(again, RuntimeError)
    with pytest.raises(RuntimeError) as caught:
        s3dlio.get("http://not-s3/x")
    assert isinstance(caught.value, ValueError) and "http://not-s3/x" in str(caught.value)
    server.inject("slowdown", count=50)
    try:
        with pytest.raises(RuntimeError) as caught:
            s3dlio.put_bytes(f"s3://{server.bucket}/{prefix}x", b"abc")
    finally:
        server.clear_faults()
    assert caught.value.status == 503 and caught.value.code == "SlowDown"


def test_multipart_writer_streams_parts_while_writing(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}ckpt"
    w = s3dlio.MultipartUploadWriter.from_uri(
        uri, part_size=5 << 20, max_in_flight=2, abort_on_drop=True
    )
    chunks = [os.urandom(3 << 20) for _ in range(7)]
    before = server.requests
    for c in chunks[:4]:
        assert w.write(memoryview(c)) == len(c)
    # write() hands full parts to the uploader and returns; the server counts a part when it
    # reaches the store (its 5 MiB body received and authenticated), so the parts in flight
    # get time to arrive — still before close (CI once counted only the create).
    deadline = time.monotonic() + 10
    while server.requests - before < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.requests - before >= 2, "parts uploaded before close (create + parts)"
    assert not s3dlio.exists(uri), "nothing visible before close"
    for c in chunks[4:]:
        # s3dlio 0.10's copy keyword; the buffer is reused at once, as a checkpointer does.
        buf = bytearray(c)
        w.write(buf, copy=False)
        buf[:] = bytes(len(buf))
    info = w.close()
    assert info["total_bytes"] == 21 << 20 and info["parts"] == 5 and info["etag"]
    assert info["completed_at"] >= info["started_at"]
    assert bytes(s3dlio.get(uri)) == b"".join(chunks)
    with pytest.raises(RuntimeError, match="finished"):
        w.write(b"x")
    w.abort()  # harmless after close


def test_multipart_writer_abort_reserve_commit_and_context(server, prefix):
    base = f"s3://{server.bucket}/{prefix}"
    w = s3dlio.MultipartUploadWriter.from_uri(base + "aborted", part_size=5 << 20)
    w.write(os.urandom(6 << 20))
    w.abort()
    assert not s3dlio.exists(base + "aborted")

    with pytest.raises(KeyError):
        with s3dlio.MultipartUploadWriter.from_uri(base + "raised") as w:
            w.write(b"partial")
            raise KeyError("producer failed")
    assert not s3dlio.exists(base + "raised"), "an exception in the block aborts"

    w = s3dlio.MultipartUploadWriter(server.bucket, prefix + "reserved")
    buf = w.reserve(10)
    buf[:4] = b"abcd"
    w.commit(4)
    with pytest.raises(ValueError):
        w.reserve(5)
        w.commit(6)
    w.close()
    assert bytes(s3dlio.get(base + "reserved")) == b"abcd"
    with pytest.raises(RuntimeError, match="part_size"):
        s3dlio.MultipartUploadWriter.from_uri(base + "tiny", part_size=1024)


def test_checkpoint_writers_for_every_scheme(server, prefix, tmp_path):
    opts = s3dlio.PyWriterOptions()
    opts.with_buffer_size(1 << 20)
    data = os.urandom(3 << 20)
    for create, uri in [
        (s3dlio.create_s3_writer, f"s3://{server.bucket}/{prefix}ckpt.pt"),
        (s3dlio.create_filesystem_writer, f"file://{tmp_path}/f/ckpt.pt"),
        (s3dlio.create_direct_filesystem_writer, f"direct://{tmp_path}/d/ckpt.pt"),
    ]:
        w = create(uri, opts)
        for off in range(0, len(data), 1 << 20):
            w.write_chunk(memoryview(data)[off : off + (1 << 20)])
        assert not s3dlio.exists(uri)
        assert w.finalize() == (len(data), len(data))
        assert w.bytes_written() == len(data)
        assert bytes(s3dlio.get(uri)) == data
        with pytest.raises(RuntimeError, match="finalized"):
            w.finalize()
    with pytest.raises(RuntimeError, match="create_filesystem_writer"):
        s3dlio.create_filesystem_writer(f"s3://{server.bucket}/x", None)
    with pytest.raises(RuntimeError, match="Unsupported compression type: gzip"):
        opts.with_compression("gzip", 3)
    with pytest.raises(RuntimeError, match="level"):
        opts.with_compression("zstd", 99)


def test_zstd_writers_write_one_frame_under_zst_names_as_s3dlio(server, prefix, tmp_path):
    zstandard = pytest.importorskip("zstandard")
    data = b"A" * (8 << 10) + os.urandom(1 << 20)
    opts = s3dlio.PyWriterOptions()
    opts.with_compression("ZSTD", None)  # the level defaults to 3, as s3dlio's
    assert opts.compression == 3
    for create, uri, stored in [
        (
            s3dlio.create_s3_writer,
            f"s3://{server.bucket}/{prefix}c.bin",
            f"s3://{server.bucket}/{prefix}c.bin.zst",
        ),
        (
            s3dlio.create_s3_writer,
            f"s3://{server.bucket}/{prefix}d.zst",
            f"s3://{server.bucket}/{prefix}d.zst",
        ),
        (
            s3dlio.create_filesystem_writer,
            f"file://{tmp_path}/e.zst",
            f"file://{tmp_path}/e.zst.zst",
        ),
    ]:
        w = create(uri, opts)
        for off in range(0, len(data), 100_000):
            w.write_chunk(data[off : off + 100_000])
        raw, packed = w.finalize()
        frame = bytes(s3dlio.get(stored))
        assert raw == len(data) == w.bytes_written() and packed == len(frame) < len(data)
        assert frame[:4] == b"\x28\xb5\x2f\xfd"
        assert zstandard.ZstdDecompressor().decompressobj().decompress(frame) == data


def test_generate_npz_bytes_has_exactly_the_shape_and_random_content():
    # DLIO passes the sample count inside the shape.
    data = s3dlio.generate_npz_bytes(shape=[300, 200, 1], dtype="|u1", num_samples=1)
    npz = np.load(io.BytesIO(data))
    assert npz["x"].shape == (300, 200, 1) and npz["x"].dtype == np.uint8
    assert npz["y"].shape == (1,) and npz["y"].dtype == np.int64 and not npz["y"].any()
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == ["x.npy", "y.npy"]
    raw = npz["x"].tobytes()
    assert len(zlib.compress(raw)) > 0.99 * len(raw), "incompressible, as s3dlio's"
    assert s3dlio.generate_npz_bytes([300, 200, 1], "|u1") == data, "the same every call"
    f4 = np.load(io.BytesIO(s3dlio.generate_npz_bytes((4, 5), dtype="<f4", num_samples=3)))
    assert f4["x"].shape == (4, 5) and f4["x"].dtype == np.float32 and f4["y"].shape == (3,)
    with pytest.raises(RuntimeError, match="dtype"):
        s3dlio.generate_npz_bytes((2,), dtype="float")


def _run(code: str, env: dict) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_s3dlio_variables_are_read_at_first_use_not_import(server, prefix):
    [uri] = server.fill(prefix, 1, 100)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("S3DLIO_", "SLUICE_"))}
    out = _run(
        f"""
        import os, threading
        from sluice.compat import s3dlio
        from sluice import _native
        os.environ["S3DLIO_RT_THREADS"] = "3"      # DLIO sets it after `import s3dlio`
        assert s3dlio.exists({uri!r})
        names = [open(f"/proc/self/task/{{t}}/comm").read().strip() for t in os.listdir("/proc/self/task")]
        print(names.count("sluice"), _native.set_runtime_threads(5))
    """,
        env,
    )
    want = max(3, os.cpu_count())  # raised to 3, never below one per CPU
    assert out.split() == [str(want), "False"], "the runtime cannot change once started"


def test_retry_attempts_and_range_variables(server, prefix, monkeypatch):
    [uri] = server.fill(prefix, 1, 3 << 20)
    monkeypatch.setenv("S3DLIO_MAX_RETRY_ATTEMPTS", "2")  # attempts in total, as s3dlio
    s3dlio._clients.clear()
    server.inject("slowdown", count=3)
    before = server.requests
    try:
        with pytest.raises(RuntimeError, match="SlowDown"):
            s3dlio.get(uri)
    finally:
        server.clear_faults()
    assert server.requests - before == 2
    monkeypatch.delenv("S3DLIO_MAX_RETRY_ATTEMPTS")
    s3dlio._clients.clear()

    ds = s3dlio.PyDataset.from_uris([uri])
    monkeypatch.setenv("S3DLIO_RANGE_THRESHOLD_MB", "1")
    monkeypatch.setenv("S3DLIO_CHUNK_SIZE", str(1 << 20))
    gets = server.gets
    assert (
        sum(len(o) for o in s3dlio.PyBytesAsyncDataLoader(ds, {"prefetch": 2}).items()) == 3 << 20
    )
    assert server.gets - gets == 3, "1 MiB ranges"
    for off in ("0", "false", "Off", "disabled"):
        monkeypatch.setenv("S3DLIO_ENABLE_RANGE_OPTIMIZATION", off)
        gets = server.gets
        assert sum(len(o) for o in s3dlio.PyBytesAsyncDataLoader(ds, {}).items()) == 3 << 20
        assert server.gets - gets == 1, f"range optimisation {off}: one GET"
    monkeypatch.setenv("S3DLIO_CHUNK_SIZE", "lots")
    with pytest.raises(RuntimeError, match="S3DLIO_CHUNK_SIZE"):
        s3dlio.PyBytesAsyncDataLoader(ds, {}).items()


def test_endpoint_precedence_is_s3dlios(server, prefix):
    [uri] = server.fill(prefix, 1, 10)
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9",
    }
    out = _run(
        f"""
        from sluice.compat import s3dlio
        print(len(s3dlio.get({uri!r})))
    """,
        env,
    )
    assert out.split() == ["10"], "AWS_ENDPOINT_URL wins through the compat module"


def test_old_invented_variable_names_are_gone():
    import glob

    import sluice.compat.s3dlio as mod

    # A package: every module of it.
    files = glob.glob(os.path.join(os.path.dirname(mod.__file__), "*.py"))
    assert len(files) > 1, files
    for path in files:
        src = open(path).read()
        assert "S3DLIO_MAX_RETRIES" not in src and "S3DLIO_TIMEOUT_SECS" not in src, path


def test_the_alias_serves_the_package_modules_once():
    """`import s3dlio.<submodule>` under the alias gets the module sluice already loaded, not
    a second copy with a client cache of its own."""
    code = (
        "from sluice.compat import alias; alias.install(); "
        "import s3dlio, s3dlio._config, sluice.compat.s3dlio as m, sluice.compat.s3dlio._config as c; "
        "print(s3dlio is m, s3dlio._config is c, s3dlio._clients is c._clients)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"], out.stdout + out.stderr


STAND_IN = (
    """raise ImportError("the real s3dlio was imported: the alias did not reach this process")\n"""
)


def _stand_in(tmp_path):
    """A package named s3dlio that fails on import, first on PYTHONPATH: any process the
    alias does not reach imports it and fails."""
    d = tmp_path / "stand_in"
    (d / "s3dlio").mkdir(parents=True)
    (d / "s3dlio" / "__init__.py").write_text(STAND_IN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(d), os.environ.get("PYTHONPATH", "")])}
    return env


def test_the_alias_runs_a_command_as_python_c_does(tmp_path):
    """`-c COMMAND ARGS`: the command sees s3dlio served by sluice, sys.argv as `python -c`
    gives it, and its arguments; a child it starts is reached too."""
    code = (
        "import s3dlio, subprocess, sys; "
        "print(s3dlio.__name__, sys.argv); "
        "subprocess.run([sys.executable, '-c', 'import s3dlio'], check=True)"
    )
    out = subprocess.run(
        [sys.executable, "-m", "sluice.compat.alias", "-c", code, "a1", "a2"],
        capture_output=True,
        text=True,
        env=_stand_in(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(None, 1) == ["sluice.compat.s3dlio", "['-c', 'a1', 'a2']\n"], out.stdout


PROCESS_MODEL = """
import multiprocessing as mp, os, subprocess, sys

URIS = {uris!r}
OUT = {out!r}

def read(uri):
    import s3dlio
    assert s3dlio.__name__ == "sluice.compat.s3dlio", s3dlio.__name__
    data = bytes(s3dlio.get(uri))
    from sluice.testing import pattern
    assert data == pattern(uri.split("/", 3)[3], len(data))
    return len(data)

def write(tag):
    import s3dlio
    w = s3dlio.MultipartUploadWriter.from_uri(OUT + tag, part_size=5 << 20)
    w.write(tag.encode() * 1000)
    w.close()

def worker(ctx_name, q):
    q.put((ctx_name, read(URIS[0])))
    write(ctx_name)

if __name__ == "__main__":
    results = {{"main": read(URIS[1])}}
    for name in ("spawn", "forkserver", "fork"):
        ctx = mp.get_context(name)
        q = ctx.Queue()
        p = ctx.Process(target=worker, args=(name, q))
        p.start()
        got = q.get(timeout=60)
        p.join(60)
        assert p.exitcode == 0, (name, p.exitcode)
        results[got[0]] = got[1]
    child = subprocess.run([sys.executable, "-c", "import s3dlio; print(s3dlio.__name__)"],
                           capture_output=True, text=True, check=True)
    results["subprocess"] = child.stdout.strip()
    print(sorted(results.items()))
"""


def test_alias_reaches_every_process_it_starts(server, prefix, tmp_path):
    uris = server.fill(prefix, 2, 4000)
    out = f"s3://{server.bucket}/{prefix}written-by-"
    prog = tmp_path / "prog.py"
    prog.write_text(PROCESS_MODEL.format(uris=uris, out=out))
    env = _stand_in(tmp_path)
    plain = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True)
    assert plain.returncode != 0 and "alias did not reach" in plain.stderr, "the stand-in works"
    run = subprocess.run(
        [sys.executable, "-m", "sluice.compat.alias", str(prog)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(
        sorted(
            {
                "main": 4000,
                "spawn": 4000,
                "forkserver": 4000,
                "fork": 4000,
                "subprocess": "sluice.compat.s3dlio",
            }.items()
        )
    )
    for name in ("spawn", "forkserver", "fork"):
        assert bytes(s3dlio.get(out + name)) == name.encode() * 1000


def test_sluice_dlio_writes_a_bin_dir_for_mlpstorage(tmp_path):
    from sluice.compat import alias

    path = alias.make_bin_dir(str(tmp_path / "bin"))
    assert os.path.basename(path) == "dlio_benchmark" and os.access(path, os.X_OK)
    text = open(path).read()
    assert "-m sluice.compat.alias -m dlio_benchmark.main" in text and sys.executable in text


def test_multi_endpoint_store_spreads_counts_and_goes_around_a_dead_endpoint(server, prefix):
    import asyncio
    import socket

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % s.getsockname()[1]
    store = s3dlio.create_multi_endpoint_store(
        uris=[server.endpoint, dead], strategy="least_connections"
    )
    assert store.endpoint_count() == 2 and store.strategy() == "least_connections"
    uri = f"s3://{server.bucket}/{prefix}obj"
    data = pattern("x", 200_000)

    async def round_trips():
        for _ in range(4):
            await store.put(uri, data)
            assert bytes(await store.get(uri)) == data
            assert bytes(await store.get_range(uri, 10, 5)) == data[10:15]
        assert await store.list(f"s3://{server.bucket}/{prefix}", True) == [uri]
        await store.delete(uri)

    asyncio.run(round_trips())
    per = store.get_endpoint_stats()
    assert [e["uri"].rstrip("/") for e in per] == [server.endpoint, dead]
    assert per[0]["bytes_written"] == 4 * len(data) and per[0]["bytes_read"] >= 4 * len(data)
    assert per[1]["error_count"] >= 1 and per[1]["bytes_read"] == 0
    total = store.get_stats()  # mlpstorage's name for the totals
    assert total == store.get_total_stats() and total["bytes_written"] == 4 * len(data)

    # s3dlio's own form of an endpoint: s3://host:port/bucket/, relative paths under it.
    host = server.endpoint.split("://", 1)[1]
    s3_style = s3dlio.create_multi_endpoint_store([f"s3://{host}/{server.bucket}/{prefix}"])
    server.insert(prefix + "rel", b"relative")
    assert bytes(asyncio.run(s3_style.get("rel"))) == b"relative"
    assert (
        bytes(asyncio.run(s3_style.get(f"s3://{host}/{server.bucket}/{prefix}rel"))) == b"relative"
    )

    with pytest.raises(RuntimeError, match="Invalid strategy 'fastest'"):
        s3dlio.create_multi_endpoint_store([server.endpoint], strategy="fastest")
    with pytest.raises(RuntimeError, match="at least one endpoint"):
        s3dlio.create_multi_endpoint_store([])


class _OnlyBytes:
    def __bytes__(self):
        return b"from __bytes__"


def test_put_bytes_put_many_and_their_async_forms(server, prefix):
    import asyncio

    base = f"s3://{server.bucket}/{prefix}"
    s3dlio.put_bytes(base + "b", _OnlyBytes())
    assert bytes(s3dlio.get(base + "b")) == b"from __bytes__"
    with pytest.raises(TypeError, match="bytes-like"):
        s3dlio.put_bytes(base + "n", 42)  # not 42 zero bytes, as s3dlio's bytes(42) would
    s3dlio.put_many([(base + f"m{i}", bytes([i]) * i) for i in range(1, 6)], max_in_flight=2)
    assert [len(s3dlio.get(base + f"m{i}")) for i in range(1, 6)] == [1, 2, 3, 4, 5]

    async def main():
        fut = s3dlio.put_bytes_async(base + "a", bytearray(b"async"))
        assert isinstance(fut, asyncio.Future)
        await fut
        await s3dlio.put_many_async([(base + "am", memoryview(b"mv"))])
        # s3dlio 0.10's borrow=False: the buffer is copied, so changing it at once is safe.
        buf = bytearray(b"before")
        fut = s3dlio.put_bytes_async(base + "c", buf, borrow=False)
        buf[:] = b"AFTER!"
        await fut
        many = [(base + "cm", bytearray(b"one"))]
        fut = s3dlio.put_many_async(many, 4, borrow=False)
        many[0][1][:] = b"two"
        await fut

    asyncio.run(main())
    assert bytes(s3dlio.get(base + "a")) == b"async" and bytes(s3dlio.get(base + "am")) == b"mv"
    assert bytes(s3dlio.get(base + "c")) == b"before" and bytes(s3dlio.get(base + "cm")) == b"one"
    with pytest.raises(RuntimeError):
        s3dlio.put_bytes_async(base + "x", b"no loop")


def test_multi_endpoint_stores_from_a_template_a_file_and_the_environment(
    server, tmp_path, monkeypatch
):
    host, port = server.endpoint.split("://")[1].rsplit(":", 1)
    store = s3dlio.create_multi_endpoint_store_from_template(
        f"http://{host}:{{{port}...{port}}}", None
    )
    assert store.endpoint_count() == 1 and store.strategy() == "round_robin"
    assert s3dlio._expand_template("e{1...2}x{5...6}") == ["e1x5", "e1x6", "e2x5", "e2x6"]
    assert s3dlio._expand_template("h{01...03}") == ["h1", "h2", "h3"]
    with pytest.raises(RuntimeError, match="start \\(3\\) > end \\(1\\)"):
        s3dlio.create_multi_endpoint_store_from_template("http://h{3...1}:9000", None)
    listing = tmp_path / "endpoints.txt"
    listing.write_text(f"# the cluster\n\n  {server.endpoint}  \n{server.endpoint}\n")
    assert (
        s3dlio.create_multi_endpoint_store_from_file(
            str(listing), "least_connections"
        ).endpoint_count()
        == 2
    )
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(RuntimeError, match="No URIs found"):
        s3dlio.create_multi_endpoint_store_from_file(str(tmp_path / "empty.txt"), None)
    with pytest.raises(RuntimeError, match="Failed to read URI file"):
        s3dlio.create_multi_endpoint_store_from_file(str(tmp_path / "missing.txt"), None)
    monkeypatch.setenv("S3_ENDPOINT_URIS", f"{server.endpoint},{server.endpoint}")
    assert s3dlio.create_multi_endpoint_store_from_env(None).endpoint_count() == 2


def test_results_are_bytes_views_as_in_s3dlio(server, prefix):
    import sluice

    base = f"s3://{server.bucket}/{prefix}"
    s3dlio.put_bytes(base + "v", b"hello")
    for got in (
        s3dlio.get(base + "v"),
        s3dlio.get_range(base + "v", 0, 5),
        s3dlio.get_many([base + "v"])[0][1],
        next(iter(s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris([base + "v"])).items())),
    ):
        assert isinstance(got, s3dlio.BytesView) and isinstance(got, sluice.Object)
        assert repr(got) == "BytesView(5 bytes)"
        assert len(got) == 5 and got.to_bytes() == b"hello" and bytes(got.memoryview()) == b"hello"
        assert memoryview(got).readonly  # a view of the loader's bytes, not a copy
    assert not isinstance(sluice.Client().get(base + "v"), s3dlio.BytesView)


def test_multi_endpoint_store_over_directories(tmp_path):
    import asyncio

    dirs = [tmp_path / f"endpoint{i}" for i in range(3)]
    for d in dirs:
        d.mkdir()
    store = s3dlio.create_multi_endpoint_store([f"file://{d}" for d in dirs], "round_robin")

    async def main():
        # A URI under an endpoint stays there; a relative name always finds its one file.
        await store.put(f"file://{dirs[1]}/a.bin", b"0123456789")
        got = await store.get(f"file://{dirs[1]}/a.bin")
        assert isinstance(got, s3dlio.BytesView) and bytes(got) == b"0123456789"
        assert bytes(await store.get_range(f"file://{dirs[1]}/a.bin", 2, 3)) == b"234"
        await store.delete(f"file://{dirs[1]}/a.bin")
        with pytest.raises(FileNotFoundError):
            await store.get(f"file://{dirs[1]}/a.bin")
        assert await store.list(f"file://{dirs[1]}/") == []
        for i in range(12):
            await store.put(f"rel/{i}.bin", bytes([i]))
        for i in range(12):
            assert bytes(await store.get(f"rel/{i}.bin")) == bytes([i])

    asyncio.run(main())
    homes = [sum((d / "rel" / f"{i}.bin").exists() for d in dirs) for i in range(12)]
    assert homes == [1] * 12, "each name in exactly one directory"
    assert all((d / "rel").is_dir() for d in dirs), "names spread over every directory"
    stats = store.get_endpoint_stats()
    assert [s["uri"] for s in stats] == [f"file://{d}" for d in dirs]
    assert (
        stats[1]["bytes_written"] >= 10
        and stats[1]["bytes_read"] >= 13
        and stats[1]["error_count"] == 1
    )
    assert store.get_total_stats()["total_requests"] == 6 + 24
    with pytest.raises(RuntimeError, match="none of the endpoints"):
        asyncio.run(store.get(f"file://{tmp_path}/elsewhere"))
    with pytest.raises(RuntimeError, match="same URI scheme"):
        s3dlio.create_multi_endpoint_store([f"file://{dirs[0]}", "s3://bucket/key"], None)


def test_s3dlio_0_10_dataset_access_and_error_classes(server, prefix):
    import asyncio

    uris = server.fill(prefix, 3, 1000)
    ds = s3dlio.PyDataset(f"s3://{server.bucket}/{prefix}")  # 0.10: lists the prefix
    assert len(ds) == 3 and ds.uris() == uris

    async def main():
        got = await ds.get_item(2)
        assert isinstance(got, s3dlio.BytesView) and bytes(got) == bytes(s3dlio.get(uris[2]))
        with pytest.raises(RuntimeError, match="index out of range: 3"):
            await ds.get_item(3)

    asyncio.run(main())
    with pytest.raises(RuntimeError, match="no running event loop"):
        ds.get_item(0)
    assert issubclass(s3dlio.LengthMismatchError, ValueError)
    assert issubclass(s3dlio.UnsupportedOperationError, NotImplementedError)
    assert issubclass(s3dlio.UnsupportedOperationError, RuntimeError)
    assert issubclass(s3dlio.ExportStillReferencedError, RuntimeError)
    e = s3dlio.LengthMismatchError("short", expected=10, actual=7)
    assert (e.expected, e.actual) == (10, 7)
