"""The evaluations of a problem: the table (filtered, sorted, paged on the server), its downloads, one evaluation.

- ``/problem/NAME/evaluations``: sortable by any column, filtered by task, a range of any task parameter,
  tuning parameter or output, machine, software and status; paged (first, previous, a page's number, next,
  last) at a chosen size;
- ``/problem/NAME/evaluations.csv`` and ``.json``: the rows the table's query matches, as CSV or as a GPTune
  history file;
- ``/problem/NAME/evaluation/UID``: one evaluation: its task, configuration, outputs (each one's role and
  constraint), status and failure reason, fidelity and place in GPTuneBand's plan, engine and proposer,
  session and trial ids, machine and software.

Example: the URL of an evaluation's page, as every table of evaluations links to it:

    >>> from raytuner.dashboard.shared import evaluation_url
    >>> evaluation_url("demo", "5f0c")
    '/problem/demo/evaluation/5f0c'
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from flask import Blueprint, Response, request

from raytuner.dashboard.pages import Table, cell, render
from raytuner.dashboard.shared import (
    evaluation_url,
    evaluations_table,
    filled,
    objective_choices,
    problem_view,
    trail,
    url,
)
from raytuner.dashboard.sources import PAGE_SIZES, TableQuery
from raytuner.errors import InvalidInputError
from raytuner.problem.records import FunctionEvaluation, HistoryDocument
from raytuner.store import history_text
from raytuner.view import DETAIL_COLUMNS, HistoryView, csv_text, task_label

__all__ = ["blueprint"]

#: The blueprint of these pages.
blueprint = Blueprint("evaluations", __name__)


def _range_columns(frame: pd.DataFrame, view: HistoryView) -> list[str]:
    """The numeric columns of task parameters, tuning parameters and outputs (the table filters each by a range)."""
    named = [c for part in ("task", "parameter", "output") for c in view.columns[part].values()]
    return [c for c in named if pd.api.types.is_numeric_dtype(frame[c])]


def _query(frame: pd.DataFrame, view: HistoryView) -> tuple[TableQuery, str | None]:
    """The table query of this request's arguments, or every row with the reason it was refused."""
    try:
        query = TableQuery.from_args(request.args, _range_columns(frame, view))
        query.apply(frame)  # an unknown sort column is refused here
    except InvalidInputError as exc:
        return TableQuery(), str(exc)
    return query, None


@blueprint.get("/problem/<problem>/evaluations")
def table(problem: str) -> tuple[str, int]:
    """The evaluations table: one page of the rows the request's filters match, in its order."""
    view = problem_view(problem)
    frame = view.frame
    query, error = _query(frame, view)
    rows, total, page = query.apply(frame)
    rows = filled(view, rows)
    args = {k: v for k, v in request.args.items() if k not in ("sort", "desc", "page")} if error is None else {}
    here = f"/problem/{problem}/evaluations"
    sort_links = {
        c: url(here, **args, sort=c, desc="1" if query.sort == c and not query.descending else "")
        for c in ("failure", *rows.columns.drop(list(DETAIL_COLUMNS), errors="ignore"))
    }
    pages = query.pages(total)
    order = {"sort": query.sort, "desc": "1" if query.descending else ""}
    return render(
        "evaluations.html",
        f"{problem}: evaluations",
        error=error,
        status=200 if error is None else 400,
        trail=trail(problem, ("evaluations", here)),
        objectives=objective_choices(view, here, **{k: v for k, v in {**args, **order}.items() if k != "objective"}),
        query=query,
        tasks=sorted(frame["task"].unique()),
        ranges=[
            (c, *(request.args.get(f"{end}.{c}", "") if error is None else "" for end in ("min", "max")))
            for c in _range_columns(frame, view)
        ],
        sizes=sorted({*PAGE_SIZES, query.size}),  # a size given in the URL is the one shown as chosen
        kept={k: v for k, v in {**order, "objective": request.args.get("objective", "")}.items() if v},
        downloads={kind: url(f"{here}.{kind}", **args, **order) for kind in ("csv", "json")},
        count={"total": total, "of": len(frame), "page": page, "pages": pages},
        page_links=[
            (label, url(here, **args, **order, page=p))
            for label, p in (("first", 1), ("previous", page - 1), ("next", page + 1), ("last", pages))
            if 1 <= p <= pages and p != page
        ],
        page_kept={k: v for k, v in {**args, **order}.items() if v},
        evaluations=evaluations_table(
            rows, problem, "evaluations", sort_links, sorted_by=(query.sort, query.descending) if query.sort else None
        ),
    )


@blueprint.get("/problem/<problem>/evaluations.<any(csv, json):kind>")
def download(problem: str, kind: str) -> Response:
    """The evaluations the table's query matches, as CSV or as a GPTune history file."""
    view = problem_view(problem)
    query, error = _query(view.frame, view)
    if error is not None:
        raise InvalidInputError("query", error)
    rows = query.matching(view.frame)
    if kind == "csv":
        body, mimetype = csv_text(rows), "text/csv"
    else:
        records = [view.records[i] for i in rows.index]
        body = history_text(HistoryDocument(tuning_problem_name=view.problem, func_eval=records))
        mimetype = "application/json"
    response = Response(body, mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{problem}-evaluations.{kind}"'
    return response


def _outputs(view: HistoryView, record: FunctionEvaluation) -> pd.DataFrame:
    """An evaluation's outputs: each one's value, role (objective and goal, or recorded) and constraint."""
    space = view.problem_space
    roles = {
        o.name: ("objective, " + o.goal if o.optimize else "recorded") for o in (space.output_space if space else [])
    }
    bounds = {o.name: o.constraint_text() for o in (space.output_constraints if space else [])}
    return pd.DataFrame(
        [
            {
                "output": name,
                "value": cell(record.value(name)),
                "role": roles.get(name, ""),
                "constraint": bounds.get(name, ""),
            }
            for name in (space.objectives if space else record.evaluation_result)
        ],
        columns=["output", "value", "role", "constraint"],
    )


def _plan(record: FunctionEvaluation) -> dict[str, Any]:
    """Where an evaluation stands in GPTuneBand's plan: what it recorded of fidelity, cost, bracket, rung, pass."""
    p = record.raytuner
    if p is None:
        return {}
    shown = {"fidelity": p.fidelity, "cost": p.cost, "bracket": p.bracket, "rung": p.rung, "pass": p.pass_}
    return {k: v for k, v in shown.items() if v is not None}


def _provenance(view: HistoryView, index: int) -> dict[str, Any]:
    """Who proposed and ran the evaluation ``view.records[index]``, in which session and trial, and when."""
    record = view.records[index]
    p = record.raytuner
    return {
        "engine": (p.engine if p else None) or record.modeling or "",
        "proposer": (p.proposer if p else None) or "",
        "session": (p.session_id if p else None) or "",
        "trial": (p.trial_id if p else None) or "",
        "uid": record.uid,
        "time": cell(view.frame["time"].iloc[index]),
        "source": record.source,
    }


def _software(record: FunctionEvaluation) -> dict[str, Any]:
    """An evaluation's software, each package's ``version_split`` as its dotted version (``[2, 1, 0]``: 2.1.0)."""
    shown: dict[str, Any] = {}
    for package, value in record.software_configuration.items():
        split = value.get("version_split") if isinstance(value, dict) and len(value) == 1 else None
        shown[package] = ".".join(map(str, split)) if isinstance(split, list) else value
    return shown


def _neighbours(problem: str, view: HistoryView, index: int) -> dict[str, str]:
    """The links to the evaluations of the same task just before and after ``view.records[index]``."""
    task = view.records[index].task_parameter
    before = (r for r in reversed(view.records[:index]) if r.task_parameter == task)
    after = (r for r in view.records[index + 1 :] if r.task_parameter == task)
    found = {"previous": next(before, None), "next": next(after, None)}
    return {k: evaluation_url(problem, r.uid) for k, r in found.items() if r is not None}


@blueprint.get("/problem/<problem>/evaluation/<path:uid>")  # a uid may hold "/" (any text a file holds)
def evaluation(problem: str, uid: str) -> tuple[str, int]:
    """The page of one evaluation: what ran, what it gave or why it failed, where it stands in the plan."""
    view = problem_view(problem)
    index = next((n for n, r in enumerate(view.records) if r.uid == uid), None)
    if index is None:
        return render("layout.html", problem, error=f"uid: no evaluation {uid[:80]!r} in {problem}", status=404)
    record = view.records[index]
    p = record.raytuner
    label = task_label(record.task_parameter)
    parent = p.parent if p else None
    return render(
        "evaluation.html",
        f"{problem}: evaluation {uid[:8]}",
        trail=trail(
            problem,
            (label, url(f"/problem/{problem}/task", task=label)),
            ("evaluations", url(f"/problem/{problem}/evaluations", task=label)),
        ),
        status_text=record.status,
        failure=(p.failure_message if p else None) or "",
        task=Table.of_pairs("task", record.task_parameter),
        configuration=Table.of_pairs("configuration", record.tuning_parameter),
        outputs=Table.of(_outputs(view, record), "outputs"),
        plan=Table.of_pairs("plan", _plan(record)),
        parent=(parent, evaluation_url(problem, parent)) if parent else None,
        promotions=[
            (r.uid, evaluation_url(problem, r.uid)) for r in view.records if r.raytuner and r.raytuner.parent == uid
        ],
        neighbours=_neighbours(problem, view, index),
        provenance=Table.of_pairs("provenance", _provenance(view, index)),
        machine=Table.of_pairs("machine", {**record.machine_configuration, **((p.machine or {}) if p else {})}),
        software=Table.of_pairs("software", _software(record)),
        additional=Table.of_pairs("additional", record.additional_output),
    )
