"""The client of :mod:`sluice.compat.s3dlio` and the settings s3dlio's variables make."""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Optional

import sluice
from sluice import _native

from ._errors import InvalidArgumentError, _errors

# --- configuration, read at first use in each process


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v.strip() if v is not None and v.strip() != "" else None


def _env_number(name: str, kind: Callable[[str], Any], minimum: float) -> Any:
    v = _env(name)
    if v is None:
        return None
    try:
        n = kind(v)
    except ValueError:
        raise InvalidArgumentError(f"{name}={v!r} is not a number") from None
    if n < minimum:
        raise InvalidArgumentError(f"{name}={v!r} must be at least {minimum}")
    return n


_OFF = {"0", "false", "no", "off", "disable", "disabled"}
_ON = {"1", "true", "yes", "on", "enable", "enabled"}

# By process id: a forked child makes its own client and keeps the parent's untouched (the
# native side leaks an inherited client rather than tear it down without its threads).
_clients: Dict[int, sluice.Client] = {}
_clients_lock = threading.Lock()


def _reset_lock_in_child() -> None:
    global _clients_lock
    _clients_lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_reset_lock_in_child)


def _client() -> sluice.Client:
    """This process's client, made from the environment on first use (and after a fork)."""
    pid = os.getpid()
    c = _clients.get(pid)
    if c is not None:
        return c
    with _clients_lock:
        c = _clients.get(pid)
        if c is None:
            c = _clients[pid] = _make_client()
    return c


def _make_client() -> sluice.Client:
    threads = _env_number("S3DLIO_RT_THREADS", int, 1)
    if threads is not None:
        # It can add threads, never take them below one per CPU: s3dlio's loaders run on a
        # runtime of their own with a thread per CPU whatever it says, and DLIO exports 1 to
        # its DataLoader workers in training runs.
        _native.set_runtime_threads(max(threads, os.cpu_count() or 1))
    # s3dlio reads AWS_ENDPOINT_URL; sluice alone would prefer AWS_ENDPOINT_URL_S3. DLIO
    # sets both from one setting, so this only matters when they differ.
    return sluice.Client(**_client_options(endpoint=_env("AWS_ENDPOINT_URL")))


def _client_options(**given: Any) -> Dict[str, Any]:
    """``given`` and the client settings s3dlio's variables make, those that are set."""
    options: Dict[str, Any] = {
        **given,
        "max_attempts": _env_number("S3DLIO_MAX_RETRY_ATTEMPTS", int, 1),
        "connect_timeout": _env_number("S3DLIO_CONNECT_TIMEOUT_SECS", float, 0.001),
        "first_byte_timeout": _env_number("S3DLIO_OPERATION_TIMEOUT_SECS", float, 0.001),
    }
    return {k: v for k, v in options.items() if v is not None}


def _range_options() -> dict:
    opts: dict = {}
    flag = _env("S3DLIO_ENABLE_RANGE_OPTIMIZATION")
    if flag is not None and flag.lower() in _OFF:
        opts["range_threshold"] = 2**64 - 1  # RangePlanner::NEVER: never split
    else:
        mb = _env_number("S3DLIO_RANGE_THRESHOLD_MB", int, 1)
        if mb is not None:
            opts["range_threshold"] = mb * 1024 * 1024
    chunk = _env_number("S3DLIO_CHUNK_SIZE", int, 1)
    if chunk is not None:
        opts["chunk_size"] = chunk
    return opts


@_errors
def configure_tokio_threads(n: int = 0) -> None:
    """Sets the I/O threads of this process before its first call; ``0``: the CPUs divided
    by the ranks on this host (OMPI_COMM_WORLD_SIZE, PMI_SIZE or WORLD_SIZE)."""
    if n < 0:
        raise InvalidArgumentError(f"configure_tokio_threads: n={n} must not be negative")
    if n == 0:
        world = 1
        for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"):
            w = _env_number(name, int, 1)
            if w is not None:
                world = w
                break
        n = max(1, (os.cpu_count() or 1) // world)
    _native.set_runtime_threads(n)
