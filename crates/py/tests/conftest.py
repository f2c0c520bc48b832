import pytest
from sluice.testing import TestServer, environment


@pytest.fixture(scope="session")
def server():
    """One in-process S3 server for the session; the AWS variables point at it so the
    module-level functions' default client finds it (until the session ends: then the
    environment is as it was)."""
    # Fault tests need failures to surface quickly: SLUICE_MAX_ATTEMPTS.
    with TestServer() as s, environment(s, extra={"SLUICE_MAX_ATTEMPTS": "3"}):
        yield s


@pytest.fixture
def client(server):
    import sluice

    return sluice.Client(endpoint=server.endpoint)


@pytest.fixture
def prefix(request):
    """A key prefix unique to the test."""
    return request.node.name.replace("[", "_").replace("]", "_") + "/"
