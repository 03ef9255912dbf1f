"""Tuning together is never materially worse than alone: each task's own model against the shared one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from record_helpers import provenance

from raytuner.engines import MLA, GPTuneBand
from raytuner.engines.base import Engine
from raytuner.engines.sharing import OWN_DESIGN, OWN_DESIGN_NOTE, OWN_MODEL, loo_log_density, own_predicts_better
from raytuner.errors import InvalidInputError
from raytuner.models import LCM, LCMOptions, TrainingData
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore

FAST = LCMOptions(n_starts=2, warm_starts=1)
INLINE = InlineExecutor()
DIMENSION = 4
#: Where five of the six tasks have their optimum (each a little apart), and the corner the sixth's lies in.
SHARED = np.array([0.3, 0.4, 0.5, 0.6])
CORNER = np.array([1.0, 1.0, 0.0, 1.0])
OUTLIER = {"t": 5.0}
PROBLEM = ProblemSpace.parse(
    {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 5}],
        "parameter_space": [
            {"name": f"x{i}", "type": "real", "lower_bound": 0, "upper_bound": 1} for i in range(DIMENSION)
        ],
        "output_space": [{"name": "y", "type": "real", "goal": "minimize"}],
    }
)
TASKS = [{"t": float(t)} for t in range(5)] + [OUTLIER]


def six_tasks(task: dict[str, Any], config: dict[str, Any]) -> float:
    """Five bowls around :data:`SHARED`; the outlier's is the same bowl tilted so hard that its optimum is CORNER."""
    x = np.array([config[f"x{i}"] for i in range(DIMENSION)])
    if task["t"] < 5:
        return float(np.sum((x - SHARED - 0.02 * task["t"]) ** 2))
    return float(np.sum((x - SHARED) ** 2) - 1.5 * float(np.sum(np.where(CORNER > 0, x, -x))))


#: The outlier's optimum, at CORNER.
OPTIMUM = six_tasks(OUTLIER, {f"x{i}": float(v) for i, v in enumerate(CORNER)})


def drive(engine: Engine, evaluations: int) -> list[FunctionEvaluation]:
    """Ask and tell ``engine`` until every task has ``evaluations``; the records told."""
    records = []
    for _ in range(evaluations * len(engine.tasks)):
        s = engine.ask()
        records.append(engine.tell(s, {"y": six_tasks(s.task, s.config)}))
    return records


def outlier_regret(records: list[FunctionEvaluation]) -> float:
    return min(r.known_value("y") for r in records if r.task_parameter == OUTLIER) - OPTIMUM


def test_a_task_unlike_the_others_reaches_single_task_bos_level_when_tuned_with_them() -> None:
    # seeded, so deterministic: the outlier's mean regret over four runs, together and alone, 12 evaluations each
    options: dict[str, Any] = {"n_initial": 5, "lcm": FAST, "executor": INLINE, "search_candidates": 512}
    alone, together, shared = [], [], []
    for seed in range(4):
        alone.append(outlier_regret(drive(MLA(PROBLEM, [OUTLIER], seed=seed, **options), 12)))
        records = drive(MLA(PROBLEM, TASKS, seed=seed, **options), 12)
        together.append(outlier_regret(records))
        shared.append(outlier_regret(drive(MLA(PROBLEM, TASKS, seed=seed, sharing="always", **options), 12)))
        # the outlier's search came from its own model at least on its turns; a sharing task's mostly from the LCM
        own = [r for r in records if (provenance(r).model_extra or {}).get(OWN_MODEL)]
        outlier_own = sum(r.task_parameter == OUTLIER for r in own)
        assert outlier_own >= (12 - 5) // MLA.OWN_TURN
        assert all(sum(r.task_parameter == t for r in own) < 12 - 5 for t in TASKS[:5])
    assert np.mean(together) <= np.mean(alone) + 0.02, (together, alone)
    assert np.mean(shared) > np.mean(together), (shared, together)  # the shared model alone does worse here


def test_the_own_model_wins_the_check_for_an_unrelated_task_and_loses_it_for_a_related_one() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((12, 2))
    bowl = np.sum((X - 0.3) ** 2, axis=1)
    unrelated = np.sin(9 * X[:, 0]) * np.cos(7 * X[:, 1])
    data = TrainingData([X, X, X], [bowl, 2 * bowl + 0.1, unrelated])
    shared = LCM(LCMOptions(n_starts=2, task_weights="nonnegative")).fit(data, seed=0, executor=INLINE)
    for task, values, own_wins in ((1, 2 * bowl + 0.1, False), (2, unrelated, True)):
        own = LCM(LCMOptions(n_starts=2)).fit(TrainingData([X], [values]), seed=0, executor=INLINE)
        assert own_predicts_better(shared, task, own, 0) is own_wins, task
    assert loo_log_density(shared, 0) is not None
    few = LCM(LCMOptions(n_starts=1)).fit(TrainingData([X[:4]], [bowl[:4]]), seed=0, executor=INLINE)
    assert loo_log_density(few, 0) is None  # too few samples to tell


def test_sharing_always_scores_every_suggestion_by_the_shared_model() -> None:
    engine = MLA(
        PROBLEM, TASKS, seed=0, n_initial=3, lcm=FAST, executor=INLINE, search_candidates=256, sharing="always"
    )
    records = drive(engine, 6)
    assert not any((provenance(r).model_extra or {}).get(OWN_MODEL) for r in records)
    assert engine.spec.options["sharing"] == "always"


def test_an_unknown_sharing_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInputError, match=r"^sharing: unknown sharing 'sometimes' \(allowed: checked, always\)$"):
        MLA(PROBLEM, TASKS, sharing="sometimes")  # type: ignore[arg-type]  # the wrong type is what the test gives


def test_gptuneband_marks_the_samples_its_tasks_own_models_chose() -> None:
    band = GPTuneBand(
        PROBLEM, TASKS[:2] + [OUTLIER], seed=0, b_min=1, b_max=4, eta=2, passes=2, lcm=FAST, executor=INLINE
    )
    sampler = band._level_sampler()  # a b_max sample's own model: the task's b_max data; another's: all its levels
    at = {place: k for k, place in enumerate(sampler.lcm_tasks)}
    assert sampler.own_tasks(at[(2, 0)]) == [at[(2, 0)]]
    assert sampler.own_tasks(at[(2, 1)]) == [at[(2, j)] for j in range(band.structure.s_max + 1)]
    records = []
    while not band.finished:
        s = band.ask()
        value = six_tasks(s.task, s.config) + 0.1 / float(s.fidelity or 4)
        records.append(band.tell(s, {"y": value}))
    own = [r for r in records if (provenance(r).model_extra or {}).get(OWN_MODEL)]
    assert own and all(provenance(r).proposer == "model" and provenance(r).rung == 0 for r in own)


def test_gptuneband_samples_b_max_by_each_tasks_own_b_max_model_once_it_holds_enough() -> None:
    # a task's full-fidelity search is single-task BO's once its b_max model can be fitted: a task whose best
    # region the other tasks and the low fidelities rate badly is still searched there
    band = GPTuneBand(
        PROBLEM, TASKS[:2] + [OUTLIER], seed=0, b_min=1, b_max=4, eta=2, passes=3, lcm=FAST, executor=INLINE
    )
    records = []
    while not band.finished:
        s = band.ask()
        records.append(band.tell(s, {"y": six_tasks(s.task, s.config) + 0.1 / float(s.fidelity or 4)}))
    later = [r for r in records if provenance(r).bracket == 0 and (provenance(r).pass_ or 0) >= 2]
    assert len(later) == 2 * 3 * band.structure.samples(0)  # passes 2 and 3, three tasks
    assert all((provenance(r).model_extra or {}).get(OWN_MODEL) for r in later)
    lower = [r for r in records if provenance(r).proposer == "model" and provenance(r).bracket != 0]
    assert not all((provenance(r).model_extra or {}).get(OWN_MODEL) for r in lower)  # the shared model guides these


def test_a_resumed_session_suggests_as_the_live_one_own_models_included(tmp_path: Path) -> None:
    def engine() -> MLA:
        return MLA(PROBLEM, TASKS[3:], seed=3, n_initial=3, lcm=FAST, executor=INLINE, search_candidates=256)

    store = JsonStore(tmp_path)
    live = TuningSession(PROBLEM, engine(), store, "six")
    for _ in range(27):
        trial = live.ask()
        live.tell(trial, {"y": six_tasks(trial.task, trial.config)})
    assert any((provenance(r).model_extra or {}).get(OWN_MODEL) for r in store.evaluations("six"))
    resumed = TuningSession.resume(PROBLEM, engine(), store, "six")  # the log and the stored models, told again
    for _ in range(6):
        mine, theirs = live.ask(), resumed.ask()
        assert (mine.task, mine.config, mine.provenance.model_extra) == (
            theirs.task,
            theirs.config,
            theirs.provenance.model_extra,
        )
        live.tell(mine, {"y": six_tasks(mine.task, mine.config)})
        resumed.tell(theirs, {"y": six_tasks(theirs.task, theirs.config)})


def test_gptuneband_explores_a_tasks_own_b_max_samples_until_it_holds_a_design() -> None:
    # a task's first b_max evaluations are promotions, where the low fidelities and the other tasks point: its own
    # b_max search first looks where its own model is least sure, as single-task BO's initial design would
    band = GPTuneBand(
        PROBLEM, TASKS[:2] + [OUTLIER], seed=0, b_min=1, b_max=4, eta=2, passes=3, lcm=FAST, executor=INLINE
    )
    held: dict[float, int] = {}  # b_max evaluations told per task
    exploring: list[int] = []
    searching: list[int] = []
    while not band.finished:
        s = band.ask()
        notes = s.provenance.model_extra or {}
        assert not notes.get(OWN_DESIGN_NOTE) or (notes.get(OWN_MODEL) and s.provenance.bracket == 0)
        if notes.get(OWN_MODEL) and s.provenance.bracket == 0:
            (exploring if notes.get(OWN_DESIGN_NOTE) else searching).append(held.get(s.task["t"], 0))
        band.tell(s, {"y": six_tasks(s.task, s.config) + 0.1 / float(s.fidelity or 4)})
        if float(s.fidelity or 4) == 4:
            held[s.task["t"]] = held.get(s.task["t"], 0) + 1
    # the own model sees the evaluations up to its horizon, at most those told: it searches only past a design
    assert exploring and searching
    assert min(searching) >= OWN_DESIGN
