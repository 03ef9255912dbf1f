"""GPTuneBand with several objectives and an output constraint: rungs ranked as NSGA-II ranks, the engine and the
Ray scheduler (``metric=[...]``), fronts at b_max, replay."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from model_helpers import FAST
from record_helpers import known, provenance

from raytuner.engines import GPTuneBand, fresh_engine
from raytuner.engines.breaches import NOTE
from raytuner.engines.gptuneband.sampler import MultiObjectiveLevelSampler
from raytuner.errors import InvalidInputError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.pareto import nsga_order, pareto_front
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore

SPACES = {
    "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 1}],
    "parameter_space": [
        {"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1},
        {"name": "b", "type": "real", "lower_bound": 0, "upper_bound": 1},
    ],
}
#: ZDT1 shifted by the task t, with a fidelity error that vanishes at b_max = 9; ``mem`` <= 0.6 is a constraint.
CONSTRAINED = ProblemSpace.parse(
    {**SPACES, "output_space": [{"name": "f1"}, {"name": "f2"}, {"name": "mem", "optimize": False, "upper_bound": 0.6}]}
)
TASKS = [{"t": 0.0}, {"t": 0.5}]
B_MAX = 9


def zdt(config: dict, t: float, fidelity: float) -> dict[str, float]:
    a, b = config["a"], config["b"]
    g = 1 + 9 * b
    error = (B_MAX - fidelity) * 0.05 * math.sin(20 * a)
    return {"f1": a, "f2": g * (1 - math.sqrt(a / g)) + 0.2 * t + error, "mem": a + b}


def run_band(seed: int, model: str = "paper") -> tuple[GPTuneBand, list[FunctionEvaluation]]:
    band = GPTuneBand(
        CONSTRAINED, TASKS, seed=seed, b_min=1, b_max=B_MAX, eta=3, executor=InlineExecutor(), model=model
    )
    records = []
    while not band.finished:
        s = band.ask()
        records.append(band.tell(s, zdt(s.config, s.task["t"], known(s.fidelity))))
    return band, records


@pytest.mark.parametrize("model", ["paper", "levels"])
def test_each_rung_promotes_what_nsga_ii_ranks_first(model: str) -> None:
    band, records = run_band(0, model)
    assert band.multiobjective and isinstance(band._sampler, MultiObjectiveLevelSampler)
    by_uid = {r.uid: r for r in records}
    rungs: dict[tuple, list[FunctionEvaluation]] = {}
    for r in records:
        p = provenance(r)
        rungs.setdefault((p.pass_, r.task_parameter["t"], p.bracket, p.rung), []).append(r)
    checked = 0
    for (pass_, t, bracket, rung), told in rungs.items():
        promoted = rungs.get((pass_, t, bracket, rung + 1), [])
        if not promoted:
            continue
        parents = {by_uid[known(provenance(r).parent)].uid for r in promoted}
        ranked = [told[n].uid for n in nsga_order(CONSTRAINED, told)]
        assert parents == set(ranked[: len(promoted)]), (pass_, t, bracket, rung)
        checked += 1
    assert checked >= 4
    for task in TASKS:  # the front at b_max: feasible, non-dominated, only full-fidelity evaluations
        front = band.pareto_front(task)
        at_b_max = [r for r in records if provenance(r).fidelity == B_MAX]
        assert front and [r.uid for r in front] == [r.uid for r in pareto_front(CONSTRAINED, at_b_max, task)]
        assert all(r.evaluation_result["mem"] <= 0.6 for r in front)


def test_a_feasible_evaluation_is_promoted_before_one_that_breaks_the_constraint() -> None:
    records = [
        FunctionEvaluation.create({"t": 0.0}, {"a": a, "b": b}, zdt({"a": a, "b": b}, 0.0, B_MAX))
        for a, b in ((0.0, 0.9), (0.5, 0.0), (0.2, 0.05), (1.0, 0.5))
    ]
    # a=0 has the best f1 but breaks mem <= 0.6 by less than a=1 does: the feasible ones first, then the nearer miss
    assert nsga_order(CONSTRAINED, records) == [1, 2, 0, 3]


def test_the_same_seed_replays_the_same_multiobjective_run() -> None:
    first, records = run_band(3)
    again = fresh_engine(first)
    assert isinstance(again, GPTuneBand) and again.multiobjective and again.spec == first.spec
    replayed = []
    while not again.finished:
        s = again.ask()
        replayed.append(again.tell(s, zdt(s.config, s.task["t"], known(s.fidelity))))
    assert [(r.tuning_parameter, provenance(r).fidelity) for r in replayed] == [
        (r.tuning_parameter, provenance(r).fidelity) for r in records
    ]
    # a sample its LCMs chose as a likely success carries the mark the breach check reads; a promotion does not
    noted = [r for r in records if (provenance(r).model_extra or {}).get(NOTE) is True]
    assert noted and {provenance(r).proposer for r in noted} == {"model"}
    assert [(provenance(r).model_extra or {}).get(NOTE) for r in replayed] == [
        (provenance(r).model_extra or {}).get(NOTE) for r in records
    ]


@pytest.mark.parametrize("model", ["paper", "levels"])
def test_a_run_resumed_mid_bracket_from_its_store_suggests_what_the_live_one_does(model: str, tmp_path: Path) -> None:
    from raytuner.session.tuning_session import TuningSession

    band = GPTuneBand(CONSTRAINED, TASKS, seed=2, b_min=1, b_max=B_MAX, eta=3, executor=InlineExecutor(), model=model)
    with JsonStore(tmp_path / "s") as store:
        live = TuningSession(CONSTRAINED, band, store, "zdt")
        for _ in range(23):  # mid-pass: the first brackets promoted, the last still sampling
            trial = live.ask()
            live.tell(trial, zdt(trial.config, trial.task["t"], known(trial.provenance.fidelity)))
        resumed = TuningSession.resume(CONSTRAINED, fresh_engine(band), store, "zdt")
        for _ in range(6):
            ahead, again = live.ask(), resumed.ask()
            assert (again.task, again.config, again.provenance.fidelity) == (
                ahead.task,
                ahead.config,
                ahead.provenance.fidelity,
            )
            outputs = zdt(ahead.config, ahead.task["t"], known(ahead.provenance.fidelity))
            live.tell(ahead, outputs)
            resumed.tell(again, outputs)


def test_the_scheduler_takes_metric_lists_under_tune_run(local_ray: Any, tmp_path: Path) -> None:
    from ray import tune
    from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler

    from raytuner.engines import BanditStructure

    def trainable(config: dict) -> None:
        tune.report(zdt(config, config["t"], config["fidelity"]))

    with pytest.raises(InvalidInputError, match=r"metric: \[.f2.\]: this face tunes one objective or all of them"):
        GPTuneBandScheduler(
            CONSTRAINED,
            TASKS,
            JsonStore(tmp_path / "x"),
            "zdt",
            metric=["f2"],
            structure=BanditStructure.hyperband(1, 3, 3),
        )
    named = GPTuneBandScheduler(
        CONSTRAINED, TASKS, JsonStore(tmp_path / "y"), "zdt", metric="f2", structure=BanditStructure.hyperband(1, 3, 3)
    )
    assert not named.engine.multiobjective and named.engine.objective.name == "f2"  # one named: it alone
    store = JsonStore(tmp_path / "s")
    band = GPTuneBandScheduler(
        CONSTRAINED,
        TASKS,
        store,
        "zdt",
        seed=1,
        metric=["f1", "f2"],
        mode=["min", "min"],
        structure=BanditStructure.hyperband(1, B_MAX, 3),
        options=GPTuneBandOptions(lcm=FAST, executor=InlineExecutor()),  # the face is tested here, not the model
    )
    assert band.engine.multiobjective and (band.metrics, band.modes) == (["f1", "f2"], ["min", "min"])
    tune.run(
        trainable,
        search_alg=band.searcher(),
        scheduler=band,
        num_samples=-1,
        max_concurrent_trials=2,
        reuse_actors=True,
        verbose=0,
        storage_path=str(tmp_path / "ray"),
    )
    records = store.evaluations("zdt")
    assert band.engine.finished and all(r.status == "ok" for r in records)
    assert {provenance(r).fidelity for r in records} == {1, 3, 9}
    for task in TASKS:
        assert [r.uid for r in band.engine.pareto_front(task)] == [
            r.uid for r in pareto_front(CONSTRAINED, [r for r in records if provenance(r).fidelity == B_MAX], task)
        ]
