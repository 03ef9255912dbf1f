"""The dashboard's pages are Jinja templates: no HTML in its Python, each value escaped once (``tests/test_release.py`` checks the wheel ships them).

Flask's test client drives the application; the pages in a real browser are in ``tests/test_dashboard.py``.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from raytuner.dashboard import create_app
from raytuner.problem.records import FunctionEvaluation
from raytuner.store import JsonStore

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "raytuner" / "dashboard"

#: HTML's elements (a route's ``<problem>`` is none of them).
ELEMENTS = (
    "a abbr b body br button canvas code details div em footer form h1 h2 h3 h4 h5 h6 head header html i "
    "iframe img input label li link main meta nav ol option p pre script section select small span strong "
    "style summary svg table tbody td textarea th thead title tr ul"
).split()
#: An HTML start or end tag (``<p>``, ``<a href=``, ``</td>``, ``<br/>``) inside a Python string.
TAG = re.compile(rf"</?({'|'.join(ELEMENTS)})(\s|/?>)", re.IGNORECASE)

#: A name that is markup, an entity and an attribute's end at once.
MARKUP = '<b>&"'


def _lines_with_tags(path: Path) -> list[int]:
    """The lines where ``path``'s string literals (f-strings and docstrings too) hold an HTML tag."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [t.start[0] for t in tokens if t.type == tokenize.STRING and TAG.search(t.string)]


def test_no_html_is_left_in_the_dashboard_s_python() -> None:
    found = [f"{path.name}:{line}" for path in sorted(DASHBOARD.glob("*.py")) for line in _lines_with_tags(path)]
    assert found == []


def test_the_guard_sees_tags_in_strings_and_not_a_route(tmp_path: Path) -> None:
    module = tmp_path / "page.py"
    module.write_text(
        'name = "x"\nPAGE = f\'<p class="note">{name}</p>\'\nEND = "</td>"\nROUTE = "/problem/<problem>/task"\n'
    )
    assert _lines_with_tags(module) == [2, 3]


@pytest.fixture
def marked(tmp_path: Path) -> tuple[Path, str]:
    """A store whose parameter, task, output and failure are named ``<b>&"``; the uid of its failure."""
    failure = FunctionEvaluation.create({"t": MARKUP}, {MARKUP: 0.9}, failure=f"diverged {MARKUP}")
    with JsonStore(tmp_path) as store:
        for x in (0.2, 0.4, 0.6):
            store.append("demo", FunctionEvaluation.create({"t": MARKUP}, {MARKUP: x, "x": x}, {MARKUP: x * x}))
        store.append("demo", failure)
    return tmp_path, failure.uid


def test_a_name_of_markup_is_escaped_once_on_every_page(marked: tuple[Path, str]) -> None:
    folder, uid = marked
    client = create_app(store=folder).test_client()
    task = f"t={MARKUP}"
    pages: list[tuple[str, dict[str, str]]] = [
        ("/", {}),
        ("/problem/demo", {}),
        ("/problem/demo/task", {"task": task}),
        ("/problem/demo/evaluations", {}),
        ("/problem/demo/evaluations", {"task": task, "sort": MARKUP}),
        (f"/problem/demo/evaluation/{uid}", {}),
        ("/problem/demo/live", {}),
        ("/problem/demo/analysis", {}),
        ("/problem/demo/importance", {}),
    ]
    for path, query in pages:
        answer = client.get(path, query_string=query)
        page = answer.get_data(as_text=True)
        assert answer.status_code == 200, (path, page[-500:])
        assert MARKUP not in page, path  # never raw
        assert "&amp;lt;" not in page and "&amp;amp;" not in page and "&amp;#34;" not in page, path  # never twice
        assert "&lt;b&gt;&amp;&#34;" in page, path  # once
    fragment = client.get("/problem/demo/live.json").get_json()["html"]
    assert "&lt;b&gt;&amp;&#34;" in fragment and MARKUP not in fragment and "&amp;lt;" not in fragment


def test_an_echoed_wrong_task_of_markup_is_escaped_once(marked: tuple[Path, str]) -> None:
    folder, _ = marked
    answer = create_app(store=folder).test_client().get("/problem/demo/analysis", query_string={"task": MARKUP})
    page = answer.get_data(as_text=True)
    assert answer.status_code == 404 and "task: &#39;&lt;b&gt;&amp;&#34;&#39; is no task of demo" in page


def test_flask_autoescapes_every_template_the_dashboard_ships(marked: tuple[Path, str]) -> None:
    # Flask escapes by a template's file name (.html, .xml, .svg...): a template named otherwise would show
    # names as they are, with no test above reaching it until a page used it
    folder, _ = marked
    app = create_app(store=folder)
    names = sorted(p.relative_to(DASHBOARD / "templates").as_posix() for p in (DASHBOARD / "templates").rglob("*.*"))
    assert "layout.html" in names and "crowd/home.html" in names
    assert [name for name in names if not app.select_jinja_autoescape(name)] == []
    assert sorted(app.jinja_env.list_templates()) == names  # every one loads from this folder, blueprints' too
