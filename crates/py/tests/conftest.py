import os

import pytest

from sluice.testing import TestServer


@pytest.fixture(scope="session")
def server():
    """One in-process S3 server for the session; the AWS variables point at it so the
    module-level functions' default client finds it."""
    s = TestServer()
    for k, v in s.env().items():
        os.environ[k] = v
    # Fault tests need failures to surface quickly.
    os.environ["SLUICE_MAX_ATTEMPTS"] = "3"
    yield s
    s.stop()


@pytest.fixture
def client(server):
    import sluice

    return sluice.Client(endpoint=server.endpoint)


@pytest.fixture
def prefix(request):
    """A key prefix unique to the test."""
    return request.node.name.replace("[", "_").replace("]", "_") + "/"
