"""Rust's log records (retries, resumed reads, redirects, endpoints avoided, aborted
uploads) into Python's ``logging``, under loggers named ``sluice.<crate>.<module>`` (e.g.
``sluice.core.retry``). Which records leave Rust: ``SLUICE_LOG`` / ``RUST_LOG``
(``debug``, ``warn,sluice_core=debug``, ...), else sluice's at INFO and above and every
crate's warnings; Python's logging configuration then decides what is shown (by default,
warnings on stderr).

A daemon thread per process takes the records off a queue the native side fills; it waits
with the GIL released, and is started again in a forked child.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

from . import _native

__all__ = ["logger_name"]

_pid: Optional[int] = None


def logger_name(target: str) -> str:
    """``sluice_core::retry`` → ``sluice.core.retry``; another crate's ``hyper::proto`` →
    ``sluice.hyper.proto``."""
    if target.startswith("sluice_"):
        target = target[len("sluice_") :]
    return "sluice." + target.replace("::", ".")


def _pump() -> None:
    while True:
        rec = _native._next_log(0.5)
        if rec is not None:
            # Imported with the first record, not with sluice: `logging` costs a new process
            # (a DataLoader worker) ~14 ms of CPU, and most never log.
            import logging

            level, target, message = rec
            logging.getLogger(logger_name(target)).log(level, "%s", message)


def start() -> None:
    """Starts this process's thread, once."""
    global _pid
    if _pid == os.getpid():
        return
    _pid = os.getpid()
    threading.Thread(target=_pump, name="sluice-log", daemon=True).start()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=start)
