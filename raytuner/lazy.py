"""Public names of a package imported on first use (PEP 562), so importing the package stays light.

A package lists each public name with the module it comes from and takes
its module-level ``__getattr__`` and ``__dir__`` from :func:`lazy_names`;
a name is imported the first time it is used and then kept in the package.

Example (a package's ``__init__.py``)::

    from raytuner.lazy import lazy_names

    _HOMES = {"CrowdClient": "raytuner.client.crowd"}
    __all__ = ["CrowdClient"]
    __getattr__, __dir__ = lazy_names(__name__, _HOMES)

>>> getattr_, dir_ = lazy_names("raytuner", {"ProblemSpace": "raytuner.problem.space"})
>>> getattr_("ProblemSpace").__module__
'raytuner.problem.space'
>>> "ProblemSpace" in dir_()
True
>>> getattr_("problem").__name__     # a submodule, imported on first use
'raytuner.problem'
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.util import find_spec
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public names live in the modules ``homes`` says.

    Args:
        package: the package's ``__name__`` (already in :data:`sys.modules`).
        homes: each public name and the module it comes from.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        """Import a public name's module on first use and keep the name in the package.

        A submodule's name gives the submodule, as a package that imports its modules eagerly does.
        """
        home = homes.get(name)
        if home is None:
            if name.startswith("__") or find_spec(f"{package}.{name}") is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            return import_module(f"{package}.{name}")  # the import system keeps it in the package
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
