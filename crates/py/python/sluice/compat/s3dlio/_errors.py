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


# s3dlio 0.10's new classes, for callers that catch them. sluice raises none of them: it has
# no call that fills a caller's buffer of a set length (LengthMismatchError), never keeps a
# borrowed buffer past the call (ExportStillReferencedError), and has no operation that a
# backend lacks (UnsupportedOperationError).


class LengthMismatchError(ValueError):
    """The object's size is not the expected length (``expected``, ``actual``)."""

    def __init__(self, *args: Any, expected: Any = None, actual: Any = None):
        super().__init__(*args)
        self.expected, self.actual = expected, actual


class UnsupportedOperationError(NotImplementedError, RuntimeError):
    """This build or provider does not support the operation."""


class ExportStillReferencedError(RuntimeError):
    """A storage backend still references a borrowed Python buffer after the put."""


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
