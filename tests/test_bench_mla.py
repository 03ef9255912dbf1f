"""The MLA benchmark's parts: the ask/tell driver, the metrics it reports and the results layout.

Only the LCBench cells' test fits models (a tiny run of each tuner on the real surrogate); the
benchmark itself runs with ``python -m benchmarks mla --quick``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from benchmarks.mla import TUNERS as ALL_TUNERS
from benchmarks.mla import (
    QualitySettings,
    available_tuners,
    build_results,
    drive,
    normalised_curves,
    quality_results,
    render_report,
    run_quality,
)
from benchmarks.mla_lcbench import LCBENCH_TUNERS, LCBenchQuality, lcbench_cells, lcbench_rows, render_lcbench
from benchmarks.mla_overhead import make_history, overhead_goals, overhead_row, standardise
from benchmarks.mla_scale import make_heldout, render_scale, scale_figures, scale_goals, task_values
from raytuner.engines import RandomSearch
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo_grid_minimum

TUNERS = ("mla", "single_task_bo", "optuna_tpe", "random")


def _fake_quality() -> dict:
    rng = np.random.default_rng(0)
    best = {name: 1.0 + rng.random((3, 4)) for name in TUNERS}
    best["mla"] = np.minimum(best["mla"], best["single_task_bo"])  # mla never loses to single-task BO
    return quality_results(best, {name: [1.0, 2.0, 3.0] for name in TUNERS})


def _fake_overhead() -> list[dict]:
    ours = {"seconds": [0.5, 0.4, 0.6], "loglik": -20.0, "standardisation_agrees": True}
    return [
        overhead_row(10, 10, 0.9, [0.2, 0.3, 0.25], ours, {"seconds": 4.0, "loglik": -20.05}, 5),
        overhead_row(10, 30, 1.5, [0.6, 0.7, 0.8], ours, {"seconds": 9.0, "loglik": -19.95}, 5),
    ]


def test_results_have_the_agreed_key_layout() -> None:
    results = build_results(_fake_quality(), _fake_overhead(), quick=False, machine={"cores": 2})
    assert {"quality", "overhead", "quick", "machine"} <= set(results)
    rows = results["quality"]["rows"]
    assert [row["tuner"] for row in rows] == list(TUNERS)
    for row in rows:
        assert {"tuner", "R_bar", "win_rate_vs"} <= set(row) and row["R_bar"] >= 1.0
    mla = rows[0]
    assert set(mla["win_rate_vs"]) == {"single_task_bo", "optuna_tpe", "random"}
    assert mla["win_rate_vs"]["single_task_bo"] >= 0.5 and all(row["win_rate_vs"] == {} for row in rows[1:])
    for row in results["overhead"]["rows"]:
        assert {
            "tasks",
            "samples_per_task",
            "ask_seconds_median",
            "naive_fit_seconds_median",
            "loglik",
            "naive_loglik",
        } <= set(row)
    assert results["overhead"]["rows"][1]["ask_seconds_median"] == 0.7
    assert results["goals"]["ask_median_le_1s_at_10x30"] is True
    # 10x10: 8x faster and a better log-likelihood; 10x30: 18x faster, 0.05 nats worse (within the tolerance)
    assert results["goals"]["fit_3x_faster_than_naive_at_equal_loglik"] is True
    json.dumps(results, allow_nan=False)  # what write_results needs
    report = render_report(
        {
            **results,
            "elapsed_s": 1.0,
            "quality": {
                **results["quality"],
                "tasks": [1.0, 2.0],
                "seeds": [0],
                "evaluations_per_task": 20,
                "n_initial": 10,
                "plot": None,
            },
            "overhead": {
                **results["overhead"],
                "asks": 5,
                "fit_repeats": 3,
                "naive_restarts": 5,
                "naive_samples": [10, 30],
            },
        }
    )
    assert "| mla |" in report and "10 x 30" in report and "matplotlib is not installed" in report


def test_goals_miss_when_slower_or_worse_and_stay_open_when_unmeasured() -> None:
    slow = {
        "tasks": 10,
        "samples_per_task": 30,
        "ask_seconds_median": 1.2,
        "naive_fit_seconds_median": 2.0,
        "fit_speedup_vs_naive": 4.0,
        "loglik": -30.0,
        "naive_loglik": -20.0,
    }
    assert overhead_goals([slow]) == {
        "ask_median_le_1s_at_10x30": False,
        "fit_3x_faster_than_naive_at_equal_loglik": False,
    }
    unmeasured = {**slow, "samples_per_task": 50, "naive_fit_seconds_median": None}
    assert overhead_goals([unmeasured]) == {
        "ask_median_le_1s_at_10x30": None,
        "fit_3x_faster_than_naive_at_equal_loglik": None,
    }
    quality = quality_results(
        {"mla": np.array([2.0, 2.0]), "single_task_bo": np.array([1.0, 3.0])}, {"mla": [1.0], "single_task_bo": [1.0]}
    )
    goals = build_results(quality, [], quick=True, machine={})["goals"]
    assert goals["mla_win_rate_vs_single_task_bo_ge_0.7"] is False  # 0.5
    assert goals["mla_lowest_R_bar"] is False  # mla: R-tilde [2, 1] -> 1.5; single: [1, 1.5] -> 1.25


def test_drive_balances_tasks_and_run_quality_collects_every_cell() -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    values = drive(RandomSearch(problem, [{"t": 1.0}, {"t": 2.0}, {"t": 3.0}], seed=1), 4)
    assert values.shape == (3, 4) and np.all(np.isfinite(values))
    settings = QualitySettings(seeds=(0, 1), tasks=(1.0, 2.0), evaluations=3, n_initial=2)

    def random_run(problem: ProblemSpace, tasks: list, seed: int, s: QualitySettings) -> np.ndarray:
        return drive(RandomSearch(problem, tasks, seed=seed), s.evaluations)

    runs, wall = run_quality(settings, {"a": random_run, "b": random_run})
    assert runs["a"].shape == (2, 2, 3) and len(wall["b"]) == 2
    np.testing.assert_array_equal(runs["a"], runs["b"])  # same seeds, same values
    curves = normalised_curves(runs, settings.tasks)
    assert len(curves["a"]) == 3 and all(c >= 1.0 for c in curves["a"])  # no tuner beats the grid minimum
    assert curves["a"] == sorted(curves["a"], reverse=True)


def test_overhead_history_is_standardised_per_task() -> None:
    history = make_history((1.0, 5.5), 7)
    assert [len(c) for c in history.configs] == [7, 7] and len(history.records()) == 14
    assert history.records()[1].task_parameter == {"t": 5.5}  # tasks interleaved
    for y in standardise(history.y):
        assert np.mean(y) == pytest.approx(0.0, abs=1e-12) and np.std(y) == pytest.approx(1.0)
        np.testing.assert_allclose(standardise([y])[0], y)  # standardising twice changes nothing
    for task, y in zip(history.tasks, history.y):
        assert min(y) >= demo_grid_minimum(task["t"])[1] - 1e-6


class _FlatModel:
    """A stand-in fitted model: mean 0 and variance 1 in model units everywhere, an approximation report."""

    class report:  # an attribute namespace like FitReport
        approximation = {
            "method": "fitc",
            "samples": 1020,
            "fit_samples": 500,
            "inducing": np.int64(200),
            "held_out": 20,
            "held_out_rmse": 0.1,
            "held_out_log_density": float("nan"),
        }

    def predict(self, task: int, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(len(X)), np.ones(len(X))


def test_scale_rows_report_held_out_error_and_goals() -> None:
    tasks = task_values(2)
    rng = np.random.default_rng(0)
    y = [rng.normal(3.0, 2.0, 510) for _ in tasks]  # 1,020 records: held-out figures, no exact model
    X = [rng.random((510, 1)) for _ in tasks]
    figures = scale_figures(_FlatModel(), X, y, standardise(y), tasks)
    json.dumps(figures, allow_nan=False)  # numpy scalars and NaN in the report are made JSON data
    assert figures["approximation"]["inducing"] == 200 and figures["approximation"]["held_out_log_density"] is None
    heldout = make_heldout(tasks)
    predicted_mean = np.concatenate([np.full(20, np.mean(v)) for v in y])
    rmse = float(np.sqrt(np.mean((np.concatenate(heldout[1]) - predicted_mean) ** 2)))
    assert figures["heldout_rmse"] == pytest.approx(rmse, rel=1e-4) and figures["heldout_log_density"] < 0
    assert figures["exact_heldout_rmse"] is None and figures["exact_loglik"] is None
    small = scale_figures(_FlatModel(), [x[:5] for x in X], [v[:5] for v in y], standardise([v[:5] for v in y]), tasks)
    assert small["heldout_rmse"] is None and small["approximation"] is not None

    ours = {"seconds": [4.0], "loglik": -50.0, "standardisation_agrees": True}
    rows = [
        overhead_row(10, 30, 0.5, [0.2, 0.25], ours, None, 5),
        overhead_row(10, 100, 1.5, [0.9], ours, None, 5, figures),
        overhead_row(20, 250, 4.0, [3.5], ours, None, 5, {**figures, "heldout_rmse": 0.01}),
    ]
    assert [r["records"] for r in rows] == [300, 1000, 5000] and rows[2]["heldout_rmse"] == 0.01
    assert scale_goals(rows) == {
        "warm_ask_median_le_0.3s_at_10x30": True,
        "cold_fit_le_5s_at_10x30": True,
        "ask_median_le_1s_at_10x100": True,
        "ask_median_le_3s_at_20x250": False,
    }
    section = "\n".join(render_scale(rows))
    assert "10 x 100" in section and "fitc, fit on 500 of 1020, 200 inducing" in section
    assert "10 x 30 |" not in section and render_scale(rows[:1]) == []


def test_optuna_gp_is_a_peer_and_skipped_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "optuna_gp" in ALL_TUNERS
    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # import torch raises ImportError
    tuners, skipped = available_tuners()
    assert "optuna_gp" not in tuners and "torch" in skipped["optuna_gp"] and "mla" in tuners
    names = ("mla", "single_task_bo", "optuna_gp")
    best = {
        "mla": np.array([[1.0, 1.0, 1.0]]),
        "single_task_bo": np.array([[2.0, 2.0, 2.0]]),
        "optuna_gp": np.array([[2.0, 0.5, 0.5]]),
    }
    quality = {
        **quality_results(best, {n: [1.0] for n in names}),
        "tasks": [1.0],
        "seeds": [0],
        "evaluations_per_task": 20,
        "n_initial": 10,
        "plot": None,
        "skipped": {"optuna_tpe": "why not"},
    }
    results = build_results(quality, [], quick=True, machine={})
    goals = results["goals"]
    assert goals["mla_win_rate_vs_single_task_bo_ge_0.7"] is True and goals["win_rate_ge_0.7_vs_optuna_gp"] is False
    assert goals["ask_median_le_3s_at_20x250"] is None and goals["warm_ask_median_le_0.3s_at_10x30"] is None
    report = render_report(
        {
            **results,
            "overhead": {
                **results["overhead"],
                "asks": 3,
                "fit_repeats": 1,
                "naive_restarts": 2,
                "naive_samples": [10],
            },
        }
    )
    assert "Skipped optuna_tpe: why not." in report and "against optuna_gp: **missed**" in report
    assert "at 20 x 250 (5,000 records) at most 3 s: not measured" in report


def _fake_lcbench() -> dict:
    rng = np.random.default_rng(1)
    best = {name: 90.0 + rng.random((3, 4)) for name in ("mla", "mla_shared", "single_task_bo", "optuna_gp", "random")}
    best["mla_shared"] = np.maximum(best["mla_shared"], best["single_task_bo"] + 0.01)  # always ahead of it
    rows = lcbench_rows(best, {name: [1.0, 2.0, 3.0] for name in best})
    return {
        "rows": rows,
        "references": ["mla", "mla_shared"],
        "tasks": [3945, 7593],
        "seeds": [0, 1, 2],
        "epoch": 52,
        "evaluations_per_task": 20,
        "n_initial": 10,
    }


def test_the_lcbench_cells_give_win_rates_with_their_errors_and_a_goal() -> None:
    lcbench = _fake_lcbench()
    by_tuner = {row["tuner"]: row for row in lcbench["rows"]}
    assert by_tuner["mla_shared"]["win_rate_vs"]["single_task_bo"] == 1.0
    assert by_tuner["mla_shared"]["win_rate_se_vs"]["single_task_bo"] == 0.0  # every seed won whole
    assert set(by_tuner["mla"]["win_rate_vs"]) == {"mla_shared", "single_task_bo", "optuna_gp", "random"}
    assert by_tuner["random"]["win_rate_vs"] == {} and by_tuner["random"]["win_rate_se_vs"] == {}
    results = build_results(
        _fake_quality(), _fake_overhead(), quick=False, machine={"cores": 2}, quality_lcbench=lcbench
    )
    for peer in ("single_task_bo", "optuna_gp"):
        expected = by_tuner["mla"]["win_rate_vs"][peer] >= 0.7
        assert results["goals"][f"mla_win_rate_vs_{peer}_ge_0.7_on_lcbench"] is expected
    skipped = build_results(
        _fake_quality(),
        _fake_overhead(),
        quick=False,
        machine={},
        quality_lcbench={"skipped": {"lcbench": "FileNotFoundError: no data"}},
    )
    assert skipped["goals"]["mla_win_rate_vs_single_task_bo_ge_0.7_on_lcbench"] is None
    assert skipped["goals"]["mla_win_rate_vs_optuna_gp_ge_0.7_on_lcbench"] is None
    json.dumps(results, allow_nan=False)
    report = render_report(
        {
            **results,
            "elapsed_s": 1.0,
            "quality": {
                **results["quality"],
                "tasks": [1.0],
                "seeds": [0],
                "evaluations_per_task": 20,
                "n_initial": 10,
                "plot": None,
            },
            "overhead": {
                **results["overhead"],
                "asks": 5,
                "fit_repeats": 3,
                "naive_restarts": 5,
                "naive_samples": [10],
            },
        }
    )
    assert "## Quality on LCBench" in report and "| mla_shared |" in report and " ± " in report


@pytest.mark.slow
def test_the_lcbench_cells_run_every_tuner_on_the_real_surrogate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # as without torch (the [test] extra has none)
    settings = LCBenchQuality(seeds=(0, 1), tasks=(3945, 7593), evaluations=4, n_initial=2)
    out = lcbench_cells(settings)
    if "lcbench" in out["skipped"]:  # the [test] extra and CI's shared data provide the surrogate
        pytest.fail(f"the LCBench surrogate does not load: {out['skipped']['lcbench']}", pytrace=False)
    assert list(out["skipped"]) == ["optuna_gp"] and "torch" in out["skipped"]["optuna_gp"]
    assert [row["tuner"] for row in out["rows"]] == [t for t in LCBENCH_TUNERS if t != "optuna_gp"]
    for name, cells in out["best"].items():
        assert np.shape(cells) == (2, 2) and all(0.0 < v <= 100.0 for row in cells for v in row), name
    accuracy = out["model_accuracy"]  # MLA's model against one GP per task, 2 seeds x 2 tasks
    assert (
        accuracy["cells"] == 4
        and accuracy["samples_per_task"] == 2
        and set(accuracy["models"]) == {"lcm", "independent"}
    )
    for scores in accuracy["models"].values():
        assert -1.0 <= scores["spearman"] <= 1.0 and scores["top_regret"] >= 0.0
    assert 0.0 <= accuracy["lcm_better_top_share"] <= 1.0
    assert "LCM over all tasks ranks them" in "\n".join(render_lcbench(out))
    by_tuner = {row["tuner"]: row for row in out["rows"]}
    for reference in ("mla", "mla_shared"):
        assert set(by_tuner[reference]["win_rate_vs"]) == set(LCBENCH_TUNERS) - {reference, "optuna_gp"}
        assert all(0.0 <= w <= 1.0 for w in by_tuner[reference]["win_rate_vs"].values())


def test_the_staggered_start_is_judged_by_its_win_rate_and_its_evaluations_to_reach_the_best() -> None:
    from benchmarks.report import reach_results

    rng = np.random.default_rng(1)
    # (seeds, tasks, evaluations): single-task BO gets near each task's best at its 8th evaluation,
    # the staggered start at its 3rd; both end at the same best
    slow = 1.5 + rng.random((3, 4, 10))
    slow[:, :, 7:] = 1.0
    fast = 1.5 + rng.random((3, 4, 10))
    fast[:, :, 2:] = 1.0
    values = {"mla": slow.copy(), "mla_staggered": fast, "single_task_bo": slow}
    quality = quality_results({n: v.min(axis=2) for n, v in values.items()}, {n: [1.0] for n in values})
    quality["reach"] = reach_results(values)
    rows = {r["tuner"]: r for r in quality["reach"]["rows"]}
    assert rows["mla_staggered"]["total_median"] == 12 and rows["single_task_bo"]["total_median"] == 32
    assert rows["mla_staggered"]["ratio_to_baseline"] == 0.375
    by_tuner = {r["tuner"]: r for r in quality["rows"]}
    assert by_tuner["mla_staggered"]["win_rate_vs"]["single_task_bo"] == 0.5  # the same bests: every cell a tie
    lcbench: dict[str, Any] = {  # accuracies (maximised): reached at the 1st evaluation by one, never by the other
        "rows": [{"tuner": "mla_staggered", "win_rate_vs": {"single_task_bo": 0.65}}],
        "reach": reach_results(
            {"mla_staggered": np.full((2, 2, 5), 90.0), "single_task_bo": np.full((2, 2, 5), 80.0)}, sign=-1.0
        ),
    }
    goals = build_results(quality, _fake_overhead(), quick=False, machine={}, quality_lcbench=lcbench)["goals"]
    assert goals["mla_staggered_evaluations_to_99_le_0.7_of_single_task_bo"] is True
    assert goals["mla_staggered_win_rate_vs_single_task_bo_ge_0.6"] is False
    assert goals["mla_staggered_win_rate_vs_single_task_bo_ge_0.6_on_lcbench"] is True
    assert lcbench["reach"]["rows"][1]["total_median"] == 12  # 2 tasks, each its 5 evaluations + 1
    assert goals["mla_staggered_evaluations_to_99_le_0.7_of_single_task_bo_on_lcbench"] is True
    assert "Evaluations until every task is near its best (demo)" in render_report(
        build_results(
            {**quality, "tasks": [1.0], "seeds": [0], "evaluations_per_task": 10, "n_initial": 2},
            _fake_overhead(),
            quick=True,
            machine={},
        )
        | {
            "elapsed_s": 1.0,
            "overhead": {
                "rows": _fake_overhead(),
                "asks": 3,
                "fit_repeats": 1,
                "naive_restarts": 2,
                "naive_samples": [10],
            },
        }
    )


@pytest.mark.slow
def test_together_against_alone_runs_both_task_sets_and_judges_every_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.mla_together import GOALS, TOGETHER_TUNERS, TogetherSettings, render_together, run_together

    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # as without torch (the [test] extra has none)
    settings = TogetherSettings(
        sets={"tuning": (3945, 7593), "validation": (167149, 168329)}, budgets=(4,), seeds=(0,), n_initial=2
    )
    out = run_together(settings)
    assert list(out["skipped"]) == ["optuna_gp"]
    assert [(c["set"], c["budget"], c["tasks"]) for c in out["cells"]] == [
        ("tuning", 4, [3945, 7593]),
        ("validation", 4, [167149, 168329]),
    ]
    for cell in out["cells"]:
        assert set(cell["best_mean"]) == set(TOGETHER_TUNERS) - {"optuna_gp"}
        mla = cell["margins"]["mla"]  # per task: mla's mean best minus single-task BO's, and the worst task
        alone = np.mean(cell["best"]["single_task_bo"], axis=0)
        assert mla["per_task"] == pytest.approx(np.mean(cell["best"]["mla"], axis=0) - alone, abs=1e-3)
        assert mla["worst"] == min(mla["per_task"]) and mla["worst_task"] in cell["tasks"]
        assert mla["standard_error"] == [0.0, 0.0] and mla["worst_upper"] == mla["worst"]  # one seed: no spread
        assert cell["noise_floor_single_task_bo"] is None  # fewer than 4 seeds to halve
        assert 0.0 <= cell["win_rate_vs_single_task_bo"]["mla"] <= 1.0
    assert tuple(out["goals"]) == GOALS
    assert all(isinstance(v, bool) for v in out["goals"].values())
    report = "\n".join(render_together(out))
    assert "The validation set (2 tasks), 4 evaluations per task" in report and "| mla_always |" in report
