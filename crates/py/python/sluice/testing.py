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
from typing import Iterator

from ._native import HostileServer, TestServer, hostile_cases, pattern

__all__ = ["TestServer", "HostileServer", "hostile_cases", "pattern", "environment"]


@contextmanager
def environment(server: TestServer, https: bool = False) -> Iterator[None]:
    """Points the AWS environment variables at ``server`` for the duration."""
    saved = {}
    for k, v in server.env(https).items():
        saved[k] = os.environ.get(k)
        os.environ[k] = v
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
