"""sluice.compat.s3dlio, driven as the MLPerf Storage benchmark (DLIO) drives s3dlio."""

import io
import os
import subprocess
import sys
import textwrap
import zipfile

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


def test_items_behave_like_s3dlio_items(server, prefix):
    uris = server.fill(prefix, 3, 1000)
    opts = {"prefetch": 2, "skip_head": True, "some_future_option": 1}
    items = list(s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), opts).items())
    assert sorted(i.uri for i in items) == uris
    for i in items:
        assert i.byte_count == len(i) == 1000
        assert bytes(i) == pattern(i.uri.split("/", 3)[3], 1000)
        assert np.frombuffer(i, dtype=np.uint8).nbytes == 1000


def test_object_calls(server, prefix):
    uris = server.fill(prefix, 3, 5000)
    base = f"s3://{server.bucket}/{prefix}"
    assert bytes(s3dlio.get(uris[0]))[:10] == pattern(uris[0].split("/", 3)[3], 10)
    assert len(s3dlio.get_range(uris[0], 4000)) == 1000
    assert len(s3dlio.get_range(uris[0], 0, 10)) == 10
    assert [o.uri for o in s3dlio.get_many(uris)] == uris
    assert s3dlio.list(base, recursive=True) == uris
    assert s3dlio.list(base, recursive=True, pattern=r"obj_0000[12]") == uris[1:]
    st = s3dlio.stat(uris[2])
    assert st["size"] == 5000 and st["etag"] and "T" in st["last_modified"]
    assert s3dlio.exists(uris[2]) and not s3dlio.exists(base + "nope")
    s3dlio.put_bytes(base + "p", b"abc")
    assert bytes(s3dlio.get(base + "p")) == b"abc"
    with pytest.raises(FileNotFoundError, match=base + "nope"):
        s3dlio.get(base + "nope")


def test_multipart_writer(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}ckpt"
    w = s3dlio.MultipartUploadWriter.from_uri(uri, part_size=8 << 20)
    chunks = [os.urandom(1 << 20) for _ in range(20)]
    for c in chunks:
        w.write(c)
    assert not s3dlio.exists(uri), "nothing visible before close"
    info = w.close()
    assert info["size"] == 20 << 20
    assert bytes(s3dlio.get(uri)) == b"".join(chunks)
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x")

    aborted = f"s3://{server.bucket}/{prefix}aborted"
    w = s3dlio.MultipartUploadWriter.from_uri(aborted)
    w.write(b"partial")
    w.abort()
    assert not s3dlio.exists(aborted)
    with pytest.raises(ValueError, match="s3://"):
        s3dlio.MultipartUploadWriter.from_uri("not-a-uri")


def test_generate_npz_bytes_is_a_valid_npz():
    data = s3dlio.generate_npz_bytes((4, 5, 6), dtype="<f4", num_samples=3)
    npz = np.load(io.BytesIO(data))
    assert npz["x"].shape == (3, 4, 5, 6) and npz["x"].dtype == np.float32
    assert npz["y"].shape == (3,) and npz["y"].dtype == np.int64
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == ["x.npy", "y.npy"]
    u8 = np.load(io.BytesIO(s3dlio.generate_npz_bytes((7,), dtype="u1")))["x"]
    assert u8.shape == (1, 7) and u8.dtype == np.uint8
    with pytest.raises(ValueError, match="dtype"):
        s3dlio.generate_npz_bytes((2,), dtype="<c16")


def test_s3dlio_range_variables(server, prefix, monkeypatch):
    uris = server.fill(prefix, 1, 3 << 20)
    ds = s3dlio.PyDataset.from_uris(uris)
    monkeypatch.setenv("S3DLIO_CONCURRENT_THRESHOLD", str(1 << 20))
    monkeypatch.setenv("S3DLIO_CHUNK_SIZE", str(1 << 20))
    gets = server.gets
    assert sum(len(o) for o in s3dlio.PyBytesAsyncDataLoader(ds, {}).items()) == 3 << 20
    assert server.gets - gets == 3, "1 MiB ranges"
    monkeypatch.setenv("S3DLIO_ENABLE_RANGE_OPTIMIZATION", "0")
    gets = server.gets
    assert sum(len(o) for o in s3dlio.PyBytesAsyncDataLoader(ds, {}).items()) == 3 << 20
    assert server.gets - gets == 1, "range optimisation off: one GET"
    monkeypatch.setenv("S3DLIO_CHUNK_SIZE", "lots")
    with pytest.raises(ValueError, match="S3DLIO_CHUNK_SIZE"):
        s3dlio.PyBytesAsyncDataLoader(ds, {})


def test_retry_and_thread_variables_map_onto_sluice(server):
    env = {**os.environ, "S3DLIO_MAX_RETRIES": "4", "S3DLIO_RT_THREADS": "3", "S3DLIO_TIMEOUT_SECS": "7"}
    env.pop("SLUICE_MAX_ATTEMPTS", None)
    code = "import os, sluice.compat.s3dlio; print(os.environ['SLUICE_MAX_ATTEMPTS'], os.environ['SLUICE_THREADS'], os.environ['SLUICE_FIRST_BYTE_TIMEOUT'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["5", "3", "7"]


def test_unmodified_program_runs_through_the_alias(server, prefix, tmp_path):
    uris = server.fill(prefix, 5, 1000)
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(f"""
        import sys
        import s3dlio
        uris = {uris!r}
        total = 0
        it = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), {{"prefetch": 4}}).items()
        while batch := it.collect_batch(7):
            total += sum(len(b) for b in batch)
        print(s3dlio.__name__, total, sys.argv[1:])
    """))
    env = {**os.environ}
    plain = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True)
    assert plain.returncode != 0 and "No module named 's3dlio'" in plain.stderr, "never installed silently"
    out = subprocess.run(
        [sys.executable, "-m", "sluice.compat.alias", str(prog), "--flag"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip().split(maxsplit=2) == ["sluice.compat.s3dlio", "5000", "['--flag']"]
