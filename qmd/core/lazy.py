"""Package attributes imported on first use (PEP 562): `import qmd` stays cheap.

    __getattr__ = lazy_exports(__name__, {"Store": "store.store", "stdio_handshake": "probe:stdio"})

A value is `module` (relative to the package, or to `base` when given; the attribute has the
same name) or `module:attribute`. The first lookup imports the module and caches the value in
the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str], base: str | None = None) -> Callable[[str], object]:
    """A module-level `__getattr__` for `package` (a package or a module) that serves `exports` lazily."""

    def __getattr__(name: str) -> object:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(f"{base or package}.{module}"), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
