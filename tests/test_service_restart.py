"""A restarted server listens at once and rebuilds its sessions behind; clients wait out a restart; per-key limits.

Real servers on loopback over stores written directly through the store and
its ledger (as many sessions and records as a restart test needs, in seconds).
"""

from __future__ import annotations

import random
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from record_helpers import known

from raytuner.client.remote import RemoteTuner, ServiceError
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.protocol import METADATA_KEY
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.auth import ApiKeys
from raytuner.service.server import TuningServer
from raytuner.service.sessions import SessionManager
from raytuner.session.trial import Trial
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM

SESSIONS, RECORDS, IN_FLIGHT, PROBLEMS = 40, 30, 2, 4


def build_store(
    directory: Path,
    owner: str,
    sessions: int = SESSIONS,
    records: int = RECORDS,
    in_flight: int = IN_FLIGHT,
    problems: int = PROBLEMS,
) -> list[str]:
    """Sessions of ``owner`` with ``records`` told trials and ``in_flight`` untold ones each, written directly."""
    store = JsonStore(directory)
    manager = SessionManager(store)
    rng = random.Random(7)
    ids = []
    for s in range(sessions):
        meta: dict[str, Any] = {"tuning_problem_name": f"restart{s % problems}", "problem_space": DEMO_PROBLEM}
        task = {"t": float(s % 7 + 1)}
        session_id = manager.create(owner, meta, "random", tasks=[task], seed=s + 1).session_id
        told = []
        for i in range(records + in_flight):
            provenance = Provenance(session_id=session_id, trial_id=f"t{i}", engine="random", proposer="random")
            trial = Trial(task=task, config={"x": rng.random()}, provenance=provenance, trial_id=f"t{i}")
            manager.ledger.append("trials", trial.document(session_id))
            if i < records:
                told.append(
                    FunctionEvaluation.create(
                        task,
                        trial.config,
                        {"y": trial.config["x"] ** 2},
                        provenance=provenance,
                        outputs=["y"],
                        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"raytuner:{session_id}/t{i}")),
                    )
                )
        store.append_many(meta["tuning_problem_name"], told)
        ids.append(session_id)
    store.close()
    return ids


class GatedStore(JsonStore):
    """A JSON store whose reads of evaluations wait for ``gate`` (so no session is rebuilt until it opens)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.gate = threading.Event()

    def evaluations(self, problem: str, query: Any = None) -> list[FunctionEvaluation]:
        assert self.gate.wait(60), "the gate was never opened"
        return super().evaluations(problem, query)


def _stub(address: str) -> tuple[grpc.Channel, pb_grpc.TuningServiceStub]:
    channel = grpc.insecure_channel(address)
    return channel, pb_grpc.TuningServiceStub(channel)


def test_port_opens_at_once_and_a_session_not_rebuilt_yet_waits_for_its_rebuild(tmp_path: Path) -> None:
    keys = ApiKeys(JsonStore(tmp_path).ledger())
    key = keys.create("alice")
    owner = known(keys.verify(key)).key_id
    ids = build_store(tmp_path, owner)
    store = GatedStore(tmp_path)
    server = TuningServer(store, port=0)
    started = time.monotonic()
    port = server.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            opened = time.monotonic() - started
        assert opened <= 2.0, f"port open {opened:.2f} s after start"
        assert server.manager.session_ids() == set(ids)  # known at once
        assert not server.manager._sessions  # none rebuilt: the gate is shut
        with RemoteTuner(server.address, key, session_id=ids[-1], timeout=60) as client:
            with ThreadPoolExecutor(1) as pool:
                answer = pool.submit(client.session)  # a session not rebuilt yet
                store.gate.set()
                session = answer.result(60)
            assert (session["evaluations"], session["pending"]) == (RECORDS, IN_FLIGHT)
            listed = client.sessions()
            assert sorted(s["session_id"] for s in listed) == sorted(ids)
            assert all(s["evaluations"] == RECORDS and s["pending"] == IN_FLIGHT for s in listed)
            assert client.tell(f"t{RECORDS}", {"y": 0.5}).duplicate is False  # a trial in flight, adopted
    finally:
        server.stop(grace=0)


def test_a_session_that_cannot_be_rebuilt_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keys = ApiKeys(JsonStore(tmp_path).ledger())
    key = keys.create("alice")
    owner = known(keys.verify(key)).key_id
    good = build_store(tmp_path, owner, sessions=2, records=3, problems=1)
    broken = dict(next(JsonStore(tmp_path).ledger().read("sessions")), session_id="broken", engine="nonesuch")
    JsonStore(tmp_path).ledger().append("sessions", broken)
    server = TuningServer(tmp_path, port=0)
    server.start()
    try:
        with RemoteTuner(server.address, key, timeout=30) as client:
            assert sorted(s["session_id"] for s in client.sessions()) == sorted(good)
            with pytest.raises(ServiceError) as info:
                client.session("broken")
            assert info.value.code == "NOT_FOUND"  # after its rebuild failed (or while it fails)
    finally:
        server.stop(grace=0)
    assert "cannot rebuild session broken" in caplog.text


def test_the_default_client_waits_out_a_server_restart(tmp_path: Path, reserved_port: int) -> None:
    server = TuningServer(tmp_path, port=reserved_port)
    server.start()
    key = server.keys.create("alice")
    restarted = TuningServer(tmp_path, port=reserved_port)
    with RemoteTuner(server.address, key, timeout=5) as client:  # default retries: a time window
        client.create_session(
            {"tuning_problem_name": "outage", "problem_space": DEMO_PROBLEM},
            "random",
            tasks=[{"t": 1.0}],
            max_evaluations=3,
        )
        trial = client.ask()
        assert trial is not None
        server.stop(grace=0)
        timer = threading.Timer(4.0, restarted.start)  # a 4 s outage
        timer.start()
        try:
            started = time.monotonic()
            told = client.tell(trial, {"y": 0.25})  # retried until the server is back
            waited = time.monotonic() - started
            assert not told.duplicate and waited >= 3.0
            again = client.ask(trial_id="after-outage")
            assert again is not None and client.ask(trial_id="after-outage") == again  # a retried ask: same trial
            assert client.session()["evaluations"] == 1
        finally:
            timer.join()
            restarted.stop(grace=0)


def test_one_keys_watch_streams_leave_room_for_another_keys_ask(tmp_path: Path) -> None:
    server = TuningServer(tmp_path, port=0)  # 64 threads: 16 streams a key
    server.start()
    channel, stub = _stub(server.address)
    calls: list[Any] = []
    try:
        sessions = {}
        for name in ("mallory", "bob"):  # a problem each: only owners tune it
            meta = {"tuning_problem_name": f"crowded-{name}", "problem_space": DEMO_PROBLEM}
            key = server.keys.create(name)
            with RemoteTuner(server.address, key, timeout=30) as client:
                client.create_session(meta, "random", tasks=[{"t": 1.0}])
                assert client.ask() is not None  # an event a watcher gets at once
                sessions[name] = (key, client.session_id)
        key, session_id = sessions["mallory"]
        request = pb.WatchSessionRequest(session_id=session_id, from_start=True)
        calls = [stub.WatchSession(request, metadata=((METADATA_KEY, key),)) for _ in range(64)]
        watching = refused = 0
        for call in calls:
            try:
                next(call)
                watching += 1
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "\n" not in exc.details()
                refused += 1
        assert (watching, refused) == (16, 48)
        key, session_id = sessions["bob"]
        started = time.monotonic()
        answer = stub.Ask(
            pb.AskRequest(session_id=session_id, trial_id="bob-1"), timeout=10, metadata=((METADATA_KEY, key),)
        )
        took = time.monotonic() - started
        assert answer.status == pb.AskResponse.TRIAL, took
        print(f"another key's Ask beside 64 watch streams: {took * 1000:.0f} ms")
    finally:
        for call in calls:
            call.cancel()
        channel.close()
        server.stop(grace=0)


def test_two_keys_at_their_limits_leave_room_for_a_third_keys_first_call(tmp_path: Path) -> None:
    server = TuningServer(tmp_path, port=0, max_workers=8, max_streams_per_key=4)  # 6 threads shared, 2 kept
    server.start()
    channel, stub = _stub(server.address)
    calls: list[Any] = []
    try:
        sessions = {}
        for name in ("mallory", "trudy", "carol"):
            meta = {"tuning_problem_name": f"busy-{name}", "problem_space": DEMO_PROBLEM}
            key = server.keys.create(name)
            with RemoteTuner(server.address, key, timeout=30) as client:
                client.create_session(meta, "random", tasks=[{"t": 1.0}])
                assert client.ask() is not None
                sessions[name] = (key, client.session_id)
        watching = {}
        for name in ("mallory", "trudy"):
            key, session_id = sessions[name]
            request = pb.WatchSessionRequest(session_id=session_id, from_start=True)
            opened = [stub.WatchSession(request, metadata=((METADATA_KEY, key),)) for _ in range(4)]
            calls += opened
            watching[name] = 0
            for call in opened:
                try:
                    next(call)
                    watching[name] += 1
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert watching == {"mallory": 4, "trudy": 2}  # trudy stops where the shared part ends
        key, session_id = sessions["carol"]
        answer = stub.Ask(
            pb.AskRequest(session_id=session_id, trial_id="carol-1"), timeout=10, metadata=((METADATA_KEY, key),)
        )
        assert answer.status == pb.AskResponse.TRIAL
    finally:
        for call in calls:
            call.cancel()
        channel.close()
        server.stop()


def test_limits_are_checked(tmp_path: Path) -> None:
    from raytuner.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="max_streams_per_key"):
        TuningServer(tmp_path, port=0, max_streams_per_key=-1)
