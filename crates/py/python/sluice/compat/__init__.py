"""Drop-in modules for other libraries' APIs, backed by sluice."""
