"""Strict JSON at the edge, standard JSON out (issue 53, item 5), over a real loopback server.

Every JSON field of ``CreateSession``, ``Ask``, ``Tell``, ``UploadEvaluations``, ``QueryEvaluations``, the
crowd service's ``UploadRecords`` and ``QueryFunctionEvaluations`` and the command line's ``--tasks-json``
refuses each kind of JSON that is not standard or not safe to keep (``NaN``, ``Infinity``, a lone surrogate in
a key or a string, nesting deeper than 64 levels, more than 1 MiB of UTF-8) with one ``INVALID_ARGUMENT`` line
naming the field, and nothing is stored. A store written before (whose records may hold a lone surrogate or
``NaN``) is shown by ``history show`` and the dashboard and exported as standard JSON: NaN as null, an
infinity as ``1e999``, a lone surrogate as U+FFFD.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from test_service_server import META, Client, code_of

from raytuner.dashboard import create_app, serve
from raytuner.problem.records import FunctionEvaluation
from raytuner.protocol import MAX_JSON_BYTES
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.server import TuningServer
from raytuner.store import JsonStore
from raytuner.store.journal import FUNC_EVAL
from raytuner.store.jsontext import MAX_DEPTH

#: (name, a JSON object holding the bad value, the start of the reason refused)
BAD: list[tuple[str, str, str]] = [
    ("nan", '{"a": NaN}', "not standard JSON: NaN is not a JSON number (use null)"),
    ("infinity", '{"a": [1, Infinity]}', "not standard JSON: Infinity is not a JSON number (use null)"),
    ("-infinity", '{"a": -Infinity}', "not standard JSON: -Infinity is not a JSON number (use null)"),
    ("-NaN", '{"a": -NaN}', "not valid JSON"),
    ("surrogate key", '{"\\ud800": 1}', "holds a lone surrogate (U+D800): keys must be Unicode text"),
    ("surrogate string", '{"a": ["x\\udfff"]}', "holds a lone surrogate (U+DFFF): strings must be Unicode text"),
    ("deep", '{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}", f"nested deeper than {MAX_DEPTH} levels"),
    ("900 deep", '{"a": ' + "[" * 900 + "]" * 900 + "}", f"nested deeper than {MAX_DEPTH} levels"),
    ("large", json.dumps({"a": "é" * (MAX_JSON_BYTES // 2)}, ensure_ascii=False), "BYTES"),
]
IDS = [name for name, _, _ in BAD]


def in_list(obj: str) -> str:
    return f"[{obj}]"


def as_record(obj: str) -> str:
    """A valid record's JSON whose additional_output is ``obj`` (so only the bad value is wrong)."""
    good = json.dumps(FunctionEvaluation.create({"t": 1.0}, {"x": 0.5, "k": 2}, {"y": 1.0}).to_dict())
    return f'[{good[:-1]}, "additional_output": {obj}}}]'


def as_problem(obj: str) -> str:
    return json.dumps(META)[:-1] + f', "extra": {obj}}}'


@pytest.fixture
def alice(server: TuningServer) -> Iterator[Client]:
    client = Client(server.address, server.keys.create("alice"))
    yield client
    client.close()


def refused(call: Callable[[], Any], field: str, reason: str, text: str = "") -> None:
    code, details = code_of(call)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    if reason == "BYTES":  # the size of the whole field's text
        reason = f"{len(text.encode())} bytes; at most {MAX_JSON_BYTES}"
    assert details.startswith(f"{field}: ") and reason in details, details
    assert "\n" not in details


@pytest.mark.parametrize(("name", "obj", "reason"), BAD, ids=IDS)
def test_create_session_refuses_each_bad_json_in_each_field(
    alice: Client, server: TuningServer, name: str, obj: str, reason: str
) -> None:
    fields = {"problem_json": as_problem(obj), "options_json": obj, "tasks_json": in_list(obj)}
    for field, text in fields.items():
        request: dict[str, Any] = {
            "problem_json": json.dumps(META),
            "engine": "random",
            "tasks_json": '[{"t": 1.0}]',
            field: text,
        }
        refused(functools.partial(alice.CreateSession, pb.CreateSessionRequest(**request)), field, reason, text)
    assert list(alice.ListSessions(pb.ListSessionsRequest()).sessions) == []
    assert server.manager.store.problems() == []


@pytest.mark.parametrize(("name", "obj", "reason"), BAD, ids=IDS)
def test_tell_refuses_each_bad_json_in_each_field_and_the_trial_stays_open(
    alice: Client, server: TuningServer, name: str, obj: str, reason: str
) -> None:
    session = alice.create(seed=1)
    trial = alice.Ask(pb.AskRequest(session_id=session.session_id))
    refused(lambda: alice.Ask(pb.AskRequest(session_id=session.session_id, task_json=obj)), "task_json", reason, obj)
    for field in ("machine_json", "software_json", "additional_output_json"):
        request = pb.TellRequest(
            session_id=session.session_id, trial_id=trial.trial_id, outputs={"y": 1.0}, **{field: obj}
        )
        refused(functools.partial(alice.Tell, request), field, reason, obj)
    assert server.manager.store.evaluations(META["tuning_problem_name"]) == []
    alice.Tell(pb.TellRequest(session_id=session.session_id, trial_id=trial.trial_id, outputs={"y": 1.0}))
    assert len(server.manager.store.evaluations(META["tuning_problem_name"])) == 1


@pytest.mark.parametrize(("name", "obj", "reason"), BAD, ids=IDS)
def test_upload_and_query_refuse_each_bad_json(
    alice: Client, server: TuningServer, name: str, obj: str, reason: str
) -> None:
    for text in (in_list(obj), as_record(obj)):
        request = pb.UploadEvaluationsRequest(problem_name="up", records_json=text)
        refused(functools.partial(alice.UploadEvaluations, request), "records_json", reason, text)
    refused(
        lambda: alice.QueryEvaluations(pb.QueryEvaluationsRequest(problem_name="up", query_json=obj)),
        "query_json",
        reason,
        obj,
    )
    assert server.manager.store.problems() == []


def test_a_lone_surrogate_cannot_reach_a_string_field_and_a_nan_output_is_a_failed_record(
    alice: Client, server: TuningServer
) -> None:
    with pytest.raises(ValueError):  # the client's protobuf refuses to encode it
        pb.TellRequest(failure="x\ud800").SerializeToString()
    session = alice.create(seed=1)
    trial = alice.Ask(pb.AskRequest(session_id=session.session_id))
    # the same request with the UTF-8 encoding of U+D800 in `failure`: the server's protobuf refuses it
    raw = pb.TellRequest(session_id=session.session_id, trial_id=trial.trial_id, failure="x\u0800")
    data = raw.SerializeToString().replace("x\u0800".encode(), b"x\xed\xa0\x80")
    call = alice.channel.unary_unary(
        "/raytuner.v1.TuningService/Tell", request_serializer=None, response_deserializer=None
    )
    code, _ = code_of(lambda: call(data, metadata=alice.metadata, timeout=20))
    assert code != grpc.StatusCode.OK
    assert server.manager.store.evaluations(META["tuning_problem_name"]) == []
    answer = alice.Tell(
        pb.TellRequest(session_id=session.session_id, trial_id=trial.trial_id, outputs={"y": float("nan")})
    )
    assert answer.failed


def old_store(root: Path) -> Path:
    """A store as an older raytuner left it: a journal line with a lone surrogate and NaN (Python's json)."""
    record = FunctionEvaluation.create(
        {"t": 1.0},
        {"x": 0.5},
        {"y": 2.0},
        machine_configuration={"machine_name": "m\ud800"},
        additional_output={"loss": [1.0, float("nan")], "k\udc00": "v\udfff", "bound": -float("inf")},
    )
    with JsonStore(root) as store:
        store.append("old", FunctionEvaluation.create({"t": 1.0}, {"x": 0.25}, {"y": 1.0}))
    with open(root / "old.json.journal", "a", encoding="ascii") as fh:
        fh.write(json.dumps({"kind": FUNC_EVAL, "record": record.to_dict()}) + "\n")
    return root


def raytuner_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raytuner.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        encoding="utf-8",
        check=False,
    )


def strict_loads(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not standard JSON")

    value = json.loads(text, parse_constant=refuse)
    assert "\\ud8" not in text.lower() and "\\udc" not in text.lower() and "\\udf" not in text.lower()
    return value


def test_a_store_written_before_is_shown_and_exported_as_standard_json(tmp_path: Path) -> None:
    root = old_store(tmp_path / "store")
    shown = raytuner_cli("history", "show", str(root), "--problem", "old")
    assert shown.returncode == 0, shown.stderr
    assert "m\ufffd" in raytuner_cli("history", "show", str(root), "--problem", "old", "--csv").stdout
    as_json = raytuner_cli("history", "show", str(root), "--problem", "old", "--json")
    assert strict_loads(as_json.stdout)["func_eval"] == 2

    out = tmp_path / "old.json"
    exported = raytuner_cli("history", "export", "--from", str(root), "--problem", "old", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    record = strict_loads(out.read_text(encoding="utf-8"))["func_eval"][1]
    assert record["machine_configuration"]["machine_name"] == "m\ufffd"
    assert record["additional_output"] == {"loss": [1.0, None], "k\ufffd": "v\ufffd", "bound": -float("inf")}
    assert '"bound": -1e999' in out.read_text(encoding="utf-8")  # an infinity as a standard JSON number

    with serve(create_app(store=root, warm=True), port=0) as dashboard:
        page = urllib.request.urlopen(dashboard.url + "problem/old", timeout=60)
        with page:
            assert page.status == 200
            assert "old" in page.read().decode("utf-8")


def test_the_command_lines_json_options_are_read_as_strictly(server: TuningServer, tmp_path: Path) -> None:
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps(META))
    env = {"RAYTUNER_SERVER": server.address, "RAYTUNER_API_KEY": server.keys.create("alice")}
    for tasks, reason in (('[{"t": NaN}]', "NaN is not a JSON number"), ('[{"t\\udc80": 1}]', "lone surrogate")):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "raytuner.cli",
                "session",
                "create",
                "--meta",
                str(meta),
                "--engine",
                "random",
                "--tasks-json",
                tasks,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **env},
            check=False,
        )
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "--tasks-json" in line and reason in line
    assert server.manager.store.problems() == []


def test_the_crowd_services_json_fields_are_read_as_strictly(crowd: tuple[TuningServer, Any, str]) -> None:
    server, repository, _ = crowd
    repository.add_user("alice", "alice@example.org")
    channel = grpc.insecure_channel(server.address)
    stub = pb_grpc.CrowdServiceStub(channel)
    key = repository.create_key("alice")
    metadata = (("x-api-key", key),)
    try:
        for _, obj, reason in BAD:
            request = pb.CrowdUploadRequest(tuning_problem_name="p", records_json=as_record(obj))
            refused(
                functools.partial(stub.UploadRecords, request, metadata=metadata, timeout=20),
                "records_json",
                reason,
                request.records_json,
            )
            query = pb.CrowdQuery(tuning_problem_name="p", problem_space_json=obj)

            def query_all(q: Any = query) -> list[Any]:
                return list(stub.QueryFunctionEvaluations(q, metadata=metadata, timeout=20))

            refused(
                query_all,
                "problem_space_json",
                reason,
                obj,
            )
        assert repository.query_function_evaluations(key, "p") == []
    finally:
        channel.close()
