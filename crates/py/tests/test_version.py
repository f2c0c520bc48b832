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


def test_a_new_process_imports_no_more_than_it_needs():
    """Every DLIO epoch starts new DataLoader workers, each importing sluice: the version
    lookup, `logging` and `concurrent.futures` wait until something uses them."""
    import subprocess
    import sys

    code = (
        "import sys; import sluice; from sluice.compat import s3dlio; "
        "heavy = ['importlib.metadata', 'logging', 'concurrent.futures']; "
        "print([m for m in heavy if m in sys.modules]); "
        "v = sluice.__version__; print('importlib.metadata' in sys.modules, v == sluice._version())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, after = out.stdout.splitlines()
    assert loaded == "[]", out.stdout
    assert after == "True True", "the version is still there when asked"
