"""Acquisition functions against hand-computed values, and their constrained maximisation."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pytest

from raytuner.errors import InfeasibleSpaceError, InvalidInputError
from raytuner.models.acquisition import (
    ACQUISITIONS,
    CANDIDATES_PER_DIMENSION,
    _duplicates,
    acquisition_function,
    expected_improvement,
    lower_confidence_bound,
    optimize_acquisition,
    probability_of_improvement,
)
from raytuner.problem.space import Categorical, ProblemSpace

X = {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}
MIXED = ProblemSpace.parse(
    {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 1, "upper_bound": 10}],
        "parameter_space": [
            X,
            {"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 100, "log": True},
            {"name": "alg", "type": "categorical", "categories": ["lu", "qr", "svd", "chol", "eig"]},
        ],
        "constraints": {"small": "x < t / 10"},
    }
)


def _phi(z: float) -> float:
    return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def _decoded(problem: ProblemSpace, unit: np.ndarray, name: str) -> np.ndarray:
    return np.array([c[name] for c in problem.parameter_space.decode(unit)])


# --- acquisition functions ----------------------------------------------------------------


@pytest.mark.parametrize("xi", [0.0, 0.05])
def test_expected_improvement_matches_the_formula(xi: float) -> None:
    mean, std, best = 0.5, 0.2, 0.4
    z = (best - mean - xi) / std  # -0.5 without xi
    expected = (best - mean - xi) * _cdf(z) + std * _phi(z)
    assert float(expected_improvement(mean, std, best, xi=xi)) == pytest.approx(expected, rel=1e-12)
    if xi == 0.0:
        assert expected == pytest.approx(-0.1 * 0.3085375387259869 + 0.2 * 0.3520653267642995)


def test_probability_of_improvement_and_lcb_match_the_formulas() -> None:
    z = (0.4 - 0.5 - 0.01) / 0.2
    assert float(probability_of_improvement(0.5, 0.2, 0.4, xi=0.01)) == pytest.approx(_cdf(z), rel=1e-12)
    assert float(lower_confidence_bound(0.5, 0.2)) == pytest.approx(-(0.5 - 2.0 * 0.2))
    assert float(lower_confidence_bound(0.5, 0.2, beta=0.5)) == pytest.approx(-0.4)


def test_zero_std_gives_the_plain_improvement_and_never_nan() -> None:
    mean = np.array([0.5, 0.3, 0.4, 0.3])
    std = np.array([0.0, 0.0, 0.0, -1.0])
    assert expected_improvement(mean, std, 0.4).tolist() == pytest.approx([0.0, 0.1, 0.0, 0.1])
    assert expected_improvement(mean, std, 0.4, xi=0.05).tolist() == pytest.approx([0.0, 0.05, 0.0, 0.05])
    assert probability_of_improvement(mean, std, 0.4).tolist() == [0.0, 1.0, 0.0, 1.0]
    awkward = expected_improvement([0.3, 1e6, 0.0], [1e-300, 1e-3, 1.0], best=-math.inf)
    assert not np.isnan(awkward).any() and (awkward >= 0).all()
    assert not np.isnan(expected_improvement([1e6, -1e6], [1e-3, 1e-3], best=0.0)).any()


@pytest.mark.parametrize("name", sorted(ACQUISITIONS))
def test_acquisitions_are_vectorised(name: str) -> None:
    rng = np.random.default_rng(0)
    mean, std = rng.normal(size=(3, 4)), rng.random((3, 4))
    scores = acquisition_function(name)(mean, std, 0.1)
    assert scores.shape == (3, 4)
    one = acquisition_function(name)(mean[1, 2], std[1, 2], 0.1)
    assert float(one) == pytest.approx(scores[1, 2])


def test_acquisition_function_binds_options_and_rejects_unknown_names() -> None:
    assert float(acquisition_function("EI", xi=0.05)(0.5, 0.2, 0.4)) == pytest.approx(
        float(expected_improvement(0.5, 0.2, 0.4, xi=0.05))
    )
    assert float(acquisition_function("lcb", beta=1.0)(0.5, 0.2, best=123.0)) == pytest.approx(-0.3)
    with pytest.raises(InvalidInputError) as info:
        acquisition_function("ucb")
    assert info.value.field == "acquisition" and info.value.allowed == ["ei", "pi", "lcb"]
    with pytest.raises(InvalidInputError, match=r"^acquisition\.beta: not an option of 'ei' \(allowed: xi\)"):
        acquisition_function("ei", beta=2.0)
    with pytest.raises(InvalidInputError, match="^acquisition.xi: 'big' is not a finite number"):
        acquisition_function("pi", xi="big")  # type: ignore[arg-type]  # the wrong type is what the test gives


# --- optimize_acquisition ----------------------------------------------------------------------


def test_finds_the_maximum_of_a_smooth_score() -> None:
    problem = ProblemSpace.parse({"parameter_space": [X]})
    config, value = optimize_acquisition(problem, {}, lambda u: -((u[:, 0] - 0.3) ** 2), rng=1)
    assert abs(config["x"] - 0.3) < 1e-3 and value == pytest.approx(-((config["x"] - 0.3) ** 2))
    assert type(config["x"]) is float and type(value) is float


def test_mixed_space_returns_plain_values_and_reaches_every_category() -> None:
    seen: list[np.ndarray] = []

    def score(unit: np.ndarray) -> np.ndarray:
        seen.append(unit)
        k, alg = _decoded(MIXED, unit, "k"), _decoded(MIXED, unit, "alg")
        return -np.abs(unit[:, 0] - 0.05) - np.abs(np.log(k) - np.log(20)) + 2.0 * (alg == "eig")

    config, _ = optimize_acquisition(MIXED, {"t": 10.0}, score, rng=np.random.default_rng(3))
    assert type(config["k"]) is int and config["k"] == 20
    alg = MIXED.parameter_space["alg"]
    assert isinstance(alg, Categorical) and config["alg"] == "eig" and config["alg"] in alg.categories
    assert abs(config["x"] - 0.05) < 0.01
    for unit in seen:  # every scored point is snapped
        space = MIXED.parameter_space
        assert np.array_equal(unit, space.encode(space.decode(unit)))


def test_constraints_may_reference_task_parameters() -> None:
    checked: list[dict[str, Any]] = []

    def score(unit: np.ndarray) -> np.ndarray:
        checked.extend(MIXED.parameter_space.decode(unit))
        return -np.abs(unit[:, 0] - 0.9)  # wants x = 0.9

    for t, x_best in [(3.0, 0.3), (10.0, 0.9)]:
        checked.clear()
        config, _ = optimize_acquisition(MIXED, {"t": t}, score, rng=0)
        assert MIXED.is_valid({"t": t}, config)
        assert all(c["x"] < t / 10 for c in checked)
        assert config["x"] == pytest.approx(x_best, abs=2e-3)


def test_never_returns_an_excluded_point() -> None:
    problem = ProblemSpace.parse(
        {
            "parameter_space": [
                {"name": "k", "type": "integer", "lower_bound": 0, "upper_bound": 20},
                {"name": "alg", "type": "categorical", "categories": ["a", "b"]},
            ]
        }
    )
    table = {(k, a): -abs(k - 7) - (0.5 if a == "a" else 0.0) for k in range(21) for a in "ab"}

    def score(unit: np.ndarray) -> np.ndarray:
        return np.array([table[(c["k"], c["alg"])] for c in problem.parameter_space.decode(unit)])

    assert optimize_acquisition(problem, {}, score, rng=0) == ({"k": 7, "alg": "b"}, 0.0)
    config, value = optimize_acquisition(problem, {}, score, rng=0, exclude=[{"k": 7, "alg": "b"}])
    assert config == {"k": 7, "alg": "a"} and value == -0.5
    pending = [{"k": 7, "alg": "b"}, {"k": 7, "alg": "a"}, {"k": 6, "alg": "b"}]
    assert optimize_acquisition(problem, {}, score, rng=0, exclude=pending) == ({"k": 8, "alg": "b"}, -1.0)


def test_a_small_finite_space_is_scored_whole_and_its_constraint_checked_once() -> None:
    checks: list[tuple[int, str]] = []

    def allowed(k: int, alg: str) -> bool:
        checks.append((k, alg))
        return k % 3 != 0

    problem = ProblemSpace.parse(
        {
            "parameter_space": [
                {"name": "k", "type": "integer", "lower_bound": 0, "upper_bound": 99},
                {"name": "alg", "type": "categorical", "categories": ["a", "b"]},
            ],
            "constraints": {"allowed": allowed},
        }
    )
    needle = {"k": 61, "alg": "a"}  # one spike among 200 points: a random sample of 16 would miss it

    def score(unit: np.ndarray) -> np.ndarray:
        return np.array(
            [1.0 if c == needle else -c["k"] - 0.5 * (c["alg"] == "b") for c in problem.parameter_space.decode(unit)]
        )

    scored: list[int] = []

    def counted(unit: np.ndarray) -> np.ndarray:
        scored.append(len(unit))
        return score(unit)

    assert optimize_acquisition(problem, {}, counted, rng=0, search_candidates=16) == (
        needle,
        1.0,
    )  # 200 <= 16 * 16: every point
    assert sum(scored) == 132 and max(scored) <= 16  # the valid ones, 16 at a time
    assert len(checks) == 200  # each checked once
    assert optimize_acquisition(problem, {}, score, rng=5, search_candidates=16, exclude=[needle]) == (
        {"k": 1, "alg": "a"},
        -1.0,
    )
    assert len(checks) == 200  # the second search checked nothing


def test_ties_in_a_finite_space_go_by_chance_and_an_empty_space_has_one_point() -> None:
    problem = ProblemSpace.parse(
        {"parameter_space": [{"name": "k", "type": "integer", "lower_bound": 0, "upper_bound": 9}]}
    )
    picks = {optimize_acquisition(problem, {}, lambda u: np.zeros(len(u)), rng=seed)[0]["k"] for seed in range(20)}
    assert len(picks) > 1  # a flat score (EI underflowing) is not always the first point
    empty = ProblemSpace.parse({"parameter_space": []})
    assert optimize_acquisition(empty, {}, lambda u: np.ones(len(u)), rng=0) == ({}, 1.0)


def test_real_duplicates_are_judged_within_the_tolerance() -> None:
    problem = ProblemSpace.parse({"parameter_space": [X]})
    scored: list[np.ndarray] = []

    def score(unit: np.ndarray) -> np.ndarray:
        scored.append(unit[:, 0])
        return -np.abs(unit[:, 0] - 0.3)

    config, _ = optimize_acquisition(problem, {}, score, rng=2, exclude=[{"x": 0.3}], tolerance=1e-3)
    assert abs(config["x"] - 0.3) > 1e-3
    assert abs(config["x"] - 0.3) < 2e-3
    assert np.min(np.abs(np.concatenate(scored) - 0.3)) > 1e-3


def test_duplicate_rule_agrees_with_comparing_every_pair() -> None:
    rng = np.random.default_rng(0)
    discrete = rng.integers(0, 3, size=(300, 2)) / 3 + 1 / 6
    known = np.column_stack([rng.random(300), discrete])
    points = np.vstack(
        [
            known[:40] + np.array([5e-10, 0, 0]),
            known[40:60] + np.array([0, 0, 1 / 3]),
            np.column_stack([rng.random(60), rng.integers(0, 3, size=(60, 2)) / 3 + 1 / 6]),
        ]
    )
    tolerance = np.array([1e-9, 0.0, 0.0])
    brute = np.any(np.all(np.abs(points[:, None, :] - known[None]) <= tolerance, axis=2), axis=1)
    assert np.array_equal(_duplicates(points, known, tolerance), brute)
    assert brute[:40].all() and not brute[40:].any()


def test_all_points_excluded_raises_infeasible() -> None:
    problem = ProblemSpace.parse(
        {"parameter_space": [{"name": "alg", "type": "categorical", "categories": ["a", "b", "c"]}]}
    )
    everything = [{"alg": a} for a in "abc"]
    with pytest.raises(InfeasibleSpaceError):
        optimize_acquisition(problem, {}, lambda u: u[:, 0], rng=0, exclude=everything)
    assert optimize_acquisition(problem, {}, lambda u: -u[:, 0], rng=0, exclude=everything[:2])[0] == {"alg": "c"}


def test_falls_back_to_a_constrained_sample(caplog: pytest.LogCaptureFixture) -> None:
    problem = ProblemSpace.parse(
        {
            "parameter_space": [{"name": "k", "type": "integer", "lower_bound": 0, "upper_bound": 999}],
            "constraints": {"one": "k == 7"},
        }
    )
    with caplog.at_level(logging.INFO, logger="raytuner.models.acquisition"):
        config, value = optimize_acquisition(problem, {}, lambda u: 1 - u[:, 0], rng=0, search_candidates=1, rounds=0)
    assert config == {"k": 7} and "falling back" in caplog.text
    assert value == pytest.approx(1 - problem.parameter_space.encode([config])[0, 0])


def test_is_deterministic_for_a_seed() -> None:
    def score(unit: np.ndarray) -> np.ndarray:
        return -np.sum((unit - 0.4) ** 2, axis=1)

    runs = [optimize_acquisition(MIXED, {"t": 5.0}, score, rng=np.random.default_rng(11)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert optimize_acquisition(MIXED, {"t": 5.0}, score, rng=11) == runs[0]


def test_nan_scores_count_as_the_worst() -> None:
    problem = ProblemSpace.parse({"parameter_space": [X]})
    config, value = optimize_acquisition(problem, {}, lambda u: np.where(u[:, 0] > 0.5, np.nan, u[:, 0]), rng=0)
    assert config["x"] <= 0.5 and config["x"] == pytest.approx(0.5, abs=1e-3) and value == config["x"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"search_candidates": 0}, "search_candidates"),
        ({"rounds": -1}, "rounds"),
        ({"top": 1.5}, "top"),
        ({"tolerance": -1.0}, "tolerance"),
        ({"exclude": [{"x": 2.0}]}, "exclude[0].x"),
        ({"around": [{"x": -1.0}]}, "around[0].x"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    problem = ProblemSpace.parse({"parameter_space": [X]})
    with pytest.raises(InvalidInputError) as info:
        optimize_acquisition(problem, {}, lambda u: u[:, 0], rng=0, **kwargs)
    assert info.value.field == field


def test_the_neighbourhoods_of_given_configurations_are_searched_from_the_start() -> None:
    # in 8 dimensions a uniform point lies in the corner box [0, 0.3]^8 with probability 0.3^8 < 1e-4; a
    # perturbation of the corner (scale AROUND_SCALE = 0.05, clipped) lies there unless one of its 8 coordinates
    # is 6 scales away
    problem = ProblemSpace.parse({"parameter_space": [{**X, "name": f"x{i}"} for i in range(8)]})
    corner = {f"x{i}": 0.0 for i in range(8)}

    def near(around: list[dict[str, float]]) -> int:
        seen: list[np.ndarray] = []

        def score(unit: np.ndarray) -> np.ndarray:
            seen.append(unit)
            return -unit.sum(axis=1)

        optimize_acquisition(problem, {}, score, rng=0, around=around, search_candidates=512, rounds=0)
        return int((np.vstack(seen) <= 0.3).all(axis=1).sum())

    assert near([]) < 5
    assert near([corner]) >= 120  # of the 512 // 4 perturbations


@pytest.mark.parametrize("dimension", [1, 3, 7, 8])
def test_the_global_phase_scores_at_most_its_share_per_dimension(dimension: int) -> None:
    problem = ProblemSpace.parse({"parameter_space": [{**X, "name": f"x{i}"} for i in range(dimension)]})
    batches: list[int] = []

    def score(unit: np.ndarray) -> np.ndarray:
        batches.append(len(unit))
        return -((unit - 0.3) ** 2).sum(axis=1)

    optimize_acquisition(problem, {}, score, rng=0, search_candidates=2048, rounds=3)
    sampled = min(2048, CANDIDATES_PER_DIMENSION * dimension)
    # real points drawn at random never repeat: every batch is scored whole; a round perturbs the 64 best at least
    assert batches == [sampled] + [max(64, sampled // 8)] * 3


def test_a_score_of_the_wrong_shape_is_reported() -> None:
    problem = ProblemSpace.parse({"parameter_space": [X]})
    with pytest.raises(InvalidInputError, match=r"^score: expected \d+ scores"):
        optimize_acquisition(problem, {}, lambda u: np.zeros(3), rng=0)
