"""``raytuner dashboard``: a read-only web application over a history store and a crowd repository.

Pages of a store (a JSON store directory by default, or a MongoDB history):

- ``/``: the problems, with evaluations, tasks and the best value of each;
- ``/problem/NAME``: per task the best configuration, the best-so-far plot, the LCM's task correlation;
- ``/problem/NAME/task?task=LABEL``: one task: its best, its history and parameter plots, its evaluations;
- ``/problem/NAME/evaluations``: the evaluations table, sortable by any column and filtered by task,
  a range of any parameter or output, machine, software and status, paged on the server (first, last,
  a page's number, its size);
- ``/problem/NAME/brackets?task=LABEL``: GPTuneBand's brackets and promotions;
- ``/problem/NAME/live``: a view that refreshes as records arrive (a session telling results);
- ``/problem/NAME/analysis?task=LABEL&fidelity=F&x=P&y=Q``: interactive charts (plotly.js, served from
  the ``plotly`` package): every task's history against evaluations or cost (and hypervolume, with
  several objectives), the objective's distribution and when evaluations ran; for one task at
  one fidelity, its Pareto front, parallel coordinates (axes to choose, a range drawn on an axis
  filtering a table of the evaluations), a GP's contour over two parameters, the evaluations by rank,
  and the objective against each parameter;
- ``/problem/NAME/importance?task=LABEL``: Sobol indices of a GP fitted to one task;
- ``/problem/NAME/evaluation/UID``: one evaluation: its task, configuration, outputs (each one's role
  and constraint), status and failure reason, fidelity and place in GPTuneBand's plan, engine and
  proposer, session and trial ids, machine and software; every table links each row here.

Each area is a Flask blueprint of its own module, its pages Jinja templates
(``raytuner/dashboard/templates``, autoescaped): :mod:`~raytuner.dashboard.problems`,
:mod:`~raytuner.dashboard.analysis`, :mod:`~raytuner.dashboard.evaluations`,
:mod:`~raytuner.dashboard.live`, the crowd repository's :mod:`~raytuner.dashboard.crowd_pages`
and :mod:`~raytuner.dashboard.signin`. Every page is read-only (the only forms that post are sign-in and sign-out; a sign-in
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

import os
import secrets
from collections.abc import Sequence
from typing import Any

from flask import Blueprint, Flask, Response, request, send_file

from raytuner.dashboard.analysis import blueprint as analysis
from raytuner.dashboard.evaluations import blueprint as evaluations
from raytuner.dashboard.live import blueprint as live
from raytuner.dashboard.pages import (
    LOOPBACK_HOSTS,
    PLOTLY_URL,
    compress,
    gzipped_plotly_js,
    nonce,
    plotly_js,
    render,
    secure,
)
from raytuner.dashboard.problems import blueprint as problems
from raytuner.dashboard.shared import url
from raytuner.dashboard.sources import ServiceViews, StoreViews
from raytuner.errors import InvalidInputError, RaytunerError
from raytuner.store import HistoryStore

__all__ = ["create_app"]

#: What every application has: the icon, plotly.js, the error pages.
site = Blueprint("site", __name__)


@site.get("/favicon.ico")
def favicon() -> Response:
    """No icon."""
    return Response(status=204)


@site.get(PLOTLY_URL)
def plotly() -> Response:
    """The plotly.js of the installed ``plotly`` package (the analysis page's charts), gzipped where accepted."""
    if not request.accept_encodings["gzip"]:
        return send_file(plotly_js(), mimetype="text/javascript", max_age=86400)
    response = Response(gzipped_plotly_js(), mimetype="text/javascript", headers={"Content-Encoding": "gzip"})
    response.vary.add("Accept-Encoding")
    response.cache_control.public = True
    response.cache_control.max_age = 86400
    return response


@site.app_errorhandler(RaytunerError)
def refused(exc: RaytunerError) -> tuple[str, int]:
    """Bad input (400) or a refused call (503) as a page of one line, never a traceback."""
    return render(
        "layout.html", "Not possible", error=str(exc), status=400 if isinstance(exc, InvalidInputError) else 503
    )


@site.app_errorhandler(404)
def not_found(_: Any) -> tuple[str, int]:
    """A page that does not exist."""
    return render("layout.html", "Not found", error="no such page", status=404)


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
        warm: read every problem now, so the first page of each is as fast as the next (default: each
            problem is read when a page first needs it, so the dashboard starts at once on a large store).
        allowed_hosts: the host names a request's ``Host`` header may name (default: the loopback
            names, :data:`~raytuner.dashboard.pages.LOOPBACK_HOSTS`; the server adds the address it
            listens on): a page asked for by another name (a DNS-rebinding site) is refused with 400.

    Every answer carries a content security policy (no script but the page's own, with a fresh
    nonce; nothing fetched from elsewhere; no framing) and the usual security headers, and is
    gzipped where the client accepts it (:func:`~raytuner.dashboard.pages.compress`).
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
    app.after_request(compress)  # after_request functions run last first: the headers, then compression
    app.after_request(secure)
    app.add_template_global(url)
    app.add_template_global(nonce)
    source = StoreViews(store) if store is not None else ServiceViews(service) if service is not None else None
    if source is not None:
        source.warn_misnamed()
        if warm:
            source.warm()
    app.config["RAYTUNER"] = {"store": source, "crowd": None}
    for area in (site, problems, analysis, evaluations, live):
        app.register_blueprint(area)
    if crowd is not None:
        from raytuner.dashboard.crowd_pages import blueprint as crowd_pages  # the crowd only when shown
        from raytuner.dashboard.crowd_pages import open_crowd
        from raytuner.dashboard.signin import blueprint as signin

        app.config["RAYTUNER"].update(crowd=open_crowd(crowd), signins={})
        app.register_blueprint(crowd_pages)
        app.register_blueprint(signin)
    return app
