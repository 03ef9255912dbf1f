"""Plots of a tuning history, each returning a matplotlib ``Figure`` (no pyplot, no global state).

- :func:`plot_history`: best-so-far per task against evaluations or normalised cost;
- :func:`plot_parameter`: one tuning parameter against the objective (coloured by fidelity);
- :func:`plot_task_correlation`: the task correlation of the newest stored LCM;
- :func:`plot_sobol`: Sobol indices (S1 and ST with their intervals);
- :func:`plot_brackets`: GPTuneBand's brackets of one task: each evaluation at its fidelity, promotions as lines;
- :func:`plot_front`: with several objectives, each task's Pareto front over its evaluations (the first two).

Save one with ``figure.savefig("history.png")``; the dashboard renders the
same figures as SVG.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument
    >>> from raytuner.view import load_history
    >>> doc = HistoryDocument(tuning_problem_name="demo", func_eval=[
    ...     FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": (x - 0.3) ** 2}) for x in (0.1, 0.5, 0.3)])
    >>> figure = plot_history(load_history(doc))
    >>> figure.axes[0].get_ylabel()
    'best y (minimize)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from raytuner.errors import InvalidInputError
from raytuner.problem.records import SurrogateModelRecord
from raytuner.view.figures import beyond, feasible_limits
from raytuner.view.history import HistoryView, task_label

if TYPE_CHECKING:  # the models and the analysis are imported when a chart needs them, not with the package
    from raytuner.analysis.sensitivity import SensitivityResult

__all__ = [
    "plot_history",
    "plot_parameter",
    "plot_task_correlation",
    "task_correlation",
    "plot_sobol",
    "plot_brackets",
    "plot_front",
    "PLOTS",
]

#: The plots a view can draw by name (``raytuner history plot --kind``, the dashboard).
PLOTS = ("history", "parameter", "correlation", "brackets", "front")


def _figure(width: float = 6.4, height: float = 4.0) -> tuple[Figure, Any]:
    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots()


def _tasks(view: HistoryView, task: Mapping[str, Any] | str | None) -> list[str]:
    labels = [task_label(t) for t in view.tasks]
    if task is None:
        return labels
    wanted = task if isinstance(task, str) else task_label(task)
    if wanted not in labels:
        raise InvalidInputError("task", f"{wanted!r} is no task of {view.problem}", allowed=labels)
    return [wanted]


def _steps(curve: pd.DataFrame) -> pd.DataFrame:
    """The rows of a best-so-far ``curve`` where its best changes, and its last: the same steps, drawn from
    as many points as the best changed (not one per evaluation of a large history).

    >>> _steps(pd.DataFrame({"best": [None, None, 3.0, 3.0, 2.0, 2.0]}))["best"].tolist()
    [nan, 3.0, 2.0, 2.0]
    """
    best = curve["best"]
    before = best.shift()
    same = best.eq(before) | (best.isna() & before.isna())
    same.iloc[:1] = False
    same.iloc[-1:] = False
    return curve[~same.to_numpy()]


def plot_history(
    view: HistoryView, by: Literal["evaluations", "cost"] = "evaluations", task: Mapping[str, Any] | str | None = None
) -> Figure:
    """Best-so-far per task (at full fidelity) against evaluations or normalised cost.

    Args:
        view: the history.
        by: the x axis: ``evaluations`` (per task) or ``cost`` (normalised cost spent by the task).
        task: only this task (its parameters or its label; default: every task).
    """
    if by not in ("evaluations", "cost"):
        raise InvalidInputError("by", f"{by!r} is not an axis", allowed=["evaluations", "cost"])
    curves = view.best_so_far()
    figure, ax = _figure()
    x_column = "evaluation" if by == "evaluations" else "cost"
    for label in _tasks(view, task):
        mine = _steps(curves[curves["task"] == label])
        (line,) = ax.step(mine[x_column], mine["best"], where="post", label=label)
        ax.plot(mine[x_column].iloc[-1:], mine["best"].iloc[-1:], "o", color=line.get_color(), markersize=4)
    ax.set_xlabel("evaluations of the task" if by == "evaluations" else "normalised cost spent by the task")
    ax.set_ylabel(f"best {view.objective} ({view.goal})")
    ax.set_title(f"{view.problem}: best so far" + (" against cost" if by == "cost" else ""))
    shown = _tasks(view, task)
    if len(shown) > 1:
        ax.legend(fontsize="small", ncols=2 if len(shown) > 8 else 1)
    return figure


def plot_parameter(view: HistoryView, parameter: str, task: Mapping[str, Any] | str | None = None) -> Figure:
    """One tuning parameter against the objective: every successful evaluation.

    With one task, the points are coloured by fidelity (when the history has
    fidelities); with several, by task, with a legend.

    Args:
        view: the history.
        parameter: the tuning parameter's name (its column of ``view.frame``).
        task: only this task (its parameters or its label; default: every task).
    """
    frame, names = view.frame, view.columns["parameter"]
    if parameter not in names:
        raise InvalidInputError(
            "parameter", f"{parameter!r} is no tuning parameter of {view.problem}", allowed=list(names)
        )
    shown = _tasks(view, task)
    rows = frame[frame["task"].isin(shown) & (frame["status"] == "ok")]
    figure, ax = _figure()
    fidelity = pd.to_numeric(rows["fidelity"], errors="coerce")
    values = rows[names[parameter]]
    x = values if pd.api.types.is_numeric_dtype(values) else values.astype(str)
    if len(shown) > 1:  # one colour per task
        for label in shown:
            mine = rows["task"] == label
            ax.scatter(x[mine], rows[view.objective_column][mine], s=14, label=label)
        ax.legend(fontsize="small", ncols=2 if len(shown) > 8 else 1)
    elif fidelity.notna().any():
        points = ax.scatter(x, rows[view.objective_column], c=fidelity, cmap="viridis", s=14)
        figure.colorbar(points, ax=ax, label="fidelity")
    else:
        ax.scatter(x, rows[view.objective_column], s=14)
    ax.set_xlabel(parameter)
    ax.set_ylabel(view.objective)
    ax.set_title(f"{view.problem}: {parameter} against {view.objective}")
    return figure


def task_correlation(model: SurrogateModelRecord) -> tuple[list[str], np.ndarray]:
    """The task labels and the task correlation matrix of a stored LCM (its coregionalisation, summed).

    Args:
        model: a surrogate-model record written by raytuner (its hyperparameters by name).
    """
    details = model.raytuner or {}
    if "hyperparameters" not in details:
        raise InvalidInputError("model", f"surrogate model {model.uid} holds no raytuner LCM hyperparameters")
    from raytuner.models.hyperparameters import Hyperparameters

    covariance = Hyperparameters.from_dict(details["hyperparameters"]).coregionalization().sum(axis=0)
    scale = np.sqrt(np.clip(np.diag(covariance), 1e-300, None))
    names: list[Any] = [s.get("name") for s in model.input_space] if model.input_space else []
    labels = [task_label(dict(zip(names, values))) for values in model.task_parameters]
    if len(labels) != len(covariance):
        labels = [f"task {i}" for i in range(len(covariance))]
    return labels, covariance / np.outer(scale, scale)


def plot_task_correlation(view: HistoryView, model: SurrogateModelRecord | None = None) -> Figure:
    """The LCM's task correlation as a heat map; its title names the output the model is of.

    Args:
        view: the history.
        model: the model to draw (default: the newest stored raytuner LCM of the view's objective,
            else the newest of any output).
    """
    if model is None:
        fitted = [m for m in view.models if (m.raytuner or {}).get("hyperparameters")]
        if not fitted:
            raise InvalidInputError("model", f"{view.problem} has no stored LCM to draw")
        mine = [m for m in fitted if _modelled(m) == view.objective]
        model = (mine or fitted)[-1]
    labels, correlation = task_correlation(model)
    size = max(5.0, 0.45 * len(labels) + 3.5)
    figure, ax = _figure(size, size * 0.85)
    image = ax.imshow(correlation, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize="small")
    ax.set_yticks(range(len(labels)), labels, fontsize="small")
    if len(labels) <= 12:
        for (i, j), value in np.ndenumerate(correlation):
            ink = "white" if abs(value) > 0.6 else "black"  # readable on RdBu's dark ends and its pale middle
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize="x-small", color=ink)
    figure.colorbar(image, ax=ax, label="correlation")
    output = _modelled(model)
    ax.set_title(
        f"{view.problem}\ntask correlation of the LCM" + (f" of {output}" if output else ""), fontsize="medium"
    )
    return figure


def _modelled(model: SurrogateModelRecord) -> str | None:
    """The output a stored model is of (``None`` when the record does not say)."""
    name = (model.objective or {}).get("name") or (model.raytuner or {}).get("objective")
    return str(name) if name else None


def plot_sobol(result: SensitivityResult, title: str = "Sobol sensitivity") -> Figure:
    """First-order (S1) and total (ST) Sobol indices per parameter, with their confidence intervals.

    Args:
        result: a Sobol analysis (:func:`~raytuner.analysis.sobol_analysis`).
        title: the plot's title.
    """
    names = list(result.parameters)
    figure, ax = _figure(max(4.0, 0.9 * len(names) + 2.0), 3.6)
    at = np.arange(len(names))

    def bars(indices: Mapping[str, float], conf: Mapping[str, float], offset: float, label: str) -> None:
        values = [indices.get(n) or 0.0 for n in names]
        errors = [0.0 if not math.isfinite(conf.get(n) or 0.0) else conf.get(n) or 0.0 for n in names]
        ax.bar(at + offset, values, width=0.38, yerr=errors, capsize=3, label=label)

    bars(result.S1, result.S1_conf, -0.2, "S1 (first order)")
    bars(result.ST, result.ST_conf, 0.2, "ST (total)")
    ax.set_xticks(at, names)
    ax.set_ylabel("index")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return figure


def plot_brackets(view: HistoryView, task: Mapping[str, Any] | str | None = None) -> Figure:
    """GPTuneBand's brackets for one task: each evaluation at its fidelity, a line per promotion.

    The x axis is the bracket (within a pass, pass by pass); points are
    coloured by the objective, and a line joins each promoted configuration
    to the evaluation it was promoted from.

    Args:
        view: the history of a GPTuneBand run.
        task: the task (its parameters or its label; default: the first task).
    """
    label = _tasks(view, task)[0] if view.tasks else None
    frame = view.frame
    rows = frame[(frame["task"] == label) & frame["bracket"].notna()]
    if rows.empty:
        raise InvalidInputError("task", f"{label!r} has no evaluations in a bracket (not a GPTuneBand run?)")
    brackets = sorted(
        {(int(p if p == p else 0), int(b)) for p, b in zip(rows["pass"], rows["bracket"])},
        key=lambda pb: (pb[0], -pb[1]),
    )  # the order a pass runs its brackets
    column = {key: i for i, key in enumerate(brackets)}
    figure, ax = _figure(max(5.0, 0.8 * len(brackets) + 2.0), 4.2)
    spread = rows.groupby(["pass", "bracket", "fidelity"], dropna=False).cumcount()
    width = rows.groupby(["pass", "bracket", "fidelity"], dropna=False)["uid"].transform("count")
    xs = (
        np.array(
            [column[(int(p if p == p else 0), int(b))] for p, b in zip(rows["pass"], rows["bracket"])], dtype=float
        )
        + 0.7 * (spread.to_numpy() + 0.5) / width.to_numpy()
        - 0.35
    )
    where = dict(zip(rows["uid"], zip(xs, rows["fidelity"])))
    parents = {r.uid: r.raytuner.parent for r in view.records if r.raytuner and r.raytuner.parent}
    for uid, (x, fidelity) in where.items():
        parent = parents.get(uid)
        if parent in where:
            px, pf = where[parent]
            ax.plot([px, x], [pf, fidelity], color="0.75", linewidth=0.8, zorder=1)
    points = ax.scatter(
        xs,
        rows["fidelity"],
        c=rows[view.objective_column],
        cmap="viridis_r" if view.goal == "minimize" else "viridis",
        s=18,
        zorder=2,
    )
    figure.colorbar(points, ax=ax, label=view.objective)
    ax.set_xticks(range(len(brackets)), [f"p{p} s{b}" for p, b in brackets])
    ax.set_yscale("log")
    levels = sorted(set(pd.to_numeric(rows["fidelity"], errors="coerce").dropna()))
    ax.set_yticks(levels, [f"{v:g}" for v in levels])
    ax.minorticks_off()
    ax.set_xlabel("pass and bracket")
    ax.set_ylabel("fidelity")
    ax.set_title(f"{view.problem}, {label}: brackets and promotions")
    return figure


def _frame_feasible(ax: Any, feasible: list[tuple[float, float]], infeasible: list[tuple[float, float]]) -> int:
    """Limit ``ax`` to the feasible points (:func:`feasible_limits`); how many infeasible points fall outside."""
    limits = feasible_limits(feasible)
    if limits is None:
        return 0
    ax.set_xlim(*limits[0])
    ax.set_ylim(*limits[1])
    return beyond(limits, infeasible)


def plot_front(view: HistoryView, task: Mapping[str, Any] | str | None = None) -> Figure:
    """Each task's Pareto front at full fidelity, over its evaluations, in the first two objectives.

    Evaluations that meet the output constraints are dots, those that break
    one crosses; the front is joined by a step line. Values are plotted as
    they are: each axis label says its objective's goal. The axes frame the
    feasible evaluations (infeasible ones far off would squeeze the front
    into a corner; the title counts those left outside), and a bound on
    either objective is drawn as a dashed line.

    Args:
        view: the history of a problem with several objectives (its ``problem_space`` known).
        task: only this task (its parameters or its label; default: every task).
    """
    space = view.problem_space
    if space is None or len(space.optimised) < 2:
        raise InvalidInputError(
            "problem_space",
            f"{view.problem} has no known second objective: no front to draw (give the meta description)",
            allowed=["a problem with several objectives"],
        )
    first, second = space.optimised[:2]
    figure, ax = _figure()
    feasible: list[tuple[float, float]] = []
    infeasible: list[tuple[float, float]] = []
    full = [
        r
        for r in view.records
        if view.is_full_fidelity(r)
        and r.status == "ok"
        and r.value(first.name) is not None
        and r.value(second.name) is not None
    ]
    for label, parameters in zip(
        _tasks(view, task), [t for t in view.tasks if task is None or task_label(t) in _tasks(view, task)]
    ):
        mine = [r for r in full if task_label(r.task_parameter) == label]
        ok = [r for r in mine if space.meets_output_constraints(r.evaluation_result)]
        broken = [r for r in mine if r not in ok]
        front = sorted(view.pareto_front(parameters), key=lambda r: first.sign() * r.known_value(first.name))
        feasible += [(r.known_value(first.name), r.known_value(second.name)) for r in ok]
        infeasible += [(r.known_value(first.name), r.known_value(second.name)) for r in broken]
        dots = ax.scatter([r.value(first.name) for r in ok], [r.value(second.name) for r in ok], s=10, alpha=0.45)
        colour = dots.get_facecolor()[0]
        if broken:
            ax.scatter(
                [r.value(first.name) for r in broken],
                [r.value(second.name) for r in broken],
                s=14,
                marker="x",
                color=colour,
                alpha=0.45,
            )
        ax.step(
            [r.value(first.name) for r in front],
            [r.value(second.name) for r in front],
            where="post",
            color=colour,
            marker="o",
            markersize=4,
            label=f"{label} ({len(front)} on the front)",
        )
    outside = _frame_feasible(ax, feasible, infeasible)
    for output, line in ((first, ax.axvline), (second, ax.axhline)):
        for bound in (output.lower_bound, output.upper_bound):
            if math.isfinite(bound):
                line(bound, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel(f"{first.name} ({first.goal})")
    ax.set_ylabel(f"{second.name} ({second.goal})")
    notes = [
        *(["x: breaks an output constraint"] if space.output_constraints else []),
        *([f"{outside} infeasible beyond the view"] if outside else []),
    ]
    ax.set_title(
        f"{view.problem}: Pareto front per task" + ("\n" + "; ".join(notes) if notes else ""), fontsize="medium"
    )
    ax.legend(fontsize="small")
    return figure
