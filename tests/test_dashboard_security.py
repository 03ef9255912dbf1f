"""The dashboard's boundary: which hosts it answers, the headers every answer carries, inputs refused first.

Flask's test client drives the application (its requests name ``localhost``); the live view's script
runs under this policy in real Chromium in ``tests/test_dashboard.py``.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from flask import Flask
from record_helpers import known

from raytuner.dashboard import DashboardServer, create_app
from raytuner.problem.records import FunctionEvaluation
from raytuner.store import JsonStore


@pytest.fixture
def app(tmp_path: Path) -> Flask:
    with JsonStore(tmp_path) as store:
        for x in (0.2, 0.4):
            store.append("demo", FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"y": x * x}))
    return create_app(store=tmp_path)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8050", "10.0.0.7", "localhost.evil.example"])
def test_a_request_naming_another_host_is_refused(app: Flask, host: str) -> None:
    answer = app.test_client().get("/problem/demo", headers={"Host": host})
    assert answer.status_code == 400 and b"demo" not in answer.data


@pytest.mark.parametrize("host", ["localhost", "localhost:8050", "127.0.0.1:8050"])
def test_loopback_names_are_answered(app: Flask, host: str) -> None:
    assert app.test_client().get("/problem/demo", headers={"Host": host}).status_code == 200


def test_names_given_and_the_address_listened_on_are_answered(tmp_path: Path, app: Flask) -> None:
    named = create_app(store=tmp_path, allowed_hosts=["tuner.lab.example"]).test_client()
    assert named.get("/", headers={"Host": "tuner.lab.example:8050"}).status_code == 200
    assert named.get("/", headers={"Host": "localhost"}).status_code == 400  # the list replaces loopback
    with DashboardServer(app, "127.0.0.1", 0):
        assert app.config["TRUSTED_HOSTS"] == ["localhost", "127.0.0.1"]  # already there: not doubled
    with DashboardServer(app, "0.0.0.0", 0):
        assert app.config["TRUSTED_HOSTS"] == ["localhost", "127.0.0.1"]  # every address: name them yourself


@pytest.mark.parametrize(
    "path", ["/", "/problem/demo", "/problem/demo/live", "/problem/demo/live.json", "/no/such/page", "/favicon.ico"]
)
def test_every_answer_carries_the_security_headers(app: Flask, path: str) -> None:
    headers = app.test_client().get(path).headers
    policy = headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script-src 'nonce-" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]  # no script but the page's own
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "same-origin"


def test_a_chart_runs_nothing_even_opened_alone(app: Flask) -> None:
    answer = app.test_client().get("/problem/demo/plot/history.svg")
    assert answer.mimetype == "image/svg+xml"
    assert answer.headers["Content-Security-Policy"] == "default-src 'none'; style-src 'unsafe-inline'"


def test_the_live_view_s_one_script_carries_this_answer_s_nonce(app: Flask) -> None:
    client = app.test_client()
    nonces = []
    for _ in range(2):
        answer = client.get("/problem/demo/live")
        page = answer.get_data(as_text=True)
        nonce = known(re.search(r"script-src 'nonce-([^']+)'", answer.headers["Content-Security-Policy"])).group(1)
        assert re.findall(r"<script[^>]*>", page) == [f'<script nonce="{nonce}">']
        nonces.append(nonce)
    assert nonces[0] != nonces[1]  # fresh each time


@pytest.mark.parametrize("name", ["a" * 300, "x" * 129, "..", "a/b", "<script>"])
def test_a_problem_name_of_any_length_or_shape_is_a_plain_not_found(app: Flask, name: str) -> None:
    answer = app.test_client().get(f"/problem/{name}")
    assert answer.status_code == 404 and b"<script>" not in answer.data


def test_a_bad_chart_query_is_a_page_that_escapes_what_it_echoes(app: Flask) -> None:
    answer = app.test_client().get("/problem/demo/plot/parameter.svg", query_string={"parameter": "<script>x</script>"})
    page = answer.get_data(as_text=True)
    assert answer.status_code == 400 and answer.mimetype == "text/html"
    assert "&lt;script&gt;" in page and "<script>x" not in page


def test_an_objective_the_problem_lacks_is_a_page_that_lists_its_outputs(app: Flask) -> None:
    answer = app.test_client().get("/problem/demo", query_string={"objective": "<script>"})
    page = answer.get_data(as_text=True)
    assert answer.status_code == 400 and "objective: " in page and "(allowed: y)" in page and "<script>" not in page


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ({"x": "<script>"}, 400, "x: '<script>' is no tuning parameter of demo (allowed: x)"),
        ({"fidelity": "3"}, 400, "fidelity: no evaluation of demo has a fidelity: leave it out"),
        ({"task": "<b>t=9</b>"}, 404, "task: '<b>t=9</b>' is no task of demo"),
    ],
)
def test_the_analysis_page_refuses_bad_input_before_it_fits_anything(
    app: Flask, query: dict[str, str], status: int, said: str
) -> None:
    answer = app.test_client().get("/problem/demo/analysis", query_string=query)
    page = answer.get_data(as_text=True)
    assert answer.status_code == status and said in html.unescape(page)
    assert "<script>" not in page and "<b>t=9" not in page  # what it echoes, escaped
    assert "contour" not in app.config["RAYTUNER"]  # no model was fitted for it


def test_the_analysis_page_runs_plotly_from_this_dashboard_by_its_nonce_only(app: Flask) -> None:
    client = app.test_client()
    answer = client.get("/problem/demo/analysis")
    page = answer.get_data(as_text=True)
    nonce = known(re.search(r"script-src 'nonce-([^']+)'", answer.headers["Content-Security-Policy"])).group(1)
    scripts = re.findall(r"<script[^>]*>", page)
    assert scripts == [
        '<script type="application/json" id="figures" data-evaluations="/problem/demo/evaluation/">',
        f'<script nonce="{nonce}" src="/static/plotly.min.js">',
        f'<script nonce="{nonce}">',
    ]  # the data block is not run; nothing is fetched from elsewhere
    script = client.get("/static/plotly.min.js")
    assert script.status_code == 200 and script.mimetype == "text/javascript" and b"plotly.js v" in script.data[:200]
    assert script.headers["X-Content-Type-Options"] == "nosniff"


def test_importance_and_analysis_choose_a_fidelity_and_say_which(tmp_path: Path) -> None:
    from raytuner.problem.records import Provenance

    with JsonStore(tmp_path) as store:
        for n in range(12):
            level = 3.0 if n % 2 else 1.0
            x = (n * 0.37) % 1.0
            store.append(
                "band",
                FunctionEvaluation.create(
                    {"t": 1.0},
                    {"x": x, "z": n % 5},
                    {"y": (x - 0.4) ** 2 / level},
                    provenance=Provenance(fidelity=level),
                ),
            )
    client = create_app(store=tmp_path).test_client()
    page = client.get("/problem/band/importance", query_string={"fidelity": "1"}).get_data(as_text=True)
    assert "6 successful evaluations at fidelity 1 (SALib" in page and '<table id="sobol">' in page
    assert '<b>1</b> · <a href="/problem/band/importance?task=t%3D1&amp;fidelity=3">3</a>' in page
    page = client.get("/problem/band/analysis").get_data(as_text=True)
    assert "t=1: 6 successful evaluations at full fidelity</h2>" in page
    refused = client.get("/problem/band/importance", query_string={"fidelity": "2"})
    assert refused.status_code == 400 and "fidelity: &#39;2&#39; is no fidelity of band (allowed: 1.0, 3.0)" in (
        refused.get_data(as_text=True)
    )
