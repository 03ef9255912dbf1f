"""``python -m benchmarks``: a wrong name, missing peers or missing data is one line and exit 2, nothing written."""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import benchmarks
from benchmarks import data
from benchmarks.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _root_logger() -> Iterator[None]:
    """``main`` configures the root logger (INFO); put it back."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("Error: ")
    return err


def test_an_unknown_benchmark_lists_the_benchmarks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope", "--out", str(tmp_path / "b")]) == 2
    assert "allowed: band, band-hang, crowd" in _one_line(capsys)
    assert not (tmp_path / "b").exists()


def test_a_benchmark_without_its_peers_is_refused_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = {
        re.split(r"[<>=\[]", r)[0].lower().replace("-", "_") for r in extra["project"]["optional-dependencies"]["bench"]
    }
    needed = {m.lower() for modules in benchmarks.PEER_MODULES.values() for m in modules}
    assert needed <= listed  # every peer module comes with the bench extra
    monkeypatch.setitem(benchmarks.PEER_MODULES, "store", ("raytuner_no_such_peer",))
    assert main(["store", "--out", str(tmp_path / "b"), "--quick"]) == 2
    err = _one_line(capsys)
    assert "raytuner_no_such_peer" in err and "pip install -e '.[bench]'" in err
    assert not (tmp_path / "b").exists()


def test_a_benchmark_without_its_data_names_the_files_and_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "data"
    empty.mkdir()
    monkeypatch.setattr(data, "ROOT", tmp_path / "checkout")  # no tests/data, no ../shared/data
    monkeypatch.delenv("RAYTUNER_SHARED_DATA", raising=False)
    assert main(["tla", "--out", str(tmp_path / "b"), "--data", str(empty)]) == 2
    err = _one_line(capsys)
    assert "kernel_tuner/dedispersion_A100.json.gz" in err and str(empty) in err and "--data DIR" in err
    assert main(["tla", "--out", str(tmp_path / "b"), "--data", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in _one_line(capsys)
    assert not (tmp_path / "b").exists()


def test_the_data_folders_are_searched_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, checkout = tmp_path / "first", tmp_path / "repo"
    (first / "kernel_tuner").mkdir(parents=True)
    (checkout / "tests" / "data" / "kernel_tuner").mkdir(parents=True)
    (first / "kernel_tuner" / "a.json.gz").write_bytes(b"")
    (checkout / "tests" / "data" / "kernel_tuner" / "a.json.gz").write_bytes(b"")
    (checkout / "tests" / "data" / "kernel_tuner" / "b.json.gz").write_bytes(b"")
    monkeypatch.setattr(data, "ROOT", checkout)
    monkeypatch.setenv("RAYTUNER_SHARED_DATA", str(first))
    assert data.folders() == [first, checkout / "tests" / "data"]
    assert data.find("kernel_tuner/a.json.gz") == first / "kernel_tuner" / "a.json.gz"
    assert data.find("kernel_tuner/b.json.gz") == checkout / "tests" / "data" / "kernel_tuner" / "b.json.gz"
    assert data.missing_data("tla") == [
        "kernel_tuner/dedispersion_A100.json.gz",
        "kernel_tuner/dedispersion_W7800.json.gz",
    ]
