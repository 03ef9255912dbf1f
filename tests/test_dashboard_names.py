"""Whatever names a store holds, the dashboard serves its problems and says what it skipped.

- a JSON store's file whose name is no problem name is skipped, and named on the overview (and in the
  command's log), while the store's problems are served.
"""

from __future__ import annotations

import html
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from dashboard_helpers import ROOT

from raytuner.dashboard import create_app
from raytuner.problem.records import FunctionEvaluation
from raytuner.store import JsonStore

#: File names a store's folder may come to hold that are no problem's name.
ODD_NAMES = ("x y z.json", "GPTune-Demo (1).json", "résumé-тест.json", "a" * 235 + ".json")


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
