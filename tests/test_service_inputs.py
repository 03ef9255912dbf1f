"""The service's input seams: names with a trailing newline, over-long ids, what an upload tells of others'
sessions, serving in clear text beyond loopback, a wrong ``--server``, a port in use. Real loopback servers."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from record_helpers import json_directory, known

from raytuner.cli import main
from raytuner.client import channel as channel_module
from raytuner.client.channel import ServiceChannel, ServiceError
from raytuner.crowd.keys import parse_key
from raytuner.crowd.names import check_catalog_name, check_email, check_group, check_username
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, check_problem_name
from raytuner.protocol.v1 import tuning_pb2 as pb
from raytuner.protocol.v1 import tuning_pb2_grpc as pb_grpc
from raytuner.service.access import check_principal
from raytuner.service.server import TuningServer

RAYTUNER = [sys.executable, "-m", "raytuner.cli"]
META = {
    "tuning_problem_name": "seams",
    "problem_space": {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 10}],
        "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
        "output_space": [{"name": "y"}],
    },
}
#: The over-long id of the report: a 20,000-character one.
LONG = "a" * 20000


class Caller:
    """A raw stub with one key, each call's status as ``(code, details)``."""

    def __init__(self, server: TuningServer, name: str) -> None:
        self.key = server.keys.create(name)
        self.key_id = known(server.keys.verify(self.key)).key_id
        self.channel = grpc.insecure_channel(server.address)
        self.stub = pb_grpc.TuningServiceStub(self.channel)

    def call(self, method: str, request: Any) -> tuple[grpc.StatusCode, str]:
        try:
            getattr(self.stub, method)(request, metadata=(("x-api-key", self.key),), timeout=20)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
        return grpc.StatusCode.OK, ""

    def answer(self, method: str, request: Any) -> Any:
        return getattr(self.stub, method)(request, metadata=(("x-api-key", self.key),), timeout=20)


@pytest.fixture
def callers(server: TuningServer) -> Iterator[tuple[Caller, Caller]]:
    alice, bob = Caller(server, "alice"), Caller(server, "bob")
    yield alice, bob
    alice.channel.close()
    bob.channel.close()


def new_session(caller: Caller, meta: dict[str, Any] = META) -> str:
    request = pb.CreateSessionRequest(problem_json=json.dumps(meta), engine="random", tasks_json='[{"t": 1.0}]')
    return str(caller.answer("CreateSession", request).session_id)


VALIDATORS: dict[str, Callable[[str], Any]] = {
    "problem name": check_problem_name,
    "user name": check_username,
    "group name": check_group,
    "e-mail": check_email,
    "principal": check_principal,
    "crowd principal": lambda v: check_principal(f"crowd:{v}"),
}


@pytest.mark.parametrize("name", sorted(VALIDATORS))
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_name_with_a_line_break_at_its_end_is_refused(name: str, ending: str) -> None:
    valid = "alice@example.org" if name == "e-mail" else "alice"
    VALIDATORS[name](valid)  # the name alone passes
    with pytest.raises(InvalidInputError):
        VALIDATORS[name](valid + ending)


def test_machine_names_keys_and_key_names_refuse_a_trailing_newline(server: TuningServer) -> None:
    assert check_catalog_name("cori\n", "machine") == "cori"  # stripped, as documented: not refused, not kept
    key = server.keys.create("alice")
    assert parse_key(key) is not None and parse_key(key + "\n") is None
    assert server.keys.verify(key + "\n") is None
    with pytest.raises(InvalidInputError, match="key name"):
        server.keys.create("alice\n")
    result = CliRunner().invoke(
        main, ["keys", "create", "--store", str(json_directory(server.store)), "--name", "bob\n"]
    )
    assert result.exit_code == 2 and "name" in result.output


def test_the_service_refuses_names_and_trial_ids_with_a_trailing_newline(callers: tuple[Caller, Caller]) -> None:
    alice, _ = callers
    session = new_session(alice)
    code, message = alice.call("Ask", pb.AskRequest(session_id=session, trial_id="t1\n"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("trial_id:")
    code, message = alice.call(
        "CreateSession",
        pb.CreateSessionRequest(
            problem_json=json.dumps(dict(META, tuning_problem_name="seams\n")), engine="random", tasks_json="[]"
        ),
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "seams" in message
    for method, request in (
        ("UploadEvaluations", pb.UploadEvaluationsRequest(problem_name="seams\n", records_json="[]")),
        ("QueryEvaluations", pb.QueryEvaluationsRequest(problem_name="seams\n")),
        ("GrantAccess", pb.GrantAccessRequest(problem_name="seams", grantee=f"{alice.key_id}\n")),
    ):
        assert alice.call(method, request)[0] == grpc.StatusCode.INVALID_ARGUMENT, method


def test_an_over_long_id_is_refused_as_bad_input_and_echoed_in_part(callers: tuple[Caller, Caller]) -> None:
    alice, _ = callers
    session = new_session(alice)
    requests = {
        "Ask session_id": ("Ask", pb.AskRequest(session_id=LONG)),
        "GetSession": ("GetSession", pb.GetSessionRequest(session_id=LONG)),
        "Ask trial_id": ("Ask", pb.AskRequest(session_id=session, trial_id=LONG)),
        "Tell session_id": ("Tell", pb.TellRequest(session_id=LONG, trial_id="t", outputs={"y": 1.0})),
        "Tell trial_id": ("Tell", pb.TellRequest(session_id=session, trial_id=LONG, outputs={"y": 1.0})),
        "UploadEvaluations": ("UploadEvaluations", pb.UploadEvaluationsRequest(problem_name=LONG, records_json="[]")),
        "QueryEvaluations": ("QueryEvaluations", pb.QueryEvaluationsRequest(problem_name=LONG)),
        "GrantAccess problem": ("GrantAccess", pb.GrantAccessRequest(problem_name=LONG, grantee=alice.key_id)),
        "GrantAccess grantee": ("GrantAccess", pb.GrantAccessRequest(problem_name="seams", grantee=LONG)),
    }
    for label, (method, request) in requests.items():
        code, message = alice.call(method, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (label, code, message[:200])
        assert len(message) < 400 and "20000 characters" in message, (label, message[:400])


def test_the_cli_refuses_an_over_long_session_id_at_once(server: TuningServer) -> None:
    env = {"RAYTUNER_SERVER": server.address, "RAYTUNER_API_KEY": server.keys.create("alice")}
    started = time.monotonic()
    result = CliRunner().invoke(main, ["ask", "--session", LONG], env=env)
    elapsed = time.monotonic() - started
    assert result.exit_code == 2, result.output[:400]
    assert "INVALID_ARGUMENT" in result.output and len(result.output) < 600
    assert elapsed < 10, f"{elapsed:.1f} s: retried"  # one answer, no retries (it took 37 s)


def test_an_upload_says_nothing_of_another_keys_session(callers: tuple[Caller, Caller]) -> None:
    alice, bob = callers
    hers = new_session(alice)

    def upload(caller: Caller, problem: str, session_id: str) -> tuple[grpc.StatusCode, str]:
        record = FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 1.0}).to_dict()
        record["raytuner"] = {"session_id": session_id, "trial_id": "t1"}
        return caller.call(
            "UploadEvaluations", pb.UploadEvaluationsRequest(problem_name=problem, records_json=json.dumps([record]))
        )

    another = upload(bob, "bobs_problem", hers)
    none = upload(bob, "bobs_problem", "0" * 32)
    assert another == none == (grpc.StatusCode.OK, "")
    stored = json.loads(
        bob.answer("QueryEvaluations", pb.QueryEvaluationsRequest(problem_name="bobs_problem")).records_json
    )
    assert [r["raytuner"].get("session_id") for r in stored] == [None, None]  # no upload is a session's own
    assert [r["raytuner"]["origin_session_id"] for r in stored] == [hers, "0" * 32]  # kept alike, not lost
    code, message = upload(alice, "seams", hers)  # her own session: tell its trials instead
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "raytuner.session_id" in message


def test_serving_beyond_loopback_without_tls_warns_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for host, warned in (("127.0.0.1", False), ("0.0.0.0", True)):
        caplog.clear()
        server = TuningServer(tmp_path / "store", host=host, port=0)
        with caplog.at_level(logging.WARNING, logger="raytuner.service.server"):
            server.start()
        try:
            lines = [r.getMessage() for r in caplog.records if "clear text" in r.getMessage()]
            assert len(lines) == (1 if warned else 0), lines
            if warned:
                assert (
                    server.address in lines[0]
                    and not server.address.endswith(":0")
                    and "--tls-cert" in lines[0]
                    and "--tls-key" in lines[0]
                )
        finally:
            server.stop(grace=0)


@pytest.mark.parametrize(
    ("diagnose_after", "timeout", "retry_for"),
    [(None, 1.0, 10.0), (3600.0, 0.5, 5.0)],
    ids=["waiting", "timer-late"],
)
def test_a_wrong_server_is_named_with_its_cause_within_seconds(
    reserved_port: int,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    diagnose_after: float | None,
    timeout: float,
    retry_for: float,
) -> None:
    # timer-late: a loaded machine, where the timer that asks the channel while an attempt waits fires after the
    # attempt's deadline (here never): the failed attempt itself must ask before the next one
    if diagnose_after is not None:
        monkeypatch.setattr(channel_module, "_DIAGNOSE_AFTER", diagnose_after)
    address = f"127.0.0.1:{reserved_port}"  # nothing listens: connections are refused
    channel = ServiceChannel(
        address, None, pb_grpc.TuningServiceStub, timeout=timeout, retries=None, retry_for=retry_for
    )
    try:
        with caplog.at_level(logging.INFO, logger="raytuner.client.channel"), pytest.raises(ServiceError) as info:
            channel._call("ListSessions", pb.ListSessionsRequest())
    finally:
        channel.close()
    named = [r for r in caplog.records if r.levelno == logging.WARNING and address in r.getMessage()]
    assert len(named) == 1, [r.getMessage() for r in caplog.records]
    assert "connection refused" in named[0].getMessage()
    # named while the call still waits, not when it gives up: the retries go on after the warning (an order of
    # events, not a deadline a loaded machine could miss)
    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) >= 2 and retries[-1].created > named[0].created
    assert address in info.value.message and "connection refused" in info.value.message


def test_the_cli_names_a_wrong_server_on_stderr(reserved_port: int) -> None:
    address = f"127.0.0.1:{reserved_port}"
    done = subprocess.run(
        [*RAYTUNER, "session", "list", "--server", address, "--timeout", "1", "--retry-for", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "RAYTUNER_API_KEY": "rt_0123456789abcdef_" + "A" * 43,
            "PYTHONPATH": ":".join(sys.path),
        },
    )
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if address in line]
    assert any(line.startswith("WARNING") and "connection refused" in line for line in lines), done.stderr
    assert lines[-1].startswith("Error:") and "connection refused" in lines[-1]


def test_serve_on_a_port_in_use_is_an_input_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InvalidInputError, match=f"port: cannot listen on 127.0.0.1:{port}: address already in use"):
            TuningServer(tmp_path / "store", port=port).start()
        done = subprocess.run(
            [*RAYTUNER, "serve", "--store", str(tmp_path / "store"), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
        )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert errors == [
        f"Error: port: cannot listen on 127.0.0.1:{port}: address already in use"
        " (another server holds it? give another --port, or 0 for any free one)"
    ], errors
