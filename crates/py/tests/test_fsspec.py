"""``sluice://`` through fsspec, and what reads through it: pyarrow and pandas."""

import pickle
import sys

import pytest

fsspec = pytest.importorskip("fsspec")
import sluice  # noqa: E402
from sluice.fsspec import SluiceFileSystem  # noqa: E402  (registers the protocol)
from sluice.testing import pattern  # noqa: E402


@pytest.fixture
def fs(server):
    return SluiceFileSystem(endpoint=server.endpoint, skip_instance_cache=True)


def test_files_listing_and_ranges(server, fs, prefix):
    base = f"{server.bucket}/{prefix}"
    data = pattern(base + "a.bin", 300_000)
    fs.pipe_file(f"sluice://{base}a.bin", data)
    fs.pipe_file(f"sluice://{base}sub/b.bin", b"bb")
    with fsspec.open(f"sluice://{base}a.bin", "rb", endpoint=server.endpoint) as f:
        assert f.read() == data
    assert fs.cat_file(base + "a.bin", start=10, end=20) == data[10:20]
    assert fs.cat_file(base + "a.bin", start=-5) == data[-5:]
    assert sorted(fs.ls(base, detail=False)) == [base + "a.bin", base + "sub"]
    info = {e["name"]: e for e in fs.ls(base)}
    assert info[base + "a.bin"]["size"] == 300_000 and info[base + "sub"]["type"] == "directory"
    assert fs.info(base + "a.bin")["type"] == "file"
    assert fs.info(base + "sub")["type"] == "directory"
    assert fs.find(base) == [base + "a.bin", base + "sub/b.bin"]
    assert fs.exists(base + "sub/b.bin") and not fs.exists(base + "nope")
    with pytest.raises(FileNotFoundError, match="nope"):
        fs.info(base + "nope")
    with fs.open(base + "w.bin", "wb") as f:
        f.write(b"written")
    assert fs.cat_file(base + "w.bin") == b"written"
    fs.rm(base + "w.bin")
    assert not fs.exists(base + "w.bin")
    # A filesystem crosses processes as its settings.
    again = pickle.loads(pickle.dumps(fs))
    assert again.config == fs.config and again.cat_file(base + "sub/b.bin") == b"bb"


def test_pyarrow_and_pandas_read_parquet_through_it(server, fs, prefix):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow.dataset as ds

    table = pa.table({"x": list(range(10_000)), "y": [f"row{i}" for i in range(10_000)]})
    path = f"{server.bucket}/{prefix}t.parquet"
    with fs.open(path, "wb") as f:
        pq.write_table(table, f, row_group_size=1000)
    assert pq.read_table(path, filesystem=fs).equals(table)
    assert (
        ds.dataset(f"{server.bucket}/{prefix}", filesystem=fs, format="parquet").to_table().num_rows
        == 10_000
    )
    pd = pytest.importorskip("pandas")
    df = pd.read_parquet(f"sluice://{path}", storage_options={"endpoint": server.endpoint})
    assert len(df) == 10_000 and df["y"].iloc[-1] == "row9999"


def test_the_protocol_is_declared_as_an_entry_point():
    import pathlib

    tomllib = (
        pytest.importorskip("tomllib")
        if sys.version_info >= (3, 11)
        else pytest.importorskip("tomli")
    )
    pyproject = pathlib.Path(__file__).parents[1] / "pyproject.toml"
    specs = tomllib.loads(pyproject.read_text())["project"]["entry-points"]["fsspec.specs"]
    assert specs == {"sluice": "sluice.fsspec:SluiceFileSystem"}
    assert fsspec.get_filesystem_class("sluice") is SluiceFileSystem


def test_bad_options_are_named(server):
    with pytest.raises(ValueError, match="not both"):
        SluiceFileSystem(config=sluice.Config(), endpoint=server.endpoint, skip_instance_cache=True)
    with pytest.raises(ValueError, match="bucket"):
        SluiceFileSystem(endpoint=server.endpoint, skip_instance_cache=True).cat_file("sluice://")


def test_modes_modified_and_mkdir_as_documented(server, fs, prefix):
    base = f"{server.bucket}/{prefix}"
    fs.pipe_file(base + "x", b"1")
    with pytest.raises(FileExistsError):
        fs.pipe_file(base + "x", b"2", mode="create")
    fs.pipe_file(base + "x", b"3", mode="overwrite")
    assert fs.cat_file(base + "x") == b"3"
    with pytest.raises(FileExistsError):
        fs.open(base + "x", "xb")
    with pytest.raises(ValueError, match="appended"):
        fs.open(base + "x", "ab")
    m = fs.modified(base + "x")
    assert m.tzinfo is not None and abs(m.timestamp() - fs.info(base + "x")["mtime"]) < 1
    with pytest.raises(IsADirectoryError):
        fs.modified(server.bucket + "/" + prefix.rstrip("/"))
    # No bucket is ever created; a prefix needs nothing.
    with pytest.raises(FileExistsError, match=server.bucket):
        fs.mkdir(server.bucket)
    fs.makedirs(server.bucket, exist_ok=True)
    fs.mkdir(base + "new/dir")
    with pytest.raises(FileNotFoundError, match="creates none"):
        fs.mkdir("no-such-bucket-here")
