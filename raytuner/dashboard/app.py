"""``raytuner dashboard``: a read-only web application over a history store and a crowd repository.

Pages of a store (a JSON store directory by default, or a MongoDB history):

- ``/``: the problems, with evaluations, tasks and the best value of each;
- ``/problem/NAME``: per task the best configuration, the best-so-far plot, the LCM's task correlation;
- ``/problem/NAME/task?task=LABEL``: one task: its best, its history and parameter plots, its evaluations;
- ``/problem/NAME/evaluations``: the evaluations table, sortable by any column and filtered by task,
  task-parameter range, machine, software and status, paginated on the server;
- ``/problem/NAME/brackets?task=LABEL``: GPTuneBand's brackets and promotions;
- ``/problem/NAME/live``: a view that refreshes as records arrive (a session telling results);
- ``/problem/NAME/analysis?task=LABEL&fidelity=F&x=P&y=Q``: interactive charts (plotly.js, served from
  the ``plotly`` package): every task's history against evaluations or cost (and hypervolume, with
  several objectives), the objective's distribution and when evaluations finished; for one task at
  one fidelity, its Pareto front, parallel coordinates, a GP's contour over two parameters, the
  evaluations by rank, and the objective against each parameter;
- ``/problem/NAME/importance?task=LABEL``: Sobol indices of a GP fitted to one task;
- ``/problem/NAME/evaluation/UID``: one evaluation: its task, configuration, outputs (each one's role
  and constraint), status and failure reason, fidelity and place in GPTuneBand's plan, engine and
  proposer, session and trial ids, machine and software; every table links each row here.

The crowd repository's pages are in :mod:`raytuner.dashboard.crowd_pages`.
Every page is read-only (the only forms that post are sign-in and sign-out; a sign-in
with a signed token records its nonce in the crowd repository, so that it counts once).

Example:
    >>> import tempfile
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.store import JsonStore
    >>> folder = tempfile.mkdtemp()
    >>> with JsonStore(folder) as store:
    ...     store.append("demo", FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 0.25}))
    >>> client = create_app(store=folder).test_client()
    >>> page = client.get("/").get_data(as_text=True)
    >>> "demo" in page and "0.25" in page
    True
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import pandas as pd
from flask import Flask, Response, abort, has_request_context, jsonify, redirect, request, send_file
from markupsafe import escape

from raytuner.analysis import sobol_analysis, surrogate_from_records
from raytuner.dashboard.pages import (
    LOOPBACK_HOSTS,
    cell,
    charts_html,
    nonce,
    plotly_js,
    render,
    secure,
    sobol_html,
    svg,
    table_html,
)
from raytuner.dashboard.sources import PAGE_SIZE, HistoryViews, ServiceViews, StoreViews, TableQuery
from raytuner.dashboard.state import config
from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, check_problem_name
from raytuner.problem.space import ProblemSpace
from raytuner.store import HistoryStore, history_text
from raytuner.view import (
    DETAIL_COLUMNS,
    HistoryView,
    plot_brackets,
    plot_front,
    plot_history,
    plot_parameter,
    plot_task_correlation,
    task_label,
)
from raytuner.view.figures import (
    contour_figure,
    edf_figure,
    evaluations_at,
    fidelities,
    fidelity_figure,
    front_figure,
    history_figure,
    hypervolume_figure,
    numeric_parameters,
    parallel_figure,
    rank_figure,
    slice_figures,
    timeline_figure,
)

__all__ = ["create_app"]


def _source() -> HistoryViews:
    source = config().get("store")
    if source is None:
        abort(404)
    return source


def _view(problem: str) -> HistoryView:
    """The problem's view, of the objective the URL names (``?objective=``; default: the first)."""
    try:
        _source().view(check_problem_name(problem, "problem"))
    except InvalidInputError:
        abort(404)
    return _source().view_of(problem, request.args.get("objective") or None)  # another name: 400, listed


def _objectives(view: HistoryView, problem: str, path: str, /, **args: Any) -> str:
    """A line that chooses the output the page is about (only where the problem has more than one)."""
    outputs = list(view.columns["output"])
    if len(outputs) < 2:
        return ""
    space = view.problem_space
    roles = {o.name: ("" if o.optimize else " (recorded)") for o in space.output_space} if space else {}
    choices = " · ".join(
        f"<b>{escape(o)}</b>{roles.get(o, '')}"
        if o == view.objective
        else f'<a href="{escape(_url(path, **args, objective=o))}">{escape(o)}</a>{roles.get(o, "")}'
        for o in outputs
    )
    return f'<p class="note" id="objectives">objective: {choices}</p>'


def _url(path: str, /, **args: Any) -> str:
    """``path`` with ``args`` as its query; the objective the page is about goes along unless given."""
    if "objective" not in args and has_request_context():
        args["objective"] = request.args.get("objective")
    kept = {k: v for k, v in args.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept) if kept else "")


def _evaluation_url(problem: str, uid: str) -> str:
    return f"/problem/{problem}/evaluation/{uid}"


def _listed(
    rows: pd.DataFrame,
    problem: str,
    table_id: str,
    sort_links: dict[str, str] | None = None,
    sorted_by: tuple[str, bool] | None = None,
) -> str:
    """Evaluations (rows of :attr:`HistoryView.frame`) as a table: each links to its page, failures say why."""
    uids = [str(u) for u in rows["uid"]]
    shown = rows.drop(columns=[c for c in DETAIL_COLUMNS if c != "failure"])
    if not shown["failure"].astype(bool).any():  # nothing failed here: no empty column
        shown = shown.drop(columns=["failure"])
    shown.insert(0, "evaluation", [u[:8] for u in uids])
    return table_html(
        shown,
        table_id,
        sort_links=sort_links,
        row_links={"evaluation": [_evaluation_url(problem, u) for u in uids]},
        sorted_by=sorted_by,
    )


def _best_table(view: HistoryView, problem: str, task: str | None = None) -> str:
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
    links = {"task": {t: _url(f"/problem/{problem}/task", task=t) for t in best["task"]}} if task is None else {}
    uids = [u if isinstance(u, str) else "" for u in best["uid"]]  # NaN: no best yet
    shown.insert(0, "evaluation", [u[:8] for u in uids])
    pages = [_evaluation_url(problem, u) if u else "" for u in uids]
    return table_html(shown, "best", links=links, row_links={"evaluation": pages})


def _front_section(view: HistoryView, problem: str, task: str | None = None) -> str:
    """With several objectives or output constraints: each task's Pareto front as a table and a chart."""
    if not view.multiobjective:
        return ""
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
    chart = (
        f'<img class="chart" id="front-plot" alt="Pareto front" '
        f'src="{escape(_url(f"/problem/{problem}/plot/front.svg", task=task))}">'
        if len(space.optimised) > 1
        else ""
    )
    bounds = ", ".join(o.constraint_text() for o in space.output_constraints)
    return (
        f'<h2>Pareto front{" per task" if task is None else ""}</h2><p class="note">'
        f"{escape(', '.join(f'{o.name} ({o.goal})' for o in space.optimised))}"
        + (f"; output constraints met: {escape(bounds)}" if bounds else "")
        + "; at full fidelity.</p>"
        + table_html(frame, "front", row_links={"uid": [_evaluation_url(problem, u) for u in frame["uid"]]})
        + chart
    )


def _overview() -> tuple[str, int]:
    source = _source()
    rows = []
    for name in source.problems():
        view = source.view(name)
        best = view.best_table()[view.objective_column] if view.records else []
        shown = ", ".join(f"{v:.6g}" for v in best if v == v) or "-"
        rows.append(
            f'<tr><td><a href="/problem/{escape(name)}">{escape(name)}</a></td>'
            f'<td class="num">{len(view.records)}</td><td class="num">{len(view.tasks)}</td>'
            f"<td>{escape(view.objective)} ({view.goal})</td><td>{escape(shown)}</td></tr>"
        )
    body = (
        '<table id="problems"><thead><tr><th>problem</th><th>evaluations</th><th>tasks</th><th>objective</th>'
        f"<th>best per task</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    if isinstance(source, ServiceViews):
        return render("Tuning service", body + _sessions_table(source))
    return render(f"Histories in {source.directory or 'MongoDB'}", body)


def _sessions_table(source: ServiceViews) -> str:
    rows = "".join(
        f'<tr><td>{escape(s["session_id"])}</td><td><a href="/problem/{escape(s["problem_name"])}/live">'
        f'{escape(s["problem_name"])}</a></td><td>{escape(s["engine"])}</td><td class="num">{s["evaluations"]}'
        f'</td><td class="num">{s["failed"]}</td><td class="num">{s["pending"]}</td>'
        f"<td>{'finished' if s['finished'] else 'running'}</td></tr>"
        for s in source.sessions()
    )
    return (
        '<h2>Sessions</h2><table id="sessions"><thead><tr><th>session</th><th>problem</th><th>engine</th>'
        f"<th>evaluations</th><th>failed</th><th>pending</th><th>state</th></tr></thead><tbody>{rows}</tbody>"
        "</table>"
    )


def _problem(problem: str) -> tuple[str, int]:
    view = _view(problem)
    has_model = any((m.raytuner or {}).get("hyperparameters") for m in view.models)
    has_brackets = view.frame["bracket"].notna().any()
    body = (
        f'<p class="note">{len(view.records)} evaluations, {len(view.tasks)} tasks, {len(view.models)} models; '
        f"objective {escape(view.objective)} ({view.goal}; from the {view.goal_source})."
        f' <a href="{escape(_url(f"/problem/{problem}/evaluations"))}">all evaluations</a> ·'
        f' <a href="{escape(_url(f"/problem/{problem}/live"))}">live view</a> ·'
        f' <a href="{escape(_url(f"/problem/{problem}/analysis"))}">analysis</a> ·'
        f' <a href="{escape(_url(f"/problem/{problem}/importance"))}">parameter importance</a>'
        + (f' · <a href="{escape(_url(f"/problem/{problem}/brackets"))}">brackets</a>' if has_brackets else "")
        + "</p>"
        + _objectives(view, problem, f"/problem/{problem}")
        + f"<h2>Best per task</h2>{_best_table(view, problem)}"
        + _front_section(view, problem)
        + f'<h2>Best so far</h2><img class="chart" id="history-plot" alt="best so far" '
        f'src="{escape(_url(f"/problem/{problem}/plot/history.svg"))}">'
        f'<img class="chart" alt="best so far against cost" '
        f'src="{escape(_url(f"/problem/{problem}/plot/history.svg", by="cost"))}">'
        + (
            f'<h2>Task correlation</h2><img class="chart" alt="task correlation" '
            f'src="{escape(_url(f"/problem/{problem}/plot/correlation.svg"))}">'
            if has_model
            else ""
        )
    )
    return render(problem, body)


def _task(problem: str) -> tuple[str, int]:
    view = _view(problem)
    label = request.args.get("task", "")
    if label not in set(view.frame["task"]):
        return render(problem, "", error=f"task: {label[:80]!r} is no task of {problem}", status=404)
    recent = _filled(view.frame)
    recent = recent[recent["task"] == label].tail(PAGE_SIZE)
    plots = "".join(
        f'<img class="chart" alt="{escape(p)} against {escape(view.objective)}" '
        f'src="{escape(_url(f"/problem/{problem}/plot/parameter.svg", task=label, parameter=p))}">'
        for p in view.columns["parameter"]
    )
    body = (
        _trail(problem, (label, _url(f"/problem/{problem}/task", task=label)))
        + _objectives(view, problem, f"/problem/{problem}/task", task=label)
        + f"<h2>Best</h2>{_best_table(view, problem, label)}"
        + _front_section(view, problem, label)
        + f'<p><a href="{escape(_url(f"/problem/{problem}/evaluations", task=label))}">evaluations of this task'
        f'</a> · <a href="{escape(_url(f"/problem/{problem}/analysis", task=label))}">analysis</a> · '
        f'<a href="{escape(_url(f"/problem/{problem}/importance", task=label))}">parameter importance</a></p>'
        f'<img class="chart" id="history-plot" alt="best so far" '
        f'src="{escape(_url(f"/problem/{problem}/plot/history.svg", task=label))}">{plots}'
        f"<h2>Latest evaluations</h2>{_listed(recent.iloc[::-1], problem, 'latest')}"
    )
    return render(f"{problem}: {label}", body)


def _trail(problem: str, *steps: tuple[str, str]) -> str:
    """The breadcrumbs of a page below a problem: the overview, the problem, then ``(text, url)`` steps."""
    links = [("problems", "/"), (problem, f"/problem/{problem}"), *steps]
    return (
        '<p class="trail" id="trail">'
        + " › ".join(f'<a href="{escape(url)}">{escape(text)}</a>' for text, url in links)
        + "</p>"
    )


def _filled(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the columns no row fills (a problem without fidelities has five), details kept."""
    empty = [
        c for c in frame.columns if c not in DETAIL_COLUMNS and not (frame[c].notna() & ~frame[c].isin([""])).any()
    ]
    return frame.drop(columns=empty)


def _query(frame: pd.DataFrame, view: HistoryView) -> tuple[TableQuery, str | None]:
    """The table query of this request's arguments, or every row with the reason it was refused."""
    task_columns = [c for c in view.columns["task"].values() if pd.api.types.is_numeric_dtype(frame[c])]
    try:
        query = TableQuery.from_args(request.args, task_columns)
        query.apply(frame)  # an unknown sort column is refused here
    except InvalidInputError as exc:
        return TableQuery(), str(exc)
    return query, None


def _evaluations(problem: str) -> tuple[str, int]:
    view = _view(problem)
    frame = view.frame
    task_columns = [c for c in view.columns["task"].values() if pd.api.types.is_numeric_dtype(frame[c])]
    query, error = _query(frame, view)
    rows, total, page = query.apply(frame)
    rows = rows[_filled(frame).columns]
    args = {k: v for k, v in request.args.items() if k not in ("sort", "desc", "page")} if error is None else {}
    sort_links = {
        c: _url(
            f"/problem/{problem}/evaluations",
            **args,
            sort=c,
            desc="1" if query.sort == c and not query.descending else "",
        )
        for c in ("failure", *rows.columns.drop(list(DETAIL_COLUMNS), errors="ignore"))
    }
    pages = max(1, -(-total // PAGE_SIZE))
    here = f"/problem/{problem}/evaluations"
    order = {"sort": query.sort, "desc": "1" if query.descending else ""}

    def pager(where: str) -> str:
        suffix = "" if where == "top" else f"-{where}"
        links = " ".join(
            f'<a id="page-{label}{suffix}" href="{escape(_url(here, **args, **order, page=p))}">{label}</a>'
            for label, p in (("previous", page - 1), ("next", page + 1))
            if 1 <= p <= pages
        )
        return f'<p class="pager" id="pager-{where}">{links}</p>'

    options = "".join(
        f"<option{' selected' if t == query.task else ''}>{escape(t)}</option>" for t in sorted(set(view.frame["task"]))
    )

    def bound(column: str, end: str, word: str) -> str:
        value = escape(request.args.get(f"{end}.{column}", "") if error is None else "")
        return f'<label>{escape(column)} {word}<input name="{end}.{escape(column)}" size="6" value="{value}"></label>'

    ranges = "".join(bound(c, "min", "from") + bound(c, "max", "to") for c in task_columns)
    statuses = "".join(f"<option{' selected' if s == query.status else ''}>{s}</option>" for s in ("ok", "failed"))
    kept = "".join(  # the order survives a new filter
        f'<input type="hidden" name="{name}" value="{escape(value)}">'
        for name, value in {**order, "objective": request.args.get("objective", "")}.items()
        if value
    )
    form = (
        f'<form class="filters" id="filters" method="get"><label>task<select name="task"><option value="">any'
        f"</option>{options}</select></label>{ranges}"
        f'<label>machine<input name="machine" value="{escape(query.machine)}"></label>'
        f'<label>software<input name="software" value="{escape(query.software)}"></label>'
        f'<label>status<select name="status"><option value="">any</option>{statuses}</select></label>'
        f'{kept}<button id="apply">filter</button></form>'
    )
    downloads = " · ".join(
        f'<a id="download-{kind}" href="{escape(_url(f"{here}.{kind}", **args, **order))}">{text}</a>'
        for kind, text in (("csv", "CSV"), ("json", "GPTune JSON"))
    )
    body = (
        _trail(problem, ("evaluations", here))
        + _objectives(view, problem, here, **{k: v for k, v in {**args, **order}.items() if k != "objective"})
        + form
        + f'<p class="note" id="count">{total} of {len(frame)} evaluations match; page {page} of {pages}.</p>'
        + f'<p class="note" id="downloads">Download them: {downloads}</p>'
        + pager("top")
        + _listed(
            rows, problem, "evaluations", sort_links, sorted_by=(query.sort, query.descending) if query.sort else None
        )
        + pager("bottom")
    )
    return render(f"{problem}: evaluations", body, error=error, status=200 if error is None else 400)


def _download(problem: str, kind: str) -> Response:
    """The evaluations the table's query matches, as CSV or as a GPTune history file."""
    view = _view(problem)
    query, error = _query(view.frame, view)
    if error is not None:
        raise InvalidInputError("query", error)
    rows = query.matching(view.frame)
    if kind == "csv":
        body, mimetype = rows.to_csv(index=False), "text/csv"
    else:
        records = [view.records[i] for i in rows.index]
        body = history_text(HistoryDocument(tuning_problem_name=view.problem, func_eval=records))
        mimetype = "application/json"
    response = Response(body, mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{problem}-evaluations.{kind}"'
    return response


def _pairs(table_id: str, pairs: dict[str, Any]) -> str:
    """A two-column table of names and values (values as JSON where they are not text or numbers)."""
    if not pairs:
        return f'<p class="note" id="{escape(table_id)}">none recorded</p>'
    shown = {
        k: (v if isinstance(v, (str, int, float)) or v is None else json.dumps(v, sort_keys=True))
        for k, v in pairs.items()
    }
    frame = pd.DataFrame({"name": list(shown), "value": [cell(v) for v in shown.values()]})
    return table_html(frame, table_id)


#: SALib's base sample size on the importance page.
IMPORTANCE_SAMPLES = 512
#: The most evaluations (a task's newest) the importance page fits its GP to, so a large store stays quick.
IMPORTANCE_RECORDS = 1000


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


def _importance(problem: str) -> tuple[str, int]:
    """Parameter importance for one task: Sobol indices of a GP fitted to its evaluations at one fidelity."""
    view = _view(problem)
    label = _chosen_task(view, problem)
    fidelity = _chosen_fidelity(view)
    head = _choosing(view, problem, "importance", label, fidelity)
    everything = evaluations_at(view, label, fidelity, limit=len(view.records))
    mine = _records_of(view, everything.tail(IMPORTANCE_RECORDS))
    task = next(t for t in view.tasks if task_label(t) == label)
    where = _where(view, fidelity)
    space = view.problem_space or _observed_space(view)
    spans = "its spaces" if view.problem_space is not None else "the ranges its evaluations span"
    if space is None or len(mine) < 3:
        why = "the problem's spaces are unknown" if space is None else f"{len(mine)} successful evaluations{where}"
        return render(
            f"{problem}: parameter importance",
            head + f'<p class="note" id="no-importance">No analysis: {escape(why)}; 3 are needed.</p>',
        )
    done = config().setdefault("importance", {})  # by (problem, objective, task, fidelity): the view, the HTML
    key = (problem, view.objective, label, fidelity)
    held = done.get(key)
    if held is None or held[0] is not view:
        model = surrogate_from_records(space, mine, objective=view.objective, task=task, executor=InlineExecutor())
        analysis = sobol_analysis(model, num_samples=IMPORTANCE_SAMPLES, task=task, seed=0)
        held = (view, sobol_html(analysis, f"{problem}, {label}: {view.objective}"))
        done[key] = held
    note = (
        f'<p class="note">Sobol indices of {escape(view.objective)} over the parameter space, computed on a GP '
        f"fitted to this task's {len(mine)} {'newest ' if len(everything) > len(mine) else ''}successful "
        f"evaluations{escape(where)} (SALib, {IMPORTANCE_SAMPLES} base samples, seed 0) over {spans}: S1 is the "
        "share of the variance a parameter explains alone, ST with the others. Computed on the surrogate, not on "
        "the samples, so it speaks of the whole space rather than of where the tuner happened to look.</p>"
    )
    return render(f"{problem}: parameter importance", head + note + held[1])


def _records_of(view: HistoryView, rows: pd.DataFrame) -> list[FunctionEvaluation]:
    """The records of rows of :attr:`HistoryView.frame` (its index is the records' order)."""
    return [view.records[int(n)] for n in rows.index]


def _where(view: HistoryView, fidelity: float | None) -> str:
    """Which evaluations a chart or analysis counts: `` at full fidelity``, `` at fidelity F`` or (none has one) all."""
    levels = fidelities(view)
    if not levels:
        return ""
    return " at full fidelity" if fidelity is None or fidelity == levels[-1] else f" at fidelity {cell(fidelity)}"


def _choosing(view: HistoryView, problem: str, page: str, label: str, fidelity: float | None, **kept: Any) -> str:
    """A page's head below a problem: breadcrumbs, then lines that choose its objective, task and fidelity."""
    here = f"/problem/{problem}/{page}"
    kept = {"task": label, "fidelity": None if fidelity is None else cell(fidelity), **kept}
    levels = fidelities(view)
    return (
        _trail(problem, (page, _url(here, task=label)))
        + _objectives(view, problem, here, **kept)
        + _choices("task", [task_label(t) for t in view.tasks], label, lambda t: _url(here, **{**kept, "task": t}))
        + (
            _choices(
                "fidelity",
                levels,
                levels[-1] if fidelity is None else fidelity,
                lambda f: _url(here, **{**kept, "fidelity": cell(f)}),
            )
            if len(levels) > 1
            else ""
        )
    )


#: The most evaluations (a task's newest) the analysis page's contour fits its GP to.
CONTOUR_RECORDS = 300


def _chosen_task(view: HistoryView, problem: str) -> str:
    """The task the URL names (``?task=``; default: the first); another name: a 404 page."""
    labels = [task_label(t) for t in view.tasks]
    label = request.args.get("task") or (labels[0] if labels else "")
    if label not in labels:
        abort(Response(render(problem, "", error=f"task: {label[:80]!r} is no task of {problem}", status=404)[0], 404))
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


def _choices(name: str, values: Sequence[Any], chosen: Any, url: Any) -> str:
    """A line of links that choose one of ``values`` (the chosen one bold); ``url(value)`` is each link."""
    links = " · ".join(
        f"<b>{escape(cell(v))}</b>" if v == chosen else f'<a href="{escape(url(v))}">{escape(cell(v))}</a>'
        for v in values
    )
    return f'<p class="note" id="{escape(name)}-choice">{escape(name)}: {links}</p>'


def _select(name: str, values: Sequence[str], chosen: str) -> str:
    """A drop-down list of ``values`` named ``name``, ``chosen`` selected."""
    options = "".join(f"<option{' selected' if v == chosen else ''}>{escape(v)}</option>" for v in values)
    return f'<select name="{escape(name)}">{options}</select>'


def _analysis(problem: str) -> tuple[str, int]:
    """Interactive charts of a problem: its tasks' histories and distributions, one task's parameters."""
    view = _view(problem)
    label = _chosen_task(view, problem)
    fidelity = _chosen_fidelity(view)
    numeric = numeric_parameters(view)
    x = request.args.get("x") or (numeric[0] if numeric else "")
    y = request.args.get("y") or next((n for n in numeric if n != x), "")
    pair = len(numeric) >= 2 or bool(request.args.get("x") or request.args.get("y"))
    if pair:
        rank = rank_figure(view, label, x, y, fidelity)  # checks x and y before any other work
    here = f"/problem/{problem}/analysis"
    kept = {"task": label, "fidelity": fidelity, "x": request.args.get("x"), "y": request.args.get("y")}
    evaluations = evaluations_at(view, label, fidelity, limit=len(view.records))
    head = (
        _choosing(view, problem, "analysis", label, fidelity, x=request.args.get("x"), y=request.args.get("y"))
        + '<p class="note">Hover a point for its evaluation, click it to open its page; click a task or group in '
        "the legend to hide it (double-click: it alone); drag to zoom, double-click to zoom back.</p>"
    )
    several = view.problem_space is not None and len(view.problem_space.optimised) > 1
    figures: dict[str, Any] = {
        "chart-history": history_figure(view),
        "chart-edf": edf_figure(view, fidelity),
        "chart-timeline": timeline_figure(view),
    }
    if several:
        figures["chart-hypervolume"] = hypervolume_figure(view)
        figures["chart-front"] = front_figure(view, label)
    body = (
        '<h2>History of every task</h2><div class="plot" id="chart-history"></div>'
        + ('<div class="plot" id="chart-hypervolume"></div>' if several else "")
        + '<h2>Distribution of every task</h2><div class="plot" id="chart-edf"></div>'
        '<h2>When evaluations finished</h2><div class="plot" id="chart-timeline"></div>'
        f"<h2>{escape(label)}: {len(evaluations)} successful evaluations{escape(_where(view, fidelity))}</h2>"
    )
    if not len(evaluations):
        body += '<p class="note" id="no-evaluations">Nothing to draw for this task here.</p>'
        return render(f"{problem}: analysis", head + body + charts_html(figures, _evaluation_url(problem, "")))
    figures["chart-parallel"] = parallel_figure(view, label, fidelity)
    if len(fidelities(view)) > 1:
        figures["chart-fidelity"] = fidelity_figure(view, label)
        body += '<h3>Across fidelities</h3><div class="plot" id="chart-fidelity"></div>'
    if several:
        body += '<h3>Pareto front</h3><div class="plot" id="chart-front"></div>'
    body += '<h3>Parallel coordinates</h3><div class="plot" id="chart-parallel"></div>'
    if pair:
        form = (
            f'<form class="choose" id="pair" method="get" action="{escape(here)}">'
            + "".join(
                f'<input type="hidden" name="{k}" value="{escape(cell(v))}">'
                for k, v in {**kept, "objective": request.args.get("objective")}.items()
                if k not in ("x", "y") and v not in (None, "")
            )
            + f"<label>across {_select('x', numeric, x)}</label><label>up {_select('y', numeric, y)}</label>"
            + "<button>draw</button></form>"
        )
        figures["chart-rank"] = rank
        model = _contour_model(view, problem, label, fidelity)
        contour = note = ""
        if model is not None:
            figures["chart-contour"] = contour_figure(view, label, x, y, model, fidelity)
            contour = '<div class="plot" id="chart-contour"></div>'
            note = (
                '<p class="note">The contour is the predicted mean of a GP fitted to this task\'s newest '
                f"{CONTOUR_RECORDS} or fewer successful evaluations here, the other parameters at the best one's "
                "values: the model's view between the points.</p>"
            )
        body += (
            f'<h3>Two parameters</h3>{form}{note}<div class="plots">{contour}<div class="plot" id="chart-rank"></div>'
            "</div>"
        )
    else:
        body += (
            '<p class="note" id="no-pair">A contour needs two numeric parameters; '
            f"{escape(problem)} has {len(numeric)}.</p>"
        )
    slices = slice_figures(view, label, fidelity)
    figures.update({f"chart-slice-{n}": f for n, f in enumerate(slices.values())})
    body += (
        f'<h3>{escape(view.objective)} against each parameter</h3><div class="plots">'
        + "".join(f'<div class="plot" id="chart-slice-{n}"></div>' for n in range(len(slices)))
        + "</div>"
    )
    return render(f"{problem}: analysis", head + body + charts_html(figures, _evaluation_url(problem, "")))


def _contour_model(view: HistoryView, problem: str, label: str, fidelity: float | None) -> Any:
    """A GP of the objective fitted to the task's newest evaluations at ``fidelity`` (cached per view)."""
    space = view.problem_space or _observed_space(view)
    task = next(t for t in view.tasks if task_label(t) == label)
    mine = _records_of(view, evaluations_at(view, label, fidelity, limit=CONTOUR_RECORDS))
    if space is None or len(mine) < 3:
        return None
    done = config().setdefault("contour", {})
    key = (problem, view.objective, label, fidelity)
    held = done.get(key)
    if held is None or held[0] is not view:
        held = (
            view,
            surrogate_from_records(space, mine, objective=view.objective, task=task, executor=InlineExecutor()),
        )
        done[key] = held
    return held[1]


def _evaluation(problem: str, uid: str) -> tuple[str, int]:
    """The page of one evaluation: what ran, what it gave or why it failed, where it stands in the plan."""
    view = _view(problem)
    index = next((n for n, r in enumerate(view.records) if r.uid == uid), None)
    if index is None:
        return render(problem, "", error=f"uid: no evaluation {uid[:80]!r} in {problem}", status=404)
    record = view.records[index]
    p = record.raytuner
    space = view.problem_space
    roles = {
        o.name: ("objective, " + o.goal if o.optimize else "recorded") for o in (space.output_space if space else [])
    }
    bounds = {o.name: o.constraint_text() for o in (space.output_constraints if space else [])}
    outputs = pd.DataFrame(
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
    failure = (p.failure_message if p else None) or ""
    parent = p.parent if p else None
    plan = {
        k: v
        for k, v in {
            "fidelity": p and p.fidelity,
            "cost": p and p.cost,
            "bracket": p and p.bracket,
            "rung": p and p.rung,
            "pass": p and p.pass_,
        }.items()
        if v is not None
    }
    label = task_label(record.task_parameter)
    body = (
        f'<p class="note" id="status">status: <b>{escape(record.status)}</b>'
        + (f' — <span id="failure">{escape(failure)}</span>' if failure else "")
        + "</p>"
        + f"<h2>Task</h2>{_pairs('task', record.task_parameter)}"
        + f"<h2>Configuration</h2>{_pairs('configuration', record.tuning_parameter)}"
        + f"<h2>Outputs</h2>{table_html(outputs, 'outputs')}"
        + (f"<h2>Fidelity and plan</h2>{_pairs('plan', plan)}" if plan else "")
        + (
            f'<p>continues <a id="parent" href="{escape(_evaluation_url(problem, parent))}">{escape(parent[:8])}</a></p>'
            if parent
            else ""
        )
        + "<h2>Provenance</h2>"
        + _pairs(
            "provenance",
            {
                "engine": (p.engine if p else None) or record.modeling or "",
                "proposer": (p.proposer if p else None) or "",
                "session": (p.session_id if p else None) or "",
                "trial": (p.trial_id if p else None) or "",
                "uid": record.uid,
                "time": cell(view.frame["time"].iloc[index]),
                "source": record.source,
            },
        )
        + f"<h2>Machine</h2>{_pairs('machine', {**record.machine_configuration, **((p.machine or {}) if p else {})})}"
        + f"<h2>Software</h2>{_pairs('software', record.software_configuration)}"
        + (
            f"<h2>Additional output</h2>{_pairs('additional', record.additional_output)}"
            if record.additional_output
            else ""
        )
    )
    trail = _trail(
        problem,
        (label, _url(f"/problem/{problem}/task", task=label)),
        ("evaluations", _url(f"/problem/{problem}/evaluations", task=label)),
    )
    return render(f"{problem}: evaluation {uid[:8]}", trail + body)


_LIVE_SCRIPT = """<script>
let seen = "";
async function poll() {
  const status = document.getElementById("live-status");
  try {
    const answer = await fetch(location.pathname + ".json", {cache: "no-store"});
    if (!answer.ok) { throw new Error("HTTP " + answer.status); }
    const data = await answer.json();
    const state = data.evaluations + "/" + data.in_flight;
    if (state !== seen) { seen = state; document.getElementById("live").innerHTML = data.html; }
    status.textContent = "checked at " + new Date().toLocaleTimeString();
    status.className = "note";
  } catch (e) {
    status.textContent = "cannot reach the dashboard (" + e.message + "); trying again";
    status.className = "error";
  }
  setTimeout(poll, 1000);
}
poll();
</script>"""


def _live_state(problem: str) -> dict[str, Any]:
    """What the live view shows: the view's counts, trials in flight, the newest evaluation, the fragment."""
    view = _view(problem)
    in_flight = _source().in_flight(problem)
    last = view.frame["time"].max() if view.records else None
    when = cell(last) if last is not None and last == last else ""
    finished = bool(view.records) and in_flight == 0
    state = (
        f"{in_flight} trial{'s' if in_flight != 1 else ''} in flight"
        if in_flight
        else "no trial in flight: the run has finished (or waits for its next trial)"
    ) + (f"; the newest evaluation at {when}" if when else "")
    recent = _filled(view.frame).tail(20).iloc[::-1]
    chart = (
        f'<img class="chart" id="live-chart" alt="best so far per task" '
        f'src="{escape(_url(f"/problem/{problem}/plot/history.svg", n=len(view.records)))}">'
        if view.records
        else ""
    )
    html = (
        f'<p id="live-count">{len(view.records)} evaluations</p>'
        f'<p class="note" id="live-state" data-finished="{str(finished).lower()}">{escape(state)}</p>'
        f"{chart}{_best_table(view, problem)}<h2>Latest</h2>{_listed(recent, problem, 'latest')}"
    )
    return {"evaluations": len(view.records), "in_flight": in_flight, "finished": finished, "last": when, "html": html}


def create_app(
    store: HistoryStore | str | os.PathLike[str] | None = None,
    crowd: Any = None,
    service: Any = None,
    warm: bool = False,
    allowed_hosts: Sequence[str] | None = None,
) -> Flask:
    """The dashboard's Flask application over a store or a tuning service, and/or a crowd repository.

    Args:
        store: a store directory, a ``mongodb://`` URI or an open store (``None``: no store pages).
        crowd: a :class:`~raytuner.crowd.CrowdRepository` or its MongoDB URI (``None``: no crowd pages).
        service: a :class:`~raytuner.client.RemoteTuner` of a running tuning service: its sessions and
            their problems take the place of a store's (``None``: none).
        warm: read every problem now, so the first page is as fast as the next.
        allowed_hosts: the host names a request's ``Host`` header may name (default: the loopback
            names, :data:`~raytuner.dashboard.pages.LOOPBACK_HOSTS`; the server adds the address it
            listens on): a page asked for by another name (a DNS-rebinding site) is refused with 400.

    Every answer carries a content security policy (no script but the page's own, with a fresh
    nonce; nothing fetched from elsewhere; no framing) and the usual security headers.
    """
    if store is None and crowd is None and service is None:
        raise InvalidInputError("store", "the dashboard needs a store, a tuning service or a crowd repository")
    if store is not None and service is not None:
        raise InvalidInputError("service", "show a store or a tuning service, not both")
    app = Flask("raytuner.dashboard")
    app.secret_key = secrets.token_bytes(32)  # sign-in cookies last as long as the process
    app.config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        TRUSTED_HOSTS=list(LOOPBACK_HOSTS if allowed_hosts is None else allowed_hosts),
    )
    app.after_request(secure)
    source = StoreViews(store) if store is not None else ServiceViews(service) if service is not None else None
    if source is not None and warm:
        source.warm()
    app.config["RAYTUNER"] = {"store": source, "crowd": None}

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return Response(status=204)

    @app.errorhandler(RaytunerError)
    def refused(exc: RaytunerError) -> tuple[str, int]:  # one line, never a traceback
        return render("Not possible", "", error=str(exc), status=400 if isinstance(exc, InvalidInputError) else 503)

    @app.errorhandler(404)
    def not_found(_: Any) -> tuple[str, int]:
        return render("Not found", "", error="no such page", status=404)

    app.add_url_rule("/", "overview", _overview if source is not None else lambda: redirect("/crowd"))
    app.add_url_rule("/problem/<problem>", "problem", _problem)
    app.add_url_rule("/problem/<problem>/task", "task", _task)
    app.add_url_rule("/problem/<problem>/evaluations", "evaluations", _evaluations)
    app.add_url_rule("/problem/<problem>/evaluation/<uid>", "evaluation", _evaluation)
    app.add_url_rule("/problem/<problem>/importance", "importance", _importance)
    app.add_url_rule("/problem/<problem>/analysis", "analysis", _analysis)

    @app.get("/static/plotly.min.js")
    def plotly() -> Response:
        return send_file(plotly_js(), mimetype="text/javascript", max_age=86400)

    app.add_url_rule("/problem/<problem>/evaluations.csv", "evaluations_csv", lambda problem: _download(problem, "csv"))
    app.add_url_rule(
        "/problem/<problem>/evaluations.json", "evaluations_json", lambda problem: _download(problem, "json")
    )

    @app.get("/problem/<problem>/brackets")
    def brackets(problem: str) -> tuple[str, int]:
        view = _view(problem)
        tasks = [t for t in sorted(set(view.frame["task"]))]
        links = " · ".join(
            f'<a href="{escape(_url(f"/problem/{problem}/brackets", task=t))}">{escape(t)}</a>' for t in tasks
        )
        chosen = request.args.get("task") or (tasks[0] if tasks else "")
        if not tasks or view.frame["bracket"].isna().all():
            return render(
                f"{problem}: brackets",
                _trail(problem, ("brackets", f"/problem/{problem}/brackets"))
                + '<p class="note" id="no-brackets">No evaluation of this problem ran in a bracket: '
                "it was not tuned with GPTuneBand.</p>",
            )
        return render(
            f"{problem}: brackets",
            _trail(problem, ("brackets", f"/problem/{problem}/brackets"))
            + f"<p>{links}</p>"
            + (
                f'<img class="chart" id="brackets-plot" alt="brackets" '
                f'src="{escape(_url(f"/problem/{problem}/plot/brackets.svg", task=chosen))}">'
            ),
        )

    @app.get("/problem/<problem>/plot/<kind>.svg")
    def plot(problem: str, kind: str) -> Response:
        view = _view(problem)
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
            return Response(render("Not possible", "", error=str(exc))[0], status=400, mimetype="text/html")
        return Response(svg(figure), mimetype="image/svg+xml")

    @app.get("/problem/<problem>/live")
    def live(problem: str) -> tuple[str, int]:
        fragment = _live_state(problem)["html"]
        return render(
            f"{problem}: live",
            _trail(problem, ("live", f"/problem/{problem}/live"))
            + '<p class="note">Refreshes as evaluations arrive. <span id="live-status"></span></p>'
            + f'<div id="live">{fragment}</div>'
            + _LIVE_SCRIPT.replace("<script>", f'<script nonce="{nonce()}">', 1),
        )

    @app.get("/problem/<problem>/live.json")
    def live_json(problem: str) -> Response:
        return jsonify(_live_state(problem))

    if crowd is not None:
        from raytuner.dashboard.crowd_pages import register_crowd

        register_crowd(app, crowd)
    return app
