"""sluice's S3 test server inside this Python process, for tests.

    from sluice.testing import TestServer
    with TestServer() as server:
        uris = server.fill("data/", count=8, size=1 << 20)
        client = sluice.Client(endpoint=server.endpoint)   # credentials: server.env()
        ...

``TestServer`` serves http and https (``https_endpoint``, trusted via ``ca_bundle``) with
SigV4 auth, one bucket ("sluice-test"), and fault injection (``inject``).

``HostileServer(name)`` plays one case of the bad-input catalogue (``hostile_cases()``):
a server that answers wrongly, slowly or not at all, for testing what a client makes of it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Dict, Iterator, Mapping, Optional, Union

from ._native import HostileServer, TestServer, hostile_cases, pattern

__all__ = ["TestServer", "HostileServer", "hostile_cases", "pattern", "environment"]


@contextmanager
def environment(
    server: Union[TestServer, HostileServer],
    https: bool = False,
    extra: Optional[Mapping[str, str]] = None,
) -> Iterator[None]:
    """Points the AWS environment variables at ``server`` (its ``env()``; with ``https``, at
    a TestServer's https endpoint) and sets ``extra`` too, for the duration; endpoint
    variables that would win over the server's (``S3_ENDPOINT_URIS``, ``AWS_ENDPOINT_URL``)
    are unset unless ``extra`` names them. However the block exits, each variable is put
    back as it was: its old value restored, or removed if it was not set before."""
    env: Dict[str, str]
    if isinstance(server, TestServer):
        env = dict(server.env(https))
    elif https:
        raise TypeError("https=True: only a TestServer serves https")
    else:
        env = dict(server.env())
    env.update(extra or {})
    # Variables that would point elsewhere and win over the server's (several endpoints;
    # s3dlio's endpoint variable) are unset for the block unless `extra` sets them.
    unset = [k for k in ("S3_ENDPOINT_URIS", "AWS_ENDPOINT_URL") if k not in env]
    saved: Dict[str, Optional[str]] = {}
    try:
        for k, v in env.items():
            saved[k] = os.environ.get(k)
            os.environ[k] = v
        for k in unset:
            saved[k] = os.environ.pop(k, None)
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
