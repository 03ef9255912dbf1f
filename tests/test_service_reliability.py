"""The tuning service under failures, with real processes: kill -9 of the server, and a mongod restart, under load.

Clients are :class:`~raytuner.client.remote.RemoteTuner` objects in threads
(each with its own channel), retrying with backoff; each loops ask -> tell
and records every tell the service acknowledged. Afterwards the store must
hold every acknowledged tell exactly once (same uid, one record per trial
id), and the sessions must go on.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks.server_process import ServerProcess
from raytuner.client.remote import RemoteTrial, RemoteTuner
from raytuner.problem.records import FunctionEvaluation
from raytuner.store import JsonStore
from raytuner.store.mongo_store import MongoStore
from raytuner.test_problems import DEMO_PROBLEM, demo
from raytuner.testing.mongod import LocalMongod, find_mongod

pytestmark = pytest.mark.slow

PROBLEM = "svc_reliability"
META = {"tuning_problem_name": PROBLEM, "problem_space": DEMO_PROBLEM}
TASKS = [{"t": 1.0}, {"t": 2.0}]
#: How long the clients may go without one more tell acknowledged. They acknowledge several a second; the bound
#: only catches a service that stopped making progress, so it leaves room for a loaded machine.
PROGRESS_S = 120


def start_server(store: str, port: int, log_path: Path, create_key: bool = False) -> ServerProcess:
    """A TuningServer over ``store`` on ``port`` in a process of its own (its info has the key if created)."""
    args = ["raytuner", "--store", store, "--port", str(port), *(["--key-name", "reliability"] if create_key else [])]
    return ServerProcess(args, log_path, timeout=30)


@dataclass(frozen=True)
class Ack:
    session_id: str
    trial_id: str
    uid: str
    duplicate: bool
    asked_at: float


class Load:
    """``n`` client threads looping ask -> tell over ``sessions``, recording every acknowledged tell."""

    def __init__(self, address: str, key: str, sessions: list[str], n: int, timeout: float = 5.0) -> None:
        self.acks: list[Ack] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._client,
                name=f"load-{i}",
                daemon=True,
                args=(address, key, sessions[i % len(sessions)], timeout),
            )
            for i in range(n)
        ]
        for thread in self._threads:
            thread.start()

    def _client(self, address: str, key: str, session_id: str, timeout: float) -> None:
        tuner = RemoteTuner(address, key, session_id=session_id, timeout=timeout, retries=30, backoff=0.05)
        try:
            while not self._stop.is_set():
                asked_at = time.monotonic()
                trial = tuner.ask()
                assert trial is not None, "the session ended"
                told = tuner.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})
                with self._lock:
                    self.acks.append(Ack(session_id, trial.trial_id, told.uid, told.duplicate, asked_at))
        except BaseException as exc:  # the test reports it
            self.errors.append(exc)
        finally:
            tuner.close()

    def count(self) -> int:
        with self._lock:
            return len(self.acks)

    def wait_for(self, n: int, timeout: float) -> None:
        """Wait until ``n`` tells are acknowledged; fail when none is for ``timeout`` seconds (a stall, not load)."""
        seen, deadline = self.count(), time.monotonic() + timeout
        while seen < n and not self.errors:
            assert time.monotonic() < deadline, f"{seen} of {n} tells acknowledged, then none for {timeout:g} s"
            time.sleep(0.02)
            if self.count() > seen:
                seen, deadline = self.count(), time.monotonic() + timeout
        assert not self.errors, f"a client failed: {self.errors[0]!r}"

    def stop(self) -> None:
        """Let every client finish its round trip and end."""
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def finish(self) -> list[Ack]:
        self.stop()
        assert not any(t.is_alive() for t in self._threads), "a client hung"
        assert not self.errors, f"a client failed: {self.errors[0]!r}"
        return list(self.acks)


def check_exactly_once(records: list[FunctionEvaluation], acks: list[Ack]) -> None:
    """Every acknowledged tell is in ``records`` once, with its uid; no trial id has two records."""
    per_trial = Counter(r.raytuner.trial_id if r.raytuner else None for r in records)
    assert None not in per_trial, "a record without a trial id"
    twice = {t: n for t, n in per_trial.items() if n > 1}
    assert not twice, f"trial ids stored more than once: {twice}"
    assert len({r.uid for r in records}) == len(records)
    uid_of = {r.raytuner.trial_id: r.uid for r in records if r.raytuner}
    missing = [a for a in acks if a.trial_id not in uid_of]
    assert not missing, f"{len(missing)} acknowledged tells are not in the store, e.g. {missing[0]}"
    wrong = [a for a in acks if uid_of[a.trial_id] != a.uid]
    assert not wrong, f"acknowledged uids differ from the stored ones: {wrong[:3]}"
    assert len({a.trial_id for a in acks}) == len(acks), "a trial was acknowledged to two clients"


def start_sessions(address: str, key: str, n: int) -> tuple[RemoteTuner, list[str]]:
    admin = RemoteTuner(address, key, timeout=5.0, retries=30, backoff=0.05)
    return admin, [admin.create_session(META, "random", tasks=TASKS, seed=i + 1) for i in range(n)]


_RETRY = re.compile(r"^(\w+) to \S+: (\w+); retrying")


def retries(caplog: pytest.LogCaptureFixture) -> Counter[str]:
    """The status codes RemoteTuner retried on, from its log."""
    return Counter(m.group(2) for r in caplog.records if (m := _RETRY.match(r.getMessage())))


def tell_held(tuner: RemoteTuner, trial: RemoteTrial) -> Any:
    return tuner.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})


def test_kill_9_of_the_server_under_16_clients_loses_and_duplicates_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reserved_port: int
) -> None:
    store, port = tmp_path / "store", reserved_port  # held: the restarted server gets the same port
    server = start_server(str(store), port, tmp_path / "server.log", create_key=True)
    key, address = server.info["key"], f"127.0.0.1:{port}"
    load: Load | None = None
    try:
        admin, sessions = start_sessions(address, key, 4)
        held = RemoteTuner(address, key, session_id=sessions[0], timeout=5.0, retries=30, backoff=0.05)
        held_trial = held.ask()  # asked before the kill, told after the restart
        assert held_trial is not None
        with caplog.at_level(logging.INFO, logger="raytuner.client.channel"):
            load = Load(address, key, sessions, 16)
            load.wait_for(150, timeout=PROGRESS_S)
            server.kill()
            at_kill = load.count()
            time.sleep(0.3)  # clients meet a dead port and back off
            server = start_server(str(store), port, tmp_path / "server.log")
            restarted = time.monotonic()
            load.wait_for(at_kill + 150, timeout=PROGRESS_S)
            acks = load.finish()
            load = None
        assert retries(caplog), "no client had to retry: the kill was not under load"

        told = tell_held(held, held_trial)
        assert not told.duplicate
        assert (
            held.tell(held_trial.trial_id, {"y": demo(held_trial.config["x"], held_trial.task["t"])}).uid == told.uid
        )  # a retried tell stays one evaluation
        after = [a for a in acks if a.asked_at > restarted and not a.duplicate]
        assert len(after) >= 100, "sessions did not go on after the restart"
        views = [admin.session(s) for s in sessions]
        assert [v["pending"] for v in views] == [0, 0, 0, 0], "a trial was lost (asked, never told)"
        held.close()
        admin.close()
    finally:
        if load is not None:
            load.stop()
        server.stop()
    records = JsonStore(store).evaluations(PROBLEM)
    check_exactly_once(records, acks)
    assert len(records) == len(acks) + 1  # the held trial is the only other told one
    assert sum(v["evaluations"] for v in views) == len(records)
    assert held_trial.trial_id in {r.raytuner.trial_id for r in records if r.raytuner}


def test_a_mongod_restart_under_load_loses_and_duplicates_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reserved_port: int
) -> None:
    find_mongod()
    dbpath = tmp_path / "db"
    mongods = [LocalMongod(dbpath=dbpath, port=reserved_port).start()]  # held: the restart gets it back
    uri = f"mongodb://127.0.0.1:{mongods[0].port}/svc_reliability"
    server: ServerProcess | None = None
    load: Load | None = None
    try:
        try:
            server = start_server(uri, 0, tmp_path / "server.log", create_key=True)  # 0: any free port
            key, address = server.info["key"], f"127.0.0.1:{server.info['port']}"
            admin, sessions = start_sessions(address, key, 2)
            with caplog.at_level(logging.INFO, logger="raytuner.client.channel"):
                # a 2-s deadline: calls waiting on the store while it is down expire and are retried
                load = Load(address, key, sessions, 8, timeout=2.0)
                load.wait_for(60, timeout=PROGRESS_S)
                mongods[0].stop()  # SIGTERM: a clean shutdown, under load
                at_stop = load.count()
                time.sleep(2.0)  # the store is down: clients wait, time out and retry
                mongods.append(LocalMongod(dbpath=dbpath, port=mongods[0].port).start())
                load.wait_for(at_stop + 60, timeout=PROGRESS_S)
                acks = load.finish()
                load = None
            retried = retries(caplog)
            assert retried, "no client had to retry: the outage was not exercised"
            assert set(retried) <= {"UNAVAILABLE", "DEADLINE_EXCEEDED"}, retried
            views = [admin.session(s) for s in sessions]
            assert [v["pending"] for v in views] == [0, 0], "a trial was lost (asked, never told)"
            admin.close()
        finally:
            if load is not None:
                load.stop()
            if server is not None:
                server.stop()
        with MongoStore(uri) as store:
            records = store.evaluations(PROBLEM)
            per_trial = Counter(
                d["raytuner"]["trial_id"] for d in store.func_eval.find({}, {"raytuner.trial_id": True, "_id": False})
            )
    finally:
        for mongod in mongods:
            mongod.stop()
    assert max(per_trial.values()) == 1, f"func_eval records per trial id: {per_trial.most_common(3)}"
    check_exactly_once(records, acks)
    assert sum(v["evaluations"] for v in views) == len(records) == len(acks)
