"""Small helpers the benchmarks share: result files, memory, timing, machine figures and history plots.

Example:
    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    >>> markdown_table(["a", "b"], [[1, "x"]]).splitlines()[2]
    '| 1 | x |'
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from raytuner.analysis.metrics import evaluations_to_reach, win_rate, win_rate_se
from raytuner.problem.environment import cpu_model

__all__ = [
    "write_results",
    "publish",
    "finish_run",
    "machine_at_start",
    "goal_lines",
    "verdict",
    "rss_mb",
    "peak_rss_mb",
    "percentile",
    "markdown_table",
    "machine_info",
    "filesystem_of",
    "save_history_plot",
    "peer_win_rates",
    "margins_vs",
    "noise_floor",
    "win_cell",
    "reach_results",
    "render_reach",
]

log = logging.getLogger(__name__)


def write_results(out: Path, results: dict[str, Any], report_md: str) -> None:
    """Write ``out/results.json`` (indent 2) and ``out/report.md``, creating ``out`` if needed.

    Args:
        out: the folder (made if missing).
        results: the results, JSON data.
        report_md: the report's Markdown text.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.json", "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=2, allow_nan=False)
        fh.write("\n")
    (out / "report.md").write_text(report_md if report_md.endswith("\n") else report_md + "\n", encoding="utf-8")


def publish(
    out: Path, benchmark: str, results: dict[str, Any], render: Callable[[dict[str, Any]], str]
) -> dict[str, Any]:
    """Render ``results``, write ``out/results.json`` and ``out/report.md``, log the report; returns ``results``.

    Args:
        out: the output folder (created if needed).
        benchmark: the benchmark's name; the report is logged on ``benchmarks.<benchmark>``.
        results: the results, JSON data.
        render: makes the Markdown report from ``results``.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     done = publish(Path(folder), "demo", {"best": 1.0}, lambda r: f"best {r['best']}")
        ...     (Path(folder) / "report.md").read_text()
        'best 1.0\\n'
    """
    report = render(results)
    write_results(out, results, report)
    logging.getLogger(f"benchmarks.{benchmark}").info(
        "%s benchmark results (%s):\n%s", benchmark, Path(out) / "results.json", report
    )
    return results


def finish_run(
    out: Path,
    benchmark: str,
    results: dict[str, Any],
    render: Callable[[dict[str, Any]], str],
    *,
    quick: bool,
    started: float,
) -> dict[str, Any]:
    """Every benchmark's epilogue: add what ran and how long it took to ``results``, then :func:`publish` them.

    Adds ``quick``, ``benchmark``, ``command`` (the command line that reruns
    it) and ``elapsed_s`` (since ``started``, a :func:`time.perf_counter`).

    Args:
        out: the output folder.
        benchmark: the benchmark's name (``python -m benchmarks NAME``).
        results: the benchmark's figures; updated in place.
        render: makes the Markdown report from the results.
        quick: whether this was the quick run.
        started: :func:`time.perf_counter` at the start of the run.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     results = finish_run(Path(folder), "demo", {"best": 1.0}, str, quick=True, started=time.perf_counter())
        >>> results["command"].split(" --out ")[0], results["quick"], results["elapsed_s"] >= 0
        ('python -m benchmarks demo', True, True)
    """
    results.update(
        {
            "quick": quick,
            "benchmark": benchmark,
            "command": f"python -m benchmarks {benchmark} --out {out}{' --quick' if quick else ''}",
            "elapsed_s": round(time.perf_counter() - started, 1),
        }
    )
    return publish(out, benchmark, results, render)


def machine_at_start(data_dir: Path | None = None) -> dict[str, Any]:
    """:func:`machine_info` and the load average now (other work on the machine skews timings).

    Args:
        data_dir: where the benchmark's data lives (its file system is named), or ``None``.

    Example:
        >>> sorted(machine_at_start())
        ['cores', 'cpu_model', 'load_average_at_start', 'os', 'python']
    """
    machine = machine_info(data_dir)
    machine["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    return machine


def verdict(goal: Mapping[str, Any], not_met: str = "not met") -> str:
    """``"met"`` when ``goal["met"]``, else ``not_met``.

    Args:
        goal: one goal of a benchmark's results, with a ``met`` flag.
        not_met: the word for a goal not met.

    Example:
        >>> verdict({"met": True}), verdict({"met": False}, "NOT met")
        ('met', 'NOT met')
    """
    return "met" if goal["met"] else not_met


def goal_lines(
    goals: Mapping[str, Mapping[str, Any]], describe: Mapping[str, Callable[[Mapping[str, Any]], str]]
) -> list[str]:
    """A Markdown bullet per goal that ran, in ``describe``'s order: ``- <describe[name](goal)>``.

    Args:
        goals: the results' goals by name (a goal whose cells did not run is absent).
        describe: goal name -> the sentence for that goal.

    Example:
        >>> describe = {"fit": str, "speed": lambda g: f"x = {g['x']}: {verdict(g)}"}
        >>> goal_lines({"speed": {"met": False, "x": 2}}, describe)
        ['- x = 2: not met']
    """
    return [f"- {text(goals[name])}" for name, text in describe.items() if name in goals]


def rss_mb() -> float | None:
    """This process's resident set size in MiB, from ``/proc/self/statm``; ``None`` without ``/proc``.

    >>> (rss_mb() or 1.0) > 0
    True
    """
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            resident_pages = int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """The highest resident set size this process has had, in MiB (``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated.

    Args:
        values: the values (not empty).
        q: the percentile, 0 to 100.
    """
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table.

    Args:
        header: the column titles.
        rows: the rows, one value per column.
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def filesystem_of(path: Path) -> str:
    """``"<type> on <device>"`` of the mount holding ``path``, from ``/proc/mounts`` where there is one.

    Args:
        path: a file or folder.
    """
    target = os.path.realpath(path)
    best = ("", "unknown", "unknown")
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                device, mount, fstype = parts[0], parts[1], parts[2]
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best[0]):
                    best = (mount, fstype, device)
    except OSError:
        return "unknown"
    return f"{best[1]} on {best[2]} (mounted at {best[0] or '?'})"


def machine_info(data_dir: Path | None = None) -> dict[str, Any]:
    """CPU model, core count, OS and Python; with ``data_dir``, the file system it lives on.

    Args:
        data_dir: the benchmark's data folder (default ``None``: no file system reported).
    """
    info: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
    if data_dir is not None:
        info["data_filesystem"] = filesystem_of(data_dir)
    return info


def save_history_plot(
    curves: Mapping[str, Sequence[float | None]],
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str,
    *,
    x: Sequence[float] | None = None,
    reference: float | None = None,
    style: Mapping[str, Any] | None = None,
    legend_fontsize: float | None = None,
) -> bool:
    """Plot tuning histories, one line per tuner, to the PNG ``path``; ``False`` (with a warning) without matplotlib.

    ``curves`` maps a tuner to its values (``None``: no value yet, left as a
    gap), drawn against ``x`` (default ``1, 2, ...``: evaluations). ``reference``
    draws a dashed horizontal line (say 1.0 for a normalised optimum), ``style``
    goes to every ``ax.plot`` (markers, line widths), ``legend_fontsize`` sets
    the legend's font size (matplotlib's default when ``None``).

    Args:
        curves: tuner to its values (``None``: a gap).
        path: the PNG to write.
        xlabel: the x axis's label.
        ylabel: the y axis's label.
        title: the plot's title.
        x: the x of each value (default ``None``: ``1, 2, ...``).
        reference: the y of a dashed horizontal line (default ``None``: none).
        style: keyword arguments for every ``ax.plot`` (default ``None``: none).
        legend_fontsize: the legend's font size (default ``None``: matplotlib's).

    Example:
        >>> import tempfile
        >>> curves = {"mla": [1.3, 1.1, 1.0], "random": [1.4, None, 1.2]}
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     png = Path(folder) / "history.png"
        ...     done = save_history_plot(curves, png, "evaluations per task", "best / minimum", "demo",
        ...                              reference=1.0, style={"marker": "o"})
        ...     done == png.is_file()            # done is False, and no file, without matplotlib
        True
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        log.warning("no plot %s: matplotlib is missing (%s); pip install 'raytuner[bench]'", path, exc)
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        xs = range(1, len(curve) + 1) if x is None else x
        ax.plot(xs, [math.nan if v is None else v for v in curve], label=name, **(style or {}))
    if reference is not None:
        ax.axhline(reference, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(**({} if legend_fontsize is None else {"fontsize": legend_fontsize}))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def peer_win_rates(best: Mapping[str, Any], name: str, peers: Sequence[str], sign: float = 1.0) -> dict[str, Any]:
    """A results row's ``win_rate_vs`` and ``win_rate_se_vs``: ``name``'s win rate over each peer and its standard error.

    Args:
        best: per tuner, its best value per (seed, cell), shaped (seeds, cells).
        name: the tuner whose win rates these are.
        peers: the tuners it is compared with.
        sign: 1 where lower values win, -1 where higher ones do.

    >>> import numpy as np
    >>> peer_win_rates({"a": np.array([[1.0], [3.0]]), "b": np.array([[2.0], [2.0]])}, "a", ["b"], sign=-1.0)
    {'win_rate_vs': {'b': 0.5}, 'win_rate_se_vs': {'b': 0.5}}
    """
    errors = {p: win_rate_se(sign * best[name], sign * best[p]) for p in peers}
    return {
        "win_rate_vs": {p: round(win_rate(sign * best[name], sign * best[p]), 4) for p in peers},
        "win_rate_se_vs": {p: None if e is None else round(e, 4) for p, e in errors.items()},
    }


def margins_vs(
    best: Mapping[str, Any], tasks: Sequence[Any], reference: str = "single_task_bo", sign: float = -1.0
) -> dict[str, Any]:
    """Per tuner, its mean best per task minus ``reference``'s (in the direction that wins), and the worst task.

    A tuner that shares what it learns across tasks must not leave any one
    task worse than tuning it alone: the worst margin says by how much it
    does at most. A mean over a few seeds is noisy, so each margin comes with
    its standard error (of the difference of the two means) and ``worst_upper``
    is the least of ``margin + 2 * standard error`` over the tasks: a task
    whose upper bound is under a threshold is worse than alone beyond the
    seeds' noise (see :func:`noise_floor` for the worst margin a tuner shows
    against itself).

    Args:
        best: per tuner, its best value per (seed, task) cell, shaped (seeds, tasks).
        tasks: the tasks, in column order.
        reference: the tuner the others are measured against (default ``"single_task_bo"``).
        sign: -1 where higher values win (accuracies), 1 where lower ones do.

    >>> import numpy as np
    >>> m = margins_vs({"a": np.array([[90.0, 80.0]]), "single_task_bo": np.array([[89.0, 81.0]])}, [7, 9])
    >>> m["a"]["per_task"], m["a"]["worst"], m["a"]["worst_task"]
    ([1.0, -1.0], -1.0, 9)
    >>> m = margins_vs({"a": np.array([[90.0], [92.0]]), "single_task_bo": np.array([[91.0], [93.0]])}, [7])
    >>> m["a"]["worst"], m["a"]["standard_error"], m["a"]["worst_upper"]
    (-1.0, [1.4142], 1.8284)
    """
    alone_values = np.asarray(best[reference], dtype=float)
    alone = alone_values.mean(axis=0)
    result: dict[str, Any] = {}
    for name, values in best.items():
        if name == reference:
            continue
        values = np.asarray(values, dtype=float)
        margin = -sign * (values.mean(axis=0) - alone)
        error = np.sqrt(_mean_variance(values) + _mean_variance(alone_values))
        upper = margin + 2.0 * error
        worst, worst_upper = int(np.argmin(margin)), int(np.argmin(upper))
        result[name] = {
            "per_task": [round(float(m), 4) for m in margin],
            "worst": round(float(margin[worst]), 4),
            "worst_task": tasks[worst],
            "standard_error": [round(float(e), 4) for e in error],
            "worst_upper": round(float(upper[worst_upper]), 4),
            "worst_upper_task": tasks[worst_upper],
        }
    return result


def _mean_variance(values: np.ndarray) -> np.ndarray:
    """Per column, the variance of its mean over the rows (0 with a single row)."""
    if values.shape[0] < 2:
        return np.zeros(values.shape[1])
    return np.asarray(values.var(axis=0, ddof=1) / values.shape[0])


def noise_floor(values: Any, sign: float = -1.0, splits: int = 200, seed: int = 0) -> float | None:
    """The median worst-task margin of a tuner against itself: its seeds split in two halves at random.

    What :func:`margins_vs`'s ``worst`` reads for two tuners that are the same,
    at half the seeds: a worst margin near this is the seeds' noise, not
    negative transfer. ``None`` with fewer than 4 seeds.

    Args:
        values: the tuner's best value per (seed, task), shaped (seeds, tasks).
        sign: -1 where higher values win, 1 where lower ones do.
        splits: how many random halvings to take the median over.
        seed: the halvings' seed.

    >>> import numpy as np
    >>> noise_floor(np.array([[1.0, 5.0], [1.0, 5.0], [1.0, 5.0], [1.0, 5.0]]))
    0.0
    >>> noise_floor(np.array([[1.0], [2.0], [3.0]])) is None
    True
    """
    values = np.asarray(values, dtype=float)
    n = values.shape[0]
    if n < 4:
        return None
    rng = np.random.default_rng(seed)
    worst = []
    for _ in range(splits):
        order = rng.permutation(n)
        first, second = values[order[: n // 2]], values[order[n // 2 : 2 * (n // 2)]]
        worst.append(float(np.min(-sign * (first.mean(axis=0) - second.mean(axis=0)))))
    return round(float(np.median(worst)), 4)


def win_cell(row: Mapping[str, Any], peer: str) -> str:
    """A report cell: ``row``'s win rate over ``peer`` and its standard error (``"-"`` where none).

    Args:
        row: a results row with ``win_rate_vs`` and ``win_rate_se_vs`` (:func:`peer_win_rates`).
        peer: the peer's name.

    >>> win_cell({"win_rate_vs": {"b": 0.75}, "win_rate_se_vs": {"b": 0.125}}, "b"), win_cell({}, "b")
    ('0.75 ± 0.12', '-')
    """
    rate, error = row.get("win_rate_vs", {}).get(peer), row.get("win_rate_se_vs", {}).get(peer)
    return ("-" if rate is None else str(rate)) + ("" if error is None else f" ± {error:.2f}")


def reach_results(
    values: Mapping[str, np.ndarray], sign: float = 1.0, baseline: str = "single_task_bo", share: float = 0.99
) -> dict[str, Any]:
    """How many evaluations each tuner spent until every task came within ``share`` of its best known value.

    Per run, each task counts its evaluations up to the first within
    ``share`` of the best any tuner found on it in any seed (a task that
    never gets there counts its budget plus one,
    :func:`~raytuner.analysis.evaluations_to_reach`); the run's total sums
    its tasks. Each row gives the median total over the seeds and its ratio
    to ``baseline``'s.

    Args:
        values: per tuner, the values it evaluated, shaped (seeds, tasks, evaluations) in evaluation order.
        sign: 1 where lower values win (positive values), -1 where higher ones do (an accuracy).
        baseline: the tuner the ratios are to.
        share: how close to the best known value counts as reached.

    >>> r = reach_results({"a": np.array([[[3.0, 1.0]]]), "b": np.array([[[1.0, 2.0]]])}, baseline="b")
    >>> [(row["tuner"], row["total_median"], row["ratio_to_baseline"]) for row in r["rows"]]
    [('a', 2.0, 2.0), ('b', 1.0, 1.0)]
    """
    minimised = {name: np.asarray(v, dtype=float) ** (1.0 if sign > 0 else -1.0) for name, v in values.items()}
    best = np.nanmin(np.stack([np.nanmin(v, axis=(0, 2)) for v in minimised.values()]), axis=0)
    totals = {name: [float(evaluations_to_reach(run, best, share).sum()) for run in v] for name, v in minimised.items()}
    base = statistics.median(totals[baseline]) if baseline in totals else None
    return {
        "share": share,
        "baseline": baseline,
        "best_known": [round(float(b ** (1.0 if sign > 0 else -1.0)), 6) for b in best],
        "rows": [
            {
                "tuner": name,
                "total_median": statistics.median(t),
                "total_mean": round(statistics.fmean(t), 2),
                "per_seed": t,
                "ratio_to_baseline": None if not base else round(statistics.median(t) / base, 4),
            }
            for name, t in totals.items()
        ],
    }


def render_reach(reach: Mapping[str, Any] | None, title: str) -> list[str]:
    """A report's section on :func:`reach_results` (nothing where it was not measured).

    Args:
        reach: what :func:`reach_results` returned, or ``None``.
        title: the section's title.
    """
    if not reach:
        return []
    table = markdown_table(
        ["tuner", "median total evaluations", "mean", f"ratio to {reach['baseline']}"],
        [[r["tuner"], r["total_median"], r["total_mean"], r["ratio_to_baseline"]] for r in reach["rows"]],
    )
    return [
        f"## {title}",
        "",
        f"Evaluations, summed over the tasks, until each task reached {reach['share']:.0%} of the best value "
        "any tuner found on it (best / value for a minimised objective, value / best for an accuracy; a task "
        "that never did counts its budget plus one); median over the seeds.",
        "",
        table,
        "",
    ]
