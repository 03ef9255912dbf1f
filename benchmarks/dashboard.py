"""``python -m benchmarks dashboard``: the dashboard live on a large history that grows, against optuna-dashboard.

A JSON store of 100,000 evaluations (``--quick``: 5,000) of an LCBench-like
problem (8 datasets as tasks, 5 parameters, a validation error, 4 fidelities)
is written, then ``raytuner dashboard`` is started on it as a server process
of its own. For a minute (``--quick``: 15 s) one record a second is appended
through the store's normal write path (:meth:`JsonStore.append
<raytuner.store.JsonStore.append>`) while one client polls the live view's
state (``/problem/P/live.json``) every second, as the live page does, and
another loads the other pages in turn. Measured: the startup (from the
command to the overview's first answer), the first read of the problem (the
first page that needs it), each page's and the live poll's p50/p95, how many
records the live poll was behind the appends, and the server's peak RSS.

The peer, in the same run: optuna-dashboard on an equal Optuna study (the same
number of trials in a journal file, one trial added a second through
``study.add_trial``), polled as its study page polls (``/api/studies/0?after=N``),
with its study list, its study's full detail (what the study page loads first)
and its parameter importances as pages. The study's first trials are written
as the journal lines Optuna's own ``add_trial`` writes (one line a trial, the
line of a trial it wrote used as the template): ``add_trial`` takes about 10 ms
a trial, 17 minutes for 100,000.

Results (``results.json``): ``evaluations``, ``seconds``, ``raytuner`` and
``optuna_dashboard`` (each: ``startup_s``, ``first_read_s``, ``live_poll`` and
``pages`` with ``p50_s``/``p95_s``/``requests``/``errors``, ``behind_max``,
``peak_rss_mb``, ``store_mb``), ``ratios`` (optuna-dashboard's figure over
raytuner's), ``goals``, ``load`` (``uptime`` at the start and the end),
``machine``. See ``docs/benchmarks.md``.

Example::

    python -m benchmarks dashboard --out bench_out/dashboard --quick
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks.report import finish_run, machine_info, markdown_table, percentile
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.session.progress import task_label
from raytuner.store import JsonStore

__all__ = ["run", "GOALS"]

log = logging.getLogger(__name__)

#: The goals: the live poll's p95, every page's p95, the startup (seconds).
GOALS = {"live_poll_p95_s": 0.5, "page_p95_s": 2.0, "startup_s": 5.0}

PROBLEM = "lcbench-like"
N_FULL, N_QUICK = 100_000, 5_000
SECONDS_FULL, SECONDS_QUICK = 60.0, 15.0
#: LCBench's OpenML dataset ids, the tasks.
DATASETS = (3945, 7593, 34539, 126025, 126026, 126029, 146212, 167104)
FIDELITIES = (6.5, 13.0, 26.0, 52.0)  # epochs, as a 52-epoch LCBench curve is cut by GPTuneBand
_SEED = 20261207


class _Records:
    """LCBench-like evaluations: a dataset, five parameters, a validation error; deterministic by index."""

    def __init__(self) -> None:
        self.session = "bench-dashboard"

    def __call__(self, i: int) -> FunctionEvaluation:
        rng = random.Random(_SEED + i)
        fidelity = FIDELITIES[i % len(FIDELITIES)]
        failed = i % 97 == 13
        return FunctionEvaluation.create(
            {"dataset_id": DATASETS[i % len(DATASETS)]},
            {
                "learning_rate": round(10 ** rng.uniform(-4, -1), 6),
                "batch_size": rng.choice([16, 32, 64, 128, 256, 512]),
                "momentum": round(rng.uniform(0.1, 0.99), 4),
                "num_layers": rng.randint(1, 5),
                "weight_decay": round(rng.uniform(1e-5, 0.1), 6),
            },
            None if failed else {"val_error": round(rng.uniform(0.05, 0.6) * (1 + 6.5 / fidelity) / 2, 6)},
            provenance=Provenance(
                engine="gptune_band",
                fidelity=fidelity,
                cost=fidelity / FIDELITIES[-1],
                bracket=i % 3,
                rung=FIDELITIES.index(fidelity),
                session_id=self.session,
                trial_id=f"trial-{i:07d}",
            ),
            failure="diverged" if failed else None,
        )

    def optuna_value(self, i: int) -> tuple[dict[str, Any], float]:
        """The same evaluation as an Optuna trial's parameters (the dataset one of them) and value."""
        record = self(i)
        value = record.value("val_error")
        return {"dataset_id": str(DATASETS[i % len(DATASETS)]), **record.tuning_parameter}, (
            value if value is not None else 1.0
        )


# -- measuring ---------------------------------------------------------------------------------------------


@dataclass
class _Latencies:
    """Each kind of request's latencies (seconds) and failures."""

    times: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, name: str, url: str, timeout: float = 120.0) -> bytes | None:
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                body: bytes = answer.read()
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            log.warning("%s: %s", url, exc)
            with self.lock:
                self.errors[name] = self.errors.get(name, 0) + 1
            return None
        with self.lock:
            self.times.setdefault(name, []).append(time.perf_counter() - started)
        return body

    def summary(self, name: str) -> dict[str, Any]:
        seen = self.times.get(name, [])
        return {
            "requests": len(seen),
            "errors": self.errors.get(name, 0),
            "p50_s": round(percentile(seen, 50), 4) if seen else None,
            "p95_s": round(percentile(seen, 95), 4) if seen else None,
            "max_s": round(max(seen), 4) if seen else None,
        }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_until_up(url: str, process: subprocess.Popen[bytes], limit: float = 600.0) -> float:
    """Seconds until ``url`` answers 200 (polled every 20 ms), from now."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode} before it answered")
        try:
            with urllib.request.urlopen(url, timeout=limit) as answer:
                if answer.status == 200:
                    return time.perf_counter() - started
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException):  # not (yet) this server
            time.sleep(0.02)
    raise RuntimeError(f"{url} did not answer in {limit:.0f} s")


def _first_read(seen: _Latencies, url: str) -> float | None:
    """Seconds the first page that reads the problem (or study) took; ``None`` when it failed (timed out)."""
    started = time.perf_counter()
    answered = seen.get("first_read", url)
    return None if answered is None else round(time.perf_counter() - started, 3)


def _peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set size (``VmHWM``) in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _uptime() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _drive(
    seconds: float,
    append: Callable[[int], None],
    poll: Callable[[int], int | None],
    pages: list[tuple[str, Callable[[], str]]],
    seen: _Latencies,
) -> dict[str, Any]:
    """For ``seconds``: ``append(k)`` once a second, ``poll(k)`` once a second (it returns the records shown,
    ``k`` being those appended before it began), each of ``pages`` (a name, its URL) in turn; how far the polls
    were behind."""
    stop = threading.Event()
    appended = [0]
    behind: list[int] = []

    def appender() -> None:
        while not stop.wait(1.0):
            append(appended[0])
            appended[0] += 1

    def poller() -> None:
        while not stop.wait(1.0):
            before = appended[0]
            shown = poll(before)
            if shown is not None:
                behind.append(before - shown)

    def loader() -> None:
        while not stop.is_set():
            for name, address in pages:
                if stop.is_set():
                    break
                seen.get(name, address())

    threads = [threading.Thread(target=t, daemon=True) for t in (appender, poller, loader)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=300)
    return {"appended": appended[0], "behind_max": max(behind) if behind else None, "polls": len(behind)}


# -- raytuner ----------------------------------------------------------------------------------------------


def _write_store(folder: Path, n: int, make: _Records) -> tuple[float, str]:
    """A JSON store of ``n`` evaluations of :data:`PROBLEM`, compacted into its GPTune file: its MiB, a uid in it."""
    with JsonStore(folder) as store:
        for start in range(0, n, 5_000):
            batch = [make(i) for i in range(start, min(n, start + 5_000))]
            store.append_batch(PROBLEM, batch)
    return round((folder / f"{PROBLEM}.json").stat().st_size / 2**20, 1), batch[len(batch) // 2].uid


def bench_raytuner(folder: Path, n: int, seconds: float, make: _Records) -> dict[str, Any]:
    """``raytuner dashboard`` on a store of ``n`` evaluations, one appended a second for ``seconds``."""
    store_mb, uid = _write_store(folder, n, make)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    labels = [task_label({"dataset_id": d}) for d in DATASETS]
    turn = [0]

    def evaluations() -> str:
        turn[0] += 1
        sort = ("val_error", "learning_rate", "")[turn[0] % 3]
        return f"{base}/problem/{PROBLEM}/evaluations?page={1 + 37 * turn[0] % 2000}&sort={sort}"

    pages: list[tuple[str, Callable[[], str]]] = [
        ("overview", lambda: base + "/"),
        ("problem", lambda: f"{base}/problem/{PROBLEM}"),
        ("evaluations", evaluations),
        ("task", lambda: f"{base}/problem/{PROBLEM}/task?task={labels[turn[0] % 8]}"),
        ("live", lambda: f"{base}/problem/{PROBLEM}/live"),
        ("history_svg", lambda: f"{base}/problem/{PROBLEM}/plot/history.svg"),
        ("brackets", lambda: f"{base}/problem/{PROBLEM}/brackets"),
        ("analysis", lambda: f"{base}/problem/{PROBLEM}/analysis?task={labels[0]}"),
        ("evaluation", lambda: f"{base}/problem/{PROBLEM}/evaluation/{uid}"),
    ]

    def poll(seen: _Latencies) -> int | None:
        body = seen.get("live_poll", f"{base}/problem/{PROBLEM}/live.json")
        return None if body is None else int(json.loads(body)["evaluations"]) - n

    writer = JsonStore(folder)
    try:
        figures = _measure(
            [sys.executable, "-m", "raytuner.cli", "dashboard", str(folder), "--port", str(port)],
            folder.parent / "raytuner-dashboard.log",
            (base + "/", f"{base}/problem/{PROBLEM}"),
            pages,
            poll,
            lambda k: writer.append(PROBLEM, make(n + k)),
            seconds,
        )
    finally:
        writer.close()
    return {**figures, "store_mb": store_mb}


def _measure(
    command: list[str],
    log_path: Path,
    first: tuple[str, str],
    pages: list[tuple[str, Callable[[], str]]],
    poll: Callable[[_Latencies], int | None],
    append: Callable[[int], None],
    seconds: float,
) -> dict[str, Any]:
    """Start a dashboard server (``command``), time its start (``first[0]`` answers) and its first read
    (``first[1]``), then :func:`_drive` it; its figures."""
    seen = _Latencies()
    with open(log_path, "wb") as logfile:
        process = subprocess.Popen(command, stdout=logfile, stderr=subprocess.STDOUT)
        try:
            startup = _wait_until_up(first[0], process)
            first_read = _first_read(seen, first[1])
            driven = _drive(seconds, append, lambda appended: poll(seen), pages, seen)
            peak = _peak_rss_mb(process.pid)
        finally:
            process.terminate()
            process.wait(timeout=60)
    return {
        "startup_s": round(startup, 3),
        "first_read_s": first_read,
        "live_poll": seen.summary("live_poll"),
        "pages": {name: seen.summary(name) for name, _ in pages},
        **driven,
        "peak_rss_mb": peak,
    }


# -- optuna-dashboard --------------------------------------------------------------------------------------


def _write_study(path: Path, n: int, make: _Records) -> tuple[Any, float]:
    """An Optuna journal file with a study of ``n`` trials; the study (for adding trials) and the file's MiB."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=JournalStorage(JournalFileBackend(str(path))), study_name=PROBLEM)
    study.add_trial(_trial(make, 0))
    lines = path.read_bytes().splitlines()
    template = json.loads(lines[-1])  # the line add_trial wrote: every other trial is written like it
    start = dt.datetime.now(dt.UTC)
    with open(path, "ab") as fh:
        for i in range(1, n):
            params, value = make.optuna_value(i)
            when = (start + dt.timedelta(milliseconds=i)).isoformat()
            names = list(template["distributions"])
            choices = json.loads(template["distributions"]["dataset_id"])["attributes"]["choices"]
            encoded = {k: (float(choices.index(params[k])) if k == "dataset_id" else params[k]) for k in names}
            line = {**template, "datetime_start": when, "datetime_complete": when, "value": value, "params": encoded}
            fh.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")
    return study, round(path.stat().st_size / 2**20, 1)


def _trial(make: _Records, i: int) -> Any:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    params, value = make.optuna_value(i)
    distributions = {
        "dataset_id": CategoricalDistribution([str(d) for d in DATASETS]),
        "learning_rate": FloatDistribution(1e-4, 1e-1, log=True),
        "batch_size": IntDistribution(16, 512),
        "momentum": FloatDistribution(0.1, 0.99),
        "num_layers": IntDistribution(1, 5),
        "weight_decay": FloatDistribution(1e-5, 0.1),
    }
    return optuna.trial.create_trial(params=params, distributions=distributions, value=value)


def bench_optuna_dashboard(folder: Path, n: int, seconds: float, make: _Records) -> dict[str, Any]:
    """optuna-dashboard on a journal file of ``n`` trials, one added a second for ``seconds``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "optuna.log"
    study, journal_mb = _write_study(path, n, make)
    replayed = len(study.get_trials(deepcopy=False))  # the writer replays the journal now, not in the timed minute
    log.info("optuna study of %d trials written (%.1f MiB)", replayed, journal_mb)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    pages: list[tuple[str, Callable[[], str]]] = [
        ("overview", lambda: base + "/api/studies"),
        ("study", lambda: f"{base}/api/studies/0"),
        ("importances", lambda: f"{base}/api/studies/0/param_importances"),
        ("page", lambda: f"{base}/dashboard/studies/0"),
    ]
    shown = [n]

    def poll(seen: _Latencies) -> int | None:
        body = seen.get("live_poll", f"{base}/api/studies/0?after={shown[0]}")
        if body is None:
            return None
        shown[0] += len(json.loads(body)["trials"])
        return shown[0] - n

    figures = _measure(
        [
            sys.executable,
            "-c",
            "import sys; from optuna_dashboard._cli import main; sys.exit(main())",
            str(path),
            "--port",
            str(port),
        ],
        folder / "optuna-dashboard.log",
        (base + "/api/studies", f"{base}/api/studies/0"),
        pages,
        poll,
        lambda k: study.add_trial(_trial(make, n + k)),
        seconds,
    )
    return {"version": version("optuna-dashboard"), **figures, "store_mb": journal_mb}


# -- the run -----------------------------------------------------------------------------------------------


def _ratio(peer: Any, ours: Any) -> float | None:
    return round(peer / ours, 2) if isinstance(peer, (int, float)) and isinstance(ours, (int, float)) and ours else None


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    """Run the dashboard benchmark; write ``out/results.json`` and ``out/report.md``; return the results.

    Args:
        out: the folder for the results and the report (made if missing).
        quick: the small workload (5,000 evaluations, 15 s) instead of the full one (100,000, 60 s).
    """
    started = time.perf_counter()
    n, seconds = (N_QUICK, SECONDS_QUICK) if quick else (N_FULL, SECONDS_FULL)
    workdir = Path(tempfile.mkdtemp(prefix="raytuner-bench-dashboard-"))
    make = _Records()
    load = {"uptime_at_start": _uptime()}
    log.info(
        "dashboard benchmark%s: %d evaluations, %.0f s live; data in %s",
        " (quick)" if quick else "",
        n,
        seconds,
        workdir,
    )
    try:
        ours = bench_raytuner(workdir / "store", n, seconds, make)
        log.info("raytuner dashboard: %s", ours)
        peer = bench_optuna_dashboard(workdir / "optuna", n, seconds, make)
        log.info("optuna-dashboard: %s", peer)
        machine = machine_info(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load["uptime_at_end"] = _uptime()
    page_p95 = [p["p95_s"] for p in ours["pages"].values() if p["p95_s"] is not None]
    results: dict[str, Any] = {
        "evaluations": n,
        "seconds": seconds,
        "raytuner": ours,
        "optuna_dashboard": peer,
        "ratios": {
            "startup": _ratio(peer.get("startup_s"), ours["startup_s"]),
            "first_read": _ratio(peer.get("first_read_s"), ours["first_read_s"]),
            "live_poll_p95": _ratio(peer.get("live_poll", {}).get("p95_s"), ours["live_poll"]["p95_s"]),
            "overview_p95": _ratio(
                peer.get("pages", {}).get("overview", {}).get("p95_s"), ours["pages"]["overview"]["p95_s"]
            ),
            "study_p95": _ratio(peer.get("pages", {}).get("study", {}).get("p95_s"), ours["pages"]["problem"]["p95_s"]),
            "peak_rss": _ratio(peer.get("peak_rss_mb"), ours["peak_rss_mb"]),
        },
        "goals": {
            "live_poll_p95_le_0_5_s": (ours["live_poll"]["p95_s"] or 1e9) <= GOALS["live_poll_p95_s"],
            "page_p95_le_2_s": bool(page_p95) and max(page_p95) <= GOALS["page_p95_s"],
            "startup_le_5_s": ours["startup_s"] <= GOALS["startup_s"],
        },
        "load": load,
        "machine": machine,
    }
    return finish_run(out, "dashboard", results, render_report, quick=quick, started=started)


def _cell(figure: Any) -> str:
    return "-" if figure is None else f"{figure:.3f}"


def _side(title: str, poll: str, figures: dict[str, Any], first: str, store: str) -> list[str]:
    """One dashboard's table (the poll, then each page) and its line of startup, memory and lag."""
    return [
        markdown_table(
            [title, "p50 s", "p95 s", "requests", "errors"],
            [
                [name, _cell(s["p50_s"]), _cell(s["p95_s"]), s["requests"], s["errors"]]
                for name, s in [(poll, figures["live_poll"]), *figures["pages"].items()]
            ],
        ),
        "",
        f"{title}: startup {figures['startup_s']:.2f} s, {first} {_cell(figures['first_read_s'])} s, "
        f"peak RSS {figures['peak_rss_mb']} MiB, {store} {figures['store_mb']} MiB; {figures['appended']} added, "
        f"the poll at most {figures['behind_max']} behind.",
        "",
    ]


def render_report(results: dict[str, Any]) -> str:
    """The human summary: startup, polls and pages of both dashboards, the goals, the load."""
    ours, peer = results["raytuner"], results["optuna_dashboard"]
    lines = [
        f"# Dashboard live on {results['evaluations']:,} evaluations, one appended a second for "
        f"{results['seconds']:.0f} s",
        "",
        *_side("raytuner", "live poll", ours, "first read of the problem", "store"),
        *_side(f"optuna-dashboard {peer['version']}", "poll (after=N)", peer, "first study detail", "journal"),
        "Ratios (optuna-dashboard / raytuner): "
        + ", ".join(f"{k} {v}" for k, v in results["ratios"].items() if v is not None),
        "",
    ]
    goals = ", ".join(f"{k}: {'met' if v else '**missed**'}" for k, v in results["goals"].items())
    lines += [
        f"Goals: {goals}.",
        "",
        f"Load (1/5/15 min): {results['load']['uptime_at_start']} at the start, "
        f"{results['load']['uptime_at_end']} at the end.",
    ]
    return "\n".join(lines)
