"""The dashboard gzips what it sends where the client accepts it, and sends the same content either way.

The first visit to an analysis page of a large problem fetches megabytes (the page's figures and
plotly.js); a browser names the encodings it reads in ``Accept-Encoding``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from raytuner.dashboard import create_app
from raytuner.dashboard.pages import PLOTLY_URL
from raytuner.problem.records import FunctionEvaluation
from raytuner.store import JsonStore


@pytest.fixture
def client(tmp_path: Path) -> FlaskClient:
    """A dashboard over a store of one problem, ``demo``, with 40 evaluations of two tasks."""
    with JsonStore(tmp_path) as store:
        for i in range(40):
            x = i / 40
            store.append("demo", FunctionEvaluation.create({"t": float(i % 2)}, {"x": x}, {"y": (x - 0.3) ** 2}))
    return create_app(store=tmp_path).test_client()


def _nonce(policy: str) -> bytes:
    """The script nonce a content security policy names."""
    return policy.split("'nonce-")[1].split("'")[0].encode()


@pytest.mark.parametrize("path", ["/", "/problem/demo", "/problem/demo/analysis", "/problem/demo/evaluations.csv"])
def test_a_page_is_gzipped_where_accepted_and_the_same_page(client: FlaskClient, path: str) -> None:
    plain = client.get(path, headers={"Accept-Encoding": "br, identity"})
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    zipped = client.get(path, headers={"Accept-Encoding": "gzip, deflate, br"})
    assert zipped.status_code == 200 and zipped.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in zipped.headers["Vary"]
    text = gzip.decompress(zipped.get_data())
    assert len(zipped.get_data()) < len(text) / 2
    if "Content-Security-Policy" in plain.headers and path != "/problem/demo/evaluations.csv":
        text = text.replace(
            _nonce(zipped.headers["Content-Security-Policy"]), _nonce(plain.headers["Content-Security-Policy"])
        )  # a page's script nonce is fresh each time
    assert text == plain.get_data()


def test_plotly_js_is_the_same_bytes_gzipped_and_cached_by_the_browser(client: FlaskClient) -> None:
    plain = client.get(PLOTLY_URL)
    assert "Content-Encoding" not in plain.headers
    for _ in range(2):  # compressed once, the same bytes each time
        zipped = client.get(PLOTLY_URL, headers={"Accept-Encoding": "gzip"})
        assert zipped.headers["Content-Encoding"] == "gzip" and zipped.cache_control.max_age == 86400
        assert gzip.decompress(zipped.get_data()) == plain.get_data()
        assert len(zipped.get_data()) < len(plain.get_data()) / 3
