"""A MongoDB store unreachable for longer than the server's lease pauses the server; it does not stop it.

A real ``mongod`` of the test's own, on a port held for the test, is stopped and started again on the same
data; leases here last 3 s (renewed every 0.6 s), so an outage longer than a lease takes a few seconds. While
the lease is paused the server refuses every call of the tuning service with ``UNAVAILABLE`` before its
handler runs (clients retry); once the database answers, the lease is taken back when its document still
carries its token, and the server serves on, on the same port. A document another server took, or took and
released, meanwhile means the lease is lost: the server stops. Waits poll conditions with generous deadlines.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from record_helpers import known
from test_service_leases import until

from raytuner.client.remote import RemoteTuner, ServiceError, TellResult
from raytuner.service.pause import PAUSED_MESSAGE
from raytuner.service.server import TuningServer
from raytuner.store.mongo_store import MongoStore
from raytuner.store.server_lock import LEASE_COLLECTION, MongoServerLease
from raytuner.test_problems import DEMO_PROBLEM
from raytuner.testing.mongod import LocalMongod, find_mongod

TTL = 3.0
WAIT_S = 120.0  # bounds a wait that never ends (2 shared cores); each takes seconds
META = {"tuning_problem_name": "outage", "problem_space": DEMO_PROBLEM}


@pytest.fixture
def mongod(tmp_path: Path, reserved_port: int) -> Iterator[LocalMongod]:
    """A mongod of this test's own that it may stop and start again (same port, same data)."""
    find_mongod()
    server = LocalMongod(dbpath=tmp_path / "db", port=reserved_port).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def store(mongod: LocalMongod) -> Iterator[MongoStore]:
    with MongoStore(mongod.uri, database="outage") as opened:
        yield opened


def _lease(store: MongoStore, lost: list[str]) -> MongoServerLease:
    lease = store.server_lock(on_lost=lost.append, ttl=TTL)
    lease.acquire()
    return lease


class Gate:
    """A lease's collection whose calls wait while the gate is closed: :meth:`close` returns once none is under way."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._open = True
        self._busy = 0
        self._changed = threading.Condition()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.collection, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._changed:
                self._changed.wait_for(lambda: self._open)
                self._busy += 1
            try:
                return method(*args, **kwargs)
            finally:
                with self._changed:
                    self._busy -= 1
                    self._changed.notify_all()

        return call

    def close(self) -> None:
        with self._changed:
            self._open = False
            assert self._changed.wait_for(lambda: self._busy == 0, WAIT_S), "a call never ended"

    def open(self) -> None:
        with self._changed:
            self._open = True
            self._changed.notify_all()


def _outage_past_the_lease(mongod: LocalMongod, paused: Any) -> None:
    """Stop ``mongod`` until ``paused()`` and a whole lease longer: the lease has run out by any clock."""
    mongod.stop()
    until(paused, WAIT_S)
    time.sleep(TTL)  # lengthens the outage only: nothing races it


def test_a_lease_outlives_an_outage_longer_than_itself_and_is_held_again(
    mongod: LocalMongod, store: MongoStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="raytuner.store.server_lock")
    lost: list[str] = []
    lease = _lease(store, lost)
    try:
        _outage_past_the_lease(mongod, lambda: lease.paused)
        mongod.start()
        until(lambda: not lease.paused, WAIT_S)
        assert lost == []
        assert known(store.func_eval.database[LEASE_COLLECTION].find_one())["token"] == lease.token
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("serving paused until the database answers again" in w for w in warnings), warnings
        assert any("renewed after a pause of" in w and "serving again" in w for w in warnings), warnings
    finally:
        lease.release()
    assert store.func_eval.database[LEASE_COLLECTION].count_documents({}) == 0


@pytest.mark.parametrize("released", [False, True], ids=["taken", "taken-and-released"])
def test_a_lease_another_server_took_during_the_outage_is_lost(
    mongod: LocalMongod, store: MongoStore, released: bool
) -> None:
    lost: list[str] = []
    lease = store.server_lock(on_lost=lost.append, ttl=TTL)
    lease.collection = gate = Gate(lease.collection)
    lease.acquire()
    try:
        _outage_past_the_lease(mongod, lambda: lease.paused)
        gate.close()  # the first server reaches the database only once the other is done
        mongod.start()
        other = store.server_lock(ttl=TTL)
        other.acquire()  # its lease ran out by the database's clock: taken
        if released:
            other.release()
        gate.open()
        until(lambda: lost, WAIT_S)
        assert lease.paused  # and it stays so
        expected = "document is gone during a pause of" if released else "was taken by another server (host"
        assert len(lost) == 1 and expected in lost[0] and lost[0].endswith("; stopping"), lost
        if not released:
            assert known(store.func_eval.database[LEASE_COLLECTION].find_one())["token"] == other.token
            other.release()
    finally:
        gate.open()
        lease.release()


def test_a_server_refuses_calls_while_its_lease_is_paused_and_serves_again_after(
    mongod: LocalMongod, store: MongoStore
) -> None:
    """A tell during the outage is refused before anything is written, and acknowledged once after it."""
    server = TuningServer(store, port=0, auth=False, server_lease_ttl=TTL)
    port = server.start()
    told: list[TellResult] = []
    errors: list[BaseException] = []
    try:
        with RemoteTuner(server.address, timeout=30) as tuner, RemoteTuner(server.address, retries=0) as once:
            session_id = tuner.create_session(META, "random", tasks=[{"t": 1.0}], seed=1, max_evaluations=4)
            once.session_id = session_id
            trial = until(lambda: tuner.ask(wait=False), WAIT_S)
            _outage_past_the_lease(mongod, lambda: server.paused)
            for call in (lambda: once.tell(trial, {"y": 1.0}), once.session, lambda: next(once.watch(True))):
                with pytest.raises(ServiceError) as refused:
                    call()
                assert refused.value.code == "UNAVAILABLE" and refused.value.message.startswith(PAUSED_MESSAGE)

            def tell() -> None:  # retried while refused, as a job does
                try:
                    told.append(tuner.tell(trial, {"y": 1.0}))
                except BaseException as exc:  # the test reports it
                    errors.append(exc)

            teller = threading.Thread(target=tell)
            teller.start()
            mongod.start()
            teller.join(WAIT_S)
            assert not teller.is_alive() and errors == []
            # served again (the tell was answered); the lease's renewals after the restart may fall behind
            # once more on a busy machine and pause it for a moment (by design), so its state is waited for
            assert server.lost is None and server.port == port
            until(lambda: not server.paused, WAIT_S)
            assert len(told) == 1 and not told[0].duplicate  # the refused tells wrote nothing
            assert once.tell(trial, {"y": 1.0}) == TellResult(told[0].uid, True, False)  # told once
            assert tuner.session()["evaluations"] == 1
        assert [r.uid for r in store.evaluations("outage")] == [told[0].uid]
    finally:
        server.stop(grace=0)
