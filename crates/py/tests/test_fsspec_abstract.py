"""fsspec's own abstract test suite (``fsspec.tests.abstract``) against ``sluice://`` on
the test server, wired as s3fs wires it (s3fs/tests/derived/): copy, get, put, pipe and
open, every test of the installed fsspec. Nothing is skipped or expected to fail."""

import itertools
import posixpath

import pytest
from fsspec.tests import abstract  # fsspec >= 2024.12 has the open and pipe tests
from sluice.fsspec import SluiceFileSystem

_roots = itertools.count()


class SluiceFixtures(abstract.AbstractFixtures):
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls, server):
        return SluiceFileSystem(endpoint=server.endpoint, skip_instance_cache=True)

    @pytest.fixture
    def fs_path(self, server, fs, request):
        # The session's bucket is shared with other tests, and some suite tests leave
        # files behind: a root of its own for each test, removed after it.
        root = f"{server.bucket}/fsspec-abstract/{request.cls.__name__}-{next(_roots)}"
        yield root
        if fs.exists(root):
            fs.rm(root, recursive=True)

    @pytest.fixture
    def fs_join(self):
        return posixpath.join  # keys use "/" everywhere

    @pytest.fixture
    def supports_empty_directories(self):
        return False  # a prefix exists while keys are under it


class TestSluiceCopy(abstract.AbstractCopyTests, SluiceFixtures):
    pass


class TestSluiceGet(abstract.AbstractGetTests, SluiceFixtures):
    pass


class TestSluicePut(abstract.AbstractPutTests, SluiceFixtures):
    pass


class TestSluicePipe(abstract.AbstractPipeTests, SluiceFixtures):
    pass


class TestSluiceOpen(abstract.AbstractOpenTests, SluiceFixtures):
    pass
