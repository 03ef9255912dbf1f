"""GPTune-style reverse communication over a store directory (issue 20, part 4): ``raytuner rci next`` / ``report``.

Every call is a process of its own (here: a fresh command or a fresh ``RciSession``; the lock test runs
real processes): the session lives in the store directory, a trial not reported is handed out again,
a report is in the store when the command returns, a retried report is a duplicate, and calls on one
store wait for each other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from record_helpers import provenance

from raytuner.cli import main
from raytuner.engines import RandomSearch
from raytuner.problem.space import ProblemSpace
from raytuner.service.rci import RciSession
from raytuner.service.sessions import SessionManager
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo

META = {"tuning_problem_name": "rcidemo", "problem_space": DEMO_PROBLEM}


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    path = tmp_path / "meta.json"
    path.write_text(json.dumps({**META, "historydb_path": str(tmp_path / "db")}))
    return path


def test_a_job_loop_over_the_command_line(meta: Path, tmp_path: Path) -> None:
    first = cli(
        "rci",
        "next",
        "--meta",
        str(meta),
        "--engine",
        "mla",
        "--option",
        "n_initial=2",
        "--task",
        "t=1.0",
        "--max-evaluations",
        "4",
        "--seed",
        "3",
        "--format",
        "json",
    )
    assert first.exit_code == 0, first.output
    seen = []
    trial = json.loads(first.stdout)
    while trial["status"] == "TRIAL":
        again = json.loads(cli("rci", "next", "--meta", str(meta), "--format", "json").stdout)
        assert again["trial_id"] == trial["trial_id"]  # not reported: handed out again
        y = demo(trial["config"]["x"], trial["task"]["t"])
        told = cli("rci", "report", "--meta", str(meta), "--trial", trial["trial_id"], "--value", str(y), "--json")
        assert told.exit_code == 0 and json.loads(told.stdout)["duplicate"] is False
        seen.append((trial["trial_id"], json.loads(told.stdout)["uid"]))
        step = cli("rci", "next", "--meta", str(meta), "--format", "json")
        trial = json.loads(step.stdout)
    assert step.exit_code == 3 and trial == {"status": "FINISHED"}
    stored = JsonStore(tmp_path / "db").evaluations("rcidemo")  # in the store, in order
    assert [r.uid for r in stored] == [uid for _, uid in seen] and len(seen) == 4
    assert [provenance(r).trial_id for r in stored] == [tid for tid, _ in seen]
    assert len(JsonStore(tmp_path / "db").models("rcidemo")) == 2  # the MLA fitted twice


def test_a_report_retried_and_a_failure(tmp_path: Path) -> None:
    store = str(tmp_path / "db")
    trial = RciSession(store, meta=META, engine="random", tasks=[{"t": 2.0}], seed=5).next()
    assert trial is not None
    record, duplicate = RciSession(store).report(trial.trial_id, {"y": 1.5})  # found by the trial id
    assert (duplicate, RciSession(store, "rcidemo").report(trial.trial_id, {"y": 1.5})[1]) == (False, True)
    conflict = cli("rci", "report", "--store", store, "--trial", trial.trial_id, "--value", "2.5")
    assert conflict.exit_code == 1 and "told before with another result" in conflict.output
    second = RciSession(store, "rcidemo").next()
    assert second is not None and second.trial_id != trial.trial_id
    failed = cli("rci", "report", "--store", store, "--trial", second.trial_id, "--failed", "segfault", "--json")
    assert json.loads(failed.stdout)["failed"] is True
    missing = cli("rci", "report", "--store", str(tmp_path / "typo"), "--trial", second.trial_id, "--value", "1")
    assert missing.exit_code == 1 and "no trial" in missing.output and not (tmp_path / "typo").exists()
    assert [r.status for r in JsonStore(store).evaluations("rcidemo")] == ["ok", "failed"]


def test_the_session_starts_from_the_stored_history(tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "db")
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    earlier = TuningSession(problem, RandomSearch(problem, [{"t": 1.0}], seed=1), store, "rcidemo")
    for _ in range(3):
        trial = earlier.ask()
        earlier.tell(trial, {"y": demo(trial.config["x"], 1.0)})
    for load, replayed in (("yes", 3), ("no", 0)):
        rci = RciSession(
            tmp_path / "db",
            f"run-{load}",
            meta={**META, "load_func_eval": load},
            engine="random",
            tasks=[{"t": 1.0}],
            seed=2,
        )
        rci.next()
        session = SessionManager(JsonStore(tmp_path / "db")).open(rci.session_id)
        assert session is not None and len(session.tuning.records) == replayed


@pytest.mark.parametrize(
    "args, message",
    [
        (["rci", "next", "--store", "{db}"], "name: give the session's name"),
        (["rci", "next", "--store", "{db}", "--name", "x"], "meta: no RCI session 'x'"),
        (
            ["rci", "next", "--store", "mongodb://127.0.0.1/x", "--meta", "{meta}", "--engine", "random"],
            "the RCI keeps its session in a store directory",
        ),
        (["rci", "next", "--meta", "{meta}", "--engine", "nope"], "engine: unknown engine 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(meta: Path, tmp_path: Path, args: list[str], message: str) -> None:
    result = cli(*[a.format(db=tmp_path / "db", meta=meta) for a in args])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "db").exists()


def test_two_jobs_at_once_get_one_trial(meta: Path, tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "raytuner.cli",
        "rci",
        "next",
        "--meta",
        str(meta),
        "--engine",
        "random",
        "--task",
        "t=1.0",
        "--format",
        "json",
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    jobs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    outputs = [job.communicate(timeout=120) for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], outputs
    trials = [json.loads(out)["trial_id"] for out, _ in outputs]
    assert trials[0] == trials[1]  # one job at a time: the same trial
    assert len(list(JsonStore(tmp_path / "db").ledger().read("trials"))) == 1
