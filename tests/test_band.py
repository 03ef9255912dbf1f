"""GPTuneBand engine: the bandit structure, successive halving, cost accounting, resume from the log."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from model_helpers import FAST
from record_helpers import description, known, provenance

from raytuner.engines import BanditStructure, GPTuneBand, fresh_engine
from raytuner.engines.base import Suggestion
from raytuner.engines.gptuneband.brackets import Brackets
from raytuner.errors import AwaitingResults, InvalidInputError, TuningFinished
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, Provenance, SurrogateModelRecord
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo_fidelity

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 1.3}]


def engine(**kwargs: Any) -> GPTuneBand:
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
    tasks = options.pop("tasks", TASKS)
    return GPTuneBand(PROBLEM, tasks, **options)


def evaluate(s: Suggestion, b_max: float = 8.0, fail_below: float | None = None) -> FunctionEvaluation:
    if fail_below is not None and s.config["x"] < fail_below:
        return FunctionEvaluation.create(s.task, s.config, failure="diverged", provenance=s.provenance)
    y = demo_fidelity(s.config["x"], s.task["t"], b=known(s.fidelity), b_max=b_max)
    return FunctionEvaluation.create(s.task, s.config, {"y": y}, provenance=s.provenance)


def run_to_end(band: GPTuneBand, **kwargs: Any) -> list[FunctionEvaluation]:
    records = []
    while not band.finished:
        record = evaluate(band.ask(), b_max=band.structure.b_max, **kwargs)
        band.tell(record)
        records.append(record)
    return records


def test_figure_1_structure_and_first_lcm() -> None:
    band = BanditStructure.hyperband(b_min=1, b_max=27, eta=3)
    assert band.s_max == 3
    assert band.fidelities == (27.0, 9.0, 3.0, 1.0)
    assert [band.samples(s) for s in range(4)] == [4, 6, 9, 27]
    assert band.lcm_task_count(2) == 8
    first = engine(b_max=27, eta=3).lcm_tasks()
    assert len(first) == 8 and sorted({j for _, j in first}) == [0, 1, 2, 3]


def test_custom_fidelity_function_and_rounding() -> None:
    custom = BanditStructure((40.0, 25.0, 10.0), eta=2)
    assert [custom.samples(s) for s in range(3)] == [3, 2, 4]
    assert custom.rungs(2) == [(4, 10.0), (2, 25.0), (1, 40.0)]
    assert BanditStructure.hyperband(1, 52, 3, integer=True).fidelities == (52.0, 17.0, 6.0, 2.0)
    band = engine(fidelities=[40, 25, 10], b_max=None, b_min=None)
    assert band.structure == custom


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"eta": 1}, "eta"),
        ({"b_min": 0}, "b_min"),
        ({"b_min": 9, "b_max": 8}, "b_max"),
        ({"fidelities": [1, 8], "b_min": None, "b_max": None}, "fidelities"),
        ({"passes": 0}, "passes"),
        ({"fidelity_mode": "twice"}, "fidelity_mode"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        engine(**kwargs)
    assert err.value.field == field


def test_successive_halving_keeps_the_best_floor_c_over_eta() -> None:
    band = engine(tasks=[{"t": 1.2}])
    records = run_to_end(band)
    by_rung: dict[tuple[int | None, int | None], list[FunctionEvaluation]] = {}
    for r in records:
        by_rung.setdefault((provenance(r).bracket, provenance(r).rung), []).append(r)
    structure = band.structure
    for s in range(structure.s_max + 1):
        sizes = [len(by_rung[(s, rung)]) for rung in range(s + 1)]
        assert sizes == [n for n, _ in structure.rungs(s)]
        for rung in range(s):
            below, above = by_rung[(s, rung)], by_rung[(s, rung + 1)]
            assert len(above) == len(below) // structure.eta
            ranked = sorted(below, key=lambda r: r.known_value("y"))[: len(above)]
            assert {r.uid for r in ranked} == {provenance(r).parent for r in above}
            assert all(provenance(r).fidelity == structure.fidelity(s - rung - 1) for r in above)
    assert sum(1 for r in records if provenance(r).rung == 0) == sum(structure.samples(s) for s in range(4))


def test_one_shot_cost_is_fidelity_over_b_max() -> None:
    band = engine()
    records = run_to_end(band)
    assert all(math.isclose(known(provenance(r).cost), known(provenance(r).fidelity) / 8.0) for r in records)
    assert band.cost_per_task() == pytest.approx([band.structure.cost_per_pass("one_shot")] * 2)
    best = band.best_per_task()
    assert all(b is not None and provenance(b).fidelity == 8.0 for b in best)
    with pytest.raises(TuningFinished):
        band.ask()


def test_iterative_promotions_pay_the_increment() -> None:
    band = engine(fidelity_mode="iterative")
    records = run_to_end(band)
    by_uid = {r.uid: r for r in records}
    for r in records:
        if provenance(r).parent:
            parent = by_uid[known(provenance(r).parent)]
            assert known(provenance(r).cost) == pytest.approx(
                (known(provenance(r).fidelity) - known(provenance(parent).fidelity)) / 8.0
            )
    assert band.cost_per_task() == pytest.approx([band.structure.cost_per_pass("iterative")] * 2)
    assert band.structure.cost_per_pass("iterative") < band.structure.cost_per_pass("one_shot")


def test_failed_evaluations_are_never_promoted() -> None:
    band = engine(tasks=[{"t": 1.2}])
    records = run_to_end(band, fail_below=0.3)
    failed = {r.uid for r in records if r.status != "ok"}
    assert failed, "the objective should have failed somewhere"
    assert not any(provenance(r).parent in failed for r in records)
    assert band.finished


def test_concurrent_asks_wait_for_the_rung() -> None:
    band = engine(tasks=[{"t": 1.2}], b_max=4)
    asked = []
    with pytest.raises(AwaitingResults):
        while True:
            asked.append(band.ask())
    assert len(asked) == sum(band.structure.samples(s) for s in range(band.structure.s_max + 1))
    assert all(s.provenance.rung == 0 for s in asked)
    for s in asked:
        band.tell(evaluate(s, b_max=4))
    assert band.ready_promotions() > 0
    promotion = band.ask()
    assert promotion.provenance.proposer == "promotion" and promotion.provenance.rung == 1


def test_two_passes_reuse_all_earlier_data() -> None:
    band = engine(passes=2, b_max=4)
    records = run_to_end(band)
    assert Counter(provenance(r).pass_ for r in records) == {1: len(records) // 2, 2: len(records) // 2}
    assert band.cost_per_task() == pytest.approx([2 * band.structure.cost_per_pass()] * 2)
    assert all(provenance(r).proposer != "initial" for r in records if provenance(r).pass_ == 2)


@pytest.mark.parametrize("passes", [1, 2])
def test_resume_mid_bracket_continues_exactly(passes: int, tmp_path: Any) -> None:
    """A session killed in the middle of a bracket resumes from the store with the same next steps.

    In the second pass, the samplers warm-start from the first pass's models: the stored ones after the resume.
    """
    store = JsonStore(tmp_path)
    session = TuningSession(PROBLEM, engine(passes=passes), store, "band")
    uninterrupted = engine(passes=passes)
    steps = 0
    while True:  # stop mid-bracket: after some promotions were told, others still to come
        trial = session.ask()
        twin = uninterrupted.ask()
        assert (twin.config, twin.provenance.bracket, twin.provenance.rung) == (
            trial.config,
            trial.provenance.bracket,
            trial.provenance.rung,
        )
        record = evaluate(trial)
        session.tell(trial, record.evaluation_result)
        uninterrupted.tell(session.records[-1])
        steps += 1
        if trial.provenance.rung == 1 and trial.provenance.bracket == 3 and trial.provenance.pass_ == passes:
            break
    resumed_engine = engine(passes=passes)
    resumed = TuningSession.resume(PROBLEM, resumed_engine, JsonStore(tmp_path), "band")
    assert len(resumed.records) == steps
    while not uninterrupted.finished:
        a, b = resumed.ask(), uninterrupted.ask()
        assert (a.config, a.provenance.bracket, a.provenance.rung, a.provenance.parent) == (
            b.config,
            b.provenance.bracket,
            b.provenance.rung,
            b.provenance.parent,
        )
        resumed.tell(a, evaluate(a).evaluation_result)
        uninterrupted.tell(resumed.records[-1])
    assert resumed_engine.finished
    counts = Counter((provenance(r).bracket, provenance(r).rung) for r in store.evaluations("band"))
    assert counts == Counter(
        {(s, rung): n * 2 * passes for s in range(4) for rung, (n, _) in enumerate(resumed_engine.structure.rungs(s))}
    )


@pytest.mark.parametrize("tasks, starts", [(3, [3, 1, 1, 1]), (2, [3, 3, 1, 1])])
def test_a_new_sampler_starts_from_the_last_model_of_an_earlier_one(tasks: int, starts: list[int]) -> None:
    """Later stages and passes warm-start from the last model fitted with as many latent functions (min(tasks, 3)).

    An LCM-task the earlier model lacks (pass 2's level 0, after pass 1's stage 2) takes the same task's nearest
    level. With 2 tasks, stage 2's 2 LCM-tasks have 2 latent functions, stage 0's 6 have 3: stage 2 of pass 1
    starts cold, and stage 0 of pass 2 passes over it for pass 1's stage 0.
    """
    options = LCMOptions(n_starts=3, warm_starts=1, max_iterations=60, warm_iterations=20, screen=2)
    band = engine(passes=2, b_max=4, lcm=options, tasks=[{"t": 1.0}, {"t": 1.2}, {"t": 1.4}][:tasks])
    first: dict[tuple[int, int], Any] = {}
    while not band.finished:
        band.tell(evaluate(band.ask(), b_max=4))
        for model in band.take_models():
            sampler = description(model)["sampler"]
            first.setdefault((sampler["pass"], sampler["stage"]), (description(model)["fit"], model.task_parameters))
    assert list(first) == [(1, 0), (1, 2), (2, 0), (2, 2)]  # stage 1 has no model: N(1) = 3, its initial design
    assert [len(first[key][1]) for key in first] == [3 * tasks, tasks, 3 * tasks, tasks]  # tasks x levels sampling
    # cold: n_starts = 3; warm: one start (the earlier hyperparameters are always optimised again)
    assert [len(first[key][0]["starts"]) for key in first] == starts


def test_only_this_runs_models_of_its_own_task_parameters_warm_start_a_new_sampler() -> None:
    band = engine(passes=2, b_max=4)
    while band.current_pass == 0:
        band.tell(evaluate(band.ask(), b_max=4))
    sampler = band._level_sampler()  # pass 2, stage 0
    told = [r.uid for r in band._records[:5]]
    ours = SurrogateModelRecord(task_parameters=[[1.0, 0], [1.3, 2]], function_evaluations=told)
    earlier = {"pass": 1, "stage": 2}

    def rows(tasks: list[list[Any]], sampler_of: dict[str, Any] = earlier, uids: list[str] = told) -> Any:
        return sampler.warm_rows(
            ours.model_copy(update={"task_parameters": tasks, "function_evaluations": uids}), sampler_of
        )

    assert sampler.warm_rows(ours, earlier) == [0, 0, 0, 1, 1, 1]  # a missing level takes the nearest
    assert rows(ours.task_parameters, uids=[*told, "a-uid-of-another-session"]) is None
    assert rows(ours.task_parameters, {**earlier, "plain": True}) is None  # the twin without sources
    assert rows(ours.task_parameters, {"pass": 2, "stage": sampler.stage}) is None  # not an earlier one
    assert rows([[1.0], [1.3]]) is None  # a model of other task parameters
    assert rows([[1.0, "0"], [1.3, "2"]]) is None
    assert rows([[1.0, 0]]) is None  # task 1.3 is missing


def test_the_levels_model_keeps_every_evaluation_and_scores_at_b_max() -> None:
    band = engine(model="levels", n_initial=2)  # fewer than N(0) = 4: the model samples at every stage
    paper = engine()
    seen_stages = set()
    while not band.finished:
        s = band.ask()
        if s.provenance.rung == 0 and s.provenance.proposer == "model":
            sampler = band._level_sampler()
            seen_stages.add(sampler.stage)
            # every level of every task is an LCM-task, at any stage
            assert sorted(sampler.lcm_tasks) == [(i, j) for i in range(2) for j in range(4)]
            k = sampler.task_index({**TASKS[1], "gptuneband_level": sampler.stage})
            assert sampler.lcm_tasks[sampler.scored_task(k)] == (1, 0)  # scored by the prediction at b_max
            assert len(sampler._records) == len(band._records)  # no evaluation left the model
        band.tell(evaluate(s))
    assert seen_stages >= {1, 2}
    assert band.cost_per_task() == pytest.approx([band.structure.cost_per_pass()] * 2)
    sampler = paper._level_sampler()
    assert sampler.scored_task(0) == 0 and len(sampler.lcm_tasks) == 8  # the paper's model, stage 0


def test_an_unknown_model_names_the_choices() -> None:
    with pytest.raises(InvalidInputError, match="model.*allowed: paper, levels"):
        engine(model="fancy")


def test_a_rungs_ranking_follows_what_it_is_told() -> None:
    """The ranking of a rung is kept between calls; a record told since, better or failed, is in the next one."""
    brackets = Brackets(BanditStructure.hyperband(1, 4, 2), ProblemSpace.parse(DEMO_PROBLEM).objective())
    key = (0, 0, 2)
    run = brackets.run(key)

    def tell(y: float | None) -> str:
        outputs = {"y": y} if y is not None else {}
        record = FunctionEvaluation.create(
            {"t": 1.0}, {"x": 0.5}, outputs, provenance=Provenance(bracket=2, rung=0, pass_=1)
        )
        brackets.add(record, key)
        return record.uid

    middle, worst = tell(0.5), tell(0.9)
    assert brackets.successes(run, 0) == [middle, worst]
    assert brackets.successes(run, 0) == [middle, worst]  # asked again: the same
    best = tell(0.1)
    assert brackets.successes(run, 0) == [best, middle, worst]
    tell(None)  # a failed evaluation is no success
    assert brackets.successes(run, 0) == [best, middle, worst]
    assert brackets.rung_size(run, 1) == 2  # N(2) = 4 told: keep 4 // 2


def test_the_engine_takes_the_schedulers_bandit_structure() -> None:
    """GPTuneBand(structure=...) is GPTuneBand(b_min=..., b_max=..., eta=...), and rebuilds from its spec."""
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": 1.0}, {"t": 1.5}]
    given = GPTuneBand(problem, tasks, seed=0, structure=BanditStructure.hyperband(1, 9, 3))
    named = GPTuneBand(problem, tasks, seed=0, b_min=1, b_max=9, eta=3)
    assert given.structure == named.structure and given.structure.fidelities == (9.0, 3.0, 1.0)
    again = fresh_engine(given)
    assert isinstance(again, GPTuneBand) and again.structure == given.structure
    with pytest.raises(InvalidInputError, match="structure: give either a structure or b_min"):
        GPTuneBand(problem, tasks, structure=BanditStructure.hyperband(1, 9, 3), b_max=9)
