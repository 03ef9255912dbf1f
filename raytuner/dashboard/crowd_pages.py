"""The dashboard's crowd-repository pages: GPTune's history-database site, behind the crowd's access levels.

- ``/crowd``: the problems the visitor may see, the machines and software with their aliases;
- ``/crowd/problem/NAME``: evaluations by a meta-description query (``problem_space`` and
  ``configuration_space`` as GPTuneCrowd writes them), with a download of the
  matching records as a GPTune JSON file (``/crowd/problem/NAME/download``);
- ``/crowd/problem/NAME/predict``: the surrogate's prediction at a chosen task and configuration;
- ``/crowd/problem/NAME/sensitivity``: the Sobol indices of a task, as a table and a chart.

Signed out, a visitor sees public records only; signed in, what the
repository's access levels allow that user (public, registered, their own,
shared with them or their groups): every page and every download asks the
repository with that user (sign-in: :mod:`raytuner.dashboard.signin`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, request

from raytuner.analysis import sobol_analysis, surrogate_from_records
from raytuner.crowd import CrowdRepository
from raytuner.dashboard.pages import Sobol, Table, render
from raytuner.dashboard.signin import signed_in_user
from raytuner.dashboard.state import repository
from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.models.executors import InlineExecutor
from raytuner.problem.records import FunctionEvaluation, HistoryDocument
from raytuner.problem.space import ProblemSpace
from raytuner.protocol import json_field
from raytuner.session.progress import task_label
from raytuner.store import history_text
from raytuner.view import DETAIL_COLUMNS, load_history

__all__ = ["blueprint", "infer_problem_space", "open_crowd"]

#: The blueprint of these pages.
blueprint = Blueprint("crowd", __name__)

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


def _json_text(value: Any) -> str:
    """A form field's JSON as a textarea shows it (empty for nothing)."""
    return json.dumps(value, indent=1) if value not in (None, "", {}) else ""


@blueprint.get("/crowd")
def home() -> tuple[str, int]:
    """The problems the visitor may see, the machines and software with their aliases."""
    repo = repository()  # the header's sign-in (raytuner.dashboard.signin) gives the template its user
    return render(
        "crowd/home.html",
        "Crowd repository",
        problems=repo.problems_for(signed_in_user()),
        catalogs={"machine": repo.machines.entries(), "software": repo.software.entries()},
    )


@blueprint.get("/crowd/problem/<problem>")
def problem(problem: str) -> tuple[str, int]:
    """The evaluations a meta-description query matches (the first 200), the best per task, a download."""
    records, problem_space, configuration_space = _query(problem)  # bad input: the app's one-line error page
    view = load_history(HistoryDocument(tuning_problem_name=problem, func_eval=records))
    best = view.best_table()[["task", *view.columns["parameter"].values(), view.objective_column, "evaluations"]]
    shown = view.frame.drop(columns=list(DETAIL_COLUMNS)).head(200)
    return render(
        "crowd/problem.html",
        f"Crowd: {problem}",
        problem=problem,
        problem_space=_json_text(problem_space),
        configuration_space=_json_text(configuration_space),
        count=len(records),
        shown=len(shown),
        query=request.query_string.decode(),
        best=Table.of(best, "best") if records else None,
        evaluations=Table.of(shown, "evaluations"),
        whole=json.dumps(problem_space or infer_problem_space(records), indent=1),
    )


@blueprint.get("/crowd/problem/<problem>/download")
def download(problem: str) -> Response:
    """The records the query matches, as a GPTune JSON file."""
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
    kind: str,
    title: str,
    compute: Callable[[Any, dict[str, Any], int], dict[str, Any]],
    check: Callable[[], None] | None = None,
    **fields: Any,
) -> tuple[str, int]:
    """A surrogate page (``crowd/surrogate.html``): the query's problem space and a task in a form, ``compute``'s
    result once asked.

    ``check`` refuses the page's own inputs before any query or fit is made; ``fields`` are the form's own.
    """
    result: dict[str, Any] = {}
    error, space = None, None
    try:
        if check is not None and request.args.get("task") is not None:
            check()
        problem_space, space, records = _surrogate_inputs(problem)
        task = _json_arg("task", {})
        if request.args.get("task") is not None:
            model = surrogate_from_records(problem_space, records, task=task or None, executor=InlineExecutor())
            result = {**compute(model, task, len(records)), "fitted": len(records)}
    except RaytunerError as exc:  # bad input or a refused query: shown above the form
        space, error = _json_arg_safe("problem_space"), str(exc)
    return render(
        "crowd/surrogate.html",
        f"Crowd: {problem}: {title}",
        error=error,
        status=400 if error else 200,
        kind=kind,
        problem_space=_json_text(space),
        task=_json_text(_json_arg_safe("task")),
        result=result,
        **fields,
    )


def _json_arg_safe(name: str) -> Any:
    try:
        return _json_arg(name, None)
    except InvalidInputError:
        return None


@blueprint.get("/crowd/problem/<problem>/predict")
def predict(problem: str) -> tuple[str, int]:
    """The surrogate's prediction (mean and variance) at a task and configurations."""

    def compute(model: Any, task: dict[str, Any], n: int) -> dict[str, Any]:
        points = _json_arg("parameters", [])
        names = list(model.parameter_names)
        if not points or not all(isinstance(p, dict) and set(p) == set(names) for p in points):
            raise InvalidInputError(
                "parameters", "a JSON list of objects, each with every tuning parameter", allowed=names
            )
        mean, variance = model.predict([dict(p) for p in points], task=task or None)
        rows = [(json.dumps(p), f"{m:.6g}", f"{v:.6g}") for p, m, v in zip(points, mean, variance)]
        return {"at": task_label(task), "prediction": rows}

    parameters = _json_text(_json_arg_safe("parameters"))
    return _surrogate_page(problem, "predict", "surrogate prediction", compute, parameters=parameters)


@blueprint.get("/crowd/problem/<problem>/sensitivity")
def sensitivity(problem: str) -> tuple[str, int]:
    """The Sobol indices of a task (``num_samples`` base samples, up to :data:`MAX_SOBOL_SAMPLES`)."""
    text = request.args.get("num_samples") or "512"

    def check() -> None:
        if not (text.isascii() and text.isdigit() and 0 < int(text) <= MAX_SOBOL_SAMPLES):
            raise InvalidInputError(
                "num_samples", f"{text[:20]!r} is not a count", allowed=[f"a power of 2 up to {MAX_SOBOL_SAMPLES}"]
            )

    def compute(model: Any, task: dict[str, Any], n: int) -> dict[str, Any]:
        analysis = sobol_analysis(model, num_samples=int(text), task=task or None, seed=0)
        return {"sobol": Sobol.of(analysis, f"{problem}, {task_label(task)}")}

    return _surrogate_page(problem, "sensitivity", "Sobol sensitivity", compute, check, num_samples=text)


def open_crowd(crowd: CrowdRepository | str) -> CrowdRepository:
    """A crowd repository, or the one of a MongoDB URI (the database is the URI's path, else the default;
    opened without creating indexes: the dashboard only reads, but for a signed sign-in's nonce).

    Args:
        crowd: a crowd repository or its MongoDB URI.
    """
    if isinstance(crowd, str):
        from pymongo.uri_parser import parse_uri

        database = parse_uri(crowd).get("database")
        crowd = CrowdRepository(crowd, create_indexes=False, **({"database": database} if database else {}))
    return crowd
