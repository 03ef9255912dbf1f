"""The dashboard's HTML: one layout, small templates, no script or style fetched from elsewhere.

Templates are Jinja2 (autoescaped by Flask). Most charts are SVG images drawn
on the server by :mod:`raytuner.view.plots`; the analysis page's are interactive,
drawn by plotly.js (:mod:`raytuner.view.figures` gives their data), which the
dashboard serves from the ``plotly`` package itself: nothing comes from a CDN.
Scripts run only by the request's nonce.
"""

from __future__ import annotations

import importlib.util
import io
import json
import secrets
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from flask import Response, g, render_template_string
from markupsafe import escape
from matplotlib.figure import Figure

from raytuner.dashboard.signin import signed_in_user
from raytuner.dashboard.state import config
from raytuner.view import plot_sobol

#: Cells longer than this many characters show their start and, on hover, the rest.
LONG_CELL = 40

__all__ = [
    "LAYOUT",
    "LOOPBACK_HOSTS",
    "PLOTLY_URL",
    "svg",
    "table_html",
    "cell",
    "render",
    "nonce",
    "secure",
    "sobol_html",
    "plotly_js",
    "charts_html",
]

#: Where the dashboard serves plotly.js (the copy inside the installed ``plotly`` package).
PLOTLY_URL = "/static/plotly.min.js"

#: The host names a dashboard answers to by default: loopback only (a request naming another host,
#: as a DNS-rebinding page would, is refused). Werkzeug's check cannot name an IPv6 literal.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1")

#: The headers every answer carries; ``{nonce}`` is the request's script nonce.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

_RENDER = threading.Lock()

LAYOUT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }} · raytuner</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;color:#222}
header{background:#1f3a5f;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:center}
header a{color:#fff;text-decoration:none}header .who{margin-left:auto;font-size:.9em}
main{padding:1em 1.5em}table{border-collapse:collapse;font-size:.88em;margin:.6em 0}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left}th{background:#eef2f7}
th a{color:#1f3a5f}td.num{text-align:right;font-variant-numeric:tabular-nums}
form.filters{display:flex;flex-wrap:wrap;gap:.6em;align-items:end;margin:.5em 0}
form.filters label{display:flex;flex-direction:column;font-size:.8em}
textarea{width:100%;font-family:monospace}.note{color:#666;font-size:.9em}.error{color:#a00}
img.chart{width:49%;min-width:min(420px,100%);max-width:100%;border:1px solid #eee;vertical-align:top}
.scroll{overflow-x:auto;max-width:100%}td.long{max-width:16em;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
th.sorted{background:#dde6f2}th.ascending::after{content:" \\25B2"}th.descending::after{content:" \\25BC"}.trail{font-size:.9em;margin:0 0 .6em}.pager{margin:.4em 0}
header{flex-wrap:wrap}
.plot{width:100%;height:440px;border:1px solid #eee;margin:.4em 0}
.plots{display:flex;flex-wrap:wrap;gap:.5em}.plots .plot{width:calc(50% - .5em);min-width:min(420px,100%);height:360px}
form.choose{display:inline-flex;gap:.5em;align-items:center}
</style></head><body>
<header><a href="/"><b>raytuner</b></a>{% if has_store %}<a href="/">histories</a>{% endif %}
{% if has_crowd %}<a href="/crowd">crowd repository</a>{% endif %}
{% if has_crowd %}<span class="who">{% if user %}signed in as <b id="user">{{ user }}</b>
<form method="post" action="/signout" style="display:inline"><button>sign out</button></form>
{% else %}<a href="/signin">sign in</a>{% endif %}</span>{% endif %}</header>
<main><h1>{{ title }}</h1>
{% if error %}<p class="error" id="error">{{ error }}</p>{% endif %}
{{ body|safe }}</main></body></html>"""


def svg(figure: Figure) -> bytes:
    """A figure as SVG bytes (rendering is serialised: matplotlib's text layout is shared state).

    Args:
        figure: a matplotlib figure.
    """
    buffer = io.BytesIO()
    with _RENDER:
        figure.savefig(buffer, format="svg")
    return buffer.getvalue()


def cell(value: Any) -> str:
    """A table cell's text: reals to 6 significant digits, missing values empty.

    Args:
        value: the value.

    >>> cell(0.123456789), cell(float("nan")), cell(None), cell(3)
    ('0.123457', '', '', '3')
    """
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def table_html(
    frame: pd.DataFrame,
    table_id: str,
    sort_links: Mapping[str, str] | None = None,
    links: Mapping[str, Mapping[str, str]] | None = None,
    row_links: Mapping[str, Sequence[str]] | None = None,
    sorted_by: tuple[str, bool] | None = None,
) -> str:
    """An HTML table of ``frame`` (escaped); headers link to ``sort_links[column]`` where given.

    Args:
        frame: the rows to show.
        table_id: the table's HTML id.
        sort_links: per column, the URL that sorts by it.
        links: per column, cell text to URL (a cell becomes a link).
        row_links: per column, one URL per row (that column's cell of each row becomes a link).
        sorted_by: the column the rows are sorted by and whether descending (its header is marked).

    The table scrolls inside its own box, so a narrow window never scrolls sideways; a long
    cell shows its start and, on hover, all of it.
    """

    def header(column: str) -> str:
        sort = ""
        if sorted_by is not None and sorted_by[0] == column:  # marked by the style sheet: ▲ or ▼ after it
            order = "descending" if sorted_by[1] else "ascending"
            sort = f' aria-sort="{order}" class="sorted {order}"'
        name = escape(column)
        if sort_links and column in sort_links:
            return f'<th{sort}><a href="{escape(sort_links[column])}">{name}</a></th>'
        return f"<th{sort}>{name}</th>"

    head = "".join(header(c) for c in frame.columns)
    rows = []
    for row, values in enumerate(frame.itertuples(index=False)):
        cells = []
        for column, value in zip(frame.columns, values):
            text = cell(value)
            target = (links or {}).get(column, {}).get(text)
            if row_links and column in row_links:
                target = row_links[column][row]
            body = f'<a href="{escape(target)}">{escape(text)}</a>' if target else escape(text)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                cls = ' class="num"'
            elif len(text) > LONG_CELL:
                cls = f' class="long" title="{escape(text)}"'
            else:
                cls = ""
            cells.append(f"<td{cls}>{body}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    table = f'<table id="{escape(table_id)}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return f'<div class="scroll">{table}</div>'


def sobol_html(analysis: Any, title: str) -> str:
    """A Sobol analysis as the dashboard shows it: a table of S1 and ST with their intervals, and a chart.

    Args:
        analysis: a :class:`~raytuner.analysis.sensitivity.SensitivityResult`.
        title: the chart's title.
    """
    rows = "".join(
        f"<tr><td>{escape(p)}</td>"
        + "".join(
            f'<td class="num">{v:.4f}</td>'
            for v in (analysis.S1[p], analysis.S1_conf[p], analysis.ST[p], analysis.ST_conf[p])
        )
        + "</tr>"
        for p in analysis.parameters
    )
    chart = svg(plot_sobol(analysis, title=title)).decode()
    return (
        f'<table id="sobol"><thead><tr><th>parameter</th><th>S1</th><th>S1 conf</th><th>ST</th>'
        f'<th>ST conf</th></tr></thead><tbody>{rows}</tbody></table><div id="sobol-chart">'
        f"{chart[chart.index('<svg') :]}</div>"
    )


def plotly_js() -> Path:
    """The plotly.js file that ships inside the installed ``plotly`` package (the dashboard serves it)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the plotly package is not installed (pip install plotly)")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"


_CHARTS_SCRIPT = """<script>
const block = document.getElementById("figures");
const figures = JSON.parse(block.textContent);
function draw(element) {
  const figure = figures[element.id];
  Plotly.newPlot(element, figure.data, figure.layout, {responsive: true, displaylogo: false});
  element.on("plotly_click", (event) => {
    const uid = event.points.length ? event.points[0].customdata : null;
    if (typeof uid === "string" && uid) { window.location.href = block.dataset.evaluations + encodeURIComponent(uid); }
  });
}
const watcher = new IntersectionObserver((seen) => {
  for (const entry of seen) {
    if (entry.isIntersecting) { watcher.unobserve(entry.target); draw(entry.target); }
  }
}, {rootMargin: "300px"});
for (const id of Object.keys(figures)) { watcher.observe(document.getElementById(id)); }
</script>"""


def charts_html(figures: Mapping[str, Any], evaluations: str) -> str:
    """The scripts that draw ``figures`` (plotly.js figures by the id of the ``div`` each goes in).

    The figures travel as a JSON block the page's nonce'd script reads; each is
    drawn as it comes near the window (a long page opens fast); a click on a
    point opens ``evaluations + uid`` (its evaluation's page).

    Args:
        figures: plotly.js figures (:mod:`raytuner.view.figures`) by element id.
        evaluations: the URL an evaluation's uid is appended to.
    """
    data = json.dumps(figures, allow_nan=False).replace("<", "\\u003c").replace(">", "\\u003e")
    return (
        f'<script type="application/json" id="figures" data-evaluations="{escape(evaluations)}">{data}</script>'
        f'<script nonce="{nonce()}" src="{PLOTLY_URL}"></script>'
        + _CHARTS_SCRIPT.replace("<script>", f'<script nonce="{nonce()}">', 1)
    )


def nonce() -> str:
    """This request's script nonce: the one inline script a page may carry names it."""
    if "nonce" not in g:
        g.nonce = secrets.token_urlsafe(16)
    return str(g.nonce)


def secure(response: Response) -> Response:
    """``response`` with :data:`SECURITY_HEADERS` (an SVG image: a policy that runs nothing at all).

    Args:
        response: the answer about to leave.
    """
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value.format(nonce=nonce()))
    if response.mimetype == "image/svg+xml":
        response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


def render(title: str, body: str, error: str | None = None, status: int = 200) -> tuple[str, int]:
    """A page in the dashboard's layout.

    Args:
        title: the page's title.
        body: its HTML (already escaped).
        error: an error line to show above it.
        status: the HTTP status.
    """
    state = config()
    user = signed_in_user() if state.get("crowd") is not None else None
    return render_template_string(
        LAYOUT,
        title=title,
        body=body,
        error=error,
        user=user and user.username,
        has_store=state.get("store") is not None,
        has_crowd=state.get("crowd") is not None,
    ), status
