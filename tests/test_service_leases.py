"""Trial leases against a real loopback server (issue 67, item 3).

A trial whose job died never expired: with ``max_evaluations`` the session never finished and the next
job's ask waited for ever. Now a trial's lease (the session's ``lease_seconds``) is renewed by heartbeats
(or a retried ask); once it ends, the trial's task and configuration are handed out again under a new
trial id, a late tell of the expired trial is kept (stored and acknowledged) and counts once with its
replacement, and all of it survives a restart of the server. Leases here are 1-3 s; waits poll.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner
from record_helpers import known

from raytuner.cli import main
from raytuner.client.remote import RemoteTrial, RemoteTuner, ServiceError
from raytuner.problem.records import FunctionEvaluation
from raytuner.service.server import TuningServer
from raytuner.test_problems import DEMO_PROBLEM

META = {"tuning_problem_name": "leases", "problem_space": DEMO_PROBLEM}
TASK = {"t": 1.0}
ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "remote_hpc_job"
SCRIPT = Path(sys.executable).with_name("raytuner")
RAYTUNER = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "raytuner.cli"]
T = TypeVar("T")


def until(check: Callable[[], T | None], timeout: float = 60.0, poll: float = 0.1) -> T:
    """The first true answer of ``check()``, polled until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(poll)
    raise AssertionError(f"not within {timeout} s: {check}")


def y(trial: RemoteTrial) -> dict[str, float]:
    return {"y": (trial.config["x"] - 0.3) ** 2}


@pytest.fixture
def key(server: TuningServer) -> str:
    return server.keys.create("alice")


@pytest.fixture
def tuner(server: TuningServer, key: str) -> Iterator[RemoteTuner]:
    with RemoteTuner(server.address, key, timeout=20, backoff=0.05) as client:
        yield client


def next_trial(tuner: RemoteTuner) -> RemoteTrial:
    """The next trial: asked without waiting, again and again, until one comes (a session that never hands
    one out fails here instead of hanging, as the job's ``raytuner ask`` did)."""
    return until(lambda: tuner.ask(wait=False))


def test_a_dead_jobs_trial_is_handed_out_again_and_the_session_finishes(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=[TASK], seed=1, max_evaluations=2, lease_seconds=1)
    dead = tuner.ask()  # its job dies: never told, never renewed
    alive = tuner.ask()
    assert dead is not None and alive is not None and tuner.ask(wait=False) is None  # both handed out: WAIT
    tuner.tell(alive, y(alive))
    again = next_trial(tuner)  # once the dead one's lease ended
    assert (again.task, again.config) == (dead.task, dead.config)
    assert again.trial_id not in (dead.trial_id, alive.trial_id)
    tuner.tell(again, y(again))
    assert tuner.ask() is None and tuner.finished
    session = tuner.session()
    assert session["finished"] and session["evaluations"] == 2 and session["pending"] == 0
    kinds = [e["kind"] for e in tuner.watch(from_start=True)]
    assert kinds.count("EXPIRED") == 1 and kinds[-1] == "FINISHED"


def test_a_late_tell_of_an_expired_trial_is_kept_and_counts_once(tuner: RemoteTuner, server: TuningServer) -> None:
    tuner.create_session(META, "random", tasks=[TASK], seed=2, max_evaluations=1, lease_seconds=1)
    slow = tuner.ask()
    assert slow is not None
    again = next_trial(tuner)
    assert again.config == slow.config
    late = tuner.tell(slow, y(slow))  # the slow job was alive after all: its result is kept
    assert not late.duplicate and not late.failed
    assert tuner.ask(wait=False) is None and tuner.finished  # its configuration is told: the budget is spent
    second = tuner.tell(again, {"y": 0.5})  # the replacement's result too: kept, not refused
    assert not second.duplicate and second.uid != late.uid
    assert tuner.tell(slow, y(slow)).duplicate  # a retry of the late tell: the first record
    records = {r.uid: r.raytuner.trial_id for r in server.store.evaluations("leases") if r.raytuner}
    assert records == {late.uid: slow.trial_id, second.uid: again.trial_id}  # both stored, each as told
    session = tuner.session()
    assert session["finished"] and session["evaluations"] == 2 and session["pending"] == 0
    assert tuner.ask() is None  # no third trial


def test_a_tell_of_an_expired_trial_before_anyone_took_it_over_ends_it(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=[TASK], seed=8, max_evaluations=1, lease_seconds=1)
    slow = tuner.ask()
    assert slow is not None
    until(lambda: tuner.session()["pending"] == 0)  # expired, waiting for the next ask to take it over
    assert not tuner.tell(slow, y(slow)).duplicate  # kept; its configuration is told
    assert tuner.ask() is None and tuner.finished  # not handed out again
    assert tuner.session()["evaluations"] == 1


def test_heartbeats_keep_a_trial_leased(tuner: RemoteTuner, server: TuningServer) -> None:
    tuner.create_session(META, "random", tasks=[TASK], seed=3, max_evaluations=1, lease_seconds=1)
    trial = tuner.ask()
    assert trial is not None and trial.lease_seconds == 1
    lease = tuner.heartbeat(trial)
    assert lease.status == "LEASED" and lease.seconds == 1 and time.time() < lease.ends <= time.time() + 1.5
    with tuner.heartbeats(trial, every=0.2):
        start = time.monotonic()
        while time.monotonic() - start < 3.0:  # three lease times: renewed all along, never handed out again
            assert tuner.ask(wait=False) is None and not tuner.finished
            time.sleep(0.1)
    assert not tuner.tell(trial, y(trial)).duplicate
    assert tuner.heartbeat(trial).status == "TOLD"
    assert tuner.ask() is None and tuner.finished
    kinds = [e["kind"] for e in tuner.watch(from_start=True)]
    assert "EXPIRED" not in kinds


def test_a_renewal_after_expiry_takes_the_trial_back_until_another_job_has_it(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=[TASK], seed=4, max_evaluations=1, lease_seconds=1)
    trial = tuner.ask(trial_id="job-1")
    assert trial is not None
    until(lambda: tuner.session()["pending"] == 0)  # past its lease: expired, not handed out again yet
    assert tuner.heartbeat(trial).status == "LEASED"  # its job is back in time: it is its job's again
    assert tuner.ask(trial_id="job-1") == trial  # a retried ask: the same trial, renewed
    again = next_trial(tuner)  # nobody renews it now
    assert again.config == trial.config
    lease = tuner.heartbeat(trial)
    assert lease.status == "EXPIRED" and lease.ends == 0
    with pytest.raises(ServiceError) as info:  # a retried ask of the expired trial: it is another job's now
        tuner.ask(trial_id="job-1")
    assert info.value.code == "FAILED_PRECONDITION" and "handed out again" in info.value.message
    assert not tuner.tell(again, y(again)).duplicate
    assert tuner.ask() is None and tuner.finished


def test_heartbeat_is_checked_per_key_and_per_trial(tuner: RemoteTuner, server: TuningServer) -> None:
    tuner.create_session(META, "random", tasks=[TASK], seed=5, lease_seconds=1)
    trial = tuner.ask()
    assert trial is not None
    with RemoteTuner(server.address, server.keys.create("mallory"), session_id=tuner.session_id) as other:
        with pytest.raises(ServiceError) as info:  # another key: no such session
            other.heartbeat(trial)
        assert info.value.code == "NOT_FOUND"
    for bad, code in (("never-asked", "NOT_FOUND"), ("bad id!", "INVALID_ARGUMENT")):
        with pytest.raises(ServiceError) as info:
            tuner.heartbeat(bad)
        assert info.value.code == code and "trial_id" in info.value.message
    for lease in (-1, 0.5, float("nan"), 1e9):
        with pytest.raises(ServiceError) as info:
            tuner.create_session(META, "random", tasks=[TASK], lease_seconds=lease)
        assert info.value.code == "INVALID_ARGUMENT" and info.value.message.startswith("lease_seconds:")


def test_the_default_lease_and_no_lease(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=[TASK])
    assert tuner.session()["lease_seconds"] == 300
    tuner.create_session(META, "random", tasks=[TASK], lease_seconds=0)
    trial = tuner.ask()
    assert trial is not None and trial.lease_seconds == 0
    lease = tuner.heartbeat(trial)
    assert (lease.status, lease.ends, lease.seconds) == ("LEASED", 0.0, 0.0)


def test_a_session_created_before_leases_keeps_trials_that_never_expire() -> None:
    from raytuner.service.sessions import SessionSpec

    document = {"session_id": "s1", "owner": "alice", "problem_name": "p", "engine": "random", "options": {},
                "tasks": [TASK], "seed": 0, "meta": {}}  # fmt: skip
    legacy = SessionSpec.from_document(document)  # as the sessions log holds it: no lease_seconds
    assert legacy.lease_seconds == 0  # its jobs send no heartbeats: a 300 s lease would hand long trials out again


def test_leases_and_expired_trials_survive_restarts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = TuningServer(store, port=0)
    first.start()
    key = first.keys.create("alice")
    with RemoteTuner(first.address, key, timeout=20, backoff=0.05) as tuner:
        session_id = tuner.create_session(META, "random", tasks=[TASK], seed=6, max_evaluations=2, lease_seconds=2)
        dead, alive = tuner.ask(), tuner.ask()
    assert dead is not None and alive is not None
    first.stop(grace=0)

    second = TuningServer(store, port=0)  # the trials in flight come back with a full lease from the restart
    second.start()
    try:
        with RemoteTuner(second.address, key, session_id=session_id, timeout=20, backoff=0.05) as tuner:
            assert tuner.session()["lease_seconds"] == 2  # kept in the session's spec
            with tuner.heartbeats(alive, every=0.3):  # the live job renews; the dead one does not
                assert tuner.ask(wait=False) is None
                again = next_trial(tuner)
            assert again.config == dead.config and again.trial_id != dead.trial_id
            tuner.tell(again, y(again))
            tuner.tell(alive, y(alive))
            assert tuner.ask() is None and tuner.finished
    finally:
        second.stop(grace=0)

    third = TuningServer(store, port=0)  # the expired trial stays expired: replaced, not in flight
    third.start()
    try:
        with RemoteTuner(third.address, key, session_id=session_id, timeout=20, backoff=0.05) as tuner:
            assert tuner.session()["pending"] == 0 and tuner.session()["finished"]
            assert tuner.heartbeat(dead).status == "EXPIRED"
            late = tuner.tell(dead, y(dead))  # its late result, after two restarts: kept
            assert not late.duplicate
            assert late.uid in {r.uid for r in third.store.evaluations("leases")}
            assert tuner.ask() is None and tuner.session()["evaluations"] == 3
    finally:
        third.stop(grace=0)


# -- the commands and the example job ---------------------------------------------------------------------


def test_lease_and_heartbeat_commands(server: TuningServer, key: str, tmp_path: Path) -> None:
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps(META))
    env = {"RAYTUNER_SERVER": server.address, "RAYTUNER_API_KEY": key}
    runner = CliRunner()
    create = ["session", "create", "--meta", str(meta), "--engine", "random", "--task", "t=1.0", "--lease"]
    bad = runner.invoke(main, [*create, "-1"], env=env)
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "lease_seconds" in bad.output, bad.output
    made = runner.invoke(main, [*create, "3"], env=env)
    assert made.exit_code == 0, made.output
    env["RAYTUNER_SESSION"] = made.stdout.strip()
    assert "lease_seconds: 3.0" in runner.invoke(main, ["session", "show"], env=env).stdout
    asked = runner.invoke(main, ["ask", "--trial-id", "cli-1"], env=env)
    assert "LEASE_SECONDS=3.0" in asked.stdout.splitlines()
    once = runner.invoke(main, ["heartbeat", "--trial", "cli-1"], env=env)
    assert once.exit_code == 0 and once.stdout.startswith("LEASED ")

    # --every renews until the trial is told, then ends by itself
    loop = subprocess.Popen(
        [*RAYTUNER, "heartbeat", "--trial", "cli-1", "--every", "0.2"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(7.0)  # over two lease times: the loop keeps the trial leased
        assert loop.poll() is None
        other = runner.invoke(main, ["ask", "--no-wait", "--format", "json"], env=env)  # a new trial, not this one
        assert other.exit_code == 0 and json.loads(other.stdout)["trial_id"] != "cli-1"
        runner.invoke(main, ["tell", "--trial", json.loads(other.stdout)["trial_id"], "--value", "0.4"], env=env)
        told = runner.invoke(main, ["tell", "--trial", "cli-1", "--value", "0.5"], env=env)
        assert told.exit_code == 0 and "duplicate" not in told.stdout
        out, err = loop.communicate(timeout=60)
        assert loop.returncode == 0 and out.startswith("TOLD"), err
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait()

    runner.invoke(main, ["ask", "--trial-id", "cli-2"], env=env)
    with RemoteTuner(server.address, key, session_id=env["RAYTUNER_SESSION"]) as tuner:
        until(lambda: tuner.session()["pending"] == 0)  # past its lease
    assert runner.invoke(main, ["ask", "--trial-id", "cli-3"], env=env).exit_code == 0  # takes an expired trial over
    expired = runner.invoke(main, ["heartbeat", "--trial", "cli-2"], env=env)
    assert expired.exit_code == 5 and expired.stdout.startswith("EXPIRED")


def test_a_heartbeat_loop_ends_at_once_on_sigterm_also_while_its_server_is_down(tmp_path: Path) -> None:
    """job.sh's `kill; wait` of its heartbeat must not wait out the loop's retries before the job's tell."""
    server = TuningServer(tmp_path / "store", port=0)
    server.start()
    key = server.keys.create("alice")
    with RemoteTuner(server.address, key, timeout=20, backoff=0.05) as tuner:
        tuner.create_session(META, "random", tasks=[TASK], lease_seconds=60)
        trial = tuner.ask()
        assert trial is not None
        session_id = tuner.session_id
    assert session_id is not None
    env = {**os.environ, "RAYTUNER_SERVER": server.address, "RAYTUNER_API_KEY": key, "RAYTUNER_SESSION": session_id}
    loop = subprocess.Popen(
        [*RAYTUNER, "heartbeat", "--trial", trial.trial_id, "--every", "0.2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: _catches_sigterm(loop.pid) or loop.poll() is not None)  # its first renewal is done
        assert loop.poll() is None, loop.communicate()
        server.stop(grace=0)  # its renewals now retry (for up to RAYTUNER_RETRY_FOR, 150 s by default)
        time.sleep(1.0)
        loop.send_signal(signal.SIGTERM)
        loop.communicate(timeout=10)
        assert loop.returncode == 0
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait()
        server.stop(grace=0)


def _catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a SIGTERM handler of its own (Linux's ``SigCgt`` mask)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        caught = next(line.split()[1] for line in status if line.startswith("SigCgt:"))
    return bool(int(caught, 16) & 1 << (signal.SIGTERM - 1))


def _job_env(env: dict[str, str], **extra: object) -> dict[str, str]:
    return {
        **os.environ,
        **env,
        "RAYTUNER": " ".join(RAYTUNER),
        "RAYTUNER_RETRY_FOR": "60",
        **{k: str(v) for k, v in extra.items()},
    }


def _slow_python(tmp_path: Path, seconds: float) -> Path:
    """A ``PYTHON`` for job.sh that takes ``seconds`` before it runs program.py (a long trial)."""
    wrapper = tmp_path / "slow-python"
    wrapper.write_text(f'#!/usr/bin/env bash\nsleep {seconds}\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _slow_tell(tmp_path: Path, seconds: float) -> str:
    """A ``RAYTUNER`` command for job.sh whose ``tell`` takes ``seconds`` to start (a busy node's Python)."""
    wrapper = tmp_path / "slow-tell"
    command = " ".join(f'"{part}"' for part in RAYTUNER)
    wrapper.write_text(f'#!/usr/bin/env bash\n[ "$1" = tell ] && sleep {seconds}\nexec {command} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_the_example_job_heartbeats_through_a_trial_longer_than_its_lease(
    server: TuningServer, key: str, tmp_path: Path
) -> None:
    # the job's program takes over twice the lease, and its tell over one lease to start, while another client
    # asks all along: the job's heartbeats keep its trial until the tell lands, so the other client never gets
    # it (the asking starts once the first renewal came: a busy machine may take seconds to start the
    # heartbeat's process)
    env = {"RAYTUNER_SERVER": server.address, "RAYTUNER_API_KEY": key}
    with RemoteTuner(server.address, key) as tuner:
        session = tuner.create_session(
            EXAMPLE / "meta.json", "random", tasks=[{"n": 64}], max_evaluations=1, lease_seconds=8
        )
        job = subprocess.Popen(
            ["bash", str(EXAMPLE / "job.sh")],
            env={
                **_job_env(env, RAYTUNER_SESSION=session, PYTHON=_slow_python(tmp_path, 18)),
                "RAYTUNER": _slow_tell(tmp_path, 12),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        live = server.manager.get(known(server.keys.verify(key)).key_id, session).tuning
        (trial_id,) = until(lambda: list(live.pending))  # the job runs its trial

        def deadline() -> float:
            return time.monotonic() + (live.leases.remaining(trial_id) or 0.0)

        first = deadline()
        until(lambda: deadline() > first + 1.0)  # its heartbeat has started: the lease was renewed
        taken = []
        while job.poll() is None:
            trial = tuner.ask(wait=False)
            if trial is not None:
                taken.append(trial)
                tuner.tell(trial, {"runtime": 1.0})
            time.sleep(0.2)
        output = job.stdout.read() if job.stdout else ""
        assert job.returncode == 0, output
        assert not taken, output  # renewed all along: never handed out again
        info = tuner.session()
        assert info["finished"] and info["evaluations"] == 1 and info["lease_seconds"] == 8
        assert "EXPIRED" not in [e["kind"] for e in tuner.watch(from_start=True)]
    assert not [d for d in server.ledger.read("trials") if d.get("replaces")]


def test_a_killed_jobs_trial_goes_to_the_next_job(server: TuningServer, key: str, tmp_path: Path) -> None:
    env = {"RAYTUNER_SERVER": server.address, "RAYTUNER_API_KEY": key}
    with RemoteTuner(server.address, key) as tuner:
        session = tuner.create_session(
            EXAMPLE / "meta.json", "random", tasks=[{"n": 64}], max_evaluations=2, lease_seconds=2
        )
        doomed = subprocess.Popen(
            ["bash", str(EXAMPLE / "job.sh")],
            env=_job_env(env, RAYTUNER_SESSION=session, MAX_TRIALS=1, PYTHON=_slow_python(tmp_path, 600)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            until(lambda: tuner.session()["pending"] == 1)  # it runs its trial
        finally:
            os.killpg(doomed.pid, signal.SIGKILL)  # the job, its heartbeat and its program
            doomed.wait()
        done = subprocess.run(
            ["bash", str(EXAMPLE / "job.sh")],
            env=_job_env(env, RAYTUNER_SESSION=session),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "the session is finished" in done.stdout and done.stdout.count("  runtime ") == 2, done.stdout
        info = tuner.session()
        assert info["finished"] and info["evaluations"] == 2
    replaced = [d["replaces"] for d in server.ledger.read("trials") if d.get("replaces")]
    assert len(replaced) == 1


def test_the_python_job_renews_while_its_objective_runs(tuner: RemoteTuner) -> None:
    tuner.create_session(META, "random", tasks=[TASK], seed=7, max_evaluations=2, lease_seconds=1)
    calls = []

    def slow(config: dict[str, Any], task: dict[str, Any], fidelity: float | None) -> dict[str, float]:
        calls.append(config)
        time.sleep(2.5)  # over two lease times
        return {"y": config["x"]}

    thread = threading.Thread(target=tuner.run, args=(slow,))
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert len(calls) == 2 and tuner.finished
    assert "EXPIRED" not in [e["kind"] for e in tuner.watch(from_start=True)]


def test_a_grantee_cannot_take_a_tells_uid_before_the_tell(tmp_path: Path) -> None:
    """A grantee may append to the problem, and may know a session's id and a job's trial id (an array index):
    a record it uploads under the uid a tell would take must not make that tell a silent duplicate."""
    import uuid

    server = TuningServer(tmp_path / "store", port=0)
    server.start()
    try:
        alice, bob = server.keys.create("alice"), server.keys.create("bob")
        with RemoteTuner(server.address, alice, timeout=20) as tuner:
            session_id = tuner.create_session(META, "random", tasks=[TASK], seed=3)
            tuner.grant_access("leases", known(server.keys.verify(bob)).key_id)
            trial = tuner.ask(trial_id="array-7")
            assert trial is not None
            squat = FunctionEvaluation.create(TASK, trial.config, {"y": -1e9}).to_dict()
            for guess in (f"raytuner:{session_id}/array-7", f"raytuner:{session_id}/{trial.trial_id}"):
                squat["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, guess))  # the uid before sessions had salts
                with RemoteTuner(server.address, bob, timeout=20) as grantee:
                    assert grantee.upload_evaluations("leases", [squat]) == 1
            told = tuner.tell(trial, {"y": 0.25})
            assert not told.duplicate
            mine = [r for r in server.store.evaluations("leases") if r.raytuner and r.raytuner.session_id == session_id]
            assert [r.evaluation_result for r in mine] == [{"y": 0.25}]
    finally:
        server.stop(grace=0)
