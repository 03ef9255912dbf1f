"""``python -m benchmarks crowd`` end to end with tiny sizes: a real mongod and server, results.json's keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import BENCHMARKS
from benchmarks.crowd import Settings, run

pytestmark = pytest.mark.slow

TINY = Settings(records=2_000, tasks=20, queries=4, ishigami_samples=200, sobol_samples=256, mixed_samples=120)


def test_a_tiny_run_writes_the_figures_and_the_goals(tmp_path: Path) -> None:
    assert BENCHMARKS["crowd"] == "benchmarks.crowd"
    results = run(tmp_path, quick=True, settings=TINY)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["upload_records_per_s"] == results["upload_records_per_s"] > 0
    assert 0 < saved["query_p50_ms"] <= saved["query_p99_ms"]
    assert saved["query_records"] == 2_000 // 20  # one task value, every access level alice sees
    assert saved["direct"]["query_records"] == saved["query_records"]
    assert len(saved["ishigami"]["S1"]) == len(saved["ishigami"]["ST"]) == 3
    # 200 samples, N = 256: a loose check of the wiring. The same number on every run (0.115): the analysis
    # is seeded, and seed 0 now reaches the server (it used to mean "unseeded", and 0.156 came up by chance)
    assert saved["ishigami"]["max_abs_error"] < 0.15
    assert set(saved["mixed12"]["kept_at_0.05"]) == {"x0", "nb", "alg"}
    assert set(saved["goals"]) == {"upload_rate", "query_p50", "ishigami"}
    assert "Goals" in (tmp_path / "report.md").read_text()
