"""The band benchmark's fast parts: the LCBench surrogate reader, Table 1's settings, the inner runners.

No Ray here: the Ray peers are exercised by ``python -m benchmarks band --quick``. Nothing skips but the
SMAC peer's run (smac is in the ``[bench]`` extra only): the ``[test]`` extra installs onnxruntime and
Optuna, and the repository carries the surrogate in ``tests/data/yahpo_lcbench``; without them these tests
fail and say what is missing.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from benchmarks import band, band_peers, band_ray_budget, band_smac
from raytuner.engines import BanditStructure
from raytuner.errors import InvalidInputError
from raytuner.problem.space import Categorical, Integer, Real
from raytuner.test_problems.lcbench import LCBENCH_TASKS, LCBENCH_VALIDATION_TASKS, OUTPUTS, LCBenchSurrogate

CONFIG = {
    "batch_size": 91,
    "learning_rate": 0.00316,
    "momentum": 0.545,
    "weight_decay": 0.05,
    "num_layers": 3,
    "max_units": 256,
    "max_dropout": 0.5,
}


@pytest.fixture(scope="module")
def surrogate() -> LCBenchSurrogate:
    try:
        return LCBenchSurrogate()
    except (FileNotFoundError, ImportError) as exc:  # the [test] extra and CI's shared data provide both
        pytest.fail(f"the LCBench surrogate does not load: {exc}", pytrace=False)


def test_surrogate_returns_finite_outputs_in_range(surrogate: LCBenchSurrogate) -> None:
    out = surrogate.evaluate(3945, CONFIG, epoch=52)
    assert list(out) == list(OUTPUTS)
    assert all(math.isfinite(v) for v in out.values())
    assert 0.0 <= out["val_accuracy"] <= 100.0
    assert 0.0 <= out["val_balanced_accuracy"] <= 1.0 and out["time"] > 0
    early = surrogate.evaluate(3945, CONFIG, epoch=1)["val_accuracy"]
    assert early < out["val_accuracy"]  # this configuration learns over the epochs
    many = surrogate.evaluate_many([3945, "7593"], [CONFIG, CONFIG], [52, 52])
    assert many.shape == (2, 6) and many[0, 1] == pytest.approx(out["val_accuracy"])


def test_surrogate_problem_covers_requested_tasks(surrogate: LCBenchSurrogate) -> None:
    assert len(surrogate.task_ids) == 34 and set(LCBENCH_TASKS) <= set(surrogate.task_ids)
    problem = surrogate.problem(LCBENCH_TASKS[:2])
    task_id = problem.input_space["task_id"]
    assert isinstance(task_id, Categorical) and task_id.categories == list(LCBENCH_TASKS[:2])
    space = problem.parameter_space
    rate, batch, momentum = space["learning_rate"], space["batch_size"], space["momentum"]
    assert isinstance(rate, Real) and isinstance(batch, Integer) and isinstance(momentum, Real)
    assert rate.log and batch.log and not momentum.log
    assert problem.objective().goal == "maximize" and problem.objective().name == "val_accuracy"


def test_surrogate_rejects_bad_input_naming_the_field(surrogate: LCBenchSurrogate) -> None:
    with pytest.raises(InvalidInputError, match=r"task_id: 12345 is not an LCBench task \(allowed: 3945"):
        surrogate.evaluate(12345, CONFIG, epoch=10)
    with pytest.raises(InvalidInputError, match="epoch"):
        surrogate.evaluate(3945, CONFIG, epoch=53)
    with pytest.raises(InvalidInputError, match="batch_size"):
        surrogate.evaluate(3945, {**CONFIG, "batch_size": 4}, epoch=10)


def test_missing_data_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nowhere"))):
        LCBenchSurrogate(tmp_path / "nowhere")
    monkeypatch.setenv("RAYTUNER_SHARED_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "yahpo_lcbench"))):
        LCBenchSurrogate()


def test_table1_rows_match_the_paper() -> None:
    rows = {row.id: row for row in band.TABLE1}
    assert [(r.task_range, r.structure) for r in rows.values()] == [
        ((1.0, 1.45), (1, 8, 2)),
        ((1.0, 1.45), (1, 16, 2)),
        ((1.0, 1.45), (1, 9, 3)),
        ((1.0, 1.45), (1, 27, 3)),
        ((1.0, 1.45), (1, 16, 4)),
        ((1.0, 5.5), (1, 27, 3)),
    ]
    assert [r.paper["GPTuneBand"] for r in rows.values()] == [1.010, 1.018, 1.022, 1.017, 1.016, 1.013]
    # C = cost of one one-shot pass per task; 9 = 3^2 sums to 7.999... in floats and must still give 8 evaluations
    assert [(r.cost_per_task(), r.evaluations()) for r in rows.values()] == [
        (15.0, 15),
        (21.0, 21),
        (8.0, 8),
        (15.0, 15),
        (8.0, 8),
        (15.0, 15),
    ]
    tasks = rows[6].tasks(repeat=0)
    assert len(tasks) == 10 and all(1.0 <= t <= 5.5 for t in tasks)
    assert tasks == rows[6].tasks(repeat=0) and tasks != rows[6].tasks(repeat=1)
    assert band.FULL.repeats >= 5 and band.QUICK.rows == band.TABLE1[:1] and band.QUICK.repeats == 2


def test_full_and_quick_settings() -> None:
    """Issue 19: all six rows x 5 repeats; issue 58: LCBench on the 8 tasks, 5 repeats, budgets 30 and 60; issue 66:
    the 10 validation tasks as a second problem at the same budgets."""
    full, quick = band.FULL, band.QUICK
    assert (full.rows, full.repeats, full.tasks) == (band.TABLE1, 5, 10)
    assert (full.lcbench_tasks, full.lcbench_repeats, full.lcbench_budgets) == (LCBENCH_TASKS, 5, (30.0, 60.0))
    assert len(LCBENCH_TASKS) == 8 and full.lcbench_validation_tasks == LCBENCH_VALIDATION_TASKS
    assert len(LCBENCH_VALIDATION_TASKS) == 10 and not set(LCBENCH_VALIDATION_TASKS) & set(LCBENCH_TASKS)
    assert (quick.rows, quick.repeats, quick.tasks) == (band.TABLE1[:1], 2, 10)
    assert (quick.lcbench_tasks, quick.lcbench_repeats, quick.lcbench_budgets) == (
        LCBENCH_TASKS[:2],
        1,
        (band.LCBENCH_PASS,),
    )


def test_tuners_and_runners_line_up() -> None:
    assert tuple(band.DEMO_RUNNERS) == band.DEMO_TUNERS and tuple(band.LCBENCH_RUNNERS) == band.LCBENCH_TUNERS
    assert {
        "GPTuneBand",
        "GPTuneBand-one-shot",
        "single-task BO",
        "ASHA",
        "HB",
        "BOHB",
        "TPE",
        "SMAC",
        "GPSampler",
        "SMAC-HPO",
        "random",
    } == set(band.LCBENCH_TUNERS)
    one_shot = band.LCBENCH_RUNNERS["GPTuneBand-one-shot"]  # the same runner in the other fidelity mode
    assert isinstance(one_shot, functools.partial) and one_shot.func is band_peers.run_lcbench_gptuneband
    assert one_shot.keywords == {"fidelity_mode": "one_shot"}
    hpo = band.LCBENCH_RUNNERS["SMAC-HPO"]  # SMAC's runner with the black-box facade
    assert isinstance(hpo, functools.partial) and hpo.func is band_smac.run_lcbench_smac
    assert hpo.keywords == {"facade": "hpo"} and not hpo.args
    paper = band.DEMO_RUNNERS["GPTuneBand-paper"]  # the same runner, the engine's paper model
    assert isinstance(paper, functools.partial) and paper.func is band_peers.run_demo_gptuneband
    assert paper.keywords == {"model": "paper"} and not paper.args


def test_lcbench_budget_and_ray_decision_points() -> None:
    structure = band.lcbench_structure()
    assert structure.fidelities == (52.0, 17.0, 6.0, 2.0)
    assert band.LCBENCH_PASS == pytest.approx(structure.cost_per_pass("iterative")) == pytest.approx(12.6923, abs=1e-4)
    assert band_ray_budget.report_points("HB", 27, 3) == (1, 3, 9, 27)
    assert band_ray_budget.report_points("ASHA", 16, 4, grace=1) == (1, 4, 16)


def test_report_budget_charges_restarts_and_continuations() -> None:
    restarts = band_ray_budget.ReportBudget(8.0, metric="y")  # one-shot: a resumed trial starts again at 0
    for f in (1, 2, 1, 2, 4):
        restarts.record("a", {"fidelity": f, "y": 1.0})
    assert [c for *_, c in restarts.log] == [1, 1, 1, 1, 2] and restarts.used == 6.0 and not restarts.spent()
    assert restarts.record("b", {"fidelity": 4, "y": 1.0}) and len(restarts.log) == 5  # 10 > 8: not logged
    continued = band_ray_budget.ReportBudget(52.0, metric="v")  # iterative: continues from the checkpoint
    for f in (2, 6, 18, 52):
        continued.record("a", {"fidelity": f, "v": 90.0})
    assert continued.used == 52.0 and continued.spent()


def test_sequential_tuners_spend_the_same_budget_on_two_tasks() -> None:
    structure = BanditStructure.hyperband(1, 4, 2)
    cost, evaluations = band_peers.demo_budget(structure)
    tasks = [1.0, 1.3]
    for name in ["GPTuneBand", "GPTune", "TPE", "random"]:
        traces = band.DEMO_RUNNERS[name](tasks, structure, 0)
        assert len(traces) == 2
        for trace in traces:
            assert sum(trace.costs) == pytest.approx(cost), name
            assert trace.final == pytest.approx(np.nanmin(trace.values)), name  # the best seen at b_max
        if name != "GPTuneBand":
            assert all(len(t.costs) == evaluations for t in traces)


def test_row_results_shape_and_goals() -> None:
    finals = {name: np.full((2, 3), 1.0 + 0.01 * k) for k, name in enumerate(band.DEMO_TUNERS)}
    wall = {name: [1.0, 2.0] for name in band.DEMO_TUNERS}
    row = band.row_results(band.TABLE1[0], finals, wall)
    assert row["goals"]["lowest_R_bar_incl_mla"] is True
    assert {
        "id",
        "task_range",
        "structure",
        "R_bar",
        "win_rate_vs",
        "paper_R_bar_GPTuneBand",
        "repeats",
        "cost_per_task",
    } <= set(row)
    assert set(row["R_bar"]) == set(band.DEMO_TUNERS) and set(row["win_rate_vs"]) == set(band.DEMO_TUNERS[1:])
    assert row["win_rate_vs"]["BOHB"] == 1.0 and row["repeats"] == 2 and row["cost_per_task"] == 15.0
    assert band.goals([row]) == {
        "GPTuneBand_lowest_R_bar_every_row": True,
        "GPTuneBand_R_bar_le_1.02_every_row": True,
        "GPTuneBand_win_rate_vs_BOHB_ge_0.8_every_row": True,
    }


def test_lowest_r_bar_counts_our_mla_and_needs_it() -> None:
    finals = {"GPTuneBand": np.full((1, 2), 1.01), "GPTune": np.full((1, 2), 1.0), "BOHB": np.full((1, 2), 1.1)}
    row = band.row_results(band.TABLE1[0], finals, {n: [1.0] for n in finals})
    assert row["goals"]["lowest_R_bar"] is False and row["goals"]["lowest_R_bar_incl_mla"] is False
    no_mla = band.row_results(
        band.TABLE1[0], {n: v for n, v in finals.items() if n != "GPTune"}, {n: [1.0] for n in finals}
    )
    assert no_mla["goals"]["lowest_R_bar"] is True and no_mla["goals"]["lowest_R_bar_incl_mla"] is None


def test_run_goals_keep_the_old_keys_and_add_issue_19s() -> None:
    finals = {name: np.full((1, 2), 1.0 + 0.01 * k) for k, name in enumerate(band.DEMO_TUNERS)}
    row = band.row_results(band.TABLE1[0], finals, {n: [1.0] for n in finals})
    lc = band.lcbench_results(
        [3945],
        25.4,
        {"GPTuneBand": np.array([[90.0]]), "SMAC": np.array([[91.0]])},
        {"GPTuneBand": [1.0], "SMAC": [1.0]},
        ask_seconds=[0.1, 6.0],
    )
    goals = band.all_goals([row], [lc])
    assert {k: goals[k] for k in band.goals([row])} == band.goals([row])
    assert {
        k: goals[k]
        for k in (
            "lowest_R_bar_every_row_incl_mla",
            "R_bar_le_1.02_every_row",
            "win_rate_vs_BOHB_ge_0.8_every_row",
            "lcbench_best_mean_rank",
            "lcbench_lowest_R_bar",
            "lcbench_longest_ask_lt_5s",
        )
    } == {
        "lowest_R_bar_every_row_incl_mla": True,
        "R_bar_le_1.02_every_row": True,
        "win_rate_vs_BOHB_ge_0.8_every_row": True,
        "lcbench_best_mean_rank": False,
        "lcbench_lowest_R_bar": False,
        "lcbench_longest_ask_lt_5s": False,
    }
    unmeasured = band.all_goals([])
    assert set(unmeasured) == set(goals) and set(unmeasured.values()) == {None}
    text = band.render_report(
        {
            "table1": {"rows": [row], "goals": band.goals([row])},
            "lcbench": lc,
            "goals": goals,
            "quick": True,
            "machine": {},
            "command": "python -m benchmarks band",
        }
    )
    assert "longest 6.0 s" in text and "GPTuneBand-paper" in text


def test_lcbench_results_rank_maximised_accuracy() -> None:
    finals = {
        "GPTuneBand": np.array([[95.0, 80.0]]),
        "ASHA": np.array([[90.0, 80.0]]),
        "HB": np.array([[85.0, 70.0]]),
        "BOHB": np.array([[95.0, 60.0]]),
    }
    lc = band.lcbench_results([3945, 7593], 25.0, finals, {n: [1.0] for n in finals})
    assert lc["mean_rank"] == {"GPTuneBand": 1.5, "ASHA": 2.25, "HB": 3.5, "BOHB": 2.75}
    assert lc["R_bar"]["GPTuneBand"] == 1.0 and lc["R_bar"]["HB"] > 1.0 and lc["goal_best_mean_rank"]
    assert lc["structure"] == [1, 52, 3] and lc["repeats"] == 1
    assert lc["skipped"] == [] and lc["longest_ask_seconds"] is None and lc["goal_longest_ask_lt_5s"] is None


def _fake_gptuneband(
    surrogate: LCBenchSurrogate, task_ids: Sequence[int], structure: BanditStructure, budget: float, seed: int
) -> list[band_peers.Trace]:
    return [band_peers.Trace([budget], [90.0 + seed], 90.0 + seed, ask_seconds=[0.5, 2.0 + seed]) for _ in task_ids]


def test_run_lcbench_skips_a_peer_that_is_not_installed_and_times_asks(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "smac", None)  # import smac raises ImportError
    runners = {"GPTuneBand": _fake_gptuneband, "SMAC": band_smac.run_lcbench_smac}
    with caplog.at_level("WARNING", logger="benchmarks.band"):
        lc, history = band.run_lcbench([3945], repeats=2, budget=band.LCBENCH_PASS, runners=runners)
    assert lc["skipped"] == ["SMAC"] and list(lc["mean_rank"]) == ["GPTuneBand"] and "SMAC" in caplog.text
    assert set(history["curves"]) == {"GPTuneBand"}
    assert (lc["asks"], lc["longest_ask_seconds"], lc["ask_seconds_median"]) == (4, 3.0, 1.25)
    assert lc["goal_longest_ask_lt_5s"] is True
    assert lc["ask_executor"] in {"ProcessExecutor", "RayExecutor"}  # a user's: parallel starts past 64 records


def test_lcbench_tpe_evaluates_at_full_fidelity_within_the_budget(surrogate: LCBenchSurrogate) -> None:
    structure = BanditStructure.hyperband(2, 8, 2, integer=True)
    traces = band_peers.run_lcbench_tpe(surrogate, [3945, 7593], structure, 3.9, seed=1)
    assert [t.costs for t in traces] == [[1.0] * 3] * 2
    assert all(t.final == max(t.values) for t in traces)
    again = band_peers.run_lcbench_tpe(surrogate, [3945, 7593], structure, 3.9, seed=1)
    assert [t.values for t in again] == [t.values for t in traces]
    with pytest.raises(InvalidInputError, match="budget"):
        band_peers.run_lcbench_tpe(surrogate, [3945], structure, 0.5, seed=1)


def test_random_and_gpsampler_peers_evaluate_at_full_fidelity(
    surrogate: LCBenchSurrogate, monkeypatch: pytest.MonkeyPatch
) -> None:
    structure = BanditStructure.hyperband(2, 8, 2, integer=True)
    traces = band_peers.run_lcbench_random(surrogate, [3945, 7593], structure, 4.5, seed=2)
    assert [t.costs for t in traces] == [[1.0] * 4] * 2 and all(t.final == max(t.values) for t in traces)
    assert traces[0].values != traces[1].values  # a seed per task
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError: the peer is skipped
    with pytest.raises(ImportError, match="GPSampler needs torch"):
        band_peers.run_lcbench_gpsampler(surrogate, [3945], structure, 4.5, seed=2)


def test_smac_black_box_facade_evaluates_floor_budget_trials_at_b_max(surrogate: LCBenchSurrogate) -> None:
    pytest.importorskip("smac", reason="smac is in the [bench] extra")
    structure = BanditStructure.hyperband(2, 8, 2, integer=True)
    (trace,) = band_smac.run_lcbench_smac(surrogate, [3945], structure, 5.5, seed=0, facade="hpo")
    assert trace.costs == [1.0] * 5 and not trace.note
    assert 0.0 < trace.final <= 100.0 and trace.final == pytest.approx(np.nanmax(trace.values))


def test_smac_peer_on_one_task_spends_at_most_the_budget(surrogate: LCBenchSurrogate) -> None:
    pytest.importorskip("smac", reason="smac is in the [bench] extra")
    structure = BanditStructure.hyperband(2, 8, 2, integer=True)
    budget = structure.cost_per_pass("iterative")
    (trace,) = band_smac.run_lcbench_smac(surrogate, [3945], structure, budget, seed=0)
    assert 0.5 * budget < sum(trace.costs) <= budget + 1e-9
    assert {round(c * 8) for c in trace.costs} <= {2, 4, 8}  # whole-epoch rungs and their increments
    assert 0.0 < trace.final <= 100.0 and trace.final == pytest.approx(np.nanmax(trace.values)) and not trace.note
    (again,) = band_smac.run_lcbench_smac(surrogate, [3945], structure, budget, seed=0)
    assert again.costs == trace.costs and again.final == trace.final  # same seed, same process
