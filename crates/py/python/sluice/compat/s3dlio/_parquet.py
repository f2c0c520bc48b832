"""The parquet calls of :mod:`sluice.compat.s3dlio` (DLIO's dlrm workload)."""

from __future__ import annotations

import bisect
import threading
from typing import Dict, List, Optional, Sequence, Tuple

from sluice import _native

from ._config import _client
from ._errors import _errors
from ._objects import BytesView, _builtin_list, _view
from ._writers import _MIB

# --- parquet (DLIO's dlrm workload)

_FOOTER_CAP = 4 * _MIB


@_errors
def parquet_get_rg(
    uri: str,
    rg_idx: int,
    col_indices: Optional[Sequence[int]] = None,
    footer_cap: int = _FOOTER_CAP,
    decode: str = "arrow",
) -> BytesView:
    """Row group ``rg_idx`` (its ``col_indices`` leaf columns, or all): an Arrow IPC stream
    with ``decode="arrow"``, else the raw bytes of its column chunks."""
    cols = None if col_indices is None else _builtin_list(col_indices)
    return _view(_native.parquet_get_rg(uri, rg_idx, cols, footer_cap, decode, client=_client()))


@_errors
def parquet_rg_row_offsets(uri: str) -> List[int]:
    """[0, rows of group 0, + rows of group 1, ..., total rows]."""
    out = [0]
    for rows, _ in _native.parquet_row_groups(uri, _FOOTER_CAP, client=_client()):
        out.append(out[-1] + rows)
    return out


def parquet_cache_invalidate(uri: str) -> None:
    _native.parquet_cache_invalidate(uri)


def parquet_cache_clear() -> None:
    _native.parquet_cache_clear()


def parquet_cache_len() -> int:
    return _native.parquet_cache_len()


@_errors
def generate_and_write_parquet_schema_streaming(
    uri: str, columns: Sequence[Tuple[str, int]], rows_per_rg: int, num_row_groups: int
) -> None:
    """A parquet file of float32 columns (``(name, 1)`` scalar, ``(name, n)`` a list of n)
    with random values, uploaded row group by row group."""
    _native.parquet_write_random(
        uri, [(str(n), int(w)) for n, w in columns], rows_per_rg, num_row_groups, client=_client()
    )


class PyParquetIndex:
    """Row groups of parquet files: which one holds a sample, where its bytes are, and which
    were fetched in an epoch. Footers are read with ranged GETs, ``batch_size`` at a time."""

    def __init__(self, col_indices: Optional[Sequence[int]] = None, footer_cap: int = _FOOTER_CAP):
        self._cols = None if col_indices is None else _builtin_list(col_indices)
        self._footer_cap = footer_cap
        self._files: Dict[str, Tuple[List[int], List[Tuple[int, int]]]] = {}
        self._fetched: set = set()
        self._lock = threading.Lock()

    def _index_one(self, uri: str) -> Tuple[List[int], List[Tuple[int, int]]]:
        groups = _native.parquet_row_groups(uri, self._footer_cap, client=_client())
        starts, ranges = [0], []
        for rows, chunks in groups:
            picked = (
                chunks if self._cols is None else [chunks[i] for i in self._cols if i < len(chunks)]
            )
            lo = min((o for o, _ in picked), default=0)
            hi = max((o + n for o, n in picked), default=0)
            ranges.append((lo, hi - lo))
            starts.append(starts[-1] + rows)
        return starts, ranges

    @_errors
    def ensure_indexed(self, uris: Sequence[str], epoch: int = 1, batch_size: int = 16) -> None:
        todo = [u for u in dict.fromkeys(uris) if u not in self._files]
        if not todo:
            return
        # Here, not at import: concurrent.futures (and the logging it imports) costs every
        # new DataLoader worker ~5 ms of CPU, and only parquet readers index.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(batch_size, len(todo)))) as pool:
            for uri, entry in zip(todo, pool.map(self._index_one, todo)):
                with self._lock:
                    self._files[uri] = entry

    def _entry(self, uri: str) -> Tuple[List[int], List[Tuple[int, int]]]:
        try:
            return self._files[uri]
        except KeyError:
            raise RuntimeError(f"{uri}: not indexed; call ensure_indexed first") from None

    def rg_for_sample(self, uri: str, sample_idx: int) -> int:
        """The row group holding ``sample_idx``. Past the last row, the last row group, and
        before the first, the first, as s3dlio answers: DLIO's reader probes the row just
        past the first row group's estimated end, which for a file of one row group (flux)
        is past the file's last row."""
        starts, _ = self._entry(uri)
        if len(starts) == 1:
            raise RuntimeError(f"{uri}: the file has no row groups")
        return min(max(bisect.bisect_right(starts, sample_idx) - 1, 0), len(starts) - 2)

    def rg_range(self, uri: str, rg_idx: int) -> Tuple[int, int]:
        _, ranges = self._entry(uri)
        if not 0 <= rg_idx < len(ranges):
            raise RuntimeError(
                f"rg_idx {rg_idx} out of range for '{uri}' ({len(ranges)} row groups)"
            )
        return ranges[rg_idx]

    def rg_lookup(self, uri: str, sample_idx: int) -> Tuple[int, int, int]:
        rg = self.rg_for_sample(uri, sample_idx)
        return (rg, *self.rg_range(uri, rg))

    def was_fetched(self, uri: str, rg_idx: int, epoch: int) -> bool:
        return (uri, rg_idx, epoch) in self._fetched

    def mark_fetched(self, uri: str, rg_idx: int, epoch: int) -> None:
        with self._lock:
            self._fetched.add((uri, rg_idx, epoch))

    def check_and_mark(self, uri: str, rg_idx: int, epoch: int) -> bool:
        """True when it was already fetched in this epoch; marks it either way."""
        with self._lock:
            key = (uri, rg_idx, epoch)
            seen = key in self._fetched
            self._fetched.add(key)
            return seen

    def is_indexed(self, uri: str) -> bool:
        return uri in self._files

    def file_rg_count(self, uri: str) -> Optional[int]:
        entry = self._files.get(uri)
        return None if entry is None else len(entry[1])

    def __len__(self) -> int:
        return sum(len(r) for _, r in self._files.values())

    def file_count(self) -> int:
        return len(self._files)

    def invalidate_uri(self, uri: str) -> None:
        with self._lock:
            self._files.pop(uri, None)
            self._fetched = {k for k in self._fetched if k[0] != uri}
        _native.parquet_cache_invalidate(uri)

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self._fetched.clear()

    def __repr__(self) -> str:
        return f"PyParquetIndex(files={self.file_count()}, rgs={len(self)}, col_indices={self._cols}, footer_cap={self._footer_cap})"
