"""TLA1 (predicting a new task's optimum) and TLA2 (tuning it from source tasks)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest
from record_helpers import known

from raytuner.engines.transfer import TLA1, TLA2, best_per_task, centred_sample
from raytuner.errors import InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
FAST = LCMOptions(n_starts=1, max_iterations=200)


def shifted(x: float, t: float) -> float:
    """A family whose optimum moves linearly with the task: x* = 0.1 t."""
    return (x - 0.1 * t) ** 2 + 0.05 * t


def source_records(tasks: tuple[float, ...] = (1.0, 2.0, 4.0, 5.0), n: int = 15) -> list[FunctionEvaluation]:
    return [
        FunctionEvaluation.create({"t": t}, {"x": float(x)}, {"y": shifted(float(x), t)})
        for t in tasks
        for x in np.linspace(0, 1, n)
    ]


def test_best_per_task_ignores_failures() -> None:
    records = source_records(tasks=(1.0,), n=3)
    records.append(FunctionEvaluation.create({"t": 1.0}, {"x": 0.1}, None, failure="crashed"))
    best = best_per_task(PROBLEM, records)
    assert len(best) == 1 and next(iter(best.values())).tuning_parameter["x"] == 0.0


def test_tla1_predicts_an_unseen_optimum_with_uncertainty() -> None:
    tla1 = TLA1(PROBLEM, source_records(), lcm=FAST, seed=0)
    inside = tla1.predict({"t": 3.0})
    assert inside.config["x"] == pytest.approx(0.3, abs=0.05)
    far = tla1.predict({"t": 9.5})  # far from every tuned task: less certain
    assert far.unit_std[0] > inside.unit_std[0]
    assert inside.std["x"] is not None and inside.std["x"] >= 0


def test_tla1_needs_two_tuned_tasks() -> None:
    with pytest.raises(InvalidInputError, match="^records:"):
        TLA1(PROBLEM, source_records(tasks=(1.0,)))


def test_centred_sample_respects_bounds_and_constraints() -> None:
    problem = ProblemSpace.parse({**DEMO_PROBLEM, "constraints": {"c": "x < 0.5"}})
    rng = np.random.default_rng(0)
    points = centred_sample(problem, {"t": 1.0}, np.array([0.45]), np.array([0.1]), 12, rng)
    xs = [p["x"] for p in points]
    assert len(set(xs)) == 12 and all(0 <= x < 0.5 for x in xs)
    assert abs(np.median(xs) - 0.42) < 0.1  # concentrated near the centre


@pytest.mark.parametrize("refit", ["weights", "all"])
def test_tla2_tunes_only_the_new_task_and_learns_only_its_weights(refit: Literal["weights", "all"]) -> None:
    source = source_records()
    engine = TLA2(PROBLEM, {"t": 3.0}, source, seed=1, n_initial=3, refit=refit, lcm=FAST, executor=InlineExecutor())
    for _ in range(6):
        s = engine.ask()
        assert s.task == {"t": 3.0}
        engine.tell(
            FunctionEvaluation.create(s.task, s.config, {"y": shifted(s.config["x"], 3.0)}, provenance=s.provenance)
        )
    xs = [c["x"] for c in engine.evaluated[engine.new_index]]
    assert len(set(xs)) == 6
    if refit == "weights":  # the source tasks' knowledge carries over: the optimum is found at once
        assert min(abs(x - 0.3) for x in xs) < 0.05
    fitted = known(engine.fitted_model())
    source_part = engine.extended_hyperparameters()
    same = np.allclose(fitted.hyperparameters.lengthscales, source_part.lengthscales)
    assert same if refit == "weights" else True
    if refit == "weights":
        np.testing.assert_array_equal(fitted.hyperparameters.W[:, :-1], source_part.W[:, :-1])
        np.testing.assert_array_equal(fitted.hyperparameters.noise[:-1], source_part.noise[:-1])


def test_tla2_refuses_a_source_task_as_new_task() -> None:
    with pytest.raises(InvalidInputError, match="^target_task:"):
        TLA2(PROBLEM, {"t": 1.0}, source_records())
    with pytest.raises(InvalidInputError, match="^refit:"):
        TLA2(PROBLEM, {"t": 3.0}, source_records(), refit="some")  # type: ignore[arg-type]  # the wrong type is what the test gives
