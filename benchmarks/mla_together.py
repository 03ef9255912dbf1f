"""The MLA benchmark's together-against-alone cells: no task worse for being tuned with the others.

Two LCBench task sets, each tuned together as one problem: the 8 tasks the
benchmarks tune (:data:`~raytuner.test_problems.lcbench.LCBENCH_TASKS`) and
10 others never tuned to, the validation set
(:data:`~raytuner.test_problems.lcbench.LCBENCH_VALIDATION_TASKS`), each at
budgets of 30 and 60 evaluations per task (10 initial), 5 seeds. Tuners:
``mla`` (the default: each task's own model where it predicts the task
better, and on its turns), ``mla_always`` (every suggestion from the shared
LCM, as GPTune's MLA), ``single_task_bo`` (one MLA per task: the reference
for *alone*), Optuna's TPE and GP samplers and random search. Per cell
(set, budget): each tuner's mean best accuracy, its margin to single-task BO
per task (mean over the seeds) and the worst task's, and its win rate
against single-task BO over the (seed, task) cells. Goals: in every cell
``mla``'s worst margin is at least -0.5 accuracy points, and it wins at
least 0.6 of the (seed, task) cells against single-task BO. A mean over 5
seeds is noisy: beside each worst margin the cell holds its 2-standard-error
upper bound (``worst_upper``: a task under -0.5 there is worse than alone
beyond the seeds' noise, the third goal) and single-task BO's worst margin
against itself over halves of its seeds (``noise_floor_single_task_bo``).

Example:
    >>> import numpy as np
    >>> best = {"mla": np.array([[90.0, 80.0]]), "single_task_bo": np.array([[89.0, 80.5]])}
    >>> cell = together_cell("validation", 30, [1, 2], [0], best, {"mla": [1.0], "single_task_bo": [1.0]})
    >>> cell["margins"]["mla"]["worst"], cell["win_rate_vs_single_task_bo"]["mla"]
    (-0.5, 0.5)
    >>> together_goals([cell])
    {'mla_worst_margin_ge_-0.5_every_cell': True, 'mla_worst_upper_ge_-0.5_every_cell': True, \
'mla_win_rate_vs_single_task_bo_ge_0.6_every_cell': False}
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.mla_lcbench import LCBenchQuality, lcbench_peers, run_lcbench_quality
from benchmarks.report import margins_vs, markdown_table, noise_floor
from raytuner.analysis.metrics import win_rate
from raytuner.test_problems.lcbench import LCBENCH_TASKS, LCBENCH_VALIDATION_TASKS

__all__ = [
    "TogetherSettings",
    "FULL_TOGETHER",
    "QUICK_TOGETHER",
    "TOGETHER_TUNERS",
    "GOAL_WORST_MARGIN",
    "GOAL_WIN_RATE",
    "GOALS",
    "together_cell",
    "together_goals",
    "run_together",
    "render_together",
]

log = logging.getLogger(__name__)

#: The tuners of these cells (``optuna_gp`` only where torch is installed).
TOGETHER_TUNERS = ("mla", "mla_always", "single_task_bo", "optuna_tpe", "optuna_gp", "random")
#: The least margin, in accuracy points, of any task to single-task BO.
GOAL_WORST_MARGIN = -0.5
#: The least share of (seed, task) cells won against single-task BO.
GOAL_WIN_RATE = 0.6
#: The goals' keys in ``results["together_vs_alone"]["goals"]``.
GOALS = (
    "mla_worst_margin_ge_-0.5_every_cell",
    "mla_worst_upper_ge_-0.5_every_cell",
    "mla_win_rate_vs_single_task_bo_ge_0.6_every_cell",
)


@dataclass(frozen=True)
class TogetherSettings:
    """The task sets, budgets (evaluations per task), seeds and initial design of the cells."""

    sets: Mapping[str, tuple[int, ...]]
    budgets: tuple[int, ...]
    seeds: tuple[int, ...]
    n_initial: int


FULL_TOGETHER = TogetherSettings(
    sets={"tuning": LCBENCH_TASKS, "validation": LCBENCH_VALIDATION_TASKS},
    budgets=(30, 60),
    seeds=tuple(range(5)),
    n_initial=10,
)
QUICK_TOGETHER = TogetherSettings(
    sets={"tuning": LCBENCH_TASKS[:3], "validation": LCBENCH_VALIDATION_TASKS[:3]},
    budgets=(10,),
    seeds=(0,),
    n_initial=5,
)


def together_cell(
    name: str,
    budget: int,
    tasks: Sequence[int],
    seeds: Sequence[int],
    best: Mapping[str, np.ndarray],
    wall: Mapping[str, Sequence[float]],
) -> dict[str, Any]:
    """One (task set, budget) cell's results from each tuner's best accuracy per (seed, task).

    Args:
        name: the task set's name (``"tuning"`` or ``"validation"``).
        budget: evaluations per task.
        tasks: the LCBench task ids, in column order.
        seeds: the seeds, in row order.
        best: per tuner, its best accuracy per (seed, task), shaped (seeds, tasks); holds ``"single_task_bo"``.
        wall: per tuner, its wall seconds per run.
    """
    alone = np.asarray(best["single_task_bo"], dtype=float)
    return {
        "set": name,
        "budget": budget,
        "tasks": list(tasks),
        "seeds": list(seeds),
        "best_mean": {n: round(float(np.mean(v)), 4) for n, v in best.items()},
        "margins": margins_vs(best, list(tasks)),
        "noise_floor_single_task_bo": noise_floor(alone),
        "win_rate_vs_single_task_bo": {
            n: round(win_rate(-np.asarray(v, dtype=float), -alone), 4) for n, v in best.items() if n != "single_task_bo"
        },
        "wall_seconds_median": {n: round(statistics.median(w), 2) for n, w in wall.items()},
        "best": {n: np.round(np.asarray(v, dtype=float), 4).tolist() for n, v in best.items()},
    }


def together_goals(cells: Sequence[Mapping[str, Any]]) -> dict[str, bool | None]:
    """Whether ``mla`` met both goals in every cell (``None`` without cells).

    Args:
        cells: the cells, as :func:`together_cell` returns them.
    """
    if not cells:
        return dict.fromkeys(GOALS)
    return {
        "mla_worst_margin_ge_-0.5_every_cell": all(c["margins"]["mla"]["worst"] >= GOAL_WORST_MARGIN for c in cells),
        "mla_worst_upper_ge_-0.5_every_cell": all(
            c["margins"]["mla"]["worst_upper"] >= GOAL_WORST_MARGIN for c in cells
        ),
        "mla_win_rate_vs_single_task_bo_ge_0.6_every_cell": all(
            c["win_rate_vs_single_task_bo"]["mla"] >= GOAL_WIN_RATE for c in cells
        ),
    }


def run_together(settings: TogetherSettings) -> dict[str, Any]:
    """Every cell of ``settings`` with every tuner of :data:`TOGETHER_TUNERS` this environment runs:
    ``results["together_vs_alone"]`` (``skipped`` names the others and why; without the LCBench data, no cell).

    Args:
        settings: the task sets, budgets, seeds and initial design.
    """
    surrogate, available, skipped = lcbench_peers()
    tuners = {name: available[name] for name in TOGETHER_TUNERS if name in available}
    cells = []
    for name, tasks in settings.sets.items():
        for budget in settings.budgets if surrogate is not None else ():
            log.info("mla benchmark, together against alone: the %s set at %d evaluations per task", name, budget)
            quality = run_lcbench_quality(
                LCBenchQuality(seeds=settings.seeds, tasks=tasks, evaluations=budget, n_initial=settings.n_initial),
                tuners,
                surrogate,
            )
            best = {n: np.asarray(v, dtype=float) for n, v in quality["best"].items()}
            wall = {row["tuner"]: [row["wall_seconds_median"]] for row in quality["rows"]}
            cells.append(together_cell(name, budget, tasks, settings.seeds, best, wall))
    return {"cells": cells, "goals": together_goals(cells), "skipped": skipped}


def render_together(together: Mapping[str, Any] | None) -> list[str]:
    """The report's together-against-alone section (nothing for results written before it existed).

    Args:
        together: ``results["together_vs_alone"]``, or ``None``.
    """
    if not together or not together.get("cells"):
        return []
    lines = [
        "## Together against alone (LCBench)",
        "",
        "Each task set tuned together as one problem; margin: a tuner's mean best accuracy on a task minus "
        "single-task BO's (mean over the seeds), worst: the task with the least; wins: share of (seed, task) "
        "cells with a higher best accuracy than single-task BO (ties count half).",
        "",
    ]
    for cell in together["cells"]:
        rows = [
            [
                n,
                mean,
                cell["margins"].get(n, {}).get("worst", "-"),
                cell["margins"].get(n, {}).get("worst_task", "-"),
                cell["margins"].get(n, {}).get("worst_upper", "-"),
                cell["win_rate_vs_single_task_bo"].get(n, "-"),
                cell["wall_seconds_median"].get(n, "-"),
            ]
            for n, mean in cell["best_mean"].items()
        ]
        lines += [
            f"### The {cell['set']} set ({len(cell['tasks'])} tasks), {cell['budget']} evaluations per task, "
            f"seeds {cell['seeds']}",
            "",
            markdown_table(
                ["tuner", "mean best", "worst margin", "worst task", "worst margin + 2 se", "wins", "median wall s"],
                rows,
            ),
            "",
            f"Single-task BO against itself (halves of its seeds), worst margin: {cell.get('noise_floor_single_task_bo')}",
            "",
        ]
    return lines
