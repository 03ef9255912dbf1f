"""Band benchmark: GPTuneBand against BOHB, Hyperband, GPTune, TPE, SMAC and random search (paper 004, Table 1).

Run it with::

    python -m benchmarks band --out DIR [--quick]

or ``benchmarks.run_benchmark("band", Path(DIR), quick=False)``. It writes
``DIR/results.json``, ``DIR/report.md`` and one PNG tuning history per
Table-1 row (``band_row{id}.png``) and for LCBench (``band_lcbench.png``).

- **Table 1** (demo function, one-shot fidelity, minimised): per row, tasks
  drawn uniformly from the task range (seeded per repeat) and a bandit
  structure ``[b_min, b_max, η]``. Every tuner gets the normalised cost
  ``C = cost_per_pass("one_shot")`` per task (an evaluation at ``b`` costs
  ``b / b_max``); single-fidelity tuners make ``⌊C⌋`` evaluations at
  ``b_max``. A tuner's answer on a task is the true ``y(x, t)`` of the
  configuration it picks at ``b_max``. R-bar and win rates come from
  :mod:`raytuner.analysis.metrics`. ``GPTuneBand-paper`` is the engine with
  ``model="paper"``. Goals: GPTuneBand has the lowest R-bar in every row
  (``GPTune``, our MLA, too), R-bar ≤ 1.02, wins ≥ 80 % of the cells vs BOHB.
- **LCBench** (YAHPO surrogate, iterative fidelity in epochs, ``val_accuracy``
  maximised): GPTuneBand's engine against Ray's ASHA, Hyperband and BOHB,
  SMAC3's multi-fidelity facade (``SMAC``) and its black-box facade at epoch
  52 (``SMAC-HPO``, :mod:`benchmarks.band_smac`), and Optuna's TPE and
  GPSampler, raytuner's single-task BO (``single-task BO``: an MLA per task, the
  reference for tuning each task alone) and random search at epoch 52, and
  GPTuneBand in one-shot mode too (``GPTuneBand-one-shot``), on the 8 tasks and
  on a validation set of 10 others (each set one problem), at each budget of the settings
  (epochs / 52 per task, the same for every tuner: GPTuneBand runs as many
  passes as the budget pays for, the last one cut where its next step no longer
  fits), ranked per (repeat, task) cell by the best accuracy at epoch 52;
  R-tilde is ``best of all / best of the tuner`` (1 is best). A peer whose
  package is missing is skipped (GPSampler needs torch). Goals at every budget:
  GPTuneBand's best mean rank and lowest R-bar, its longest ``ask`` under 5 s,
  with its fits on the executor a user's run gets (``ask_executor``), and no
  task's mean best under either GPTuneBand more than 0.5 points under
  single-task BO's (``margins_vs_single_task_bo``).
- **GPTune's own GPTuneBand** (:mod:`benchmarks.gptune_peer`), where
  ``--gptune DIR`` names a gptune-tuner folder: GPTune's ``MB_LCM`` on
  GPTune-Demo as its ``demo_MB.py`` runs it (tasks t = 1, 1.5, fidelities 1 to
  4, η = 4, 5 loops, 5 seeds) against GPTuneBand's engine with 5 passes of the
  same brackets (``results["gptune"]``), judged as in ``bench mla``.

``--quick`` runs row 1 only with 2 repeats of 10 tasks, and LCBench on 2 tasks of
each set, 1 repeat, one pass of budget. ``results["goals"]`` holds every goal
(:func:`all_goals`). The sequential tuners are in
:mod:`benchmarks.band_peers`, Ray's in :mod:`benchmarks.band_ray`, the
report and plots in :mod:`benchmarks.band_report`.

Example (one draw of two tasks, the sequential tuners only; the Ray tuners need ``ray.init``):
    >>> row = TABLE1[0]
    >>> row.structure, row.cost_per_task(), row.evaluations()
    ((1, 8, 2), 15.0, 15)
    >>> runners = {name: DEMO_RUNNERS[name] for name in ("GPTuneBand", "random")}
    >>> result, history = run_row(row, repeats=1, tasks=2, runners=runners)
    >>> sorted(result["R_bar"]), list(result["win_rate_vs"]), len(history["cost"])
    (['GPTuneBand', 'random'], ['random'], 61)
"""

from __future__ import annotations

import functools
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import band_peers as peers
from benchmarks.band_peers import Trace
from benchmarks.band_ray import run_demo_ray, run_lcbench_ray
from benchmarks.band_report import (
    GOAL_LONGEST_ASK_S,
    GOAL_R_BAR,
    GOAL_WIN_RATE_BOHB,
    GOAL_WORST_MARGIN,
    MLA,
    REFERENCE,
    all_goals,
    goals,
    render_report,
    save_plot,
)
from benchmarks.band_smac import run_lcbench_smac
from benchmarks.data import find
from benchmarks.gptune_peer import band_section, run_only
from benchmarks.report import finish_run, machine_at_start, margins_vs, noise_floor
from raytuner.analysis import r_bar, relative_performance, win_rate
from raytuner.engines import BanditStructure
from raytuner.models.executors import default_executor
from raytuner.test_problems import demo_grid_minimum
from raytuner.test_problems.lcbench import LCBENCH_TASKS, LCBENCH_VALIDATION_TASKS, LCBenchSurrogate

__all__ = [
    "Row",
    "TABLE1",
    "Settings",
    "FULL",
    "QUICK",
    "DEMO_TUNERS",
    "DEMO_RUNNERS",
    "LCBENCH_TUNERS",
    "LCBENCH_RUNNERS",
    "run",
    "run_row",
    "row_results",
    "run_lcbench",
    "lcbench_results",
    "goals",
    "all_goals",
    "render_report",
]

log = logging.getLogger(__name__)

DEMO_TUNERS: tuple[str, ...] = ("GPTuneBand", "GPTuneBand-paper", "BOHB", "HB", "GPTune", "TPE", "random")
LCBENCH_TUNERS: tuple[str, ...] = (
    "GPTuneBand",
    "GPTuneBand-one-shot",
    "single-task BO",
    "ASHA",
    "HB",
    "BOHB",
    "TPE",
    "SMAC",
    "GPSampler",
    "SMAC-HPO",
    "random",
)
#: The tuner whose per-task margins say whether tuning together cost any task (raytuner's BO of each task alone).
ALONE = "single-task BO"
LCBENCH_STRUCTURE: tuple[int, int, int] = (1, 52, 3)
#: The normalised cost of one GPTuneBand pass on LCBench (iterative fidelity): about 12.69.
LCBENCH_PASS = BanditStructure.hyperband(*LCBENCH_STRUCTURE, integer=True).cost_per_pass("iterative")
CURVE_POINTS = 61

#: A demo tuner: (tasks, structure, seed) -> one trace per task.
DemoRunner = Callable[[Sequence[float], BanditStructure, int], list[Trace]]
DEMO_RUNNERS: dict[str, DemoRunner] = {
    "GPTuneBand": peers.run_demo_gptuneband,
    "GPTuneBand-paper": functools.partial(peers.run_demo_gptuneband, model="paper"),
    "BOHB": functools.partial(run_demo_ray, "BOHB"),
    "HB": functools.partial(run_demo_ray, "HB"),
    "GPTune": peers.run_demo_mla,
    "TPE": peers.run_demo_tpe,
    "random": peers.run_demo_random,
}
#: An LCBench tuner: (surrogate, task ids, structure, budget per task, seed) -> one trace per task.
LCBenchRunner = Callable[[LCBenchSurrogate, Sequence[int], BanditStructure, float, int], list[Trace]]
LCBENCH_RUNNERS: dict[str, LCBenchRunner] = {
    "GPTuneBand": peers.run_lcbench_gptuneband,
    "GPTuneBand-one-shot": functools.partial(peers.run_lcbench_gptuneband, fidelity_mode="one_shot"),
    "single-task BO": peers.run_lcbench_single_task_bo,
    "ASHA": functools.partial(run_lcbench_ray, "ASHA"),
    "HB": functools.partial(run_lcbench_ray, "HB"),
    "BOHB": functools.partial(run_lcbench_ray, "BOHB"),
    "TPE": peers.run_lcbench_tpe,
    "SMAC": run_lcbench_smac,
    "GPSampler": peers.run_lcbench_gpsampler,
    "SMAC-HPO": functools.partial(run_lcbench_smac, facade="hpo"),
    "random": peers.run_lcbench_random,
}


@dataclass(frozen=True)
class Row:
    """One row of Table 1: the task range, the bandit structure and the paper's R-bar per tuner.

    >>> row = TABLE1[0]
    >>> row.bandit().fidelities, row.cost_per_task(), row.evaluations()
    ((8.0, 4.0, 2.0, 1.0), 15.0, 15)
    >>> [round(t, 3) for t in row.tasks(repeat=0, count=3)] == [round(t, 3) for t in row.tasks(0, 3)]
    True
    """

    id: int
    task_range: tuple[float, float]
    structure: tuple[float, float, int]  # b_min, b_max, eta
    paper: Mapping[str, float] = field(default_factory=dict)

    def bandit(self) -> BanditStructure:
        """Hyperband's structure for ``[b_min, b_max, η]``."""
        b_min, b_max, eta = self.structure
        return BanditStructure.hyperband(b_min, b_max, int(eta))

    def cost_per_task(self) -> float:
        """``C``: the one-shot cost of one GPTuneBand pass on one task, every tuner's budget."""
        return peers.demo_budget(self.bandit())[0]

    def evaluations(self) -> int:
        """``⌊C⌋``: evaluations at ``b_max`` per task for the single-fidelity tuners."""
        return peers.demo_budget(self.bandit())[1]

    def tasks(self, repeat: int, count: int = 10) -> list[float]:
        """``count`` tasks drawn uniformly from the task range, seeded by the row and the repeat (sorted).

        Args:
            repeat: the repeat's index (0, 1, ...), part of the seed.
            count: how many tasks to draw (default 10).
        """
        rng = np.random.default_rng(np.random.SeedSequence([self.id, repeat]))
        return sorted(float(t) for t in rng.uniform(*self.task_range, size=count))


def _paper(gptuneband: float, bohb: float, gptune: float, tpe: float) -> dict[str, float]:
    return {"GPTuneBand": gptuneband, "BOHB": bohb, "GPTune": gptune, "TPE": tpe}


#: Paper 004, Table 1 (R-bar of GPTuneBand, BOHB, GPTune and TPE; OpenTuner is not compared here).
TABLE1: tuple[Row, ...] = (
    Row(1, (1.0, 1.45), (1, 8, 2), _paper(1.010, 1.082, 1.043, 1.112)),
    Row(2, (1.0, 1.45), (1, 16, 2), _paper(1.018, 1.064, 1.039, 1.094)),
    Row(3, (1.0, 1.45), (1, 9, 3), _paper(1.022, 1.088, 1.023, 1.114)),
    Row(4, (1.0, 1.45), (1, 27, 3), _paper(1.017, 1.017, 1.050, 1.051)),
    Row(5, (1.0, 1.45), (1, 16, 4), _paper(1.016, 1.025, 1.030, 1.084)),
    Row(6, (1.0, 5.5), (1, 27, 3), _paper(1.013, 1.090, 1.107, 1.090)),
)


@dataclass(frozen=True)
class Settings:
    """What one run covers: Table-1 rows, repeats and tasks per repeat; LCBench tasks, repeats, budgets.

    >>> [row.id for row in QUICK.rows], QUICK.repeats, QUICK.lcbench_tasks, QUICK.lcbench_budgets == (LCBENCH_PASS,)
    ([1], 2, (3945, 7593), True)
    """

    rows: tuple[Row, ...]
    repeats: int
    tasks: int
    lcbench_tasks: tuple[int, ...]
    lcbench_repeats: int
    lcbench_budgets: tuple[float, ...]  # normalised cost per task (epochs / 52), one LCBench comparison each
    lcbench_validation_tasks: tuple[int, ...] = ()  # a second problem, never tuned to, at the same budgets


FULL = Settings(
    rows=TABLE1,
    repeats=5,
    tasks=10,
    lcbench_tasks=LCBENCH_TASKS,
    lcbench_repeats=5,
    lcbench_budgets=(30.0, 60.0),
    lcbench_validation_tasks=LCBENCH_VALIDATION_TASKS,
)
QUICK = Settings(
    rows=TABLE1[:1],
    repeats=2,
    tasks=10,
    lcbench_tasks=LCBENCH_TASKS[:2],
    lcbench_repeats=1,
    lcbench_budgets=(LCBENCH_PASS,),
    lcbench_validation_tasks=LCBENCH_VALIDATION_TASKS[:2],
)


# -- Table 1 -----------------------------------------------------------------------------------------
def _finals(traces: Mapping[str, list[list[Trace]]], sign: float = 1.0) -> dict[str, np.ndarray]:
    """Each tuner's answers, shape (repeats, tasks); a missing answer counts as the worst in its cell."""
    finals = {name: np.array([[t.final for t in row] for row in runs], dtype=float) for name, runs in traces.items()}
    stacked = np.stack(list(finals.values()))
    worst = sign * np.nanmax(sign * stacked, axis=0)
    for name, values in finals.items():
        missing = ~np.isfinite(values)
        if missing.any():
            log.warning("%s has no answer in %d cell(s); counted as the worst value there", name, missing.sum())
            values[missing] = worst[missing]
    return finals


def _curve(
    runs: list[list[Trace]], grid: np.ndarray, scale: Callable[[int, int], float], sign: float
) -> list[float | None]:
    """Median over repeats of the mean over tasks of the scaled best-so-far at each cost of ``grid``."""
    per_repeat = [
        np.mean([trace.curve(grid, sign) / scale(r, j) for j, trace in enumerate(row)], axis=0)
        for r, row in enumerate(runs)
    ]
    median = np.median(np.array(per_repeat), axis=0)
    return [round(float(v), 6) if math.isfinite(v) else None for v in median]


def row_results(
    row: Row, finals: Mapping[str, np.ndarray], wall: Mapping[str, Sequence[float]], notes: Sequence[str] = ()
) -> dict[str, Any]:
    """``results["table1"]["rows"][i]`` from each tuner's answers (repeats, tasks) and wall seconds.

    Args:
        row: the Table 1 row.
        finals: per tuner, its answer (true ``y`` of its best configuration at ``b_max``), shaped (repeats, tasks);
            ``"GPTuneBand"`` is the reference.
        wall: per tuner, its wall seconds per repeat.
        notes: remarks to keep in the results (default none).

    >>> f = {"GPTuneBand": np.array([[1.0, 1.0]]), "BOHB": np.array([[1.1, 1.0]])}
    >>> r = row_results(TABLE1[0], f, {"GPTuneBand": [2.0], "BOHB": [1.0]})
    >>> r["R_bar"], r["win_rate_vs"], r["paper_R_bar_GPTuneBand"], r["goals"]["lowest_R_bar"]
    ({'GPTuneBand': 1.0, 'BOHB': 1.05}, {'BOHB': 0.75}, 1.01, True)
    """
    r_tilde = relative_performance(finals)
    r_bars = {name: round(r_bar(r_tilde[name]), 4) for name in finals}
    wins = {peer: round(win_rate(finals[REFERENCE], finals[peer]), 4) for peer in finals if peer != REFERENCE}
    repeats = int(next(iter(finals.values())).shape[0])
    ours = r_bars.get(REFERENCE)
    row_goals = {
        "lowest_R_bar": None if ours is None else ours <= min(r_bars.values()),
        "lowest_R_bar_incl_mla": None if ours is None or MLA not in r_bars else ours <= min(r_bars.values()),
        "R_bar_le_1.02": None if ours is None else ours <= GOAL_R_BAR,
        "win_rate_vs_BOHB_ge_0.8": None if "BOHB" not in wins else wins["BOHB"] >= GOAL_WIN_RATE_BOHB,
    }
    return {
        "id": row.id,
        "task_range": list(row.task_range),
        "structure": list(row.structure),
        "R_bar": r_bars,
        "win_rate_vs": wins,
        "paper_R_bar_GPTuneBand": row.paper.get(REFERENCE),
        "repeats": repeats,
        "cost_per_task": row.cost_per_task(),
        "evaluations_per_task_at_b_max": row.evaluations(),
        "tasks_per_repeat": int(finals[REFERENCE].shape[-1]) if REFERENCE in finals else None,
        "paper_R_bar": dict(row.paper),
        "wall_seconds_median": {name: round(statistics.median(w), 2) for name, w in wall.items()},
        "goals": row_goals,
        "notes": list(notes),
    }


def run_row(
    row: Row, repeats: int, tasks: int, runners: Mapping[str, DemoRunner] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every tuner on ``repeats`` draws of ``tasks`` tasks of ``row``: the row's results and its curves.

    ``runners`` (default :data:`DEMO_RUNNERS`, whose Ray tuners need
    ``ray.init``) must hold ``"GPTuneBand"``, the reference. The curves are
    ``{"cost": grid, "curves": {tuner: best y at b_max / grid minimum}}``; see
    the module's example.

    Args:
        row: the Table 1 row (its bandit structure and task range).
        repeats: how many seeded draws of tasks.
        tasks: how many tasks per draw.
        runners: tuner name to runner (default ``None``: :data:`DEMO_RUNNERS`); must hold ``"GPTuneBand"``.
    """
    runners = DEMO_RUNNERS if runners is None else runners
    structure = row.bandit()
    traces: dict[str, list[list[Trace]]] = {name: [] for name in runners}
    wall: dict[str, list[float]] = {name: [] for name in runners}
    notes: list[str] = []
    task_lists = [row.tasks(repeat, tasks) for repeat in range(repeats)]
    for repeat, task_list in enumerate(task_lists):
        for name, runner in runners.items():
            started = time.perf_counter()
            runs = runner(task_list, structure, repeat)
            wall[name].append(time.perf_counter() - started)
            traces[name].append(runs)
            notes += [f"{name}, repeat {repeat}, t={t:.4f}: {tr.note}" for t, tr in zip(task_list, runs) if tr.note]
            log.info(
                "row %d repeat %d: %s took %.1f s, answers %s",
                row.id,
                repeat,
                name,
                wall[name][-1],
                [round(tr.final, 4) for tr in runs],
            )
    result = row_results(row, _finals(traces), wall, notes)
    minima = {t: demo_grid_minimum(t)[1] for task_list in task_lists for t in task_list}
    grid = np.linspace(0.0, row.cost_per_task(), CURVE_POINTS)
    curves = {name: _curve(runs, grid, lambda r, j: minima[task_lists[r][j]], 1.0) for name, runs in traces.items()}
    return result, {"cost": [round(float(c), 6) for c in grid], "curves": curves}


# -- LCBench -----------------------------------------------------------------------------------------
def lcbench_structure() -> BanditStructure:
    """``[1, 52, 3]`` in whole epochs: fidelities 52, 17, 6, 2.

    >>> lcbench_structure().fidelities
    (52.0, 17.0, 6.0, 2.0)
    """
    b_min, b_max, eta = LCBENCH_STRUCTURE
    return BanditStructure.hyperband(b_min, b_max, eta, integer=True)


def _mean_ranks(finals: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Mean rank per tuner over all cells, rank 1 = highest accuracy, ties share the average rank.

    >>> _mean_ranks({"a": np.array([90.0, 80.0]), "b": np.array([85.0, 80.0])})
    {'a': 1.25, 'b': 1.75}
    """
    names = list(finals)
    values = np.stack([np.asarray(finals[n], dtype=float).ravel() for n in names])  # (tuners, cells)
    ranks = np.zeros_like(values)
    for c in range(values.shape[1]):
        column = values[:, c]
        for i, v in enumerate(column):
            ranks[i, c] = 1 + np.sum(column > v) + 0.5 * (np.sum(column == v) - 1)
    return {n: round(float(ranks[i].mean()), 4) for i, n in enumerate(names)}


def lcbench_results(
    task_ids: Sequence[int],
    budget: float,
    finals: Mapping[str, np.ndarray],
    wall: Mapping[str, Sequence[float]],
    notes: Sequence[str] = (),
    ask_seconds: Sequence[float] = (),
    skipped: Sequence[str] = (),
) -> dict[str, Any]:
    """``results["lcbench"]`` from each tuner's best accuracy at epoch 52 per (repeat, task) cell.

    Args:
        task_ids: the LCBench task ids run, in column order.
        budget: the budget per task, in normalised cost (epochs / 52).
        finals: per tuner, its best ``val_accuracy`` at epoch 52, shaped (repeats, tasks); ``"GPTuneBand"`` is the
            reference.
        wall: per tuner, its wall seconds per repeat.
        notes: remarks to keep in the results (default none).
        ask_seconds: the wall seconds of each of GPTuneBand's asks, all repeats and tasks (default none): their
            longest and median (``None`` without asks) and whether the longest is under 5 s.
        skipped: the tuners left out because their package is missing (default none).

    >>> r = lcbench_results([3945], 25.4, {"GPTuneBand": np.array([[90.0]]), "ASHA": np.array([[80.0]])},
    ...                     {"GPTuneBand": [1.0], "ASHA": [1.0]}, ask_seconds=[0.25, 0.5, 1.5])
    >>> r["mean_rank"], r["R_bar"], r["goal_best_mean_rank"], r["goal_lowest_R_bar"], r["passes"]
    ({'GPTuneBand': 1.0, 'ASHA': 2.0}, {'GPTuneBand': 1.0, 'ASHA': 1.125}, True, True, 2.001)
    >>> r["longest_ask_seconds"], r["ask_seconds_median"], r["goal_longest_ask_lt_5s"], r["skipped"]
    (1.5, 0.5, True, [])
    """
    ranks = _mean_ranks(finals)
    margins = margins_vs(finals, [int(t) for t in task_ids], reference=ALONE) if ALONE in finals else {}
    band_margins = [m["worst"] for name, m in margins.items() if name.startswith(REFERENCE)]
    band_uppers = [m["worst_upper"] for name, m in margins.items() if name.startswith(REFERENCE)]
    r_tilde = relative_performance({name: 1.0 / np.asarray(v, dtype=float) for name, v in finals.items()})
    r_bars = {name: round(r_bar(r), 4) for name, r in r_tilde.items()}
    return {
        "tasks": [int(t) for t in task_ids],
        "structure": list(LCBENCH_STRUCTURE),
        "budget_per_task": round(budget, 6),
        "repeats": int(next(iter(finals.values())).shape[0]),
        "mean_rank": ranks,
        "R_bar": r_bars,
        "goal_best_mean_rank": ranks.get(REFERENCE, math.inf) <= min(ranks.values()),
        "goal_lowest_R_bar": r_bars.get(REFERENCE, math.inf) <= min(r_bars.values()),
        "passes": round(budget / LCBENCH_PASS, 3),
        "fidelities": list(lcbench_structure().fidelities),
        "best_val_accuracy": {name: np.round(v, 4).tolist() for name, v in finals.items()},
        "wall_seconds_median": {name: round(statistics.median(w), 2) for name, w in wall.items()},
        "notes": list(notes),
        "skipped": list(skipped),
        "asks": len(ask_seconds),
        "longest_ask_seconds": round(max(ask_seconds), 4) if ask_seconds else None,
        "ask_seconds_median": round(statistics.median(ask_seconds), 4) if ask_seconds else None,
        "goal_longest_ask_lt_5s": max(ask_seconds) < GOAL_LONGEST_ASK_S if ask_seconds else None,
        "margins_vs_single_task_bo": margins,
        "goal_no_negative_transfer": min(band_margins) >= GOAL_WORST_MARGIN if band_margins else None,
        "goal_no_negative_transfer_beyond_noise": min(band_uppers) >= GOAL_WORST_MARGIN if band_uppers else None,
        "noise_floor_single_task_bo": noise_floor(finals[ALONE]) if ALONE in finals else None,
    }


def run_lcbench(
    task_ids: Sequence[int],
    repeats: int,
    budget: float,
    data_dir: Path | None = None,
    runners: Mapping[str, LCBenchRunner] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """GPTuneBand's engine and its peers (:data:`LCBENCH_RUNNERS`) on LCBench: the results and the curves.

    A peer whose runner raises ``ImportError`` (its package is missing) is
    skipped with a warning and listed under ``"skipped"``.

    Args:
        task_ids: the LCBench task ids to tune.
        repeats: how many seeded repeats per task.
        budget: the normalised cost per task (epochs / 52), the same for every tuner.
        data_dir: the LCBench surrogate's folder (default ``None``: :func:`~raytuner.test_problems.lcbench.default_data_dir`).
        runners: tuner name to runner (default ``None``: :data:`LCBENCH_RUNNERS`, whose Ray tuners need
            ``ray.init``); must hold ``"GPTuneBand"``.

    Example (after ``ray.init()``; about a minute per task on 2 cores)::

        result, history = run_lcbench([3945], repeats=1, budget=LCBENCH_PASS)
        result["mean_rank"]      # {'GPTuneBand': 1.0, 'ASHA': 2.0, ...}: rank 1 = best accuracy
    """
    surrogate = LCBenchSurrogate(data_dir if data_dir is not None else find("yahpo_lcbench"))
    structure = lcbench_structure()
    runners = dict(LCBENCH_RUNNERS if runners is None else runners)
    traces: dict[str, list[list[Trace]]] = {name: [] for name in runners}
    wall: dict[str, list[float]] = {name: [] for name in runners}
    notes: list[str] = []
    skipped: list[str] = []
    for repeat in range(repeats):
        for name, runner in list(runners.items()):
            started = time.perf_counter()
            try:
                runs = runner(surrogate, task_ids, structure, budget, repeat)
            except ImportError as exc:
                if name == REFERENCE:
                    raise
                log.warning("LCBench: skipping %s: %s", name, exc)
                skipped.append(name)
                notes.append(f"{name} skipped: {exc}")
                del runners[name], traces[name], wall[name]
                continue
            wall[name].append(time.perf_counter() - started)
            traces[name].append(runs)
            notes += [f"{name}, repeat {repeat}, task {t}: {tr.note}" for t, tr in zip(task_ids, runs) if tr.note]
            log.info(
                "lcbench repeat %d: %s took %.1f s, best val_accuracy %s",
                repeat,
                name,
                wall[name][-1],
                [round(tr.final, 3) for tr in runs],
            )
    asks = [s for row in traces[REFERENCE] for trace in row for s in trace.ask_seconds]
    result = lcbench_results(task_ids, budget, _finals(traces, sign=-1.0), wall, notes, asks, skipped)
    result["ask_executor"] = type(default_executor()).__name__  # where the reference's larger fits ran their starts
    grid = np.linspace(0.0, budget, CURVE_POINTS)
    curves = {name: _curve(runs, grid, lambda r, j: 1.0, -1.0) for name, runs in traces.items()}
    return result, {"cost": [round(float(c), 6) for c in grid], "curves": curves}


def lcbench_section(
    out: Path, settings: Settings, tasks: Sequence[int] | None = None, name: str = ""
) -> list[dict[str, Any]]:
    """:func:`run_lcbench` at each of ``settings``' LCBench budgets, each with its plot in ``out``.

    The first budget's plot is ``band_lcbench{name}.png``, the others' ``band_lcbench{name}_{budget}.png``. The
    Ray tuners need ``ray.init``.

    Args:
        out: the folder for the plots.
        settings: the LCBench tasks, repeats and budgets.
        tasks: the task set (default ``None``: ``settings.lcbench_tasks``).
        name: the task set's suffix in the plots' names (default none: the tuning set's).
    """
    tasks = settings.lcbench_tasks if tasks is None else tuple(tasks)
    results = []
    for k, budget in enumerate(settings.lcbench_budgets):
        log.info(
            "band benchmark LCBench: tasks %s, %d repeats, budget %g", list(tasks), settings.lcbench_repeats, budget
        )
        lc, lc_history = run_lcbench(tasks, settings.lcbench_repeats, budget)
        plot = f"band_lcbench{name}.png" if k == 0 else f"band_lcbench{name}_{budget:g}.png"
        title = f"LCBench: {len(tasks)} tasks, structure [1, 52, 3], budget {budget:g}"
        lc["plot"] = (
            plot
            if save_plot(lc_history, out / plot, title, "best val_accuracy at epoch 52 (mean over tasks)")
            else None
        )
        lc["history"] = lc_history
        lc["set"] = "validation" if name else "tuning"
        results.append(lc)
    return results


# -- goals and the run -------------------------------------------------------------------------------
def run(out: Path, quick: bool = False, settings: Settings | None = None, gptune_only: bool = False) -> dict[str, Any]:
    """Run the band benchmark; write ``out/results.json``, ``out/report.md`` and the PNG plots.

    It starts a local 2-CPU Ray unless one is running. ``settings`` overrides
    ``quick`` (:data:`QUICK` or :data:`FULL`).

    Args:
        out: the folder for the results, the report and the plots (made if missing).
        quick: use :data:`QUICK` instead of :data:`FULL` (default ``False``).
        settings: explicit settings; when given, ``quick`` is ignored (default ``None``).
        gptune_only: run only the comparison with GPTune's own GPTuneBand (:mod:`benchmarks.gptune_peer`;
            default ``False``).

    Example (the quick run takes about 3 minutes on 2 cores)::

        results = run(Path("bench_out/band"), quick=True)
        sorted(results)   # ['benchmark', ..., 'lcbench', 'lcbench_budgets', 'lcbench_validation', 'machine', ...]
    """
    import ray

    out = Path(out)
    if gptune_only:
        return run_only(out, "band", quick, band_section)
    s = settings if settings is not None else (QUICK if quick else FULL)
    started = time.perf_counter()
    machine = machine_at_start()
    out.mkdir(parents=True, exist_ok=True)
    own_ray = not ray.is_initialized()
    if own_ray:
        ray.init(
            address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False
        )
    try:
        rows = []
        for row in s.rows:
            log.info(
                "band benchmark row %d: %d repeats x %d tasks, structure %s", row.id, s.repeats, s.tasks, row.structure
            )
            result, history = run_row(row, s.repeats, s.tasks)
            plot = f"band_row{row.id}.png"
            result["plot"] = (
                plot
                if save_plot(
                    history,
                    out / plot,
                    f"Table 1 row {row.id}: t in {list(row.task_range)}, {list(row.structure)}",
                    "best y at b_max / grid minimum (mean over tasks)",
                )
                else None
            )
            result["history"] = history
            rows.append(result)
        lcs = lcbench_section(out, s)
        validation = lcbench_section(out, s, s.lcbench_validation_tasks, "_validation")
        gptune = band_section(out, quick)
    finally:
        if own_ray:
            ray.shutdown()
    results = {
        "table1": {"rows": rows, "goals": goals(rows)},
        "lcbench": lcs[0],
        "lcbench_budgets": lcs,
        "lcbench_validation": validation,
        "gptune": gptune,
        "goals": all_goals(rows, [*lcs, *validation]),
        "machine": machine,
    }
    return finish_run(out, "band", results, render_report, quick=quick, started=started)
