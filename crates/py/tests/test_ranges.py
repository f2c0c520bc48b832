"""Coalesced range reads (``get_ranges``) and the Parquet projection built on them, over
real ranged GETs to the test server."""

import io

import pytest
import sluice


def _object(server, key, n):
    data = bytes((i * 7) % 251 for i in range(n))
    server.insert(key, data)
    return f"s3://{server.bucket}/{key}", data


def test_ranges_come_back_in_order_from_few_requests(server, client, prefix):
    uri, data = _object(server, f"{prefix}obj", 3 << 20)
    asked = [(1_000_000, 1_000_100), (10, 20), (15, 40), (7, 7), (3_100_000, 5_000_000)]
    gets = server.gets
    got = client.get_ranges(uri, asked)
    # 10..40 and 1,000,000..1,000,100 lie within 1 MiB: one request; the last another.
    assert server.gets - gets == 2
    assert [bytes(o) for o in got] == [data[s:e] for s, e in asked], "clipped at the end"
    assert memoryview(got[0]).readonly and len(got[3]) == 0
    gets = server.gets
    got = sluice.get_ranges(uri, [(10, 20), (2_000_000, 2_000_100)], coalesce=0)
    assert server.gets - gets == 2, "coalesce=0 merges only ranges that touch"
    assert bytes(got[1]) == data[2_000_000:2_000_100]
    assert client.get_ranges(uri, []) == []


@pytest.mark.parametrize("bad", [(-1, 5), (9, 3)])
def test_a_negative_or_reversed_range_is_a_value_error(server, client, prefix, bad):
    uri, _ = _object(server, f"{prefix}obj", 100)
    with pytest.raises(ValueError, match=rf"\({bad[0]}, {bad[1]}\) is not a byte range"):
        client.get_ranges(uri, [(0, 10), bad])


def test_a_range_past_the_end_names_itself_and_the_size(server, client, prefix):
    uri, _ = _object(server, f"{prefix}obj", 100)
    with pytest.raises(ValueError, match=r"150\.\.160 starts at or past the end .*\(100 bytes\)"):
        client.get_ranges(uri, [(0, 10), (150, 160)])
    # Too large to hold: refused before any request, never an abort.
    with pytest.raises(ValueError, match="cannot allocate"):
        client.get_ranges(uri, [(0, 1 << 62)])


def test_ranges_of_a_pinned_version_refuse_another(server, client, prefix):
    uri, data = _object(server, f"{prefix}obj", 1000)
    etag = client.stat(uri)["etag"]
    assert bytes(client.get_ranges(uri, [(0, 4)], etag=etag)[0]) == data[:4]
    server.insert(f"{prefix}obj", b"y" * 1000)
    with pytest.raises(Exception, match="changed|412|Precondition"):
        client.get_ranges(uri, [(0, 4)], etag=etag)


# --- sluice.parquet: the chunks of the selected columns, and only those


def _dlrm_like(row_groups=3, rows=2048):
    """A file shaped as v3.0's dlrm_b200: many columns of mixed widths, a scattered quarter
    of them selected (here 40 columns, 10 selected)."""
    pa = pytest.importorskip("pyarrow")
    import numpy as np

    rng = np.random.default_rng(7)
    kinds = [np.float16, np.float32, np.float64, np.int8]
    cols = {
        f"feature_{i:03}": rng.integers(0, 100, rows * row_groups).astype(kinds[i % 4])
        for i in range(40)
    }
    buf = io.BytesIO()
    import pyarrow.parquet as pq

    pq.write_table(pa.table(cols), buf, row_group_size=rows, compression="none")
    selected = [f"feature_{i:03}" for i in (1, 5, 6, 11, 17, 18, 20, 25, 31, 38)]
    return buf.getvalue(), selected


def test_a_projection_reads_its_chunks_and_what_pyarrow_reads(server, prefix):
    pq = pytest.importorskip("pyarrow.parquet")
    import sluice.parquet

    data, selected = _dlrm_like()
    key = f"{prefix}dlrm.parquet"
    server.insert(key, data)
    uri = f"s3://{server.bucket}/{key}"
    sluice.parquet.invalidate()
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    chunks = sum(
        meta.row_group(rg).column(names.index(c)).total_compressed_size
        for rg in (0, 2)
        for c in selected
    )
    sluice.parquet.row_groups(uri)  # the footer, once
    sent = server.stats()["bytes_sent"]
    got = sluice.parquet.read_table(uri, columns=selected, row_groups=[0, 2])
    fetched = server.stats()["bytes_sent"] - sent
    want = pq.ParquetFile(io.BytesIO(data)).read_row_groups([0, 2], columns=selected)
    assert got.equals(want)
    assert chunks <= fetched <= 1.1 * chunks, (fetched, chunks)
    # By index too, and every column when none are named.
    idx = [names.index(c) for c in selected[:2]]
    assert sluice.parquet.read_table(uri, columns=idx, row_groups=[1]).column_names == selected[:2]
    assert sluice.parquet.read_table(uri).num_rows == 3 * 2048


def test_a_projection_names_the_file_and_the_column_at_fault(server, prefix):
    pytest.importorskip("pyarrow")
    import sluice.parquet

    data, _ = _dlrm_like(row_groups=1, rows=16)
    key = f"{prefix}p.parquet"
    server.insert(key, data)
    uri = f"s3://{server.bucket}/{key}"
    with pytest.raises(ValueError, match=r'no column named "nope" in .*p\.parquet'):
        sluice.parquet.read_ipc(uri, columns=["nope"])
    with pytest.raises(
        ValueError, match=r"column 99 does not exist in .*p\.parquet \(40 columns\)"
    ):
        sluice.parquet.read_ipc(uri, columns=[99])
    with pytest.raises(ValueError, match=r"5 out of range .*\(1 row groups\)"):
        sluice.parquet.read_ipc(uri, row_groups=[5])
    server.insert(f"{prefix}not.parquet", b"not parquet, not at all, no")
    with pytest.raises(Exception, match=r"not\.parquet.*not a readable parquet file"):
        sluice.parquet.read_ipc(f"s3://{server.bucket}/{prefix}not.parquet")
