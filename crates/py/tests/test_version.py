"""``sluice.__version__`` comes from the installed distribution (whose version maturin takes
from Cargo.toml), not from a second copy of the number."""

import importlib.metadata

import sluice


def test_version_is_the_distributions():
    try:
        want = importlib.metadata.version("sluice")
    except importlib.metadata.PackageNotFoundError:  # a source checkout on sys.path
        want = getattr(sluice._native, "__version__", "0+unknown")
    assert sluice.__version__ == want


def test_version_sources(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"sluice": "9.8.7"}[name])
    assert sluice._version() == "9.8.7"

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    monkeypatch.delattr(sluice._native, "__version__", raising=False)
    assert sluice._version() == "0+unknown"
    monkeypatch.setattr(sluice._native, "__version__", "1.2.3", raising=False)
    assert sluice._version() == "1.2.3"
