"""The sequential tuners of the band benchmark (:mod:`benchmarks.band`): GPTuneBand's engine and its peers.

Every runner tunes a list of tasks and returns one :class:`Trace` per task:
the normalised cost and the value at ``b_max`` (NaN below it) of each
evaluation in order, and the tuner's answer, the objective at ``b_max`` of
the configuration it would pick. Costs follow paper 004: an evaluation at
fidelity ``b`` costs ``b / b_max``.

- Demo (Table 1, one-shot fidelity, minimise): ``GPTuneBand`` (the engine,
  one pass, :func:`run_demo_gptuneband`), ``GPTune`` (MLA at ``b_max``,
  :func:`run_demo_mla`), ``TPE`` (Optuna, :func:`run_demo_tpe`) and
  ``random`` (:func:`run_demo_random`).
- LCBench (iterative fidelity, maximise ``val_accuracy``): ``GPTuneBand`` (the
  engine, iterative mode, all tasks at once, :func:`run_lcbench_gptuneband`;
  it times every ``ask``) and ``TPE`` (Optuna at 52 epochs,
  :func:`run_lcbench_tpe`).

The Ray Tune peers (BOHB, HB, ASHA) are in :mod:`benchmarks.band_ray`, SMAC3's
multi-fidelity facade in :mod:`benchmarks.band_smac`.
The engines (SciPy, the LCM) load inside the runners: Ray's trial workers
import this module through :mod:`benchmarks.band_ray` and start fast.

Example (no Ray needed):
    >>> from raytuner.engines import BanditStructure
    >>> structure = BanditStructure.hyperband(1, 4, 2)
    >>> demo_budget(structure)
    (8.0, 8)
    >>> traces = run_demo_random([1.0, 1.2], structure, seed=0)
    >>> len(traces), len(traces[0].costs), traces[0].final == min(traces[0].values)
    (2, 8, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from raytuner.analysis import best_so_far
from raytuner.errors import InvalidInputError
from raytuner.problem.space import ProblemSpace, Space
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_fidelity
from raytuner.test_problems.lcbench import LCBenchSurrogate

if TYPE_CHECKING:  # the engines (SciPy, the LCM) load lazily: Ray's trial workers import this module
    from raytuner.engines import BanditStructure
    from raytuner.engines.bandit import FidelityMode
    from raytuner.models.executors import Executor

__all__ = [
    "Trace",
    "suggest_config",
    "optuna_rows",
    "torch_missing",
    "demo_budget",
    "run_demo_gptuneband",
    "run_demo_mla",
    "run_demo_tpe",
    "run_demo_random",
    "run_lcbench_gptuneband",
    "run_lcbench_single_task_bo",
    "run_lcbench_tpe",
    "run_lcbench_gpsampler",
    "run_lcbench_random",
]

#: Random startup trials of Optuna's GPSampler on LCBench: its own default.
GP_STARTUP = 10


@dataclass
class Trace:
    """One tuner on one task: per evaluation its cost and value at ``b_max`` (NaN below), and the answer.

    ``ask_seconds`` holds the wall seconds of each ``ask`` of an engine, where
    its runner times them (GPTuneBand's on LCBench).

    >>> trace = Trace()
    >>> trace.add(0.5, None); trace.add(1.0, 2.0)
    >>> trace.costs, trace.values
    ([0.5, 1.0], [nan, 2.0])
    """

    costs: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    final: float = math.nan
    note: str = ""
    ask_seconds: list[float] = field(default_factory=list)

    def add(self, cost: float, value: float | None) -> None:
        """Append one evaluation (``value=None``: not at ``b_max``).

        Args:
            cost: the evaluation's cost, in normalised fidelity units.
            value: its value, or ``None`` when it was not evaluated at ``b_max``.
        """
        self.costs.append(float(cost))
        self.values.append(math.nan if value is None else float(value))

    def curve(self, grid: Sequence[float] | np.ndarray, sign: float = 1.0) -> np.ndarray:
        """Best value at ``b_max`` so far at each cumulative cost of ``grid`` (``sign=-1``: maximised).

        Args:
            grid: cumulative costs to read the curve at, ascending.
            sign: ``1.0`` when the value is minimised, ``-1.0`` when maximised (default ``1.0``).

        >>> t = Trace([0.5, 1.0, 1.0], [math.nan, 3.0, 2.0])
        >>> t.curve([0.5, 1.5, 2.5]).tolist()
        [nan, 3.0, 2.0]
        """
        if not self.costs:
            return np.full(len(grid), np.nan)
        spent = np.cumsum(self.costs)
        best = sign * best_so_far(sign * np.asarray(self.values, dtype=float))
        index = np.searchsorted(spent, np.asarray(grid, dtype=float) + 1e-9, side="right") - 1
        return np.where(index >= 0, best[np.clip(index, 0, None)], np.nan)


def demo_budget(structure: BanditStructure) -> tuple[float, int]:
    """``C``, the normalised cost per task of one one-shot pass, and ``⌊C⌋`` evaluations at ``b_max``.

    Args:
        structure: the bandit structure (``b_min``, ``b_max``, ``η``) of the row.

    >>> from raytuner.engines import BanditStructure
    >>> demo_budget(BanditStructure.hyperband(1, 8, 2)), demo_budget(BanditStructure.hyperband(1, 9, 3))
    ((15.0, 15), (8.0, 8))
    """
    cost = round(structure.cost_per_pass("one_shot"), 9)
    return cost, int(math.floor(cost + 1e-9))


# -- sequential tuners of the demo ------------------------------------------------------------------
def _demo_problem() -> ProblemSpace:
    return ProblemSpace.parse(DEMO_PROBLEM)


def run_demo_gptuneband(
    tasks: Sequence[float], structure: BanditStructure, seed: int, model: str | None = None, passes: int = 1
) -> list[Trace]:
    """GPTuneBand's engine, one-shot passes over all tasks, model fits inline (deterministic).

    One pass spends exactly ``C`` per task (:func:`demo_budget`); its answer is
    the true ``demo(x, t)`` of its best configuration at ``b_max``.

    Args:
        tasks: the task values ``t`` to tune, one trace each.
        structure: the bandit structure of the row.
        seed: the engine's seed.
        model: the engine's ``model`` (``"paper"``: the paper's GPTuneBand model; default ``None``: the engine's
            default).
        passes: how many passes of the brackets it runs (default 1; GPTune's ``NLOOP``).

    >>> from raytuner.engines import BanditStructure
    >>> (trace,) = run_demo_gptuneband([1.2], BanditStructure.hyperband(1, 4, 2), seed=0)
    >>> sum(trace.costs), len(trace.costs), bool(trace.final == np.nanmin(trace.values))
    (8.0, 13, True)
    """
    from raytuner.engines import GPTuneBand
    from raytuner.models.executors import InlineExecutor
    from raytuner.problem.records import FunctionEvaluation

    options: dict[str, Any] = {} if model is None else {"model": model}
    band = GPTuneBand(
        _demo_problem(),
        [{"t": t} for t in tasks],
        seed=seed,
        fidelities=structure.fidelities,
        eta=structure.eta,
        passes=passes,
        executor=InlineExecutor(),
        **options,
    )
    traces = [Trace() for _ in tasks]
    b_max = structure.b_max
    while not band.finished:
        s = band.ask()
        fidelity = float(s.fidelity or b_max)
        y = demo_fidelity(s.config["x"], s.task["t"], b=fidelity, b_max=b_max)
        band.tell(FunctionEvaluation.create(s.task, s.config, {"y": y}, provenance=s.provenance))
        traces[band.task_index(s.task)].add(s.provenance.cost or fidelity / b_max, y if fidelity >= b_max else None)
    for trace, t, best in zip(traces, tasks, band.best_per_task()):
        trace.final = demo(best.tuning_parameter["x"], t) if best is not None else math.nan
    return traces


def _at_b_max(history: np.ndarray, sign: float = 1.0) -> list[Trace]:
    """One trace per row of values at ``b_max`` (each costs 1); the answer is the best (``sign=-1``: maximised)."""
    return [
        Trace([1.0] * len(row), [float(v) for v in row], float(sign * np.min(sign * np.asarray(row))))
        for row in history
    ]


def suggest_config(trial: Any, space: Space) -> dict[str, Any]:
    """An Optuna trial's configuration of ``space`` (log scales kept, integer bounds inclusive).

    Args:
        trial: an Optuna trial (from ``study.ask()``).
        space: the parameter space.
    """
    config: dict[str, Any] = {}
    for p in space:
        if p.type == "categorical":
            config[p.name] = trial.suggest_categorical(p.name, list(p.categories))
        elif p.type == "integer":
            config[p.name] = trial.suggest_int(p.name, int(p.lower_bound), int(p.upper_bound), log=p.log)
        else:
            config[p.name] = trial.suggest_float(p.name, p.lower_bound, p.upper_bound, log=p.log)
    return config


def optuna_rows(
    space: Space,
    tasks: Sequence[Any],
    evaluations: int,
    seed: int,
    direction: Literal["minimize", "maximize"],
    objective: Callable[[Any, dict[str, Any]], float],
    sampler: str = "TPESampler",
    n_startup: int | None = None,
) -> np.ndarray:
    """One Optuna study per task (task ``j`` seeded ``seed * 1000 + j``): the values, shaped (tasks, evaluations).

    Each study runs ``evaluations`` trials, the first ``n_startup`` random.

    Args:
        space: the parameter space.
        tasks: the tasks, one study each.
        evaluations: how many trials per study.
        seed: the samplers' seed.
        direction: Optuna's ``"minimize"`` or ``"maximize"``.
        objective: a (task, configuration)'s value.
        sampler: the name of Optuna's sampler class: ``"TPESampler"`` (default), ``"GPSampler"`` (it needs
            torch: see :func:`torch_missing`) or ``"RandomSampler"``.
        n_startup: the random startup trials (default ``None``: half of ``evaluations``, at least 1; a
            ``RandomSampler`` takes none).
    """
    try:
        import optuna
    except ImportError as exc:
        raise ImportError("the benchmarks compare with Optuna: pip install 'raytuner[bench]'") from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    startup = max(1, evaluations // 2) if n_startup is None else n_startup
    options = {} if sampler == "RandomSampler" else {"n_startup_trials": startup}
    rows = []
    for j, task in enumerate(tasks):
        study = optuna.create_study(
            direction=direction, sampler=getattr(optuna.samplers, sampler)(seed=seed * 1000 + j, **options)
        )
        values = []
        for _ in range(evaluations):
            trial = study.ask()
            values.append(float(objective(task, suggest_config(trial, space))))
            study.tell(trial, values[-1])
        rows.append(values)
    return np.array(rows, dtype=float).reshape(len(rows), evaluations)


def torch_missing() -> str | None:
    """Why Optuna's GPSampler cannot run here (torch does not import), or ``None`` when it can."""
    try:
        import torch  # noqa: F401
    except Exception as exc:  # an ImportError, or a broken install's OSError: skip, never crash
        return f"torch cannot be imported ({type(exc).__name__}: {exc})"
    return None


def run_demo_mla(tasks: Sequence[float], structure: BanditStructure, seed: int) -> list[Trace]:
    """GPTune's MLA over all tasks at ``b_max``: ``⌊C⌋`` evaluations per task, half of them LHS.

    It runs in rounds (one suggestion per task, then all are told), so the LCM
    is refitted once per round.

    Args:
        tasks: the task values ``t`` to tune, one trace each.
        structure: the bandit structure of the row (it sets the budget, see :func:`demo_budget`).
        seed: the engine's seed.

    >>> from raytuner.engines import BanditStructure
    >>> traces = run_demo_mla([1.0, 1.2], BanditStructure.hyperband(1, 4, 2), seed=0)
    >>> [len(t.costs) for t in traces], [t.final == min(t.values) for t in traces]
    ([8, 8], [True, True])
    """
    from raytuner.engines import MLA
    from raytuner.models.executors import InlineExecutor
    from raytuner.problem.records import FunctionEvaluation

    _, evaluations = demo_budget(structure)
    engine = MLA(
        _demo_problem(),
        [{"t": t} for t in tasks],
        seed=seed,
        n_initial=max(1, evaluations // 2),
        executor=InlineExecutor(),
    )
    history = np.zeros((len(tasks), evaluations))
    for n in range(evaluations):
        asked = [engine.ask(task) for task in engine.tasks]
        for i, s in enumerate(asked):
            history[i, n] = demo(s.config["x"], s.task["t"])
            engine.tell(FunctionEvaluation.create(s.task, s.config, {"y": history[i, n]}, provenance=s.provenance))
    return _at_b_max(history)


def run_demo_tpe(tasks: Sequence[float], structure: BanditStructure, seed: int) -> list[Trace]:
    """Optuna's TPE at ``b_max``, one study per task, ``⌊C⌋`` evaluations (half of them random startup).

    Args:
        tasks: the task values ``t`` to tune, one study and one trace each.
        structure: the bandit structure of the row (it sets the budget, see :func:`demo_budget`).
        seed: the samplers' seed.

    >>> from raytuner.engines import BanditStructure
    >>> traces = run_demo_tpe([1.0, 1.2], BanditStructure.hyperband(1, 4, 2), seed=0)
    >>> [sum(t.costs) for t in traces], [t.final == min(t.values) for t in traces]
    ([8.0, 8.0], [True, True])
    """
    _, evaluations = demo_budget(structure)
    space = _demo_problem().parameter_space
    return _at_b_max(optuna_rows(space, tasks, evaluations, seed, "minimize", lambda t, c: demo(c["x"], t)))


def run_demo_random(tasks: Sequence[float], structure: BanditStructure, seed: int) -> list[Trace]:
    """``⌊C⌋`` uniform random evaluations per task at ``b_max`` (the module's example runs it).

    Args:
        tasks: the task values ``t`` to tune, one trace each.
        structure: the bandit structure of the row (it sets the budget, see :func:`demo_budget`).
        seed: the random generator's seed.
    """
    from raytuner.engines import RandomSearch

    _, evaluations = demo_budget(structure)
    engine = RandomSearch(_demo_problem(), [{"t": t} for t in tasks], seed=seed)
    history = np.array(
        [[demo(engine.ask(task).config["x"], task["t"]) for _ in range(evaluations)] for task in engine.tasks]
    )
    return _at_b_max(history)


# -- LCBench: GPTuneBand's engine --------------------------------------------------------------------
def run_lcbench_gptuneband(
    surrogate: LCBenchSurrogate,
    task_ids: Sequence[int],
    structure: BanditStructure,
    budget: float,
    seed: int,
    executor: Executor | None = None,
    fidelity_mode: FidelityMode = "iterative",
) -> list[Trace]:
    """GPTuneBand's engine in iterative mode (or ``fidelity_mode``) over all tasks, spending ``budget`` per task.

    The engine runs as many passes as the budget pays for; a task's last pass
    ends where its next step no longer fits what is left.

    A promotion pays only its extra epochs; the answer is the best
    ``val_accuracy`` at ``b_max`` epochs. The wall seconds of each ``ask`` go
    to the asked task's ``Trace.ask_seconds``. By default the engine fits as
    a user's does, on :func:`~raytuner.models.executors.default_executor` (its starts
    in parallel past :data:`~raytuner.models.executors.INLINE_RECORDS` records); the
    answers do not depend on the executor, only the ask times do.

    Args:
        surrogate: the LCBench surrogate that answers the evaluations.
        task_ids: the LCBench task ids to tune, one trace each.
        structure: the bandit structure, in epochs.
        budget: the normalised cost per task to spend.
        seed: the engine's seed.
        executor: runs the LCM fits' starts (default ``None``: the engine's default, as above).
        fidelity_mode: ``"iterative"`` (default: a promotion continues training and pays its extra epochs) or
            ``"one_shot"`` (a promotion trains anew and pays all its epochs).

    >>> from raytuner.engines import BanditStructure
    >>> structure = BanditStructure.hyperband(2, 8, 2, integer=True)
    >>> budget = structure.cost_per_pass("iterative")
    >>> (trace,) = run_lcbench_gptuneband(LCBenchSurrogate(), [3945], structure, budget, seed=0)
    >>> round(sum(trace.costs), 9) == round(budget, 9), 0.0 < trace.final <= 100.0
    (True, True)
    >>> len(trace.ask_seconds) == len(trace.costs), min(trace.ask_seconds) >= 0.0
    (True, True)
    """
    from raytuner.engines import GPTuneBand
    from raytuner.problem.records import FunctionEvaluation

    band = GPTuneBand(
        surrogate.problem(task_ids),
        [{"task_id": t} for t in task_ids],
        seed=seed,
        fidelities=structure.fidelities,
        eta=structure.eta,
        budget=budget,
        fidelity_mode=fidelity_mode,
        executor=executor,
    )
    traces = [Trace() for _ in task_ids]
    b_max = structure.b_max
    while not band.finished:
        started = time.perf_counter()
        s = band.ask()
        asked = time.perf_counter() - started
        epoch = float(s.fidelity or b_max)
        value = surrogate.evaluate(s.task["task_id"], s.config, epoch)["val_accuracy"]
        band.tell(FunctionEvaluation.create(s.task, s.config, {"val_accuracy": value}, provenance=s.provenance))
        trace = traces[band.task_index(s.task)]
        trace.add(s.provenance.cost or 0.0, value if epoch >= b_max else None)
        trace.ask_seconds.append(asked)
    for trace, best in zip(traces, band.best_per_task()):
        trace.final = best.known_value("val_accuracy") if best is not None else math.nan
    return traces


def run_lcbench_single_task_bo(
    surrogate: LCBenchSurrogate, task_ids: Sequence[int], structure: BanditStructure, budget: float, seed: int
) -> list[Trace]:
    """raytuner's single-task BO (an MLA of one task) at ``b_max``, ``⌊budget⌋`` evaluations per task: *alone*.

    Each task is tuned by itself with the same GP core and acquisition
    search as the multitask engines, 10 initial points (as GPSampler's
    startup); the answer is the best ``val_accuracy`` seen.

    Args:
        surrogate: answers the evaluations.
        task_ids: the LCBench tasks, one engine each.
        structure: its ``b_max`` is the epoch evaluated.
        budget: epochs / ``b_max`` per task: ``⌊budget⌋`` evaluations.
        seed: task ``j``'s engine gets ``seed * 1000 + j``.

    >>> from raytuner.engines import BanditStructure
    >>> (trace,) = run_lcbench_single_task_bo(LCBenchSurrogate(), [3945], BanditStructure.hyperband(2, 8, 2), 3.5, 0)
    >>> trace.costs, trace.final == max(trace.values)
    ([1.0, 1.0, 1.0], True)
    """
    from benchmarks.ask_tell import drive_tasks
    from raytuner.engines import MLA

    evaluations = _evaluations_at_b_max(budget)
    problem = surrogate.problem(task_ids)
    b_max = structure.b_max
    rows = []
    for j, task_id in enumerate(task_ids):
        engine = MLA(problem, [{"task_id": task_id}], seed=seed * 1000 + j, n_initial=min(GP_STARTUP, evaluations))
        rows.append(
            drive_tasks(
                engine,
                evaluations,
                lambda task, config: surrogate.evaluate(task["task_id"], config, b_max)["val_accuracy"],
                "val_accuracy",
            )[0]
        )
    return _at_b_max(np.array(rows), sign=-1.0)


def _evaluations_at_b_max(budget: float) -> int:
    """``⌊budget⌋``: the evaluations at ``b_max`` (each costs 1) a budget pays for; at least one."""
    evaluations = int(math.floor(budget + 1e-9))
    if evaluations < 1:
        raise InvalidInputError("budget", f"{budget!r} holds no evaluation at b_max (it must be >= 1)")
    return evaluations


def run_lcbench_tpe(
    surrogate: LCBenchSurrogate, task_ids: Sequence[int], structure: BanditStructure, budget: float, seed: int
) -> list[Trace]:
    """Optuna's TPE at full fidelity (``b_max`` epochs), one study per task, ``⌊budget⌋`` evaluations each.

    An evaluation at ``b_max`` costs 1, so ``⌊budget⌋`` of them fit the
    budget; half of them are random startup (as on Table 1). The answer is
    the best ``val_accuracy`` seen.

    Args:
        surrogate: the LCBench surrogate that answers the evaluations.
        task_ids: the LCBench task ids to tune, one study and one trace each.
        structure: the bandit structure, in epochs (its ``b_max`` is the fidelity evaluated).
        budget: the normalised cost per task to spend (epochs / ``b_max``).
        seed: the samplers' seed (task ``j`` gets ``seed * 1000 + j``).

    >>> from raytuner.engines import BanditStructure
    >>> (trace,) = run_lcbench_tpe(LCBenchSurrogate(), [3945], BanditStructure.hyperband(2, 8, 2), 3.5, seed=0)
    >>> trace.costs, trace.final == max(trace.values)
    ([1.0, 1.0, 1.0], True)
    """
    return _lcbench_optuna(surrogate, task_ids, structure, budget, seed, "TPESampler")


def run_lcbench_gpsampler(
    surrogate: LCBenchSurrogate, task_ids: Sequence[int], structure: BanditStructure, budget: float, seed: int
) -> list[Trace]:
    """Optuna's GPSampler at full fidelity, as :func:`run_lcbench_tpe` runs TPE but with GPSampler's own 10
    random startup trials. Raises ``ImportError`` without torch (the benchmark then skips this peer).

    Args:
        surrogate: answers the evaluations.
        task_ids: the LCBench tasks, one GPSampler study each.
        structure: its ``b_max`` is the epoch evaluated.
        budget: epochs / ``b_max`` per task: ``⌊budget⌋`` evaluations.
        seed: task ``j``'s study gets ``seed * 1000 + j``.
    """
    if (why := torch_missing()) is not None:
        raise ImportError(f"Optuna's GPSampler needs torch: {why}")
    return _lcbench_optuna(surrogate, task_ids, structure, budget, seed, "GPSampler", n_startup=GP_STARTUP)


def run_lcbench_random(
    surrogate: LCBenchSurrogate, task_ids: Sequence[int], structure: BanditStructure, budget: float, seed: int
) -> list[Trace]:
    """Random search at full fidelity (Optuna's RandomSampler), ``⌊budget⌋`` evaluations per task.

    Args:
        surrogate: answers the evaluations.
        task_ids: the LCBench tasks, one random study each.
        structure: the epoch evaluated is its ``b_max``.
        budget: epochs / ``b_max`` per task.
        seed: the random studies' seed, ``seed * 1000 + j`` for task ``j``.

    >>> from raytuner.engines import BanditStructure
    >>> (trace,) = run_lcbench_random(LCBenchSurrogate(), [3945], BanditStructure.hyperband(2, 8, 2), 2.5, seed=0)
    >>> trace.costs, trace.final == max(trace.values)
    ([1.0, 1.0], True)
    """
    return _lcbench_optuna(surrogate, task_ids, structure, budget, seed, "RandomSampler")


def _lcbench_optuna(
    surrogate: LCBenchSurrogate,
    task_ids: Sequence[int],
    structure: BanditStructure,
    budget: float,
    seed: int,
    sampler: str,
    n_startup: int | None = None,
) -> list[Trace]:
    """One Optuna study per task at ``b_max`` with ``sampler``: ``⌊budget⌋`` evaluations each (see :func:`optuna_rows`)."""
    evaluations = _evaluations_at_b_max(budget)
    space = surrogate.problem(task_ids).parameter_space
    b_max = structure.b_max
    return _at_b_max(
        optuna_rows(
            space,
            task_ids,
            evaluations,
            seed,
            "maximize",
            lambda t, c: surrogate.evaluate(t, c, b_max)["val_accuracy"],
            sampler=sampler,
            n_startup=n_startup,
        ),
        sign=-1.0,
    )
