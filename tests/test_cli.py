"""The ``raytuner`` command line, with a real MongoDB for the URI cases."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from repo_data import GPTUNE_DEMO

from raytuner.cli import main

DEMO_FILE = GPTUNE_DEMO


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def records_by_uid(path: Path) -> dict[str, dict]:
    data = json.loads(path.read_text())
    return {r["uid"]: r for r in data["func_eval"] + data["surrogate_model"]}


def test_show_a_gptune_file_as_json() -> None:
    summary = json.loads(run("history", "show", str(DEMO_FILE), "--json"))
    assert summary["tuning_problem_name"] == "GPTune-Demo"
    assert summary["func_eval"] == 70 and summary["surrogate_model"] == 35
    assert summary["tasks"] == 2 and summary["objectives"] == ["y"]


@pytest.mark.parametrize("backend", ["dir", "mongodb"])
def test_import_then_export_keeps_every_record(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    target = str(tmp_path / "history") if backend == "dir" else request.getfixturevalue("mongo_uri") + "/cli_test"
    first = run("history", "import", str(DEMO_FILE), "--to", target)
    assert first.strip() == f"imported 70 new evaluations and 35 new models of GPTune-Demo into {target}"
    again = run("history", "import", str(DEMO_FILE), "--to", target)  # importing twice adds nothing
    assert again.strip() == (
        f"imported 0 new evaluations and 0 new models of GPTune-Demo into {target} (105 already in the store)"
    )
    summary = json.loads(run("history", "show", target, "--problem", "GPTune-Demo", "--json"))
    assert (summary["func_eval"], summary["surrogate_model"]) == (70, 35)
    out = tmp_path / "exported.json"
    run("history", "export", "--from", target, "--problem", "GPTune-Demo", "--out", str(out))
    assert records_by_uid(out) == records_by_uid(DEMO_FILE)


def test_records_without_uids_are_kept_once_however_often_the_file_is_imported(tmp_path: Path) -> None:
    data = json.loads(DEMO_FILE.read_text())
    for record in data["func_eval"] + data["surrogate_model"]:
        del record["uid"]
    data["func_eval"].append(dict(data["func_eval"][0]))  # the same point measured twice: two records, not one
    source = tmp_path / "no-uids.json"
    source.write_text(json.dumps(data))
    target = str(tmp_path / "history")
    first = run("history", "import", str(source), "--to", target)
    assert first.strip() == f"imported 71 new evaluations and 35 new models of GPTune-Demo into {target}"
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(data, indent=1))  # the same records, another file: still kept once
    for again in (
        run("history", "import", str(source), "--to", target),
        run("history", "import", str(copy), "--to", target),
    ):
        assert again.strip().endswith(
            f"imported 0 new evaluations and 0 new models of GPTune-Demo into {target} (106 already in the store)"
        ), again
    summary = json.loads(run("history", "show", target, "--problem", "GPTune-Demo", "--json"))
    assert (summary["func_eval"], summary["surrogate_model"]) == (71, 35)


def test_errors_are_one_clear_line(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(main, ["history", "show", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    run("history", "import", str(DEMO_FILE), "--to", str(tmp_path / "h"))
    wrong = runner.invoke(
        main,
        ["history", "export", "--from", str(tmp_path / "h"), "--problem", "nope", "--out", str(tmp_path / "o.json")],
    )
    assert wrong.exit_code == 2 and "GPTune-Demo" in wrong.output
    bad_name = runner.invoke(main, ["history", "show", str(tmp_path / "h"), "--problem", "../etc"])
    assert bad_name.exit_code != 0 and "invalid problem name" in bad_name.output


def test_every_subcommand_has_help() -> None:
    for args in (
        ["--help"],
        ["history", "--help"],
        ["history", "show", "--help"],
        ["history", "import", "--help"],
        ["history", "export", "--help"],
    ):
        assert "Usage:" in run(*args)


def _command_paths(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        out.append((*path, name))
        if isinstance(command, click.Group):
            out += _command_paths(command, (*path, name))
    return out


def test_every_commands_help_says_an_engine() -> None:
    paths = _command_paths(main)
    assert ("rci", "next") in paths
    for path in paths:
        help_text = " ".join(run(*path, "--help").split())  # one line: a phrase is not cut by the wrapping
        assert not re.search(r"\ba engine", help_text, re.IGNORECASE), (path, help_text)


def test_console_script_is_installed() -> None:
    proc = subprocess.run(
        [Path(sys.executable).parent / "raytuner", "history", "show", str(DEMO_FILE), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["func_eval"] == 70


class _Uploads:
    """A stand-in CrowdClient: what each upload was asked for."""

    calls: list[dict[str, Any]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _Uploads:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def upload(self, name: str, records: list[Any], **share: Any) -> tuple[int, int]:
        self.calls.append({"name": name, "records": len(records), **share})
        return len(records), 0


def test_crowd_upload_says_who_may_read_what_it_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0.1 uploaded public by default, 0.2 private: the answer says which, so an upload that was meant
    # to be shared does not pass as one
    import raytuner.client.crowd

    monkeypatch.setattr(raytuner.client.crowd, "CrowdClient", _Uploads)
    _Uploads.calls = []
    runner = CliRunner()
    private = runner.invoke(main, ["crowd", "upload", str(DEMO_FILE), "--server", "x:1", "--api-key", "k"])
    assert private.exit_code == 0, private.output
    assert {c["access"] for c in _Uploads.calls} == {"private"}
    assert "records stored as private (only you may read them)" in private.stdout
    assert "--access public" in private.stderr
    public = runner.invoke(
        main, ["crowd", "upload", str(DEMO_FILE), "--server", "x:1", "--api-key", "k", "--access", "public"]
    )
    assert public.exit_code == 0 and "records stored as public (anyone may read them)" in public.stdout
    assert public.stderr == ""
