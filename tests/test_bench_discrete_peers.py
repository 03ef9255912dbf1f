"""The peer tuners of ``python -m benchmarks discrete`` (:mod:`benchmarks.discrete_peers`) on small caches.

A synthetic Kernel Tuner cache (3 parameters, a restriction that leaves some
Cartesian configurations out, a few failed configurations) checks each
runner's trace; the repository's pnpoly cache subset checks a real one.
"""

from __future__ import annotations

import gzip
import importlib.util
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from repo_data import KERNEL_TUNER

from benchmarks import discrete_peers
from benchmarks.discrete_peers import KERNEL_TUNER_METHODS, MAX_FREE_PROPOSALS, Trace, run_kernel_tuner, run_optuna_tpe
from benchmarks.kernel_cache import KernelCache, load_cache
from raytuner.errors import InvalidInputError

A = [1, 2, 4, 8, 16, 32]
B = [16, 32, 64, 128, 256, 512]
C = ["x", "y", "z", "w"]
C_COST = {"x": 0.0, "y": 0.3, "z": 0.6, "w": 0.9}


def _document() -> dict[str, Any]:
    """144 Cartesian configurations; a * b > 2048 is not stored (24 of them), 7 of the 120 stored ones failed."""
    entries = {}
    for a, b, c in itertools.product(A, B, C):
        if a * b > 2048:
            continue
        if a == 1 and c == "z":
            time: Any = "CompilationFailedConfig"
        elif a == 2 and b == 16 and c == "z":
            time = "RuntimeFailedConfig"
        else:
            time = 1.0 + abs(math.log2(a) - 2) + 0.5 * abs(math.log2(b) - 6) + C_COST[c]
        entries[f"{a},{b},{c}"] = {
            "a": a,
            "b": b,
            "c": c,
            "time": time,
            "compile_time": 10.0,
            "verification_time": 0.0,
            "benchmark_time": 5.0,
        }
    return {
        "device_name": "Synthetic GPU",
        "kernel_name": "toy_kernel",
        "problem_size": [1024, 1024],
        "tune_params_keys": ["a", "b", "c"],
        "tune_params": {"a": A, "b": B, "c": C},
        "objective": "time",
        "cache": entries,
    }


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("toy_cache") / "toy.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(_document(), fh)
    return path


@pytest.fixture(scope="module")
def toy(toy_file: Path) -> KernelCache:
    cache = load_cache(toy_file)
    assert (len(cache), cache.failed, cache.cartesian_size) == (120, 7, 144)
    return cache


@pytest.fixture
def kt() -> None:
    pytest.importorskip("kernel_tuner")


def _check(trace: Trace, cache: KernelCache, length: int) -> None:
    """Unique stored configurations, ``length`` of them, each with the cache's time (None when it failed)."""
    assert len(trace) == length
    keys = [tuple(config[n] for n in cache.parameter_names) for config, _ in trace]
    assert len(set(keys)) == len(keys)
    for config, time in trace:
        assert set(config) == set(cache.parameter_names)
        assert config in cache
        assert time == cache.time(config)


def _run(method: str, cache: KernelCache, max_fevals: int, seed: int) -> Trace:
    if method == "optuna_tpe":
        return run_optuna_tpe(cache, max_fevals, seed=seed)
    return run_kernel_tuner(cache, method, max_fevals, seed=seed)


@pytest.mark.parametrize("method", ["kt_random_sample", "kt_genetic_algorithm", "kt_bayes_opt_ei", "optuna_tpe"])
def test_trace_is_unique_stored_evaluations(method: str, toy: KernelCache, request: pytest.FixtureRequest) -> None:
    if method.startswith("kt_"):
        request.getfixturevalue("kt")
    trace = _run(method, toy, 30, seed=1)
    _check(trace, toy, 30)


@pytest.mark.parametrize("method", ["kt_random_sample", "kt_bayes_opt_ei", "optuna_tpe"])
def test_same_seed_same_trace(method: str, toy: KernelCache, request: pytest.FixtureRequest) -> None:
    """bayes_opt too: its Latin-hypercube sampler is seeded from the run's seed."""
    if method.startswith("kt_"):
        request.getfixturevalue("kt")
    first = _run(method, toy, 30, seed=7)
    assert _run(method, toy, 30, seed=7) == first
    assert _run(method, toy, 30, seed=8) != first


@pytest.mark.usefixtures("kt")
def test_kernel_tuner_meets_failed_configurations(toy: KernelCache) -> None:
    """The valid space is every stored configuration, failed ones included, and each costs an evaluation."""
    trace = run_kernel_tuner(toy, "kt_random_sample", len(toy), seed=0)
    _check(trace, toy, len(toy))
    assert sum(time is None for _, time in trace) == toy.failed == 7


@pytest.mark.usefixtures("kt")
def test_kernel_tuner_budget_above_space_and_cache_from_document(tmp_path: Path) -> None:
    cache = KernelCache.from_document(_document())  # no file behind it: written from the object
    trace = run_kernel_tuner(cache, "kt_random_sample", 500, seed=0, workdir=tmp_path)
    _check(trace, cache, len(cache))
    copies = list(tmp_path.glob("*.json"))
    assert len(copies) == 1
    assert run_kernel_tuner(cache, "kt_random_sample", 5, seed=0, workdir=tmp_path) == trace[:5]
    assert list(tmp_path.glob("*.json")) == copies  # written once, reused
    json.loads(copies[0].read_text())  # and still a closed JSON document


@pytest.mark.usefixtures("kt")
@pytest.mark.parametrize("method", ["kt_simulated_annealing", "kt_mls", "kt_bayes_opt_multi"])
def test_other_kernel_tuner_methods_run(method: str, toy: KernelCache) -> None:
    trace = run_kernel_tuner(toy, method, 25, seed=2)
    assert 0 < len(trace) <= 25  # simulated annealing may stop early (logged)
    _check(trace, toy, len(trace))


def test_unknown_method_and_bad_budget(toy: KernelCache) -> None:
    with pytest.raises(InvalidInputError):
        run_kernel_tuner(toy, "kt_nope", 10, seed=0)
    with pytest.raises(InvalidInputError):
        run_optuna_tpe(toy, 0, seed=0)
    assert set(KERNEL_TUNER_METHODS) >= {"kt_bayes_opt_ei", "kt_random_sample", "kt_genetic_algorithm"}


def test_tpe_finds_the_whole_space(toy: KernelCache, caplog: pytest.LogCaptureFixture) -> None:
    """Asked for more than the cache holds, TPE evaluates every stored configuration and stops there."""
    pytest.importorskip("optuna")
    with caplog.at_level("INFO", logger="benchmarks.discrete_peers"):
        trace = run_optuna_tpe(toy, 200, seed=0)
    _check(trace, toy, len(toy))
    assert sum(time is None for _, time in trace) == toy.failed
    assert any("TPE evaluates all of them" in r.getMessage() for r in caplog.records)


def test_tpe_guard_against_free_proposals(
    toy: KernelCache, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After MAX_FREE_PROPOSALS proposals in a row that cost nothing, a random unvisited configuration is
    evaluated (and logged); the trace stays unique and reproducible."""
    pytest.importorskip("optuna")
    assert MAX_FREE_PROPOSALS == 200
    monkeypatch.setattr(discrete_peers, "MAX_FREE_PROPOSALS", 2)
    with caplog.at_level("INFO", logger="benchmarks.discrete_peers"):
        trace = run_optuna_tpe(toy, 60, seed=3)
    _check(trace, toy, 60)
    assert any("were random unvisited configurations" in r.getMessage() for r in caplog.records)
    assert run_optuna_tpe(toy, 60, seed=3) == trace


def test_real_pnpoly_cache() -> None:
    cache = load_cache(KERNEL_TUNER / "pnpoly_RTX_3090.json.gz")
    runs = [("optuna_tpe", 25)]
    if importlib.util.find_spec("kernel_tuner") is not None:
        runs += [("kt_genetic_algorithm", 25), ("kt_bayes_opt_multi_advanced", 25)]
    for method, budget in runs:
        trace = _run(method, cache, budget, seed=0)
        _check(trace, cache, budget)
        assert min(t for _, t in trace if t is not None) >= cache.optimum
