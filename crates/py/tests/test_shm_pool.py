"""``SLUICE_SHM_POOL``: the buffer pool's memory in a shared-memory file that the next
process (the next epoch's DataLoader worker) reuses. Real processes, one after another and
at once, every byte checked."""

import json
import os
import subprocess
import sys
import tempfile

import pytest
from sluice.compat import alias

READER = r"""
import json, sys
import sluice
from sluice.testing import pattern
uris = sys.argv[1:]
loader = sluice.Loader(sluice.Dataset.from_uris(uris), prefetch=4)
held = []
for obj in loader:
    assert bytes(obj) == pattern(obj.uri.split("/", 3)[3], len(obj)), obj.uri
    held.append(obj)  # all alive at once, as a consumer holding batches
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
print(json.dumps({"shmem_kb": int(status["RssShmem"].split()[0]), "objects": len(held)}))
"""

SIZE = 6 << 20


def shm_root():
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def read(uris, pool, env=None):
    e = {**os.environ, "SLUICE_SHM_POOL": pool, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", READER, *uris],
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def result(p):
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return json.loads(out)


@pytest.mark.skipif(shm_root() is None, reason="no writable /dev/shm")
def test_a_new_process_reuses_the_pages_an_earlier_one_left(server, prefix):
    uris = server.fill(prefix, 5, SIZE)
    with tempfile.TemporaryDirectory(dir=shm_root()) as d:
        pool = os.path.join(d, "pool")
        first = result(read(uris, pool))
        assert first["objects"] == 5
        # The objects held lived in the shared file, not in fresh private memory.
        assert first["shmem_kb"] * 1024 >= 5 * SIZE, first
        slot = os.path.join(pool, "slot-0")
        size = os.path.getsize(slot)
        assert size >= 5 * SIZE
        # The next process claims the same slot and needs no more of it.
        second = result(read(uris, pool))
        assert second["shmem_kb"] * 1024 >= 5 * SIZE, second
        assert os.path.getsize(slot) == size
        assert sorted(os.listdir(pool)) == ["slot-0"]
        # Two at once: each its own slot, neither sees the other's bytes (checked in each).
        both = [read(uris, pool), read(uris, pool)]
        assert all(result(p)["objects"] == 5 for p in both)
        assert sorted(os.listdir(pool)) == ["slot-0", "slot-1"]


@pytest.mark.skipif(shm_root() is None, reason="no writable /dev/shm")
def test_a_full_or_unusable_pool_falls_back_to_private_memory(server, prefix):
    uris = server.fill(prefix, 3, SIZE)
    with tempfile.TemporaryDirectory(dir=shm_root()) as d:
        # Room for one buffer: the others come from private memory, all bytes still right.
        small = result(read(uris, os.path.join(d, "small"), {"SLUICE_SHM_POOL_SIZE": "8MiB"}))
        assert small["objects"] == 3 and small["shmem_kb"] * 1024 < 3 * SIZE
        # A path that cannot be a directory: the pool is off, the read is not.
        blocker = os.path.join(d, "file")
        open(blocker, "w").close()
        off = result(read(uris, os.path.join(blocker, "pool")))
        assert off["objects"] == 3 and off["shmem_kb"] * 1024 < SIZE


def test_the_alias_makes_a_pool_per_process_and_removes_it(tmp_path, monkeypatch):
    monkeypatch.delenv("SLUICE_SHM_POOL", raising=False)
    stale = tmp_path / f"sluice-pool-{os.getuid()}-999999999-abc"
    stale.mkdir()
    code = (
        "import os, sys; from sluice.compat import alias; "
        f"p = alias.shared_memory_pool({str(tmp_path)!r}); "
        "assert os.stat(p).st_mode & 0o777 == 0o700; print(p, os.environ['SLUICE_SHM_POOL'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    made, env = out.stdout.split()
    assert made == env and os.path.basename(made).startswith(f"sluice-pool-{os.getuid()}-")
    assert not os.path.exists(made), "removed when its process exited"
    assert not stale.exists(), "a dead process's pool is swept"
    # A pool chosen by the user is left to the user.
    monkeypatch.setenv("SLUICE_SHM_POOL", str(tmp_path / "mine"))
    assert alias.shared_memory_pool(str(tmp_path)) is None


def test_the_sweep_judges_pools_by_their_lock_not_by_names(tmp_path, monkeypatch):
    """Names anyone can plant never stop the alias from starting; a pool whose owner is alive
    in another PID namespace (its PID means nothing here) is never removed."""
    monkeypatch.delenv("SLUICE_SHM_POOL", raising=False)
    head = f"sluice-pool-{os.getuid()}-"
    for planted in ["99999999999999999999-x", "\u00b2-x", "-", "12"]:
        (tmp_path / f"{head}{planted}").mkdir()
    (tmp_path / f"{head}file-x").write_text("not a pool")
    # A live pool of a process this namespace cannot see: a PID that does not exist here,
    # its lock held by a process that is alive.
    foreign = tmp_path / f"{head}999999999-live"
    foreign.mkdir()
    (foreign / "owner").touch()
    (foreign / "slot-0").write_bytes(b"in use")
    # A pool whose maker is gone but which an exec'd process still uses (its slot locked).
    used = tmp_path / f"{head}999999998-used"
    used.mkdir()
    (used / "owner").touch()
    (used / "slot-0").write_bytes(b"in use")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]\n"
            "[fcntl.flock(fd, fcntl.LOCK_EX) for fd in fds]\n"
            "print('held', flush=True); sys.stdin.read()",
            str(foreign / "owner"),
            str(used / "slot-0"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        # An abandoned pool of this version: its lock file is there, nobody holds it.
        abandoned = tmp_path / f"{head}1-dead"
        abandoned.mkdir()
        (abandoned / "owner").touch()
        # Staging names: one whose maker died after locking (swept), one being made (left).
        died = tmp_path / f".{head}died"
        died.mkdir()
        (died / "owner").touch()
        making = tmp_path / f".{head}making"
        making.mkdir()
        path = alias.shared_memory_pool(str(tmp_path))
        assert path is not None and os.path.isdir(path)
        assert (foreign / "slot-0").read_bytes() == b"in use", "a live pool is left alone"
        assert (used / "slot-0").exists(), "a pool with a slot in use is left alone"
        assert not abandoned.exists(), "an abandoned pool is swept"
        assert not died.exists() and making.exists(), "staging names judged the same way"
        assert (tmp_path / f"{head}file-x").exists(), "not a directory: not touched"
        # Its own pool is locked while this process lives: another sweep leaves it.
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                "import os, sys; from sluice.compat import alias; "
                "os.environ.pop('SLUICE_SHM_POOL', None); alias.shared_memory_pool(sys.argv[1])",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        assert os.path.isdir(path), "a live pool survives another process's sweep"
    finally:
        holder.communicate("", timeout=30)
        os.environ.pop("SLUICE_SHM_POOL", None)


FORKED = r"""
import json, multiprocessing as mp, os, sys
import sluice
from sluice.testing import pattern

def check(objs):
    return all(bytes(o) == pattern(o.uri.split("/", 3)[3], len(o)) for o in objs)

def worker(uris, q):
    # As a DataLoader fork worker: reads its own objects through the pool, round after round,
    # dropping them; the parent's buffers it inherited are not touched.
    ok, rss = True, []
    for _ in range(6):
        objs = list(sluice.Loader(sluice.Dataset.from_uris(uris), prefetch=4))
        ok = ok and check(objs)
        del objs
        status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
        rss.append(int(status["VmRSS"].split()[0]) * 1024)
    q.put({"ok": ok, "rss": rss})

uris = sys.argv[1:]
held = list(sluice.Loader(sluice.Dataset.from_uris(uris), prefetch=4))  # the parent used the pool
ctx = mp.get_context("fork")
q = ctx.Queue()
procs = [ctx.Process(target=worker, args=(uris, q)) for _ in range(2)]
for p in procs:
    p.start()
results = [q.get(timeout=120) for _ in procs]
for p in procs:
    p.join(timeout=60)
print(json.dumps({"children": results, "codes": [p.exitcode for p in procs], "parent_ok": check(held)}))
"""


@pytest.mark.skipif(shm_root() is None, reason="no writable /dev/shm")
def test_fork_workers_after_the_parent_used_the_pool(server, prefix):
    """A parent that read through the pool forks workers (DataLoader's fork start method):
    each reads its own objects right, round after round, within bounded memory, and the
    parent's buffers keep the parent's bytes."""
    uris = server.fill(prefix, 4, SIZE)
    with tempfile.TemporaryDirectory(dir=shm_root()) as d:
        env = {**os.environ, "SLUICE_SHM_POOL": os.path.join(d, "pool")}
        out = subprocess.run(
            [sys.executable, "-c", FORKED, *uris],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        assert got["codes"] == [0, 0] and got["parent_ok"], got
        for child in got["children"]:
            assert child["ok"], got
            # Rounds of 4 x 6 MiB, each dropped: after the first, memory stays level (a child
            # whose frees were skipped as its parent's grew by a round's 24 MiB each time).
            assert child["rss"][-1] - child["rss"][1] < 24 << 20, got
