"""The trial lifecycle a TuningSession owns for every face (issue 18, item 1), on real stores.

Durable asks (the ledger holds a trial when ``ask`` returns; a refused write is saved by the retry),
idempotent asks and tells by trial id, conflicts, the budget (WAIT, then FINISHED), what a result becomes
(an unknown output name refused with nothing written, a missing objective a failed record), and a
resumed session adopting its asked-not-told trials — on a JsonStore and, where it says so, a MongoStore.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from record_helpers import provenance

from raytuner.engines import RandomSearch
from raytuner.engines.base import Suggestion
from raytuner.errors import AwaitingResults, InvalidInputError, StoreError, TrialConflict, TuningFinished, UnknownTrial
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import Trial, TuningSession
from raytuner.store import HistoryStore, JsonLedger, JsonStore, open_store
from raytuner.test_problems import DEMO_PROBLEM

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 2.0}]
NAME = "lifecycle"


def session_on(store: HistoryStore, **options: Any) -> TuningSession:
    return TuningSession(PROBLEM, RandomSearch(PROBLEM, TASKS, seed=11), store, NAME, **options)


def resumed_on(store: HistoryStore, session_id: str, **options: Any) -> TuningSession:
    return TuningSession.resume(
        PROBLEM, RandomSearch(PROBLEM, TASKS, seed=11), store, NAME, session_id=session_id, **options
    )


def y(trial: Trial) -> dict[str, float]:
    return {"y": (trial.config["x"] - 0.1 * trial.task["t"]) ** 2}


class FlakyLedger(JsonLedger):
    """A JSON ledger whose next ``fail`` appends raise, as a full disk would."""

    fail = 0

    def append(self, name: str, document: dict[str, Any]) -> None:
        if self.fail:
            self.fail -= 1
            raise StoreError("disk full")
        super().append(name, document)


class ThreeTrials(RandomSearch):
    """Random search whose plan is three trials: the fourth ask is ``TuningFinished``."""

    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        self.asked = getattr(self, "asked", 0) + 1
        if self.asked > 3:
            raise TuningFinished("three trials is the plan")
        return super().ask(task)


def test_an_ask_is_in_the_ledger_when_it_returns(store: HistoryStore) -> None:
    session = session_on(store)
    trial = session.ask()
    documents = list(open_store(store).ledger().read("trials", session_id=session.session_id))
    assert [d["trial_id"] for d in documents] == [trial.trial_id]
    assert Trial.from_document(documents[0]) == trial
    assert trial.provenance.session_id == session.session_id and trial.provenance.trial_id == trial.trial_id


def test_reading_a_ledger_writes_nothing(tmp_path: Path) -> None:
    ledger = JsonStore(tmp_path / "store").ledger()
    assert list(ledger.read("trials")) == [] and list(ledger.read("sessions", session_id="s")) == []
    assert not (tmp_path / "store").exists()
    with pytest.raises(InvalidInputError, match="log"):
        list(ledger.read("catalog"))


def test_a_mongo_ledger_reads_without_writing_and_keeps_the_collection_names(mongo_store: Any) -> None:
    ledger = mongo_store.ledger()
    assert list(ledger.read("trials")) == []
    database = mongo_store.func_eval.database
    assert database.list_collection_names() == []  # no collection, no index made
    # the first append makes the indexes (and so the collections) under the first release's names
    ledger.append("keys", {"key_id": "k1"})
    assert [d["key_id"] for d in ledger.read("keys")] == ["k1"]
    assert sorted(database.list_collection_names()) == [
        "service_keys",
        "service_session_evaluations",
        "service_sessions",
        "service_trials",
    ]


def test_asking_with_a_trial_id_is_idempotent_and_a_told_one_conflicts(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    session = session_on(store)
    first = session.ask(trial_id="job-1")
    assert session.ask(trial_id="job-1") is first
    assert [d["trial_id"] for d in store.ledger().read("trials")] == ["job-1"]  # logged once
    session.tell("job-1", y(first))
    with pytest.raises(TrialConflict, match="trial_id"):
        session.ask(trial_id="job-1")


def test_a_tell_is_idempotent_by_trial_id(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    session = session_on(store)
    trial, failing = session.ask(), session.ask()
    assert session.told_record(trial.trial_id) is None
    record = session.tell(trial, y(trial))
    assert session.tell(trial.trial_id, y(trial)) is record  # a retry
    assert session.told_record(trial.trial_id) is record
    with pytest.raises(TrialConflict, match="another result"):
        session.tell(trial, {"y": y(trial)["y"] + 1.0})
    with pytest.raises(TrialConflict):
        session.tell(trial, failure="segfault")
    failed = session.tell(failing, failure="segfault")
    assert session.tell(failing, failure="segfault") is failed and failed.status == "failed"
    with pytest.raises(UnknownTrial, match="trial_id"):
        session.tell("never-asked", {"y": 1.0})
    assert [r.uid for r in store.evaluations(NAME)] == [record.uid, failed.uid]
    assert session.told_count == 2 and not session.pending


def test_a_refused_ledger_write_is_saved_by_the_retry_and_never_handed_out_before(tmp_path: Path) -> None:
    ledger = FlakyLedger(tmp_path)
    session = session_on(JsonStore(tmp_path), ledger=ledger)
    ledger.fail = 1
    with pytest.raises(StoreError):
        session.ask(trial_id="job-1")
    assert list(ledger.read("trials")) == []
    trial = session.ask(trial_id="job-1")  # the retry
    assert [d["trial_id"] for d in ledger.read("trials")] == ["job-1"]
    assert set(session.pending) == {"job-1"} and session.ask(trial_id="job-1") is trial


def test_a_refused_ledger_write_without_a_trial_id_is_handed_out_by_the_next_ask(tmp_path: Path) -> None:
    """No trial is stranded: the next ask (any id) saves the refused trial and hands it out first."""
    ledger = FlakyLedger(tmp_path)
    session = session_on(JsonStore(tmp_path), ledger=ledger, max_evaluations=1)
    ledger.fail = 1
    with pytest.raises(StoreError):
        session.ask()
    trial = session.ask()
    assert [d["trial_id"] for d in ledger.read("trials")] == [trial.trial_id] and list(session.pending) == [
        trial.trial_id
    ]
    session.tell(trial, {"y": 1.0})
    assert session.finished


def test_the_budget_waits_for_the_trials_in_flight_then_finishes(tmp_path: Path) -> None:
    session = session_on(JsonStore(tmp_path), max_evaluations=2)
    a, b = session.ask(), session.ask()
    with pytest.raises(AwaitingResults):
        session.ask()
    session.tell(a, y(a))
    with pytest.raises(AwaitingResults):
        session.ask()  # one told and one in flight fill the budget
    assert not session.finished
    session.tell(b, y(b))
    assert session.finished
    with pytest.raises(TuningFinished):
        session.ask()
    with pytest.raises(InvalidInputError, match="max_evaluations"):
        session_on(JsonStore(tmp_path), max_evaluations=-1)


def test_an_engine_that_finishes_waits_for_the_trials_in_flight(tmp_path: Path) -> None:
    from ray.tune.search import Searcher  # the Ray face's answers
    from raytuner.searchers.common import ask_for_ray

    session = TuningSession(PROBLEM, ThreeTrials(PROBLEM, TASKS, seed=11), JsonStore(tmp_path), NAME)
    trials = [ask_for_ray(session, f"ray-{i}") for i in range(3)]
    assert all(isinstance(t, Trial) for t in trials)
    assert ask_for_ray(session, "ray-3") is None  # the plan is done; three trials in flight
    for trial in trials[:2]:
        session.tell(trial, y(trial))
    assert ask_for_ray(session, "ray-4") is None and not session.finished
    session.tell(trials[2], y(trials[2]))
    assert session.finished and ask_for_ray(session, "ray-5") == Searcher.FINISHED


def test_an_unknown_output_is_refused_with_nothing_written(tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    session = session_on(store)
    trial = session.ask()
    with pytest.raises(InvalidInputError) as info:
        session.tell(trial, {"y": 0.5, "z": 1.0})
    assert info.value.field == "outputs['z']" and info.value.allowed == ["y"]
    assert store.evaluations(NAME) == [] and set(session.pending) == {trial.trial_id}
    assert session.tell(trial, {"y": 0.5}).status == "ok"  # told once, as asked


def test_a_missing_objective_is_a_failed_record_that_says_which(tmp_path: Path) -> None:
    two = ProblemSpace.parse({**DEMO_PROBLEM, "output_space": [{"name": "y"}, {"name": "z"}]})
    store = JsonStore(tmp_path)
    session = TuningSession(two, RandomSearch(two, TASKS, seed=11), store, NAME)
    trial = session.ask()
    record = session.tell(trial, {"y": 0.5})
    assert (
        record.status == "failed"
        and provenance(record).failure_message == "output 'z' missing from the reported result"
    )
    assert session.tell(trial, {"y": 0.5}) is record  # the same result again
    assert store.evaluations(NAME) == [record]


def test_resume_adopts_the_asked_not_told_trials(store: HistoryStore) -> None:
    first = session_on(store)
    told, in_flight = first.ask(), first.ask()
    record = first.tell(told, y(told))
    sid = first.session_id
    del first  # the process is gone; the store and ledger stay

    resumed = resumed_on(store, sid)
    assert set(resumed.pending) == {in_flight.trial_id}
    assert resumed.pending[in_flight.trial_id] == in_flight
    assert resumed.told_record(told.trial_id) == record and resumed.records == [record]
    assert resumed.tell(told, y(told)).uid == record.uid  # a retry after the restart
    with pytest.raises(TrialConflict):
        resumed.ask(trial_id=told.trial_id)
    later = resumed.tell(in_flight.trial_id, y(in_flight))
    assert provenance(later).session_id == sid and later.tuning_parameter == in_flight.config
    assert [r.uid for r in store.evaluations(NAME)] == [record.uid, later.uid]
    assert [t.trial_id for t in resumed.asked_trials()] == [told.trial_id, in_flight.trial_id]
    other = resumed_on(store, "another-session")  # another session adopts nothing of it
    assert not other.pending and other.told_count == 0 and len(other.records) == 2


def test_a_budget_counts_the_trials_of_the_resumed_session(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    first = session_on(store, max_evaluations=2)
    a, b = first.ask(), first.ask()
    first.tell(a, y(a))
    resumed = resumed_on(store, first.session_id, max_evaluations=2)
    with pytest.raises(AwaitingResults):
        resumed.ask()
    resumed.tell(b, y(b))
    with pytest.raises(TuningFinished):
        resumed.ask()


def test_a_session_travels_pickled_and_gets_its_ledger_back(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    session = session_on(store)
    session.ask()
    copy = pickle.loads(pickle.dumps(session))
    trial = copy.ask()
    assert len(list(store.ledger().read("trials"))) == 2 and trial.trial_id in copy.pending


def test_open_store_takes_a_store_as_it_is(tmp_path: Path) -> None:
    store = JsonStore(tmp_path)
    assert open_store(store) is store
    assert isinstance(open_store(tmp_path), JsonStore)


def test_a_given_configuration_is_a_trial_in_the_ledger_the_engine_learns(store: HistoryStore) -> None:
    session = session_on(store, max_evaluations=3)
    with pytest.raises(InvalidInputError, match=r"points_to_evaluate\[0\]\.x") as bad:
        session.give({"t": 1.0}, {"x": 7.0}, field="points_to_evaluate[0]")
    assert "\n" not in str(bad.value)
    with pytest.raises(InvalidInputError, match=r"points_to_evaluate\[1\]"):  # not one of the engine's tasks
        session.give({"t": 1.5}, {"x": 0.5}, field="points_to_evaluate[1]")
    assert not list(store.ledger().read("trials", session_id=session.session_id))  # refused: nothing stored

    given = session.give({"t": 2.0}, {"x": 0.25}, trial_id="g", point=0)
    assert session.give({"t": 2.0}, {"x": 0.25}, trial_id="g") == given  # a retry returns the trial
    assert (given.task, given.config, given.provenance.proposer) == ({"t": 2.0}, {"x": 0.25}, "given")
    (document,) = store.ledger().read("trials", session_id=session.session_id)
    assert Trial.from_document(document) == given and given.provenance.model_extra == {"point": 0}
    assert isinstance(session.engine, RandomSearch) and session.engine._pending == [
        0,
        1,
    ]  # the engine counts it in flight on its task

    record = session.tell(given, y(given))
    assert provenance(record).proposer == "given" and record.tuning_parameter == {"x": 0.25}
    assert session.engine._pending == [0, 0] and session.records == [record]
    asked = session.ask()  # the engine goes on with its own, the given one counted in the budget
    assert asked.provenance.proposer != "given"
    session.ask()
    with pytest.raises(AwaitingResults):
        session.give({"t": 1.0}, {"x": 0.5})
