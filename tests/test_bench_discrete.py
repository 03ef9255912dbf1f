"""``python -m benchmarks discrete``'s machinery: MAE and MDF as the paper defines them, results.json's keys, resuming."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import discrete
from benchmarks.discrete import Settings, best_so_far, run, run_mae, summarise

pytestmark = pytest.mark.slow


def test_best_so_far_and_the_mae_of_a_run() -> None:
    trace: list[tuple[dict[str, Any], float | None]] = [({}, None), ({}, 5.0), ({}, None), ({}, 4.0), ({}, 6.0)]
    assert best_so_far(trace, 6) == [None, 5.0, 5.0, 4.0, 4.0, 4.0]  # padded with the last best
    # checkpoints 1, 2, 4 against optimum 3: before the first success the worst time (10) counts
    assert run_mae([None, 5.0, 5.0, 4.0], optimum=3.0, checkpoints=[1, 2, 4], worst=10.0) == pytest.approx(10 / 3)


def test_mdf_is_the_mean_over_kernels_of_mae_over_the_kernels_mean_mae() -> None:
    s = Settings(kernels=("k1", "k2"), methods=("a", "b"), repeats=2)
    jobs = [
        {"method": m, "kernel": k, "seed": seed, "mae": mae, "model_ask_ms": [], "ms_per_suggestion": 1.0, "failed": 0}
        for (m, k), maes in {
            ("a", "k1"): (1.0, 3.0),
            ("b", "k1"): (6.0, 6.0),
            ("a", "k2"): (10.0, 10.0),
            ("b", "k2"): (30.0, 30.0),
        }.items()
        for seed, mae in enumerate(maes)
    ]
    rows = {r["method"]: r for r in summarise(jobs, s)["rows"]}
    # k1: a 2, b 6 (mean 4) -> 0.5, 1.5; k2: a 10, b 30 (mean 20) -> 0.5, 1.5
    assert rows["a"]["mdf"] == pytest.approx(0.5) and rows["b"]["mdf"] == pytest.approx(1.5)
    assert rows["a"]["mae_by_kernel"] == {"k1": 2.0, "k2": 10.0}


def test_a_small_run_writes_the_results_keys_and_resumes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = Settings(
        kernels=("pnpoly_RTX_3090",),
        methods=("raytuner_ei", "kt_random_sample", "optuna_tpe"),
        repeats=1,
        evaluations=60,
        checkpoints=(40, 60),
        workers=1,
    )
    results = run(tmp_path, settings=s)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["kernels"] == ["pnpoly_RTX_3090"]
    assert [r["method"] for r in saved["rows"]] == list(s.methods)
    for row in saved["rows"]:
        assert set(row) >= {"method", "mdf", "mae_by_kernel", "suggest_ms_median"}
        assert row["mae_by_kernel"]["pnpoly_RTX_3090"] >= 0 and row["suggest_ms_median"] > 0
    assert saved["goals"]["lowest_mdf"]["best_method"] in s.methods
    assert (tmp_path / "report.md").read_text().count("| raytuner_ei |") == 1
    assert (tmp_path / "best_so_far_pnpoly_RTX_3090.png").is_file()
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 3
    # a rerun with the same settings finds every job done: nothing runs again, the figures are the same
    calls = []
    original = discrete.run_job

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(a)
        return original(*a, **k)

    discrete.run_job = counted
    try:
        again = run(tmp_path, settings=s)
    finally:
        discrete.run_job = original
    assert calls == [] and again["rows"] == results["rows"]
