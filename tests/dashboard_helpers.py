"""Helpers of the view and dashboard tests: a store made by the main job's example, and a headless Chromium."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The problem ``examples/band_demo.py`` writes.
BAND_PROBLEM = "GPTune-Demo-Band"


class BandRun(NamedTuple):
    """A run of the main job's example: its JSON store and what it printed."""

    store: Path
    output: str


def run_band_demo(store: Path) -> str:
    """Run the main job's example on a local Ray, small (2 tasks, fidelities 27/9/3), into ``store``; its output."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/band_demo.py"),
            "--store",
            str(store),
            "--tasks",
            "1.0",
            "1.3",
            "--b-min",
            "3",
            "--seed",
            "1",
            "--passes",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=store.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the analysis tune.run returns finds every trial's results (Ray's JSON logger is kept for it)
    assert "Failed to fetch metrics" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def find_chromium() -> tuple[str, str]:
    """The system's Chromium and its driver (README's test command installs both)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.fail(
            "Chromium and chromedriver are needed (README's test command installs them: "
            "apt-get install -y chromium chromium-driver)"
        )
    return browser, driver


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium driven by Selenium, from the system's packages only (nothing downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = find_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        "--disable-extensions",
        "--no-first-run",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console: CSP reports land there
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()


def policy_violations(driver: Any) -> list[str]:
    """The console messages since the last call that report a Content Security Policy violation."""
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


def screenshot(driver: Any, folder: Path, name: str) -> Path:
    """Save a screenshot of the page to ``folder/name.png`` (and to ``$RAYTUNER_SCREENSHOTS`` when set)."""
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    extra = os.environ.get("RAYTUNER_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)
    return path
