"""The parquet calls of s3dlio that DLIO's dlrm workload makes, over real ranged GETs."""

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sluice.compat import s3dlio


def test_write_index_and_read_row_groups(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}train.parquet"
    s3dlio.generate_and_write_parquet_schema_streaming(uri, [("label", 1), ("dense", 13)], 1000, 3)
    data = bytes(s3dlio.get(uri))
    table = pq.read_table(io.BytesIO(data))  # pyarrow reads what we wrote
    assert table.num_rows == 3000 and table.column_names == ["label", "dense"]
    assert table.schema.field("dense").type == pa.list_(
        pa.field("element", pa.float32(), nullable=False), 13
    )
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    assert meta.num_row_groups == 3

    s3dlio.parquet_cache_clear()
    idx = s3dlio.PyParquetIndex(col_indices=None, footer_cap=1 << 20)
    gets = server.gets
    idx.ensure_indexed([uri], epoch=1, batch_size=4)
    assert server.gets - gets == 1, "the footer in one ranged GET"
    idx.ensure_indexed([uri], epoch=2, batch_size=4)
    assert server.gets - gets == 1, "indexed files are skipped"
    assert (
        idx.is_indexed(uri)
        and idx.file_rg_count(uri) == 3
        and len(idx) == 3
        and idx.file_count() == 1
    )
    assert idx.file_rg_count(uri + "x") is None
    assert s3dlio.parquet_rg_row_offsets(uri) == [0, 1000, 2000, 3000]
    rg, off, length = idx.rg_lookup(uri, 1500)
    assert rg == 1 and (off, length) == idx.rg_range(uri, 1)
    col0 = meta.row_group(1).column(0)
    assert off == min(col0.dictionary_page_offset or col0.data_page_offset, col0.data_page_offset)
    assert not idx.check_and_mark(uri, 1, epoch=1) and idx.check_and_mark(uri, 1, epoch=1)
    assert idx.was_fetched(uri, 1, 1) and not idx.was_fetched(uri, 1, 2)
    # Rows past the end fall in the last row group, before the start in the first, as in
    # s3dlio: DLIO's reader probes row `rows // row_groups`, past the end of a one-group file.
    assert [idx.rg_for_sample(uri, s) for s in (-1, 0, 999, 1000, 2999, 3000, 10**9)] == [
        0,
        0,
        0,
        1,
        2,
        2,
        2,
    ]

    # A row group decoded to Arrow IPC: the same rows pyarrow reads from the file.
    gets = server.gets
    ipc = s3dlio.parquet_get_rg(uri, 2, [1], 1 << 20, "arrow")
    assert server.gets - gets == 1, "one ranged GET for the row group (footer cached)"
    got = pa.ipc.open_stream(bytes(ipc)).read_all()
    want = pq.ParquetFile(io.BytesIO(data)).read_row_group(2, columns=["dense"])
    assert got.num_rows == 1000 and got.column_names == ["dense"]

    # Random float bits include NaNs: compare the values' bytes.
    def values(t):
        return pa.concat_arrays(t.column("dense").chunks).values.to_numpy().tobytes()

    assert values(got) == values(want) and len(values(got)) == 1000 * 13 * 4
    raw = s3dlio.parquet_get_rg(uri, 1, None, 1 << 20, "raw")
    assert bytes(raw) == data[off : off + length]
    with pytest.raises(RuntimeError, match="out of range"):
        s3dlio.parquet_get_rg(uri, 3)


def test_reads_files_pyarrow_wrote_with_snappy(server, prefix):
    table = pa.table(
        {"x": pa.array(range(500), pa.int64()), "y": pa.array([float(i) / 3 for i in range(500)])}
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=200, compression="snappy")
    uri = f"s3://{server.bucket}/{prefix}pyarrow.parquet"
    server.insert(uri.split("/", 3)[3], buf.getvalue())
    idx = s3dlio.PyParquetIndex()
    idx.ensure_indexed([uri])
    assert idx.file_rg_count(uri) == 3 and idx.rg_lookup(uri, 450)[0] == 2
    got = pa.ipc.open_stream(bytes(s3dlio.parquet_get_rg(uri, 1))).read_all()
    assert got.column("x").to_pylist() == list(range(200, 400))


def test_not_parquet_is_a_clear_error(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}not.parquet"
    server.insert(uri.split("/", 3)[3], b"this is not a parquet file at all")
    with pytest.raises(RuntimeError, match="not a readable parquet file") as e:
        s3dlio.PyParquetIndex().ensure_indexed([uri])
    assert uri in str(e.value)


def test_a_file_that_shrinks_after_its_head_is_a_clear_error(server, prefix):
    """HEAD says one size; by the ranged GET of the footer the object is 4 bytes long. The
    footer is read pinned to HEAD's ETag, so the new version is refused as another version
    (were it not pinned, the clipped range would be: "got 4"). An error naming the file,
    never a panic."""
    import threading

    key = f"{prefix}shrinks.parquet"
    uri = f"s3://{server.bucket}/{key}"
    server.insert(key, b"x" * 4096)
    s3dlio.parquet_cache_clear()
    # HEAD and GET each wait 2 s before they are answered; the object shrinks while the GET
    # waits (HEAD answered at ~2 s, GET answered at ~4 s).
    server.inject("latency", count=2, seconds=2.0)
    shrink = threading.Timer(3.0, lambda: server.insert(key, b"PAR1"))
    shrink.start()
    try:
        with pytest.raises(RuntimeError, match="changed while being read") as e:
            s3dlio.PyParquetIndex().ensure_indexed([uri])
        assert uri in str(e.value)
    finally:
        shrink.join()
        server.clear_faults()
