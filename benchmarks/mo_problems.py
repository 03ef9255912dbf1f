"""The problems and tuners of the multi-objective benchmark (:mod:`benchmarks.multiobjective`).

Problems (each objective turned into minimisation by its goal; one
reference point per problem, fixed before any tuner runs):

- ``zdt``: ZDT1 (Zitzler, Deb and Thiele 2000) on three parameters, shifted by
  the task ``t``: ``f1 = a``, ``g = 1 + 9 (b1 + b2) / 2``,
  ``f2 = g (1 - sqrt(f1 / g)) + 0.2 t``; its front is ``f2 = 1 - sqrt(f1) + 0.2 t``,
  so the exact hypervolume is known;
- ``zdt-constrained``: the same with the recorded output ``mem = a + (b1 + b2) / 2``
  bounded by ``mem <= 0.6`` (an output constraint that cuts the front);
- ``lcbench``: YAHPO's LCBench surrogate (``../shared/data/yahpo_lcbench``),
  maximise ``val_accuracy`` and minimise ``time`` at epoch 52, 4 tasks;
- ``amg`` and ``amg-constrained``: PyAMG on 3-D convection-diffusion
  (:mod:`raytuner.test_problems.amg`, the problem of ``examples/amg_tuning.py``) on a
  10³ grid, 3 tasks (a, c): minimise the solve's deterministic ``work``
  (in fine-grid matrix-vector products) and its ``memory`` (the hierarchy's
  nonzeros over the fine matrix's); once more with ``memory <= 2`` as an
  output constraint. A solve that fails is a failed evaluation.

Tuners: ``mla`` (:class:`~raytuner.engines.multiobjective.MultiObjectiveMLA` over
all tasks), and per task Optuna's ``nsga2``, ``motpe`` (TPE with several
objectives), ``gp`` (``GPSampler``; it needs torch) and ``random`` search.
Optuna's samplers get the output constraint through ``constraints_func``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.band_peers import suggest_config
from benchmarks.data import find
from raytuner.engines import RandomSearch
from raytuner.engines.multiobjective import mla_engine
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems.amg import SolveFailure

__all__ = ["MOProblem", "zdt_problem", "lcbench_problem", "amg_mo_problem", "RUNNERS", "Run"]

Evaluate = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, float]]


@dataclass
class MOProblem:
    """One problem of the benchmark.

    Args:
        id: its name in the results.
        problem: the spaces (several optimised outputs, maybe an output constraint).
        tasks: the tasks tuned.
        evaluate: ``(task, config) -> outputs``.
        reference: the reference point of the hypervolume, in minimisation terms, one per objective.
        evaluations: evaluations per task.
        n_initial: the initial design (random startup trials of the peers) per task.
        exact: per task label, the hypervolume of the true front (``None``: unknown).
    """

    id: str
    problem: ProblemSpace
    tasks: list[dict[str, Any]]
    evaluate: Evaluate
    reference: list[float]
    evaluations: int
    n_initial: int
    exact: dict[str, float] | None = None


@dataclass
class Run:
    """What one tuner did on one problem and seed: per task its records in order, and its ask times.

    Args:
        records: per task (in the problem's order), its evaluations in order.
        ask_seconds: the wall time of every ask.
    """

    records: list[list[FunctionEvaluation]]
    ask_seconds: list[float] = field(default_factory=list)


def _zdt(task: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, float]:
    b = (config["b1"] + config["b2"]) / 2
    g = 1 + 9 * b
    return {"f1": config["a"], "f2": g * (1 - math.sqrt(config["a"] / g)) + 0.2 * task["t"], "mem": config["a"] + b}


def zdt_problem(constrained: bool, quick: bool) -> MOProblem:
    """The shifted ZDT1 family (``constrained``: with ``mem <= 0.6``).

    Args:
        constrained: add the output constraint.
        quick: fewer evaluations per task.
    """
    from raytuner.problem.pareto import hypervolume

    outputs: list[dict[str, Any]] = [{"name": "f1"}, {"name": "f2"}]
    if constrained:
        outputs.append({"name": "mem", "optimize": False, "upper_bound": 0.6})
    problem = ProblemSpace.parse(
        {
            "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "parameter_space": [
                {"name": n, "type": "real", "lower_bound": 0, "upper_bound": 1} for n in ("a", "b1", "b2")
            ],
            "output_space": outputs,
        }
    )
    tasks = [{"t": 0.0}, {"t": 0.5}, {"t": 1.0}]
    reference = [1.1, 11.0]
    a = np.linspace(0.0, 0.6 if constrained else 1.0, 100_001)
    exact = {f"t={t['t']:g}": hypervolume(np.c_[a, 1 - np.sqrt(a) + 0.2 * t["t"]], reference) for t in tasks}
    names = set(problem.objectives)
    return MOProblem(
        "zdt-constrained" if constrained else "zdt",
        problem,
        tasks,
        lambda task, config: {k: v for k, v in _zdt(task, config).items() if k in names},
        reference,
        20 if quick else 40,
        8,
        exact,
    )


def lcbench_problem(quick: bool) -> MOProblem:
    """LCBench: maximise ``val_accuracy``, minimise ``time`` at epoch 52 on 4 given tasks.

    The reference point: accuracy 0 and 1.1 times the longest time of 512
    random configurations per task (seed 0), fixed before any tuner runs.

    Args:
        quick: fewer evaluations per task.
    """
    from raytuner.problem.sampling import sample_configurations
    from raytuner.test_problems.lcbench import EPOCHS, LCBENCH_TASKS, LCBenchSurrogate

    model = LCBenchSurrogate(find("yahpo_lcbench"))
    task_ids = list(LCBENCH_TASKS[:4])
    base = model.problem(task_ids).model_dump()
    base["output_space"] = [{"name": "val_accuracy", "goal": "maximize"}, {"name": "time"}]
    problem = ProblemSpace.parse(base)
    tasks = [{"task_id": t} for t in task_ids]
    longest = 0.0
    for task in tasks:
        configs = sample_configurations(problem, task, 512, seed=0)
        rows = model.evaluate_many([task["task_id"]] * len(configs), configs, [EPOCHS[1]] * len(configs))
        longest = max(longest, float(np.max(rows[:, 0])))

    def evaluate(task: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, float]:
        out = model.evaluate(task["task_id"], config, EPOCHS[1])
        return {"val_accuracy": out["val_accuracy"], "time": out["time"]}

    return MOProblem("lcbench", problem, tasks, evaluate, [0.0, round(1.1 * longest, 3)], 25 if quick else 50, 10)


#: The grid of the AMG problem (k³ unknowns) and the seconds after which a solve counts as failed.
AMG_GRID, AMG_TIME_LIMIT = 10, 10.0
#: The output constraint of ``amg-constrained``.
AMG_MEMORY_BOUND = 2.0
#: The AMG problems' reference point (work, memory): near the medians of 64 random configurations per task
#: (seed 0: 117.1 and 2.04), fixed so that every run and every tuner is measured against the same point.
AMG_REFERENCE = (120.0, 2.5)


def amg_mo_problem(constrained: bool, quick: bool) -> MOProblem:
    """PyAMG: minimise the solve's work and memory on 3 tasks (``constrained``: with ``memory <= 2``).

    The reference point (:data:`AMG_REFERENCE`) lies near each objective's
    median over random configurations, so the hypervolume measures the better
    half of the space.

    Args:
        constrained: bound the memory (it stays an objective).
        quick: fewer evaluations per task.
    """
    from raytuner.test_problems.amg import AMG_PROBLEM, DEFAULT_TASKS, solve

    memory: dict[str, Any] = {"name": "memory", "goal": "minimize"}
    if constrained:
        memory["upper_bound"] = AMG_MEMORY_BOUND
    problem = ProblemSpace.parse({**AMG_PROBLEM, "output_space": [{"name": "work", "goal": "minimize"}, memory]})
    tasks = [dict(t) for t in DEFAULT_TASKS]

    def evaluate(task: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, float]:
        done = solve(task, config, AMG_GRID, time_limit=AMG_TIME_LIMIT)
        return {"work": done.work, "memory": done.memory}

    return MOProblem(
        "amg-constrained" if constrained else "amg",
        problem,
        tasks,
        evaluate,
        list(AMG_REFERENCE),
        20 if quick else 40,
        10,
    )


def _measure(
    mo: MOProblem, task: Mapping[str, Any], config: Mapping[str, Any]
) -> tuple[dict[str, float] | None, str | None]:
    """``(outputs, None)``, or ``(None, why)`` for an evaluation that failed."""
    try:
        return mo.evaluate(task, config), None
    except SolveFailure as exc:
        return None, exc.reason


def _drive(engine: Any, mo: MOProblem) -> Run:
    run = Run([[] for _ in mo.tasks])
    for _ in range(mo.evaluations * len(mo.tasks)):
        started = time.perf_counter()
        suggestion = engine.ask()
        run.ask_seconds.append(time.perf_counter() - started)
        index = engine.task_index(suggestion.task)
        outputs, failure = _measure(mo, suggestion.task, suggestion.config)
        run.records[index].append(engine.tell(suggestion, outputs, failure=failure))
    return run


def run_mla(mo: MOProblem, seed: int) -> Run:
    """Our multi-objective MLA over every task together."""
    return _drive(mla_engine(mo.problem, mo.tasks, seed, n_initial=mo.n_initial, executor=InlineExecutor()), mo)


def run_random(mo: MOProblem, seed: int) -> Run:
    """Random search over every task."""
    return _drive(RandomSearch(mo.problem, mo.tasks, seed=seed), mo)


def _optuna(sampler: str, mo: MOProblem, seed: int) -> Run:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objectives = mo.problem.optimised
    bounded = mo.problem.output_constraints
    constraints = (lambda trial: trial.user_attrs["violations"]) if bounded else None
    run = Run([[] for _ in mo.tasks])
    for j, task in enumerate(mo.tasks):
        options: dict[str, Any] = {"seed": seed * 1000 + j}
        if constraints is not None:
            options["constraints_func"] = constraints
        chosen: optuna.samplers.BaseSampler
        if sampler == "nsga2":
            chosen = optuna.samplers.NSGAIISampler(population_size=mo.n_initial, **options)
        elif sampler == "motpe":
            chosen = optuna.samplers.TPESampler(n_startup_trials=mo.n_initial, multivariate=True, **options)
        else:
            chosen = optuna.samplers.GPSampler(n_startup_trials=mo.n_initial, **options)
        study = optuna.create_study(directions=[o.goal for o in objectives], sampler=chosen)
        for _ in range(mo.evaluations):
            started = time.perf_counter()
            trial = study.ask()
            config = suggest_config(trial, mo.problem.parameter_space)
            run.ask_seconds.append(time.perf_counter() - started)
            outputs, failure = _measure(mo, task, config)
            if outputs is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                run.records[j].append(
                    FunctionEvaluation.create(
                        task, config, failure=failure, outputs=[o.name for o in mo.problem.output_space]
                    )
                )
                continue
            trial.set_user_attr(
                "violations", [max(o.lower_bound - outputs[o.name], outputs[o.name] - o.upper_bound) for o in bounded]
            )
            study.tell(trial, [outputs[o.name] for o in objectives])
            run.records[j].append(FunctionEvaluation.create(task, config, outputs))
    return run


def run_nsga2(mo: MOProblem, seed: int) -> Run:
    """Optuna's NSGA-II, one study per task (population = the initial design)."""
    return _optuna("nsga2", mo, seed)


def run_motpe(mo: MOProblem, seed: int) -> Run:
    """Optuna's TPE with several objectives (MOTPE), one study per task."""
    return _optuna("motpe", mo, seed)


def run_gp(mo: MOProblem, seed: int) -> Run:
    """Optuna's GPSampler with several objectives (needs torch), one study per task."""
    return _optuna("gp", mo, seed)


#: Tuner name -> runner, ours first.
RUNNERS: dict[str, Callable[[MOProblem, int], Run]] = {
    "mla": run_mla,
    "optuna_nsga2": run_nsga2,
    "optuna_motpe": run_motpe,
    "optuna_gp": run_gp,
    "random": run_random,
}
