"""Acquisition functions and their maximisation over a constrained, mixed parameter space.

Models minimise, so the acquisition functions take a predicted ``mean`` and
standard deviation ``std`` in minimisation units and the ``best`` (lowest)
value seen so far; they return scores to be *maximised*. All of them work
element-wise on numpy arrays.

:func:`optimize_acquisition` maximises a score over the parameter space
encoded to the unit cube (see :mod:`raytuner.problem.space`): a global phase scores a
large random + Latin hypercube sample (and perturbations of any configurations
it is told to search ``around``), a local phase refines the best points
by Gaussian perturbation with a shrinking scale. A finite space (integers and
categoricals only) of at most ``ENUMERATION_FACTOR`` times the global phase's
size is scored whole instead, so the search returns the maximum itself. Candidates are snapped
(``encode(decode(U))``) so integers and categoricals sit at their bin
centres, and candidates that break a constraint for the task or repeat an
excluded (evaluated or pending) configuration are dropped before scoring.

Example:
    >>> import numpy as np
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({
    ...     "input_space": [{"name": "t", "type": "real", "lower_bound": 1, "upper_bound": 10}],
    ...     "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
    ...                         {"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 8}],
    ...     "constraints": {"small": "x < t / 10"}})
    >>> ei = acquisition_function("ei", xi=0.0)
    >>> def score(unit):  # a made-up model: mean (x - 0.3)^2 + k / 100, std 0.01
    ...     x = unit[:, 0]
    ...     k = np.array([c["k"] for c in problem.parameter_space.decode(unit)])
    ...     return ei((x - 0.3) ** 2 + k / 100, np.full(len(unit), 0.01), best=0.05)
    >>> config, value = optimize_acquisition(problem, {"t": 2.0}, score, rng=np.random.default_rng(0))
    >>> config["k"], round(config["x"], 2), value > 0
    (1, 0.2, True)
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm, qmc

from raytuner.errors import InvalidInputError
from raytuner.models.grid import valid_grid
from raytuner.problem.sampling import Seed, sample_configurations
from raytuner.problem.space import Categorical, ProblemSpace, Real, Space

__all__ = [
    "expected_improvement",
    "probability_of_improvement",
    "lower_confidence_bound",
    "ACQUISITIONS",
    "Acquisition",
    "acquisition_function",
    "optimize_acquisition",
]

log = logging.getLogger(__name__)

#: A standard deviation at or below this counts as zero (a noiseless, already observed point).
MIN_STD = 1e-12


class Acquisition(Protocol):
    """``(mean, std, best) -> scores``, as :func:`acquisition_function` returns; ``best`` may be named.

    Example:
        >>> lcb: Acquisition = acquisition_function("lcb", beta=1.0)
        >>> lcb([1.0], [0.5], best=0.0).tolist()
        [-0.5]
    """

    def __call__(self, mean: ArrayLike, std: ArrayLike, best: float) -> np.ndarray: ...


# Share of each local-phase batch's categorical coordinates redrawn uniformly,
# so every category stays reachable whatever the perturbation scale.
_CATEGORICAL_REDRAW = 0.2

#: A finite space of at most this many times ``search_candidates`` points is scored whole.
ENUMERATION_FACTOR = 16

#: The global phase scores at most this many points per parameter dimension: a space of few dimensions is
#: covered densely by fewer points, and each scored point costs a prediction (on the main job, one parameter
#: and up to 1,300 training samples, 300 points found the same optima as 2,048 in half the time).
CANDIDATES_PER_DIMENSION = 300


def _improvement(
    mean: ArrayLike, std: ArrayLike, best: float, xi: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``gain = best - mean - xi``, ``std``, ``z = gain / std`` (0 where std is zero) and the std > 0 mask."""
    mean_a, std_a = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(std, dtype=float))
    gain = best - mean_a - xi
    uncertain = std_a > MIN_STD
    with np.errstate(invalid="ignore"):
        z = np.where(uncertain, gain / np.where(uncertain, std_a, 1.0), 0.0)
    return gain, std_a, z, uncertain


def expected_improvement(mean: ArrayLike, std: ArrayLike, best: float, xi: float = 0.0) -> np.ndarray:
    """Expected improvement over ``best``: ``(best - mean - xi) Phi(z) + std phi(z)``, ``z = (best - mean - xi) / std``.

    Where ``std`` is zero (at most :data:`MIN_STD`) it is ``max(best - mean - xi, 0)``.
    The result is never negative and never NaN for finite inputs.

    Args:
        mean: predicted means (minimisation).
        std: predicted standard deviations, same shape.
        best: the best value observed so far.
        xi: the improvement margin (default 0).

    >>> expected_improvement([0.5, 0.3], [0.0, 0.0], best=0.4).tolist()
    [0.0, 0.10000000000000003]
    >>> round(float(expected_improvement(0.4, 1.0, best=0.4)), 6)  # phi(0)
    0.398942
    """
    gain, std_a, z, uncertain = _improvement(mean, std, best, xi)
    cdf = norm.cdf(z)
    with np.errstate(invalid="ignore"):
        exploit = np.where(cdf > 0, gain * cdf, 0.0)  # avoids -inf * 0
        smooth = np.maximum(exploit + std_a * norm.pdf(z), 0.0)
    return np.where(uncertain, smooth, np.maximum(gain, 0.0))


def probability_of_improvement(mean: ArrayLike, std: ArrayLike, best: float, xi: float = 0.0) -> np.ndarray:
    """Probability that a point improves on ``best`` by more than ``xi``: ``Phi((best - mean - xi) / std)``.

    Where ``std`` is zero it is 1 if ``best - mean - xi > 0`` and 0 otherwise.

    Args:
        mean: predicted means (minimisation).
        std: predicted standard deviations, same shape.
        best: the best value observed so far.
        xi: the improvement margin (default 0).

    >>> probability_of_improvement([0.4, 0.3, 0.5], [1.0, 0.0, 0.0], best=0.4).tolist()
    [0.5, 1.0, 0.0]
    """
    gain, _, z, uncertain = _improvement(mean, std, best, xi)
    return np.where(uncertain, norm.cdf(z), (gain > 0).astype(float))


def lower_confidence_bound(mean: ArrayLike, std: ArrayLike, beta: float = 2.0) -> np.ndarray:
    """The negated lower confidence bound ``-(mean - beta * std)``, so that larger is better.

    Args:
        mean: predicted means.
        std: predicted standard deviations, same shape.
        beta: the weight of ``std`` (default 2).

    >>> lower_confidence_bound([1.0, 2.0], [0.5, 0.1], beta=2.0).tolist()
    [0.0, -1.8]
    """
    return beta * np.asarray(std, dtype=float) - np.asarray(mean, dtype=float)


#: The acquisition functions by name.
ACQUISITIONS: dict[str, Callable[..., np.ndarray]] = {
    "ei": expected_improvement,
    "pi": probability_of_improvement,
    "lcb": lower_confidence_bound,
}

_POSITIONAL = ("mean", "std", "best")


def acquisition_function(name: str, **options: float) -> Acquisition:
    """The acquisition function ``name`` with ``options`` bound, as ``(mean, std, best) -> scores``.

    Options are the function's keyword arguments (``xi`` for ``"ei"`` and
    ``"pi"``, ``beta`` for ``"lcb"``, which ignores ``best``).

    Args:
        name: the acquisition's name: ``"ei"``, ``"pi"`` or ``"lcb"``.
        **options: its keyword arguments (``xi`` for ei and pi, ``beta`` for lcb).

    >>> lcb = acquisition_function("lcb", beta=1.0)
    >>> lcb([1.0], [0.5], best=0.0).tolist()
    [-0.5]
    >>> acquisition_function("ucb")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: acquisition: unknown acquisition function 'ucb' (allowed: ei, pi, lcb)
    """
    key = name.lower() if isinstance(name, str) else name
    if key not in ACQUISITIONS:
        raise InvalidInputError("acquisition", f"unknown acquisition function {name!r}", allowed=list(ACQUISITIONS))
    function = ACQUISITIONS[key]
    parameters = inspect.signature(function).parameters
    allowed = [p for p in parameters if p not in _POSITIONAL]
    for option, value in options.items():
        if option not in allowed:
            raise InvalidInputError(f"acquisition.{option}", f"not an option of {key!r}", allowed=allowed)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidInputError(f"acquisition.{option}", f"{value!r} is not a finite number")
    uses_best = "best" in parameters

    def acquisition(mean: ArrayLike, std: ArrayLike, best: float) -> np.ndarray:
        if uses_best:
            return function(mean, std, best, **options)
        return function(mean, std, **options)

    acquisition.__name__ = f"{key}_acquisition"
    return acquisition


def _check_count(field_name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidInputError(field_name, f"expected an integer >= {minimum}, got {value!r}")
    return int(value)


def _duplicates(points: np.ndarray, known: np.ndarray, tolerance: np.ndarray) -> np.ndarray:
    """Mask of ``points`` rows within ``tolerance`` (per column) of some ``known`` row in every column.

    Vectorised without comparing all pairs: ``known`` is sorted on its most
    varied column, a binary search finds each point's window of rows close in
    that column, and only those pairs are compared in full.

    >>> known = np.array([[0.1, 0.5], [0.3, 0.5]])
    >>> _duplicates(np.array([[0.3, 0.5], [0.3, 0.7], [0.1 + 1e-12, 0.5]]), known, np.array([1e-9, 0.0])).tolist()
    [True, False, True]
    """
    out = np.zeros(len(points), dtype=bool)
    if len(points) == 0 or len(known) == 0:
        return out
    if points.shape[1] == 0:
        out[:] = True  # every point of an empty space is the same point
        return out
    pivot = int(np.argmax([len(np.unique(column)) for column in known.T]))
    known = known[np.argsort(known[:, pivot], kind="stable")]
    low = np.searchsorted(known[:, pivot], points[:, pivot] - tolerance[pivot], side="left")
    high = np.searchsorted(known[:, pivot], points[:, pivot] + tolerance[pivot], side="right")
    counts = high - low
    point_index = np.repeat(np.arange(len(points)), counts)
    within = np.arange(len(point_index)) - np.repeat(np.cumsum(counts) - counts, counts)
    known_index = low[point_index] + within
    close = np.all(np.abs(points[point_index] - known[known_index]) <= tolerance, axis=1)
    out[point_index[close]] = True
    return out


#: The scale (in the unit cube) of the perturbations of the configurations ``optimize_acquisition`` searches around.
AROUND_SCALE = 0.05


def _scale(round_index: int, rounds: int) -> float:
    """Perturbation scale of a local round: 0.1 shrinking geometrically to 0.01."""
    return 0.1 * 10.0 ** (-round_index / (rounds - 1)) if rounds > 1 else 0.1


@dataclass
class _Search:
    """Valid, new candidates scored so far, and the points not to score again."""

    problem: ProblemSpace
    task: dict[str, Any]
    score: Callable[[np.ndarray], ArrayLike]
    known: np.ndarray  # excluded points, then every candidate already scored
    tolerance: np.ndarray  # per column: ``tolerance`` for reals, 0 (exact) for integers/categoricals
    unit: list[np.ndarray] = field(default_factory=list)
    configs: list[dict[str, Any]] = field(default_factory=list)
    scores: list[np.ndarray] = field(default_factory=list)

    @property
    def space(self) -> Space:
        return self.problem.parameter_space

    def add(self, raw: np.ndarray) -> None:
        """Snap ``raw`` unit points, keep the valid and new ones, and score them."""
        if len(raw) == 0:
            return
        configs = self.space.decode(raw)
        unit = self.space.encode(configs)
        _, first = np.unique(unit, axis=0, return_index=True)
        keep = np.sort(first)
        keep = keep[~_duplicates(unit[keep], self.known, self.tolerance)]
        if self.problem.compiled_constraints:
            valid = np.fromiter(
                (self.problem.is_valid(self.task, configs[i]) for i in keep), dtype=bool, count=len(keep)
            )
            keep = keep[valid]
        self._score(unit, configs, keep)

    def add_valid(self, unit: np.ndarray, configs: list[dict[str, Any]], chunk: int) -> None:
        """Score the distinct, snapped, valid points ``unit`` (``configs``) that are new, ``chunk`` at a time."""
        new = ~_duplicates(unit, self.known, self.tolerance)  # the rows are distinct: compare with the known once
        for start in range(0, len(unit), chunk):
            part = slice(start, start + chunk)
            self._score(unit[part], configs[part], np.flatnonzero(new[part]))

    def _score(self, unit: np.ndarray, configs: list[dict[str, Any]], keep: np.ndarray) -> None:
        if len(keep) == 0:
            return
        unit = unit[keep]
        self.unit.append(unit)
        self.configs.extend(configs[i] for i in keep)
        self.scores.append(self.evaluate(unit))
        self.known = np.vstack([self.known, unit])

    def evaluate(self, unit: np.ndarray) -> np.ndarray:
        """``score(unit)`` as a flat float array, NaN turned into ``-inf``."""
        raw = np.asarray(self.score(unit), dtype=float)
        values = raw.reshape(-1)
        if values.shape != (len(unit),):
            raise InvalidInputError(
                "score", f"expected {len(unit)} scores for {len(unit)} points, got an array of shape {raw.shape}"
            )
        return np.where(np.isnan(values), -np.inf, values)

    def best(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices (best first, ties in order of scoring) of the ``count`` highest scores, and all points."""
        scores = np.concatenate(self.scores) if self.scores else np.empty(0)
        order = np.argsort(-scores, kind="stable")[:count]
        points = np.vstack(self.unit) if self.unit else np.empty((0, self.space.dimension))
        return order, points

    def result(self) -> tuple[dict[str, Any], float] | None:
        """The best configuration and its score, or ``None`` when nothing was scored."""
        if not self.configs:
            return None
        index = int(self.best(1)[0][0])
        return dict(self.configs[index]), float(np.concatenate(self.scores)[index])


def _global_sample(dimension: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` unit points: half a Latin hypercube, half uniform random."""
    n_lhs = count // 2
    lhs = qmc.LatinHypercube(d=dimension, rng=rng).random(n_lhs) if n_lhs else np.empty((0, dimension))
    return np.vstack([lhs, rng.random((count - n_lhs, dimension))])


def _perturb(
    centres: np.ndarray, count: int, scale: float, categorical: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """``count`` Gaussian perturbations of ``centres`` (cycled), some categorical coordinates redrawn."""
    base = centres[np.arange(count) % len(centres)]
    moved = base + rng.normal(0.0, scale, size=base.shape)
    redraw = categorical & (rng.random(base.shape) < _CATEGORICAL_REDRAW)
    moved[redraw] = rng.random(int(redraw.sum()))
    return np.clip(moved, 0.0, 1.0)


def optimize_acquisition(
    problem: ProblemSpace,
    task: Mapping[str, Any],
    score: Callable[[np.ndarray], ArrayLike],
    *,
    rng: Seed,
    exclude: Sequence[Mapping[str, Any]] = (),
    around: Sequence[Mapping[str, Any]] = (),
    search_candidates: int = 2048,
    rounds: int = 10,
    top: int = 64,
    tolerance: float = 1e-9,
) -> tuple[dict[str, Any], float]:
    """The valid configuration for ``task`` that maximises ``score``, and its score.

    ``score`` maps an ``(N, d)`` array of snapped unit-cube points to ``N``
    scores (NaN counts as the worst). The search scores ``G`` random and
    Latin hypercube points, where ``G`` is ``search_candidates`` or
    :data:`CANDIDATES_PER_DIMENSION` ``* d`` if that is fewer, and ``G // 4``
    Gaussian perturbations (scale :data:`AROUND_SCALE`) of the configurations
    ``around`` (a task's Pareto front, say: where an improvement is likeliest
    found), taken in turn (the first ``G // 4`` of them where
    there are more), then runs ``rounds`` rounds of ``G // 8`` (at least ``top``)
    Gaussian perturbations (scale 0.1 down to 0.01) around the ``top`` best
    points found so far: an acquisition function's peaks narrow as a model
    learns, and many short steps around many of them find higher maxima than
    a few long ones. When the space is finite and holds at most
    :data:`ENUMERATION_FACTOR` ``* search_candidates`` points, it scores every
    one of them instead (and runs no rounds). A candidate is dropped when it breaks a constraint
    for ``task`` or duplicates a configuration in ``exclude``: equal in every
    integer and categorical parameter and within ``tolerance`` in the unit
    cube in every real one. When no valid, new candidate turns up, a
    constrained Latin hypercube sample of one point stands in
    (:func:`~raytuner.problem.sampling.sample_configurations`, which raises
    :class:`~raytuner.errors.InfeasibleSpaceError` if it finds none either).

    The result depends only on the state of ``rng`` (a generator or a seed).

    Args:
        problem: the problem whose parameter space is searched.
        task: the task parameters the constraints are checked for.
        score: maps an ``(N, d)`` array of unit-cube points to ``N`` scores (larger is better).
        rng: a seed or ``numpy.random.Generator``.
        exclude: configurations not to propose again (default none).
        around: configurations whose neighbourhoods are searched from the start, besides the whole space
            (default none).
        search_candidates: how many initial random and Latin hypercube points at most (default 2048; at most
            :data:`CANDIDATES_PER_DIMENSION` per dimension are used); a quarter as many perturbations of ``around``,
            an eighth as many in each round.
        rounds: rounds of Gaussian perturbation (default 10).
        top: how many best points each round perturbs (default 64).
        tolerance: the unit-cube distance under which two configurations are equal (default 1e-9).

    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({"parameter_space": [
    ...     {"name": "k", "type": "integer", "lower_bound": 0, "upper_bound": 9}]})
    >>> def prefer_five_then_below(unit):
    ...     k = np.array([c["k"] for c in problem.parameter_space.decode(unit)])
    ...     return -np.abs(k - 5) - (k > 5)
    >>> optimize_acquisition(problem, {}, prefer_five_then_below, rng=0, exclude=[{"k": 5}])
    ({'k': 4}, -1.0)
    """
    search_candidates = _check_count("search_candidates", search_candidates, 1)
    rounds = _check_count("rounds", rounds, 0)
    top = _check_count("top", top, 1)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise InvalidInputError("tolerance", f"expected a number >= 0, got {tolerance!r}")
    generator = np.random.default_rng(rng)
    space = problem.parameter_space
    checked_task = problem.input_space.check(task, "task")
    excluded = [space.check(point, f"exclude[{i}]") for i, point in enumerate(exclude)]
    centres = space.encode([space.check(point, f"around[{i}]") for i, point in enumerate(around)])
    is_real = np.array([isinstance(p, Real) for p in space], dtype=bool)
    search = _Search(
        problem, checked_task, score, known=space.encode(excluded), tolerance=np.where(is_real, float(tolerance), 0.0)
    )

    enumerated = bool(space.dimension) and space.cardinality() <= ENUMERATION_FACTOR * search_candidates
    sampled = min(search_candidates, max(1, CANDIDATES_PER_DIMENSION * space.dimension))
    if enumerated:
        search.add_valid(*valid_grid(problem, checked_task, generator), search_candidates)  # the maximum itself
        rounds = 0
    else:
        search.add(_global_sample(space.dimension, sampled, generator))
    categorical = np.array([isinstance(p, Categorical) for p in space], dtype=bool)
    if len(centres) and not enumerated:
        search.add(_perturb(centres, sampled // 4, AROUND_SCALE, categorical, generator))
    for r in range(rounds):
        order, points = search.best(top)
        if len(order) == 0:
            break
        search.add(_perturb(points[order], max(len(order), sampled // 8), _scale(r, rounds), categorical, generator))

    found = search.result()
    if found is not None:
        log.debug("acquisition maximum %.6g at %s after %d candidates", found[1], found[0], len(search.configs))
        return found
    scope = "the whole space" if enumerated else f"{sampled} random points and {rounds} local rounds"
    log.info(
        "no valid, new candidate among %s for task %s; falling back to a constrained Latin hypercube sample",
        scope,
        checked_task,
    )
    config = sample_configurations(problem, checked_task, 1, seed=generator, exclude=excluded)[0]
    return config, float(search.evaluate(space.encode([config]))[0])
