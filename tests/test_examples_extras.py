"""Each example checks its imports first: a missing module is one line naming the extra and exit 2, before Ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Runs an example as ``python examples/NAME.py`` does, with ``sys.argv[1]`` blocked as if it were not installed.
BLOCKED = (
    "import os, runpy, sys; sys.modules[sys.argv[1]] = None; sys.argv = sys.argv[2:]; "
    "sys.path[0] = os.path.dirname(sys.argv[0]); runpy.run_path(sys.argv[0], run_name='__main__')"
)
#: The optional module each example needs (the ``examples`` extra installs it), or ray for one that needs none.
NEEDS = {
    "amg_tuning": "pyamg",
    "sklearn_hpo": "sklearn",
    "lcbench_tuning": "onnxruntime",
    "band_demo": "ray",
    "mla_demo": "ray",
    "multitask_demo": "ray",
    "transfer_demo": "ray",
}


def test_every_example_is_listed() -> None:
    assert sorted(NEEDS) == sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_a_missing_module_is_one_line_naming_the_extra(name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKED, NEEDS[name], str(EXAMPLES / f"{name}.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"examples/{name}.py needs {NEEDS[name]}: pip install -e '.[examples]'\n"
