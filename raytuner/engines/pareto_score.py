"""The acquisition of a multi-objective search, shared by every engine that tunes several objectives.

:class:`ParetoScore` turns posterior draws of a task's objectives (to
minimise) into one score per candidate: with two objectives the expected
hypervolume improvement over the task's feasible front (the reference point
10 % of each objective's range beyond the worst feasible evaluation), with
more the expected improvement of an augmented Chebyshev scalarisation with
random weights (ParEGO's, normalised to the range the task has seen). Where
no draw improves, the predicted scalarisation still orders the candidates
(a tiny tie term), and the score is multiplied by the probability of meeting
every output constraint; a likely breach (below :data:`CONFIDENT`) ranks after every likely
success, by its chance alone. Where an objective is itself bounded, the
improvement is averaged over the draws within its bounds only (the expected
improvement given that the bound holds; the chance then weighs in that it
holds): a draw past the bound improves nothing, however good it looks, so a
candidate at the bound's edge is not valued for the draws that break it.
:class:`~raytuner.engines.multiobjective.MultiObjectiveMLA` scores its LCMs'
predictions with it, :class:`~raytuner.engines.discrete.DiscreteBO` its
candidate GPs'.

Example:
    >>> import numpy as np
    >>> seen = np.array([[0.0, 1.0], [1.0, 0.0], [0.8, 0.8]])
    >>> score = ParetoScore(seen, seen, weights=np.array([0.5, 0.5]))
    >>> mean = np.array([[0.3, 0.3], [0.9, 0.9]])      # a candidate inside the front's hollow, one behind it
    >>> samples = mean[:, None, :] + 0.01 * np.random.default_rng(0).standard_normal((2, 16, 2))
    >>> values = score(mean, samples, chance=np.ones(2))
    >>> bool(values[0] > values[1] > 0)
    True
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from raytuner.problem.pareto import hypervolume_improvement, non_dominated

__all__ = ["ParetoScore", "chance_within", "DRAWS", "CONFIDENT"]

#: Monte Carlo draws per candidate.
DRAWS = 64
#: The augmentation of the Chebyshev scalarisation (ParEGO's rho).
RHO = 0.05
#: How far beyond the worst feasible point seen (in ranges of each objective) the reference point lies.
REFERENCE_MARGIN = 0.1
#: The weight of the predicted scalarisation that orders candidates no Monte Carlo draw improves on.
TIE = 1e-9
#: The probability of meeting every output constraint below which a candidate ranks after every likelier one.
CONFIDENT = 0.9


def chance_within(mean: np.ndarray, sd: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """The probability that a normal output with ``mean`` and ``sd`` lies in ``[lower, upper]`` (bounds may be infinite).

    Args:
        mean: the predicted means.
        sd: the predicted standard deviations (0 where certain).
        lower: the lower bound.
        upper: the upper bound.

    >>> chance_within(np.array([0.0]), np.array([1.0]), -np.inf, 0.0).tolist()
    [0.5]
    """
    sd = np.maximum(sd, 1e-150)
    return norm.cdf((upper - mean) / sd) - norm.cdf((lower - mean) / sd)


class ParetoScore:
    """The score of candidates for one task, from its evaluations so far; see the module docstring.

    Args:
        seen: ``(k, m)`` the objectives (to minimise) of the task's successful evaluations.
        good: ``(j, m)`` those that meet every output constraint.
        weights: ``(m,)`` the scalarisation's weights (random per ask: successive asks spread along the front).
        limits: ``(m, 2)`` each objective's bounds in minimisation terms (``Objective.minimised_bounds``;
            infinite where it has none); ``None``: no objective is bounded.
    """

    def __init__(
        self, seen: np.ndarray, good: np.ndarray, weights: np.ndarray, limits: np.ndarray | None = None
    ) -> None:
        self.limits = None if limits is None or np.isinf(limits).all() else np.asarray(limits, dtype=float)
        self.low = seen.min(axis=0)
        self.span = np.maximum(np.ptp(seen, axis=0), 1e-12)
        self.weights = weights
        self.best = float(self.scalarise(good).min()) if len(good) else float(self.scalarise(seen).max())
        self.front: np.ndarray | None = None
        self.reference: np.ndarray | None = None
        if seen.shape[1] == 2 and len(good):
            self.front = good[non_dominated(good)]
            self.reference = good.max(axis=0) + REFERENCE_MARGIN * self.span  # beyond the worst feasible point

    @staticmethod
    def likely_success(score: float) -> bool:
        """Whether a candidate with this score met every output constraint with a chance of at least :data:`CONFIDENT`.

        A likely success scores its improvement times its chance (never below 0), a likely breach the log of its
        chance (below 0).

        Args:
            score: a score this class gave.

        >>> ParetoScore.likely_success(0.0), ParetoScore.likely_success(float(np.log(0.5)))
        (True, False)
        """
        return score >= 0.0

    def scalarise(self, values: np.ndarray) -> np.ndarray:
        """The augmented Chebyshev scalarisation of ``values`` (``(..., m)``, to minimise).

        Args:
            values: objective vectors.
        """
        scaled = (values - self.low) / self.span * self.weights
        return scaled.max(axis=-1) + RHO * scaled.sum(axis=-1)

    def optimistic(self, mean: np.ndarray, sd: np.ndarray, chance: np.ndarray) -> np.ndarray:
        """A cheap score per candidate, from one point: its optimistic objectives (``mean - 2 sd``).

        The point is kept within the objectives' own bounds: past them it would improve nothing, and a
        candidate whose optimism reaches past a bound (an accuracy bounded by 1) is among the best.

        Args:
            mean: ``(n, m)`` the predicted objectives (to minimise).
            sd: ``(n, m)`` their standard deviations.
            chance: ``(n,)`` the probability of meeting every output constraint.
        """
        point = mean - 2.0 * sd
        if self.limits is not None:
            point = np.clip(point, self.limits[:, 0], self.limits[:, 1])
        return self(point, point[:, None, :], chance)

    def __call__(self, mean: np.ndarray, samples: np.ndarray, chance: np.ndarray) -> np.ndarray:
        """One score per candidate (larger is better).

        Args:
            mean: ``(n, m)`` the predicted objectives.
            samples: ``(n, draws, m)`` posterior draws of them.
            chance: ``(n,)`` the probability of meeting every output constraint.
        """
        if self.front is not None:  # two objectives: the expected hypervolume improvement
            assert self.reference is not None
            gains = hypervolume_improvement(self.front, self.reference, samples)
        else:
            gains = np.maximum(self.best - self.scalarise(samples), 0.0)
        if self.limits is None:
            improvement = gains.mean(axis=1)
        else:  # given the objectives' own bounds hold (``chance`` weighs that they do)
            inside = ((samples >= self.limits[:, 0]) & (samples <= self.limits[:, 1])).all(axis=-1)
            improvement = (gains * inside).sum(axis=1) / np.maximum(inside.sum(axis=1), 1)
        # where no draw improves, the predicted scalarisation still orders the candidates (never a flat score)
        improvement = improvement + TIE / (1.0 + np.maximum(self.scalarise(mean) - self.best, 0.0))
        # a likely breach ranks below every likely success, however small its improvement (the edge of the
        # feasible region is not a coin toss); among likely breaches, the likeliest to meet the constraints first
        # (in log: a chance of 1e-20 still ranks above one of 1e-30; every log is below log(CONFIDENT) < 0)
        return np.where(chance >= CONFIDENT, improvement * chance, np.log(np.maximum(chance, 1e-300)))
