"""GPTune's history-database options (issue 20, part 3): each one changes what a resumed run sees.

A store holds the evaluations of two earlier sessions made on two machines with two compiler versions;
a resumed session replays what ``load_func_eval``, the loadable machine and software configurations and
``no_load_check`` allow; ``save_func_eval`` and ``save_model`` decide what reaches the store;
``load_surrogate_model`` uses a stored model as it is. The options come through the meta description,
``TuningSession``, the Ray searchers and the GPTuneBand scheduler, and the service (over gRPC).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from record_helpers import description

from raytuner.engines import MLA, RandomSearch
from raytuner.errors import InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.history_options import HistoryOptions
from raytuner.problem.meta import MetaDescription
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}]
NAME = "historyopts"
CORI = {"machine_name": "cori", "haswell": {"nodes": 1, "cores": 32}}
PERLMUTTER = {"machine_name": "perlmutter", "milan": {"nodes": 2, "cores": 64}}
GCC8 = {"gcc": {"version_split": [8, 3, 0]}}
GCC11 = {"gcc": {"version_split": [11, 2, 0]}}
FAST = LCMOptions(n_starts=2, max_iterations=100, warm_iterations=40)


def run(store: JsonStore, trials: int, **options: Any) -> TuningSession:
    session = TuningSession(PROBLEM, RandomSearch(PROBLEM, TASKS, seed=len(options) + trials), store, NAME, **options)
    for _ in range(trials):
        trial = session.ask()
        session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})
    return session


@pytest.fixture
def history(tmp_path: Path) -> JsonStore:
    """Three evaluations made on Cori with gcc 8.3, three on Perlmutter with gcc 11.2."""
    store = JsonStore(tmp_path / "db")
    run(store, 3, machine=CORI, software=GCC8)
    run(store, 3, machine=PERLMUTTER, software=GCC11)
    return store


def machines_replayed(store: JsonStore, **options: Any) -> list[str]:
    session = TuningSession.resume(PROBLEM, RandomSearch(PROBLEM, TASKS, seed=0), store, NAME, **options)
    return [r.machine_configuration["machine_name"] for r in session.records]


@pytest.mark.parametrize(
    "history_options, session_only, expected",
    [
        ({}, False, ["cori"] * 3 + ["perlmutter"] * 3),  # today's behaviour
        ({"load_func_eval": "no"}, False, []),
        ({}, True, []),  # the service's default
        ({"load_func_eval": "yes"}, True, ["cori"] * 3 + ["perlmutter"] * 3),
        (
            {"loadable_machine_configurations": {"cori": {"haswell": {"nodes": [1, 2], "cores": 32}}}},
            False,
            ["cori"] * 3,
        ),
        ({"loadable_machine_configurations": {"cori": {"haswell": {"nodes": 4, "cores": 32}}}}, False, []),
        ({"loadable_machine_configurations": {"cori": {}}}, False, []),  # the processor is not listed
        (
            {"loadable_software_configurations": {"gcc": {"version_from": [9], "version_to": [12]}}},
            False,
            ["perlmutter"] * 3,
        ),
        ({"loadable_software_configurations": {"gcc": {"version_split": [8, 3, 0]}}}, False, ["cori"] * 3),
        ({"loadable_software_configurations": {"clang": {"version_from": [1]}}}, False, []),  # a package not there
        (
            {"loadable_machine_configurations": {"cori": {}}, "no_load_check": "yes"},
            False,
            ["cori"] * 3 + ["perlmutter"] * 3,
        ),
    ],
)
def test_what_a_resumed_session_replays(
    history: JsonStore, history_options: dict[str, Any], session_only: bool, expected: list[str]
) -> None:
    assert machines_replayed(history, history=history_options, session_only=session_only) == expected


def _python(version: list[int]) -> dict[str, Any]:
    return {"machine_configuration": {}, "software_configuration": {"python": {"version_split": version}}}


def test_versions_are_compared_part_by_part() -> None:
    options = HistoryOptions.parse({"loadable_software_configurations": {"python": {"version_from": [3, 10]}}})
    assert not options.loadable(_python([3, 9, 1]))  # GPTune's joined digits would load it: 391 >= 310
    assert options.loadable(_python([3, 10, 2])) and options.loadable(_python([3, 10]))
    upto = HistoryOptions.parse({"loadable_software_configurations": {"python": {"version_to": [3]}}})
    assert upto.loadable(_python([3, 0, 0])) and not upto.loadable(_python([3, 0, 1]))  # missing parts are 0


def test_an_odd_stored_machine_is_not_loadable_not_an_error() -> None:
    options = HistoryOptions.parse({"loadable_machine_configurations": {"cori": {}}})
    assert not options.loadable({"machine_configuration": {"machine_name": ["cori"]}, "software_configuration": {}})
    assert not options.loadable({"machine_configuration": "cori", "software_configuration": {}})


def test_save_func_eval_no_keeps_records_out_of_the_store_but_durable(history: JsonStore) -> None:
    session = run(history, 2, history={"save_func_eval": "no"})
    assert len(history.evaluations(NAME)) == 6  # nothing new in the history
    kept = list(history.ledger().read("session_evaluations", session_id=session.session_id))
    assert [d["record"]["uid"] for d in kept] == [r.uid for r in session.records[-2:]]
    again = TuningSession.resume(
        PROBLEM,
        RandomSearch(PROBLEM, TASKS, seed=0),
        history,
        NAME,
        session_id=session.session_id,
        history={"save_func_eval": "no"},
    )
    assert again.told_count == 2 and again.pending == {}  # told, not adopted as in flight
    assert [r.uid for r in again.records[-2:]] == [r.uid for r in session.records[-2:]]
    assert len(machines_replayed(history)) == 6  # another session does not see them
    ledger = history.ledger()  # a retried tell's line written twice
    ledger.append("session_evaluations", kept[-1])
    twice = TuningSession.resume(
        PROBLEM,
        RandomSearch(PROBLEM, TASKS, seed=0),
        history,
        NAME,
        session_id=session.session_id,
        history={"save_func_eval": "no"},
    )
    assert [r.uid for r in twice.records] == [r.uid for r in again.records]


def mla_session(store: JsonStore, seed: int, **options: Any) -> TuningSession:
    engine = MLA(PROBLEM, TASKS, seed=seed, n_initial=3, lcm=FAST, executor=InlineExecutor(), search_candidates=256)
    return TuningSession.resume(PROBLEM, engine, store, NAME, **options)


def tune(session: TuningSession, trials: int) -> None:
    for _ in range(trials):
        trial = session.ask()
        session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})


@pytest.mark.parametrize("save_model, models", [("yes", 2), ("no", 0)])
def test_save_model(tmp_path: Path, save_model: str, models: int) -> None:
    store = JsonStore(tmp_path / "db")
    tune(mla_session(store, 1, history={"save_model": save_model}), 5)  # fits before asks 4 and 5
    assert len(store.models(NAME)) == models


@pytest.mark.parametrize("load_surrogate_model, refitted", [("no", True), ("yes", False)])
def test_load_surrogate_model_uses_the_stored_model_as_it_is(
    tmp_path: Path, load_surrogate_model: str, refitted: bool
) -> None:
    store = JsonStore(tmp_path / "db")
    tune(mla_session(store, 1), 4)
    stored = store.models(NAME)[-1]
    session = mla_session(store, 2, history={"load_func_eval": "no", "load_surrogate_model": load_surrogate_model})
    tune(session, 5)  # past LCMOptions.refit_growth: a warm start is re-optimised
    assert isinstance(session.engine, MLA)
    fitted = session.engine.fitted_model()
    assert fitted is not None and fitted.report.optimised is refitted
    if not refitted:
        assert fitted.hyperparameters.to_dict() == description(stored)["hyperparameters"]


GPTUNE_META: dict[str, Any] = {
    "tuning_problem_name": NAME,
    "tuning_problem_category": "demo",
    "problem_space": DEMO_PROBLEM,
    "machine_configuration": CORI,
    "software_configuration": GCC8,
    "historydb_path": "./gptune.db",
    "load_func_eval": "yes",
    "save_func_eval": "y",
    "save_model": "no",
    "load_surrogate_model": "n",
    "no_load_check": "no",
    "loadable_machine_configurations": {"cori": {"haswell": {"nodes": [1, 2], "cores": 32}}},
    "loadable_software_configurations": {"gcc": {"version_from": [8, 0, 0], "version_to": [9, 0, 0]}},
}


def test_a_gptune_meta_description_with_every_option_reads_and_round_trips() -> None:
    meta = MetaDescription.parse(GPTUNE_META)
    assert (
        meta.history.load_func_eval,
        meta.history.save_model,
        meta.historydb_path,
        meta.tuning_problem_category,
    ) == (True, False, "./gptune.db", "demo")
    assert MetaDescription.parse(meta.to_dict()) == meta
    assert meta.to_dict()["save_model"] == "no" and "save_func_eval" not in meta.to_dict()  # a default


@pytest.mark.parametrize(
    "field, value, named",
    [
        ("save_model", "maybe", "save_model: 'maybe' is not a yes/no value (allowed: yes, no, y, n)"),
        (
            "loadable_machine_configurations",
            {"cori": {"haswell": {"nodes": "one"}}},
            "loadable_machine_configurations.cori.haswell.nodes: Input should be a valid integer",
        ),
        (
            "loadable_software_configurations",
            {"gcc": {}},
            "loadable_software_configurations.gcc: give version_split, version_from or version_to",
        ),
    ],
)
def test_a_bad_option_is_one_line_naming_it(field: str, value: Any, named: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        MetaDescription.parse({**GPTUNE_META, field: value})
    assert str(err.value).startswith(named) and "\n" not in str(err.value)


def test_the_ray_faces_take_the_options(history: JsonStore) -> None:
    from raytuner.schedulers import GPTuneBandScheduler  # Ray's import only here
    from raytuner.searchers import LCMSearcher, RandomSearcher

    from raytuner.engines import BanditStructure

    cori = {"loadable_machine_configurations": {"cori": {"haswell": {"nodes": 1, "cores": 32}}}}
    searcher = RandomSearcher(PROBLEM, tasks=TASKS, store=history, problem_name=NAME, seed=0, history=cori)
    lcm = LCMSearcher(PROBLEM, TASKS, history, NAME, seed=0, history={"load_func_eval": "no"})
    band = GPTuneBandScheduler(
        PROBLEM, TASKS, history, NAME, seed=0, history=cori, structure=BanditStructure.hyperband(1, 9, 3)
    )
    assert [len(face.session.records) for face in (searcher, lcm, band)] == [3, 0, 3]


def test_the_service_takes_the_options(server: Any) -> None:
    from raytuner.client.remote import RemoteTuner, ServiceError  # gRPC only here
    from raytuner.service.access import ProblemAccess

    run(server.store, 3, machine=CORI, software=GCC8)
    run(server.store, 3, machine=PERLMUTTER, software=GCC11)
    meta = {k: v for k, v in GPTUNE_META.items() if k != "historydb_path"}
    key = server.keys.create("alice")
    owner = server.keys.verify(key).key_id  # records stored directly: the operator's
    ProblemAccess(server.ledger, server.store).admit(GPTUNE_META["tuning_problem_name"], owner, "owner")  # grant
    with RemoteTuner(server.address, key, timeout=20) as client:
        client.create_session(meta, "random", tasks=TASKS)
        assert client.session()["evaluations"] == 3  # Cori's, gcc 8.3 in [8, 9]
        client.create_session({**meta, "load_func_eval": "no"}, "random", tasks=TASKS)
        assert client.session()["evaluations"] == 0
        client.create_session({k: v for k, v in meta.items() if not k.startswith("load")}, "random", tasks=TASKS)
        assert client.session()["evaluations"] == 0  # the service's default: its own only
        with pytest.raises(ServiceError, match="^INVALID_ARGUMENT: historydb_path: the service keeps"):
            client.create_session(GPTUNE_META, "random", tasks=TASKS)
