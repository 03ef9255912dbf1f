"""Where a tuning run stands, per task: evaluations, failures, normalised cost and the best so far.

A :class:`ProgressTally` folds records in one at a time (constant work per
record), so a session can keep one and log a line per evaluation at INFO;
the Ray Tune progress callback (:class:`raytuner.searchers.TuningProgress`)
prints its :meth:`~ProgressTally.table`. The best is taken at the highest
fidelity any evaluation of the run reached (full fidelity), or over every
evaluation when there are no fidelities.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, Provenance
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> tally = ProgressTally(ProblemSpace.parse(DEMO_PROBLEM))
    >>> _ = tally.add(FunctionEvaluation.create({"t": 1.0}, {"x": 0.2}, {"y": 0.9}, provenance=Provenance(cost=0.5)))
    >>> print(tally.line(tally.add(FunctionEvaluation.create({"t": 1.0}, {"x": 0.4}, {"y": 0.7}))))
    t=1: 2 evaluations, 0 failed, cost 1.5, best y 0.7 (x=0.4)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from raytuner.problem.records import FunctionEvaluation, task_key
from raytuner.problem.space import ProblemSpace

__all__ = ["TaskProgress", "ProgressTally", "task_label", "config_label", "in_task_order"]


def _number(value: Any) -> str:
    return f"{value:.15g}" if isinstance(value, float) else str(value)  # distinct floats keep distinct labels


def task_label(task: Mapping[str, Any]) -> str:
    """A task as ``name=value`` pairs, in name order (how every table and plot names a task).

    Args:
        task: the task's parameters.

    >>> task_label({"t": 1.0, "n": 200})
    'n=200 t=1'
    """
    return " ".join(f"{k}={_number(v)}" for k, v in task_key(task)) or "(no task parameters)"


def in_task_order(by_task: Mapping[Any, Any]) -> list[Any]:
    """The values of a mapping keyed by :func:`~raytuner.problem.records.task_key`, sorted by task values.

    Where the values do not sort (text against numbers), the mapping's own order.

    Args:
        by_task: task keys to anything.

    >>> in_task_order({(("t", 2.0),): "b", (("t", 1.0),): "a"})
    ['a', 'b']
    """
    try:
        return [by_task[k] for k in sorted(by_task)]
    except TypeError:
        return list(by_task.values())


def config_label(config: Mapping[str, Any]) -> str:
    """A configuration as ``name=value`` pairs, 4 significant digits for reals.

    Args:
        config: the tuning parameters.

    >>> config_label({"x": 0.123456, "mb": 8})
    'x=0.1235, mb=8'
    """
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in config.items())


@dataclass
class TaskProgress:
    """One task's progress.

    Args:
        task: the task's parameters.
        evaluations: evaluations told (any fidelity, failures included).
        failed: of which failed.
        cost: normalised cost spent (an evaluation without a cost counts 1).
        best: per fidelity (``None``: no fidelity) the best ``(value, configuration)`` told there.
        last: the latest evaluation's place in GPTuneBand's plan (``pass``, ``bracket``, ``rung``), if any.
    """

    task: dict[str, Any]
    evaluations: int = 0
    failed: int = 0
    cost: float = 0.0
    best: dict[float | None, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    last: dict[str, int] = field(default_factory=dict)


class ProgressTally:
    """Per task progress of a run, folded one record at a time.

    Args:
        problem: the problem (its first objective, and that objective's goal, decide the best).
        objective: the output the best is of (default: the problem's first objective).
    """

    def __init__(self, problem: ProblemSpace, objective: str | None = None) -> None:
        target = problem.objective(objective)
        self.objective, self.goal, self._sign = target.name, target.goal, target.sign()
        self.full_fidelity: float | None = None
        self._tasks: dict[Any, TaskProgress] = {}

    def add(self, record: FunctionEvaluation) -> TaskProgress:
        """Fold ``record`` in; its task's progress.

        Args:
            record: a told evaluation.
        """
        key = task_key(record.task_parameter)
        progress = self._tasks.setdefault(key, TaskProgress(dict(record.task_parameter)))
        p = record.raytuner
        progress.evaluations += 1
        progress.failed += record.status != "ok"
        progress.cost += p.cost if p is not None and p.cost is not None else 1.0
        fidelity = p.fidelity if p is not None else None
        if fidelity is not None and (self.full_fidelity is None or fidelity > self.full_fidelity):
            self.full_fidelity = fidelity
        value = record.value(self.objective)
        held = progress.best.get(fidelity)
        if value is not None and (held is None or self._sign * value < self._sign * held[0]):
            progress.best[fidelity] = (value, dict(record.tuning_parameter))
        if p is not None and p.bracket is not None:
            progress.last = {
                k: v for k, v in (("pass", p.pass_), ("bracket", p.bracket), ("rung", p.rung)) if v is not None
            }
        return progress

    def add_all(self, records: Iterable[FunctionEvaluation]) -> None:
        """Fold every record in, in order.

        Args:
            records: told evaluations.
        """
        for record in records:
            self.add(record)

    def tasks(self) -> list[TaskProgress]:
        """Every task seen, sorted by its parameter values (in the order first seen where values do not sort)."""
        return in_task_order(self._tasks)

    def best(self, progress: TaskProgress) -> tuple[float, dict[str, Any]] | None:
        """A task's best ``(value, configuration)`` at full fidelity (or without a fidelity), or ``None``.

        Args:
            progress: the task's progress.
        """
        held = [b for f in {self.full_fidelity, None} if (b := progress.best.get(f)) is not None]
        return min(held, key=lambda b: self._sign * b[0]) if held else None

    def line(self, progress: TaskProgress) -> str:
        """One line: the task, its counts, its cost, its best so far and where GPTuneBand's plan stands.

        Args:
            progress: the task's progress.
        """
        best = self.best(progress)
        shown = "none yet" if best is None else f"{best[0]:.6g} ({config_label(best[1])})"
        place = ", ".join(f"{k} {v}" for k, v in progress.last.items())
        return (
            f"{task_label(progress.task)}: {progress.evaluations} evaluations, {progress.failed} failed, "
            f"cost {progress.cost:.4g}, best {self.objective} {shown}" + (f"; at {place}" if place else "")
        )

    def table(self) -> list[str]:
        """A header line and one row per task (evaluations, failed, cost, best, pass/bracket/rung)."""
        rows = [(task_label(p.task), p, self.best(p)) for p in self.tasks()]
        width = max([len(r[0]) for r in rows] + [4])
        band = any(p.last for _, p, _ in rows)
        at = f" at fidelity {self.full_fidelity:g}" if self.full_fidelity is not None else ""
        lines = [
            f"{'task':<{width}} {'evals':>6} {'failed':>6} {'cost':>8} {'best ' + self.objective + at:>14}"
            + ("  pass bracket rung" if band else "")
        ]
        for label, p, best in rows:
            value = "-" if best is None else f"{best[0]:.6g}"
            line = f"{label:<{width}} {p.evaluations:>6} {p.failed:>6} {p.cost:>8.4g} {value:>14}"
            if band:
                line += "  " + " ".join(
                    f"{p.last.get(k, '-'):>{w}}" for k, w in (("pass", 4), ("bracket", 7), ("rung", 4))
                )
            lines.append(line)
        return lines
