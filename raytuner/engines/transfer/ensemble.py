"""Choosing a TLA algorithm per evaluation: Ensemble(proposed), (toggling) and (prob) (paper 000, V-E).

**Equation 3** gives each algorithm of the pool ``T`` the probability
``prob(t) ∝ 1 / best_output(t)``, where ``best_output(t)`` is the best
target value among the evaluations that ``t`` proposed. The paper assumes a
positive objective to minimise. :func:`ensemble_probabilities` keeps exactly
that for positive outputs and makes it correct otherwise:

- a **positive objective to minimise** (runtime, memory): ``s_t = best_output(t)``,
  the paper's formula;
- a **positive objective to maximise** (throughput, accuracy): ``s_t = 1 / best_output(t)``,
  so ``prob(t) ∝ best_output(t)`` — the better algorithm still gets more;
- **any other sign** (some observed value ≤ 0): with ``v = y`` (minimise) or
  ``v = −y`` (maximise), ``s_t = v_t − v_min + (v_max − v_min)`` over the
  target's observed values: the best algorithm is one range above the
  floor, the worst at most two, whatever the offset of the objective.

Then ``prob(t) = (1/s_t) / Σ 1/s``. An algorithm that has proposed nothing
yet is treated as the best one so far (it must get its chance).

**Equation 4**, the exploration rate, is
``r / (1 + r)`` with ``r = |T| · n_parameters / n_samples``: with that
probability the algorithm is drawn uniformly instead.

Example:
    >>> ensemble_probabilities([1.0, 2.0, None], observed=[1.0, 2.0, 3.0]).round(3).tolist()
    [0.4, 0.2, 0.4]
    >>> round(exploration_rate(3, 2, 10), 4)
    0.375
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from raytuner.errors import InvalidInputError

__all__ = ["ensemble_probabilities", "exploration_rate", "choose_algorithm", "POLICIES", "Policy"]

Policy = Literal["proposed", "toggling", "prob"]

#: Engine algorithm name -> ensemble policy.
POLICIES: dict[str, Policy] = {"ensemble": "proposed", "ensemble_toggling": "toggling", "ensemble_prob": "prob"}


def ensemble_probabilities(
    best: Sequence[float | None], observed: Sequence[float], goal: str = "minimize"
) -> np.ndarray:
    """Equation 3 over the pool, for any sign and either goal; see the module docstring.

    ``best[t]`` is the best value proposed by algorithm ``t`` (``None`` if it
    proposed nothing successful); ``observed`` every successful target value.

    Args:
        best: The best value each algorithm proposed (``None``: none yet).
        observed: The target's observed values.
        goal: ``"minimize"`` or ``"maximize"``.

    >>> ensemble_probabilities([2.0, 4.0], observed=[2.0, 4.0]).tolist()            # the paper's case
    [0.6666666666666666, 0.3333333333333333]
    >>> ensemble_probabilities([2.0, 4.0], observed=[2.0, 4.0], goal="maximize").tolist()
    [0.3333333333333333, 0.6666666666666666]
    >>> ensemble_probabilities([-5.0, 1.0], observed=[-5.0, 1.0]).round(3).tolist()  # crosses zero
    [0.667, 0.333]
    """
    if goal not in ("minimize", "maximize"):
        raise InvalidInputError("goal", f"unknown goal {goal!r}", allowed=["minimize", "maximize"])
    known = [b for b in best if b is not None]
    values = np.asarray(list(observed) + known, dtype=float)
    if not known or not len(values):
        return np.full(len(best), 1.0 / len(best))
    if np.all(values > 0):
        scores = [None if b is None else (b if goal == "minimize" else 1.0 / b) for b in best]
    else:
        sign = 1.0 if goal == "minimize" else -1.0
        v = sign * values
        low, spread = float(v.min()), float(v.max() - v.min())
        spread = spread if spread > 0 else max(abs(low), 1.0)
        scores = [None if b is None else sign * b - low + spread for b in best]
    floor = min(s for s in scores if s is not None)
    inverse = np.array([1.0 / (floor if s is None else s) for s in scores])
    return inverse / inverse.sum()


def exploration_rate(pool_size: int, n_parameters: int, n_samples: int) -> float:
    """Equation 4: ``r / (1 + r)`` with ``r = pool_size · n_parameters / n_samples`` (1 with no samples).

    Args:
        pool_size: The number of algorithms.
        n_parameters: The number of tuning parameters.
        n_samples: The number of target evaluations.

    >>> exploration_rate(3, 1, 0), round(exploration_rate(3, 1, 30), 4)
    (1.0, 0.0909)
    """
    if n_samples <= 0:
        return 1.0
    r = pool_size * n_parameters / n_samples
    return r / (1.0 + r)


def choose_algorithm(
    policy: Policy,
    pool: Sequence[str],
    best: Sequence[float | None],
    observed: Sequence[float],
    goal: str,
    n_parameters: int,
    n_samples: int,
    turn: int,
    rng: np.random.Generator,
) -> str:
    """The algorithm of the pool that proposes the next point (Algorithm 1 and its two simpler variants).

    ``turn`` counts the pool's proposals so far (Ensemble(toggling) takes
    the pool in turn); ``n_samples`` the target's evaluations so far.

    Args:
        policy: The ensemble's policy.
        pool: The algorithms to choose from.
        best: The best value each proposed (``None``: none yet).
        observed: The target's observed values.
        goal: ``"minimize"`` or ``"maximize"``.
        n_parameters: The number of tuning parameters.
        n_samples: The number of target evaluations.
        turn: Whose turn it is (toggling).
        rng: The random stream.

    >>> rng = np.random.default_rng(0)
    >>> choose_algorithm("toggling", ["a", "b", "c"], [None] * 3, [], "minimize", 1, 4, turn=4, rng=rng)
    'b'
    """
    if policy == "toggling":
        return pool[turn % len(pool)]
    rate = exploration_rate(len(pool), n_parameters, n_samples) if policy == "proposed" else 0.0
    if rng.random() < rate:
        return pool[int(rng.integers(len(pool)))]
    probabilities = ensemble_probabilities(best, observed, goal)
    return pool[int(rng.choice(len(pool), p=probabilities))]
