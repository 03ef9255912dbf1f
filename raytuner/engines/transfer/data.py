"""Source data for transfer learning: source tasks and their surrogates, fitted once and cached.

Source evaluations are grouped into **source tasks** by what makes two
measurements different experiments: the task parameters, the machine
configuration and the software configuration (a source may be the same task
measured on another GPU, or with another library version). Values are kept
as *minimisation values* ``v = sign · y`` (``sign`` = −1 when the objective
is maximised), so every transfer algorithm minimises.

:class:`SourceData` fits what the algorithms need from the sources — one GP
per source task, the residual chain of Stacking, the source-only LCM of
Multitask(TS) — lazily and once, so one instance can serve many engines
(for example every tuner and seed of a benchmark scenario). Fits are seeded
and deterministic: an engine rebuilt from the log sees the same source
models.

Example:
    >>> import numpy as np
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM, demo
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> records = [FunctionEvaluation.create({"t": 0.8}, {"x": x}, {"y": demo(x, 0.8)})
    ...            for x in np.linspace(0, 1, 12)]
    >>> source = SourceData(problem, records, executor=InlineExecutor())
    >>> [(t.label, len(t)) for t in source.tasks]
    [('t=0.8', 12)]
    >>> mean, variance = source.gp(0).predict(0, np.array([[6 / 11]]))    # a measured point
    >>> bool(abs(mean[0] - demo(6 / 11, 0.8)) < 0.05)
    True
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from raytuner.engines.base import source_records
from raytuner.engines.sharing import loo_rank_correlation
from raytuner.errors import InvalidInputError
from raytuner.models import LCM, FittedLCM, Hyperparameters, LCMOptions, TrainingData
from raytuner.models.executors import Executor
from raytuner.problem.records import EvaluationSource, FunctionEvaluation, task_key
from raytuner.problem.space import ProblemSpace

__all__ = ["SourceTask", "SourceData", "fit_gp", "minimisation_values", "group_source_tasks"]

log = logging.getLogger(__name__)

#: Seed of every source fit (the source models must not depend on the target run's seed).
SOURCE_SEED = 20_230_527


@dataclass
class SourceTask:
    """One source task: evaluations of one task on one machine with one software configuration.

    ``X`` (unit cube) and ``v`` (minimisation values) hold the successful
    evaluations only; ``records`` all of them.
    """

    label: str
    task: dict[str, Any]
    machine: dict[str, Any]
    software: dict[str, Any]
    records: list[FunctionEvaluation] = field(default_factory=list)
    X: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    v: np.ndarray = field(default_factory=lambda: np.empty(0))

    def __len__(self) -> int:
        """Number of successful evaluations (the model's data)."""
        return len(self.v)


def minimisation_values(
    problem: ProblemSpace, records: Iterable[FunctionEvaluation], objective: str
) -> tuple[list[FunctionEvaluation], np.ndarray]:
    """The successful records with a finite objective, and ``sign · y`` of each.

    Args:
        problem: The problem.
        records: The evaluations.
        objective: The objective's name.
    """
    target = problem.objective(objective)
    kept, values = [], []
    for record in records:
        value = record.value(target.name)
        if value is not None and np.isfinite(value):
            kept.append(record)
            values.append(target.sign() * value)
    return kept, np.asarray(values, dtype=float)


def fit_gp(
    X: np.ndarray, v: np.ndarray, options: LCMOptions, seed: int | np.random.Generator, executor: Executor | None
) -> FittedLCM:
    """A single-task GP (a one-task LCM) of ``v`` at the unit-cube points ``X``.

    Args:
        X: Points on the unit cube, one row each.
        v: Their values.
        options: Configure the fit.
        seed: Seeds the fit.
        executor: Runs the multi-start fit (default: chosen by the fit's size,
            :func:`raytuner.models.executors.default_executor`).
    """
    return LCM(replace(options, latent=1)).fit(TrainingData([X], [v]), seed=seed, executor=executor)


def _label(task: dict[str, Any], machine: dict[str, Any], software: dict[str, Any], distinct: set[str]) -> str:
    parts = [",".join(f"{k}={v}" for k, v in task.items())] if task else []
    if "machine" in distinct:
        parts.append(str(machine.get("machine_name") or json.dumps(machine, sort_keys=True, default=str)))
    if "software" in distinct:
        parts.append(json.dumps(software, sort_keys=True, default=str))
    return " on ".join(p for p in parts if p) or "source"


def group_source_tasks(
    problem: ProblemSpace, records: Sequence[FunctionEvaluation], objective: str
) -> list[SourceTask]:
    """Group ``records`` into source tasks (task parameters + machine + software), in order of appearance.

    Tasks without a single successful evaluation are left out; records of
    another tuning space (a tuning parameter missing) are rejected.

    Args:
        problem: The problem.
        records: The source evaluations.
        objective: The objective's name.
    """
    names = problem.parameter_space.names
    groups: dict[tuple[Any, str, str], list[FunctionEvaluation]] = {}
    for i, record in enumerate(records):
        missing = [n for n in names if n not in record.tuning_parameter]
        if missing:
            raise InvalidInputError(
                f"source[{i}].tuning_parameter",
                f"lacks {missing[0]!r}: the source must be evaluations of the same parameter space",
                allowed=names,
            )
        key = (
            task_key(record.task_parameter),
            json.dumps(record.machine_configuration, sort_keys=True, default=str),
            json.dumps(record.software_configuration, sort_keys=True, default=str),
        )
        groups.setdefault(key, []).append(record)
    distinct = {kind for kind, j in (("machine", 1), ("software", 2)) if len({k[j] for k in groups}) > 1}
    tasks = []
    for members in groups.values():
        first = members[0]
        kept, v = minimisation_values(problem, members, objective)
        if not kept:
            log.info("source task %s has no successful evaluation; left out", dict(first.task_parameter))
            continue
        X = problem.parameter_space.encode([r.tuning_parameter for r in kept])
        tasks.append(
            SourceTask(
                _label(dict(first.task_parameter), first.machine_configuration, first.software_configuration, distinct),
                dict(first.task_parameter),
                dict(first.machine_configuration),
                dict(first.software_configuration),
                list(members),
                X,
                v,
            )
        )
    return tasks


class SourceData:
    """The source tasks of a transfer and their surrogates (fitted lazily, once); see the module docstring.

    ``records`` are the source evaluations (or an :class:`EvaluationSource`,
    such as a store or an imported GPTune file); those that do not fit the
    problem are skipped with one warning that counts them. ``lcm``
    configure every GP and LCM fit; ``executor`` runs their multi-start
    fits. Thread-safe: engines in several threads may share one.

    Args:
        problem: The problem.
        records: The source evaluations, or an :class:`EvaluationSource`.
        objective: The objective (default: the first).
        lcm: Configure every GP and LCM fit.
        executor: Runs their multi-start fits.
    """

    def __init__(
        self,
        problem: ProblemSpace,
        records: Sequence[FunctionEvaluation] | EvaluationSource,
        *,
        objective: str | None = None,
        lcm: LCMOptions | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.problem = problem
        self.objective = problem.objective(objective).name
        self.options = (lcm or LCMOptions()).over(problem.parameter_space)
        self.executor = executor
        self.records = source_records(problem, records)
        self.tasks = group_source_tasks(problem, self.records, self.objective)
        if not self.tasks:
            raise InvalidInputError(
                "source",
                f"no successful source evaluation of the objective {self.objective!r}: nothing to transfer from",
            )
        self.uids = frozenset(r.uid for r in self.records)
        self._lock = threading.RLock()
        self._gps: dict[int, FittedLCM] = {}
        self._chain: list[FittedLCM] | None = None
        self._lcm: Hyperparameters | None = None

    def __len__(self) -> int:
        """Number of source tasks."""
        return len(self.tasks)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its lock (Ray ships searchers and engines between processes)."""
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def __deepcopy__(self, memo: dict[int, Any]) -> SourceData:
        """The same instance: copies of an engine share the source and its fitted models (read-only data)."""
        return self

    def __repr__(self) -> str:
        return f"SourceData({[(t.label, len(t)) for t in self.tasks]})"

    @property
    def latent(self) -> int:
        """Latent functions of the multitask models (sources and one target): ``min(tasks, 3)``."""
        return self.options.latent or min(len(self.tasks) + 1, 3)

    def without(self, uids: Iterable[str]) -> SourceData:
        """The same source without the records ``uids`` (self when none of them is in it).

        Args:
            uids: The uids of the records to leave out.
        """
        drop = self.uids & set(uids)
        if not drop:
            return self
        return SourceData(
            self.problem,
            [r for r in self.records if r.uid not in drop],
            objective=self.objective,
            lcm=self.options,
            executor=self.executor,
        )

    def gp(self, index: int) -> FittedLCM:
        """The GP of source task ``index`` (task 0 of the returned model).

        Args:
            index: The source task's position.
        """
        with self._lock:
            if index not in self._gps:
                task = self.tasks[index]
                self._gps[index] = fit_gp(task.X, task.v, self.options, SOURCE_SEED + index, self.executor)
                log.debug("fitted the GP of source %s (%d samples)", task.label, len(task))
            return self._gps[index]

    def predictability(self, tasks: Sequence[Mapping[str, Any]] | None = None) -> float | None:
        """How well each source task's GP predicts its own evaluations unseen: Spearman's rho of its
        leave-one-out means (:meth:`~raytuner.models.FittedLCM.leave_one_out`) against its values,
        averaged over the tasks.

        Near 1: a GP of this many evaluations already tells good
        configurations from bad, so a new task of the same problem may start
        with a short design and let a model lead; near 0: the landscape is
        too rough for that many evaluations, and a new task needs its full
        design. ``None`` with no task of at least 3 successful evaluations
        (or none of ``tasks``).

        Args:
            tasks: Only the source tasks of these task parameters (default ``None``: every source task).

        Example:
            >>> import numpy as np
            >>> from raytuner.problem.records import FunctionEvaluation
            >>> from raytuner.problem.space import ProblemSpace
            >>> problem = ProblemSpace.parse({"input_space": [{"name": "t", "type": "real", "lower_bound": 0,
            ...     "upper_bound": 1}], "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0,
            ...     "upper_bound": 1}], "output_space": [{"name": "y"}]})
            >>> xs = np.linspace(0, 1, 12)
            >>> smooth = [FunctionEvaluation.create({"t": 0.5}, {"x": x}, {"y": (x - 0.3) ** 2}) for x in xs]
            >>> bool(SourceData(problem, smooth).predictability() > 0.9)
            True
        """
        wanted = None if tasks is None else {task_key(t) for t in tasks}
        rhos = []
        for i, task in enumerate(self.tasks):
            if len(task) < 3 or (wanted is not None and task_key(task.task) not in wanted):
                continue
            rho = loo_rank_correlation(self.gp(i), 0, least=3)  # None past the exact posterior's limit: left out
            if rho is not None:
                rhos.append(rho)
        return float(np.mean(rhos)) if rhos else None

    def stacking_order(self) -> list[int]:
        """Source tasks by decreasing sample count (Stacking's chain order; ties keep their order)."""
        return sorted(range(len(self.tasks)), key=lambda i: -len(self.tasks[i]))

    def residual_chain(self) -> list[FittedLCM]:
        """Stacking's source models: a GP of the first source, then GPs of each next source's residual.

        The residual of source ``k`` is its values minus the summed means of
        the models before it, at its own points.
        """
        with self._lock:
            if self._chain is None:
                chain: list[FittedLCM] = []
                for position, index in enumerate(self.stacking_order()):
                    task = self.tasks[index]
                    prior = sum((m.predict(0, task.X)[0] for m in chain), np.zeros(len(task)))
                    chain.append(
                        fit_gp(task.X, task.v - prior, self.options, SOURCE_SEED + 1000 + position, self.executor)
                    )
                self._chain = chain
            return self._chain

    def lcm_hyperparameters(self) -> Hyperparameters:
        """The LCM of the sources alone (``latent`` functions), to be extended by the target task."""
        with self._lock:
            if self._lcm is None:
                data = TrainingData([t.X for t in self.tasks], [t.v for t in self.tasks])
                fitted = LCM(replace(self.options, latent=self.latent)).fit(
                    data, seed=SOURCE_SEED, executor=self.executor
                )
                self._lcm = fitted.hyperparameters
                log.info(
                    "fitted the source LCM over %d tasks, %d samples in %.1f s",
                    len(self.tasks),
                    sum(len(t) for t in self.tasks),
                    fitted.report.seconds,
                )
            return self._lcm
