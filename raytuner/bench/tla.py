"""TLA benchmark: the transfer-learning algorithms of GPTuneCrowd against NoTLA (paper 000, Figure 3).

Run it with::

    raytuner bench tla --out DIR [--quick]

or ``raytuner.bench.run_benchmark("tla", Path(DIR), quick=False)``. It writes
``DIR/results.json``, ``DIR/report.md`` and one best-so-far plot per scenario
(``tla_{id}.png``, when matplotlib is installed), and logs progress on the
``raytuner.bench.tla`` logger.

- **Scenarios** (Figure 3): (a) demo, source t = 0.8, target t = 1.0; (b)
  target t = 1.2; (c), (d) Branin (:data:`~raytuner.testing.functions.BRANIN_PROBLEM`),
  one random source task S1, targets T1 and T2; (e), (f) three random source
  tasks S1–S3, targets T1 and T2 (tasks drawn with a fixed seed). Each source
  task has 200 uniformly random evaluations (a fixed seed: the same for every
  tuner and seed of a scenario); each tuner makes 20 target evaluations.
- **Tuners**: NoTLA (single-task :class:`~raytuner.strategies.MLA`, 5 LHS
  points) and eight :class:`~raytuner.strategies.transfer.TransferLearning`
  algorithms, driven by ask/tell without Ray. One ``SourceData`` per scenario
  serves every engine of the scenario.
- **Cross-machine** (a real case): dedispersion on an A100 (200 random
  configurations of the Kernel Tuner cache, :mod:`raytuner.bench.kernel_cache`)
  transferred to the same kernel on a Radeon PRO W7800; the objective is the
  cached time, a failed configuration a failed evaluation
  (:mod:`raytuner.bench.tla_kernel`).

``--quick`` runs 2 seeds (full: 5) of everything. Scenarios run in parallel
worker processes (2 by default); the summaries, goals and report are in
:mod:`raytuner.bench.tla_report`.

Example (a tiny run: one scenario, one seed, 6 evaluations, two tuners, in this process)::

    s = Settings(seeds=(0,), scenarios=("a",), tuners=("NoTLA", "WeightedSum(equal)"), evaluations=6,
                 source_samples=30, checkpoints=(3, 6), workers=1)
    results = run(Path("bench_out/tla"), quick=True, settings=s)
    results["scenarios"][0]["best_so_far"]["NoTLA"]   # {'3': [mean, sd], '6': [mean, sd]}
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from raytuner.bench.report import machine_info, write_results
from raytuner.bench.tla_report import CHECKPOINTS, goals, render_report, save_plots, summarise, versus_reference
from raytuner.executors import InlineExecutor
from raytuner.records import FunctionEvaluation
from raytuner.space import ProblemSpace
from raytuner.testing.functions import BRANIN_PROBLEM, DEMO_PROBLEM, branin, branin_grid_minimum, demo, demo_grid_minimum

__all__ = ["TUNERS", "Scenario", "SCENARIOS", "Settings", "FULL", "QUICK", "branin_tasks", "source_records",
           "run_tuner", "drive_all", "run_scenario", "run", "CROSS_MACHINE_ID"]

log = logging.getLogger(__name__)

#: Figure 3's tuners -> the TransferLearning algorithm (None: NoTLA, single-task MLA).
TUNERS: dict[str, str | None] = {
    "NoTLA": None, "Multitask(PS)": "multitask_ps", "Multitask(TS)": "multitask_ts",
    "WeightedSum(equal)": "weighted_sum_equal", "WeightedSum(dynamic)": "weighted_sum_dynamic",
    "Stacking": "stacking", "Ensemble(toggling)": "ensemble_toggling", "Ensemble(prob)": "ensemble_prob",
    "Ensemble(proposed)": "ensemble"}
SOURCE_SEED = 2023          # the source samples of every scenario
BRANIN_TASK_SEED = 5        # S1, S2, S3, T1, T2
SCALE_SAMPLES = 10_000      # random configurations that set a scenario's regret scale
CROSS_MACHINE_ID = "dedispersion_A100_to_W7800"     # run by raytuner.bench.tla_kernel


def branin_tasks(seed: int = BRANIN_TASK_SEED) -> dict[str, dict[str, float]]:
    """S1, S2, S3, T1, T2: uniform draws from :data:`BRANIN_PROBLEM`'s input space (a fixed seed).

    >>> tasks = branin_tasks()
    >>> list(tasks), tasks == branin_tasks(), 0.5 <= tasks["T1"]["a"] <= 1.5
    (['S1', 'S2', 'S3', 'T1', 'T2'], True, True)
    """
    rng = np.random.default_rng(seed)
    bounds = [(p["name"], p["lower_bound"], p["upper_bound"]) for p in BRANIN_PROBLEM["input_space"]]  # type: ignore
    return {label: {name: round(float(rng.uniform(lo, hi)), 6) for name, lo, hi in bounds}
            for label in ("S1", "S2", "S3", "T1", "T2")}


@dataclass(frozen=True)
class Scenario:
    """One panel of Figure 3: the function, the source tasks and the target task."""

    id: str
    function: str                      # "demo" or "branin"
    sources: tuple[Mapping[str, float], ...]
    target: Mapping[str, float]
    description: str = ""

    def problem(self) -> ProblemSpace:
        return ProblemSpace.parse(DEMO_PROBLEM if self.function == "demo" else BRANIN_PROBLEM)

    def evaluate(self, task: Mapping[str, float], config: Mapping[str, float]) -> float:
        if self.function == "demo":
            return demo(config["x"], task["t"])
        return branin(config["x1"], config["x2"], **task)

    def optimum(self) -> float:
        """The target's minimum (demo: a dense grid; Branin: a grid and a bounded polish)."""
        if self.function == "demo":
            return demo_grid_minimum(self.target["t"])[1]
        return branin_grid_minimum(self.target)[1]


def _scenarios() -> tuple[Scenario, ...]:
    b = branin_tasks()

    def branin_scenario(sid: str, sources: Sequence[str], target: str) -> Scenario:
        return Scenario(sid, "branin", tuple(b[s] for s in sources), b[target],
                        f"Branin, source {', '.join(sources)} -> target {target}")

    return (Scenario("a", "demo", ({"t": 0.8},), {"t": 1.0}, "demo, source t=0.8 -> target t=1.0"),
            Scenario("b", "demo", ({"t": 0.8},), {"t": 1.2}, "demo, source t=0.8 -> target t=1.2"),
            branin_scenario("c", ["S1"], "T1"), branin_scenario("d", ["S1"], "T2"),
            branin_scenario("e", ["S1", "S2", "S3"], "T1"), branin_scenario("f", ["S1", "S2", "S3"], "T2"))


#: Figure 3's six scenarios, (a)-(f).
SCENARIOS: tuple[Scenario, ...] = _scenarios()


@dataclass(frozen=True)
class Settings:
    """What one run covers (``workers=1`` runs everything in this process).

    >>> QUICK.seeds, FULL.seeds, QUICK.evaluations, len(QUICK.tuners), QUICK.scenarios
    ((0, 1), (0, 1, 2, 3, 4), 20, 9, ('a', 'b', 'c', 'd', 'e', 'f'))
    """

    seeds: tuple[int, ...]
    scenarios: tuple[str, ...] = tuple(s.id for s in SCENARIOS)
    tuners: tuple[str, ...] = tuple(TUNERS)
    evaluations: int = 20
    source_samples: int = 200
    n_initial: int = 5                   # NoTLA's LHS points
    cross_machine_seeds: tuple[int, ...] = ()
    cross_machine_tuners: tuple[str, ...] = tuple(TUNERS)
    checkpoints: tuple[int, ...] = CHECKPOINTS
    workers: int = 2


FULL = Settings(seeds=(0, 1, 2, 3, 4), cross_machine_seeds=(0, 1, 2, 3, 4))
QUICK = Settings(seeds=(0, 1), cross_machine_seeds=(0, 1))


def source_records(problem: ProblemSpace, sources: Sequence[Mapping[str, Any]], n: int,
                   evaluate: Callable[[Mapping[str, Any], Mapping[str, Any]], float], seed: int = SOURCE_SEED
                   ) -> list[FunctionEvaluation]:
    """``n`` uniformly random evaluations of each source task (source ``k`` draws from stream ``[seed, k]``).

    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> records = source_records(problem, [{"t": 0.8}], 3, lambda task, c: demo(c["x"], task["t"]))
    >>> len(records), records[0].task_parameter, records == records
    (3, {'t': 0.8}, True)
    """
    records = []
    space = problem.parameter_space
    for k, task in enumerate(sources):
        rng = np.random.default_rng(np.random.SeedSequence([seed, k]))
        for config in space.decode(rng.random((n, space.dimension))):
            records.append(FunctionEvaluation.create(task, config, {problem.objective().name: evaluate(task, config)}))
    return records


@dataclass
class Trace:
    """One (tuner, seed) run: each evaluation's value (NaN: failed), proposer and ask seconds."""

    values: list[float] = field(default_factory=list)
    proposers: list[str] = field(default_factory=list)
    ask_seconds: list[float] = field(default_factory=list)
    outside_valid: int = 0
    failed: int = 0


#: Evaluate a target configuration: (value, None), or (None, why it failed).
Evaluate = Callable[[Mapping[str, Any]], tuple[float | None, str | None]]


def make_engine(tuner: str, problem: ProblemSpace, target: Mapping[str, Any], source: Any, seed: int,
                settings: Settings, candidates: Sequence[Mapping[str, Any]] | None = None,
                notla_problem: ProblemSpace | None = None) -> Any:
    """NoTLA's MLA or a TransferLearning engine of ``tuner``'s algorithm, fits inline."""
    algorithm = TUNERS[tuner]
    if algorithm is None:
        from raytuner.strategies import MLA

        return MLA(notla_problem or problem, [dict(target)], seed=seed, n_initial=settings.n_initial,
                   executor=InlineExecutor())
    from raytuner.strategies.transfer import TransferLearning

    return TransferLearning(problem, dict(target), source, algorithm=algorithm, seed=seed,
                            candidates=None if candidates is None else list(candidates), executor=InlineExecutor())


def run_tuner(engine: Any, evaluate: Evaluate, evaluations: int, objective: str = "y",
              machine: Mapping[str, Any] | None = None, valid: Callable[[Mapping[str, Any]], bool] | None = None
              ) -> Trace:
    """Ask/tell ``engine`` ``evaluations`` times; ``evaluate(config) -> (value, failure)``.

    A configuration for which ``valid`` is false is told as a failed
    evaluation "outside the valid space" (and counted).
    """
    trace = Trace()
    for _ in range(evaluations):
        started = time.perf_counter()
        s = engine.ask()
        trace.ask_seconds.append(time.perf_counter() - started)
        if valid is not None and not valid(s.config):
            value, failure = None, "outside the valid space"
            trace.outside_valid += 1
        else:
            value, failure = evaluate(s.config)
        record = FunctionEvaluation.create(s.task, s.config, None if value is None else {objective: value},
                                           failure=failure, provenance=s.provenance,
                                           machine_configuration=machine)
        engine.tell(record)
        trace.failed += value is None
        trace.values.append(math.nan if value is None else float(value))
        trace.proposers.append(str(s.provenance.strategy))
    return trace


def drive_all(sid: str, settings: Settings, seeds: Sequence[int], tuners: Sequence[str],
               build: Callable[[str, int], Any], evaluate: Evaluate, **kwargs: Any) -> dict[str, list[Trace]]:
    """Every tuner x seed on one scenario: ``build(tuner, seed)`` makes the engine; the traces per tuner."""
    traces: dict[str, list[Trace]] = {t: [] for t in tuners}
    for tuner in tuners:
        for seed in seeds:
            started = time.perf_counter()
            trace = run_tuner(build(tuner, seed), evaluate, settings.evaluations, **kwargs)
            traces[tuner].append(trace)
            log.info("scenario %s: %s seed %d took %.1f s, best %.4g", sid, tuner, seed,
                     time.perf_counter() - started, np.nanmin(trace.values) if np.isfinite(trace.values).any()
                     else math.nan)
    return traces


def run_scenario(sid: str, settings: Settings) -> dict[str, Any]:
    """Every tuner and seed on scenario ``sid``: raw traces plus the scenario's optimum and regret scale."""
    from raytuner.strategies.transfer import SourceData

    started = time.perf_counter()
    scenario = next(s for s in SCENARIOS if s.id == sid)
    problem = scenario.problem()
    records = source_records(problem, scenario.sources, settings.source_samples, scenario.evaluate)
    source = SourceData(problem, records, executor=InlineExecutor())
    space = problem.parameter_space
    rng = np.random.default_rng(np.random.SeedSequence([SOURCE_SEED, 99]))
    sample = [scenario.evaluate(scenario.target, c) for c in space.decode(rng.random((SCALE_SAMPLES, space.dimension)))]
    optimum = scenario.optimum()
    traces = drive_all(sid, settings, settings.seeds, settings.tuners,
                        lambda tuner, seed: make_engine(tuner, problem, scenario.target, source, seed, settings),
                        lambda c: (scenario.evaluate(scenario.target, c), None))
    return {"id": sid, "description": scenario.description, "function": scenario.function,
            "sources": [dict(s) for s in scenario.sources], "target": dict(scenario.target), "optimum": optimum,
            "scale": float(np.median(sample)) - optimum, "traces": traces, "seeds": list(settings.seeds),
            "source_samples_per_task": settings.source_samples, "wall_s": time.perf_counter() - started}


def _round_opt(x: float) -> float:
    return round(float(x), 6)


def _init_worker(level: int) -> None:
    from threadpoolctl import threadpool_limits

    logging.basicConfig(level=level, format="%(levelname)s %(processName)s %(name)s: %(message)s")
    globals()["_BLAS_LIMIT"] = threadpool_limits(1)     # 2 workers share 2 cores: one BLAS thread each


def _job(job: str, settings: Settings) -> dict[str, Any]:
    if job == CROSS_MACHINE_ID:
        from raytuner.bench.tla_kernel import run_cross_machine

        return run_cross_machine(settings)
    return run_scenario(job, settings)


def _run_jobs(jobs: Sequence[str], settings: Settings) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if settings.workers <= 1:
        for job in jobs:
            done[job] = _job(job, settings)
        return done
    level = logging.getLogger("raytuner").getEffectiveLevel()
    with ProcessPoolExecutor(max_workers=settings.workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker, initargs=(level,)) as pool:
        futures = {pool.submit(_job, job, settings): job for job in jobs}
        for future in as_completed(futures):
            result = future.result()
            done[futures[future]] = result
            log.info("tla benchmark: %s done in %.1f s (%d of %d)", futures[future], result["wall_s"], len(done),
                     len(jobs))
    return done


def run(out: Path, quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Run the TLA benchmark; write ``out/results.json``, ``out/report.md`` and the PNG plots.

    ``settings`` overrides ``quick`` (:data:`QUICK` or :data:`FULL`). The quick
    run takes about 10 minutes on 2 cores.
    """
    out = Path(out)
    s = settings if settings is not None else (QUICK if quick else FULL)
    started = time.perf_counter()
    machine = machine_info()
    machine["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    # the heaviest first: the cross-machine case, then three source tasks, then one
    jobs = ([CROSS_MACHINE_ID] if s.cross_machine_seeds else []) + sorted(s.scenarios, key=lambda i: "efcdab".find(i))
    log.info("tla benchmark%s: scenarios %s x %d tuners x seeds %s x %d evaluations; cross-machine seeds %s; "
             "%d worker(s)", " (quick)" if quick else "", list(s.scenarios), len(s.tuners), list(s.seeds),
             s.evaluations, list(s.cross_machine_seeds), s.workers)
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
    asks = {t: [x for i in s.scenarios for trace in done[i]["traces"].get(t, []) for x in trace.ask_seconds]
            for t in s.tuners}
    results = {
        "scenarios": scenarios, "cross_machine": cross, "goals": goals(scenarios, checkpoints),
        "ask_seconds_median": {t: round(float(np.median(v)), 4) for t, v in asks.items() if v},
        "settings": {"seeds": list(s.seeds), "scenarios": list(s.scenarios), "tuners": list(s.tuners),
                     "evaluations": s.evaluations, "source_samples_per_task": s.source_samples,
                     "notla_n_initial": s.n_initial, "cross_machine_seeds": list(s.cross_machine_seeds),
                     "cross_machine_tuners": list(s.cross_machine_tuners), "checkpoints": checkpoints,
                     "workers": s.workers, "source_seed": SOURCE_SEED, "branin_task_seed": BRANIN_TASK_SEED,
                     "branin_tasks": branin_tasks()},
        "quick": quick, "machine": machine, "benchmark": "tla",
        "command": f"raytuner bench tla --out {out}{' --quick' if quick else ''}",
        "elapsed_s": round(time.perf_counter() - started, 1)}
    report = render_report(results)
    write_results(out, results, report)
    log.info("tla benchmark results (%s):\n%s", out / "results.json", report)
    return results
