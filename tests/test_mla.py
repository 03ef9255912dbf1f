"""MLA: valid, new suggestions over mixed constrained spaces, replay after a restart, batches, failures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from record_helpers import description, provenance

from raytuner.engines import MLA
from raytuner.engines.base import Suggestion
from raytuner.engines.mla import BatchMode
from raytuner.errors import InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo

FAST = LCMOptions(n_starts=2, max_iterations=150, warm_iterations=50)
INLINE = InlineExecutor()
ALGORITHMS = ["lu", "qr", "svd"]

MIXED = ProblemSpace.parse(
    {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 1, "upper_bound": 3}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "n", "type": "integer", "lower_bound": 1, "upper_bound": 16},
            {"name": "alg", "type": "categorical", "categories": ALGORITHMS},
        ],
        "output_space": [{"name": "y", "type": "real", "goal": "minimize"}],
        "constraints": {"small": "x < t / 4"},
    }
)
DEMO = ProblemSpace.parse(DEMO_PROBLEM)


def mixed_objective(task: dict[str, Any], config: dict[str, Any]) -> float:
    return (
        (config["x"] - 0.1 * task["t"]) ** 2 + 0.002 * (config["n"] - 5) ** 2 + 0.05 * ALGORITHMS.index(config["alg"])
    )


def evaluate(s: Suggestion, value: float) -> FunctionEvaluation:
    return FunctionEvaluation.create(s.task, s.config, {"y": value}, provenance=s.provenance)


def close(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same configuration up to the encoding's round-off in the real parameters."""
    return a.keys() == b.keys() and all(
        math.isclose(a[k], b[k], rel_tol=0, abs_tol=1e-9) if isinstance(a[k], float) else a[k] == b[k] for k in a
    )


def test_suggestions_are_valid_new_and_typed() -> None:
    tasks = [{"t": 1.0}, {"t": 2.6}]
    engine = MLA(MIXED, tasks, seed=1, n_initial=4, lcm=FAST, executor=INLINE, search_candidates=512)
    seen: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    sources = []
    held: list[Suggestion] = []
    for step in range(26):
        s = engine.ask(held[-1].task if held else None)  # after a held one: the same task, with it pending
        index = tasks.index(s.task)
        config = s.config
        assert set(config) == {"x", "n", "alg"}
        assert type(config["n"]) is int and 1 <= config["n"] <= 16
        assert config["alg"] in ALGORITHMS
        assert isinstance(config["x"], float) and 0 <= config["x"] < s.task["t"] / 4
        assert MIXED.is_valid(s.task, config)
        assert not any(close(config, old) for old in seen[index]), (step, config)  # evaluated or pending
        seen[index].append(config)
        sources.append(s.provenance.proposer)
        held.append(s)
        if step % 3 != 1:  # every third suggestion waits: the next asks see it as pending
            for h in held:
                engine.tell(evaluate(h, mixed_objective(h.task, h.config)))
            held = []
    assert sources[:8] == ["initial"] * 8 and set(sources[8:]) == {"model"}
    assert sum(len(e) for e in engine.evaluated) + len(held) == 26
    model = engine.fitted_model()
    assert model is not None and sum(model.data.counts) == sum(len(e) for e in engine.evaluated)


def test_suggestions_for_one_named_task_respect_its_constraint() -> None:
    tasks = [{"t": 1.0}, {"t": 3.0}]
    engine = MLA(MIXED, tasks, seed=2, n_initial=3, lcm=FAST, executor=INLINE, search_candidates=256)
    for _ in range(8):
        s = engine.ask({"t": 1.0})
        assert s.task == {"t": 1.0} and s.config["x"] < 0.25
        engine.tell(evaluate(s, mixed_objective(s.task, s.config)))
    assert [len(e) for e in engine.evaluated] == [8, 0]
    with pytest.raises(InvalidInputError) as err:
        engine.ask({"t": 2.0})
    assert err.value.field == "task"


def _run_session(store: JsonStore, steps: int, **engine_args: Any) -> TuningSession:
    session = TuningSession(DEMO, MLA(DEMO, **engine_args), store, "demo")
    for _ in range(steps):
        trial = session.ask()
        session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})
    return session


def test_resumed_session_makes_the_same_next_suggestion(tmp_path: Path) -> None:
    args: dict[str, Any] = dict(
        tasks=[{"t": 1.0}, {"t": 2.5}], seed=7, n_initial=5, lcm=FAST, executor=INLINE, search_candidates=512
    )
    store = JsonStore(tmp_path)
    original = _run_session(store, 14, **args)

    # one surrogate model per fit: the four asks after the 2 x 5 initial points
    models = store.models("demo")
    records = store.evaluations("demo")
    assert len(records) == 14 and len(models) == 4
    for k, model in enumerate(models):
        assert model.modeler == "raytuner_LCM" and description(model)["modeler"] == "raytuner.LCM:mla"  # Matérn
        assert model.function_evaluations == [r.uid for r in records[: 10 + k]]
        assert model.task_parameters == [[1.0], [2.5]]
        assert description(model)["fit"]["samples"] == [5 + (k + 1) // 2, 5 + k // 2]
        assert math.isfinite(model.model_stats["log_likelihood"])
    assert [provenance(r).proposer for r in records] == ["initial"] * 10 + ["model"] * 4

    resumed = TuningSession.resume(DEMO, MLA(DEMO, **args), store, "demo")
    assert len(resumed.records) == 14
    mine, theirs = resumed.ask(), original.ask()
    assert mine.task == theirs.task
    assert mine.config == theirs.config
    assert mine.provenance.proposer == theirs.provenance.proposer == "model"

    # both fitted the same model from the same warm start: same hyperparameters, stored twice
    last = store.models("demo")[-2:]
    assert len(last) == 2 and last[0].hyperparameters == last[1].hyperparameters
    assert last[0].function_evaluations == last[1].function_evaluations == [r.uid for r in records]


def test_resume_without_stored_models_still_continues(tmp_path: Path) -> None:
    args: dict[str, Any] = dict(
        tasks=[{"t": 1.0}], seed=3, n_initial=4, lcm=FAST, executor=INLINE, search_candidates=256
    )
    store = JsonStore(tmp_path)
    _run_session(store, 6, **args)
    resumed = TuningSession.resume(DEMO, MLA(DEMO, **args), store, "other")  # another problem: empty
    assert resumed.records == []
    assert resumed.ask().provenance.proposer == "initial"


@pytest.mark.parametrize("batch", ["kriging_believer", "constant_liar"])
def test_batch_suggestions_are_distinct(batch: BatchMode) -> None:
    tasks = [{"t": 1.0}, {"t": 2.0}]
    engine = MLA(DEMO, tasks, seed=4, n_initial=4, lcm=FAST, executor=INLINE, search_candidates=512, batch=batch)
    for _ in range(8):
        s = engine.ask()
        engine.tell(evaluate(s, demo(s.config["x"], s.task["t"])))
    batch_of_four = engine.ask_batch(4, {"t": 2.0})
    xs = [s.config["x"] for s in batch_of_four]
    assert all(s.task == {"t": 2.0} and s.provenance.proposer == "model" for s in batch_of_four)
    assert len(set(xs)) == 4
    # distinct beyond the acquisition search's duplicate tolerance (1e-9 in the unit cube); a believer's batch
    # on a sharp peak may still lie within 1e-6 (seed 4: 4.9e-7 apart)
    assert min(abs(a - b) for i, a in enumerate(xs) for b in xs[i + 1 :]) > 1e-9
    assert not {x for x in xs} & {c["x"] for c in engine.evaluated[1]}
    assert len(engine.pending[1]) == 4
    for s in batch_of_four:
        engine.tell(evaluate(s, demo(s.config["x"], s.task["t"])))
    assert engine.pending == [[], []]


def test_invalid_batch_mode_names_the_field() -> None:
    with pytest.raises(InvalidInputError) as err:
        MLA(DEMO, [{"t": 1.0}], batch="believer")  # type: ignore[arg-type]  # the wrong type is what the test gives
    assert err.value.field == "batch"
    assert "kriging_believer" in str(err.value)
    with pytest.raises(InvalidInputError) as err:
        MLA(DEMO, [{"t": 1.0}], n_initial=0)
    assert err.value.field == "n_initial"


def _initial_designs(
    problem: ProblemSpace, tasks: list[dict[str, Any]], n: int, **engine_args: Any
) -> list[list[dict[str, Any]]]:
    """Each task's initial configurations, asked task by task."""
    engine = MLA(problem, tasks, seed=3, n_initial=n, lcm=FAST, executor=INLINE, **engine_args)
    designs: list[list[dict[str, Any]]] = []
    for task in tasks:
        designs.append([])
        for _ in range(n):
            s = engine.ask(task)
            assert s.provenance.proposer == "initial"
            designs[-1].append(s.config)
            engine.tell(evaluate(s, 1.0))
    return designs


def test_each_task_draws_its_own_initial_design_unless_they_share_one() -> None:
    tasks = [{"t": 1.0}, {"t": 2.0}, {"t": 3.5}]
    own = _initial_designs(DEMO, tasks, 4)
    assert own[1] != own[0] and own[2] != own[0] and own[1] != own[2]
    shared = _initial_designs(DEMO, tasks, 4, design="shared")
    assert shared[0] == shared[1] == shared[2] and len({c["x"] for c in shared[0]}) == 4
    assert own[0] == shared[0] == _initial_designs(DEMO, tasks[:1], 4)[0]  # task 0's, as single-task BO's
    # under a task-dependent constraint (x < t / 4) a task keeps the first task's points it accepts
    strict_first = _initial_designs(MIXED, [{"t": 1.0}, {"t": 2.6}], 5, design="shared")
    assert strict_first[0] == strict_first[1]  # every point with x < 0.25 has x < 0.65
    loose_first = _initial_designs(MIXED, [{"t": 2.6}, {"t": 1.0}], 5, design="shared")
    accepted = [c for c in loose_first[0] if c["x"] < 0.25]
    assert loose_first[1][: len(accepted)] == accepted and len(loose_first[1]) == 5
    assert all(MIXED.is_valid({"t": 1.0}, c) for c in loose_first[1])
    assert len({(c["x"], c["n"], c["alg"]) for c in loose_first[1]}) == 5
    with pytest.raises(InvalidInputError) as err:
        MLA(DEMO, tasks, design="isotropic")  # type: ignore[arg-type]  # the wrong type is what the test gives
    assert err.value.field == "design" and "per_task" in str(err.value) and "\n" not in str(err.value)


def test_failed_evaluations_are_never_suggested_again_nor_modelled() -> None:
    task = {"t": 1.0}
    engine = MLA(DEMO, [task], seed=5, n_initial=5, lcm=FAST, executor=INLINE, search_candidates=256)
    failed = []
    for step in range(5):
        s = engine.ask()
        if step in (1, 3):
            record = (
                FunctionEvaluation.create(s.task, s.config, failure="crashed")
                if step == 1
                else FunctionEvaluation.create(s.task, s.config, {"y": float("nan")})
            )
            assert record.status == "failed"
            failed.append(s.config)
            engine.tell(record)
        else:
            engine.tell(evaluate(s, demo(s.config["x"], 1.0)))
    model = engine.fitted_model()
    assert model is not None and model.data.counts == [3]
    assert not np.isin(model.data.X[0][:, 0], [c["x"] for c in failed]).any()
    for _ in range(6):
        s = engine.ask()
        assert not any(close(s.config, f) for f in failed)
        engine.tell(evaluate(s, demo(s.config["x"], 1.0)))
    model = engine.fitted_model()
    assert model is not None and model.data.counts == [9]
    assert len(engine.evaluated[0]) == 11


def test_maximisation_finds_the_maximum() -> None:
    problem = ProblemSpace.parse(
        {
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "output_space": [{"name": "gain", "type": "real", "goal": "maximize"}],
        }
    )
    for seed in (0, 1):
        engine = MLA(problem, [{}], seed=seed, n_initial=4, lcm=FAST, executor=INLINE, search_candidates=512)
        best: tuple[float, float] | None = None
        for _ in range(12):
            s = engine.ask()
            gain = -((s.config["x"] - 0.7) ** 2)
            engine.tell(FunctionEvaluation.create(s.task, s.config, {"gain": gain}, provenance=s.provenance))
            if best is None or gain > best[0]:
                best = (gain, s.config["x"])
        assert best is not None and abs(best[1] - 0.7) < 0.05, (seed, best)


CATEGORICAL = ProblemSpace.parse(
    {
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "alg", "type": "categorical", "categories": ["lu", "qr", "svd"]},
        ],
        "output_space": [{"name": "y"}],
    }
)


def _categorical_engine(options: LCMOptions | None) -> MLA:
    return MLA(CATEGORICAL, [{}], 0, n_initial=4, lcm=options, executor=InlineExecutor())


@pytest.mark.parametrize(
    "stored_by_position, asked, refitted", [(False, None, False), (True, None, False), (True, (1,), True)]
)
def test_a_stored_model_of_other_categorical_columns_is_adopted_unless_columns_were_asked_for(
    stored_by_position: bool, asked: tuple[int, ...] | None, refitted: bool, caplog: pytest.LogCaptureFixture
) -> None:
    first = _categorical_engine(
        LCMOptions(n_starts=1, categorical=()) if stored_by_position else LCMOptions(n_starts=1)
    )
    assert first.model.options.categorical == (() if stored_by_position else (1,))
    records = []
    for _ in range(6):
        s = first.ask()
        records.append(first.tell(s, {"y": s.config["x"] + ["lu", "qr", "svd"].index(s.config["alg"])}))
    models = first.take_models()
    assert models and models[-1].modeling_options["categorical"] == list(first.model.options.categorical)
    again = _categorical_engine(LCMOptions(n_starts=1, categorical=asked))
    again.replay(records)
    again.restore_models(models, fixed=True)  # GPTune's load_surrogate_model
    fitted = again.fitted_model()
    assert fitted is not None and fitted.report.optimised is refitted
    assert ("fitting again from it" in caplog.text) is refitted
    assert again.model.options.categorical == (asked if refitted else first.model.options.categorical)


def test_categorical_columns_must_be_categorical_parameters() -> None:
    with pytest.raises(InvalidInputError) as err:
        _categorical_engine(LCMOptions(categorical=(0,)))
    assert err.value.field == "categorical" and "allowed: 1" in str(err.value)
