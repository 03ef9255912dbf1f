"""GPTune's own band driver (``GPTune_MB.MB_LCM``) over a raytuner GPTuneBand history.

``gptune_band_driver.py`` (beside this file) runs GPTune's unmodified GPTuneBand code from
``../shared/tools/gptune-tuner`` as GPTune-Demo's ``demo_MB.py`` runs it, in a folder whose history database is
the file raytuner wrote, with an objective that raises: GPTune's driver resumes from the history and must find
every evaluation it plans there. Skipped where the tools are not beside the repository (CI's step 2 has them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from demo_runs import tune_demo

from raytuner.engines import GPTuneBand
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM

TOOLS = Path(__file__).resolve().parents[2] / "shared" / "tools"
DRIVER = Path(__file__).resolve().parent / "gptune_band_driver.py"
pytestmark = pytest.mark.skipif(
    not (TOOLS / "gptune-tuner" / "pythonpath.sh").is_file(), reason=f"GPTune's band code is not in {TOOLS}"
)


def gptune_band_runs(path: Path, tasks: list[float], loops: int, b_min: float, b_max: float, eta: int) -> Any:
    """What GPTune's band driver did over the history ``path`` (``gptune_band_driver.py``'s report)."""
    paths = subprocess.run(
        [str(TOOLS / "gptune-tuner" / "pythonpath.sh"), "band"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # the reader's lhsmdu stand-in raises if GPTune samples: a history that holds every planned evaluation needs none;
    # george, which GPTune's model module imports, is a stand-in that raises if used (tests/stubs/george)
    stubs = f"{TOOLS / 'gptune-reader' / 'stubs'}:{Path(__file__).resolve().parent / 'stubs'}"
    args = ["--tasks", *map(str, tasks), "--loops", str(loops), "--b-min", str(b_min), "--b-max", str(b_max)]
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(path), *args, "--eta", str(eta)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": f"{paths}:{stubs}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    lines = done.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("{"), done.stderr[-2000:]
    return json.loads(lines[-1])


def test_gptunes_band_driver_resumes_from_a_raytuner_gptuneband_history_whole(tmp_path: Path) -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [1.0, 1.5]
    # demo_MB.py's brackets (b_min 1, b_max 4, eta 4); every bracket in every pass, as GPTune's MB_LCM
    band = GPTuneBand(
        problem,
        [{"t": t} for t in tasks],
        seed=0,
        b_min=1,
        b_max=4,
        eta=4,
        passes=2,
        later_passes="all",
        executor=InlineExecutor(),
        lcm=LCMOptions(n_starts=1),
    )
    store = tune_demo(problem, band, JsonStore(tmp_path), "GPTune-Demo-MB")
    report = gptune_band_runs(store.path("GPTune-Demo-MB"), tasks, loops=2, b_min=1, b_max=4, eta=4)
    assert report["error"] is None, report["error"]
    assert report["calls"] == [], "GPTune found every evaluation of its plan in the history"
    records = store.evaluations("GPTune-Demo-MB")
    for t, theirs in zip(tasks, report["per_task"]):
        ours = [r for r in records if r.task_parameter == {"t": t} and r.raytuner and r.raytuner.fidelity == 4.0]
        assert theirs["x"] == [r.tuning_parameter["x"] for r in ours] and len(ours) == 6
        assert theirs["y"] == pytest.approx([r.evaluation_result["y"] for r in ours], abs=1e-12)
