"""``python -m benchmarks crowd-transfer``: tuning a new task that starts from other users' data in a real crowd repository.

Run it with::

    python -m benchmarks crowd-transfer --out DIR [--quick]

For each problem of :mod:`benchmarks.crowd_transfer_problems` (LCBench,
one task left out as the target; dedispersion, A100 data in the crowd and the
W7800 the target), the other users upload their records to a crowd
repository (a real ``TuningServer`` on a local ``mongod``, through
``CrowdClient``); the tuning user downloads the matching records with
:func:`~raytuner.client.crowd_sources.crowd_source` (their access level
applies), once per crowd. Each seed has its own crowd (the users' runs are seeded by it:
``TransferProblem.uploads``), so the seeds sample the crowd as well as the
tuners. Then, per seed, each tuner spends the same budget of normalised
cost on the target (an evaluation at fidelity ``b`` costs ``b / b_max``; 20
on LCBench, 40 evaluations of the kernel; quick: 10 and 20):

- ``gptuneband+crowd`` and ``gptuneband``: GPTuneBand with and without the
  crowd's records as source tasks of its LCM;
- ``mla+crowd`` and ``mla``: MLA at full fidelity, with and without them
  (5 initial samples each);
- ``tla_ensemble``: the TLA ensemble (:class:`~raytuner.engines.transfer.TransferLearning`)
  from the same records;
- ``tpe_warm``: Optuna's TPE, the sources' best configurations enqueued first
  (each source task's best; the five best of a single source).

Per run: the normalised cost at which a full-fidelity value first comes
within 1 % of the target's best-known value, and the best full-fidelity value
at the budget. ``results.json``: ``problems[{id, target, maximize, best_known,
budget, crowd_records (the median count of a crowd's records, the lower one of an even count), crowds,
transferability {configurations, reaching, spearman, evaluations_in_source_order,
evaluations_in_random_order}, rows[{tuner,
cost_to_target_median, best_at_budget_mean, best_at_budget_sd, reached_share,
evaluations_median}]}]``, ``goals`` (crowd-sourced GPTuneBand needs at least 30 %
less cost than GPTuneBand alone to reach the target, and has the best value at
the budget, on each problem), ``settings``. ``transferability``
(:func:`~benchmarks.crowd_transfer_problems.transferability`) is what
the sources alone would say if every source value were shared, with no
feedback from the target (a model that also learns from the target's
evaluations can do better). A median cost is ``null`` when
half of the runs or more never reached the target (the median of an even number
of runs is the mean of the middle two, so exactly half leaves it infinite too).
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.crowd_transfer_problems import (
    TransferProblem,
    kernel_problem,
    lcbench_problem,
    tpe_run,
    transferability,
)
from benchmarks.report import finish_run, machine_at_start, markdown_table
from raytuner.errors import TuningFinished
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, task_key

__all__ = ["run", "Settings", "FULL", "QUICK", "crowd_records", "run_tuner", "summarise", "GOAL_SAVING"]

log = logging.getLogger(__name__)

#: How much less cost crowd-sourced GPTuneBand must need than GPTuneBand alone.
GOAL_SAVING = 0.3
#: One run's trace: (normalised cost spent, the full-fidelity value or ``None``) per evaluation.
Trace = list[tuple[float, "float | None"]]


@dataclass(frozen=True)
class Settings:
    """The seeds, the budget per problem (normalised cost per run), the crowd's size and what runs."""

    seeds: tuple[int, ...]
    budgets: tuple[tuple[str, float], ...]
    source_per_task: int
    tuners: tuple[str, ...] = ("gptuneband+crowd", "gptuneband", "mla+crowd", "mla", "tla_ensemble", "tpe_warm")


FULL = Settings(seeds=tuple(range(10)), budgets=(("lcbench", 20.0), ("kernel", 40.0)), source_per_task=20)
QUICK = Settings(seeds=(0, 1), budgets=(("lcbench", 10.0), ("kernel", 20.0)), source_per_task=12)
MLA_INITIAL = 5


def crowd_records(tp: TransferProblem, workdir: Path, crowd: int = 0) -> list[FunctionEvaluation]:
    """The users' uploads to a fresh crowd repository, and what the tuning user downloads of them.

    Args:
        tp: the problem (its uploads, meta description space, name).
        workdir: where the mongod and the stores live.
        crowd: which of the problem's crowds uploads (default 0).
    """
    from raytuner.client.crowd import CrowdClient  # gRPC only here
    from raytuner.client.crowd_sources import crowd_source
    from raytuner.problem.meta import MetaDescription
    from raytuner.service.server import TuningServer
    from raytuner.testing.mongod import LocalMongod

    with LocalMongod(dbpath=workdir / "db") as mongod:
        server = TuningServer(workdir / "server", port=0, crowd=f"{mongod.uri}/crowd_{uuid.uuid4().hex[:8]}")
        server.start()
        try:
            uploads = tp.uploads(crowd)
            for user in [*uploads, "tuner"]:
                server.crowd.add_user(user, f"{user}@example.org")
            for user, records in uploads.items():
                with CrowdClient(server.address, server.crowd.create_key(user), timeout=120) as client:
                    client.upload(tp.id, records, access="registered")
            meta = MetaDescription.parse(
                {
                    "tuning_problem_name": tp.id,
                    "problem_space": tp.meta_space,
                    "api_key": server.crowd.create_key("tuner"),
                }
            )
            source = crowd_source(meta, workdir / "store", server=server.address, timeout=120)
        finally:
            server.stop(grace=0)
    return [] if source is None else source.evaluations()


def _drive(engine: Any, tp: TransferProblem, budget: float) -> Trace:
    """Ask and tell ``engine`` on the target until ``budget`` is spent (or the engine is finished)."""
    trace: Trace = []
    cost = 0.0
    while cost < budget - 1e-9:
        try:
            suggestion = engine.ask()
        except TuningFinished:
            break
        fidelity = suggestion.fidelity
        value, why = tp.evaluate(suggestion.config, fidelity)
        engine.tell(suggestion, None if value is None else {tp.objective: value}, failure=why)
        cost += (fidelity or tp.b_max) / tp.b_max
        trace.append((cost, value if fidelity is None or fidelity >= tp.b_max else None))
    return trace


def _tpe_warm(tp: TransferProblem, sources: list[FunctionEvaluation], seed: int, budget: float) -> Trace:
    """Optuna's TPE, the best of each source task evaluated first (the five best of a single one)."""
    sign = -1.0 if tp.maximize else 1.0
    by_task: dict[tuple[tuple[str, Any], ...], list[FunctionEvaluation]] = {}
    for record in sources:
        if record.status == "ok":
            by_task.setdefault(task_key(record.task_parameter), []).append(record)
    per_task = 1 if len(by_task) > 1 else 5
    first = [
        r.tuning_parameter
        for records in by_task.values()
        for r in sorted(records, key=lambda r: sign * r.evaluation_result[tp.objective])[:per_task]
    ]
    run = tpe_run(
        tp.problem,
        tp.target,
        lambda config: tp.evaluate(config, None),
        int(round(budget)),
        seed,
        startup=MLA_INITIAL,
        first=first,
        runs=tp.runs,
    )
    return [(float(n + 1), r.value(tp.objective)) for n, r in enumerate(run)]


def _engine(name: str, tp: TransferProblem, sources: list[FunctionEvaluation], seed: int, budget: float) -> Any:
    from raytuner.engines import MLA, GPTuneBand
    from raytuner.engines.transfer import TransferLearning

    crowd = sources if name.endswith("+crowd") else None
    inline = InlineExecutor()
    if name.startswith("gptuneband"):
        return GPTuneBand(tp.problem, [tp.target], seed, budget=budget, source=crowd, executor=inline, **tp.band)
    if name.startswith("mla"):
        return MLA(tp.problem, [tp.target], seed, n_initial=MLA_INITIAL, source=crowd, executor=inline)
    return TransferLearning(tp.problem, tp.target, sources, "ensemble", seed, candidates=tp.candidates, executor=inline)


def run_tuner(name: str, tp: TransferProblem, sources: list[FunctionEvaluation], seed: int, budget: float) -> Trace:
    """One run of tuner ``name`` on the target: its trace.

    Args:
        name: one of :attr:`Settings.tuners`.
        tp: the problem.
        sources: the crowd's records, as downloaded.
        seed: the run's seed.
        budget: the normalised cost to spend.
    """
    if name == "tpe_warm":
        return _tpe_warm(tp, sources, seed, budget)
    return _drive(_engine(name, tp, sources, seed, budget), tp, budget)


def _run_metrics(tp: TransferProblem, trace: Trace) -> tuple[float, float]:
    """(cost at which the target was reached, inf if never; best full-fidelity value at the budget)."""
    values = [v for _, v in trace if v is not None]
    best = (max(values) if tp.maximize else min(values)) if values else float("nan")
    reached = next((c for c, v in trace if v is not None and tp.reached(v)), float("inf"))
    return reached, best


def summarise(tp: TransferProblem, traces: dict[str, list[Trace]]) -> dict[str, Any]:
    """``results["problems"][i]``: per tuner, the median cost to the target and the best at the budget.

    Args:
        tp: the problem.
        traces: per tuner, one trace per seed.
    """
    rows = []
    for name, runs in traces.items():
        metrics = [_run_metrics(tp, trace) for trace in runs]
        costs, bests = [c for c, _ in metrics], [b for _, b in metrics if np.isfinite(b)]
        median = statistics.median(costs)
        rows.append(
            {
                "tuner": name,
                "cost_to_target_median": round(median, 3) if np.isfinite(median) else None,
                "reached_share": round(float(np.mean(np.isfinite(costs))), 3),
                "best_at_budget_mean": round(float(np.mean(bests)), 5) if bests else None,
                "best_at_budget_sd": round(float(np.std(bests)), 5) if bests else None,
                "evaluations_median": statistics.median(len(t) for t in runs),
            }
        )
    return {"id": tp.id, "target": tp.target, "maximize": tp.maximize, "best_known": tp.best_known, "rows": rows}


def goals(problems: Sequence[dict[str, Any]]) -> dict[str, bool | None]:
    """Per problem: crowd-sourced GPTuneBand needs 30 % less cost than GPTuneBand alone; it is best at the budget.

    Args:
        problems: the summaries (:func:`summarise`).
    """
    out: dict[str, bool | None] = {}
    for p in problems:
        rows = {r["tuner"]: r for r in p["rows"]}
        crowd, alone = rows.get("gptuneband+crowd"), rows.get("gptuneband")
        if crowd is None or alone is None:
            continue
        a, b = crowd["cost_to_target_median"], alone["cost_to_target_median"]
        out[f"{p['id']}_band_crowd_cost_30pct_less"] = (a is not None) and (b is None or a <= (1 - GOAL_SAVING) * b)
        means = [r["best_at_budget_mean"] for r in rows.values() if r["best_at_budget_mean"] is not None]
        top = max(means) if p["maximize"] else min(means)
        out[f"{p['id']}_band_crowd_best_at_budget"] = crowd["best_at_budget_mean"] == top
    return out


def render(results: dict[str, Any]) -> str:
    """The Markdown report.

    Args:
        results: the benchmark's results.
    """
    parts = ["# Crowd transfer: tuning a new task from other users' data", ""]
    for p in results["problems"]:
        parts += [
            f"## {p['id']}: target {p['target']}, best known {p['best_known']:.5g} "
            f"({'max' if p['maximize'] else 'min'}imised)",
            "",
            markdown_table(
                ["tuner", "cost to 99 % (median)", "reached", "best at budget (mean)", "sd", "evaluations"],
                [
                    [
                        r["tuner"],
                        r["cost_to_target_median"],
                        r["reached_share"],
                        r["best_at_budget_mean"],
                        r["best_at_budget_sd"],
                        r["evaluations_median"],
                    ]
                    for r in p["rows"]
                ],
            ),
            "",
        ]
        if p.get("transferability"):
            t = p["transferability"]
            parts += [
                f"Transferability over {t['configurations']} reference configurations: the sources' consensus "
                f"has a rank correlation of {t['spearman']} with the target; tried in its order, the target "
                f"is reached after {t['evaluations_in_source_order']} evaluations (in a random order: "
                f"{t['evaluations_in_random_order']} expected; {t['reaching']} configurations reach it).",
                "",
            ]
    parts += ["## Goals", ""] + [f"- {k}: {'met' if v else 'missed'}" for k, v in results["goals"].items()]
    return "\n".join(parts) + "\n"


def run(out: Path, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Run the benchmark, write ``out/results.json`` and ``out/report.md``; returns the results.

    Args:
        out: the folder for the results and the report (made if missing).
        quick: use :data:`QUICK` instead of :data:`FULL` (default ``False``).
        settings: explicit settings; when given, ``quick`` is ignored (default ``None``).
    """
    started = time.perf_counter()
    s = settings or (QUICK if quick else FULL)
    makers: dict[str, Callable[[int], TransferProblem]] = {"lcbench": lcbench_problem, "kernel": kernel_problem}
    machine = machine_at_start()
    problems = []
    for problem_id, budget in s.budgets:
        tp = makers[problem_id](s.source_per_task)
        crowds: dict[int, list[FunctionEvaluation]] = {}
        for seed in s.seeds:
            with tempfile.TemporaryDirectory() as workdir:
                crowds[seed] = crowd_records(tp, Path(workdir), crowd=seed)
            log.info("%s: crowd %d, %d records downloaded", tp.id, seed, len(crowds[seed]))
        traces: dict[str, list[Trace]] = {}
        for name in s.tuners:
            for seed in s.seeds:
                t0 = time.perf_counter()
                traces.setdefault(name, []).append(run_tuner(name, tp, crowds[seed], seed, budget))
                log.info("%s %s seed %d: %.1f s", tp.id, name, seed, time.perf_counter() - t0)
        summary = summarise(tp, traces)
        summary["crowd_records"] = statistics.median_low(len(records) for records in crowds.values())
        summary["crowds"], summary["budget"] = len(crowds), budget
        summary["transferability"] = transferability(tp)
        problems.append(summary)
    results = {"problems": problems, "goals": goals(problems), "settings": asdict(s), "machine": machine}
    return finish_run(out, "crowd-transfer", results, render, quick=quick, started=started)
