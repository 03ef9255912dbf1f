"""Fuzzing the tuning service: well over 1,000 random and malformed messages; it answers every one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.server import TuningServer

META = {
    "tuning_problem_name": "fuzz",
    "problem_space": {
        "input_space": [{"name": "t", "type": "integer", "lower_bound": 0, "upper_bound": 5}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "c", "type": "categorical", "categories": ["a", "b"]},
        ],
        "output_space": [{"name": "y"}],
    },
}
#: Answers a request may get; INTERNAL or UNKNOWN would mean the server did not handle it.
HANDLED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
METHODS = [
    "CreateSession",
    "Ask",
    "Tell",
    "Heartbeat",
    "GetSession",
    "ListSessions",
    "UploadEvaluations",
    "QueryEvaluations",
]
EXAMPLES = 220  # per test below; six tests: 1,320 messages, plus the raw-byte ones

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
json_text = st.one_of(
    st.text(max_size=40),
    json_values.map(lambda v: json.dumps(v)),
    st.sampled_from(["", "{", "[]", "{}", "null", '{"$where": "1"}', '{"t": 1}', '[{"t": 9}]']),
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, tuple, str, grpc.Channel]]:
    server = TuningServer(Path(tmp_path_factory.mktemp("fuzz")) / "store", port=0)
    server.start()
    key = server.keys.create("fuzzer")
    channel = grpc.insecure_channel(server.address)
    stub = pb_grpc.TuningServiceStub(channel)
    metadata = (("x-api-key", key),)
    session = stub.CreateSession(
        pb.CreateSessionRequest(problem_json=json.dumps(META), engine="random", tasks_json='[{"t": 1}, {"t": 2}]'),
        metadata=metadata,
    )
    yield stub, metadata, session.session_id, channel
    # the server still answers a well-formed request after everything
    assert stub.Ask(pb.AskRequest(session_id=session.session_id), metadata=metadata, timeout=10).trial_id
    channel.close()
    server.stop(grace=0)


def call(stub: Any, method: str, request: Any, metadata: tuple) -> None:
    try:
        getattr(stub, method)(request, metadata=metadata, timeout=30)  # generous: a loaded CI box
    except grpc.RpcError as exc:
        assert exc.code() in HANDLED, (method, request, exc.code(), exc.details())


fuzz = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
session_ids = st.one_of(st.text(max_size=40), st.just("REAL"))


def real(session_id: str, service: tuple) -> str:
    return service[2] if session_id == "REAL" else session_id


@fuzz
@given(
    problem=json_text,
    engine=st.sampled_from(["random", "mla", "gptuneband", "band", "discrete", "transfer", "tla", "", "x"]),
    options=json_text,
    tasks=json_text,
    seed=st.integers(-(2**63), 2**63 - 1),
    budget=st.integers(-(2**63), 2**63 - 1),
    lease=st.one_of(st.none(), st.floats()),
)
def test_create_session(
    service: tuple, problem: str, engine: str, options: str, tasks: str, seed: int, budget: int, lease: float | None
) -> None:
    if problem.startswith("{") and "REAL" not in problem:
        problem = json.dumps({**META, **json.loads(problem)}) if problem.endswith("}") else problem
    call(
        service[0],
        "CreateSession",
        pb.CreateSessionRequest(
            problem_json=problem,
            engine=engine,
            options_json=options,
            tasks_json=tasks,
            seed=seed,
            max_evaluations=budget,
            lease_seconds=lease,
        ),
        service[1],
    )


@fuzz
@given(session_id=session_ids, task=json_text, trial_id=st.text(max_size=70))
def test_ask(service: tuple, session_id: str, task: str, trial_id: str) -> None:
    call(
        service[0],
        "Ask",
        pb.AskRequest(session_id=real(session_id, service), task_json=task, trial_id=trial_id),
        service[1],
    )


@fuzz
@given(
    session_id=session_ids,
    trial=st.one_of(st.text(max_size=20), st.just("ASKED")),
    outputs=st.dictionaries(st.sampled_from(["y", "z", ""]), st.floats(), max_size=2),
    failure=st.text(max_size=30),
    machine=json_text,
    extra=json_text,
)
def test_tell(
    service: tuple, session_id: str, trial: str, outputs: dict[str, float], failure: str, machine: str, extra: str
) -> None:
    stub, metadata, sid, _ = service
    if trial == "ASKED":
        trial = stub.Ask(pb.AskRequest(session_id=sid), metadata=metadata, timeout=10).trial_id
    call(
        stub,
        "Tell",
        pb.TellRequest(
            session_id=real(session_id, service),
            trial_id=trial,
            outputs=outputs,
            failure=failure,
            machine_json=machine,
            software_json=extra,
            additional_output_json=extra,
        ),
        metadata,
    )


@fuzz
@given(session_id=session_ids, trial_id=st.one_of(st.text(max_size=70), st.just("ASKED")))
def test_heartbeat(service: tuple, session_id: str, trial_id: str) -> None:
    stub, metadata, sid, _ = service
    if trial_id == "ASKED":
        trial_id = stub.Ask(pb.AskRequest(session_id=sid), metadata=metadata, timeout=10).trial_id
    call(stub, "Heartbeat", pb.HeartbeatRequest(session_id=real(session_id, service), trial_id=trial_id), metadata)


@fuzz
@given(
    method=st.sampled_from(["GetSession", "ListSessions", "UploadEvaluations", "QueryEvaluations"]),
    name=st.text(max_size=30),
    text=json_text,
    key=st.sampled_from(["good", "none", "bad"]),
)
def test_reads_uploads_and_keys(service: tuple, method: str, name: str, text: str, key: str) -> None:
    stub, metadata, _, _ = service
    # a header value must be printable ASCII (the client library refuses others before sending)
    bad = "".join(ch for ch in name if " " <= ch <= "~")
    metadata = {"good": metadata, "none": (), "bad": (("x-api-key", "rt_" + bad),)}[key]
    request = {
        "GetSession": lambda: pb.GetSessionRequest(session_id=name),
        "ListSessions": lambda: pb.ListSessionsRequest(problem_name=name),
        "UploadEvaluations": lambda: pb.UploadEvaluationsRequest(problem_name=name, records_json=text),
        "QueryEvaluations": lambda: pb.QueryEvaluationsRequest(problem_name=name, query_json=text),
    }[method]()
    call(stub, method, request, metadata)


@fuzz
@given(method=st.sampled_from(METHODS), payload=st.binary(max_size=200))
def test_malformed_bytes(service: tuple, method: str, payload: bytes) -> None:
    _, metadata, _, channel = service
    send = channel.unary_unary(
        f"/raytuner.v1.TuningService/{method}", request_serializer=None, response_deserializer=None
    )
    try:
        send(payload, metadata=metadata, timeout=10)
    except grpc.RpcError as exc:
        assert exc.code() in HANDLED | {grpc.StatusCode.INTERNAL}, exc.details()
        if exc.code() == grpc.StatusCode.INTERNAL:  # gRPC's own answer to bytes that do not parse
            assert "deserializ" in (exc.details() or "").lower() or "parse" in (exc.details() or "").lower()
