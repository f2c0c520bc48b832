"""Every public module of the package declares ``__all__``: exactly its public names. Each
name listed exists (``from M import *`` gives exactly ``__all__``) and no public class or
function the module defines, or re-exports from a private submodule of its own, is left out."""

import importlib
import importlib.util
import inspect
import pkgutil

import pytest
import sluice

PUBLIC_MODULES = [
    "sluice",
    "sluice.testing",
    "sluice.aio",
    "sluice.torch",
    "sluice.torch.dcp",
    "sluice.fsspec",
    "sluice.parquet",
    "sluice.compat",
    "sluice.compat.alias",
    "sluice.compat.s3dlio",
]


def load(name):
    if name.startswith("sluice.torch"):
        pytest.importorskip("torch")
    if name == "sluice.fsspec":
        pytest.importorskip("fsspec")
    return importlib.import_module(name)


def test_every_public_module_is_checked():
    found = {"sluice"}
    for m in pkgutil.walk_packages(sluice.__path__, "sluice."):
        if not any(part.startswith("_") for part in m.name.split(".")):
            found.add(m.name)
    expected = set(PUBLIC_MODULES)
    if importlib.util.find_spec("torch") is None:
        # walk_packages imports a package to list its submodules; sluice.torch needs torch.
        expected.discard("sluice.torch.dcp")
    assert found == expected


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_names_exist(name):
    mod = load(name)
    assert isinstance(mod.__all__, list)
    assert len(mod.__all__) == len(set(mod.__all__)), "listed twice"
    for n in mod.__all__:
        assert not n.startswith("_"), n
    namespace = {}
    exec(f"from {name} import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(mod.__all__)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_no_public_name_is_missing(name):
    mod = load(name)

    def defined_here(obj):
        owner = getattr(obj, "__module__", None) or ""
        return owner == name or owner.startswith(name + "._")

    public = {
        n
        for n, obj in vars(mod).items()
        if not n.startswith("_")
        and (inspect.isclass(obj) or inspect.isroutine(obj))
        and defined_here(obj)
    }
    assert public - set(mod.__all__) == set()
