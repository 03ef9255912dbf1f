"""What Ray Tune's schedulers decide and what a run of them spends, for :mod:`benchmarks.band_ray`.

:func:`report_points` gives the fidelities at which Ray's ``ASHAScheduler``,
``HyperBandScheduler`` and ``HyperBandForBOHB`` take decisions (the band
benchmark's trainables report only there); :func:`hyperband_trials` how many
trials Ray's Hyperband starts before a budget is spent; :class:`ReportBudget`
charges each report its fidelity increment and stops the run (its
:meth:`~ReportBudget.stopper`) once the budget is spent. All of it is
arithmetic: Ray is imported only by :meth:`ReportBudget.stopper`.

Example:
    >>> report_points("HB", 8, 2), hyperband_trials(8, 2, 120)
    ((1, 2, 4, 8), 26)
    >>> budget = ReportBudget(3.0, metric="y")
    >>> budget.record("a", {"fidelity": 2, "y": 0.5}), budget.record("a", {"fidelity": 4, "y": 0.4})
    (False, True)
    >>> budget.used, len(budget.log)
    (2.0, 1)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["report_points", "hyperband_trials", "ReportBudget"]


def report_points(kind: str, max_t: int, eta: int, grace: int = 1) -> tuple[int, ...]:
    """The fidelities at which Ray's scheduler ``kind`` takes decisions, and ``max_t``.

    A trainable that reports only there gets the same decisions as one that
    reports every iteration, for a fraction of Ray's per-report overhead. The
    formulas are Ray 2.x's: ``HyperBandScheduler``/``HyperBandForBOHB``
    milestones ``min(⌊max_t η^-s⌋ η^k, max_t)`` and ``ASHAScheduler`` rungs
    ``grace η^k < max_t``.

    Args:
        kind: Ray Tune's scheduler: ``"HB"``, ``"BOHB"`` or ``"ASHA"``.
        max_t: the largest fidelity.
        eta: the reduction factor ``η``.
        grace: ASHA's grace period, the first rung (default 1).

    >>> report_points("HB", 52, 3), report_points("ASHA", 52, 3, grace=2)
    ((1, 3, 5, 9, 15, 17, 27, 45, 51, 52), (2, 6, 18, 52))
    >>> report_points("BOHB", 8, 2)
    (1, 2, 4, 8)
    """
    points = {int(max_t)}
    if kind == "ASHA":
        rungs = int(np.log(max_t / grace) / np.log(eta) + 1)  # Ray's expression, float quirks included
        points |= {int(grace * eta**k) for k in range(rungs)}
    else:
        for s in range(int(np.round(np.log(max_t) / np.log(eta))) + 1):
            r = int(max_t * eta ** (-s))
            if r == 0:
                continue
            points.add(r)
            for _ in range(s):
                r = int(min(r * eta, max_t))
                points.add(r)
    return tuple(sorted(p for p in points if 0 < p <= max_t))


class ReportBudget:
    """Logs the reports of a Ray Tune run and stops it when ``limit`` fidelity units are spent.

    A report at fidelity ``f`` costs ``f - f_last`` of its trial's last report,
    or ``f`` when the trial started again from scratch (``f <= f_last``: resumed
    without a checkpoint). A report that would overrun the limit is not logged
    and ends the run. :meth:`stopper` gives the ``ray.tune.Stopper`` for ``stop``.

    Args:
        limit: the fidelity units the run may spend.
        metric: the result key of the value to log.
        fidelity_key: the result key of the fidelity (default ``"fidelity"``).

    >>> budget = ReportBudget(5.0, metric="y")
    >>> [budget.record("a", {"fidelity": f, "y": 1.0 / f}) for f in (1, 2, 1, 4)]
    [False, False, False, True]
    >>> [(f, cost) for _, f, _, cost in budget.log], budget.used
    ([(1.0, 1.0), (2.0, 1.0), (1.0, 1.0)], 3.0)
    """

    def __init__(self, limit: float, metric: str, fidelity_key: str = "fidelity") -> None:
        self.limit, self.metric, self.fidelity_key = float(limit), metric, fidelity_key
        self.log: list[tuple[str, float, float, float]] = []  # (trial id, fidelity, value, cost)
        self.used = 0.0
        self._last: dict[str, float] = {}
        self._full = False

    def record(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        """Log one report if the budget holds it; whether the budget is spent.

        Args:
            trial_id: the reporting trial's id.
            result: the report: holds the fidelity and the metric.
        """
        if not self._full:
            fidelity = float(result[self.fidelity_key])
            last = self._last.get(trial_id, 0.0)
            cost = fidelity - last if fidelity > last else fidelity
            if self.used + cost > self.limit + 1e-9:
                self._full = True
            else:
                value = result.get(self.metric)
                self.log.append((trial_id, fidelity, float(value) if value is not None else math.nan, cost))
                self.used += cost
                self._last[trial_id] = fidelity
        return self.spent()

    def spent(self) -> bool:
        """Whether the run must stop: the limit is reached or a report did not fit."""
        return self._full or self.used >= self.limit - 1e-9

    def stopper(self) -> Any:
        """A ``ray.tune.Stopper`` that records into this budget and stops all trials once it is spent."""
        from ray import tune

        budget = self

        class _Stopper(tune.Stopper):
            def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
                budget.record(trial_id, result)
                return False

            def stop_all(self) -> bool:
                return budget.spent()

        return _Stopper()


def hyperband_trials(max_t: int, eta: int, limit: float, iterative: bool = False) -> int:
    """How many trials Ray's ``HyperBandScheduler(max_t, eta)`` starts before ``limit`` fidelity units are spent.

    Its brackets run ``s = 0, 1, ...`` (``r0 = ⌊max_t η^-s⌋ > 0``, ``n0 = ⌈s_max_1 η^s / (s + 1)⌉``),
    band after band. A trial resumed without a checkpoint starts again from 0
    (``iterative=False``); with one it continues. Plus one bracket of slack.

    Args:
        max_t: the scheduler's largest fidelity.
        eta: the scheduler's reduction factor ``η``.
        limit: the fidelity units to spend.
        iterative: whether a resumed trial continues from its checkpoint (default ``False``: it starts again).

    >>> hyperband_trials(8, 2, 120)      # brackets of 4, 4, 6 and 8 trials (136 units), then 4 more
    26
    """
    s_max_1 = int(np.round(np.log(max_t) / np.log(eta))) + 1
    trials, spent = 0, 0.0
    while True:
        for s in range(s_max_1):
            r = int(max_t * eta ** (-s))
            if r == 0:
                continue
            n = int(math.ceil(s_max_1 / (s + 1) * eta**s))
            if spent >= limit:
                return trials + n
            trials += n
            spent += n * r
            for _ in range(s):
                previous, n, r = r, int(math.ceil(n / eta)), int(min(r * eta, max_t))
                spent += n * (r - previous if iterative else r)
