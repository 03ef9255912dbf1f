"""What an example needs beyond raytuner's main install, checked before anything slow.

Each example calls :func:`require` first, with the modules it imports; one that
is not installed ends the example with one line naming the ``examples`` extra
and exit status 2, instead of a run that fails later in every trial::

    from _extras import require

    require(__file__, "pyamg")

:func:`temporary_store` gives an example without ``--store`` a store folder that is removed when
it ends, so that a run leaves nothing in the temporary folder.

This module lives with the examples (run as ``python examples/NAME.py``, their
folder is on ``sys.path``), so the library never imports it.

>>> require("examples/x.py", "json")    # installed: nothing happens
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def temporary_store(prefix: str) -> Path:
    """A new temporary store folder, removed with everything in it when the example's process ends.

    For an example run without ``--store``: its evaluations (and Ray's files, kept beside them) last
    as long as the run, and nothing is left in the temporary folder; ``--store DIR`` keeps them.

    Args:
        prefix: the start of the folder's name (the example's name).

    >>> folder = temporary_store("doctest_")
    >>> folder.is_dir(), folder.name.startswith("doctest_")
    (True, True)
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    logging.getLogger(__name__).info("store %s: removed at the end (pass --store DIR to keep it)", folder)
    return folder


def json_logger_for_resumed_trials() -> Any:
    """Ray Tune's ``JsonLoggerCallback`` for runs whose trials pause and resume from checkpoints.

    Ray's logger, when a trial resumes from a checkpoint, copies the trial's ``result.json`` back
    from ``storage_path`` over its copy on the driver, which the driver may not have synced there yet:
    one "Remote file not found" warning per resume (and, where an older copy was synced, results lost
    from the driver's file). This one keeps the driver's file when it has one, and fetches it otherwise
    (a restored experiment). Pass it in ``RunConfig(callbacks=[...])`` with the environment variable
    ``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1`` (Ray's own CSV, JSON and TensorBoard loggers off: the
    store keeps every result); ``ResultGrid`` reads the ``result.json`` files it writes.
    """
    from ray.tune.logger import JsonLoggerCallback

    class ResumableJsonLogger(JsonLoggerCallback):
        def _restore_from_remote(self, file_name: str, trial: Any) -> None:
            if not (Path(trial.local_path) / file_name).exists():
                super()._restore_from_remote(file_name, trial)

    return ResumableJsonLogger()
