"""Acquisition over a discrete candidate set: scores, the contextual-variance factor and the portfolios.

Section III of Willemsen et al. (2021), "Bayesian Optimization for
auto-tuning GPU kernels":

- **Scores** (:func:`scores`): EI, PI and LCB of the minimised objective,
  computed in the GP's standardised units, so the exploration factor means
  the same for a kernel timed in microseconds or in seconds.
- **Contextual variance** (:func:`contextual_variance`, section III-F): the
  exploration factor ``lambda = (var / (mu_s / f+)) / var_s``, where ``var``
  is the mean posterior variance over the unvisited candidates now,
  ``var_s`` the same after the initial sample, ``mu_s`` the mean of the
  initial sample and ``f+`` the best value so far. Exploration fades as the
  model grows sure and as the optimum pulls away from the initial mean.
- **Portfolios** (section III-G): :class:`Single` uses one acquisition
  function. :class:`Multi` runs its functions in turn and, once one keeps
  proposing the same candidates as another (``skip_threshold`` rounds in a
  row), keeps the one whose discounted observation score
  ``dos_t = sum_i o_i gamma^(t-i)`` is lowest and skips the others.
  :class:`AdvancedMulti` gives every function a distinct candidate per round
  and judges them by that score directly: a function more than the required
  improvement factor worse than the mean score for ``skip_threshold`` rounds
  is skipped (and the other counts reset); otherwise one that much better for
  as many rounds becomes the only function.

Example:
    >>> p = AdvancedMulti(("ei", "pi", "lcb"), skip_threshold=2, discount_factor=0.75, improvement_factor=0.1)
    >>> for _ in range(2):
    ...     p.end_round({"ei": 2.5, "pi": 2.5, "lcb": 3.0}, duplicates=set())
    >>> p.active
    ['ei', 'pi']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.models.acquisition import ACQUISITIONS

__all__ = ["AFS", "scores", "contextual_variance", "discounted_score", "Single", "Multi", "AdvancedMulti", "Portfolio"]

#: The basic acquisition functions, in the paper's default order (Table I).
AFS: tuple[str, ...] = ("ei", "pi", "lcb")


def scores(name: str, mean: np.ndarray, std: np.ndarray, best: float, exploration: float) -> np.ndarray:
    """Acquisition values (larger is better) of a *minimised* objective, in standardised units.

    ``mean``, ``std`` and ``best`` are already standardised; ``exploration`` is
    EI's and PI's required improvement ``xi`` and LCB's ``beta``.

    Args:
        name: The acquisition function (``"ei"``, ``"pi"``, ``"lcb"``).
        mean: Standardised posterior means.
        std: Standardised posterior standard deviations.
        best: The best standardised value.
        exploration: The exploration factor.

    >>> scores("lcb", np.array([0.0, 1.0]), np.array([1.0, 0.0]), best=0.0, exploration=0.5).tolist()
    [0.5, -1.0]
    """
    if name == "lcb":
        return ACQUISITIONS["lcb"](mean, std, beta=exploration)
    if name in ("ei", "pi"):
        return ACQUISITIONS[name](mean, std, best, xi=exploration)
    raise InvalidInputError("acquisition", f"unknown acquisition function {name!r}", allowed=list(AFS))


def contextual_variance(mean_variance: float, initial_mean_variance: float, initial_mean: float, best: float) -> float:
    """The contextual-variance exploration factor of section III-F.

    ``lambda = (mean_variance / (initial_mean / best)) / initial_mean_variance``.
    The ratio ``initial_mean / best`` measures the improvement over the
    initial sample for a positive objective (run times); for one that is not
    positive the ratio is taken as 1 and only the variance term remains.

    Args:
        mean_variance: The mean posterior variance now.
        initial_mean_variance: The mean posterior variance after the initial sample.
        initial_mean: The mean of the initial sample's values.
        best: The best value so far.

    >>> contextual_variance(0.5, 2.0, initial_mean=10.0, best=5.0)
    0.125
    """
    if initial_mean_variance <= 0:
        return 0.0
    improvement = initial_mean / best if initial_mean > 0 and best > 0 else 1.0
    return float((mean_variance / improvement) / initial_mean_variance)


def discounted_score(observations: Sequence[float], discount_factor: float) -> float:
    """``dos_t = sum_{i=1..t} o_i gamma^(t-i)``: recent observations weigh most.

    Args:
        observations: A function's observations, oldest first.
        discount_factor: How fast older observations lose weight (``gamma``).

    >>> discounted_score([4.0, 2.0], 0.5)
    4.0
    """
    t = len(observations)
    return float(sum(o * discount_factor ** (t - 1 - i) for i, o in enumerate(observations)))


class Portfolio:
    """Which acquisition functions propose in the next round, updated after each round.

    Args:
        afs: The acquisition functions, in order.
    """

    def __init__(self, afs: Sequence[str]) -> None:
        bad = [a for a in afs if a not in AFS]
        if not afs or bad or len(set(afs)) != len(afs):
            raise InvalidInputError(
                "acquisitions", f"must list distinct acquisition functions, got {list(afs)}", allowed=list(AFS)
            )
        self.afs = list(afs)
        self.skipped: list[str] = []
        self.observations: dict[str, list[float]] = {a: [] for a in self.afs}

    #: Whether one round's functions may propose the same candidate (``Multi``) or not.
    shares_candidates = False

    @property
    def active(self) -> list[str]:
        """The functions that propose in the next round, in order."""
        return [a for a in self.afs if a not in self.skipped]

    def end_round(self, observed: Mapping[str, float], duplicates: Iterable[str]) -> None:
        """Fold in a round: each active function's observation, and which ones proposed a duplicate.

        Args:
            observed: Each function's observed (minimised) value this round.
            duplicates: The functions that proposed the same candidate as another.
        """
        for af, value in observed.items():
            if af in self.observations:
                self.observations[af].append(float(value))
        self._update(set(duplicates))

    def _update(self, duplicates: set[str]) -> None:
        """Skip or promote functions after a round (nothing for a single function)."""


class Single(Portfolio):
    """One acquisition function throughout.

    Args:
        af: The acquisition function.
    """

    def __init__(self, af: str) -> None:
        super().__init__([af])


class Multi(Portfolio):
    """The paper's *multi*: skip functions that keep proposing the same candidates as another.

    Args:
        afs: The acquisition functions, in order.
        skip_threshold: How many recent rounds a function must duplicate another's pick in to be stuck.
        discount_factor: How fast older observations lose weight (``gamma``); the best stuck function stays.
    """

    shares_candidates = True

    def __init__(self, afs: Sequence[str] = AFS, skip_threshold: int = 5, discount_factor: float = 0.65) -> None:
        super().__init__(afs)
        self.skip_threshold = int(skip_threshold)
        self.discount_factor = float(discount_factor)
        self.recent: dict[str, list[bool]] = {a: [] for a in self.afs}

    def _update(self, duplicates: set[str]) -> None:
        for af in self.active:
            self.recent[af] = (self.recent[af] + [af in duplicates])[-self.skip_threshold :]
        stuck = [a for a in self.active if sum(self.recent[a]) >= self.skip_threshold]
        if len(stuck) < 2:
            return
        keep = min(stuck, key=lambda a: discounted_score(self.observations[a], self.discount_factor))
        self.recent[keep] = []
        self.skipped += [a for a in stuck if a != keep]


class AdvancedMulti(Portfolio):
    """The paper's *advanced multi*: skip consistently worse functions, promote a consistently better one.

    Args:
        afs: The acquisition functions, in order.
        skip_threshold: How many rounds a function must score worse (better) than the mean to be
            skipped (to be kept alone).
        discount_factor: How fast older observations lose weight (``gamma``).
        improvement_factor: The margin around the mean score, relative to it, that counts as worse or better.
    """

    def __init__(
        self,
        afs: Sequence[str] = AFS,
        skip_threshold: int = 5,
        discount_factor: float = 0.75,
        improvement_factor: float = 0.1,
    ) -> None:
        super().__init__(afs)
        self.skip_threshold = int(skip_threshold)
        self.discount_factor = float(discount_factor)
        self.improvement_factor = float(improvement_factor)
        self.worse = {a: 0 for a in self.afs}
        self.better = {a: 0 for a in self.afs}

    def _update(self, duplicates: set[str]) -> None:
        active = self.active
        if len(active) < 2:
            return
        dos = {a: discounted_score(self.observations[a], self.discount_factor) for a in active}
        mean = float(np.mean(list(dos.values())))
        margin = self.improvement_factor * abs(mean)
        for af in active:
            self.worse[af] += dos[af] > mean + margin
            self.better[af] += dos[af] < mean - margin
        worst = [a for a in active if self.worse[a] >= self.skip_threshold]
        if worst:  # skipping goes first: one function per round, the most often worse, then the worst score
            skip = max(worst, key=lambda a: (self.worse[a], dos[a]))
            self.skipped.append(skip)
            self.worse = {a: 0 for a in self.afs}
            self.better = {a: 0 for a in self.afs}
            return
        promoted = [a for a in active if self.better[a] >= self.skip_threshold]
        if promoted:
            keep = max(promoted, key=lambda a: (self.better[a], -dos[a]))
            self.skipped += [a for a in active if a != keep]
