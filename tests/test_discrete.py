"""DiscreteBO: restrictions, invalid configurations, the GP, the exploration factor and the portfolios."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from raytuner.engines.base import Suggestion
from raytuner.engines.discrete import (
    METHODS,
    AdvancedMulti,
    CandidateGP,
    CandidateSet,
    DiscreteBO,
    Multi,
    contextual_variance,
)
from raytuner.engines.discrete.engine import Method
from raytuner.engines.discrete.gp import matern
from raytuner.errors import InfeasibleSpaceError, InvalidInputError
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace

KERNEL = ProblemSpace.parse(
    {
        "parameter_space": [
            {"name": "bx", "type": "categorical", "categories": [16, 32, 64, 128, 256, 512]},
            {"name": "by", "type": "categorical", "categories": [1, 2, 4, 8, 16]},
            {"name": "tile", "type": "integer", "lower_bound": 1, "upper_bound": 4},
            {"name": "layout", "type": "categorical", "categories": ["row", "col"]},
            {"name": "precision", "type": "categorical", "categories": ["single"]},
        ],
        "output_space": [{"name": "time"}],
        "constraints": {"threads": "bx * by <= 1024", "work": "bx * tile <= 1024"},
    }
)


def kernel_time(config: dict) -> float | None:
    """A rough run time with an optimum at bx=128, by=4, tile=2, 'col'; some launches fail."""
    bx, by, tile = config["bx"], config["by"], config["tile"]
    if (bx * by * tile) % 7 == 1 or (bx == 512 and by >= 2):
        return None
    return (
        1.0
        + abs(math.log2(bx) - 7) * 0.4
        + abs(math.log2(by) - 2) * 0.3
        + abs(tile - 2) * 0.5
        + (0.2 if config["layout"] == "row" else 0.0)
        + 0.05 * ((bx * 7 + by * 3 + tile) % 5)
    )


def position(candidates: CandidateSet, config: dict[str, Any]) -> int:
    """The position of ``config``, a candidate, among ``candidates``."""
    found = candidates.locate(config)
    assert found is not None, config
    return found


def evaluate(engine: DiscreteBO, steps: int) -> list[tuple[Suggestion, float | None]]:
    """Ask and tell ``steps`` times; failed configurations become failed records."""
    asked: list[tuple[Suggestion, float | None]] = []
    for _ in range(steps):
        s = engine.ask()
        t = kernel_time(s.config)
        asked.append((s, t))
        engine.tell(
            FunctionEvaluation.create(
                s.task,
                s.config,
                None if t is None else {"time": t},
                failure="launch failed" if t is None else None,
                provenance=s.provenance,
            )
        )
    return asked


def key(config: dict) -> tuple:
    return tuple(config[n] for n in KERNEL.parameter_space.names)


def test_candidates_are_exactly_the_configurations_meeting_the_restrictions() -> None:
    cands = CandidateSet.from_problem(KERNEL)
    valid = [c for c in cands.configs if KERNEL.satisfies(c)]
    assert len(valid) == len(cands) > 0
    # brute force over the Cartesian product: the same set
    import itertools

    names = KERNEL.parameter_space.names
    product = [
        dict(zip(names, v))
        for v in itertools.product(
            [16, 32, 64, 128, 256, 512], [1, 2, 4, 8, 16], [1, 2, 3, 4], ["row", "col"], ["single"]
        )
    ]
    assert {key(c) for c in product if KERNEL.satisfies(c)} == {key(c) for c in cands.configs}
    assert cands.names == ["bx", "by", "tile", "layout"]  # the one-valued parameter is pruned
    assert cands.units.min() == 0.0 and cands.units.max() == 1.0
    # powers of two are equally spaced: 16 -> 0, 32 -> 0.2, ..., 512 -> 1
    bx_units = sorted({round(u, 6) for u in cands.units[:, 0]})
    assert bx_units == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert cands.locate({"bx": 512, "by": 4, "tile": 1, "layout": "row", "precision": "single"}) is None


@pytest.mark.parametrize("method", METHODS)
def test_every_suggestion_meets_the_restrictions_and_no_failed_configuration_returns(method: Method) -> None:
    engine = DiscreteBO(KERNEL, seed=3, method=method, n_initial=8)
    asked = evaluate(engine, 60)
    keys = [key(s.config) for s, _ in asked]
    assert len(set(keys)) == len(keys)  # nothing is evaluated twice
    assert all(KERNEL.satisfies(s.config) for s, _ in asked)
    failed = [key(s.config) for s, t in asked if t is None]
    assert failed, "the test needs some failed configurations"
    search = engine.search()
    # failures are out of the surrogate: it holds exactly the successful evaluations
    assert sorted(search.gp.indices) == sorted(position(search.cands, s.config) for s, t in asked if t is not None)
    assert [s.provenance.proposer for s, _ in asked[:8]] == ["initial"] * 8
    assert {s.provenance.proposer for s, _ in asked[12:]} == {"model"}


def test_initial_failures_are_replaced_until_n_initial_succeed() -> None:
    engine = DiscreteBO(KERNEL, seed=0, n_initial=10)
    asked = evaluate(engine, 30)
    initial = [(s, t) for s, t in asked if s.provenance.proposer == "initial"]
    assert sum(t is not None for _, t in initial) == 10
    assert len(initial) == 10 + sum(t is None for _, t in initial)


def test_the_space_runs_out_cleanly() -> None:
    small = ProblemSpace.parse(
        {
            "parameter_space": [
                {"name": "a", "type": "categorical", "categories": [1, 2, 3]},
                {"name": "b", "type": "categorical", "categories": [1, 2]},
            ],
            "output_space": [{"name": "time"}],
        }
    )
    engine = DiscreteBO(small, seed=0, n_initial=2, method="multi")
    seen = set()
    for _ in range(6):
        s = engine.ask()
        seen.add((s.config["a"], s.config["b"]))
        engine.tell(
            FunctionEvaluation.create({}, s.config, {"time": s.config["a"] + s.config["b"]}, provenance=s.provenance)
        )
    assert len(seen) == 6
    with pytest.raises(InfeasibleSpaceError):
        engine.ask()


def test_candidate_gp_equals_the_textbook_posterior() -> None:
    rng = np.random.default_rng(0)
    units = rng.random((50, 3))
    observed = [4, 17, 23, 41, 8]
    y = rng.normal(size=5) * 3 + 10
    for kernel in ("matern32", "matern52"):
        gp = CandidateGP(units, kernel=kernel, lengthscale=0.7, noise=1e-8)
        for i, v in zip(observed, y):
            gp.add(i, v)
        mean, std = gp.posterior()
        X = units[observed]
        K = matern(np.linalg.norm(X[:, None] - X[None], axis=2), kernel, 0.7) + 1e-8 * np.eye(5)
        Ks = matern(np.linalg.norm(units[:, None] - X[None], axis=2), kernel, 0.7)
        m, s = y.mean(), y.std()
        expected_mean = m + s * Ks @ np.linalg.solve(K, (y - m) / s)
        expected_var = s * s * np.clip(1 - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T)), 0, None)
        np.testing.assert_allclose(mean, expected_mean, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(std, np.sqrt(expected_var), rtol=1e-4, atol=1e-5)


def test_contextual_variance_against_a_hand_computation() -> None:
    engine = DiscreteBO(KERNEL, seed=1, method="ei", n_initial=6)
    asked = evaluate(engine, 14)
    search = engine.search()
    units = search.cands.units

    def posterior_variance(points: list[int]) -> np.ndarray:
        """Prior-relative posterior variance at every candidate, Matérn 3/2, length scale 1.5."""
        X = units[points]
        K = matern(np.linalg.norm(X[:, None] - X[None], axis=2), "matern32", 1.5) + 1e-8 * np.eye(len(points))
        Ks = matern(np.linalg.norm(units[:, None] - X[None], axis=2), "matern32", 1.5)
        return np.clip(1 - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T)), 0, None)

    initial = [(position(search.cands, s.config), t) for s, t in asked if s.provenance.proposer == "initial"]
    initial_ok = [i for i, t in initial if t is not None]
    rest = np.setdiff1d(np.arange(len(units)), initial_ok)
    var_s = posterior_variance(initial_ok)[rest].mean()
    mu_s = np.mean([t for _, t in initial if t is not None])
    ok = [position(search.cands, s.config) for s, t in asked if t is not None]
    evaluated = [position(search.cands, s.config) for s, _ in asked]
    unvisited = np.setdiff1d(np.arange(len(units)), evaluated)
    var_now = posterior_variance(ok)[unvisited].mean()
    best = min(t for _, t in asked if t is not None)
    expected = (var_now / (mu_s / best)) / var_s
    assert engine.exploration_factor() == pytest.approx(expected, rel=1e-4)
    assert contextual_variance(var_now, var_s, float(mu_s), best) == pytest.approx(expected)
    assert 0 < expected < 1


def test_multi_skips_the_duplicating_function_with_the_worse_discounted_score() -> None:
    multi = Multi(("ei", "pi", "lcb"), skip_threshold=3, discount_factor=0.5)
    for _ in range(2):
        multi.end_round({"ei": 1.0, "pi": 1.0, "lcb": 4.0}, duplicates={"ei", "pi"})
    assert multi.active == ["ei", "pi", "lcb"]  # two duplicates: below the threshold
    multi.end_round({"ei": 1.0, "pi": 2.0, "lcb": 4.0}, duplicates={"ei", "pi"})
    # dos(ei) = 1 * .25 + 1 * .5 + 1 = 1.75 < dos(pi) = 1 * .25 + 1 * .5 + 2 = 2.75: pi is skipped
    assert multi.active == ["ei", "lcb"]
    assert multi.recent["ei"] == []  # the one kept starts afresh


def test_advanced_multi_skips_the_worse_and_promotes_the_better() -> None:
    am = AdvancedMulti(("ei", "pi", "lcb"), skip_threshold=2, discount_factor=0.75, improvement_factor=0.1)
    for _ in range(2):
        am.end_round({"ei": 2.5, "pi": 2.5, "lcb": 3.0}, duplicates=set())
    assert am.active == ["ei", "pi"] and am.worse == {"ei": 0, "pi": 0, "lcb": 0}  # counts start afresh
    for _ in range(2):
        am.end_round({"ei": 1.0, "pi": 2.0}, duplicates=set())
    # the discounted scores now differ by far more than 10 % of their mean, twice: ei is the only function left
    assert am.active == ["ei"]


def test_a_replayed_engine_continues_with_the_same_state_and_suggestion() -> None:
    engine = DiscreteBO(KERNEL, seed=5, method="advanced_multi", n_initial=6, skip_threshold=2)
    records: list[FunctionEvaluation] = []
    while len(records) < 31 or engine.search().queue:  # stop at the end of a round
        s = engine.ask()
        t = kernel_time(s.config)
        records.append(
            FunctionEvaluation.create(
                s.task,
                s.config,
                None if t is None else {"time": t},
                failure="launch failed" if t is None else None,
                provenance=s.provenance,
            )
        )
        engine.tell(records[-1])
    replayed = DiscreteBO(KERNEL, seed=5, method="advanced_multi", n_initial=6, skip_threshold=2)
    replayed.replay(records)
    assert replayed.ask().config == engine.ask().config
    assert replayed.active_acquisitions() == engine.active_acquisitions()
    assert replayed.search().portfolio.observations == engine.search().portfolio.observations
    assert sum(len(v) for v in engine.search().portfolio.observations.values()) > 6


def test_pending_configurations_are_not_suggested_twice() -> None:
    engine = DiscreteBO(KERNEL, seed=2, method="multi", n_initial=4)
    evaluate(engine, 10)
    in_flight = [engine.ask() for _ in range(12)]
    keys = [key(s.config) for s in in_flight]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    "field,value",
    [
        ("method", "bogus"),
        ("kernel", "rbf"),
        ("exploration", "xx"),
        ("n_initial", 1),
        ("lengthscale", -1.0),
        ("acquisitions", ["ei", "ucb"]),
        ("discount_factor", 1.5),
    ],
)
def test_bad_options_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(InvalidInputError) as err:
        DiscreteBO(KERNEL, **{field: value})
    assert field in str(err.value)


def test_a_continuous_parameter_is_refused_with_the_allowed_types() -> None:
    problem = ProblemSpace.parse(
        {"parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}]}
    )
    with pytest.raises(InvalidInputError) as err:
        DiscreteBO(problem).ask()
    assert "parameter_space.x" in str(err.value) and "categorical" in str(err.value)


def test_maximisation_turns_into_minimisation() -> None:
    problem = ProblemSpace.parse(
        {
            "parameter_space": KERNEL.parameter_space.model_dump(),
            "output_space": [{"name": "gflops", "goal": "maximize"}],
            "constraints": {"threads": "bx * by <= 1024"},
        }
    )
    engine = DiscreteBO(problem, seed=0, n_initial=6, method="ei")
    best = []
    for _ in range(30):
        s = engine.ask()
        t = kernel_time(s.config)
        value = None if t is None else 100.0 / t
        engine.tell(
            FunctionEvaluation.create(
                {},
                s.config,
                None if value is None else {"gflops": value},
                failure="failed" if value is None else None,
                provenance=s.provenance,
            )
        )
        best.append(value or 0.0)
    assert max(best[6:]) >= max(best[:6])
    assert min(engine.search().values) == pytest.approx(-max(best))


def failing_large_blocks(config: dict) -> float | None:
    """Faster with larger blocks, but every launch with bx >= 256 fails: the trend points into the failures."""
    if config["bx"] >= 256:
        return None
    return 3.0 - math.log2(config["bx"]) * 0.3 + abs(math.log2(config["by"]) - 2) * 0.3 + abs(config["tile"] - 2) * 0.2


def model_failures(avoid_failures: bool, seed: int) -> int:
    """How many model-phase suggestions of 40 evaluations fail on :func:`failing_large_blocks`."""
    engine = DiscreteBO(KERNEL, seed=seed, n_initial=8, method="ei", avoid_failures=avoid_failures)
    failures = 0
    for _ in range(40):
        s = engine.ask()
        t = failing_large_blocks(s.config)
        failures += s.provenance.proposer == "model" and t is None
        engine.tell(
            FunctionEvaluation.create(
                s.task,
                s.config,
                None if t is None else {"time": t},
                failure="launch failed" if t is None else None,
                provenance=s.provenance,
            )
        )
    search = engine.search()
    assert len(search.gp.indices) == len(search.values)  # the objective's GP holds no failure
    return failures


def test_the_validity_model_steers_away_from_a_failing_region() -> None:
    # the objective's GP never sees a failure, so without the validity model EI follows the trend into
    # the 32 failing configurations; with it, a few failures teach it where launches fail
    avoided = [model_failures(True, seed) for seed in range(4)]
    followed = [model_failures(False, seed) for seed in range(4)]
    assert min(followed) >= 20
    assert max(avoided) <= 12 and sum(avoided) * 2 < sum(followed)


def test_the_validity_model_never_empties_the_candidates() -> None:
    engine = DiscreteBO(KERNEL, seed=0, n_initial=4)
    search = engine.search()
    free = np.ones(len(search.cands), dtype=bool)
    assert search.likely_valid(free) is free  # no failure yet: every free candidate
    evaluate(engine, 12)
    failed = [i for i in range(len(search.cands)) if search.visited[i] and i not in search.gp.indices]
    assert failed
    validity, _ = search.validity.posterior()
    assert (validity[failed] < 0.5).all()  # the model knows where launches failed
    only_failed = np.zeros(len(search.cands), dtype=bool)
    only_failed[failed] = True
    # when everything left is predicted to fail, the engine still proposes (the prediction may be wrong)
    assert search.likely_valid(only_failed).sum() == len(failed)
