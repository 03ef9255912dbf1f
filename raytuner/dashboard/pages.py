"""The dashboard's pages: one layout, Jinja templates, no script or style fetched from elsewhere.

The pages are Jinja templates (``raytuner/dashboard/templates``, autoescaped by
Flask: every value a page shows is escaped once, where the template puts it).
Python gives them data only: :class:`Table` for a table, :class:`Choice` for a
line of links that choose, :class:`Sobol` for Sobol indices. Most charts are SVG
images drawn on the server by :mod:`raytuner.view.plots`; the analysis page's
are interactive, drawn by plotly.js (:mod:`raytuner.view.figures` gives their
data), which the dashboard serves from the ``plotly`` package itself: nothing
comes from a CDN. Scripts run only by the request's nonce.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import io
import json
import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from flask import Response, g, render_template, request
from markupsafe import Markup
from matplotlib.figure import Figure

from raytuner.dashboard.state import config
from raytuner.view import plot_sobol

#: Cells longer than this many characters show their start and, on hover, the rest.
LONG_CELL = 40

__all__ = [
    "LOOPBACK_HOSTS",
    "PLOTLY_URL",
    "Cell",
    "Choice",
    "Column",
    "Sobol",
    "Table",
    "cell",
    "compress",
    "gzipped_plotly_js",
    "inline_svg",
    "nonce",
    "plotly_js",
    "render",
    "secure",
    "svg",
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


@dataclass(frozen=True)
class Column:
    """A table's column header: its name, the URL that sorts by it, and ``ascending``/``descending`` if sorted."""

    name: str
    link: str | None = None
    order: str | None = None


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, the URL it links to, whether it is a number (right-aligned) or long (cut, hover)."""

    text: str
    link: str | None = None
    numeric: bool = False

    @property
    def long(self) -> bool:
        """Whether the cell shows only its start (and, on hover, all of it)."""
        return len(self.text) > LONG_CELL


@dataclass(frozen=True)
class Table:
    """A table as the templates show it (``macros.html``'s ``table``): its HTML id, headers and rows of cells.

    Example:
        >>> t = Table.of(pd.DataFrame({"x": [0.5], "name": ["a"]}), "demo", links={"name": {"a": "/a"}})
        >>> [c.name for c in t.columns], t.rows[0]
        (['x', 'name'], (Cell(text='0.5', link=None, numeric=True), Cell(text='a', link='/a', numeric=False)))
    """

    id: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]

    @classmethod
    def of(
        cls,
        frame: pd.DataFrame,
        table_id: str,
        sort_links: Mapping[str, str] | None = None,
        links: Mapping[str, Mapping[str, str]] | None = None,
        row_links: Mapping[str, Sequence[str]] | None = None,
        sorted_by: tuple[str, bool] | None = None,
    ) -> Table:
        """The table of ``frame``'s rows.

        Args:
            frame: the rows to show.
            table_id: the table's HTML id.
            sort_links: per column, the URL that sorts by it.
            links: per column, cell text to URL (a cell becomes a link).
            row_links: per column, one URL per row (that column's cell of each row becomes a link).
            sorted_by: the column the rows are sorted by and whether descending (its header is marked).
        """
        order = "descending" if sorted_by is not None and sorted_by[1] else "ascending"
        columns = tuple(
            Column(
                str(c),
                (sort_links or {}).get(c),
                order if sorted_by is not None and sorted_by[0] == c else None,
            )
            for c in frame.columns
        )
        rows = []
        for row, values in enumerate(frame.itertuples(index=False)):
            cells = []
            for column, value in zip(frame.columns, values):
                text = cell(value)
                target = (links or {}).get(column, {}).get(text)
                if row_links and column in row_links:
                    target = row_links[column][row]
                numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
                cells.append(Cell(text, target or None, numeric))
            rows.append(tuple(cells))
        return cls(table_id, columns, tuple(rows))

    @classmethod
    def of_pairs(cls, table_id: str, pairs: Mapping[str, Any]) -> Table | None:
        """A two-column table of names and values (values as JSON where they are not text or numbers).

        ``None`` where there are no pairs (``macros.html``'s ``pairs`` says "none recorded").

        Args:
            table_id: the table's HTML id.
            pairs: the names and values.
        """
        if not pairs:
            return None
        shown = [
            v if isinstance(v, (str, int, float)) or v is None else json.dumps(v, sort_keys=True)
            for v in pairs.values()
        ]
        return cls.of(pd.DataFrame({"name": list(pairs), "value": [cell(v) for v in shown]}), table_id)


@dataclass(frozen=True)
class Choice:
    """One value of a line that chooses (``macros.html``'s ``choices``): its text, its link (``None``: chosen).

    ``note`` follows the value (an output's role, say).
    """

    text: str
    url: str | None
    note: str = ""


@dataclass(frozen=True)
class Sobol:
    """Sobol indices as a page shows them: per parameter S1, S1's interval, ST, ST's interval; and a chart."""

    rows: tuple[tuple[str, tuple[float, float, float, float]], ...]
    chart: Markup

    @classmethod
    def of(cls, analysis: Any, title: str) -> Sobol:
        """The indices of ``analysis`` (a :class:`~raytuner.analysis.sensitivity.SensitivityResult`).

        Args:
            analysis: the Sobol analysis.
            title: the chart's title.
        """
        rows = tuple(
            (p, (analysis.S1[p], analysis.S1_conf[p], analysis.ST[p], analysis.ST_conf[p])) for p in analysis.parameters
        )
        return cls(rows, inline_svg(plot_sobol(analysis, title=title)))


def inline_svg(figure: Figure) -> Markup:
    """A figure's SVG element, to put inside a page (without the XML prolog of an SVG file).

    Args:
        figure: a matplotlib figure.
    """
    text = svg(figure).decode()
    return Markup(text[text.index("<svg") :])  # matplotlib's own drawing, nothing a user wrote


def plotly_js() -> Path:
    """The plotly.js file that ships inside the installed ``plotly`` package (the dashboard serves it)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the plotly package is not installed (pip install plotly)")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"


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


#: The media types worth compressing (text; images are compressed already), and the fewest bytes that are.
COMPRESSED_TYPES = frozenset({"text/html", "text/css", "text/csv", "text/plain", "text/javascript", "application/json"})
COMPRESS_FROM = 1024


def compress(response: Response) -> Response:
    """``response`` gzipped where the client accepts gzip and it is text of at least :data:`COMPRESS_FROM` bytes.

    An analysis page's figures' data and plotly.js are large text that
    compresses well. The standard library's gzip, which every browser reads; an
    answer that is streamed or already encoded is left as it is. plotly.js
    is compressed once per process (:func:`gzipped_plotly_js`).

    Example:
        >>> from flask import Flask
        >>> app = Flask(__name__)
        >>> with app.test_request_context(headers={"Accept-Encoding": "gzip, br"}):
        ...     answer = compress(Response("x" * 2000, mimetype="text/html"))
        >>> answer.headers["Content-Encoding"], len(answer.get_data()) < 100
        ('gzip', True)

    Args:
        response: the answer about to leave.
    """
    if response.mimetype not in COMPRESSED_TYPES:
        return response
    response.vary.add("Accept-Encoding")
    if (
        response.direct_passthrough
        or response.is_streamed
        or "Content-Encoding" in response.headers
        or not request.accept_encodings["gzip"]
        or (response.content_length or 0) < COMPRESS_FROM
    ):
        return response
    response.set_data(gzip.compress(response.get_data(), compresslevel=6, mtime=0))
    response.headers["Content-Encoding"] = "gzip"
    return response


@functools.cache
def gzipped_plotly_js() -> bytes:
    """:func:`plotly_js`'s file gzipped, once per process (compressing it is too slow to repeat per request)."""
    return gzip.compress(plotly_js().read_bytes(), compresslevel=9, mtime=0)


def render(template: str, title: str, error: str | None = None, status: int = 200, **context: Any) -> tuple[str, int]:
    """A page: ``template`` (one of ``templates/``, in the dashboard's layout) with ``context``.

    Args:
        template: the template's name (``layout.html``: the layout alone, for a page that only says ``error``).
        title: the page's title.
        error: an error line to show above it.
        status: the HTTP status.
        context: what the template shows (values, not HTML: the template escapes them).
    """
    state = config()
    return render_template(
        template,
        title=title,
        error=error,
        has_store=state.get("store") is not None,
        has_crowd=state.get("crowd") is not None,
        **context,
    ), status
