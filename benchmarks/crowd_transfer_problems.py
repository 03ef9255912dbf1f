"""The problems of ``python -m benchmarks crowd-transfer``: a target task, and other users' data about related ones.

- ``lcbench``: the LCBench surrogate (:mod:`raytuner.test_problems.lcbench`), task
  ``task_id``, ``val_accuracy`` maximised, fidelity the epoch (1..52). The
  target is the first of :data:`~raytuner.test_problems.lcbench.LCBENCH_TASKS`; each
  of the other seven tasks was tuned earlier by another user (Optuna's TPE,
  ``source_per_task`` evaluations at epoch 52: :func:`tpe_run`), who
  shared that run.
- ``kernel``: the dedispersion kernel (Kernel Tuner caches,
  :mod:`benchmarks.kernel_cache`), task ``machine``, time minimised, one
  fidelity. A user shared an earlier TPE run of ``source_per_task``
  evaluations on the A100; the target is the Radeon PRO W7800. Every tuner but TPE searches the
  configurations valid on the W7800 (a constraint), as the TLA benchmark does; TPE's
  suggestions outside them are skipped unmeasured, at no cost, as Kernel Tuner skips a configuration
  that breaks the kernel's restrictions (the A100 user's run too: all its evaluations ran).

The target's best-known value is the best over a large random sample at full
fidelity (LCBench) or the cache's optimum (kernel).

A problem has many crowds: ``uploads(crowd)`` gives crowd number ``crowd``,
whose users' runs are seeded by :data:`SOURCE_SEED` ``+ CROWD_STRIDE * crowd``
(crowd 0 is the one every run used before crowds were numbered). The
benchmark gives each seed its own crowd: a tuner that is deterministic given
its sources (GPTuneBand on the kernel, whose design is the sources' consensus
and whose candidates are enumerated) otherwise makes the same run for every
seed, and its median is one draw of the crowd's luck.

What the sources alone say about the target, with no feedback from it, is
measured apart from any crowd (:func:`transferability`): over a reference
set of configurations whose values on the target and on every source task
are known, the rank correlation of the target with the sources' consensus,
and how many evaluations the target needs when its configurations are tried
in the consensus' order, as if every source value were shared (against a
random order's expected count).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.data import find
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace, Space

__all__ = [
    "TransferProblem",
    "Reference",
    "lcbench_problem",
    "kernel_problem",
    "tpe_run",
    "transferability",
    "crowd_seed",
    "SOURCE_SEED",
    "CROWD_STRIDE",
    "Uploads",
]

#: Seeds the sources' runs of crowd 0 (and the LCBench target's best-known value).
SOURCE_SEED = 20261124
#: How far apart the seeds of consecutive crowds are (a crowd's users add 1, 2, ... to its seed).
CROWD_STRIDE = 1000

#: TPE's asks per evaluation asked for, in all, when some break the restrictions (``tpe_run``'s ``runs``).
RESTRICTED_ASKS = 50
#: ``evaluate(config, fidelity)``: the target's value, or ``None`` and why it failed.
Evaluate = Callable[[Mapping[str, Any], "float | None"], "tuple[float | None, str | None]"]
#: ``uploads(crowd)``: per user of crowd number ``crowd``, the records they shared.
Uploads = Callable[[int], "dict[str, list[FunctionEvaluation]]"]


@dataclass(frozen=True, eq=False)
class Reference:
    """The values of one set of configurations on the target and on each source task (NaN: failed).

    Args:
        target: shape ``(n,)``, the target's value of each configuration.
        sources: shape ``(source tasks, n)``, each source task's value of the same configurations.
    """

    target: np.ndarray
    sources: np.ndarray


@dataclass
class TransferProblem:
    """One problem of the benchmark (see the module docstring).

    Args:
        id: its name in ``results.json``.
        problem: the tuning problem (task parameters included).
        meta_space: the problem as a meta description's ``problem_space`` (plain data: the crowd query).
        target: the target task.
        uploads: per crowd number, per user, the records they shared (:data:`Uploads`).
        evaluate: the target's value at a fidelity (``None``: full).
        best_known: the target's best-known value.
        band: GPTuneBand's bandit structure (``b_min``, ``b_max``, ``eta`` or ``fidelities``).
        b_max: the full fidelity (the cost of an evaluation at ``b`` is ``b / b_max``).
        candidates: the valid configurations, for the engines that take a list (``None``: any).
        runs: whether a configuration runs at all, for TPE (``tpe_run``'s ``runs``; ``None``: every one).
        reference: the target's and the sources' values over a reference set (:func:`transferability`;
            ``None``: none).
    """

    id: str
    problem: ProblemSpace
    meta_space: dict[str, Any]
    target: dict[str, Any]
    uploads: Uploads
    evaluate: Evaluate
    best_known: float
    band: dict[str, Any]
    b_max: float = 1.0
    candidates: list[dict[str, Any]] | None = None
    runs: Callable[[Mapping[str, Any]], bool] | None = None
    reference: Reference | None = None
    objective: str = field(init=False)
    maximize: bool = field(init=False)

    def __post_init__(self) -> None:
        output = self.problem.objective()
        self.objective, self.maximize = output.name, output.goal == "maximize"

    def reached(self, value: float) -> bool:
        """Whether ``value`` is within 1 % of the best-known value (99 % of it).

        Args:
            value: a value of the target.
        """
        return value >= 0.99 * self.best_known if self.maximize else value <= self.best_known / 0.99


def crowd_seed(crowd: int) -> int:
    """The seed of crowd number ``crowd``'s runs (its users add 1, 2, ... where there are several).

    Args:
        crowd: the crowd's number (0: the first).

    >>> crowd_seed(0) == SOURCE_SEED, crowd_seed(2) - crowd_seed(1) == CROWD_STRIDE
    (True, True)
    """
    return SOURCE_SEED + CROWD_STRIDE * crowd


def transferability(tp: TransferProblem) -> dict[str, Any] | None:
    """What the sources, known in full, say about the target: ``None`` without a reference.

    The sources' consensus ranks each reference configuration by its mean
    rank over the source tasks (a failure ranks last). ``spearman`` is its
    rank correlation with the target's values (higher: the sources agree
    with the target; over configurations the target ran; ``None`` where it
    is undefined, as for constant values), ``reaching`` how many reference
    configurations reach the target (1 % of the best known:
    :meth:`TransferProblem.reached`), ``evaluations_in_source_order`` how
    many of them, tried in the consensus' order, it takes to reach it
    (``None`` if none does), and ``evaluations_in_random_order`` the
    expected count in a random order, ``(n + 1) / (reaching + 1)``.

    Args:
        tp: the problem.

    >>> ref = Reference(np.array([3.0, 1.0, 2.0]), np.array([[1.0, 2.0, 3.0]]))
    >>> tp = TransferProblem("toy", ProblemSpace.parse({"parameter_space": [{"name": "x", "type": "real",
    ...     "lower_bound": 0, "upper_bound": 1}]}), {}, {}, lambda crowd: {}, lambda c, f: (None, None), 1.0,
    ...     {"fidelities": [1.0]}, reference=ref)
    >>> found = transferability(tp)
    >>> found["spearman"], found["reaching"], found["evaluations_in_source_order"], found["evaluations_in_random_order"]
    (-0.5, 1, 2, 2.0)
    """
    from scipy.stats import rankdata, spearmanr

    if tp.reference is None:
        return None
    sign = -1.0 if tp.maximize else 1.0  # smaller signed values are better
    signed = np.where(np.isfinite(tp.reference.sources), sign * tp.reference.sources, np.inf)
    consensus = np.mean([rankdata(row) for row in signed], axis=0)
    target = tp.reference.target
    ran = np.isfinite(target)
    rho = float(spearmanr(sign * target[ran], consensus[ran]).statistic) if ran.sum() > 1 else math.nan
    order = np.argsort(consensus, kind="stable")
    hits = [n for n, i in enumerate(order, 1) if ran[i] and tp.reached(float(target[i]))]
    return {
        "configurations": int(len(target)),
        "reaching": len(hits),
        "spearman": round(rho, 3) if math.isfinite(rho) else None,
        "evaluations_in_source_order": hits[0] if hits else None,
        "evaluations_in_random_order": round((len(target) + 1) / (len(hits) + 1), 1),
    }


def tpe_run(
    problem: ProblemSpace,
    task: dict[str, Any],
    measure: Callable[[Mapping[str, Any]], tuple[float | None, str | None]],
    n: int,
    seed: int,
    *,
    startup: int | None = None,
    first: Sequence[Mapping[str, Any]] = (),
    runs: Callable[[Mapping[str, Any]], bool] | None = None,
) -> list[FunctionEvaluation]:
    """A tuning run of ``task`` by Optuna's TPE: ``n`` evaluations, ``first`` configurations enqueued first.

    Another user's earlier run (the crowd's data), or the warm-started peer.

    Args:
        problem: the problem (its parameter space and objective).
        task: the task tuned.
        measure: the value of a configuration, or ``None`` and why it failed.
        n: how many evaluations.
        seed: the run's seed.
        startup: TPE's random startup trials (default ``None``: half of ``n``).
        first: configurations to evaluate first (``enqueue_trial``).
        runs: whether a configuration runs at all (default ``None``: every one does). One that does not
            (it breaks the kernel's restrictions, which Kernel Tuner checks before compiling) is neither
            measured nor counted: TPE is told it failed and asks again (TPE leaves failed trials out of its
            model, so it may keep asking there: after ``n * RESTRICTED_ASKS`` asks in all the run ends,
            with fewer than ``n`` evaluations).
    """
    import optuna  # a peer, from the bench extra

    from benchmarks.band_peers import suggest_config

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    output = problem.objective()
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(1, n // 2) if startup is None else startup)
    study = optuna.create_study(direction="maximize" if output.goal == "maximize" else "minimize", sampler=sampler)
    for config in first:
        study.enqueue_trial(dict(config))
    records: list[FunctionEvaluation] = []
    for _ in range(n * RESTRICTED_ASKS):
        if len(records) == n:
            break
        trial = study.ask()
        config = suggest_config(trial, problem.parameter_space)
        if runs is not None and not runs(config):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        value, why = measure(config)
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
        records.append(
            FunctionEvaluation.create(
                task, config, None if value is None else {output.name: value}, failure=why, outputs=[output.name]
            )
        )
    return records


def lcbench_problem(source_per_task: int, data_dir: Path | None = None, sample: int = 4000) -> TransferProblem:
    """LCBench: the first task the target, the other seven the crowd's (one user each).

    Args:
        source_per_task: how many configurations each user shared (at epoch 52).
        data_dir: the LCBench data folder (default ``None``: the shared one).
        sample: how many random configurations give the target's best-known value (and the reference set).
    """
    from raytuner.test_problems.lcbench import EPOCHS, LCBENCH_TASKS, LCBenchSurrogate

    bench = LCBenchSurrogate(data_dir if data_dir is not None else find("yahpo_lcbench"))
    tasks = list(LCBENCH_TASKS)
    problem = bench.problem(tasks)
    target, b_max = {"task_id": tasks[0]}, float(EPOCHS[1])

    def accuracy(task_id: int, config: Mapping[str, Any]) -> tuple[float | None, str | None]:
        return bench.evaluate(task_id, config, b_max)["val_accuracy"], None

    def uploads(crowd: int) -> dict[str, list[FunctionEvaluation]]:
        return {
            f"user{k}": tpe_run(
                problem,
                {"task_id": task_id},
                functools.partial(accuracy, task_id),
                source_per_task,
                crowd_seed(crowd) + k,
            )
            for k, task_id in enumerate(tasks[1:], 1)
        }

    probe = sample_configurations(problem, target, sample, seed=SOURCE_SEED)
    values = np.array([bench.evaluate_many([task_id] * sample, probe, [b_max] * sample)[:, 1] for task_id in tasks])
    best = float(np.max(values[0]))

    def evaluate(config: Mapping[str, Any], fidelity: float | None) -> tuple[float | None, str | None]:
        return bench.evaluate(tasks[0], config, fidelity or b_max)["val_accuracy"], None

    meta_space = {
        "input_space": problem.input_space.model_dump(mode="json"),
        "parameter_space": problem.parameter_space.model_dump(mode="json"),
        "output_space": [o.model_dump(mode="json") for o in problem.output_space],
    }
    return TransferProblem(
        "lcbench",
        problem,
        meta_space,
        target,
        uploads,
        evaluate,
        best,
        {"b_min": 1, "b_max": b_max, "eta": 3},
        b_max,
        reference=Reference(values[0], values[1:]),
    )


def kernel_problem(source_per_task: int, data_dir: Path | None = None) -> TransferProblem:
    """Dedispersion: the A100's measurements in the crowd, the W7800 the target.

    Args:
        source_per_task: how many A100 configurations the user shared.
        data_dir: the Kernel Tuner caches' folder (default ``None``: the shared one).
    """
    from benchmarks.kernel_cache import load_cache
    from benchmarks.tla_kernel import KERNEL_SOURCE, KERNEL_TARGET

    a100, w7800 = (
        load_cache(Path(data_dir) / name if data_dir is not None else find(f"kernel_tuner/{name}"))
        for name in (KERNEL_SOURCE, KERNEL_TARGET)
    )
    machines = Space.model_validate([{"name": "machine", "type": "categorical", "categories": ["A100", "W7800"]}])
    plain = w7800.problem()
    problem = w7800.problem(restrict_to_valid=True).model_copy(update={"input_space": machines})

    def uploads(crowd: int) -> dict[str, list[FunctionEvaluation]]:
        run = tpe_run(
            plain.model_copy(update={"input_space": machines}),
            {"machine": "A100"},
            lambda c: (a100.time(c), a100.failure(c)),
            source_per_task,
            crowd_seed(crowd),
            runs=a100.__contains__,
        )
        return {"a100user": [r.model_copy(update={"machine_configuration": {"machine_name": "A100"}}) for r in run]}

    def evaluate(config: Mapping[str, Any], fidelity: float | None) -> tuple[float | None, str | None]:
        if config not in w7800:  # a tuner that ignores the constraint (TPE) proposed it
            return None, "outside the valid space"
        return w7800.time(config), w7800.failure(config)

    meta_space = {
        "input_space": machines.model_dump(mode="json"),
        "parameter_space": plain.parameter_space.model_dump(mode="json"),
        "output_space": [o.model_dump(mode="json") for o in plain.output_space],
    }
    configs = [dict(c) for c in w7800.configs]
    reference = Reference(_times(w7800, configs), _times(a100, configs)[None, :])
    return TransferProblem(
        "kernel",
        problem,
        meta_space,
        {"machine": "W7800"},
        uploads,
        evaluate,
        w7800.optimum,
        {"fidelities": [1.0]},
        1.0,
        configs,
        w7800.__contains__,
        reference,
    )


def _times(cache: Any, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``cache``'s time of each configuration (NaN: failed, or not in the cache)."""
    times = [cache.time(c) if c in cache else None for c in configs]
    return np.array([np.nan if t is None else t for t in times], dtype=float)
