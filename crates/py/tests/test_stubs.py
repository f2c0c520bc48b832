"""The type stubs against the modules as they are: ``mypy.stubtest`` imports each module and
compares what it finds (classes, functions, signatures, ``__all__``) with the stub mypy sees.
For ``sluice._native`` that is ``_native.pyi`` against the built extension (PyO3 spells its
signatures in ``__text_signature__``); for the pure-Python modules the ``.py`` file is its own
stub, so stubtest also needs them to pass mypy."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "mypy.stubtest", reason="mypy is not installed (crates/py/requirements-test.txt has it)"
)

ALLOWLIST = Path(__file__).with_name("stubtest-allowlist.txt")

# The leaf modules, not the packages `sluice` and `sluice.compat`: stubtest walks a package's
# submodules, which takes in sluice.compat._shim.s3dlio, a module that replaces itself with
# sluice.compat.s3dlio at import (checked here under its own name). Their __all__ is
# checked by test_public_names.py.
PURE_PYTHON = [
    "sluice._types",
    "sluice._io",
    "sluice._config",
    "sluice._logging",
    "sluice.fsspec",
    "sluice._sharding",
    "sluice.testing",
    "sluice.compat.alias",
    "sluice.compat.s3dlio",
]


def stubtest(tmp_path, *args):
    # torch's own sources are not analysed (about 25 s); where sluice.torch is checked, its
    # base classes are Any to mypy (see stubtest-allowlist.txt).
    config = tmp_path / "mypy.ini"
    config.write_text(
        "[mypy]\n"
        f"cache_dir = {tmp_path / 'cache'}\n"
        "[mypy-torch.*]\n"
        "follow_imports = skip\n"
        "ignore_missing_imports = True\n"
        # fsspec ships no type information.
        "[mypy-fsspec.*]\n"
        "ignore_missing_imports = True\n"
    )
    # Run outside the checkout: from crates/py mypy would also find python/sluice by its
    # relative path and call every module a duplicate.
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_native_stub_matches_the_extension(tmp_path):
    stubtest(tmp_path, "sluice._native")


def test_pure_python_modules_pass_stubtest(tmp_path):
    modules = list(PURE_PYTHON)
    # Without torch, its entries of the allowlist are not used: not an error then.
    args = ["--allowlist", str(ALLOWLIST), "--ignore-unused-allowlist"]
    if importlib.util.find_spec("torch") is not None:
        modules.append("sluice.torch")
        args = ["--allowlist", str(ALLOWLIST)]
    stubtest(tmp_path, *args, *modules)
