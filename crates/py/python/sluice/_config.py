"""``sluice.Config``: how a client reaches a store, as a value that pickles.

A ``Client`` holds connections and a runtime, which cannot cross into another process; a
``Config`` can. Give one as ``config=`` to ``Client``, ``Dataset.from_prefix``, ``Loader`` and
the ``sluice.torch`` datasets, and every DataLoader worker (fork or spawn) builds its own
client from it. A ``Client`` pickles as its ``config``.

Every field left ``None`` comes from the standard AWS environment, as for ``Client()``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

__all__ = ["Config"]


@dataclass(frozen=True)
class Config:
    backend: Optional[str] = None
    """Client stack: "hyper", "awssdk" or "objectstore" (default: S3_BACKEND, else hyper)."""
    endpoint: Optional[str] = None
    """Endpoint URL (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)."""
    endpoints: Optional[Tuple[str, ...]] = field(default=None)
    """Several endpoints of one store, requests spread over them (default: S3_ENDPOINT_URIS)."""
    region: Optional[str] = None
    profile: Optional[str] = None
    """An AWS profile (of ~/.aws/config and credentials); it wins over AWS_ACCESS_KEY_ID and
    friends in the environment, as the AWS CLI's --profile does."""
    unsigned: bool = False
    """Send unsigned requests: public datasets, with no credentials at all."""
    ca_bundle: Optional[str] = None
    max_attempts: Optional[int] = None
    connect_timeout: Optional[float] = None
    first_byte_timeout: Optional[float] = None
    stall_timeout: Optional[float] = None
    """Seconds without a body byte before a read is retried from where it stopped."""

    def __post_init__(self) -> None:
        if self.endpoints is not None:
            if isinstance(self.endpoints, str):
                raise ValueError("endpoints: a list of URLs, not one string (use endpoint=)")
            object.__setattr__(self, "endpoints", tuple(self.endpoints))
        if self.ca_bundle is not None:
            object.__setattr__(self, "ca_bundle", os.fspath(self.ca_bundle))

    def client(self) -> Any:
        """A new ``sluice.Client`` with these settings."""
        return _client(self)


def _client(config: Config) -> Any:
    """What an unpickled ``Client`` is rebuilt with."""
    from ._native import Client

    return Client(config=config)
