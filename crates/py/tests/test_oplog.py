"""The op-log from Python (``SLUICE_OP_LOG``, docs/oplog.md): every process of a run writes
a log of its own that is whole when it ends, a multiprocessing child's included."""

import os
import subprocess
import sys

import pytest

zstandard = pytest.importorskip("zstandard")

SCRIPT = """
import multiprocessing, sys
import sluice

def child(uri):
    sluice.Client().get(uri)

if __name__ == "__main__":
    a, b = sys.argv[1], sys.argv[2]
    assert len(sluice.Client().get(a)) == 1000
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=child, args=(b,))
    p.start()
    p.join()
    assert p.exitcode == 0
"""


def lines(path):
    with open(path, "rb") as f:
        reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
        return reader.read().decode().splitlines()


def test_a_process_and_its_forked_child_each_leave_a_whole_log(server, prefix, tmp_path):
    a, b = f"{prefix}a", f"{prefix}b"
    server.insert(a, b"x" * 1000)
    server.insert(b, b"y" * 2000)
    log = tmp_path / "run.tsv.zst"
    env = dict(os.environ, SLUICE_OP_LOG=str(log))
    uri = f"s3://{server.bucket}/"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, uri + a, uri + b],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    files = sorted(tmp_path.glob("run*.tsv.zst"))
    # The parent's, and the child's beside it (the child found the parent's file there).
    assert "run.tsv.zst" in [f.name for f in files] and len(files) == 2, files
    got = {}
    for f in files:
        header, *rows = lines(f)
        assert header.split("\t")[:3] == ["start_unix_us", "op", "uri"]
        for r in rows:
            cols = r.split("\t")
            assert len(cols) == 11, r
            if cols[1] == "GetObject":
                got[cols[2]] = (int(cols[4]), int(cols[6]), f.name)
    assert got[uri + a][:2] == (1000, 200), got
    assert got[uri + b][:2] == (2000, 200), got
    assert got[uri + a][2] != got[uri + b][2], "each process its own file"
