"""What the TLA benchmark runs: Figure 3's scenarios and tuners, the settings, and the ask/tell driver.

Both the Figure-3 scenarios (:mod:`benchmarks.tla`) and the
cross-machine case (:mod:`benchmarks.tla_kernel`) build their engines
with :func:`make_engine` and drive them with :func:`drive_all`, so these
live below both.

Example (one tuner, one seed, 4 evaluations of scenario (a), in this process):
    >>> scenario = SCENARIOS[0]
    >>> problem = scenario.problem()
    >>> settings = Settings(seeds=(0,), tuners=("NoTLA",), evaluations=4, n_initial=2)
    >>> engine = make_engine("NoTLA", problem, scenario.target, None, 0, settings)
    >>> trace = run_tuner(engine, lambda c: (scenario.evaluate(scenario.target, c), None), 4)
    >>> len(trace.values), trace.failed
    (4, 0)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.tla_report import CHECKPOINTS
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import BRANIN_PROBLEM, DEMO_PROBLEM, branin, branin_grid_minimum, demo, demo_grid_minimum

__all__ = [
    "TUNERS",
    "SOURCE_SEED",
    "BRANIN_TASK_SEED",
    "SCALE_SAMPLES",
    "CROSS_MACHINE_ID",
    "Scenario",
    "SCENARIOS",
    "Settings",
    "FULL",
    "QUICK",
    "Trace",
    "Evaluate",
    "branin_tasks",
    "source_records",
    "make_engine",
    "run_tuner",
    "drive_all",
]

log = logging.getLogger(__name__)

#: Figure 3's tuners -> the TransferLearning algorithm (None: NoTLA, single-task MLA).
TUNERS: dict[str, str | None] = {
    "NoTLA": None,
    "Multitask(PS)": "multitask_ps",
    "Multitask(TS)": "multitask_ts",
    "WeightedSum(equal)": "weighted_sum_equal",
    "WeightedSum(dynamic)": "weighted_sum_dynamic",
    "Stacking": "stacking",
    "Ensemble(toggling)": "ensemble_toggling",
    "Ensemble(prob)": "ensemble_prob",
    "Ensemble(proposed)": "ensemble",
}
SOURCE_SEED = 2023  # the source samples of every scenario
BRANIN_TASK_SEED = 5  # S1, S2, S3, T1, T2
SCALE_SAMPLES = 10_000  # random configurations that set a scenario's regret scale
CROSS_MACHINE_ID = "dedispersion_A100_to_W7800"  # run by benchmarks.tla_kernel


def branin_tasks(seed: int = BRANIN_TASK_SEED) -> dict[str, dict[str, float]]:
    """S1, S2, S3, T1, T2: uniform draws from :data:`BRANIN_PROBLEM`'s input space (a fixed seed).

    Args:
        seed: the random stream's seed.

    >>> tasks = branin_tasks()
    >>> list(tasks), tasks == branin_tasks(), 0.5 <= tasks["T1"]["a"] <= 1.5
    (['S1', 'S2', 'S3', 'T1', 'T2'], True, True)
    """
    rng = np.random.default_rng(seed)
    bounds = [(p["name"], p["lower_bound"], p["upper_bound"]) for p in BRANIN_PROBLEM["input_space"]]
    return {
        label: {name: round(float(rng.uniform(lo, hi)), 6) for name, lo, hi in bounds}
        for label in ("S1", "S2", "S3", "T1", "T2")
    }


@dataclass(frozen=True)
class Scenario:
    """One panel of Figure 3: the function, the source tasks and the target task."""

    id: str
    function: str  # "demo" or "branin"
    sources: tuple[Mapping[str, float], ...]
    target: Mapping[str, float]
    description: str = ""

    def problem(self) -> ProblemSpace:
        """The scenario's problem (the demo problem or Branin)."""
        return ProblemSpace.parse(DEMO_PROBLEM if self.function == "demo" else BRANIN_PROBLEM)

    def evaluate(self, task: Mapping[str, float], config: Mapping[str, float]) -> float:
        """The scenario's function at ``config`` on ``task``.

        Args:
            task: the task parameters.
            config: the tuning parameters.
        """
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
        return Scenario(
            sid,
            "branin",
            tuple(b[s] for s in sources),
            b[target],
            f"Branin, source {', '.join(sources)} -> target {target}",
        )

    return (
        Scenario("a", "demo", ({"t": 0.8},), {"t": 1.0}, "demo, source t=0.8 -> target t=1.0"),
        Scenario("b", "demo", ({"t": 0.8},), {"t": 1.2}, "demo, source t=0.8 -> target t=1.2"),
        branin_scenario("c", ["S1"], "T1"),
        branin_scenario("d", ["S1"], "T2"),
        branin_scenario("e", ["S1", "S2", "S3"], "T1"),
        branin_scenario("f", ["S1", "S2", "S3"], "T2"),
    )


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
    n_initial: int = 5  # NoTLA's LHS points
    cross_machine_seeds: tuple[int, ...] = ()
    cross_machine_tuners: tuple[str, ...] = tuple(TUNERS)
    checkpoints: tuple[int, ...] = CHECKPOINTS
    workers: int = 2


FULL = Settings(seeds=(0, 1, 2, 3, 4), cross_machine_seeds=(0, 1, 2, 3, 4))
QUICK = Settings(seeds=(0, 1), cross_machine_seeds=(0, 1))


def source_records(
    problem: ProblemSpace,
    sources: Sequence[Mapping[str, Any]],
    n: int,
    evaluate: Callable[[Mapping[str, Any], Mapping[str, Any]], float],
    seed: int = SOURCE_SEED,
) -> list[FunctionEvaluation]:
    """``n`` uniformly random evaluations of each source task (source ``k`` draws from stream ``[seed, k]``).

    Args:
        problem: the problem the configurations are drawn from.
        sources: the source tasks.
        n: evaluations per source task.
        evaluate: ``evaluate(task, config)``, the objective's value.
        seed: the first number of every source's random stream.

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


def make_engine(
    tuner: str,
    problem: ProblemSpace,
    target: Mapping[str, Any],
    source: Any,
    seed: int,
    settings: Settings,
    candidates: Sequence[Mapping[str, Any]] | None = None,
    notla_problem: ProblemSpace | None = None,
) -> Any:
    """NoTLA's MLA or a TransferLearning engine of ``tuner``'s algorithm, fits inline.

    Args:
        tuner: a name in :data:`TUNERS`.
        problem: the problem the TLA engines tune.
        target: the target task.
        source: the engines' :class:`~raytuner.engines.transfer.SourceData` (NoTLA ignores it).
        seed: the engine's seed.
        settings: the run's settings (NoTLA's ``n_initial``).
        candidates: the configurations a TLA engine may suggest (``None``: any).
        notla_problem: the problem NoTLA tunes instead of ``problem``.
    """
    algorithm = TUNERS[tuner]
    if algorithm is None:
        from raytuner.engines import MLA

        return MLA(
            notla_problem or problem, [dict(target)], seed=seed, n_initial=settings.n_initial, executor=InlineExecutor()
        )
    from raytuner.engines.transfer import TransferLearning

    return TransferLearning(
        problem,
        dict(target),
        source,
        algorithm=algorithm,
        seed=seed,
        candidates=None if candidates is None else list(candidates),
        executor=InlineExecutor(),
    )


def run_tuner(
    engine: Any,
    evaluate: Evaluate,
    evaluations: int,
    objective: str = "y",
    machine: Mapping[str, Any] | None = None,
    valid: Callable[[Mapping[str, Any]], bool] | None = None,
) -> Trace:
    """Ask/tell ``engine`` ``evaluations`` times; ``evaluate(config) -> (value, failure)``.

    A configuration for which ``valid`` is false is told as a failed
    evaluation "outside the valid space" (and counted).

    Args:
        engine: an ask/tell engine.
        evaluate: ``evaluate(config) -> (value, failure)``.
        evaluations: how many configurations to ask for.
        objective: the output's name in the told records.
        machine: the told records' ``machine_configuration``.
        valid: whether a configuration may be evaluated (``None``: all may).
    """
    trace = Trace()
    value: float | None
    failure: str | None
    for _ in range(evaluations):
        started = time.perf_counter()
        s = engine.ask()
        trace.ask_seconds.append(time.perf_counter() - started)
        if valid is not None and not valid(s.config):
            value, failure = None, "outside the valid space"
            trace.outside_valid += 1
        else:
            value, failure = evaluate(s.config)
        record = FunctionEvaluation.create(
            s.task,
            s.config,
            None if value is None else {objective: value},
            failure=failure,
            provenance=s.provenance,
            machine_configuration=machine,
        )
        engine.tell(record)
        trace.failed += value is None
        trace.values.append(math.nan if value is None else float(value))
        trace.proposers.append(str(s.provenance.engine))
    return trace


def drive_all(
    sid: str,
    settings: Settings,
    seeds: Sequence[int],
    tuners: Sequence[str],
    build: Callable[[str, int], Any],
    evaluate: Evaluate,
    **kwargs: Any,
) -> dict[str, list[Trace]]:
    """Every tuner x seed on one scenario: ``build(tuner, seed)`` makes the engine; the traces per tuner.

    Args:
        sid: the scenario's id (for the log).
        settings: the run's settings (evaluations per run).
        seeds: the seeds of each tuner.
        tuners: the tuners' names.
        build: ``build(tuner, seed)``, a new engine.
        evaluate: ``evaluate(config) -> (value, failure)``.
        **kwargs: passed on to :func:`run_tuner`.
    """
    traces: dict[str, list[Trace]] = {t: [] for t in tuners}
    for tuner in tuners:
        for seed in seeds:
            started = time.perf_counter()
            trace = run_tuner(build(tuner, seed), evaluate, settings.evaluations, **kwargs)
            traces[tuner].append(trace)
            log.info(
                "scenario %s: %s seed %d took %.1f s, best %.4g",
                sid,
                tuner,
                seed,
                time.perf_counter() - started,
                np.nanmin(trace.values) if np.isfinite(trace.values).any() else math.nan,
            )
    return traces
