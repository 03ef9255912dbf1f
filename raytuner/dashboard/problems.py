"""The pages of a store's problems: the overview, a problem, one task, GPTuneBand's brackets, the SVG charts.

Example (its URLs):
    >>> from raytuner.dashboard import create_app
    >>> rules = create_app(store=__import__("tempfile").mkdtemp()).url_map.iter_rules()
    >>> sorted(r.rule for r in rules if r.endpoint.startswith("problems."))  # doctest: +NORMALIZE_WHITESPACE
    ['/', '/problem/<problem>', '/problem/<problem>/brackets', '/problem/<problem>/plot/<kind>.svg',
     '/problem/<problem>/task']
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, abort, redirect, request

from raytuner.dashboard.pages import render, svg
from raytuner.dashboard.shared import (
    best_table,
    chart_scripts,
    evaluations_table,
    filled,
    front,
    objective_choices,
    problem_view,
    source,
    trail,
    url,
)
from raytuner.dashboard.sources import PAGE_SIZE, ServiceViews
from raytuner.dashboard.state import config
from raytuner.errors import InvalidInputError
from raytuner.view import (
    HistoryView,
    plot_brackets,
    plot_front,
    plot_history,
    plot_parameter,
    plot_task_correlation,
    task_label,
)
from raytuner.view.figures import history_figure

__all__ = ["blueprint"]

#: Where a problem's goal came from, as the problem page says it (:attr:`~raytuner.view.HistoryView.goal_source`).
GOAL_SOURCES = {
    "problem": "as the problem's definition says",
    "model": "as the problem saved with its surrogate models says",
    "default": "assumed: nothing in the store says whether to minimise or maximise it",
}
#: The blueprint of these pages.
blueprint = Blueprint("problems", __name__)

#: The overview reads a problem no page read yet when it has at most this many evaluations; a larger one
#: shows its count until a page of it is opened (the overview stays fast on a large store).
OVERVIEW_READS = 20_000


@blueprint.get("/")
def overview() -> Any:
    """The problems, with evaluations, tasks and the best value of each (and a service's sessions)."""
    if config().get("store") is None:
        return redirect("/crowd")
    held = source()
    rows = []
    for name in held.problems():
        count, view = held.evaluation_count(name)  # a large problem no page read yet is counted, not read
        if view is None and count <= OVERVIEW_READS:
            view = held.view(name)
            count = len(view.records)
        if view is None:
            rows.append({"name": name, "evaluations": count, "tasks": "", "objective": "", "best": "open it to read"})
            continue
        rows.append({"name": name, "evaluations": count, "tasks": len(view.tasks), **_overview_best(view)})
    if isinstance(held, ServiceViews):
        return render("overview.html", "Tuning service", problems=rows, sessions=held.sessions(), misnamed={})
    return render(
        "overview.html",
        f"Histories in {held.directory or 'MongoDB'}",
        problems=rows,
        sessions=None,
        misnamed=held.misnamed(),
    )


def _overview_best(view: HistoryView) -> dict[str, str]:
    """A problem's objective and best per task, as the overview gives them.

    A problem with several objectives or an output constraint names them all
    and gives each task's Pareto front size, not one objective's best.
    """
    space = view.problem_space
    if space is not None and view.multiobjective:
        bounds = [o.constraint_text() for o in space.output_constraints if not o.optimize]
        fronts = [(task_label(t), len(view.pareto_front(t))) for t in view.tasks]
        return {
            "objective": " · ".join([*(f"{o.name} ({o.goal})" for o in space.optimised), *bounds]),
            "best": " · ".join(f"{task}: {n} on the front" for task, n in fronts) or "-",
        }
    table = view.best_table() if view.records else None
    best = [] if table is None else list(zip(table["task"], table[view.objective_column]))
    return {
        "objective": f"{view.objective} ({view.goal})",
        "best": " · ".join(f"{task}: {v:.6g}" for task, v in best if v == v) or "-",
    }


@blueprint.get("/problem/<problem>")
def problem(problem: str) -> tuple[str, int]:
    """Per task the best configuration, the best-so-far chart (interactive), the LCM's task correlation."""
    view = problem_view(problem)
    return render(
        "problem.html",
        problem,
        problem=problem,
        counts={"evaluations": len(view.records), "tasks": len(view.tasks), "models": len(view.models)},
        objective=view.objective,
        goal=view.goal,
        goal_source=GOAL_SOURCES.get(view.goal_source, view.goal_source),
        has_model=any((m.raytuner or {}).get("hyperparameters") for m in view.models),
        has_brackets=view.frame["bracket"].notna().any(),
        objectives=objective_choices(view, f"/problem/{problem}"),
        best=best_table(view, problem),
        front=front(view, problem),
        **chart_scripts(problem, {"chart-history": history_figure(view)}),
    )


@blueprint.get("/problem/<problem>/task")
def task(problem: str) -> tuple[str, int]:
    """One task: its best, its history and parameter plots, its latest evaluations."""
    view = problem_view(problem)
    label = request.args.get("task", "")
    if label not in {task_label(t) for t in view.tasks}:
        return render("layout.html", problem, error=f"task: {label[:80]!r} is no task of {problem}", status=404)
    recent = filled(view, view.frame[view.frame["task"] == label].tail(PAGE_SIZE))
    return render(
        "task.html",
        f"{problem}: {label}",
        problem=problem,
        parameters=list(view.columns["parameter"]),
        objective=view.objective,
        label=label,
        trail=trail(problem, (label, url(f"/problem/{problem}/task", task=label))),
        objectives=objective_choices(view, f"/problem/{problem}/task", task=label),
        best=best_table(view, problem, label),
        front=front(view, problem, label),
        latest=evaluations_table(recent.iloc[::-1], problem, "latest"),
    )


@blueprint.get("/problem/<problem>/brackets")
def brackets(problem: str) -> tuple[str, int]:
    """GPTuneBand's brackets and promotions of one task (``?task=``; default: the first)."""
    view = problem_view(problem)
    tasks = sorted(view.frame["task"].unique())
    ran = bool(tasks) and not view.frame["bracket"].isna().all()
    chosen = request.args.get("task") or (tasks[0] if tasks else "")
    return render(
        "brackets.html",
        f"{problem}: brackets",
        problem=problem,
        trail=trail(problem, ("brackets", f"/problem/{problem}/brackets")),
        tasks=tasks if ran else [],
        chosen=chosen,
        objectives=objective_choices(view, f"/problem/{problem}/brackets", task=chosen),
    )


@blueprint.get("/problem/<problem>/plot/<kind>.svg")
def plot(problem: str, kind: str) -> Response:
    """A chart of the problem as an SVG image: ``history``, ``parameter``, ``correlation``, ``brackets``, ``front``."""
    view = problem_view(problem)
    task = request.args.get("task") or None
    try:
        if kind == "history":
            figure = plot_history(view, by="cost" if request.args.get("by") == "cost" else "evaluations", task=task)
        elif kind == "parameter":
            figure = plot_parameter(view, request.args.get("parameter", ""), task=task)
        elif kind == "correlation":
            figure = plot_task_correlation(view)
        elif kind == "brackets":
            figure = plot_brackets(view, task=task)
        elif kind == "front":
            figure = plot_front(view, task=task)
        else:
            abort(404)
    except InvalidInputError as exc:  # a page that escapes what it echoes, as every error
        return Response(render("layout.html", "Not possible", error=str(exc))[0], status=400, mimetype="text/html")
    return Response(svg(figure), mimetype="image/svg+xml")
