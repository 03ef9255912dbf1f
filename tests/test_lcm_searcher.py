"""LCMSearcher (multitask BO) on a real local Ray: tune.run, Tuner with failures, save/restore, the example."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from record_helpers import description, known

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402
from ray_helpers import interrupted_then_restored, tuner_with_failures  # noqa: E402
from raytuner.searchers import LCMSearcher  # noqa: E402
from record_helpers import provenance  # noqa: E402

from raytuner.errors import InvalidInputError  # noqa: E402
from raytuner.models import LCMOptions  # noqa: E402
from raytuner.models.executors import InlineExecutor  # noqa: E402
from raytuner.problem.records import FunctionEvaluation  # noqa: E402
from raytuner.problem.space import ProblemSpace  # noqa: E402
from raytuner.store import JsonStore  # noqa: E402
from raytuner.test_problems import DEMO_PROBLEM, demo  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 2.0}]
FAST = LCMOptions(n_starts=2, max_iterations=200, warm_iterations=50)

pytestmark = pytest.mark.slow


def objective(config: dict) -> None:
    tune.report({"y": demo(config["x"], config["t"])})


def diverges(x: float) -> bool:
    # a band inside the space: a failed trial costs a new actor, and the model (which leaves failures out)
    # would keep probing a failure region at the edge of the space. Seed 3's initial design has a point in
    # the band: 1 or 2 failures in every one of the 256 orders of the first eight completions (the searcher
    # driven without Ray), so the test's "some failed" does not hang on the order Ray finishes trials in
    return 0.4 < x < 0.6


def sometimes_fails(config: dict) -> None:
    if diverges(config["x"]):
        raise RuntimeError("solver diverged")
    tune.report({"y": demo(config["x"], config["t"])})


def slowish(config: dict) -> None:
    time.sleep(0.2)  # so that a trial is in flight at the interrupt
    tune.report({"y": demo(config["x"], config["t"])})


def points(records: list[FunctionEvaluation]) -> list[tuple[float, float]]:
    return [(r.task_parameter["t"], r.tuning_parameter["x"]) for r in records]


def test_tune_run_persists_every_trial_and_stores_models(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = LCMSearcher(PROBLEM, TASKS, store, "demo", seed=0, engine_options={"n_initial": 3, "lcm": FAST})
    tune.run(
        objective,
        search_alg=searcher,
        num_samples=10,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )

    records = store.evaluations("demo")
    assert len(records) == 10 and all(r.status == "ok" for r in records)
    assert len(set(points(records))) == 10  # no (task, x) suggested twice
    for r in records:
        assert r.value("y") == pytest.approx(demo(r.tuning_parameter["x"], r.task_parameter["t"]))
        assert provenance(r).engine == "mla" and provenance(r).trial_id
    for task in TASKS:
        mine = [r for r in records if r.task_parameter == task]
        sources = Counter(provenance(r).proposer for r in mine)
        assert sources["initial"] == 3, sources  # the LHS design, then the model
        assert sources["model"] == len(mine) - 3 >= 1, sources
    models = store.models("demo")
    assert models and all(description(m)["modeler"].endswith(":mla") for m in models)
    uids = {r.uid for r in records}
    assert all(m.function_evaluations and set(m.function_evaluations) <= uids for m in models)
    assert searcher.session.records == records and not searcher.session.pending


def test_tuner_records_failures_and_never_resuggests_them(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = LCMSearcher(PROBLEM, TASKS, store, "demo", seed=3, engine_options={"n_initial": 3, "lcm": FAST})
    results, records = tuner_with_failures(searcher, sometimes_fails, store, "demo", 10, tmp_path, diverges)
    assert len(set(points(records))) == 10  # a failed config is never suggested again
    assert any(provenance(r).proposer == "model" for r in records)
    assert len(results.errors) == sum(r.status == "failed" for r in records)
    assert known(results.get_best_result().metrics)["y"] == min(r.known_value("y") for r in records if r.status == "ok")


def test_failed_configurations_are_never_suggested_again(tmp_path: Path) -> None:
    # a small integer space, where a repeat is likely unless failures are excluded; no Ray needed
    problem = ProblemSpace.parse(
        {**DEMO_PROBLEM, "parameter_space": [{"name": "n", "type": "integer", "lower_bound": 0, "upper_bound": 11}]}
    )
    searcher = LCMSearcher(
        problem,
        [{"t": 1.0}],
        JsonStore(tmp_path / "store"),
        "grid",
        seed=0,
        executor=InlineExecutor(),
        engine_options={"n_initial": 3, "lcm": FAST},
    )
    suggested = []
    for i in range(11):
        config = searcher.suggest(str(i))
        suggested.append(config["n"])
        if config["n"] % 3 == 0:
            searcher.on_trial_complete(str(i), error=True)
        else:
            searcher.on_trial_complete(str(i), {"y": (config["n"] - 4) ** 2 / 10})
    assert len(set(suggested)) == 11
    records = searcher.store.evaluations("grid")
    assert sum(r.status == "failed" for r in records) == sum(n % 3 == 0 for n in suggested) >= 3
    assert [r.raytuner.proposer for r in records].count("model") == 8


@pytest.mark.parametrize("told_before", [0, 3], ids=["initial-design", "model-phase"])
def test_restore_adopts_the_trials_in_flight(tmp_path: Path, told_before: int) -> None:
    # no Ray needed: the searcher's methods are called as Ray Tune would call them
    task = [{"t": 2.0}]
    store = JsonStore(tmp_path / "store")

    def searcher() -> LCMSearcher:
        return LCMSearcher(
            PROBLEM,
            task,
            store,
            "demo",
            seed=5,
            executor=InlineExecutor(),
            engine_options={"n_initial": 3, "lcm": FAST},
        )

    first = searcher()
    for i in range(told_before):
        config = first.suggest(f"warm{i}")
        first.on_trial_complete(f"warm{i}", {"y": demo(config["x"], config["t"])})
    a, b = first.suggest("a"), first.suggest("b")
    assert a != b
    first.on_trial_complete("a", {"y": demo(a["x"], a["t"])})
    checkpoint = tmp_path / "searcher.json"
    first.save(str(checkpoint))
    assert len(store.evaluations("demo")) == told_before + 1

    restored = searcher()
    restored.restore(str(checkpoint))
    assert set(restored.session.pending) == {"b"}
    assert restored.session.session_id == first.session.session_id
    c = restored.suggest("c")
    assert c["x"] != b["x"] and c["x"] != a["x"]  # b is in flight: not suggested again
    restored.on_trial_complete("b", {"y": demo(b["x"], b["t"])})
    records = store.evaluations("demo")
    assert len(records) == told_before + 2
    adopted = records[-1]
    assert adopted.tuning_parameter == {"x": b["x"]} and adopted.status == "ok"
    assert provenance(adopted).trial_id == "b" and provenance(adopted).proposer == (
        "initial" if told_before == 0 else "model"
    )
    assert adopted.value("y") == pytest.approx(demo(b["x"], b["t"]))
    restored.on_trial_complete("c", {"y": demo(c["x"], c["t"])})
    assert len(set(points(store.evaluations("demo")))) == told_before + 3


@pytest.mark.skipif(
    os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") != "0", reason="the interrupt relies on Tune's SIGINT handler"
)
def test_tuner_restore_continues_the_run_and_records_the_trials_in_flight(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = LCMSearcher(PROBLEM, TASKS, store, "demo", seed=2, engine_options={"n_initial": 2, "lcm": FAST})
    _, records, _ = interrupted_then_restored(searcher, slowish, store, "demo", 8, tmp_path)
    assert len(set(points(records))) == 8
    assert {provenance(r).proposer for r in records} == {"initial", "model"}


def test_mla_example_runs_and_prints_the_best_per_task(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    plot = tmp_path / "p.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/mla_demo.py"),
            "--store",
            str(tmp_path / "store"),
            "--tasks",
            "1.0",
            "2.0",
            "--samples-per-task",
            "5",
            "--initial",
            "3",
            "--plot",
            str(plot),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Best configuration per task" in proc.stdout
    rows = [
        row for row in (line.split() for line in proc.stdout.splitlines()) if len(row) == 7 and row[0] in {"1", "2"}
    ]
    assert [row[0] for row in rows] == ["1", "2"] and all(row[1] == "5" for row in rows)
    assert all(float(row[6]) >= 1.0 - 1e-6 for row in rows)  # the grid optimum is a lower bound
    with JsonStore(tmp_path / "store") as store:
        records = store.evaluations("GPTune-Demo-MLA")
        assert len(records) == 10 and store.models("GPTune-Demo-MLA")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not plot.exists()
    else:
        assert plot.exists() and plot.stat().st_size > 0


def test_a_used_up_space_finishes_the_search(tmp_path: Path) -> None:
    from ray.tune.search import Searcher

    problem = ProblemSpace.parse(
        {
            "parameter_space": [{"name": "n", "type": "integer", "lower_bound": 0, "upper_bound": 3}],
            "output_space": [{"name": "y", "type": "real", "goal": "minimize"}],
        }
    )
    searcher = LCMSearcher(
        problem, [{}], JsonStore(tmp_path), "tiny", seed=0, executor=InlineExecutor(), engine_options={"n_initial": 2}
    )
    seen = []
    for i in range(4):
        config = searcher.suggest(str(i))
        seen.append(config["n"])
        searcher.on_trial_complete(str(i), {"y": (config["n"] - 1) ** 2})
    assert sorted(seen) == [0, 1, 2, 3]
    assert searcher.suggest("4") == Searcher.FINISHED


def test_every_searcher_takes_the_same_arguments_in_the_same_order(tmp_path: Path) -> None:
    from raytuner.searchers import DiscreteBOSearcher, RandomSearcher, TLA2Searcher, TransferLearningSearcher

    head = ["problem", "tasks", "store", "problem_name", "metric", "mode", "seed"]
    for face in (RandomSearcher, LCMSearcher, DiscreteBOSearcher):
        assert list(inspect.signature(face.__init__).parameters)[1:8] == head, face
    for face in (TransferLearningSearcher, TLA2Searcher):  # one target task, from source data
        names = list(inspect.signature(face.__init__).parameters)[1:]
        assert names[:3] == ["problem", "target_task", "source"] and names[3:8] == head[2:], face
    for face in (LCMSearcher, DiscreteBOSearcher, TransferLearningSearcher, TLA2Searcher):
        parameters = inspect.signature(face.__init__).parameters.values()
        assert "engine_options" in inspect.signature(face.__init__).parameters
        assert len([p for p in parameters if p.kind is not p.VAR_KEYWORD]) - 1 <= 10, face


def test_an_engine_option_passed_beside_engine_options_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"^session_options: LCMSearcher takes no argument 'n_initial'"):
        LCMSearcher(PROBLEM, TASKS, JsonStore(tmp_path), "demo", n_initial=3)
    with pytest.raises(InvalidInputError, match=r"^engine_options: mla takes no option 'n_intial' \(allowed: "):
        LCMSearcher(PROBLEM, TASKS, JsonStore(tmp_path), "demo", engine_options={"n_intial": 3})
    assert not list(tmp_path.iterdir())  # refused before anything is written
