"""GPTune's own tuner beside raytuner's: GPTune's MLA in ``bench mla``, its GPTuneBand in ``bench band``.

GPTune is not a package of this repository. Its real, unmodified code runs
from a *gptune-tuner* folder (``../shared/tools/gptune-tuner`` beside the
repository: the runners ``gptune_mla.py`` and ``gptune_band.py`` and
``pythonpath.sh``), one subprocess per run, each writing one JSON file. Name
the folder with ``--gptune DIR`` or ``$RAYTUNER_GPTUNE``, and the Python that
runs it (it needs lhsmdu, george, GPy, pymoo, scikit-learn, filelock: see the
folder's README) with ``--gptune-python`` or ``$RAYTUNER_GPTUNE_PYTHON``
(default: this one). Without the folder the peer is skipped with one log
line and the benchmark runs as before. ``--gptune-only`` runs this
comparison alone::

    python -m benchmarks mla --gptune ../shared/tools/gptune-tuner --gptune-only --out bench_out/mla-gptune

Both sides run on GPTune-Demo with the settings of GPTune's own drivers:

- **MLA** (``demo.py``): tasks t = 1, 2 and t = 1, 2, 3, 4, 20 evaluations
  per task of which 10 initial; ours is :class:`~raytuner.engines.MLA` with
  the same budget.
- **GPTuneBand** (``demo_MB.py``): tasks t = 1, 1.5, fidelities 1 to 4 with
  η = 4, 5 loops (GPTune's ``NLOOP``); ours is
  :class:`~raytuner.engines.GPTuneBand` with 5 passes of the same brackets.

Per task: the mean regret (best value found minus the grid minimum of
:func:`~raytuner.test_problems.demo_grid_minimum`), the mean rank of the
(seed, task) cells and the wall seconds per suggestion (a run's wall time
over its evaluations), with the ratios ours/GPTune. Each GPTune run's JSON is
kept under ``OUT/gptune/``; a run whose file is there already is read, not
rerun, so a stopped benchmark resumes (a GPTune run takes minutes).

Example (the folder is absent here: the peer is skipped with one line):

    >>> import os
    >>> os.environ.pop(GPTUNE_ENV, None) and None
    >>> gptune_folder("mla") is None
    True
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import rankdata

from benchmarks import GPTUNE_ENV, GPTUNE_PYTHON_ENV
from benchmarks.report import markdown_table
from raytuner.test_problems import demo_grid_minimum

__all__ = [
    "GOAL_SPEEDUP",
    "RUNNERS",
    "GPTuneRun",
    "MLASettings",
    "BandSettings",
    "FULL_MLA",
    "QUICK_MLA",
    "FULL_BAND",
    "QUICK_BAND",
    "gptune_folder",
    "parse_mla",
    "parse_band",
    "run_gptune",
    "run_only",
    "DemoMLA",
    "compare",
    "mla_section",
    "band_section",
    "render_section",
]

log = logging.getLogger(__name__)

#: Benchmark kind -> the gptune-tuner folder's runner for it.
RUNNERS = {"mla": "gptune_mla.py", "band": "gptune_band.py"}
#: Goal: our wall seconds per suggestion at least this many times lower than GPTune's.
GOAL_SPEEDUP = 20.0
OURS = {"mla": "mla", "band": "GPTuneBand"}
PEER = {"mla": "GPTune MLA", "band": "GPTune GPTuneBand"}


@dataclass(frozen=True)
class MLASettings:
    """Seeds, task sets and evaluations per task of the MLA comparison (``demo.py``: 20, of which 10 initial)."""

    seeds: tuple[int, ...]
    task_sets: tuple[tuple[float, ...], ...]
    evaluations: int
    n_initial: int


@dataclass(frozen=True)
class BandSettings:
    """Seeds, tasks and loops of the GPTuneBand comparison (``demo_MB.py``: b_min 1, b_max 4, η 4)."""

    seeds: tuple[int, ...]
    tasks: int
    loops: int
    b_min: float = 1.0
    b_max: float = 4.0
    eta: int = 4


FULL_MLA = MLASettings(
    seeds=tuple(range(5)), task_sets=((1.0, 2.0), (1.0, 2.0, 3.0, 4.0)), evaluations=20, n_initial=10
)
QUICK_MLA = MLASettings(seeds=(0,), task_sets=((1.0, 2.0),), evaluations=10, n_initial=5)
FULL_BAND = BandSettings(seeds=tuple(range(5)), tasks=2, loops=5)
QUICK_BAND = BandSettings(seeds=(0,), tasks=2, loops=1)


@dataclass(frozen=True)
class GPTuneRun:
    """One GPTune run as its runner's JSON gives it: per task its best value, and the run's cost.

    Attributes:
        tasks: the task values ``t``.
        best: per task, the best value at full fidelity.
        wall_s: the wall seconds of GPTune's tuning call (``MLA`` or ``MB_LCM``), imports excluded.
        evaluations: the evaluations the run made, all tasks and fidelities together.
        cost_per_task: the evaluations per task, counted at ``b_max`` (one at fidelity ``b`` costs ``b / b_max``).
        cpu_s: the CPU seconds of GPTune's tuning call (NaN where the runner gave none).
    """

    tasks: tuple[float, ...]
    best: tuple[float, ...]
    wall_s: float
    evaluations: int
    cost_per_task: float
    cpu_s: float = math.nan

    @property
    def seconds_per_suggestion(self) -> float:
        """Wall seconds per evaluation of the run."""
        return self.wall_s / self.evaluations

    @property
    def cpu_seconds_per_suggestion(self) -> float:
        """CPU seconds per evaluation of the run (other work on the machine does not inflate it)."""
        return self.cpu_s / self.evaluations


def gptune_folder(kind: str) -> Path | None:
    """The gptune-tuner folder named by ``$RAYTUNER_GPTUNE``, or ``None`` (one log line says why).

    Args:
        kind: ``"mla"`` or ``"band"``: the folder must hold that runner (:data:`RUNNERS`) and ``pythonpath.sh``.
    """
    named = os.environ.get(GPTUNE_ENV)
    if not named:
        log.info("GPTune's %s peer skipped: no gptune-tuner folder (--gptune DIR or $%s)", kind, GPTUNE_ENV)
        return None
    folder = Path(named).expanduser()
    missing = [name for name in (RUNNERS[kind], "pythonpath.sh") if not (folder / name).is_file()]
    if missing:
        log.warning("GPTune's %s peer skipped: %s has no %s", kind, folder, " or ".join(missing))
        return None
    return folder.resolve()


def _tasks_match(found: Sequence[float], tasks: Sequence[float]) -> bool:
    return len(found) == len(tasks) and bool(np.allclose(found, tasks))


def parse_mla(data: Mapping[str, Any], tasks: Sequence[float], evaluations: int, seed: int) -> GPTuneRun:
    """A ``gptune_mla.py`` result; ``ValueError`` where it is not the run asked for.

    Args:
        data: the runner's JSON.
        tasks: the task values ``t`` asked for.
        evaluations: the evaluations per task asked for (GPTune's ``NS``).
        seed: the seed asked for.

    >>> run = parse_mla({"seed": 0, "NS": 2, "wall_MLA_s": 8.0, "per_task": [{"t": 1.0, "y": [3.0, 2.0]},
    ...                  {"t": 2.0, "y": [1.0, 4.0]}]}, [1.0, 2.0], 2, 0)
    >>> run.best, run.seconds_per_suggestion
    ((2.0, 1.0), 2.0)
    """
    per_task = data["per_task"]
    found = [float(task["t"]) for task in per_task]
    if data["seed"] != seed or data["NS"] != evaluations or not _tasks_match(found, tasks):
        raise ValueError(f"a run of tasks {found}, NS {data['NS']}, seed {data['seed']}")
    return GPTuneRun(
        tasks=tuple(found),
        best=tuple(float(min(task["y"])) for task in per_task),
        wall_s=float(data["wall_MLA_s"]),
        evaluations=sum(len(task["y"]) for task in per_task),
        cost_per_task=float(np.mean([len(task["y"]) for task in per_task])),
        cpu_s=float(data.get("cpu_MLA_s", math.nan)),
    )


def parse_band(data: Mapping[str, Any], tasks: Sequence[float], loops: int, seed: int, b_max: float) -> GPTuneRun:
    """A ``gptune_band.py`` result; ``ValueError`` where it is not the run asked for.

    Args:
        data: the runner's JSON.
        tasks: the task values ``t`` asked for.
        loops: the loops asked for (GPTune's ``NLOOP``).
        seed: the seed asked for.
        b_max: the highest fidelity (the calls' third entry is the fidelity).

    >>> run = parse_band({"seed": 1, "nloop": 5, "wall_s": 6.0, "calls": [[1.0, 0.5, 1.0]] * 3,
    ...                   "per_task": [{"t": 1.0, "y_bmax": [2.0, 1.5]}]}, [1.0], 5, 1, 4.0)
    >>> run.best, run.evaluations, run.cost_per_task
    ((1.5,), 3, 0.75)
    """
    per_task = data["per_task"]
    found = [float(task["t"]) for task in per_task]
    if data["seed"] != seed or data["nloop"] != loops or not _tasks_match(found, tasks):
        raise ValueError(f"a run of tasks {found}, NLOOP {data['nloop']}, seed {data['seed']}")
    return GPTuneRun(
        tasks=tuple(found),
        best=tuple(float(min(task["y_bmax"])) for task in per_task),
        wall_s=float(data["wall_s"]),
        evaluations=len(data["calls"]),
        cost_per_task=sum(call[2] for call in data["calls"]) / b_max / len(found),
        cpu_s=float(data.get("cpu_s", math.nan)),
    )


def run_gptune(folder: Path, kind: str, args: Sequence[str], path: Path) -> dict[str, Any]:
    """Run the folder's runner for ``kind`` with ``args``, writing ``path``; its JSON (read back if already there).

    The runner's output goes to ``path`` with the suffix ``.log``. A failed
    run raises ``RuntimeError`` naming that log.

    Args:
        folder: the gptune-tuner folder (:func:`gptune_folder`).
        kind: ``"mla"`` or ``"band"``.
        args: the runner's arguments, ``--out`` left out.
        path: the JSON file the run writes.
    """
    if path.is_file():
        log.info("GPTune %s run read from %s", kind, path)
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    path.parent.mkdir(parents=True, exist_ok=True)
    pythonpath = subprocess.run(
        ["sh", str(folder / "pythonpath.sh"), *(["band"] if kind == "band" else [])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    python = os.environ.get(GPTUNE_PYTHON_ENV) or sys.executable
    partial = path.with_suffix(".partial")
    command = [python, str(folder / RUNNERS[kind]), *args, "--out", str(partial.resolve())]
    log.info("GPTune %s run: %s", kind, " ".join(command))
    with path.with_suffix(".log").open("w") as output:
        done = subprocess.run(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": pythonpath},
            cwd=folder,
        )
    if done.returncode != 0 or not partial.is_file():
        raise RuntimeError(
            f"GPTune's {kind} run failed (exit status {done.returncode}): see {path.with_suffix('.log')}"
        )
    partial.replace(path)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


def compare(
    regret: Mapping[str, np.ndarray],
    seconds_per_suggestion: Mapping[str, Sequence[float]],
    tasks: Sequence[float],
    ours: str,
    peer: str,
) -> dict[str, Any]:
    """Per task each tuner's mean regret and mean rank, its seconds per suggestion, and the ratios ours/peer.

    Args:
        regret: per tuner, its regret per (seed, task) cell, shape (seeds, tasks).
        seconds_per_suggestion: per tuner, its wall seconds per suggestion of each run (one per seed).
        tasks: the task values ``t``, in the order of the tasks axis.
        ours: raytuner's tuner.
        peer: GPTune's.

    >>> c = compare({"a": np.array([[0.1, 0.2], [0.3, 0.2]]), "b": np.array([[0.2, 0.2], [0.4, 0.1]])},
    ...             {"a": [0.01, 0.03], "b": [1.0, 2.0]}, [1.0, 2.0], "a", "b")
    >>> [(r["t"], r["tuner"], r["mean_regret"], r["mean_rank"]) for r in c["rows"]][:2]
    [(1.0, 'a', 0.2, 1.0), (1.0, 'b', 0.3, 2.0)]
    >>> c["ratios"][1], c["goals"]
    ({'t': 2.0, 'regret': 1.3333, 'seconds_per_suggestion': 0.0133}, {'regret_le_peer_every_task': False, 'seconds_per_suggestion_20x_lower': True})
    """
    names = [ours, peer]
    cells = np.stack([np.asarray(regret[name], dtype=float) for name in names])  # (tuners, seeds, tasks)
    ranks = rankdata(cells, axis=0)  # rank 1 = lowest regret, ties share the mean rank
    seconds = {name: float(np.median(seconds_per_suggestion[name])) for name in names}
    rows, ratios = [], []
    for j, t in enumerate(tasks):
        mean = {name: float(np.mean(cells[i, :, j])) for i, name in enumerate(names)}
        for i, name in enumerate(names):
            rows.append(
                {
                    "t": float(t),
                    "tuner": name,
                    "mean_regret": round(mean[name], 4),
                    "mean_rank": round(float(np.mean(ranks[i, :, j])), 4),
                    "seconds_per_suggestion": round(seconds[name], 4),
                    "seeds": int(cells.shape[1]),
                }
            )
        ratios.append(
            {
                "t": float(t),
                "regret": round(mean[ours] / mean[peer], 4) if mean[peer] > 0 else None,
                "seconds_per_suggestion": round(seconds[ours] / seconds[peer], 4),
            }
        )
    worse = [j for j in range(len(tasks)) if np.mean(cells[0, :, j]) > np.mean(cells[1, :, j])]
    return {
        "rows": rows,
        "ratios": ratios,
        "goals": {
            "regret_le_peer_every_task": not worse,
            f"seconds_per_suggestion_{GOAL_SPEEDUP:g}x_lower": seconds[peer] >= GOAL_SPEEDUP * seconds[ours],
        },
    }


def _regret(best: np.ndarray, tasks: Sequence[float]) -> np.ndarray:
    """Best values (seeds, tasks) minus each task's grid minimum."""
    minima = np.array([demo_grid_minimum(t)[1] for t in tasks])
    return np.maximum(np.asarray(best, dtype=float) - minima[None, :], 0.0)


def _skipped(kind: str, why: str) -> dict[str, Any]:
    return {"skipped": why, "ours": OURS[kind], "peer": PEER[kind]}


#: One seed's GPTune run: (the runner's arguments, its JSON file's name, how to read that JSON).
GPTuneCall = tuple[list[str], str, Callable[[Mapping[str, Any]], GPTuneRun]]
#: One seed's run of ours: (the best value per task, the evaluations made, the cost per task at b_max).
OursRun = tuple[Sequence[float], int, float]


def _side_by_side(
    kind: str,
    folder: Path,
    out: Path,
    tasks: Sequence[float],
    seeds: Sequence[int],
    gptune: Callable[[int], GPTuneCall],
    ours: Callable[[int], OursRun],
) -> dict[str, Any]:
    """Every seed's GPTune run and ours on ``tasks``: the task set's :func:`compare` and the cost figures."""
    names = (OURS[kind], PEER[kind])
    best: dict[str, list[Sequence[float]]] = {name: [] for name in names}
    seconds: dict[str, list[float]] = {name: [] for name in names}
    cost: dict[str, list[float]] = {name: [] for name in names}
    cpu: list[float] = []
    for seed in seeds:
        args, name, parse = gptune(seed)
        run = parse(run_gptune(folder, kind, args, out / "gptune" / name))
        started = time.perf_counter()
        found, evaluations, spent = ours(seed)
        wall = time.perf_counter() - started
        for tuner, values, per_suggestion, per_task in (
            (names[0], found, wall / evaluations, spent),
            (names[1], run.best, run.seconds_per_suggestion, run.cost_per_task),
        ):
            best[tuner].append(values)
            seconds[tuner].append(per_suggestion)
            cost[tuner].append(per_task)
        cpu.append(run.cpu_seconds_per_suggestion)
        log.info(
            "GPTune comparison (%s), tasks %s seed %d: ours %.2f s, GPTune %.1f s; best %s against %s",
            kind,
            list(tasks),
            seed,
            wall,
            run.wall_s,
            np.round(found, 3).tolist(),
            np.round(run.best, 3).tolist(),
        )
    regret = {tuner: _regret(np.array(b), tasks) for tuner, b in best.items()}
    return {
        "tasks": list(tasks),
        **compare(regret, seconds, tasks, *names),
        "peer_cpu_seconds_per_suggestion": round(float(np.median(cpu)), 4),
        "cost_per_task_mean": {tuner: round(float(np.mean(c)), 3) for tuner, c in cost.items()},
    }


def _section(
    kind: str, settings: Mapping[str, Any], run_sets: Callable[[Path], list[dict[str, Any]]]
) -> dict[str, Any]:
    """``results["gptune"]``: the task sets ``run_sets`` gives for the gptune-tuner folder, or why it skipped."""
    folder = gptune_folder(kind)
    if folder is None:
        return _skipped(kind, f"no gptune-tuner folder (--gptune DIR or ${GPTUNE_ENV})")
    try:
        sets = run_sets(folder)
    except (RuntimeError, ValueError, KeyError, OSError) as err:
        log.warning("GPTune's %s peer skipped: %s", kind, err)
        return _skipped(kind, str(err))
    return {
        "ours": OURS[kind],
        "peer": PEER[kind],
        **settings,
        "folder": str(folder),
        "sets": sets,
        "goals": _all_goals(sets),
    }


#: raytuner's MLA on GPTune-Demo: ``(tasks, seed, evaluations per task, initial ones)`` to the values it found,
#: one row per task (``bench mla`` gives its own runner, so this module never imports that benchmark).
DemoMLA = Callable[[tuple[float, ...], int, int, int], np.ndarray]


def mla_section(out: Path, quick: bool, run_ours: DemoMLA) -> dict[str, Any]:
    """raytuner's MLA against GPTune's on GPTune-Demo, per task set (``results["gptune"]`` of ``bench mla``).

    ``{"skipped": why}`` without the gptune-tuner folder or when a GPTune run fails.

    Args:
        out: the benchmark's folder (GPTune's runs go under ``out/gptune``).
        quick: use :data:`QUICK_MLA` instead of :data:`FULL_MLA`.
        run_ours: runs raytuner's MLA on the demo's tasks (see :data:`DemoMLA`).
    """
    s = QUICK_MLA if quick else FULL_MLA

    def one_set(folder: Path, tasks: tuple[float, ...]) -> dict[str, Any]:
        def gptune(seed: int) -> GPTuneCall:
            args = ["--tasks", *(f"{t:g}" for t in tasks), "--nrun", str(s.evaluations)]
            args += ["--ns1", str(s.n_initial), "--seed", str(seed)]
            name = f"mla_t{'-'.join(f'{t:g}' for t in tasks)}_n{s.evaluations}_seed{seed}.json"
            return args, name, lambda data: parse_mla(data, tasks, s.evaluations, seed)

        def ours(seed: int) -> OursRun:
            values = run_ours(tasks, seed, s.evaluations, s.n_initial)
            return values.min(axis=1).tolist(), values.size, float(s.evaluations)

        return _side_by_side("mla", folder, out, tasks, s.seeds, gptune, ours)

    settings = {
        "problem": "GPTune-Demo (demo.py)",
        "seeds": list(s.seeds),
        "evaluations_per_task": s.evaluations,
        "n_initial": s.n_initial,
    }
    return _section("mla", settings, lambda folder: [one_set(folder, tasks) for tasks in s.task_sets])


def band_section(out: Path, quick: bool) -> dict[str, Any]:
    """raytuner's GPTuneBand against GPTune's on GPTune-Demo with fidelity (``results["gptune"]`` of ``bench band``).

    ``{"skipped": why}`` without the gptune-tuner folder or when a GPTune run fails.

    Args:
        out: the benchmark's folder (GPTune's runs go under ``out/gptune``).
        quick: use :data:`QUICK_BAND` instead of :data:`FULL_BAND`.
    """
    from benchmarks.band_peers import run_demo_gptuneband
    from raytuner.engines import BanditStructure

    s = QUICK_BAND if quick else FULL_BAND
    tasks = tuple(float(t) for t in np.arange(1, s.tasks / 2 + 1, 0.5))  # demo_MB.py's tasks
    structure = BanditStructure.hyperband(s.b_min, s.b_max, s.eta)

    def gptune(seed: int) -> GPTuneCall:
        args = ["--ntask", str(s.tasks), "--nloop", str(s.loops), "--seed", str(seed), "--provide-NS"]
        name = f"band_tasks{s.tasks}_loops{s.loops}_seed{seed}.json"
        return args, name, lambda data: parse_band(data, tasks, s.loops, seed, s.b_max)

    def ours(seed: int) -> OursRun:
        traces = run_demo_gptuneband(tasks, structure, seed, passes=s.loops)
        spent = sum(sum(trace.costs) for trace in traces) / len(tasks)
        return [trace.final for trace in traces], sum(len(trace.costs) for trace in traces), spent

    settings = {
        "problem": "GPTune-Demo with fidelity (demo_MB.py)",
        "seeds": list(s.seeds),
        "loops": s.loops,
        "structure": [s.b_min, s.b_max, s.eta],
    }
    return _section("band", settings, lambda folder: [_side_by_side("band", folder, out, tasks, s.seeds, gptune, ours)])


def _all_goals(sets: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    return {key: all(s["goals"][key] for s in sets) for key in sets[0]["goals"]}


def render_section(section: Mapping[str, Any] | None) -> list[str]:
    """The report's lines for ``results["gptune"]`` (none where it is absent; one where it was skipped).

    Args:
        section: what :func:`mla_section` or :func:`band_section` returned, or ``None``.

    >>> render_section({"skipped": "no gptune-tuner folder", "peer": "GPTune MLA"})
    ["Skipped GPTune's own tuner (GPTune MLA): no gptune-tuner folder.", '']
    """
    if not section:
        return []
    if "skipped" in section:
        return [f"Skipped GPTune's own tuner ({section['peer']}): {section['skipped']}.", ""]
    ours, peer = section["ours"], section["peer"]
    budget = (
        f"{section['evaluations_per_task']} evaluations per task ({section['n_initial']} initial)"
        if "evaluations_per_task" in section
        else f"{section['loops']} loops of the brackets {section['structure']}"
    )
    lines = [
        f"## GPTune's own tuner: {ours} against {peer}",
        "",
        f"{section['problem']}, {budget}, seeds {section['seeds']}; GPTune's real code from {section['folder']}. "
        "Regret: best value found minus the task's grid minimum, mean over the seeds; rank 1 is the lower regret "
        "in a (seed, task) cell; seconds per suggestion: a run's wall time over its evaluations (median over seeds).",
        "",
    ]
    for s in section["sets"]:
        by = {(r["t"], r["tuner"]): r for r in s["rows"]}
        rows = []
        for ratio in s["ratios"]:
            mine, theirs = by[(ratio["t"], ours)], by[(ratio["t"], peer)]
            rows.append(
                [
                    f"{ratio['t']:g}",
                    mine["mean_regret"],
                    theirs["mean_regret"],
                    ratio["regret"],
                    mine["mean_rank"],
                    theirs["mean_rank"],
                    mine["seconds_per_suggestion"],
                    theirs["seconds_per_suggestion"],
                    ratio["seconds_per_suggestion"],
                ]
            )
        header = ["t", f"{ours} regret", f"{peer} regret", "regret ratio", f"{ours} rank", f"{peer} rank"]
        header += [f"{ours} s/suggestion", f"{peer} s/suggestion", "time ratio"]
        lines += [f"Tasks {s['tasks']}:", "", markdown_table(header, rows), ""]
        lines += [
            f"{peer}'s CPU seconds per suggestion (its own process time, which other work on the machine does not "
            f"inflate): {s['peer_cpu_seconds_per_suggestion']}. Mean cost per task, in evaluations at b_max: "
            f"{s['cost_per_task_mean']}.",
            "",
        ]
    g = section["goals"]
    lines += [
        f"- {ours}'s mean regret at most {peer}'s on every task: {'met' if g['regret_le_peer_every_task'] else 'missed'}",
        f"- {ours}'s seconds per suggestion at least {GOAL_SPEEDUP:g}x lower: "
        f"{'met' if g[f'seconds_per_suggestion_{GOAL_SPEEDUP:g}x_lower'] else 'missed'}",
        "",
    ]
    return lines


def run_only(out: Path, benchmark: str, quick: bool, section: Callable[[Path, bool], dict[str, Any]]) -> dict[str, Any]:
    """``python -m benchmarks mla|band --gptune-only``: this comparison alone, in ``out/results.json`` and its report.

    Args:
        out: the output folder (made if missing).
        benchmark: ``"mla"`` or ``"band"``.
        quick: the quick settings (one seed; MLA 10 evaluations per task, GPTuneBand one loop).
        section: the benchmark's section, given ``out`` and ``quick`` (:func:`band_section`, or
            :func:`mla_section` with ``bench mla``'s runner).
    """
    from benchmarks.report import machine_at_start, publish

    started = time.perf_counter()
    machine = machine_at_start()
    out = Path(out)
    results_section = section(out, quick)
    command = f"python -m benchmarks {benchmark} --gptune {os.environ.get(GPTUNE_ENV, 'DIR')} --gptune-only"
    results = {
        "benchmark": benchmark,
        "gptune": results_section,
        "quick": quick,
        "machine": machine,
        "command": f"{command} --out {out}{' --quick' if quick else ''}",
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    return publish(out, benchmark, results, _render_only)


def _render_only(results: Mapping[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"# {results['benchmark']} benchmark: GPTune's own tuner only{' (quick)' if results['quick'] else ''}",
        "",
        f"Command: `{results['command']}`. Elapsed {results['elapsed_s']} s.",
        "",
        *render_section(results["gptune"]),
        f"Machine: {m.get('cpu_model')}, {m.get('cores')} cores, Python {m.get('python')}; "
        f"load average {m.get('load_average_at_start')} at the start.",
        "",
    ]
    return "\n".join(lines)
