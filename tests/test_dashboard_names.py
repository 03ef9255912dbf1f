"""Whatever names a store holds, the dashboard shows them as text: odd file names, markup in charts, formulas in CSV.

- a JSON store's file whose name is no problem name is skipped, and named on the overview (and in the
  command's log), while the store's problems are served;
- parameter, output and task names that are markup or a ``hovertemplate``'s ``%{...}`` are drawn
  literally by plotly.js in real headless Chromium, never as links or line breaks;
- a CSV download or export carries no cell a spreadsheet would run as a formula.
"""

from __future__ import annotations

import csv
import html
import io
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from dashboard_helpers import ROOT, chromium, policy_violations
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from raytuner.cli import main
from raytuner.dashboard import create_app, serve
from raytuner.problem.records import FunctionEvaluation
from raytuner.store import JsonStore

#: File names a store's folder may come to hold that are no problem's name.
ODD_NAMES = ("x y z.json", "GPTune-Demo (1).json", "résumé-тест.json", "a" * 235 + ".json")

#: A parameter, an output and a task named as markup or as a hovertemplate's value.
LINK = '<a href="https://evil.example/">x</a>'
BREAK = "b<br>c"
TEMPLATE = "%{x}"

#: Cells a spreadsheet would run as formulas.
FORMULAS = ('=HYPERLINK("http://x")', "=1+2")


def _store(folder: Path) -> Path:
    """A JSON store with the problem ``demo``, beside a copy of its file under each of :data:`ODD_NAMES`."""
    with JsonStore(folder) as store:
        for x in (0.2, 0.4):
            store.append("demo", FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": x * x}))
    for name in ODD_NAMES:
        (folder / name).write_bytes((folder / "demo.json").read_bytes())
    return folder


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_file_named_as_no_problem_is_skipped_and_named_on_the_overview(tmp_path: Path, name: str) -> None:
    with JsonStore(tmp_path) as store:
        store.append("demo", FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 0.25}))
    (tmp_path / name).write_bytes((tmp_path / "demo.json").read_bytes())
    client = create_app(store=tmp_path, warm=True).test_client()
    answer = client.get("/")
    page = answer.get_data(as_text=True)
    assert answer.status_code == 200, page[-500:]
    assert '<a href="/problem/demo">demo</a>' in page
    assert f"<code>{html.escape(name)}</code>: not a problem name: 1-128 characters" in page
    assert "rename it to" in page
    later = name.removesuffix(".json") + ".json.journal"  # a journal appearing while the dashboard runs
    (tmp_path / later).write_text('["func_eval", {}]\n')
    answer = client.get("/")
    assert answer.status_code == 200 and f"<code>{html.escape(later)}</code>" in answer.get_data(as_text=True)
    assert client.get("/problem/demo").status_code == 200


def test_the_dashboard_command_starts_beside_misnamed_files_and_warns_of_each(tmp_path: Path) -> None:
    folder = _store(tmp_path / "store")
    command = [sys.executable, "-m", "raytuner.cli", "dashboard", str(folder), "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        try:
            line = proc.stdout.readline() if proc.stdout else ""  # it prints its address once it listens
            assert line.startswith("raytuner dashboard at http://127.0.0.1:"), line
            page = urllib.request.urlopen(line.split()[3], timeout=60).read().decode()
            assert '<a href="/problem/demo">demo</a>' in page
        finally:
            proc.terminate()
            _, errors = proc.communicate(timeout=60)
    for name in ODD_NAMES:
        assert f"{folder / name}: skipped, not a problem name" in errors, errors


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


_CHARTS_SCRIPT = """
const charts = Array.from(document.querySelectorAll(".js-plotly-plot"));
const links = charts.flatMap((c) => Array.from(c.querySelectorAll("a"))).map(
  (a) => a.getAttribute("href") || a.getAttributeNS("http://www.w3.org/1999/xlink", "href") || "");
const texts = charts.flatMap((c) => Array.from(c.querySelectorAll("text"), (t) => t.textContent));
return [charts.length, links, texts];
"""


@pytest.mark.slow
def test_names_of_markup_are_drawn_as_text_in_every_chart(browser: Any, tmp_path: Path) -> None:
    with JsonStore(tmp_path) as store:
        for n, x in enumerate((0.1, 0.5, 0.9, 0.3, 0.7)):
            store.append(
                "marked",
                FunctionEvaluation.create(
                    {TEMPLATE: 1.0}, {LINK: x, "z": (n * 0.37) % 1, "kind": LINK if n % 2 else BREAK}, {BREAK: x * x}
                ),
            )
    with serve(create_app(store=tmp_path), port=0) as server:
        browser.get(server.url + "problem/marked/analysis")
        charts = browser.find_elements(By.CSS_SELECTOR, "div.plot")
        assert len(charts) >= 6
        for chart in charts:  # each is drawn as it comes near the window
            browser.execute_script("arguments[0].scrollIntoView();", chart)

            def drawn(_: object, c: WebElement = chart) -> bool:
                return "js-plotly-plot" in (c.get_attribute("class") or "")

            WebDriverWait(browser, 30).until(drawn)
        count, links, texts = browser.execute_script(_CHARTS_SCRIPT)
        assert count == len(charts)
        assert [link for link in links if "evil" in link] == []  # no name became a link
        shown = "\n".join(texts)
        assert LINK in shown and f"{BREAK} (minimize)" in shown  # axis titles and labels show the names as they are
        assert f"{TEMPLATE}=1" in shown  # the task's label in the legend
        browser.execute_script("Plotly.Fx.hover('chart-history', [{curveNumber: 1, pointNumber: 0}]);")
        hover = WebDriverWait(browser, 10).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-history .hoverlayer .hovertext")
        )
        said = hover[0].get_attribute("textContent")
        assert said.startswith(f"{TEMPLATE}=1") and "best so far" in said, said  # not filled in as a value
        assert policy_violations(browser) == []


def _formula_store(folder: Path) -> Path:
    with JsonStore(folder) as store:
        for n, formula in enumerate(FORMULAS):
            store.append(
                "demo",
                FunctionEvaluation.create({"t": formula}, {"=1+2": formula, "x": -1.5 - n}, {"y": -2.5}),
            )
    return folder


def _check_cells(text: str) -> None:
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 2 and "'=1+2" in rows[0] and "=1+2" not in rows[0]  # the column's name
    assert sorted(r["'=1+2"] for r in rows) == sorted("'" + f for f in FORMULAS)  # a parameter's value
    assert sorted(r["t"] for r in rows) == sorted("'" + f for f in FORMULAS)  # a task's value
    assert sorted(r["x"] for r in rows) == ["-1.5", "-2.5"] and {r["y"] for r in rows} == {"-2.5"}  # numbers stay
    assert all(not v.startswith(("=", "+", "@")) for r in rows for v in r.values())


def test_a_csv_download_carries_no_formula(tmp_path: Path) -> None:
    client = create_app(store=_formula_store(tmp_path)).test_client()
    answer = client.get("/problem/demo/evaluations.csv")
    assert answer.status_code == 200 and answer.mimetype == "text/csv"
    _check_cells(answer.get_data(as_text=True))
    same = json.loads(client.get("/problem/demo/evaluations.json").get_data(as_text=True))
    assert {r["task_parameter"]["t"] for r in same["func_eval"]} == set(FORMULAS)  # the GPTune file: as they are


def test_a_csv_export_carries_no_formula(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["history", "show", str(_formula_store(tmp_path)), "--csv"])
    assert result.exit_code == 0, result.output
    _check_cells(result.output)
