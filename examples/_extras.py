"""What an example needs beyond raytuner's main install, checked before anything slow.

Each example calls :func:`require` first, with the modules it imports; one that
is not installed ends the example with one line naming the ``examples`` extra
and exit status 2, instead of a run that fails later in every trial::

    from _extras import require

    require(__file__, "pyamg")

This module lives with the examples (run as ``python examples/NAME.py``, their
folder is on ``sys.path``), so the library never imports it.

>>> require("examples/x.py", "json")    # installed: nothing happens
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

#: The extra that installs every example's modules: ``pip install -e '.[examples]'``.
EXTRA = "examples"


def installed(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, without importing it.

    >>> installed("json"), installed("no_such_module_here")
    (True, False)
    """
    if module in sys.modules:
        return sys.modules[module] is not None  # None: the import is blocked
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(script: str, *modules: str) -> None:
    """Exit with status 2 and one line on stderr when one of ``modules`` is not installed.

    Args:
        script: the example's ``__file__``, named in the line.
        modules: the top-level modules it imports beyond the standard library.
    """
    missing = [m for m in modules if not installed(m)]
    if missing:
        print(f"examples/{Path(script).name} needs {', '.join(missing)}: pip install -e '.[{EXTRA}]'", file=sys.stderr)
        raise SystemExit(2)
