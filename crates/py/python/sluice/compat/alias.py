"""Runs a program with ``import s3dlio`` resolved to ``sluice.compat.s3dlio`` — in its own
process and in every process it starts.

    python -m sluice.compat.alias SCRIPT.py [ARGS...]
    python -m sluice.compat.alias -m MODULE [ARGS...]
    python -m sluice.compat.alias -c COMMAND [ARGS...]
    sluice-dlio [DLIO ARGS...]                  # = python -m sluice.compat.alias -m dlio_benchmark.main
    sluice-dlio --make-bin-dir DIR              # writes DIR/dlio_benchmark for mlpstorage --dlio-bin-path DIR

Each process the alias starts (each MPI rank) also gets a shared-memory buffer pool for the
DataLoader workers it starts epoch after epoch (``SLUICE_SHM_POOL``, see docs/configuration.md): a
directory ``/dev/shm/sluice-pool-UID-PID-*`` removed when the process exits (one left by a
process that was killed is removed by the next: a pool is in use while the lock on its
``owner`` file is held). Set
``SLUICE_SHM_POOL=off`` to go without, or to a directory of your own to manage it yourself.

How: a shim package named ``s3dlio`` (``sluice/compat/_shim``) is put first on ``sys.path``
and first in ``PYTHONPATH``, which every child interpreter inherits (multiprocessing's spawn
and forkserver, ``subprocess``, mpirun's ranks when the alias starts them). Nothing named
s3dlio is installed; without the alias, ``import s3dlio`` finds what it found before.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import runpy
import shlex
import shutil
import stat
import sys
import tempfile

__all__ = ["SHIM_DIR", "install", "main", "make_bin_dir", "dlio_main", "shared_memory_pool"]

SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shim")


def install() -> None:
    """Makes ``import s3dlio`` return sluice's module here and in every child process."""
    if sys.path[:1] != [SHIM_DIR]:
        sys.path.insert(0, SHIM_DIR)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != SHIM_DIR]
    os.environ["PYTHONPATH"] = os.pathsep.join([SHIM_DIR, *parts])
    # A real s3dlio imported before the alias (unlikely) would otherwise stay in use here.
    sys.modules.pop("s3dlio", None)
    import s3dlio  # type: ignore[import-not-found]  # noqa: F401  (the shim: registers sluice.compat.s3dlio under the name)


SHM_ROOT = "/dev/shm"


def shared_memory_pool(root: str = SHM_ROOT) -> "str | None":
    """Points ``SLUICE_SHM_POOL`` at a directory of this process's own under ``root`` (unless
    it is set already), removed at exit, after removing those whose processes are gone
    (killed before their exit ran). The directory's path, or None when it was not made.

    A pool is alive while a process holds the lock on its ``owner`` file (the process that
    made it, and the children it forked, which inherit the lock: an ``flock`` belongs to the
    open file, not the PID) or on one of its ``slot-N`` files (each process using the pool,
    exec'd ones included, holds its slot's). So liveness needs no PID, and processes in
    other PID namespaces sharing ``/dev/shm`` (containers run with ``--ipc=host``) never
    remove each other's pools; names anyone else planted in ``root`` are ignored."""
    if os.environ.get("SLUICE_SHM_POOL") or not os.access(root, os.W_OK):
        return None
    head = f"sluice-pool-{os.getuid()}-"
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    for name in names:
        # Pools, and the staging names of pools whose maker died before the rename.
        if name.startswith(head) or name.startswith(f".{head}"):
            _remove_if_abandoned(os.path.join(root, name), staging=name.startswith("."))
    # Made under a name the sweep ignores, locked, then renamed: no other process's sweep
    # can find it unlocked. A name nobody could have made ready for us (mode 700, ours).
    staging, lock = None, None
    try:
        staging = tempfile.mkdtemp(prefix=f".{head}", dir=root)
        lock = os.open(
            os.path.join(staging, "owner"),
            os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
            0o600,
        )
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(
            root, f"{head}{os.getpid()}-{os.path.basename(staging)[len(head) + 1 :]}"
        )
        os.rename(staging, path)
    except OSError as e:
        if lock is not None:
            os.close(lock)
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        print(f"sluice: shared-memory pool off: cannot make it under {root}: {e}", file=sys.stderr)
        return None
    _held_locks.append(lock)  # open until the process ends: the lock is the pool's life
    os.environ["SLUICE_SHM_POOL"] = path
    owner = os.getpid()

    def remove() -> None:
        # Forked children inherit atexit handlers: only the process that made it removes it.
        if os.getpid() == owner:
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(remove)
    return path


_held_locks: list = []


def _remove_if_abandoned(path: str, staging: bool = False) -> None:
    """Removes the pool directory ``path`` if it is this user's and no process holds its
    ``owner`` lock or a slot's; anything else (another user's, a file, a link, a pool in use)
    is left alone. A ``staging`` directory without an ``owner`` file yet is being made."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return
        fd = os.open(os.path.join(path, "owner"), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        # A pool made by a sluice from before the lock: its slot files are locked in use.
        if not staging and not _any_slot_locked(path):
            shutil.rmtree(path, ignore_errors=True)
        return
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # held: a live pool
    else:
        if not _any_slot_locked(path):
            shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)


def _any_slot_locked(path: str) -> bool:
    try:
        names = [n for n in os.listdir(path) if n.startswith("slot-")]
    except OSError:
        return True
    for name in names:
        try:
            fd = os.open(os.path.join(path, name), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
    return False


def main(argv: list) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    install()
    shared_memory_pool()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("usage: python -m sluice.compat.alias -m MODULE [ARGS...]")
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        if len(argv) < 2:
            raise SystemExit("usage: python -m sluice.compat.alias -c COMMAND [ARGS...]")
        # As `python -c`: argv[0] is "-c", the current directory is importable.
        sys.argv = ["-c", *argv[2:]]
        sys.path.insert(1, "")
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = argv
        # As `python SCRIPT` does: the script's directory is importable (after the shim).
        sys.path.insert(1, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


def make_bin_dir(directory: str) -> str:
    """Writes ``directory/dlio_benchmark``, an executable that runs DLIO on sluice with this
    interpreter: mlpstorage's ``--dlio-bin-path`` runs ``<path>/dlio_benchmark``."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "dlio_benchmark")
    with open(path, "w") as f:
        f.write(
            "#!/bin/sh\n"
            "# DLIO with s3dlio served by sluice (written by sluice-dlio --make-bin-dir)\n"
            f'exec {shlex.quote(sys.executable)} -m sluice.compat.alias -m dlio_benchmark.main "$@"\n'
        )
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def dlio_main() -> None:
    """The ``sluice-dlio`` console script: ``dlio_benchmark`` with s3dlio served by sluice."""
    argv = sys.argv[1:]
    if argv[:1] == ["--make-bin-dir"]:
        if len(argv) != 2:
            raise SystemExit("usage: sluice-dlio --make-bin-dir DIR")
        print(make_bin_dir(argv[1]))
        return
    main(["-m", "dlio_benchmark.main", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
