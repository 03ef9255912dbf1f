"""What only the MongoDB store (and the local server launcher) has to get right."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymongo
import pytest

from raytuner.errors import InvalidInputError, StoreError
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.store import EvaluationQuery, open_store
from raytuner.store.mongo_store import MongoStore, query_filter
from raytuner.testing.mongod import LocalMongod


def evaluation(t: Any = 1.0, **kw: Any) -> FunctionEvaluation:
    return FunctionEvaluation.create({"t": t}, {"x": 0.5}, {"y": 1.0}, provenance=Provenance(engine="test"), **kw)


def test_indexes_exist(mongo_store: MongoStore) -> None:
    assert mongo_store.func_eval.index_information().keys() <= {"_id_"}  # a store that only read made none
    mongo_store.append("p", evaluation())  # the first write makes them
    func_eval = {name: info["key"] for name, info in mongo_store.func_eval.index_information().items()}
    assert func_eval["problem_appended"] == [("tuning_problem_name", 1), ("_appended", 1)]
    assert func_eval["task_parameter_wildcard"] == [("task_parameter.$**", 1)]
    assert func_eval["machine_name"] == [("machine_configuration.machine_name", 1)]
    assert func_eval["raytuner_status"] == [("raytuner.status", 1)]
    models = {name: info["key"] for name, info in mongo_store.surrogate_model.index_information().items()}
    assert models["problem_appended"] == [("tuning_problem_name", 1), ("_appended", 1)]
    # opening again is fine (index creation is idempotent)
    MongoStore(mongo_store.uri, database=mongo_store.database).close()


def test_reads_use_the_order_index(mongo_store: MongoStore) -> None:
    mongo_store.append_many("demo", [evaluation(float(i)) for i in range(5)])
    plan = mongo_store.func_eval.find(query_filter("demo")).sort("_appended", 1).explain()["queryPlanner"]
    assert "problem_appended" in str(plan["winningPlan"])


def test_documents_carry_problem_and_order(mongo_store: MongoStore) -> None:
    record = evaluation()
    mongo_store.append("demo", record)
    doc = mongo_store.func_eval.find_one()
    assert doc is not None
    assert doc["_id"] == f"demo:{record.uid}" and doc["uid"] == record.uid
    assert doc["tuning_problem_name"] == "demo"
    assert doc["_appended"].time > 0  # the server's timestamp replaced the empty one


@pytest.mark.parametrize(
    "query, field",
    [
        ({"task": {"$where": ["1"]}}, "query.task.$where"),
        ({"task": {"$gt": (0, 1)}}, "query.task.$gt"),
        ({"task": {"a.b": [1]}}, "query.task.a.b"),
        ({"task": {"a\x00": [1]}}, "query.task.a\x00"),
        ({"task": {"": [1]}}, "query.task."),
        ({"machine": {"$where": "sleep(1000)"}}, "query.machine.$where"),
        ({"machine": {"haswell": {"$ne": 1}}}, "query.machine.haswell.$ne"),
        ({"machine": {"haswell.nodes": 1}}, "query.machine.haswell.nodes"),
    ],
)
def test_query_names_cannot_become_operators(mongo_store: MongoStore, query: dict[str, Any], field: str) -> None:
    mongo_store.append("demo", evaluation())
    with pytest.raises(InvalidInputError) as info:
        mongo_store.evaluations("demo", EvaluationQuery.parse(query))
    assert info.value.field == field
    assert field in str(info.value)


def test_writes_are_journaled(mongo_store: MongoStore) -> None:
    for collection in (mongo_store.func_eval, mongo_store.surrogate_model):
        assert collection.write_concern.document == {"w": 1, "j": True}
        assert collection.write_concern.acknowledged


def test_unstorable_records_are_input_errors(mongo_store: MongoStore) -> None:
    with pytest.raises(InvalidInputError):
        mongo_store.append("demo", evaluation(2**70))
    with pytest.raises(InvalidInputError):
        mongo_store.append_many("demo", [evaluation(1.0), evaluation(2**70)])
    assert mongo_store.evaluations("demo") == []


def test_open_store_uses_the_uri_database(mongo_uri: str) -> None:
    store = open_store(f"{mongo_uri}/raytuner_open_store_test")
    try:
        assert isinstance(store, MongoStore)
        assert store.database == "raytuner_open_store_test"
        store.append("demo", evaluation())
        with pymongo.MongoClient[dict[str, Any]](mongo_uri) as client:
            assert client["raytuner_open_store_test"]["func_eval"].count_documents({}) == 1
    finally:
        store.close()
        with pymongo.MongoClient[dict[str, Any]](mongo_uri) as client:
            client.drop_database("raytuner_open_store_test")
    default = open_store(mongo_uri)
    try:
        assert isinstance(default, MongoStore) and default.database == "raytuner"
    finally:
        default.close()


def test_invalid_database_name(mongo_uri: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        MongoStore(mongo_uri, database="bad/name")
    assert info.value.field == "database"


def test_unreachable_server_is_a_quick_store_error(reserved_port: int) -> None:
    port = reserved_port  # held, never listening: nothing can answer there
    start = time.monotonic()
    with pytest.raises(StoreError) as info:
        MongoStore(f"mongodb://alice:s3cret@127.0.0.1:{port}/db?authSource=admin", server_selection_timeout_ms=300)
    # the given 300 ms, not pymongo's default 30 s wait: 15 s tells the two apart on any loaded machine
    assert time.monotonic() - start < 15
    message = str(info.value)
    assert f"mongodb://127.0.0.1:{port}/db" in message
    assert "s3cret" not in message and "alice" not in message


def test_server_going_away_is_a_store_error(tmp_path: Path) -> None:
    with LocalMongod(dbpath=tmp_path / "db") as server:
        store = MongoStore(server.uri, server_selection_timeout_ms=300)
    try:
        with pytest.raises(StoreError):
            store.append("demo", evaluation())
        with pytest.raises(StoreError):
            store.evaluations("demo")
    finally:
        store.close()


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def _wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


_CHILD = """
import sys, time
from raytuner.testing.mongod import LocalMongod
server = LocalMongod().start()
print(server.pid, server.dbpath, flush=True)
if sys.argv[1] == "hang":
    time.sleep(600)
"""


@pytest.mark.parametrize("ending", ["exit", "hang"])
def test_no_server_outlives_its_python_process(ending: str) -> None:
    """atexit stops a server left running; if Python is SIGKILLed, the kernel stops it (Linux)."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, ending], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        pid_text, dbpath = child.stdout.readline().split()
        pid = int(pid_text)
        if ending == "hang":
            assert not _gone(pid)
            child.kill()
        assert child.wait(30) is not None
        assert _wait_gone(pid), f"mongod {pid} still running"
        if ending == "exit":
            assert not Path(dbpath).exists()
        else:  # nobody was left to remove the temporary directory
            shutil.rmtree(Path(dbpath).parent)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


_BESIDE_GRPC = """
from concurrent import futures
import grpc
from raytuner.testing.mongod import LocalMongod
server = grpc.server(futures.ThreadPoolExecutor(4))
server.add_insecure_port("127.0.0.1:0")
server.start()
channel = grpc.insecure_channel("127.0.0.1:1")   # a client's poller too
for _ in range(6):
    LocalMongod().start().stop()
server.stop(0)
print("ok", flush=True)
"""


def test_mongod_starts_beside_a_grpc_server() -> None:
    """The server processes are spawned without fork handlers: gRPC's aborted them (status -6) in CI."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _BESIDE_GRPC], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_local_mongod_stop_leaves_no_process() -> None:
    server = LocalMongod()
    server.start()
    pid, logpath = server.pid, server.logpath
    assert pid is not None and logpath is not None and server.dbpath is not None
    dbpath = server.dbpath
    assert not _gone(pid) and dbpath.is_dir()
    with pymongo.MongoClient[dict[str, Any]](server.uri) as client:
        assert client.admin.command("ping")["ok"] == 1
    server.stop()
    server.stop()  # twice is fine
    assert _gone(pid)
    assert not server.running
    assert not dbpath.exists() and not logpath.exists()


def test_acknowledged_appends_survive_a_killed_server(tmp_path: Path) -> None:
    """Journaled writes: SIGKILL the server right after the appends, restart, all records are there."""
    records = [evaluation(float(i)) for i in range(50)]
    server = LocalMongod(dbpath=tmp_path / "db")
    with server:
        with MongoStore(server.uri) as store:
            for record in records[:40]:
                store.append("demo", record)
            store.append_many("demo", records[40:])
            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
    with LocalMongod(dbpath=tmp_path / "db") as again, MongoStore(again.uri) as store:
        assert store.evaluations("demo") == records
    assert (tmp_path / "db").is_dir()  # a given dbpath is kept


def test_start_failure_reports_the_log(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        LocalMongod(dbpath=tmp_path / "db", extra_args=["--no-such-option"]).start()
    assert "no-such-option" in str(info.value)


def test_a_taken_port_is_not_mistaken_for_our_server(mongod: LocalMongod) -> None:
    with pytest.raises(StoreError) as info:
        LocalMongod(port=mongod.port).start()
    assert "Address already in use" in str(info.value)
    assert mongod.running
