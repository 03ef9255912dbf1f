"""One answer per mistake: every command that takes a problem or reads a path answers the same line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from raytuner.cli import main

#: Every command that takes a problem of a store: its arguments, with STORE for the store and PROBLEM for the name.
PROBLEM_COMMANDS = {
    "history show": ["history", "show", "STORE", "--problem", "PROBLEM"],
    "history plot": ["history", "plot", "STORE", "--problem", "PROBLEM", "--out", "OUT.png"],
    "history export": ["history", "export", "--from", "STORE", "--problem", "PROBLEM", "--out", "OUT.json"],
    "history repair": ["history", "repair", "STORE", "PROBLEM"],
    "keys grant": ["keys", "grant", "--store", "STORE", "PROBLEM", "crowd:somebody"],
}
#: Every command that reads a path that must be there: its arguments, with STORE for the path.
PATH_COMMANDS = {
    **PROBLEM_COMMANDS,
    "history import": ["history", "import", "STORE", "--to", "OUT"],
    "dashboard": ["dashboard", "STORE"],
}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store directory holding one problem, ``demo``, with one evaluation."""
    source = tmp_path / "demo.json"
    source.write_text(
        json.dumps(
            {
                "tuning_problem_name": "demo",
                "func_eval": [
                    {
                        "uid": "a1",
                        "task_parameter": {"t": 1.0},
                        "tuning_parameter": {"x": 0.5},
                        "evaluation_result": {"y": 1.5},
                    }
                ],
            }
        )
    )
    result = CliRunner().invoke(main, ["history", "import", str(source), "--to", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    return tmp_path / "store"


def _invoke(template: list[str], store: Path | str, problem: str, out: Path) -> tuple[int, str]:
    args = [
        str(store) if a == "STORE" else problem if a == "PROBLEM" else str(out / a) if a.startswith("OUT") else a
        for a in template
    ]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


@pytest.mark.parametrize("command", sorted(PROBLEM_COMMANDS))
def test_an_unknown_problem_is_one_line_listing_the_problems(command: str, store: Path, tmp_path: Path) -> None:
    code, output = _invoke(PROBLEM_COMMANDS[command], store, "nope", tmp_path)
    assert (code, output) == (2, f"Error: problem: no problem 'nope' in {store} (allowed: demo)\n")
    assert not list(tmp_path.glob("OUT*"))  # nothing written


@pytest.mark.parametrize("command", sorted(PATH_COMMANDS))
def test_a_missing_path_does_not_exist(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    code, output = _invoke(PATH_COMMANDS[command], missing, "demo", tmp_path)
    assert (code, output) == (2, f"Error: {missing}: does not exist\n")
    assert not missing.exists()  # reading made nothing


def test_the_problem_the_store_holds_is_still_read(store: Path, tmp_path: Path) -> None:
    code, output = _invoke(PROBLEM_COMMANDS["history export"], store, "demo", tmp_path)
    assert code == 0 and json.loads((tmp_path / "OUT.json").read_text())["tuning_problem_name"] == "demo", output
