"""Drop-in modules for other libraries' APIs, backed by sluice."""

# The submodules (`from sluice.compat import *` imports them).
__all__ = ["alias", "s3dlio"]
