"""The bad-input catalogue through the Python API, for every compiled backend: each case
ends within its timeouts with the right bytes or a specific sluice exception (never a
PanicException or a hang), and no message shows a secret."""

import os
import time

import pytest
import sluice
from sluice.testing import HostileServer, hostile_cases

CASES = hostile_cases()
URI = "s3://bkt/k"


@pytest.fixture
def hostile_env(request):
    """Sets os.environ for one case's server; restores it after."""
    saved = {}

    def apply(env):
        for k, v in env.items():
            saved.setdefault(k, os.environ.get(k))
            os.environ[k] = v

    yield apply
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def perform(client, case):
    op = case["op"]
    if op == "get":
        return bytes(client.get(URI))
    if op == "get_range":
        return bytes(client.get_range(URI, case["start"], case["end"] - case["start"]))
    if op == "head":
        return client.stat(URI)
    if op == "list":
        return client.list("s3://bkt/p/", recursive=True)
    if op == "put":
        return client.put(URI, b"\x07" * case["size"])
    raise AssertionError(op)


@pytest.mark.parametrize("backend", sluice.backends)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_catalogue_case(case, backend, hostile_env):
    server = HostileServer(case["name"])
    hostile_env(server.env())
    client = sluice.Client(backend=backend, endpoint=server.endpoint)
    t0 = time.monotonic()
    try:
        got = perform(client, case)
        error = None
    except OSError as e:  # S3Error, FileNotFoundError, PermissionError, TimeoutError
        got, error = None, e
    finally:
        server.stop()
    assert time.monotonic() - t0 < 30, "a hang"
    print(f"CATALOGUE\tpy-{backend}\t{case['name']}\t{type(error).__name__ if error else 'ok'}")
    expect = case["expect"]
    if expect == "checked":
        # Corruption a checksum reveals: refused, except by the stacks that do not check it.
        expect = "done" if backend in case["unchecked_backends"] else "error"
    if error is not None:
        assert expect in ("error", "ok_or_error", "listed_or_error"), f"{case['input']}: {error!r}"
        text = str(error)
        for secret in HostileServer.secrets():
            assert secret not in text, f"a secret in {text[:300]}"
        assert len(text) < 4096
        assert "bkt" in text, text
        return
    if expect in ("ok", "ok_or_error") and case["op"] in ("get", "get_range"):
        assert got == case["data"]
    elif expect in ("listed", "listed_or_error"):
        assert len(got) == case["listed"]
    else:
        assert expect == "done", f"{case['input']}: expected an error, got {got!r:.200}"
