"""Examples run quietly and keep what they write under the folder they name.

Two cheap examples run as a user runs them (``python examples/NAME.py``, a subprocess on its own
local Ray) with ``HOME`` and ``TMPDIR`` pointed at empty folders and ``--store`` naming a third:
afterwards nothing but Ray's own allow-listed files is outside the store, and no warning line is
printed but the allow-listed ones. ``multitask_demo.py`` is the plain searcher (README's main job, the
run conftest's ``multitask_run`` makes once for these tests and test_ray_searcher's); ``sklearn_hpo.py
--quick`` has GPTuneBand pause trials and resume them from checkpoints, where Ray's per-trial
loggers used to warn "Remote file not found" once per resume.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from example_helpers import ExampleRun, run_clean, unexpected_warnings

pytestmark = pytest.mark.slow


@pytest.fixture(params=["multitask_demo.py", "sklearn_hpo.py"])
def example_run(request: pytest.FixtureRequest, tmp_path: Path) -> ExampleRun:
    """A finished run of each cheap example in turn, as a user runs it (:func:`~example_helpers.run_clean`)."""
    if request.param == "multitask_demo.py":
        run: ExampleRun = request.getfixturevalue("multitask_run")
        return run
    return run_clean(tmp_path, "sklearn_hpo.py", "--quick", "--datasets", "breast_cancer")


def test_an_example_leaves_nothing_outside_its_store_and_no_warning(example_run: ExampleRun) -> None:
    assert example_run.returncode == 0, example_run.stderr[-3000:]
    assert not unexpected_warnings(example_run.stdout + example_run.stderr)
    assert not example_run.left
    ray_files = list((example_run.store / "ray").rglob("*.json"))  # Ray's own files: in the store's folder
    assert any(path.name == "result.json" for path in ray_files)
    assert any(path.name.startswith("experiment_state") for path in ray_files)
