"""The dashboard's crowd pages in a real headless Chromium, on a real mongod: access levels, keys, analysis.

The access matrix of ``test_crowd_access.py`` (4 users, 2 groups, every
access level) is checked through the web pages and the download: no private
record reaches another user, a signed-out visitor sees public records only,
and no API key ever appears in a page, a URL or a log line. A token signed
with a user's private key signs in once.
"""

from __future__ import annotations

import json
import logging
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pymongo
import pytest
from dashboard_helpers import chromium, policy_violations, screenshot
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from test_crowd_access import PROBLEM, UPLOADS, USERS, _may_see, _record

from raytuner.crowd import CrowdRepository
from raytuner.dashboard import create_app, serve, signin
from raytuner.problem.records import FunctionEvaluation
from raytuner.signing import DASHBOARD_SIGN_IN, Signer, generate_key_pair
from raytuner.store.gptune_file import parse_history

pytestmark = pytest.mark.slow

SOBOL_PROBLEM = "sobol-demo"


@pytest.fixture(scope="module")
def world(mongod: Any) -> Iterator[tuple[CrowdRepository, dict[str, str]]]:
    """A crowd repository with the access matrix, a public problem to analyse, machines and software."""
    database = f"crowd_{uuid.uuid4().hex}"
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongod.uri)
    repo = CrowdRepository(client, database=database)
    try:
        keys = {}
        for name, groups in USERS.items():
            repo.add_user(name, f"{name}@example.org", groups)
            keys[name] = repo.create_key(name)
        for i, (label, (owner, access, users, groups)) in enumerate(UPLOADS.items()):
            repo.upload(
                keys[owner],
                PROBLEM,
                [_record(float(i), label), _record(float(i) + 0.5, label)],
                access=access,
                shared_with_users=users,
                shared_with_groups=groups,
            )
        rng = np.random.default_rng(0)
        repo.upload(
            keys["alice"],
            SOBOL_PROBLEM,
            [
                FunctionEvaluation.create({"t": 1.0}, {"a": float(a), "b": float(b)}, {"y": 4 * a + 0.01 * b})
                for a, b in rng.random((24, 2))
            ],
            access="public",
        )
        repo.add_machine("cori", ["cori.nersc.gov"])
        repo.add_software("gcc", ["gnu-gcc"])
        yield repo, keys
    finally:
        repo.close()
        client.drop_database(database)
        client.close()


@pytest.fixture(scope="module")
def site(world: tuple[CrowdRepository, dict[str, str]]) -> Iterator[str]:
    with serve(create_app(crowd=world[0]), port=0) as server:
        yield server.url.rstrip("/")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def _sign_in(driver: Any, site: str, key: str | None) -> None:
    driver.delete_all_cookies()
    if key is None:
        return
    driver.get(site + "/signin")
    driver.find_element(By.ID, "api-key").send_keys(key)
    driver.find_element(By.ID, "signin").click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("/crowd") or d.find_elements(By.ID, "error"))


def _visible_t(driver: Any) -> set[float]:
    """The task values of the evaluations table, checked against the page's count of matches."""
    count = int(driver.find_element(By.ID, "count").text.split()[0])  # the page rendered, whatever matched
    heads = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "#evaluations thead th")]
    rows = driver.find_elements(By.CSS_SELECTOR, "#evaluations tbody tr")
    seen = {float(row.find_elements(By.TAG_NAME, "td")[heads.index("t")].text) for row in rows}
    assert len(rows) == len(seen) == count  # every record has its own t here
    return seen


def _submit(driver: Any, button: str, result: str) -> None:
    """Press a form's button and wait for its result (or an error) to show."""
    driver.find_element(By.ID, button).click()
    WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.ID, result) or d.find_elements(By.ID, "error"))
    assert not driver.find_elements(By.ID, "error"), driver.find_element(By.ID, "error").text


def _download(driver: Any, url: str) -> bytes:
    cookie = driver.get_cookie("session")
    request = urllib.request.Request(url, headers={"Cookie": f"session={cookie['value']}"} if cookie else {})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read()


def _expected_t(user: str | None) -> set[float]:
    seen = set()
    for i, label in enumerate(UPLOADS):
        if (UPLOADS[label][1] == "public") if user is None else _may_see(user, label):
            seen |= {float(i), float(i) + 0.5}
    return seen


@pytest.mark.parametrize("user", [None, *USERS])
def test_each_user_sees_exactly_what_the_access_levels_allow_in_pages_and_downloads(
    browser: Any,
    site: str,
    world: tuple[CrowdRepository, dict[str, str]],
    user: str | None,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo, keys = world
    with caplog.at_level(logging.DEBUG):
        _sign_in(browser, site, keys[user] if user else None)
        browser.get(site + "/crowd")
        who = browser.find_elements(By.ID, "user")
        assert [w.text for w in who] == ([user] if user else [])
        problems = {
            r.find_elements(By.TAG_NAME, "td")[0].text: int(r.find_elements(By.TAG_NAME, "td")[1].text)
            for r in browser.find_elements(By.CSS_SELECTOR, "#crowd-problems tbody tr")
        }
        assert problems[PROBLEM] == len(_expected_t(user))
        pages = [browser.page_source]
        browser.get(site + f"/crowd/problem/{PROBLEM}")
        assert _visible_t(browser) == _expected_t(user)
        pages.append(browser.page_source)
        document = parse_history(json.loads(_download(browser, site + f"/crowd/problem/{PROBLEM}/download")))
        assert {r.task_parameter["t"] for r in document.func_eval} == _expected_t(user)
        query = {"input_space": [{"name": "t", "type": "real", "lower_bound": 2, "upper_bound": 4}]}
        browser.get(site + f"/crowd/problem/{PROBLEM}?problem_space=" + urllib.parse.quote(json.dumps(query)))
        assert _visible_t(browser) == {t for t in _expected_t(user) if 2 <= t <= 4}
        pages.append(browser.page_source)
        if user == "bob":
            screenshot(browser, tmp_path, "dashboard-crowd-query")
    urls = [browser.current_url]
    server_side = [r for r in caplog.records if r.name.split(".")[0] not in ("selenium", "urllib3")]  # not the driver
    assert any(r.name == "werkzeug" for r in server_side)  # the server's request log was captured
    for key in keys.values():
        assert not any(key in text for text in pages + urls)
        assert not [r.getMessage() for r in server_side if key in r.getMessage()]


def test_a_wrong_or_revoked_key_signs_no_one_in(
    browser: Any, site: str, world: tuple[CrowdRepository, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, keys = world
    _sign_in(browser, site, keys["alice"][:-2] + "xx")
    assert browser.find_element(By.ID, "error").text == "that API key or token was not accepted"
    browser.execute_script("document.getElementsByName('form')[0].value = 'forged'")  # a post from elsewhere
    browser.find_element(By.ID, "api-key").send_keys(keys["alice"])
    browser.find_element(By.ID, "signin").click()
    WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,)).until(  # the page is replaced
        lambda d: "stale or from another site" in d.find_element(By.ID, "error").text
    )
    assert not browser.find_elements(By.ID, "user")
    assert keys["alice"][:-2] not in browser.page_source
    spare = repo.create_key("dave")
    _sign_in(browser, site, spare)
    assert browser.find_element(By.ID, "user").text == "dave"
    key_id = repo.list_keys("dave")[-1].key_id
    repo.revoke_key(key_id)
    monkeypatch.setattr(signin, "RECHECK_SECONDS", 0.0)  # check the key on the next page
    browser.get(site + f"/crowd/problem/{PROBLEM}")
    assert not browser.find_elements(By.ID, "user") and _visible_t(browser) == _expected_t(None)


def test_a_signed_token_signs_in_once_and_a_revoked_public_key_signs_out(
    browser: Any, site: str, world: tuple[CrowdRepository, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = world[0]
    signer = Signer.from_pem(generate_key_pair()[0])
    repo.register_public_key("bob", signer.public_key)
    _sign_in(browser, site, signer.credential("upload"))  # signed for another method
    assert browser.find_element(By.ID, "error").text == "that API key or token was not accepted"
    token = signer.credential(DASHBOARD_SIGN_IN)
    _sign_in(browser, site, token)
    assert browser.find_element(By.ID, "user").text == "bob"
    assert token not in browser.page_source
    browser.get(site + f"/crowd/problem/{PROBLEM}")
    assert _visible_t(browser) == _expected_t("bob")
    _sign_in(browser, site, token)  # the same token again
    assert browser.find_element(By.ID, "error").text == "that API key or token was not accepted"
    _sign_in(browser, site, signer.credential(DASHBOARD_SIGN_IN))
    assert browser.find_element(By.ID, "user").text == "bob"
    repo.revoke_key(signer.key_id)
    monkeypatch.setattr(signin, "RECHECK_SECONDS", 0.0)  # check the key on the next page
    browser.get(site + f"/crowd/problem/{PROBLEM}")
    assert not browser.find_elements(By.ID, "user") and _visible_t(browser) == _expected_t(None)


def test_machines_software_prediction_and_sobol_pages(browser: Any, site: str, tmp_path: Path) -> None:
    _sign_in(browser, site, None)
    browser.get(site + "/crowd")
    machines = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#machine tbody tr")]
    assert machines == ["cori cori.nersc.gov"]
    assert [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#software tbody tr")] == ["gcc gnu-gcc"]
    browser.get(site + f"/crowd/problem/{SOBOL_PROBLEM}/predict")
    browser.find_element(By.NAME, "task").send_keys('{"t": 1.0}')
    browser.find_element(By.NAME, "parameters").send_keys('[{"a": 0.25, "b": 0.5}, {"a": 0.75, "b": 0.5}]')
    _submit(browser, "run-predict", "prediction")
    means = [
        float(r.find_elements(By.TAG_NAME, "td")[1].text)
        for r in browser.find_elements(By.CSS_SELECTOR, "#prediction tbody tr")
    ]
    assert means == pytest.approx([1.005, 3.005], abs=0.05)  # y = 4a + 0.01b, learnt from 24 records
    browser.get(site + f"/crowd/problem/{SOBOL_PROBLEM}/sensitivity")
    browser.find_element(By.NAME, "task").send_keys('{"t": 1.0}')
    _submit(browser, "run-sensitivity", "sobol")
    rows = {
        r.find_elements(By.TAG_NAME, "td")[0].text: float(r.find_elements(By.TAG_NAME, "td")[3].text)
        for r in browser.find_elements(By.CSS_SELECTOR, "#sobol tbody tr")
    }
    assert rows["a"] > 0.95 and rows["b"] < 0.05
    assert browser.find_elements(By.CSS_SELECTOR, "#sobol-chart svg")
    screenshot(browser, tmp_path, "dashboard-crowd-sobol")
    assert policy_violations(browser) == []  # the inline Sobol chart drew under the content security policy
    browser.get(site + f"/crowd/problem/{SOBOL_PROBLEM}/sensitivity?task=%7B%7D&num_samples=%C2%B2")
    assert browser.find_element(By.ID, "error").text.startswith("num_samples: '²' is not a count")
    browser.get(site + f"/crowd/problem/{SOBOL_PROBLEM}/predict?task=%7B%7D&parameters=%5B%7B%22a%22%3A1%7D%5D")
    assert browser.find_element(By.ID, "error").text.startswith(
        "parameters: a JSON list of objects, each with every tuning parameter (allowed: a, b)"
    )
