"""The HistoryStore contract, run against every store (``store`` fixture: JSON, then MongoDB)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from repo_data import GPTUNE_DEMO

from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, Provenance, SurrogateModelRecord
from raytuner.store import EvaluationQuery, HistoryStore, VersionRange, read_history_file

DEMO = GPTUNE_DEMO

CORI = {"machine_name": "cori", "haswell": {"nodes": 1, "cores": 32}}
CORI_2 = {"machine_name": "cori", "haswell": {"nodes": 2, "cores": 32}}
PERLMUTTER = {"machine_name": "perlmutter", "milan": {"nodes": 1, "cores": 64}}


def gcc(*version: int) -> dict[str, Any]:
    return {"gcc": {"version_split": list(version)}}


def evaluation(t: Any = 1.0, x: float = 0.5, y: float | None = 2.0, **kw: Any) -> FunctionEvaluation:
    """An ok evaluation (or a failed one with ``y=None``), raytuner provenance attached."""
    return FunctionEvaluation.create(
        {"t": t},
        {"x": x},
        None if y is None else {"y": y},
        provenance=kw.pop("provenance", Provenance(engine="random", fidelity=3, bracket=0, rung=1, trial_id="trial-1")),
        **kw,
    )


def gptune_record(t: Any, x: float, y: float, **fields: Any) -> FunctionEvaluation:
    """A record as GPTune itself writes it: no ``raytuner`` key."""
    return FunctionEvaluation(task_parameter={"t": t}, tuning_parameter={"x": x}, evaluation_result={"y": y}, **fields)


def model(uids: list[str]) -> SurrogateModelRecord:
    return SurrogateModelRecord(
        hyperparameters={"lengthscale": [0.1], "variance": [1.0]},
        modeling_options={"model_kern": "RBF"},
        task_parameters=[[1.0]],
        function_evaluations=uids,
        modeler="Model_GPy_LCM",
    )


def dicts(records: list[Any]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in records]


# -- appending and reading back ------------------------------------------------------------------


def test_append_reads_back_equal_records(store: HistoryStore) -> None:
    ok = evaluation(
        1.0,
        0.25,
        3.5,
        machine_configuration=CORI,
        software_configuration=gcc(8, 3, 0),
        additional_output={"log": "fine"},
        constants={"c": 7},
    )
    failed = evaluation(2.0, 0.75, None, provenance=Provenance(engine="bo", trial_id="t-2"))
    crashed = FunctionEvaluation.create({"t": 3.0}, {"x": 0.1}, failure="segfault")
    mine = gptune_record(4.0, 0.3, 1.5)
    for record in (ok, failed, crashed, mine):
        store.append("demo", record)
    back = store.evaluations("demo")
    assert back == [ok, failed, crashed, mine]
    assert dicts(back) == dicts([ok, failed, crashed, mine])
    assert [r.status for r in back] == ["ok", "failed", "failed", "ok"]
    assert back[2].raytuner is not None and back[2].raytuner.failure_message == "segfault"
    assert back[0].raytuner is not None and back[0].raytuner.fidelity == 3.0


def test_record_keys_that_the_store_uses_itself_survive(store: HistoryStore) -> None:
    record = FunctionEvaluation.model_validate(
        {
            **evaluation().to_dict(),
            "tuning_problem_name": "another-problem",
            "_id": "crowd-id",
            "_appended": 12,
            "_shadowed": {"a": 1},
            "user_info": {"name": "x"},
            "additional_output": {"a.b": 1, "$c": {"d.e": 2}},
        }
    )
    store.append("demo", record)
    assert dicts(store.evaluations("demo")) == [record.to_dict()]


def test_empty_problem_has_no_records(store: HistoryStore) -> None:
    assert store.evaluations("nothing-here") == []
    assert store.models("nothing-here") == []
    assert store.problems() == []


def test_repeated_append_of_a_uid_keeps_one_record(store: HistoryStore) -> None:
    first = evaluation(1.0, 0.5, 2.0)
    store.append("demo", first)
    store.append("demo", first)
    store.append("demo", first.model_copy(update={"evaluation_result": {"y": 99.0}}))
    assert store.evaluations("demo") == [first]  # the first append wins


def test_the_same_record_may_go_to_two_problems(store: HistoryStore) -> None:
    record = evaluation()
    store.append("source", record)
    store.append("target", record)
    assert store.evaluations("source") == store.evaluations("target") == [record]


def test_append_many_skips_repeated_uids(store: HistoryStore) -> None:
    a, b, c, d = (evaluation(float(i), 0.1 * i, float(i)) for i in range(4))
    store.append("demo", b)
    assert store.append_many("demo", [a, b, c, a, d]) == 5
    assert store.append_many("demo", []) == 0
    assert store.evaluations("demo") == [b, a, c, d]
    assert store.append_many("demo", [a, b, c, d]) == 4
    assert len(store.evaluations("demo")) == 4


def test_models_round_trip(store: HistoryStore) -> None:
    evals = [evaluation(1.0, 0.1 * i, float(i)) for i in range(3)]
    store.append_many("demo", evals)
    m1, m2 = model([e.uid for e in evals[:2]]), model([e.uid for e in evals])
    store.append_model("demo", m1)
    store.append_model("demo", m2)
    store.append_model("demo", m1)
    assert store.models("demo") == [m1, m2]
    assert dicts(store.models("demo")) == dicts([m1, m2])
    assert store.models("other") == []


def test_problems_lists_every_problem_sorted(store: HistoryStore) -> None:
    store.append("zeta", evaluation())
    store.append("Alpha", evaluation())
    store.append_model("models-only", model([]))
    store.append("mid.dle_1", evaluation())
    assert store.problems() == sorted(["zeta", "Alpha", "models-only", "mid.dle_1"])


def test_changes_since_gives_what_was_appended_after_a_read(store: HistoryStore) -> None:
    first = [evaluation(1.0, 0.1 * i, float(i)) for i in range(3)]
    store.append_many("demo", first)
    whole = store.changes_since("demo")
    assert whole.whole and [r.uid for r in whole.evaluations] == [r.uid for r in first]
    assert not store.changes_since("demo", whole.cursor).evaluations  # nothing new: nothing read
    later = [evaluation(2.0, 0.5, 9.0), evaluation(1.0, 0.7, 8.0)]
    store.append("demo", later[0])
    store.append_batch("demo", [later[1]], [model([later[1].uid])])
    assert store.can_read_since("demo", whole.cursor) and not store.can_read_since("demo", "not a cursor")
    new = store.changes_since("demo", whole.cursor)
    assert not new.whole, "a store that can read only what is new does"
    assert [r.uid for r in new.evaluations] == [r.uid for r in later]
    assert [m.function_evaluations for m in new.models] == [[later[1].uid]]
    assert not store.changes_since("demo", new.cursor).evaluations
    everything = store.changes_since("demo", "not a cursor of this store")
    assert everything.whole and len(everything.evaluations) == 5
    assert store.evaluation_count("demo") == 5


def test_records_come_back_in_append_order(store: HistoryStore) -> None:
    records = [evaluation(float(i % 7), (i * 37 % 101) / 101, float(i)) for i in range(60)]
    store.append_many("demo", records[:10])
    for r in records[10:30]:
        store.append("demo", r)
    store.append_many("demo", records[30:45])
    for r in records[45:]:
        store.append("demo", r)
    assert [r.uid for r in store.evaluations("demo")] == [r.uid for r in records]
    assert [r.uid for r in store.evaluations("demo", EvaluationQuery(task={"t": (2, 4)}))] == [
        r.uid for r in records if 2 <= r.task_parameter["t"] <= 4
    ]


# -- queries ---------------------------------------------------------------------------------------


@pytest.fixture
def filled(store: HistoryStore) -> tuple[HistoryStore, list[FunctionEvaluation]]:
    records = [
        evaluation(0.5, machine_configuration=CORI, software_configuration=gcc(7, 5, 0)),
        evaluation(1.0, machine_configuration=CORI, software_configuration=gcc(8, 0, 0)),
        evaluation(2.0, machine_configuration=CORI_2, software_configuration=gcc(8, 10, 1)),
        evaluation(3.0, y=None, machine_configuration=PERLMUTTER, software_configuration=gcc(9, 0, 0)),
        evaluation(5.0, machine_configuration=PERLMUTTER, software_configuration=gcc(9, 0, 1)),
        evaluation("small", machine_configuration=CORI),
        evaluation("large", y=None, machine_configuration=CORI_2),
        gptune_record(1.5, 0.2, 4.0, machine_configuration=CORI, software_configuration=gcc(8, 5, 0)),
        gptune_record(10.0, 0.2, 4.0),
        evaluation(4.0, provenance=Provenance(status="pending")),
    ]
    store.append_many("demo", records)
    store.append("other", evaluation(1.0))
    return store, records


def ts(records: list[FunctionEvaluation]) -> list[Any]:
    return [r.task_parameter["t"] for r in records]


def test_task_ranges_are_inclusive(filled: tuple[HistoryStore, list[FunctionEvaluation]]) -> None:
    store, _ = filled
    assert ts(store.evaluations("demo", EvaluationQuery(task={"t": (1.0, 3.0)}))) == [1.0, 2.0, 3.0, 1.5]
    assert ts(store.evaluations("demo", EvaluationQuery(task={"t": (2, 2)}))) == [2.0]
    assert store.evaluations("demo", EvaluationQuery(task={"missing": (0, 1)})) == []


def test_open_ended_task_ranges(filled: tuple[HistoryStore, list[FunctionEvaluation]]) -> None:
    store, _ = filled
    assert ts(store.evaluations("demo", EvaluationQuery(task={"t": (3.0, None)}))) == [3.0, 5.0, 10.0, 4.0]
    assert ts(store.evaluations("demo", EvaluationQuery(task={"t": (None, 1.0)}))) == [0.5, 1.0]
    # a range with no bounds keeps the numeric values only
    assert ts(store.evaluations("demo", EvaluationQuery(task={"t": (None, None)}))) == [
        0.5,
        1.0,
        2.0,
        3.0,
        5.0,
        1.5,
        10.0,
        4.0,
    ]


def test_categorical_task_values(filled: tuple[HistoryStore, list[FunctionEvaluation]]) -> None:
    store, _ = filled
    assert ts(store.evaluations("demo", EvaluationQuery(task={"t": ["small", "large"]}))) == ["small", "large"]
    assert ts(store.evaluations("demo", EvaluationQuery(task={"t": ["large", 5.0, 1]}))) == [1.0, 5.0, "large"]
    assert store.evaluations("demo", EvaluationQuery(task={"t": []})) == []


def test_machine_containment(filled: tuple[HistoryStore, list[FunctionEvaluation]]) -> None:
    store, _ = filled
    q = EvaluationQuery(machine={"machine_name": "cori", "haswell": {"nodes": 1}})
    assert ts(store.evaluations("demo", q)) == [0.5, 1.0, "small", 1.5]
    assert ts(store.evaluations("demo", EvaluationQuery(machine={"machine_name": "cori"}))) == [
        0.5,
        1.0,
        2.0,
        "small",
        "large",
        1.5,
    ]
    assert ts(store.evaluations("demo", EvaluationQuery(machine={"milan": {}}))) == [3.0, 5.0]
    assert store.evaluations("demo", EvaluationQuery(machine={"haswell": {"nodes": 3}})) == []


def test_software_version_ranges_are_inclusive(filled: tuple[HistoryStore, list[FunctionEvaluation]]) -> None:
    store, _ = filled
    q = EvaluationQuery(software={"gcc": VersionRange(version_from=[8, 0, 0], version_to=[9, 0, 0])})
    assert ts(store.evaluations("demo", q)) == [1.0, 2.0, 3.0, 1.5]  # not 7.5.0 nor 9.0.1
    q = EvaluationQuery(software={"gcc": VersionRange(version_from=[9, 0, 0])})
    assert ts(store.evaluations("demo", q)) == [3.0, 5.0]
    q = EvaluationQuery(software={"clang": VersionRange(version_to=[20])})
    assert store.evaluations("demo", q) == []


def test_status_filters(filled: tuple[HistoryStore, list[FunctionEvaluation]]) -> None:
    store, _ = filled
    # GPTune's own records (no raytuner key) count as ok
    assert ts(store.evaluations("demo", EvaluationQuery(status={"ok"}))) == [0.5, 1.0, 2.0, 5.0, "small", 1.5, 10.0]
    assert ts(store.evaluations("demo", EvaluationQuery(status={"failed"}))) == [3.0, "large"]
    assert ts(store.evaluations("demo", EvaluationQuery(status={"pending", "failed"}))) == [3.0, "large", 4.0]
    assert store.evaluations("demo", EvaluationQuery(status=set())) == []


def test_conditions_combine(filled: tuple[HistoryStore, list[FunctionEvaluation]]) -> None:
    store, _ = filled
    q = EvaluationQuery.parse(
        {
            "task": {"t": (0, 2)},
            "machine": {"machine_name": "cori"},
            "status": ["ok"],
            "software": {"gcc": {"version_from": [8]}},
        }
    )
    assert ts(store.evaluations("demo", q)) == [1.0, 2.0, 1.5]


ODD_VALUES: list[Any] = [
    1,
    1.0,
    True,
    0,
    False,
    0.0,
    "1",
    None,
    [1, 2],
    [1, True],
    {"a": 1, "b": 2},
    {"b": 2, "a": 1},
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    2**40,
    2.5,
    "",
    "cori",
]
ODD_QUERIES: list[dict[str, Any]] = [
    {"task": {"t": [1]}},
    {"task": {"t": [True]}},
    {"task": {"t": [0.0]}},
    {"task": {"t": [False, None]}},
    {"task": {"t": [[1, 1]]}},
    {"task": {"t": [{"a": 1, "b": 2}]}},
    {"task": {"t": [math.nan]}},
    {"task": {"t": [2**40, "cori"]}},
    {"task": {"t": (0, 1)}},
    {"task": {"t": (None, 0)}},
    {"task": {"t": (1, None)}},
    {"task": {"t": (math.nan, 2)}},
    {"task": {"t": (-math.inf, math.inf)}},
    {"task": {"t": (2**70, None)}},
    {"task": {"t": (None, None)}},
    {"machine": {"m": 1}},
    {"machine": {"m": True}},
    {"machine": {"m": {"a": 1}}},
    {"machine": {"m": [1, 2]}},
    {"machine": {"m": {}}},
    {"machine": {"m": None}},
    {"machine": {"m": math.nan}},
]


@pytest.mark.parametrize("query", ODD_QUERIES, ids=repr)
def test_query_results_are_exactly_those_of_matches(store: HistoryStore, query: dict[str, Any]) -> None:
    """Whatever a store filters itself, the result is what EvaluationQuery.matches keeps."""
    records = [evaluation(v, machine_configuration={"m": v}) for v in ODD_VALUES]
    records += [evaluation(v, machine_configuration={"m": {"a": v}}) for v in (1, True, 1.0)]
    records.append(gptune_record(1, 0.5, 1.0))  # no machine configuration at all
    store.append_many("odd", records)
    stored = store.evaluations("odd")
    assert [r.uid for r in stored] == [r.uid for r in records]
    q = EvaluationQuery.parse(query)
    # matched against the records as read back: NaN is only `in` a list holding the same object
    assert [r.uid for r in store.evaluations("odd", q)] == [r.uid for r in stored if q.matches(r)]


# -- GPTune files ----------------------------------------------------------------------------------


def test_import_and_export_gptune_demo(store: HistoryStore) -> None:
    document = read_history_file(DEMO)
    assert (len(document.func_eval), len(document.surrogate_model)) == (70, 35)
    assert store.import_document(document) == (70, 35)
    assert store.problems() == ["GPTune-Demo"]
    exported = store.export_document("GPTune-Demo")
    assert exported.tuning_problem_name == "GPTune-Demo"
    for kind in ("func_eval", "surrogate_model"):
        want = {r.uid: r.to_dict() for r in getattr(document, kind)}
        got = {r.uid: r.to_dict() for r in getattr(exported, kind)}
        assert len(got) == len(want) == len(getattr(exported, kind))
        assert got == want
    assert [r.uid for r in exported.func_eval] == [r.uid for r in document.func_eval]
    # importing again adds nothing, and says so
    assert store.import_document(document) == (0, 0)
    assert len(store.evaluations("GPTune-Demo")) == 70 and len(store.models("GPTune-Demo")) == 35


# -- bad input -------------------------------------------------------------------------------------

BAD_NAMES: list[Any] = ["", "../etc", "a b", "-lead", "$where", "a:b", "x" * 129, None, 3]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_problem_names_are_rejected(store: HistoryStore, name: Any) -> None:
    calls = [
        lambda: store.append(name, evaluation()),
        lambda: store.append_many(name, [evaluation()]),
        lambda: store.append_model(name, model([])),
        lambda: store.evaluations(name),
        lambda: store.evaluations(name, EvaluationQuery(status={"ok"})),
        lambda: store.models(name),
        lambda: store.export_document(name),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError) as info:
            call()
        assert info.value.field == "tuning_problem_name"
    assert store.problems() == []


def test_a_store_pickles_as_its_location(store: HistoryStore) -> None:
    """Ray pickles searchers with their store (Tuner state); the copy reads the same records."""
    import pickle

    record = FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 1.0})
    store.append("pickled", record)
    copy = pickle.loads(pickle.dumps(store))
    try:
        assert [r.uid for r in copy.evaluations("pickled")] == [record.uid]
    finally:
        copy.close()


def test_a_nan_task_value_lies_in_no_range(store: HistoryStore) -> None:
    record = FunctionEvaluation.create({"t": math.nan}, {"x": 0.5}, {"y": 1.0})
    store.append("nan", record)
    assert store.evaluations("nan", EvaluationQuery(task={"t": (None, 5.0)})) == []
    assert store.evaluations("nan", EvaluationQuery(task={"t": (-math.inf, math.inf)})) == []
    assert [r.uid for r in store.evaluations("nan")] == [record.uid]
