"""The target models the transfer algorithms search: a mean and a standard deviation at any point.

Every model predicts *minimisation values* (``sign · y``) and names its
``incumbent``, the value expected improvement is measured against, in its
own units:

- :class:`MultitaskModel`: the target task of an LCM (Multitask PS and TS),
  in the LCM's standardised units;
- :class:`WeightedSumModel`: ``μ = Σ w_i μ_i`` and ``σ = Π σ_i^{w_i / Σw}``
  (paper 000, equations 1–2) over GPs each in its own standardised units, so
  that models of differently scaled outputs can be summed. The paper's text
  calls ``σ`` "the geometric mean" of the models' standard deviations, and
  so it is here: the exponents are the weights normalised to sum to 1.
  Read literally with weights of 1, equation 2 is a *product* of standard
  deviations, which shrinks with every confident source model (a source
  with 200 samples has ``σ ≈ 0.03`` everywhere) until the search stops
  exploring the target at all;
- :class:`StackedModel`: Stacking's residual chain in output units, ``μ`` the
  sum of the chain's means and ``σ`` its β-weighted geometric means.

Example:
    >>> import numpy as np
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.models import LCMOptions
    >>> from raytuner.engines.transfer.data import fit_gp
    >>> X = np.linspace(0, 1, 8)[:, None]
    >>> a = fit_gp(X, np.sin(3 * X[:, 0]), LCMOptions(n_starts=1), 0, InlineExecutor())
    >>> b = fit_gp(X, np.cos(3 * X[:, 0]), LCMOptions(n_starts=1), 0, InlineExecutor())
    >>> model = WeightedSumModel([a, b], np.array([1.0, 1.0]), reference=X)
    >>> mean, std = model.predict(np.array([[0.3]]))
    >>> mean.shape, bool(std[0] > 0)
    ((1,), True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from raytuner.models import FittedLCM

__all__ = ["TargetModel", "MultitaskModel", "WeightedSumModel", "StackedModel", "fantasise"]


class TargetModel(Protocol):
    """What the acquisition search needs from a transfer algorithm's model."""

    incumbent: float

    def predict(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the minimisation value at unit-cube points ``U``.

        Args:
            U: Points on the unit cube, one row each.
        """
        ...  # pragma: no cover - protocol


def fantasise(fitted: FittedLCM, task: int, X: np.ndarray) -> FittedLCM:
    """``fitted`` with pending points of ``task`` added at their predicted mean (the Kriging believer).

    Args:
        fitted: The fitted LCM.
        task: The task the points belong to.
        X: Pending points on the unit cube, one row each.
    """
    if not len(X):
        return fitted
    return fitted.condition_on(task, X, fitted.predict_standardised(task, X)[0])


class MultitaskModel:
    """Task ``task`` of an LCM; the incumbent is that task's best standardised observation.

    Args:
        fitted: The fitted LCM.
        task: The target's task index in it.
    """

    def __init__(self, fitted: FittedLCM, task: int) -> None:
        self.fitted = fitted
        self.task = task
        observed = fitted.z[fitted.task == task]
        self.incumbent = float(observed.min()) if len(observed) else float(fitted.z.min())

    def predict(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Standardised mean and standard deviation of the target task.

        Args:
            U: Points on the unit cube, one row each.
        """
        mean, variance = self.fitted.predict_standardised(self.task, U)
        return mean, np.sqrt(variance)


class WeightedSumModel:
    """``μ = Σ w_i μ_i``, ``σ = Π σ_i^{w_i / Σw}`` over single-task GPs in their standardised units.

    The incumbent is the smallest combined mean at the ``reference`` points
    (the target's evaluated points, or the sources' when the target has
    none).

    Args:
        models: The fitted models (sources, then the target).
        weights: One weight per model.
        reference: Points on the unit cube where the incumbent is taken (see above).
    """

    def __init__(self, models: Sequence[FittedLCM], weights: np.ndarray, reference: np.ndarray) -> None:
        self.models = list(models)
        self.weights = np.asarray(weights, dtype=float)
        self.incumbent = float(self.predict(reference)[0].min())

    def predict(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The weighted sum of the means and the weighted product of the standard deviations.

        Args:
            U: Points on the unit cube, one row each.
        """
        mean = np.zeros(len(U))
        log_std = np.zeros(len(U))
        total = float(self.weights.sum())
        for model, w in zip(self.models, self.weights):
            if w == 0:
                continue
            m, v = model.predict_standardised(0, U)
            mean += w * m
            log_std += (w / total) * 0.5 * np.log(v)
        return mean, np.exp(log_std)


class StackedModel:
    """Stacking (Vizier): residual GPs chained over the sources and then the target, in output units.

    ``chain`` are the source models in stacking order followed by the
    target's residual model, ``counts`` their sample counts. ``σ`` is built
    along the chain: ``σ_k = σ'_k^β · σ_{k−1}^{1−β}`` with
    ``β = n_k / (n_k + n_{k−1})``.

    Args:
        chain: The residual GPs, source first, target last.
        counts: How many points each was fitted to.
        incumbent: The best target value (minimised).
    """

    def __init__(self, chain: Sequence[FittedLCM], counts: Sequence[int], incumbent: float) -> None:
        self.chain = list(chain)
        self.counts = list(counts)
        self.incumbent = float(incumbent)

    def predict(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Summed means; standard deviations combined along the chain.

        Args:
            U: Points on the unit cube, one row each.
        """
        mean = np.zeros(len(U))
        log_std = np.zeros(len(U))
        for k, model in enumerate(self.chain):
            m, v = model.predict(0, U)
            mean += m
            own = 0.5 * np.log(np.maximum(v, 1e-300))
            if k == 0:
                log_std = own
            else:
                beta = self.counts[k] / max(self.counts[k] + self.counts[k - 1], 1)
                log_std = beta * own + (1 - beta) * log_std
        return mean, np.exp(log_std)
