"""examples/transfer_demo.py end to end (a subprocess on its own local Ray): source history, then TLA."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from record_helpers import known, provenance

from raytuner.engines.transfer import DEFAULT_POOL
from raytuner.store import JsonStore
from raytuner.test_problems import demo, demo_grid_minimum

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples/transfer_demo.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def test_transfer_example_prints_the_proposers_and_the_best_and_continues(tmp_path: Path) -> None:
    proc = run_example("--quick", "--store", str(tmp_path / "store"), "--samples", "6", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "Source: 100 random evaluations of t=0.8" in out

    # one row per evaluation: number, proposer, x, y, best y so far
    rows = [row for row in (line.split() for line in out.splitlines()) if len(row) == 5 and row[0].isdigit()]
    assert [int(row[0]) for row in rows] == list(range(1, 7))
    assert rows[0][1] == "weighted_sum_equal"  # no target data yet
    assert all(row[1] in {*DEFAULT_POOL, "weighted_sum_equal"} for row in rows)
    assert "Ensemble probabilities now:" in out
    assert "  t=1: 6, 0, 6.00" in out.splitlines()  # six evaluations at the one fidelity cost 6 (it said 0.00)

    best = next(line for line in out.splitlines() if line.startswith("Best found:"))
    y_best = float(best.split("y = ")[1].split()[0])
    x_star, y_star = demo_grid_minimum(1.0)
    assert f"y* = {y_star:.4f}" in best
    # the source's optimum (x* = 0.421 at t = 0.8) lies in a good basin of the target (y = 0.91 there)
    assert y_star - 1e-4 <= y_best <= y_star + 0.2, best
    assert y_best == pytest.approx(min(float(row[3]) for row in rows), abs=1e-4)

    with JsonStore(tmp_path / "store") as store:
        assert len(store.evaluations("demo-source")) == 100
        target = store.evaluations("demo-target")
        assert len(target) == 6 and [r.modeling for r in target] == [row[1] for row in rows]
        for record, row in zip(target, rows):
            x, y = record.tuning_parameter["x"], record.value("y")
            assert y == pytest.approx(demo(x, 1.0))
            assert (row[2], row[3]) == (f"{x:.4f}", f"{y:.4f}")

    # the same store again: the source is complete, the target's tuning continues
    again = run_example("--quick", "--store", str(tmp_path / "store"), "--samples", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Source: 100 random evaluations" in again.stdout and "2 evaluations after 6 stored ones" in again.stdout
    with JsonStore(tmp_path / "store") as store:
        assert len(store.evaluations("demo-source")) == 100
        assert [r.modeling for r in store.evaluations("demo-target")][:6] == [row[1] for row in rows]
        assert len(store.evaluations("demo-target")) == 8


def test_tla2_example_predicts_with_tla1_then_tunes_the_new_task(tmp_path: Path) -> None:
    # 40 random evaluations of each source task (160 records: the fits stay quick), 7 of the target: 5 around
    # TLA1's prediction, 2 modelled
    proc = run_example(
        "--quick",
        "--algorithm",
        "tla2",
        "--source-t",
        "0.6",
        "0.8",
        "1.2",
        "1.4",
        "--samples",
        "7",
        "--source-samples",
        "40",
        "--store",
        str(tmp_path / "store"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "Source: 160 random evaluations of t=0.6, 0.8, 1.2, 1.4" in out
    predicted = next(line for line in out.splitlines() if line.startswith("TLA1 predicts x = "))
    x_tla1 = float(predicted.split("x = ")[1].split()[0])
    rows = [row for row in (line.split() for line in out.splitlines()) if len(row) == 5 and row[0].isdigit()]
    assert [int(row[0]) for row in rows] == list(range(1, 8)) and {row[1] for row in rows} == {"tla2"}
    x_star, y_star = demo_grid_minimum(1.0)
    best = next(line for line in out.splitlines() if line.startswith("Best found:"))
    assert float(best.split("y = ")[1].split()[0]) <= y_star + 0.2, best
    y_tla1 = float(predicted.split("where y = ")[1].split()[0])
    assert 0 <= x_tla1 <= 1 and y_tla1 == pytest.approx(demo(x_tla1, 1.0), abs=0.01)  # x printed to 4 places
    with JsonStore(tmp_path / "store") as store:
        assert len(store.evaluations("demo-target")) == 7 and len(store.evaluations("demo-source")) == 160
        # two trials run at once, so the store holds them in the order they ended, not the order suggested
        assert (
            sorted(known(provenance(r).proposer) for r in store.evaluations("demo-target"))
            == ["initial"] * 5 + ["model"] * 2
        )
