"""The analysis page's figures (:mod:`raytuner.view.figures`) hold the history's own numbers.

Each figure is checked against the records it was drawn from: the best-so-far
line ends at each task's best, the distribution counts each task's evaluations,
parallel coordinates draw one line per evaluation on ticked axes, a rank
chart colours the best evaluation 0, a contour is the model's prediction.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest

from raytuner.analysis import surrogate_from_records
from raytuner.errors import InvalidInputError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, Provenance
from raytuner.problem.space import ProblemSpace
from raytuner.view import load_history, task_label
from raytuner.view.figures import (
    categories,
    contour_figure,
    duration,
    edf_figure,
    evaluations_at,
    fidelities,
    fidelity_figure,
    front_figure,
    history_figure,
    hypervolume_figure,
    numeric_parameters,
    parallel_evaluations,
    parallel_figure,
    rank_figure,
    slice_figures,
    timeline_figure,
)

PROBLEM = ProblemSpace.parse(
    {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 2}],
        "parameter_space": [
            {"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "b", "type": "integer", "lower_bound": 1, "upper_bound": 16},
            {"name": "c", "type": "categorical", "categories": ["qr", "lu"]},
        ],
        "output_space": [{"name": "y"}],
    }
)


def _history(fidelity: bool = False) -> HistoryDocument:
    """Two tasks, 20 evaluations each, every seventh failed; with ``fidelity``, levels 1 and 3 alternating."""
    rng = np.random.default_rng(0)
    records = []
    for n in range(40):
        t = 1.0 if n % 2 else 2.0
        a, b, c = float(rng.random()), int(rng.integers(1, 17)), ["qr", "lu"][n % 3 == 0]
        failed = n % 7 == 3
        level = Provenance(fidelity=3.0 if n % 4 < 2 else 1.0, cost=1.0 if n % 4 < 2 else 1 / 3)
        y = None if failed else (a - 0.3 * t) ** 2 + 0.01 * b
        records.append(
            FunctionEvaluation.create(
                {"t": t}, {"a": a, "b": b, "c": c}, {"y": y}, provenance=level if fidelity else None
            )
        )
    return HistoryDocument(tuning_problem_name="fig", func_eval=records)


def _objective(record: FunctionEvaluation) -> float | None:
    return record.value("y") if record.status == "ok" else None


def test_the_history_chart_ends_each_task_at_its_best_and_draws_each_evaluation() -> None:
    view = load_history(_history())
    figure = history_figure(view)
    json.dumps(figure, allow_nan=False)  # what the page sends is strict JSON
    for task, best in zip(view.tasks, view.best_per_task()):
        label = task_label(task)
        points, line = (t for t in figure["data"] if t["legendgroup"] == label)
        mine = [r for r in view.records if r.task_parameter == task]
        assert sorted(points["y"]) == sorted(v for r in mine if (v := _objective(r)) is not None)
        assert best is not None and line["y"][-1] == pytest.approx(best.value("y"))
        assert line["x"][-1] == len(mine) and line["customdata"][-1] == mine[-1].uid
        assert all(b <= a for a, b in zip(line["y"], line["y"][1:]))  # a best so far only improves
    costs = figure["layout"]["updatemenus"][0]["buttons"][1]["args"][0]["x"]
    assert len(costs) == len(figure["data"])  # the cost button moves every trace


def test_the_distribution_counts_each_task_s_evaluations_at_the_chosen_fidelity() -> None:
    view = load_history(_history(fidelity=True))
    assert fidelities(view) == [1.0, 3.0]
    for level in (None, 1.0):
        figure = edf_figure(view, level)
        for trace in figure["data"]:
            values = [
                v
                for r in view.records
                if task_label(r.task_parameter) == trace["name"]
                and r.raytuner is not None
                and r.raytuner.fidelity == (level or 3.0)
                and (v := _objective(r)) is not None
            ]
            assert trace["x"] == sorted(values) and trace["y"][-1] == 1.0
            assert trace["y"][0] == pytest.approx(1 / len(values))
    with pytest.raises(InvalidInputError, match="fidelity.*allowed: 1.0, 3.0"):
        evaluations_at(view, fidelity=2.0)
    axis = fidelity_figure(view, "t=1")["layout"]["xaxis"]
    assert (axis["tickvals"], axis["ticktext"]) == ([1.0, 3.0], ["1", "3"])  # a tick at each fidelity there is


def test_parallel_coordinates_draw_one_line_per_evaluation_on_ticked_axes() -> None:
    view = load_history(_history(), problem_space=PROBLEM)
    figure = parallel_figure(view, "t=1")
    frame = parallel_evaluations(view, "t=1")
    assert sorted(frame["uid"]) == sorted(evaluations_at(view, "t=1")["uid"]) and list(frame["y"]) == sorted(frame["y"])
    axes = 4  # a, b, c and y
    lines = {name: t["y"].count(None) for t in figure["data"] for name in [t["name"]]}
    assert sum(lines.values()) == len(frame) and figure["layout"]["xaxis"]["ticktext"] == ["a", "b", "c", "y"]
    best = figure["data"][-1]  # drawn last, on top
    assert best["name"] == "best 20%" and best["y"][axes - 1] == 0.0  # the best's objective at the axis' foot
    assert best["customdata"][:axes] == [frame["uid"].iloc[0]] * axes  # each vertex names its evaluation
    worst = figure["data"][0]
    assert max(v for v in worst["y"][axes - 1 :: axes + 1] if v is not None) == 1.0
    ticks: dict[int, list[str]] = {a["x"]: [] for a in figure["layout"]["annotations"]}
    for a in figure["layout"]["annotations"]:
        ticks[a["x"]].append(a["text"])
    assert ticks[2] == ["qr", "lu"]  # a categorical axis names its categories, in the problem's order
    assert ticks[0] == ["0.2", "0.4", "0.6", "0.8"] and all(t.isdigit() for t in ticks[1])  # round values
    assert len(ticks[3]) >= 3 and figure["layout"]["dragmode"] == "select"
    assert categories(load_history(_history()), "c") == ["lu", "qr"]  # no space known: the values seen, sorted


def test_rank_and_slice_charts_name_a_categorical_parameter_s_categories() -> None:
    view = load_history(_history())
    assert numeric_parameters(view) == ["a", "b"]
    figure = rank_figure(view, "t=2", "a", "b")
    [trace] = figure["data"]
    values = list(evaluations_at(view, "t=2")["y"])
    best = int(np.argmin(values))
    assert trace["marker"]["color"][best] == 0.0 and max(trace["marker"]["color"]) == 1.0
    assert trace["customdata"][best] == evaluations_at(view, "t=2")["uid"].iloc[best]
    slices = slice_figures(view, "t=2")
    assert list(slices) == ["a", "b", "c"] and set(slices["c"]["data"][0]["x"]) == {0.0, 1.0}
    assert slices["c"]["layout"]["xaxis"]["ticktext"] == ["lu", "qr"]
    figure = rank_figure(view, "t=2", "c", "a")  # a categorical axis names its categories
    seen = list(evaluations_at(view, "t=2")["c"])
    assert figure["data"][0]["x"] == [float(["lu", "qr"].index(v)) for v in seen]
    assert figure["layout"]["xaxis"]["ticktext"] == ["lu", "qr"] and figure["layout"]["xaxis"]["tickvals"] == [0, 1]
    with pytest.raises(InvalidInputError, match=r"x: 'd' is no tuning parameter of fig \(allowed: a, b, c\)"):
        rank_figure(view, "t=2", "d", "a")
    with pytest.raises(InvalidInputError, match="y: choose a parameter other than x"):
        rank_figure(view, "t=2", "a", "a")
    with pytest.raises(InvalidInputError, match="task: 't=9' is no task of fig"):
        parallel_figure(view, "t=9")


def test_the_contour_is_the_model_s_prediction_with_the_others_at_the_best() -> None:
    view = load_history(_history(), problem_space=PROBLEM)
    mine = [r for r in view.records if r.task_parameter == {"t": 1.0} and r.status == "ok"]
    model = surrogate_from_records(PROBLEM, mine, objective="y", task={"t": 1.0}, executor=InlineExecutor())
    figure = contour_figure(view, "t=1", "a", "b", model, size=12)
    contour, points = figure["data"]
    assert len(contour["x"]) == 12 and contour["x"] == sorted(contour["x"])
    assert contour["y"] == sorted(set(contour["y"])) and all(v == int(v) and 1 <= v <= 16 for v in contour["y"])
    best = min(mine, key=lambda r: r.known_value("y"))
    i, j = 5, 3
    expected, _ = model.predict([{"a": contour["x"][i], "b": int(contour["y"][j]), "c": best.tuning_parameter["c"]}])
    assert contour["z"][j][i] == pytest.approx(float(expected[0]), rel=1e-6)
    assert len(points["x"]) == len(mine) and f"c = {best.tuning_parameter['c']}" in figure["layout"]["title"]["text"]
    assert all(math.isfinite(v) for row in contour["z"] for v in row)
    figure = contour_figure(view, "t=1", "c", "a", model, size=12)  # a categorical parameter: each category
    contour, points = figure["data"]
    assert contour["x"] == [0.0, 1.0] and figure["layout"]["xaxis"]["ticktext"] == ["qr", "lu"]
    expected, _ = model.predict([{"a": contour["y"][4], "b": best.tuning_parameter["b"], "c": "lu"}])
    assert contour["z"][4][1] == pytest.approx(float(expected[0]), rel=1e-6)
    assert points["x"] == [float(["qr", "lu"].index(r.tuning_parameter["c"])) for r in mine]


TWO = ProblemSpace.parse(
    {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 2}],
        "parameter_space": [
            {"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "b", "type": "categorical", "categories": ["<b>x</b>", "y"]},
        ],
        "output_space": [
            {"name": "f1"},
            {"name": "f2", "goal": "maximize"},
            {"name": "mem", "optimize": False, "upper_bound": 0.8},
        ],
    }
)


def _two_objectives() -> HistoryDocument:
    rng = np.random.default_rng(3)
    records = []
    for n in range(30):
        a, t = float(rng.random()), 1.0 if n % 2 else 2.0
        b = ["<b>x</b>", "y"][n % 2]
        outputs = {"f1": a * t, "f2": 1 - (1 - a) ** 2 + 0.1 * rng.random(), "mem": float(rng.random())}
        failure = "out of <memory>" if n % 9 == 4 else None
        records.append(FunctionEvaluation.create({"t": t}, {"a": a, "b": b}, outputs, failure=failure))
    return HistoryDocument(tuning_problem_name="two", func_eval=records)


def test_the_hypervolume_of_each_task_is_a_peer_s_hypervolume_of_its_feasible_points() -> None:
    from optuna._hypervolume import compute_hypervolume  # Optuna's own code, as a check

    view = load_history(_two_objectives(), problem_space=TWO)
    figure = hypervolume_figure(view)
    for trace in figure["data"]:
        task = {"t": 1.0} if trace["name"] == "t=1" else {"t": 2.0}
        counted = [
            r
            for r in view.records
            if r.task_parameter == task
            and r.status == "ok"
            and r.known_value("mem") <= 0.8  # feasible: the memory bound
        ]
        points = np.array([[r.known_value("f1"), -r.known_value("f2")] for r in counted])  # f2 is maximised
        span = points.max(axis=0) - points.min(axis=0)
        reference = points.max(axis=0) + 0.1 * span
        assert trace["y"][-1] == pytest.approx(compute_hypervolume(points, reference), rel=1e-9)
        assert all(b >= a for a, b in zip(trace["y"], trace["y"][1:])) and len(trace["x"]) == len(counted)


def test_the_front_timeline_and_labels_show_the_records_and_escape_their_markup() -> None:
    view = load_history(_two_objectives(), problem_space=TWO)
    figure = front_figure(view, "t=2")
    front = next(t for t in figure["data"] if t["name"].startswith("Pareto front"))
    assert front["customdata"] == [
        r.uid for r in sorted(view.pareto_front({"t": 2.0}), key=lambda r: r.known_value("f1"))
    ]
    assert all("b = &lt;b&gt;x&lt;/b&gt;" in text for text in front["text"])  # a category's markup, shown as text
    feasible = [
        r for r in view.records if r.task_parameter == {"t": 2.0} and r.status == "ok" and r.known_value("mem") <= 0.8
    ]
    low, high = min(r.known_value("f1") for r in feasible), max(r.known_value("f1") for r in feasible)
    margin = 0.08 * (high - low)
    assert figure["layout"]["xaxis"]["range"] == pytest.approx([low - margin, high + margin])  # as plot_front frames
    timeline = timeline_figure(view)
    failed = next(t for t in timeline["data"] if t["name"] == "failed")
    assert len(failed["x"]) == sum(r.status == "failed" for r in view.records) == 3  # n = 4, 13, 22
    assert all("out of &lt;memory&gt;" in text for text in failed["text"])
    assert all(t["mode"] == "markers" for t in timeline["data"])  # no record says how long it ran
    with pytest.raises(InvalidInputError, match="objective: fig is not known to have several objectives"):
        hypervolume_figure(load_history(_history()))


def test_the_timeline_draws_a_bar_from_start_to_end_where_a_record_says_how_long_it_ran() -> None:
    started = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=30)).isoformat()  # a time zone: converted
    records = [
        FunctionEvaluation.create({"t": 1.0}, {"a": 0.5}, {"y": 1.0}, provenance=Provenance(elapsed=90.0)),
        FunctionEvaluation.create({"t": 1.0}, {"a": 0.6}, {"y": 2.0}),
        FunctionEvaluation.create({"t": 2.0}, {"a": 0.65}, {"y": 2.5}, additional_output={"time_total_s": 4}),
        FunctionEvaluation.create(
            {"t": 1.0}, {"a": 0.7}, failure="boom", outputs=["y"], provenance=Provenance(started=started)
        ),
    ]
    view = load_history(HistoryDocument(tuning_problem_name="timed", func_eval=records))
    assert [duration(r) for r in records[:3]] == [90.0, None, 4.0]  # the last: what Ray Tune reported
    assert duration(records[3]) == pytest.approx(30, abs=2)  # the record's time has whole seconds
    traces = {(t["name"], t["mode"]): t for t in timeline_figure(view)["data"]}
    bar = traces["succeeded", "lines"]  # a bar per evaluation, each on its own row: its number
    start, end = (dt.datetime.fromisoformat(x) for x in bar["x"][:2])
    assert (end - start).total_seconds() == 90.0 and bar["customdata"][:2] == [records[0].uid] * 2
    assert bar["y"] == [1, 1, None, 3, 3, None] and "t=2" in bar["text"][3]
    assert traces["succeeded", "markers"]["customdata"] == [records[1].uid]  # no duration: a point when it ended
    failed = traces["failed", "lines"]
    assert failed["customdata"][:2] == [records[3].uid] * 2 and "<br>ran " in failed["text"][0]
