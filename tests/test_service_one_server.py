"""One server per store: a second ``raytuner serve`` on a store refuses to start, naming the first; a killed
server's restart starts at once.

Real servers (``raytuner serve`` in subprocesses) on one JSON store directory and on one database of a real
``mongod``; the MongoDB lease's expiry and takeover are checked on the lease itself, with the database's clock.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
from record_helpers import known

from raytuner.client.remote import RemoteTuner
from raytuner.service.server import TuningServer
from raytuner.store import JsonStore
from raytuner.store.server_lock import LEASE_COLLECTION, MongoServerLease, StoreInUse
from raytuner.test_problems import DEMO_PROBLEM

SCRIPT = Path(sys.executable).with_name("raytuner")
RAYTUNER = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "raytuner.cli"]
START_S = 120  # bounds a server that never starts (2 shared cores); a start takes a few seconds
META = {"tuning_problem_name": "one_server", "problem_space": DEMO_PROBLEM}


class Serve:
    """``raytuner serve`` on a store, in a subprocess; :attr:`address` once it printed its first line."""

    def __init__(self, *store: str) -> None:
        self.process = subprocess.Popen(
            [*RAYTUNER, "serve", *store, "--port", "0", "--no-auth"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def started(self) -> str:
        """The server's address, once it serves (fails with its stderr if it exits instead)."""
        line = known(self.process.stdout).readline()
        found = re.search(r"on (127\.0\.0\.1:\d+) ", line)
        assert found, (line, self.refused(timeout=START_S))
        self.address = found.group(1)
        return self.address

    def refused(self, timeout: float = START_S) -> tuple[int, str]:
        """Its exit status and stderr, once it exited."""
        code = self.process.wait(timeout)
        return code, known(self.process.stderr).read()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(START_S)
        for stream in (self.process.stdout, self.process.stderr):
            known(stream).close()
        return code


def _one_session(address: str) -> str:
    with RemoteTuner(address, timeout=30) as tuner:
        return tuner.create_session(META, "random", tasks=[{"t": 1.0}], max_evaluations=4)


def _second_refused(first: Serve, *store: str) -> None:
    code, err = Serve(*store).refused()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "served by another raytuner server" in lines[0], err
    assert f"host {socket.gethostname()}, pid {first.process.pid}, since 20" in lines[0], err


def _restarted_after_kill_9(
    first: Serve, store: tuple[str, ...], session_id: str, check: Callable[[Serve], None] | None = None
) -> None:
    """Kill -9 ``first`` and start a server again on ``store``: it serves the sessions and holds the store in turn.

    ``check(server)`` runs while the restarted server serves.
    """
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    again = Serve(*store)
    try:
        with RemoteTuner(again.started(), timeout=30) as tuner:
            assert session_id in [s["session_id"] for s in tuner.sessions()]
        _second_refused(again, *store)
        if check is not None:
            check(again)
    finally:
        assert again.stop() == 0


def test_a_second_server_on_a_json_store_refuses_and_a_killed_ones_restart_is_prompt(tmp_path: Path) -> None:
    store = ("--store", str(tmp_path / "store"))
    first = Serve(*store)
    try:
        session_id = _one_session(first.started())
        _second_refused(first, *store)
        with RemoteTuner(first.address, timeout=30) as tuner:
            assert [s["session_id"] for s in tuner.sessions()] == [session_id]  # the first one serves on
    except BaseException:
        first.stop(signal.SIGKILL)
        raise
    _restarted_after_kill_9(first, store, session_id)  # a flock is never waited for: taken at once or refused
    assert not (tmp_path / "store" / ".service" / "server.lock").exists()  # a stopped server leaves no lock file


@pytest.fixture
def database(mongo_uri: str) -> Iterator[str]:
    name = f"one_server_{uuid.uuid4().hex}"
    yield name
    with pymongo.MongoClient[dict[str, Any]](mongo_uri) as client:
        client.drop_database(name)


def test_a_second_server_on_a_mongodb_store_refuses_and_a_killed_ones_restart_is_prompt(
    mongo_uri: str, database: str
) -> None:
    store = ("--mongodb", f"{mongo_uri}/{database}")
    first = Serve(*store)
    try:
        session_id = _one_session(first.started())
        _second_refused(first, *store)
    except BaseException:
        first.stop(signal.SIGKILL)
        raise
    with pymongo.MongoClient[dict[str, Any]](mongo_uri) as client:
        leases = client[database][LEASE_COLLECTION]

        def holds_the_lease(server: Serve) -> None:
            assert known(leases.find_one())["pid"] == server.process.pid

        _restarted_after_kill_9(first, store, session_id, holds_the_lease)
        assert leases.count_documents({}) == 0  # a stopped server deleted its lease


def test_a_server_object_on_a_held_store_refuses_until_the_first_stops(tmp_path: Path) -> None:
    first = TuningServer(tmp_path, port=0)
    first.start()
    second = TuningServer(tmp_path, port=0)
    try:
        with pytest.raises(
            StoreInUse, match=rf"^store: {tmp_path} is served by another .*, pid {os.getpid()}, since 20"
        ):
            second.start()
    finally:
        first.stop(grace=0)
    second.start()  # the first one released it when it stopped
    second.stop(grace=0)
    JsonStore(tmp_path).ledger()  # readers and other writers never needed it


@pytest.fixture
def lease_collection(mongo_store: Any) -> Any:
    return mongo_store.client[mongo_store.database][LEASE_COLLECTION]


def _held_elsewhere(collection: Any, seconds_left: float) -> None:
    """A lease of a server on another host that expires ``seconds_left`` from now by the database's clock."""
    collection.update_one(
        {"_id": "server"},
        [
            {
                "$set": {
                    "host": "elsewhere",
                    "pid": 4242,
                    "token": "theirs",
                    "since": "$$NOW",
                    "expires": {"$add": ["$$NOW", int(seconds_left * 1000)]},
                }
            }
        ],
        upsert=True,
    )


def test_a_mongodb_lease_of_a_live_server_elsewhere_is_refused_at_once(mongo_store: Any, lease_collection: Any) -> None:
    _held_elsewhere(lease_collection, 9.5)  # renewed just now
    lease = mongo_store.server_lock()
    started = time.monotonic()
    with pytest.raises(
        StoreInUse, match=r"host elsewhere, pid 4242, since 20.*if it is gone, its lease runs out in [0-9] s"
    ):
        lease.acquire()
    assert time.monotonic() - started < 2.0
    assert lease_collection.find_one()["token"] == "theirs"


def test_a_mongodb_lease_that_ran_out_by_the_databases_clock_is_taken(mongo_store: Any, lease_collection: Any) -> None:
    _held_elsewhere(lease_collection, -0.5)
    lease = mongo_store.server_lock()
    lease.acquire()
    try:
        held = lease_collection.find_one()
        assert (held["host"], held["pid"], held["token"]) == (socket.gethostname(), os.getpid(), lease.token)
    finally:
        lease.release()
    assert lease_collection.count_documents({}) == 0


def test_a_mongodb_lease_no_longer_renewed_is_waited_out(mongo_store: Any, lease_collection: Any) -> None:
    _held_elsewhere(lease_collection, 2.0)  # last renewed 8 s ago: its server is likely gone
    lease = mongo_store.server_lock()
    started = time.monotonic()
    lease.acquire()
    try:
        assert 1.5 < time.monotonic() - started < 10.0
        assert lease_collection.find_one()["token"] == lease.token
    finally:
        lease.release()


def test_a_server_whose_mongodb_lease_is_taken_stops(mongo_store: Any, lease_collection: Any) -> None:
    server = TuningServer(mongo_store, port=0, auth=False)
    server.start()
    try:
        lease_collection.update_one({"_id": "server"}, {"$set": {"token": "theirs"}})  # taken while it could not renew
        deadline = time.monotonic() + 30
        while server.lost is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.lost is not None and "lease was taken by another server" in server.lost
        assert server.wait(timeout=10)  # it stopped serving
    finally:
        server.stop(grace=0)
    assert lease_collection.find_one()["token"] == "theirs"  # not deleted: it is the other server's


def test_mongodb_leases_taken_at_once_by_many_go_to_one(mongo_store: Any) -> None:
    leases = [mongo_store.server_lock() for _ in range(8)]
    won: list[MongoServerLease] = []
    barrier = threading.Barrier(len(leases))

    def take(lease: MongoServerLease) -> None:
        barrier.wait()
        try:
            lease.acquire()
        except StoreInUse:
            return
        won.append(lease)

    threads = [threading.Thread(target=take, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert len(won) == 1
    finally:
        for lease in won:
            lease.release()


def test_a_mongodb_lease_deleted_while_held_is_taken_again(mongo_store: Any, lease_collection: Any) -> None:
    """A database restored without the lease (nobody else took it): the renewal takes it again, the server goes on."""
    lost: list[str] = []
    lease = MongoServerLease(lease_collection, "test", mongo_store._errors, on_lost=lost.append, ttl=3.0)
    lease.acquire()
    try:
        lease_collection.delete_many({})
        deadline = time.monotonic() + 30
        while lease_collection.count_documents({"token": lease.token}) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lease_collection.find_one()["token"] == lease.token and lost == []
    finally:
        lease.release()


class Unreachable:
    """A collection whose database cannot be reached."""

    def find_one_and_update(self, *args: Any, **kwargs: Any) -> Any:
        raise pymongo.errors.AutoReconnect("the database is out of reach")


def test_a_mongodb_lease_that_cannot_be_renewed_pauses_before_it_runs_out_and_resumes(
    mongo_store: Any, lease_collection: Any
) -> None:
    """Another server may take a lease that ran out: its holder must pause before, not learn it after."""
    lost: list[str] = []
    lease = MongoServerLease(lease_collection, "test", mongo_store._errors, on_lost=lost.append)
    lease.acquire()
    try:
        lease.collection = Unreachable()  # every renewal fails from now on
        asked = time.monotonic()  # the database runs the read after this
        (read,) = lease_collection.aggregate([{"$project": {"left": {"$subtract": ["$expires", "$$NOW"]}}}])
        runs_out = asked + read["left"] / 1000  # at or before the lease runs out by the database's clock
        assert lease._valid_until < runs_out  # it pauses then: 2 s before, less the read's time
        deadline = time.monotonic() + 60
        while not lease.paused and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lease.paused and lost == []
        lease.collection = lease_collection
        while lease.paused and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lease.paused and lost == [] and lease_collection.find_one()["token"] == lease.token
    finally:
        lease.collection = lease_collection
        lease.release()


def test_a_mongodb_lease_of_a_killed_server_on_this_host_is_taken_over_at_once(
    mongo_store: Any, lease_collection: Any
) -> None:
    """Renewed just now, but its pid has ended: taken at once, before it runs out by the database's clock."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid is gone
    _held_elsewhere(lease_collection, 9.5)
    lease_collection.update_one({"_id": "server"}, {"$set": {"host": socket.gethostname(), "pid": dead.pid}})
    killed = lease_collection.find_one()
    lease = mongo_store.server_lock()
    lease.acquire()
    try:
        held = lease_collection.find_one()
        assert held["token"] == lease.token and held["since"] < killed["expires"]  # not waited out
    finally:
        lease.release()
