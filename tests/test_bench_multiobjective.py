"""The multi-objective benchmark on a tiny workload: its rows, goals and report (figures are measured, not tested)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from record_helpers import known, provenance

from benchmarks.mo_problems import AMG_REFERENCE, RUNNERS, amg_mo_problem, lcbench_problem, zdt_problem
from benchmarks.multiobjective import FRACTIONS, goals, measure, render_report

pytestmark = pytest.mark.slow


def test_a_tiny_run_has_every_key_the_issue_names() -> None:
    tiny = dataclasses.replace(
        zdt_problem(True, quick=True), evaluations=6, n_initial=3, tasks=zdt_problem(True, quick=True).tasks[:2]
    )
    row = measure(tiny, [0], {name: RUNNERS[name] for name in ("mla", "optuna_nsga2", "random")})
    assert row["id"] == "zdt-constrained" and row["reference_point"] == [1.1, 11.0]
    assert [r["tuner"] for r in row["rows"]] == ["mla", "optuna_nsga2", "random"]
    for r in row["rows"]:
        assert set(r) >= {
            "tuner",
            "hypervolume_by_fraction",
            "hv_sd_by_fraction",
            "constraint_violations",
            "suggest_ms_median",
        }
        assert list(r["hypervolume_by_fraction"]) == [f"{f:g}" for f in FRACTIONS]
        volumes = list(r["hypervolume_by_fraction"].values())
        assert volumes == sorted(volumes) and volumes[-1] <= max(row["exact_hypervolume"].values())
        assert 0.0 <= r["constraint_violations"] <= 1.0
    verdicts = goals([row])
    assert set(verdicts) == {
        "mla_highest_hypervolume_at_50_and_100",
        "violations_at_most_10pct",
        "suggest_at_most_1s_at_4x50x2",
    }
    assert verdicts["suggest_at_most_1s_at_4x50x2"]["met"] is None  # no LCBench row: not measured
    report = render_report(
        {
            "command": "python -m benchmarks multiobjective --out x --quick",
            "elapsed_s": 1.0,
            "seeds": [0],
            "problems": [row],
            "goals": verdicts,
        }
    )
    assert "## zdt-constrained" in report and "| mla |" in report


def test_the_lcbench_problem_has_two_objectives_and_a_fixed_reference() -> None:
    problem = lcbench_problem(quick=True)
    assert [(o.name, o.goal) for o in problem.problem.optimised] == [("val_accuracy", "maximize"), ("time", "minimize")]
    assert len(problem.tasks) == 4 and problem.reference[0] == 0.0 and problem.reference[1] > 0
    assert problem.reference == lcbench_problem(quick=True).reference  # fixed: the same every time


def test_the_amg_problem_trades_work_against_memory_and_records_failed_solves() -> None:
    from raytuner.test_problems.amg import SolveFailure

    amg = amg_mo_problem(True, quick=True)
    assert [o.name for o in amg.problem.optimised] == ["work", "memory"]
    assert [(o.name, o.upper_bound) for o in amg.problem.output_constraints] == [("memory", 2.0)]
    calls: list[int] = []

    def evaluate(task: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, float]:
        calls.append(1)
        if len(calls) % 3 == 0:  # every third solve fails: a failed record, never a crash
            raise SolveFailure("stalled: forced by the test")
        return amg.evaluate(task, config)

    tiny = dataclasses.replace(amg, evaluate=evaluate, evaluations=4, n_initial=3, tasks=amg.tasks[:2])
    row = measure(tiny, [0], {name: RUNNERS[name] for name in ("mla", "optuna_nsga2", "random")})
    assert row["reference_point"] == list(AMG_REFERENCE)
    for r in row["rows"]:
        volumes = list(r["hypervolume_by_fraction"].values())
        assert volumes == sorted(volumes) and volumes[-1] >= 0
    for runner in (RUNNERS["mla"], RUNNERS["optuna_motpe"]):
        records = [r for task in runner(tiny, 1).records for r in task]
        failed = [r for r in records if r.status != "ok"]
        assert len(records) == 8 and failed
        assert all(
            known(provenance(r).failure_message).startswith("stalled") and r.value("work") is None for r in failed
        )
        assert all(r.known_value("work") > 0 and r.known_value("memory") >= 1 for r in records if r.status == "ok")
