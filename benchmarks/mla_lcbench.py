"""The MLA benchmark's real-data cells: related LCBench tasks at full fidelity.

The demo function's tasks share little but an envelope (each has needles of
its own), so they say little about what a multitask model is for. Here the
tasks are 8 OpenML datasets of LCBench (:data:`~raytuner.test_problems.lcbench.LCBENCH_TASKS`,
7 hyperparameters, ``val_accuracy`` after 52 epochs, maximised), read from
YAHPO Gym's surrogate. Tuners, 20 evaluations per task (10 initial):
``mla`` (one :class:`~raytuner.engines.MLA` over all tasks, each task its
own initial design), ``mla_shared`` (the same with ``design="shared"``),
``mla_staggered`` (``design="staggered"``), ``mla_always`` (``sharing="always"``: every
suggestion from the shared LCM, as GPTune's MLA), ``single_task_bo`` (one MLA per task), Optuna's ``optuna_tpe`` and
``optuna_gp`` (``GPSampler``; per task, 10 startup trials each) and
``random``. Per (seed, task) cell each tuner's best accuracy is compared;
the results give the mean best accuracy per tuner and, for both MLA
variants, the win rate over each peer with its standard error over the
seeds; ``model_accuracy`` (:mod:`benchmarks.mla_model`) says how well
MLA's model predicts each task against one GP per task.

Example:
    >>> import numpy as np
    >>> best = {"mla": np.array([[90.0, 80.0], [91.0, 82.0]]), "random": np.array([[89.0, 81.0], [90.0, 80.0]])}
    >>> rows = lcbench_rows(best, {"mla": [2.0, 2.0], "random": [1.0, 1.0]})
    >>> [(r["tuner"], r["best_mean"], r["win_rate_vs"]) for r in rows]
    [('mla', 85.75, {'random': 0.75}), ('random', 85.0, {})]
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.ask_tell import drive_tasks
from benchmarks.band_peers import optuna_rows, torch_missing
from benchmarks.data import find
from benchmarks.mla_model import model_accuracy, render_model_accuracy
from benchmarks.report import markdown_table, peer_win_rates, reach_results, win_cell
from raytuner.engines import MLA, Engine, RandomSearch
from raytuner.engines.mla import Design
from raytuner.engines.sharing import Sharing
from raytuner.test_problems.lcbench import LCBENCH_TASKS, LCBenchSurrogate

__all__ = [
    "LCBenchQuality",
    "FULL_LCBENCH",
    "QUICK_LCBENCH",
    "LCBENCH_TUNERS",
    "REFERENCES",
    "drive_lcbench",
    "run_lcbench_quality",
    "lcbench_rows",
    "lcbench_cells",
    "lcbench_peers",
    "render_lcbench",
]

log = logging.getLogger(__name__)

#: The epoch the accuracies are read at (LCBench's full fidelity).
EPOCH = 52
#: The tuners whose win rates the results give.
REFERENCES = ("mla", "mla_shared", "mla_staggered")


@dataclass(frozen=True)
class LCBenchQuality:
    """Seeds, tasks and evaluation budget of the LCBench cells."""

    seeds: tuple[int, ...]
    tasks: tuple[int, ...]
    evaluations: int
    n_initial: int


FULL_LCBENCH = LCBenchQuality(seeds=tuple(range(10)), tasks=LCBENCH_TASKS, evaluations=20, n_initial=10)
QUICK_LCBENCH = LCBenchQuality(seeds=(0, 1), tasks=LCBENCH_TASKS[:4], evaluations=10, n_initial=5)

#: A tuner's run: (surrogate, settings, seed) -> the accuracies it evaluated, shape (tasks, evaluations).
LCBenchRun = Callable[[LCBenchSurrogate, LCBenchQuality, int], np.ndarray]


def drive_lcbench(engine: Engine, surrogate: LCBenchSurrogate, evaluations: int) -> np.ndarray:
    """Ask/tell ``engine`` until each of its tasks has ``evaluations`` accuracies; (tasks, evaluations).

    Args:
        engine: the engine to drive (its tasks are ``{"task_id": ...}``).
        surrogate: the LCBench surrogate.
        evaluations: how many values each task gets.
    """
    return drive_tasks(
        engine,
        evaluations,
        lambda task, config: surrogate.evaluate(task["task_id"], config, EPOCH)["val_accuracy"],
        "val_accuracy",
    )


def _tasks(s: LCBenchQuality) -> list[dict[str, Any]]:
    return [{"task_id": t} for t in s.tasks]


def _mla(design: Design, sharing: Sharing = "checked") -> LCBenchRun:
    def run(surrogate: LCBenchSurrogate, s: LCBenchQuality, seed: int) -> np.ndarray:
        engine = MLA(
            surrogate.problem(s.tasks), _tasks(s), seed=seed, n_initial=s.n_initial, design=design, sharing=sharing
        )
        return drive_lcbench(engine, surrogate, s.evaluations)

    return run


def _single_task_bo(surrogate: LCBenchSurrogate, s: LCBenchQuality, seed: int) -> np.ndarray:
    problem = surrogate.problem(s.tasks)
    return np.vstack(
        [
            drive_lcbench(MLA(problem, [task], seed=seed * 1000 + j, n_initial=s.n_initial), surrogate, s.evaluations)
            for j, task in enumerate(_tasks(s))
        ]
    )


def _optuna(sampler: str) -> LCBenchRun:
    def run(surrogate: LCBenchSurrogate, s: LCBenchQuality, seed: int) -> np.ndarray:
        return optuna_rows(
            surrogate.problem(s.tasks).parameter_space,
            s.tasks,
            s.evaluations,
            seed,
            "maximize",
            lambda t, c: surrogate.evaluate(t, c, EPOCH)["val_accuracy"],
            sampler=sampler,
            n_startup=s.n_initial,
        )

    return run


def _random(surrogate: LCBenchSurrogate, s: LCBenchQuality, seed: int) -> np.ndarray:
    return drive_lcbench(RandomSearch(surrogate.problem(s.tasks), _tasks(s), seed=seed), surrogate, s.evaluations)


LCBENCH_TUNERS: dict[str, LCBenchRun] = {
    "mla": _mla("per_task"),
    "mla_shared": _mla("shared"),
    "mla_staggered": _mla("staggered"),
    "mla_always": _mla("per_task", sharing="always"),
    "single_task_bo": _single_task_bo,
    "optuna_tpe": _optuna("TPESampler"),
    "optuna_gp": _optuna("GPSampler"),
    "random": _random,
}


def lcbench_rows(
    best: Mapping[str, np.ndarray], wall: Mapping[str, Sequence[float]], references: Sequence[str] = REFERENCES
) -> list[dict[str, Any]]:
    """One row per tuner: its mean best accuracy (and the standard deviation over seeds of the per-seed mean),
    wall seconds per run, and for the references their win rates.

    Args:
        best: per tuner, its best accuracy per (seed, task) cell, shaped (seeds, tasks).
        wall: per tuner, its wall seconds per run.
        references: the tuners whose win rates over the others are given (default :data:`REFERENCES`).
    """
    rows = []
    for name, values in best.items():
        peers = [p for p in best if p != name] if name in references else []
        rows.append(
            {
                "tuner": name,
                "best_mean": round(float(np.mean(values)), 4),
                "best_sd": round(float(np.std(np.mean(values, axis=1))), 4),  # over seeds
                **peer_win_rates(best, name, peers, sign=-1.0),  # accuracies: higher wins
                "wall_seconds_median": round(statistics.median(wall[name]), 3),
            }
        )
    return rows


def run_lcbench_quality(
    settings: LCBenchQuality, tuners: Mapping[str, LCBenchRun] | None = None, surrogate: LCBenchSurrogate | None = None
) -> dict[str, Any]:
    """Every tuner on every seed of the LCBench cells; ``results["quality_lcbench"]``.

    Args:
        settings: the seeds, tasks and evaluations.
        tuners: tuner name to runner (default ``None``: :data:`LCBENCH_TUNERS`).
        surrogate: the LCBench surrogate (default ``None``: read from the shared data).
    """
    tuners = LCBENCH_TUNERS if tuners is None else tuners
    surrogate = surrogate or LCBenchSurrogate(find("yahpo_lcbench"))
    best: dict[str, list[np.ndarray]] = {name: [] for name in tuners}
    runs: dict[str, list[np.ndarray]] = {name: [] for name in tuners}
    wall: dict[str, list[float]] = {name: [] for name in tuners}
    for seed in settings.seeds:
        for name, tuner in tuners.items():
            t0 = time.perf_counter()
            values = tuner(surrogate, settings, seed)
            wall[name].append(time.perf_counter() - t0)
            best[name].append(values.max(axis=1))
            runs[name].append(values)
            log.info(
                "lcbench seed %d: %s took %.1f s, best per task %s",
                seed,
                name,
                wall[name][-1],
                np.round(best[name][-1], 2).tolist(),
            )
    stacked = {name: np.stack(v) for name, v in best.items()}
    return {
        "rows": lcbench_rows(stacked, wall),
        "references": [r for r in REFERENCES if r in tuners],
        "tasks": list(settings.tasks),
        "seeds": list(settings.seeds),
        "epoch": EPOCH,
        "evaluations_per_task": settings.evaluations,
        "n_initial": settings.n_initial,
        "best": {name: np.round(v, 4).tolist() for name, v in stacked.items()},
        "reach": reach_results({name: np.stack(v) for name, v in runs.items()}, sign=-1.0),
    }


def lcbench_peers() -> tuple[LCBenchSurrogate | None, dict[str, LCBenchRun], dict[str, str]]:
    """The LCBench surrogate (``None`` without its data or onnxruntime), the tuners this environment runs and
    why each other one is skipped (``"lcbench"``: nothing runs; without Optuna its peers, without torch ``optuna_gp``).
    """
    try:
        surrogate = LCBenchSurrogate(find("yahpo_lcbench"))
    except (OSError, ImportError) as exc:
        log.warning("skipping the LCBench cells: %s", exc)
        return None, {}, {"lcbench": f"{type(exc).__name__}: {exc}"}
    tuners, skipped = dict(LCBENCH_TUNERS), dict[str, str]()
    try:
        import optuna  # noqa: F401  (the Optuna peers)
    except ImportError as exc:
        skipped.update(dict.fromkeys(("optuna_tpe", "optuna_gp"), f"Optuna cannot be imported ({exc})"))
    if "optuna_gp" not in skipped and (why := torch_missing()) is not None:
        skipped["optuna_gp"] = why
    for name, why in skipped.items():
        log.warning("skipping the %s peer on LCBench: %s", name, why)
        del tuners[name]
    return surrogate, tuners, skipped


def lcbench_cells(settings: LCBenchQuality) -> dict[str, Any]:
    """:func:`run_lcbench_quality` with every tuner this environment runs; ``skipped`` names the others and why.

    Without the LCBench data or onnxruntime nothing runs (``skipped`` names
    ``lcbench``); without Optuna the Optuna peers are left out, without torch ``optuna_gp``.

    Args:
        settings: the seeds, tasks and evaluations.
    """
    surrogate, tuners, skipped = lcbench_peers()
    if surrogate is None:
        return {"skipped": skipped}
    accuracy = model_accuracy(surrogate, settings.tasks, settings.seeds, settings.n_initial, EPOCH)
    return {**run_lcbench_quality(settings, tuners, surrogate), "model_accuracy": accuracy, "skipped": skipped}


def render_lcbench(lcbench: Mapping[str, Any] | None) -> list[str]:
    """The report's LCBench section (nothing for results written before it existed).

    Args:
        lcbench: ``results["quality_lcbench"]``, or ``None``.
    """
    if not lcbench:
        return []
    skipped = [f"Skipped {name}: {why}." for name, why in lcbench.get("skipped", {}).items()]
    if "rows" not in lcbench:
        return ["## Quality on LCBench", "", *skipped, ""]
    references = lcbench["references"]
    by_tuner = {row["tuner"]: row for row in lcbench["rows"]}

    table = markdown_table(
        ["tuner", "mean best val_accuracy", "sd", *[f"{r} wins vs" for r in references], "median wall s per run"],
        [
            [
                row["tuner"],
                row["best_mean"],
                row["best_sd"],
                *[win_cell(by_tuner[r], row["tuner"]) for r in references],
                row["wall_seconds_median"],
            ]
            for row in lcbench["rows"]
        ],
    )
    return [
        "## Quality on LCBench",
        "",
        f"LCBench tasks {', '.join(map(str, lcbench['tasks']))}, val_accuracy at epoch {lcbench['epoch']}, "
        f"maximised; {lcbench['evaluations_per_task']} evaluations per task ({lcbench['n_initial']} initial), "
        f"seeds {lcbench['seeds']}. `mla` gives each task its own initial design, `mla_shared` one design "
        "for all, `mla_staggered` starts a wave of leading tasks first. Win rate: share of (seed, task) cells with a strictly higher best accuracy (ties count "
        "half), ± its standard error over the seeds.",
        "",
        table,
        "",
        *render_model_accuracy(lcbench.get("model_accuracy")),
        *skipped,
        *([""] if skipped else []),
    ]
