"""s3dlio's URI forms, as sluice's.

s3dlio names an Azure blob ``az://ACCOUNT/CONTAINER/KEY`` (or
``https://ACCOUNT.blob.core.windows.net/CONTAINER/KEY``), the account in the URI; sluice, as
fsspec, object_store and MLPerf Storage's own configurations, ``az://CONTAINER/KEY`` with the
account configured (``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT`` or the
connection string's ``AccountName``). Both forms are read here:

- ``az://A/B/KEY`` where ``A`` is the configured account: s3dlio's form, read as container
  ``B``;
- with no account configured: s3dlio's form too, and ``A`` becomes the account (as s3dlio
  takes it from the URI);
- otherwise ``A`` is the container.

A listing of a URI in s3dlio's form answers in that form. ``gcs://`` is ``gs://``.
"""

from __future__ import annotations

import os
from typing import List, Optional

_BLOB_HOST = ".blob.core.windows.net"


def _configured_account() -> Optional[str]:
    for name in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"):
        v = os.environ.get(name, "").strip()
        if v:
            return v
    cs = os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "")
    for part in cs.split(";"):
        k, _, v = part.partition("=")
        if k.strip().lower() == "accountname" and v.strip():
            return v.strip()
    if os.environ.get("AZURE_STORAGE_USE_EMULATOR", "").strip().lower() in ("1", "true", "yes"):
        return "devstoreaccount1"
    return None


def _account_form(uri: str) -> Optional[str]:
    """The account of ``uri`` when it is in s3dlio's account form, else None."""
    if uri.startswith("https://"):
        host, _, _ = uri[len("https://") :].partition("/")
        return host[: -len(_BLOB_HOST)] if host.endswith(_BLOB_HOST) else None
    if not uri.startswith(("az://", "azure://")):
        return None
    first, sep, rest = uri.partition("://")[2].partition("/")
    if not sep or not rest:
        return None
    configured = _configured_account()
    if configured is None:
        # s3dlio's form: the account comes from the URI (and is then configured).
        os.environ["AZURE_STORAGE_ACCOUNT_NAME"] = first
        return first
    return first if first == configured else None


def native(uri: str) -> str:
    """``uri`` as sluice names it."""
    if uri.startswith("gcs://"):
        return "gs://" + uri[len("gcs://") :]
    account = _account_form(uri)
    if account is None:
        return uri
    if uri.startswith("https://"):
        return "az://" + uri[len("https://") :].partition("/")[2]
    return "az://" + uri.partition("://")[2].partition("/")[2]


def natives(uris: List[str]) -> List[str]:
    return [native(u) for u in uris]


def shown(uris: List[str], like: str) -> List[str]:
    """sluice's ``uris`` in the form of ``like`` (the URI the caller gave)."""
    account = _account_form(like)
    if account is None:
        if like.startswith("gcs://"):
            return ["gcs://" + u[len("gs://") :] for u in uris]
        return uris
    prefix = (
        f"https://{account}{_BLOB_HOST}/" if like.startswith("https://") else f"az://{account}/"
    )
    return [prefix + u[len("az://") :] if u.startswith("az://") else u for u in uris]
