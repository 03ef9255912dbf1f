"""Engines check what they are told (issue 17, item 4), against the real engines, stores and sources.

``Engine.tell`` refuses a record whose task or configuration lies outside the problem with an
``InvalidInputError`` naming the field and the allowed values, and the engine's state is unchanged; a
replayed history (``Engine.replay``, ``TuningSession.resume``, transfer sources from a store or an
imported GPTune file, TLA) skips the records that do not fit with one warning that counts them.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from record_helpers import known
from repo_data import GPTUNE_DEMO

from raytuner.engines import MLA, DiscreteBO, Engine, GPTuneBand, RandomSearch
from raytuner.engines.transfer import TLA1, TLA2, SourceData, TransferLearning
from raytuner.errors import InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore, StoreSource
from raytuner.test_problems import DEMO_PROBLEM

DEMO_FILE = GPTUNE_DEMO
FAST = LCMOptions(n_starts=1, warm_starts=1, max_iterations=40, warm_iterations=10, screen=2)
PROBLEM = ProblemSpace.parse(
    {
        "input_space": [{"name": "n", "type": "integer", "lower_bound": 1, "upper_bound": 100}],
        "parameter_space": [
            {"name": "block", "type": "integer", "lower_bound": 4, "upper_bound": 256},
            {"name": "loop_order", "type": "categorical", "categories": ["ijk", "ikj", "jik"]},
            {"name": "unroll", "type": "integer", "lower_bound": 1, "upper_bound": 4},
        ],
        "output_space": [{"name": "runtime"}],
        "constraints": {"fits": "block <= 64 * unroll"},
    }
)
TASK = {"n": 10}
GOOD = {"block": 16, "loop_order": "ikj", "unroll": 2}
LOG = "raytuner.engines.base"

#: (what is told, the start of the error message)
BAD = [
    (TASK, {**GOOD, "block": 1000}, "tuning_parameter.block: 1000 is outside [4, 256]"),
    (
        TASK,
        {**GOOD, "loop_order": "xyz"},
        "tuning_parameter.loop_order: 'xyz' is not a category (allowed: ijk, ikj, jik)",
    ),
    (TASK, {**GOOD, "block": 16.5}, "tuning_parameter.block: 16.5 is not an integer"),
    (TASK, {**GOOD, "unroll": True}, "tuning_parameter.unroll: True is not a number"),
    (TASK, {"block": 16, "loop_order": "ikj"}, "tuning_parameter.unroll: missing value"),
    (TASK, {**GOOD, "bogus": 1}, "tuning_parameter.bogus: unknown parameter (allowed: block, loop_order, unroll)"),
    ({"n": 500}, GOOD, "task_parameter.n: 500 is outside [1, 100]"),
    ({"m": 10}, GOOD, "task_parameter.m: unknown parameter (allowed: n)"),
    (TASK, {**GOOD, "block": 200, "unroll": 1}, "constraints.fits: violated by task"),
]


def runtime(task: dict, config: dict) -> float:
    return abs(config["block"] - 8 * config["unroll"]) / 100 + 0.1 * ["ijk", "ikj", "jik"].index(config["loop_order"])


def source_records() -> list[FunctionEvaluation]:
    """Measured evaluations of two other tasks (TLA's sources), deterministic."""
    out = []
    for n in (20, 40):
        for i, block in enumerate((4, 8, 16, 32, 64, 96)):
            config = {"block": block, "loop_order": ["ijk", "ikj", "jik"][i % 3], "unroll": 2}
            out.append(FunctionEvaluation.create({"n": n}, config, {"runtime": runtime({"n": n}, config) + n / 100}))
    return out


ENGINES: dict[str, Callable[[], Engine]] = {
    "random": lambda: RandomSearch(PROBLEM, [TASK], seed=0),
    "mla": lambda: MLA(PROBLEM, [TASK], seed=0, n_initial=3, lcm=FAST, executor=InlineExecutor()),
    "tla2": lambda: TLA2(PROBLEM, TASK, source_records(), seed=0, n_initial=2, lcm=FAST, executor=InlineExecutor()),
    "gptuneband": lambda: GPTuneBand(
        PROBLEM, [TASK], seed=0, b_min=1, b_max=2, eta=2, lcm=FAST, executor=InlineExecutor()
    ),
    "discrete": lambda: DiscreteBO(PROBLEM, [TASK], seed=0, n_initial=3),
    "transfer": lambda: TransferLearning(
        PROBLEM, TASK, source_records(), "weighted_sum_dynamic", seed=0, lcm=FAST, executor=InlineExecutor()
    ),
}


@pytest.fixture(scope="module", params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest) -> Engine:
    """One engine of each kind, which has asked and been told one good evaluation."""
    built = ENGINES[request.param]()
    suggestion = built.ask()
    built.tell(
        FunctionEvaluation.create(
            suggestion.task,
            suggestion.config,
            {"runtime": runtime(suggestion.task, suggestion.config)},
            provenance=suggestion.provenance,
        )
    )
    return built


def state(engine: Engine) -> object:
    """Everything the engine holds, as plain comparable data (functions by name, arrays as lists)."""
    seen: set[int] = set()

    def walk(value: object) -> object:
        if isinstance(value, (str, int, float, bool, type(None))):
            return value
        if isinstance(value, np.ndarray):
            return ("array", value.shape, value.tolist())
        if callable(value) and not hasattr(value, "__dict__") or inspect.isfunction(value) or inspect.ismethod(value):
            return ("callable", getattr(value, "__qualname__", type(value).__name__))
        if id(value) in seen:
            return ("seen", type(value).__name__)
        seen.add(id(value))
        if isinstance(value, dict):
            return ("dict", [(walk(k), walk(v)) for k, v in value.items()])
        if isinstance(value, (list, tuple, deque)):
            return (type(value).__name__, [walk(v) for v in value])
        if isinstance(value, (set, frozenset)):
            return ("set", sorted(repr(walk(v)) for v in value))
        if hasattr(value, "__dict__"):
            return (type(value).__name__, walk(vars(value)))
        if hasattr(value, "__slots__"):
            return (type(value).__name__, [walk(getattr(value, n, None)) for n in value.__slots__])
        return (type(value).__name__, repr(value))

    return walk(vars(engine))


@pytest.mark.parametrize(("task", "config", "message"), BAD)
def test_every_engine_refuses_a_point_outside_the_problem(
    engine: Engine, task: dict, config: dict, message: str
) -> None:
    before = state(engine)
    provenance = Provenance(engine=engine.name, bracket=1, rung=0, pass_=1, fidelity=1.0)  # GPTuneBand's plan
    for record in (
        FunctionEvaluation.create(task, config, {"runtime": 1.0}, provenance=provenance),
        FunctionEvaluation.create(task, config, failure="crashed", provenance=provenance),
    ):
        with pytest.raises(InvalidInputError) as info:
            engine.tell(record)
        assert str(info.value).startswith(message), str(info.value)
        assert info.value.field.split(".")[0] in ("tuning_parameter", "task_parameter", "constraints")
        assert state(engine) == before  # nothing entered the engine


def test_the_state_snapshot_sees_a_good_tell(engine: Engine) -> None:
    """The check above is not vacuous: a good record told to the same engine changes its state."""
    suggestion = engine.ask()
    before = state(engine)
    engine.tell(
        FunctionEvaluation.create(
            suggestion.task, suggestion.config, {"runtime": 0.5}, provenance=suggestion.provenance
        )
    )
    assert state(engine) != before


def test_a_refused_tell_leaves_the_next_suggestion_as_it_was() -> None:
    told, twin = RandomSearch(PROBLEM, [TASK], seed=3), RandomSearch(PROBLEM, [TASK], seed=3)
    for task, config, _ in BAD:
        with pytest.raises(InvalidInputError):
            told.tell(FunctionEvaluation.create(task, config, {"runtime": 1.0}))
    assert told.ask() == twin.ask()


def test_a_good_record_is_still_folded_in() -> None:
    engine = MLA(PROBLEM, [TASK], seed=0, n_initial=3, lcm=FAST, executor=InlineExecutor())
    engine.tell(FunctionEvaluation.create(TASK, {"block": 16.0, "loop_order": "ikj", "unroll": 2}, {"runtime": 1.0}))
    assert engine.evaluated[0] == [{"block": 16.0, "loop_order": "ikj", "unroll": 2}]


# -- replaying history ----------------------------------------------------------------------------------


def history(n_good: int = 4) -> list[FunctionEvaluation]:
    """Good evaluations of TASK interleaved with ones that do not fit the problem (3 of them)."""
    good = [
        FunctionEvaluation.create(TASK, {**GOOD, "block": 4 * (i + 1)}, {"runtime": 0.1 * i}) for i in range(n_good)
    ]
    bad = [FunctionEvaluation.create(task, config, {"runtime": 1.0}) for task, config, _ in BAD[:2]]
    bad.append(FunctionEvaluation.create(*BAD[6][:2], failure="crashed"))
    return [good[0], bad[0], good[1], bad[1], *good[2:], bad[2]]


def skip_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno == logging.WARNING]


def test_replay_skips_what_does_not_fit_with_one_counted_warning(caplog: pytest.LogCaptureFixture) -> None:
    records = history()
    engine, twin = RandomSearch(PROBLEM, [TASK], seed=5), RandomSearch(PROBLEM, [TASK], seed=5)
    with caplog.at_level(logging.WARNING, logger=LOG):
        assert engine.replay(records) == 4
    warnings = skip_warnings(caplog)
    assert len(warnings) == 1 and "skipped 3 of 7" in warnings[0] and "block: 1000 is outside" in warnings[0]
    assert (
        twin.replay(
            [
                r
                for r in records
                if r.tuning_parameter.get("block", 0) <= 256
                and r.tuning_parameter.get("loop_order") != "xyz"
                and r.task_parameter["n"] <= 100
            ]
        )
        == 4
    )
    assert engine.ask() == twin.ask()


def test_resume_skips_stored_records_that_do_not_fit(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = JsonStore(tmp_path)
    for record in history():
        store.append("kernel", record)
    with caplog.at_level(logging.WARNING, logger=LOG):
        session = TuningSession.resume(PROBLEM, RandomSearch(PROBLEM, [TASK], seed=0), store, "kernel")
    warnings = skip_warnings(caplog)
    # the record of task n=500 is not one of the session's tasks: it is not replayed at all
    assert len(warnings) == 1 and "skipped 2 of 6" in warnings[0]
    assert len(session.records) == 4 and all(
        PROBLEM.is_valid(r.task_parameter, r.tuning_parameter) for r in session.records
    )
    assert known(session.best(TASK)).tuning_parameter["block"] == 4
    trial = session.ask()  # and the session goes on
    assert session.tell(trial, {"runtime": 0.5}).status == "ok"


def test_sources_skip_what_does_not_fit_with_one_counted_warning(caplog: pytest.LogCaptureFixture) -> None:
    records = source_records()
    misfits = [
        FunctionEvaluation.create({"n": 30}, {**GOOD, "block": 999}, {"runtime": 1.0}),
        FunctionEvaluation.create({"n": 30}, {"block": 16, "loop_order": "ikj"}, {"runtime": 1.0}),
        FunctionEvaluation.create({"n": 0}, GOOD, {"runtime": 1.0}),
    ]
    with caplog.at_level(logging.WARNING, logger=LOG):
        source = SourceData(PROBLEM, records + misfits, executor=InlineExecutor())
    assert len(source.records) == len(records) and [t.task for t in source.tasks] == [{"n": 20}, {"n": 40}]
    assert skip_warnings(caplog) == [skip_warnings(caplog)[0]] and "skipped 3 of 15" in skip_warnings(caplog)[0]

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOG):
        tla1 = TLA1(PROBLEM, records + misfits, seed=0)
    assert len(tla1.optima) == 2 and len(skip_warnings(caplog)) == 1

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOG):
        engine = TLA2(PROBLEM, TASK, records + misfits, seed=0, n_initial=2, lcm=FAST, executor=InlineExecutor())
    assert len(engine.tasks) == 3 and len(skip_warnings(caplog)) == 1  # one warning, not one per record


def test_an_imported_gptune_history_used_as_a_source_skips_what_does_not_fit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    raw = json.loads(DEMO_FILE.read_text())
    edited = copy.deepcopy(raw)
    for i in (2, 9, 11):
        edited["func_eval"][i]["tuning_parameter"]["x"] = 5.0  # outside x in [0, 1]
    edited["func_eval"][12]["task_parameter"]["t"] = -1.0  # outside t in [0, 10]
    (tmp_path / "GPTune-Demo.json").write_text(json.dumps(edited))
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    with caplog.at_level(logging.WARNING, logger=LOG):
        engine = TransferLearning(
            problem,
            {"t": 2.0},
            StoreSource(tmp_path, "GPTune-Demo"),
            "weighted_sum_dynamic",
            seed=0,
            lcm=FAST,
            executor=InlineExecutor(),
        )
    warnings = skip_warnings(caplog)
    assert len(warnings) == 1 and "skipped 4 of 70 source records" in warnings[0]
    assert len(engine.source.records) == 66
    assert all(0 <= r.tuning_parameter["x"] <= 1 and r.task_parameter["t"] >= 0 for r in engine.source.records)
