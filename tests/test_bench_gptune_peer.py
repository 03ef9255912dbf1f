"""GPTune's own tuner as a benchmark peer: found through a folder, skipped with one line without it.

GPTune itself is not needed: a stand-in gptune-tuner folder holds runners that
write a runner's JSON (as ``gptune_mla.py`` and ``gptune_band.py`` do) from
their arguments, so the subprocess, the resume and the parsing run for real.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import GPTUNE_ENV, GPTUNE_PYTHON_ENV, gptune_peer
from benchmarks.__main__ import main
from benchmarks.mla import demo_values

# A stand-in runner: the run asked for, each task's values 1.5 at every evaluation (above the demo's minima).
RUNNER = """
import argparse, json, pathlib
ap = argparse.ArgumentParser()
ap.add_argument("--tasks", type=float, nargs="+")
ap.add_argument("--ntask", type=int)
ap.add_argument("--nrun", type=int)
ap.add_argument("--nloop", type=int)
ap.add_argument("--ns1", type=int)
ap.add_argument("--seed", type=int)
ap.add_argument("--provide-NS", action="store_true")
ap.add_argument("--out")
a = ap.parse_args()
with open(pathlib.Path(__file__).with_name("calls.txt"), "a") as calls:
    calls.write("run\\n")
if a.tasks:
    per_task = [{"t": t, "y": [1.5] * a.nrun} for t in a.tasks]
    data = {"seed": a.seed, "NS": a.nrun, "wall_MLA_s": 100.0, "cpu_MLA_s": 40.0, "per_task": per_task}
else:
    tasks = [1.0 + 0.5 * i for i in range(a.ntask)]
    per_task = [{"t": t, "y_bmax": [1.5, 1.6]} for t in tasks]
    calls = [[t, 0.5, 4.0] for t in tasks for _ in range(8)]
    data = {"seed": a.seed, "nloop": a.nloop, "wall_s": 100.0, "calls": calls, "per_task": per_task}
pathlib.Path(a.out).write_text(json.dumps(data))
"""


@pytest.fixture(autouse=True)
def _no_gptune(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No gptune-tuner folder from the environment (``main`` sets it: put it back), small settings for our side,
    and the root logger as it was (``main`` configures it)."""
    for name in (GPTUNE_ENV, GPTUNE_PYTHON_ENV):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(
        gptune_peer, "QUICK_MLA", dataclasses.replace(gptune_peer.QUICK_MLA, evaluations=4, n_initial=2)
    )
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


def _folder(tmp_path: Path, runner: str = RUNNER) -> Path:
    folder = tmp_path / "gptune-tuner"
    folder.mkdir()
    (folder / "pythonpath.sh").write_text('echo "$(dirname "$0")"\n')
    for name in gptune_peer.RUNNERS.values():
        (folder / name).write_text(runner)
    return folder


def _calls(folder: Path) -> int:
    return len((folder / "calls.txt").read_text().splitlines())


def test_without_the_folder_the_peer_is_skipped_with_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="benchmarks.gptune_peer"):
        section = gptune_peer.mla_section(tmp_path, quick=True, run_ours=demo_values)
    assert [r.getMessage() for r in caplog.records] == [
        "GPTune's mla peer skipped: no gptune-tuner folder (--gptune DIR or $RAYTUNER_GPTUNE)"
    ]
    assert section["skipped"] and not (tmp_path / "gptune").exists()
    assert gptune_peer.render_section(section) == [
        "Skipped GPTune's own tuner (GPTune MLA): no gptune-tuner folder (--gptune DIR or $RAYTUNER_GPTUNE).",
        "",
    ]


def test_a_folder_without_the_runner_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(GPTUNE_ENV, str(tmp_path))
    with caplog.at_level(logging.INFO, logger="benchmarks.gptune_peer"):
        section = gptune_peer.band_section(tmp_path, quick=True)
    assert [r.getMessage() for r in caplog.records] == [
        f"GPTune's band peer skipped: {tmp_path} has no gptune_band.py or pythonpath.sh"
    ]
    assert "skipped" in section


def test_gptune_only_without_the_folder_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mla", "--gptune-only", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err == "Error: gptune: --gptune-only needs the gptune-tuner folder (--gptune DIR or $RAYTUNER_GPTUNE)\n"
    assert main(["store", "--gptune-only", "--gptune", str(tmp_path), "--out", str(tmp_path / "b")]) == 2
    assert "allowed: band, mla" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_the_mla_comparison_runs_the_runner_once_and_reads_it_back(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    out = tmp_path / "out"
    assert main(["mla", "--gptune", str(folder), "--gptune-only", "--quick", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    (mla_set,) = results["gptune"]["sets"]
    assert mla_set["tasks"] == [1.0, 2.0] and [r["tuner"] for r in mla_set["rows"]] == ["mla", "GPTune MLA"] * 2
    peer = [r for r in mla_set["rows"] if r["tuner"] == "GPTune MLA"]
    assert [r["seconds_per_suggestion"] for r in peer] == [12.5, 12.5]  # 100 s over 2 tasks x 4 evaluations
    assert all(r["mean_regret"] > 0 for r in peer)
    assert mla_set["peer_cpu_seconds_per_suggestion"] == 5.0
    assert results["gptune"]["goals"]["seconds_per_suggestion_20x_lower"] is True
    assert "## GPTune's own tuner: mla against GPTune MLA" in (out / "report.md").read_text()
    assert _calls(folder) == 1
    path = out / "gptune" / "mla_t1-2_n4_seed0.json"  # the run's JSON is there: read, not rerun
    assert gptune_peer.run_gptune(folder, "mla", [], path) == json.loads(path.read_text())
    assert _calls(folder) == 1


def test_the_band_comparison_charges_gptunes_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GPTUNE_ENV, str(_folder(tmp_path)))
    section = gptune_peer.band_section(tmp_path, quick=True)
    assert section["sets"][0]["tasks"] == [1.0, 1.5]
    assert section["sets"][0]["cost_per_task_mean"]["GPTune GPTuneBand"] == 8.0  # 8 calls at b_max per task
    assert set(section["goals"]) == {"regret_le_peer_every_task", "seconds_per_suggestion_20x_lower"}


def test_a_failed_gptune_run_skips_the_peer_naming_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(GPTUNE_ENV, str(_folder(tmp_path, "raise SystemExit(3)\n")))
    with caplog.at_level(logging.WARNING, logger="benchmarks.gptune_peer"):
        section = gptune_peer.mla_section(tmp_path, quick=True, run_ours=demo_values)
    log_file = tmp_path / "gptune" / "mla_t1-2_n4_seed0.log"
    assert section["skipped"] == f"GPTune's mla run failed (exit status 3): see {log_file}"
    assert len(caplog.records) == 1 and log_file.is_file()


def test_a_run_of_other_settings_is_refused() -> None:
    data = {"seed": 0, "NS": 20, "wall_MLA_s": 1.0, "per_task": [{"t": 1.0, "y": [1.0]}]}
    with pytest.raises(ValueError, match=r"a run of tasks \[1.0\], NS 20, seed 0"):
        gptune_peer.parse_mla(data, [1.0, 2.0], 20, 0)
