"""What the pages of a store share: its source, a problem's view, URLs, and the tables of evaluations.

Views (in :mod:`~raytuner.dashboard.problems`, :mod:`~raytuner.dashboard.analysis`,
:mod:`~raytuner.dashboard.evaluations` and :mod:`~raytuner.dashboard.live`) read
through these and hand their results to the templates as data
(:class:`~raytuner.dashboard.pages.Table`, :class:`~raytuner.dashboard.pages.Choice`):
no template reads a store.

Example:
    >>> from flask import Flask
    >>> with Flask(__name__).test_request_context("/problem/demo?objective=y"):
    ...     url("/problem/demo/task", task="t=1")
    '/problem/demo/task?task=t%3D1&objective=y'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import pandas as pd
from flask import abort, has_request_context, request
from jinja2.utils import htmlsafe_json_dumps

from raytuner.dashboard.pages import PLOTLY_URL, Choice, Table
from raytuner.dashboard.sources import HistoryViews
from raytuner.dashboard.state import config
from raytuner.errors import InvalidInputError
from raytuner.problem.records import check_problem_name
from raytuner.view import DETAIL_COLUMNS, HistoryView, task_label

__all__ = [
    "Front",
    "best_table",
    "evaluation_url",
    "evaluations_table",
    "filled",
    "front",
    "objective_choices",
    "problem_view",
    "source",
    "trail",
    "url",
]


def source() -> HistoryViews:
    """The application's history source (no store shown: a 404 page)."""
    held = config().get("store")
    if held is None:
        abort(404)
    return held


def problem_view(problem: str) -> HistoryView:
    """The problem's view, of the objective the URL names (``?objective=``; default: the first).

    A problem the store lacks: a 404 page; an objective the problem lacks: a 400 page listing its outputs.

    Args:
        problem: the problem's name, from the URL.
    """
    try:
        source().view(check_problem_name(problem, "problem"))
    except InvalidInputError:
        abort(404)
    return source().view_of(problem, request.args.get("objective") or None)


def url(path: str, /, **args: Any) -> str:
    """``path`` with ``args`` as its query; the objective the page is about goes along unless given.

    Args:
        path: the page's path.
        **args: the query's items; an empty or ``None`` one is left out.
    """
    if "objective" not in args and has_request_context():
        args["objective"] = request.args.get("objective")
    kept = {k: v for k, v in args.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept) if kept else "")


def evaluation_url(problem: str, uid: str) -> str:
    """The page of one evaluation (``uid`` empty: the URL a uid is appended to).

    Args:
        problem: the problem's name.
        uid: the evaluation's uid.
    """
    return f"/problem/{problem}/evaluation/{quote(uid, safe='')}"


def trail(problem: str, *steps: tuple[str, str]) -> list[tuple[str, str]]:
    """The breadcrumbs of a page below a problem: the overview, the problem, then ``(text, url)`` steps.

    Args:
        problem: the problem's name.
        *steps: ``(text, url)`` of each page below the problem's.
    """
    return [("problems", "/"), (problem, f"/problem/{problem}"), *steps]


def chart_scripts(problem: str, figures: Mapping[str, Any]) -> dict[str, Any]:
    """What ``_charts.html`` draws a page's plotly.js figures with: ``figures`` (by the id of the element each
    goes in) as JSON, the evaluation pages' URL a click on a point opens, and plotly.js's URL.

    Args:
        problem: the page's problem.
        figures: plotly figures (:mod:`raytuner.view.figures`) by element id.
    """
    return {
        "figures": htmlsafe_json_dumps(dict(figures), allow_nan=False),
        "evaluations": evaluation_url(problem, ""),
        "plotly": PLOTLY_URL,
    }


def objective_choices(view: HistoryView, path: str, /, **args: Any) -> list[Choice]:
    """The outputs a page may be about, each linking to ``path`` about it (none where there is one).

    The problem's objectives, and the outputs it only records (marked so); never a constraint, an
    output that is bounded and not optimised (the Pareto front shows which configurations meet it).
    Each is named as the table's column and the charts name it (an output ``time`` is ``output.time``
    beside the records' own ``time``).

    Args:
        view: the problem's view.
        path: the page's path.
        **args: the page's other query items.
    """
    space = view.problem_space
    constraints = {o.name for o in space.output_space if o.bounded and not o.optimize} if space else set()
    outputs = [o for o in view.columns["output"] if o not in constraints or o == view.objective]
    if len(outputs) < 2:
        return []
    roles = {o.name: ("" if o.optimize else " (recorded)") for o in space.output_space} if space else {}
    named = view.columns["output"]  # an output's name as its column and charts give it (``output.time``)
    return [
        Choice(named[o], None if o == view.objective else url(path, **args, objective=o), roles.get(o, ""))
        for o in outputs
    ]


def filled(view: HistoryView, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` without the columns no row of ``view`` fills (a problem without fidelities has five), details kept.

    Args:
        view: the history.
        rows: rows of its :attr:`HistoryView.frame`.
    """
    return rows.drop(columns=[c for c in view.empty_columns if c not in DETAIL_COLUMNS])


def evaluations_table(
    rows: pd.DataFrame,
    problem: str,
    table_id: str,
    sort_links: dict[str, str] | None = None,
    sorted_by: tuple[str, bool] | None = None,
) -> Table:
    """Evaluations (rows of :attr:`HistoryView.frame`) as a table: each links to its page, failures say why.

    Args:
        rows: the evaluations shown.
        problem: the problem's name.
        table_id: the table's element id.
        sort_links: per column, the URL that sorts by it (default none).
        sorted_by: the column sorted by and whether descending (default none).
    """
    uids = [str(u) for u in rows["uid"]]
    shown = rows.drop(columns=[c for c in DETAIL_COLUMNS if c != "failure"])
    if not shown["failure"].astype(bool).any():  # nothing failed here: no empty column
        shown = shown.drop(columns=["failure"])
    shown.insert(0, "evaluation", [u[:8] for u in uids])
    return Table.of(
        shown,
        table_id,
        sort_links=sort_links,
        row_links={"evaluation": [evaluation_url(problem, u) for u in uids]},
        sorted_by=sorted_by,
    )


def best_table(view: HistoryView, problem: str, task: str | None = None) -> Table:
    """The best evaluation of each task (of ``task`` only, where given), each linking to its page.

    Args:
        view: the problem's view.
        problem: the problem's name.
        task: one task's label (default ``None``: every task).
    """
    best = view.best_table()
    if task is not None:
        best = best[best["task"] == task]
    shown = best[
        [
            "task",
            *view.columns["parameter"].values(),
            view.objective_column,
            "fidelity",
            "pass",
            "bracket",
            "rung",
            "evaluations",
            "failed",
            "total_cost",
        ]
    ].dropna(axis=1, how="all")
    links = {"task": {t: url(f"/problem/{problem}/task", task=t) for t in best["task"]}} if task is None else {}
    uids = [u if isinstance(u, str) else "" for u in best["uid"]]  # NaN: no best yet
    shown.insert(0, "evaluation", [u[:8] for u in uids])
    pages = [evaluation_url(problem, u) if u else "" for u in uids]
    return Table.of(shown, "best", links=links, row_links={"evaluation": pages})


@dataclass(frozen=True)
class Front:
    """Each task's Pareto front (``_front.html``): the goals, the constraints met, the table, the chart's URL."""

    per_task: bool
    goals: str
    bounds: str
    table: Table
    chart: str | None


def front(view: HistoryView, problem: str, task: str | None = None) -> Front | None:
    """With several objectives or output constraints, each task's Pareto front (of ``task`` only, where given).

    Args:
        view: the problem's view.
        problem: the problem's name.
        task: one task's label (default ``None``: every task).
    """
    if not view.multiobjective:
        return None
    space = view.problem_space
    assert space is not None
    outputs = [o.name for o in space.modelled]
    rows = []
    for parameters in view.tasks:
        label = task_label(parameters)
        if task is not None and label != task:
            continue
        for record in view.pareto_front(parameters):
            rows.append(
                {"task": label, **record.tuning_parameter, **{o: record.value(o) for o in outputs}, "uid": record.uid}
            )
    frame = pd.DataFrame(rows, columns=["task", *view.columns["parameter"], *outputs, "uid"])
    return Front(
        per_task=task is None,
        goals=", ".join(f"{o.name} ({o.goal})" for o in space.optimised),
        bounds=", ".join(o.constraint_text() for o in space.output_constraints),
        table=Table.of(frame, "front", row_links={"uid": [evaluation_url(problem, u) for u in frame["uid"]]}),
        chart=url(f"/problem/{problem}/plot/front.svg", task=task) if len(space.optimised) > 1 else None,
    )
