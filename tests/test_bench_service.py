"""``python -m benchmarks service`` end to end with tiny sizes: real servers in processes, results.json's structure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks import BENCHMARKS
from benchmarks.service import CELLS, Settings, run

pytestmark = pytest.mark.slow

TINY = Settings(
    clients=(1, 2),
    requests=6,
    min_rounds=2,
    warmup=1,
    repeats=1,
    mla_n_initial=2,
    mla_evaluations=4,
    server_workers=8,
    timeout=60.0,
)


def test_a_tiny_run_writes_every_row_and_the_goals(tmp_path: Path) -> None:
    assert BENCHMARKS["service"] == "benchmarks.service"
    results = run(tmp_path, quick=True, settings=TINY)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["rows"] == results["rows"]
    cells = [(r["system"], r["strategy"], r["clients"]) for r in saved["rows"]]
    assert cells == [(system, engine, n) for system, engine in CELLS for n in TINY.clients]
    assert {r["system"] for r in saved["rows"]} == {"raytuner", "optuna-grpc"}
    for row in saved["rows"]:
        for key in ("p50_ms", "p99_ms", "tells_per_s"):
            assert isinstance(row[key], (int, float)) and math.isfinite(row[key]) and row[key] > 0, (key, row)
        assert row["p99_ms"] >= row["p50_ms"]
        expected = (
            TINY.mla_evaluations - TINY.mla_n_initial - 1
            if row["strategy"] == "mla"
            else max(TINY.min_rounds, -(-TINY.requests // row["clients"]))
        ) * row["clients"]
        assert row["measured_round_trips"] == expected
    goals = saved["goals"]
    assert goals["p50_one_client_random"]["p50_ms"] == saved["rows"][0]["p50_ms"]
    assert isinstance(goals["p50_one_client_random"]["met"], bool)
    ratio = goals["throughput_vs_optuna"]
    assert ratio["clients"] == 2 and math.isfinite(ratio["ratio"]) and ratio["ratio"] > 0
    assert saved["servers"]["optuna-grpc"]["sqlite_synchronous"] in {"OFF", "NORMAL", "FULL", "EXTRA"}
    assert saved["servers"]["raytuner"]["auth"] is True
    assert {"cpu_model", "cores", "data_filesystem"} <= set(saved["machine"])
    report = (tmp_path / "report.md").read_text()
    assert "python -m benchmarks service --out" in report and report.count("| raytuner | random |") == 2
