"""``sluice.Config``: settings that pickle, rebuilt as a client wherever they land; unsigned
requests; profiles."""

import pickle
import socket
import sys

import pytest
import sluice
from sluice.testing import pattern


def dead_endpoint():
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d" % s.getsockname()[1]


def test_a_config_makes_a_client_and_a_client_pickles_as_its_config(server, prefix):
    [u] = server.fill(prefix, 1, 1000)
    cfg = sluice.Config(endpoint=server.endpoint, max_attempts=2, stall_timeout=5.0)
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    c = sluice.Client(config=cfg)
    assert c.config == cfg
    assert bytes(c.get(u)) == pattern(u.split("/", 3)[3], 1000)
    again = pickle.loads(pickle.dumps(c))
    assert isinstance(again, sluice.Client) and again is not c and again.config == cfg
    assert bytes(again.get(u)) == pattern(u.split("/", 3)[3], 1000)
    # Arguments win over the config's fields, which win over the environment.
    c = sluice.Client(endpoint=server.endpoint, config=sluice.Config(endpoint=dead_endpoint()))
    assert c.config.endpoint == server.endpoint and len(c.get(u)) == 1000
    assert sluice.Client(max_attempts=3).config == sluice.Config(max_attempts=3)
    # endpoint= and endpoints= are one choice: either given here replaces both of the config's.
    c = sluice.Client(endpoint=server.endpoint, config=sluice.Config(endpoints=[dead_endpoint()]))
    assert c.config.endpoints is None and len(c.get(u)) == 1000


def test_bad_settings_are_named(server):
    with pytest.raises(ValueError, match="max_attempts"):
        sluice.Client(config=sluice.Config(max_attempts=0))
    with pytest.raises(ValueError, match="stall_timeout"):
        sluice.Config(stall_timeout=-1.0).client()
    with pytest.raises(ValueError, match="endpoints"):
        sluice.Config(endpoints="http://one-string")
    with pytest.raises(ValueError, match="config.max_attempts"):
        sluice.Client(config=sluice.Config(max_attempts="three"))
    with pytest.raises(ValueError, match="client"):
        sluice.Loader(sluice.Dataset.from_uris([]), client=sluice.Client(), config=sluice.Config())


@pytest.mark.parametrize("backend", sluice.backends)
def test_unsigned_requests_read_a_public_bucket_and_nothing_else(server, client, backend):
    public = "s3://sluice-public/data/x.bin"
    client.put(public, b"open to all")  # signed: allowed to write
    anon = sluice.Client(endpoint=server.endpoint, unsigned=True, backend=backend)
    assert anon.config.unsigned
    assert bytes(anon.get(public)) == b"open to all"
    assert anon.stat(public)["size"] == 11
    assert anon.list("s3://sluice-public/data/", recursive=True) == [public]
    with pytest.raises(PermissionError, match="sluice-public/data/y"):
        anon.put("s3://sluice-public/data/y", b"no")
    with pytest.raises(PermissionError, match="sluice-test"):
        anon.get(f"s3://{server.bucket}/anything")


def test_a_profile_wins_over_keys_in_the_environment(server, client, prefix, tmp_path, monkeypatch):
    [u] = server.fill(prefix, 1, 10)
    creds = tmp_path / "credentials"
    creds.write_text(
        f"[training]\naws_access_key_id = {server.access_key}\naws_secret_access_key = {server.secret_key}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    (tmp_path / "config").write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-wrong-secret")
    with pytest.raises(PermissionError):
        sluice.Client(endpoint=server.endpoint).get(u)
    assert len(sluice.Client(endpoint=server.endpoint, profile="training").get(u)) == 10


def test_a_home_without_aws_config_prints_nothing_and_still_finds_credentials(
    server, prefix, tmp_path
):
    """A home with ~/.aws/credentials and no ~/.aws/config, no region in the environment:
    no "failed to parse profile" on stderr (it was printed once per client), and the
    profile's keys are found."""
    import os
    import subprocess
    import sys

    [u] = server.fill(prefix, 1, 10)
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(
        f"[default]\naws_access_key_id = {server.access_key}\naws_secret_access_key = {server.secret_key}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), AWS_EC2_METADATA_DISABLED="true", EP=server.endpoint, URI=u)
    code = "import os, sluice; print(len(sluice.Client(endpoint=os.environ['EP']).get(os.environ['URI'])))"
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "10"
    assert "failed to parse profile" not in run.stderr, run.stderr


def uri_and_len(obj):
    # Module level: spawned workers unpickle the transform.
    return obj.uri, len(obj)


def test_spawned_dataloader_workers_rebuild_the_client_from_the_config(server, prefix, monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from sluice.torch import S3IterableDataset, S3MapDataset

    uris = server.fill(prefix, 6, 2048)
    cfg = sluice.Config(endpoint=server.endpoint)
    # The environment the workers inherit points nowhere: only the config reaches the server.
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", dead_endpoint())
    monkeypatch.setenv("SLUICE_MAX_ATTEMPTS", "1")
    ds = S3IterableDataset.from_prefix(
        f"s3://{server.bucket}/{prefix}", transform=uri_and_len, config=cfg
    )
    dl = torch.utils.data.DataLoader(
        ds,
        batch_size=None,
        num_workers=2,
        multiprocessing_context="spawn",
        persistent_workers=False,
    )
    # (batch_size=None: DataLoader's default conversion turns each tuple into a list)
    assert sorted(tuple(x) for x in dl) == [(u, 2048) for u in uris]
    maps = S3MapDataset(uris, transform=uri_and_len, config=cfg)
    dl = torch.utils.data.DataLoader(
        maps, batch_size=None, num_workers=2, multiprocessing_context="spawn"
    )
    assert sorted(tuple(x) for x in dl) == [(u, 2048) for u in uris]


@pytest.mark.skipif(
    sys.version_info < (3, 10), reason="Python 3.9's inspect reads no extension type's signature"
)
def test_the_settings_table_is_what_client_and_config_take():
    """``sluice.settings()`` is the one table (``docs/configuration.md`` is generated from it):
    each Python keyword it names is a ``Client`` argument and a ``Config`` field, and each
    ``Config`` field is a keyword of the table."""
    import dataclasses
    import inspect

    table = sluice.settings()
    keywords = {s["python"] for s in table if s["python"]}
    assert {"endpoint", "max_attempts", "stall_timeout"} <= keywords
    client = set(inspect.signature(sluice.Client).parameters) - {"config"}
    fields = {f.name for f in dataclasses.fields(sluice.Config)}
    assert keywords == client == fields
    size = next(s for s in table if "SLUICE_SHM_POOL_SIZE" in s["env"])
    assert size["default"] == "4 GiB" and size["flag"] is None


def test_a_bad_value_in_the_environment_is_an_error_naming_it(monkeypatch, server):
    monkeypatch.setenv("SLUICE_SHM_POOL_SIZE", "lots")
    with pytest.raises(ValueError, match=r"SLUICE_SHM_POOL_SIZE.*4GiB.*lots"):
        sluice.Client(endpoint=server.endpoint)
