"""The TLA pool and the ensemble (raytuner.engines.transfer): known answers, equations 3-4, replay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from record_helpers import provenance

from raytuner.engines.base import Engine
from raytuner.engines.transfer import (
    ALGORITHMS,
    DEFAULT_POOL,
    FIRST,
    SINGLE_ALGORITHMS,
    SourceData,
    TransferLearning,
    ensemble_probabilities,
    exploration_rate,
)
from raytuner.engines.transfer.algorithms import dynamic_weights
from raytuner.errors import InfeasibleSpaceError, InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_grid_minimum

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
FAST = LCMOptions(n_starts=2, max_iterations=300, warm_iterations=60)
OFFSET = 0.5


def source_records(t: float = 0.8, n: int = 60, seed: int = 1, **config: Any) -> list[FunctionEvaluation]:
    xs = np.random.default_rng(seed).random(n)
    return [FunctionEvaluation.create({"t": t}, {"x": float(x)}, {"y": demo(float(x), t)}, **config) for x in xs]


@pytest.fixture(scope="module")
def source() -> SourceData:
    return SourceData(PROBLEM, source_records(), lcm=FAST, executor=InlineExecutor())


def run(engine: Engine, f: Callable[[float], float], steps: int) -> list[FunctionEvaluation]:
    told = []
    for _ in range(steps):
        s = engine.ask()
        record = FunctionEvaluation.create(s.task, s.config, {"y": f(s.config["x"])}, provenance=s.provenance)
        engine.tell(record)
        told.append(record)
    return told


@pytest.mark.parametrize("algorithm", ["stacking", "weighted_sum_dynamic", "multitask_ts", "multitask_ps"])
def test_a_shifted_source_is_exploited_at_once(source: SourceData, algorithm: str) -> None:
    # the target is the source plus a constant: its optimum is the source's, found within a few evaluations
    x_star, y_star = demo_grid_minimum(0.8)
    engine = TransferLearning(PROBLEM, {"t": 1.0}, source, algorithm, seed=0, lcm=FAST, executor=InlineExecutor())
    told = run(engine, lambda x: demo(x, 0.8) + OFFSET, 4)
    best = min(r.known_value("y") for r in told)
    assert best - (y_star + OFFSET) < 0.02, (algorithm, best, y_star + OFFSET)
    assert engine.proposers == [FIRST] + [algorithm] * 3


def test_every_algorithm_names_itself_and_never_repeats(source: SourceData) -> None:
    for algorithm in ALGORITHMS:
        weights = [1.0, 2.0] if algorithm == "weighted_sum_static" else None
        engine = TransferLearning(
            PROBLEM, {"t": 1.2}, source, algorithm, seed=3, lcm=FAST, weights=weights, executor=InlineExecutor()
        )
        told = run(engine, lambda x: demo(x, 1.2), 5)
        xs = [r.tuning_parameter["x"] for r in told]
        assert len(set(xs)) == 5, algorithm
        assert told[0].modeling == FIRST
        pool = DEFAULT_POOL if algorithm.startswith("ensemble") else (algorithm,)
        assert all(r.modeling in pool for r in told[1:]), (algorithm, [r.modeling for r in told])
        assert all((provenance(r).model_extra or {}).get("tla") == algorithm for r in told)


def test_a_resumed_ensemble_continues_exactly(source: SourceData) -> None:
    first = TransferLearning(PROBLEM, {"t": 1.0}, source, "ensemble", seed=7, lcm=FAST, executor=InlineExecutor())
    told = run(first, lambda x: demo(x, 1.0), 6)
    again = TransferLearning(PROBLEM, {"t": 1.0}, source, "ensemble", seed=7, lcm=FAST, executor=InlineExecutor())
    assert again.replay(told) == 6
    assert again.proposers == first.proposers == [r.modeling for r in told]
    assert again.probabilities() == first.probabilities()
    assert again.ask().config == first.ask().config


def test_equation_3_and_4_by_hand() -> None:
    # positive runtimes, minimised: the paper's 1/best
    p = ensemble_probabilities([2.0, 4.0, 8.0], observed=[2.0, 4.0, 8.0])
    assert p == pytest.approx(np.array([1 / 2, 1 / 4, 1 / 8]) / (1 / 2 + 1 / 4 + 1 / 8))
    # maximised throughput: proportional to the best value
    p = ensemble_probabilities([2.0, 6.0], observed=[2.0, 6.0], goal="maximize")
    assert p == pytest.approx([0.25, 0.75])
    # values crossing zero: shifted by the observed range (spread 4: scores 4 and 6)
    p = ensemble_probabilities([-3.0, -1.0], observed=[-3.0, -1.0, 1.0])
    assert p == pytest.approx(np.array([1 / 4, 1 / 6]) / (1 / 4 + 1 / 6))
    assert ensemble_probabilities([-3.0, -1.0], observed=[-3.0, -1.0, 1.0])[0] > 0.5
    # an algorithm that proposed nothing yet counts as the best so far
    assert ensemble_probabilities([None, 4.0], observed=[2.0, 4.0]) == pytest.approx([0.5, 0.5])
    assert ensemble_probabilities([None, None], observed=[]) == pytest.approx([0.5, 0.5])
    # equation 4
    assert exploration_rate(3, 2, 6) == pytest.approx(0.5)  # r = 1
    assert exploration_rate(3, 1, 30) == pytest.approx(0.1 / 1.1)
    assert exploration_rate(3, 1, 0) == 1.0
    with pytest.raises(InvalidInputError, match="goal"):
        ensemble_probabilities([1.0], [1.0], goal="up")


def test_dynamic_weights_find_the_informative_source() -> None:
    v = np.array([5.0, 1.0, 3.0, 2.0])
    informative = (v - v.mean()) / v.std()
    useless = np.array([0.3, -0.2, 0.1, 0.0])
    w = dynamic_weights([useless, informative], np.zeros(4), v)
    assert w[1] == pytest.approx(1.0, abs=1e-6) and w[0] == pytest.approx(0.0, abs=1e-6)
    assert np.all(dynamic_weights([-informative], np.zeros(4), v) == 1.0)  # nothing fits: equal weights


def test_failed_candidates_are_never_suggested_again() -> None:
    candidates = [{"x": float(x)} for x in np.linspace(0, 1, 9)]
    engine = TransferLearning(
        PROBLEM,
        {"t": 1.0},
        source_records(n=30),
        "ensemble",
        seed=0,
        lcm=FAST,
        candidates=candidates,
        executor=InlineExecutor(),
    )
    seen = []
    for _ in range(9):
        s = engine.ask()
        assert s.config in candidates and s.config not in seen
        seen.append(s.config)
        failed = s.config["x"] > 0.6
        engine.tell(
            FunctionEvaluation.create(
                s.task,
                s.config,
                None if failed else {"y": demo(s.config["x"], 1.0)},
                failure="launch failed" if failed else None,
                provenance=s.provenance,
            )
        )
    with pytest.raises(InfeasibleSpaceError):
        engine.ask()


def test_sources_group_by_machine_and_their_records_are_not_target_data() -> None:
    a100 = source_records(t=1.0, n=20, machine_configuration={"machine_name": "A100"})
    w7800 = source_records(t=1.0, n=10, seed=2, machine_configuration={"machine_name": "W7800"})
    data = SourceData(PROBLEM, a100 + w7800, lcm=FAST, executor=InlineExecutor())
    assert [(t.label, len(t)) for t in data.tasks] == [("t=1.0 on A100", 20), ("t=1.0 on W7800", 10)]
    engine = TransferLearning(PROBLEM, {"t": 1.0}, data, "stacking", seed=0, lcm=FAST, executor=InlineExecutor())
    engine.replay(a100)  # a resumed session replays the store's records of the task
    assert engine.records == []
    assert data.stacking_order() == [0, 1]


def test_a_maximised_objective() -> None:
    problem = ProblemSpace.parse({**DEMO_PROBLEM, "output_space": [{"name": "y", "type": "real", "goal": "maximize"}]})
    records = [
        FunctionEvaluation.create({"t": 0.8}, {"x": x}, {"y": -demo(x, 0.8)})
        for x in np.random.default_rng(0).random(40).tolist()
    ]
    engine = TransferLearning(
        problem, {"t": 0.8}, records, "weighted_sum_dynamic", seed=0, lcm=FAST, executor=InlineExecutor()
    )
    told = run(engine, lambda x: -demo(x, 0.8), 3)
    assert max(r.known_value("y") for r in told) > -demo_grid_minimum(0.8)[1] - 0.02


def test_bad_input_names_the_field(source: SourceData) -> None:
    with pytest.raises(InvalidInputError, match="algorithm.*allowed: multitask_ps"):
        TransferLearning(PROBLEM, {"t": 1.0}, source, "magic")
    with pytest.raises(InvalidInputError, match="weights"):
        TransferLearning(PROBLEM, {"t": 1.0}, source, "weighted_sum_static")
    with pytest.raises(InvalidInputError, match="weights"):
        TransferLearning(PROBLEM, {"t": 1.0}, source, "stacking", weights=[1.0, 1.0])
    with pytest.raises(InvalidInputError, match="pool"):
        TransferLearning(PROBLEM, {"t": 1.0}, source, "ensemble", pool=["stacking", "ensemble"])
    with pytest.raises(InvalidInputError, match="source"):
        TransferLearning(PROBLEM, {"t": 1.0}, [FunctionEvaluation.create({"t": 0.8}, {"x": 0.1}, failure="x")])
    with pytest.raises(InvalidInputError, match="source"):
        TransferLearning(PROBLEM, {"t": 1.0}, "not a source")  # type: ignore[arg-type]  # the wrong type is what the test gives
    assert set(SINGLE_ALGORITHMS) >= set(DEFAULT_POOL)


def test_a_failing_region_is_left_and_a_batch_spreads(source: SourceData) -> None:
    engine = TransferLearning(PROBLEM, {"t": 1.0}, source, "ensemble", seed=0, lcm=FAST, executor=InlineExecutor())
    batch = [engine.ask() for _ in range(3)]  # no target data yet: all from weighted_sum_equal
    xs = sorted(s.config["x"] for s in batch)
    assert min(np.diff(xs)) > 0.002
    for s in batch:  # the source's basin fails on the target
        engine.tell(FunctionEvaluation.create(s.task, s.config, failure="diverged", provenance=s.provenance))
    later = [engine.ask().config["x"] for _ in range(3)]
    assert all(min(abs(x - f) for f in xs) > 0.002 for x in later)


def test_an_engine_pickles_and_copies_share_the_source(source: SourceData) -> None:
    import copy

    pickle = pytest.importorskip("ray.cloudpickle")  # what Ray ships searchers with

    engine = TransferLearning(PROBLEM, {"t": 1.0}, source, "stacking", seed=0, lcm=FAST, executor=InlineExecutor())
    assert copy.deepcopy(engine).source is source
    clone = pickle.loads(pickle.dumps(engine))
    assert clone.ask().config == engine.ask().config
