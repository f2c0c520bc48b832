"""Parquet column projection over object storage: read only the column chunks you select.

    import sluice.parquet
    table = sluice.parquet.read_table("s3://bucket/x.parquet", columns=["a", "b"], row_groups=[3])

The file's footer is read once per process (one ranged GET of its last 4 MiB, cached by URI;
``invalidate`` after rewriting a file). Then only the chunks of the selected columns of the
selected row groups are fetched, all at once, each pinned to the footer's version: chunks are
merged into one request only where the bytes between them stay within a tenth of the bytes
selected, so a projection of a quarter of the columns reads a quarter of the file, not the span
from its first selected chunk to its last. Decoding runs in Rust, off the GIL; the result
crosses as one Arrow IPC stream that pyarrow reads without a copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Union

from sluice import _native

if TYPE_CHECKING:
    import pyarrow

    from sluice._native import Client, Object

__all__ = ["read_ipc", "read_table", "row_groups", "invalidate"]

Column = Union[int, str]


def read_ipc(
    uri: str,
    columns: Optional[Sequence[Column]] = None,
    row_groups: Optional[Sequence[int]] = None,
    *,
    coalesce: Optional[int] = None,
    client: Optional[Client] = None,
) -> Object:
    """The selected row groups (all when None) restricted to ``columns`` (leaf indices or
    dotted names; all when None) as an Arrow IPC stream: the rows in row-group order, in
    record batches of up to the largest group's rows (a batch may straddle two groups), the
    columns in the file's order.
    ``coalesce``: read through gaps of at most this many bytes between chunks (None: only
    within a tenth of the bytes selected)."""
    cols = None if columns is None else list(columns)
    rgs = None if row_groups is None else [int(i) for i in row_groups]
    return _native.parquet_read(uri, rgs, cols, coalesce, client=client)


def read_table(
    uri: str,
    columns: Optional[Sequence[Column]] = None,
    row_groups: Optional[Sequence[int]] = None,
    *,
    coalesce: Optional[int] = None,
    client: Optional[Client] = None,
) -> pyarrow.Table:
    """``read_ipc`` as a ``pyarrow.Table`` (needs pyarrow; its buffers point into the bytes
    fetched, no copy)."""
    import pyarrow as pa

    data = read_ipc(uri, columns, row_groups, coalesce=coalesce, client=client)
    return pa.ipc.open_stream(pa.py_buffer(memoryview(data))).read_all()


def row_groups(
    uri: str, *, client: Optional[Client] = None
) -> List[Tuple[int, List[Tuple[int, int]]]]:
    """Every row group of the file: (rows, [(offset, length) of each leaf column chunk])."""
    return _native.parquet_row_groups(uri, client=client)


def invalidate(uri: Optional[str] = None) -> None:
    """Forgets the cached footer of ``uri`` (every footer when None)."""
    if uri is None:
        _native.parquet_cache_clear()
    else:
        _native.parquet_cache_invalidate(uri)
