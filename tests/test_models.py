"""The LCM surrogate: likelihood and gradient against GPy and finite differences, fits, persistence, executors."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.linalg import LinAlgError
from record_helpers import description
from scipy.optimize import approx_fprime
from threadpoolctl import threadpool_limits

from raytuner.errors import InvalidInputError
from raytuner.models import GPTUNE_LCM, LCM, FittedLCM, Hyperparameters, LCMOptions, TrainingData
from raytuner.models.executors import INLINE_RECORDS, InlineExecutor, ProcessExecutor, RayExecutor, default_executor
from raytuner.models.fitted import cross_covariance
from raytuner.models.likelihood import NegativeLogLikelihood, robust_cholesky
from raytuner.models.options import FitReport, KernelName
from raytuner.models.persistence import load_surrogate, surrogate_record
from raytuner.models.posterior import ExactPosterior
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import Categorical, ProblemSpace
from raytuner.store import HistoryStore

KERNELS: list[KernelName] = ["rbf", "matern32", "matern52"]
INLINE = InlineExecutor()


def _three_tasks(seed: int, counts: tuple[int, ...] = (5, 8, 12), noise: float = 0.05) -> TrainingData:
    """Related smooth functions of two inputs with unequal sample counts (heterotopic)."""
    rng = np.random.default_rng(seed)
    X = [rng.random((n, 2)) for n in counts]
    y = [
        np.sin(4 * x[:, 0]) + (1 + i) * x[:, 1] ** 2 + 0.1 * i + noise * rng.normal(size=len(x))
        for i, x in enumerate(X)
    ]
    return TrainingData(X, y)


def _natural(gradient: np.ndarray, hp: Hyperparameters) -> dict[str, np.ndarray]:
    """Split a gradient in :meth:`Hyperparameters.to_vector` (log) coordinates and undo the logs:
    ``d/dp = (d/dlog p) / p`` for length scales, kappa and noise; ``W`` is not transformed."""
    latent, tasks, dimension, rank = hp.shape
    sizes = [latent * dimension, latent * tasks * rank, latent * tasks, tasks]
    parts = np.split(gradient, np.cumsum(sizes)[:-1])
    return {
        "lengthscale": parts[0].reshape(latent, dimension) / hp.lengthscales,
        "W": parts[1].reshape(latent, tasks, rank),
        "kappa": parts[2].reshape(latent, tasks) / hp.kappa,
        "noise": parts[3] / hp.noise,
    }


def _gpy_gradients(gp: Any, latent: int) -> dict[str, np.ndarray]:  # gp: a GPy model (GPy has no types)
    """GPy's natural-parameter gradients of the log-likelihood, in the layout of :func:`_natural`."""
    icms = list(gp.kern.parameters) if latent > 1 else [gp.kern]
    return {
        "lengthscale": np.array([icm.parameters[0].lengthscale.gradient for icm in icms]),
        "W": np.array([icm.parameters[1].W.gradient for icm in icms]),
        "kappa": np.array([icm.parameters[1].kappa.gradient for icm in icms]),
        "noise": np.array([float(lik.variance.gradient[0]) for lik in gp.likelihood.likelihoods_list]),
    }


def _assert_matches_gpy(fitted: FittedLCM, gradient_rtol: float) -> None:
    """GPy's log-likelihood and gradients equal ours for the same covariance.

    The two add different constants to the diagonal: GPy's exact inference
    adds 1e-8 to every noise variance, our Cholesky a jitter of 1e-10 times
    the mean diagonal. :meth:`FittedLCM.to_gpy` hands GPy the noise that
    makes the two matrices equal (noise + jitter − 1e-8), so both factorise
    the same matrix.
    """
    pytest.importorskip("GPy")
    latent = fitted.hyperparameters.shape[0]
    ours = fitted
    gp = ours.to_gpy()
    # Tolerances: the same matrix, factorised twice; the noise of these models stays near 1e-3 (condition
    # numbers about 1e4), so only rounding separates the two: at most 6e-8 relative over these tests'
    # models (rbf, Matérn, one latent), and 1e-6 leaves a margin of 17 and more.
    assert gp.log_likelihood() == pytest.approx(ours.log_likelihood, rel=1e-6, abs=1e-9)
    theirs = _gpy_gradients(gp, latent)
    mine = _natural(ours.log_likelihood_gradient(), ours.hyperparameters)
    scale = max(float(np.abs(g).max()) for g in theirs.values())
    for name in mine:
        assert mine[name].shape == theirs[name].shape, name
        np.testing.assert_allclose(
            mine[name], theirs[name], rtol=gradient_rtol, atol=gradient_rtol * scale, err_msg=name
        )


# -- likelihood and gradient ---------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
def test_likelihood_and_gradient_match_gpy_at_given_hyperparameters(kernel: KernelName) -> None:
    data = _three_tasks(0)
    options = LCMOptions(latent=2, rank=1, kernel=kernel)
    transform = LCM(options).standardisation(data)
    for seed in range(3):
        hp = Hyperparameters.initial(2, 3, 2, 1, rng=np.random.default_rng(seed))
        hp = dataclasses.replace(hp, noise=np.maximum(hp.noise, 1e-3))
        fitted = FittedLCM.condition(options, data, transform, hp, FitReport())
        _assert_matches_gpy(fitted, gradient_rtol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
def test_fitted_lcm_matches_gpy(kernel: KernelName) -> None:
    data = _three_tasks(1, counts=(6, 9, 13))
    fitted = LCM(LCMOptions(latent=2, rank=1, kernel=kernel, n_starts=1, max_iterations=8)).fit(
        data, seed=0, executor=INLINE
    )
    assert fitted.data.counts == [6, 9, 13]
    _assert_matches_gpy(fitted, gradient_rtol=1e-6)


def test_to_gpy_with_one_latent_function() -> None:
    """GPy's LCM helper returns a bare ICM (no sum) for one kernel: one task is an ordinary GP."""
    pytest.importorskip("GPy")
    X = np.linspace(0, 1, 9)[:, None]
    y = np.cos(3 * X[:, 0]) + 0.05 * np.random.default_rng(0).normal(size=9)
    fitted = LCM(LCMOptions(n_starts=1, max_iterations=10)).fit(TrainingData([X], [y]), seed=0, executor=INLINE)
    assert fitted.hyperparameters.shape[0] == 1
    _assert_matches_gpy(fitted, gradient_rtol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
def test_gradient_matches_finite_differences(kernel: KernelName) -> None:
    data = _three_tasks(2, counts=(4, 6, 9))
    X, task, y = data.stacked()
    z = (y - y.mean()) / y.std()
    objective = NegativeLogLikelihood(X, task, z, tasks=3, latent=2, rank=2, kernel=kernel)
    for seed in range(3):
        hp = Hyperparameters.initial(2, 3, 2, 2, rng=np.random.default_rng(seed))
        theta = dataclasses.replace(hp, noise=np.maximum(hp.noise, 1e-3)).to_vector()
        value, gradient = objective(theta)
        with threadpool_limits(1, user_api="blas"):  # tiny matrices: threads only cost time
            numeric = approx_fprime(theta, lambda t: objective(t)[0], 1e-7)
        np.testing.assert_allclose(gradient, numeric, rtol=1e-4, atol=1e-4 * np.abs(numeric).max())
        assert np.isfinite(value)


# -- categorical columns -------------------------------------------------------------------------------
CATEGORIES = ProblemSpace.parse(
    {
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "alg", "type": "categorical", "categories": ["a", "b", "c", "d", "e"]},
        ]
    }
)


def random_config(rng: np.random.Generator) -> dict[str, Any]:
    """A configuration of :data:`CATEGORIES`: ``x`` in [0, 1) and one of its five categories."""
    return {"x": float(rng.random()), "alg": "abcde"[int(rng.integers(5))]}


def test_a_categorical_column_is_compared_by_category() -> None:
    """Every two categories are equally far apart, whatever their places on [0, 1]; a real column by position."""
    space = CATEGORIES.parameter_space
    options = LCMOptions().over(space)
    assert options.categorical == (1,) and LCMOptions(categorical=()).over(space).categorical == ()
    hp = Hyperparameters.initial(1, 1, 2, 1, rng=np.random.default_rng(0))
    first = space.encode([{"x": 0.5, "alg": "a"}])
    others = space.encode([{"x": 0.5, "alg": c} for c in "abcde"])
    zero = np.zeros(1, dtype=int)
    by_category = cross_covariance(
        hp, "rbf", first, zero, others, np.zeros(5, dtype=int), categorical=options.categorical_columns
    )[0]
    by_position = cross_covariance(hp, "rbf", first, zero, others, np.zeros(5, dtype=int))[0]
    assert by_category[0] == by_position[0] and np.ptp(by_category[1:]) == 0.0 and by_category[1] < by_category[0]
    assert np.all(np.diff(by_position) < 0)  # by position: farther categories are less alike


@pytest.mark.parametrize(
    "categories, ordinal",
    [
        ([1, 2, 4, 8], True),
        ([256, 128, 64.5], True),
        ([32, 256, 64], False),
        (["lu", "qr"], False),
        ([True, False], False),
    ],
)
def test_a_categorical_of_numbers_in_order_is_an_ordinal(categories: list[Any], ordinal: bool) -> None:
    space = ProblemSpace.parse(
        {
            "parameter_space": [
                {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
                {"name": "c", "type": "categorical", "categories": categories},
            ]
        }
    ).parameter_space
    c = space["c"]
    assert isinstance(c, Categorical) and c.ordered is ordinal
    assert LCMOptions().over(space).categorical == (() if ordinal else (1,))
    assert LCMOptions(categorical=(1,)).over(space).categorical == (1,)  # asked for: by category


@pytest.mark.parametrize("kernel", KERNELS)
def test_gradient_with_a_categorical_column_matches_finite_differences(kernel: KernelName) -> None:
    rng = np.random.default_rng(3)
    configs = [random_config(rng) for _ in range(14)]
    X = CATEGORIES.parameter_space.encode(configs)
    task = np.repeat([0, 1], 7)
    z = np.array([c["x"] ** 2 + "abcde".index(c["alg"]) % 2 for c in configs])
    objective = NegativeLogLikelihood(
        X, task, (z - z.mean()) / z.std(), tasks=2, latent=1, rank=1, kernel=kernel, categorical=(1,)
    )
    hp = Hyperparameters.initial(1, 2, 2, 1, rng=np.random.default_rng(1))
    theta = dataclasses.replace(hp, noise=np.maximum(hp.noise, 1e-3)).to_vector()
    value, gradient = objective(theta)
    with threadpool_limits(1, user_api="blas"):
        numeric = approx_fprime(theta, lambda t: objective(t)[0], 1e-7)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-4, atol=1e-4 * np.abs(numeric).max())
    assert np.isfinite(value)


def test_categorical_columns_are_stored_with_the_model_and_old_models_keep_positions() -> None:
    """A stored model keeps the columns it was fitted with; one stored before the option compares by position."""
    rng = np.random.default_rng(5)
    tasks: list[dict[str, Any]] = [{}]
    problem = ProblemSpace.parse({**CATEGORIES.model_dump(), "output_space": [{"name": "y"}]})
    records = [
        FunctionEvaluation.create({}, c, {"y": c["x"] + "abcde".index(c["alg"]) % 2})
        for c in (random_config(rng) for _ in range(12))
    ]
    data, uids = TrainingData.from_records(problem, tasks, records)
    fitted = LCM(LCMOptions(n_starts=1, max_iterations=30).over(problem.parameter_space)).fit(
        data, seed=0, executor=INLINE
    )
    record = surrogate_record(fitted, problem, tasks, uids, modeler="test")
    assert record.modeling_options["categorical"] == [1]
    assert record.modeler == "raytuner_LCM"  # GPTune's Model_LCM would read the categories by position
    again = load_surrogate(record, records)
    assert again.options.categorical == (1,)
    grid = problem.parameter_space.encode([{"x": 0.3, "alg": c} for c in "abcde"])
    np.testing.assert_allclose(again.predict(0, grid)[0], fitted.predict(0, grid)[0], rtol=1e-9)
    old = record.model_copy(
        update={"modeling_options": {k: v for k, v in record.modeling_options.items() if k != "categorical"}}
    )
    assert load_surrogate(old, records).options.categorical_columns == ()
    with pytest.raises(InvalidInputError) as err:
        fitted.to_gpy()
    assert err.value.field == "categorical"
    with pytest.raises(InvalidInputError) as err:
        LCMOptions(categorical=(-1,))
    assert err.value.field == "categorical"


@pytest.mark.parametrize("kernel", KERNELS)
def test_fitted_gradient_is_minus_the_objective_gradient(kernel: KernelName) -> None:
    data = _three_tasks(3)
    fitted = LCM(LCMOptions(latent=2, kernel=kernel, n_starts=1, max_iterations=5)).fit(data, seed=0, executor=INLINE)
    hp = fitted.hyperparameters
    objective = NegativeLogLikelihood(fitted.X, fitted.task, fitted.z, tasks=3, latent=2, rank=1, kernel=kernel)

    def log_likelihood(theta: np.ndarray) -> float:
        return FittedLCM.condition(
            fitted.options, fitted.data, fitted.transform, Hyperparameters.from_vector(theta, 2, 3, 2, 1), fitted.report
        ).log_likelihood

    value, gradient = objective(hp.to_vector())
    assert -value == pytest.approx(fitted.log_likelihood, rel=1e-9)
    np.testing.assert_array_equal(fitted.log_likelihood_gradient(), -gradient)
    with threadpool_limits(1, user_api="blas"):
        numeric = approx_fprime(hp.to_vector(), log_likelihood, 1e-7)
    np.testing.assert_allclose(
        fitted.log_likelihood_gradient(), numeric, rtol=1e-3, atol=1e-3 * max(1.0, np.abs(numeric).max())
    )


# -- what fitted models learn ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scaled_and_shifted_copy_is_correlated(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.random((15, 1)), rng.random((15, 1))
    same = LCM(LCMOptions(n_starts=4, max_iterations=200)).fit(
        TrainingData([x1, x1], [np.sin(6 * x1[:, 0]), 3 * np.sin(6 * x1[:, 0]) + 1]), seed=seed, executor=INLINE
    )
    assert same.correlation()[0, 1] > 0.9
    other = LCM(LCMOptions(n_starts=4, max_iterations=200)).fit(
        TrainingData([x1, x2], [np.sin(6 * x1[:, 0]), 3 * np.sin(6 * x2[:, 0]) + 1]), seed=seed, executor=INLINE
    )
    assert other.correlation()[0, 1] > 0.9
    np.testing.assert_allclose(np.diag(other.correlation()), 1.0)
    negated = LCM(LCMOptions(n_starts=4, max_iterations=200)).fit(
        TrainingData([x1, x1], [np.sin(6 * x1[:, 0]), -2 * np.sin(6 * x1[:, 0])]), seed=seed, executor=INLINE
    )
    assert negated.correlation()[0, 1] < -0.9


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_independent_tasks_are_not_correlated(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # each task varies along its own input only: independent functions of the inputs
    X1, X2 = rng.random((15, 2)), rng.random((15, 2))
    separate = LCM(LCMOptions(n_starts=2, max_iterations=200)).fit(
        TrainingData([X1, X2], [np.sin(6 * X1[:, 0]), np.sin(6 * X2[:, 1])]), seed=seed, executor=INLINE
    )
    assert abs(separate.correlation()[0, 1]) < 0.2
    # orthogonal functions of one input, sampled at different points: with 15 samples a task the RBF
    # kernel (GPTune's) pins the correlation near 0; the rougher Matérn 5/2 leaves it loose (|ρ| up to
    # 0.63 at seeds 0-7, up to 0.66 at 25 samples)
    x1, x2 = rng.random((15, 1)), rng.random((15, 1))
    orthogonal = LCM(LCMOptions(kernel="rbf", n_starts=2, max_iterations=200)).fit(
        TrainingData([x1, x2], [np.sin(2 * np.pi * x1[:, 0]), np.cos(2 * np.pi * x2[:, 0])]), seed=seed, executor=INLINE
    )
    assert abs(orthogonal.correlation()[0, 1]) < 0.5


def test_heterotopic_data_and_a_task_without_samples() -> None:
    data = _three_tasks(4, counts=(2, 7, 15), noise=0.0)
    fitted = LCM(LCMOptions(n_starts=2, max_iterations=200)).fit(data, seed=0, executor=INLINE)
    assert fitted.data.counts == [2, 7, 15] and fitted.hyperparameters.shape == (3, 3, 2, 1)
    grid = np.random.default_rng(5).random((40, 2))
    for i in range(3):
        mean, variance = fitted.predict(i, grid)
        assert mean.shape == variance.shape == (40,)
        assert np.all(np.isfinite(mean)) and np.all(variance > 0)
    mean, variance = fitted.predict(2, data.X[2])
    np.testing.assert_allclose(mean, data.y[2], atol=0.05 * np.ptp(data.y[2]))

    empty = TrainingData([data.X[0], np.empty((0, 2)), data.X[2]], [data.y[0], np.empty(0), data.y[2]])
    fitted = LCM(LCMOptions(n_starts=2, max_iterations=200)).fit(empty, seed=0, executor=INLINE)
    assert fitted.data.counts == [2, 0, 15]
    mean, variance = fitted.predict(1, data.X[2])
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(variance))
    _, on_data = fitted.predict(2, data.X[2])
    assert variance.min() > 10 * on_data.max()  # an unobserved task stays uncertain where another has data
    with pytest.raises(InvalidInputError) as err:
        fitted.predict(3, data.X[2])
    assert err.value.field == "task"


def test_fantasies_grow_the_factorisation_as_a_new_factorisation_would() -> None:
    data = _three_tasks(8)
    fitted = LCM(LCMOptions(n_starts=2, max_iterations=100)).fit(data, seed=0, executor=INLINE)
    pending = np.random.default_rng(9).random((3, 2))
    z = fitted.predict_standardised(1, pending)[0]
    grown = fitted.condition_on(1, pending, z)
    anew = FittedLCM(
        fitted.options,
        fitted.data,
        fitted.transform,
        fitted.hyperparameters,
        grown.X,
        grown.task,
        grown.z,
        fitted.report,
    )
    grid = np.random.default_rng(10).random((50, 2))
    for i in range(3):
        for ours, theirs in zip(grown.predict_standardised(i, grid), anew.predict_standardised(i, grid)):
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9)
    # a rank update and a new factorisation round differently: 2.4e-9 apart at seed 0 (Matérn 5/2)
    assert grown.log_likelihood == pytest.approx(anew.log_likelihood, rel=1e-7)
    assert np.all(grown.predict_standardised(1, pending)[1] < fitted.predict_standardised(1, pending)[1])
    # a block whose Schur complement is not positive definite is left to a whole new factorisation
    assert ExactPosterior(np.eye(2), np.zeros(2)).extended(np.ones((1, 2)), np.zeros((1, 1)), np.zeros(3)) is None


def test_single_task_gp_interpolates() -> None:
    X = np.random.default_rng(6).random((10, 1))
    y = np.sin(5 * X[:, 0]) + 2.0
    fitted = LCM(LCMOptions(n_starts=2)).fit(TrainingData([X], [y]), seed=0, executor=INLINE)
    assert fitted.hyperparameters.shape == (1, 1, 1, 1)
    mean, variance = fitted.predict(0, X)
    np.testing.assert_allclose(mean, y, atol=1e-3)
    assert np.all(variance < 1e-4 * y.var())
    between = np.array([[0.5 * (X[0, 0] + X[1, 0])]])
    assert fitted.predict(0, between)[0][0] == pytest.approx(np.sin(5 * between[0, 0]) + 2.0, abs=0.1)
    _, far = fitted.predict_standardised(0, np.array([[5.0]]))
    assert far[0] == pytest.approx(fitted.hyperparameters.coregionalization()[:, 0, 0].sum(), rel=1e-6)


def test_log_transform() -> None:
    rng = np.random.default_rng(7)
    X = [rng.random((10, 2)), rng.random((6, 2))]
    runtimes = [np.exp(3 * x[:, 0] - 2 * x[:, 1]) * 1e-3 * (1 + i) for i, x in enumerate(X)]
    model = LCM(LCMOptions(n_starts=2, log_transform=True))
    fitted = model.fit(TrainingData(X, runtimes), seed=0, executor=INLINE)
    grid = rng.random((200, 2))
    for i in range(2):
        mean, variance = fitted.predict(i, grid)
        assert np.all(mean > 0) and np.all(variance >= 0)
        np.testing.assert_allclose(fitted.predict(i, X[i])[0], runtimes[i], rtol=0.05)
    assert fitted.transform.log_transform
    for bad in (0.0, -1e-3):
        y = [runtimes[0].copy(), runtimes[1]]
        y[0][3] = bad
        with pytest.raises(InvalidInputError) as err:
            model.fit(TrainingData(X, y), seed=0, executor=INLINE)
        assert err.value.field == "log_transform" and "log_transform" in str(err.value)
    # without the transform the same data is fine
    LCM(LCMOptions(n_starts=1, max_iterations=5)).fit(TrainingData(X, y), seed=0, executor=INLINE)


@pytest.mark.parametrize("seed", [0, 1])
def test_warm_start_needs_few_iterations(seed: int) -> None:
    data = _three_tasks(seed, counts=(8, 12, 10), noise=0.05)
    # maximum likelihood (no prior): the warm fit may then only raise the likelihood it starts from
    cold = LCM(LCMOptions(n_starts=2, lengthscale_prior=None, noise_prior=None)).fit(data, seed=seed, executor=INLINE)
    warm = LCM(LCMOptions(n_starts=1, warm_starts=1, lengthscale_prior=None, noise_prior=None)).fit(
        data, seed=seed, executor=INLINE, warm_start=cold.hyperparameters
    )
    assert len(warm.report.starts) == 1
    assert warm.log_likelihood >= cold.log_likelihood - 1e-6 * abs(cold.log_likelihood) - 1e-6
    assert warm.report.iterations <= min(warm_iterations := LCMOptions().warm_iterations, cold.report.iterations // 4)
    assert cold.report.iterations > 2 * warm_iterations


def test_warm_start_of_another_shape_is_ignored() -> None:
    data = _three_tasks(0)
    two = LCM(LCMOptions(latent=2, n_starts=1, max_iterations=20)).fit(data, seed=0, executor=INLINE)
    three = LCM(LCMOptions(latent=3, n_starts=1, max_iterations=20)).fit(
        data, seed=0, executor=INLINE, warm_start=two.hyperparameters
    )
    assert three.hyperparameters.shape == (3, 3, 2, 1)


# -- numerical robustness -------------------------------------------------------------------------------
def test_robust_cholesky_adds_jitter_to_a_singular_matrix() -> None:
    v = np.array([1.0, 2.0, 3.0])
    K = np.outer(v, v)  # rank one
    L, jitter = robust_cholesky(K)
    assert jitter > 0
    np.testing.assert_allclose(L @ L.T, K + jitter * np.eye(3), atol=1e-12)
    assert np.all(np.diag(L) > 0)
    L, jitter = robust_cholesky(np.eye(3) * 2.0)  # positive definite: the smallest jitter
    np.testing.assert_allclose(L @ L.T, 2.0 * np.eye(3) + jitter * np.eye(3))
    assert jitter == pytest.approx(2e-10)
    with pytest.raises(LinAlgError):
        robust_cholesky(-np.eye(3))


def test_duplicated_inputs_with_conflicting_outputs_and_tiny_noise() -> None:
    rng = np.random.default_rng(8)
    x = rng.random((6, 2))
    X = np.vstack([x, x, x[:2]])  # exact duplicates
    y = np.concatenate([np.sin(4 * x[:, 0]), np.sin(4 * x[:, 0]) + 0.5, [3.0, -3.0]])
    data = TrainingData([X, x], [y, np.cos(3 * x[:, 1])])
    fitted = LCM(LCMOptions(n_starts=2, max_iterations=100)).fit(data, seed=0, executor=INLINE)
    assert np.isfinite(fitted.log_likelihood)
    mean, variance = fitted.predict(0, X)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(variance))

    # noise pinned at its lower bound: only the jitter keeps the covariance factorisable
    start = dataclasses.replace(fitted.hyperparameters, noise=np.full(2, 1e-8))
    fixed = np.zeros(len(start.to_vector()), bool)
    fixed[-2:] = True
    pinned = LCM(LCMOptions(n_starts=2, max_iterations=50)).fit(
        data, seed=0, executor=INLINE, warm_start=start, fixed=fixed
    )
    np.testing.assert_allclose(pinned.hyperparameters.noise, [1e-8, 1e-8], rtol=1e-12)
    assert pinned.jitter > 0 and np.isfinite(pinned.log_likelihood)
    assert np.all(np.isfinite(pinned.predict(0, X)[0]))
    singular = FittedLCM.condition(fitted.options, data, fitted.transform, start, FitReport())
    assert singular.jitter > 0 and np.isfinite(singular.log_likelihood)
    X_all, task, _ = data.stacked()
    value, gradient = NegativeLogLikelihood(X_all, task, singular.z, tasks=2, latent=2, rank=1, kernel="rbf")(
        start.to_vector()
    )
    assert np.isfinite(value) and np.all(np.isfinite(gradient))


def test_non_finite_outputs_are_dropped() -> None:
    x = np.linspace(0, 1, 6)[:, None]
    y = np.sin(3 * x[:, 0])
    y[2] = np.nan
    y[4] = np.inf
    fitted = LCM(LCMOptions(n_starts=1, max_iterations=20)).fit(TrainingData([x], [y]), seed=0, executor=INLINE)
    assert fitted.data.counts == [4] and np.all(np.isfinite(fitted.z))


# -- determinism and executors --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def processes() -> Iterator[ProcessExecutor]:
    executor = ProcessExecutor(2)
    yield executor
    executor.shutdown()


def test_same_seed_same_hyperparameters_inline_and_in_processes(processes: ProcessExecutor) -> None:
    data = _three_tasks(9)
    options = LCMOptions(n_starts=3, max_iterations=60)
    inline = LCM(options).fit(data, seed=11, executor=INLINE)
    pooled = LCM(options).fit(data, seed=11, executor=processes)
    again = LCM(options).fit(data, seed=11, executor=INLINE)
    np.testing.assert_array_equal(inline.hyperparameters.to_vector(), pooled.hyperparameters.to_vector())
    np.testing.assert_array_equal(inline.hyperparameters.to_vector(), again.hyperparameters.to_vector())
    assert [s["value"] for s in inline.report.starts] == [s["value"] for s in pooled.report.starts]
    other = LCM(options).fit(data, seed=12, executor=INLINE)
    assert not np.array_equal(other.report.starts[1]["value"], inline.report.starts[1]["value"])


def _sleep_then(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _wait_for_file(path: str) -> float:
    """0.0 at once for ``""``; else wait (at most 10 minutes) until ``path`` exists."""
    deadline = time.monotonic() + 600
    while path and not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return 0.0


def _fail_on_negative(value: float) -> float:
    if value < 0:
        raise ValueError("negative")
    return math.sqrt(value)


def test_inline_executor_turns_an_exception_into_none(caplog: pytest.LogCaptureFixture) -> None:
    assert INLINE.map(_fail_on_negative, [4.0, -1.0, 9.0]) == [2.0, None, 3.0]
    assert "executor item failed" in caplog.text
    assert INLINE.map(_fail_on_negative, []) == []


def test_a_fit_without_an_executor_runs_inline_up_to_inline_records() -> None:
    # no Ray in this test (conftest shuts it down before a test that does not ask for it)
    assert isinstance(default_executor(records=INLINE_RECORDS), InlineExecutor)
    assert isinstance(default_executor(records=INLINE_RECORDS + 1), ProcessExecutor)
    assert isinstance(default_executor(), ProcessExecutor)  # size unknown: never inline
    # the fit counts its records: 64 run inline, 65 go to the pool (one start: the pool runs a single item in
    # this process, so no worker is started here, and the report still names the executor the fit chose)
    options = LCMOptions(n_starts=1, max_iterations=10)
    at = LCM(options).fit(_three_tasks(2, counts=(20, 20, INLINE_RECORDS - 40)), seed=1)
    above = LCM(options).fit(_three_tasks(2, counts=(20, 20, INLINE_RECORDS - 39)), seed=1)
    assert (at.report.executor, above.report.executor) == ("InlineExecutor", "ProcessExecutor")


def test_the_tuning_server_fits_on_the_process_pool_for_small_fits_too() -> None:
    from raytuner.service.server import TuningServer

    # concurrent sessions' fits run side by side on the pool; inline in the server's threads they took turns
    assert isinstance(TuningServer._executor(None), ProcessExecutor)


def test_process_executor_keeps_order_and_drops_failures_and_late_items(
    processes: ProcessExecutor, tmp_path: Path
) -> None:
    assert processes.map(_sleep_then, [0.0, 0.0], timeout=60) == [0.0, 0.0]  # start the workers
    delays = [0.4, 0.2, 0.0, 0.3, 0.1]
    assert processes.map(_sleep_then, delays, timeout=60) == delays  # finished out of order
    assert processes.map(_fail_on_negative, [4.0, -1.0, 9.0], timeout=60) == [2.0, None, 3.0]
    # the late item waits for a file the test writes only afterwards: it cannot finish in time on any
    # machine, and returning before the release proves the map did not wait for it; the 0-s item has
    # 5 s (the test's whole cost) to come back from a warm worker, which takes milliseconds
    release = tmp_path / "release"
    try:
        assert processes.map(_wait_for_file, ["", str(release)], timeout=5.0) == [0.0, None]
    finally:
        release.touch()  # the worker ends its wait
    assert ProcessExecutor(2).map(_sleep_then, [0.0]) == [0.0]  # one item: inline, no pool


def _pid_or_die_in_a_worker(die: bool) -> int:
    """This process's pid; a pool worker asked to die exits at once (inline, nothing dies)."""
    import multiprocessing

    if die and multiprocessing.parent_process() is not None:
        os._exit(1)
    return os.getpid()


def test_a_pool_that_served_and_then_broke_is_replaced_not_given_up() -> None:
    # a worker killed mid-run (for memory, say) breaks one call, which runs inline; the next call gets a new pool
    executor = ProcessExecutor(2)
    try:
        assert os.getpid() not in executor.map(_pid_or_die_in_a_worker, [False, False], timeout=120)
        assert executor.map(_pid_or_die_in_a_worker, [True, True], timeout=120) == [os.getpid()] * 2
        assert not ProcessExecutor.broken
        assert os.getpid() not in executor.map(_pid_or_die_in_a_worker, [False, False], timeout=120)
    finally:
        executor.shutdown()


#: A process that starts a pool of two fit workers, prints their pids and waits to be killed.
POOL_OWNER = """
import multiprocessing, sys, time
from raytuner.models.executors import ProcessExecutor

if __name__ == "__main__":
    executor = ProcessExecutor(2)
    executor.warm(wait=True)
    print(" ".join(str(child.pid) for child in multiprocessing.active_children()), flush=True)
    time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie no one has reaped yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from Linux's /proc")
def test_the_fit_workers_of_a_killed_process_end_by_themselves(tmp_path: Path) -> None:
    # `kill -9` of a server (the OOM killer) gives its pool no chance to shut down: its workers end on their own
    (tmp_path / "owner.py").write_text(POOL_OWNER)
    owner = subprocess.Popen([sys.executable, "owner.py"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        workers = [int(pid) for pid in owner.stdout.readline().split()]
    finally:
        owner.kill()
        owner.wait()
    assert len(workers) == 2 and all(_running(pid) for pid in workers)
    deadline = time.monotonic() + 120  # they check every second: this bounds only a failure
    while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _running(pid)]


#: A script that tunes at its top level, with no main guard: past 64 records its fits go to the process pool.
UNGUARDED_SCRIPT = """
import os, sys
from raytuner.engines import MLA
from raytuner.problem.space import ProblemSpace

problem = ProblemSpace.parse({"parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}]})
engine = MLA(problem, [{}], seed=0, n_initial=5)
proposers = []
for _ in range(100):
    s = engine.ask()
    with open(sys.argv[1], "a") as marker:
        marker.write(f"{os.getpid()}\\n")
    engine.tell(s, {"y": (s.config["x"] - 0.3) ** 2})
    proposers.append(s.provenance.proposer)
print(os.getpid(), proposers.count("model"))
"""


def test_a_script_without_a_main_guard_evaluates_in_its_own_process_alone(tmp_path: Path) -> None:
    # the pool's spawned workers import the script again; each stops at its engine with one line, before any
    # evaluation, and the fits run inline in the script's process (its suggestions still come from the model)
    script, marker = tmp_path / "unguarded.py", tmp_path / "evaluations"
    script.write_text(textwrap.dedent(UNGUARDED_SCRIPT))
    run = subprocess.run(
        [sys.executable, str(script), str(marker)], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    pid, model = (int(v) for v in run.stdout.split())
    assert marker.read_text().split() == [str(pid)] * 100  # every evaluation once, in the script's process
    assert model == 95  # the model chose every suggestion after the 5-point design
    assert 'guard the tuning with `if __name__ == "__main__":`' in run.stderr
    assert run.stderr.count("every later call's inline") == 1  # one warning; later fits do not try a pool


# -- persistence ----------------------------------------------------------------------------------------
PROBLEM = ProblemSpace.parse(
    {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 4}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 8},
        ],
        "output_space": [{"name": "y", "type": "real", "goal": "minimize"}],
    }
)
TASKS = [{"t": 1.0}, {"t": 2.5}]


def _evaluations(seed: int) -> list[FunctionEvaluation]:
    rng = np.random.default_rng(seed)
    records = []
    for task, n in zip(TASKS, (9, 5)):
        for _ in range(n):
            config = {"x": float(rng.random()), "k": int(rng.integers(1, 9))}
            y = (config["x"] - 0.2 * task["t"]) ** 2 + 0.05 * config["k"]
            records.append(FunctionEvaluation.create(task, config, {"y": y}))
    records.append(FunctionEvaluation.create(TASKS[0], {"x": 0.5, "k": 2}, failure="crashed"))
    return records


@pytest.mark.parametrize(
    "options,modeler",
    [(GPTUNE_LCM, "Model_LCM"), ({"kernel": "rbf"}, "raytuner_LCM"), ({"kernel": "matern52"}, "raytuner_LCM")],
)
def test_surrogate_record_round_trips_through_the_store(
    store: HistoryStore, options: dict[str, Any], modeler: str
) -> None:
    """Only GPTune's own model (an uncentred RBF LCM) is named Model_LCM, so GPTune never misreads another."""
    records = _evaluations(10)
    data, uids = TrainingData.from_records(PROBLEM, TASKS, records)
    assert data.counts == [9, 5] and len(uids) == 14 and records[-1].uid not in uids
    fitted = LCM(LCMOptions(n_starts=2, max_iterations=100, **options)).fit(data, seed=0, executor=INLINE)
    record = surrogate_record(fitted, PROBLEM, TASKS, uids, modeler="test")
    store.append_many("persist", records)
    store.append_model("persist", record)

    [stored] = store.models("persist")
    assert stored.uid == record.uid and stored.function_evaluations == uids and description(stored)["modeler"] == "test"
    assert stored.modeler == modeler and stored.task_parameters == [[1.0], [2.5]]
    assert stored.model_stats["log_likelihood"] == pytest.approx(fitted.log_likelihood)
    assert stored.model_stats["neg_log_likelihood"] == pytest.approx(-fitted.log_likelihood)
    fit = description(stored)["fit"]
    assert fit["samples"] == [9, 5] and fit["executor"] == "InlineExecutor"
    again = load_surrogate(stored, store.evaluations("persist"))
    assert again.hyperparameters == fitted.hyperparameters and again.report.executor == "InlineExecutor"
    np.testing.assert_array_equal(again.hyperparameters.to_vector(), fitted.hyperparameters.to_vector())
    assert again.options == fitted.options
    grid = np.random.default_rng(11).random((25, 2))
    for i in range(2):
        for mine, theirs in zip(again.predict(i, grid), fitted.predict(i, grid)):
            np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)
    assert again.log_likelihood == pytest.approx(fitted.log_likelihood, rel=1e-9)

    # evaluations the record names must be in the store
    with pytest.raises(InvalidInputError) as err:
        load_surrogate(stored, [r for r in store.evaluations("persist") if r.uid != uids[3]])
    assert err.value.field == "function_evaluations"
    with pytest.raises(InvalidInputError) as err:
        load_surrogate(stored, [])
    assert err.value.field == "function_evaluations"


def test_surrogate_record_without_hyperparameters_names_the_field() -> None:
    records = _evaluations(12)
    data, uids = TrainingData.from_records(PROBLEM, TASKS, records)
    fitted = LCM(LCMOptions(n_starts=1, max_iterations=10)).fit(data, seed=0, executor=INLINE)
    record = surrogate_record(fitted, PROBLEM, TASKS, uids, modeler="test")
    record = record.model_copy(update={"raytuner": {**description(record), "hyperparameters": {"W": [1.0]}}})
    with pytest.raises(InvalidInputError) as err:
        load_surrogate(record, records)
    assert err.value.field == "hyperparameters"


# -- Ray (conftest's local_ray) -----------------------------------------------------------------------
@pytest.mark.slow
def test_ray_executor_fits_while_trials_hold_every_cpu(local_ray: Any) -> None:
    ray = local_ray

    @ray.remote(num_cpus=1)
    class Trial:
        def ready(self) -> bool:
            return True

        def train(self, seconds: float) -> bool:
            time.sleep(seconds)
            return True

    trials = [Trial.remote() for _ in range(2)]  # type: ignore[attr-defined]  # ray.remote's stub keeps the class
    try:
        ray.get([t.ready.remote() for t in trials], timeout=60)
        running = [t.train.remote(900) for t in trials]  # longer than the fit's timeout below
        deadline = time.monotonic() + 30
        while ray.available_resources().get("CPU", 0.0) > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ray.available_resources().get("CPU", 0.0) == 0.0
        assert isinstance(default_executor(), RayExecutor)

        data = _three_tasks(13)
        # a timeout no loaded machine reaches (at 60 s, a fit's Ray tasks missed it under a load of 15, and the
        # fit kept its first point), shorter than the trials' 900 s
        options = LCMOptions(n_starts=3, max_iterations=60, timeout=600)
        fitted = LCM(options).fit(data, seed=3, executor=RayExecutor())
        # every start ran on Ray within the fit's timeout (a start that had waited for a CPU would have waited
        # for the trials and missed it: a failed start); no wall-clock bound of our own
        assert all("failed" not in s for s in fitted.report.starts)
        inline = LCM(options).fit(data, seed=3, executor=INLINE)
        np.testing.assert_array_equal(fitted.hyperparameters.to_vector(), inline.hyperparameters.to_vector())
        # without an executor, a fit of 25 records runs inline even with Ray up: the same optimum
        default = LCM(options).fit(data, seed=3)
        assert (fitted.report.executor, default.report.executor) == ("RayExecutor", "InlineExecutor")
        np.testing.assert_array_equal(default.hyperparameters.to_vector(), inline.hyperparameters.to_vector())
        assert ray.wait(running, timeout=0)[0] == []  # the trials still hold the CPUs
    finally:
        for t in trials:
            ray.kill(t)


@pytest.mark.slow
def test_ray_executor_timeouts(local_ray: Any) -> None:
    executor = RayExecutor()
    assert executor.map(_fail_on_negative, [4.0, -1.0], timeout=60) == [2.0, None]
    # the late item would take 300 s: returning within 100 s means it was dropped, not waited for
    # (the margins only matter on a machine loaded far beyond anything a test run sees)
    began = time.perf_counter()
    assert executor.map(_sleep_then, [0.0, 300.0], timeout=3.0) == [0.0, None]
    assert time.perf_counter() - began < 100
    # nothing arrives in time: the first item runs inline, so a fit always gets a result
    began = time.perf_counter()
    assert executor.map(_sleep_then, [1.0, 300.0], timeout=0.2) == [1.0, None]
    assert time.perf_counter() - began < 100
    # the actor that was still busy with the 300 s item was killed, not put back: the next map is not queued
    # behind it (it would wait 300 s)
    began = time.perf_counter()
    assert executor.map(_sleep_then, [0.0, 0.0, 0.0], timeout=120) == [0.0, 0.0, 0.0]
    assert time.perf_counter() - began < 100


def _process_id(_: object) -> int:
    return os.getpid()


@pytest.mark.slow
def test_ray_executor_keeps_its_actors_warm_between_maps(local_ray: Any) -> None:
    """Fits seconds apart run in the same worker processes: Ray stops an idle task worker after about a second,
    and a cold one costs more than a small fit."""
    first = RayExecutor().map(_process_id, [0, 1], timeout=120)
    time.sleep(3)  # longer than Ray keeps an idle task worker beyond its CPUs
    again = RayExecutor().map(_process_id, [0, 1, 2], timeout=120)  # another executor shares the pool
    assert None not in first and None not in again
    assert len(set(first)) == 2 and set(first) < set(again) and len(set(again)) == 3
    assert os.getpid() not in again


@pytest.mark.slow
def test_ray_executor_reruns_the_item_of_an_idle_actor_that_died(local_ray: Any) -> None:
    """An idle pooled actor killed between fits (say for memory): its item runs again on a new actor."""
    import ray

    from raytuner.models.executors import _ACTORS

    first = RayExecutor().map(_process_id, [0, 1], timeout=120)
    dead = _ACTORS._idle[-1]  # the next map takes it first
    ray.kill(dead.actor)
    began = time.perf_counter()
    while time.perf_counter() - began < 120:  # dead before the next map, not racing it
        try:
            ray.get(dead.actor.run.remote(_process_id, 0), timeout=60)  # a call may beat the kill
        except ray.exceptions.RayActorError:
            break
    else:
        pytest.fail("the killed actor still answers after 120 s")
    again = RayExecutor().map(_process_id, [0, 1], timeout=120)
    assert None not in first and None not in again
    assert all(p is not dead for p in _ACTORS._idle)  # and it is not pooled again


@pytest.mark.slow
def test_ray_executor_does_not_keep_actors_that_reserve_cpus(local_ray: Any) -> None:
    """An idle actor that reserves a CPU would keep it from trials: those actors go when their map ends."""
    assert RayExecutor(num_cpus=1).map(_process_id, [0, 1], timeout=120) != [None, None]
    deadline = time.monotonic() + 60  # Ray frees a killed actor's CPU soon after, not at once
    while local_ray.available_resources().get("CPU", 0.0) < 2.0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert local_ray.available_resources().get("CPU", 0.0) == 2.0
