"""TLA benchmark: the transfer-learning algorithms of GPTuneCrowd against NoTLA (paper 000, Figure 3).

Run it with::

    python -m benchmarks tla --out DIR [--quick]

or ``benchmarks.run_benchmark("tla", Path(DIR), quick=False)``. It writes
``DIR/results.json``, ``DIR/report.md`` and one best-so-far plot per scenario
(``tla_{id}.png``, when matplotlib is installed), and logs progress on the
``benchmarks.tla`` logger.

- **Scenarios** (Figure 3): (a) demo, source t = 0.8, target t = 1.0; (b)
  target t = 1.2; (c), (d) Branin (:data:`~raytuner.test_problems.BRANIN_PROBLEM`),
  one random source task S1, targets T1 and T2; (e), (f) three random source
  tasks S1–S3, targets T1 and T2 (tasks drawn with a fixed seed). Each source
  task has 200 uniformly random evaluations (a fixed seed: the same for every
  tuner and seed of a scenario); each tuner makes 20 target evaluations.
- **Tuners**: NoTLA (single-task :class:`~raytuner.engines.MLA`, 5 LHS
  points) and eight :class:`~raytuner.engines.transfer.TransferLearning`
  algorithms, driven by ask/tell without Ray. One ``SourceData`` per scenario
  serves every engine of the scenario.
- **Cross-machine** (a real case): dedispersion on an A100 (200 random
  configurations of the Kernel Tuner cache, :mod:`benchmarks.kernel_cache`)
  transferred to the same kernel on a Radeon PRO W7800; the objective is the
  cached time, a failed configuration a failed evaluation
  (:mod:`benchmarks.tla_kernel`).

``--quick`` runs 2 seeds (full: 5) of everything. Scenarios run in parallel
worker processes (2 by default); the summaries, goals and report are in
:mod:`benchmarks.tla_report`.

Example (a tiny run: one scenario, one seed, 6 evaluations, two tuners, in this process)::

    s = Settings(seeds=(0,), scenarios=("a",), tuners=("NoTLA", "WeightedSum(equal)"), evaluations=6,
                 source_samples=30, checkpoints=(3, 6), workers=1)
    results = run(Path("bench_out/tla"), quick=True, settings=s)
    results["scenarios"][0]["best_so_far"]["NoTLA"]   # {'3': [mean, sd], '6': [mean, sd]}
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import finish_run, machine_at_start
from benchmarks.tla_drive import (
    BRANIN_TASK_SEED,
    CROSS_MACHINE_ID,
    FULL,
    QUICK,
    SCALE_SAMPLES,
    SCENARIOS,
    SOURCE_SEED,
    TUNERS,
    Scenario,
    Settings,
    Trace,
    branin_tasks,
    drive_all,
    make_engine,
    run_tuner,
    source_records,
)
from benchmarks.tla_kernel import run_cross_machine
from benchmarks.tla_report import goals, render_report, save_plots, summarise, versus_reference
from raytuner.models.executors import InlineExecutor

__all__ = [
    "TUNERS",
    "Scenario",
    "SCENARIOS",
    "Settings",
    "FULL",
    "QUICK",
    "Trace",
    "branin_tasks",
    "source_records",
    "make_engine",
    "run_tuner",
    "drive_all",
    "run_scenario",
    "run",
    "CROSS_MACHINE_ID",
]

log = logging.getLogger(__name__)


def run_scenario(sid: str, settings: Settings) -> dict[str, Any]:
    """Every tuner and seed on scenario ``sid``: raw traces plus the scenario's optimum and regret scale.

    Args:
        sid: the scenario's id.
        settings: the seeds and evaluations to run.
    """
    from raytuner.engines.transfer import SourceData

    started = time.perf_counter()
    scenario = next(s for s in SCENARIOS if s.id == sid)
    problem = scenario.problem()
    records = source_records(problem, scenario.sources, settings.source_samples, scenario.evaluate)
    source = SourceData(problem, records, executor=InlineExecutor())
    space = problem.parameter_space
    rng = np.random.default_rng(np.random.SeedSequence([SOURCE_SEED, 99]))
    sample = [scenario.evaluate(scenario.target, c) for c in space.decode(rng.random((SCALE_SAMPLES, space.dimension)))]
    optimum = scenario.optimum()
    traces = drive_all(
        sid,
        settings,
        settings.seeds,
        settings.tuners,
        lambda tuner, seed: make_engine(tuner, problem, scenario.target, source, seed, settings),
        lambda c: (scenario.evaluate(scenario.target, c), None),
    )
    return {
        "id": sid,
        "description": scenario.description,
        "function": scenario.function,
        "sources": [dict(s) for s in scenario.sources],
        "target": dict(scenario.target),
        "optimum": optimum,
        "scale": float(np.median(sample)) - optimum,
        "traces": traces,
        "seeds": list(settings.seeds),
        "source_samples_per_task": settings.source_samples,
        "wall_s": time.perf_counter() - started,
    }


def _round_opt(x: float) -> float:
    return round(float(x), 6)


def _init_worker(level: int) -> None:
    from threadpoolctl import threadpool_limits

    logging.basicConfig(level=level, format="%(levelname)s %(processName)s %(name)s: %(message)s")
    globals()["_BLAS_LIMIT"] = threadpool_limits(1)  # 2 workers share 2 cores: one BLAS thread each


def _job(job: str, settings: Settings) -> dict[str, Any]:
    if job == CROSS_MACHINE_ID:
        return run_cross_machine(settings)
    return run_scenario(job, settings)


def _run_jobs(jobs: Sequence[str], settings: Settings) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if settings.workers <= 1:
        for job in jobs:
            done[job] = _job(job, settings)
        return done
    level = logging.getLogger("raytuner").getEffectiveLevel()
    with ProcessPoolExecutor(
        max_workers=settings.workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(level,),
    ) as pool:
        futures = {pool.submit(_job, job, settings): job for job in jobs}
        for future in as_completed(futures):
            result = future.result()
            done[futures[future]] = result
            log.info(
                "tla benchmark: %s done in %.1f s (%d of %d)", futures[future], result["wall_s"], len(done), len(jobs)
            )
    return done


def run(out: Path, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Run the TLA benchmark; write ``out/results.json``, ``out/report.md`` and the PNG plots.

    ``settings`` overrides ``quick`` (:data:`QUICK` or :data:`FULL`). The quick
    run takes about 10 minutes on 2 cores.

    Args:
        out: the output folder (made if missing).
        quick: two seeds instead of five (default ``False``).
        settings: the scenarios' seeds and evaluations, instead of those ``quick`` picks (default ``None``).
    """
    out = Path(out)
    s = settings if settings is not None else (QUICK if quick else FULL)
    started = time.perf_counter()
    machine = machine_at_start()
    # the heaviest first: the cross-machine case, then three source tasks, then one
    jobs = ([CROSS_MACHINE_ID] if s.cross_machine_seeds else []) + sorted(s.scenarios, key=lambda i: "efcdab".find(i))
    log.info(
        "tla benchmark%s: scenarios %s x %d tuners x seeds %s x %d evaluations; cross-machine seeds %s; %d worker(s)",
        " (quick)" if quick else "",
        list(s.scenarios),
        len(s.tuners),
        list(s.seeds),
        s.evaluations,
        list(s.cross_machine_seeds),
        s.workers,
    )
    done = _run_jobs(jobs, s)
    checkpoints = [c for c in s.checkpoints if c <= s.evaluations]
    scenarios = [summarise(done[i], checkpoints) for i in s.scenarios]
    cross = summarise(done[CROSS_MACHINE_ID], checkpoints) if CROSS_MACHINE_ID in done else None
    if cross is not None:
        cross["versus_notla"] = versus_reference(cross)
        cross["source_optimum"] = _round_opt(done[CROSS_MACHINE_ID]["source_optimum"])
    out.mkdir(parents=True, exist_ok=True)
    for summary in scenarios + ([cross] if cross else []):
        summary["plot"] = save_plots(summary, out)
    asks = {
        t: [x for i in s.scenarios for trace in done[i]["traces"].get(t, []) for x in trace.ask_seconds]
        for t in s.tuners
    }
    results = {
        "scenarios": scenarios,
        "cross_machine": cross,
        "goals": goals(scenarios, checkpoints),
        "ask_seconds_median": {t: round(float(np.median(v)), 4) for t, v in asks.items() if v},
        "settings": {
            "seeds": list(s.seeds),
            "scenarios": list(s.scenarios),
            "tuners": list(s.tuners),
            "evaluations": s.evaluations,
            "source_samples_per_task": s.source_samples,
            "notla_n_initial": s.n_initial,
            "cross_machine_seeds": list(s.cross_machine_seeds),
            "cross_machine_tuners": list(s.cross_machine_tuners),
            "checkpoints": checkpoints,
            "workers": s.workers,
            "source_seed": SOURCE_SEED,
            "branin_task_seed": BRANIN_TASK_SEED,
            "branin_tasks": branin_tasks(),
        },
        "machine": machine,
    }
    return finish_run(out, "tla", results, render_report, quick=quick, started=started)
