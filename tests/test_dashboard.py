"""``raytuner dashboard`` in a real headless Chromium: histories, the live view, a tuning service, scale.

Every page is opened the way a user would, and what it shows is checked
against the store: best values equal the store's, a filtered table's count
equals the same query on the records. Screenshots go to the test's folder
(and to ``$RAYTUNER_SCREENSHOTS`` when set: README's picture is made so).
The crowd repository's pages are in ``test_dashboard_crowd.py``.
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from dashboard_helpers import BAND_PROBLEM, chromium, policy_violations, screenshot
from record_helpers import known, provenance
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from raytuner.cli import main
from raytuner.client import RemoteTuner
from raytuner.dashboard import create_app, serve
from raytuner.dashboard.sources import PAGE_SIZE
from raytuner.engines import RandomSearch
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, Provenance
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore, write_history_file
from raytuner.test_problems import DEMO_PROBLEM, demo
from raytuner.view import load_history, task_label
from raytuner.view.figures import MAX_POINTS

log = logging.getLogger(__name__)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def band_dashboard(band_store: Path) -> Iterator[str]:
    with serve(create_app(store=band_store, warm=True), port=0) as server:
        yield server.url.rstrip("/")


_TABLE_SCRIPT = """
const table = document.getElementById(arguments[0]);
if (!table) { return [[], []]; }
const text = (cells) => Array.from(cells, (c) => c.innerText.trim());
return [text(table.querySelectorAll("thead th")),
        Array.from(table.querySelectorAll("tbody tr"), (row) => text(row.querySelectorAll("td")))];
"""


def _rows(driver: Any, table: str) -> list[dict[str, str]]:
    """The rows of the page's table ``table`` by column title, read in one call (not one per cell)."""
    heads, rows = driver.execute_script(_TABLE_SCRIPT, table)
    return [dict(zip(heads, cells)) for cells in rows]


def _click(driver: Any, element: Any) -> None:
    """Click ``element`` (a link or a form's button) and wait until the page it leads to has loaded."""
    before = driver.current_url
    element.click()
    WebDriverWait(driver, 30).until(
        lambda d: d.current_url != before and d.execute_script("return document.readyState") == "complete"
    )


def _wait_state(driver: Any, text: str) -> None:
    """Wait until the live view's state line starts with ``text``."""
    WebDriverWait(driver, 30, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
        lambda d: d.find_element(By.ID, "live-state").text.startswith(text)
    )


def _wait_live(driver: Any, count: int) -> None:
    """Wait until the live view shows ``count`` evaluations (its script replaces the block: stale reads retry)."""
    WebDriverWait(driver, 30, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
        lambda d: d.find_element(By.ID, "live-count").text == f"{count} evaluations"
    )


def _no_broken_images(driver: Any) -> None:
    images = driver.find_elements(By.CSS_SELECTOR, "img.chart")
    assert images and all(driver.execute_script("return arguments[0].naturalWidth", i) > 100 for i in images)


def test_overview_problem_task_and_bracket_pages_show_the_stores_best(
    browser: Any, band_dashboard: str, band_store: Path, tmp_path: Path
) -> None:
    view = load_history(band_store)
    best = dict(zip(view.best_table()["task"], view.best_table()["y"]))
    browser.get(band_dashboard + "/")
    [row] = _rows(browser, "problems")
    assert row["problem"] == BAND_PROBLEM and int(row["evaluations"]) == len(view.records)
    assert row["best per task"] == " · ".join(f"{task}: {value:.6g}" for task, value in best.items())  # labelled
    screenshot(browser, tmp_path, "dashboard-overview")
    _click(browser, browser.find_element(By.LINK_TEXT, BAND_PROBLEM))
    shown = {r["task"]: float(r["y"]) for r in _rows(browser, "best")}
    assert shown == pytest.approx(best, rel=1e-5)
    charts = _figures(browser)  # the best so far is drawn by plotly.js: each task's line ends at its best
    assert list(charts) == ["chart-history"]
    assert {t["name"]: t["y"][-1] for t in charts["chart-history"] if t["mode"] == "lines"} == pytest.approx(best)
    _no_broken_images(browser)
    screenshot(browser, tmp_path, "dashboard-problem")
    _click(browser, browser.find_element(By.LINK_TEXT, "t=1.3"))
    [task_best] = _rows(browser, "best")
    assert float(task_best["y"]) == pytest.approx(best["t=1.3"], rel=1e-5) and float(task_best["fidelity"]) == 27
    _no_broken_images(browser)
    screenshot(browser, tmp_path, "dashboard-task")
    browser.get(band_dashboard + f"/problem/{BAND_PROBLEM}/brackets")
    _no_broken_images(browser)
    screenshot(browser, tmp_path, "dashboard-brackets")
    assert policy_violations(browser) == []  # every page and chart drew under the content security policy


def test_the_brackets_page_chooses_its_objective_as_every_page_does(band_store: Path, tmp_path: Path) -> None:
    with JsonStore(tmp_path) as store:  # the run's evaluations, with a second output
        for r in load_history(band_store).records:
            y = r.evaluation_result["y"]
            outputs = {"y": y, "energy": None if y is None else 2.0 - y}
            store.append(BAND_PROBLEM, r.model_copy(update={"evaluation_result": outputs}))
    client = create_app(store=tmp_path).test_client()
    page = client.get(f"/problem/{BAND_PROBLEM}/brackets?task=t%3D1.3").get_data(as_text=True)
    assert 'id="objectives"' in page and f"/problem/{BAND_PROBLEM}/brackets?task=t%3D1.3&amp;objective=energy" in page
    page = client.get(f"/problem/{BAND_PROBLEM}/brackets?task=t%3D1.3&objective=energy").get_data(as_text=True)
    chart = f"/problem/{BAND_PROBLEM}/plot/brackets.svg?task=t%3D1.3&amp;objective=energy"
    assert chart in page and "<b>energy</b>" in page
    drawn = client.get(chart.replace("&amp;", "&")).get_data(as_text=True)
    assert "energy" in drawn and client.get(chart.replace("&amp;", "&")).status_code == 200


def test_the_evaluations_table_filters_sorts_and_pages_as_the_records_say(
    browser: Any, band_dashboard: str, band_store: Path, tmp_path: Path
) -> None:
    frame = load_history(band_store).frame
    browser.get(band_dashboard + f"/problem/{BAND_PROBLEM}/evaluations")
    Select(browser.find_element(By.NAME, "task")).select_by_visible_text("t=1.3")
    browser.find_element(By.NAME, "min.t").send_keys("1.2")
    Select(browser.find_element(By.NAME, "status")).select_by_visible_text("ok")
    _click(browser, browser.find_element(By.ID, "apply"))
    expected = frame[(frame["task"] == "t=1.3") & (frame["t"] >= 1.2) & (frame["status"] == "ok")]
    count = browser.find_element(By.ID, "count").text
    assert count.startswith(f"{len(expected)} of {len(frame)} evaluations match")
    assert len(_rows(browser, "evaluations")) == min(PAGE_SIZE, len(expected))
    _click(browser, browser.find_element(By.LINK_TEXT, "y"))  # sort by y, smallest first
    rows = _rows(browser, "evaluations")
    assert float(rows[0]["y"]) == pytest.approx(expected["y"].min(), rel=1e-5)
    assert [float(r["y"]) for r in rows] == sorted(float(r["y"]) for r in rows)
    _click(browser, browser.find_element(By.LINK_TEXT, "y"))  # again: largest first
    assert float(_rows(browser, "evaluations")[0]["y"]) == pytest.approx(expected["y"].max(), rel=1e-5)
    screenshot(browser, tmp_path, "dashboard-evaluations")
    browser.get(band_dashboard + f"/problem/{BAND_PROBLEM}/evaluations?min.t=abc")
    assert browser.find_element(By.ID, "error").text == "min.t: 'abc' is not a number"


def _tell(session: TuningSession, n: int) -> None:
    for _ in range(n):
        trial = session.ask()
        session.tell(trial, {"y": demo(trial.config["x"], trial.task["t"])})


def test_the_live_view_refreshes_while_a_session_tells_results(browser: Any, tmp_path: Path) -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    with JsonStore(tmp_path / "live") as store:
        session = TuningSession(problem, RandomSearch(problem, [{"t": 1.0}, {"t": 2.0}], seed=5), store, "live-demo")
        _tell(session, 3)
        with serve(create_app(store=tmp_path / "live"), port=0) as server:
            browser.get(server.url + "problem/live-demo/live")
            _wait_live(browser, 3)
            asked = session.ask()  # a trial in flight: the view says so
            _wait_state(browser, "1 trial in flight")
            session.tell(asked, {"y": demo(asked.config["x"], asked.task["t"])})
            teller = threading.Thread(target=_tell, args=(session, 4))
            teller.start()
            teller.join(timeout=60)
            _wait_live(browser, 8)
            _wait_state(browser, "no trial in flight: the run has finished")
            state = browser.find_element(By.ID, "live-state")
            newest = load_history(tmp_path / "live").frame["time"].max().strftime("%Y-%m-%d %H:%M:%S")
            assert state.get_attribute("data-finished") == "true" and state.text.endswith(newest)
            chart = browser.find_element(By.ID, "live-chart")  # best so far per task, drawn for these 8
            assert chart.get_attribute("src").endswith("plot/history.svg?n=8")
            WebDriverWait(browser, 30).until(  # the new chart loads after the block that names it arrived
                lambda d: d.execute_script(
                    "const c = document.getElementById('live-chart'); return c !== null && c.complete && c.naturalWidth > 0"
                )
            )
            best = {r["task"]: float(r["y"]) for r in _rows(browser, "best")}
            assert best == pytest.approx(
                {task_label(t): known(session.best(t)).value("y") for t in session.engine.tasks}, rel=1e-5
            )
            assert browser.find_element(By.ID, "live-status").text.startswith("checked at ")
            screenshot(browser, tmp_path, "dashboard-live")
            assert policy_violations(browser) == []  # its script ran by its nonce
        WebDriverWait(browser, 30).until(  # the dashboard gone: the page says it cannot reach it
            lambda d: d.find_element(By.ID, "live-status").text.startswith("cannot reach the dashboard")
        )


def test_a_problem_with_two_objectives_and_a_constraint_shows_each_tasks_pareto_front(
    browser: Any, tmp_path: Path
) -> None:
    from raytuner.engines.multiobjective import mla_engine
    from raytuner.models.executors import InlineExecutor
    from raytuner.problem.pareto import best_of, pareto_front

    problem = ProblemSpace.parse(
        {
            "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "parameter_space": [
                {"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1},
                {"name": "b", "type": "real", "lower_bound": 0, "upper_bound": 1},
            ],
            "output_space": [{"name": "f1"}, {"name": "f2"}, {"name": "mem", "optimize": False, "upper_bound": 0.6}],
        }
    )
    tasks = [{"t": 0.0}, {"t": 0.5}]
    with JsonStore(tmp_path / "mo") as store:  # the models the session stores keep the spaces: no meta needed
        session = TuningSession(
            problem, mla_engine(problem, tasks, 0, n_initial=4, executor=InlineExecutor()), store, "zdt"
        )
        for _ in range(16):
            trial = session.ask()
            a, b, t = trial.config["a"], trial.config["b"], trial.task["t"]
            session.tell(trial, {"f1": a, "f2": (1 + 9 * b) * (1 - (a / (1 + 9 * b)) ** 0.5) + 0.2 * t, "mem": a + b})
        records = store.evaluations("zdt")
    assert load_history(tmp_path / "mo").multiobjective
    with serve(create_app(store=tmp_path / "mo"), port=0) as server:
        browser.get(server.url)  # the overview names every objective and the constraint, and the fronts' sizes
        (row,) = _rows(browser, "problems")
        sizes = " · ".join(f"{task_label(t)}: {len(pareto_front(problem, records, t))} on the front" for t in tasks)
        assert row["objective"] == "f1 (minimize) · f2 (minimize) · mem <= 0.6" and row["best per task"] == sizes
        browser.get(server.url + "problem/zdt")
        shown = sorted((r["task"], r["uid"]) for r in _rows(browser, "front"))
        expected = sorted((task_label(t), r.uid) for t in tasks for r in pareto_front(problem, records, t))
        assert shown == expected and all(float(r["mem"]) <= 0.6 for r in _rows(browser, "front"))
        assert browser.find_element(By.ID, "front-plot")
        _no_broken_images(browser)
        screenshot(browser, tmp_path, "dashboard-front")
        browser.get(server.url + "problem/zdt/task?task=t%3D0.5")
        assert {r["task"] for r in _rows(browser, "front")} == {"t=0.5"}
        _no_broken_images(browser)
        browser.get(server.url + "problem/zdt")
        offered = browser.find_element(By.ID, "objectives").text
        assert offered == "objective: f1 · f2"  # the memory bound is a constraint, never an objective
        note = browser.find_element(By.CSS_SELECTOR, "p.note").text
        assert "objective f1, minimized (as the problem saved with its surrogate models says)" in note
        _click(browser, browser.find_element(By.LINK_TEXT, "f2"))  # every page: choose the objective
        assert browser.find_element(By.CSS_SELECTOR, "#objectives b").text == "f2"
        best = {r["task"]: float(r["f2"]) for r in _rows(browser, "best")}
        assert best == pytest.approx(  # the best f2 that meets the memory bound, per task
            {task_label(t): known(best_of(problem, records, t, "f2")).value("f2") for t in tasks}, rel=1e-5
        )
        charts = [i.get_attribute("src") for i in browser.find_elements(By.CSS_SELECTOR, "img.chart")]
        assert charts and all("objective=f2" in src for src in charts)
        correlation = next(src for src in charts if "correlation" in src)
        with urllib.request.urlopen(correlation) as answer:
            assert "task correlation of the LCM of f2" in answer.read().decode()  # the model it draws, named
        _no_broken_images(browser)
        _click(browser, browser.find_element(By.LINK_TEXT, "all evaluations"))  # the choice goes along
        assert "objective=f2" in browser.current_url
        browser.get(server.url + "problem/zdt/analysis?objective=f2&task=t%3D0.5")
        figures = _figures(browser)
        edf = {t["name"]: t["x"] for t in figures["chart-edf"]}
        assert edf == {
            task_label(t): sorted(r.known_value("f2") for r in records if r.task_parameter == t) for t in tasks
        }
        mine = {r.uid for r in records if r.task_parameter == {"t": 0.5}}
        assert set(figures["chart-rank"][0]["customdata"]) == mine  # a and b, each evaluation by its rank
        [contour, points] = figures["chart-contour"]  # the GP's f2 over a and b, the evaluations on top
        assert len(contour["x"]) == 30 and set(points["customdata"]) == mine
        front = next(t for t in figures["chart-front"] if t["name"].startswith("Pareto front"))
        assert set(front["customdata"]) == {r.uid for r in pareto_front(problem, records, {"t": 0.5})}
        assert [t["name"] for t in figures["chart-hypervolume"]] == ["t=0", "t=0.5"]
        title = "return document.getElementById('chart-history').layout.yaxis.title.text"
        assert browser.execute_script(title) == "f2 (minimize)"
        screenshot(browser, tmp_path, "dashboard-analysis-f2")


def test_a_running_tuning_service_shows_its_sessions(browser: Any, server: Any) -> None:
    key = server.keys.create("alice")
    with RemoteTuner(server.address, key) as tuner:
        tuner.create_session(
            {"tuning_problem_name": "served-demo", "problem_space": DEMO_PROBLEM}, "random", tasks=[{"t": 1.0}], seed=2
        )
        for _ in range(4):
            trial = known(tuner.ask())
            tuner.tell(trial, {"y": demo(trial.config["x"], 1.0)})
        with serve(create_app(service=RemoteTuner(server.address, key)), port=0) as dashboard:
            browser.get(dashboard.url)
            [session] = _rows(browser, "sessions")
            assert session["problem"] == "served-demo" and session["evaluations"] == "4"
            _click(browser, browser.find_element(By.CSS_SELECTOR, "#sessions a"))
            _wait_live(browser, 4)
            assert key not in browser.page_source


def _big_store(folder: Path, n: int) -> None:
    """A store of ``n`` evaluations (10 tasks), written as a GPTune file directly (fast).

    The records share the template's unchanged nested values (only written out, never changed): 100,000
    of them are made and written in 2.6 s here, against 7.3 s with a deep copy of each.
    """
    template = FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 1.0}).to_dict()
    records = [
        {
            **template,
            "task_parameter": {"t": float(1 + i % 10)},
            "tuning_parameter": {"x": (i * 0.6180339887) % 1.0},
            "evaluation_result": {"y": ((i * 7919) % 100_003) / 100_003},
            "uid": str(uuid.UUID(int=i)),
        }
        for i in range(n)
    ]
    folder.mkdir()
    write_history_file(
        folder / "big.json", {**HistoryDocument(tuning_problem_name="big").to_dict(), "func_eval": records}
    )


def test_the_pages_of_a_store_of_100000_evaluations_come_from_one_read_a_page_at_a_time(
    browser: Any, tmp_path: Path
) -> None:
    # What keeps a page of a large store fast (under 2 s here when the machine is idle, logged below; a timing
    # is no assertion): the store is read once, as the server starts, and a page holds PAGE_SIZE rows.
    _big_store(tmp_path / "big", 100_000)
    app = create_app(store=tmp_path / "big", warm=True)
    views = app.config["RAYTUNER"]["store"]
    read = views.view("big")  # the read the server made as it started
    with serve(app, port=0) as server:
        for path in (
            "problem/big",
            "problem/big/evaluations?sort=y&desc=1&page=1000",
            "problem/big/analysis?task=t%3D3",
            "problem/big/evaluations?task=t%3D7&min.t=5&sort=x",
        ):
            started = time.perf_counter()
            browser.get(server.url + path)
            log.info("%s: %.2f s", path, time.perf_counter() - started)
            if "analysis" in path:  # its charts drawn too, each from the newest evaluations only
                points = sum(len(t["x"]) for t in _figures(browser)["chart-history"] if t["mode"] == "markers")
                assert points == MAX_POINTS
                log.info("%s, every chart scrolled to and drawn: %.2f s", path, time.perf_counter() - started)
            assert (
                browser.find_elements(By.ID, "count")
                or path.startswith("problem/big/analysis")
                or path == "problem/big"
            )
            assert views.view("big") is read, path  # served from that read, never read again
        assert len(_rows(browser, "evaluations")) == PAGE_SIZE
        assert browser.find_element(By.ID, "count").text.startswith("10000 of 100000 evaluations match; page 1 of 200")
        first = _rows(browser, "evaluations")
        _click(browser, browser.find_element(By.ID, "page-next"))  # the next page, in the same order
        second = _rows(browser, "evaluations")
        assert "page 2 of 200" in browser.find_element(By.ID, "count").text and len(second) == PAGE_SIZE
        assert float(first[-1]["x"]) <= float(second[0]["x"]) and not {r["x"] for r in first} & {r["x"] for r in second}
        browser.get(server.url + "problem/big/evaluations?page=99999")  # past the end: the last page
        assert "page 2000 of 2000" in browser.find_element(By.ID, "count").text
        assert browser.find_elements(By.ID, "page-previous") and not browser.find_elements(By.ID, "page-next")


def test_odd_histories_and_odd_urls_get_a_page_never_a_crash(tmp_path: Path) -> None:
    with JsonStore(tmp_path / "odd") as store:
        store.append("failed-only", FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, failure="crashed", outputs=["y"]))
        for value in ("a", 3, "b"):  # a column with text and numbers
            store.append("mixed", FunctionEvaluation.create({"t": 1.0}, {"c": value}, {"y": 1.0}))
    client = create_app(store=tmp_path / "odd").test_client()
    for path in (
        "/",
        "/problem/failed-only",
        "/problem/failed-only/live.json",
        "/problem/failed-only/evaluations",
        "/problem/failed-only/task?task=t%3D1",
        "/problem/mixed/evaluations?sort=c&desc=1",
        "/problem/mixed/evaluations?path=1&task=t%3D1",
        "/problem/failed-only/plot/history.svg",
    ):
        assert client.get(path).status_code == 200, path
    for path, status in (
        ("/problem/mixed/evaluations?sort=nope", 400),
        ("/problem/mixed/evaluations?size=%C2%B2", 400),  # a digit to str.isdigit, not to int: "²"
        ("/problem/mixed/task?task=t%3D9", 404),
        ("/problem/nope", 404),
        ("/problem/mixed/plot/parameter.svg?parameter=zz", 400),
    ):
        answer = client.get(path)
        assert answer.status_code == status and "Traceback" not in answer.get_data(as_text=True), path
    chosen = re.findall(r"<option selected>(\d+)</option>", client.get("/problem/mixed/evaluations?size=7").text)
    assert chosen == ["7"] * len(chosen) and chosen  # the size shown as chosen is the page's own
    page = client.get("/problem/mixed/evaluations?sort=c").get_data(as_text=True)
    column = re.findall(r"<tr><td><a [^>]*>[^<]*</a></td><td>t=1</td><td[^>]*>1</td><td[^>]*>([^<]*)</td>", page)
    assert column == ["3", "a", "b"]  # sorted as text


def test_an_evaluation_whose_uid_holds_url_characters_is_linked_and_shown(tmp_path: Path) -> None:
    # a uid is any text a history file holds (an imported tool's own ids): every character must reach its page
    odd = "run 1/a%b?c#d"
    with JsonStore(tmp_path / "odd") as store:
        store.append("odd-uid", FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 1.0}, uid=odd))
    client = create_app(store=tmp_path / "odd").test_client()
    table = client.get("/problem/odd-uid/evaluations").get_data(as_text=True)
    (link,) = re.findall(r'href="(/problem/odd-uid/evaluation/[^"]*)"', table)
    page = client.get(link)
    assert page.status_code == 200 and odd in html.unescape(page.get_data(as_text=True)), link


def test_an_output_named_as_a_fixed_column_has_one_name_on_every_part_of_a_page(tmp_path: Path) -> None:
    # an output "time" beside the records' own time column: the table says output.time, so must the chooser
    with JsonStore(tmp_path / "clash") as store:
        for k in range(3):
            store.append("clash", FunctionEvaluation.create({"t": 1.0}, {"x": k / 3}, {"y": float(k), "time": 2.0 - k}))
    client = create_app(store=tmp_path / "clash").test_client()
    for path in ("/problem/clash", "/problem/clash/evaluations", "/problem/clash/analysis", "/problem/clash/live"):
        page = client.get(path).get_data(as_text=True)
        (chooser,) = re.findall(r'<p class="note" id="objectives">(.*?)</p>', page, re.S)
        assert re.findall(r">([^<>]+)</(?:a|b)>", chooser) == ["y", "output.time"], path
    chosen = client.get("/problem/clash/evaluations?objective=time").get_data(as_text=True)
    assert "<b>output.time</b>" in chosen and "<th" in chosen and "output.time" in chosen.split("<table", 1)[1]


def test_the_dashboard_command_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, words in (
        (["dashboard"], "give a store"),
        (["dashboard", str(tmp_path / "missing")], "does not exist"),
        (["dashboard", "--crowd", "http://x"], "is not a mongodb:// URI"),
        (["dashboard", str(tmp_path), "--service", "127.0.0.1:1"], "not both"),
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and words in result.output and result.output.count("\n") == 1, result.output
    assert re.search(r"loopback by default", runner.invoke(main, ["dashboard", "--help"]).output)


def test_every_evaluation_has_a_page_that_says_why_it_failed(browser: Any, tmp_path: Path) -> None:
    problem = ProblemSpace.parse(
        {**DEMO_PROBLEM, "output_space": [{"name": "y"}, {"name": "mem", "optimize": False, "upper_bound": 2.0}]}
    )
    low = FunctionEvaluation.create(
        {"t": 1.0},
        {"x": 0.25},
        {"y": 0.5, "mem": 1.0},
        provenance=Provenance(engine="gptuneband", proposer="model", fidelity=1, cost=1 / 3, bracket=1, rung=0),
        software_configuration={"solver": {"version_split": [2, 1, 0]}},
    )
    high = FunctionEvaluation.create(
        {"t": 1.0},
        {"x": 0.25},
        {"y": 0.4, "mem": 1.5},
        provenance=Provenance(engine="gptuneband", proposer="promotion", fidelity=3, bracket=1, rung=1, parent=low.uid),
    )
    failed = FunctionEvaluation.create({"t": 1.0}, {"x": 0.9}, failure="diverged <after 3 steps>")
    with JsonStore(tmp_path / "s") as store:  # a session first: its stored models keep the spaces
        from raytuner.engines.multiobjective import mla_engine
        from raytuner.models.executors import InlineExecutor

        session = TuningSession(
            problem, mla_engine(problem, [{"t": 1.0}], 0, n_initial=3, executor=InlineExecutor()), store, "trial-pages"
        )
        for _ in range(4):
            trial = session.ask()
            session.tell(trial, {"y": trial.config["x"], "mem": 1.0})
        store.append_many("trial-pages", [low, high, failed])
    with serve(create_app(store=tmp_path / "s"), port=0) as server:
        browser.get(server.url + "problem/trial-pages/evaluations")
        head, rows = browser.execute_script(_TABLE_SCRIPT, "evaluations")
        assert head[0] == "evaluation" and "failure" in head and len(rows) == 7
        assert [row[head.index("failure")] for row in rows] == [""] * 6 + ["diverged <after 3 steps>"]
        browser.find_element(By.LINK_TEXT, failed.uid[:8]).click()
        assert browser.find_element(By.ID, "failure").text == "diverged <after 3 steps>"
        assert browser.find_element(By.ID, "why").get_attribute("class") == "error"  # not the small grey notes
        assert "failed" in browser.find_element(By.ID, "status").text
        assert not browser.find_elements(By.ID, "next")  # the task's newest evaluation
        browser.find_element(By.ID, "previous").click()  # the one before it, of the same task
        assert browser.current_url.endswith(f"/evaluation/{high.uid}")
        browser.find_element(By.ID, "next").click()
        assert browser.current_url.endswith(f"/evaluation/{failed.uid}")
        browser.get(server.url + f"problem/trial-pages/evaluation/{high.uid}")
        _, outputs = browser.execute_script(_TABLE_SCRIPT, "outputs")
        assert outputs == [["y", "0.4", "objective, minimize", ""], ["mem", "1.5", "recorded", "mem <= 2"]]
        _, plan = browser.execute_script(_TABLE_SCRIPT, "plan")
        assert dict(map(tuple, plan)) == {"fidelity": "3", "bracket": "1", "rung": "1"}
        _, provenance = browser.execute_script(_TABLE_SCRIPT, "provenance")
        assert dict(map(tuple, provenance))["proposer"] == "promotion"
        screenshot(browser, tmp_path, "dashboard-evaluation")
        browser.find_element(By.ID, "parent").click()  # the lower rung it continues
        _, provenance = browser.execute_script(_TABLE_SCRIPT, "provenance")
        assert dict(map(tuple, provenance))["uid"] == low.uid
        _, software = browser.execute_script(_TABLE_SCRIPT, "software")
        assert software == [["solver", "2.1.0"]]
        browser.find_element(By.CSS_SELECTOR, f"#promotions a[href$='{high.uid}']").click()  # and back up
        assert browser.current_url.endswith(f"/evaluation/{high.uid}")
        browser.find_element(By.CSS_SELECTOR, "#trail a[href='/problem/trial-pages']").click()  # back to the problem
        assert browser.current_url.endswith("/problem/trial-pages")
        assert policy_violations(browser) == []


def test_the_table_keeps_its_order_under_filters_downloads_its_query_and_fits_800_px(
    browser: Any, tmp_path: Path
) -> None:
    records = [
        FunctionEvaluation.create({"t": float(i % 2)}, {"x": i / 40}, {"y": (i % 7) / 7})
        if i % 5
        else FunctionEvaluation.create({"t": float(i % 2)}, {"x": i / 40}, failure="boom", outputs=["y"])
        for i in range(40)
    ]
    with JsonStore(tmp_path / "t") as store:
        store.append_many("table", records)
    browser.set_window_size(800, 900)
    try:
        with serve(create_app(store=tmp_path / "t"), port=0) as server:
            browser.get(server.url + "problem/table/evaluations")
            assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
            heads = [h for h in _rows(browser, "evaluations")[0]]
            assert "fidelity" not in heads and "bracket" not in heads and "failure" in heads  # empty columns hidden
            _click(browser, browser.find_element(By.LINK_TEXT, "y"))  # sort by y
            _click(browser, browser.find_element(By.LINK_TEXT, "y"))  # then descending
            Select(browser.find_element(By.NAME, "task")).select_by_visible_text("t=1")
            _click(browser, browser.find_element(By.ID, "apply"))
            assert "sort=y" in browser.current_url and "desc=1" in browser.current_url  # the order survived
            marked = browser.find_element(By.CSS_SELECTOR, "#evaluations th.sorted")
            assert marked.text.startswith("y") and marked.get_attribute("aria-sort") == "descending"
            shown = _rows(browser, "evaluations")
            ys = [float(r["y"]) for r in shown if r["y"]]
            assert ys == sorted(ys, reverse=True) and {r["task"] for r in shown} == {"t=1"}
            assert browser.find_elements(By.ID, "pager-top") and browser.find_elements(By.ID, "pager-bottom")
            screenshot(browser, tmp_path, "dashboard-evaluations-800")
            assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
            matching = [r for r in records if r.task_parameter["t"] == 1.0]
            csv_url = browser.find_element(By.ID, "download-csv").get_attribute("href")
            json_url = browser.find_element(By.ID, "download-json").get_attribute("href")
            with urllib.request.urlopen(csv_url) as answer:
                lines = answer.read().decode().splitlines()
            assert len(lines) == 1 + len(matching) and "filename=" in answer.headers["Content-Disposition"]
            with urllib.request.urlopen(json_url) as answer:
                document = json.loads(answer.read())
            assert sorted(r["uid"] for r in document["func_eval"]) == sorted(r.uid for r in matching)
            browser.get(server.url + "problem/table/evaluations?min.t=abc")  # a bad filter: said inline
            assert browser.find_element(By.ID, "error").text.startswith("min.t: 'abc' is not a number")
            assert browser.find_elements(By.ID, "filters") and _rows(browser, "evaluations")
            for path in ("evaluations", "task?task=t%3D1", "brackets", "live"):
                browser.get(server.url + f"problem/table/{path}")
                assert browser.find_element(By.CSS_SELECTOR, "#trail a[href='/problem/table']"), path
            browser.get(server.url + "problem/table/brackets")  # not a GPTuneBand run: said, no broken image
            assert browser.find_element(By.ID, "no-brackets") and not browser.find_elements(By.TAG_NAME, "img")
            screenshot(browser, tmp_path, "dashboard-table-800")
            assert policy_violations(browser) == []
    finally:
        browser.set_window_size(1280, 1000)


def test_parameter_importance_is_the_sobol_analysis_of_the_task_s_surrogate(browser: Any, tmp_path: Path) -> None:
    from raytuner.analysis import sobol_analysis, surrogate_from_records
    from raytuner.models.executors import InlineExecutor

    problem = ProblemSpace.parse(
        {
            "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 2}],
            "parameter_space": [
                {"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1},
                {"name": "b", "type": "real", "lower_bound": 0, "upper_bound": 1},
            ],
            "output_space": [{"name": "y"}],
        }
    )
    with JsonStore(tmp_path / "imp") as store:
        session = TuningSession(problem, RandomSearch(problem, [{"t": 1.0}, {"t": 2.0}], seed=0), store, "imp")
        for _ in range(24):
            trial = session.ask()
            a, b = trial.config["a"], trial.config["b"]
            session.tell(trial, {"y": 4 * a + 0.01 * b if trial.task["t"] == 1.0 else 0.01 * a + 4 * b})
    view = load_history(tmp_path / "imp")
    with serve(create_app(store=tmp_path / "imp"), port=0) as server:
        browser.get(server.url + "problem/imp")
        _click(browser, browser.find_element(By.LINK_TEXT, "parameter importance"))
        for label, dominant in (("t=1", "a"), ("t=2", "b")):
            if label != "t=1":
                _click(browser, browser.find_element(By.LINK_TEXT, label))
            shown = {r["parameter"]: float(r["S1"]) for r in _rows(browser, "sobol")}
            task = {"t": 1.0} if label == "t=1" else {"t": 2.0}
            mine = [r for r in view.records if r.task_parameter == task]
            space = ProblemSpace.parse(
                {
                    "input_space": [{"name": "t", "type": "real", "lower_bound": 1.0, "upper_bound": 2.0}],
                    "parameter_space": [
                        {
                            "name": p,
                            "type": "real",
                            "lower_bound": min(r.tuning_parameter[p] for r in view.records),
                            "upper_bound": max(r.tuning_parameter[p] for r in view.records),
                        }
                        for p in ("a", "b")
                    ],
                    "output_space": [{"name": "y"}],
                }
            )  # the ranges the evaluations span: the store names no spaces
            model = surrogate_from_records(space, mine, objective="y", task=task, executor=InlineExecutor())
            expected = sobol_analysis(model, num_samples=512, task=task, seed=0)
            assert shown == pytest.approx({p: round(expected.S1[p], 4) for p in ("a", "b")}, abs=1e-4)
            assert shown[dominant] > 0.9
            assert browser.find_elements(By.CSS_SELECTOR, "#sobol-chart svg")
        screenshot(browser, tmp_path, "dashboard-importance")
        assert policy_violations(browser) == []


_FIGURES_SCRIPT = """
return Object.fromEntries(Array.from(document.querySelectorAll(".js-plotly-plot"), (e) => [e.id, e.data.map(
  (t) => ({name: t.name, mode: t.mode, x: t.x, y: t.y, customdata: t.customdata, visible: t.visible}))]));
"""


def _figures(driver: Any) -> dict[str, list[dict[str, Any]]]:
    """Scroll to each chart of the analysis page in turn (each is drawn as it comes near the window) until it
    is drawn; each one's traces, as plotly.js holds them."""
    for chart in driver.find_elements(By.CSS_SELECTOR, "div.plot"):
        driver.execute_script("arguments[0].scrollIntoView();", chart)

        def drawn(_: object, c: WebElement = chart) -> bool:
            return "js-plotly-plot" in (c.get_attribute("class") or "")

        WebDriverWait(driver, 30).until(drawn)
    return driver.execute_script(_FIGURES_SCRIPT)


def test_the_analysis_page_draws_the_store_s_numbers_and_answers_the_mouse(
    browser: Any, band_dashboard: str, band_store: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    view = load_history(band_store)
    best = dict(zip(view.best_table()["task"], view.best_table()["y"]))
    browser.get(band_dashboard + f"/problem/{BAND_PROBLEM}")
    _click(browser, browser.find_element(By.LINK_TEXT, "analysis"))
    figures = _figures(browser)
    # the demo has one parameter, x: no pair of parameters to draw (the two-objective test draws them)
    assert set(figures) == {
        "chart-history",
        "chart-edf",
        "chart-timeline",
        "chart-fidelity",
        "chart-parallel",
        "chart-slice-0",
    }
    ok = {r.uid: r for r in view.records if r.task_parameter == {"t": 1.0} and r.status == "ok"}
    promotions, *levels = figures["chart-fidelity"]  # GPTuneBand's intermediate values: each rung, promotions joined
    assert promotions["x"].count(None) == sum(provenance(r).parent in ok for r in ok.values()) > 0
    assert {t["x"][0]: len(t["x"]) for t in levels} == {
        f: sum(provenance(r).fidelity == f for r in ok.values()) for f in (3, 9, 27)
    }
    assert browser.find_element(By.ID, "no-pair").text.startswith("A contour needs two tuning parameters")
    ends = {t["name"]: t["y"][-1] for t in figures["chart-history"] if t["mode"] == "lines"}
    assert ends == pytest.approx(best, rel=1e-9)  # each task's best so far ends at the store's best
    full = view.frame[(view.frame["fidelity"] == 27) & (view.frame["status"] == "ok")]
    counts = {t["name"]: len(t["x"]) for t in figures["chart-edf"]}
    assert counts == full.groupby("task").size().to_dict()
    screenshot(browser, tmp_path, "dashboard-analysis")

    _click(browser, browser.find_element(By.CSS_SELECTOR, "#fidelity-choice a"))  # the lowest fidelity, 3
    figures = _figures(browser)
    low = view.frame[(view.frame["fidelity"] == 3) & (view.frame["status"] == "ok") & (view.frame["task"] == "t=1")]
    assert browser.find_element(By.CSS_SELECTOR, "#fidelity-choice b").text == "3"
    assert sum(t["y"].count(None) for t in figures["chart-parallel"]) == len(low)  # one line per evaluation
    assert sorted(figures["chart-slice-0"][0]["customdata"]) == sorted(low["uid"])

    legend = browser.find_element(By.CSS_SELECTOR, "#chart-history .legend .traces .legendtoggle")
    ActionChains(browser).move_to_element(legend).click().perform()  # the first task, hidden by its legend entry
    WebDriverWait(browser, 10).until(
        lambda d: [t["visible"] for t in _figures(d)["chart-history"][:2]] == ["legendonly", "legendonly"]
    )
    point = browser.find_elements(By.CSS_SELECTOR, "#chart-slice-0 .scatterlayer .point")[0]
    ActionChains(browser).move_to_element(point).pause(0.5).perform()
    hover = WebDriverWait(browser, 10).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-slice-0 .hoverlayer .hovertext")
    )
    said = hover[0].text
    assert said.startswith("evaluation ") and "x = " in said
    shown = re.match(r"evaluation ([0-9a-f]{8})", said)
    assert shown is not None, said
    uid = next(u for u in low["uid"] if u.startswith(shown.group(1)))
    ActionChains(browser).click().perform()  # a click where the mouse is opens that evaluation's page
    WebDriverWait(browser, 30).until(lambda d: "/evaluation/" in d.current_url)
    assert browser.current_url.endswith(f"/problem/{BAND_PROBLEM}/evaluation/{uid}")
    assert policy_violations(browser) == []  # plotly.js drew every chart under the content security policy


_AXIS_POINT = """
const chart = document.getElementById("chart-parallel"), layout = chart._fullLayout, box = chart.getBoundingClientRect();
return [layout._size.l + layout.xaxis.l2p(arguments[0]) - box.width / 2,
        layout._size.t + layout.yaxis.l2p(arguments[1]) - box.height / 2];
"""


def _brush(driver: Any, axis: int, low: float, high: float) -> None:
    """Draw a box over axis ``axis`` of the parallel coordinates, from ``low`` to ``high`` of its height."""
    from selenium.webdriver.common.action_chains import ActionChains

    chart = driver.find_element(By.ID, "chart-parallel")
    (x0, y0), (x1, y1) = (driver.execute_script(_AXIS_POINT, x, y) for x, y in ((axis - 0.1, high), (axis + 0.1, low)))
    drag = ActionChains(driver).move_to_element_with_offset(chart, int(x0), int(y0)).click_and_hold()
    drag.move_by_offset(5, 5).move_to_element_with_offset(chart, int(x1), int(y1)).release().perform()


def test_parallel_coordinates_brush_the_table_and_every_chart_takes_categories(browser: Any, tmp_path: Path) -> None:
    kinds = ["lu", "qr", "svd"]
    records = [
        FunctionEvaluation.create(
            {"t": 1.0},
            {"c": kinds[i % 3], "a": i / 44, "b": i % 7},
            {"y": (i / 44 - 0.4) ** 2 + kinds.index(kinds[i % 3]) / 2},
            provenance=Provenance(elapsed=float(i)) if i % 2 else None,  # the odd ones say how long they ran
        )
        if i % 10 != 9
        else FunctionEvaluation.create({"t": 1.0}, {"c": "lu", "a": 0.5, "b": 1}, failure="boom", outputs=["y"])
        for i in range(45)
    ]
    with JsonStore(tmp_path / "cat") as store:
        store.append_many("cat", records)
    ok = [r for r in records if r.status == "ok"]
    with serve(create_app(store=tmp_path / "cat"), port=0) as server:
        browser.get(server.url + "problem/cat/analysis")
        figures = _figures(browser)
        layout = "return document.getElementById(arguments[0]).layout"
        ticks: dict[float, list[str]] = {}
        for a in browser.execute_script(layout, "chart-parallel")["annotations"]:
            ticks.setdefault(a["x"], []).append(a["text"])
        assert ticks[0] == kinds and ticks[1] == ["0", "0.2", "0.4", "0.6", "0.8", "1"]  # every axis ticked
        contour, points = figures["chart-contour"]  # the first two parameters, c and a: c's categories across
        assert (
            contour["x"] == [0, 1, 2] and browser.execute_script(layout, "chart-contour")["xaxis"]["ticktext"] == kinds
        )
        assert points["x"] == [kinds.index(r.tuning_parameter["c"]) for r in ok]
        assert browser.execute_script(layout, "chart-rank")["xaxis"]["ticktext"] == kinds
        assert sorted(set(figures["chart-slice-0"][0]["x"])) == [0, 1, 2]
        bars = next(t for t in figures["chart-timeline"] if t["mode"] == "lines")  # a bar per timed evaluation
        assert set(bars["customdata"]) - {None} == {r.uid for r in ok if records.index(r) % 2}

        _brush(browser, 1, 0.2, 0.6)  # a box over the axis of a
        [brush] = browser.execute_script(layout, "chart-parallel")["shapes"]  # a spans 0 to 1: its axis' own scale
        inside = {r.uid[:8] for r in ok if brush["y0"] <= r.tuning_parameter["a"] <= brush["y1"]}
        rows = "return Array.from(document.querySelectorAll('#parallel-rows tbody tr:not([hidden]) a'), (a) => a.text)"
        assert 0 < len(inside) < len(ok) and set(browser.execute_script(rows)) == inside
        assert browser.find_element(By.ID, "parallel-count").text.startswith(f"{len(inside)} of {len(ok)} evaluations")
        browser.find_element(By.CSS_SELECTOR, "#parallel-axes input[value='2']").click()  # hide the axis of b
        assert browser.execute_script(layout, "chart-parallel")["xaxis"]["ticktext"] == ["c", "a", "y"]
        assert set(browser.execute_script(rows)) == inside  # the range drawn on a still holds
        assert policy_violations(browser) == []

        here = server.url + "problem/cat/evaluations"
        browser.get(here + "?size=20&min.a=0.1&max.y=1.2&sort=a")  # ranges on a parameter and on the objective
        matching = [r for r in ok if r.tuning_parameter["a"] >= 0.1 and r.known_value("y") <= 1.2]
        pages = -(-len(matching) // 20)
        assert (
            browser.find_element(By.ID, "count").text == f"{len(matching)} of 45 evaluations match; page 1 of {pages}."
        )
        _click(browser, browser.find_element(By.ID, "page-last"))
        assert f"page {pages} of {pages}" in browser.find_element(By.ID, "count").text
        assert len(_rows(browser, "evaluations")) == len(matching) - 20 * (pages - 1)
        number = browser.find_element(By.ID, "page-number")
        number.clear()
        number.send_keys("1")
        _click(browser, browser.find_element(By.ID, "page-go"))
        shown = [float(r["a"]) for r in _rows(browser, "evaluations")]
        expected = sorted(r.tuning_parameter["a"] for r in matching)[:20]
        assert shown == pytest.approx(expected, rel=1e-5)  # the order and the ranges went along
        with urllib.request.urlopen(browser.find_element(By.ID, "download-csv").get_attribute("href")) as answer:
            assert len(answer.read().decode().splitlines()) == 1 + len(matching)
        browser.get(here + "?size=5000")
        assert browser.find_element(By.ID, "error").text == "size: '5000' is not a number of rows a page from 1 to 500"
