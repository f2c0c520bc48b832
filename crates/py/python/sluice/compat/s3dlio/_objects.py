"""The object calls of :mod:`sluice.compat.s3dlio`: get, put, list, delete, stat, ..."""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from sluice import _native

from ._config import _ON, _client, _env
from ._errors import InvalidArgumentError, StorageError, _errors
from ._uris import native, natives, shown

_builtin_list = list

# --- objects


BytesView = _native.BytesView
"""s3dlio's zero-copy result: a ``sluice.Object`` (buffer protocol, ``memoryview()``,
``to_bytes()``, ``len``) named and printed as s3dlio's."""
_view = _native.bytes_view


@_errors
def get(uri: str) -> BytesView:
    """The whole object, as a read-only buffer (``len``, ``bytes()``, ``memoryview()``)."""
    return _view(_client().get(native(uri)))


@_errors
def get_range(uri: str, offset: int, length: Optional[int] = None) -> BytesView:
    """``length`` bytes from ``offset``; to the end when ``length`` is None. ``length`` 0 is
    no bytes and no request (s3dlio 0.10; 0.9 read to the end, so a stray 0 could download
    the rest of a large object)."""
    if length == 0:
        _client()  # a bad configuration still fails here
        return _native.empty_view(uri)
    return _view(_client().get_range(native(uri), offset, length))


@_errors
def get_many(uris: Sequence[str], max_in_flight: int = 64) -> List[Tuple[str, BytesView]]:
    """``(uri, data)`` for every URI, in input order, ``max_in_flight`` at a time."""
    uris = _builtin_list(uris)
    got = _client().get_many(natives(uris), max_in_flight)
    return [(u, _view(o)) for u, o in zip(uris, got)]


def _truthy(name: str) -> bool:
    v = _env(name)
    return v is not None and v.lower() in _ON


def _bytes_like(data: Any) -> Any:
    """`data` as something with the buffer protocol: itself when it has one (no copy),
    else what its ``__bytes__`` returns. Anything else is a ``TypeError`` — not, as
    s3dlio's ``bytes(data)`` fallback does, an integer turned into that many zero bytes."""
    try:
        memoryview(data)
        return data
    except TypeError:
        pass
    to_bytes = getattr(type(data), "__bytes__", None)
    if to_bytes is not None:
        out = to_bytes(data)
        if isinstance(out, bytes):
            return out
    raise TypeError(
        f"Cannot convert data to bytes: {type(data).__name__}. Expected bytes-like object "
        "(bytes, bytearray, memoryview, BytesView, a numpy array) or one with __bytes__"
    )


@_errors
def put_bytes(uri: str, data: Any) -> None:
    """Uploads a bytes-like object, or one with ``__bytes__`` (multipart when large). With
    S3DLIO_PUT_VERIFY on, the stored size is checked afterwards."""
    data = _bytes_like(data)
    client = _client()
    uri = native(uri)
    client.put(uri, data)
    if _truthy("S3DLIO_PUT_VERIFY"):
        want = memoryview(data).nbytes
        got = client.stat(uri)["size"]
        if got != want:
            raise StorageError(
                f"{uri}: stored {got} bytes after a put of {want} (S3DLIO_PUT_VERIFY)"
            )


def put_bytes_async(uri: str, data: Any, *, borrow: bool = True) -> Any:
    """``put_bytes`` on a thread of the running event loop: returns an ``asyncio.Future`` to
    await (as s3dlio's, a plain function; bad data raises here, not when awaited).
    ``borrow=False`` (s3dlio 0.10) copies `data` first, so the caller may change it while
    the upload runs; by default it must not until the future is done."""
    import asyncio

    data = _bytes_like(data) if borrow else bytes(_bytes_like(data))
    return asyncio.get_running_loop().run_in_executor(None, put_bytes, uri, data)


@_errors
def put_many(items: Iterable[Tuple[str, Any]], max_in_flight: int = 64) -> None:
    """Uploads every ``(uri, data)``, ``max_in_flight`` at a time; the first error is raised
    once the others have finished."""
    from concurrent.futures import ThreadPoolExecutor

    pairs = [(native(uri), _bytes_like(data)) for uri, data in items]
    if max_in_flight < 1:
        raise InvalidArgumentError(f"max_in_flight must be at least 1, got {max_in_flight}")
    client = _client()
    with ThreadPoolExecutor(max_workers=min(max_in_flight, max(len(pairs), 1))) as pool:
        for f in [pool.submit(client.put, uri, data) for uri, data in pairs]:
            f.result()


def put_many_async(
    items: Iterable[Tuple[str, Any]], max_in_flight: int = 64, *, borrow: bool = True
) -> Any:
    """``put_many`` on a thread of the running event loop: an ``asyncio.Future``.
    ``borrow=False`` copies each item's data first (see ``put_bytes_async``)."""
    import asyncio

    items = _builtin_list(items)
    if not borrow:
        items = [(uri, bytes(_bytes_like(data))) for uri, data in items]
    return asyncio.get_running_loop().run_in_executor(None, put_many, items, max_in_flight)


_SCHEMES = (
    "expected s3://bucket/key, az://container/key, gs://bucket/key, file:///path or direct:///path"
)


def _scheme(uri: str) -> Tuple[str, str]:
    """``uri``'s scheme and what follows ``://``; no scheme is an error naming the URI."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        raise InvalidArgumentError(f"invalid URI {uri!r}: {_SCHEMES}")
    return scheme, rest


def _is_glob(part: str) -> bool:
    return "*" in part or "?" in part


def _glob_regex(glob: str) -> "re.Pattern[str]":
    """A glob over a key's rest: ``**`` crosses ``/``, ``*`` and ``?`` do not."""
    out = []
    for tok in re.split(r"(\*\*|\*|\?)", glob):
        out.append({"**": ".*", "*": "[^/]*", "?": "[^/]"}.get(tok) or re.escape(tok))
    return re.compile("".join(out) + r"\Z")


def _regex(text: str, what: str) -> "re.Pattern[str]":
    try:
        return re.compile(text)
    except re.error as e:
        raise InvalidArgumentError(
            f"{what} {text!r} is not a valid regular expression: {e}"
        ) from None


def _select(uri: str, recursive: bool) -> List[str]:
    """s3dlio 0.10's listing rule. A URI ending in ``/`` (or a bare bucket, or a local
    directory) lists below it. Otherwise its last part is an exact name, selecting the
    object of that name and what lies below ``name/`` (as one ``name/`` entry unless
    recursive), or a glob over the keys of its directory. Never a bare prefix: ``.../di``
    does not select ``dir``."""
    scheme, rest = _scheme(uri)
    client = _client()
    local = scheme in ("file", "direct")
    bucket_only = scheme in ("s3", "az", "gs") and "/" not in rest
    if uri.endswith("/") or bucket_only or (local and os.path.isdir(rest)):
        return client.list(uri if uri.endswith("/") else uri + "/", recursive)
    cut = uri.rfind("/") + 1
    parent, last = uri[:cut], uri[cut:]
    if _is_glob(last):
        rx = _glob_regex(last)
        return [
            e
            for e in client.list(parent, recursive or "**" in last)
            if not e.endswith("/") and rx.match(e[cut:])
        ]
    if local:
        return [uri] if os.path.isfile(rest) else []
    # The keys that begin with the name: the name itself, and below `name/`.
    return [e for e in client.list(uri, recursive) if e == uri or e.startswith(uri + "/")]


@_errors
def list(uri: str, recursive: bool = False, pattern: Optional[str] = None) -> List[str]:  # noqa: A001
    """Full URIs selected by ``uri`` (s3dlio 0.10's rule: ``_select``), sorted. Without
    ``recursive``, sub-prefixes come as URIs ending in ``/``. ``pattern`` is a regular
    expression searched in each URI relative to ``uri``."""
    entries = shown(_select(native(uri), recursive), uri)
    if pattern is not None:
        prx = _regex(pattern, "pattern")
        root = uri if uri.endswith("/") else uri + "/"
        entries = [e for e in entries if prx.search(e[len(root) :] if e.startswith(root) else e)]
    return sorted(entries)


@_errors
def delete(uri: str, recursive: bool = False) -> None:
    """Without ``recursive``, deletes exactly the object ``uri`` names (``/``, ``*`` and ``?``
    are part of the key, as in s3dlio 0.10; 0.9 expanded them). With it, every object
    ``list(uri, recursive=True)`` selects: a name and what lies below ``name/`` (never its
    siblings ``name2``), a directory's contents, or a glob's matches. Missing objects are
    not an error."""
    client = _client()
    uri = native(uri)
    if not recursive:
        client.delete(uri)
        return
    for u in _select(uri, True):
        if not u.endswith("/"):
            client.delete(u)


@_errors
def mkdir(uri: str) -> None:
    """s3dlio 0.10's: nothing on ``s3://`` (no marker object); the directory and its parents
    for ``file://`` and ``direct://``."""
    scheme, rest = _scheme(uri)
    if scheme in ("file", "direct"):
        os.makedirs(rest, exist_ok=True)
    elif scheme != "s3":
        raise InvalidArgumentError(f"invalid URI {uri!r}: {_SCHEMES}")


_STAT_KEYS = (
    "content_type",
    "content_language",
    "content_encoding",
    "cache_control",
    "content_disposition",
    "expires",
    "storage_class",
    "server_side_encryption",
    "ssekms_key_id",
    "sse_customer_algorithm",
    "version_id",
    "replication_status",
)


@_errors
def stat(uri: str) -> dict:
    """s3dlio's 16 keys: size, last_modified (RFC 3339, UTC), etag, the header fields sluice
    does not track (None) and metadata ({})."""
    d = _client().stat(native(uri))
    lm = d.get("last_modified")
    out: Dict[str, Any] = {
        "size": d["size"],
        "last_modified": None
        if lm is None
        else datetime.fromtimestamp(lm, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "etag": d.get("etag"),
    }
    out.update({k: None for k in _STAT_KEYS})
    if not uri.startswith("s3://"):
        out["storage_class"] = "STANDARD"
    out["metadata"] = {}
    return out


def exists(uri: str) -> bool:
    """Whether the object can be stat'ed: False on any error, as in s3dlio."""
    try:
        _client().stat(native(uri))
        return True
    except Exception:
        return False


@_errors
def generate_npz_bytes(shape: Sequence[int], dtype: str = "<f4", num_samples: int = 1) -> bytes:
    """A valid .npz as s3dlio generates it: ``x`` of exactly ``shape`` (DLIO passes the
    sample count inside it), incompressible pseudo-random bytes, the same on every call;
    ``y``, ``num_samples`` int64 zeros."""
    dims = _builtin_list(shape)
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims):
        raise InvalidArgumentError(f"shape {dims!r} must be non-negative integers")
    if num_samples < 0:
        raise InvalidArgumentError(f"num_samples must not be negative, got {num_samples}")
    m = re.fullmatch(r"([<>|=]?)([biufc])(\d+)", dtype)
    if m is None:
        raise InvalidArgumentError(
            f"dtype {dtype!r} is not a numpy type string such as '<f4' or '|u1'"
        )
    order, kind, size = m.groups()
    itemsize = int(size)
    descr = ("|" if itemsize == 1 else (order if order in "<>" and order else "<")) + kind + size
    return _native.random_npz(dims, descr, itemsize, num_samples)
