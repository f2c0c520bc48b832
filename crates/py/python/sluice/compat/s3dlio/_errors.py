"""The errors of :mod:`sluice.compat.s3dlio`, and the decorator that raises sluice's as them."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import sluice

_T = TypeVar("_T")

# --- errors: s3dlio raises RuntimeError for everything, and DLIO's retry loops catch
# RuntimeError; these keep the specific meaning as well. Module-level classes, so they pickle
# (DataLoader workers send their exceptions to the main process).


class ObjectNotFoundError(FileNotFoundError, RuntimeError):
    """The object or file does not exist."""


class AccessDeniedError(PermissionError, RuntimeError):
    """Credentials missing or refused."""


class RequestTimeoutError(TimeoutError, RuntimeError):
    """A network wait ran out."""


class InvalidArgumentError(ValueError, RuntimeError):
    """A URI, option or argument is not valid."""


class StorageError(sluice.S3Error, RuntimeError):
    """An S3 request failed (``status``, ``code``, ``request_id``, ``uri``)."""


class LocalIOError(OSError, RuntimeError):
    """A file system call failed (``errno`` set)."""


# Most specific first.
_ERROR_CLASSES = (
    (FileNotFoundError, ObjectNotFoundError),
    (PermissionError, AccessDeniedError),
    (TimeoutError, RequestTimeoutError),
    (sluice.S3Error, StorageError),
    (OSError, LocalIOError),
    (ValueError, InvalidArgumentError),
)


def _as_runtime_error(e: Exception) -> Exception:
    if isinstance(e, RuntimeError):
        return e
    for base, cls in _ERROR_CLASSES:
        if isinstance(e, base):
            new = cls(*e.args)
            new.__dict__.update(getattr(e, "__dict__", {}))
            return new
    return e


def _errors(fn: Callable[..., _T]) -> Callable[..., _T]:
    """Raises sluice's errors as the RuntimeError subclasses above."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> _T:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            new = _as_runtime_error(e)
            if new is e:
                raise
            raise new.with_traceback(e.__traceback__) from None

    return wrapper
