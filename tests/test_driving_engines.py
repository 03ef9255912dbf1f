"""The engines driven directly, as a user does: no silent drops, failures told one way, per-task budgets,
integer fidelities, time limits that hold inline, and runs that repeat by seed."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_helpers import FAST
from record_helpers import provenance

from raytuner.engines import MLA, GPTuneBand, RandomSearch
from raytuner.engines.base import Suggestion
from raytuner.errors import InvalidInputError, TrialConflict, TuningFinished
from raytuner.models import LCM, LCMOptions, TrainingData
from raytuner.models.executors import InlineExecutor, ProcessExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo_fidelity

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 1.3}, {"t": 1.6}]
FAILING = (0.45, 0.6)  # the objective fails for x in this range


def band(**kwargs: Any) -> GPTuneBand:
    options = {
        "seed": 0,
        "b_min": 1,
        "b_max": 8,
        "eta": 2,
        "lcm": FAST,
        "executor": InlineExecutor(),
        "search_candidates": 256,
        **kwargs,
    }
    return GPTuneBand(PROBLEM, options.pop("tasks", TASKS), **options)


def outputs(s: Suggestion, b_max: float = 8.0) -> dict[str, float] | None:
    """The demo function at the suggestion's fidelity; ``None`` (no output) in the failing region."""
    if FAILING[0] <= s.config["x"] <= FAILING[1]:
        return None
    return {"y": demo_fidelity(s.config["x"], s.task["t"], b=s.fidelity or b_max, b_max=b_max)}


# -- 1. nothing told is dropped without a word ------------------------------------------------------
def test_a_record_without_provenance_is_matched_to_its_suggestion_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = band()
    s = engine.ask()
    bare = FunctionEvaluation.create(s.task, s.config, outputs(s))  # provenance forgotten
    with caplog.at_level(logging.WARNING, logger="raytuner.engines.gptuneband.engine"):
        record = engine.tell(bare)
    assert "without its suggestion's provenance" in caplog.text
    assert engine.progress()["evaluations"] == 1 and engine.progress()["in_flight"] == 0
    assert (provenance(record).bracket, provenance(record).rung, provenance(record).pass_) == (
        s.provenance.bracket,
        s.provenance.rung,
        s.provenance.pass_,
    )
    assert engine.cost_per_task()[0] == pytest.approx(s.provenance.cost)


def test_a_record_that_matches_nothing_in_flight_is_refused_and_changes_nothing() -> None:
    engine = band()
    s = engine.ask()
    stray = FunctionEvaluation.create(s.task, {"x": 0.123456}, {"y": 1.0})
    with pytest.raises(InvalidInputError, match=r"^provenance: .*matches 0 GPTuneBand suggestions in flight"):
        engine.tell(stray)
    assert engine.progress()["evaluations"] == 0 and engine.progress()["in_flight"] == 1
    changed = FunctionEvaluation.create(s.task, {"x": round(s.config["x"], 2)}, {"y": 1.0}, provenance=s.provenance)
    with pytest.raises(InvalidInputError, match=r"^provenance: .* at pass 1 bracket \d rung 0 matches 0"):
        engine.tell(changed)  # a configuration changed on its way back
    record = engine.tell(s, outputs(s))
    with pytest.raises(InvalidInputError, match="^uid: .*told to this engine already"):
        engine.tell(record)
    assert engine.tell(s, outputs(s)).uid == record.uid  # one suggestion told again alike: a retry
    with pytest.raises(TrialConflict, match="^suggestion: .*told before with another result"):
        engine.tell(s, {"y": 123.0})  # ... and with another result: refused
    assert engine.cost_per_task()[0] == pytest.approx(s.provenance.cost)
    with pytest.raises(InvalidInputError, match=r"^task: \{'t': 5.0\} is not one of the engine's tasks"):
        engine.tell(FunctionEvaluation.create({"t": 5.0}, s.config, {"y": 1.0}, provenance=s.provenance))
    assert engine.progress()["evaluations"] == 1


def test_mla_takes_an_evaluation_it_did_not_ask_as_data_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    engine = MLA(PROBLEM, TASKS[:1], seed=0, n_initial=2, lcm=FAST, executor=InlineExecutor())
    s = engine.ask()
    with caplog.at_level(logging.WARNING, logger="raytuner.engines.mla"):
        engine.tell(FunctionEvaluation.create(s.task, {"x": 0.9}, {"y": 1.0}))
    assert "matches no suggestion in flight" in caplog.text
    assert engine.evaluated[0] == [{"x": 0.9}] and engine.pending[0] == [s.config]


@pytest.mark.parametrize(
    "reported, reason",
    [
        (None, "no output reported"),
        ({"y": None}, "y: no value"),
        ({"y": math.nan}, "non-finite output y=nan"),
        ({"y": "fast"}, "y: 'fast' is not a number"),
    ],
)
def test_a_failure_is_a_failed_record_with_its_reason(reported: Any, reason: str) -> None:
    for engine in (band(), MLA(PROBLEM, TASKS, seed=0, executor=InlineExecutor()), RandomSearch(PROBLEM, TASKS)):
        s = engine.ask()
        record = engine.tell(s, reported)
        assert record.status == "failed" and provenance(record).failure_message == reason
        assert record.evaluation_result == {"y": None}


def test_tell_failure_and_bad_outputs_one_way() -> None:
    engine = band()
    s = engine.ask()
    with pytest.raises(InvalidInputError, match=r"^outputs\['z'\]: not an output of the problem \(allowed: y\)"):
        engine.tell(s, {"z": 1.0})
    with pytest.raises(InvalidInputError, match="^outputs: a FunctionEvaluation carries its own outputs"):
        engine.tell(FunctionEvaluation.create(s.task, s.config, {"y": 1.0}, provenance=s.provenance), {"y": 1.0})
    record = engine.tell(s, {"y": 0.5}, failure="out of memory")
    assert record.status == "failed" and provenance(record).failure_message == "out of memory"
    assert provenance(record).cost == s.provenance.cost and engine.cost_per_task()[0] == s.provenance.cost


# -- 2. per-task budgets and integer fidelities ------------------------------------------------------
def test_fidelities_are_integers_when_b_min_and_b_max_are(caplog: pytest.LogCaptureFixture) -> None:
    assert band(b_min=1, b_max=52, eta=3).structure.fidelities == (52.0, 17.0, 6.0, 2.0)
    assert band(b_min=1, b_max=52, eta=3, integer_fidelities=False).structure.fidelities[1] == pytest.approx(52 / 3)
    caplog.clear()  # what a logger at INFO already (another test's doing) caught above is not asserted
    with caplog.at_level(logging.INFO, logger="raytuner.engines.bandit"):
        assert band(b_min=0.5, b_max=4.5, eta=3).structure.fidelities == (4.5, 1.5, 0.5)
    assert "fractional" in caplog.text and "integer_fidelities=True" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="raytuner.engines.bandit"):
        band(b_min=1, b_max=52, eta=3, integer_fidelities=False)
    assert "are fractional" in caplog.text and "integer_fidelities=True rounds them" in caplog.text


@pytest.mark.parametrize("budget", [5.0, 11.5])
def test_each_task_ends_at_its_budget_and_tasks_advance_evenly(budget: float) -> None:
    engine = band(budget=budget)
    largest_gap = 0.0
    while not engine.finished:
        s = engine.ask()
        engine.tell(s, outputs(s))
        spent = engine.cost_per_task()
        largest_gap = max(largest_gap, max(spent) - min(spent))
    spent = engine.cost_per_task()
    structure = engine.structure
    # a rung's promotions follow each other (a paused iterative trial waits for its promotion), so a task
    # may lead by one bracket's promotions and one sample, never more
    chain = max(sum(n * structure.cost(b) for n, b in structure.rungs(s)[1:]) for s in range(structure.s_max + 1))
    assert all(budget - 1.0 <= c <= budget + 1e-9 for c in spent), spent  # never past it, at most one b_max short
    assert largest_gap <= chain + 1.0 + 1e-9, (largest_gap, chain)
    assert engine.finished_tasks() == [True] * len(TASKS)
    assert engine.progress()["tasks_finished"] == len(TASKS) and engine.progress()["budget"] == budget
    with pytest.raises(TuningFinished, match="budget of"):
        engine.ask(TASKS[0])
    assert any(r.status == "failed" for r in engine._records)  # the failing region was visited


def test_a_budget_and_the_plan_limits_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="^budget: must be a number > 0"):
        band(budget=-1)
    with pytest.raises(InvalidInputError, match="^passes: must be an integer >= 1 or None"):
        band(passes=0)
    with pytest.raises(InvalidInputError, match="^integer_fidelities: must be true, false or none"):
        band(integer_fidelities="yes")


def test_a_replayed_budgeted_run_stands_where_the_original_stood() -> None:
    first = band(budget=6.0)
    records = []
    for _ in range(25):
        s = first.ask()
        records.append(first.tell(s, outputs(s)))
    again = band(budget=6.0)
    again.replay(records)
    assert again.cost_per_task() == first.cost_per_task()
    assert again.finished_tasks() == first.finished_tasks()
    assert again.ask().config == first.ask().config


# -- 3. the fit's time limit holds in every executor ------------------------------------------------
@pytest.mark.parametrize("executor", [InlineExecutor(), ProcessExecutor(2)], ids=["inline", "processes"])
def test_a_fit_stops_at_its_time_limit_and_keeps_the_best_hyperparameters(executor: Any) -> None:
    rng = np.random.default_rng(0)
    X = [rng.random((120, 3)) for _ in range(4)]
    data = TrainingData(X, [np.sin(6 * x[:, 0]) + k * x[:, 1] for k, x in enumerate(X)])
    options = LCMOptions(timeout=0.2, n_starts=2, max_iterations=5000)
    fitted = LCM(options).fit(data, seed=0, executor=executor)
    assert fitted.report.timed_out
    assert all(start.get("timed_out") for start in fitted.report.starts)
    assert fitted.report.iterations < 2 * 5000
    assert np.isfinite(fitted.log_likelihood_gradient()).all()  # a usable model, not the default
    untimed = LCM(LCMOptions(n_starts=1, max_iterations=5)).fit(data, seed=0, executor=InlineExecutor())
    assert not untimed.report.timed_out


# -- 4. same seed, same inputs, same results -------------------------------------------------------
def _drive(store: Path, executor: Any) -> list[dict[str, Any]]:
    """A budgeted GPTuneBand run through a session into a JSON store; its records, uids made positional."""
    engine = band(
        budget=6.0,
        executor=executor,
        n_initial=2,  # fewer than N(0): the model suggests too
        lcm=LCMOptions(n_starts=2, warm_starts=2, max_iterations=80),
    )
    session = TuningSession(PROBLEM, engine, JsonStore(store), "demo")
    while not engine.finished:
        trial = session.ask()
        session.tell(trial, outputs(trial))
    records = [r.to_dict() for r in JsonStore(store).evaluations("demo")]
    position = {r["uid"]: n for n, r in enumerate(records)}
    out = []
    for r in records:
        r = dict(r)
        r.pop("time", None)
        r["uid"] = position[r["uid"]]
        prov = dict(r.get("raytuner") or {})
        for volatile in ("trial_id", "session_id", "machine"):
            prov.pop(volatile, None)
        if prov.get("parent") is not None:
            prov["parent"] = position[prov["parent"]]
        r["raytuner"] = prov
        r.pop("machine_configuration", None)
        r.pop("software_configuration", None)
        out.append(r)
    return out


@pytest.mark.parametrize("executor", [InlineExecutor(), ProcessExecutor(2)], ids=["inline", "processes"])
def test_two_runs_with_the_same_seed_leave_identical_stores(tmp_path: Path, executor: Any) -> None:
    first = _drive(tmp_path / "a", executor)
    second = _drive(tmp_path / "b", executor)
    assert any(r["raytuner"].get("status") == "failed" for r in first)
    assert any(r["raytuner"].get("proposer") == "model" for r in first)
    assert first == second
