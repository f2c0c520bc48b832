"""sluice: read training data from S3-compatible object storage at network speed.

Configuration comes from the standard AWS environment (AWS_ENDPOINT_URL_S3, AWS_REGION,
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a profile, AWS_CA_BUNDLE, ...); the client
stack from S3_BACKEND (hyper, awssdk or objectstore; default hyper).

    import sluice
    ds = sluice.Dataset.from_prefix("s3://bucket/train/")
    for obj in sluice.Loader(ds, prefetch=16):
        arr = numpy.frombuffer(obj, dtype=numpy.uint8)   # no copy

Importing sluice does not import torch; `sluice.torch` does.
"""

from . import _logging, _native, _oplog
from ._config import Config
from ._io import ObjectReader, ObjectWriter, open
from ._native import (
    Client,
    Dataset,
    ListEntry,
    Listing,
    Loader,
    Object,
    S3Error,
    Writer,
    backends,
    buffer_pools,
    delete,
    endpoint_stats,
    exists,
    get,
    get_many,
    get_range,
    get_ranges,
    list,
    list_objects,
    put,
    settings,
    stat,
    writer,
)
from ._types import (
    BufferPoolStats,
    Congestion,
    EndpointStats,
    LoaderStats,
    StatResult,
    WriteResult,
)

__all__ = [
    "Client",
    "Config",
    "Dataset",
    "ListEntry",
    "Listing",
    "Loader",
    "LoaderStats",
    "Object",
    "ObjectReader",
    "ObjectWriter",
    "S3Error",
    "StatResult",
    "EndpointStats",
    "Congestion",
    "WriteResult",
    "Writer",
    "backends",
    "buffer_pools",
    "BufferPoolStats",
    "delete",
    "endpoint_stats",
    "settings",
    "exists",
    "get",
    "get_many",
    "get_range",
    "get_ranges",
    "list",
    "list_objects",
    "open",
    "put",
    "stat",
    "writer",
]


def _version() -> str:
    """The installed distribution's version (maturin takes it from Cargo.toml: one source);
    else the extension's own, if it has one; else "0+unknown" (a source checkout on
    sys.path, as scripts/py-dev-install makes, is not an installed distribution)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sluice")
    except PackageNotFoundError:
        return str(getattr(_native, "__version__", "0+unknown"))


def __getattr__(name: str) -> str:
    # Looked up on first use: importlib.metadata costs a new process ~25 ms of CPU at import,
    # and DataLoader workers (new processes every DLIO epoch) never ask.
    if name == "__version__":
        global __version__
        __version__ = _version()
        return __version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_logging.start()

_oplog.install()
