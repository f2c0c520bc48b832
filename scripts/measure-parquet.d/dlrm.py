"""dlrm_b200's parquet layout (MLPerf Storage v3.0, configs/dlio/workload/dlrm_b200.yaml) and
three ways to read its projected row groups; used by scripts/measure-parquet.

    python dlrm.py write URI ROW_GROUPS     upload a file (sluice, from the environment)
    python dlrm.py read READER URI          rows/s reading every row group, 4 threads
    python dlrm.py bytes ROW_GROUPS         bytes each reader fetches ÷ selected chunk bytes,
                                            against an in-process test server

Readers: sluice (sluice.parquet, the selected chunks), sluice-span (one GET per row group
from its first selected chunk to its last, as sluice read before), pyarrow (pyarrow's S3
filesystem, ParquetFile.read_row_group with the columns).
"""

import io
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# The config's 200 columns in order (h float16, f float32, d float64, b int8: 761 B a row)
# and the 40 it marks `read: true`.
DTYPES = (
    "hhddfhfbhbffdfbhfffhddddhffhhfdfdfhhdbbbhfhfdbdddffbbfffbfhfdhdbfhbfhfhfhffdhbfdbbffhbhbf"
    "bffhfddfhbhhdhfdhhfdfddbhhbbdfbhhbbbhbbfbhfdhhdhfddhfbbdfdfddbbbddffbfhfhfhdhdhfbdhbdbbbbhh"
    "bdddhdbbhfdbdfdffddh"
)
READ = [11, 17, 18, 20, 25, 31, 41, 43, 49, 53, 58, 59, 67, 68, 71, 74, 75, 88, 90, 91, 92, 93,
        94, 96, 97, 116, 117, 137, 141, 147, 154, 155, 158, 160, 162, 169, 180, 186, 189, 195]
ROWS = 6144  # row_group_size
THREADS = 4  # reader.read_threads
NAMES = [f"feature_{i:03}" for i in range(200)]
SELECTED = [NAMES[i] for i in READ]


def table(row_groups):
    import numpy as np
    import pyarrow as pa

    kinds = {"h": np.float16, "f": np.float32, "d": np.float64, "b": np.int8}
    rng = np.random.default_rng(0)
    n = ROWS * row_groups
    cols = {}
    for name, k in zip(NAMES, DTYPES):
        raw = rng.integers(0, 256, n * np.dtype(kinds[k]).itemsize, dtype=np.uint8)
        cols[name] = raw.view(kinds[k])
    return pa.table(cols)


def parquet_bytes(row_groups):
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    # Uncompressed, no dictionaries or statistics: 761 B a row, as DLIO writes it.
    pq.write_table(table(row_groups), buf, row_group_size=ROWS, compression="none",
                   use_dictionary=False, write_statistics=False)
    return buf.getvalue()


def selected_bytes(data):
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    return sum(meta.row_group(rg).column(i).total_compressed_size
               for rg in range(meta.num_row_groups) for i in READ)


def reader(kind, uri, endpoint=None):
    """A function of one row group index -> rows read, with the file's footer read first."""
    if kind in ("sluice", "sluice-span"):
        import pyarrow as pa
        import sluice
        import sluice.parquet

        client = sluice.Client(endpoint=endpoint) if endpoint else None
        groups = len(sluice.parquet.row_groups(uri, client=client))
        coalesce = 1 << 62 if kind == "sluice-span" else None

        def read(rg):
            ipc = sluice.parquet.read_ipc(uri, SELECTED, [rg], coalesce=coalesce, client=client)
            return pa.ipc.open_stream(pa.py_buffer(memoryview(ipc))).read_all().num_rows

        return read, groups
    import pyarrow.fs
    import pyarrow.parquet as pq

    ep = endpoint or os.environ["AWS_ENDPOINT_URL_S3"]
    fs = pyarrow.fs.S3FileSystem(endpoint_override=ep.split("://")[1], scheme="http",
                                 access_key=os.environ["AWS_ACCESS_KEY_ID"],
                                 secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                                 region="us-east-1")
    path = uri[len("s3://"):]
    local = threading.local()

    def file():
        if not hasattr(local, "f"):
            local.f = pq.ParquetFile(fs.open_input_file(path))
        return local.f

    groups = file().metadata.num_row_groups
    # Every thread's footer before the clock, as the sluice rows cache theirs.
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda _: file(), range(THREADS * 4)))
    return (lambda rg: file().read_row_group(rg, columns=SELECTED).num_rows), groups


def timed(kind, uri):
    """rows/s, the calls' p50 and p90 in ms, and the process's CPU seconds per second."""
    import resource

    read, groups = reader(kind, uri)
    calls = []

    def one(rg):
        t = time.perf_counter()
        n = read(rg)
        calls.append(time.perf_counter() - t)
        return n

    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage.ru_utime + usage.ru_stime
    t = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        rows = sum(pool.map(one, range(groups)))
    s = time.perf_counter() - t
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    assert rows == groups * ROWS, f"{kind} read {rows} rows of {groups * ROWS}"
    calls.sort()
    p = lambda q: calls[min(len(calls) - 1, int(q * len(calls)))] * 1000  # noqa: E731
    return rows / s, p(0.5), p(0.9), cpu / s


def main():
    mode = sys.argv[1]
    if mode == "write":
        import sluice

        uri, groups = sys.argv[2], int(sys.argv[3])
        data = parquet_bytes(groups)
        sluice.put(uri, data)
        print(f"{len(data)} bytes, {selected_bytes(data)} selected")
    elif mode == "read":
        rate, p50, p90, busy = timed(sys.argv[2], sys.argv[3])
        print(f"{rate:.0f} {p50:.1f} {p90:.1f} {busy:.2f}")
    elif mode == "bytes":
        from sluice.testing import TestServer, environment

        data = parquet_bytes(int(sys.argv[2]))
        want = selected_bytes(data)
        with TestServer() as s, environment(s):
            s.insert("dlrm.parquet", data)
            uri = f"s3://{s.bucket}/dlrm.parquet"
            for kind in ("sluice", "sluice-span", "pyarrow"):
                read, groups = reader(kind, uri, s.endpoint)
                before, gets = s.stats()["bytes_sent"], s.gets
                with ThreadPoolExecutor(THREADS) as pool:
                    list(pool.map(read, range(groups)))
                got, gets = s.stats()["bytes_sent"] - before, s.gets - gets
                print(f"{kind:12} fetched {got:>11} B  selected {want:>11} B  ratio {got / want:.3f}"
                      f"  GETs per row group {gets / groups:.1f}")


if __name__ == "__main__":
    main()
