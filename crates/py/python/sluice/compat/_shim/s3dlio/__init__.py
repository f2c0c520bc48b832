"""``s3dlio`` served by sluice.

This directory is put first on ``sys.path`` and ``PYTHONPATH`` by ``python -m
sluice.compat.alias`` (and ``sluice-dlio``), so that ``import s3dlio`` in that process and in
every process it starts — mpirun ranks, DataLoader workers (fork, spawn, forkserver),
checkpoint writers, subprocesses — gets :mod:`sluice.compat.s3dlio` rather than the real
package, even where that is installed.
"""

import sys

from sluice.compat import s3dlio as _impl

sys.modules[__name__] = _impl
# Its private submodules too, under this name: `import s3dlio._config` would otherwise load a
# second copy of one (its own client cache and locks) from the package's directory.
for _name, _module in list(sys.modules.items()):
    if _name.startswith(_impl.__name__ + "."):
        sys.modules[__name__ + _name[len(_impl.__name__) :]] = _module
