"""The multi-endpoint store of :mod:`sluice.compat.s3dlio`."""

from __future__ import annotations

import os
import re
import threading
import zlib
from builtins import open as builtins_open
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import sluice

from ._config import _client_options, _env
from ._errors import _T, InvalidArgumentError, _errors
from ._objects import _bytes_like, _view

_STRATEGIES = ("round_robin", "least_connections")
_MAX_ENDPOINTS = 32


class MultiEndpointStore:
    """s3dlio's store over several endpoints of one storage system (``create_multi_endpoint_store``).

    Its I/O methods are coroutines, as s3dlio's are. sluice sends each request to the
    endpoint with the fewest in flight whichever strategy is named (round robin is that, when
    requests take equally long), and one that stops answering is avoided while the retry goes
    to another. Endpoints are ``http(s)://host:port`` or s3dlio's ``s3://host:port/bucket/``;
    with the latter, a relative path or a URI under any endpoint's prefix names the same
    object on every endpoint, as in s3dlio.

    Endpoints may also be directories (``file://`` or ``direct://``, one scheme for all): each
    is a store of its own. A URI under one goes to that one, unchanged; a relative name goes
    to the directory a hash of the name picks, so that every call on it (put, get, delete)
    finds the same file. s3dlio moves every request to the endpoint its strategy picks, so
    an object put under one directory is read from another (four of its own tests fail on
    that); here an object is always where its name says, and the strategy is only reported.
    """

    def __init__(self, uris: Sequence[str], strategy: Optional[str]) -> None:
        uris = [u.strip() for u in uris if u and u.strip()]
        strategy = strategy or "round_robin"
        if strategy not in _STRATEGIES:
            raise InvalidArgumentError(
                f"Invalid strategy '{strategy}'. Use 'round_robin' or 'least_connections'"
            )
        if not uris:
            raise InvalidArgumentError(
                "Failed to create multi-endpoint store: requires at least one endpoint"
            )
        if len(uris) > _MAX_ENDPOINTS:
            raise InvalidArgumentError(
                f"Failed to create multi-endpoint store: {len(uris)} endpoints exceed the maximum of {_MAX_ENDPOINTS}"
            )
        schemes = {u.split("://", 1)[0] if "://" in u else "" for u in uris}
        if len(schemes - {"http", "https"}) > 0 and len(schemes) > 1:
            raise InvalidArgumentError(
                f"Failed to create multi-endpoint store: all endpoints must use the same URI scheme, not {sorted(schemes)}"
            )
        self._uris = uris
        self._strategy = strategy
        self._clients: Dict[int, sluice.Client] = {}
        self._local = all(u.startswith(("file://", "direct://")) for u in uris)
        if self._local:
            self._roots = [u.rstrip("/") for u in uris]
            self._counts = [
                {"requests": 0, "bytes_read": 0, "bytes_written": 0, "failures": 0, "in_flight": 0}
                for _ in uris
            ]
            self._lock = threading.Lock()
            self._kwargs = {}
            return
        # s3://host:port/bucket/prefix → (s3://host:port/, "bucket/prefix")
        self._prefixes = [u for u in uris if u.startswith("s3://")]
        self._kwargs = _client_options(endpoints=uris)
        self._client  # a bad endpoint fails here, not at the first request

    @property
    def _client(self) -> sluice.Client:
        """This process's client for the endpoints (a forked child makes its own)."""
        pid = os.getpid()
        c = self._clients.get(pid)
        if c is None:
            c = self._clients[pid] = _errors(sluice.Client)(**self._kwargs)
        return c

    def _uri(self, uri: str) -> str:
        """The object's ``s3://bucket/key``: a relative path is under the first endpoint's
        prefix; an endpoint's prefix (``s3://host:port/``) is dropped."""
        for p in self._prefixes:
            host = p[len("s3://") :].split("/", 1)[0]
            if uri.startswith(f"s3://{host}/"):
                return "s3://" + uri[len(f"s3://{host}/") :]
        if "://" not in uri and self._prefixes:
            _, _, rest = self._prefixes[0][len("s3://") :].partition("/")
            return "s3://" + rest.rstrip("/") + "/" + uri.lstrip("/")
        return uri

    def _local_target(self, uri: str) -> Tuple[int, str]:
        """The directory endpoint `uri` is under (unchanged), or for a relative name the one
        its hash picks and the path under it."""
        for i, root in enumerate(self._roots):
            if uri == root or uri.startswith(root + "/"):
                return i, uri
        if "://" in uri:
            raise InvalidArgumentError(f"{uri!r} is under none of the endpoints {self._roots}")
        name = uri.lstrip("/")
        i = zlib.crc32(name.encode()) % len(self._roots)
        return i, f"{self._roots[i]}/{name}"

    async def _run(self, fn: Callable[..., _T], uri: str, *args: Any, sent: int = 0) -> _T:
        import asyncio

        if not self._local:
            return await asyncio.to_thread(_errors(fn), self._uri(uri), *args)
        i, target = self._local_target(uri)
        c = self._counts[i]
        with self._lock:
            c["requests"] += 1
            c["in_flight"] += 1
            c["bytes_written"] += sent
        try:
            out = await asyncio.to_thread(_errors(fn), target, *args)
        except BaseException:
            with self._lock:
                c["failures"] += 1
            raise
        finally:
            with self._lock:
                c["in_flight"] -= 1
        if isinstance(out, sluice.Object):
            with self._lock:
                c["bytes_read"] += len(out)
        return out

    async def get(self, uri: str) -> Any:
        return _view(await self._run(self._client.get, uri))

    async def get_range(self, uri: str, offset: int, length: Optional[int] = None) -> Any:
        # As s3dlio (and this module's get_range): a length of 0 means to the end.
        return _view(await self._run(self._client.get_range, uri, offset, length or None))

    async def put(self, uri: str, data: Any) -> None:
        data = _bytes_like(data)
        await self._run(self._client.put, uri, data, sent=memoryview(data).nbytes)

    async def list(self, prefix: str, recursive: bool = False) -> List[str]:
        return await self._run(self._client.list, prefix, recursive)

    async def delete(self, uri: str) -> None:
        await self._run(self._client.delete, uri)

    def _endpoint_counts(self) -> List[Any]:
        if self._local:
            with self._lock:
                return [{"url": root, **c} for root, c in zip(self._roots, self._counts)]
        return self._client.endpoint_stats()

    def get_endpoint_stats(self) -> List[Dict[str, Any]]:
        """Per endpoint, with s3dlio's keys."""
        return [
            {
                "uri": e["url"],
                "total_requests": e["requests"],
                "bytes_read": e["bytes_read"],
                "bytes_written": e["bytes_written"],
                "error_count": e["failures"],
                "active_requests": e["in_flight"],
            }
            for e in self._endpoint_counts()
        ]

    def get_total_stats(self) -> Dict[str, Any]:
        per = self.get_endpoint_stats()
        keys = ("total_requests", "bytes_read", "bytes_written", "error_count", "active_requests")
        return {k: sum(e[k] for e in per) for k in keys}

    # mlpstorage's checkpoint writer asks for this name.
    get_stats = get_total_stats

    def endpoint_count(self) -> int:
        return len(self._uris)

    def strategy(self) -> str:
        return self._strategy


def create_multi_endpoint_store(
    uris: Sequence[str], strategy: Optional[str] = None
) -> MultiEndpointStore:
    """A store over several endpoints of one storage system (see `MultiEndpointStore`)."""
    return MultiEndpointStore(uris, strategy)


_RANGE = re.compile(r"\{(\d+)\.\.\.(\d+)\}")


def _expand_template(template: str) -> List[str]:
    """s3dlio's endpoint template: each ``{N...M}`` (inclusive, numbers unpadded) expands,
    the first varying slowest; other braces are literal."""
    m = _RANGE.search(template)
    if m is None:
        return [template]
    start, end = int(m.group(1)), int(m.group(2))
    if start > end:
        raise InvalidArgumentError(
            f"Template expansion failed: Invalid range: start ({start}) > end ({end})"
        )
    head, tail = template[: m.start()], template[m.end() :]
    return [head + str(n) + rest for n in range(start, end + 1) for rest in _expand_template(tail)]


def create_multi_endpoint_store_from_template(
    uri_template: str, strategy: Optional[str] = None
) -> MultiEndpointStore:
    """Endpoints from a template such as ``http://10.0.0.{1...4}:9000`` (see `MultiEndpointStore`)."""
    uris = _expand_template(uri_template)
    bad = [u for u in uris if "://" not in u]
    if bad:
        raise InvalidArgumentError(
            f"Template expansion failed: {bad[0]!r} is not a URI (scheme://...)"
        )
    return MultiEndpointStore(uris, strategy)


def create_multi_endpoint_store_from_file(
    file_path: str, strategy: Optional[str] = None
) -> MultiEndpointStore:
    """Endpoints from a file: one URI per line; blank lines and lines starting with ``#`` skipped."""
    try:
        with builtins_open(file_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InvalidArgumentError(
            f"Failed to load URIs from file: Failed to read URI file: {file_path}: {e}"
        ) from e
    uris = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    if not uris:
        raise InvalidArgumentError(
            f"Failed to load URIs from file: No URIs found in file: {file_path}"
        )
    return MultiEndpointStore(uris, strategy)


def create_multi_endpoint_store_from_env(strategy: Optional[str] = None) -> MultiEndpointStore:
    """Endpoints from ``S3_ENDPOINT_URIS`` (comma-separated)."""
    value = _env("S3_ENDPOINT_URIS") or ""
    uris = [u.strip() for u in value.split(",") if u.strip()]
    if not uris:
        raise InvalidArgumentError("S3_ENDPOINT_URIS is not set or lists no URI")
    return MultiEndpointStore(uris, strategy)
