"""The gRPC tuning service over a real loopback server: sessions, ask/tell, errors, auth, TLS, restart."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from record_helpers import json_directory, known, provenance

from raytuner.crowd.keys import parse_key
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.server import TuningServer
from raytuner.store import JsonStore

META: dict[str, Any] = {
    "tuning_problem_name": "svc_demo",
    "problem_space": {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 10}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 8},
        ],
        "output_space": [{"name": "y"}],
    },
}
Code = grpc.StatusCode


class Client:
    """A raw stub with one key (the server's own tests talk protobuf, not RemoteTuner)."""

    def __init__(
        self, address: str, key: str | None, credentials: grpc.ChannelCredentials | None = None, **channel_options: Any
    ) -> None:
        if credentials is None:
            self.channel = grpc.insecure_channel(address)
        else:
            self.channel = grpc.secure_channel(address, credentials, options=list(channel_options.items()))
        self.stub = pb_grpc.TuningServiceStub(self.channel)
        self.key = key
        self.metadata = (("x-api-key", key),) if key else ()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.stub, name)
        return lambda request, **kw: method(request, metadata=self.metadata, timeout=20, **kw)

    def create(self, engine: str = "random", tasks: Any = ({"t": 1.0},), **fields: Any) -> pb.Session:
        return self.CreateSession(
            pb.CreateSessionRequest(
                problem_json=json.dumps(fields.pop("meta", META)),
                engine=engine,
                tasks_json=json.dumps(list(tasks)),
                **fields,
            )
        )

    def close(self) -> None:
        self.channel.close()


def code_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


@pytest.fixture
def alice(server: TuningServer) -> Iterator[Client]:
    client = Client(server.address, server.keys.create("alice"))
    yield client
    client.close()


def run_trials(client: Client, session_id: str, n: int) -> list[pb.AskResponse]:
    asked = []
    for _ in range(n):
        answer = client.Ask(pb.AskRequest(session_id=session_id))
        assert answer.status == pb.AskResponse.TRIAL
        config = json.loads(answer.config_json)
        client.Tell(
            pb.TellRequest(
                session_id=session_id, trial_id=answer.trial_id, outputs={"y": (config["x"] - 0.3) ** 2 + config["k"]}
            )
        )
        asked.append(answer)
    return asked


def test_ask_tell_best_and_budget(alice: Client, server: TuningServer) -> None:
    session = alice.create(max_evaluations=4, seed=3)
    asked = run_trials(alice, session.session_id, 4)
    for answer in asked:
        config = json.loads(answer.config_json)
        assert 0 <= config["x"] <= 1 and isinstance(config["k"], int)  # integers stay integers
    assert alice.Ask(pb.AskRequest(session_id=session.session_id)).status == pb.AskResponse.FINISHED
    got = alice.GetSession(pb.GetSessionRequest(session_id=session.session_id))
    assert (got.evaluations, got.failed, got.pending, got.finished) == (4, 0, 0, True)
    records = JsonStore(json_directory(server.store)).evaluations("svc_demo")
    best = min(records, key=lambda r: r.known_value("y"))
    assert got.best[0].uid == best.uid and got.best[0].outputs["y"] == best.value("y")
    assert json.loads(got.best[0].task_json) == {"t": 1.0}
    assert [s.session_id for s in alice.ListSessions(pb.ListSessionsRequest()).sessions] == [session.session_id]


def test_tell_is_durable_idempotent_and_failures_are_records(alice: Client, server: TuningServer) -> None:
    session = alice.create()
    answer = alice.Ask(pb.AskRequest(session_id=session.session_id))
    tell = pb.TellRequest(
        session_id=session.session_id,
        trial_id=answer.trial_id,
        outputs={"y": 1.5},
        machine_json=json.dumps({"machine_name": "perlmutter"}),
    )
    first = alice.Tell(tell)
    records = JsonStore(json_directory(server.store)).evaluations("svc_demo")  # durable when acknowledged
    assert [r.uid for r in records] == [first.uid]
    assert records[0].machine_configuration == {"machine_name": "perlmutter"}
    again = alice.Tell(tell)  # a retry
    assert (again.uid, again.duplicate) == (first.uid, True)
    assert len(JsonStore(json_directory(server.store)).evaluations("svc_demo")) == 1
    code, message = code_of(
        lambda: alice.Tell(pb.TellRequest(session_id=session.session_id, trial_id=answer.trial_id, outputs={"y": 2.5}))
    )
    assert code == Code.FAILED_PRECONDITION and "trial_id" in message
    failing = alice.Ask(pb.AskRequest(session_id=session.session_id))
    told = alice.Tell(
        pb.TellRequest(session_id=session.session_id, trial_id=failing.trial_id, failure="segfault in the solver")
    )
    assert told.failed
    record = JsonStore(json_directory(server.store)).evaluations("svc_demo")[-1]
    assert record.status != "ok" and provenance(record).failure_message == "segfault in the solver"


def test_ask_with_client_trial_id_is_idempotent(alice: Client) -> None:
    session = alice.create()
    one = alice.Ask(pb.AskRequest(session_id=session.session_id, trial_id="job-17"))
    two = alice.Ask(pb.AskRequest(session_id=session.session_id, trial_id="job-17"))
    assert (one.trial_id, one.config_json) == (two.trial_id, two.config_json) == ("job-17", one.config_json)
    assert alice.GetSession(pb.GetSessionRequest(session_id=session.session_id)).pending == 1


@pytest.mark.parametrize(
    "request_fields, field",
    [
        ({"problem_json": "{not json"}, "problem_json"),
        (
            {
                "problem_json": json.dumps(
                    {**META, "problem_space": {"parameter_space": [{"name": "x", "type": "foo"}]}}
                )
            },
            "problem_space",
        ),
        ({"engine": "annealing"}, "engine"),
        ({"tasks_json": json.dumps([{"t": 99.0}])}, "tasks"),
        ({"tasks_json": json.dumps({"t": 1.0})}, "tasks_json"),
        ({"tasks_json": "[null]"}, "tasks[0]"),
        ({"tasks_json": '[{"t": 1.0}, 3]'}, "tasks[1]"),
        ({"options_json": json.dumps({"bogus_option": 1})}, "options"),
        ({"max_evaluations": -2}, "max_evaluations"),
        ({"seed": -5}, "seed"),
    ],
)
def test_bad_sessions_name_the_field(alice: Client, request_fields: dict[str, Any], field: str) -> None:
    fields = {"problem_json": json.dumps(META), "engine": "random", "tasks_json": '[{"t": 1.0}]', **request_fields}
    code, message = code_of(lambda: alice.CreateSession(pb.CreateSessionRequest(**fields)))
    assert code == Code.INVALID_ARGUMENT and field in message, message


def test_bad_asks_and_tells(alice: Client) -> None:
    sid = alice.create().session_id
    trial = alice.Ask(pb.AskRequest(session_id=sid))
    cases = [
        (pb.AskRequest(session_id=sid, task_json='{"t": 5.0}'), "Ask", Code.INVALID_ARGUMENT, "task_json"),
        (pb.AskRequest(session_id=sid, task_json='{"t": 50.0}'), "Ask", Code.INVALID_ARGUMENT, "task_json"),
        (pb.AskRequest(session_id=sid, trial_id="a b"), "Ask", Code.INVALID_ARGUMENT, "trial_id"),
        (pb.AskRequest(session_id="nope"), "Ask", Code.NOT_FOUND, "session_id"),
        # (a NaN or infinite output is a result, stored as a failed record: tests/test_results_are_records.py)
        (
            pb.TellRequest(session_id=sid, trial_id=trial.trial_id, outputs={"z": 1.0}),
            "Tell",
            Code.INVALID_ARGUMENT,
            "outputs['z']",
        ),
        (pb.TellRequest(session_id=sid, trial_id=trial.trial_id), "Tell", Code.INVALID_ARGUMENT, "outputs['y']"),
        (
            pb.TellRequest(session_id=sid, trial_id=trial.trial_id, outputs={"y": 1.0}, machine_json="[1]"),
            "Tell",
            Code.INVALID_ARGUMENT,
            "machine_json",
        ),
        (pb.TellRequest(session_id=sid, trial_id="unknown", outputs={"y": 1.0}), "Tell", Code.NOT_FOUND, "trial_id"),
        (
            pb.TellRequest(session_id=sid, trial_id=trial.trial_id, failure="x" * 70000),
            "Tell",
            Code.INVALID_ARGUMENT,
            "failure",
        ),
    ]
    for request, method, code, field in cases:
        got, message = code_of(lambda: getattr(alice, method)(request))
        assert got == code and field in message, (request, got, message)
    # nothing above changed the trial: it can still be told once
    assert not alice.Tell(pb.TellRequest(session_id=sid, trial_id=trial.trial_id, outputs={"y": 1.0})).duplicate


def test_oversized_message_is_refused_and_the_server_goes_on(alice: Client) -> None:
    code, _ = code_of(lambda: alice.CreateSession(pb.CreateSessionRequest(problem_json="x" * (5 << 20))))
    assert code == Code.RESOURCE_EXHAUSTED
    assert alice.create().session_id


def test_keys_owners_and_revocation(server: TuningServer, alice: Client) -> None:
    sid = alice.create().session_id
    bob = Client(server.address, server.keys.create("bob"))
    nobody = Client(server.address, None)
    forged = Client(server.address, "rt_0123456789abcdef_" + "A" * 43)
    try:
        assert code_of(lambda: bob.Ask(pb.AskRequest(session_id=sid)))[0] == Code.NOT_FOUND
        assert list(bob.ListSessions(pb.ListSessionsRequest()).sessions) == []
        for client in (nobody, forged):
            code, message = code_of(lambda: client.Ask(pb.AskRequest(session_id=sid)))
            assert code == Code.UNAUTHENTICATED and "x-api-key" in message
        key_id = known(server.keys.verify(bob.key)).key_id
        server.keys.revoke(key_id)
        assert code_of(lambda: bob.ListSessions(pb.ListSessionsRequest()))[0] == Code.UNAUTHENTICATED
    finally:
        for client in (bob, nobody, forged):
            client.close()
    stored = (json_directory(server.store) / ".service" / "keys.jsonl").read_text()
    secret = known(parse_key(known(alice.key)))[1]  # the key's format, not a split: secrets hold "_"
    assert secret not in stored  # only salted hashes are kept


def test_sessions_and_pending_trials_survive_a_restart(tmp_path: Path, reserved_port: int) -> None:
    first = TuningServer(tmp_path / "store", port=reserved_port)  # held: the restart gets it back
    port = first.start()
    key = first.keys.create("alice")
    client = Client(first.address, key)
    session = client.create(engine="mla", options_json=json.dumps({"n_initial": 3}), seed=5)
    run_trials(client, session.session_id, 3)
    pending = client.Ask(pb.AskRequest(session_id=session.session_id))
    client.close()
    first.stop(grace=0)

    second = TuningServer(tmp_path / "store", port=port)
    second.start()
    client = Client(second.address, key)
    try:
        got = client.GetSession(pb.GetSessionRequest(session_id=session.session_id))
        assert (got.evaluations, got.pending) == (3, 1)
        told = client.Tell(
            pb.TellRequest(session_id=session.session_id, trial_id=pending.trial_id, outputs={"y": 0.25})
        )
        assert not told.duplicate
        run_trials(client, session.session_id, 2)  # the model phase goes on
        records = JsonStore(tmp_path / "store").evaluations("svc_demo")
        assert len(records) == 6 and len({provenance(r).trial_id for r in records}) == 6
    finally:
        client.close()
        second.stop(grace=0)


def test_watch_streams_the_events(alice: Client) -> None:
    sid = alice.create(max_evaluations=2).session_id
    events: list[pb.SessionEvent] = []
    stream = alice.WatchSession(pb.WatchSessionRequest(session_id=sid, from_start=True))
    reader = threading.Thread(target=lambda: events.extend(stream), daemon=True)
    reader.start()
    run_trials(alice, sid, 2)
    reader.join(20)
    kinds = [pb.SessionEvent.Kind.Name(e.kind) for e in events]
    assert kinds == ["ASKED", "TOLD", "ASKED", "TOLD", "FINISHED"]
    assert events[1].outputs["y"] >= 1.0 and [e.sequence for e in events] == list(range(5))


def test_upload_and_query_evaluations(alice: Client) -> None:
    from raytuner.problem.records import FunctionEvaluation

    records = [FunctionEvaluation.create({"t": t}, {"x": 0.5, "k": 2}, {"y": t}).to_dict() for t in (1.0, 2.0, 3.0)]
    request = pb.UploadEvaluationsRequest(problem_name="ray_runs", records_json=json.dumps(records))
    assert alice.UploadEvaluations(request).received == 3
    alice.UploadEvaluations(request)  # idempotent by uid
    found = json.loads(
        alice.QueryEvaluations(
            pb.QueryEvaluationsRequest(
                problem_name="ray_runs", query_json=json.dumps({"task": {"t": {"low": 1.5, "high": 3.0}}})
            )
        ).records_json
    )
    assert sorted(r["task_parameter"]["t"] for r in found) == [2.0, 3.0]
    bad = pb.UploadEvaluationsRequest(problem_name="ray_runs", records_json=json.dumps([{"uid": ""}]))
    code, message = code_of(lambda: alice.UploadEvaluations(bad))
    assert code == Code.INVALID_ARGUMENT and "records_json[0]" in message
    code, message = code_of(
        lambda: alice.QueryEvaluations(
            pb.QueryEvaluationsRequest(problem_name="ray_runs", query_json=json.dumps({"$where": "1"}))
        )
    )
    assert code == Code.INVALID_ARGUMENT and "query" in message


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "server.pem", directory / "server.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    server = TuningServer(tmp_path / "store", port=0, tls_cert=cert, tls_key=key)
    server.start()
    api_key = server.keys.create("alice")
    secure = Client(server.address, api_key, grpc.ssl_channel_credentials(cert.read_bytes()))
    plain = Client(server.address, api_key)
    try:
        assert secure.create().session_id
        with pytest.raises(grpc.RpcError) as info:  # no TLS, no answer
            plain.stub.ListSessions(pb.ListSessionsRequest(), metadata=plain.metadata, timeout=3)
        assert info.value.code() in (Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED)
    finally:
        secure.close()
        plain.close()
        server.stop(grace=0)


#: The lines where the generator writes its own version (grpcio-tools', and the protobuf it bundles): a patch
#: release changes them and nothing else, so the stubs are compared without them.
_STAMPS = re.compile(
    r"^(GRPC_GENERATED_VERSION = .*|# Protobuf Python Version: .*|    \d+,\n    \d+,\n    \d+,\n    '.*',)$",
    re.MULTILINE,
)


def _unstamped(text: str) -> str:
    """``text`` with the generator's version stamps blanked."""
    return _STAMPS.sub("<stamp>", text)


def test_generated_stubs_match_the_proto(tmp_path: Path) -> None:
    from grpc_tools import protoc

    root = Path(__file__).resolve().parents[1]
    args = [
        "protoc",
        f"-I{root / 'protos'}",
        f"--python_out={tmp_path}",
        f"--pyi_out={tmp_path}",
        f"--grpc_python_out={tmp_path}",
        str(root / "protos/raytuner/protocol/v1/tuning.proto"),
    ]
    assert protoc.main(args) == 0
    for name in ("tuning_pb2.py", "tuning_pb2.pyi", "tuning_pb2_grpc.py"):
        fresh = _unstamped((tmp_path / "raytuner/protocol/v1" / name).read_text())
        checked_in = _unstamped((root / "raytuner/protocol/v1" / name).read_text())
        assert fresh == checked_in, (
            f"raytuner/protocol/v1/{name} is stale: regenerate it (docs/guides/remote-jobs.md gives the command)"
        )


DISCRETE_META = {
    "tuning_problem_name": "svc_kernel",
    "problem_space": {
        "parameter_space": [
            {"name": "bx", "type": "categorical", "categories": [16, 32, 64, 128]},
            {"name": "by", "type": "categorical", "categories": [1, 2, 4, 8]},
        ],
        "output_space": [{"name": "y"}],
    },
}


@pytest.mark.parametrize(
    "engine, options, meta, tasks",
    [
        ("mla", {"n_initial": 3}, META, [{"t": 1.0}, {"t": 2.0}]),
        ("gptuneband", {"b_min": 1, "b_max": 9, "eta": 3}, META, [{"t": 1.0}]),
        ("discrete", {"n_initial": 3}, DISCRETE_META, [{}]),
        ("transfer", {"source_problem": "svc_source", "algorithm": "weighted_sum_equal"}, META, [{"t": 1.0}]),
    ],
)
def test_every_engine_runs_through_the_service(
    alice: Client, engine: str, options: dict[str, Any], meta: dict[str, Any], tasks: list[dict[str, Any]]
) -> None:
    from raytuner.problem.records import FunctionEvaluation

    source = [
        FunctionEvaluation.create({"t": 0.8}, {"x": x / 10, "k": 2}, {"y": (x / 10 - 0.3) ** 2}).to_dict()
        for x in range(11)
    ]
    alice.UploadEvaluations(pb.UploadEvaluationsRequest(problem_name="svc_source", records_json=json.dumps(source)))
    sid = alice.create(engine, tasks, meta=meta, options_json=json.dumps(options), seed=2).session_id
    fidelities = set()
    for _ in range(5):
        answer = alice.Ask(pb.AskRequest(session_id=sid))
        assert answer.status == pb.AskResponse.TRIAL
        config = json.loads(answer.config_json)
        fidelities.add(answer.fidelity)
        value = sum(float(v) for v in config.values()) / (answer.fidelity or 1.0)
        alice.Tell(pb.TellRequest(session_id=sid, trial_id=answer.trial_id, outputs={"y": value}))
    assert alice.GetSession(pb.GetSessionRequest(session_id=sid)).evaluations == 5
    assert (min(fidelities) >= 1.0) if engine == "gptuneband" else fidelities == {0.0}
