"""``python -m benchmarks service``: the tuning service's ask+tell round trip and throughput against Optuna's gRPC proxy.

Run it as::

    python -m benchmarks service --out DIR [--quick]

Every system runs in a server process of its own on the loopback interface,
over a durable store, and is driven by 1, 8 and 32 concurrent clients
(threads, each with its own gRPC channel) in this process; raytuner's clients
are :class:`~raytuner.client.remote.RemoteTuner` objects (each tell carries
the captured machine and software configuration), Optuna's its own
``GrpcStorageProxy``:

- **raytuner, random engine** (the service's own overhead): a
  :class:`~raytuner.service.server.TuningServer` over a JSON store directory
  (every tell's record is fsync'd to the problem's journal before the answer,
  every handed-out trial to the ledger before the ask's answer), API keys
  on (a key made for the run); all clients ask and tell on **one shared
  session**, so they contend for it as jobs of one campaign do;
- **raytuner, MLA** on GPTune's demo problem (one task, ``t = 1``): a model
  fit behind every ask once the initial design is done. MLA's fits grow with
  the data, so each client tunes a **session of its own** capped at
  ``mla_evaluations`` evaluations; the initial design (``mla_n_initial``
  random asks) and the first model ask of each session are the warm-up, so
  the figures are those of model-based asks;
- **Optuna's gRPC storage proxy**: ``optuna.storages.run_grpc_proxy_server``
  over ``optuna.storages.get_storage("sqlite:///...")`` (an ``RDBStorage``
  on a SQLite file behind Optuna's cache, as Optuna's documentation
  recommends), clients ``GrpcStorageProxy(host=, port=)``, one shared study,
  ``study.ask({"x": FloatDistribution(0, 1)})`` and ``study.tell`` with a
  ``RandomSampler``. SQLite commits with its defaults, which the server
  reports (``synchronous=FULL`` and a rollback journal: every commit is
  fsync'd). The proxy has no authentication. Its server gets the same
  thread-pool size as raytuner's.

A round trip is ``ask``, the objective (the demo function, microseconds),
``tell``; its latency is measured in the client. Each client first makes
``warmup`` round trips (not counted), then all start together on a barrier;
throughput is the acknowledged tells of the measured phase over its wall time
(start to the last client's end). Each cell (system, engine, clients) runs
``repeats`` times, on fresh servers and stores per repeat and a fresh
session or study per cell; ``results.json`` rows hold the medians over the
repeats (and every repeat's figures). Seeds: ``seed`` + repeat for the
sessions, ``seed`` + client index for Optuna's samplers.

Example:
    >>> from pathlib import Path
    >>> s = Settings(clients=(1, 2), requests=20, repeats=1)
    >>> results = run(Path("bench_out/service"), settings=s)            # doctest: +SKIP
    >>> sorted({row["system"] for row in results["rows"]})              # doctest: +SKIP
    ['optuna-grpc', 'raytuner']
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import finish_run, goal_lines, machine_at_start, markdown_table, percentile, verdict
from benchmarks.server_process import Cell, ServerProcess, drive_clients
from raytuner.errors import InvalidInputError
from raytuner.test_problems import DEMO_PROBLEM, demo

__all__ = ["Settings", "FULL", "QUICK", "CELLS", "run", "measure", "summarise", "goals", "render_report"]

log = logging.getLogger(__name__)

#: The benchmark's cells: (system, engine) pairs, each run with every client count.
#: (A row names the engine, or Optuna's sampler, under the key "strategy": earlier results.json files
#: compare with new ones.)
CELLS: tuple[tuple[str, str], ...] = (("raytuner", "random"), ("raytuner", "mla"), ("optuna-grpc", "random-sampler"))
#: The task every session tunes (the demo problem's t).
TASK: dict[str, float] = {"t": 1.0}
#: Goals of the issue: one client's p50 round trip with the random engine, and the throughput ratio.
P50_GOAL_MS = 5.0
THROUGHPUT_RATIO_GOAL = 1.0


@dataclass(frozen=True)
class Settings:
    """What one benchmark run covers.

    ``requests`` measured round trips per cell, spread over its clients (each
    makes at least ``min_rounds``) for the random engine and Optuna;
    ``warmup`` round trips per client before the measured ones. MLA clients
    make ``mla_evaluations`` round trips each, the first ``mla_n_initial + 1``
    of them warm-up. ``server_workers`` is the thread pool of both servers.
    ``timeout`` bounds a server's start and a cell's clients, in seconds.
    """

    # how each cell is measured
    clients: tuple[int, ...] = (1, 8, 32)
    requests: int = 600
    min_rounds: int = 10
    warmup: int = 3
    repeats: int = 3
    timeout: float = 120.0
    # what runs: the cells, MLA's sessions, the servers, the seeds
    cells: tuple[tuple[str, str], ...] = CELLS
    mla_n_initial: int = 5
    mla_evaluations: int = 30
    server_workers: int = 64
    seed: int = 0


FULL = Settings()
QUICK = Settings(requests=160, min_rounds=4, warmup=2, repeats=1, mla_evaluations=10)


def _meta(problem_name: str) -> dict[str, Any]:
    return {"tuning_problem_name": problem_name, "problem_space": DEMO_PROBLEM}


class _RaytunerClient:
    """One client of the tuning service: a :class:`~raytuner.client.remote.RemoteTuner` (its own channel)."""

    def __init__(self, address: str, key: str, timeout: float, session_id: str | None = None) -> None:
        from raytuner.client.remote import RemoteTuner

        self.tuner = RemoteTuner(address, key, session_id=session_id, timeout=timeout, retries=2)

    def create(self, problem_name: str, engine: str, options: dict[str, Any], seed: int) -> str:
        return self.tuner.create_session(_meta(problem_name), engine, tasks=[TASK], options=options, seed=seed)

    def round_trip(self) -> None:
        trial = self.tuner.ask(wait=False)
        if trial is None:
            raise RuntimeError(f"session {self.tuner.session_id}: no trial to run (finished: {self.tuner.finished})")
        self.tuner.tell(trial, {"y": demo(trial.config["x"], TASK["t"])})

    def close(self) -> None:
        self.tuner.close()


def _rounds(settings: Settings, clients: int) -> int:
    return max(settings.min_rounds, -(-settings.requests // clients))


def _raytuner_cell(address: str, key: str, engine: str, clients: int, repeat: int, settings: Settings) -> Cell:
    problem = f"bench_service_{engine}_{clients}"
    seed = settings.seed + repeat + 1
    opened: list[_RaytunerClient] = []
    if engine == "random":
        owner = _RaytunerClient(address, key, settings.timeout)
        opened.append(owner)
        shared = owner.create(problem, "random", {}, seed)
        warmup, rounds = settings.warmup, _rounds(settings, clients)
    else:
        shared = ""
        warmup = settings.mla_n_initial + 1
        rounds = settings.mla_evaluations - warmup
        if rounds < 1:
            raise InvalidInputError("mla_evaluations", f"must exceed mla_n_initial + 1 = {warmup}")
    options = {"n_initial": settings.mla_n_initial}

    def make_loop(index: int) -> Callable[[int], Any]:
        client = _RaytunerClient(address, key, settings.timeout, session_id=shared or None)
        opened.append(client)
        if not shared:
            client.create(problem, "mla", options, seed * 1000 + index)
        return lambda _: client.round_trip()

    try:
        return drive_clients(clients, make_loop, warmup, rounds, settings.timeout)
    finally:
        for client in opened:
            client.close()


def _optuna_cell(port: int, clients: int, repeat: int, settings: Settings) -> Cell:
    import optuna
    from optuna.distributions import BaseDistribution, FloatDistribution
    from optuna.storages import GrpcStorageProxy

    name = f"bench_service_{clients}_{repeat}"
    owner = GrpcStorageProxy(host="127.0.0.1", port=port)
    optuna.create_study(storage=owner, study_name=name, direction="minimize")
    owner.close()
    space: dict[str, BaseDistribution] = {"x": FloatDistribution(0.0, 1.0)}
    opened: list[Any] = []

    def make_loop(index: int) -> Callable[[int], Any]:
        storage = GrpcStorageProxy(host="127.0.0.1", port=port)
        opened.append(storage)
        study = optuna.load_study(
            study_name=name,
            storage=storage,
            sampler=optuna.samplers.RandomSampler(seed=settings.seed + repeat * 1000 + index),
        )

        def step(_: int) -> float:
            trial = study.ask(space)
            study.tell(trial, demo(trial.params["x"], TASK["t"]))
            return 0.0

        return step

    try:
        return drive_clients(clients, make_loop, settings.warmup, _rounds(settings, clients), settings.timeout)
    finally:
        for storage in opened:
            storage.close()


def _summary(cell: Cell) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(cell.latencies, 50), 3),
        "p99_ms": round(percentile(cell.latencies, 99), 3),
        "tells_per_s": round(cell.tells / cell.wall_s, 2),
        "tells": cell.tells,
        "wall_s": round(cell.wall_s, 3),
    }


def measure(settings: Settings, work: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every repeat of every cell, each repeat on fresh servers under ``work``; per-repeat figures and server facts.

    Args:
        settings: the cells, repeats and rounds to run.
        work: the folder for the servers' stores and logs.
    """
    from raytuner.service.auth import open_keys

    figures: list[dict[str, Any]] = []
    servers: dict[str, Any] = {}
    want_raytuner = any(system == "raytuner" for system, _ in settings.cells)
    want_optuna = any(system == "optuna-grpc" for system, _ in settings.cells)
    if want_optuna:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    for repeat in range(settings.repeats):
        base = work / f"repeat_{repeat}"
        base.mkdir(parents=True, exist_ok=True)
        if want_raytuner:
            store = base / "raytuner_store"
            keys = open_keys(store)
            key = keys.create("bench")  # the run's key, as `raytuner keys create` makes one
            keys.ledger.close()
            server = ServerProcess(
                ["raytuner", "--store", str(store), "--workers", str(settings.server_workers)],
                base / "raytuner_server.log",
                settings.timeout,
            )
            servers["raytuner"] = {
                "store": "JSON store (journal fsync per tell, ledger fsync per ask)",
                "auth": True,
                "workers": settings.server_workers,
            }
            address = f"127.0.0.1:{server.info['port']}"
            try:
                for system, engine in settings.cells:
                    if system != "raytuner":
                        continue
                    for clients in settings.clients:
                        cell = _raytuner_cell(address, key, engine, clients, repeat, settings)
                        figures.append(
                            {
                                "system": system,
                                "strategy": engine,
                                "clients": clients,
                                "repeat": repeat,
                                **_summary(cell),
                            }
                        )
                        log.info("service benchmark: %s", figures[-1])
            finally:
                server.stop()
        if want_optuna:
            from raytuner.testing.mongod import free_port

            port = free_port()
            url = f"sqlite:///{base / 'optuna.db'}"
            server = ServerProcess(
                ["optuna", "--store", url, "--port", str(port), "--workers", str(settings.server_workers)],
                base / "optuna_server.log",
                settings.timeout,
            )
            servers["optuna-grpc"] = {
                "storage": "RDBStorage on a SQLite file (optuna.storages.get_storage)",
                "sqlite_synchronous": server.info.get("sqlite_synchronous"),
                "sqlite_journal_mode": server.info.get("sqlite_journal_mode"),
                "auth": False,
                "workers": settings.server_workers,
            }
            try:
                from optuna.storages import GrpcStorageProxy

                probe = GrpcStorageProxy(host="127.0.0.1", port=port)
                probe.wait_server_ready(settings.timeout)
                probe.close()
                for system, engine in settings.cells:
                    if system != "optuna-grpc":
                        continue
                    for clients in settings.clients:
                        cell = _optuna_cell(port, clients, repeat, settings)
                        figures.append(
                            {
                                "system": system,
                                "strategy": engine,
                                "clients": clients,
                                "repeat": repeat,
                                **_summary(cell),
                            }
                        )
                        log.info("service benchmark: %s", figures[-1])
            finally:
                server.stop()
    return figures, servers


def summarise(figures: Sequence[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """One row per (system, engine, clients): the medians over the repeats, and the repeats' figures.

    Args:
        figures: the per-repeat figures, as :func:`measure` returns them.
        settings: the benchmark's settings.
    """
    rows = []
    for system, engine in settings.cells:
        for clients in settings.clients:
            mine = [f for f in figures if (f["system"], f["strategy"], f["clients"]) == (system, engine, clients)]
            if not mine:
                continue
            rows.append(
                {
                    "system": system,
                    "strategy": engine,
                    "clients": clients,
                    "p50_ms": round(float(np.median([f["p50_ms"] for f in mine])), 3),
                    "p99_ms": round(float(np.median([f["p99_ms"] for f in mine])), 3),
                    "tells_per_s": round(float(np.median([f["tells_per_s"] for f in mine])), 2),
                    "sessions": ("one per client" if engine == "mla" else "one shared"),
                    "measured_round_trips": int(sum(f["tells"] for f in mine)),
                    "repeats": [
                        {k: f[k] for k in ("p50_ms", "p99_ms", "tells_per_s", "tells", "wall_s")} for f in mine
                    ],
                }
            )
    return rows


def goals(rows: Sequence[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """The issue's goals, each with the figures and whether it is met (where its cells ran).

    Args:
        rows: the summary rows, as :func:`summarise` returns them.
        settings: the benchmark's settings (its cells and thresholds).
    """

    def row(system: str, engine: str, clients: int) -> dict[str, Any] | None:
        return next((r for r in rows if (r["system"], r["strategy"], r["clients"]) == (system, engine, clients)), None)

    out: dict[str, Any] = {}
    one = row("raytuner", "random", 1)
    if one is not None:
        out["p50_one_client_random"] = {
            "clients": 1,
            "p50_ms": one["p50_ms"],
            "required_at_most": P50_GOAL_MS,
            "met": one["p50_ms"] <= P50_GOAL_MS,
        }
    most = max(settings.clients)
    ours, theirs = row("raytuner", "random", most), row("optuna-grpc", "random-sampler", most)
    if ours is not None and theirs is not None:
        ratio = ours["tells_per_s"] / theirs["tells_per_s"]
        out["throughput_vs_optuna"] = {
            "clients": most,
            "raytuner_tells_per_s": ours["tells_per_s"],
            "optuna_tells_per_s": theirs["tells_per_s"],
            "ratio": round(ratio, 3),
            "required_at_least": THROUGHPUT_RATIO_GOAL,
            "met": ratio >= THROUGHPUT_RATIO_GOAL,
        }
    return out


def render_report(results: dict[str, Any]) -> str:
    """``report.md``: the command, the table, the goals and how it was measured.

    Args:
        results: the benchmark's results (command, rows, goals, settings, machine).
    """
    s = results["settings"]
    table = markdown_table(
        ["system", "strategy", "sessions", "clients", "p50 ms", "p99 ms", "tells/s", "round trips"],
        [
            [
                r["system"],
                r["strategy"],
                r["sessions"],
                r["clients"],
                f"{r['p50_ms']:.2f}",
                f"{r['p99_ms']:.2f}",
                f"{r['tells_per_s']:.1f}",
                r["measured_round_trips"],
            ]
            for r in results["rows"]
        ],
    )
    lines = [
        "# Tuning service: ask+tell round trip and throughput",
        "",
        f"Command: `{results['command']}`",
        "",
        table,
        "",
        "## Goals",
        "",
    ]
    lines += goal_lines(
        results["goals"],
        {
            "p50_one_client_random": lambda x: (
                f"p50 round trip, 1 client, random engine: {x['p50_ms']:.2f} ms "
                f"(goal <= {x['required_at_most']:g} ms): {verdict(x, 'NOT met')}"
            ),
            "throughput_vs_optuna": lambda x: (
                f"throughput at {x['clients']} clients, raytuner random / Optuna gRPC "
                f"proxy: {x['raytuner_tells_per_s']:.1f} / {x['optuna_tells_per_s']:.1f} "
                f"tells/s = ratio {x['ratio']:.2f} (goal >= {x['required_at_least']:g}): "
                f"{verdict(x, 'NOT met')}"
            ),
        },
    )
    optuna_server = results["servers"].get("optuna-grpc")
    cells = {tuple(c) for c in s["cells"]}
    lines += [
        "",
        "## How it was measured",
        "",
        "- Each server runs in a process of its own on 127.0.0.1; clients are threads of the benchmark process, "
        "each with its own gRPC channel (raytuner: `RemoteTuner`, whose tells carry the machine and software "
        "configuration; Optuna: `GrpcStorageProxy`). A round trip is ask, the demo objective (microseconds), "
        "tell, timed in the client; throughput is acknowledged tells over the wall time of the measured phase.",
        f"- {s['warmup']} warm-up round trips per client are not counted; then every client starts on a barrier. "
        f"Random and Optuna: {s['requests']} measured round trips per cell spread over the clients (at least "
        f"{s['min_rounds']} each). Medians over {s['repeats']} repeat(s), fresh servers and stores per repeat, "
        "a fresh session or study per cell.",
    ]
    if "raytuner" in results["servers"]:
        lines.append(
            "- raytuner: TuningServer over a JSON store (each tell's record fsync'd to the journal before the "
            "answer, each handed-out trial fsync'd to the ledger before the ask's answer), API keys on, "
            f"{s['server_workers']} server threads. Random: all clients share one session."
        )
    if ("raytuner", "mla") in cells:
        lines.append(
            f"- MLA (GPTune's demo problem, task t = 1): MLA's model fits grow with the data, so each client tunes "
            f"a session of its own capped at {s['mla_evaluations']} evaluations; its initial design "
            f"({s['mla_n_initial']} random asks) and first model ask are warm-up, so the figures are model-based "
            f"asks ({s['mla_evaluations'] - s['mla_n_initial'] - 1} per client), with the fit in the ask."
        )
    if optuna_server is not None:
        synchronous, journal = optuna_server.get("sqlite_synchronous"), optuna_server.get("sqlite_journal_mode")
        durable = (
            "SQLite fsyncs every commit" if synchronous in ("FULL", "EXTRA") else "SQLite does NOT fsync every commit"
        )
        lines.append(
            "- Optuna: `optuna.storages.run_grpc_proxy_server` over `get_storage('sqlite:///...')` (RDBStorage "
            f"behind Optuna's cache) with {s['server_workers']} server threads; clients `GrpcStorageProxy`, one "
            "shared study, `study.ask({'x': FloatDistribution(0, 1)})` / `study.tell` with a RandomSampler; no "
            f"authentication. SQLite settings as the server reported them: synchronous={synchronous}, "
            f"journal_mode={journal} ({durable})."
        )
    lines.append(
        f"- Machine: {results['machine'].get('cpu_model')}, {results['machine'].get('cores')} cores, "
        f"{results['machine'].get('os')}, Python {results['machine'].get('python')}; stores on "
        f"{results['machine'].get('data_filesystem')}. Clients and servers share these cores."
    )
    return "\n".join(lines) + "\n"


def run(out: Path, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Run the service benchmark; write ``out/results.json`` and ``out/report.md``; returns the results.

    Args:
        out: the output folder (made if missing); the servers' stores and logs go to a temporary one.
        quick: fewer requests and one repeat per cell, :data:`QUICK` (default ``False``: :data:`FULL`).
        settings: the cells, requests and repeats; ``quick`` is ignored when they are given (default ``None``).
    """
    out = Path(out)
    s = settings if settings is not None else (QUICK if quick else FULL)
    unknown = [c for c in s.cells if c not in CELLS]
    if unknown:
        raise InvalidInputError("cells", f"unknown cell {unknown[0]!r}", allowed=[list(c) for c in CELLS])
    if not s.clients or any(not isinstance(n, int) or n < 1 for n in s.clients):
        raise InvalidInputError("clients", f"client counts must be integers >= 1, got {s.clients!r}")
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="raytuner-bench-service-"))
    machine = machine_at_start(work)
    try:
        figures, servers = measure(s, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = summarise(figures, s)
    results = {
        "rows": rows,
        "goals": goals(rows, s),
        "servers": servers,
        "settings": {**asdict(s), "cells": [list(c) for c in s.cells], "clients": list(s.clients)},
        "machine": machine,
    }
    return finish_run(out, "service", results, render_report, quick=quick, started=started)
