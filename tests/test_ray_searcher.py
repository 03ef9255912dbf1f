"""The Ray Tune face on a real local Ray: tune.run, Tuner, failures, resume, the main job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")
from example_helpers import ExampleRun  # noqa: E402
from ray import tune  # noqa: E402
from raytuner.searchers import RandomSearcher  # noqa: E402
from record_helpers import known, provenance  # noqa: E402

from raytuner.errors import InvalidInputError  # noqa: E402
from raytuner.problem.space import ProblemSpace  # noqa: E402
from raytuner.store import JsonStore  # noqa: E402
from raytuner.test_problems import DEMO_PROBLEM, demo  # noqa: E402

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 0.5}, {"t": 2.0}]

pytestmark = pytest.mark.slow


def objective(config: dict) -> None:
    tune.report({"y": demo(config["x"], config["t"])})


def diverges(x: float) -> bool:
    # a narrow band: each failed trial costs a new actor (about 3 s; x > 0.5 failed 3 and 4 trials of 8). A
    # task's first random draw does not depend on the order trials end in, and one of each failure test's
    # seed lies in the band (seed 4: x = 0.096 of t = 0.5; seed 6: x = 0.083 of t = 2), so some trial fails.
    return 0.08 < x < 0.1


def sometimes_fails(config: dict) -> None:
    if diverges(config["x"]):
        raise RuntimeError("solver diverged")
    tune.report({"y": demo(config["x"], config["t"])})


def test_tune_run_persists_every_trial_and_resumes(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    searcher = RandomSearcher(PROBLEM, TASKS, store, "demo", seed=1)
    tune.run(
        objective,
        search_alg=searcher,
        num_samples=6,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )
    records = store.evaluations("demo")
    assert len(records) == 6 and all(r.status == "ok" for r in records)
    assert sorted(r.task_parameter["t"] for r in records) == [0.5] * 3 + [2.0] * 3
    for r in records:
        assert r.value("y") == pytest.approx(demo(r.tuning_parameter["x"], r.task_parameter["t"]))
        assert provenance(r).engine == "random" and provenance(r).trial_id
        assert r.machine_configuration["machine_name"] and "ray" in r.software_configuration

    # a new searcher on the same store replays the log and continues without repeating points
    again = RandomSearcher(PROBLEM, TASKS, store, "demo", seed=1)
    assert len(again.session.records) == 6
    tune.run(
        objective,
        search_alg=again,
        num_samples=4,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )
    records = store.evaluations("demo")
    assert len(records) == 10
    assert len({(r.task_parameter["t"], r.tuning_parameter["x"]) for r in records}) == 10


def test_tuner_records_failed_trials_as_failed_evaluations(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    searcher = RandomSearcher(PROBLEM, TASKS, store, "demo", seed=4)
    tuner = tune.Tuner(
        sometimes_fails,
        tune_config=tune.TuneConfig(
            search_alg=searcher, num_samples=8, max_concurrent_trials=2, metric="y", mode="min", reuse_actors=True
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0),
    )
    results = tuner.fit()
    records = store.evaluations("demo")
    assert len(records) == 8
    failed = [r for r in records if r.status == "failed"]
    assert failed and all(diverges(r.tuning_parameter["x"]) for r in failed)
    assert all(provenance(r).failure_message == "trial raised an error" for r in failed)
    assert len(results.errors) == len(failed)
    best = results.get_best_result()
    assert known(best.metrics)["y"] == min(r.known_value("y") for r in records if r.status == "ok")


def test_a_mode_against_the_objective_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="^mode:"):
        RandomSearcher(PROBLEM, TASKS, JsonStore(tmp_path), "demo", mode="max")


def test_readme_main_job_runs_and_prints_the_best_per_task(multitask_run: ExampleRun) -> None:
    # examples/multitask_demo.py with tasks 1 and 2, three trials each, as a user runs it (conftest's multitask_run)
    assert multitask_run.returncode == 0, multitask_run.stderr[-3000:]
    assert "Best configuration per task" in multitask_run.stdout
    lines = [line.split() for line in multitask_run.stdout.splitlines()]
    rows = [row for row in lines if len(row) == 6 and row[0] in {"1", "2"}]
    assert len(rows) == 2 and all(row[1] == "3" for row in rows)
    with JsonStore(multitask_run.store) as store:
        assert len(store.evaluations("GPTune-Demo")) == 6


def test_the_progress_callback_shows_each_tasks_progress_through_the_tuner_api(local_ray: Any, tmp_path: Path) -> None:
    import io

    from raytuner.searchers import TuningProgress

    store = JsonStore(tmp_path)
    searcher = RandomSearcher(PROBLEM, TASKS, store, "demo", seed=6)
    out = io.StringIO()
    tuner = tune.Tuner(
        sometimes_fails,
        tune_config=tune.TuneConfig(
            search_alg=searcher, num_samples=8, max_concurrent_trials=2, metric="y", mode="min", reuse_actors=True
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "ray"), verbose=0, callbacks=[TuningProgress(searcher, every=3600, stream=out)]
        ),
    )
    tuner.fit()
    records = store.evaluations("demo")
    table = out.getvalue().splitlines()[-3:]  # the last table: the one written at the end
    assert out.getvalue().splitlines()[-4] == "demo: 8 evaluations"
    assert any(r.status == "failed" for r in records)  # so the table shows failures too
    for line, task in zip(table[1:], TASKS):
        mine = [r for r in records if r.task_parameter == task]
        ok = [r.known_value("y") for r in mine if r.status == "ok"]
        label, evals, failed, cost, best = line.split()
        assert (label, int(evals), int(failed)) == (f"t={task['t']:g}", len(mine), len(mine) - len(ok))
        assert float(cost) == len(mine) and (best == "-" if not ok else float(best) == pytest.approx(min(ok), rel=1e-5))
    with pytest.raises(InvalidInputError, match="tuner: .* has no tuning session"):
        TuningProgress(object())


def test_without_tables_the_progress_is_a_line_per_pass_and_stage_and_the_table_at_the_end(tmp_path: Path) -> None:
    import io
    from types import SimpleNamespace

    from raytuner.searchers import TuningProgress

    from raytuner.engines import GPTuneBand
    from raytuner.models.executors import InlineExecutor
    from raytuner.session.tuning_session import TuningSession
    from raytuner.test_problems import demo_fidelity

    band = GPTuneBand(PROBLEM, [{"t": 1.0}], seed=0, b_min=1, b_max=4, eta=2, passes=1, executor=InlineExecutor())
    session = TuningSession(PROBLEM, band, JsonStore(tmp_path), "band")
    out = io.StringIO()
    progress = TuningProgress(SimpleNamespace(session=session, engine=band), every=0, stream=out, tables=False)
    stages = set()
    while not band.finished:
        trial = session.ask()
        session.tell(trial, {"y": demo_fidelity(trial.config["x"], trial.task["t"], b=known(trial.fidelity), b_max=4)})
        p = band.progress()
        if not p["finished"]:  # the end is said once, by the table at the end
            stages.add((p["pass"], p["stage"]))
        progress.on_trial_complete(0, [], None)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(stages) >= 2 and all(line.startswith("band: ") for line in lines)
    progress.on_experiment_end([])
    assert out.getvalue().splitlines()[len(lines) + 1].startswith("task")  # the table at the end
    assert out.getvalue().count(", done, ") == 1  # it said "done" twice: the last stage's line and the table's
