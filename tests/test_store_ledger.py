"""The store's trial ledger, the key registry and service sessions under faults: torn logs, refresh races,
refused writes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from raytuner.errors import StoreError
from raytuner.service.auth import ApiKeys
from raytuner.service.sessions import SessionManager
from raytuner.store import JsonLedger, JsonStore

META = {
    "tuning_problem_name": "cat_demo",
    "problem_space": {
        "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
        "output_space": [{"name": "y"}],
    },
}


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path: Path) -> None:
    ledger = JsonLedger(tmp_path)
    ledger.append("sessions", {"session_id": "s1"})
    ledger.close()
    path = tmp_path / ".service" / "sessions.jsonl"
    with open(path, "a", encoding="utf-8") as fh:  # a writer killed in the middle of a line
        fh.write('{"session_id": "s2", "probl')
    reopened = JsonLedger(tmp_path)
    assert [d["session_id"] for d in reopened.read("sessions")] == ["s1"]
    reopened.append("sessions", {"session_id": "s3"})
    assert [d["session_id"] for d in reopened.read("sessions")] == ["s1", "s3"]
    assert path.read_text(encoding="utf-8").count("\n") == 2


def test_a_line_that_is_not_json_is_skipped_not_fatal(tmp_path: Path) -> None:
    ledger = JsonLedger(tmp_path)
    ledger.append("keys", {"key_id": "a"})
    with open(tmp_path / ".service" / "keys.jsonl", "a", encoding="utf-8") as fh:
        fh.write("garbage\n")
    ledger.append("keys", {"key_id": "b"})
    assert [d["key_id"] for d in ledger.read("keys")] == ["a", "b"]


def test_valid_keys_stay_valid_while_other_threads_refresh(tmp_path: Path) -> None:
    keys = ApiKeys(JsonLedger(tmp_path))
    issued = [keys.create(f"user{i}") for i in range(20)]
    refused: list[str] = []
    stop = threading.Event()

    def refresher() -> None:
        while not stop.is_set():
            keys.refresh()

    def verifier() -> None:
        for _ in range(300):
            refused.extend(k for k in issued if keys.verify(k) is None)

    threads = [threading.Thread(target=refresher) for _ in range(2)]
    threads += [threading.Thread(target=verifier) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads[2:]:
        thread.join()
    stop.set()
    for thread in threads[:2]:
        thread.join()
    assert refused == []


class FlakyLedger(JsonLedger):
    """A JSON ledger whose next ``fail`` appends to the trials log raise, as a full disk would."""

    fail = 0

    def append(self, name: str, document: dict[str, Any]) -> None:
        if name == "trials" and self.fail:
            self.fail -= 1
            raise StoreError("disk full")
        super().append(name, document)


def test_a_trial_the_log_refused_is_saved_when_asked_again_and_survives_a_restart(tmp_path: Path) -> None:
    ledger = FlakyLedger(tmp_path)
    manager = SessionManager(JsonStore(tmp_path), ledger)
    session = manager.create("owner", META, "random", seed=3)
    ledger.fail = 1
    with pytest.raises(StoreError):
        manager.ask("owner", session.session_id, trial_id="job-1")
    assert list(ledger.read("trials")) == []  # nothing handed out, nothing logged
    status, trial = manager.ask("owner", session.session_id, trial_id="job-1")  # the client's retry
    assert status == "TRIAL" and trial is not None
    assert [d["trial_id"] for d in ledger.read("trials")] == ["job-1"]
    restarted = SessionManager(JsonStore(tmp_path), JsonLedger(tmp_path))
    restarted.load()
    again = restarted.ask("owner", session.session_id, trial_id="job-1")[1]
    assert again is not None and again.config == trial.config
    record, duplicate = restarted.tell("owner", session.session_id, "job-1", {"y": 0.25})
    assert not duplicate and record.value("y") == 0.25


class LostAckStore(JsonStore):
    """A JSON store whose next append writes the record and then raises, as a dropped MongoDB reply does."""

    lose = 0

    def append(self, problem: str, record: Any) -> None:
        super().append(problem, record)
        if self.lose:
            self.lose -= 1
            raise StoreError("connection reset after the write")


def test_a_tell_retried_after_a_lost_acknowledgement_is_stored_once(tmp_path: Path) -> None:
    store = LostAckStore(tmp_path)
    manager = SessionManager(store, JsonLedger(tmp_path))
    session = manager.create("owner", META, "random", seed=3)
    assert manager.ask("owner", session.session_id, trial_id="job-7")[1] is not None
    store.lose = 1
    with pytest.raises(StoreError):
        manager.tell("owner", session.session_id, "job-7", {"y": 1.0})
    record, duplicate = manager.tell("owner", session.session_id, "job-7", {"y": 1.0})  # the client's retry
    assert not duplicate
    assert [r.uid for r in store.evaluations("cat_demo")] == [record.uid]
