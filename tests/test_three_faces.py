"""One scenario through the three faces: the same seed leaves the same records, and a kill loses nothing.

The faces are a :class:`~raytuner.session.tuning_session.TuningSession` driven in Python,
``tune.run`` with a :class:`~raytuner.searchers.RandomSearcher` on a real
local Ray, and the gRPC service driven by a
:class:`~raytuner.client.RemoteTuner`. All three go through the same trial
lifecycle (the session's), so with one seed they store the same evaluations
in the same order. A ``kill -9`` of a process in the middle of a session
(a trial asked and not told) loses no acknowledged evaluation, and the
resumed session takes the trial in flight back. The service's own kill -9
tests are in ``test_service_reliability.py``, the stores' in
``test_json_store.py`` and ``test_mongo_store.py``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import IO, Any

import pytest
from record_helpers import known, provenance

from raytuner.engines import RandomSearch
from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 6.0}]
SEED = 7
TRIALS = 6
NAME = "three_faces"
#: How long the killed session's process may take to print its next line (it starts Python and imports).
LINE_TIMEOUT_S = 120


def objective(task: dict[str, Any], config: dict[str, Any]) -> float:
    return (config["x"] - 0.1 * task["t"]) ** 2


def _stored(directory: Path) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]]:
    with JsonStore(directory) as store:
        return [(r.task_parameter, r.tuning_parameter, r.evaluation_result, r.status) for r in store.evaluations(NAME)]


def _through_a_session(directory: Path) -> None:
    from raytuner.session.tuning_session import TuningSession

    with JsonStore(directory) as store:
        session = TuningSession(PROBLEM, RandomSearch(PROBLEM, TASKS, seed=SEED), store, NAME)
        for _ in range(TRIALS):
            trial = session.ask()
            session.tell(trial.trial_id, {"y": objective(trial.task, trial.config)})


def _through_ray(directory: Path) -> None:
    from ray import tune
    from raytuner.searchers import RandomSearcher

    def trainable(config: dict[str, Any]) -> None:
        tune.report({"y": (config["x"] - 0.1 * config["t"]) ** 2})

    searcher = RandomSearcher(PROBLEM, TASKS, store=str(directory), problem_name=NAME, seed=SEED)
    tune.run(
        trainable,
        search_alg=searcher,
        num_samples=TRIALS,
        max_concurrent_trials=1,
        reuse_actors=True,
        verbose=0,
        storage_path=str(directory.parent / "ray_results"),
    )


def _through_the_service(server: Any) -> None:
    from raytuner.client import RemoteTuner

    with RemoteTuner(server.address, server.keys.create("alice"), timeout=20, backoff=0.05) as tuner:
        tuner.create_session(
            {"tuning_problem_name": NAME, "problem_space": DEMO_PROBLEM}, "random", tasks=TASKS, seed=SEED
        )
        for _ in range(TRIALS):
            trial = known(tuner.ask())
            tuner.tell(trial, {"y": objective(trial.task, trial.config)})


@pytest.mark.slow
def test_the_three_faces_leave_the_same_records(tmp_path: Path, server: Any, local_ray: Any) -> None:
    _through_a_session(tmp_path / "session")
    _through_ray(tmp_path / "ray")
    _through_the_service(server)
    session, ray_run, service = (
        _stored(tmp_path / "session"),
        _stored(tmp_path / "ray"),
        _stored(Path(server.store.directory)),
    )
    assert len(session) == TRIALS and {status for *_, status in session} == {"ok"}
    assert len({(str(task), config["x"]) for task, config, _, _ in session}) == TRIALS  # six distinct trials
    assert ray_run == session
    assert service == session


SESSION_SCRIPT = textwrap.dedent("""
    import sys, time
    from raytuner.session.tuning_session import TuningSession
    from raytuner.problem.space import ProblemSpace
    from raytuner.store import JsonStore
    from raytuner.engines import RandomSearch
    from raytuner.test_problems import DEMO_PROBLEM

    problem = ProblemSpace.parse(DEMO_PROBLEM)
    store = JsonStore(sys.argv[1])
    session = TuningSession(problem, RandomSearch(problem, [{"t": 1.0}, {"t": 6.0}], seed=7), store, "three_faces",
                            session_id="killed-session")
    for n in range(int(sys.argv[2])):
        trial = session.ask()
        print("ASKED", trial.trial_id, flush=True)
        session.tell(trial.trial_id, {"y": (trial.config["x"] - 0.1 * trial.task["t"]) ** 2})
        print("TOLD", trial.trial_id, flush=True)
    trial = session.ask()
    print("ASKED", trial.trial_id, flush=True)
    time.sleep(600)                        # the trial is running when the process is killed
""")


@pytest.mark.slow
def test_a_killed_session_loses_nothing_and_takes_its_trial_in_flight_back(tmp_path: Path) -> None:
    from raytuner.session.tuning_session import TuningSession

    told_before_kill = 4
    proc = subprocess.Popen(
        [sys.executable, "-c", SESSION_SCRIPT, str(tmp_path), str(told_before_kill)], stdout=subprocess.PIPE, text=True
    )
    events: list[tuple[str, str]] = []
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None

    def pump(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, args=(proc.stdout,), daemon=True).start()
    try:
        while len(events) < 2 * told_before_kill + 1:
            line = lines.get(timeout=LINE_TIMEOUT_S)  # a stalled child fails the test, never hangs it
            kind, trial_id = line.split()
            events.append((kind, trial_id))
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    acknowledged = [trial_id for kind, trial_id in events if kind == "TOLD"]
    in_flight = events[-1][1]

    with JsonStore(tmp_path) as store:
        stored = [r.raytuner.trial_id for r in store.evaluations(NAME) if r.raytuner is not None]
        assert stored == acknowledged
        resumed = TuningSession.resume(
            PROBLEM,
            RandomSearch(PROBLEM, TASKS, seed=SEED),
            store,
            NAME,
            session_only=True,
            session_id="killed-session",
        )
        assert list(resumed.pending) == [in_flight]
        trial = resumed.pending[in_flight]
        record = resumed.tell(in_flight, {"y": objective(trial.task, trial.config)})
        assert [provenance(r).trial_id for r in store.evaluations(NAME)] == [*acknowledged, in_flight]
        assert record.status == "ok"
