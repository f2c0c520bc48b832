"""The op-log's last lines (``SLUICE_OP_LOG``, ``docs/oplog.md``): the native side writes
the log as zstd frames and closes one each second; what the frame still open holds is
written when the process ends. Python never drops Rust's statics, so the close is asked
for here: at interpreter exit, and at the exit of each multiprocessing child (a PyTorch
DataLoader worker), which ends by ``os._exit`` after running multiprocessing's finalizers
but not ``atexit``'s.
"""

from __future__ import annotations

import atexit
from multiprocessing import util

from . import _native


def _at_child_exit(_module: object = None) -> None:
    # A child's finalizer registry starts empty: registered again after each fork.
    util.Finalize(None, _native.finish_op_log, exitpriority=0)


def install() -> None:
    atexit.register(_native.finish_op_log)
    _at_child_exit()
    util.register_after_fork(_native, _at_child_exit)
