"""Runs a program with ``import s3dlio`` resolved to ``sluice.compat.s3dlio``.

    python -m sluice.compat.alias SCRIPT.py [ARGS...]
    python -m sluice.compat.alias -m MODULE [ARGS...]

Opt-in and per process: nothing named s3dlio is installed.
"""

from __future__ import annotations

import runpy
import sys


def install() -> None:
    """Makes ``import s3dlio`` (in this process) return sluice's compatible module."""
    from sluice.compat import s3dlio

    sys.modules["s3dlio"] = s3dlio


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
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
