"""Lazy names of a package facade (PEP 562), so ``import trioagent`` stays cheap.

A facade lists what it re-exports twice, on purpose: once under ``TYPE_CHECKING`` (so mypy,
editors and import-linter see ordinary imports) and once as a ``{name: submodule}`` map that
:func:`lazy_attributes` turns into the module's ``__getattr__`` and ``__dir__``.  A name is
imported from its submodule the first time it is read and then cached in the facade's
globals, so later reads cost nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, names: Mapping[str, str], module_globals: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the facade ``package``.

    Args:
        package: the facade's ``__name__``.
        names: each lazy name and the module (relative to ``package``, ``"._x"``) that
            defines it.
        module_globals: the facade's ``globals()``, where a name is cached once imported.
    """

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        module_globals[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*module_globals, *names})

    return __getattr__, __dir__
