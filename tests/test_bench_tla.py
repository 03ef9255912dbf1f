"""The TLA benchmark (a tiny run of its real code path), the Kernel Tuner cache reader and Branin.

The Kernel Tuner caches are the repository's subsets (``tests/data/kernel_tuner``); the full
benchmark runs with ``python -m benchmarks tla --out DIR --quick`` over the whole caches.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from repo_data import KERNEL_TUNER

from benchmarks import BENCHMARKS
from benchmarks.kernel_cache import KernelCache, default_data_dir, load_cache
from benchmarks.tla import CROSS_MACHINE_ID, SCENARIOS, Settings, Trace, branin_tasks, run
from benchmarks.tla_kernel import KERNEL_SOURCE
from benchmarks.tla_report import goals, summarise
from raytuner.errors import InvalidInputError
from raytuner.problem.space import Categorical, ProblemSpace
from raytuner.test_problems import BRANIN_CLASSIC, BRANIN_PROBLEM, branin, branin_grid_minimum

DATA = KERNEL_TUNER

TUNERS = ("NoTLA", "Multitask(TS)", "WeightedSum(equal)", "Ensemble(proposed)")


def _finite_numbers(value: Any) -> bool:
    """Every number in a nested structure is finite (None is allowed: a value not measured)."""
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite_numbers(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def test_tiny_run_writes_the_agreed_results(tmp_path: Path) -> None:
    settings = Settings(
        seeds=(0,),
        scenarios=("a", "c"),
        tuners=TUNERS,
        evaluations=6,
        source_samples=30,
        checkpoints=(3, 6, 20),
        cross_machine_seeds=(0,),
        cross_machine_tuners=("NoTLA", "Ensemble(proposed)"),
        workers=2,
    )
    results = run(tmp_path, quick=True, settings=settings)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["scenarios"] == results["scenarios"] and (tmp_path / "report.md").is_file()
    assert [s["id"] for s in saved["scenarios"]] == ["a", "c"] and saved["settings"]["checkpoints"] == [3, 6]
    for scenario in saved["scenarios"]:
        assert {"id", "description", "best_so_far", "rank"} <= set(scenario)
        assert set(scenario["best_so_far"]) == set(TUNERS) == set(scenario["rank"])
        for tuner in TUNERS:
            assert set(scenario["best_so_far"][tuner]) == {"3", "6"} == set(scenario["rank"][tuner])
            (m3, sd3), (m6, _) = scenario["best_so_far"][tuner]["3"], scenario["best_so_far"][tuner]["6"]
            assert math.isfinite(m3) and sd3 == 0.0 and m6 <= m3 and m6 >= scenario["optimum"] - 1e-5
            assert 1 <= scenario["rank"][tuner]["6"] <= len(TUNERS)
        assert scenario["proposers"]["Ensemble(proposed)"].get("weighted_sum_equal", 0) >= 1  # the first one
        assert _finite_numbers(scenario)
    assert set(saved["goals"]) == {
        "tla_beats_notla_at_10",
        "ensemble_within_5pct_of_best_single_at_20",
        "multitask_ts_no_worse_than_ps",
        "weighted_sum_dynamic_no_worse_than_equal",
    }
    assert all({"met", "detail"} <= set(g) for g in saved["goals"].values())
    assert saved["goals"]["multitask_ts_no_worse_than_ps"]["met"] is None  # Multitask(PS) did not run
    assert set(saved["ask_seconds_median"]) == set(TUNERS)
    cross = saved["cross_machine"]
    assert cross["id"] == CROSS_MACHINE_ID and set(cross["best_so_far"]) == {"NoTLA", "Ensemble(proposed)"}
    assert cross["optimum"] == pytest.approx(50.36, abs=0.01) and cross["outside_valid_space"]["NoTLA"] == 0
    assert all(v[0] >= cross["optimum"] for s in cross["best_so_far"].values() for v in s.values())
    assert _finite_numbers(cross)
    assert "### (a) demo" in (tmp_path / "report.md").read_text()


def test_goals_compare_normalised_regrets() -> None:
    def traces(*runs: list[float]) -> list[Trace]:
        return [Trace(values=list(r), proposers=["x"] * len(r), ask_seconds=[0.1] * len(r)) for r in runs]

    raw = {
        "id": "z",
        "description": "toy",
        "function": "demo",
        "sources": [],
        "target": {},
        "optimum": 1.0,
        "scale": 2.0,
        "seeds": [0, 1],
        "source_samples_per_task": 0,
        "wall_s": 1.0,
        "traces": {
            "NoTLA": traces([5, 4, 3], [5, 5, 2]),
            "Stacking": traces([2, 2, 1.5], [3, 1.2, 1.2]),
            "Ensemble(proposed)": traces([2, 2, 1.55], [3, np.nan, 1.2]),
            "Multitask(PS)": traces([1, 1, 1], [1, 1, 1]),
            "Multitask(TS)": traces([2, 2, 2], [2, 2, 2]),
        },
    }
    s = summarise(raw, [1, 3])
    assert s["best_so_far"]["NoTLA"]["3"] == [2.5, pytest.approx(0.707107)]
    assert s["rank"]["Multitask(PS)"] == {"1": 1.0, "3": 1.0} and s["rank"]["NoTLA"]["1"] == 5.0
    assert s["normalised_regret"]["Stacking"]["3"] == pytest.approx(0.175)
    assert s["runs"]["Ensemble(proposed)"][1] == [3.0, None, 1.2]  # a failed evaluation
    g = goals([s], [1, 3])
    assert g["tla_beats_notla_at_10"]["met"] is True  # judged at 3 here
    assert g["ensemble_within_5pct_of_best_single_at_20"]["met"] is False  # 1.375 vs Multitask(PS)'s 1
    assert g["multitask_ts_no_worse_than_ps"]["met"] is False
    assert g["weighted_sum_dynamic_no_worse_than_equal"]["met"] is None


def test_scenarios_follow_figure_3() -> None:
    assert [s.id for s in SCENARIOS] == list("abcdef") and BENCHMARKS["tla"] == "benchmarks.tla"
    a, b, c, d, e, f = SCENARIOS
    assert (a.sources, a.target, b.target) == (({"t": 0.8},), {"t": 1.0}, {"t": 1.2})
    tasks = branin_tasks()
    assert c.sources == e.sources[:1] == (tasks["S1"],) and len(e.sources) == 3 and f.sources == e.sources
    assert (c.target, d.target, e.target, f.target) == (tasks["T1"], tasks["T2"], tasks["T1"], tasks["T2"])
    problem = ProblemSpace.parse(BRANIN_PROBLEM)
    for task in tasks.values():
        problem.input_space.check(task)
    assert a.optimum() <= min(a.evaluate(a.target, {"x": x}) for x in np.linspace(0, 1, 101))


def test_branin_classic_minimum() -> None:
    assert branin(-math.pi, 12.275, **BRANIN_CLASSIC) == pytest.approx(0.397887, abs=1e-6)
    assert branin(3 * math.pi, 2.475, **BRANIN_CLASSIC) == pytest.approx(0.397887, abs=1e-6)
    (x1, x2), y = branin_grid_minimum(BRANIN_CLASSIC)
    assert y == pytest.approx(0.397887, abs=1e-6) and branin(x1, x2, **BRANIN_CLASSIC) == pytest.approx(y)
    problem = ProblemSpace.parse(BRANIN_PROBLEM)
    assert problem.input_space.names == ["a", "b", "c", "r", "s", "t"]
    assert problem.input_space.contains(BRANIN_CLASSIC) and problem.objective().goal == "minimize"


# -- Kernel Tuner caches ---------------------------------------------------------------------------
def _document() -> dict[str, Any]:
    return {
        "device_name": "GPU",
        "kernel_name": "k",
        "problem_size": [64],
        "tune_params_keys": ["bx", "tile"],
        "tune_params": {"bx": [32, 64], "tile": [1, 2, 4]},
        "objective": "time",
        "cache": {
            "32,1": {"bx": 32, "tile": 1, "time": 2.5},
            "64,1": {"bx": 64, "tile": 1, "time": 1.5},
            "64,2": {"bx": 64, "tile": 2, "time": "CompilationFailedConfig"},
            "32,4": {"bx": 32, "tile": 4, "time": 3.0},
        },
    }


def test_open_cache_files_load(tmp_path: Path) -> None:
    text = json.dumps(_document(), indent=1)
    open_text = text[: text.rindex('"32,4"')].rstrip() + "\n"  # ends '...},\n' like an unfinished run
    assert open_text.rstrip().endswith(",")
    (tmp_path / "open.json").write_text(open_text)
    with gzip.open(tmp_path / "open.json.gz", "wt") as fh:
        fh.write(open_text + '"32,4": {"bx": 32, "ti')  # and one cut off mid-entry
    (tmp_path / "closed.json").write_text(text)
    for name, stored in (("open.json", 3), ("open.json.gz", 3), ("closed.json", 4)):
        cache = load_cache(tmp_path / name)
        assert len(cache.configs) == stored and cache.failed == 1 and cache.optimum == 1.5, name
        assert cache.parameter_names == ["bx", "tile"] and cache.device == "GPU"
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        load_cache(tmp_path / "nowhere.json")
    (tmp_path / "bad.json").write_text("[1, 2")
    with pytest.raises(InvalidInputError, match="not a Kernel Tuner cache"):
        load_cache(tmp_path / "bad.json")


def test_cache_lookups_and_problem_round_trip() -> None:
    cache = KernelCache.from_document(_document())
    assert cache.time({"bx": 64, "tile": 1}) == 1.5 and cache.time({"bx": "64", "tile": 2.0}) is None
    assert cache.failure({"bx": 64, "tile": 2}) == "CompilationFailedConfig"
    assert {"bx": 64, "tile": 4} not in cache and cache.cartesian_size == 6
    with pytest.raises(InvalidInputError, match="outside the valid space"):
        cache.time({"bx": 64, "tile": 4})
    problem = cache.problem()
    assert problem.input_space.names == [] and problem.objective().name == "time"
    tile = problem.parameter_space["tile"]
    assert problem.objective().goal == "minimize" and isinstance(tile, Categorical) and tile.categories == [1, 2, 4]
    space = problem.parameter_space
    assert space.decode(space.encode(cache.configs)) == cache.configs
    restricted = cache.problem(restrict_to_valid=True)
    assert restricted.is_valid({}, {"bx": 32, "tile": 4}) and not restricted.is_valid({}, {"bx": 64, "tile": 4})
    assert len(cache.sample(10, seed=0)) == 4 and cache.sample(2, seed=1) == cache.sample(2, seed=1)


def test_default_data_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kernel_tuner").mkdir()  # the environment's folder comes first when it holds the data
    monkeypatch.setenv("RAYTUNER_SHARED_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path / "kernel_tuner"


def test_dedispersion_and_convolution_caches_match_the_data_readme() -> None:
    a100 = load_cache(DATA / KERNEL_SOURCE)
    assert (len(a100.configs), a100.failed, a100.cartesian_size) == (602, 0, 22272)
    assert a100.optimum == pytest.approx(68.1, abs=0.05) and a100.kernel == "dedispersion_kernel"
    assert a100.parameter_names[:2] == ["block_size_x", "block_size_y"] and "A100" in a100.device
    problem = a100.problem()
    config = a100.configs[123]
    space = problem.parameter_space
    assert space.decode(space.encode([config])) == [config] and a100.time(config) is not None
    assert [p.categories if isinstance(p, Categorical) else None for p in space] == [
        a100.values[n] for n in a100.parameter_names
    ]
    conv = load_cache(DATA / "convolution_A100.json.gz")
    assert (len(conv.configs), conv.failed) == (421, 32)
    failed = next(c for c in conv.configs if conv.time(c) is None)
    assert conv.failure(failed) in ("CompilationFailedConfig", "RuntimeFailedConfig", "InvalidConfig")
