"""az:// and gs:// from Python: the native client, and the s3dlio module with s3dlio's URI
forms, against Azurite and fake-gcs-server (scripts/emulators; scripts/test starts them and
exports their variables, as a user sets them). Skipped, saying so, where they are not set."""

import os
import urllib.parse
import urllib.request
import uuid

import pytest
import sluice

AZURE = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
GCS = os.environ.get("SLUICE_FAKE_GCS_URL")
BUCKET = os.environ.get("SLUICE_CLOUD_BUCKET", "sluice")
needs_azure = pytest.mark.skipif(
    not AZURE, reason="Azurite is not running (scripts/emulators start; source its env)"
)
needs_gcs = pytest.mark.skipif(
    not GCS, reason="fake-gcs-server is not running (scripts/emulators start; source its env)"
)


@pytest.fixture
def run():
    """A prefix of this test's own."""
    return f"py-{uuid.uuid4().hex[:12]}/"


@needs_azure
def test_native_client_round_trip_on_azure(run):
    c = sluice.Client()
    base = f"az://{BUCKET}/{run}"
    data = os.urandom(3 << 20)
    c.put(base + "a.bin", data)
    assert bytes(c.get(base + "a.bin")) == data
    assert bytes(c.get_range(base + "a.bin", 100, 50)) == data[100:150]
    assert c.stat(base + "a.bin")["size"] == len(data)
    assert c.list(base, True) == [base + "a.bin"]
    ds = sluice.Dataset.from_prefix(base, client=c)
    with sluice.Loader(ds, client=c) as loader:
        got = [(o.uri, bytes(o)) for o in loader]
    assert got == [(base + "a.bin", data)]
    c.delete(base + "a.bin")
    with pytest.raises(FileNotFoundError, match="a.bin"):
        c.get(base + "a.bin")


@needs_azure
def test_s3dlio_module_reads_its_account_form_and_answers_in_it(run):
    import sluice.compat.s3dlio as s3dlio

    account = "devstoreaccount1"  # Azurite's, named in the connection string
    ours = f"az://{BUCKET}/{run}"
    theirs = f"az://{account}/{BUCKET}/{run}"
    s3dlio.put_bytes(theirs + "x.npz", b"npz!")
    assert s3dlio.list(theirs, recursive=True) == [theirs + "x.npz"]
    assert s3dlio.list(ours, recursive=True) == [ours + "x.npz"]
    blob_url = f"https://{account}.blob.core.windows.net/{BUCKET}/{run}x.npz"
    assert bytes(s3dlio.get(blob_url)) == b"npz!"
    assert s3dlio.stat(theirs + "x.npz")["size"] == 4
    w = s3dlio.create_azure_writer(theirs + "w.bin")
    w.write_chunk(b"abc")
    assert w.finalize() == (3, 3)
    assert [u for u, _ in s3dlio.get_many([ours + "w.bin", theirs + "x.npz"])] == [
        ours + "w.bin",
        theirs + "x.npz",
    ]
    s3dlio.delete(theirs, recursive=True)
    assert s3dlio.list(ours, recursive=True) == []


def _gcs_seed(key: str, data: bytes) -> None:
    """fake-gcs-server refuses object_store's XML PUT; its JSON upload API takes it."""
    name = urllib.parse.quote(key, safe="")
    url = f"{GCS}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={name}"
    urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=10)


@needs_gcs
def test_gcs_reads_lists_and_deletes(run):
    import sluice.compat.s3dlio as s3dlio

    data = os.urandom(1 << 20)
    _gcs_seed(run + "a.bin", data)
    c = sluice.Client()
    base = f"gs://{BUCKET}/{run}"
    assert bytes(c.get(base + "a.bin")) == data
    assert c.list(base, True) == [base + "a.bin"]
    assert s3dlio.list(f"gcs://{BUCKET}/{run}", recursive=True) == [f"gcs://{BUCKET}/{run}a.bin"]
    assert bytes(s3dlio.get_range(f"gcs://{BUCKET}/{run}a.bin", 10, 5)) == data[10:15]
    c.delete(base + "a.bin")
    assert c.list(base, True) == []
