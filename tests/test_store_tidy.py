"""Whenever no writer has a problem open, its store directory holds the GPTune file alone, with every record.

The last writer to close compacts the journal and removes it and the lock
file; a store that wrote and was never closed does so when its interpreter
exits; writers that keep opening and closing the same problem from several
processes lose nothing while the lock file comes and goes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from raytuner.problem.records import FunctionEvaluation
from raytuner.store import JsonStore

REPO_ROOT = Path(__file__).resolve().parents[1]


def _record(i: int) -> FunctionEvaluation:
    return FunctionEvaluation.create({"t": 1.0}, {"x": i / 100}, {"y": float(i)})


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _uids(directory: Path, problem: str) -> list[str]:
    return [r["uid"] for r in json.loads((directory / f"{problem}.json").read_text())["func_eval"]]


def _python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_last_writer_to_close_leaves_the_gptune_file_alone(tmp_path: Path) -> None:
    first, second = JsonStore(tmp_path), JsonStore(tmp_path)
    first.append("p", a := _record(1))
    second.append("p", b := _record(2))
    first.close()  # the other writer is still open: its journal and the lock stay
    assert _names(tmp_path) == ["p.json", "p.json.journal", "p.json.lock"]
    second.append("p", c := _record(3))
    second.close()
    assert _names(tmp_path) == ["p.json"]
    assert _uids(tmp_path, "p") == [a.uid, b.uid, c.uid]
    again = JsonStore(tmp_path)  # a new writer makes them again, and removes them again
    again.append("p", d := _record(4))
    assert "p.json.journal" in _names(tmp_path)
    again.close()
    assert _names(tmp_path) == ["p.json"] and _uids(tmp_path, "p")[-1] == d.uid


def test_a_reader_leaves_nothing_behind(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as store:
        store.append("p", a := _record(1))
    reader = JsonStore(tmp_path)
    assert [r.uid for r in reader.evaluations("p")] == [a.uid]
    reader.close()
    assert _names(tmp_path) == ["p.json"]


def test_a_store_never_closed_is_closed_when_its_interpreter_exits(tmp_path: Path) -> None:
    done = _python(
        """
        import sys
        from raytuner.problem.records import FunctionEvaluation
        from raytuner.store import JsonStore

        store = JsonStore(sys.argv[1])
        for i in range(5):
            store.append("script", FunctionEvaluation.create({"t": 1.0}, {"x": i / 10}, {"y": float(i)}))
        print("appended")
        """,
        str(tmp_path),
    )
    assert done.returncode == 0 and done.stdout.strip() == "appended", done.stderr
    assert _names(tmp_path) == ["script.json"] and len(_uids(tmp_path, "script")) == 5


def test_a_journal_that_could_not_be_compacted_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JsonStore(tmp_path)
    store.append("p", a := _record(1))

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("raytuner.store.json_store.write_history_file", disk_full)
    store.close()  # logged, not raised: the journal keeps the record
    assert _names(tmp_path) == ["p.json.journal", "p.json.lock"]
    monkeypatch.undo()
    assert [r.uid for r in JsonStore(tmp_path).evaluations("p")] == [a.uid]
    with JsonStore(tmp_path) as writer:
        writer.compact("p")
    assert _names(tmp_path) == ["p.json"] and _uids(tmp_path, "p") == [a.uid]


def test_writers_opening_and_closing_at_once_lose_nothing(tmp_path: Path) -> None:
    """Each of 4 processes opens a store, appends one record and closes it, 25 times: the lock file comes and
    goes under writers waiting on it, and every record is in the GPTune file at the end."""
    script = """
        import sys
        from raytuner.problem.records import FunctionEvaluation
        from raytuner.store import JsonStore

        directory, tag = sys.argv[1], sys.argv[2]
        for i in range(25):
            store = JsonStore(directory)
            store.append("busy", FunctionEvaluation.create({"t": 1.0}, {"x": i / 100}, {"y": float(i)}))
            store.close()
            print(f"{tag}-{i}")
        """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(script), str(tmp_path), str(k)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0 and len(out.split()) == 25, err
    assert _names(tmp_path) == ["busy.json"]
    uids = _uids(tmp_path, "busy")
    assert len(uids) == len(set(uids)) == 100
