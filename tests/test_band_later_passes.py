"""GPTuneBand's later passes: the brackets whose lowest fidelity ranks configurations as ``b_max`` does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from model_helpers import FAST
from record_helpers import provenance

from raytuner.engines import GPTuneBand
from raytuner.engines.base import Suggestion
from raytuner.engines.gptuneband.plan import AGREEMENT
from raytuner.errors import InvalidInputError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 1.3}]
B_MAX = 8.0


def engine(**kwargs: Any) -> GPTuneBand:
    options = {"seed": 0, "b_min": 1, "b_max": B_MAX, "eta": 2, "lcm": FAST, "executor": InlineExecutor()}
    return GPTuneBand(PROBLEM, TASKS, search_candidates=256, **{**options, **kwargs})


def misleading(s: Suggestion) -> FunctionEvaluation:
    """The demo at ``b_max``; below it, a value that ranks configurations the other way round."""
    y = demo(s.config["x"], s.task["t"])
    value = y if s.fidelity == B_MAX else -y
    return FunctionEvaluation.create(s.task, s.config, {"y": value}, provenance=s.provenance)


def faithful(s: Suggestion) -> FunctionEvaluation:
    """The demo at every fidelity, a little less at lower ones: every fidelity ranks as ``b_max`` does."""
    y = demo(s.config["x"], s.task["t"]) * (1.0 + 0.01 * (B_MAX - (s.fidelity or B_MAX)))
    return FunctionEvaluation.create(s.task, s.config, {"y": y}, provenance=s.provenance)


def run(band: GPTuneBand, evaluate: Any) -> list[FunctionEvaluation]:
    records = []
    while not band.finished:
        record = evaluate(band.ask())
        band.tell(record)
        records.append(record)
    return records


def samples(records: list[FunctionEvaluation], pass_: int) -> Counter:
    """The new samples per bracket in the pass ``pass_`` (1-based)."""
    return Counter(provenance(r).bracket for r in records if provenance(r).pass_ == pass_ and provenance(r).rung == 0)


def test_later_passes_leave_out_the_brackets_whose_low_fidelities_rank_the_other_way() -> None:
    band = engine(passes=2)
    records = run(band, misleading)
    every = {s: band.structure.samples(s) * len(TASKS) for s in range(band.structure.s_max + 1)}
    assert samples(records, 1) == every  # the first pass is Hyperband's
    assert samples(records, 2) == {0: every[0]}  # then only b_max: the model's choices
    agreement = band.plan.agreement(1)
    assert agreement[0] == 1.0 and all(a < AGREEMENT for a in agreement[1:])
    assert band.plan.quotas(1) == (band.structure.samples(0), 0, 0, 0)
    costs = band.cost_per_task()
    assert costs == pytest.approx([band.structure.cost_per_pass() + band.structure.samples(0)] * 2)


def test_every_bracket_stays_where_low_fidelities_agree_or_when_asked() -> None:
    agreeing = run(engine(passes=2), faithful)
    assert samples(agreeing, 2) == samples(agreeing, 1)
    hyperband = run(engine(passes=2, later_passes="all"), misleading)
    assert samples(hyperband, 2) == samples(hyperband, 1)


def test_a_resumed_run_chooses_the_same_brackets(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    session = TuningSession(PROBLEM, engine(passes=2), store, "band")
    uninterrupted = engine(passes=2)
    while True:  # stop in the second pass, once its brackets are chosen
        trial, twin = session.ask(), uninterrupted.ask()
        assert (twin.config, twin.provenance.bracket) == (trial.config, trial.provenance.bracket)
        session.tell(trial, misleading(trial).evaluation_result)
        uninterrupted.tell(session.records[-1])
        if (
            trial.provenance.pass_ == 2
            and len(samples(session.records, 2)) == 1
            and sum(samples(session.records, 2).values()) == 3
        ):
            break
    resumed_engine = engine(passes=2)
    resumed = TuningSession.resume(PROBLEM, resumed_engine, JsonStore(tmp_path), "band")
    while not uninterrupted.finished:
        a, b = resumed.ask(), uninterrupted.ask()
        assert (a.config, a.provenance.bracket, a.provenance.rung) == (
            b.config,
            b.provenance.bracket,
            b.provenance.rung,
        )
        resumed.tell(a, misleading(a).evaluation_result)
        uninterrupted.tell(resumed.records[-1])
    assert resumed_engine.finished and resumed_engine.plan.quotas(1) == uninterrupted.plan.quotas(1)
    assert samples(list(store.evaluations("band")), 2) == {0: resumed_engine.structure.samples(0) * len(TASKS)}


def test_an_unknown_choice_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInputError, match=r"later_passes: unknown choice 'some' \(allowed: all, agreeing\)"):
        engine(later_passes="some")
