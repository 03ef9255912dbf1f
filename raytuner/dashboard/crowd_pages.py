"""The dashboard's crowd-repository pages: GPTune's history-database site, behind the crowd's access levels.

- ``/signin``, ``/signout``: sign in with a crowd API key. The key is posted in
  the form's body, checked against the repository and kept only in the
  server's memory under a random token (the browser's cookie holds the token,
  never the key); no page, URL or log line ever shows it.
- ``/crowd``: the problems the visitor may see, the machines and software with their aliases;
- ``/crowd/problem/NAME``: evaluations by a meta-description query (``problem_space`` and
  ``configuration_space`` as GPTuneCrowd writes them), with a download of the
  matching records as a GPTune JSON file (``/crowd/problem/NAME/download``);
- ``/crowd/problem/NAME/predict``: the surrogate's prediction at a chosen task and configuration;
- ``/crowd/problem/NAME/sensitivity``: the Sobol indices of a task, as a table and a chart.

Signed out, a visitor sees public records only; signed in, what the
repository's access levels allow that user (public, registered, their own,
shared with them or their groups): every page and every download asks the
repository with that user.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, Response, redirect, request
from markupsafe import escape

from raytuner.analysis import sobol_analysis, surrogate_from_records
from raytuner.crowd import CrowdRepository, Unauthenticated
from raytuner.dashboard.pages import render, sobol_html, table_html
from raytuner.dashboard.signin import form_token, sign_in, sign_out, signed_in_user
from raytuner.dashboard.state import repository
from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, HistoryDocument
from raytuner.problem.space import ProblemSpace
from raytuner.protocol import json_field
from raytuner.session.progress import task_label
from raytuner.store import history_text
from raytuner.view import DETAIL_COLUMNS, load_history

__all__ = ["register_crowd", "infer_problem_space"]

log = logging.getLogger(__name__)

#: The most Sobol base samples a page may ask for (each costs (2 d + 2) surrogate predictions).
MAX_SOBOL_SAMPLES = 1 << 14


def infer_problem_space(records: list[FunctionEvaluation]) -> dict[str, Any]:
    """A ``problem_space`` query spanning ``records``: each task parameter, parameter and output with its range.

    Numbers become ``real`` (or ``integer`` when every value is whole) between
    their least and largest value (one value: from it to it plus 1, or plus its
    size for a real); other values become ``categorical``.

    Args:
        records: evaluations of one problem.

    >>> infer_problem_space([FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0})])["parameter_space"]
    [{'name': 'x', 'type': 'real', 'lower_bound': 0.5, 'upper_bound': 1.5}]
    """

    def space(values_of: Any) -> list[dict[str, Any]]:
        names = list(dict.fromkeys(k for r in records for k in values_of(r)))
        out = []
        for name in names:
            values = [values_of(r).get(name) for r in records if values_of(r).get(name) is not None]
            if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                whole = all(isinstance(v, int) for v in values)
                low, high = min(values), max(values)
                if high == low:  # one value: a space needs a range, so widen it upwards
                    high = low + (1 if whole else max(abs(low), 1.0))
                out.append(
                    {"name": name, "type": "integer" if whole else "real", "lower_bound": low, "upper_bound": high}
                )
            else:
                out.append({"name": name, "type": "categorical", "categories": sorted({str(v) for v in values})})
        return out

    ok = [r for r in records if r.status == "ok"]
    return {
        "input_space": space(lambda r: r.task_parameter),
        "parameter_space": space(lambda r: r.tuning_parameter),
        "output_space": space(lambda r: r.evaluation_result if r.status == "ok" else {}) if ok else [],
    }


#: The JSON a crowd page's form takes, by field: what each must hold.
_FIELDS: dict[str, type] = {"problem_space": dict, "configuration_space": dict, "task": dict, "parameters": list}


def _json_arg(name: str, default: Any) -> Any:
    return json_field(name, (request.values.get(name) or "").strip(), _FIELDS[name], default)


def _query(problem: str) -> tuple[list[FunctionEvaluation], dict[str, Any], dict[str, Any]]:
    problem_space = _json_arg("problem_space", None)
    configuration_space = _json_arg("configuration_space", None)
    records = repository().evaluations_for(
        signed_in_user(), problem, problem_space or None, configuration_space or None
    )
    return records, problem_space or {}, configuration_space or {}


def _textarea(name: str, value: Any, rows: int = 4) -> str:
    text = json.dumps(value, indent=1) if value not in (None, "", {}) else ""
    return f'<label>{name}<textarea name="{name}" rows="{rows}">{escape(text)}</textarea></label>'


def _crowd_home() -> tuple[str, int]:
    repo, user = repository(), signed_in_user()
    problems = repo.problems_for(user)
    rows = "".join(
        f'<tr><td><a href="/crowd/problem/{escape(p)}">{escape(p)}</a></td><td class="num">{n}</td></tr>'
        for p, n in problems.items()
    )

    def catalog(kind: str, entries: Mapping[str, list[str]]) -> str:
        body = "".join(
            f"<tr><td>{escape(name)}</td><td>{escape(', '.join(aliases))}</td></tr>"
            for name, aliases in entries.items()
        )
        return (
            f'<h2>{kind.title()}</h2><table id="{kind}"><thead><tr><th>{kind}</th><th>aliases</th></tr></thead>'
            f"<tbody>{body}</tbody></table>"
        )

    who = "public records only (signed out)" if user is None else f"the records {escape(user.username)} may see"
    body = (
        f'<p class="note">Showing {who}.</p><h2>Problems</h2><table id="crowd-problems"><thead><tr>'
        f"<th>problem</th><th>evaluations</th></tr></thead><tbody>{rows}</tbody></table>"
        + catalog("machine", repo.machines.entries())
        + catalog("software", repo.software.entries())
    )
    return render("Crowd repository", body)


def _crowd_problem(problem: str) -> tuple[str, int]:
    records, problem_space, configuration_space = _query(problem)  # bad input: the app's one-line error page
    view = load_history(HistoryDocument(tuning_problem_name=problem, func_eval=records))
    best = view.best_table()[["task", *view.columns["parameter"].values(), view.objective_column, "evaluations"]]
    frame = view.frame.drop(columns=list(DETAIL_COLUMNS))
    shown = frame.head(200)
    suggestion = problem_space or infer_problem_space(records)
    query = request.query_string.decode()
    body = (
        f'<form class="filters" method="get" style="display:block">{_textarea("problem_space", problem_space)}'
        f'{_textarea("configuration_space", configuration_space)}<button id="run-query">query</button></form>'
        f'<p class="note" id="count">{len(records)} evaluations match'
        + (f"; the first {len(shown)} shown" if len(shown) < len(records) else "")
        + "."
        f' <a id="download" href="/crowd/problem/{escape(problem)}/download?{escape(query)}">download as a '
        f'GPTune JSON file</a> · <a href="/crowd/problem/{escape(problem)}/predict">predict</a> · '
        f'<a href="/crowd/problem/{escape(problem)}/sensitivity">sensitivity</a></p>'
        + (f"<h2>Best per task</h2>{table_html(best, 'best')}" if records else "")
        + f"<h2>Evaluations</h2>{table_html(shown, 'evaluations')}"
        f"<details><summary>the whole problem space of these records</summary><pre>"
        f"{escape(json.dumps(suggestion, indent=1))}</pre></details>"
    )
    return render(f"Crowd: {problem}", body)


def _download(problem: str) -> Response:
    records, _, _ = _query(problem)
    text = history_text(HistoryDocument(tuning_problem_name=problem, func_eval=records))
    return Response(
        text, mimetype="application/json", headers={"Content-Disposition": f'attachment; filename="{problem}.json"'}
    )


def _surrogate_inputs(problem: str) -> tuple[ProblemSpace, dict[str, Any], list[FunctionEvaluation]]:
    """The problem the query's records span (the query's problem space, else inferred), its JSON and the records."""
    records, problem_space, _ = _query(problem)
    space = problem_space or infer_problem_space(records)
    return ProblemSpace.parse(space), space, records


def _surrogate_page(
    problem: str,
    title: str,
    fields: str,
    button: str,
    compute: Callable[[Any, dict[str, Any], int], str],
    check: Callable[[], None] | None = None,
) -> tuple[str, int]:
    """A surrogate page: the query's problem space and a task in a form, ``compute``'s result once asked.

    ``check`` refuses the page's own inputs before any query or fit is made.
    """
    result, error, space = "", None, None
    try:
        if check is not None and request.args.get("task") is not None:
            check()
        problem_space, space, records = _surrogate_inputs(problem)
        task = _json_arg("task", {})
        if request.args.get("task") is not None:
            model = surrogate_from_records(problem_space, records, task=task or None, executor=InlineExecutor())
            result = compute(model, task, len(records))
    except RaytunerError as exc:  # bad input or a refused query: shown above the form
        space, error = _json_arg_safe("problem_space"), str(exc)
    form = (
        f'<form method="get" style="display:block">{_textarea("problem_space", space, 6)}'
        f'{_textarea("task", _json_arg_safe("task"), 2)}{fields}<button id="{button}">{button[4:]}</button></form>'
    )
    return render(f"Crowd: {problem}: {title}", form + result, error=error, status=400 if error else 200)


def _json_arg_safe(name: str) -> Any:
    try:
        return _json_arg(name, None)
    except InvalidInputError:
        return None


def _predict(problem: str) -> tuple[str, int]:
    def compute(model: Any, task: dict[str, Any], n: int) -> str:
        points = _json_arg("parameters", [])
        names = list(model.parameter_names)
        if not points or not all(isinstance(p, dict) and set(p) == set(names) for p in points):
            raise InvalidInputError(
                "parameters", "a JSON list of objects, each with every tuning parameter", allowed=names
            )
        mean, variance = model.predict([dict(p) for p in points], task=task or None)
        rows = "".join(
            f'<tr><td>{escape(json.dumps(p))}</td><td class="num">{m:.6g}</td><td class="num">{v:.6g}</td></tr>'
            for p, m, v in zip(points, mean, variance)
        )
        return (
            f'<table id="prediction"><thead><tr><th>parameters at {escape(task_label(task))}</th>'
            f"<th>mean</th><th>variance</th></tr></thead><tbody>{rows}</tbody></table>"
            f'<p class="note">from {n} evaluations</p>'
        )

    return _surrogate_page(
        problem,
        "surrogate prediction",
        _textarea("parameters", _json_arg_safe("parameters"), 3),
        "run-predict",
        compute,
    )


def _sensitivity(problem: str) -> tuple[str, int]:
    text = request.args.get("num_samples") or "512"

    def check() -> None:
        if not (text.isascii() and text.isdigit() and 0 < int(text) <= MAX_SOBOL_SAMPLES):
            raise InvalidInputError(
                "num_samples", f"{text[:20]!r} is not a count", allowed=[f"a power of 2 up to {MAX_SOBOL_SAMPLES}"]
            )

    def compute(model: Any, task: dict[str, Any], n: int) -> str:
        analysis = sobol_analysis(model, num_samples=int(text), task=task or None, seed=0)
        return sobol_html(analysis, f"{problem}, {task_label(task)}") + f'<p class="note">from {n} evaluations</p>'

    fields = f'<label>Sobol samples (a power of 2)<input name="num_samples" value="{escape(text)}"></label>'
    return _surrogate_page(problem, "Sobol sensitivity", fields, "run-sensitivity", compute, check)


def _signin_form() -> str:
    return (
        '<form method="post" action="/signin" autocomplete="off"><label>crowd API key, or a sign-in token '
        "(<code>raytuner crowd keys token</code>) "
        '<input type="password" name="api_key" id="api-key" autocomplete="off"></label> '
        f'<input type="hidden" name="form" value="{form_token()}"><button id="signin">sign in</button></form>'
    )


def _signin() -> Any:
    if request.method == "GET":
        return render("Sign in", _signin_form())
    if not form_token(request.form.get("form", "")):
        return render(
            "Sign in",
            _signin_form(),
            error="form: this sign-in form is stale or from another site; sign in from this page",
            status=400,
        )
    try:
        user = sign_in(request.form.get("api_key", ""))
    except Unauthenticated:
        return render("Sign in", _signin_form(), error="that API key or token was not accepted", status=401)
    log.info("dashboard sign-in of %s", user.username)
    return redirect("/crowd", code=303)


def _signout() -> Any:
    sign_out()
    return redirect("/crowd", code=303)


def register_crowd(app: Flask, crowd: CrowdRepository | str) -> None:
    """Add the crowd pages and sign-in to ``app``.

    Args:
        app: the dashboard's application.
        crowd: a crowd repository, or its MongoDB URI (the database is the URI's path, else the default;
            opened without creating indexes: the dashboard only reads, but for a signed sign-in's nonce).
    """
    if isinstance(crowd, str):
        from pymongo.uri_parser import parse_uri

        database = parse_uri(crowd).get("database")
        crowd = CrowdRepository(crowd, create_indexes=False, **({"database": database} if database else {}))
    app.config["RAYTUNER"].update(crowd=crowd, signins={})
    app.add_url_rule("/crowd", "crowd", _crowd_home)
    app.add_url_rule("/crowd/problem/<problem>", "crowd_problem", _crowd_problem)
    app.add_url_rule("/crowd/problem/<problem>/download", "crowd_download", _download)
    app.add_url_rule("/crowd/problem/<problem>/predict", "crowd_predict", _predict)
    app.add_url_rule("/crowd/problem/<problem>/sensitivity", "crowd_sensitivity", _sensitivity)
    app.add_url_rule("/signin", "signin", _signin, methods=["GET", "POST"])
    app.add_url_rule("/signout", "signout", _signout, methods=["POST"])
