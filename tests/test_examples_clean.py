"""Examples run quietly and keep what they write under the folder they name.

Two cheap examples run as a user runs them (``python examples/NAME.py``, a subprocess on its own
local Ray) with ``HOME`` and ``TMPDIR`` pointed at empty folders and ``--store`` naming a third:
afterwards nothing but Ray's own allow-listed files is outside the store, and no warning line is
printed but the allow-listed ones. ``multitask_demo.py`` is the plain searcher; ``sklearn_hpo.py
--quick`` has GPTuneBand pause trials and resume them from checkpoints, where Ray's per-trial
loggers used to warn "Remote file not found" once per resume.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

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


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    """An empty TMPDIR with a short path: Ray's socket paths under it must fit in 107 characters."""
    with tempfile.TemporaryDirectory(prefix="rt-") as folder:
        yield Path(folder)


def run_clean(tmp_path: Path, tmpdir: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``examples/SCRIPT`` with ``--store`` in ``tmp_path/store``, TMPDIR ``tmpdir``, empty HOME and cwd."""
    for name in ("home", "cwd"):
        (tmp_path / name).mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path / "home"), "TMPDIR": str(tmpdir)}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args, "--store", str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path / "cwd",
        check=False,
    )


def left_outside(tmp_path: Path, tmpdir: Path) -> list[str]:
    """Every file the run left in HOME, TMPDIR or its working directory, but the allow-listed ones."""
    left = []
    for label, folder in (("HOME", tmp_path / "home"), ("TMPDIR", tmpdir), ("CWD", tmp_path / "cwd")):
        for path in folder.rglob("*"):
            name = f"{label}/{path.relative_to(folder)}"
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


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("multitask_demo.py", ("--tasks", "0.5", "1", "--samples-per-task", "2", "--cpus", "1")),
        ("sklearn_hpo.py", ("--quick", "--datasets", "breast_cancer")),
    ],
)
def test_an_example_leaves_nothing_outside_its_store_and_no_warning(
    tmp_path: Path, short_tmpdir: Path, script: str, args: tuple[str, ...]
) -> None:
    done = run_clean(tmp_path, short_tmpdir, script, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not unexpected_warnings(done.stdout + done.stderr)
    assert not left_outside(tmp_path, short_tmpdir)
    ray_files = list((tmp_path / "store" / "ray").rglob("*.json"))  # Ray's own files: in the store's folder
    assert any(path.name == "result.json" for path in ray_files)
    assert any(path.name.startswith("experiment_state") for path in ray_files)
