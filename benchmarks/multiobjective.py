"""Multi-objective benchmark: our multi-objective MLA against Optuna's NSGA-II, MOTPE and GPSampler, and random.

Run it with::

    python -m benchmarks multiobjective --out DIR [--quick]

It writes ``DIR/results.json`` and ``DIR/report.md``. The problems and
tuners are in :mod:`benchmarks.mo_problems` (a shifted ZDT1 family with a
known front, the same with an output constraint, LCBench's accuracy
against training time on 4 tasks, and PyAMG's solve work against its memory
on 3 tasks, without and with a bound on the memory). Each tuner's hypervolume (of each
task's feasible front, mean over tasks; reference point fixed per problem
and written in the results) is taken at 25, 50 and 100 % of its evaluations
per task, mean and sd over 10 seeds (quick: 2); on a constrained problem
the share of suggestions after the initial design that broke the output
constraint; and the median time of a suggestion.

``results.json``: ``problems[{id, reference_point, rows[{tuner,
hypervolume_by_fraction, hv_sd_by_fraction, constraint_violations,
suggest_ms_median}]}]``, ``goals``.

Goals: our MLA has the highest mean hypervolume at 50 and 100 % on every
problem; at most 10 % of its suggestions after the initial design break an
output constraint; a suggestion takes at most 1 s at 4 tasks x 50
evaluations x 2 objectives (LCBench: the longest of its last asks).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.band_peers import torch_missing
from benchmarks.data import find
from benchmarks.mo_problems import RUNNERS, MOProblem, Run, amg_mo_problem, lcbench_problem, zdt_problem
from benchmarks.report import finish_run, markdown_table
from raytuner.problem.pareto import hypervolume, objective_values, pareto_front
from raytuner.session.progress import task_label

__all__ = ["run", "FRACTIONS", "PROBLEMS", "problems", "measure", "goals", "render_report"]

log = logging.getLogger(__name__)

#: The points of each run's budget the hypervolume is taken at.
FRACTIONS = (0.25, 0.5, 1.0)
GOAL_VIOLATIONS = 0.10
GOAL_SUGGEST_S = 1.0


#: Problem id -> its builder (``quick``), in the order of the report.
PROBLEMS: dict[str, Callable[[bool], MOProblem]] = {
    "zdt": lambda quick: zdt_problem(False, quick),
    "zdt-constrained": lambda quick: zdt_problem(True, quick),
    "lcbench": lcbench_problem,
    "amg": lambda quick: amg_mo_problem(False, quick),
    "amg-constrained": lambda quick: amg_mo_problem(True, quick),
}


def problems() -> list[str]:
    """The ids of the problems this machine can run (LCBench needs its data and onnxruntime, AMG PyAMG)."""
    chosen = ["zdt", "zdt-constrained"]
    try:
        from raytuner.test_problems.lcbench import LCBenchSurrogate

        LCBenchSurrogate(find("yahpo_lcbench"))
        chosen.append("lcbench")
    except (ImportError, OSError) as exc:
        log.warning("skipping the LCBench problem: %s", exc)
    try:
        import pyamg  # noqa: F401
    except ImportError as exc:
        log.warning("skipping the AMG problems: %s", exc)
    else:
        chosen += ["amg", "amg-constrained"]
    return chosen


def _measure_problem(problem_id: str, quick: bool, seeds: list[int], names: list[str]) -> dict[str, Any]:
    """One problem's row, built and measured in this process (a worker of :func:`run`).

    Each worker computes on one thread (BLAS and torch): two workers with a
    thread pool each on two cores ran Optuna's GPSampler ten times slower.
    """
    from threadpoolctl import threadpool_limits

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if "optuna_gp" in names:
        import torch

        torch.set_num_threads(1)
    with threadpool_limits(1):
        return measure(PROBLEMS[problem_id](quick), seeds, {name: RUNNERS[name] for name in names})


def _hypervolumes(mo: MOProblem, run: Run) -> list[float]:
    """Mean over tasks of the feasible front's hypervolume after each fraction of the evaluations."""
    out = []
    for fraction in FRACTIONS:
        per_task = []
        for records in run.records:
            seen = records[: max(1, round(fraction * len(records)))]
            front = pareto_front(mo.problem, seen)
            per_task.append(hypervolume(objective_values(mo.problem, front), mo.reference) if front else 0.0)
        out.append(float(np.mean(per_task)))
    return out


def _violations(mo: MOProblem, run: Run) -> float | None:
    if not mo.problem.output_constraints:
        return None
    guided = [r for records in run.records for r in records[mo.n_initial :]]
    broken = [r for r in guided if r.status == "ok" and not mo.problem.meets_output_constraints(r.evaluation_result)]
    return len(broken) / len(guided) if guided else None


def measure(mo: MOProblem, seeds: list[int], tuners: Mapping[str, Any]) -> dict[str, Any]:
    """Every tuner on every seed of ``mo``: the problem's row of ``results.json``.

    Args:
        mo: the problem.
        seeds: the seeds.
        tuners: tuner name to runner.
    """
    rows = []
    for name, runner in tuners.items():
        volumes, violations, asks, last_asks = [], [], [], []
        for seed in seeds:
            started = time.perf_counter()
            run = runner(mo, seed)
            volumes.append(_hypervolumes(mo, run))
            violations.append(_violations(mo, run))
            asks += run.ask_seconds
            last_asks += run.ask_seconds[-len(mo.tasks) :]
            log.info(
                "%s %s seed %d: hypervolume %s in %.1f s",
                mo.id,
                name,
                seed,
                [round(v, 4) for v in volumes[-1]],
                time.perf_counter() - started,
            )
        table = np.array(volumes)
        counted = [v for v in violations if v is not None]
        rows.append(
            {
                "tuner": name,
                "hypervolume_by_fraction": {f"{f:g}": round(float(m), 6) for f, m in zip(FRACTIONS, table.mean(0))},
                "hv_sd_by_fraction": {f"{f:g}": round(float(s), 6) for f, s in zip(FRACTIONS, table.std(0))},
                "constraint_violations": round(float(np.mean(counted)), 4) if counted else None,
                "suggest_ms_median": round(1000 * statistics.median(asks), 2),
                "suggest_ms_last_max": round(1000 * max(last_asks), 2),
            }
        )
    exact = None if mo.exact is None else {k: round(v, 6) for k, v in mo.exact.items()}
    return {
        "id": mo.id,
        "reference_point": mo.reference,
        "tasks": [task_label(t) for t in mo.tasks],
        "evaluations_per_task": mo.evaluations,
        "n_initial": mo.n_initial,
        "exact_hypervolume": exact,
        "objectives": [f"{o.name} ({o.goal})" for o in mo.problem.optimised],
        "output_constraints": [
            f"{o.lower_bound} <= {o.name} <= {o.upper_bound}" for o in mo.problem.output_constraints
        ],
        "rows": rows,
    }


def goals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's goals over the problems' rows.

    Args:
        rows: the ``problems`` of ``results.json``.
    """
    leading: dict[str, Any] = {}
    for p in rows:
        for f in ("0.5", "1"):
            ranked = sorted(p["rows"], key=lambda r: -r["hypervolume_by_fraction"][f])
            leading[f"{p['id']}@{f}"] = ranked[0]["tuner"]
    ours = {p["id"]: next(r for r in p["rows"] if r["tuner"] == "mla") for p in rows}
    violations = {k: r["constraint_violations"] for k, r in ours.items() if r["constraint_violations"] is not None}
    lcbench = ours.get("lcbench")
    return {
        "mla_highest_hypervolume_at_50_and_100": {"met": all(v == "mla" for v in leading.values()), "leader": leading},
        "violations_at_most_10pct": {
            "met": all(v <= GOAL_VIOLATIONS for v in violations.values()) if violations else None,
            "detail": violations,
        },
        "suggest_at_most_1s_at_4x50x2": {
            "met": None if lcbench is None else lcbench["suggest_ms_last_max"] <= 1000 * GOAL_SUGGEST_S,
            "detail": None if lcbench is None else lcbench["suggest_ms_last_max"],
        },
    }


def render_report(results: Mapping[str, Any]) -> str:
    """The Markdown report.

    Args:
        results: the benchmark's results.
    """
    lines = [
        "# Multi-objective benchmark",
        "",
        f"Command: `{results['command']}`. Elapsed {results['elapsed_s']} s; "
        f"seeds {results['seeds']}; problems run side by side in {results.get('processes', 1)} processes "
        "(suggest times are taken under that load).",
        "",
    ]
    for p in results["problems"]:
        lines += [
            f"## {p['id']}",
            "",
            f"Objectives {', '.join(p['objectives'])}; output constraints "
            f"{', '.join(p['output_constraints']) or 'none'}; tasks {', '.join(p['tasks'])}; "
            f"{p['evaluations_per_task']} evaluations per task ({p['n_initial']} initial); reference point "
            f"{p['reference_point']} (minimisation terms)."
            + (f" Exact hypervolume per task: {p['exact_hypervolume']}." if p["exact_hypervolume"] else ""),
            "",
        ]
        lines.append(
            markdown_table(
                [
                    "tuner",
                    *[f"HV @{float(f):.0%}" for f in p["rows"][0]["hypervolume_by_fraction"]],
                    "violations",
                    "suggest ms (median)",
                    "last asks ms (max)",
                ],
                [
                    [
                        r["tuner"],
                        *[
                            f"{m:.4g} ± {s:.2g}"
                            for m, s in zip(r["hypervolume_by_fraction"].values(), r["hv_sd_by_fraction"].values())
                        ],
                        "-" if r["constraint_violations"] is None else f"{r['constraint_violations']:.1%}",
                        r["suggest_ms_median"],
                        r["suggest_ms_last_max"],
                    ]
                    for r in p["rows"]
                ],
            )
        )
        lines.append("")
    lines += ["## Goals", ""]
    for name, g in results["goals"].items():
        state = "met" if g["met"] else "not met" if g["met"] is False else "not measured"
        lines.append(f"- {name}: {state} ({g.get('leader') or g.get('detail')})")
    return "\n".join(lines) + "\n"


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    """Run the benchmark and write ``out/results.json`` and ``out/report.md``.

    Args:
        out: the output folder.
        quick: 2 seeds and fewer evaluations (full: 10 seeds).
    """
    started = time.perf_counter()
    seeds = [0, 1] if quick else list(range(10))
    tuners = dict(RUNNERS)
    if (why := torch_missing()) is not None:
        log.warning("skipping the optuna_gp peer: %s", why)
        del tuners["optuna_gp"]
    # the problems run side by side, one process per core (at most 2), the longest first; asks are timed
    # under that load
    chosen = sorted(problems(), key=lambda p: p not in ("lcbench", "amg-constrained"))
    jobs = max(1, min(2, os.cpu_count() or 1, len(chosen)))
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_measure_problem, p, quick, seeds, list(tuners)) for p in chosen]
        done = {p: f.result() for p, f in zip(chosen, futures)}
    rows = [done[p] for p in PROBLEMS if p in done]
    results = {"problems": rows, "goals": goals(rows), "seeds": seeds, "tuners": list(tuners), "processes": jobs}
    return finish_run(out, "multiobjective", results, render_report, quick=quick, started=started)
