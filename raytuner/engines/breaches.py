"""Values of discrete parameters at which the model's confident suggestions keep breaking an output constraint.

A GP over the unit cube is smooth: a bound that one value of a parameter
breaks outright, while its neighbours meet it, is a cliff the GP cannot
follow. PyAMG's ``max_coarse`` is one: at its upper bound (1000 on a grid of
1000 unknowns) nothing is coarsened and the memory jumps twentyfold, while
999 coarsens and stays small. The memory model fits each breach it has seen
but, at a new configuration with that value and other values of parameters
that do not matter there, stays sure that the bound holds, and the Pareto
search, drawn to the bound's low work, went back 5 to 7 times per run.

An engine with output constraints marks a suggestion whose chance of meeting
every constraint was at least :data:`~raytuner.engines.pareto_score.CONFIDENT`
when its model chose it (:data:`NOTE` in the provenance: a likely success;
not an initial design point, not a fallback search, not a pick made when no
candidate reached that chance). :class:`BreachValues` takes these suggestions
(an engine's own, pooled over its tasks: the cause of a breach is the
configuration; DiscreteBO's per task, over every column of its candidates)
and looks for values of integer or categorical parameters at which so many of
them broke a constraint that, had each broken it with probability
``1 - CONFIDENT`` (or with the breach rate of the other suggestions, where
that is higher: a model too sure everywhere is not blamed on one value), that
would happen with probability below :data:`SURPRISE` over the number of
values with a breach (a Poisson-binomial tail with Bonferroni's correction: a
value is one of many tested). With a handful of values to test, three
breaches of three suggestions are enough (chance 0.001). The most surprising
value is flagged and its suggestions set aside, and the search goes on among
the rest, so that a value which only shared its breaches with the culprit
(another parameter's value in the same runs) is not flagged too. A candidate
with a flagged value has its chance multiplied by the successes of that
value's suggestions over the successes they were expected to have (each count
plus one): after three breaches of three, 0.27, so a 0.95 chance becomes
0.26, below the gate: the candidate ranks after every likely success and is
taken only when nothing else is likely to succeed. A value with many
suggestions and a milder shortfall would be scaled less (16 breaches of 100: 0.93).

Example:
    >>> values = np.array([[0.1], [0.9], [0.9], [0.5]])      # one integer column, encoded
    >>> broke = np.array([False, True, True, False])
    >>> sure = BreachValues(values, broke, chance=np.full(4, 0.9))      # wrong twice at 0.9
    >>> sure.factor(np.array([[0.9], [0.5]])).round(3).tolist()
    [0.357, 1.0]
    >>> BreachValues(values, broke, chance=np.array([0.9, 0.2, 0.2, 0.9])).flagged      # it expected them
    []
"""

from __future__ import annotations

import numpy as np

from raytuner.problem.parameters import Categorical, Integer
from raytuner.problem.space import Space

__all__ = ["BreachValues", "SURPRISE", "NOTE", "discrete_columns", "tail_at_least"]

#: How unlikely the breaches at a value must be under the model's chances for the value to be flagged.
SURPRISE = 0.05
#: The provenance key of a suggestion chosen as a likely success (its value ``True``).
NOTE = "confident"


def discrete_columns(space: Space) -> np.ndarray:
    """The positions of a space's integer and categorical parameters in its encoding.

    Args:
        space: the parameter space.
    """
    return np.array([k for k, p in enumerate(space) if isinstance(p, (Integer, Categorical))], dtype=int)


def tail_at_least(probabilities: np.ndarray, count: int) -> float:
    """The chance that at least ``count`` of independent events with ``probabilities`` happen (Poisson-binomial).

    Args:
        probabilities: each event's probability.
        count: how many at least.

    >>> round(tail_at_least(np.array([0.1, 0.1]), 2), 4)
    0.01
    """
    pmf = np.zeros(len(probabilities) + 1)
    pmf[0] = 1.0
    for p in probabilities:
        pmf[1:] = pmf[1:] * (1.0 - p) + pmf[:-1] * p
        pmf[0] *= 1.0 - p
    return float(pmf[count:].sum())


class BreachValues:
    """The flagged values of discrete columns and the factor they put on a candidate's chance; see the module docstring.

    Args:
        values: ``(n, d)`` the evaluated configurations' discrete columns, encoded (bin centres).
        broke: ``(n,)`` whether each broke an output constraint.
        chance: ``(n,)`` the model's chance that each meets every output constraint.
    """

    def __init__(self, values: np.ndarray, broke: np.ndarray, chance: np.ndarray) -> None:
        self.flagged: list[tuple[int, float, float]] = []  # (column, encoded value, factor)
        broke, chance = np.asarray(broke, dtype=bool), np.clip(np.asarray(chance, dtype=float), 0.0, 1.0)
        remaining = np.ones(len(broke), dtype=bool)
        while (found := self._most_surprising(values, broke, chance, remaining)) is not None:
            column, value, at, odds = found
            met = int(np.count_nonzero(at & ~broke))
            self.flagged.append((column, value, min(1.0, (1 + met) / (1 + float((1.0 - odds).sum())))))
            remaining &= ~at  # its suggestions explain no other value's breaches

    @staticmethod
    def _most_surprising(
        values: np.ndarray, broke: np.ndarray, chance: np.ndarray, remaining: np.ndarray
    ) -> tuple[int, float, np.ndarray, np.ndarray] | None:
        """The (column, value, its remaining suggestions, their breach odds) least likely, if below :data:`SURPRISE`.

        A suggestion's breach odds are one minus its chance, or the breach rate of the other remaining
        suggestions where that is higher: a model too sure everywhere flags no value for it. Ties go to the
        value with more suggestions, then to the first column and the smallest value.
        """
        best: tuple[float, int, int, float, np.ndarray, np.ndarray] | None = None
        tested = 0
        for column in range(values.shape[1] if values.ndim == 2 else 0):
            for value in np.unique(values[remaining, column]):
                at = remaining & (values[:, column] == value)
                breaches = int(np.count_nonzero(broke & at))
                if not breaches:
                    continue
                tested += 1
                rest = remaining & ~at
                rate = np.count_nonzero(broke & rest) / max(1, int(np.count_nonzero(rest)))
                odds = np.maximum(1.0 - chance[at], rate)
                key = (tail_at_least(odds, breaches), -int(np.count_nonzero(at)), column, float(value))
                if best is None or key < best[:4]:
                    best = (*key, at, odds)
        if best is None or best[0] >= SURPRISE / tested:  # Bonferroni: one of the values tested
            return None
        return best[2], best[3], best[4], best[5]

    def factor(self, candidates: np.ndarray) -> np.ndarray:
        """Per candidate (``(m, d)``, the same columns encoded), the factor on its chance (1 where none is flagged).

        Args:
            candidates: the candidates' discrete columns, encoded.
        """
        factor = np.ones(len(candidates))
        for column, value, share in self.flagged:
            at = candidates[:, column] == value  # both sides encoded alike (bin centres)
            factor[at] = np.minimum(factor[at], share)
        return factor
