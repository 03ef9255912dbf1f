"""The live view of a problem: a page that refreshes as records arrive (a session telling results).

The page polls ``/problem/NAME/live.json`` every second: the view's counts, the trials in flight,
the newest evaluation's time and the page's fragment (``_live.html``), redrawn when the counts change.

Example: the script polls the page's URL with ``.json`` appended,
``/problem/demo/live.json``, and gets ``{"evaluations": 1, "in_flight": 0, "finished": true,
"last": "2026-01-02 03:04:05", "html": ...}``.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, render_template

from raytuner.dashboard.pages import cell, render
from raytuner.dashboard.shared import (
    best_table,
    evaluations_table,
    filled,
    objective_choices,
    problem_view,
    source,
    trail,
    url,
)

__all__ = ["blueprint"]

#: The blueprint of these pages.
blueprint = Blueprint("live", __name__)


def _fragment(problem: str) -> dict[str, Any]:
    """What the live view's fragment (``_live.html``) shows: counts, trials in flight, the newest evaluation."""
    view = problem_view(problem)
    in_flight = source().in_flight(problem)
    last = view.frame["time"].max() if view.records else None
    return {
        "evaluations": len(view.records),
        "in_flight": in_flight,
        "last": cell(last) if last is not None and last == last else "",
        "finished": bool(view.records) and in_flight == 0,
        "chart": url(f"/problem/{problem}/plot/history.svg", n=len(view.records)) if view.records else None,
        "best": best_table(view, problem),
        "latest": evaluations_table(filled(view, view.frame.tail(20)).iloc[::-1], problem, "latest"),
    }


@blueprint.get("/problem/<problem>/live")
def page(problem: str) -> tuple[str, int]:
    """The live view: the fragment now, and the script that redraws it as records arrive (``?objective=``: of it)."""
    return render(
        "live.html",
        f"{problem}: live",
        trail=trail(problem, ("live", f"/problem/{problem}/live")),
        objectives=objective_choices(problem_view(problem), f"/problem/{problem}/live"),
        **_fragment(problem),
    )


@blueprint.get("/problem/<problem>/live.json")
def state(problem: str) -> Response:
    """The live view's state as JSON (the page's script polls it)."""
    shown = _fragment(problem)
    counts = {k: shown[k] for k in ("evaluations", "in_flight", "finished", "last")}
    return jsonify({**counts, "html": render_template("_live.html", **shown)})
