"""MongoDB on a replica set: batches in one transaction, and kill -9 of mongod under load loses no acknowledged tell.

The server is a real single-node replica set (:class:`LocalMongod` with
``replica_set``), started with ``enableTestCommands`` so that a test can make
the server fail a command (``configureFailPoint``, ``failCommand``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
from test_service_reliability import PROBLEM, PROGRESS_S, Load, check_exactly_once, start_server, start_sessions

from benchmarks.server_process import ServerProcess
from raytuner.errors import StoreError
from raytuner.problem.records import FunctionEvaluation, Provenance, SurrogateModelRecord
from raytuner.store.mongo_store import MongoStore
from raytuner.testing.mongod import LocalMongod, find_mongod

#: kill -9 restarts of mongod in the load test (``RAYTUNER_MONGOD_KILLS`` sets more, for a longer run).
KILLS = int(os.environ.get("RAYTUNER_MONGOD_KILLS", "3"))


def evaluation(i: float, y: float = 1.0) -> FunctionEvaluation:
    return FunctionEvaluation.create({"t": float(i)}, {"x": 0.5}, {"y": y}, provenance=Provenance(engine="test"))


def model(i: int) -> SurrogateModelRecord:
    return SurrogateModelRecord.model_validate(
        {"uid": f"model-{i}", "task_parameters": [[float(i)]], "hyperparameters": [1.0], "model_stats": {}}
    )


@contextlib.contextmanager
def failing(server: LocalMongod, mode: Any, **data: Any) -> Iterator[None]:
    """The server fails the store's commands (``failCommand``, for clients named ``raytuner``) as ``data`` says.

    The block must have met the failure at least once.
    """
    with pymongo.MongoClient[dict[str, Any]](server.uri) as admin:
        admin.admin.command("configureFailPoint", "failCommand", mode=mode, data={"appName": "raytuner", **data})
        try:
            yield
        finally:
            met = admin.admin.command("configureFailPoint", "failCommand", mode="off")["count"]
        assert met >= 1, "the failure was never met"


def stored_uids(store: MongoStore, problem: str) -> Counter[str]:
    """How many documents of ``problem`` carry each uid (a uid stored twice counts 2)."""
    return Counter(d["uid"] for d in store.func_eval.find({"tuning_problem_name": problem}, {"uid": 1}))


def test_local_mongod_runs_a_replica_set_that_a_restart_keeps(tmp_path: Path, reserved_port: int) -> None:
    server = LocalMongod(dbpath=tmp_path / "db", replica_set="rs1")
    with server, MongoStore(server.uri) as store:
        assert store.transactions
        store.append_many("demo", [evaluation(i) for i in range(3)])
        first_port = server.port
    # again on the same data, on another port: the member moves there and is primary again
    with LocalMongod(dbpath=tmp_path / "db", port=reserved_port, replica_set="rs1") as again:
        assert again.port != first_port
        with pymongo.MongoClient[dict[str, Any]](again.uri) as client:
            hello = client.admin.command("hello")
            assert hello["setName"] == "rs1" and hello["isWritablePrimary"]
            assert hello["hosts"] == [f"127.0.0.1:{reserved_port}"]
        with MongoStore(again.uri) as store:
            assert len(store.evaluations("demo")) == 3
            store.append("demo", evaluation(4))
    with (
        LocalMongod(dbpath=tmp_path / "db", port=reserved_port, replica_set="rs1") as third,
        MongoStore(third.uri) as store,
    ):  # the same port: nothing to move
        assert len(store.evaluations("demo")) == 4


def test_writes_on_a_replica_set_wait_for_the_majority(replica_store: MongoStore, mongo_store: MongoStore) -> None:
    assert replica_store.transactions and not mongo_store.transactions
    for collection in (replica_store.func_eval, replica_store.surrogate_model):
        assert collection.write_concern.document == {"w": "majority", "j": True}
    ledger = replica_store.ledger()
    ledger.append("trials", {"session_id": "s", "trial_id": "t"})
    assert list(ledger.read("trials")) == [{"session_id": "s", "trial_id": "t"}]


def test_a_batch_in_a_transaction_skips_stored_uids(replica_store: MongoStore) -> None:
    records = [evaluation(i) for i in range(8)]
    replica_store.append("demo", records[2])
    replica_store.append_many("demo", [*records[:5], records[1]])  # one stored before, one given twice
    replica_store.append_batch("demo", records[3:], [model(1), model(2)])
    replica_store.append_batch("demo", records, [model(2)])  # all stored: a no-op
    assert replica_store.evaluations("demo") == [records[2], records[0], records[1], *records[3:]]
    assert [m.uid for m in replica_store.models("demo")] == ["model-1", "model-2"]
    assert max(stored_uids(replica_store, "demo").values()) == 1


@pytest.mark.parametrize("server", ["replica set", "standalone"])
def test_a_batch_with_a_failing_last_document(server: str, request: pytest.FixtureRequest) -> None:
    """On a replica set nothing of the batch is written; on a standalone server the rest is (documented)."""
    store: MongoStore = request.getfixturevalue("replica_store" if server == "replica set" else "mongo_store")
    store.append("demo", evaluation(0))  # makes the collection
    store.client[store.database].command("collMod", "func_eval", validator={"evaluation_result.y": {"$ne": -1.0}})
    batch = [evaluation(1), evaluation(2), evaluation(3, y=-1.0)]
    with pytest.raises(StoreError) as info:
        store.append_many("demo", batch)
    assert "append to 'demo'" in str(info.value)
    stored = [r.uid for r in store.evaluations("demo")]
    assert stored[1:] == ([] if server == "replica set" else [batch[0].uid, batch[1].uid])


def test_models_and_evaluations_are_one_transaction(replica_store: MongoStore, mongod_replica: LocalMongod) -> None:
    """The models' insert succeeds, the evaluations' insert fails: the models are not kept either."""
    with failing(mongod_replica, {"skip": 1}, failCommands=["insert"], errorCode=2), pytest.raises(StoreError):
        replica_store.append_batch("demo", [evaluation(1)], [model(1)])
    assert replica_store.models("demo") == [] and replica_store.evaluations("demo") == []


@pytest.mark.parametrize(
    "command, failure",
    [
        ("insert", {"errorCode": 112, "errorLabels": ["TransientTransactionError"]}),  # a write conflict
        ("insert", {"closeConnection": True}),  # the connection is lost
        ("commitTransaction", {"closeConnection": True}),  # ... at the commit
    ],
)
def test_a_transaction_cut_off_is_retried_once_written(
    replica_store: MongoStore, mongod_replica: LocalMongod, command: str, failure: dict[str, Any]
) -> None:
    records = [evaluation(i) for i in range(4)]
    replica_store.append("demo", records[0])  # indexes made, outside the failpoint
    with failing(mongod_replica, {"times": 1}, failCommands=[command], **failure):
        replica_store.append_batch("demo", records, [model(1)])
    assert replica_store.evaluations("demo") == records
    assert [m.uid for m in replica_store.models("demo")] == ["model-1"]


def test_a_single_append_cut_off_is_retried_once_written(
    replica_store: MongoStore, mongod_replica: LocalMongod
) -> None:
    record = evaluation(1)
    replica_store.append("demo", evaluation(0))
    with failing(mongod_replica, {"times": 1}, failCommands=["insert"], closeConnection=True):
        replica_store.append("demo", record)  # a retryable write: retried once
    assert [r.uid for r in replica_store.evaluations("demo")][1:] == [record.uid]


class Writer:
    """A thread appending to ``problem`` through a :class:`MongoStore` (batches of ``size``: append_batch).

    A write that fails is repeated until acknowledged, as a client would; ``acked`` lists what was.
    """

    def __init__(self, uri: str, problem: str, size: int) -> None:
        self.problem = problem
        self.acked: list[str] = []
        self.failures = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(uri, problem, size), daemon=True)
        self._thread.start()

    def _run(self, uri: str, problem: str, size: int) -> None:
        try:
            with MongoStore(uri, server_selection_timeout_ms=3000) as store:
                i = 0
                while not self._stop.is_set():
                    batch = [evaluation(i + k) for k in range(size)]
                    i += size
                    while True:
                        try:
                            if size == 1:
                                store.append(problem, batch[0])
                            else:
                                store.append_batch(problem, batch, [model(i)])
                            break
                        except StoreError:
                            self.failures += 1
                    self.acked += [r.uid for r in batch]
        except BaseException as exc:  # the test reports it
            self.errors.append(exc)

    def stop(self) -> None:
        """End after the write in progress is acknowledged."""
        self._stop.set()

    def finish(self) -> list[str]:
        self.stop()
        self._thread.join(PROGRESS_S)
        assert not self._thread.is_alive(), "a writer hung"
        assert not self.errors, f"a writer failed: {self.errors[0]!r}"
        return self.acked


def wait_for(progress: Any, seconds: float = PROGRESS_S) -> None:
    deadline = time.monotonic() + seconds
    while not progress():
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)


@pytest.mark.slow
def test_kill_9_of_mongod_under_load_loses_no_acknowledged_write(
    tmp_path: Path, reserved_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Tells through a TuningServer and appends through MongoStores while a replica set's mongod is killed -9."""
    find_mongod()
    caplog.set_level(logging.DEBUG, logger="pymongo.command")  # the writers' commands the kills cut off
    mongod = LocalMongod(dbpath=tmp_path / "db", port=reserved_port, replica_set="rs0").start()
    uri = f"{mongod.uri}/reliability"
    server: ServerProcess | None = None
    load: Load | None = None
    writers: list[Writer] = []
    try:
        server = start_server(uri, 0, tmp_path / "server.log", create_key=True)
        key, address = server.info["key"], f"127.0.0.1:{server.info['port']}"
        admin, sessions = start_sessions(address, key, 2)
        load = Load(address, key, sessions, 4, timeout=2.0)
        writers = [Writer(uri, "singles", 1), Writer(uri, "batches", 5)]
        for _ in range(KILLS):
            tells, appends = load.count(), [len(w.acked) for w in writers]
            load.wait_for(tells + 20, timeout=PROGRESS_S)
            wait_for(lambda before=appends: all(len(w.acked) > n for w, n in zip(writers, before)))
            assert mongod.pid is not None
            os.kill(mongod.pid, signal.SIGKILL)
            mongod.stop()  # reaps it; the data directory is kept
            mongod.start()
        load.wait_for(load.count() + 20, timeout=PROGRESS_S)
        acks = load.finish()
        load = None
        acked = {w: w.finish() for w in writers}
        views = [admin.session(s) for s in sessions]
        admin.close()
        assert [v["pending"] for v in views] == [0, 0], "a trial was lost (asked, never told)"
        with MongoStore(uri) as store:
            check_exactly_once(store.evaluations(PROBLEM), acks)
            for writer, uids in acked.items():
                stored = stored_uids(store, writer.problem)
                assert not set(uids) - set(stored), "an acknowledged append is missing"
                assert max(stored.values()) == 1, "a uid stored twice"
            models = len(store.models("batches"))
        print(
            f"\n{KILLS} kill -9 restarts: {len(acks)} tells, {sum(len(u) for u in acked.values())} appends "
            f"({models} batches) acknowledged, 0 lost, 0 duplicated; "
            f"{sum(w.failures for w in writers)} appends failed and were repeated; "
            f"{sum('Command failed' in r.getMessage() for r in caplog.records)} commands cut off"
        )
    finally:
        if load is not None:
            load.stop()
        for writer in writers:
            writer.stop()
        if server is not None:
            server.stop()
        mongod.stop()
