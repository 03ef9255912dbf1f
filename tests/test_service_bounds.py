"""Bounded work per key: a server's caps on session options, the time budget of an Ask's fits, SIGTERM mid-fit.

Each test drives a real server on loopback (a ``raytuner serve`` process for
SIGTERM). Wall-clock assertions are generous (the machine is shared); the
tight bounds are the server's own (its limits, a fit report's ``timed_out``).
"""

from __future__ import annotations

import math
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from raytuner.cli import main
from raytuner.client.channel import ServiceError
from raytuner.client.remote import RemoteTuner
from raytuner.errors import InvalidInputError
from raytuner.models import LCM, LCMOptions, TrainingData
from raytuner.models.budget import fit_budget
from raytuner.models.executors import InlineExecutor, ProcessExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.service.bounds import SessionLimits
from raytuner.service.server import TuningServer
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM

SCRIPT = Path(sys.executable).with_name("raytuner")
RAYTUNER = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "raytuner.cli"]
#: What one key may ask for to keep a server's CPUs for minutes: every record of a large problem, many long starts.
HEAVY = {"n_initial": 2, "lcm": {"n_starts": 8, "max_iterations": 500, "screen": 16, "fit_limit": 1000}}
HEAVY_RECORDS = 1000


def meta(name: str, history: bool = False) -> dict[str, Any]:
    return {
        "tuning_problem_name": name,
        "problem_space": DEMO_PROBLEM,
        **({"load_func_eval": "yes"} if history else {}),
    }


def upload_history(tuner: RemoteTuner, name: str, count: int = HEAVY_RECORDS) -> None:
    rng = random.Random(0)
    records = []
    for _ in range(count):
        x = rng.random()
        records.append(FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": (x - 0.3) ** 2 + 0.05 * rng.random()}))
    tuner.upload_evaluations(name, records)


def heavy_session(tuner: RemoteTuner) -> str:
    """A session whose every Ask fits an LCM of 1000 records, 8 starts of 500 iterations (minutes unbounded)."""
    upload_history(tuner, "heavy")
    return tuner.create_session(meta("heavy", history=True), "mla", tasks=[{"t": 1.0}], options=HEAVY, seed=1)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TuningServer]:
    server = TuningServer(tmp_path / "store", port=0)
    server.start()
    yield server
    server.stop(grace=0)


def refusal(tuner: RemoteTuner, options: dict[str, Any], tasks: int = 1) -> str:
    with pytest.raises(ServiceError) as info:
        tuner.create_session(meta("capped"), "mla", tasks=[{"t": float(t)} for t in range(tasks)], options=options)
    assert info.value.code == "INVALID_ARGUMENT"
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_session_asking_for_more_than_the_limits_is_refused_naming_the_limit(server: TuningServer) -> None:
    tuner = RemoteTuner(server.address, server.keys.create("alice"), retries=0)
    message = refusal(tuner, {"lcm": {"n_starts": 40}})
    assert "options.lcm.n_starts: 40 is over this server's limit starts=8" in message
    assert "options.lcm.fit_limit: null (no limit) is over this server's limit fit_samples=1000" in refusal(
        tuner, {"lcm": {"fit_limit": None}}
    )
    assert "options.lcm.timeout: 600 is over this server's limit fit_seconds=2" in refusal(
        tuner, {"lcm": {"timeout": 600}}
    )
    assert "options.search_candidates: 1000000 is over this server's limit candidates=20000" in refusal(
        tuner, {"search_candidates": 10**6}
    )
    assert "options.n_initial: 5000 is over this server's limit initial=200" in refusal(tuner, {"n_initial": 5000})
    assert "options.lcm.max_iterations: 100000 is over" in refusal(tuner, {"options": {"max_iterations": 10**5}})
    assert "tasks_json: 101 tasks is over this server's limit tasks=100" in refusal(tuner, {}, tasks=101)
    assert tuner.sessions() == []  # nothing refused was stored
    # at the limits, and below them, a session is made
    tuner.create_session(meta("capped"), "mla", tasks=[{"t": 1.0}], options={"lcm": {"n_starts": 8, "timeout": 2}})
    assert len(tuner.sessions()) == 1


def test_the_limits_are_the_servers_to_set(tmp_path: Path) -> None:
    with TuningServer(tmp_path / "store", port=0, limits=SessionLimits(starts=2, candidates=100)) as server:
        tuner = RemoteTuner(server.address, server.keys.create("alice"), retries=0)
        assert "starts=2" in refusal(tuner, {"lcm": {"warm_starts": 3}})
        assert "options.candidates: a list of 101 is over this server's limit candidates=100" in refusal(
            tuner, {"candidates": [{"x": 0.5}] * 101}
        )
        options = {"lcm": {"n_starts": 2}, "search_candidates": 100}
        tuner.create_session(meta("capped"), "mla", tasks=[{"t": 1.0}], options=options)


def test_limits_given_wrong_are_refused_in_one_line() -> None:
    with pytest.raises(InvalidInputError, match=r"^--limit: unknown limit 'stars' \(allowed: fit_seconds, starts"):
        SessionLimits.parse(["stars=3"])
    with pytest.raises(InvalidInputError, match=r"^--limit starts: 0 is not a positive integer$"):
        SessionLimits.parse(["starts=0"])
    with pytest.raises(InvalidInputError, match=r"^--limit fit_seconds: 'soon' is not a positive number$"):
        SessionLimits.parse(["fit_seconds=soon"])
    result = CliRunner().invoke(main, ["serve", "--store", "/nonexistent/x", "--limit", "starts=-1"])
    assert result.exit_code == 2, result.output
    assert "--limit starts: -1 is not a positive integer" in result.output
    assert "Traceback" not in result.output


def test_a_fit_budget_stops_every_fit_inside_it() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((400, 2))
    data = TrainingData([X], [np.sin(6 * X[:, 0]) + X[:, 1]])
    model = LCM(LCMOptions(n_starts=4, max_iterations=10_000, timeout=120.0))
    began = time.perf_counter()
    with fit_budget(0.5):
        first = model.fit(data, seed=0, executor=InlineExecutor())
        second = model.fit(data, seed=1, executor=InlineExecutor())  # starts past the budget: one step, no screening
    took = time.perf_counter() - began
    assert first.report.timed_out and second.report.timed_out
    assert all(start.get("timed_out") for start in second.report.starts)
    assert took < 30, took  # bounded by the budget plus one likelihood evaluation per start (generous under load)


def test_a_fit_started_while_another_runs_gets_pool_workers_at_once() -> None:
    pool = ProcessExecutor(4, per_map=2)
    try:
        pool.warm(wait=True)  # every worker started
        done: list[float] = []

        def sleep_on_every_worker() -> None:
            pool.map(time.sleep, [6.0] * 4, timeout=120)
            done.append(time.monotonic())

        busy = threading.Thread(target=sleep_on_every_worker)
        busy.start()
        time.sleep(0.5)  # its first two items hold two workers; two more wait for them, not in the pool
        assert pool.map(math.sqrt, [4.0, 9.0], timeout=120) == [2.0, 3.0]
        answered = time.monotonic()
        busy.join()
        # first come, first served, these would have waited behind the first map's items (6 s, twice)
        assert done and answered < done[0]
    finally:
        pool.shutdown()


def test_one_keys_heavy_ask_is_bounded_and_does_not_stall_another_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with TuningServer(tmp_path / "store", port=0, limits=SessionLimits(fit_seconds=2.0)) as server:
        heavy = RemoteTuner(server.address, server.keys.create("heavy"), retries=0, timeout=300)
        light = RemoteTuner(server.address, server.keys.create("light"), retries=0, timeout=300)
        heavy_session(heavy)
        light.create_session(meta("light"), "mla", tasks=[{"t": 1.0}], options={"n_initial": 3}, seed=2)
        for _ in range(6):  # past its initial design: each of its Asks fits a model too
            trial = light.ask()
            assert trial is not None
            light.tell(trial, {"y": (trial.config["x"] - 0.3) ** 2})
        took: list[Any] = []

        def ask_heavy() -> None:
            began = time.perf_counter()
            try:
                took.append(heavy.ask() and time.perf_counter() - began)
            except Exception as exc:  # reported by the assertion below
                took.append(exc)

        worker = threading.Thread(target=ask_heavy)
        worker.start()
        latencies: list[float] = []
        while worker.is_alive() or not latencies:
            began = time.perf_counter()
            trial = light.ask()
            assert trial is not None
            light.tell(trial, {"y": (trial.config["x"] - 0.3) ** 2})
            latencies.append(time.perf_counter() - began)
        worker.join()
    assert isinstance(took[0], float), took
    assert any("time limit" in r.getMessage() for r in caplog.records)  # the heavy fit stopped at the budget
    # unbounded, this Ask fits for minutes; with the 2 s budget it ends in a few seconds (generous under load)
    assert took[0] < 30, took
    print(f"heavy Ask {took[0]:.2f} s; the other key's ask+tell while it ran: max {max(latencies):.2f} s")
    assert max(latencies) < 10, latencies


def test_serve_exits_within_seconds_of_sigterm_mid_fit_keeping_every_told_record(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    runner = CliRunner()
    key = runner.invoke(main, ["keys", "create", "--store", store, "--name", "bob"]).stdout.strip()
    # a fit budget of 5 minutes: the Ask below is still fitting when SIGTERM comes
    process = subprocess.Popen(
        [*RAYTUNER, "serve", "--store", store, "--port", "0", "--limit", "fit_seconds=300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        found = re.search(r"on (127\.0\.0\.1:\d+) ", line)
        assert found, line
        tuner = RemoteTuner(found.group(1), key, retries=0, timeout=600)
        session = heavy_session(tuner)
        tuner.create_session(meta("told"), "random", tasks=[{"t": 1.0}], seed=3)
        trial = tuner.ask()
        assert trial is not None
        uid = tuner.tell(trial, {"y": 0.25}).uid  # acknowledged: it must survive the stop
        fitting = RemoteTuner(found.group(1), key, session_id=session, retries=0, timeout=600)
        asked = threading.Thread(target=lambda: pytest.raises(ServiceError, fitting.ask), daemon=True)
        asked.start()
        time.sleep(3.0)  # the Ask is in its fit (minutes of work)
        assert asked.is_alive()
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        stopped = time.monotonic() - began
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    print(f"serve exited {stopped:.2f} s after SIGTERM mid-fit")
    assert code == 0
    assert stopped < 15, stopped  # it exits by itself within EXIT_WITHIN (4 s); generous under load
    records = JsonStore(store).evaluations("told")
    assert [r.uid for r in records] == [uid]
