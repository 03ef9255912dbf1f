"""RemoteTuner against a real tuning server on loopback: ask/tell/run, retries, errors, TLS, watch."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from record_helpers import known

from raytuner.client.remote import RemoteTrial, RemoteTuner, ServiceError
from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.problem.records import FunctionEvaluation
from raytuner.service.server import TuningServer

META = {
    "tuning_problem_name": "client_demo",
    "problem_space": {
        "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "alg", "type": "categorical", "categories": ["lu", "qr"]},
        ],
        "output_space": [{"name": "y", "type": "real"}],
    },
}
TASKS = [{"t": 2}, {"t": 5}]


def f(config: dict, task: dict, fidelity: float | None) -> dict[str, float]:
    return {"y": (config["x"] - 0.1 * task["t"]) ** 2 + (config["alg"] == "qr")}


@pytest.fixture
def key(server: TuningServer) -> str:
    return server.keys.create("alice")


@pytest.fixture
def tuner(server: TuningServer, key: str) -> Iterator[RemoteTuner]:
    with RemoteTuner(server.address, key, timeout=20, backoff=0.05) as client:
        yield client


def test_ask_tell_and_session(tuner: RemoteTuner) -> None:
    session_id = tuner.create_session(META, "random", tasks=TASKS, seed=3, max_evaluations=4)
    assert tuner.session_id == session_id
    trial = tuner.ask({"t": 5})
    assert isinstance(trial, RemoteTrial) and trial.task == {"t": 5} and trial.fidelity is None
    assert 0 <= trial.config["x"] <= 1 and trial.config["alg"] in ("lu", "qr")
    first = tuner.tell(trial, f(trial.config, trial.task, None), additional_output={"note": "first"})
    assert first.uid and not first.duplicate and not first.failed
    again = tuner.tell(trial.trial_id, f(trial.config, trial.task, None))  # a retried tell
    assert again.duplicate and again.uid == first.uid
    with pytest.raises(ServiceError) as info:  # another result: refused
        tuner.tell(trial, {"y": 123.0})
    assert info.value.code == "FAILED_PRECONDITION"
    failed = tuner.tell(known(tuner.ask()), failure="segfault")
    assert failed.failed
    info_ = tuner.session()
    assert info_["evaluations"] == 2 and info_["failed"] == 1 and info_["pending"] == 0
    assert info_["tasks"] == TASKS and info_["max_evaluations"] == 4 and not info_["finished"]
    assert [b["task"] for b in info_["best"]] == [{"t": 5}] and info_["best"][0]["uid"] == first.uid
    best = tuner.best({"t": 5})  # as every engine and session answers it: a FunctionEvaluation
    assert best is not None and best.uid == first.uid and best.tuning_parameter == trial.config
    assert best.evaluation_result == f(trial.config, trial.task, None)
    assert tuner.best_per_task() == [None, best] and tuner.pareto_front({"t": 5}) == [best]  # t = 2: no success
    with pytest.raises(InvalidInputError, match=r"^task: \{'t': 9\} is no task of session "):
        tuner.best({"t": 9})
    assert [s["session_id"] for s in tuner.sessions()] == [session_id]
    assert tuner.sessions("client_demo")[0]["engine"] == "random" and tuner.sessions("other") == []


def test_ask_is_idempotent_with_a_trial_id(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=TASKS, seed=1)
    first = known(tuner.ask(trial_id="job-17.trial-1"))
    assert tuner.ask(trial_id="job-17.trial-1") == first and first.trial_id == "job-17.trial-1"
    assert known(tuner.ask()).trial_id != first.trial_id


def test_run_loop_until_finished(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=TASKS, seed=2, max_evaluations=6)
    calls = []

    def objective(config: dict[str, Any], task: dict[str, Any], fidelity: float | None) -> float:
        calls.append(task["t"])
        if len(calls) == 2:
            raise RuntimeError("compile failed")
        if len(calls) == 3:
            return float("nan")
        return f(config, task, fidelity)["y"]  # a number: the problem's only output

    assert tuner.run(objective) == 6
    assert tuner.ask() is None and tuner.finished
    info = tuner.session()
    assert info["finished"] and info["evaluations"] == 6 and info["failed"] == 2
    assert len(info["best"]) == 2


def test_run_maps_numbers_to_the_output(server: TuningServer, key: str, tuner: RemoteTuner) -> None:
    session_id = tuner.create_session(META, "random", tasks=TASKS, max_evaluations=4)
    with RemoteTuner(server.address, server.keys.create("alice2"), session_id=session_id) as stranger:
        with pytest.raises(ServiceError) as info:  # another key's session is not found
            stranger.ask()
        assert info.value.code == "NOT_FOUND"
    with RemoteTuner(server.address, key, session_id=session_id) as other:
        assert other.output_names() == ["y"]  # a number goes to the only output
        assert other.run(lambda c, t, fid: 1.0, max_trials=1) == 1
        not_a_result: Any = "fast"
        with pytest.raises(RaytunerError, match="objective"):  # neither a number nor a mapping
            other.run(lambda c, t, fid: not_a_result)
        assert other.run(lambda c, t, fid: 1.0, max_trials=1, output="y") == 1
        with pytest.raises(ServiceError) as info:  # a wrong name: told failed, then raised
            other.run(lambda c, t, fid: {"z": 1.0})
        assert info.value.code == "INVALID_ARGUMENT" and "z" in info.value.message
    session = tuner.session()
    assert session["failed"] == 2 and session["pending"] == 0 and session["finished"]


def test_wait_while_trials_are_pending(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=[{"t": 1}], max_evaluations=2)
    pending = [known(tuner.ask()), known(tuner.ask())]
    assert tuner.ask(wait=False) is None and not tuner.finished  # budget handed out: WAIT
    timer = threading.Timer(0.3, lambda: [tuner.tell(t, {"y": 1.0}) for t in pending])
    timer.start()
    started = time.monotonic()
    assert tuner.ask(poll=0.05) is None and tuner.finished  # waits, then FINISHED
    assert time.monotonic() - started >= 0.25
    timer.join()


def test_errors_keep_the_status_and_the_message(
    server: TuningServer, tuner: RemoteTuner, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ServiceError) as info:
        tuner.create_session(META, "nonsense", tasks=TASKS)
    assert info.value.code == "INVALID_ARGUMENT" and "engine" in info.value.message
    with pytest.raises(ServiceError) as info:
        tuner.create_session(META, "random", tasks=[{"t": 99}])
    assert info.value.code == "INVALID_ARGUMENT" and "tasks" in info.value.message
    with pytest.raises(ServiceError) as info:
        tuner.session("no-such-session")
    assert info.value.code == "NOT_FOUND"
    tuner.create_session(META, "random", tasks=TASKS)
    with pytest.raises(ServiceError) as info:
        tuner.tell("never-asked", {"y": 1.0})
    assert info.value.code == "NOT_FOUND" and "trial_id" in info.value.message
    with pytest.raises(RaytunerError):
        tuner.tell("never-asked")  # neither outputs nor failure
    caplog.set_level(logging.INFO, logger="raytuner.client.channel")
    for key in (None, "rt_0123456789abcdef_" + "x" * 43):
        with RemoteTuner(server.address, key, retries=3, backoff=1.0) as stranger:
            with pytest.raises(ServiceError) as info:
                stranger.sessions()
            assert info.value.code == "UNAUTHENTICATED" and "x-api-key" in info.value.message
            # not retried: the client logs every retry and counts attempts in a retried error's message
            assert "attempts" not in info.value.message
    assert "retrying" not in caplog.text


def test_unreachable_server_fails_after_the_retries(reserved_port: int) -> None:
    with RemoteTuner(f"127.0.0.1:{reserved_port}", "k", timeout=1, retries=2, backoff=0.05) as client:
        with pytest.raises(ServiceError) as info:
            client.sessions()
    assert info.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and "3 attempts" in info.value.message


def test_client_waits_for_a_server_that_comes_up_late(tmp_path: Path, reserved_port: int) -> None:
    port = reserved_port  # nobody else takes it in the meantime
    late = TuningServer(tmp_path / "store", port=port)  # made (and a key), not yet listening
    key = late.keys.create("alice")
    timer = threading.Timer(1.0, late.start)
    with RemoteTuner(f"127.0.0.1:{port}", key, timeout=5, retries=8, backoff=0.1) as client:
        timer.start()
        try:
            assert client.create_session(META, "random", tasks=TASKS)
            assert client.ask() is not None
        finally:
            timer.join()
            late.stop(grace=0)


def test_ask_and_tell_across_a_server_restart(tmp_path: Path, reserved_port: int) -> None:
    port = reserved_port  # still ours while the server is down
    server = TuningServer(tmp_path / "store", port=port)
    server.start()
    key = server.keys.create("alice")
    with RemoteTuner(server.address, key, timeout=5, retries=8, backoff=0.1) as client:
        client.create_session(META, "random", tasks=TASKS, max_evaluations=3)
        trial = known(client.ask())
        server.stop(grace=0)
        restarted = TuningServer(tmp_path / "store", port=port)
        timer = threading.Timer(0.8, restarted.start)
        timer.start()
        try:
            told = client.tell(trial, {"y": 0.5})  # retried until the server is back
            assert not told.duplicate
            assert client.tell(trial, {"y": 0.5}).uid == told.uid
            assert client.run(f) == 2 and client.session()["evaluations"] == 3
        finally:
            timer.join()
            restarted.stop(grace=0)


def test_watch_the_events(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=[{"t": 1}], max_evaluations=2)
    tuner.run(f)
    events = list(tuner.watch(from_start=True))
    assert [e["kind"] for e in events] == ["ASKED", "TOLD", "ASKED", "TOLD", "FINISHED"]
    assert events[1]["outputs"]["y"] >= 0 and events[1]["trial_id"] == events[0]["trial_id"]


def test_upload_and_query_evaluations(tuner: RemoteTuner) -> None:
    records = [FunctionEvaluation.create({"t": t}, {"x": 0.5, "alg": "lu"}, {"y": float(t)}) for t in (1, 2, 3)]
    assert tuner.upload_evaluations("ray_side", records) == 3
    found = tuner.query_evaluations("ray_side", {"task": {"t": {"low": 2, "high": 3}}})
    assert sorted(r.task_parameter["t"] for r in found) == [2, 3]
    assert all(isinstance(r, FunctionEvaluation) for r in found)


def test_the_api_key_is_never_logged(
    server: TuningServer, key: str, caplog: pytest.LogCaptureFixture, reserved_port: int
) -> None:
    caplog.set_level(logging.DEBUG)
    with RemoteTuner(server.address, key) as client:
        client.create_session(META, "random", tasks=TASKS)
        client.tell(known(client.ask()), {"y": 1.0})
        assert key not in repr(client)
    with RemoteTuner(f"127.0.0.1:{reserved_port}", key, timeout=0.5, retries=1, backoff=0.01) as client:
        with pytest.raises(ServiceError) as info:
            client.sessions()
        assert key not in str(info.value)
    assert key not in caplog.text


def test_tls(tmp_path: Path) -> None:
    cert, private = tmp_path / "server.pem", tmp_path / "server.key"
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
            str(private),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = TuningServer(tmp_path / "store", port=0, tls_cert=cert, tls_key=private)
    port = server.start()
    try:
        key = server.keys.create("alice")
        with RemoteTuner(f"localhost:{port}", key, root_certificates=cert.read_bytes()) as client:
            assert client.create_session(META, "random", tasks=TASKS)
        with RemoteTuner(f"127.0.0.1:{port}", key, timeout=2, retries=0) as plain:  # no TLS: no answer
            with pytest.raises(ServiceError) as info:
                plain.sessions()
            assert info.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    finally:
        server.stop(grace=0)


GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "remote-jobs.md"


def test_the_guides_server_in_a_script_without_a_main_guard_runs_at_once(tmp_path: Path) -> None:
    """Issue 67, item 5: the guide's example without its main guard, with MLA, took 264 s for 8 trials.

    The server's model fits run in spawned workers, which import the script again: each worker started a
    server of its own on the same store and its asks failed and were retried for minutes. A worker now
    stops at the server with one line, and the fits run in the script's process.
    """
    guide = re.search(r"^```python\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert guide is not None and 'if __name__ == "__main__":' in guide.group(1)  # the guide keeps its guard
    code = guide.group(1).replace('if __name__ == "__main__":', "if True:")  # as the guide read before
    code = code.replace('options={"n_initial": 4}, max_evaluations=10', 'options={"n_initial": 3}, max_evaluations=8')
    assert "if True:" in code and "max_evaluations=8" in code
    script = tmp_path / "unguarded.py"
    script.write_text(code)
    start = time.monotonic()
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'x':" in run.stdout  # the best configuration
    assert 'guard the tuning with `if __name__ == "__main__":`' in run.stderr
    assert took < 120, f"{took:.0f} s"  # 264 s before; 13 s on 2 busy cores
    from raytuner.store import JsonStore

    store = JsonStore(tmp_path / "raytuner-db")
    assert len(store.evaluations("demo")) == 8
    assert store.models("demo")  # the fits ran (in the script's process)
    assert len(list(store.ledger().read("sessions"))) == 1  # no worker made a session of its own
