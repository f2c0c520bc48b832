"""Runs a program with ``import s3dlio`` resolved to ``sluice.compat.s3dlio`` — in its own
process and in every process it starts.

    python -m sluice.compat.alias SCRIPT.py [ARGS...]
    python -m sluice.compat.alias -m MODULE [ARGS...]
    sluice-dlio [DLIO ARGS...]                  # = python -m sluice.compat.alias -m dlio_benchmark.main
    sluice-dlio --make-bin-dir DIR              # writes DIR/dlio_benchmark for mlpstorage --dlio-bin-path DIR

How: a shim package named ``s3dlio`` (``sluice/compat/_shim``) is put first on ``sys.path``
and first in ``PYTHONPATH``, which every child interpreter inherits (multiprocessing's spawn
and forkserver, ``subprocess``, mpirun's ranks when the alias starts them). Nothing named
s3dlio is installed; without the alias, ``import s3dlio`` finds what it found before.
"""

from __future__ import annotations

import os
import runpy
import shlex
import stat
import sys

__all__ = ["SHIM_DIR", "install", "main", "make_bin_dir", "dlio_main"]

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


def main(argv: list) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("usage: python -m sluice.compat.alias -m MODULE [ARGS...]")
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
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
            f"exec {shlex.quote(sys.executable)} -m sluice.compat.alias -m dlio_benchmark.main \"$@\"\n"
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
