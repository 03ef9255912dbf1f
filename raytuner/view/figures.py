"""Interactive charts of a tuning history, as plotly.js figures (plain dicts, ready for ``Plotly.newPlot``).

Each function takes a :class:`~raytuner.view.history.HistoryView` and returns
``{"data": [...], "layout": {...}}``; the dashboard's analysis page draws them
with the plotly.js that ships inside the ``plotly`` package (hover, zoom, a
legend that shows and hides each task or group). Every point carries its
evaluation's uid as ``customdata``, so a page can link a click to that
evaluation.

- :func:`history_figure`: each task's evaluations and best so far, against evaluations or normalised cost;
- :func:`edf_figure`: the empirical distribution of the objective, per task;
- :func:`parallel_figure`: one task's evaluations across its parameters and the objective, grouped by rank;
- :func:`slice_figures`: the objective against each parameter;
- :func:`rank_figure`: two parameters, each evaluation coloured by its rank;
- :func:`contour_figure`: a surrogate's prediction over two parameters, the evaluations on top;
- :func:`timeline_figure`: when each evaluation finished, per task, failures apart;
- :func:`fidelity_figure`: with fidelities, one task's evaluations at each fidelity, promotions joined;
- :func:`front_figure` and :func:`hypervolume_figure`: with several objectives, a task's Pareto front
  and each task's hypervolume as evaluations arrive.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument
    >>> from raytuner.view import load_history
    >>> doc = HistoryDocument(tuning_problem_name="demo", func_eval=[
    ...     FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": 2 * x}) for x in (0.25, 0.5, 0.125)])
    >>> (trace,) = edf_figure(load_history(doc))["data"]
    >>> trace["x"], trace["y"]
    ([0.25, 0.5, 1.0], [0.3333333333333333, 0.6666666666666666, 1.0])
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from raytuner.errors import InvalidInputError
from raytuner.problem.parameters import Categorical
from raytuner.problem.pareto import feasible, hypervolume, non_dominated, objective_values
from raytuner.view.history import HistoryView, record_time, task_label

if TYPE_CHECKING:
    from raytuner.analysis.surrogate import SurrogateModel
    from raytuner.problem.records import FunctionEvaluation

__all__ = [
    "MAX_POINTS",
    "EDF_STEPS",
    "PARALLEL_LINES",
    "PlotlyFigure",
    "evaluations_at",
    "fidelities",
    "numeric_parameters",
    "categories",
    "parallel_evaluations",
    "history_figure",
    "edf_figure",
    "parallel_figure",
    "slice_figures",
    "rank_figure",
    "contour_figure",
    "timeline_figure",
    "duration",
    "fidelity_figure",
    "front_figure",
    "feasible_limits",
    "beyond",
    "hypervolume_figure",
]

#: A plotly.js figure: ``{"data": [trace, ...], "layout": {...}}``.
PlotlyFigure = dict[str, Any]

#: The most evaluations a chart draws as points (the newest), so a page of a large store stays small.
MAX_POINTS = 2000

#: The most steps the distribution draws per task (evenly spaced in rank: the curve's shape, not every sample).
EDF_STEPS = 200

#: The most evaluations parallel coordinates draw (the newest): more lines only cover each other.
PARALLEL_LINES = 1000

#: What :func:`escape_text` replaces, by character references that plotly.js decodes.
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;", "%": "&#37;"})

#: The parallel-coordinates chart's rank groups, best first (dark red to grey).
RANK_GROUPS = (
    ("best 20%", "#b2182b"),
    ("20–40%", "#ef8a62"),
    ("40–60%", "#67a9cf"),
    ("60–80%", "#2166ac"),
    ("worst 20%", "#9e9e9e"),
)

#: One colour per task, in task order (matplotlib's tab10, as the static plots).
TASK_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def _layout(title: str, x: str, y: str, **more: Any) -> dict[str, Any]:
    """A chart's layout: its title and axis titles are plain text (escaped here), ``more`` is used as it is."""
    return {
        "title": {
            "text": escape_text(title),
            "font": {"size": 15},
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": 32},
        },
        "xaxis": {"title": {"text": escape_text(x)}, "automargin": True},
        "yaxis": {"title": {"text": escape_text(y)}, "automargin": True},
        "margin": {"l": 60, "r": 20, "t": 70, "b": 50},
        "hovermode": "closest",
        "legend": {"title": {"text": "task"}},
        **more,
    }


def _objective_title(view: HistoryView) -> str:
    return f"{view.objective} ({view.goal})"


def _numbers(values: pd.Series) -> list[float | None]:
    """JSON-safe numbers (NaN as ``None``, which plotly.js leaves out)."""
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]


def _hover(frame: pd.DataFrame, columns: list[str], objective: str) -> list[str]:
    """Each row's hover text: its uid, the named columns and the objective."""
    parts = [("evaluation " + frame["uid"].astype(str).str[:8]).tolist()]
    parts += [[f"{escape_text(c)} = {_text(v)}" for v in frame[c]] for c in columns]
    parts.append([f"<b>{escape_text(objective)} = {_text(v)}</b>" for v in frame[objective]])
    return ["<br>".join(row) for row in zip(*parts)] if len(frame) else []


def _plain(value: Any) -> str:
    """A value as a chart shows it (reals to 6 digits), not yet escaped."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _text(value: Any) -> str:
    """A value as a chart's label shows it, escaped (:func:`escape_text`)."""
    return escape_text(_plain(value))


def _task_colour(view: HistoryView, label: str) -> str:
    labels = [task_label(t) for t in view.tasks]
    return TASK_COLOURS[labels.index(label) % len(TASK_COLOURS)] if label in labels else TASK_COLOURS[0]


def _check_task(view: HistoryView, task: str) -> None:
    labels = [task_label(t) for t in view.tasks]
    if task not in labels:
        raise InvalidInputError("task", f"{task[:80]!r} is no task of {view.problem}", allowed=labels)


def fidelities(view: HistoryView) -> list[float]:
    """The fidelities the history's evaluations ran at, lowest first (empty: none has one).

    Args:
        view: the history.
    """
    return sorted({float(f) for f in view.frame["fidelity"].dropna().unique()})


def evaluations_at(
    view: HistoryView, task: str | None = None, fidelity: float | None = None, limit: int = MAX_POINTS
) -> pd.DataFrame:
    """The successful evaluations with an objective value, of ``task`` (default: every task) at ``fidelity``.

    Rows of :attr:`HistoryView.frame`, oldest first, at most ``limit`` (the newest).

    Args:
        view: the history.
        task: a task label (:func:`~raytuner.view.history.task_label`), or ``None`` for every task.
        fidelity: one of the history's fidelities (default: full fidelity, or every evaluation where none
            has a fidelity).
        limit: the most rows (the newest).
    """
    frame = view.frame
    keep = (frame["status"] == "ok") & frame[view.objective_column].notna()
    if task is not None:
        _check_task(view, task)
        keep &= frame["task"] == task
    levels = fidelities(view)
    if levels:
        wanted = levels[-1] if fidelity is None else fidelity
        if not any(math.isclose(wanted, f) for f in levels):
            raise InvalidInputError("fidelity", f"{wanted!r} is no fidelity of {view.problem}", allowed=levels)
        keep &= np.isclose(pd.to_numeric(frame["fidelity"], errors="coerce").fillna(-math.inf), wanted)
    return frame[keep].tail(limit)


def numeric_parameters(view: HistoryView) -> list[str]:
    """The tuning parameters whose every recorded value is a number (the axes a contour can span).

    Args:
        view: the history.
    """
    out = []
    for name, column in view.columns["parameter"].items():
        values = view.frame[column].dropna()
        if pd.api.types.is_bool_dtype(values.dtype):
            continue
        if pd.api.types.is_numeric_dtype(values.dtype):  # a column of numbers only: no value to look at
            numeric = len(values) > 0
        else:
            numeric = len(values) > 0 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.unique()
            )
        if numeric:
            out.append(name)
    return out


def history_figure(view: HistoryView, limit: int = MAX_POINTS) -> PlotlyFigure:
    """Every task's evaluations (points) and best so far (a step line), with buttons for evaluations or cost.

    Points are the objective of the newest ``limit`` evaluations at full fidelity; the line is the
    running best at full fidelity, as :meth:`HistoryView.best_so_far` gives it, drawn where it changes.

    Args:
        view: the history.
        limit: the most evaluations drawn as points (the newest).
    """
    runs = view.best_so_far()
    runs["uid"] = view.frame["uid"].to_numpy()
    shown = runs.index[runs["value"].notna()][-limit:]
    traces: list[dict[str, Any]] = []
    by_cost: list[list[float | None]] = []
    by_count: list[list[float | None]] = []
    for label in dict.fromkeys(task_label(t) for t in view.tasks):
        mine = runs[runs["task"] == label]
        colour = _task_colour(view, label)
        points = mine.loc[mine.index.intersection(shown)]
        changed = mine["best"].ne(mine["best"].shift()) & mine["best"].notna()
        changed.iloc[-1:] = mine["best"].notna().iloc[-1:]  # the line reaches the task's last evaluation
        steps = mine[changed]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": escape_text(label),
                "legendgroup": label,
                "showlegend": False,
                "x": _numbers(points["evaluation"]),
                "y": _numbers(points["value"]),
                "customdata": list(points["uid"]),
                "text": [f"{escape_text(label)}<br>evaluation {str(u)[:8]}" for u in points["uid"]],
                "hovertemplate": "%{text}<br>" + escape_text(view.objective) + " = %{y:.6g}<extra></extra>",
                "marker": {"color": colour, "size": 6, "opacity": 0.55},
            }
        )
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": escape_text(label),
                "legendgroup": label,
                "x": _numbers(steps["evaluation"]),
                "y": _numbers(steps["best"]),
                "customdata": list(steps["uid"]),
                "line": {"color": colour, "shape": "hv", "width": 2},
                "hovertemplate": escape_text(label) + "<br>best so far = %{y:.6g}<extra></extra>",
            }
        )
        by_count += [traces[-2]["x"], traces[-1]["x"]]
        by_cost += [_numbers(points["cost"]), _numbers(steps["cost"])]
    buttons = [
        {
            "label": "against evaluations",
            "method": "update",
            "args": [{"x": by_count}, {"xaxis.title.text": "evaluations of the task"}],
        },
        {
            "label": "against cost",
            "method": "update",
            "args": [{"x": by_cost}, {"xaxis.title.text": "normalised cost spent by the task"}],
        },
    ]
    layout = _layout(
        f"{view.objective}: each evaluation and the best so far, at full fidelity",
        "evaluations of the task",
        _objective_title(view),
        updatemenus=[
            {"type": "buttons", "direction": "right", "x": 0, "y": 1.12, "xanchor": "left", "buttons": buttons}
        ],
    )
    layout["margin"]["t"] = 100
    return {"data": traces, "layout": layout}


def edf_figure(view: HistoryView, fidelity: float | None = None, limit: int = EDF_STEPS) -> PlotlyFigure:
    """Per task, the share of its evaluations (at ``fidelity``) whose objective is at most each value.

    Args:
        view: the history.
        fidelity: one of the history's fidelities (default: full fidelity).
        limit: the most steps drawn per task (evenly spaced in rank).
    """
    frame = evaluations_at(view, fidelity=fidelity, limit=len(view.frame))
    traces = []
    for label in dict.fromkeys(task_label(t) for t in view.tasks):
        values = np.sort(frame.loc[frame["task"] == label, view.objective_column].to_numpy(dtype=float))
        if not len(values):
            continue
        ranks = np.unique(np.linspace(0, len(values) - 1, min(limit, len(values))).round().astype(int))
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": escape_text(label),
                "x": [float(v) for v in values[ranks]],
                "y": [float(r + 1) / len(values) for r in ranks],
                "line": {"color": _task_colour(view, label), "shape": "hv"},
                "hovertemplate": escape_text(label)
                + "<br>"
                + escape_text(view.objective)
                + " ≤ %{x:.6g}: %{y:.1%} of evaluations<extra></extra>",
            }
        )
    return {
        "data": traces,
        "layout": _layout(
            f"Empirical distribution of {view.objective}", _objective_title(view), "share of the task's evaluations"
        ),
    }


def categories(view: HistoryView, name: str) -> list[str] | None:
    """A tuning parameter's categories as a chart's axis names them in order, or ``None`` for a numeric one.

    The problem's categories where its space is known (values seen beyond them follow), else the values seen,
    sorted, where any is not a number.

    Args:
        view: the history.
        name: a tuning parameter's name.
    """
    seen = view.frame[view.columns["parameter"][name]].dropna()
    space = view.problem_space
    declared = space.parameter_space[name] if space is not None and name in space.parameter_space.names else None
    if isinstance(declared, Categorical):
        named = [str(c) for c in declared.categories]
        return named + sorted({str(v) for v in seen} - set(named))
    if declared is not None or all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
        return None
    return sorted({str(v) for v in seen})


def _category_axis(names: list[str]) -> dict[str, Any]:
    """An axis that names ``names`` at positions 0, 1, ... (a categorical parameter's, see :func:`_placed`)."""
    return {
        "tickvals": list(range(len(names))),
        "ticktext": [escape_text(n) for n in names],
        "range": [-0.5, len(names) - 0.5],
    }


def _placed(view: HistoryView, frame: pd.DataFrame, name: str) -> tuple[list[float | None], dict[str, Any]]:
    """A tuning parameter's values in ``frame`` as a chart places them, and its axis' settings.

    A numeric parameter: its values, an axis plotly.js ticks. A categorical one
    (:func:`categories`): each value's position among the categories, an axis
    that names them.
    """
    values = frame[view.columns["parameter"][name]]
    names = categories(view, name)
    if names is None:
        return _numbers(values), {}
    where = {n: float(i) for i, n in enumerate(names)}
    return [None if v is None else where.get(str(v)) for v in values], _category_axis(names)


def _order(view: HistoryView, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` best first in the objective."""
    return frame.sort_values(view.objective_column, ascending=view.goal == "minimize", kind="stable")


def parallel_evaluations(
    view: HistoryView, task: str, fidelity: float | None = None, limit: int = PARALLEL_LINES
) -> pd.DataFrame:
    """The evaluations :func:`parallel_figure` draws, best first.

    Args:
        view: the history.
        task: the task's label.
        fidelity: one of the history's fidelities (default: full fidelity).
        limit: the most evaluations (the newest).
    """
    return _order(view, evaluations_at(view, task, fidelity, limit))


def _axis_ticks(view: HistoryView, frame: pd.DataFrame, column: str) -> tuple[np.ndarray, list[tuple[float, str]]]:
    """A column's values as positions on a ``[0, 1]`` axis of parallel coordinates, and the axis' ticks.

    A number spans the values' range, ticked at round values (matplotlib's
    ``MaxNLocator``); a categorical parameter (:func:`categories`) puts its
    categories evenly, each one a tick.
    """
    name = next((n for n, c in view.columns["parameter"].items() if c == column), None)
    names = categories(view, name) if name is not None else None
    values = frame[column]
    if names is None:
        numbers = pd.to_numeric(values, errors="coerce").astype(float)
        low, high = float(numbers.min()), float(numbers.max())
        if high == low:
            return np.full(len(values), 0.5), [(0.5, _text(low))]
        integer = name is not None and all(float(v).is_integer() for v in numbers.dropna())
        ticks = [float(t) for t in MaxNLocator(5, integer=integer).tick_values(low, high) if low <= t <= high]
        return ((numbers - low) / (high - low)).to_numpy(), [((t - low) / (high - low), _text(t)) for t in ticks]
    where = {n: (i / (len(names) - 1) if len(names) > 1 else 0.5) for i, n in enumerate(names)}
    return np.array([where.get(str(v), np.nan) for v in values]), [(where[n], escape_text(n)) for n in names]


def parallel_figure(
    view: HistoryView, task: str, fidelity: float | None = None, limit: int = PARALLEL_LINES
) -> PlotlyFigure:
    """One task's evaluations as lines across its parameters and the objective, in five groups by rank.

    The evaluations are :func:`parallel_evaluations`'. Axis ``i`` is at ``x =
    i``, its values placed on ``[0, 1]`` and ticked (a categorical parameter's
    names its categories); each vertex carries its evaluation's uid, so a page
    can tell which lines a box drawn over an axis holds (the chart's drag
    selects a box). A legend entry shows or hides each fifth.

    Args:
        view: the history.
        task: the task's label.
        fidelity: one of the history's fidelities (default: full fidelity).
        limit: the most evaluations drawn (the newest).
    """
    frame = parallel_evaluations(view, task, fidelity, limit)
    axes = [*view.columns["parameter"].values(), view.objective_column]
    names = [*view.columns["parameter"], view.objective]
    placed = {c: _axis_ticks(view, frame, c) if len(frame) else (np.array([]), []) for c in axes}
    groups = np.array_split(np.arange(len(frame)), min(len(RANK_GROUPS), len(frame))) if len(frame) else []
    traces = []
    for (group_name, colour), rows in reversed(list(zip(RANK_GROUPS, groups))):  # the best drawn last, on top
        xs: list[float | None] = []
        ys: list[float | None] = []
        uids: list[str | None] = []
        texts: list[str | None] = []
        hover = _hover(frame.iloc[rows], list(view.columns["parameter"].values()), view.objective_column)
        for n, row in enumerate(rows):
            uid = str(frame["uid"].iloc[row])
            for i, column in enumerate(axes):
                xs.append(float(i))
                ys.append(round(float(placed[column][0][row]), 4))  # a position on the axis: 4 digits draw it
                uids.append(uid)
                texts.append(hover[n])
            xs.append(None)
            ys.append(None)
            uids.append(None)
            texts.append(None)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",  # markers, unseen: what a drawn box selects
                "name": group_name,
                "x": xs,
                "y": _numbers(pd.Series(ys, dtype=float)),
                "customdata": uids,
                "text": texts,
                "hovertemplate": "%{text}<extra></extra>",
                "line": {"color": colour, "width": 1.5},
                "marker": {"size": 4, "opacity": 0},
                "selected": {"marker": {"opacity": 0}},
                "unselected": {"marker": {"opacity": 0}},
                "opacity": 0.75,
            }
        )
    labels = [
        {
            "x": i,
            "y": y,
            "text": text,
            "showarrow": False,
            "xanchor": "left",
            "xshift": 4,
            "font": {"size": 10},
            "bgcolor": "rgba(255, 255, 255, 0.7)",
        }
        for i, column in enumerate(axes)
        for y, text in placed[column][1]
    ]
    layout = _layout(
        f"{task}: {len(frame)} evaluations across the parameters and {view.objective}",
        "",
        "",
        xaxis={
            "tickvals": list(range(len(axes))),
            "ticktext": [escape_text(n) for n in names],
            "showgrid": True,
            "gridcolor": "#888",
            "zeroline": False,
            "fixedrange": True,
        },
        yaxis={"visible": False, "range": [-0.08, 1.08], "fixedrange": True},
        annotations=labels,
        dragmode="select",
    )
    layout["legend"] = {"title": {"text": escape_text(view.objective)}, "traceorder": "reversed"}
    return {"data": traces, "layout": layout}


def slice_figures(
    view: HistoryView, task: str, fidelity: float | None = None, limit: int = MAX_POINTS
) -> dict[str, PlotlyFigure]:
    """Per tuning parameter, the task's objective against it, coloured by the order of the evaluations.

    Args:
        view: the history.
        task: the task's label.
        fidelity: one of the history's fidelities (default: full fidelity).
        limit: the most evaluations drawn (the newest).
    """
    frame = evaluations_at(view, task, fidelity, limit)
    columns = list(view.columns["parameter"].values())
    hover = _hover(frame, columns, view.objective_column)
    order = list(range(1, len(frame) + 1))
    figures = {}
    for name in view.columns["parameter"]:
        xs, axis = _placed(view, frame, name)
        layout = _layout(f"{view.objective} against {name}", name, _objective_title(view), showlegend=False)
        layout["xaxis"].update(axis)
        figures[name] = {
            "data": [
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": escape_text(task),
                    "x": xs,
                    "y": _numbers(frame[view.objective_column]),
                    "customdata": list(frame["uid"]),
                    "text": hover,
                    "hovertemplate": "%{text}<extra></extra>",
                    "marker": {
                        "color": order,
                        "colorscale": "Blues",
                        "reversescale": True,
                        "size": 7,
                        "line": {"width": 0.5, "color": "#444"},
                        "colorbar": {"title": {"text": "evaluation"}, "thickness": 12},
                    },
                }
            ],
            "layout": layout,
        }
    return figures


def _check_pair(view: HistoryView, x: str, y: str) -> None:
    allowed = list(view.columns["parameter"])
    for field, name in (("x", x), ("y", y)):
        if name not in allowed:
            raise InvalidInputError(field, f"{name[:80]!r} is no tuning parameter of {view.problem}", allowed=allowed)
    if x == y:
        raise InvalidInputError("y", f"choose a parameter other than x ({x!r})", allowed=[a for a in allowed if a != x])


def _pair_layout(view: HistoryView, frame: pd.DataFrame, title: str, x: str, y: str) -> dict[str, Any]:
    """A chart's layout over the parameters ``x`` and ``y``: a categorical one's axis names its categories."""
    layout = _layout(title, x, y, showlegend=False)
    layout["xaxis"].update(_placed(view, frame, x)[1])
    layout["yaxis"].update(_placed(view, frame, y)[1])
    return layout


def _pair_points(
    view: HistoryView, frame: pd.DataFrame, xs: list[float | None], ys: list[float | None], colour: dict[str, Any]
) -> dict[str, Any]:
    """The evaluations of ``frame`` as points at ``xs`` and ``ys`` (:func:`_placed`), with their hover text."""
    columns = view.columns["parameter"]
    return {
        "type": "scatter",
        "mode": "markers",
        "name": "evaluations",
        "x": xs,
        "y": ys,
        "customdata": list(frame["uid"]),
        "text": _hover(frame, list(columns.values()), view.objective_column),
        "hovertemplate": "%{text}<extra></extra>",
        "marker": {"size": 8, "line": {"width": 0.8, "color": "#fff"}, **colour},
    }


def rank_figure(
    view: HistoryView, task: str, x: str, y: str, fidelity: float | None = None, limit: int = MAX_POINTS
) -> PlotlyFigure:
    """Two parameters of one task's evaluations, each coloured by its rank (0 the best, 1 the worst).

    A categorical parameter's axis names its categories (:func:`categories`).

    Args:
        view: the history.
        task: the task's label.
        x: the parameter across.
        y: the parameter up.
        fidelity: one of the history's fidelities (default: full fidelity).
        limit: the most evaluations drawn (the newest).
    """
    _check_pair(view, x, y)
    frame = evaluations_at(view, task, fidelity, limit)
    position = pd.Series(np.arange(len(frame), dtype=float), index=_order(view, frame).index)
    ranked = frame.assign(rank=position[frame.index] / max(len(frame) - 1, 1))
    colour = {
        "color": _numbers(ranked["rank"]),
        "colorscale": "Viridis",
        "reversescale": True,
        "cmin": 0,
        "cmax": 1,
        "colorbar": {"title": {"text": "rank (0 = best)"}, "thickness": 12},
    }
    trace = _pair_points(view, ranked, _placed(view, ranked, x)[0], _placed(view, ranked, y)[0], colour)
    trace["text"] = [f"{t}<br>rank {r:.2f}" for t, r in zip(trace["text"], ranked["rank"])]
    return {
        "data": [trace],
        "layout": _pair_layout(view, frame, f"{task}: {x} and {y}, by rank of {view.objective}", x, y),
    }


def contour_figure(
    view: HistoryView,
    task: str,
    x: str,
    y: str,
    model: SurrogateModel,
    fidelity: float | None = None,
    size: int = 30,
    limit: int = MAX_POINTS,
) -> PlotlyFigure:
    """A surrogate's predicted mean of the objective over two parameters, the evaluations on top.

    The other parameters stay at the task's best evaluation (at ``fidelity``);
    the grid spans the model's parameter space, ``size`` values a side (a
    categorical parameter: each of its categories, its axis naming them).

    Args:
        view: the history.
        task: the task's label (the model predicts for it).
        x: the parameter across.
        y: the parameter up.
        model: a surrogate of the objective fitted to the task (:func:`~raytuner.analysis.surrogate_from_records`).
        fidelity: one of the history's fidelities (default: full fidelity).
        size: grid values per axis.
        limit: the most evaluations drawn as points (the newest).
    """
    _check_pair(view, x, y)
    frame = evaluations_at(view, task, fidelity, limit)
    if not len(frame):
        raise InvalidInputError("task", f"{task!r} has no successful evaluation at this fidelity to draw")
    space = model.problem.parameter_space
    best = _order(view, frame).iloc[0]
    start = model.unit([{n: best[view.columns["parameter"][n]] for n in space.names}])[0]
    grids, points, axes, labels = [], [], [], []
    for name in (x, y):
        parameter = space[name]
        seen = frame[view.columns["parameter"][name]]
        if isinstance(parameter, Categorical):
            names = [str(c) for c in parameter.categories]
            grids.append(([float(i) for i in range(len(names))], parameter.to_unit(parameter.categories)))
            points.append([float(names.index(str(v))) if str(v) in names else None for v in seen])
            axes.append(_category_axis(names))
            labels.append([escape_text(n) for n in names])
        else:
            values = list(dict.fromkeys(parameter.from_unit(np.linspace(0.0, 1.0, size))))
            grids.append(([float(v) for v in values], parameter.to_unit(values)))
            points.append(_numbers(seen))
            axes.append({})
            labels.append([_text(float(v)) for v in values])
    (xs, ux), (ys, uy) = grids
    grid = np.repeat(start[None, :], len(xs) * len(ys), axis=0)
    grid[:, space.names.index(x)] = np.tile(ux, len(ys))
    grid[:, space.names.index(y)] = np.repeat(uy, len(xs))
    mean, _ = model.predict(grid, _task_of(view, task))
    trace = {
        "type": "contour",
        "x": xs,
        "y": ys,
        "z": mean.reshape(len(ys), len(xs)).tolist(),
        "text": [[f"{escape_text(x)} = {a}<br>{escape_text(y)} = {b}" for a in labels[0]] for b in labels[1]],
        "colorscale": "RdBu",
        "reversescale": view.goal == "maximize",
        "colorbar": {"title": {"text": escape_text(f"predicted {view.objective}")}, "thickness": 12},
        "hovertemplate": f"%{{text}}<br>predicted {escape_text(view.objective)} = %{{z:.6g}}<extra></extra>",
    }
    dots = _pair_points(view, frame, points[0], points[1], {"color": "#222"})
    others = ", ".join(f"{n} = {_plain(best[view.columns['parameter'][n]])}" for n in space.names if n not in (x, y))
    title = f"{task}: the GP's {view.objective} over {x} and {y}" + (f" ({others})" if others else "")
    layout = _layout(title, x, y, showlegend=False)
    layout["xaxis"].update(axes[0])
    layout["yaxis"].update(axes[1])
    return {"data": [trace, dots], "layout": layout}


def _task_of(view: HistoryView, label: str) -> dict[str, Any]:
    return next(dict(t) for t in view.tasks if task_label(t) == label)


def duration(record: FunctionEvaluation) -> float | None:
    """How many seconds an evaluation ran, where its record says; ``None`` where it does not.

    Its provenance's ``elapsed`` seconds, or its ``started`` (an ISO 8601 time)
    before the record's ``time`` (a run tells either through
    :meth:`~raytuner.session.TuningSession.tell`'s ``provenance``), or the
    ``time_total_s`` Ray Tune reported, which raytuner's Ray searchers keep in
    ``additional_output``.

    Args:
        record: an evaluation.

    >>> from raytuner.problem.records import FunctionEvaluation, Provenance
    >>> duration(FunctionEvaluation.create({}, {"x": 1}, {"y": 2}, provenance=Provenance(elapsed=3.5)))
    3.5
    >>> duration(FunctionEvaluation.create({}, {"x": 1}, {"y": 2}, additional_output={"time_total_s": 12.0}))
    12.0
    """
    extra = (record.raytuner.model_extra or {}) if record.raytuner else {}
    for seconds in (extra.get("elapsed"), record.additional_output.get("time_total_s")):
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds < math.inf:
            return float(seconds)
    started, finished = extra.get("started"), record_time(record)
    if not isinstance(started, str) or finished is None:
        return None
    try:
        begun = dt.datetime.fromisoformat(started)
    except ValueError:
        return None
    if begun.tzinfo is not None:  # the record's time is local
        begun = begun.astimezone().replace(tzinfo=None)
    seconds = (finished - begun).total_seconds()
    return seconds if seconds >= 0 else None


def timeline_figure(view: HistoryView, limit: int = MAX_POINTS) -> PlotlyFigure:
    """When each evaluation ran, one row per evaluation (its number in the history), failures apart.

    An evaluation whose record says how long it ran (:func:`duration`) is a bar
    from its start to its end (evaluations that ran together overlap in time,
    each on its own row); others are a point when they finished (GPTune's
    records keep only that). The newest ``limit`` evaluations are drawn.

    Args:
        view: the history.
        limit: the most evaluations drawn (the newest).
    """
    frame = view.frame[view.frame["time"].notna()].tail(limit)
    seconds = pd.Series([duration(view.records[int(n)]) for n in frame.index], index=frame.index, dtype=float)
    traces: list[dict[str, Any]] = []
    for name, colour, rows in (
        ("succeeded", "#1f77b4", frame[frame["status"] == "ok"]),
        ("failed", "#d62728", frame[frame["status"] != "ok"]),
    ):
        if not len(rows):
            continue
        text = [
            f"evaluation {str(u)[:8]}, {escape_text(task)}<br>{escape_text(f) if f else v}"
            + (f"<br>ran {_text(s)} s" if not math.isnan(s) else "")
            for u, task, f, v, s in zip(
                rows["uid"], rows["task"], rows["failure"], rows[view.objective_column].map(_text), seconds[rows.index]
            )
        ]
        number = [int(n) + 1 for n in rows.index]
        timed = seconds[rows.index].notna().to_numpy()
        trace: dict[str, Any] = {
            "type": "scatter",
            "name": name,
            "legendgroup": name,
            "hovertemplate": "evaluation %{y}: %{x}<br>%{text}<extra></extra>",
        }
        if (~timed).any():
            traces.append(
                {
                    **trace,
                    "mode": "markers",
                    "x": [t.isoformat() for t in rows["time"][~timed]],
                    "y": [n for n, k in zip(number, timed) if not k],
                    "customdata": list(rows["uid"][~timed]),
                    "text": [t for t, k in zip(text, timed) if not k],
                    "marker": {"color": colour, "size": 8, "symbol": "circle" if name == "succeeded" else "x"},
                }
            )
        if timed.any():  # a bar per evaluation: a thick line from its start to its end, the next after a gap
            xs: list[str | None] = []
            ys: list[int | None] = []
            uids: list[str | None] = []
            texts: list[str | None] = []
            for end, n, uid, s, t in zip(
                rows["time"][timed],
                np.array(number)[timed],
                rows["uid"][timed],
                seconds[rows.index][timed],
                np.array(text)[timed],
            ):
                xs += [(end - dt.timedelta(seconds=float(s))).isoformat(), end.isoformat(), None]
                ys += [int(n)] * 2 + [None]
                uids += [str(uid)] * 2 + [None]
                texts += [str(t)] * 2 + [None]
            traces.append(
                {
                    **trace,
                    "mode": "lines",
                    "showlegend": bool(timed.all()),
                    "x": xs,
                    "y": ys,
                    "customdata": uids,
                    "text": texts,
                    "line": {"color": colour, "width": max(2.0, min(10.0, 300 / len(frame)))},
                }
            )
    layout = _layout("When each evaluation ran", "time", "evaluation")
    layout["legend"] = {"title": {"text": "status"}}
    return {"data": traces, "layout": layout}


def escape_text(text: Any) -> str:
    """``text`` as a plotly.js label shows it literally: every string a chart takes from a store passes here.

    plotly.js reads a subset of HTML in titles, axis and tick labels, legend
    names, annotations and hover text (``<a href>``, ``<br>``, ``<b>``...), and
    ``%{...}`` in a ``hovertemplate`` is a value to fill in. So ``&``, ``<``,
    ``>``, both quotes and ``%`` become character references that plotly.js
    decodes back to the characters it draws (it knows numeric ones and
    ``&amp;``, ``&lt;``, ``&gt;``, not ``&quot;``).

    Args:
        text: a name or value from a store (a parameter, an output, a task label, a failure reason); not a string:
            its ``str``.

    >>> escape_text('<a href="https://x.example/">x</a> & %{y}')
    '&lt;a href=&#34;https://x.example/&#34;&gt;x&lt;/a&gt; &amp; &#37;{y}'
    """
    return str(text).translate(_ESCAPES)


def _objectives_of(view: HistoryView) -> list[Any]:
    space = view.problem_space
    if space is None or len(space.optimised) < 2:
        raise InvalidInputError(
            "objective", f"{view.problem} is not known to have several objectives", allowed=list(view.columns["output"])
        )
    return list(space.optimised)


def front_figure(view: HistoryView, task: str) -> PlotlyFigure:
    """One task's evaluations at full fidelity in its first two objectives, its Pareto front joined.

    Evaluations that meet the output constraints are dots, those that break one
    crosses, the front's points larger and joined by a step line.

    Args:
        view: the history of a problem with several objectives (its ``problem_space`` known).
        task: the task's label.
    """
    first, second = _objectives_of(view)[:2]
    _check_task(view, task)
    space = view.problem_space
    assert space is not None
    mine = [
        r
        for r in view.records
        if task_label(r.task_parameter) == task
        and view.is_full_fidelity(r)
        and r.value(first.name) is not None
        and r.value(second.name) is not None
    ]
    front = sorted(view.pareto_front(_task_of(view, task)), key=lambda r: first.sign() * r.known_value(first.name))
    on_front = {r.uid for r in front}
    parameters = list(view.columns["parameter"])

    def trace(name: str, records: list[Any], marker: dict[str, Any], mode: str = "markers") -> dict[str, Any]:
        return {
            "type": "scatter",
            "mode": mode,
            "name": f"{name} ({len(records)})",
            "x": [r.value(first.name) for r in records],
            "y": [r.value(second.name) for r in records],
            "customdata": [r.uid for r in records],
            "text": [
                "<br>".join(
                    [
                        f"evaluation {r.uid[:8]}",
                        *(f"{escape_text(p)} = {_text(r.tuning_parameter.get(p))}" for p in parameters),
                    ]
                )
                for r in records
            ],
            "hovertemplate": "%{text}<br>"
            + f"{escape_text(first.name)} = %{{x:.6g}}<br>{escape_text(second.name)} = %{{y:.6g}}<extra></extra>",
            "marker": marker,
            **({"line": {"shape": "hv", "color": "#b2182b"}} if mode != "markers" else {}),
        }

    traces = [
        trace(
            "meets the constraints",
            [r for r in mine if feasible(space, r) and r.uid not in on_front],
            {"color": "#67a9cf", "size": 7},
        ),
        trace(
            "breaks a constraint",
            [r for r in mine if not feasible(space, r)],
            {"color": "#999", "size": 7, "symbol": "x"},
        ),
        trace("Pareto front", front, {"color": "#b2182b", "size": 9}, mode="lines+markers"),
    ]
    kept = [(r.known_value(first.name), r.known_value(second.name)) for r in mine if feasible(space, r)]
    limits = feasible_limits(kept)
    broken = [(r.known_value(first.name), r.known_value(second.name)) for r in mine if not feasible(space, r)]
    outside = beyond(limits, broken) if limits else 0
    layout = _layout(
        f"{task}: Pareto front at full fidelity" + (f" ({outside} infeasible beyond the view)" if outside else ""),
        f"{first.name} ({first.goal})",
        f"{second.name} ({second.goal})",
    )
    if limits:
        layout["xaxis"]["range"], layout["yaxis"]["range"] = (list(limits[0]), list(limits[1]))
    layout["legend"] = {"title": {"text": "evaluations"}}
    return {"data": [t for t in traces if t["x"]], "layout": layout}


#: The two axes' ``(low, high)`` a chart frames.
Limits = tuple[tuple[float, float], tuple[float, float]]


def feasible_limits(points: list[tuple[float, float]]) -> Limits | None:
    """The axes' limits that frame a front's feasible ``points`` with a margin (``None``: fewer than two points).

    Infeasible points far off would squeeze the front into a corner: the
    static and the interactive front charts both frame the feasible ones.

    Args:
        points: the feasible evaluations' two objectives.

    >>> feasible_limits([(0.0, 1.0), (1.0, 3.0)])
    ((-0.08, 1.08), (0.84, 3.16))
    """
    if len(points) < 2:
        return None
    limits = []
    for values in (np.array([p[0] for p in points]), np.array([p[1] for p in points])):
        low, high = float(values.min()), float(values.max())
        margin = 0.08 * (high - low) or 0.08 * max(abs(high), 1.0)
        limits.append((low - margin, high + margin))
    return limits[0], limits[1]


def beyond(limits: Limits, points: list[tuple[float, float]]) -> int:
    """How many of ``points`` fall outside ``limits`` (:func:`feasible_limits`).

    Args:
        limits: the axes' limits.
        points: points of the two axes.

    >>> beyond(((0.0, 1.0), (0.0, 1.0)), [(0.5, 0.5), (2.0, 0.5)])
    1
    """
    (x0, x1), (y0, y1) = limits
    return sum(not (x0 <= x <= x1 and y0 <= y <= y1) for x, y in points)


def hypervolume_figure(view: HistoryView) -> PlotlyFigure:
    """Each task's hypervolume after each of its evaluations (its feasible ones at full fidelity count).

    The reference point is, per task, the worst value of each objective over
    its feasible evaluations, pushed out by a tenth of that objective's range;
    objectives to maximise are negated first.

    Args:
        view: the history of a problem with several objectives (its ``problem_space`` known).
    """
    _objectives_of(view)
    space = view.problem_space
    assert space is not None
    traces = []
    for task in view.tasks:
        label = task_label(task)
        mine = [r for r in view.records if task_label(r.task_parameter) == label]
        counted = [n for n, r in enumerate(mine) if view.is_full_fidelity(r) and feasible(space, r)]
        if not counted:
            continue
        values = objective_values(space, [mine[n] for n in counted])
        span = values.max(axis=0) - values.min(axis=0)
        reference = values.max(axis=0) + 0.1 * np.where(span > 0, span, np.maximum(np.abs(values.max(axis=0)), 1.0))
        xs, ys, front = [], [], np.empty((0, values.shape[1]))
        volume = 0.0
        for k, n in enumerate(counted):
            candidate = np.vstack([front, values[k]])
            kept = candidate[non_dominated(candidate)]
            if len(kept) != len(front) or not np.array_equal(kept, front):
                front, volume = kept, hypervolume(kept, reference)
            xs.append(n + 1)
            ys.append(volume)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": escape_text(label),
                "x": xs,
                "y": ys,
                "customdata": [mine[n].uid for n in counted],
                "line": {"color": _task_colour(view, label), "shape": "hv"},
                "hovertemplate": escape_text(label) + "<br>after evaluation %{x}: hypervolume %{y:.6g}<extra></extra>",
            }
        )
    return {
        "data": traces,
        "layout": _layout(
            "Hypervolume of each task's feasible evaluations at full fidelity", "evaluations of the task", "hypervolume"
        ),
    }


def fidelity_figure(view: HistoryView, task: str, limit: int = MAX_POINTS) -> PlotlyFigure:
    """One task's evaluations at each fidelity, each promotion a line from the run it continues.

    GPTuneBand's intermediate values: a configuration's value at each rung it
    reached, the newest ``limit`` evaluations, one trace per fidelity.

    Args:
        view: the history.
        task: the task's label.
        limit: the most evaluations drawn (the newest).
    """
    _check_task(view, task)
    frame = view.frame
    mine = frame[(frame["task"] == task) & frame["fidelity"].notna() & frame[view.objective_column].notna()]
    mine = mine[mine["status"] == "ok"].tail(limit)
    at = {str(u): (float(f), float(v)) for u, f, v in zip(mine["uid"], mine["fidelity"], mine[view.objective_column])}
    xs: list[float | None] = []
    ys: list[float | None] = []
    for n in mine.index:
        record = view.records[int(n)]
        parent = record.raytuner.parent if record.raytuner else None
        if parent in at:
            xs += [at[parent][0], at[record.uid][0], None]
            ys += [at[parent][1], at[record.uid][1], None]
    traces: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "promotions",
            "x": xs,
            "y": ys,
            "line": {"color": "#bbb", "width": 1},
            "hoverinfo": "skip",
        }
    ]
    hover = _hover(mine, list(view.columns["parameter"].values()), view.objective_column)
    for level in sorted(set(mine["fidelity"])):
        rows = [i for i, f in enumerate(mine["fidelity"]) if f == level]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"fidelity {_text(float(level))}",
                "x": [float(level)] * len(rows),
                "y": _numbers(mine[view.objective_column].iloc[rows]),
                "customdata": [str(mine["uid"].iloc[i]) for i in rows],
                "text": [hover[i] for i in rows],
                "hovertemplate": "%{text}<extra></extra>",
                "marker": {"size": 7, "opacity": 0.7},
            }
        )
    layout = _layout(
        f"{task}: {view.objective} at each fidelity, promotions joined", "fidelity", _objective_title(view)
    )
    levels = fidelities(view)
    layout["xaxis"].update(type="log", tickvals=levels, ticktext=[_text(f) for f in levels])
    layout["legend"] = {"title": {"text": "evaluations"}}
    return {"data": traces, "layout": layout}
