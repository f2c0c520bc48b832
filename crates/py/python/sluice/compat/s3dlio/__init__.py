"""The s3dlio API that the MLPerf Storage benchmark (DLIO) and mlpstorage use, on sluice.

    from sluice.compat import s3dlio
    it = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), {"prefetch": 4}).items()
    while batch := it.collect_batch(7):
        total += sum(len(b) for b in batch)

To run an unmodified program that does ``import s3dlio`` — in every process it starts — use
the alias (nothing is installed under the name ``s3dlio``)::

    python -m sluice.compat.alias -m dlio_benchmark.main workload=unet3d ...
    sluice-dlio workload=unet3d ...

Behaviour follows s3dlio 0.10.0 (``__version__``, the API served), which DLIO's v3 snapshot
installs: ``get_many`` returns ``(uri, data)`` pairs in input order; ``list`` of a URI not
ending in ``/`` selects an exact name (and what lies below ``name/``) or a glob, never a bare
prefix, and ``pattern`` is searched in each URI relative to ``uri``; ``delete`` without
``recursive`` deletes exactly one key; ``get_range(uri, offset, 0)`` is empty; ``exists`` is
False on any error; ``stat`` has s3dlio's 16 keys; every error is a ``RuntimeError`` (the
classes below also keep their Python meaning, so ``except FileNotFoundError`` works too).
Unlike 0.10, ``MultipartUploadWriter.write`` copies what it is given before it returns, so a
caller may refill its buffer at once (mlpstorage's checkpoint writers do). Schemes:
``s3://``, ``az://``, ``gs://`` (or ``gcs://``), ``file://``, ``direct://``. Azure URIs may be
s3dlio's ``az://ACCOUNT/CONTAINER/KEY`` or ``az://CONTAINER/KEY`` with the account
configured (see ``_uris``); Azure and GCS read their clouds' own variables
(docs/configuration.md).

Configuration is read when the first call is made (DLIO sets variables after importing):
AWS_ENDPOINT_URL (s3dlio's variable; before AWS_ENDPOINT_URL_S3), S3DLIO_MAX_RETRY_ATTEMPTS
(attempts in total), S3DLIO_CONNECT_TIMEOUT_SECS, S3DLIO_OPERATION_TIMEOUT_SECS (bounds the
wait for a response), S3DLIO_RT_THREADS (I/O threads, at least one per CPU; only before the
first call of the process), S3DLIO_RANGE_THRESHOLD_MB (objects this large are read as parallel ranges),
S3DLIO_ENABLE_RANGE_OPTIMIZATION (0/false/no/off/disable(d) turn that off), S3DLIO_CHUNK_SIZE
(bytes per range), S3DLIO_PUT_VERIFY (check an object's size after a put).
"""

from __future__ import annotations

__version__ = "0.10.0"

# One private module per concern; every name is served from here. Private names that tests
# reach through this module: `_clients` is the client cache itself (cleared to make a new
# client), not a copy, and `_expand_template`.
from ._config import _clients as _clients
from ._config import configure_tokio_threads
from ._endpoints import (
    MultiEndpointStore,
    create_multi_endpoint_store,
    create_multi_endpoint_store_from_env,
    create_multi_endpoint_store_from_file,
    create_multi_endpoint_store_from_template,
)
from ._endpoints import _expand_template as _expand_template
from ._errors import (
    AccessDeniedError,
    ExportStillReferencedError,
    InvalidArgumentError,
    LengthMismatchError,
    LocalIOError,
    ObjectNotFoundError,
    RequestTimeoutError,
    StorageError,
    UnsupportedOperationError,
)
from ._loaders import PyBytesAsyncDataLoader, PyDataset
from ._objects import (
    BytesView,
    delete,
    exists,
    generate_npz_bytes,
    get,
    get_many,
    get_range,
    list,
    mkdir,
    put_bytes,
    put_bytes_async,
    put_many,
    put_many_async,
    stat,
)
from ._parquet import (
    PyParquetIndex,
    generate_and_write_parquet_schema_streaming,
    parquet_cache_clear,
    parquet_cache_invalidate,
    parquet_cache_len,
    parquet_get_rg,
    parquet_rg_row_offsets,
)
from ._writers import (
    MultipartUploadWriter,
    PyObjectWriter,
    PyWriterOptions,
    create_azure_writer,
    create_direct_filesystem_writer,
    create_filesystem_writer,
    create_s3_writer,
)

__all__ = [
    "BytesView",
    "PyDataset",
    "PyBytesAsyncDataLoader",
    "MultipartUploadWriter",
    "PyWriterOptions",
    "PyObjectWriter",
    "create_s3_writer",
    "create_filesystem_writer",
    "create_direct_filesystem_writer",
    "create_azure_writer",
    "create_multi_endpoint_store",
    "MultiEndpointStore",
    "configure_tokio_threads",
    "PyParquetIndex",
    "parquet_get_rg",
    "parquet_rg_row_offsets",
    "parquet_cache_invalidate",
    "parquet_cache_clear",
    "parquet_cache_len",
    "generate_and_write_parquet_schema_streaming",
    "get",
    "get_range",
    "get_many",
    "list",
    "mkdir",
    "stat",
    "exists",
    "put_bytes",
    "put_bytes_async",
    "put_many",
    "put_many_async",
    "create_multi_endpoint_store_from_template",
    "create_multi_endpoint_store_from_file",
    "create_multi_endpoint_store_from_env",
    "delete",
    "generate_npz_bytes",
    "ObjectNotFoundError",
    "AccessDeniedError",
    "RequestTimeoutError",
    "InvalidArgumentError",
    "StorageError",
    "LocalIOError",
    "LengthMismatchError",
    "UnsupportedOperationError",
    "ExportStillReferencedError",
]
