"""The Python view of a history, its plots, ``raytuner history show|plot`` and the progress of a run.

The stores are made by the main job's example (``examples/band_demo.py`` on a
local Ray), read from the JSON store it writes and from a MongoDB store the
same records were imported into.
"""

from __future__ import annotations

import json
import logging
import math
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pymongo
import pytest
from click.testing import CliRunner
from dashboard_helpers import BAND_PROBLEM
from record_helpers import known, provenance

from raytuner.cli import main
from raytuner.engines import RandomSearch
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, Provenance
from raytuner.problem.space import ProblemSpace
from raytuner.session.progress import ProgressTally
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore, open_store
from raytuner.test_problems import DEMO_PROBLEM, demo
from raytuner.view import (
    HistoryView,
    load_history,
    plot_brackets,
    plot_history,
    plot_parameter,
    plot_task_correlation,
    task_label,
)

pytestmark = pytest.mark.slow


@pytest.fixture(params=["json", "mongodb"])
def location(request: pytest.FixtureRequest, band_store: Path) -> Iterator[str]:
    """The example's store, as written (JSON) and imported into a fresh MongoDB database."""
    if request.param == "json":
        yield str(band_store)
        return
    mongo_uri = request.getfixturevalue("mongo_uri")
    database = f"view_{uuid.uuid4().hex}"
    uri = f"{mongo_uri}/{database}"
    with JsonStore(band_store) as source, open_store(uri) as target:
        target.import_document(source.export_document(BAND_PROBLEM))
    try:
        yield uri
    finally:
        with pymongo.MongoClient[dict[str, Any]](mongo_uri) as client:
            client.drop_database(database)


def _expected_best(records: list[FunctionEvaluation]) -> dict[str, float]:
    """Per task label the least y at the highest fidelity, computed from the records directly."""
    top = max(known(provenance(r).fidelity) for r in records)
    best: dict[str, float] = {}
    for r in records:
        if r.status == "ok" and provenance(r).fidelity == top:
            label = task_label(r.task_parameter)
            best[label] = min(best.get(label, math.inf), r.known_value("y"))
    return best


def test_the_view_of_an_example_store_gives_the_best_per_task_and_best_so_far(location: str) -> None:
    view = load_history(location)
    with JsonStore(Path(location)) if not location.startswith("mongodb") else open_store(location) as store:
        records = store.evaluations(BAND_PROBLEM)
    assert isinstance(view, HistoryView) and view.problem == BAND_PROBLEM
    assert len(view.frame) == len(records) == len(view.records)
    assert set(view.frame.columns) >= {
        "task",
        "t",
        "x",
        "y",
        "fidelity",
        "cost",
        "pass",
        "bracket",
        "rung",
        "status",
        "time",
        "machine",
        "software",
        "uid",
    }
    assert view.goal == "minimize" and view.goal_source == "model" and view.full_fidelity == 27
    best = view.best_table()
    assert dict(zip(best["task"], best["y"])) == _expected_best(records)
    assert (best["fidelity"] == 27).all() and best["evaluations"].sum() == len(records)
    curves = view.best_so_far()
    for label, mine in curves.groupby("task"):
        values = mine["best"].dropna().to_numpy()
        assert (values[1:] <= values[:-1]).all()  # the running best never gets worse
        assert values[-1] == _expected_best(records)[label]
        assert mine["evaluation"].tolist() == list(range(1, len(mine) + 1))
        assert mine["cost"].is_monotonic_increasing


def test_the_plots_draw_what_the_view_holds(band_store: Path) -> None:
    view = load_history(band_store)
    history = plot_history(view)
    assert len(known(history.axes[0].get_legend()).get_texts()) == len(view.tasks) == 2  # a line and an end each
    assert len(history.axes[0].lines) == 2 * len(view.tasks)
    assert plot_history(view, by="cost").axes[0].get_xlabel() == "normalised cost spent by the task"
    scatter = plot_parameter(view, "x", task="t=1")
    assert len(np.asarray(scatter.axes[0].collections[0].get_offsets())) == (view.frame["task"] == "t=1").sum()
    correlation = plot_task_correlation(view)
    image = known(correlation.axes[0].images[0].get_array())
    assert image.shape[0] == image.shape[1] >= 2 and abs(image[0, 0] - 1) < 1e-9
    ink = {t.get_text(): t.get_color() for t in correlation.axes[0].texts}
    assert ink["1.00"] == "white"  # the diagonal's dark red: white figures
    brackets = plot_brackets(view, task="t=1.3")
    promotions = sum(1 for r in view.records if provenance(r).parent and r.task_parameter == {"t": 1.3})
    assert promotions > 0 and len(brackets.axes[0].lines) == promotions
    with pytest.raises(Exception, match="task: 't=9' is no task"):
        plot_history(view, task="t=9")


def test_a_maximised_objective_and_failures_are_read_right() -> None:
    problem = ProblemSpace.parse({**DEMO_PROBLEM, "output_space": [{"name": "y", "goal": "maximize"}]})
    records = [
        FunctionEvaluation.create({"t": 1.0}, {"x": 0.1}, {"y": 1.0}),
        FunctionEvaluation.create({"t": 1.0}, {"x": 0.2}, failure="crashed", outputs=["y"]),
        FunctionEvaluation.create({"t": 1.0}, {"x": 0.3}, {"y": 3.0}),
        FunctionEvaluation.create({"t": 1.0}, {"x": 0.4}, {"y": 2.0}),
    ]
    view = load_history(HistoryDocument(tuning_problem_name="p", func_eval=records), problem_space=problem)
    assert view.goal == "maximize" and view.goal_source == "problem"
    assert view.best_table()["x"].tolist() == [0.3] and view.best_table()["failed"].tolist() == [1]
    assert view.best_so_far()["best"].tolist() == [1.0, 1.0, 3.0, 3.0]
    assert view.frame["failure"].tolist()[1] == "crashed"
    with pytest.raises(Exception, match="goal: 'largest' is not a goal"):
        load_history(HistoryDocument(tuning_problem_name="p"), goal="largest")  # type: ignore[arg-type]  # the wrong type is what the test gives


def test_history_show_prints_the_best_per_task_a_table_json_and_csv(location: str) -> None:
    runner = CliRunner()
    shown = runner.invoke(main, ["history", "show", location, "--last", "3"])
    assert shown.exit_code == 0, shown.output
    best = _expected_best(load_history(location).records)
    lines = shown.stdout.splitlines()
    start = lines.index("best y per task (minimize at fidelity 27):")
    rows = {line.split()[0]: float(line.split()[4]) for line in lines[start + 2 : start + 4]}
    assert rows == pytest.approx(best, rel=1e-5)
    assert any(line.startswith("latest 3 of ") for line in lines)
    data = json.loads(runner.invoke(main, ["history", "show", location, "--json"]).stdout)
    assert {task_label(t["task"]): t["best"]["value"] for t in data["best"]["tasks"]} == best
    csv = runner.invoke(main, ["history", "show", location, "--csv"]).stdout.splitlines()
    assert csv[0].startswith("task,t,x,y,fidelity") and len(csv) == 1 + data["func_eval"]
    both = runner.invoke(main, ["history", "show", location, "--json", "--csv"])
    assert both.exit_code == 2 and "choose one of --json and --csv" in both.output


@pytest.mark.parametrize("kind", ["history", "parameter", "correlation", "brackets"])
def test_history_plot_writes_each_kind(band_store: Path, tmp_path: Path, kind: str) -> None:
    out = tmp_path / f"{kind}.png"
    result = CliRunner().invoke(
        main, ["history", "plot", str(band_store), "--kind", kind, "--task", "t=1.3", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_history_plot_refuses_bad_input_in_one_line(band_store: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    bad_task = runner.invoke(
        main, ["history", "plot", str(band_store), "--task", "t=9", "--out", str(tmp_path / "a.png")]
    )
    assert bad_task.exit_code == 2 and bad_task.output.count("\n") == 1 and "t=9" in bad_task.output
    assert not (tmp_path / "a.png").exists()
    bad_kind = runner.invoke(
        main, ["history", "plot", str(band_store), "--kind", "pie", "--out", str(tmp_path / "b.png")]
    )
    assert bad_kind.exit_code == 2 and "'pie' is not one of" in bad_kind.output
    bad_format = runner.invoke(main, ["history", "plot", str(band_store), "--out", str(tmp_path / "x.bmpx")])
    assert bad_format.exit_code == 2 and bad_format.output.count("\n") == 1, bad_format.output  # was exit 70, a "bug"
    assert "--out" in bad_format.output and "x.bmpx" in bad_format.output and ".png, " in bad_format.output
    assert not list(tmp_path.glob("x.*"))


def test_records_read_as_a_user_expects() -> None:
    record = FunctionEvaluation.create(
        {"t": 1.0},
        {"x": 0.25},
        {"y": 0.5},
        uid="0123456789",
        provenance=Provenance(fidelity=9.0, bracket=2, rung=1, **{"pass": 1}),
    )
    assert repr(record) == (
        "FunctionEvaluation(task={'t': 1.0}, config={'x': 0.25}, outputs={'y': 0.5}, "
        "fidelity=9, pass=1, bracket=2, rung=1, uid='01234567')"
    )
    failed = FunctionEvaluation.create({"t": 1.0}, {"x": 0.25}, failure="diverged", outputs=["y"], uid="abc")
    assert str(failed) == "FunctionEvaluation(task={'t': 1.0}, config={'x': 0.25}, failed='diverged', uid='abc')"


def test_a_session_logs_each_tasks_progress_at_info(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": 1.0}, {"t": 2.0}]
    with JsonStore(tmp_path / "s") as store, caplog.at_level(logging.INFO, logger="raytuner.session.tuning_session"):
        session = TuningSession(problem, RandomSearch(problem, tasks, seed=3), store, "p")
        values: dict[float, list[float]] = {1.0: [], 2.0: []}
        for _ in range(6):
            trial = session.ask()
            y = demo(trial.config["x"], trial.task["t"])
            values[trial.task["t"]].append(y)
            session.tell(trial, {"y": y})
        lines = [
            r.getMessage()
            for r in caplog.records
            if r.name == "raytuner.session.tuning_session" and "evaluations" in r.message
        ]
        assert len(lines) == 6
        last = {t: [line for line in lines if line.startswith(f"p: t={t:g}:")][-1] for t in values}
        for t, line in last.items():
            assert f"{len(values[t])} evaluations, 0 failed" in line and f"best y {min(values[t]):.6g}" in line
        resumed = TuningSession.resume(
            problem, RandomSearch(problem, tasks, seed=3), store, "p", session_id=session.session_id
        )
        table = resumed.progress.table()
        assert len(table) == 3 and table[1].split()[:2] == ["t=1", str(len(values[1.0]))]


def test_the_tally_takes_the_best_at_the_highest_fidelity_only() -> None:
    tally = ProgressTally(ProblemSpace.parse(DEMO_PROBLEM))
    low = FunctionEvaluation.create({"t": 1.0}, {"x": 0.1}, {"y": 0.1}, provenance=Provenance(fidelity=1.0, cost=0.1))
    high = FunctionEvaluation.create({"t": 1.0}, {"x": 0.2}, {"y": 0.9}, provenance=Provenance(fidelity=9.0, cost=1.0))
    progress = tally.add(low)
    assert tally.best(progress) == (0.1, {"x": 0.1})  # fidelity 1 is the highest seen so far
    tally.add(high)
    assert tally.best(progress) == (0.9, {"x": 0.2}) and progress.cost == pytest.approx(1.1)


def test_the_view_s_best_is_the_engines_best_an_output_constraint_counts() -> None:
    problem = ProblemSpace.parse(
        {**DEMO_PROBLEM, "output_space": [{"name": "y"}, {"name": "mem", "optimize": False, "upper_bound": 1.0}]}
    )
    records = [  # on t = 1 the lowest y breaks the memory bound; t = 2 only fails
        FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": y, "mem": mem})
        for x, y, mem in ((0.1, 0.5, 0.2), (0.2, 0.1, 3.0), (0.3, 0.3, 0.9))
    ] + [FunctionEvaluation.create({"t": 2.0}, {"x": 0.4}, failure="diverged")]
    engine = RandomSearch(problem, [{"t": 1.0}, {"t": 2.0}], seed=0)
    engine.replay(records)
    view = load_history(HistoryDocument(tuning_problem_name="m", func_eval=records), problem_space=problem)
    assert view.best({"t": 1.0}) is view.best() is records[2]
    assert view.best_per_task() == engine.best_per_task() == [records[2], None]
    with pytest.raises(InvalidInputError, match=r"^task: \{'t': 9.0\} is no task of this history"):
        view.best({"t": 9.0})


def test_history_plot_takes_a_size_a_dpi_and_a_title_and_says_which_task_it_chose(
    band_store: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    out = tmp_path / "sized.png"
    result = runner.invoke(
        main, ["history", "plot", str(band_store), "--size", "5", "3", "--dpi", "80", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    width, height = struct.unpack(">II", out.read_bytes()[16:24])  # the PNG header's IHDR
    assert (width, height) == (400, 240)
    titled = tmp_path / "titled.svg"
    result = runner.invoke(main, ["history", "plot", str(band_store), "--title", "Solver runs", "--out", str(titled)])
    assert result.exit_code == 0 and "Solver runs" in titled.read_text()
    tasks = [task_label(t) for t in load_history(band_store).tasks]
    chose = runner.invoke(main, ["history", "plot", str(band_store), "--kind", "brackets", "--out", str(out)])
    assert chose.exit_code == 0 and f"no --task: drawing {tasks[0]}, the first of {len(tasks)} tasks" in chose.stderr
    every = tmp_path / "parameter.svg"
    runner.invoke(main, ["history", "plot", str(band_store), "--kind", "parameter", "--out", str(every)])
    assert all(label in every.read_text() for label in tasks)  # one colour per task, named in the legend


def test_history_show_speaks_one_format_and_keeps_constraints_apart(tmp_path: Path) -> None:
    problem = ProblemSpace.parse(
        {**DEMO_PROBLEM, "output_space": [{"name": "y"}, {"name": "mem", "optimize": False, "upper_bound": 2.0}]}
    )
    records = [
        FunctionEvaluation.create({"t": 1.0}, {"x": 0.3}, {"y": 0.2, "mem": 1.5}, provenance=Provenance(fidelity=27.0)),
        FunctionEvaluation.create({"t": 1.0}, {"x": 0.6}, failure="diverged", outputs=["y", "mem"]),
    ]
    with JsonStore(tmp_path / "store") as store:
        store.append_many("p", records)
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"tuning_problem_name": "p", "problem_space": problem.model_dump()}))
    shown = CliRunner().invoke(main, ["history", "show", str(tmp_path / "store"), "--meta", str(meta)])
    assert shown.exit_code == 0, shown.output
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in shown.stdout.splitlines()[:9]}
    assert lines["status"] == "failed 1, ok 1" and lines["task"] == "t=1: failed 1, ok 1"
    assert lines["objectives"] == "y" and lines["constraints"] == "mem <= 2" and lines["recorded"] == "mem"
    assert "{" not in shown.stdout and "27.0" not in shown.stdout and "NaN" not in shown.stdout


def test_the_pareto_chart_frames_the_feasible_front_and_draws_bounds_as_lines() -> None:
    from raytuner.view import plot_front

    problem = ProblemSpace.parse(
        {
            **DEMO_PROBLEM,
            "output_space": [
                {"name": "f1", "upper_bound": 0.9},
                {"name": "f2"},
                {"name": "mem", "optimize": False, "upper_bound": 1.0},
            ],
        }
    )
    feasible = [
        FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"f1": x, "f2": 1 - x, "mem": 0.5}) for x in (0.1, 0.5, 0.8)
    ]
    far = FunctionEvaluation.create({"t": 1.0}, {"x": 0.3}, {"f1": 0.3, "f2": 100.0, "mem": 9.0})  # breaks mem, far off
    view = load_history(HistoryDocument(tuning_problem_name="mo", func_eval=[*feasible, far]), problem_space=problem)
    ax = plot_front(view).axes[0]
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    assert x0 < 0.1 and x1 > 0.8 and y0 < 0.2 and 0.9 < y1 < 2.0  # the feasible points fill the view
    assert "1 infeasible beyond the view" in ax.get_title()
    assert any(np.asarray(line.get_xdata()).tolist() == [0.9, 0.9] for line in ax.lines)  # f1 <= 0.9, dashed
