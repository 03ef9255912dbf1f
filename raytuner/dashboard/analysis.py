"""The analysis pages of a problem: interactive charts (plotly.js) and parameter importance (Sobol indices).

- ``/problem/NAME/analysis?task=LABEL&fidelity=F&x=P&y=Q``: every task's history against evaluations or
  cost (and hypervolume, with several objectives), the objective's distribution and when evaluations
  ran; for one task at one fidelity, its Pareto front, parallel coordinates with a table of their
  evaluations (the page's script shows or hides each axis and keeps, in the table, the evaluations
  inside the ranges drawn on the axes), a GP's contour over two parameters (numeric or categorical),
  the evaluations by rank, and the objective against each parameter;
- ``/problem/NAME/importance?task=LABEL&fidelity=F``: Sobol indices of a GP fitted to one task.

Example: a problem whose spaces are unknown is analysed over what its evaluations span:

    >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument
    >>> from raytuner.view import load_history
    >>> seen = [FunctionEvaluation.create({"t": 1}, {"x": x}, {"y": x}) for x in (0.5, 2.0)]
    >>> space = _observed_space(load_history(HistoryDocument(tuning_problem_name="p", func_eval=seen)))
    >>> [(p.name, p.lower_bound, p.upper_bound) for p in space.parameter_space]
    [('x', 0.5, 2.0)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from flask import Blueprint, Response, abort, request

from raytuner.dashboard.pages import Choice, Sobol, Table, cell, render
from raytuner.dashboard.shared import chart_scripts, evaluation_url, objective_choices, problem_view, trail, url
from raytuner.dashboard.state import config
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace
from raytuner.view import HistoryView, task_label
from raytuner.view.figures import (
    contour_figure,
    edf_figure,
    evaluations_at,
    fidelities,
    fidelity_figure,
    front_figure,
    history_figure,
    hypervolume_figure,
    parallel_evaluations,
    parallel_figure,
    rank_figure,
    slice_figures,
    timeline_figure,
)

__all__ = ["blueprint", "IMPORTANCE_SAMPLES", "IMPORTANCE_RECORDS", "CONTOUR_RECORDS"]

#: The blueprint of these pages.
blueprint = Blueprint("analysis", __name__)

#: SALib's base sample size on the importance page.
IMPORTANCE_SAMPLES = 512
#: The most evaluations (a task's newest) the importance page fits its GP to, so a large store stays quick.
IMPORTANCE_RECORDS = 1000
#: The most evaluations (a task's newest) the analysis page's contour fits its GP to.
CONTOUR_RECORDS = 300


def _observed_space(view: HistoryView) -> ProblemSpace | None:
    """The spaces the evaluations span (bounds as observed), for a history that does not name its own."""

    def space(values: dict[str, list[Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name, seen in values.items():
            numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen)
            if numbers and min(seen) < max(seen):
                kind = "integer" if all(isinstance(v, int) for v in seen) else "real"
                out.append({"name": name, "type": kind, "lower_bound": min(seen), "upper_bound": max(seen)})
            else:
                out.append({"name": name, "type": "categorical", "categories": sorted({str(v) for v in seen})})
        return out

    def columns(part: str) -> dict[str, list[Any]]:
        found: dict[str, list[Any]] = {}
        for r in view.records:
            for k, v in getattr(r, part).items():
                found.setdefault(k, []).append(v)
        return found

    try:
        return ProblemSpace.parse(
            {
                "input_space": space(columns("task_parameter")),
                "parameter_space": space(columns("tuning_parameter")),
                "output_space": [{"name": view.objective, "goal": view.goal}],
            }
        )
    except InvalidInputError:
        return None


def _records_of(view: HistoryView, rows: pd.DataFrame) -> list[FunctionEvaluation]:
    """The records of rows of :attr:`HistoryView.frame` (its index is the records' order)."""
    return [view.records[int(n)] for n in rows.index]


def _where(view: HistoryView, fidelity: float | None) -> str:
    """Which evaluations a chart or analysis counts: `` at full fidelity``, `` at fidelity F`` or (none has one) all."""
    levels = fidelities(view)
    if not levels:
        return ""
    return " at full fidelity" if fidelity is None or fidelity == levels[-1] else f" at fidelity {cell(fidelity)}"


def _chosen_task(view: HistoryView, problem: str) -> str:
    """The task the URL names (``?task=``; default: the first); another name: a 404 page."""
    labels = [task_label(t) for t in view.tasks]
    label = request.args.get("task") or (labels[0] if labels else "")
    if label not in labels:
        page = render("layout.html", problem, error=f"task: {label[:80]!r} is no task of {problem}", status=404)
        abort(Response(page[0], 404))
    return label


def _chosen_fidelity(view: HistoryView) -> float | None:
    """The fidelity the URL names (``?fidelity=``; default: full fidelity); another value: a 400 page."""
    raw = request.args.get("fidelity") or ""
    levels = fidelities(view)
    if not raw:
        return None
    try:
        wanted = float(raw)
    except ValueError:
        wanted = float("nan")
    if not levels:
        raise InvalidInputError("fidelity", f"no evaluation of {view.problem} has a fidelity: leave it out")
    if not any(abs(wanted - f) <= 1e-9 * max(1.0, abs(f)) for f in levels):
        raise InvalidInputError("fidelity", f"{raw[:80]!r} is no fidelity of {view.problem}", allowed=levels)
    return wanted


def _choices(values: Sequence[Any], chosen: Any, link: Any) -> list[Choice]:
    """Links that choose one of ``values`` (the chosen one without a link); ``link(value)`` is each URL."""
    return [Choice(cell(v), None if v == chosen else link(v)) for v in values]


def _head(
    view: HistoryView, problem: str, page: str, label: str, fidelity: float | None, **kept: Any
) -> dict[str, Any]:
    """What heads a page below a problem: breadcrumbs, then the choices of its objective, task and fidelity."""
    here = f"/problem/{problem}/{page}"
    kept = {"task": label, "fidelity": None if fidelity is None else cell(fidelity), **kept}
    levels = fidelities(view)
    return {
        "trail": trail(problem, (page, url(here, task=label))),
        "objectives": objective_choices(view, here, **kept),
        "tasks": _choices([task_label(t) for t in view.tasks], label, lambda t: url(here, **{**kept, "task": t})),
        "fidelities": _choices(
            levels,
            levels[-1] if fidelity is None else fidelity,
            lambda f: url(here, **{**kept, "fidelity": cell(f)}),
        )
        if len(levels) > 1
        else [],
    }


@blueprint.get("/problem/<problem>/importance")
def importance(problem: str) -> tuple[str, int]:
    """Parameter importance for one task: Sobol indices of a GP fitted to its evaluations at one fidelity."""
    view = problem_view(problem)
    label = _chosen_task(view, problem)
    fidelity = _chosen_fidelity(view)
    head = _head(view, problem, "importance", label, fidelity)
    everything = evaluations_at(view, label, fidelity, limit=len(view.records))
    mine = _records_of(view, everything.tail(IMPORTANCE_RECORDS))
    task = next(t for t in view.tasks if task_label(t) == label)
    where = _where(view, fidelity)
    space = view.problem_space or _observed_space(view)
    title = f"{problem}: parameter importance"
    if space is None or len(mine) < 3:
        why = "the problem's spaces are unknown" if space is None else f"{len(mine)} successful evaluations{where}"
        return render("importance.html", title, **head, why=why)
    done = config().setdefault("importance", {})  # by (problem, objective, task, fidelity): what was fitted, indices
    key = (problem, view.objective, label, fidelity)
    fitted = _fitted(mine, space)
    held = done.get(key)
    if held is None or held[0] != fitted:  # the same records in the same space: the same indices
        from raytuner.analysis import sobol_analysis, surrogate_from_records  # the models when a page fits one
        from raytuner.models.executors import InlineExecutor

        model = surrogate_from_records(space, mine, objective=view.objective, task=task, executor=InlineExecutor())
        indices = sobol_analysis(model, num_samples=IMPORTANCE_SAMPLES, task=task, seed=0)
        held = (fitted, Sobol.of(indices, f"{problem}, {label}: {view.objective}"))
        done[key] = held
    return render(
        "importance.html",
        title,
        **head,
        why=None,
        objective=view.objective,
        fitted=f"{len(mine)} {'newest ' if len(everything) > len(mine) else ''}successful evaluations{where}",
        samples=IMPORTANCE_SAMPLES,
        spans="its spaces" if view.problem_space is not None else "the ranges its evaluations span",
        sobol=held[1],
    )


def _fitted(records: Sequence[FunctionEvaluation], space: ProblemSpace) -> tuple[Any, ...]:
    """What a model fitted to ``records`` in ``space`` depends on (a cached model is kept while it is the same)."""
    return (tuple(r.uid for r in records), space)


def _contour_model(view: HistoryView, problem: str, label: str, fidelity: float | None) -> Any:
    """A GP of the objective fitted to the task's newest evaluations at ``fidelity`` (kept while it is fitted to the same records)."""
    space = view.problem_space or _observed_space(view)
    task = next(t for t in view.tasks if task_label(t) == label)
    mine = _records_of(view, evaluations_at(view, label, fidelity, limit=CONTOUR_RECORDS))
    if space is None or len(mine) < 3:
        return None
    done = config().setdefault("contour", {})
    key = (problem, view.objective, label, fidelity)
    fitted = _fitted(mine, space)
    held = done.get(key)
    if held is None or held[0] != fitted:  # a record appended to another task or fidelity: the same model
        from raytuner.analysis import surrogate_from_records
        from raytuner.models.executors import InlineExecutor

        held = (
            fitted,
            surrogate_from_records(space, mine, objective=view.objective, task=task, executor=InlineExecutor()),
        )
        done[key] = held
    return held[1]


def _pair(
    problem: str, label: str, fidelity: float | None, parameters: list[str], chosen: tuple[str, str]
) -> dict[str, Any]:
    """The form that chooses two of the tuning ``parameters`` (``chosen``: the two drawn)."""
    kept = {"task": label, "fidelity": fidelity, "objective": request.args.get("objective")}
    return {
        "action": f"/problem/{problem}/analysis",
        "hidden": {k: cell(v) for k, v in kept.items() if v not in (None, "")},
        "parameters": parameters,
        "x": chosen[0],
        "y": chosen[1],
        "records": CONTOUR_RECORDS,
    }


def _parallel(view: HistoryView, problem: str, label: str, fidelity: float | None) -> dict[str, Any]:
    """What goes with the parallel coordinates: their axes (to show or hide) and the table of their lines, row n
    the evaluation of line n (the page's script hides the rows outside the ranges selected on the axes)."""
    rows = parallel_evaluations(view, label, fidelity)
    columns = [*view.columns["parameter"].values(), view.objective_column]
    shown = rows[columns].set_axis([*view.columns["parameter"], view.objective], axis=1)
    uids = [str(u) for u in rows["uid"]]
    shown.insert(0, "evaluation", [u[:8] for u in uids])
    return {
        "axes": [*view.columns["parameter"], view.objective],
        "table": Table.of(shown, "parallel-rows", row_links={"evaluation": [evaluation_url(problem, u) for u in uids]}),
    }


def _task_figures(
    view: HistoryView, label: str, fidelity: float | None, pair: tuple[Any, Any, str, str] | None
) -> dict[str, Any]:
    """The charts of one task at one fidelity: across fidelities, parallel coordinates, the objective against each
    parameter, and with ``pair`` (its rank chart, a GP or ``None``, the two parameters) the two parameters' charts."""
    figures: dict[str, Any] = {"chart-parallel": parallel_figure(view, label, fidelity)}
    if len(fidelities(view)) > 1:
        figures["chart-fidelity"] = fidelity_figure(view, label)
    if pair is not None:
        rank, model, x, y = pair
        figures["chart-rank"] = rank
        if model is not None:
            figures["chart-contour"] = contour_figure(view, label, x, y, model, fidelity)
    slices = slice_figures(view, label, fidelity)
    figures.update({f"chart-slice-{n}": f for n, f in enumerate(slices.values())})
    return figures


@blueprint.get("/problem/<problem>/analysis")
def charts(problem: str) -> tuple[str, int]:
    """Interactive charts of a problem: its tasks' histories and distributions, one task's parameters."""
    view = problem_view(problem)
    label = _chosen_task(view, problem)
    fidelity = _chosen_fidelity(view)
    parameters = list(view.columns["parameter"])
    x = request.args.get("x") or (parameters[0] if parameters else "")
    y = request.args.get("y") or next((n for n in parameters if n != x), "")
    paired = len(parameters) >= 2 or bool(request.args.get("x") or request.args.get("y"))
    rank = rank_figure(view, label, x, y, fidelity) if paired else None  # checks x and y before any other work
    several = view.problem_space is not None and len(view.problem_space.optimised) > 1
    figures: dict[str, Any] = {
        "chart-history": history_figure(view),
        "chart-edf": edf_figure(view, fidelity),
        "chart-timeline": timeline_figure(view),
    }
    if several:
        figures["chart-hypervolume"] = hypervolume_figure(view)
        figures["chart-front"] = front_figure(view, label)
    count = len(evaluations_at(view, label, fidelity, limit=len(view.records)))
    model = _contour_model(view, problem, label, fidelity) if count and paired else None
    if count:
        figures.update(_task_figures(view, label, fidelity, (rank, model, x, y) if paired else None))
    return render(
        "analysis.html",
        f"{problem}: analysis",
        **_head(view, problem, "analysis", label, fidelity, x=request.args.get("x"), y=request.args.get("y")),
        label=label,
        problem=problem,
        objective=view.objective,
        several=several,
        count=count,
        where=_where(view, fidelity),
        levels=len(fidelities(view)),
        pair=_pair(problem, label, fidelity, parameters, (x, y)) if paired else None,
        parallel=_parallel(view, problem, label, fidelity) if count else None,
        contour=model is not None,
        slices=sum(1 for k in figures if k.startswith("chart-slice-")),
        parameter_count=len(parameters),
        **chart_scripts(problem, figures),
    )
