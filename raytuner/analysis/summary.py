"""Plain-text summaries of a tuning run, per task: what was spent and what was found.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, Provenance
    >>> tasks = [{"t": 1.0}]
    >>> records = [FunctionEvaluation.create({"t": 1.0}, {"x": 0.25}, {"y": 0.5}, provenance=Provenance(cost=1.0)),
    ...            FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, failure="diverged",
    ...                                      provenance=Provenance(cost=0.5))]
    >>> print("\\n".join(task_summary(tasks, records, [records[0]], "y")))
    Per task: evaluations, failed, normalised cost
      t=1: 2, 1, 1.50
    Best configuration per task:
      t=1: y 0.5  [x=0.25]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from raytuner.problem.records import FunctionEvaluation, task_key

__all__ = ["task_summary"]


def _label(task: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in task.items())


def _config(config: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in config.items())


def task_summary(
    tasks: Sequence[Mapping[str, Any]],
    records: Sequence[FunctionEvaluation],
    best: Sequence[FunctionEvaluation | None],
    objective: str,
    label: Callable[[Mapping[str, Any]], str] = _label,
) -> list[str]:
    """Lines: per task the evaluations, failures and normalised cost, then its best configuration.

    ``best[i]`` is task ``i``'s best evaluation (``None`` when it has none);
    ``label`` renders a task (default ``name=value`` pairs). An evaluation
    without a cost (a single-fidelity engine's) costs 1, a run at full fidelity.

    >>> one = FunctionEvaluation.create({"t": 1.0}, {"x": 0.25}, {"y": 0.5})
    >>> task_summary([{"t": 1.0}], [one, one], [one], "y")[1]
    '  t=1: 2, 0, 2.00'

    Args:
        tasks: the tasks' parameters, in order.
        records: every evaluation of the run.
        best: per task its best evaluation, ``None`` when it has none.
        objective: the output the best values are of.
        label: renders a task (default ``name=value`` pairs).
    """
    lines = ["Per task: evaluations, failed, normalised cost"]
    for task in tasks:
        mine = [r for r in records if task_key(r.task_parameter) == task_key(task)]
        cost = sum(r.raytuner.cost if r.raytuner and r.raytuner.cost is not None else 1.0 for r in mine)
        lines.append(f"  {label(task)}: {len(mine)}, {sum(r.status != 'ok' for r in mine)}, {cost:.2f}")
    lines.append("Best configuration per task:")
    for task, record in zip(tasks, best):
        if record is None:
            lines.append(f"  {label(task)}: no successful evaluation")
        else:
            lines.append(
                f"  {label(task)}: {objective} {record.value(objective):.4g}  [{_config(record.tuning_parameter)}]"
            )
    return lines
