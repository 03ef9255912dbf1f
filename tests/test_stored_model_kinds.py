"""Every kind of surrogate-model record raytuner writes loads back from the store alone and predicts.

Each engine that stores models runs a short session on a JSON store; every stored model is rebuilt by
:func:`~raytuner.models.persistence.load_surrogate` from the store's evaluations, on the very data it was
fitted to (its log-likelihood and samples per task as stored). A model GPTune could not rebuild from the
file (source evaluations the file does not hold, GPTuneBand's fidelity levels) is ``raytuner_LCM`` even
with GPTune's LCM options. DiscreteBO stores no model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from demo_runs import demo_value, tune_demo

from raytuner.engines import MLA, TLA2, DiscreteBO, Engine, GPTuneBand
from raytuner.engines.multiobjective import MultiObjectiveMLA
from raytuner.models import GPTUNE_LCM, LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.models.persistence import GPTUNE_MODELER, RAYTUNER_MODELER, load_surrogate
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import Trial, TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TWO = ProblemSpace.parse({**DEMO_PROBLEM, "output_space": [{"name": "y"}, {"name": "z"}]})
GPTUNES = LCMOptions(n_starts=1, **GPTUNE_LCM)
TASKS = [{"t": 1.0}, {"t": 1.5}]
SOURCES = [
    FunctionEvaluation.create({"t": t}, {"x": x}, {"y": demo(x, t)}) for t in (0.5, 2.0) for x in (0.1, 0.5, 0.9)
]
INLINE = InlineExecutor()
BAND: dict[str, Any] = {"b_min": 1, "b_max": 4, "eta": 2, "executor": INLINE, "lcm": GPTUNES}


def outputs(trial: Trial) -> dict[str, float]:
    """The demo's ``y`` and, for the problems with two outputs, ``z``."""
    return {**demo_value(trial), "z": (trial.config["x"] - 0.3) ** 2}


KINDS: dict[str, tuple[ProblemSpace, Callable[[], Engine], int | None, set[str]]] = {
    "mla": (
        PROBLEM,
        lambda: MLA(PROBLEM, TASKS, seed=0, n_initial=3, lcm=GPTUNES, executor=INLINE),
        8,
        {GPTUNE_MODELER},
    ),
    "mla with sources": (
        PROBLEM,
        lambda: MLA(PROBLEM, TASKS, seed=0, n_initial=2, lcm=GPTUNES, source=SOURCES, executor=INLINE),
        6,
        {RAYTUNER_MODELER},
    ),
    "tla2": (
        PROBLEM,
        lambda: TLA2(PROBLEM, {"t": 1.5}, SOURCES, seed=0, n_initial=2, lcm=GPTUNES, executor=INLINE),
        4,
        {RAYTUNER_MODELER},
    ),
    "multi-objective mla": (
        TWO,
        lambda: MultiObjectiveMLA(TWO, TASKS, seed=0, n_initial=3, executor=INLINE),
        7,
        {RAYTUNER_MODELER},
    ),
    "gptuneband": (PROBLEM, lambda: GPTuneBand(PROBLEM, TASKS, seed=0, **BAND), None, {GPTUNE_MODELER}),
    "gptuneband levels": (
        PROBLEM,
        lambda: GPTuneBand(PROBLEM, TASKS, seed=0, model="levels", **BAND),
        None,
        {GPTUNE_MODELER},
    ),
    "gptuneband with sources": (
        PROBLEM,
        lambda: GPTuneBand(PROBLEM, [{"t": 1.0}], seed=0, source=SOURCES, **BAND),
        None,
        {RAYTUNER_MODELER, GPTUNE_MODELER},  # the LCM without the sources (source_proposals="alternate") is GPTune's
    ),
    "multi-objective gptuneband": (
        TWO,
        lambda: GPTuneBand(TWO, [{"t": 1.0}], seed=0, **{**BAND, "lcm": LCMOptions(n_starts=1)}),
        None,
        {RAYTUNER_MODELER},
    ),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_stored_model_loads_from_the_store_alone_on_its_own_data(kind: str, tmp_path: Path) -> None:
    problem, make, evaluations, modeler = KINDS[kind]
    store = tune_demo(
        problem, make(), JsonStore(tmp_path), "kind", evaluations, outputs if problem is TWO else demo_value
    )
    stored, records = store.models("kind"), store.evaluations("kind")
    assert stored and {m.modeler for m in stored} == modeler
    for model in stored:
        fitted = load_surrogate(model, records)
        assert fitted.log_likelihood == pytest.approx(model.model_stats["log_likelihood"], rel=1e-9, abs=1e-9)
        assert model.raytuner is not None and fitted.data.counts == model.raytuner["fit"]["samples"]
        assert model.modeler == RAYTUNER_MODELER or "sources" not in model.raytuner, "GPTune's file lacks the sources"
        mean, variance = fitted.predict(0, problem.parameter_space.encode([{"x": 0.25}, {"x": 0.75}]))
        assert np.isfinite(mean).all() and (np.asarray(variance) >= 0).all()


def test_discrete_bo_stores_no_model(tmp_path: Path) -> None:
    space = {
        "input_space": [{"name": "n", "type": "categorical", "categories": ["a"]}],
        "parameter_space": [{"name": "k", "type": "integer", "lower_bound": 0, "upper_bound": 9}],
        "output_space": [{"name": "y"}],
    }
    problem = ProblemSpace.parse(space)
    engine = DiscreteBO(problem, [{"n": "a"}], seed=0)
    store = JsonStore(tmp_path)
    session = TuningSession(problem, engine, store, "kind")
    for _ in range(6):
        trial = session.ask()
        session.tell(trial, {"y": float((trial.config["k"] - 4) ** 2)})
    assert len(store.evaluations("kind")) == 6 and store.models("kind") == []
