"""The Linear Coregionalization Model (LCM) over several tasks, and its fit.

``Q`` latent functions, each a unit-variance ARD kernel (RBF or Matérn),
are mixed per task by ``B_q = W_q W_qᵀ + diag(κ_q)``, with a noise variance
per task (paper 004, section 3.1). Outputs are standardised per task
(optionally after a log transform, for run times), and hyperparameters are
fitted by L-BFGS-B from several starts that run in parallel through an
:class:`~raytuner.models.executors.Executor` (one after another when inline); one start is always the previous
fit's optimum (``warm_start``). With one task this is an ordinary GP.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((12, 1))
    >>> data = TrainingData([X, X], [np.sin(6 * X[:, 0]), 3 * np.sin(6 * X[:, 0]) + 1])
    >>> fitted = LCM(LCMOptions(latent=1, n_starts=2)).fit(data, seed=0)
    >>> bool(fitted.correlation()[0, 1] > 0.9)
    True
    >>> mean, variance = fitted.predict(1, np.array([[0.5]]))
    >>> bool(abs(mean[0] - (3 * np.sin(3.0) + 1)) < 0.1)
    True
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from raytuner.models.blas import one_blas_thread
from raytuner.models.budget import deadline as fit_deadline
from raytuner.models.budget import remaining
from raytuner.models.data import TrainingData
from raytuner.models.executors import Executor, default_executor
from raytuner.models.fitted import FittedLCM, Standardisation, cross_covariance, lcm_likelihood, training_covariance
from raytuner.models.hyperparameters import BOUNDS, Hyperparameters
from raytuner.models.likelihood import NegativeLogLikelihood
from raytuner.models.options import FitReport, LCMOptions
from raytuner.models.posterior import ExactPosterior, balanced_subset

__all__ = ["LCM", "approximation", "held_out_accuracy"]

log = logging.getLogger(__name__)

#: Seconds an executor waits past a fit's deadline for its starts, which stop themselves at it, to return.
GRACE = 10.0
#: The same within a time budget (:func:`raytuner.models.budget.fit_budget`): a start still queued behind
#: other work then is dropped soon, and the fit keeps what the others found (or its warm start).
BUDGET_GRACE = 0.5


@dataclass(frozen=True)
class _Start:
    """One L-BFGS start, shipped to an executor (plain arrays: cheap to pickle)."""

    sample: _Sample
    theta: np.ndarray
    max_iterations: int
    free: np.ndarray | None = None  # mask of optimised entries (None: all)
    pid: int = 0  # the fitting process, which has limited BLAS threads already
    deadline: float | None = None  # time.time() at which the optimiser stops, keeping its best point


@dataclass(frozen=True)
class _StartResult:
    theta: np.ndarray
    value: float
    iterations: int
    evaluations: int
    timed_out: bool = False  # stopped at the deadline (theta is the best point seen)


class _Deadline(Exception):
    """Raised inside the objective once a start's deadline has passed."""


def run_start(start: _Start) -> _StartResult:
    """Optimise one start with L-BFGS-B (single-threaded BLAS: small matrices, parallel starts)."""
    if start.pid != os.getpid():  # another process (a Ray worker): limit BLAS here
        with one_blas_thread():
            return _optimise(start)
    return _optimise(start)


def _optimise(start: _Start) -> _StartResult:
    """L-BFGS-B over the free entries of one start, stopped at its deadline with the best point so far.

    The deadline is checked before every likelihood evaluation but the
    first, so a start overruns it by at most one evaluation, in any executor
    (inline too), and always returns a point it has evaluated.
    """
    objective = start.sample.objective()
    bounds = Hyperparameters.vector_bounds(*start.sample.shape, nonnegative=start.sample.nonnegative)
    free = np.ones(len(start.theta), bool) if start.free is None else start.free
    full = start.theta.copy()
    best: list[Any] = [math.inf, start.theta[free].copy()]
    steps = [0]

    def fun(sub: np.ndarray) -> tuple[float, np.ndarray]:
        if start.deadline is not None and math.isfinite(best[0]) and time.time() >= start.deadline:
            raise _Deadline
        full[free] = sub
        value, gradient = objective(full)
        if value < best[0]:
            best[0], best[1] = float(value), sub.copy()
        return value, gradient[free]

    def step(_: np.ndarray) -> None:
        steps[0] += 1

    theta = start.theta.copy()
    try:
        result = minimize(
            fun,
            start.theta[free],
            jac=True,
            method="L-BFGS-B",
            callback=step,
            bounds=[b for b, f in zip(bounds, free) if f],
            options={"maxiter": start.max_iterations},
        )
    except _Deadline:
        theta[free] = best[1]
        return _StartResult(theta, best[0], steps[0], objective.evaluations, timed_out=True)
    theta[free] = result.x
    return _StartResult(theta, float(result.fun), int(result.nit), objective.evaluations)


def _start_entry(result: _StartResult | None, samples: int) -> dict[str, Any]:
    """One start in the fit report (JSON-safe: a start that never evaluated has no value)."""
    if result is None or not math.isfinite(result.value):
        entry: dict[str, Any] = {"failed": True, "samples": samples}
    else:
        entry = {"value": result.value, "iterations": result.iterations, "samples": samples}
    if result is not None and result.timed_out:
        entry["timed_out"] = True
    return entry


class LCM:
    """Builds and fits :class:`~raytuner.models.fitted.FittedLCM` models with fixed options.

    Args:
        options: the model's options (default :class:`~raytuner.models.LCMOptions`).
    """

    name = "raytuner.LCM"

    def __init__(self, options: LCMOptions | None = None) -> None:
        self.options = options or LCMOptions()

    def standardisation(self, data: TrainingData) -> Standardisation:
        """The per-task output transform for ``data``.

        Args:
            data: the training data.
        """
        return Standardisation.of(data, log_transform=self.options.log_transform, centre=self.options.centre)

    def fit(
        self,
        data: TrainingData,
        *,
        seed: int | np.random.Generator | None = None,
        executor: Executor | None = None,
        warm_start: Hyperparameters | None = None,
        fixed: np.ndarray | None = None,
    ) -> FittedLCM:
        """Fit the hyperparameters to ``data`` and return the conditioned model.

        ``warm_start`` (the previous optimum) is always one of the starts.
        ``fixed`` is an optional boolean mask over
        :meth:`Hyperparameters.to_vector` of entries kept at their
        ``warm_start`` values (TLA2 learns only a new task's weights this
        way). A start that fails or times out is dropped; if all do, the
        warm start (or the default) is used unoptimised, with a warning —
        a fit never raises for numerical reasons.

        Args:
            data: the training data.
            seed: a seed or generator for the random starts (default: fresh entropy).
            executor: runs the multi-start fits (default :func:`~raytuner.models.executors.default_executor` for the
                fit's size: inline up to :data:`~raytuner.models.executors.INLINE_RECORDS` records).
            warm_start: the previous optimum, always one of the starts (default none).
            fixed: a boolean mask over :meth:`Hyperparameters.to_vector` of entries kept at their
                ``warm_start`` values.
        """
        began = time.perf_counter()
        data = data.finite()
        transform = self.standardisation(data)
        X, task, y = data.stacked()
        z = transform.forward_stacked(task, y)
        latent = self.options.latent_for(data.tasks)
        shape = (latent, data.tasks, data.dimension, self.options.rank)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        warm = self._compatible(warm_start, shape)
        free = None if fixed is None or warm is None else ~np.asarray(fixed, bool)
        fit = _limit(task, data.tasks, self.options.fit_limit)
        report = FitReport()
        deadline = fit_deadline(self.options.timeout)
        # One BLAS thread for the whole fit: parallelism comes from the starts, and a limit
        # changed while another start runs would make results depend on timing.
        with one_blas_thread():
            sample = _Sample(X[fit], task[fit], z[fit], shape, self.options)
            iterations = self.options.max_iterations if warm is None else self.options.warm_iterations
            starts = self._starts(sample, warm, rng, free, deadline, executor)
            theta = self._run(sample, starts, iterations, free, executor, report, deadline)
        if theta is None:
            log.warning(
                "every LCM start failed; using the %s hyperparameters unoptimised",
                "warm-start" if warm is not None else "default",
            )
            theta = (warm if warm is not None else Hyperparameters.initial(*shape)).to_vector()
        hp = Hyperparameters.from_vector(theta, *shape)
        if len(fit) < len(z):
            report.approximation, hp.noise = held_out_accuracy(self.options, hp, X, task, z, fit, rng)
        report.optimised_samples = len(z)
        report.seconds = time.perf_counter() - began
        return FittedLCM.condition(self.options, data, transform, hp, report)

    def condition(
        self, data: TrainingData, hyperparameters: Hyperparameters, optimised_samples: int | None = None
    ) -> FittedLCM:
        """The model of ``data`` with given hyperparameters, not optimised (``report.optimised`` is False).

        An engine whose data grew little since its last fit conditions on
        them instead of fitting again (``LCMOptions.refit_growth``).

        Args:
            data: the training data.
            hyperparameters: the hyperparameters, of this data's shape.
            optimised_samples: how many samples they were optimised on (for the report).

        >>> import numpy as np
        >>> X = np.linspace(0, 1, 6)[:, None]
        >>> first = LCM(LCMOptions(n_starts=1)).fit(TrainingData([X], [X[:, 0] ** 2]), seed=0)
        >>> again = LCM().condition(TrainingData([X], [X[:, 0] ** 2 + 1]), first.hyperparameters)
        >>> again.report.optimised, again.hyperparameters == first.hyperparameters
        (False, True)
        """
        began = time.perf_counter()
        data = data.finite()
        report = FitReport(
            optimised=False,
            optimised_samples=optimised_samples,
            approximation=approximation(self.options, sum(data.counts)),
        )
        fitted = FittedLCM.condition(self.options, data, self.standardisation(data), hyperparameters, report)
        report.seconds = time.perf_counter() - began
        return fitted

    def _run(
        self,
        sample: _Sample,
        thetas: list[np.ndarray],
        iterations: int,
        free: np.ndarray | None,
        executor: Executor | None,
        report: FitReport,
        deadline: float,
    ) -> np.ndarray | None:
        """Optimise each start on ``sample`` (in parallel unless inline) until ``deadline``: the best optimum or None.

        Every start stops itself at the deadline; the executor waits a
        little longer (:data:`GRACE`) for the results to come back, then
        drops what is still missing.
        """
        jobs = [_Start(sample, theta, iterations, free, os.getpid(), deadline) for theta in thetas]
        wait = max(0.0, deadline - time.time()) + (GRACE if remaining() is None else BUDGET_GRACE)
        runner = executor or default_executor(len(sample.z))
        report.executor = type(runner).__name__
        results = runner.map(run_start, jobs, timeout=wait)
        report.starts += [_start_entry(r, len(sample.z)) for r in results]
        late = any(r is None for r in results) and time.time() >= deadline  # dropped at the deadline, unfinished
        if late or any(r is not None and r.timed_out for r in results):
            report.timed_out = True
            log.warning(
                "the LCM fit reached its time limit (LCMOptions.timeout %.1f s, or its caller's budget): the "
                "best hyperparameters found so far are kept, and results now depend on timing",
                self.options.timeout,
            )
        finite = [r for r in results if r is not None and math.isfinite(r.value) and r.value < 1e20]
        report.iterations += sum(r.iterations for r in finite)
        report.evaluations += sum(r.evaluations for r in finite)
        return min(finite, key=lambda r: r.value).theta if finite else None

    def _compatible(self, warm: Hyperparameters | None, shape: tuple[int, int, int, int]) -> Hyperparameters | None:
        if warm is None:
            return None
        if warm.shape != shape:
            log.info("warm start of shape %s does not fit %s; ignored", warm.shape, shape)
            return None
        return warm.clipped(self.options.nonnegative(shape[1]))

    def _starts(
        self,
        sample: _Sample,
        warm: Hyperparameters | None,
        rng: np.random.Generator,
        free: np.ndarray | None,
        deadline: float | None = None,
        executor: Executor | None = None,
    ) -> list[np.ndarray]:
        """The warm (or default) start, then the best screened random starts.

        The random candidates are scored on the executor (``screen`` of them
        per start, one item per start), and only until half the time left to
        ``deadline`` has passed: past it a fit keeps fewer random starts, none
        when the deadline has passed already.
        """
        first = warm if warm is not None else Hyperparameters.initial(*sample.shape)
        starts = [first.to_vector()]
        wanted = (self.options.n_starts if warm is None else self.options.warm_starts) - 1
        now = time.time()
        if wanted <= 0 or (deadline is not None and now >= deadline):
            return starts
        candidates = [
            Hyperparameters.initial(*sample.shape, rng=rng, nonnegative=sample.nonnegative).to_vector()
            for _ in range(wanted * self.options.screen)
        ]
        if free is not None:  # only the free entries are drawn at random
            candidates = [np.where(free, c, starts[0]) for c in candidates]
        until = None if deadline is None else now + (deadline - now) / 2
        size = self.options.screen
        jobs = [_Screen(sample, candidates[i : i + size], os.getpid(), until) for i in range(0, len(candidates), size)]
        runner = executor or default_executor(len(sample.z))
        wait = None if until is None else max(0.0, until - time.time()) + BUDGET_GRACE
        scored = [
            score
            for job, result in zip(jobs, runner.map(run_screen, jobs, timeout=wait))
            for score in (result if result is not None else [None] * len(job.candidates))
        ]
        kept = [(i, score) for i, score in enumerate(scored) if score is not None]
        order = np.argsort([score for _, score in kept], kind="stable")[:wanted]
        return starts + [candidates[kept[i][0]] for i in order]


@dataclass(frozen=True)
class _Screen:
    """Candidate starts to score, shipped to an executor (``deadline``: stop scoring then)."""

    sample: _Sample
    candidates: list[np.ndarray]
    pid: int = 0
    deadline: float | None = None


def run_screen(screen: _Screen) -> list[float | None]:
    """The objective's value at each candidate start, until the deadline (``None``: not scored by then)."""
    if screen.pid != os.getpid():  # another process: limit BLAS here
        with one_blas_thread():
            return _score(screen)
    return _score(screen)


def _score(screen: _Screen) -> list[float | None]:
    objective = screen.sample.objective()
    scores: list[float | None] = []
    for candidate in screen.candidates:
        late = screen.deadline is not None and time.time() >= screen.deadline
        scores.append(None if late else float(objective(candidate)[0]))
    return scores


@dataclass(frozen=True)
class _Sample:
    """The samples one stage of a fit optimises on, with the model's shape and options."""

    X: np.ndarray
    task: np.ndarray
    z: np.ndarray
    shape: tuple[int, int, int, int]  # latent, tasks, dimension, rank
    options: LCMOptions

    @property
    def nonnegative(self) -> bool:
        """Whether the weights ``W`` are bounded below at 0 (:meth:`LCMOptions.nonnegative`)."""
        return self.options.nonnegative(self.shape[1])

    def objective(self) -> NegativeLogLikelihood:
        return lcm_likelihood(self.options, self.X, self.task, self.z, self.shape, priors=True)


def _limit(task: np.ndarray, tasks: int, limit: int | None) -> np.ndarray:
    """Indices of the samples a stage uses: all, or a per-task balanced subset of ``limit``."""
    return np.arange(len(task)) if limit is None else balanced_subset(task, tasks, limit)


def held_out_accuracy(
    options: LCMOptions,
    hp: Hyperparameters,
    X: np.ndarray,
    task: np.ndarray,
    z: np.ndarray,
    fit: np.ndarray,
    rng: np.random.Generator,
    most: int = 500,
) -> tuple[dict[str, Any], np.ndarray]:
    """What a fit on the samples ``fit`` says about the others, and the noise that calibrates it.

    The exact posterior of the fit's samples predicts at most ``most`` of the
    samples left out (a random draw from ``rng``): the RMSE and the mean log
    predictive density, in model units. Hyperparameters fitted on a subset
    of a function with structure finer than the subset resolves are
    overconfident on the rest (at 1,000 demo samples fitted on 500 the
    conditioned model's held-out log density was −720 against −1.3 for the
    exact fit), so each task's noise grows by the squared error its
    held-out samples show beyond the predicted variance (moment matching);
    the calibrated noise is returned with the report.

    Args:
        options: the model's options (kernel, limits).
        hp: the fitted hyperparameters.
        X: ``(n, d)`` every sample's inputs.
        task: ``(n,)`` every sample's task.
        z: ``(n,)`` every sample's output in model units.
        fit: the indices the hyperparameters were fitted on.
        rng: draws the held-out samples.
        most: the most held-out samples to predict.
    """
    summary = approximation(options, len(z))
    rest = np.setdiff1d(np.arange(len(z)), fit)
    if len(rest) > most:
        rest = np.sort(rng.choice(rest, size=most, replace=False))
    columns = options.categorical_columns
    posterior = ExactPosterior(training_covariance(hp, options.kernel, X[fit], task[fit], categorical=columns), z[fit])
    prior = hp.prior_variances()
    mean, variance = posterior.predict(
        cross_covariance(hp, options.kernel, X[rest], task[rest], X[fit], task[fit], categorical=columns),
        prior[task[rest]],
    )
    squared = (z[rest] - mean) ** 2
    noise = hp.noise.copy()
    for i in np.unique(task[rest]):
        mine = task[rest] == i
        if mine.sum() >= 3:
            excess = float(np.mean(squared[mine]) - np.mean(variance[mine]) - noise[i])
            noise[i] = min(noise[i] + max(excess, 0.0), BOUNDS["noise"][1])
    variance = variance + noise[task[rest]]
    density = -0.5 * (np.log(2 * np.pi * variance) + squared / variance)
    return {
        **(summary or {}),
        "held_out": int(len(rest)),
        "held_out_rmse": float(np.sqrt(np.mean(squared))),
        "held_out_log_density": float(np.mean(density)),
        "noise_calibrated": noise.tolist(),
    }, noise


def approximation(options: LCMOptions, samples: int) -> dict[str, Any] | None:
    """How a model of ``samples`` samples approximates (``None``: exact, fitted on all of them).

    Args:
        options: the model's options (its limits).
        samples: how many samples the model has.

    >>> approximation(LCMOptions(fit_limit=100, exact_limit=200), 300)
    {'method': 'fitc', 'samples': 300, 'fit_samples': 100, 'inducing': 100}
    >>> approximation(LCMOptions(fit_limit=100, exact_limit=200), 50) is None
    True
    """
    subset = options.fit_limit is not None and samples > options.fit_limit
    sparse = options.sparse(samples)
    if not (subset or sparse):
        return None
    return {
        "method": "fitc" if sparse else "subset",
        "samples": samples,
        "fit_samples": min(samples, options.fit_limit or samples),
        "inducing": options.inducing if sparse else None,
    }
