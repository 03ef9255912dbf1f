"""Helpers of the tests that run an example as a user runs it: ``python examples/NAME.py``, a subprocess on its own
local Ray, with ``HOME``, ``TMPDIR`` and the working directory empty folders of the run's own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

#: README's main job (``examples/multitask_demo.py``) as the tests run it: two tasks, three trials each, the
#: default two CPUs; run once per test run (conftest's ``multitask_run``).
MULTITASK_ARGS = ("--tasks", "1.0", "2.0", "--samples-per-task", "3")

#: Warnings a run may print, each with why it stays.
ALLOWED_WARNINGS = {
    # Ray's secure default on every local cluster; the line says how to opt out (RAY_AUTH_MODE=disabled)
    "Token authentication is enabled for this Ray cluster",
}
#: Paths (relative to HOME or TMPDIR) a run may leave there, each with why.
ALLOWED_LEFT = (
    re.compile(r"^HOME/\.ray/auth_token$"),  # Ray's per-user token for that authentication, reused by every later Ray
    re.compile(r"^TMPDIR/ray(/.*)?$"),  # Ray's session logs, one folder per ray.init (RAY_TMPDIR moves them)
)
WARNING_LINE = re.compile(r"WARNING|Warning\b")


class ExampleRun(NamedTuple):
    """A finished run of an example: its store, exit status, what it printed, and the files it left outside."""

    store: Path
    returncode: int
    stdout: str
    stderr: str
    #: Every file left in HOME, TMPDIR or the working directory but the allow-listed ones (see :func:`left_outside`).
    left: list[str]


def left_outside(folder: Path, tmpdir: Path) -> list[str]:
    """Every file a run left in HOME (``folder/home``), TMPDIR or its working directory (``folder/cwd``), but the
    allow-listed ones."""
    left = []
    for label, place in (("HOME", folder / "home"), ("TMPDIR", tmpdir), ("CWD", folder / "cwd")):
        for path in place.rglob("*"):
            name = f"{label}/{path.relative_to(place)}"
            if path.is_file() and not any(rule.match(name) for rule in ALLOWED_LEFT):
                left.append(f"{name} ({path.stat().st_size} B)")
    return sorted(left)


def unexpected_warnings(output: str) -> list[str]:
    """The warning lines of ``output`` that no entry of the allow-list explains.

    Args:
        output: The run's stdout and stderr.

    >>> unexpected_warnings("INFO fine\\nWARNING x: Token authentication is enabled for this Ray cluster.\\n")
    []
    >>> unexpected_warnings("WARNING logger.py:132 -- Remote file not found: /s/result.json")
    ['WARNING logger.py:132 -- Remote file not found: /s/result.json']
    """
    return [
        line
        for line in output.splitlines()
        if WARNING_LINE.search(line) and not any(allowed in line for allowed in ALLOWED_WARNINGS)
    ]


def run_clean(folder: Path, script: str, *args: str) -> ExampleRun:
    """Run ``examples/SCRIPT`` with ``--store folder/store``, an empty HOME and working directory in ``folder``
    and an empty TMPDIR; the run, also written to ``folder/run.json`` for :func:`read_run`.

    TMPDIR is a folder with a short path of its own, removed afterwards: Ray's socket paths under it must fit in
    107 characters.
    """
    for name in ("home", "cwd"):
        (folder / name).mkdir()
    with tempfile.TemporaryDirectory(prefix="rt-") as tmpdir:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder / "home"), "TMPDIR": tmpdir}
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / script), *args, "--store", str(folder / "store")],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            cwd=folder / "cwd",
            check=False,
        )
        left = left_outside(folder, Path(tmpdir))
    run = ExampleRun(folder / "store", done.returncode, done.stdout, done.stderr, left)
    (folder / "run.json").write_text(
        json.dumps({"returncode": run.returncode, "stdout": run.stdout, "stderr": run.stderr, "left": run.left})
    )
    return run


def read_run(folder: Path) -> ExampleRun:
    """The run :func:`run_clean` made in ``folder``."""
    saved = json.loads((folder / "run.json").read_text())
    return ExampleRun(folder / "store", saved["returncode"], saved["stdout"], saved["stderr"], saved["left"])
