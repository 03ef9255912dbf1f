"""MLA benchmark: multitask BO against single-task BO, Optuna's TPE and GP samplers and random search; its cost.

Run it with::

    python -m benchmarks mla --out DIR [--quick]

or ``benchmarks.run_benchmark("mla", Path(DIR), quick=False)``. It writes
``DIR/results.json``, ``DIR/report.md`` and ``DIR/quality.png`` (when
matplotlib is installed) and logs progress on the ``benchmarks.mla`` logger.

- **Quality**: the demo function on 10 tasks t = 1, 1.5, ..., 5.5, x in
  [0, 1], minimised; 20 evaluations per task (10 LHS + 10 BO), 5 seeds. Tuners:
  ``mla`` (one :class:`~raytuner.engines.MLA` over all tasks),
  ``single_task_bo`` (one MLA per task), ``optuna_tpe`` (Optuna's TPE per
  task, 10 startup trials), ``optuna_gp`` (Optuna's ``GPSampler`` per task,
  10 startup trials; it needs torch: without it the peer is skipped with a
  warning and named in ``results["quality"]["skipped"]``) and ``random``. Per
  (seed, task) cell, each tuner's best value gives R-tilde
  (:mod:`raytuner.analysis.metrics`); the report gives R-bar per tuner, mla's
  win rate over each peer with its standard error over the seeds (about 0.05
  at 5 seeds: over 40 seeds mla won 0.537 ± 0.03 against single-task BO here)
  and a best-so-far plot. ``mla_staggered`` is MLA with ``design="staggered"``;
  its win rates are given too, and for every tuner the evaluations, summed
  over the tasks, until each task came within 1 % of the best any tuner
  found on it (``results["quality"]["reach"]``, median over the seeds, as a
  ratio to single-task BO's). Goals: mla has the lowest
  R-bar, and wins at least 70 % of the cells against single-task BO and
  against ``optuna_gp``.
- **Real data** (:mod:`benchmarks.mla_lcbench`): 8 related LCBench tasks at
  full fidelity, 20 evaluations per task (10 initial), 10 seeds: ``mla`` with
  each task's own initial design and with one shared design, against
  single-task BO, Optuna's TPE and GP samplers and random search; mean best
  accuracy and the win rates with their standard errors. Skipped, and named in
  ``results["quality_lcbench"]["skipped"]``, without the LCBench data or
  onnxruntime (the Optuna peers alone without Optuna, ``optuna_gp`` without
  torch). Goals: ``mla`` (its default, per-task design) wins at least 70 % of
  these cells against single-task BO and against ``optuna_gp``.
- **Together against alone** (:mod:`benchmarks.mla_together`): the 8 tasks
  above and a validation set of 10 others, each tuned together, at 30 and 60
  evaluations per task, 5 seeds: every task's margin to single-task BO and
  the win rate against it (``results["together_vs_alone"]``). Goals: no task's
  mean best more than 0.5 accuracy points under single-task BO's, and wins
  in at least 60 % of the cells, in every set and budget.
- **Overhead** (:mod:`benchmarks.mla_overhead`,
  :mod:`benchmarks.mla_scale`): the median warm ``ask`` of an engine
  holding (tasks x samples per task) 10 x {10, 30, 50, 100} and 20 x 250
  records, our cold LCM fit against GPy's coregionalised regression on the
  same data (up to 50 samples per task), and from 1,000 records the held-out
  error and log density of our fit and (up to 1,000 records) the exact
  model's. Goals: a median ask of at most 1 s at 10 x 30 (and, issue 19, at
  most 0.3 s, with a cold fit of at most 5 s), at most 1 s at 10 x 100 and
  3 s at 20 x 250; a fit at least 3x faster than GPy's at an equal or better
  log-likelihood.
- **GPTune's own MLA** (:mod:`benchmarks.gptune_peer`), where ``--gptune DIR``
  names a gptune-tuner folder: GPTune-Demo as GPTune's ``demo.py`` runs it
  (tasks t = 1, 2 and t = 1, 2, 3, 4; 20 evaluations per task, 10 initial; 5
  seeds) against ``mla`` on the same tasks, per task the mean regret, rank and
  wall seconds per suggestion with the ratios (``results["gptune"]``). Goals:
  ``mla``'s mean regret at most GPTune's on every task, its seconds per
  suggestion at least 20x lower. Without the folder it is skipped with one line.

``--quick`` runs 2 seeds on 4 tasks with 10 evaluations each (5 initial), for
the demo and LCBench alike, and the overhead at 10 x {10, 30} with GPy (2
restarts) at 10 samples only.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ask_tell import drive_tasks
from benchmarks.band_peers import optuna_rows, torch_missing
from benchmarks.gptune_peer import mla_section, render_section, run_only
from benchmarks.mla_lcbench import FULL_LCBENCH, QUICK_LCBENCH, lcbench_cells, render_lcbench
from benchmarks.mla_overhead import (
    GOAL_ASK_SECONDS,
    GOAL_SPEEDUP,
    LOGLIK_TOLERANCE,
    OverheadSettings,
    overhead_goals,
    render_overhead,
    run_overhead,
)
from benchmarks.mla_scale import (
    EXACT_MAX_RECORDS,
    GOAL_ASK_AT_SCALE,
    GOAL_COLD_FIT_SECONDS,
    GOAL_WARM_ASK_SECONDS,
    HELDOUT_MIN_RECORDS,
    HELDOUT_PER_TASK,
    scale_goals,
)
from benchmarks.mla_together import FULL_TOGETHER, QUICK_TOGETHER, render_together, run_together
from benchmarks.report import (
    machine_at_start,
    markdown_table,
    peer_win_rates,
    publish,
    reach_results,
    render_reach,
    save_history_plot,
    win_cell,
)
from raytuner.analysis import best_so_far, r_bar, relative_performance
from raytuner.engines import Engine, RandomSearch
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_grid_minimum

__all__ = [
    "run",
    "QualitySettings",
    "demo_values",
    "gptune_section",
    "TUNERS",
    "available_tuners",
    "drive",
    "run_quality",
    "normalised_curves",
    "quality_results",
    "goals",
    "build_results",
    "save_plot",
    "render_report",
]

log = logging.getLogger(__name__)

GOAL_WIN_RATE = 0.7  # mla against single_task_bo and against optuna_gp
REFERENCE = "mla"
#: The staggered start, compared with every peer as the reference is.
STAGGERED = "mla_staggered"
GOAL_STAGGERED_WIN_RATE = 0.6  # mla_staggered against single_task_bo, on the demo and on LCBench
GOAL_STAGGERED_REACH_RATIO = 0.7  # its evaluations until every task is within 1 % of its best, over single_task_bo's
TASKS = tuple(float(t) for t in np.linspace(1.0, 5.5, 10))


@dataclass(frozen=True)
class QualitySettings:
    """Seeds, tasks and evaluation budget of the quality comparison."""

    seeds: tuple[int, ...]
    tasks: tuple[float, ...]
    evaluations: int  # per task
    n_initial: int  # LHS evaluations per task before the model takes over


FULL_QUALITY = QualitySettings(seeds=tuple(range(10)), tasks=TASKS, evaluations=20, n_initial=10)
QUICK_QUALITY = QualitySettings(seeds=(0, 1), tasks=TASKS[::3], evaluations=10, n_initial=5)
FULL_OVERHEAD = OverheadSettings(
    sizes=((10, 10), (10, 30), (10, 50), (10, 100), (20, 250)),
    asks=5,
    n_initial=10,
    fit_repeats=3,
    naive_restarts=5,
    naive_samples=(10, 30, 50),
)
QUICK_OVERHEAD = OverheadSettings(
    sizes=((10, 10), (10, 30)), asks=3, n_initial=10, fit_repeats=1, naive_restarts=2, naive_samples=(10,)
)

#: A tuner run: (problem, tasks, seed, settings) -> the values it evaluated, shape (tasks, evaluations).
TunerRun = Callable[[ProblemSpace, list[dict[str, float]], int, QualitySettings], np.ndarray]


def drive(engine: Engine, evaluations: int) -> np.ndarray:
    """Ask/tell ``engine`` on the demo until each of its tasks has ``evaluations`` values; (tasks, evaluations).

    Args:
        engine: the engine to drive (its tasks are demo tasks ``{"t": ...}``).
        evaluations: how many values each task gets.
    """
    return drive_tasks(engine, evaluations, lambda task, config: demo(config["x"], task["t"]), "y")


def run_mla(problem: ProblemSpace, tasks: list[dict[str, float]], seed: int, s: QualitySettings) -> np.ndarray:
    """One MLA engine over all tasks."""
    from raytuner.engines import MLA

    return drive(MLA(problem, tasks, seed=seed, n_initial=s.n_initial), s.evaluations)


def run_mla_staggered(
    problem: ProblemSpace, tasks: list[dict[str, float]], seed: int, s: QualitySettings
) -> np.ndarray:
    """One MLA engine over all tasks, started staggered (``design="staggered"``)."""
    from raytuner.engines import MLA

    return drive(MLA(problem, tasks, seed=seed, n_initial=s.n_initial, design="staggered"), s.evaluations)


def run_single_task_bo(
    problem: ProblemSpace, tasks: list[dict[str, float]], seed: int, s: QualitySettings
) -> np.ndarray:
    """One single-task MLA engine per task."""
    from raytuner.engines import MLA

    return np.vstack(
        [
            drive(MLA(problem, [task], seed=seed * 1000 + j, n_initial=s.n_initial), s.evaluations)
            for j, task in enumerate(tasks)
        ]
    )


def run_random(problem: ProblemSpace, tasks: list[dict[str, float]], seed: int, s: QualitySettings) -> np.ndarray:
    """Random search over all tasks."""
    return drive(RandomSearch(problem, tasks, seed=seed), s.evaluations)


def run_optuna_tpe(problem: ProblemSpace, tasks: list[dict[str, float]], seed: int, s: QualitySettings) -> np.ndarray:
    """Optuna's TPE sampler, one study per task, ``n_initial`` random startup trials."""
    return _run_optuna("TPESampler", problem, tasks, seed, s)


def run_optuna_gp(problem: ProblemSpace, tasks: list[dict[str, float]], seed: int, s: QualitySettings) -> np.ndarray:
    """Optuna's GP sampler (it needs torch), one study per task, ``n_initial`` random startup trials."""
    return _run_optuna("GPSampler", problem, tasks, seed, s)


def _run_optuna(
    sampler_name: str, problem: ProblemSpace, tasks: list[dict[str, float]], seed: int, s: QualitySettings
) -> np.ndarray:
    x = problem.parameter_space.parameters[0].name
    return optuna_rows(
        problem.parameter_space,
        tasks,
        s.evaluations,
        seed,
        "minimize",
        lambda task, c: demo(c[x], task["t"]),
        sampler=sampler_name,
        n_startup=s.n_initial,
    )


TUNERS: dict[str, TunerRun] = {
    "mla": run_mla,
    "mla_staggered": run_mla_staggered,
    "single_task_bo": run_single_task_bo,
    "optuna_tpe": run_optuna_tpe,
    "optuna_gp": run_optuna_gp,
    "random": run_random,
}


def available_tuners(tuners: Mapping[str, TunerRun] | None = None) -> tuple[dict[str, TunerRun], dict[str, str]]:
    """The tuners this environment can run, and the skipped ones with why (``optuna_gp`` without torch).

    Args:
        tuners: tuner name to runner (default ``None``: :data:`TUNERS`).
    """
    runnable = dict(TUNERS if tuners is None else tuners)
    skipped: dict[str, str] = {}
    if "optuna_gp" in runnable and (why := torch_missing()) is not None:
        skipped["optuna_gp"] = why
        log.warning("skipping the optuna_gp peer: %s; pip install torch", why)
        del runnable["optuna_gp"]
    return runnable, skipped


def run_quality(
    settings: QualitySettings, tuners: Mapping[str, TunerRun] | None = None
) -> tuple[dict[str, np.ndarray], dict[str, list[float]]]:
    """Every tuner on every seed: values (tuner -> (seeds, tasks, evaluations)) and wall seconds per run.

    Args:
        settings: the seeds, tasks and evaluations to run.
        tuners: tuner name to runner (default ``None``: :data:`TUNERS`).
    """
    tuners = TUNERS if tuners is None else tuners
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": t} for t in settings.tasks]
    values: dict[str, list[np.ndarray]] = {name: [] for name in tuners}
    wall: dict[str, list[float]] = {name: [] for name in tuners}
    for seed in settings.seeds:
        for name, tuner in tuners.items():
            t0 = time.perf_counter()
            history = tuner(problem, tasks, seed, settings)
            wall[name].append(time.perf_counter() - t0)
            values[name].append(history)
            log.info(
                "quality seed %d: %s took %.1f s, best per task %s",
                seed,
                name,
                wall[name][-1],
                np.round(history.min(axis=1), 3).tolist(),
            )
    return {name: np.stack(v) for name, v in values.items()}, wall


def normalised_curves(values: Mapping[str, np.ndarray], tasks: Sequence[float]) -> dict[str, list[float]]:
    """Per tuner: median over seeds of the mean over tasks of best-so-far / grid minimum, per evaluation.

    Args:
        values: per tuner, its values shaped (seeds, tasks, evaluations).
        tasks: the task values ``t``, in the order of the tasks axis.
    """
    minima = np.array([demo_grid_minimum(t)[1] for t in tasks])
    return {
        name: np.median(np.mean(best_so_far(v) / minima[None, :, None], axis=1), axis=0).tolist()
        for name, v in values.items()
    }


def quality_results(
    best: Mapping[str, np.ndarray], wall: Mapping[str, Sequence[float]], reference: str = REFERENCE
) -> dict[str, Any]:
    """``results["quality"]`` from each tuner's best value per (seed, task) cell and its wall seconds per run.

    Args:
        best: per tuner, its best value per (seed, task) cell.
        wall: per tuner, its wall seconds per run.
        reference: the tuner the others are compared with (default ``"mla"``).

    The reference's row also gives each win rate's standard error over the
    seeds (``win_rate_se_vs``, :func:`~raytuner.analysis.win_rate_se`): with
    few seeds a win rate moves by whole tenths from one set of seeds to the next.

    >>> q = quality_results({"mla": np.array([[1.0, 1.0], [1.0, 1.0]]), "random": np.array([[2.0, 1.0], [2.0, 2.0]])},
    ...                     {"mla": [3.0], "random": [1.0]})
    >>> [(row["tuner"], row["R_bar"], row["win_rate_vs"], row["win_rate_se_vs"]) for row in q["rows"]]
    [('mla', 1.0, {'random': 0.875}, {'random': 0.125}), ('random', 1.875, {}, {})]
    """
    r_tilde = relative_performance(best)
    rows = []
    for name in best:
        peers = [p for p in best if p != name] if name in (reference, STAGGERED) else []
        rows.append(
            {
                "tuner": name,
                "R_bar": round(r_bar(r_tilde[name]), 4),
                "R_tilde_mean": round(float(np.mean(r_tilde[name])), 4),
                "R_tilde_median": round(float(np.median(r_tilde[name])), 4),
                **peer_win_rates(best, name, peers),
                "wall_seconds_median": round(statistics.median(wall[name]), 3),
            }
        )
    return {
        "rows": rows,
        "reference": reference,
        "best": {name: np.round(v, 6).tolist() for name, v in best.items()},
        "R_tilde": {name: np.round(v, 6).tolist() for name, v in r_tilde.items()},
    }


def goals(
    quality: Mapping[str, Any],
    overhead_rows: Sequence[Mapping[str, Any]],
    reference: str = REFERENCE,
    lcbench: Mapping[str, Any] | None = None,
) -> dict[str, bool | None]:
    """Which goals were met; ``None`` where this run measured nothing to judge by.

    Args:
        quality: the quality results, as :func:`quality_results` returns them.
        overhead_rows: the overhead rows, as :func:`~benchmarks.mla_overhead.overhead_row` returns them.
        reference: the tuner the goals are about (default ``"mla"``).
        lcbench: the LCBench cells, as :func:`~benchmarks.mla_lcbench.run_lcbench_quality` returns them
            (default ``None``: not run).
    """
    by_tuner = {row["tuner"]: row for row in quality["rows"]}
    lowest = min(row["R_bar"] for row in quality["rows"])
    wins = by_tuner.get(reference, {}).get("win_rate_vs", {})
    win, win_gp = wins.get("single_task_bo"), wins.get("optuna_gp")
    staggered = by_tuner.get(STAGGERED, {}).get("win_rate_vs", {}).get("single_task_bo")
    reach = {r["tuner"]: r["ratio_to_baseline"] for r in quality.get("reach", {}).get("rows", [])}.get(STAGGERED)
    lcbench_by_tuner = {row["tuner"]: row for row in (lcbench or {}).get("rows", [])}
    staggered_lcbench = lcbench_by_tuner.get(STAGGERED, {}).get("win_rate_vs", {}).get("single_task_bo")
    reach_lcbench = {r["tuner"]: r["ratio_to_baseline"] for r in (lcbench or {}).get("reach", {}).get("rows", [])}.get(
        STAGGERED
    )
    wins_lcbench = lcbench_by_tuner.get(reference, {}).get("win_rate_vs", {})
    win_lcbench, win_gp_lcbench = wins_lcbench.get("single_task_bo"), wins_lcbench.get("optuna_gp")
    return {
        **overhead_goals(overhead_rows),
        **scale_goals(overhead_rows),
        "mla_lowest_R_bar": by_tuner[reference]["R_bar"] <= lowest if reference in by_tuner else None,
        "mla_win_rate_vs_single_task_bo_ge_0.7": None if win is None else win >= GOAL_WIN_RATE,
        "win_rate_ge_0.7_vs_optuna_gp": None if win_gp is None else win_gp >= GOAL_WIN_RATE,
        "mla_win_rate_vs_single_task_bo_ge_0.7_on_lcbench": None
        if win_lcbench is None
        else win_lcbench >= GOAL_WIN_RATE,
        "mla_win_rate_vs_optuna_gp_ge_0.7_on_lcbench": None
        if win_gp_lcbench is None
        else win_gp_lcbench >= GOAL_WIN_RATE,
        "mla_staggered_win_rate_vs_single_task_bo_ge_0.6": None
        if staggered is None
        else staggered >= GOAL_STAGGERED_WIN_RATE,
        "mla_staggered_win_rate_vs_single_task_bo_ge_0.6_on_lcbench": None
        if staggered_lcbench is None
        else staggered_lcbench >= GOAL_STAGGERED_WIN_RATE,
        "mla_staggered_evaluations_to_99_le_0.7_of_single_task_bo": None
        if reach is None
        else reach <= GOAL_STAGGERED_REACH_RATIO,
        "mla_staggered_evaluations_to_99_le_0.7_of_single_task_bo_on_lcbench": None
        if reach_lcbench is None
        else reach_lcbench <= GOAL_STAGGERED_REACH_RATIO,
    }


def build_results(
    quality: dict[str, Any],
    overhead_rows: list[dict[str, Any]],
    quick: bool,
    machine: dict[str, Any],
    overhead_extra: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The whole ``results.json``: quality, overhead, goals, quick flag, machine and ``extra`` keys.

    Args:
        quality: the quality results, as :func:`quality_results` returns them.
        overhead_rows: the overhead rows, as :func:`~benchmarks.mla_overhead.overhead_row` returns them.
        quick: whether this was the quick run.
        machine: the machine's facts (:func:`~benchmarks.report.machine_info`).
        overhead_extra: more keys for ``results["overhead"]`` (default ``None``: none).
        **extra: more top-level keys (``quality_lcbench`` is judged by :func:`goals` too).

    >>> q = quality_results({"mla": np.array([1.0]), "single_task_bo": np.array([2.0])}, {"mla": [1.0],
    ...                     "single_task_bo": [1.0]})
    >>> o = [{"tasks": 10, "samples_per_task": 30, "ask_seconds_median": 0.5, "naive_fit_seconds_median": None}]
    >>> r = build_results(q, o, True, {})
    >>> sorted(r), r["goals"]["mla_lowest_R_bar"], r["goals"]["fit_3x_faster_than_naive_at_equal_loglik"]
    (['goals', 'machine', 'overhead', 'quality', 'quick'], True, None)
    """
    return {
        "quality": quality,
        "overhead": {"rows": overhead_rows, **(overhead_extra or {})},
        "goals": goals(quality, overhead_rows, lcbench=extra.get("quality_lcbench")),
        "quick": quick,
        "machine": machine,
        **extra,
    }


def demo_values(tasks: tuple[float, ...], seed: int, evaluations: int, n_initial: int) -> np.ndarray:
    """raytuner's MLA on GPTune-Demo's ``tasks`` (t values): the values it found, one row per task.

    Args:
        tasks: the demo's task parameters.
        seed: the run's seed.
        evaluations: evaluations per task.
        n_initial: of them, the initial design's.
    """
    settings = QualitySettings(seeds=(seed,), tasks=tasks, evaluations=evaluations, n_initial=n_initial)
    return run_mla(ProblemSpace.parse(DEMO_PROBLEM), [{"t": t} for t in tasks], seed, settings)


def gptune_section(out: Path, quick: bool) -> dict[str, Any]:
    """GPTune's own MLA beside ours on GPTune-Demo (:func:`benchmarks.gptune_peer.mla_section` with :func:`demo_values`).

    Args:
        out: the benchmark's folder.
        quick: the quick settings.
    """
    return mla_section(out, quick, demo_values)


def run(out: Path, quick: bool = False, gptune_only: bool = False) -> dict[str, Any]:
    """Run the MLA benchmark; write ``out/results.json``, ``out/report.md`` (and ``out/quality.png``).

    Args:
        out: the folder for the results, the report and the plot (made if missing).
        quick: run the quick settings instead of the full ones (default ``False``).
        gptune_only: run only the comparison with GPTune's own MLA (:mod:`benchmarks.gptune_peer`;
            default ``False``).
    """
    out = Path(out)
    if gptune_only:
        return run_only(out, "mla", quick, gptune_section)
    qs, os_ = (QUICK_QUALITY, QUICK_OVERHEAD) if quick else (FULL_QUALITY, FULL_OVERHEAD)
    log.info(
        "mla benchmark%s: %d seeds x %d tasks x %d evaluations; overhead at (tasks, samples per task) %s",
        " (quick)" if quick else "",
        len(qs.seeds),
        len(qs.tasks),
        qs.evaluations,
        list(os_.sizes),
    )
    started = time.perf_counter()
    machine = machine_at_start()
    tuners, skipped = available_tuners()
    values, wall = run_quality(qs, tuners)
    quality = quality_results({name: v.min(axis=2) for name, v in values.items()}, wall)
    quality.update(
        tasks=list(qs.tasks),
        seeds=list(qs.seeds),
        evaluations_per_task=qs.evaluations,
        n_initial=qs.n_initial,
        curves=normalised_curves(values, qs.tasks),
        skipped=skipped,
        reach=reach_results(values),
    )
    out.mkdir(parents=True, exist_ok=True)
    quality["plot"] = "quality.png" if save_plot(quality["curves"], out / "quality.png") else None
    lcbench = lcbench_cells(QUICK_LCBENCH if quick else FULL_LCBENCH)
    together = run_together(QUICK_TOGETHER if quick else FULL_TOGETHER)
    overhead_rows = run_overhead(os_)
    gptune = gptune_section(out, quick)
    results = build_results(
        quality,
        overhead_rows,
        quick,
        machine,
        overhead_extra={
            "asks": os_.asks,
            "fit_repeats": os_.fit_repeats,
            "naive_restarts": os_.naive_restarts,
            "naive_samples": list(os_.naive_samples),
            "loglik_tolerance": LOGLIK_TOLERANCE,
            "sizes": [list(size) for size in os_.sizes],
            "heldout_per_task": HELDOUT_PER_TASK,
            "heldout_min_records": HELDOUT_MIN_RECORDS,
            "exact_max_records": EXACT_MAX_RECORDS,
        },
        quality_lcbench=lcbench,
        together_vs_alone=together,
        gptune=gptune,
        benchmark="mla",
        elapsed_s=round(time.perf_counter() - started, 1),
    )
    return publish(out, "mla", results, render_report)


def save_plot(curves: Mapping[str, Sequence[float]], path: Path) -> bool:
    """Plot the normalised best-so-far curves to ``path``; ``False`` (with a warning) without matplotlib.

    Args:
        curves: per tuner, its normalised best-so-far per evaluation (:func:`normalised_curves`).
        path: the PNG to write.
    """
    return save_history_plot(
        curves,
        path,
        "evaluations per task",
        "best so far / grid minimum",
        "demo: mean over tasks, median over seeds",
        reference=1.0,
        style={"marker": "o", "markersize": 3},
    )


def _verdict(flag: bool | None) -> str:
    return "not measured" if flag is None else "met" if flag else "**missed**"


def render_report(results: Mapping[str, Any]) -> str:
    """The human summary: quality and overhead tables, the goals and whether each was met.

    Args:
        results: the benchmark's results, as :func:`build_results` returns them.
    """
    q, o, g, m = results["quality"], results["overhead"], results["goals"], results["machine"]
    peers = [r["tuner"] for r in q["rows"] if r["tuner"] != q["reference"]]
    reference: dict[str, Any] = next((r for r in q["rows"] if r["tuner"] == q["reference"]), {})
    quality_table = markdown_table(
        [
            "tuner",
            "R-bar",
            "R-tilde mean",
            "R-tilde median",
            f"{q['reference']} wins vs (± standard error over seeds)",
            "median wall s per run",
        ],
        [
            [
                r["tuner"],
                r["R_bar"],
                r["R_tilde_mean"],
                r["R_tilde_median"],
                win_cell(reference, r["tuner"]),
                r["wall_seconds_median"],
            ]
            for r in q["rows"]
        ],
    )
    lines = [f"# MLA benchmark{' (quick)' if results['quick'] else ''}", ""]
    if results["quick"]:
        lines += [
            f"Quick run: {len(q['seeds'])} seeds, {len(q['tasks'])} tasks, {q['evaluations_per_task']} "
            f"evaluations per task ({q['n_initial']} initial); overhead with {o['asks']} timed asks, GPy "
            f"with {o['naive_restarts']} restarts at {o['naive_samples']} samples per task only. The figures "
            "are indicative; the goals are judged on the full run.",
            "",
        ]
    lines += [
        "## Quality",
        "",
        f"Demo function, tasks t = {', '.join(f'{t:g}' for t in q['tasks'])}, x in [0, 1], minimised; "
        f"{q['evaluations_per_task']} evaluations per task ({q['n_initial']} LHS/startup + the rest "
        f"model-guided), seeds {q['seeds']}. R-tilde = best value / best of all tuners in the same "
        "(seed, task) cell; R-bar = (mean + median) / 2 of R-tilde, 1 is best. Win rate: share of cells "
        f"where {q['reference']} found a strictly lower value (ties count half).",
        "",
        quality_table,
        "",
    ]
    for name, why in q.get("skipped", {}).items():
        lines += [f"Skipped {name}: {why}.", ""]
    if q.get("plot"):
        lines += [f"![best so far]({q['plot']})", ""]
    else:
        lines += ["(No best-so-far plot: matplotlib is not installed.)", ""]
    staggered: dict[str, Any] = next((r for r in q["rows"] if r["tuner"] == STAGGERED), {})
    if staggered:
        lines += [f"{STAGGERED} wins vs single_task_bo: {win_cell(staggered, 'single_task_bo')}.", ""]
    lines += render_reach(q.get("reach"), "Evaluations until every task is near its best (demo)")
    lines += render_lcbench(results.get("quality_lcbench"))
    lines += render_reach(
        (results.get("quality_lcbench") or {}).get("reach"), "Evaluations until every task is near its best (LCBench)"
    )
    lines += render_together(results.get("together_vs_alone"))
    lines += render_section(results.get("gptune"))
    lines += render_overhead(o)
    together_goals = (results.get("together_vs_alone") or {}).get("goals", {})
    lines += [
        "## Goals",
        "",
        f"- Median ask at 10 tasks x 30 samples at most {GOAL_ASK_SECONDS:g} s: "
        f"{_verdict(g['ask_median_le_1s_at_10x30'])}",
        f"- Median warm ask at 10 x 30 at most {GOAL_WARM_ASK_SECONDS:g} s: "
        f"{_verdict(g.get('warm_ask_median_le_0.3s_at_10x30'))}",
        f"- Cold fit at 10 x 30 at most {GOAL_COLD_FIT_SECONDS:g} s: {_verdict(g.get('cold_fit_le_5s_at_10x30'))}",
        *[
            f"- Median ask at {t} x {n} ({t * n:,} records) at most {limit:g} s: "
            f"{_verdict(g.get(f'ask_median_le_{limit:g}s_at_{t}x{n}'))}"
            for (t, n), limit in GOAL_ASK_AT_SCALE.items()
        ],
        f"- Our fit at least {GOAL_SPEEDUP:g}x faster than GPy's at an equal (within {LOGLIK_TOLERANCE} "
        f"nats) or better log-likelihood: {_verdict(g['fit_3x_faster_than_naive_at_equal_loglik'])}",
        f"- {q['reference']} has the lowest R-bar of {', '.join([q['reference'], *peers])}: "
        f"{_verdict(g['mla_lowest_R_bar'])}",
        f"- {q['reference']} wins at least {GOAL_WIN_RATE:.0%} of the cells against single_task_bo: "
        f"{_verdict(g['mla_win_rate_vs_single_task_bo_ge_0.7'])}",
        f"- {q['reference']} wins at least {GOAL_WIN_RATE:.0%} of the cells against optuna_gp: "
        f"{_verdict(g.get('win_rate_ge_0.7_vs_optuna_gp'))}",
        f"- {q['reference']} wins at least {GOAL_WIN_RATE:.0%} of the LCBench cells against single_task_bo: "
        f"{_verdict(g.get('mla_win_rate_vs_single_task_bo_ge_0.7_on_lcbench'))}",
        f"- {q['reference']} wins at least {GOAL_WIN_RATE:.0%} of the LCBench cells against optuna_gp: "
        f"{_verdict(g.get('mla_win_rate_vs_optuna_gp_ge_0.7_on_lcbench'))}",
        *[
            f"- {STAGGERED} wins at least {GOAL_STAGGERED_WIN_RATE:.0%} of the {where}cells against "
            f"single_task_bo: {_verdict(g.get('mla_staggered_win_rate_vs_single_task_bo_ge_0.6' + key))}"
            for where, key in (("", ""), ("LCBench ", "_on_lcbench"))
        ],
        *[
            f"- {STAGGERED}'s evaluations until every {where}task is within 1 % of its best at most "
            f"{GOAL_STAGGERED_REACH_RATIO:g} x single_task_bo's: "
            f"{_verdict(g.get('mla_staggered_evaluations_to_99_le_0.7_of_single_task_bo' + key))}"
            for where, key in (("", ""), ("LCBench ", "_on_lcbench"))
        ],
        f"- Together against alone, every LCBench set and budget: no task's mean best more than 0.5 points under "
        f"single_task_bo's: {_verdict(together_goals.get('mla_worst_margin_ge_-0.5_every_cell'))}; "
        f"{q['reference']} wins at least 60 % of the cells against single_task_bo: "
        f"{_verdict(together_goals.get('mla_win_rate_vs_single_task_bo_ge_0.6_every_cell'))}",
        "",
        f"Machine: {m.get('cpu_model')}, {m.get('cores')} cores, {m.get('os')}, Python {m.get('python')}; "
        f"load average {m.get('load_average_at_start')} at the start. Elapsed {results.get('elapsed_s')} s.",
        "",
    ]
    return "\n".join(lines)
