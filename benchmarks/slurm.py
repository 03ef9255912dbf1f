"""The remote-jobs example under a real Slurm: array jobs against ``raytuner serve``, some cancelled mid-trial.

``python -m benchmarks slurm --out DIR [--quick]`` starts a one-node Slurm
(:class:`~raytuner.testing.slurm.LocalSlurm`, root and Debian's ``slurm-wlm``
and ``munge`` needed) and a real ``raytuner serve`` on loopback, creates a
session with the CLI and submits ``sbatch --array=0-31
examples/remote_hpc_job/job.sh`` (each array task asks and tells until the
session has its ``max_evaluations``). It runs twice: once with no
cancellation, once with 4 array tasks killed while their program runs
(``scancel --batch --signal=KILL`` mid-trial: they hold a trial and never
tell it, as on a node failure). The second run needs
trial leases (``raytuner session create --lease``): an expired trial is
handed out again, so the session still finishes. Where leases are absent
that run is reported as skipped, with the reason.

Per run: ``trials_lost`` (acknowledged tells, as the jobs' output shows
them, missing from the history), ``duplicates`` (records of a trial beyond
its first), ``seconds_to_finish`` (from ``sbatch`` to the session's last
evaluation); and their ratio ``cancelled / uncancelled``.

:func:`run_array` is the one run, shared with the test suite
(``tests/test_slurm_jobs.py``). A program "held" mid-trial is the
example's program behind a wrapper (``PYTHON``) that, for the array tasks to
cancel, waits until ``scancel`` ends it: the cancellation then always lands
while the job holds a trial.

Example:
    >>> from benchmarks import run_benchmark
    >>> run_benchmark("slurm", Path("bench_out/slurm"), quick=True)   # doctest: +SKIP
    {'runs': {'uncancelled': {...}, 'cancelled': {...}}, ...}
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from benchmarks.report import finish_run, goal_lines, machine_at_start, markdown_table, verdict
from raytuner.errors import RaytunerError
from raytuner.problem.records import FunctionEvaluation
from raytuner.testing.mongod import death_signal_prefix
from raytuner.testing.slurm import LocalSlurm

__all__ = [
    "ArrayRun",
    "Service",
    "Told",
    "leases_supported",
    "raytuner_command",
    "run",
    "run_array",
    "wait_for",
    "NO_LEASES",
]

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "remote_hpc_job"
PROBLEM = "blocked_matmul"  # examples/remote_hpc_job/meta.json's problem
#: The skip reason where ``raytuner session create`` has no ``--lease`` option.
NO_LEASES = "needs trial leases (`raytuner session create --help` shows no --lease)"
_TRIAL = re.compile(r"^trial (\S+): (.*)$")
_RUNTIME = re.compile(r"^  runtime (\S+) s$")
_UID = re.compile(r"^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")


def raytuner_command() -> list[str]:
    """The ``raytuner`` command of this interpreter: its console script if installed beside it, else ``-m``.

    >>> Path(raytuner_command()[-1]).name in ("raytuner", "raytuner.cli")
    True
    """
    script = Path(sys.executable).with_name("raytuner")
    return [str(script)] if script.exists() else [sys.executable, "-m", "raytuner.cli"]


def leases_supported() -> bool:
    """Whether ``raytuner session create`` takes ``--lease`` (trial leases: an expired trial is handed out again)."""
    done = subprocess.run(
        [*raytuner_command(), "session", "create", "--help"], capture_output=True, text=True, check=False
    )
    return "--lease" in done.stdout


class Service:
    """A real ``raytuner serve`` on a free loopback port over a JSON store, with one API key made beforehand.

    The server stops with :meth:`stop` (SIGTERM), and with this process should it die.

    Args:
        store: the store's directory.
        log_path: where the server's output goes.
        timeout: seconds to wait for the server to listen.

    Example:
        >>> with Service(Path("store"), Path("serve.log")) as service:  # doctest: +SKIP
        ...     service.address.startswith("127.0.0.1:")
        True
    """

    def __init__(self, store: Path, log_path: Path, timeout: float = 120.0) -> None:
        command = raytuner_command()
        self.store = store
        self.key = _cli([*command, "keys", "create", "--store", str(store), "--name", "jobs"]).strip()
        self._log = open(log_path, "ab")  # closed in stop()
        self.process = subprocess.Popen(
            [*death_signal_prefix(), *command, "serve", "--store", str(store), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.address = self._address(log_path, timeout)

    def _address(self, log_path: Path, timeout: float) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        found = re.search(r" on (127\.0\.0\.1:\d+) ", lines[0]) if lines else None
        if found is None:
            self.stop()
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RaytunerError(f"raytuner serve did not start within {timeout:g} s; its log ends:\n{tail}")
        return found.group(1)

    @property
    def env(self) -> dict[str, str]:
        """``RAYTUNER_SERVER`` and ``RAYTUNER_API_KEY`` for a client of this server."""
        return {"RAYTUNER_SERVER": self.address, "RAYTUNER_API_KEY": self.key}

    def stop(self) -> None:
        """SIGTERM the server and wait for it (SIGKILL after 30 s)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()

    def __enter__(self) -> Service:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _cli(args: Sequence[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False)
    if done.returncode != 0:
        raise RaytunerError(f"{shlex.join(args)} exited with status {done.returncode}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Handed:
    """A trial an array task was handed, as its output shows it: the task, trial id and configuration."""

    task: int
    trial_id: str
    config: str  # job.sh's words: "n=64 block=9 loop_order=jik"


@dataclass(frozen=True)
class Told(Handed):
    """An acknowledged tell as a job's output shows it: the trial, its runtime (``None``: failed), the record's uid."""

    runtime: float | None
    uid: str


@dataclass
class ArrayRun:
    """What one :func:`run_array` saw: the jobs' tells, the history's records of the session, and timings.

    ``handed_out`` lists the trials the array tasks were handed (from their
    ``trial ID: CONFIG`` lines), ``cancelled`` the one each cancelled task
    held; ``jobs`` are the array tasks' final ``scontrol show job`` entries.
    """

    session_id: str
    tasks: int
    max_evaluations: int
    seconds_to_finish: float
    told: list[Told]
    records: list[FunctionEvaluation]
    handed_out: list[Handed]
    jobs: list[dict[str, str]]
    cancelled: list[Handed] = field(default_factory=list)

    @property
    def lost(self) -> list[Told]:
        """The acknowledged tells whose record (uid, trial id and runtime alike) the history lacks."""
        stored = {(r.uid, _trial_id(r), r.evaluation_result.get("runtime")) for r in self.records}
        return [t for t in self.told if (t.uid, t.trial_id, t.runtime) not in stored]

    @property
    def duplicates(self) -> int:
        """Records of the session beyond one per trial id (and per uid)."""
        return max(len(self.records) - len({_trial_id(r) for r in self.records}), len(self.records) - len(self.uids))

    @property
    def uids(self) -> set[str]:
        """The uids of the session's records."""
        return {r.uid for r in self.records}

    @property
    def unexplained(self) -> list[FunctionEvaluation]:
        """Records of the session that no job's output shows as told."""
        told = {t.uid for t in self.told}
        return [r for r in self.records if r.uid not in told]

    @property
    def handed_out_again(self) -> list[Handed]:
        """The cancelled tasks' trials whose configuration another array task was handed and told."""
        return [
            held for held in self.cancelled if any(t.config == held.config and t.task != held.task for t in self.told)
        ]

    def summary(self) -> dict[str, Any]:
        """The run's figures: ``trials_lost``, ``duplicates``, ``seconds_to_finish`` and counts."""
        return {
            "array_tasks": self.tasks,
            "max_evaluations": self.max_evaluations,
            "cancelled_tasks": len(self.cancelled),
            "records": len(self.records),
            "trials_lost": len(self.lost),
            "duplicates": self.duplicates,
            "records_no_job_told": len(self.unexplained),
            "cancelled_trials_handed_out_again": len(self.handed_out_again),
            "seconds_to_finish": round(self.seconds_to_finish, 2),
        }


def _trial_id(record: FunctionEvaluation) -> str | None:
    return record.raytuner.trial_id if record.raytuner is not None else None


def _hold_wrapper(work: Path, python: str) -> Path:
    """A ``PYTHON`` for job.sh that, in the array tasks listed in ``$HOLD_TASKS``, waits to be cancelled."""
    script = work / "held-python"
    script.write_text(
        "#!/bin/sh\n"
        "# the array tasks in $HOLD_TASKS hold their first trial until scancel ends them\n"
        'case " $HOLD_TASKS " in\n'
        '  *" $SLURM_ARRAY_TASK_ID "*) touch "$HOLD_DIR/$SLURM_ARRAY_TASK_ID"; exec sleep 3600;;\n'
        "esac\n"
        f'exec {shlex.quote(python)} "$@"\n'
    )
    script.chmod(0o755)
    return script


def _output(work: Path, task: int) -> list[str]:
    path = work / "out" / f"{task}.out"
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []


def _parse(lines: Sequence[str], task: int) -> tuple[list[Handed], list[Told]]:
    """The trials ``task`` was handed, and its acknowledged tells (the uid ``raytuner tell`` printed).

    A tell after a ``  runtime R s`` line told R; one without, a failure.
    """
    handed: list[Handed] = []
    told: list[Told] = []
    runtime: float | None = None
    open_trial = False
    for line in lines:
        if found := _TRIAL.match(line):
            handed.append(Handed(task, found.group(1), found.group(2)))
            runtime, open_trial = None, True
        elif found := _RUNTIME.match(line):
            runtime = float(found.group(1))
        elif (found := _UID.match(line)) and open_trial:
            told.append(Told(task, handed[-1].trial_id, handed[-1].config, runtime, found.group(1)))
            runtime, open_trial = None, False
    return handed, told


def wait_for(what: str, ready: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
    """Call ``ready()`` every ``interval`` seconds until it is true; its value.

    Args:
        what: what is awaited, for the error.
        ready: the check.
        timeout: seconds before :class:`TimeoutError` naming ``what``.
        interval: seconds between checks (default 0.2).

    >>> wait_for("one", lambda: 1, timeout=1)
    1
    """
    deadline = time.monotonic() + timeout
    while not (value := ready()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(interval)
    return value


def run_array(
    slurm: LocalSlurm,
    work: Path,
    *,
    tasks: int,
    max_evaluations: int,
    cancel: Sequence[int] = (),
    lease: float | None = None,
    n: int = 64,
    timeout: float = 600.0,
) -> ArrayRun:
    """Run ``sbatch --array=0-(tasks-1) job.sh`` for one session of ``max_evaluations`` against ``raytuner serve``.

    The server and its store live in ``work``; so do the jobs' outputs
    (``work/out/TASK.out``). The array tasks in ``cancel`` are killed
    (``scancel --batch --signal=KILL``) while their first trial's program
    runs: they must be among the first to start (the node's slots). Returns
    when the session has its evaluations and every array task has ended,
    with the history's records read after the server stopped.

    Args:
        slurm: a started cluster.
        work: a directory of its own for this run.
        tasks: array tasks (each asks and tells until the session is finished).
        max_evaluations: the session's budget.
        cancel: array tasks to cancel mid-trial (needs leases to finish).
        lease: the session's trial lease in seconds (``--lease``; default ``None``: not given).
        n: the program's matrix size (the session's one task).
        timeout: seconds for the whole run before :class:`TimeoutError`.
    """
    from raytuner.client.remote import RemoteTuner
    from raytuner.store import JsonStore

    deadline = time.monotonic() + timeout
    (work / "out").mkdir(parents=True)
    (work / "held").mkdir()
    command = raytuner_command()
    with Service(work / "store", work / "serve.log") as service:
        create = [*command, "session", "create", "--meta", str(EXAMPLE / "meta.json"), "--engine", "random"]
        create += ["--task", f"n={n}", "--max-evaluations", str(max_evaluations)]
        create += ["--lease", f"{lease:g}"] if lease is not None else []
        session_id = _cli(create, service.env).strip()
        job_env = {
            **service.env,
            "RAYTUNER_SESSION": session_id,
            "RAYTUNER": shlex.join(command),
            "PYTHON": str(_hold_wrapper(work, sys.executable)),
            "HOLD_TASKS": " ".join(str(task) for task in cancel),
            "HOLD_DIR": str(work / "held"),
        }
        started = time.monotonic()
        job = slurm.sbatch(
            [
                f"--array=0-{tasks - 1}",
                "--cpus-per-task=1",  # job.sh asks for 4; a test node's slots are few
                f"--output={work / 'out' / '%a.out'}",
                f"--error={work / 'out' / '%a.err'}",
                str(EXAMPLE / "job.sh"),
            ],
            env=job_env,
            cwd=ROOT,
        )
        cancelled: list[Handed] = []
        for task in cancel:  # each held task is mid-trial once its marker exists
            wait_for(f"array task {task} to start its trial", (work / "held" / str(task)).exists, timeout)
            cancelled.append(_parse(_output(work, task), task)[0][-1])
            # the job script first, at once (a node failure, the OOM killer): it has no chance to tell. A plain
            # scancel ends the program's step first, and job.sh may then tell the trial failed before it is killed.
            slurm.command(["scancel", "--batch", "--signal=KILL", f"{job}_{task}"])
            log.info("killed array task %d holding trial %s", task, cancelled[-1].trial_id)
        with RemoteTuner(service.address, service.key, session_id=session_id, timeout=60) as client:
            wait_for(
                f"session {session_id} to reach {max_evaluations} evaluations",
                lambda: client.session()["evaluations"] >= max_evaluations,
                deadline - time.monotonic(),
                interval=0.5,
            )
        seconds = time.monotonic() - started
        jobs = slurm.wait_for_jobs(job, timeout=max(deadline - time.monotonic(), 1.0))
    with JsonStore(work / "store") as store:
        records = [r for r in store.evaluations(PROBLEM) if r.raytuner and r.raytuner.session_id == session_id]
    handed_out: list[Handed] = []
    told: list[Told] = []
    for task in range(tasks):
        handed, task_told = _parse(_output(work, task), task)
        handed_out += handed
        told += task_told
    return ArrayRun(session_id, tasks, max_evaluations, seconds, told, records, handed_out, jobs, cancelled)


# -- the benchmark -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """One benchmark size: array tasks, the session's evaluations, cancelled tasks, node slots, lease (s).

    At most ``slots`` array tasks run at once; the cancelled ones are among the first ``slots``.
    """

    tasks: int
    max_evaluations: int
    cancel: int
    slots: int
    lease: float


FULL = Settings(tasks=32, max_evaluations=64, cancel=4, slots=8, lease=10.0)
QUICK = Settings(tasks=8, max_evaluations=16, cancel=2, slots=4, lease=5.0)


def measure(settings: Settings, work: Path) -> dict[str, Any]:
    """Both runs of the benchmark (the cancelled one skipped, with the reason, without leases)."""
    leases = leases_supported()
    lease = settings.lease if leases else None
    runs: dict[str, Any] = {}
    with LocalSlurm(cpus=settings.slots) as slurm:
        uncancelled = run_array(
            slurm, work / "uncancelled", tasks=settings.tasks, max_evaluations=settings.max_evaluations, lease=lease
        )
        runs["uncancelled"] = uncancelled.summary()
        if not leases:
            runs["cancelled"] = {"skipped": NO_LEASES}
        else:
            # among the first tasks to run (the node's slots): a later one may start after the session is full
            step = max(settings.slots // settings.cancel, 1)
            cancelled = run_array(
                slurm,
                work / "cancelled",
                tasks=settings.tasks,
                max_evaluations=settings.max_evaluations,
                cancel=[1 + i * step for i in range(settings.cancel)],
                lease=lease,
            )
            runs["cancelled"] = cancelled.summary()
    if "seconds_to_finish" in runs["cancelled"]:
        runs["seconds_ratio_cancelled_to_uncancelled"] = round(
            runs["cancelled"]["seconds_to_finish"] / runs["uncancelled"]["seconds_to_finish"], 2
        )
    return runs


def goals(runs: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals per run that ran: no acknowledged tell lost, no record duplicated.

    Args:
        runs: :func:`measure`'s runs.
    """
    out: dict[str, Any] = {}
    for name in ("uncancelled", "cancelled"):
        run = runs[name]
        if "skipped" in run:
            continue
        out[f"{name}_nothing_lost_or_duplicated"] = {
            "trials_lost": run["trials_lost"],
            "duplicates": run["duplicates"],
            "required": 0,
            "met": run["trials_lost"] == 0 and run["duplicates"] == 0,
        }
    if "cancelled" in runs and "skipped" not in runs["cancelled"]:
        run = runs["cancelled"]
        out["cancelled_trials_handed_out_again"] = {
            "handed_out_again": run["cancelled_trials_handed_out_again"],
            "required": run["cancelled_tasks"],
            "met": run["cancelled_trials_handed_out_again"] == run["cancelled_tasks"]
            and run["records"] == run["max_evaluations"],
        }
    return out


def render_report(results: dict[str, Any]) -> str:
    """The Markdown report of :func:`run`'s results."""
    s, runs = results["settings"], results["runs"]
    keys = ["trials_lost", "duplicates", "seconds_to_finish", "records", "cancelled_trials_handed_out_again"]
    rows = [
        [name, *(runs[name].get(key, "") for key in keys)]
        if "skipped" not in runs[name]
        else [name, f"skipped: {runs[name]['skipped']}", *[""] * (len(keys) - 1)]
        for name in ("uncancelled", "cancelled")
    ]
    ratio = runs.get("seconds_ratio_cancelled_to_uncancelled")
    machine = results["machine"]
    return "\n".join(
        [
            "# Slurm array jobs against raytuner serve",
            "",
            f"`sbatch --array=0-{s['tasks'] - 1}` of `examples/remote_hpc_job/job.sh`, one session of "
            f"{s['max_evaluations']} evaluations, a one-node Slurm of {s['slots']} slots; the cancelled run kills "
            f"{s['cancel']} array tasks mid-trial, `scancel --batch --signal=KILL` (trial lease {s['lease']:g} s).",
            "",
            markdown_table(["run", *keys], rows),
            "",
            f"Time to finish, cancelled / uncancelled: {ratio if ratio is not None else 'n/a'}.",
            "",
            *goal_lines(
                results["goals"],
                {
                    "uncancelled_nothing_lost_or_duplicated": lambda g: (
                        f"uncancelled: {g['trials_lost']} lost, {g['duplicates']} duplicated: {verdict(g)}"
                    ),
                    "cancelled_nothing_lost_or_duplicated": lambda g: (
                        f"cancelled: {g['trials_lost']} lost, {g['duplicates']} duplicated: {verdict(g)}"
                    ),
                    "cancelled_trials_handed_out_again": lambda g: (
                        f"killed trials handed out again and told: {g['handed_out_again']} of {g['required']}, "
                        f"the session full: {verdict(g)}"
                    ),
                },
            ),
            "",
            f"Command: `{results['command']}`",
            f"Machine: {machine.get('cpu_model')}, {machine.get('cores')} cores, load at start "
            f"{machine.get('load_average_at_start')}; jobs, server and Slurm share these cores.",
        ]
    )


def run(out: Path, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Run the Slurm benchmark; write ``out/results.json`` and ``out/report.md``; returns the results.

    Raises :class:`~raytuner.testing.slurm.SlurmUnavailable` (one line, exit 2 from
    ``python -m benchmarks``) where the cluster cannot start.

    Args:
        out: the output folder (made if missing); the runs' stores and logs go to a temporary one.
        quick: :data:`QUICK` instead of :data:`FULL` (default ``False``).
        settings: the sizes; ``quick`` is ignored when given (default ``None``).
    """
    s = settings if settings is not None else (QUICK if quick else FULL)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="raytuner-bench-slurm-"))
    machine = machine_at_start(work)
    try:
        runs = measure(s, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {"runs": runs, "goals": goals(runs), "settings": asdict(s), "machine": machine}
    return finish_run(Path(out), "slurm", results, render_report, quick=quick, started=started)
