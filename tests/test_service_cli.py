"""The service commands against a real loopback server: keys, session, ask, tell, serve, the HPC job example."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from record_helpers import known, provenance

from raytuner.cli import main
from raytuner.client.remote import RemoteTuner, ServiceError
from raytuner.problem.records import FunctionEvaluation
from raytuner.service.server import TuningServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "remote_hpc_job"
SCRIPT = Path(sys.executable).with_name("raytuner")
RAYTUNER = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "raytuner.cli"]
META = {
    "tuning_problem_name": "cli_demo",
    "problem_space": {
        "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "my-alg", "type": "categorical", "categories": ["it's $(echo no); ok", "lu"]},
        ],
        "output_space": [{"name": "y", "type": "real"}],
    },
}


@pytest.fixture
def env(server: TuningServer) -> dict[str, str]:
    return {"RAYTUNER_SERVER": server.address, "RAYTUNER_API_KEY": server.keys.create("alice")}


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(META))
    return path


def cli(args: list[str], env: dict[str, str] | None = None, code: int = 0) -> Result:
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def create(env: dict[str, str], meta: Path, *extra: str) -> str:
    out = cli(["session", "create", "--meta", str(meta), "--engine", "random", "--json", *extra], env)
    return json.loads(out.stdout)["session_id"]


def test_session_ask_tell_show_list_best(env: dict[str, str], meta: Path) -> None:
    session = create(env, meta, "--task", "t=3", "--max-evaluations", "3", "--seed", "7")
    env = {**env, "RAYTUNER_SESSION": session}
    trial = json.loads(cli(["ask", "--format", "json"], env).stdout)
    assert trial["status"] == "TRIAL" and trial["task"] == {"t": 3} and trial["fidelity"] is None
    told = json.loads(
        cli(["tell", "--trial", trial["trial_id"], "--value", "0.25", "--extra", "n=3", "--json"], env).stdout
    )
    assert told["uid"] and not told["duplicate"] and not told["failed"]
    again = cli(["tell", "--trial", trial["trial_id"], "--value", "y=0.25"], env).stdout
    assert told["uid"] in again and "told before" in again
    conflict = cli(["tell", "--trial", trial["trial_id"], "--value", "0.5"], env, code=1)
    assert "FAILED_PRECONDITION" in conflict.output
    assignments = dict(shlex.split(line)[0].split("=", 1) for line in cli(["ask"], env).stdout.splitlines())
    assert assignments["RAYTUNER_STATUS"] == "TRIAL" and assignments["TASK_t"] == "3"
    assert assignments["FIDELITY"] == "" and 0 <= float(assignments["x"]) <= 1 and "my_alg" in assignments
    cli(["tell", "--trial", assignments["TRIAL_ID"], "--failed", "out of memory"], env)
    cli(["tell", "--trial", "never-asked", "--value", "1"], env, code=1)
    shown = json.loads(cli(["session", "show", "--json"], env).stdout)
    assert shown["session_id"] == session and shown["evaluations"] == 2 and shown["failed"] == 1
    assert "best for task" in cli(["session", "show"], env).stdout
    best = json.loads(cli(["session", "best", "--json"], env).stdout)
    assert best[0]["outputs"] == {"y": 0.25} and best[0]["task"] == {"t": 3}
    listed = json.loads(cli(["session", "list", "--json", "--problem", "cli_demo"], env).stdout)
    assert [s["session_id"] for s in listed] == [session]
    assert session in cli(["session", "list"], env).stdout
    assert json.loads(cli(["session", "list", "--json", "--problem", "other"], env).stdout) == []


def test_ask_waits_finishes_and_exits_3(env: dict[str, str], meta: Path) -> None:
    session = create(env, meta, "--tasks-json", '[{"t": 1}, {"t": 2}]', "--max-evaluations", "1")
    env = {**env, "RAYTUNER_SESSION": session}
    first = json.loads(cli(["ask", "--format", "json", "--task", "t=2"], env).stdout)
    assert first["task"] == {"t": 2}
    busy = cli(["ask", "--no-wait"], env, code=4)
    assert busy.stdout.strip() == "RAYTUNER_STATUS=WAIT"
    cli(["tell", "--trial", first["trial_id"], "--value", "1.5"], env)
    assert cli(["ask"], env, code=3).stdout.strip() == "RAYTUNER_STATUS=FINISHED"
    assert json.loads(cli(["ask", "--format", "json"], env, code=3).stdout) == {"status": "FINISHED"}
    events = [json.loads(line) for line in cli(["session", "watch", "--from-start"], env).stdout.splitlines()]
    assert [e["kind"] for e in events] == ["ASKED", "TOLD", "FINISHED"]


def test_env_format_is_shell_safe(env: dict[str, str], meta: Path) -> None:
    env = {**env, "RAYTUNER_SESSION": create(env, meta, "--task", "t=4")}
    for _ in range(4):  # both categories, one of them full of shell syntax
        as_json = json.loads(cli(["ask", "--format", "json", "--trial-id", f"t{_}"], env).stdout)
        as_env = cli(["ask", "--trial-id", f"t{_}", "--prefix", "P_"], env).stdout
        shell = subprocess.run(
            ["bash", "-c", 'eval "$1"; printf "%s\\n" "$TRIAL_ID" "$P_TASK_t" "$P_x" "$P_my_alg"', "-", as_env],
            capture_output=True,
            text=True,
            check=True,
        )
        assert shell.stdout.splitlines() == [
            as_json["trial_id"],
            "4",
            str(as_json["config"]["x"]),
            as_json["config"]["my-alg"],
        ]


def test_create_errors_name_the_field(env: dict[str, str], meta: Path, tmp_path: Path) -> None:
    # input the service refuses (INVALID_ARGUMENT) exits 2, like every bad input (raytuner.cli.errors)
    bad = cli(["session", "create", "--meta", str(meta), "--engine", "nonsense"], env, code=2)
    assert "INVALID_ARGUMENT" in bad.output and "engine" in bad.output
    bad = cli(
        [
            "session",
            "create",
            "--meta",
            str(meta),
            "--engine",
            "random",
            "--task",
            "t=1",
            "--option",
            "n_initial=1",
        ],
        env,
        code=2,
    )
    assert "INVALID_ARGUMENT" in bad.output and "options" in bad.output
    mla = create(env, meta, "--engine", "mla", "--task", "t=1", "--option", "n_initial=4", "--option", "acquisition=ei")
    shown = json.loads(cli(["session", "show", "--json", "--session", mla], env).stdout)
    assert shown["engine"] == "mla" and shown["options"] == {"n_initial": 4, "acquisition": "ei"}
    out = cli(["session", "create", "--meta", str(meta), "--engine", "random", "--task", "t"], env, code=2)
    assert "NAME=VALUE" in out.output
    wrong = {**env, "RAYTUNER_API_KEY": "rt_0123456789abcdef_" + "x" * 43}
    assert "UNAUTHENTICATED" in cli(["session", "list"], wrong, code=1).output
    cli(["tell", "--session", "s", "--trial", "t"], env, code=2)  # neither --value nor --failed


def test_keys_and_serve(tmp_path: Path) -> None:
    store = str(tmp_path / "db")
    key = cli(["keys", "create", "--store", store, "--name", "bob"]).stdout.strip()
    assert key.startswith("rt_")
    (listed,) = json.loads(cli(["keys", "list", "--store", store, "--json"]).stdout)
    assert listed["name"] == "bob" and not listed["revoked"] and listed["key_id"] in key
    # --port 0: the kernel picks a free port at bind time (a port chosen beforehand could be taken)
    process = subprocess.Popen(
        [*RAYTUNER, "serve", "--store", store, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        line = process.stdout.readline()
        found = re.search(r"on (127\.0\.0\.1:\d+) ", line)
        assert found, (line, process.stderr.read() if process.poll() is not None else "")
        with RemoteTuner(found.group(1), key) as client:
            assert client.sessions() == []
            cli(["keys", "revoke", "--store", store, listed["key_id"]])
            # the server re-reads its keys within a second; 60 s only bounds a server that never does
            deadline = time.monotonic() + 60
            with pytest.raises(ServiceError) as info:
                while time.monotonic() < deadline:
                    client.sessions()
                    time.sleep(0.2)
            assert info.value.code == "UNAUTHENTICATED"
        assert json.loads(cli(["keys", "list", "--store", store, "--json"]).stdout)[0]["revoked"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _job_env(env: dict[str, str], **extra: Any) -> dict[str, str]:
    return {
        **os.environ,
        **env,
        "RAYTUNER": " ".join(RAYTUNER),
        "PYTHON": sys.executable,
        **{k: str(v) for k, v in extra.items()},
    }


def test_example_job_script(server: TuningServer, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", str(EXAMPLE / "job.sh")],
        env=_job_env(env, MAX_EVALUATIONS=3, N=64),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the session is finished" in done.stdout and done.stdout.count("runtime") >= 3
    (session,) = RemoteTuner(server.address, env["RAYTUNER_API_KEY"]).sessions("blocked_matmul")
    assert session["finished"] and session["evaluations"] == 3 and session["tasks"] == [{"n": 64}]
    assert session["best"][0]["outputs"]["runtime"] > 0
    records = server.store.evaluations("blocked_matmul")
    assert all(
        r.additional_output.get("job") == "local"
        and known(provenance(r).machine).get("host")
        and "numpy" in r.software_configuration
        for r in records
    )


def test_example_job_python(server: TuningServer, env: dict[str, str], meta: Path) -> None:
    with RemoteTuner(server.address, env["RAYTUNER_API_KEY"]) as tuner:
        session = tuner.create_session(EXAMPLE / "meta.json", "random", tasks=[{"n": 64}], max_evaluations=3)
        done = subprocess.run(
            [sys.executable, str(EXAMPLE / "job.py"), "--max-trials", "2"],
            env=_job_env(env, RAYTUNER_SESSION=session),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "ran 2 trial(s)" in done.stdout
        assert tuner.session()["evaluations"] == 2 and not tuner.session()["finished"]


def test_tla1_predicts_and_tla2_tunes_a_new_task_through_the_commands(
    env: dict[str, str], meta: Path, server: TuningServer
) -> None:
    tuned = [
        FunctionEvaluation.create({"t": t}, {"x": x / 10, "my-alg": "lu"}, {"y": (x / 10 - 0.1 * t) ** 2})
        for t in (1, 2, 4, 5)
        for x in range(11)
    ]
    with RemoteTuner(server.address, env["RAYTUNER_API_KEY"]) as tuner:  # the key's own source problem
        tuner.upload_evaluations("cli_demo_tuned", tuned)
    source = ("--option", "source_problem=cli_demo_tuned", "--task", "t=3")
    out = cli(["session", "create", "--meta", str(meta), "--engine", "tla1", "--json", *source], env)
    predict = {**env, "RAYTUNER_SESSION": json.loads(out.stdout)["session_id"]}
    trial = json.loads(cli(["ask", "--format", "json"], predict).stdout)
    assert trial["status"] == "TRIAL" and abs(trial["config"]["x"] - 0.3) < 0.1  # no evaluation needed
    out = cli(
        [
            "session",
            "create",
            "--meta",
            str(meta),
            "--engine",
            "tla2",
            "--json",
            *source,
            "--option",
            "n_initial=2",
        ],
        env,
    )
    tune = {**env, "RAYTUNER_SESSION": json.loads(out.stdout)["session_id"]}
    for _ in range(3):
        trial = json.loads(cli(["ask", "--format", "json"], tune).stdout)
        cli(["tell", "--trial", trial["trial_id"], "--value", str((trial["config"]["x"] - 0.3) ** 2)], tune)
    assert json.loads(cli(["session", "show", "--json"], tune).stdout)["evaluations"] == 3
