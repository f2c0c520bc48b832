"""``sluice.testing.environment`` gives os.environ back as it found it: values it replaced
restored, variables it added removed, however the block ends."""

import os

import pytest
from sluice import testing  # not `import TestServer`: pytest would try to collect it
from sluice.testing import environment


def environ():
    """os.environ but for the variable pytest itself changes between setup and call."""
    d = dict(os.environ)
    d.pop("PYTEST_CURRENT_TEST", None)
    return d


@pytest.fixture
def before(monkeypatch):
    """os.environ with some of the server's variables set to other values and the rest unset;
    returns a copy of it."""
    monkeypatch.setenv("AWS_REGION", "before-region")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "before-key")
    for k in ["AWS_ENDPOINT_URL_S3", "AWS_SECRET_ACCESS_KEY", "AWS_CA_BUNDLE", "AWS_SESSION_TOKEN"]:
        monkeypatch.delenv(k, raising=False)
    for k in [
        "SLUICE_CONNECT_TIMEOUT",
        "SLUICE_FIRST_BYTE_TIMEOUT",
        "SLUICE_STALL_TIMEOUT",
        "SLUICE_MAX_ATTEMPTS",
    ]:
        monkeypatch.delenv(k, raising=False)
    return environ()


@pytest.fixture(scope="module")
def own_server():
    with testing.TestServer() as s:
        yield s


@pytest.mark.parametrize("https", [False, True], ids=["http", "https"])
def test_restored_after_the_block(before, own_server, https):
    with environment(own_server, https=https, extra={"SLUICE_MAX_ATTEMPTS": "3"}):
        want = dict(own_server.env(https), SLUICE_MAX_ATTEMPTS="3")
        assert {k: os.environ.get(k) for k in want} == want
        assert os.environ["AWS_ENDPOINT_URL_S3"] == (
            own_server.https_endpoint if https else own_server.endpoint
        )
    assert environ() == before


def test_restored_when_the_block_raises_or_changes_them(before, own_server):
    with pytest.raises(KeyError):
        with environment(own_server):
            os.environ["AWS_REGION"] = "changed-inside"
            del os.environ["AWS_ACCESS_KEY_ID"]
            os.environ.pop("AWS_CA_BUNDLE")
            raise KeyError("inside")
    assert environ() == before


def test_nested(before, own_server):
    with environment(own_server):
        outer = environ()
        with environment(own_server, https=True):
            assert os.environ["AWS_ENDPOINT_URL_S3"] == own_server.https_endpoint
        assert environ() == outer
    assert environ() == before


def test_with_the_server_as_context(before):
    with testing.TestServer() as s, environment(s):
        assert os.environ["AWS_ENDPOINT_URL_S3"] == s.endpoint
    assert environ() == before
    with pytest.raises(RuntimeError, match="stopped"):
        s.requests


def test_hostile_server(before):
    h = testing.HostileServer(testing.hostile_cases()[0]["name"])
    try:
        with environment(h):
            assert {k: os.environ.get(k) for k in h.env()} == h.env()
        assert environ() == before
        with pytest.raises(TypeError):
            with environment(h, https=True):
                pass
        assert environ() == before
    finally:
        h.stop()


def test_endpoint_variables_that_would_win_are_unset_for_the_block(monkeypatch):
    from sluice.testing import TestServer, environment

    monkeypatch.setenv("S3_ENDPOINT_URIS", "http://elsewhere:9000,http://other:9000")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://elsewhere:9000")
    with TestServer() as s, environment(s):
        assert "S3_ENDPOINT_URIS" not in os.environ and "AWS_ENDPOINT_URL" not in os.environ
        assert os.environ["AWS_ENDPOINT_URL_S3"] == s.endpoint
    assert os.environ["S3_ENDPOINT_URIS"] == "http://elsewhere:9000,http://other:9000"
    assert os.environ["AWS_ENDPOINT_URL"] == "http://elsewhere:9000"
