"""GPTune's own code predicts from raytuner's newest stored model what raytuner predicts.

Runs ``../shared/tools/gptune-reader/check.py`` (GPTune's real loading and ``Model_LCM`` rebuild; its README
says how) on the history of an MLA run and of a GPTuneBand run with GPTune's model
(``LCMOptions(**GPTUNE_LCM)``), at random points per task. Skipped where the tool is not beside the repository.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from demo_runs import tune_demo

from raytuner.engines import MLA, GPTuneBand
from raytuner.models import GPTUNE_LCM, LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.models.persistence import load_surrogate
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo

TOOL = Path(__file__).resolve().parents[2] / "shared" / "tools" / "gptune-reader"
pytestmark = pytest.mark.skipif(
    not (TOOL / "check.py").is_file(), reason=f"GPTune's reader is not beside the repository ({TOOL})"
)


def test_gptunes_prediction_from_our_newest_model_is_ours(tmp_path: Path) -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": 1.0}, {"t": 1.5}]
    engine = MLA(
        problem, tasks, seed=1, n_initial=4, lcm=LCMOptions(n_starts=2, **GPTUNE_LCM), executor=InlineExecutor()
    )
    store = JsonStore(tmp_path / "db")
    session = TuningSession(problem, engine, store, "demo")
    for _ in range(20):
        trial = session.ask()
        session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})
    store.compact("demo")
    rng = np.random.default_rng(7)
    points = [{**task, "x": float(x)} for task in tasks for x in rng.random(20)]
    command = [
        sys.executable,
        str(TOOL / "check.py"),
        str(store.path("demo")),
        "--problem",
        str(TOOL / "examples" / "gptune-demo.json"),
        "--json",
    ]
    for point in points:
        command += ["--predict", json.dumps(point)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout)
    assert done.returncode == 0, json.dumps(report["steps"])[-2000:]
    stored = store.models("demo")
    assert report["surrogate_models"]["found"] == len(stored) > 0
    [newest] = [m for m in stored if m.uid == report["prediction_model"]["uid"]]
    fitted = load_surrogate(newest, store.evaluations("demo"))
    for i, task in enumerate(tasks):
        mine = [p for p in points if p["t"] == task["t"]]
        ours = fitted.predict(i, problem.parameter_space.encode([{"x": p["x"]} for p in mine]))[0]
        theirs = [p["outputs"]["y"]["mean"] for p in report["predictions"] if p["point"]["t"] == task["t"]]
        assert len(theirs) == 20 and not any(math.isnan(v) for v in theirs)
        np.testing.assert_allclose(theirs, ours, rtol=1e-6)


def test_gptunes_prediction_from_our_newest_gptuneband_model_is_ours(tmp_path: Path) -> None:
    """A GPTuneBand model is in GPTune's band form (task input ``budget`` first, as ``GPTune_MB`` declares it):
    GPTune finds it for its band problem, rebuilds it from the file's records and predicts what raytuner does."""
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    band = GPTuneBand(
        problem,
        [{"t": 1.0}, {"t": 1.5}],
        seed=0,
        b_min=1,
        b_max=4,
        eta=4,
        lcm=LCMOptions(n_starts=1, **GPTUNE_LCM),
        executor=InlineExecutor(),
    )
    store = tune_demo(problem, band, JsonStore(tmp_path / "db"), "demo-mb")
    declared = json.loads((TOOL / "examples" / "gptune-demo.json").read_text())
    budget = {
        "name": "budget",
        "type": "real",
        "lower_bound": 1 - 1e-12,
        "upper_bound": 4.0,
        "transformer": "normalize",
    }
    declared["input_space"] = [budget, *declared["input_space"]]
    (tmp_path / "band-problem.json").write_text(json.dumps(declared))
    last = store.models("demo-mb")[-1]
    assert last.modeler == "Model_LCM" and [e["name"] for e in last.input_space] == ["budget", "t"]
    rng = np.random.default_rng(3)
    points = [{"budget": b, "t": t, "x": float(x)} for b, t in last.task_parameters for x in rng.random(10)]
    command = [sys.executable, str(TOOL / "check.py"), str(store.path("demo-mb"))]
    command += ["--problem", str(tmp_path / "band-problem.json"), "--json"]
    for b, t in last.task_parameters:
        command += ["--task", json.dumps({"budget": b, "t": t})]
    for point in points:
        command += ["--predict", json.dumps(point)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout)
    assert done.returncode == 0, json.dumps(report["steps"])[-2000:]
    [model] = [m for m in store.models("demo-mb") if m.uid == report["prediction_model"]["uid"]]
    fitted = load_surrogate(model, store.evaluations("demo-mb"))
    for i, (b, t) in enumerate(model.task_parameters):
        mine = [p for p in points if (p["budget"], p["t"]) == (b, t)]
        ours = fitted.predict(i, problem.parameter_space.encode([{"x": p["x"]} for p in mine]))[0]
        theirs = [p["outputs"]["y"]["mean"] for p in report["predictions"] if p["point"] in mine]
        assert len(theirs) == 10
        np.testing.assert_allclose(theirs, ours, rtol=1e-6)
