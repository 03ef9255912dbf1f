"""Latin hypercube sampling per task, with constraints."""

from __future__ import annotations

import numpy as np
import pytest

from raytuner.errors import InfeasibleSpaceError, InvalidInputError
from raytuner.problem.sampling import initial_samples, latin_hypercube, sample_configurations, sample_tasks
from raytuner.problem.space import ProblemSpace, Space

PROBLEM = ProblemSpace.parse(
    {
        "input_space": [{"name": "m", "type": "integer", "lower_bound": 16, "upper_bound": 4096}],
        "parameter_space": [
            {"name": "mb", "type": "integer", "lower_bound": 1, "upper_bound": 64},
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "alg", "type": "categorical", "categories": ["lu", "qr", "svd"]},
        ],
        "constraints": {"fits": "mb * 8 <= m", "rare": "x < 0.3 or alg != 'svd'"},
    }
)


def test_samples_are_seeded_valid_and_distinct() -> None:
    tasks = sample_tasks(PROBLEM, 4, seed=7)
    assert tasks == sample_tasks(PROBLEM, 4, seed=7) and len({t["m"] for t in tasks}) == 4
    for task in tasks:
        configs = sample_configurations(PROBLEM, task, 25, seed=3)
        assert configs == sample_configurations(PROBLEM, task, 25, seed=3)
        assert len({tuple(sorted(c.items())) for c in configs}) == 25
        assert all(PROBLEM.is_valid(task, c) for c in configs)


def test_lhs_stratifies_each_dimension() -> None:
    space = Space.model_validate(
        [
            {"name": "a", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "b", "type": "real", "lower_bound": 0, "upper_bound": 1},
        ]
    )
    points = latin_hypercube(space, 10, seed=0)
    for name in ("a", "b"):
        strata = sorted(int(p[name] * 10) for p in points)
        assert strata == list(range(10))


def test_constraints_are_honoured_by_rejecting_and_refilling() -> None:
    task = {"m": 40}  # only mb <= 5 fits: about 8 % of the mb range
    configs = sample_configurations(PROBLEM, task, 30, seed=1)
    assert len(configs) == 30 and max(c["mb"] for c in configs) <= 5


def test_initial_samples_are_independent_per_task() -> None:
    tasks = [{"m": 100}, {"m": 2000}]
    samples = initial_samples(PROBLEM, tasks, 8, seed=5)
    again = initial_samples(PROBLEM, [*tasks, {"m": 64}], 8, seed=5)
    assert samples == again[:2]  # adding a task leaves the others' samples alone
    assert samples[0] != samples[1]


def test_exclude_skips_points_already_seen() -> None:
    space = Space.model_validate([{"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 6}])
    first = latin_hypercube(space, 4, seed=0)
    rest = latin_hypercube(space, 2, seed=1, exclude=first)
    assert sorted(p["k"] for p in first + rest) == [1, 2, 3, 4, 5, 6]


def test_an_impossible_sample_is_reported_clearly() -> None:
    impossible = ProblemSpace.parse(
        {
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "constraints": {"never": "x > 2"},
        }
    )
    with pytest.raises(InfeasibleSpaceError, match=r"only 0 of 5 .*\(0\.000% met the constraints"):
        sample_configurations(impossible, {}, 5, seed=0, max_candidates=2000)
    small = Space.model_validate([{"name": "k", "type": "integer", "lower_bound": 0, "upper_bound": 2}])
    with pytest.raises(InfeasibleSpaceError, match="only 3 distinct points"):
        latin_hypercube(small, 5, seed=0)


def test_bad_sample_size_names_the_field() -> None:
    with pytest.raises(InvalidInputError, match="^n:"):
        latin_hypercube(PROBLEM.parameter_space, -1)


def test_log_scaled_integers_spread_over_orders_of_magnitude() -> None:
    space = Space.model_validate(
        [{"name": "n", "type": "integer", "lower_bound": 1, "upper_bound": 10_000, "log": True}]
    )
    values = np.array([p["n"] for p in latin_hypercube(space, 40, seed=2)])
    assert (values < 10).sum() >= 5 and (values > 1000).sum() >= 5
