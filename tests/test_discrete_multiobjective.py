"""DiscreteBO with two objectives and an output constraint over an enumerated grid: its front, its constraint
share, replay and the single-objective case."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pytest

from raytuner.engines import DiscreteBO, fresh_engine
from raytuner.engines.discrete.multiobjective import MultiObjectiveSearch
from raytuner.engines.discrete.search import TaskSearch
from raytuner.problem.pareto import hypervolume, objective_values, pareto_front
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace

#: ZDT1 on a 41 x 41 grid with ``mem = a + b <= 0.6`` (in units of 40): the constraint cuts the front at a = 0.6.
PROBLEM = ProblemSpace.parse(
    {
        "parameter_space": [{"name": n, "type": "integer", "lower_bound": 0, "upper_bound": 40} for n in ("a", "b")],
        "output_space": [{"name": "f1"}, {"name": "f2"}, {"name": "mem", "optimize": False, "upper_bound": 0.6}],
    }
)
REFERENCE = [1.1, 11.0]


def zdt(config: dict) -> dict[str, float]:
    a, b = config["a"] / 40, config["b"] / 40
    g = 1 + 9 * b
    return {"f1": a, "f2": g * (1 - math.sqrt(a / g)), "mem": a + b}


def exact_hypervolume() -> float:
    grid = [
        FunctionEvaluation.create({}, {"a": a, "b": b}, zdt({"a": a, "b": b}))
        for a, b in itertools.product(range(41), range(41))
    ]
    return hypervolume(objective_values(PROBLEM, pareto_front(PROBLEM, grid)), REFERENCE)


def drive(engine: DiscreteBO, n: int) -> list[tuple[str | None, FunctionEvaluation]]:
    told = []
    for _ in range(n):
        suggestion = engine.ask()
        told.append((suggestion.provenance.proposer, engine.tell(suggestion, zdt(suggestion.config))))
    return told


@pytest.mark.parametrize("seed", [0, 1])
def test_the_front_is_nearly_the_grids_and_guided_picks_keep_to_the_constraint(seed: int) -> None:
    engine = DiscreteBO(PROBLEM, seed=seed, n_initial=8)
    told = drive(engine, 40)
    assert engine.multiobjective and isinstance(engine.search(), MultiObjectiveSearch)
    front = engine.pareto_front()
    assert [r.uid for r in front] == [r.uid for r in pareto_front(PROBLEM, [r for _, r in told])]
    ratio = hypervolume(objective_values(PROBLEM, front), REFERENCE) / exact_hypervolume()
    assert ratio > 0.99, ratio  # measured 0.999 (seeds 0-2); 40 random picks: 0.90-0.98
    guided = [r for source, r in told if source == "model"]
    assert len(guided) == 32 and sum(r.evaluation_result["mem"] > 0.6 for r in guided) <= 0.1 * len(guided)


def test_a_rebuilt_engine_replays_the_same_suggestions_and_a_named_objective_is_tuned_alone() -> None:
    engine = DiscreteBO(PROBLEM, seed=4, n_initial=5)
    again = fresh_engine(engine)
    assert isinstance(again, DiscreteBO) and again.multiobjective and again.spec == engine.spec
    first = [r.tuning_parameter for _, r in drive(engine, 14)]
    assert [r.tuning_parameter for _, r in drive(again, 14)] == first
    single = DiscreteBO(PROBLEM, seed=4, n_initial=5, objective="f2")
    assert not single.multiobjective and type(single.search()) is TaskSearch
    drive(single, 8)
    assert single.active_acquisitions() == ["ei"]


def test_a_resumed_run_suggests_what_the_live_one_does(tmp_path: Path) -> None:
    from raytuner.session.tuning_session import TuningSession
    from raytuner.store import JsonStore

    engine = DiscreteBO(PROBLEM, seed=6, n_initial=5)
    with JsonStore(tmp_path / "s") as store:
        live = TuningSession(PROBLEM, engine, store, "zdt")
        for _ in range(12):
            trial = live.ask()
            live.tell(trial, zdt(trial.config))
        resumed = TuningSession.resume(PROBLEM, fresh_engine(engine), store, "zdt")
        for _ in range(4):
            ahead, again = live.ask(), resumed.ask()
            assert again.config == ahead.config
            live.tell(ahead, zdt(ahead.config))
            resumed.tell(again, zdt(again.config))


def test_the_ray_searcher_takes_two_metrics_under_tune_run(local_ray: Any, tmp_path: Path) -> None:
    from ray import tune
    from raytuner.searchers import DiscreteBOSearcher

    from raytuner.store import JsonStore

    def trainable(config: dict) -> None:
        tune.report(zdt(config))

    store = JsonStore(tmp_path / "s")
    searcher = DiscreteBOSearcher(
        PROBLEM, None, store, "zdt", metric=["f1", "f2"], mode=["min", "min"], seed=3, engine_options={"n_initial": 4}
    )
    assert searcher.engine.multiobjective and (searcher.metric, searcher.mode) == (["f1", "f2"], ["min", "min"])
    tune.run(
        trainable,
        search_alg=searcher,
        num_samples=10,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )
    records = store.evaluations("zdt")
    assert len(records) == 10 and all(set(r.evaluation_result) == {"f1", "f2", "mem"} for r in records)
    assert [r.uid for r in searcher.engine.pareto_front()] == [r.uid for r in pareto_front(PROBLEM, records)]


def test_a_bounded_maximised_objective_is_kept_above_its_bound() -> None:
    problem = ProblemSpace.parse(
        {
            "parameter_space": [
                {"name": n, "type": "integer", "lower_bound": 0, "upper_bound": 30} for n in ("a", "b")
            ],
            "output_space": [{"name": "accuracy", "goal": "maximize", "lower_bound": 0.6}, {"name": "cost"}],
        }
    )

    def run(config: dict) -> dict[str, float]:  # accuracy grows with a and b, and so does the cost
        a, b = config["a"] / 30, config["b"] / 30
        return {"accuracy": 1 - (1 - a) ** 2 * (1 - 0.5 * b), "cost": a + 0.3 * b}

    engine = DiscreteBO(problem, seed=0, n_initial=6)
    told = []
    for _ in range(30):
        suggestion = engine.ask()
        told.append((suggestion.provenance.proposer, engine.tell(suggestion, run(suggestion.config))))
    guided = [r for source, r in told if source == "model"]
    assert sum(r.evaluation_result["accuracy"] < 0.6 for r in guided) <= 0.1 * len(guided)
    front = engine.pareto_front()
    assert front and all(r.evaluation_result["accuracy"] >= 0.6 for r in front)
    # the cheapest configuration that meets the bound (a = 11, b = 1: cost 0.377) is found or nearly
    # (measured 0.377 at seed 0, 0.400 at seeds 1-3)
    assert min(r.evaluation_result["cost"] for r in front) <= 0.41
