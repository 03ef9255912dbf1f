"""``python -m benchmarks crowd-transfer``: its metrics on known traces, and a small run end to end (real crowd)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from benchmarks.crowd_transfer import Settings, Trace, goals, run, summarise
from benchmarks.crowd_transfer_problems import TransferProblem, kernel_problem, tpe_run
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM


def _problem(best: float = 1.0) -> TransferProblem:
    return TransferProblem(
        "demo",
        ProblemSpace.parse(DEMO_PROBLEM),
        {},
        {"t": 1.0},
        lambda crowd: {},
        lambda config, fidelity: (0.0, None),
        best,
        {"fidelities": [1.0]},
    )


def test_cost_to_target_and_best_at_budget_from_known_traces() -> None:
    tp = _problem(best=1.0)  # minimised: the target is reached at 1 / 0.99
    traces: dict[str, list[Trace]] = {
        "gptuneband+crowd": [[(0.5, None), (1.0, 1.2), (2.0, 1.005)], [(1.0, 1.001), (2.0, 1.3)]],
        "gptuneband": [[(1.0, 2.0), (3.0, 1.009)], [(1.0, 2.0), (2.0, 1.5)]],
        "mla": [[(1.0, 1.0)], [(1.0, 1.0)]],
    }
    summary = summarise(tp, traces)
    rows = {r["tuner"]: r for r in summary["rows"]}
    assert rows["gptuneband+crowd"]["cost_to_target_median"] == 1.5 and rows["gptuneband+crowd"]["reached_share"] == 1
    assert rows["gptuneband"]["cost_to_target_median"] is None and rows["gptuneband"]["reached_share"] == 0.5
    assert rows["gptuneband+crowd"]["best_at_budget_mean"] == pytest.approx((1.005 + 1.001) / 2)
    assert math.isclose(rows["mla"]["best_at_budget_mean"], 1.0)
    assert goals([summary]) == {"demo_band_crowd_cost_30pct_less": True, "demo_band_crowd_best_at_budget": False}


def test_a_tpe_run_never_measures_a_configuration_that_cannot_run() -> None:
    """As Kernel Tuner skips a configuration that breaks the restrictions: not measured, not counted, not shared."""
    measured, refused = [], []

    def measure(config: Mapping[str, Any]) -> tuple[float | None, str | None]:
        measured.append(config)
        return (config["x"] - 0.2) ** 2, None

    def runs(config: Mapping[str, Any]) -> bool:
        refused.extend([] if config["x"] < 0.5 else [config])
        return config["x"] < 0.5

    run = tpe_run(ProblemSpace.parse(DEMO_PROBLEM), {"t": 1.0}, measure, 8, seed=0, runs=runs)
    # TPE leaves failed trials out of its model, so it may keep proposing where they are: the asks are capped
    assert refused and 1 <= len(run) == len(measured) <= 8
    assert all(r.status == "ok" and r.tuning_parameter["x"] < 0.5 for r in run)


def test_a_small_run_writes_every_key(tmp_path: Path) -> None:
    problems = ("lcbench", "kernel")
    results = run(tmp_path, settings=Settings(seeds=(0,), budgets=tuple((p, 3.0) for p in problems), source_per_task=3))
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["goals"] == results["goals"] and (tmp_path / "report.md").is_file()
    assert [p["id"] for p in saved["problems"]] == list(problems)
    lcbench = saved["problems"][0]
    assert lcbench["crowd_records"] == 7 * 3 and lcbench["crowds"] == 1  # each other task's user shared 3
    assert isinstance(lcbench["crowd_records"], int)
    assert lcbench["maximize"] and lcbench["best_known"] > 90 and lcbench["budget"] == 3.0
    for problem in saved["problems"]:  # the whole reference set is known on both problems
        assert set(problem["transferability"]) == {
            "configurations",
            "reaching",
            "spearman",
            "evaluations_in_source_order",
            "evaluations_in_random_order",
        }
        assert -1 <= problem["transferability"]["spearman"] <= 1
    assert [r["tuner"] for r in lcbench["rows"]] == list(Settings.tuners)
    for problem in saved["problems"]:
        for row in problem["rows"]:
            assert set(row) == {
                "tuner",
                "cost_to_target_median",
                "reached_share",
                "best_at_budget_mean",
                "best_at_budget_sd",
                "evaluations_median",
            }
            assert row["best_at_budget_mean"] is not None
    assert set(saved["goals"]) == {
        f"{p}_band_crowd_{g}" for p in problems for g in ("cost_30pct_less", "best_at_budget")
    }


def test_each_crowd_is_its_own_and_the_same_every_time() -> None:
    """The benchmark's seeds sample crowds too: crowd k is always the same run, and crowds differ."""
    tp = kernel_problem(4)

    def shared(crowd: int) -> list[dict]:
        return [dict(r.tuning_parameter) for r in tp.uploads(crowd)["a100user"]]

    assert shared(0) == shared(0) and len(shared(0)) == 4
    assert shared(1) != shared(0)
